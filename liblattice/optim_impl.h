/* The optimizer's private body, shared with the trainer's checkpoints and
 * setup (which save and compare its moments). */
#ifndef LATTICE_OPTIM_IMPL_H
#define LATTICE_OPTIM_IMPL_H

#include "handle.h"
#include "internal.h"

struct lattice_optim {
    lattice_model *model;
    lattice_optim_params p;
    float *m1, *m2;    /* moments, laid out like the model's parameter arena */
    int64_t *t_tensor; /* updates each tensor has had since the last reset */
    int64_t step;      /* schedule position */
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
};

/* Sum of squares of g[0..n) in double, the same bits for any thread count nt (optim.c). */
double lattice__sum_squares(const float *g, long n, int nt);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__optim_borrow(lattice_optim *o, const char *fn);
void lattice__optim_unborrow(lattice_optim *o);

#endif
