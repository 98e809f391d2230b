/* report.md: the study in words and tables beside the paper's numbers, and its files. */
#include "report.h"

#include "design.h"

#include <sys/stat.h>

#include "files.h"
#include "paper.h"
#include "preset.h"
#include "results.h"
#include "rules.h"
#include "runs.h"
#include "stats.h"
#include "verdicts.h"

void fmt_num(char *buf, size_t n, double v, const char *f)
{
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, f, v);
}

/* Batches in one pass over the training text at the students' rows: the
 * batch that ends the pass counts whole. */
int64_t batches_per_pass(const preset *p)
{
    lattice_data *d = open_data(p, 1);
    lattice_data_batch b;
    lattice_data_position pos = {0, 0};
    int64_t n = 0;
    while (pos.epoch == 0) {
        check(lattice_data_next(d, &b), "data", lattice_data_errmsg(d));
        check(lattice_data_get_position(d, &pos), "data", lattice_data_errmsg(d));
        n++;
    }
    lattice_data_destroy(d);
    /* a pass of whole batches turns the epoch only at the next call: that
     * batch, all of the next pass, is not this pass's */
    return pos.index == p->batch && n > 1 ? n - 1 : n;
}

/* The most batches an arm reads from one place in the text without a rewind. */
int64_t longest_read(const preset *p, const arm *a)
{
    lattice_schedule_phase ph[MAX_PHASES];
    const int n = arm_phases(p, a, ph);
    int64_t run = 0, most = 0;
    for (int k = 0; k < n; k++) {
        run = (ph[k].rewind_data ? 0 : run) + ph[k].steps;
        most = run > most ? run : most;
    }
    return most;
}

/* Arms that read past the end of the training text: what they read after it
 * is the same text again, reshuffled, not new text. */
static void data_passes(FILE *f, const preset *p)
{
    const int64_t pass = batches_per_pass(p);
    int told = 0;
    for (int i = 0; i < p->n_arms; i++) {
        const arm *a = &p->arms[i];
        const int64_t most = longest_read(p, a);
        if (most <= pass)
            continue;
        if (!told++)
            fprintf(f, "Data: one pass over the training text is %lld batches of %d x %d bytes. "
                       "These arms read on past its end, where the text repeats in a new order: "
                       "beyond the first pass their \"fresh\" data is text they have seen.\n\n",
                    (long long)pass, p->batch, p->seq_len);
        fprintf(f, "- `%s`: %lld steps without a rewind, %.2f passes\n", a->name, (long long)most,
                (double)most / (double)pass);
    }
    if (told)
        fprintf(f, "\n");
}

/* A JSON member that is a string, or NULL. */
static const char *member_string(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v)
               : NULL;
}

/* The held-out text in words: its path, and the titles of its novels when a
 * manifest.json beside it (examples/data/prepare_austen.py writes one) lists
 * this very file (its name and size) as a split. */
static const char *val_text(const preset *p, char *buf, size_t n)
{
    char cwd[1024], man[1100];
    const size_t c = getcwd(cwd, sizeof cwd) ? strlen(cwd) : 0;
    const int inside = c > 0 && strncmp(p->val, cwd, c) == 0 && p->val[c] == '/';
    snprintf(buf, n, "%s", inside ? p->val + c + 1 : p->val); /* relative to here when inside */
    const char *slash = strrchr(p->val, '/'), *base = slash ? slash + 1 : p->val;
    snprintf(man, sizeof man, "%.*smanifest.json", (int)(base - p->val), p->val);
    json_object *m = access(man, R_OK) == 0 ? json_object_from_file(man) : NULL;
    json_object *files, *file, *bytes, *novels;
    struct stat st;
    char split[256];
    const char *dot = strrchr(base, '.');
    snprintf(split, sizeof split, "%.*s", dot ? (int)(dot - base) : (int)strlen(base), base);
    if (m && json_object_object_get_ex(m, "files", &files) &&
        json_object_object_get_ex(files, base, &file) &&
        json_object_object_get_ex(file, "bytes", &bytes) &&
        json_object_is_type(bytes, json_type_int) && stat(p->val, &st) == 0 &&
        json_object_get_int64(bytes) == (int64_t)st.st_size &&
        json_object_object_get_ex(m, "novels", &novels) &&
        json_object_is_type(novels, json_type_object)) {
        int k = 0;
        json_object_object_foreach(novels, key, v)
        {
            (void)key;
            const char *sp = member_string(v, "split"), *title = member_string(v, "title");
            if (sp && title && strcmp(sp, split) == 0)
                snprintf(buf + strlen(buf), n - strlen(buf), "%s%s", k++ ? ", " : " (", title);
        }
        if (k)
            snprintf(buf + strlen(buf), n - strlen(buf), ")");
    }
    json_object_put(m);
    return buf;
}

/* "mean ± sd" over seeds; with one seed there is no spread to give: "mean (1 seed)". */
static void mean_sd(char *buf, size_t n, const summary *sm)
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

/* The paired differences of comparison k (arm - reference) and interaction
 * k (I), summarised; n 0 when an arm did not run. */
static summary comparison_summary(const study *s, int k)
{
    double d[MAX_SEEDS];
    summary sm = {0, 0, NAN, 0};
    const int n = paired(s, s->p->compare[k][0], s->p->compare[k][1], d);
    if (n)
        sm = summarise(d, n);
    return sm;
}

static summary interaction_summary(const study *s, int k)
{
    const char(*q)[48] = s->p->interact[k];
    double x[MAX_SEEDS];
    summary sm = {0, 0, NAN, 0};
    const int n = paired_interaction(s, q[0], q[1], q[2], q[3], x);
    if (n)
        sm = summarise(x, n);
    return sm;
}

/* The preset's comparisons and interactions (its own and its design's) as
 * one family: each row's p (effect_p at the margin) and Holm's adjustment
 * over all of them, comparisons first in adj[0..n_compare), then the
 * interactions. Returns the family's size. */
