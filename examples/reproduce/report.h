/* report.md: the study in words and tables beside the paper's numbers, and its files. */
#ifndef REPRODUCE_REPORT_H
#define REPRODUCE_REPORT_H

#include "study.h"

/* v with format f, or "n/a" when it is not finite. */
void fmt_num(char *buf, size_t n, double v, const char *f);

/* report.md's body: the verdicts, then every table beside the paper's numbers. */
void report(FILE *f, const study *s);

/* report.md's list of the files beside it: each plot linked and shown, with
 * what it shows, and the data files. */
void report_files(FILE *f, const char *dir);

/* Batches in one pass over the training text at the students' rows. */
int64_t batches_per_pass(const preset *p);

/* The most batches an arm reads from one place in the text without a rewind. */
int64_t longest_read(const preset *p, const arm *a);

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

/* The end of a study on the terminal (stdout): the verdict table and the
 * arms that did not learn, where report.md and the plots are (dir), and how
 * this result relates to the committed studies (doc/REPRODUCTION.md). */
void report_summary(FILE *f, const study *s, const char *dir);

#endif
