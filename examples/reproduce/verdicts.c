/* The verdict table: the paper's findings as rules over the results. */
#include "verdicts.h"

#include <stdarg.h>

#include "paper.h"
#include "report.h"
#include "results.h"
#include "rules.h"
#include "stats.h"

/* ---- verdicts ---------------------------------------------------------------------- */

static void fmt_summary(char *buf, size_t n, const summary *sm)
{
    if (sm->n == 0)
        snprintf(buf, n, "n/a");
    else if (sm->n == 1 || isnan(sm->half))
        snprintf(buf, n, "%+.4f", sm->mean);
    else
        snprintf(buf, n, "%+.4f ± %.4f", sm->mean, sm->half);
}

/* The verdict table's rows, collected so that the p of each can be adjusted
 * over all of them (Holm) before the table is printed. */
typedef struct vtable {
    char *row[64];
    double p[64];
    int n;
} vtable;

/* A row "| a | b | ... |" (its last cell, the p, is added when printed) and
 * the p of the test its verdict reads (NaN: no test, not in the family). */
static void vrow(vtable *t, double p, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    const int len = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (t->n >= (int)(sizeof t->row / sizeof t->row[0]) || len < 0)
        die("verdict table: too many rows");
    char *buf = malloc((size_t)len + 1);
    if (!buf)
        die("verdict table: out of memory");
    va_start(ap, fmt);
    vsnprintf(buf, (size_t)len + 1, fmt, ap);
    va_end(ap);
    t->row[t->n] = buf;
    t->p[t->n++] = p;
}

/* A p as the tables print it. */
static void fmt_p(char *buf, size_t n, double p)
{
    if (isnan(p))
        snprintf(buf, n, "n/a");
    else if (p < 0.0001)
        snprintf(buf, n, "< 0.0001");
    else
        snprintf(buf, n, "%.4f", p);
}

/* The rows with their last cell, "p 0.0012, Holm 0.0150": the p of the test
 * each verdict reads, and Holm's adjustment over the table's rows that have
 * one (the table's family, its size said in the header's note). */
static void vflush(FILE *f, vtable *t)
{
    double adj[64];
    holm(t->p, t->n, adj);
    for (int k = 0; k < t->n; k++) {
        char a[32], b[32];
        fmt_p(a, sizeof a, t->p[k]);
        fmt_p(b, sizeof b, adj[k]);
        if (isnan(t->p[k]))
            fprintf(f, "%s n/a |\n", t->row[k]);
        else
            fprintf(f, "%s p %s, Holm %s |\n", t->row[k], a, b);
        free(t->row[k]);
    }
    t->n = 0;
}

/* The p of a verdict that either of two sides decides: the "reproduced" side
 * needs every one of its tests (the largest of their p), the "not
 * reproduced" side any one of its own (the smallest); an undecided row gets
 * the nearer of the two. */
static double sided_p(verdict v, double p_yes, double p_no)
{
    if (v == V_REPRODUCED)
        return p_yes;
    if (v == V_NOT_REPRODUCED)
        return p_no;
    if (v == V_INCONCLUSIVE)
        return fmin(p_yes, p_no);
    return NAN;
}

/* The p of rule_parity's verdict: the equivalence test, or the interval
 * outside the margin (against the nearer end). */
static double parity_p(const summary *d, double margin)
{
    if (d->n < 2 || !isfinite(d->mean))
        return NAN;
    return sided_p(rule_parity(d, margin), p_tost(d, margin),
                   p_against(d, d->mean > 0 ? margin : -margin));
}

/* The grow pairs: an arm pre-X on a grow schedule under pre-norm, and its
 * post-X. Returns how many, the arms' indexes in pre[] and post[]. */
static int grow_pairs(const study *s, int *pre, int *post)
{
    int n = 0;
    for (int a = 0; a < s->p->n_arms; a++) {
        const arm *am = &s->p->arms[a];
        if (am->placement != LATTICE_NORM_PLACEMENT_PRE ||
            am->schedule != LATTICE_SCHEDULE_PRESET_GROW || strncmp(am->name, "pre-", 4) != 0)
            continue;
        char partner[64];
        snprintf(partner, sizeof partner, "post-%s", am->name + 4);
        const int b = arm_index(s, partner);
        if (b >= 0 && s->p->arms[b].schedule == LATTICE_SCHEDULE_PRESET_GROW) {
            pre[n] = a;
            post[n++] = b;
        }
    }
    return n;
}

/* The shortest phase length of the study's arms (each arm may set its own). */
static int shortest_phase(const preset *p)
{
    int m = p->n_arms ? INT_MAX : p->steps_per_phase;
    for (int a = 0; a < p->n_arms; a++)
        m = p->arms[a].steps_per_phase < m ? p->arms[a].steps_per_phase : m;
    return m;
}

/* The first phase change of a run that appends layers (-1: none). */
static int first_append(const run_result *r)
{
    for (int k = 0; k < r->n_appends; k++)
        if (r->is_append[k])
            return k;
    return -1;
}

/* At a run's first append: the share of what phase 0 learned (the loss at
 * step 1 down to the baseline before the append) that the jump gives back,
 * the jump, and the steps to recover (a run that never recovers within its
 * phase counts the phase's length: a lower bound). 0 when it has none. */