#define MAX_CONTRASTS (MAX_ARMS + MAX_INTERACT + MAX_HIGHER)

static int contrast_family(const study *s, double *adj)
{
    const preset *p = s->p;
    double pv[MAX_CONTRASTS];
    char dnl[512];
    int n = 0;
    /* a row that rests on an arm that did not learn is not applicable: no test */
    for (int k = 0; k < p->n_compare; k++) {
        const summary sm = comparison_summary(s, k);
        const char *names[2] = {p->compare[k][0], p->compare[k][1]};
        pv[n++] = not_learned(s, names, 2, dnl, sizeof dnl) ? NAN : effect_p(&sm, EQUIVALENCE_MARGIN);
    }
    for (int k = 0; k < p->n_interact; k++) {
        const summary sm = interaction_summary(s, k);
        const char *names[4] = {p->interact[k][0], p->interact[k][1], p->interact[k][2],
                                p->interact[k][3]};
        pv[n++] = not_learned(s, names, 4, dnl, sizeof dnl) ? NAN : effect_p(&sm, EQUIVALENCE_MARGIN);
    }
    higher_row hr[MAX_HIGHER];
    const int nh = p->design.n_factors ? design_higher(p, hr, MAX_HIGHER) : 0;
    for (int k = 0; k < nh; k++) {
        double x[MAX_SEEDS];
        const char *names[1 << MAX_FACTORS];
        const summary sm = higher_summary(s, &hr[k], x);
        const int m = higher_names(p, &hr[k], names);
        pv[n++] = not_learned(s, names, m, dnl, sizeof dnl) ? NAN : effect_p(&sm, EQUIVALENCE_MARGIN);
    }
    return holm(pv, n, adj);
}

/* The verdict cells of a row that rests on an arm that did not learn. */
static void not_learned_cells(char *cell, size_t n1, char *hc, size_t n2, char *pc, size_t n3,
                              const char *names)
{
    snprintf(cell, n1, NOT_LEARNED_VERDICT ": %s", names);
    snprintf(hc, n2, "not applicable");
    snprintf(pc, n3, "n/a");
}

/* "p 0.0012, Holm 0.0150" (n/a without an interval). */
static void p_cell(char *buf, size_t n, const summary *sm, double adj)
{
    const double pv = effect_p(sm, EQUIVALENCE_MARGIN);
    if (isnan(pv) || isnan(adj)) {
        snprintf(buf, n, "n/a");
        return;
    }
    char a[32], b[32];
    if (pv < 0.0001)
        snprintf(a, sizeof a, "< 0.0001");
    else
        snprintf(a, sizeof a, "%.4f", pv);
    if (adj < 0.0001)
        snprintf(b, sizeof b, "< 0.0001");
    else
        snprintf(b, sizeof b, "%.4f", adj);
    snprintf(buf, n, "p %s, Holm %s", a, b);
}

/* Row k of the comparisons, paired by seed; label: the design's label first;
 * adj: its Holm-adjusted p (contrast_family). */
static void comparison_row(FILE *f, const study *s, int k, int label, double adj)
{
    const preset *p = s->p;
    double d[MAX_SEEDS];
    char b1[64], b2[64], half[32], cell[700], lab[256] = "";
    if (label)
        snprintf(lab, sizeof lab, "%s | ", design_compare_label(p, k));
    const int n = paired(s, p->compare[k][0], p->compare[k][1], d);
    if (!n) {
        fprintf(f, "| %s%s | %s | not run | | 0 | not run | not run | n/a |\n", lab,
                p->compare[k][1], p->compare[k][0]);
        return;
    }
    summary sm = summarise(d, n);
    char hc[160], pc[96], dnl[512];
    fmt_num(b1, sizeof b1, sm.mean - sm.half, "%+.4f");
    fmt_num(b2, sizeof b2, sm.mean + sm.half, "%+.4f");
    fmt_num(half, sizeof half, sm.half, "%.4f");
    const char *names[2] = {p->compare[k][0], p->compare[k][1]};
    if (not_learned(s, names, 2, dnl, sizeof dnl))
        not_learned_cells(cell, sizeof cell, hc, sizeof hc, pc, sizeof pc, dnl);
    else
        effect_cell(cell, sizeof cell, &sm, EQUIVALENCE_MARGIN, 0),
            half_cell(hc, sizeof hc, &sm), p_cell(pc, sizeof pc, &sm, adj);
    fprintf(f, "| %s%s | %s | %+.4f ± %s | [%s, %s] | %d | %s | %s | %s |\n", lab, p->compare[k][1],
            p->compare[k][0], sm.mean, half, b1, b2, n, cell, hc, pc);
}

/* Row k of the interactions, paired by seed: I = (d - c) - (b - a); the
 * paper's number only on its own arms; label: the design's label first (and
 * no paper column). */
