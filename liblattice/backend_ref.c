/* The reference backend: plain C, double accumulation, the oracle for the others. */
#include "backend_impl.h"

int lattice__ref_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc)
{
    (void)user; /* one thread per call: backend.c splits the work */
    /* Element (i, p) of op(A) is a[i * rs_a + p * cs_a]. */
    const long rs_a = ta ? 1 : lda, cs_a = ta ? lda : 1;
    const long rs_b = tb ? 1 : ldb, cs_b = tb ? ldb : 1;
    /* BLAS's rule, as backend.c keeps it: alpha 0 reads neither A nor B */
    const int kk = alpha == 0.0f ? 0 : k;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            double acc = 0.0;
            for (int p = 0; p < kk; p++)
                acc += (double)a[i * rs_a + p * cs_a] * (double)b[p * rs_b + j * cs_b];
            float *cij = &c[(long)i * ldc + j];
            *cij = (float)(alpha * acc + (beta == 0.0f ? 0.0 : (double)beta * *cij));
        }
    }
    return 0;
}

void lattice__ref_fill(lattice_backend *be)
{
    be->ops.user = be;
    be->ops.sgemm = lattice__ref_sgemm;
    snprintf(be->report.library, sizeof(be->report.library), "liblattice reference");
    snprintf(be->report.kernels, sizeof(be->report.kernels), "reference");
}
