/* The tiny model shape the tests share, apart from testutil.h so that rig.h
 * (built into the MPI tests and the fuzz targets, which do not link Check)
 * can use it too. */
#ifndef LATTICE_TINY_MODEL_H
#define LATTICE_TINY_MODEL_H

#include <lattice/lattice.h>

/* A tiny 2-layer model's shape (vocab 11, d_model 8, 2 heads (1 kv) of 4,
 * d_ff 12, batch 2 x 5), for tests of files and state rather than numerics. */
static inline void tu_tiny_params(lattice_model_params *p)
{
    lattice_model_params_init(p);
    p->vocab_size = 11;
    p->d_model = 8;
    p->n_layers = 2;
    p->n_active_layers = 2;
    p->n_heads = 2;
    p->n_kv_heads = 1;
    p->head_dim = 4;
    p->d_ff = 12;
    p->max_batch = 2;
    p->max_seq = 5;
}

#endif
