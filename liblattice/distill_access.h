/* What another object may ask of the distillation loss, as functions over its opaque
 * handle (distill.c): what the trainer asks of it that is
 * not API. */
#ifndef LATTICE_DISTILL_ACCESS_H
#define LATTICE_DISTILL_ACCESS_H

#include "handle.h"
#include "internal.h"

/* While > 0, the loss runs on n threads (a model's backend's count) instead of
 * its n_threads (distill.c). */
void lattice__distill_set_run_threads(lattice_distill *d, int n);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__distill_borrow(lattice_distill *d, const char *fn);
void lattice__distill_unborrow(lattice_distill *d);
/* Its busy word (handle.h): its own calls that change it enter it, and so
 * does every call of the trainer that borrows it, so that two trainers
 * sharing it on two threads are refused, not mixed. */
lattice_busy *lattice__distill_busy(lattice_distill *h);

#endif
