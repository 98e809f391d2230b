/* report.md's contrasts: the preset's and its design's comparisons and
 * interactions as one family, and the cells its tables print (contrasts.h). */
#include "contrasts.h"

#include "design.h"
#include "paper.h"
#include "results.h"
#include "rules.h"
#include "stats.h"

/* ---- cells -------------------------------------------------------------------------- */

void fmt_num(char *buf, size_t n, double v, const char *f)
{
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, f, v);
}

void mean_sd(char *buf, size_t n, const summary *sm)
{
    if (sm->n < 2 || isnan(sm->sd))
        snprintf(buf, n, "%.4f (1 seed)", sm->mean);
    else
        snprintf(buf, n, "%.4f ± %.4f", sm->mean, sm->sd);
}

/* Whether a, b, c, d are the paper's four main arms (under one suffix:
 * pre-joint-go, post-joint-go, pre-grow-go, post-grow-go). */
static int paper_quadruple(const char (*q)[48])
{
    static const char *const base[4] = {"pre-joint", "post-joint", "pre-grow", "post-grow"};
    const char *suffix = NULL;
    for (int j = 0; j < 4; j++) {
        const size_t n = strlen(base[j]);
        if (strncmp(q[j], base[j], n) != 0)
            return 0;
        if (j == 0)
            suffix = q[j] + n;
        else if (strcmp(q[j] + n, suffix) != 0)
            return 0;
        if (*suffix && *suffix != '-')
            return 0;
    }
    return 1;
}

/* The arm of a design's levels lv (its name: the labels joined by '-'), or -1. */
static int cell_arm(const preset *p, const int *lv)
{
    const design *d = &p->design;
    char name[64] = "";
    for (int f = 0; f < d->n_factors; f++)
        snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", f ? "-" : "",
                 d->level[f][lv[f]]);
    for (int a = p->n_arms - d->n_cells; a >= 0 && a < p->n_arms; a++)
        if (strcmp(p->arms[a].name, name) == 0)
            return a;
    return -1;
}

int higher_sign(int order, int j)
{
    return (order - __builtin_popcount((unsigned)j)) % 2 ? -1 : 1;
}

int design_higher(const preset *p, higher_row *rows, int max)
{
    const design *d = &p->design;
    int n = 0;
    for (int m = 3; m <= d->n_factors; m++)
        for (unsigned set = 0; set < 1u << d->n_factors; set++) {
            if (__builtin_popcount(set) != m)
                continue;
            int fs[MAX_FACTORS], k = 0;
            for (int f = 0; f < d->n_factors; f++)
                if (set >> f & 1)
                    fs[k++] = f;
            for (int c = 0; c < d->n_cells; c++) {
                const int *cell = d->cell[c];
                int moved = 1;
                for (int i = 0; i < m; i++)
                    moved &= cell[fs[i]] != 0;
                if (!moved)
                    continue;
                higher_row h;
                memset(&h, 0, sizeof h);
                h.order = m;
                int ok = 1;
                for (int j = 0; j < 1 << m && ok; j++) {
                    int lv[MAX_FACTORS];
                    memcpy(lv, cell, sizeof lv);
                    for (int i = 0; i < m; i++)
                        lv[fs[i]] = j >> i & 1 ? cell[fs[i]] : 0;
                    ok = (h.arm[j] = cell_arm(p, lv)) >= 0;
                }
                if (!ok)
                    continue;
                if (n >= max)
                    return n;
                for (int i = 0; i < m; i++)
                    snprintf(h.label + strlen(h.label), sizeof h.label - strlen(h.label),
                             "%s%s (%s - %s)", i ? " x " : "", d->factor[fs[i]],
                             d->level[fs[i]][cell[fs[i]]], d->level[fs[i]][0]);
                int first = 1;
                for (int f = 0; f < d->n_factors; f++)
                    if (!(set >> f & 1)) {
                        snprintf(h.label + strlen(h.label), sizeof h.label - strlen(h.label),
                                 "%s%s %s", first ? " | " : ", ", d->factor[f],
                                 d->level[f][cell[f]]);
                        first = 0;
                    }
                rows[n++] = h;
            }
        }
    return n;
}

