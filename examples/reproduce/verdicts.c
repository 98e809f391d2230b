/* The verdict table: the paper's findings as rules over the results (verdicts.h). */
#include "verdicts.h"

#include "contrasts.h"
#include "mechanism.h"
#include "paper.h"
#include "results.h"
#include "stats.h"

/* ---- the paper's main arms ------------------------------------------------------------ */

/* The p of rule_parity's verdict: the equivalence test, or the interval
 * outside the margin (against the nearer end). */
static double parity_p(const summary *d, double margin)
{
    if (d->n < 2 || !isfinite(d->mean))
        return NAN;
    return sided_p(rule_parity(d, margin), p_tost(d, margin),
                   p_against(d, d->mean > 0 ? margin : -margin));
}

/* A finding on a pair of the paper's arms, post - pre paired by seed: parity
 * (post ≈ pre) or a direction (post < pre), beside the paper's difference. */
static void paper_pair_row(vtable *t, const study *s, const char *finding, const char *pre,
                           const char *post, int parity, double paper)
{
    double d[MAX_SEEDS];
    char ours[160];
    const summary sm = paired_summary(s, pre, post, d);
    fmt_summary(ours, sizeof ours, &sm);
    double pv = parity ? parity_p(&sm, PARITY_MARGIN) : p_against(&sm, 0);
    const verdict v = parity ? rule_parity(&sm, PARITY_MARGIN) : rule_direction(&sm, -1);
    const char *arms[2] = {pre, post};
    char cell[600];
    verdict_cell(cell, sizeof cell, s, arms, 2, v, &pv);
    vrow(t, pv, "| %s | %+.4f | %s | %s |", finding, paper, ours, cell);
}

/* The budget controls on the recipe named by suffix ("" the paper's
 * optimizer): post-joint matched on active-layer tokens (sa) and on total
 * tokens (st) against post-grow; their verdict, and its p into *pv. */
static verdict budget_controls(const study *s, const char *suffix, summary *sa, summary *st,
                               double *pv)
{
    char qg[64], qa[64], qt[64];
    double c[MAX_SEEDS];
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    snprintf(qa, sizeof qa, "post-joint-active%s", suffix);
    snprintf(qt, sizeof qt, "post-joint-total%s", suffix);
    *sa = paired_summary(s, qg, qa, c);
    *st = paired_summary(s, qg, qt, c);
    const verdict v = rule_controls(sa, st);
    const double pa = p_against(sa, 0), pt = p_against(st, 0);
    *pv = sided_p(v, fmax(pa, pt), fmin(pa, pt));
    return v;
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
    const summary sm = interaction_summary(s, pj, qj, pg, qg, xm),
                  su = interaction_summary(s, uj, vj, pg, qg, xu);
    if (!sm.n || sm.n != su.n)
        return;
    for (int i = 0; i < sm.n; i++)
        xm[i] -= xu[i];
    const summary d = summarise(xm, sm.n);
    fmt_summary(fm, sizeof fm, &d);
    snprintf(ours + strlen(ours), n - strlen(ours), "; matching moves I by %s (%s)", fm,
             effect_cell(cell, sizeof cell, &d, EQUIVALENCE_MARGIN, 0));
}

/* 3 the interaction I < 0: with I at matched total compute measured (sit)
 * it decides, else the budget controls (sa, st, their verdict vc) do. */
static void interaction_row(vtable *t, const study *s, const summary *sit, const summary *sa,
                            const summary *st, verdict vc)
{
    static const char *const inter[6] = {"pre-joint", "post-joint", "pre-grow", "post-grow",
                                         "post-joint-active", "post-joint-total"};
    double x[MAX_SEEDS];
    char ours[1200];
    const summary si = interaction_summary(s, "pre-joint", "post-joint", "pre-grow", "post-grow", x);
    fmt_summary(ours, sizeof ours, &si);
    verdict vi = rule_interaction(&si, vc);
    const char *why = vi == V_INCONCLUSIVE && rule_direction(&si, -1) == V_REPRODUCED
                          ? " (below 0, but the budget controls are not all reproduced: the "
                            "compute confound is open)"
                          : "";
    const verdict vit = rule_direction(sit, -1);
    if (sit->n > 0 && rule_direction(&si, -1) == V_REPRODUCED) {
        vi = vit;
        why = vit == V_REPRODUCED ? " (and below 0 at matched total compute)"
                                  : " (below 0, but not at matched total compute: the row below)";
    }
    const double pi = p_against(&si, 0), pit = p_against(sit, 0), pa = p_against(sa, 0),
                 pt = p_against(st, 0);
    const double p_yes = sit->n > 0 ? fmax(pi, pit) : fmax(pi, fmax(pa, pt));
    double pv = si.n ? sided_p(vi, p_yes, fmin(pi, sit->n > 0 ? pit : fmin(pa, pt))) : NAN;
    char cell[600];
    verdict_cell(cell, sizeof cell, s, inter, 6, vi, &pv);
    vrow(t, pv,
         "| interaction I < 0 (with the budget controls, or I at matched total compute "
         "when it ran) | %+.4f | %s%s | %s |", PAPER_INTERACTION, ours, why, cell);
}

