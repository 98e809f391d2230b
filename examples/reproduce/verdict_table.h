/* The verdict table's rows as they are built: each with the p of the test
 * its verdict reads, printed with Holm's adjustment over the table. */
#ifndef REPRODUCE_VERDICT_TABLE_H
#define REPRODUCE_VERDICT_TABLE_H

#include "study.h"

#include "rules.h"

/* The verdict table's rows, collected so that the p of each can be adjusted
 * over all of them (Holm) before the table is printed. */
typedef struct vtable {
    char *row[64];
    double p[64];
    int n;
} vtable;

/* A row "| a | b | ... |" (its last cell, the p, is added when printed) and
 * the p of the test its verdict reads (NaN: no test, not in the family). */
__attribute__((format(printf, 3, 4))) void vrow(vtable *t, double p, const char *fmt, ...);

/* The rows with their last cell, "p 0.0012, Holm 0.0150": the p of the test
 * each verdict reads, and Holm's adjustment over the table's rows that have
 * one (the table's family, its size said in the header's note). */
void vflush(FILE *f, vtable *t);

/* The p of a verdict that either of two sides decides: the "reproduced" side
 * needs every one of its tests (the largest of their p), the "not
 * reproduced" side any one of its own (the smallest); an undecided row gets
 * the nearer of the two. */
double sided_p(verdict v, double p_yes, double p_no);

/* A row's verdict into buf, with "(1 seed)" where one seed is all there is. */
const char *vtext(char *buf, size_t size, verdict v, int seeds);

/* The verdict cell of a row that rests on the arms names[0..n): cell, or,
 * when one of them did not learn (results.h), NOT_LEARNED_VERDICT naming
 * them, written into buf, and *p NaN: no test, and no place in the table's
 * family. */
const char *dnl_cell(char *buf, size_t size, const study *s, const char *const *names, int n,
                     const char *cell, double *p);

/* The verdict cell of a row whose verdict is v (vtext, then dnl_cell), in buf. */
const char *verdict_cell(char *buf, size_t size, const study *s, const char *const *names,
                         int n, verdict v, double *p);

/* "+0.0123 ± 0.0045" of a summary ("n/a" when it has no seeds; no ± with one). */
void fmt_summary(char *buf, size_t n, const summary *sm);

/* "m ± h" of a summary in format f, scaled (n/a when it has no seeds; no ±
 * with one). */
void fmt_pm(char *buf, size_t n, const summary *sm, const char *f, double scale);

#endif