summary higher_summary(const study *s, const higher_row *h, double *x)
{
    const preset *p = s->p;
    summary sm = {0, 0, NAN, 0};
    for (int i = 0; i < p->seeds; i++)
        x[i] = 0;
    for (int j = 0; j < 1 << h->order; j++) {
        double f[MAX_SEEDS];
        if (finals(s, p->arms[h->arm[j]].name, f) != p->seeds)
            return sm;
        for (int i = 0; i < p->seeds; i++)
            x[i] += higher_sign(h->order, j) * f[i];
    }
    return summarise(x, p->seeds);
}

/* The names of a higher-order row's arms. */
static int higher_names(const preset *p, const higher_row *h, const char **names)
{
    for (int j = 0; j < 1 << h->order; j++)
        names[j] = p->arms[h->arm[j]].name;
    return 1 << h->order;
}


summary paired_summary(const study *s, const char *a, const char *b, double *d)
{
    summary sm = {0, 0, NAN, 0};
    const int n = paired(s, a, b, d);
    if (n)
        sm = summarise(d, n);
    return sm;
}

summary interaction_summary(const study *s, const char *a, const char *b, const char *c,
                            const char *d, double *x)
{
    summary sm = {0, 0, NAN, 0};
    const int n = paired_interaction(s, a, b, c, d, x);
    if (n)
        sm = summarise(x, n);
    return sm;
}

/* The preset's comparison k (arm - reference) and interaction k, by index. */
static summary comparison_k(const study *s, int k)
{
    double d[MAX_SEEDS];
    return paired_summary(s, s->p->compare[k][0], s->p->compare[k][1], d);
}

static summary interaction_k(const study *s, int k)
{
    const char(*q)[48] = s->p->interact[k];
    double x[MAX_SEEDS];
    return interaction_summary(s, q[0], q[1], q[2], q[3], x);
}

/* A row's p in the family: none (NaN) when it rests on an arm that did not
 * learn: it is not applicable, no test. */
static double family_p(const study *s, const char *const *names, int n, const summary *sm)
{
    char dnl[512];
    return not_learned(s, names, n, dnl, sizeof dnl) ? NAN : effect_p(sm, EQUIVALENCE_MARGIN);
}

int contrast_family(const study *s, double *adj)
{
    const preset *p = s->p;
    double pv[MAX_CONTRASTS];
    int n = 0;
    for (int k = 0; k < p->n_compare; k++) {
        const summary sm = comparison_k(s, k);
        const char *names[2] = {p->compare[k][0], p->compare[k][1]};
        pv[n++] = family_p(s, names, 2, &sm);
    }
    for (int k = 0; k < p->n_interact; k++) {
        const summary sm = interaction_k(s, k);
        const char *names[4] = {p->interact[k][0], p->interact[k][1], p->interact[k][2],
                                p->interact[k][3]};
        pv[n++] = family_p(s, names, 4, &sm);
    }
    higher_row hr[MAX_HIGHER];
    const int nh = p->design.n_factors ? design_higher(p, hr, MAX_HIGHER) : 0;
    for (int k = 0; k < nh; k++) {
        double x[MAX_SEEDS];
        const char *names[1 << MAX_FACTORS];
        const summary sm = higher_summary(s, &hr[k], x);
        const int m = higher_names(p, &hr[k], names);
        pv[n++] = family_p(s, names, m, &sm);
    }
    return holm(pv, n, adj);
}

/* ---- the tables' rows ------------------------------------------------------------------ */

