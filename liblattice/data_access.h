/* What another object may ask of the data object, as functions over its opaque
 * handle (data.c): what the trainer and its checkpoints ask
 * of it that is not API. */
#ifndef LATTICE_DATA_ACCESS_H
#define LATTICE_DATA_ACCESS_H

#include "handle.h"
#include "internal.h"

/* Draws of the training iterator in one pass (an epoch) over the training data:
 * documents, or packed rows (data.c). A position's index runs 0..this. */
int64_t lattice__data_pass_length(const lattice_data *d);

/* Where a run stands in its data: the iterator's position, and where the run
 * began (the trainer's, for phases that rewind) once it has; listed once, for
 * checkpoints and setups, in lattice__data_position_fields and _origin_fields. */
typedef struct lattice__data_run {
    lattice_data_position pos, origin; /* origin: where have_origin says so */
    int have_origin;
} lattice__data_run;

/* A digest of the corpus as the data object holds it: its ids after
 * splitting, and where the validation split begins (data.c). Computed once. */
uint64_t lattice__data_corpus_hash(lattice_data *d);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__data_borrow(lattice_data *d, const char *fn);
void lattice__data_unborrow(lattice_data *d);
/* Its busy word (handle.h): its own calls that change it enter it, and so
 * does every call of the trainer that borrows it, so that two trainers
 * sharing it on two threads are refused, not mixed. */
lattice_busy *lattice__data_busy(lattice_data *h);

#endif
