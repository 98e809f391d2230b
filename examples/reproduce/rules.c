/* The verdict rules: pure functions of the study's numbers (rules.h). */
#include "rules.h"

#include "stats.h"

const char *verdict_text(verdict v)
{
    switch (v) {
    case V_REPRODUCED: return "reproduced";
    case V_NOT_REPRODUCED: return "not reproduced";
    case V_INCONCLUSIVE: return "inconclusive";
    case V_NOT_APPLICABLE: return "not applicable";
    case V_NOT_AVAILABLE: return "not available";
    case V_EQUIVALENT: return "within the margin";
    case V_BELOW_ZERO: return "below 0";
    case V_ABOVE_ZERO: return "above 0";
    case V_NOT_RUN: break;
    }
    return "not run";
}

/* Two-sided 90% t quantiles (one-sided 95%), df 1..30, for equivalence. */
static double t90(int df)
{
    static const double q[] = {6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812,
                               1.796, 1.782, 1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725,
                               1.721, 1.717, 1.714, 1.711, 1.708, 1.706, 1.703, 1.701, 1.699, 1.697};
    return df <= 30 ? q[df - 1] : 1.645;
}

/* The verdict a comparison gets before its interval is looked at: not run
 * (no seeds), not available (a NaN), inconclusive (one seed: no interval);
 * -1 when the interval decides. */
static int before_interval(const summary *d)
{
    if (d->n == 0)
        return V_NOT_RUN;
    if (!isfinite(d->mean) || (d->n >= 2 && !isfinite(d->half)))
        return V_NOT_AVAILABLE;
    return d->n < 2 ? V_INCONCLUSIVE : -1;
}

verdict rule_direction(const summary *d, int sign)
{
    const int early = before_interval(d);
    if (early >= 0)
        return (verdict)early;
    const double lo = d->mean - d->half, hi = d->mean + d->half;
    if ((sign < 0 && hi < 0) || (sign > 0 && lo > 0))
        return V_REPRODUCED;
    if ((sign < 0 && lo > 0) || (sign > 0 && hi < 0))
        return V_NOT_REPRODUCED;
    return V_INCONCLUSIVE;
}

verdict rule_parity(const summary *d, double margin)
{
    const int early = before_interval(d);
    if (early >= 0)
        return (verdict)early;
    const double se = d->sd / sqrt((double)d->n), h90 = t90(d->n - 1) * se;
    if (d->mean - h90 > -margin && d->mean + h90 < margin)
        return V_REPRODUCED;
    if (d->mean - d->half > margin || d->mean + d->half < -margin)
        return V_NOT_REPRODUCED;
    return V_INCONCLUSIVE;
}

int interval90(const summary *d, double *lo, double *hi)
{
    if (d->n < 2 || !isfinite(d->mean) || !isfinite(d->sd))
        return 0;
    const double h90 = t90(d->n - 1) * d->sd / sqrt((double)d->n);
    *lo = d->mean - h90;
    *hi = d->mean + h90;
    return 1;
}

verdict rule_effect(const summary *d, double margin)
{
    const int early = before_interval(d);
    if (early >= 0)
        return (verdict)early;
    double lo, hi;
    if (!isfinite(d->sd) || !interval90(d, &lo, &hi))
        return V_NOT_AVAILABLE;
    if (d->mean + d->half < 0)
        return V_BELOW_ZERO;
    if (d->mean - d->half > 0)
        return V_ABOVE_ZERO;
    return lo > -margin && hi < margin ? V_EQUIVALENT : V_INCONCLUSIVE;
}

char *effect_allows(char *buf, size_t n, const summary *d, double margin)
{
    if (d->n == 0)
        snprintf(buf, n, "not run");
    else if (!isfinite(d->mean) || (d->n >= 2 && !isfinite(d->half)))
        snprintf(buf, n, "n/a");
    else if (d->n < 2)
        snprintf(buf, n, "one seed: no interval");
    else {
        const double lo = d->mean - d->half, hi = d->mean + d->half;
        snprintf(buf, n, "allows effects from %+.4f to %+.4f, up to %.1fx the margin", lo, hi,
                 fmax(fabs(lo), fabs(hi)) / margin);
    }
    return buf;
}

char *effect_cell(char *buf, size_t n, const summary *d, double margin, int sign)
{
    const verdict v = rule_effect(d, margin);
    double lo = 0, hi = 0;
    char allows[160];
    switch (v) {
    case V_BELOW_ZERO:
    case V_ABOVE_ZERO:
        if (sign == 0)
            snprintf(buf, n, "%s", verdict_text(v));
        else
            snprintf(buf, n, "%s (%s)",
                     (v == V_BELOW_ZERO) == (sign < 0) ? "reproduced" : "not reproduced",
                     verdict_text(v));
        break;
    case V_EQUIVALENT:
        interval90(d, &lo, &hi);
        snprintf(buf, n, "%s (90%% CI [%+.4f, %+.4f] inside ±%.4f)", effect_kind(d, margin), lo,
                 hi, margin);
        break;
    case V_INCONCLUSIVE:
        if (d->n < 2)
            snprintf(buf, n, "inconclusive (1 seed)");
        else {
            interval90(d, &lo, &hi);
            snprintf(buf, n, "inconclusive: 90%% CI [%+.4f, %+.4f] not inside ±%.4f; %s", lo, hi,
                     margin, effect_allows(allows, sizeof allows, d, margin));
        }
        break;
    default:
        snprintf(buf, n, "%s", verdict_text(v));
    }
    return buf;
}