void fmt_p(char *buf, size_t n, double p)
{
    if (isnan(p))
        snprintf(buf, n, "n/a");
    else if (p < 0.0001)
        snprintf(buf, n, "< 0.0001");
    else
        snprintf(buf, n, "%.4f", p);
}

void contrast_cells_fill(contrast_cells *c, const study *s, const char *const *names, int n,
                         const summary *sm, double adj)
{
    char dnl[512];
    fmt_num(c->lo, sizeof c->lo, sm->mean - sm->half, "%+.4f");
    fmt_num(c->hi, sizeof c->hi, sm->mean + sm->half, "%+.4f");
    fmt_num(c->half, sizeof c->half, sm->half, "%.4f");
    if (not_learned(s, names, n, dnl, sizeof dnl)) {
        snprintf(c->verdict, sizeof c->verdict, NOT_LEARNED_VERDICT ": %s", dnl);
        snprintf(c->absence, sizeof c->absence, "not applicable");
        snprintf(c->p, sizeof c->p, "n/a");
        return;
    }
    effect_cell(c->verdict, sizeof c->verdict, sm, EQUIVALENCE_MARGIN, 0);
    half_cell(c->absence, sizeof c->absence, sm);
    /* "p 0.0012, Holm 0.0150" (n/a without an interval) */
    const double pv = effect_p(sm, EQUIVALENCE_MARGIN);
    if (isnan(pv) || isnan(adj)) {
        snprintf(c->p, sizeof c->p, "n/a");
        return;
    }
    char a[32], b[32];
    fmt_p(a, sizeof a, pv);
    fmt_p(b, sizeof b, adj);
    snprintf(c->p, sizeof c->p, "p %s, Holm %s", a, b);
}

/* A contrast's row: head (its first cells, "| a | b"), its summary sm over
 * the arms names[0..n) and their cells (adj: its Holm-adjusted p), then
 * tail (more cells, or ""); "not run" when an arm did not run. */
static void contrast_row(FILE *f, const study *s, const char *head, const char *const *names,
                         int n, const summary *sm, double adj, const char *tail)
{
    if (!sm->n) {
        fprintf(f, "%s | not run | | 0 | not run | not run | n/a |%s\n", head, tail);
        return;
    }
    contrast_cells c;
    contrast_cells_fill(&c, s, names, n, sm, adj);
    fprintf(f, "%s | %+.4f ± %s | [%s, %s] | %d | %s | %s | %s |%s\n", head, sm->mean, c.half,
            c.lo, c.hi, sm->n, c.verdict, c.absence, c.p, tail);
}

/* Row k of the comparisons, paired by seed; label: the design's label first;
 * adj: its Holm-adjusted p (contrast_family). */
static void comparison_row(FILE *f, const study *s, int k, int label, double adj)
{
    const preset *p = s->p;
    char head[512];
    snprintf(head, sizeof head, "| %s%s%s | %s", label ? design_compare_label(p, k) : "",
             label ? " | " : "", p->compare[k][1], p->compare[k][0]);
    const char *names[2] = {p->compare[k][0], p->compare[k][1]};
    const summary sm = comparison_k(s, k);
    contrast_row(f, s, head, names, 2, &sm, adj, "");
}

/* Row k of the interactions, paired by seed: I = (d - c) - (b - a); the
 * paper's number only on its own arms; label: the design's label first (and
 * no paper column). */
static void interaction_row(FILE *f, const study *s, int k, int label, double adj)
{
    const preset *p = s->p;
    const char(*q)[48] = p->interact[k];
    char head[512], paper[32] = "";
    snprintf(head, sizeof head, "| %s%s%s | %s | %s | %s", label ? design_interact_label(p, k) : "",
             label ? " | " : "", q[0], q[1], q[2], q[3]);
    if (!label)
        snprintf(paper, sizeof paper, paper_quadruple(q) ? " %+.4f |" : " |", PAPER_INTERACTION);
    const char *names[4] = {q[0], q[1], q[2], q[3]};
    const summary sm = interaction_k(s, k);
    contrast_row(f, s, head, names, 4, &sm, adj, paper);
}