static void interaction_row(FILE *f, const study *s, int k, int label, double adj)
{
    const preset *p = s->p;
    const char(*q)[48] = p->interact[k];
    char b1[64], b2[64], half[32], cell[700], lab[256] = "", paper[32] = "";
    if (label)
        snprintf(lab, sizeof lab, "%s | ", design_interact_label(p, k));
    else
        snprintf(paper, sizeof paper, paper_quadruple(q) ? " %+.4f |" : " |", PAPER_INTERACTION);
    double dg[MAX_SEEDS];
    const int n = paired_interaction(s, q[0], q[1], q[2], q[3], dg);
    if (!n) {
        fprintf(f, "| %s%s | %s | %s | %s | not run | | 0 | not run | not run | n/a |%s\n", lab,
                q[0], q[1], q[2], q[3], paper);
        return;
    }
    summary sm = summarise(dg, n);
    char hc[160], pc[96], dnl[512];
    fmt_num(b1, sizeof b1, sm.mean - sm.half, "%+.4f");
    fmt_num(b2, sizeof b2, sm.mean + sm.half, "%+.4f");
    fmt_num(half, sizeof half, sm.half, "%.4f");
    const char *names[4] = {q[0], q[1], q[2], q[3]};
    if (not_learned(s, names, 4, dnl, sizeof dnl))
        not_learned_cells(cell, sizeof cell, hc, sizeof hc, pc, sizeof pc, dnl);
    else
        effect_cell(cell, sizeof cell, &sm, EQUIVALENCE_MARGIN, 0),
            half_cell(hc, sizeof hc, &sm), p_cell(pc, sizeof pc, &sm, adj);
    fprintf(f, "| %s%s | %s | %s | %s | %+.4f ± %s | [%s, %s] | %d | %s | %s | %s |%s\n", lab,
            q[0], q[1], q[2], q[3], sm.mean, half, b1, b2, n, cell, hc, pc, paper);
}

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
    for (int k = 0; k < nh; k++) {
        double x[MAX_SEEDS];
        const char *names[1 << MAX_FACTORS];
        const int m = higher_names(p, &hr[k], names);
        char arms[1024] = "", cell[600], hc[160], pc[96], dnl[512], b1[64], b2[64], half[32];
        for (int j = 0; j < m; j++)
            snprintf(arms + strlen(arms), sizeof arms - strlen(arms), "%s%s%s", j ? ", " : "",
                     higher_sign(hr[k].order, j) > 0 ? "+" : "-", names[j]);
        const summary sm = higher_summary(s, &hr[k], x);
        if (!sm.n) {
            fprintf(f, "| %s | %d | %s | not run | | 0 | not run | not run | n/a |\n",
                    hr[k].label, hr[k].order, arms);
            continue;
        }
        fmt_num(b1, sizeof b1, sm.mean - sm.half, "%+.4f");
        fmt_num(b2, sizeof b2, sm.mean + sm.half, "%+.4f");
        fmt_num(half, sizeof half, sm.half, "%.4f");
        if (not_learned(s, names, m, dnl, sizeof dnl))
            not_learned_cells(cell, sizeof cell, hc, sizeof hc, pc, sizeof pc, dnl);
        else
            effect_cell(cell, sizeof cell, &sm, EQUIVALENCE_MARGIN, 0),
                half_cell(hc, sizeof hc, &sm),
                p_cell(pc, sizeof pc, &sm, adj[p->n_compare + p->n_interact + k]);
        fprintf(f, "| %s | %d | %s | %+.4f ± %s | [%s, %s] | %d | %s | %s | %s |\n", hr[k].label,
                hr[k].order, arms, sm.mean, half, b1, b2, sm.n, cell, hc, pc);
    }
}

/* A design's own tables: its arms by level, its comparisons and its
 * interactions, labelled with its factors and levels. */
static void design_tables(FILE *f, const study *s, const double *adj)
{
    const preset *p = s->p;
    const design *d = &p->design;
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
    if (p->seeds == 1)
        fprintf(f, "\nWith one seed there is no interval (n/a): a single run cannot tell a "
                   "difference from seed noise.\n");
}


/* What the row-start token is here, and how it stands to the paper's
 * document-boundary tokens. */
static void row_start_words(FILE *f, const preset *p)
{
    fprintf(f, "**The row-start token.** The boundary statistics here are about position 0 of "
               "each row, the row-start token. %s Position 0 attends only to itself and RoPE is "
               "the identity there, so its residual stream is one fixed vector per model, the "
               "same in every row. The paper's boundary tokens open whole documents: its rows are "
               "documents of about 1k tokens on average, right-padded.\n\n",
            p->split_long
                ? "With split_long, documents are cut into pieces of one row each, and every "
                  "piece opens with the separator token (256): most rows start in the middle of "
                  "a document, and the row-start token is that separator."
                : "Each row is one document, truncated at the row's length or right-padded to "
                  "it, so the row-start token is the boundary token (256) that opens every "
                  "document.");
    if (strcmp(p->separator, "\f") != 0)
        fprintf(f, "Documents are the text between separators of %zu bytes (data.separator), "
                   "not the corpus's chapters.\n\n", strlen(p->separator));
}

/* The students' attention sinks and massive activations at their last
 * evaluation (mean over seeds), or why a run has none. */
static void students_sinks(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Attention sinks and massive activations in the students (last evaluation, "
               "mean over seeds)\n\nOn the first validation batch, over the active layers: the "
               "attention mass on position 0 (mean over layers), the largest share of sink heads "
               "(mass above %.1f), the largest |activation| over the median, and the smallest "
               "value-norm ratio of position 0. The teacher's are in its go/no-go table above.\n\n"
               "| arm | mass on position 0 | sink heads | top / median | value norm ratio |\n"
               "|---|---|---|---|---|\n",
            SINK_THRESHOLD);
    int unmeasured = 0;
    for (int a = 0; a < p->n_arms; a++) {
        double v[4] = {0, 0, 0, 0};
        int ok = 1;
        for (int i = 0; i < p->seeds && ok; i++) {
            const run_result *r = s->res[a][i];
            if (r->n_pts == 0 || !isfinite(r->sinks[r->n_pts - 1].mass0)) {
                ok = 0;
                break;
            }
            const sink_point *sp = &r->sinks[r->n_pts - 1];
            v[0] += sp->mass0 / p->seeds;
            v[1] += sp->sink_rate / p->seeds;
            v[2] += sp->top_ratio / p->seeds;
            v[3] += sp->value_norm0 / p->seeds;
        }
        if (ok)
            fprintf(f, "| %s | %.3f | %.0f%% | %.1f | %.2f |\n", p->arms[a].name, v[0],
                    100 * v[1], v[2], v[3]);
        else
            fprintf(f, "| %s | not measured | | | |\n", p->arms[a].name), unmeasured++;
    }
    if (unmeasured)
        fprintf(f, "\nNot measured: runs kept from 0.3, whose trajectory did not carry these "
                   "figures yet; a kept run cannot gain them without running again.\n");
}

/* The unigram baseline under the table of every arm, and the arms that did
 * not learn by its rule (results.h). */
