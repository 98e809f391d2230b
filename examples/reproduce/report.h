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

#endif
