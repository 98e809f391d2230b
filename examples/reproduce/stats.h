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

/* The paper's val CE for an arm (PAPER.md), or NaN when the paper has none. */
double paper_value(const char *arm);

#endif
