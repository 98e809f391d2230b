/* The verdict table: the paper's findings as rules over the results. */
#include "verdicts.h"
#include "stats.h"
#include "report.h"

/* ---- verdicts ---------------------------------------------------------------------- */

/* Differences of validation CE smaller than this (nats/byte) count as parity. */
#define PARITY_TOL 0.01

enum { V_NA, V_YES, V_NO, V_UNSURE };
static const char *verdict_name(int v, int n)
{
    static char buf[64];
    const char *w = v == V_YES ? "reproduced" : v == V_NO ? "not reproduced" : v == V_UNSURE ? "inconclusive" : "not run";
    snprintf(buf, sizeof buf, "%s%s", w, v != V_NA && n == 1 ? " (1 seed)" : "");
    return buf;
}

/* A difference expected to have sign `sign` (-1 or +1): with seeds, the 95%
 * interval decides; with one seed, the parity tolerance does. */
static int directional(const summary *sm, int sign)
{
    if (sm->n == 0)
        return V_NA;
    if (sm->n >= 2) {
        double lo = sm->mean - sm->half, hi = sm->mean + sm->half;
        if ((sign < 0 && hi < 0) || (sign > 0 && lo > 0))
            return V_YES;
        if ((sign < 0 && lo > 0) || (sign > 0 && hi < 0))
            return V_NO;
        return V_UNSURE;
    }
    if (sm->mean * sign > PARITY_TOL)
        return V_YES;
    if (sm->mean * sign < -PARITY_TOL)
        return V_NO;
    return V_UNSURE;
}

/* Parity: |difference| within the tolerance. */
static int parity(const summary *sm)
{
    if (sm->n == 0)
        return V_NA;
    double half = sm->n >= 2 ? sm->half : 0;
    if (fabs(sm->mean) + half <= PARITY_TOL || (sm->n == 1 && fabs(sm->mean) <= PARITY_TOL))
        return V_YES;
    if (fabs(sm->mean) - half > PARITY_TOL * (sm->n == 1 ? 3 : 1))
        return V_NO;
    return V_UNSURE;
}

static void fmt_summary(char *buf, size_t n, const summary *sm)
{
    if (sm->n == 0)
        snprintf(buf, n, "n/a");
    else if (sm->n == 1 || isnan(sm->half))
        snprintf(buf, n, "%+.4f", sm->mean);
    else
        snprintf(buf, n, "%+.4f ± %.4f", sm->mean, sm->half);
}

/* Mean over seeds of the first phase change that appends layers, for one arm. */
static double mean_jump(const study *s, const char *name, int *found)
{
    int a = arm_index(s, name);
    *found = 0;
    if (a < 0)
        return NAN;
    double j = 0;
    for (int i = 0; i < s->p->seeds; i++) {
        const run_result *r = s->res[a][i];
        int k = 0;
        while (k < r->n_appends && !r->is_append[k])
            k++;
        if (k == r->n_appends)
            return NAN;
        j += r->resp[k].jump / s->p->seeds;
    }
    *found = 1;
    return j;
}

/* Mean over seeds of the last trajectory point's boundary/regular RMS ratio,
 * and of the RMS std at the first and last points. */
static int trajectory_ends(const study *s, const char *name, double *ratio, double *std0, double *std1)
{
    int a = arm_index(s, name);
    if (a < 0)
        return 0;
    *ratio = *std0 = *std1 = 0;
    for (int i = 0; i < s->p->seeds; i++) {
        const run_result *r = s->res[a][i];
        if (r->n_pts == 0)
            return 0;
        const point *first = &r->pts[0], *last = &r->pts[r->n_pts - 1];
        *ratio += last->rms_boundary / last->rms_regular / s->p->seeds;
        *std0 += first->rms_std / s->p->seeds;
        *std1 += last->rms_std / s->p->seeds;
    }
    return 1;
}