static void baseline_words(FILE *f, const study *s, double unigram)
{
    const preset *p = s->p;
    char u[32], t[32];
    fmt_num(u, sizeof u, unigram, "%.4f");
    fmt_num(t, sizeof t, unigram - LEARN_MARGIN, "%.4f");
    fprintf(f, "\nBaseline: the unigram CE of the held-out text is **%s** nats/byte, the "
               "cross-entropy of its targets under the byte (token) frequencies of one pass over "
               "the training text at the students' rows (add-one smoothed over the 257 tokens), "
               "counted as the final evaluation counts (its batches, padding masked, "
               "token-weighted): what a model of byte frequencies alone scores. An arm whose mean "
               "val CE is above the unigram CE minus %.1f nats/byte (%s) did not learn, and is "
               "flagged so in the table; ",
            u, LEARN_MARGIN, t);
    int flagged = 0;
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        const summary sm = summarise(x, finals(s, p->arms[a].name, x));
        if (did_not_learn(sm.mean, unigram))
            fprintf(f, "%s`%s` (%.4f)", flagged++ ? ", " : "here these did not learn: ",
                    p->arms[a].name, sm.mean);
    }
    fprintf(f, "%s.\n", flagged ? " (a comparison with one of them sets a model that barely "
                                   "learned beside one that did)"
                                 : "here every arm learned");
}

static const char *kl_words(int direction)
{
    return direction == LATTICE_DISTILL_KL_REVERSE ? "reverse KL(student || teacher)"
                                                   : "forward KL(teacher || student)";
}

/* Every training setting of the preset, and each arm's where they differ
 * from it (peak LRs as run). */
static void settings_words(FILE *f, const preset *p)
{
    char shape[96], b2[32];
    if (p->beta2 < 0)
        snprintf(b2, sizeof b2, "the library's");
    else
        snprintf(b2, sizeof b2, "%g", p->beta2);
    fprintf(f, "Every run's training settings (an arm's own, where it has any, are listed below): "
               "%d steps per phase; %s LR, peak %.3g, floor %.3g, after %d warmup steps; weight "
               "decay %g, beta2 %s, gradient clip %g; the loss alpha x tau^2 x KL + gamma x CE "
               "with alpha %g, gamma %g, tau %g, %s; evaluation every %d steps over %d "
               "batches, the final one over %s; rows of %d x %d bytes, split_long %d; backend "
               "%s, %d thread%s per run.\n\n",
            p->steps_per_phase, lr_shape_words(p->lr, p->min_lr, p->decay, shape, sizeof shape),
            p->lr, p->min_lr, p->warmup, p->weight_decay, b2, p->clip, p->alpha, p->gamma,
            p->tau, kl_words(p->kl_direction), p->eval_every,
            p->eval_batches, p->final_eval_batches ? "its first batches" : "the whole held-out text",
            p->batch, p->seq_len, p->split_long, p->backend, p->threads,
            p->threads == 1 ? "" : "s");
    /* the rewind rule: said per arm only where the arms differ in it */
    int rewinds = 0;
    for (int i = 0; i < p->n_arms; i++)
        rewinds += p->arms[i].rewind_data != 0;
    const int rewind_differs = rewinds > 0 && rewinds < p->n_arms;
    int own = 0;
    for (int i = 0; i < p->n_arms; i++) {
        const arm *a = &p->arms[i];
        char more[600] = "";
#define MORE(...) snprintf(more + strlen(more), sizeof more - strlen(more), __VA_ARGS__)
        if (a->steps_per_phase != p->steps_per_phase)
            MORE("; %d steps per phase", a->steps_per_phase);
        if (a->clip != p->clip)
            MORE("; gradient clip %g", a->clip);
        if (a->alpha != p->alpha || a->gamma != p->gamma)
            MORE("; loss alpha %g, gamma %g%s", a->alpha, a->gamma,
                 a->alpha == 0 ? " (cross-entropy only)" : "");
        if (a->tau != p->tau)
            MORE("; tau %g", a->tau);
        if (a->kl_direction != p->kl_direction)
            MORE("; %s", kl_words(a->kl_direction));
        if (a->beta2 != p->beta2)
            MORE("; beta2 %g", a->beta2);
#undef MORE
        if (!a->train_json[0] && !more[0])
            continue;
        if (!own++)
            fprintf(f, "Arms whose settings differ from these (peak LRs as run):\n\n");
        if (a->train_json[0]) {
            const double scale = a->lr_given ? 1.0 : arm_std(p, a) / p->init_std;
            fprintf(f, "- `%s`: %s LR %.3g after %d warmup steps, weight decay %g%s\n", a->name,
                    lr_shape_words(a->lr * scale, a->min_lr * scale, a->decay, shape,
                                   sizeof shape),
                    a->lr * scale, a->warmup, a->weight_decay, more);
        } else {
            fprintf(f, "- `%s`: %s\n", a->name, more + 2);
        }
    }
    if (own)
        fprintf(f, "\n");
    if (rewind_differs) { /* which arms restart the data at each phase, which read on */
        for (int pass = 1; pass >= 0; pass--) {
            fprintf(f, "%s", pass ? "Data rewound to the shard's start at every phase: "
                                  : "; read on at phase starts (no rewind): ");
            for (int i = 0, k = 0; i < p->n_arms; i++)
                if ((p->arms[i].rewind_data != 0) == pass)
                    fprintf(f, "%s`%s`", k++ ? ", " : "", p->arms[i].name);
        }
        fprintf(f, ".\n\n");
    }
}