/* The interaction at matched total compute (sit): joint given grow's total tokens. */
static void matched_total_row(vtable *t, const study *s, const summary *sit)
{
    static const char *const inter_total[4] = {"pre-joint-total", "post-joint-total",
                                               "pre-grow", "post-grow"};
    char ours[1200], cell[256], half[160] = "";
    fmt_summary(ours, sizeof ours, sit);
    matching_moves(ours, sizeof ours, s, "", "pre-joint-total", "post-joint-total");
    double pv = sit->n ? effect_p(sit, EQUIVALENCE_MARGIN) : NAN;
    char dnl[600];
    const char *vc = dnl_cell(dnl, sizeof dnl, s, inter_total, 4,
                              sit->n ? effect_cell(cell, sizeof cell, sit, EQUIVALENCE_MARGIN, -1)
                                     : vtext(cell, sizeof cell, rule_direction(sit, -1),
                                             s->p->seeds),
                              &pv);
    if (sit->n && !strstr(vc, NOT_LEARNED_VERDICT)) {
        snprintf(half, sizeof half, "; at ±%.4f: ", ABSENCE_MARGIN);
        half_cell(half + strlen(half), sizeof half - strlen(half), sit);
    }
    vrow(t, pv,
         "| interaction at matched total compute, I_total = (post-grow - pre-grow) - "
         "(post-joint-total - pre-joint-total) < 0 | (the paper did not run it) | %s | %s%s |",
         ours, vc, half);
}

/* ---- the recipes' rows at matched compute ---------------------------------------------- */

/* The budget controls on a recipe named by suffix (-go): post-joint matched
 * on active-layer and on total tokens against post-grow, each with its
 * effect verdict; no row unless the three arms ran. */