static int append_shape(const arm *am, const run_result *r, double *share, double *jump,
                        double *recovery)
{
    const int k = first_append(r);
    if (k < 0 || r->n_steps == 0)
        return 0;
    const kept_response *x = &r->resp[k];
    *jump = x->jump;
    *share = x->jump / (r->losses[0] - x->baseline);
    *recovery = x->recovery >= 0 ? (double)x->recovery : (double)am->steps_per_phase;
    return 1;
}

/* The row-start / regular RMS ratio of a run at the end of phase k (after
 * block k + 1, the stream block k + 2 reads when it is appended): the
 * trajectory point at that step; NaN when the run has none there. */
static double ratio_at_phase_end(const preset *p, const arm *am, const run_result *r, int k)
{
    const int64_t step = (int64_t)(k + 1) * am->steps_per_phase;
    for (int j = 0; j < r->n_pts; j++)
        if (r->pts[j].step == step && r->pts[j].active == (k + 1) * p->block_size)
            return r->pts[j].rms_boundary / r->pts[j].rms_regular;
    return NAN;
}

/* A run's validation CE at its evaluation at the end of phase k (the
 * trajectory's point at that step with the phase's layers active: the
 * evaluation batches, not the final evaluation); NaN when it has none. */
static double val_at_phase_end(const preset *p, const arm *am, const run_result *r, int k)
{
    const int64_t step = (int64_t)(k + 1) * am->steps_per_phase;
    for (int j = 0; j < r->n_pts; j++)
        if (r->pts[j].step == step && r->pts[j].active == (k + 1) * p->block_size)
            return r->pts[j].val_ce;
    return NAN;
}

/* "m ± h" of a summary (n/a when it has no seeds; no ± with one). */
static void fmt_pm(char *buf, size_t n, const summary *sm, const char *f, double scale)
{
    char m[64], h[64];
    if (sm->n == 0 || !isfinite(sm->mean)) {
        snprintf(buf, n, "n/a");
        return;
    }
    snprintf(m, sizeof m, f, sm->mean * scale);
    if (sm->n < 2 || !isfinite(sm->half)) {
        snprintf(buf, n, "%s", m);
        return;
    }
    snprintf(h, sizeof h, f, sm->half * scale);
    snprintf(buf, n, "%s ± %s", m, h[0] == '+' ? h + 1 : h); /* a half-width has no sign */
}

/* A row's verdict, with "(1 seed)" where one seed is all there is. */
static const char *vtext(verdict v, int n)
{
    static char buf[64];
    snprintf(buf, sizeof buf, "%s%s", verdict_text(v),
             n == 1 && v != V_NOT_RUN && v != V_NOT_APPLICABLE ? " (1 seed)" : "");
    return buf;
}

/* The verdict cell of a row that rests on the arms names[0..n): cell, or,
 * when one of them did not learn (results.h), NOT_LEARNED_VERDICT naming
 * them, and *p NaN: no test, and no place in the table's family. */
static const char *dnl_cell(const study *s, const char *const *names, int n, const char *cell,
                            double *p)
{
    static char buf[4][600];
    static int next;
    char dnl[512];
    if (!not_learned(s, names, n, dnl, sizeof dnl))
        return cell;
    char *b = buf[next++ & 3];
    snprintf(b, sizeof buf[0], NOT_LEARNED_VERDICT ": %s", dnl);
    *p = NAN;
    return b;
}

static summary paired_summary(const study *s, const char *a, const char *b, double *d)
{
    summary sm = {0, 0, NAN, 0};
    const int k = paired(s, a, b, d);
    if (k)
        sm = summarise(d, k);
    return sm;
}

/* I = (qg - pg) - (qj - pj), paired by seed, its per-seed values in x; n 0
 * unless all four arms ran with the same seeds. */
static summary interaction_x(const study *s, const char *pj, const char *qj, const char *pg,
                             const char *qg, double *x)
{
    double dj[MAX_SEEDS], dg[MAX_SEEDS];
    const summary sj = paired_summary(s, pj, qj, dj), sg = paired_summary(s, pg, qg, dg);
    summary si = {0, 0, NAN, 0};
    if (sj.n && sg.n && sj.n == sg.n) {
        for (int i = 0; i < sj.n; i++)
            x[i] = dg[i] - dj[i];
        si = summarise(x, sj.n);
    }
    return si;
}

static summary interaction(const study *s, const char *pj, const char *qj, const char *pg,
                           const char *qg)
{
    double x[MAX_SEEDS];
    return interaction_x(s, pj, qj, pg, qg, x);
}

/* How matching the joint arms' compute moves I: I matched - I unmatched,
 * paired by seed, appended to ours as "; matching moves I by m ± h (verdict)"
 * (nothing when the unmatched arms did not run with the same seeds). */
static void matching_moves(char *ours, size_t n, const study *s, const char *suffix,
                           const char *pj, const char *qj)
{
    char pg[64], qg[64], uj[64], vj[64], cell[256], fm[160];
    snprintf(pg, sizeof pg, "pre-grow%s", suffix);
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    snprintf(uj, sizeof uj, "pre-joint%s", suffix);
    snprintf(vj, sizeof vj, "post-joint%s", suffix);
    double xm[MAX_SEEDS], xu[MAX_SEEDS];
    const summary sm = interaction_x(s, pj, qj, pg, qg, xm),
                  su = interaction_x(s, uj, vj, pg, qg, xu);
    if (!sm.n || sm.n != su.n)
        return;
    for (int i = 0; i < sm.n; i++)
        xm[i] -= xu[i];
    const summary d = summarise(xm, sm.n);
    fmt_summary(fm, sizeof fm, &d);
    snprintf(ours + strlen(ours), n - strlen(ours), "; matching moves I by %s (%s)", fm,
             effect_cell(cell, sizeof cell, &d, EQUIVALENCE_MARGIN, 0));
}