void report(FILE *f, const study *s)
{
    const preset *p = s->p;
    double x[MAX_SEEDS], y[MAX_SEEDS], d[MAX_SEEDS];
    char b1[64], b2[64], shape[96], t_shape[96], val[1400];
    fprintf(f, "# Reproduction: preset `%s`\n\n", p->name);
    fprintf(f, "Students: %d layers (%d blocks x %d), d_model %d, %d heads (%d kv) of %d, d_ff %d, "
               "init std %.4g (gain %.3g / sqrt(d_model)), peak LR %.3g; %d steps per phase, batch "
               "%d x %d bytes; %d paired seed%s; students' recipe: %s LR, weight decay %g. "
               "Teacher: %d layers, init std %.4g, %d steps of %d x %d bytes, %s LR %.3g, weight "
               "decay %g. Validation CE in nats per byte at the scheduled end, over %s%s.\n\n",
            p->blocks * p->block_size, p->blocks, p->block_size, p->d_model, p->heads, p->kv_heads,
            p->head_dim, p->d_ff, p->init_std, p->init_gain, p->lr, p->steps_per_phase, p->batch,
            p->seq_len, p->seeds, p->seeds == 1 ? "" : "s",
            lr_shape_words(p->lr, p->min_lr, p->decay, shape, sizeof shape), p->weight_decay,
            p->t_layers, p->t_init_std, p->t_steps, p->t_batch, p->t_seq_len,
            lr_shape_words(p->t_lr, p->t_min_lr, p->t_decay, t_shape, sizeof t_shape), p->t_lr,
            p->t_weight_decay,
            p->final_eval_batches ? "the first batches of the held-out text (final_eval_batches): "
                                  : "the whole held-out text: ",
            val_text(p, val, sizeof val));
    settings_words(f, p);
    data_passes(f, p);
    row_start_words(f, p);
    verdicts(f, s);
    fprintf(f, "## Teacher go/no-go\n\nOn the first validation batch, after each layer: the per-token RMS of the teacher's residual stream, row-start tokens against regular ones; the attention mass queries put on position 0 (mean over heads) and the share of heads above %.1f (sink heads); the largest |activation| over the median, and where it sits (row x seq + position : dimension); position 0's value norm over the others'.\n\n| after layer | row-start RMS | regular RMS | ratio | kurtosis (all tokens) | mass on position 0 | sink heads | top / median | at | value norm ratio |\n|---|---|---|---|---|---|---|---|---|---|\n",
            SINK_THRESHOLD);
    for (int k = 1; k < s->teacher.n; k++)
        fprintf(f, "| %d | %.3f | %.3f | %.2f | %.1f | %.3f | %.0f%% | %.1f | %lld:%d | %.2f |\n", k,
                s->teacher.boundary[k], s->teacher.regular[k], s->teacher.ratio[k],
                s->teacher.kurt[k], s->teacher.mass0[k], 100 * s->teacher.sink_rate[k],
                s->teacher.top_ratio[k], (long long)s->teacher.top_token[k], s->teacher.top_dim[k],
                s->teacher.value_norm0[k]);
    const double unigram = unigram_ce(p);
    fprintf(f, "\n## Every arm\n\n| arm | val CE (mean ± sd) | seeds | tokens/s | paper (nats/token, Qwen3 tokens) |\n|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        finals(s, p->arms[a].name, x);
        summary sm = summarise(x, p->seeds);
        double tps = 0;
        for (int i = 0; i < p->seeds; i++)
            tps += s->res[a][i]->tokens_per_s / p->seeds;
        fmt_num(b1, sizeof b1, paper_value(p->arms[a].name), "%.4f");
        char ms[64];
        mean_sd(ms, sizeof ms, &sm);
        fprintf(f, "| %s | %s%s | %d | %.0f | %s |\n", p->arms[a].name, ms,
                did_not_learn(sm.mean, unigram) ? ", **did not learn**" : "", p->seeds, tps, b1);
    }
    baseline_words(f, s, unigram);
    /* Table 1: post - pre per regime, paired by seed, and the interaction */
    char cell[700], hc[160];
    const int table1 = arm_index(s, "pre-joint") >= 0 || arm_index(s, "post-joint") >= 0 ||
                       arm_index(s, "pre-grow") >= 0 || arm_index(s, "post-grow") >= 0;
    double adj[MAX_CONTRASTS];
    const int family = contrast_family(s, adj);
    fprintf(f, "\n## %s\n\nThe verdict column of %s comparison "
               "and interaction tables below: below 0 or above 0 when the 95%% interval excludes 0; within the paper's effect when the 90%% interval lies within ±%.4f "
               "nats/byte (delta, the equivalence margin, examples/reproduce/rules.h: the paper's grow "
               "effect of %.4f nats per Qwen3 token at an assumed %.0f bytes per token; its interaction is %.4f nats/byte): smaller than the "
               "paper's effect, not absent; else inconclusive, with the "
               "effects the 95%% interval still allows in multiples of that margin. The next column "
               "reads the same interval at half the margin, ±%.4f: only a row equivalent there shows "
               "an effect absent. The comparisons and interactions the preset asks for are one "
               "family of %d: each row's p is that of the test its verdict reads (the two-sided t "
               "test against 0 for a direction, the two one-sided tests at ±%.4f for a row within it, "
               "for an undecided row the smaller of the two), beside Holm's adjustment over the "
               "family; a verdict holds for the family only where its Holm p is below 0.05.\n\n",
            table1 ? "Table 1 analogue" : "How the tables below read",
            table1 ? "this table and of the" : "the",
            EQUIVALENCE_MARGIN, PAPER_GROW_EFFECT_PER_TOKEN, PAPER_BYTES_PER_TOKEN,
            -PAPER_INTERACTION / PAPER_BYTES_PER_TOKEN, ABSENCE_MARGIN, family,
            EQUIVALENCE_MARGIN);
    if (table1)
        fprintf(f, "| regime | pre | post | post - pre (95%% CI) | paper post - pre | verdict "
                   "| at ±%.4f |\n|---|---|---|---|---|---|---|\n", ABSENCE_MARGIN);
    const char *regimes[2][3] = {{"joint", "pre-joint", "post-joint"}, {"grow", "pre-grow", "post-grow"}};
    double delta[2][MAX_SEEDS];
    int have[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        int n1 = finals(s, regimes[r][1], x), n2 = finals(s, regimes[r][2], y);
        if (!n1 || !n2)
            continue;
        have[r] = 1;
        for (int i = 0; i < p->seeds; i++)
            delta[r][i] = y[i] - x[i];
        summary sx = summarise(x, p->seeds), sy = summarise(y, p->seeds),
                sd = summarise(delta[r], p->seeds);
        fmt_num(b1, sizeof b1, sd.half, "%.4f");
        char dnl[512], pc[32];
        if (not_learned(s, &regimes[r][1], 2, dnl, sizeof dnl))
            not_learned_cells(cell, sizeof cell, hc, sizeof hc, pc, sizeof pc, dnl);
        else
            effect_cell(cell, sizeof cell, &sd, EQUIVALENCE_MARGIN, 0),
                half_cell(hc, sizeof hc, &sd);
        fprintf(f, "| %s | %.4f | %.4f | %+.4f ± %s | %+.4f | %s | %s |\n", regimes[r][0], sx.mean,
                sy.mean, sd.mean, b1, paper_value(regimes[r][2]) - paper_value(regimes[r][1]),
                cell, hc);
    }
    if (have[0] && have[1]) {
        for (int i = 0; i < p->seeds; i++)
            d[i] = delta[1][i] - delta[0][i];
        summary si = summarise(d, p->seeds);
        fmt_num(b1, sizeof b1, si.mean - si.half, "%+.4f");
        fmt_num(b2, sizeof b2, si.mean + si.half, "%+.4f");
        static const char *const four[4] = {"pre-joint", "post-joint", "pre-grow", "post-grow"};
        char dnl[512], pc[32];
        if (not_learned(s, four, 4, dnl, sizeof dnl))
            not_learned_cells(cell, sizeof cell, hc, sizeof hc, pc, sizeof pc, dnl);
        else
            effect_cell(cell, sizeof cell, &si, EQUIVALENCE_MARGIN, 0),
                half_cell(hc, sizeof hc, &si);
        fprintf(f, "\nInteraction I = (post - pre | grow) - (post - pre | joint) = **%+.4f**, 95%% CI "
                   "[%s, %s] over %d seed%s (t interval of the per-seed interactions); paper: %+.4f; "
                   "verdict: %s; at ±%.4f: %s.\n",
                si.mean, b1, b2, p->seeds, p->seeds == 1 ? "" : "s", PAPER_INTERACTION, cell,
                ABSENCE_MARGIN, hc);
    }
    /* controls: the arms of neither Table 1 nor a design */
    for (int a = 0, told = 0; a < p->n_arms; a++) {
        const char *nm = p->arms[a].name;
        if (a >= p->n_arms - p->design.n_cells)
            continue; /* the design's arms come last, in a table of their own */
        if (strstr(nm, "-joint") && !strstr(nm, "joint-") && strncmp(nm, "peri", 4) != 0)
            continue; /* the main arms are above (peri-norm's are not) */
        if (strstr(nm, "-grow") && !strchr(strstr(nm, "-grow") + 5, '-') && strncmp(nm, "peri", 4) != 0)
            continue;
        finals(s, nm, x);
        summary sm = summarise(x, p->seeds);
        fmt_num(b1, sizeof b1, paper_value(nm), "%.4f");
        char ms[64];
        mean_sd(ms, sizeof ms, &sm);
        if (!told++)
            fprintf(f, "\n## Controls\n\n| control | val CE (mean ± sd) | paper |\n|---|---|---|\n");
        fprintf(f, "| %s | %s | %s |\n", nm, ms, b1);
    }
    /* the comparisons the preset asks for, paired by seed; a design's in a table of its own */
    const int own_cmp = p->design.n_factors ? p->design.compare_from : p->n_compare;
    const int own_int = p->design.n_factors ? p->design.interact_from : p->n_interact;
    if (own_cmp > 0) {
        fprintf(f, "\n## Comparisons the preset asks for (paired by seed)\n\n| arm | reference | "
                   "arm - reference (mean ± 95%% CI half-width) | 95%% CI | seeds | verdict "
                   "| at ±%.4f | p (Holm) |\n|---|---|---|---|---|---|---|---|\n", ABSENCE_MARGIN);
        for (int k = 0; k < own_cmp; k++)
            comparison_row(f, s, k, 0, adj[k]);
        if (p->seeds == 1)
            fprintf(f, "\nWith one seed there is no interval (n/a): a single run cannot tell a "
                       "difference from seed noise.\n");
    }
    /* the interactions the preset asks for, paired by seed */
    for (int k = 0; k < own_int; k++) {
        if (!k) {
            fprintf(f, "\n## Interactions the preset asks for (paired by seed)\n\nEach row lists "
                       "its arms as a, b, c, d: I = (d - c) - (b - a), the change from a to b "
                       "and from c to d compared (for the paper's arms, a to d are pre joint, "
                       "post joint, pre grow, post grow: I = (post grow - pre grow) - (post "
                       "joint - pre joint)). The paper's column holds its number only on its "
                       "own arms.\n\n| a | b | c | d | I (mean ± 95%% CI half-width) | 95%% CI | "
                       "seeds | verdict | at ±%.4f | p (Holm) | paper |\n|---|---|---|---|---|---|---|---|---|---|---|\n",
                    ABSENCE_MARGIN);
        }
        interaction_row(f, s, k, 0, adj[p->n_compare + k]);
    }
    if (p->design.n_factors)
        design_tables(f, s, adj);
    /* loss response at phase changes */
    fprintf(f, "\n## Loss response at each phase change (mean over seeds)\n\n"
               "The paper smooths over %d of %dk steps (%.1f%% of a phase): here the baseline (mean "
               "training loss before the change) and the trailing mean span %lld steps. Jump: loss of "
               "the first step after the change minus the baseline. Area: excess over the baseline "
               "per step over the first 2%% and 10%% of a phase. Recovery: steps until the trailing "
               "mean is back at the baseline. An *append* adds layers; a *restart* (the budget "
               "controls) only restarts the LR. Paper: jump pre ~%.3f, post ~%.2f-%.2f; recovery pre "
               "~%.0f steps, post ~%.0fk (of %dk-step phases).\n\n"
               "| arm | change | kind | jump | area/step 2%% | area/step 10%% | recovery (steps) |\n|---|---|---|---|---|---|---|\n",
            PAPER_SMOOTHING_STEPS, PAPER_PHASE_STEPS / 1000,
            100.0 * PAPER_SMOOTHING_STEPS / PAPER_PHASE_STEPS, (long long)response_window(p),
            PAPER_JUMP_PRE, PAPER_JUMP_POST_LO, PAPER_JUMP_POST_HI, PAPER_RECOVERY_PRE,
            PAPER_RECOVERY_POST / 1000, PAPER_PHASE_STEPS / 1000);
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_appends; k++) {
            double j = 0, a2 = 0, a10 = 0, rec = 0;
            int never = 0;
            for (int i = 0; i < p->seeds; i++) {
                j += s->res[a][i]->resp[k].jump / p->seeds;
                a2 += s->res[a][i]->area2[k] / p->seeds;
                a10 += s->res[a][i]->area10[k] / p->seeds;
                never |= s->res[a][i]->resp[k].recovery < 0;
                rec += (double)s->res[a][i]->resp[k].recovery / p->seeds;
            }
            if (never)
                snprintf(b1, sizeof b1, "not within the phase%s", p->seeds > 1 ? " (some seeds)" : "");
            else
                snprintf(b1, sizeof b1, "%.0f", rec);
            fprintf(f, "| %s | %d | %s | %+.4f | %.4f | %.4f | %s |\n", p->arms[a].name, k + 1,
                    r0->is_append[k] ? "append" : "restart", j, a2, a10, b1);
        }
    }
    /* block removal */
    fprintf(f, "\n## Block removal on a fixed batch (first validation batch)\n\nPaper: pre-grow's last block dCE %.2f, angle %.3f; every post-grow block dCE >= %.2f, angle > %.2f.\n\n| arm | block | dCE (mean ± sd) | angle (mean ± sd) |\n|---|---|---|---|\n",
            PAPER_REMOVAL_PRE_LAST_DCE, PAPER_REMOVAL_PRE_LAST_ANGLE, PAPER_REMOVAL_POST_DCE,
            PAPER_REMOVAL_POST_ANGLE);
    for (int a = 0; a < p->n_arms; a++) {
        for (int k = 0; k < s->res[a][0]->n_blocks_measured; k++) {
            for (int i = 0; i < p->seeds; i++) {
                x[i] = s->res[a][i]->removal[k].dce;
                y[i] = s->res[a][i]->removal[k].angle;
            }
            summary sd = summarise(x, p->seeds), sa = summarise(y, p->seeds);
            char m1[64], m2[64];
            mean_sd(m1, sizeof m1, &sd);
            mean_sd(m2, sizeof m2, &sa);
            fprintf(f, "| %s | %d | %s | %s |\n", p->arms[a].name, k + 1, m1, m2);
        }
    }
    /* boundary scale trajectory */
    fprintf(f, "\n## Boundary scale over training (mean over seeds)\n\nAt every evaluation, the per-token RMS of the residual stream after the last active layer on the first validation batch (the paper: a trajectory over growth checkpoints); row-start tokens against regular ones. Paper, pre-norm: std across tokens %.2f -> %.2f, kurtosis > %.0f, document-boundary tokens %.0f -> %.0f vs regular %.1f -> %.1f; post-norm: std %.2f-%.2f, both below %.1f.\n\n| arm | step | active layers | RMS std | kurtosis | RMS row-start | RMS regular | ratio |\n|---|---|---|---|---|---|---|---|\n",
            PAPER_RMS_STD_PRE_FROM, PAPER_RMS_STD_PRE_TO, PAPER_KURTOSIS_PRE,
            PAPER_RMS_BOUNDARY_PRE_FROM, PAPER_RMS_BOUNDARY_PRE_TO, PAPER_RMS_REGULAR_PRE_FROM,
            PAPER_RMS_REGULAR_PRE_TO, PAPER_RMS_STD_POST_LO, PAPER_RMS_STD_POST_HI,
            PAPER_RMS_POST_BELOW);
    for (int a = 0; a < p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        const char *nm = p->arms[a].name;
        /* joint and grow: the paper's trajectories, on any recipe */
        if (p->arms[a].schedule != LATTICE_SCHEDULE_PRESET_JOINT &&
            p->arms[a].schedule != LATTICE_SCHEDULE_PRESET_GROW)
            continue;
        for (int k = 0; k < r0->n_pts; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const point *pt = &s->res[a][i]->pts[k < s->res[a][i]->n_pts ? k : s->res[a][i]->n_pts - 1];
                v[0] += pt->rms_std / p->seeds;
                v[1] += pt->rms_kurt / p->seeds;
                v[2] += pt->rms_boundary / p->seeds;
                v[3] += pt->rms_regular / p->seeds;
            }
            fprintf(f, "| %s | %lld | %d | %.3f | %.1f | %.3f | %.3f | %.2f |\n", nm,
                    (long long)r0->pts[k].step, r0->pts[k].active, v[0], v[1], v[2], v[3],
                    v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
    /* boundary scale at the end, by block boundary */
    fprintf(f, "\n## Boundary scale at block boundaries at the end (first validation batch, mean over seeds)\n\n| arm | after block | RMS std (all) | kurtosis (all) | RMS row-start | RMS regular | ratio |\n|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_boundaries; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const kept_scale *st = s->res[a][i]->rms[k];
                v[0] += st[2].std / p->seeds;
                v[1] += st[2].kurtosis / p->seeds;
                v[2] += st[1].mean / p->seeds;
                v[3] += st[0].mean / p->seeds;
            }
            fprintf(f, "| %s | %d | %.3f | %.1f | %.3f | %.3f | %.1f |\n", p->arms[a].name, k + 1,
                    v[0], v[1], v[2], v[3], v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
    students_sinks(f, s);
}

void report_files(FILE *f, const char *dir)
{
    static const struct {
        const char *file, *what;
        int image;
    } files[] = {
        {"curves_steps.svg", "validation CE against training steps: the mean over seeds with a "
                             "min..max band, one line per arm (pre-norm blue, post-norm red, "
                             "peri-norm green; line style by schedule; dashed lines at phase "
                             "changes)", 1},
        {"curves_active_layer_tokens.svg", "the same curves against active-layer tokens (the "
                                           "compute each arm has spent): grow arms that reach a "
                                           "loss with fewer layer-tokens sit to the left", 1},
        {"curves.csv", "every step's training loss of every run, with the validation CE and "
                       "boundary statistics at evaluated steps", 0},
        {"bands.csv", "the plots' data: mean, min and max over seeds per arm and evaluation", 0},
        {"results.json", "every number of every run, the teacher's go/no-go and the preset", 0},
    };
    fprintf(f, "\n## Files\n\n");
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, files[k].file);
        if (access(path, R_OK) != 0) {
            if (files[k].image)
                fprintf(f, "- `%s`: not drawn (gnuplot is not installed; the data are in "
                           "bands.csv)\n", files[k].file);
            continue;
        }
        if (files[k].image)
            fprintf(f, "- [`%s`](%s) (and .png): %s.\n\n  ![%s](%s)\n\n", files[k].file,
                    files[k].file, files[k].what, files[k].what, files[k].file);
        else
            fprintf(f, "- [`%s`](%s): %s.\n", files[k].file, files[k].file, files[k].what);
    }
}