static void controls_row(vtable *t, const study *s, const char *suffix, const char *recipe)
{
    char qg[64], qa[64], qt[64], oa[64], ot[64], ca[256], ct[256];
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    snprintf(qa, sizeof qa, "post-joint-active%s", suffix);
    snprintf(qt, sizeof qt, "post-joint-total%s", suffix);
    summary sa, st;
    double pv;
    const verdict vc = budget_controls(s, suffix, &sa, &st, &pv);
    if (!sa.n || !st.n)
        return;
    fmt_summary(oa, sizeof oa, &sa);
    fmt_summary(ot, sizeof ot, &st);
    const char *arms[3] = {qg, qa, qt};
    char cell[600];
    verdict_cell(cell, sizeof cell, s, arms, 3, vc, &pv);
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
static void matched_rows(vtable *t, const study *s, const char *suffix, const char *recipe)
{
    static const char *const budget[2][2] = {{"joint-active", "active-layer tokens"},
                                             {"joint-total", "total tokens"}};
    char pg[64], qg[64], pj[64], qj[64], ours[1200];
    snprintf(pg, sizeof pg, "pre-grow%s", suffix);
    snprintf(qg, sizeof qg, "post-grow%s", suffix);
    for (int b = 0; b < (*suffix ? 2 : 1); b++) {
        snprintf(pj, sizeof pj, "pre-%s%s", budget[b][0], suffix);
        snprintf(qj, sizeof qj, "post-%s%s", budget[b][0], suffix);
        double x[MAX_SEEDS];
        const summary si = interaction_summary(s, pj, qj, pg, qg, x);
        if (!si.n)
            continue;
        char cell[256];
        fmt_summary(ours, sizeof ours, &si);
        matching_moves(ours, sizeof ours, s, suffix, pj, qj);
        char half[160];
        double pv = effect_p(&si, EQUIVALENCE_MARGIN);
        const char *arms[4] = {pj, qj, pg, qg};
        char dnl[600];
        const char *vc = dnl_cell(dnl, sizeof dnl, s, arms, 4,
                                  effect_cell(cell, sizeof cell, &si, EQUIVALENCE_MARGIN, -1), &pv);
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
        controls_row(t, s, suffix, recipe);
}

/* Both recipes' rows at matched compute. */
static void recipes_rows(vtable *t, const study *s)
{
    matched_rows(t, s, "", "the paper's optimizer");
    matched_rows(t, s, "-go", "the teacher's recipe (the -go arms)");
}

/* The rows of the paper's main arms, in the paper's order; the budget
 * controls are measured first, since the interaction needs them. */
static void paper_rows(vtable *t, const study *s)
{
    paper_pair_row(t, s, "joint: post ≈ pre", "pre-joint", "post-joint", 1, PAPER_JOINT_DELTA);
    paper_pair_row(t, s, "grow: post < pre", "pre-grow", "post-grow", 0, PAPER_GROW_DELTA);
    summary sa, st;
    double pv;
    const verdict vc = budget_controls(s, "", &sa, &st, &pv);
    double x[MAX_SEEDS];
    const summary sit =
        interaction_summary(s, "pre-joint-total", "post-joint-total", "pre-grow", "post-grow", x);
    interaction_row(t, s, &sit, &sa, &st, vc);
    matched_total_row(t, s, &sit);
    recipes_rows(t, s);
    paper_pair_row(t, s, "single block: post ≈ pre", "pre-single", "post-single", 1,
                   PAPER_SINGLE_DELTA);
    paper_pair_row(t, s, "freeze: post < pre", "pre-freeze", "post-freeze", 0,
                   PAPER_FREEZE_DELTA);
    /* 6 the budget controls */
    static const char *const controls[3] = {"post-grow", "post-joint-active",
                                            "post-joint-total"};
    char oa[64], ot[64];
    fmt_summary(oa, sizeof oa, &sa);
    fmt_summary(ot, sizeof ot, &st);
    char cell[600];
    verdict_cell(cell, sizeof cell, s, controls, 3, vc, &pv);
    vrow(t, pv,
         "| budget controls: post-joint matched on active-layer / total tokens - post-grow > 0 | "
         "%+.4f / %+.4f | %s / %s | %s |", PAPER_CONTROL_ACTIVE_DELTA,
         PAPER_CONTROL_TOTAL_DELTA, oa, ot, cell);
}

/* ---- the table ----------------------------------------------------------------------- */

/* The table's header: how each row is read, and its p column. */
static void preamble(FILE *f)
{
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
}

void verdicts(FILE *f, const study *s)
{
    /* a study of other arms (a design of its own) has none of the paper's rows to fill,
     * or only its grow pairs' */
    static const char *const main_arms[] = {"pre-joint", "post-joint", "pre-grow", "post-grow",
                                            "pre-single", "post-single", "pre-freeze",
                                            "post-freeze"};
    int any = 0;
    for (size_t k = 0; k < sizeof main_arms / sizeof main_arms[0]; k++)
        any |= arm_index(s, main_arms[k]) >= 0;
    int gp[MAX_ARMS], gq[MAX_ARMS];
    if (!any && grow_pairs(s, gp, gq) == 0) {
        fprintf(f, "## Verdict: what reproduced\n\nThe paper's findings are about its arms "
                   "(pre-joint, post-joint, pre-grow, post-grow, ...; or a pre-/post- pair of "
                   "grow arms of one name): this study has none of them, so no row of the "
                   "paper's applies. Its own comparisons and interactions are below.\n\n");
        return;
    }
    preamble(f);
    vtable tab = {.n = 0};
    if (any) /* the paper's main arms' rows; a study of grow pairs alone has only theirs */
        paper_rows(&tab, s);
    else /* the interaction at matched compute of a recipe whose four arms ran */
        recipes_rows(&tab, s);
    mechanism_rows(&tab, s);
    vflush(f, &tab);
    gate_words(f, s);
}

void verdicts_text(const study *s, char **text)
{
    size_t len = 0;
    FILE *f = open_memstream(text, &len);
    if (!f)
        die("the verdict table: %s", strerror(errno));
    verdicts(f, s);
    fclose(f);
}

/* The rows are read back from the table verdicts() prints, so that the two
 * can never disagree: every cell is printed without " | " inside it. */
json_object *verdict_rows(const study *s)
{
    char *text = NULL;
    verdicts_text(s, &text);
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
