/* The internal ops table every kernel goes through. */
#ifndef LATTICE_BACKEND_IMPL_H
#define LATTICE_BACKEND_IMPL_H

#include "internal.h"

struct lattice_backend {
    char name[64];
    int n_threads;
    lattice_backend_ops ops; /* resolved: every slot non-NULL */
    lattice_backend_ops user_ops; /* as given (custom backends only) */
};

/* Row-major GEMM through the backend: C[m,n] = alpha op(A) op(B) + beta C. */
lattice_status lattice__gemm(lattice_backend *be, int ta, int tb, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc);

lattice_status lattice__gemm_batched(lattice_backend *be, int ta, int tb, int m, int n, int k,
                                     float alpha, const float *const *a, int lda,
                                     const float *const *b, int ldb, float beta,
                                     float *const *c, int ldc, int count);

/* Built-in slot implementations. */
int lattice__ref_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc);
int lattice__blis_available(void);
void lattice__blis_fill_ops(lattice_backend_ops *ops, lattice_backend *be);

#endif
