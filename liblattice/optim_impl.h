/* The optimizer's private body, shared with the trainer's checkpoints and
 * setup (which save and compare its moments). */
#ifndef LATTICE_OPTIM_IMPL_H
#define LATTICE_OPTIM_IMPL_H

#include "internal.h"

struct lattice_optim {
    lattice_model *model;
    lattice_optim_params p;
    float *m1, *m2;    /* moments, laid out like the model's parameter arena */
    int64_t *t_tensor; /* updates each tensor has had since the last reset */
    int64_t step;      /* schedule position */
    char err[LATTICE_ERRMSG_MAX];
};

/* Sum of squares of g[0..n) in double, the same bits for any thread count nt (optim.c). */
double lattice__sum_squares(const float *g, long n, int nt);

#endif
