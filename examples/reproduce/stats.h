/* Statistics over seeds: summaries with t intervals, finals and paired differences. */
#ifndef REPRODUCE_STATS_H
#define REPRODUCE_STATS_H

#include "study.h"

/* Mean, sd and 95% t half-width of n values. */
summary summarise(const double *x, int n);

/* The arm's index in the study, or -1. */
int arm_index(const study *s, const char *name);

/* Final val CE of an arm over seeds into x; the count (0 if the arm did not run). */
int finals(const study *s, const char *name, double *x);

/* Paired differences of two arms' finals (b - a); the count, 0 if either is missing. */
int paired(const study *s, const char *arm_a, const char *arm_b, double *d);

/* The interaction I = (d - c) - (b - a) of four arms' finals, paired by seed,
 * into x; the count, 0 if any arm is missing. */
int paired_interaction(const study *s, const char *a, const char *b, const char *c,
                       const char *d, double *x);

/* The t distribution's CDF at t with df degrees of freedom (the regularized
 * incomplete beta function, by its continued fraction). */
double t_cdf(double t, int df);

/* Two-sided p of a summary's mean against x (a paired t test over its n
 * seeds): below 0.05 exactly when its 95% t interval excludes x (up to the
 * quantile tables' rounding). NaN with fewer than 2 seeds or a NaN. */
double p_against(const summary *d, double x);

/* The p of the equivalence test at +-margin (two one-sided t tests, the
 * larger of their p): below 0.05 exactly when the 90% interval lies inside
 * +-margin. NaN as p_against. */
double p_tost(const summary *d, double margin);

/* Holm's step-down adjustment of n p values into adj (each at most 1, never
 * below an earlier one in the order of the p); a NaN is not in the family and
 * stays NaN. Returns the family's size (the p that are not NaN). */
int holm(const double *p, int n, double *adj);

/* The paper's val CE for an arm (PAPER.md), or NaN when the paper has none. */
double paper_value(const char *arm);

#endif