const char *effect_kind(const summary *d, double margin)
{
    const verdict v = rule_effect(d, margin);
    if (v != V_EQUIVALENT)
        return verdict_text(v);
    return margin <= ABSENCE_MARGIN * (1 + 1e-9) ? "equivalent" : "within the paper's effect";
}

char *half_cell(char *buf, size_t n, const summary *d)
{
    const verdict v = rule_effect(d, ABSENCE_MARGIN);
    double lo = 0, hi = 0;
    if (v == V_INCONCLUSIVE && d->n >= 2) {
        interval90(d, &lo, &hi);
        snprintf(buf, n, "not inside ±%.4f (90%% CI [%+.4f, %+.4f])", ABSENCE_MARGIN, lo, hi);
        return buf;
    }
    if (v == V_EQUIVALENT || v == V_INCONCLUSIVE || v == V_NOT_RUN || v == V_NOT_AVAILABLE)
        return effect_cell(buf, n, d, ABSENCE_MARGIN, 0);
    snprintf(buf, n, "%s", verdict_text(v));
    return buf;
}

double effect_p(const summary *d, double margin)
{
    const verdict v = rule_effect(d, margin);
    const double pz = p_against(d, 0), pe = p_tost(d, margin);
    if (v == V_BELOW_ZERO || v == V_ABOVE_ZERO)
        return pz;
    if (v == V_EQUIVALENT)
        return pe;
    return fmin(pz, pe);
}

verdict rule_controls(const summary *active, const summary *total)
{
    const verdict a = rule_direction(active, +1), t = rule_direction(total, +1);
    if (a == V_NOT_RUN || t == V_NOT_RUN)
        return V_NOT_RUN;
    if (a == V_NOT_AVAILABLE || t == V_NOT_AVAILABLE)
        return V_NOT_AVAILABLE;
    if (a == V_NOT_REPRODUCED || t == V_NOT_REPRODUCED)
        return V_NOT_REPRODUCED;
    return a == V_REPRODUCED && t == V_REPRODUCED ? V_REPRODUCED : V_INCONCLUSIVE;
}

verdict rule_interaction(const summary *i, verdict controls)
{
    const verdict v = rule_direction(i, -1);
    if (v != V_REPRODUCED)
        return v;
    return controls == V_REPRODUCED ? V_REPRODUCED : V_INCONCLUSIVE;
}

verdict rule_mechanism_gate(int go, int64_t steps)
{
    if (go < 0)
        return V_NOT_AVAILABLE;
    if (!go || steps < MECHANISM_MIN_STEPS)
        return V_NOT_APPLICABLE;
    return V_REPRODUCED; /* the gate is open: the caller applies the rule */
}

int interval_side(const summary *s, double x)
{
    if (s->n < 2 || !isfinite(s->mean) || !isfinite(s->half))
        return 0;
    return s->mean - s->half > x ? 1 : s->mean + s->half < x ? -1 : 0;
}

/* The first of several comparisons' early verdicts (not run, not available), or -1. */
static int early_of(const summary *const *s, int n)
{
    for (int k = 0; k < n; k++)
        if (s[k]->n == 0)
            return V_NOT_RUN;
    for (int k = 0; k < n; k++) {
        const int e = before_interval(s[k]);
        if (e == V_NOT_AVAILABLE)
            return V_NOT_AVAILABLE;
    }
    for (int k = 0; k < n; k++)
        if (s[k]->n < 2)
            return V_INCONCLUSIVE;
    return -1;
}

verdict rule_jump_shape(const summary *share_gap, const summary *log_recovery)
{
    const summary *all[] = {share_gap, log_recovery};
    const int e = early_of(all, 2);
    if (e >= 0)
        return (verdict)e;
    const int a = interval_side(share_gap, 0), b = interval_side(log_recovery, 0);
    if (a < 0 || b < 0)
        return V_NOT_REPRODUCED;
    return a > 0 && b > 0 ? V_REPRODUCED : V_INCONCLUSIVE;
}

verdict rule_crossover(const summary *last, const summary *change)
{
    const summary *all[] = {last, change};
    const int e = early_of(all, 2);
    if (e >= 0)
        return (verdict)e;
    const int a = interval_side(last, 0), b = interval_side(change, 0);
    if (a > 0 || b > 0)
        return V_NOT_REPRODUCED;
    return a < 0 && b < 0 ? V_REPRODUCED : V_INCONCLUSIVE;
}

verdict rule_block_removal(const summary *ratio, const summary *post_min, const summary *angle_gap,
                           double floor)
{
    const summary *all[] = {ratio, post_min, angle_gap};
    const int e = early_of(all, 3);
    if (e >= 0)
        return (verdict)e;
    const int r = interval_side(ratio, BLOCK_REMOVAL_RATIO), m = interval_side(post_min, floor),
              g = interval_side(angle_gap, 0);
    if (r > 0 || m < 0 || g < 0)
        return V_NOT_REPRODUCED;
    return r < 0 && m > 0 && g > 0 ? V_REPRODUCED : V_INCONCLUSIVE;
}

verdict rule_boundary(const summary *pre_ratio, const summary *half_gap)
{
    const summary *all[] = {pre_ratio, half_gap};
    const int e = early_of(all, 2);
    if (e >= 0)
        return (verdict)e;
    if (interval_side(pre_ratio, 1.5) < 0 || interval_side(half_gap, 0) > 0)
        return V_NOT_REPRODUCED;
    return interval_side(pre_ratio, 3) > 0 && interval_side(half_gap, 0) < 0 ? V_REPRODUCED
                                                                           : V_INCONCLUSIVE;
}
