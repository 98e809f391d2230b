/* What another object may ask of an optimizer, as functions over its opaque
 * handle (optim.c): its moments and settings as checkpoints save, compare
 * and restore them, its borrow, and the norm its step measures. */
#ifndef LATTICE_OPTIM_ACCESS_H
#define LATTICE_OPTIM_ACCESS_H

#include "handle.h"
#include "internal.h"

/* The optimizer's moments (laid out like the model's parameter arena) and
 * each tensor's update count since the last reset: writable, what a
 * checkpoint saves and restores. */
typedef struct lattice__optim_moments {
    float *m1, *m2;
    int64_t *t_tensor;
} lattice__optim_moments;
void lattice__optim_get_moments(lattice_optim *o, lattice__optim_moments *out);

/* The optimizer's settings (its own copy: read only). */
const lattice_optim_params *lattice__optim_params(const lattice_optim *o);

/* Whether p passes lattice_optim_set_params's checks: LATTICE_OK, or its
 * status with the reason in err (LATTICE_ERRMSG_MAX bytes). */
lattice_status lattice__optim_check_params(const lattice_optim_params *p, char *err);

/* Put the optimizer's settings and step where a checkpoint had them (its
 * commit: p was checked, nothing fails). */
void lattice__optim_restore(lattice_optim *o, const lattice_optim_params *p, int64_t step);

/* Sum of squares of g[0..n) in double, the same bits for any thread count nt (optim.c). */
double lattice__sum_squares(const float *g, long n, int nt);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__optim_borrow(lattice_optim *o, const char *fn);
void lattice__optim_unborrow(lattice_optim *o);

/* The model it was created for, whose busy section its calls that change
 * it enter (a trainer's model must be this one). */
lattice_model *lattice__optim_model(const lattice_optim *o);

#endif