/* The budget controls on a recipe named by suffix (-go): post-joint matched
 * on active-layer and on total tokens against post-grow, each with its
 * effect verdict; no row unless the three arms ran. */
static void controls_row(vtable *t, const study *s, const char *suffix, const char *recipe, int n)
{
    char qg[64], qa[64], qt[64], oa[64], ot[64], ca[256], ct[256];
    double c[MAX_SEEDS];
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    snprintf(qa, sizeof qa, "post-joint-active%s", suffix);
    snprintf(qt, sizeof qt, "post-joint-total%s", suffix);
    const summary sa = paired_summary(s, qg, qa, c), st = paired_summary(s, qg, qt, c);
    if (!sa.n || !st.n)
        return;
    fmt_summary(oa, sizeof oa, &sa);
    fmt_summary(ot, sizeof ot, &st);
    const verdict vc = rule_controls(&sa, &st);
    const double pa = p_against(&sa, 0), pt = p_against(&st, 0);
    double pv = sided_p(vc, fmax(pa, pt), fmin(pa, pt));
    const char *arms[3] = {qg, qa, qt};
    const char *cell = dnl_cell(s, arms, 3, vtext(vc, n), &pv);
    vrow(t, pv,
         "| budget controls, %s: %s / %s - %s > 0 | (the paper did not run it) | %s / %s "
               "(active: %s; total: %s) | %s |",
            recipe, qa, qt, qg, oa, ot, effect_cell(ca, sizeof ca, &sa, EQUIVALENCE_MARGIN, 0),
            effect_cell(ct, sizeof ct, &st, EQUIVALENCE_MARGIN, 0), cell);
}

/* The interaction at matched compute on a recipe whose arms are named with
 * suffix (pre-grow-go, pre-joint-total-go, ...; "" the paper's optimizer): a
 * row for each budget whose four arms ran, none otherwise. With no suffix the
 * total-token row is the one above, which the interaction row defers to. */
static void matched_rows(vtable *t, const study *s, const char *suffix, const char *recipe, int n)
{
    static const char *const budget[2][2] = {{"joint-active", "active-layer tokens"},
                                             {"joint-total", "total tokens"}};
    char pg[64], qg[64], pj[64], qj[64], ours[1200];
    snprintf(pg, sizeof pg, "pre-grow%s", suffix);
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    for (int b = 0; b < (*suffix ? 2 : 1); b++) {
        snprintf(pj, sizeof pj, "pre-%s%s", budget[b][0], suffix);
        snprintf(qj, sizeof qj, "post-%s%s", budget[b][0], suffix);
        const summary si = interaction(s, pj, qj, pg, qg);
        if (!si.n)
            continue;
        char cell[256];
        fmt_summary(ours, sizeof ours, &si);
        matching_moves(ours, sizeof ours, s, suffix, pj, qj);
        char half[160];
        double pv = effect_p(&si, EQUIVALENCE_MARGIN);
        const char *arms[4] = {pj, qj, pg, qg};
        const char *vc = dnl_cell(s, arms, 4, effect_cell(cell, sizeof cell, &si,
                                                          EQUIVALENCE_MARGIN, -1), &pv);
        if (vc != cell)
            snprintf(half, sizeof half, "not applicable");
        else
            half_cell(half, sizeof half, &si);
        vrow(t, pv,
             "| interaction at matched %s, %s: (%s - %s) - (%s - %s) < 0 | (the paper did "
             "not run it) | %s | %s; at ±%.4f: %s |",
             budget[b][1], recipe, qg, pg, qj, pj, ours, vc, ABSENCE_MARGIN, half);
    }
    if (*suffix) /* the paper's optimizer's controls are the budget controls row */
        controls_row(t, s, suffix, recipe, n);
}