void report_summary(FILE *f, const study *s, const char *dir)
{
    const preset *p = s->p;
    /* the verdict table from verdicts(), without its long preamble */
    char *text = NULL;
    size_t len = 0;
    FILE *m = open_memstream(&text, &len);
    if (!m)
        die("summary: %s", strerror(errno));
    verdicts(m, s);
    fclose(m);
    fprintf(f, "\n# Summary: preset `%s`, %d seed%s, %d arm%s\n\n", p->name, p->seeds,
            p->seeds == 1 ? "" : "s", p->n_arms, p->n_arms == 1 ? "" : "s");
    const char *table = strstr(text, "| finding |");
    if (table) {
        fprintf(f, "Verdicts (rules and the p column: the full report):\n\n");
        for (const char *line = table; *line;) {
            const char *end = strchr(line, '\n');
            const size_t n = end ? (size_t)(end - line) : strlen(line);
            if (n == 0 || line[0] != '|')
                break;
            fprintf(f, "%.*s\n", (int)n, line);
            line = end ? end + 1 : line + n;
        }
    } else {
        fprintf(f, "No row of the paper's verdict table applies to these arms; the design's and "
                   "the preset's own comparisons are in the full report.\n");
    }
    free(text);
    /* did every arm learn? */
    const double u = unigram_ce(p);
    char dnl[1024] = "";
    int n_dnl = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        const int n = finals(s, p->arms[a].name, x);
        if (!n)
            continue;
        const double mean = summarise(x, n).mean;
        lo = fmin(lo, mean);
        hi = fmax(hi, mean);
        if (did_not_learn(mean, u))
            snprintf(dnl + strlen(dnl), sizeof dnl - strlen(dnl), "%s%s (%.4f)",
                     n_dnl++ ? ", " : "", p->arms[a].name, mean);
    }
    char ub[32];
    fmt_num(ub, sizeof ub, u, "%.4f");
    if (n_dnl)
        fprintf(f, "\nDid not learn (mean val CE within %.1f nats/byte of the unigram CE %s, or "
                   "above): %s. Every row resting on one of them reads \"" NOT_LEARNED_VERDICT
                   "\".\n",
                LEARN_MARGIN, ub, dnl);
    else if (isfinite(lo))
        fprintf(f, "\nEvery arm learned: mean val CE %.4f to %.4f nats/byte, against %s for a "
                   "model of byte frequencies alone (the unigram CE).\n",
                lo, hi, ub);
    /* where the rest is */
    fprintf(f, "\nThe full report (every table, the rules, each comparison's interval and p): "
               "%s/report.md\n", dir);
    static const char *const plots[] = {"curves_steps.svg", "curves_active_layer_tokens.svg"};
    int drawn = 0;
    for (size_t k = 0; k < sizeof plots / sizeof plots[0]; k++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, plots[k]);
        if (access(path, R_OK) == 0)
            fprintf(f, "%s%s", drawn++ ? ", " : "Plots: ", path);
    }
    fprintf(f, "%s", drawn ? " (and .png)\n" : "Plots: not drawn (gnuplot is not installed; "
                                               "their data are in bands.csv)\n");
    fprintf(f, "The numbers: %s/results.json, %s/curves.csv, %s/bands.csv\n", dir, dir, dir);
    /* how it relates to the committed studies */
    int shortest = INT_MAX;
    for (int a = 0; a < p->n_arms; a++)
        shortest = p->arms[a].steps_per_phase < shortest ? p->arms[a].steps_per_phase : shortest;
    fprintf(f, "\nHow this relates to doc/REPRODUCTION.md: ");
    if (shortest < MECHANISM_MIN_STEPS)
        fprintf(f, "this run's phases are %d steps, shorter than the %d the mechanism rows need, "
                   "and its teacher is %s; it shows that the whole study runs, and what runs "
                   "this short give, not what the paper's claims come to. ",
                shortest, MECHANISM_MIN_STEPS,
                s->teacher.n > 0 && isfinite(s->teacher.max_ratio) && s->teacher.max_ratio >= 3
                    ? "GO"
                    : "NO-GO (no massive row-start activations to act on)");
    fprintf(f, "The committed studies that doc/REPRODUCTION.md reads (doc/results/*/report.md, "
               "each rebuilt from its kept runs with --report-only) run the same code at the lengths where the paper's "
               "mechanism can act, and doc/REPRODUCTION.md says which of the paper's findings "
               "they decide and which they leave open. A verdict here that differs from theirs "
               "is about this preset's sizes; compare with their rows before reading it as a "
               "finding.\n");
}
