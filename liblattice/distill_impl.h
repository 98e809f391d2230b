/* The distillation loss's private side: what the trainer asks of it that is
 * not API. */
#ifndef LATTICE_DISTILL_IMPL_H
#define LATTICE_DISTILL_IMPL_H

#include "internal.h"

/* While > 0, the loss runs on n threads (a model's backend's count) instead of
 * its n_threads (distill.c). */
void lattice__distill_set_run_threads(lattice_distill *d, int n);

#endif