void verdicts(FILE *f, const study *s)
{
    const preset *p = s->p;
    const int n = p->seeds;
    double d[MAX_SEEDS], e[MAX_SEEDS];
    char ours[1200];
    /* a study of other arms (a design of its own) has none of the paper's rows to fill,
     * or only its grow pairs' */
    static const char *const main_arms[] = {"pre-joint", "post-joint", "pre-grow", "post-grow",
                                            "pre-single", "post-single", "pre-freeze",
                                            "post-freeze"};
    int any = 0;
    for (size_t k = 0; k < sizeof main_arms / sizeof main_arms[0]; k++)
        any |= arm_index(s, main_arms[k]) >= 0;
    {
        int gp[MAX_ARMS], gq[MAX_ARMS];
        if (!any && grow_pairs(s, gp, gq) == 0) {
            fprintf(f, "## Verdict: what reproduced\n\nThe paper's findings are about its arms "
                       "(pre-joint, post-joint, pre-grow, post-grow, ...; or a pre-/post- pair of "
                       "grow arms of one name): this study has none of them, so no row of the "
                       "paper's applies. Its own comparisons and interactions are below.\n\n");
            return;
        }
    }
    fprintf(f, "## Verdict: what reproduced\n\n"
               "One row per finding of the paper. Differences are paired by seed (post minus pre, "
               "nats/byte), ± the half-width of the 95%% t interval over the seeds. Rules "
               "(examples/reproduce/rules.h): a direction is reproduced when the 95%% interval "
               "lies on the paper's side, not reproduced when it lies on the other, else "
               "inconclusive; with one seed there is no interval and every comparison is "
               "inconclusive. Parity is an equivalence test: reproduced when the 90%% interval "
               "lies within ±%.4f nats/byte (the paper's grow effect, %.4f nats per Qwen3 token, "
               "at %.0f bytes per token), not reproduced when the 95%% interval lies outside it. "
               "The interaction is reproduced only with both budget controls reproduced (else the "
               "compute confound is open); where the arms matched on total compute ran, only when "
               "I at matched total compute is below 0 too. The rows at matched compute, which the paper did not "
               "run, are read with no threshold of their own: reproduced or not reproduced when the 95%% "
               "interval excludes 0, within the paper's effect when the 90%% interval lies within ±%.4f "
               "nats/byte (the margin above: no interaction as large as the paper's), else inconclusive, with the effects "
               "its 95%% interval still allows in multiples of that margin. Mechanism rows need a GO teacher and phases of at least "
               "%d steps (else not applicable); a diagnostic that failed is not available.\n\n"
               "Each row's last cell is the p of the test its verdict reads (two-sided t tests over "
               "the seeds; a rule of several intervals has the largest p of those its "
               "verdict needs, an undecided row the p of the side nearest to deciding it) and "
               "Holm's adjustment over the rows of this table that have one: a verdict "
               "reproduced or not reproduced holds for the table as a family only where its "
               "Holm p is below 0.05. A row within ±%.4f is within the paper's effect, "
               "not shown absent: only a row equivalent at ±%.4f (half the margin) is.\n\n"
               "| finding | paper | ours | verdict | p (Holm) |\n|---|---|---|---|---|\n",
            PARITY_MARGIN, PAPER_GROW_EFFECT_PER_TOKEN, PAPER_BYTES_PER_TOKEN, EQUIVALENCE_MARGIN,
            MECHANISM_MIN_STEPS, EQUIVALENCE_MARGIN, ABSENCE_MARGIN);
    vtable tab = {.n = 0}, *t = &tab;
    if (any) { /* the paper's main arms' rows; a study of grow pairs alone has only theirs */
        /* 1 joint parity */
        summary sj = paired_summary(s, "pre-joint", "post-joint", d);
        fmt_summary(ours, sizeof ours, &sj);
        static const char *const joint[2] = {"pre-joint", "post-joint"};
        static const char *const grow[2] = {"pre-grow", "post-grow"};
        static const char *const single[2] = {"pre-single", "post-single"};
        static const char *const freeze[2] = {"pre-freeze", "post-freeze"};
        static const char *const controls[3] = {"post-grow", "post-joint-active",
                                                "post-joint-total"};
        static const char *const inter[6] = {"pre-joint", "post-joint", "pre-grow", "post-grow",
                                             "post-joint-active", "post-joint-total"};
        static const char *const inter_total[4] = {"pre-joint-total", "post-joint-total",
                                                   "pre-grow", "post-grow"};
        double pv = parity_p(&sj, PARITY_MARGIN);
        const char *vc0 = dnl_cell(s, joint, 2, vtext(rule_parity(&sj, PARITY_MARGIN), n), &pv);
        vrow(t, pv, "| joint: post ≈ pre | %+.4f | %s | %s |", PAPER_JOINT_DELTA, ours, vc0);
        /* 2 post-grow < pre-grow */
        summary sg = paired_summary(s, "pre-grow", "post-grow", e);
        fmt_summary(ours, sizeof ours, &sg);
        pv = p_against(&sg, 0);
        vc0 = dnl_cell(s, grow, 2, vtext(rule_direction(&sg, -1), n), &pv);
        vrow(t, pv, "| grow: post < pre | %+.4f | %s | %s |", PAPER_GROW_DELTA, ours, vc0);
        /* 6 (first: the interaction needs it) budget controls */
        double c[MAX_SEEDS];
        summary sa = paired_summary(s, "post-grow", "post-joint-active", c);
        summary st = paired_summary(s, "post-grow", "post-joint-total", c);
        const verdict vc = rule_controls(&sa, &st);
        /* 3 interaction */
        const summary si = interaction(s, "pre-joint", "post-joint", "pre-grow", "post-grow");
        /* the interaction at matched total compute: joint given grow's total tokens */
        const summary sit =
            interaction(s, "pre-joint-total", "post-joint-total", "pre-grow", "post-grow");
        const verdict vit = rule_direction(&sit, -1);
        fmt_summary(ours, sizeof ours, &si);
        /* with I at matched total compute measured, it decides; else the controls do */
        verdict vi = rule_interaction(&si, vc);
        const char *why = vi == V_INCONCLUSIVE && rule_direction(&si, -1) == V_REPRODUCED
                              ? " (below 0, but the budget controls are not all reproduced: the "
                                "compute confound is open)"
                              : "";
        if (sit.n > 0 && rule_direction(&si, -1) == V_REPRODUCED) {
            vi = vit;
            why = vit == V_REPRODUCED ? " (and below 0 at matched total compute)"
                                      : " (below 0, but not at matched total compute: the row below)";
        }
        const double pi = p_against(&si, 0), pit = p_against(&sit, 0), pa = p_against(&sa, 0),
                     pt = p_against(&st, 0);
        const double p_yes = sit.n > 0 ? fmax(pi, pit) : fmax(pi, fmax(pa, pt));
        pv = si.n ? sided_p(vi, p_yes, fmin(pi, sit.n > 0 ? pit : fmin(pa, pt))) : NAN;
        vc0 = dnl_cell(s, inter, 6, vtext(vi, n), &pv);
        vrow(t, pv,
             "| interaction I < 0 (with the budget controls, or I at matched total compute "
             "when it ran) | %+.4f | %s%s | %s |", PAPER_INTERACTION, ours, why, vc0);
        char cell[256];
        fmt_summary(ours, sizeof ours, &sit);
        matching_moves(ours, sizeof ours, s, "", "pre-joint-total", "post-joint-total");
        char half[160] = "";
        pv = sit.n ? effect_p(&sit, EQUIVALENCE_MARGIN) : NAN;
        vc0 = dnl_cell(s, inter_total, 4,
                       sit.n ? effect_cell(cell, sizeof cell, &sit, EQUIVALENCE_MARGIN, -1)
                             : vtext(vit, n),
                       &pv);
        if (sit.n && !strstr(vc0, NOT_LEARNED_VERDICT))
            snprintf(half, sizeof half, "; at ±%.4f: ", ABSENCE_MARGIN),
                half_cell(half + strlen(half), sizeof half - strlen(half), &sit);
        vrow(t, pv,
             "| interaction at matched total compute, I_total = (post-grow - pre-grow) - "
             "(post-joint-total - pre-joint-total) < 0 | (the paper did not run it) | %s | %s%s |",
             ours, vc0, half);
        matched_rows(t, s, "", "the paper's optimizer", n);
        matched_rows(t, s, "-go", "the teacher's recipe (the -go arms)", n);
        /* 4 single-block parity */
        summary ss = paired_summary(s, "pre-single", "post-single", d);
        fmt_summary(ours, sizeof ours, &ss);
        pv = parity_p(&ss, PARITY_MARGIN);
        vc0 = dnl_cell(s, single, 2, vtext(rule_parity(&ss, PARITY_MARGIN), n), &pv);
        vrow(t, pv, "| single block: post ≈ pre | %+.4f | %s | %s |", PAPER_SINGLE_DELTA, ours,
             vc0);
        /* 5 freeze ordering */
        summary sf = paired_summary(s, "pre-freeze", "post-freeze", d);
        fmt_summary(ours, sizeof ours, &sf);
        pv = p_against(&sf, 0);
        vc0 = dnl_cell(s, freeze, 2, vtext(rule_direction(&sf, -1), n), &pv);
        vrow(t, pv, "| freeze: post < pre | %+.4f | %s | %s |", PAPER_FREEZE_DELTA, ours, vc0);
        char oa[64], ot[64];
        fmt_summary(oa, sizeof oa, &sa);
        fmt_summary(ot, sizeof ot, &st);
        pv = sided_p(vc, fmax(pa, pt), fmin(pa, pt));
        vc0 = dnl_cell(s, controls, 3, vtext(vc, n), &pv);
        vrow(t, pv,
             "| budget controls: post-joint matched on active-layer / total tokens - post-grow > 0 | "
             "%+.4f / %+.4f | %s / %s | %s |", PAPER_CONTROL_ACTIVE_DELTA,
             PAPER_CONTROL_TOTAL_DELTA, oa, ot, vc0);
    }
    if (!any) { /* the interaction at matched compute of a recipe whose four arms ran */
        matched_rows(t, s, "", "the paper's optimizer", n);
        matched_rows(t, s, "-go", "the teacher's recipe (the -go arms)", n);
    }
    /* the mechanism rows' precondition */
    const int go = s->teacher.n > 0 && isfinite(s->teacher.max_ratio) ? s->teacher.max_ratio >= 3 : -1;
    const verdict gate = rule_mechanism_gate(go, shortest_phase(p));
    int gpre[MAX_ARMS], gpost[MAX_ARMS];
    const int ng = grow_pairs(s, gpre, gpost);
    /* 7 the loss jump's shape, per grow pair */
    for (int g = 0; g < ng; g++) {
        double sh[2][MAX_SEEDS], jp[2][MAX_SEEDS], rc[2][MAX_SEEDS], gap[MAX_SEEDS],
            lrec[MAX_SEEDS];
        int ok = 1;
        for (int i = 0; i < n && ok; i++)
            for (int w = 0; w < 2 && ok; w++)
                ok = append_shape(&p->arms[w ? gpost[g] : gpre[g]], s->res[w ? gpost[g] : gpre[g]][i], &sh[w][i], &jp[w][i],
                                  &rc[w][i]);
        summary ssh[2], sjp[2], src[2], sgap = {0, 0, NAN, 0}, slrec = {0, 0, NAN, 0};
        verdict v = V_NOT_RUN;
        double pv = NAN;
        if (ok) {
            for (int i = 0; i < n; i++) {
                gap[i] = sh[1][i] - sh[0][i];
                lrec[i] = log(fmax(rc[1][i], 1.0) / fmax(rc[0][i], 1.0));
            }
            for (int w = 0; w < 2; w++) {
                ssh[w] = summarise(sh[w], n);
                sjp[w] = summarise(jp[w], n);
                src[w] = summarise(rc[w], n);
            }
            sgap = summarise(gap, n);
            slrec = summarise(lrec, n);
            v = gate != V_REPRODUCED ? gate : rule_jump_shape(&sgap, &slrec);
            const double p1 = p_against(&sgap, 0), p2 = p_against(&slrec, 0);
            pv = sided_p(v, fmax(p1, p2), fmin(p1, p2));
            char a1[140], a2[140], a3[140], r1[140], r2[140], j1[140], j2[140];
            fmt_pm(a1, sizeof a1, &ssh[0], "%.0f%%", 100);
            fmt_pm(a2, sizeof a2, &ssh[1], "%.0f%%", 100);
            fmt_pm(a3, sizeof a3, &sgap, "%+.0f", 100);
            fmt_pm(r1, sizeof r1, &src[0], "%.0f", 1);
            fmt_pm(r2, sizeof r2, &src[1], "%.0f", 1);
            fmt_pm(j1, sizeof j1, &sjp[0], "%+.3f", 1);
            fmt_pm(j2, sizeof j2, &sjp[1], "%+.3f", 1);
            snprintf(ours, sizeof ours,
                     "share of phase 0's learning lost: pre %s, post %s (post - pre %s points); "
                     "recovery: pre %s, post %s steps (post / pre %.1fx); jump: pre %s, post %s "
                     "nats/byte (post's is %.0fx the paper's at %.0f bytes per token)",
                     a1, a2, a3, r1, r2, exp(slrec.mean), j1, j2,
                     sjp[1].mean * PAPER_BYTES_PER_TOKEN /
                         (0.5 * (PAPER_JUMP_POST_LO + PAPER_JUMP_POST_HI)),
                     PAPER_BYTES_PER_TOKEN);
        } else {
            snprintf(ours, sizeof ours, "n/a");
        }
        {
            const char *pair[2] = {p->arms[gpre[g]].name, p->arms[gpost[g]].name};
            const char *pair_cell = dnl_cell(s, pair, 2, vtext(v, n), &pv);
            vrow(t, pv, "| loss jump at the first append, %s / %s: post loses more of phase 0's "
                   "learning and recovers more slowly (rule: both paired differences' intervals "
                   "above 0) | jump pre %.3f, post %.2f-%.2f nats/token; recovery pre ~%.0f, "
                   "post ~%.0fk steps (%.0fx) | %s | %s |",
                p->arms[gpre[g]].name, p->arms[gpost[g]].name, PAPER_JUMP_PRE, PAPER_JUMP_POST_LO,
                PAPER_JUMP_POST_HI, PAPER_RECOVERY_PRE, PAPER_RECOVERY_POST / 1000,
                PAPER_RECOVERY_POST / PAPER_RECOVERY_PRE, ours, pair_cell);
        }
    }
    /* 8 block removal, per grow pair: per-seed ratios and gaps with intervals */
    for (int g = 0; g < ng; g++) {
        const run_result *r0 = s->res[gpre[g]][0], *q0 = s->res[gpost[g]][0];
        verdict vr = V_NOT_RUN;
        double pv = NAN;
        if (r0->n_blocks_measured > 0 && q0->n_blocks_measured > 0) {
            double ratio[MAX_SEEDS], pmin[MAX_SEEDS], agap[MAX_SEEDS], last[MAX_SEEDS];
            for (int i = 0; i < n; i++) {
                const run_result *r = s->res[gpre[g]][i], *q = s->res[gpost[g]][i];
                const kept_removal *lb = &r->removal[r->n_blocks_measured - 1];
                double md = INFINITY, ma = INFINITY;
                for (int b = 0; b < q->n_blocks_measured; b++) {
                    md = fmin(md, q->removal[b].dce);
                    ma = fmin(ma, q->removal[b].angle);
                }
                last[i] = lb->dce;
                pmin[i] = md;
                ratio[i] = lb->dce / md;
                agap[i] = ma - lb->angle;
            }
            const summary sr = summarise(ratio, n), sm = summarise(pmin, n),
                          sa = summarise(agap, n), sl = summarise(last, n);
            vr = gate != V_REPRODUCED ? gate
                                      : rule_block_removal(&sr, &sm, &sa, BLOCK_REMOVAL_FLOOR);
            const double p1 = p_against(&sr, BLOCK_REMOVAL_RATIO),
                         p2 = p_against(&sm, BLOCK_REMOVAL_FLOOR), p3 = p_against(&sa, 0);
            pv = sided_p(vr, fmax(p1, fmax(p2, p3)), fmin(p1, fmin(p2, p3)));
            char t1[140], t2[140], t3[140], t4[140];
            fmt_pm(t1, sizeof t1, &sl, "%.3f", 1);
            fmt_pm(t2, sizeof t2, &sm, "%.3f", 1);
            fmt_pm(t3, sizeof t3, &sr, "%.3f", 1);
            fmt_pm(t4, sizeof t4, &sa, "%+.3f", 1);
            snprintf(ours, sizeof ours,
                     "pre's last block dCE %s; post's smallest %s; ratio %s (per seed:", t1, t2,
                     t3);
            for (int i = 0; i < n; i++)
                snprintf(ours + strlen(ours), sizeof ours - strlen(ours), " %.3f", ratio[i]);
            snprintf(ours + strlen(ours), sizeof ours - strlen(ours),
                     "); post's smallest angle - pre's last %s", t4);
        } else {
            snprintf(ours, sizeof ours, "n/a");
        }
        {
            const char *pair[2] = {p->arms[gpre[g]].name, p->arms[gpost[g]].name};
            const char *pair_cell = dnl_cell(s, pair, 2, vtext(vr, n), &pv);
            vrow(t, pv, "| block removal, %s / %s: pre's last block a near no-op, every post block "
                   "effective (rule: the per-seed ratio of pre's last dCE to post's smallest has "
                   "its interval below %.2f, post's smallest dCE above %.2f and the angle gap "
                   "above 0) | pre last dCE %.2f, angle %.3f; post dCE >= %.2f, angle > %.2f "
                   "(nats/token) | %s | %s |",
                p->arms[gpre[g]].name, p->arms[gpost[g]].name, BLOCK_REMOVAL_RATIO,
                BLOCK_REMOVAL_FLOOR, PAPER_REMOVAL_PRE_LAST_DCE, PAPER_REMOVAL_PRE_LAST_ANGLE,
                PAPER_REMOVAL_POST_DCE, PAPER_REMOVAL_POST_ANGLE, ours, pair_cell);
        }
    }
    /* 9 row-start tokens at the boundaries appended blocks read, same depth and step */
    for (int g = 0; g < ng; g++) {
        double pr[MAX_SEEDS], hg[MAX_SEEDS], pr2[MAX_SEEDS], po2[MAX_SEEDS], po[MAX_SEEDS];
        int ok = p->blocks >= 2;
        for (int i = 0; i < n && ok; i++) {
            pr[i] = ratio_at_phase_end(p, &p->arms[gpre[g]], s->res[gpre[g]][i], 0);
            po[i] = ratio_at_phase_end(p, &p->arms[gpost[g]], s->res[gpost[g]][i], 0);
            pr2[i] = p->blocks >= 3 ? ratio_at_phase_end(p, &p->arms[gpre[g]], s->res[gpre[g]][i], 1) : NAN;
            po2[i] = p->blocks >= 3 ? ratio_at_phase_end(p, &p->arms[gpost[g]], s->res[gpost[g]][i], 1) : NAN;
            hg[i] = po[i] - 0.5 * pr[i];
            ok = isfinite(pr[i]) && isfinite(po[i]);
        }
        verdict vg = V_NOT_RUN;
        double pv = NAN;
        if (ok) {
            const summary spr = summarise(pr, n), shg = summarise(hg, n), spo = summarise(po, n),
                          spr2 = summarise(pr2, n), spo2 = summarise(po2, n);
            vg = gate != V_REPRODUCED ? gate : rule_boundary(&spr, &shg);
            const double ph = p_against(&shg, 0);
            pv = sided_p(vg, fmax(p_against(&spr, 3), ph), fmin(p_against(&spr, 1.5), ph));
            char t1[140], t2[140], t3[140], t4[140];
            fmt_pm(t1, sizeof t1, &spr, "%.2fx", 1);
            fmt_pm(t2, sizeof t2, &spo, "%.2fx", 1);
            fmt_pm(t3, sizeof t3, &spr2, "%.2fx", 1);
            fmt_pm(t4, sizeof t4, &spo2, "%.2fx", 1);
            snprintf(ours, sizeof ours,
                     "after block 1 at the end of phase 0: pre %s, post %s; after block 2 at the "
                     "end of phase 1: pre %s, post %s", t1, t2, t3, t4);
        } else {
            snprintf(ours, sizeof ours, "n/a");
        }
        {
            const char *pair[2] = {p->arms[gpre[g]].name, p->arms[gpost[g]].name};
            const char *pair_cell = dnl_cell(s, pair, 2, vtext(vg, n), &pv);
            vrow(t, pv, "| row-start tokens massive under pre-norm, not post, where the appended "
                   "blocks read, %s / %s (rule: pre's row-start / regular RMS ratio's interval "
                   "above 3, and post's ratio minus half of pre's, per seed, below 0) | "
                   "document-boundary tokens %.0fx under pre-norm, post-norm below %.1f | %s | "
                   "%s |",
                p->arms[gpre[g]].name, p->arms[gpost[g]].name, PAPER_BOUNDARY_RATIO_PRE,
                PAPER_RMS_POST_BELOW, ours, pair_cell);
        }
    }
    /* 10 the crossover: post - pre at each phase's end, paired by seed, and its
     * change across each append, per grow pair */
    for (int g = 0; g < ng; g++) {
        const int phases = p->blocks;
        double dd[MAX_BLOCKS][MAX_SEEDS];
        int ok = phases >= 2;
        for (int k = 0; k < phases && ok; k++)
            for (int i = 0; i < n && ok; i++) {
                dd[k][i] = val_at_phase_end(p, &p->arms[gpost[g]], s->res[gpost[g]][i], k) -
                           val_at_phase_end(p, &p->arms[gpre[g]], s->res[gpre[g]][i], k);
                ok = isfinite(dd[k][i]);
            }
        verdict vx = V_NOT_RUN;
        double pv = NAN;
        if (ok) {
            char t1[140];
            ours[0] = 0;
            for (int k = 0; k < phases; k++) {
                const summary sk = summarise(dd[k], n);
                int ahead = 0;
                for (int i = 0; i < n; i++)
                    ahead += dd[k][i] < 0;
                fmt_pm(t1, sizeof t1, &sk, "%+.4f", 1);
                snprintf(ours + strlen(ours), sizeof ours - strlen(ours),
                         "%safter phase %d (%d layers): %s (post ahead on %d of %d)",
                         k ? "; " : "", k, (k + 1) * p->block_size, t1, ahead, n);
            }
            double ch[MAX_SEEDS];
            for (int k = 1; k < phases; k++) {
                for (int i = 0; i < n; i++)
                    ch[i] = dd[k][i] - dd[k - 1][i];
                const summary sc = summarise(ch, n);
                fmt_pm(t1, sizeof t1, &sc, "%+.4f", 1);
                snprintf(ours + strlen(ours), sizeof ours - strlen(ours),
                         "; change across append %d: %s", k, t1);
            }
            for (int i = 0; i < n; i++)
                ch[i] = dd[phases - 1][i] - dd[0][i];
            const summary sl = summarise(dd[phases - 1], n), sc = summarise(ch, n);
            vx = rule_crossover(&sl, &sc);
            const double p1 = p_against(&sl, 0), p2 = p_against(&sc, 0);
            pv = sided_p(vx, fmax(p1, p2), fmin(p1, p2));
            fmt_pm(t1, sizeof t1, &sc, "%+.4f", 1);
            snprintf(ours + strlen(ours), sizeof ours - strlen(ours),
                     "; from phase 0's end to the last: %s", t1);
        } else {
            snprintf(ours, sizeof ours, "n/a");
        }
        {
            const char *pair[2] = {p->arms[gpre[g]].name, p->arms[gpost[g]].name};
            const char *pair_cell = dnl_cell(s, pair, 2, vtext(vx, n), &pv);
            vrow(t, pv, "| crossover, %s / %s: post - pre at each phase's end, paired by seed, on the "
                    "evaluations during training (the first %d batches of the held-out text, "
                    "not the final evaluation over all of it); post-norm behind or level on the "
                    "single block, ahead once blocks are appended (rule: post - pre at the last "
                    "phase's end and its change from phase 0's end both below 0) | single block "
                    "%+.4f, grow %+.4f (post takes the lead once blocks are appended) | %s | %s |",
             p->arms[gpre[g]].name, p->arms[gpost[g]].name, p->eval_batches, PAPER_SINGLE_DELTA,
             PAPER_GROW_DELTA, ours, pair_cell);
        }
    }
    if (ng == 0)
        vrow(t, NAN, "| loss jump, block removal, row-start tokens | (the grow arms) | n/a | not run "
                     "|");
    vflush(f, t);
    char b1[64], layers[512] = "", go_at[256] = "";
    fmt_num(b1, sizeof b1, s->teacher.max_ratio, "%.2f");
    for (int k = 1; k < s->teacher.n; k++) {
        snprintf(layers + strlen(layers), sizeof layers - strlen(layers), " %.2f",
                 s->teacher.ratio[k]);
        if (s->teacher.ratio[k] >= 3)
            snprintf(go_at + strlen(go_at), sizeof go_at - strlen(go_at), "%s%d",
                     go_at[0] ? ", " : "", k);
    }
    fprintf(f, "\nTeacher go/no-go: the largest row-start / regular RMS ratio over the teacher's "
               "layers is %s%s%d: %s. Per layer (after layer 1, 2, ...):%s; the gate (3 or "
               "more) passes %s%s.%s\n\n",
            b1, s->teacher.max_layer > 0 ? ", after layer " : "", s->teacher.max_layer,
            go < 0 ? "not measured" : go ? "GO (massive row-start activations present)"
                                         : "NO-GO (the teacher shows no massive row-start "
                                           "activations; the paper's mechanism has nothing to act "
                                           "on)",
            layers[0] ? layers : " n/a", go_at[0] ? "after layer " : "at no layer", go_at,
            shortest_phase(p) < MECHANISM_MIN_STEPS
                ? " The phases are shorter than the mechanism rows need: they are not applicable."
                : "");
}

