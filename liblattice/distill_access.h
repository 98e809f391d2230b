/* What another object may ask of the distillation loss, as functions over its opaque
 * handle (distill.c): what the trainer asks of it that is
 * not API. */
#ifndef LATTICE_DISTILL_ACCESS_H
#define LATTICE_DISTILL_ACCESS_H

#include "handle.h"
#include "internal.h"

/* lattice_distill_topk on nt threads (a model's backend's count, as
 * lattice_distill_model runs) instead of its n_threads: the trainer's loss
 * against a top-k teacher. */
lattice_status lattice__distill_topk_on(lattice_distill *d, int nt, const float *student,
                                       const int32_t *teacher_index, const float *teacher_value,
                                       int k, const int32_t *targets, const uint8_t *mask,
                                       int64_t n, int vocab, float *dlogits,
                                       lattice_distill_result *result);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__distill_borrow(lattice_distill *d, const char *fn);
void lattice__distill_unborrow(lattice_distill *d);
/* Its busy word (handle.h): its own calls that change it enter it, and so
 * does every call of the trainer that borrows it, so that two trainers
 * sharing it on two threads are refused, not mixed. */
lattice_busy *lattice__distill_busy(lattice_distill *h);

#endif