void verdicts(FILE *f, const study *s)
{
    const preset *p = s->p;
    const int n = p->seeds;
    double d[MAX_SEEDS], e[MAX_SEEDS];
    char ours[160], b1[64], nseeds[160];
    if (n == 1)
        snprintf(nseeds, sizeof nseeds, "; with one seed there is no interval, so each verdict is "
                                        "marked (1 seed)");
    else
        snprintf(nseeds, sizeof nseeds, "; ± is the half-width of the 95%% t interval over %d seeds", n);
    fprintf(f, "## Verdict: what reproduced\n\n"
               "One row per finding of the paper. Differences are paired by seed (post minus pre, "
               "nats/byte)%s. Rules: a "
               "direction counts as reproduced when the interval excludes 0 on the paper's side "
               "(one seed: when it exceeds %.2f), parity when |difference| is within %.2f; the "
               "mechanism rows use the seed means with the thresholds named in the row.\n\n"
               "| finding | paper | ours | verdict |\n|---|---|---|---|\n",
            nseeds, PARITY_TOL, PARITY_TOL);
    int k;
    summary sj = {0}, sg = {0};
    /* 1 joint parity */
    if ((k = paired(s, "pre-joint", "post-joint", d)))
        sj = summarise(d, k);
    fmt_summary(ours, sizeof ours, &sj);
    fprintf(f, "| joint: post ≈ pre | +0.0004 | %s | %s |\n", ours, verdict_name(parity(&sj), n));
    /* 2 post-grow < pre-grow */
    if ((k = paired(s, "pre-grow", "post-grow", e)))
        sg = summarise(e, k);
    fmt_summary(ours, sizeof ours, &sg);
    fprintf(f, "| grow: post < pre | -0.0328 | %s | %s |\n", ours,
            verdict_name(directional(&sg, -1), n));
    /* 3 interaction */
    summary si = {0};
    if (sj.n && sg.n) {
        double x[MAX_SEEDS];
        for (int i = 0; i < n; i++)
            x[i] = e[i] - d[i];
        si = summarise(x, n);
    }
    fmt_summary(ours, sizeof ours, &si);
    fprintf(f, "| interaction I < 0 | -0.0332 | %s | %s |\n", ours,
            verdict_name(directional(&si, -1), n));
    /* 4 single-block parity */
    summary ss = {0};
    if ((k = paired(s, "pre-single", "post-single", d)))
        ss = summarise(d, k);
    fmt_summary(ours, sizeof ours, &ss);
    fprintf(f, "| single block: post ≈ pre | +0.0044 | %s | %s |\n", ours, verdict_name(parity(&ss), n));
    /* 5 freeze ordering */
    summary sf = {0};
    if ((k = paired(s, "pre-freeze", "post-freeze", d)))
        sf = summarise(d, k);
    fmt_summary(ours, sizeof ours, &sf);
    fprintf(f, "| freeze: post < pre | -0.0332 | %s | %s |\n", ours,
            verdict_name(directional(&sf, -1), n));
    /* 6 budget controls: post-joint matched on active-layer or total tokens stays worse than post-grow */
    summary sa = {0}, st = {0};
    if ((k = paired(s, "post-grow", "post-joint-active", d)))
        sa = summarise(d, k);
    if ((k = paired(s, "post-grow", "post-joint-total", d)))
        st = summarise(d, k);
    int va = directional(&sa, +1), vt = directional(&st, +1);
    int vb = (va == V_NA || vt == V_NA) ? V_NA : (va == V_NO || vt == V_NO) ? V_NO
                                                 : (va == V_YES && vt == V_YES) ? V_YES : V_UNSURE;
    char oa[64], ot[64];
    fmt_summary(oa, sizeof oa, &sa);
    fmt_summary(ot, sizeof ot, &st);
    fprintf(f, "| budget controls: post-joint matched on active-layer / total tokens - post-grow > 0 | "
               "+0.0188 / +0.0098 | %s / %s | %s |\n", oa, ot, verdict_name(vb, n));
    /* 7 loss jump */
    int f1, f2;
    double jpre = mean_jump(s, "pre-grow", &f1), jpost = mean_jump(s, "post-grow", &f2);
    int vj = !(f1 && f2) ? V_NA : (jpost > 0 && jpost > 3 * fmax(jpre, 0.005)) ? V_YES
                                  : jpost <= jpre ? V_NO : V_UNSURE;
    snprintf(ours, sizeof ours, f1 && f2 ? "pre %+.3f, post %+.3f" : "n/a", jpre, jpost);
    fprintf(f, "| loss jump at the first append: post >> pre (rule: post > 3 x pre) | pre 0.023, post 0.25-0.28 | %s | %s |\n",
            ours, verdict_name(vj, n));
    /* 8 block removal */
    int ag = arm_index(s, "pre-grow"), bg = arm_index(s, "post-grow");
    int vr = V_NA;
    if (ag >= 0 && bg >= 0) {
        const int nb = s->res[ag][0]->n_blocks_measured;
        double last_d = 0, last_a = 0, min_post = INFINITY, min_post_a = INFINITY;
        for (int i = 0; i < n; i++) {
            last_d += s->res[ag][i]->removal[nb - 1].dce / n;
            last_a += s->res[ag][i]->removal[nb - 1].angle / n;
        }
        for (int b = 0; b < s->res[bg][0]->n_blocks_measured; b++) {
            double md = 0, ma = 0;
            for (int i = 0; i < n; i++) {
                md += s->res[bg][i]->removal[b].dce / n;
                ma += s->res[bg][i]->removal[b].angle / n;
            }
            min_post = fmin(min_post, md);
            min_post_a = fmin(min_post_a, ma);
        }
        vr = (last_d < 0.25 * min_post && min_post_a > last_a) ? V_YES
             : last_d >= min_post ? V_NO : V_UNSURE;
        snprintf(ours, sizeof ours, "pre-grow last block dCE %.3f, angle %.3f; post-grow every block dCE >= %.3f, angle >= %.3f",
                 last_d, last_a, min_post, min_post_a);
    } else {
        snprintf(ours, sizeof ours, "n/a");
    }
    fprintf(f, "| block removal: pre-grow's last block a near no-op, every post-grow block effective (rule: pre's dCE < 1/4 of post's smallest) | pre last dCE 0.02, angle 0.031; post dCE >= 2.38, angle > 0.34 | %s | %s |\n",
            ours, verdict_name(vr, n));
    /* 9 boundary-token growth in pre-norm */
    double rpre, s0pre, s1pre, rpost, s0post, s1post;
    int vg = V_NA;
    const char *apre = arm_index(s, "pre-grow") >= 0 ? "pre-grow" : "pre-joint";
    const char *apost = arm_index(s, "post-grow") >= 0 ? "post-grow" : "post-joint";
    if (trajectory_ends(s, apre, &rpre, &s0pre, &s1pre) && trajectory_ends(s, apost, &rpost, &s0post, &s1post)) {
        vg = (rpre >= 3 && rpre >= 2 * rpost && s1pre > s0pre) ? V_YES : rpre < 1.5 ? V_NO : V_UNSURE;
        snprintf(ours, sizeof ours, "%s: boundary/regular RMS %.2fx, RMS std %.3f -> %.3f; %s: %.2fx, std %.3f -> %.3f",
                 apre, rpre, s0pre, s1pre, apost, rpost, s0post, s1post);
    } else {
        snprintf(ours, sizeof ours, "n/a");
    }
    fprintf(f, "| boundary tokens grow massive under pre-norm, not post (rule: pre ratio >= 3, >= 2x post's, std growing) | pre 37x, std 5.81 -> 19.98; post < 2.5, std 0.07-0.19 | %s | %s |\n",
            ours, verdict_name(vg, n));
    fmt_num(b1, sizeof b1, s->teacher.max_ratio, "%.2f");
    fprintf(f, "\nTeacher go/no-go: the largest boundary-token / regular RMS ratio over the teacher's "
               "layers is %s: %s.\n\n",
            b1, s->teacher.max_ratio >= 3 ? "GO (massive boundary activations present)"
                                          : "NO-GO (the teacher shows no massive boundary activations; "
                                            "the paper's mechanism has nothing to act on)");
}