/* The rows are read back from the table verdicts() prints, so that the two
 * can never disagree: every cell is printed without " | " inside it. */
json_object *verdict_rows(const study *s)
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    if (!f)
        die("verdict rows: %s", strerror(errno));
    verdicts(f, s);
    fclose(f);
    json_object *rows = json_object_new_array();
    static const char *const keys[5] = {"finding", "paper", "ours", "verdict", "p"};
    const char *head = strstr(text, "|---|---|---|---|---|\n");
    for (char *line = head ? strchr(head, '\n') + 1 : NULL; line && strncmp(line, "| ", 2) == 0;) {
        char *end = strchr(line, '\n');
        if (end)
            *end = 0;
        const size_t n = strlen(line);
        if (n >= 4 && strcmp(line + n - 2, " |") == 0) {
            line[n - 2] = 0;
            json_object *row = json_object_new_object();
            char *cell = line + 2;
            for (int k = 0; k < 5; k++) {
                char *bar = k < 4 ? strstr(cell, " | ") : NULL;
                if (bar)
                    *bar = 0;
                json_object_object_add(row, keys[k], json_object_new_string(cell));
                cell = bar ? bar + 3 : cell + strlen(cell);
            }
            json_object_array_add(rows, row);
        }
        line = end ? end + 1 : NULL;
    }
    free(text);
    return rows;
}
