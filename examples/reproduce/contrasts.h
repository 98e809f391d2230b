/* report.md's contrasts: the preset's and its design's comparisons and
 * interactions, each with its interval, verdicts and p, as one family. */
#ifndef REPRODUCE_CONTRASTS_H
#define REPRODUCE_CONTRASTS_H

#include "study.h"

/* v with format f, or "n/a" when it is NaN. */
void fmt_num(char *buf, size_t n, double v, const char *f);

/* "mean ± sd" over seeds; with one seed there is no spread to give: "mean (1 seed)". */
void mean_sd(char *buf, size_t n, const summary *sm);

/* A p as the tables print it: "n/a" (NaN), "< 0.0001" or "0.0123". */
void fmt_p(char *buf, size_t n, double p);

/* The paired differences of two arms (b - a) into d, summarised; n 0 when
 * either did not run. */
summary paired_summary(const study *s, const char *a, const char *b, double *d);

/* The interaction I = (d - c) - (b - a) of four arms, paired by seed, its
 * per-seed values in x, summarised; n 0 unless all four ran. */
summary interaction_summary(const study *s, const char *a, const char *b, const char *c,
                            const char *d, double *x);

/* A design's interaction of order 3 or more: for factors F1 < ... < Fm, each
 * moved from its reference to a level, the others held, the m-th difference
 * over the 2^m arms: the order m - 1 interaction of F1..F(m-1) at Fm's level
 * minus the same at Fm's reference, paired by seed. */
#define MAX_HIGHER 64
typedef struct higher_row {
    int order;          /* m, 3 or more */
    int arm[1 << MAX_FACTORS]; /* corner j (bit i set: factor i of the m moved) as p->arms index */
    char label[320];    /* "placement (post - pre) x schedule (grow - joint) x loss (ce - kd)" */
} higher_row;

/* Every interaction of order 3 or more the design's arms allow (all 2^m
 * corners among its cells), lowest order first; returns how many. */
int design_higher(const preset *p, higher_row *rows, int max);

/* Its per-seed values (into x, p->seeds of them) summarised; n 0 unless
 * every corner has every seed. */
summary higher_summary(const study *s, const higher_row *h, double *x);

/* The sign of corner j of an order m interaction: + when an even number of
 * its factors sit at their reference. */
int higher_sign(int order, int j);

/* The preset's comparisons and interactions (its own and its design's) as
 * one family: each row's p (effect_p at the margin) and Holm's adjustment
 * over all of them, comparisons first in adj[0..n_compare), then the
 * interactions, then the design's of order 3 and more. Returns the family's
 * size. */
#define MAX_CONTRASTS (MAX_ARMS + MAX_INTERACT + MAX_HIGHER)
int contrast_family(const study *s, double *adj);

/* The cells of a contrast's row: its 95% interval's ends and half-width, its
 * verdict, its verdict at the absence margin, and its p with Holm's. */
typedef struct contrast_cells {
    char lo[64], hi[64], half[32], verdict[700], absence[160], p[96];
} contrast_cells;

/* The cells of a row whose summary sm rests on the arms names[0..n): when
 * one of them did not learn, not applicable, naming them (and no p); adj:
 * the row's Holm-adjusted p. */
void contrast_cells_fill(contrast_cells *c, const study *s, const char *const *names, int n,
                         const summary *sm, double adj);

/* The preset's own comparisons and interactions, then, with a design, its
 * arms by level and its contrasts; adj from contrast_family. */
void contrast_tables(FILE *f, const study *s, const double *adj);

#endif