/* A design's interaction of order 3 or more; adj: its Holm-adjusted p. */
static void higher_table_row(FILE *f, const study *s, const higher_row *h, double adj)
{
    double x[MAX_SEEDS];
    const char *names[1 << MAX_FACTORS];
    const int m = higher_names(s->p, h, names);
    char head[1400];
    snprintf(head, sizeof head, "| %s | %d | ", h->label, h->order);
    for (int j = 0; j < m; j++)
        snprintf(head + strlen(head), sizeof head - strlen(head), "%s%s%s", j ? ", " : "",
                 higher_sign(h->order, j) > 0 ? "+" : "-", names[j]);
    const summary sm = higher_summary(s, h, x);
    contrast_row(f, s, head, names, m, &sm, adj, "");
}

/* ---- the tables ----------------------------------------------------------------------- */

/* The design's interactions of order 3 and more (design_higher), their p
 * Holm-adjusted in adj (after the comparisons and the 2-way interactions). */
static void higher_tables(FILE *f, const study *s, const double *adj)
{
    const preset *p = s->p;
    higher_row hr[MAX_HIGHER];
    const int nh = design_higher(p, hr, MAX_HIGHER);
    if (!nh)
        return;
    fprintf(f, "\n### The design's interactions of order 3 and more (paired by seed)\n\nFor "
               "factors F1, ..., Fm, each moved from its reference to the level named and the "
               "others held: I = the interaction of F1, ..., F(m-1) with Fm at its level minus "
               "the same with Fm at its reference, the difference of the lower-order "
               "interactions across the last factor's levels; over the 2^m arms, the sum of each "
               "arm's val CE with the sign (-1)^(factors at their reference), per seed. The arms "
               "are listed with the factors' bits counting up (the first factor fastest: all at "
               "the reference first, all moved last).\n\n| interaction | order | arms | I (mean "
               "± 95%% CI half-width) | 95%% CI | seeds | verdict | at ±%.4f | p (Holm) "
               "|\n|---|---|---|---|---|---|---|---|---|\n",
            ABSENCE_MARGIN);
    for (int k = 0; k < nh; k++)
        higher_table_row(f, s, &hr[k], adj[p->n_compare + p->n_interact + k]);
}

/* A design's arms by level: each cell's val CE over its seeds. */
static void design_arms(FILE *f, const study *s)
{
    const design *d = &s->p->design;
    double x[MAX_SEEDS];
    fprintf(f, "\n## The design\n\nFactors:");
    for (int g = 0; g < d->n_factors; g++) {
        fprintf(f, "%s %s (", g ? ";" : "", d->factor[g]);
        for (int l = 0; l < d->n_levels[g]; l++)
            fprintf(f, "%s%s%s", l ? ", " : "", d->level[g][l], l ? "" : ", the reference");
        fprintf(f, ")");
    }
    fprintf(f, ". Each arm is one level of each factor, named by its levels.\n\n|");
    for (int g = 0; g < d->n_factors; g++)
        fprintf(f, " %s |", d->factor[g]);
    fprintf(f, " arm | val CE (mean ± sd) | seeds |\n|");
    for (int g = 0; g < d->n_factors + 3; g++)
        fprintf(f, "---|");
    fprintf(f, "\n");
    for (int k = 0; k < d->n_cells; k++) {
        char name[64] = "";
        fprintf(f, "|");
        for (int g = 0; g < d->n_factors; g++) {
            fprintf(f, " %s |", d->level[g][d->cell[k][g]]);
            snprintf(name + strlen(name), sizeof name - strlen(name), "%s%s", g ? "-" : "",
                     d->level[g][d->cell[k][g]]);
        }
        const int n = finals(s, name, x);
        char ms[64] = "not run";
        if (n) {
            summary sm = summarise(x, n);
            mean_sd(ms, sizeof ms, &sm);
        }
        fprintf(f, " %s | %s | %d |\n", name, ms, n);
    }
}

