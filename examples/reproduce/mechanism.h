/* The verdict table's mechanism rows: per grow pair (pre-X and post-X on a
 * grow schedule), the loss jump at the first append, block removal, the
 * row-start tokens where appended blocks read, and the crossover. */
#ifndef REPRODUCE_MECHANISM_H
#define REPRODUCE_MECHANISM_H

#include "verdict_table.h"

/* The grow pairs: an arm pre-X on a grow schedule under pre-norm, and its
 * post-X. Returns how many, the arms' indexes in pre[] and post[]. */
int grow_pairs(const study *s, int *pre, int *post);

/* Every grow pair's mechanism rows (one "not run" row when there is none). */
void mechanism_rows(vtable *t, const study *s);

/* Under the table: the teacher's go/no-go, which the mechanism rows need,
 * and whether the phases are long enough for them. */
void gate_words(FILE *f, const study *s);

#endif