/* What a table of contrasts says when there is one seed. */
static void one_seed_words(FILE *f, const preset *p)
{
    if (p->seeds == 1)
        fprintf(f, "\nWith one seed there is no interval (n/a): a single run cannot tell a "
                   "difference from seed noise.\n");
}

/* A design's own tables: its arms by level, its comparisons and its
 * interactions, labelled with its factors and levels. */
static void design_tables(FILE *f, const study *s, const double *adj)
{
    const preset *p = s->p;
    const design *d = &p->design;
    design_arms(f, s);
    if (d->n_compare) {
        fprintf(f, "\n### The design's comparisons (paired by seed)\n\nEach factor's levels "
                   "against its first, the other factors held at the levels named.\n\n| "
                   "contrast | arm | reference | arm - reference (mean ± 95%% CI half-width) | "
                   "95%% CI | seeds | verdict | at ±%.4f | p (Holm) |\n|---|---|---|---|---|---|---|---|---|\n",
                ABSENCE_MARGIN);
        for (int k = d->compare_from; k < d->compare_from + d->n_compare; k++)
            comparison_row(f, s, k, 1, adj[k]);
    }
    if (d->n_interact) {
        fprintf(f, "\n### The design's interactions (paired by seed)\n\nFor factors F and G, "
                   "the arms a (both at their first level), b (F moved), c (G moved) and d "
                   "(both moved): I = (d - c) - (b - a), how much F's effect changes when G "
                   "moves.\n\n| interaction | a | b | c | d | I (mean ± 95%% CI half-width) | "
                   "95%% CI | seeds | verdict | at ±%.4f | p (Holm) |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                ABSENCE_MARGIN);
        for (int k = d->interact_from; k < d->interact_from + d->n_interact; k++)
            interaction_row(f, s, k, 1, adj[p->n_compare + k]);
    }
    higher_tables(f, s, adj);
    one_seed_words(f, p);
}

void contrast_tables(FILE *f, const study *s, const double *adj)
{
    const preset *p = s->p;
    /* the comparisons the preset asks for, paired by seed; a design's in a table of its own */
    const int own_cmp = p->design.n_factors ? p->design.compare_from : p->n_compare;
    const int own_int = p->design.n_factors ? p->design.interact_from : p->n_interact;
    if (own_cmp > 0) {
        fprintf(f, "\n## Comparisons the preset asks for (paired by seed)\n\n| arm | reference | "
                   "arm - reference (mean ± 95%% CI half-width) | 95%% CI | seeds | verdict "
                   "| at ±%.4f | p (Holm) |\n|---|---|---|---|---|---|---|---|\n", ABSENCE_MARGIN);
        for (int k = 0; k < own_cmp; k++)
            comparison_row(f, s, k, 0, adj[k]);
        one_seed_words(f, p);
    }
    /* the interactions the preset asks for, paired by seed */
    if (own_int > 0)
        fprintf(f, "\n## Interactions the preset asks for (paired by seed)\n\nEach row lists "
                   "its arms as a, b, c, d: I = (d - c) - (b - a), the change from a to b "
                   "and from c to d compared (for the paper's arms, a to d are pre joint, "
                   "post joint, pre grow, post grow: I = (post grow - pre grow) - (post "
                   "joint - pre joint)). The paper's column holds its number only on its "
                   "own arms.\n\n| a | b | c | d | I (mean ± 95%% CI half-width) | 95%% CI | "
                   "seeds | verdict | at ±%.4f | p (Holm) | paper |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                ABSENCE_MARGIN);
    for (int k = 0; k < own_int; k++)
        interaction_row(f, s, k, 0, adj[p->n_compare + k]);
    if (p->design.n_factors)
        design_tables(f, s, adj);
}
