/* The BLIS backend: every GEMM through bli_sgemm_ex with row-major strides and
 * a per-call thread count (no global BLIS state is touched). */
#include "backend_impl.h"

#include <stdio.h>

#ifdef LATTICE_HAVE_BLIS
#include <blis.h>

static void rntm_for(rntm_t *rntm, int n_threads)
{
    bli_rntm_init(rntm);
    bli_rntm_set_num_threads(n_threads, rntm);
}

static int blis_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    lattice_backend *be = user;
    rntm_t rntm;
    rntm_for(&rntm, be->n_threads);
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 m, n, k, &alpha, (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1,
                 NULL, &rntm);
    return 0;
}

/* Small problems (attention heads) run one per thread rather than each split
 * across threads: better use of the cores at these sizes. */
static int blis_sgemm_batched(void *user, int ta, int tb, int m, int n, int k, float alpha,
                              const float *const *a, int lda, const float *const *b, int ldb,
                              float beta, float *const *c, int ldc, int count)
{
    lattice_backend *be = user;
    int nt = be->n_threads < count ? be->n_threads : count;
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        rntm_t rntm;
        rntm_for(&rntm, 1);
#pragma omp for schedule(static)
        for (int i = 0; i < count; i++)
            bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                         tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, m, n, k, &alpha,
                         (float *)a[i], lda, 1, (float *)b[i], ldb, 1, &beta, c[i], ldc, 1,
                         NULL, &rntm);
    }
    return 0;
}

int lattice__blis_available(void) { return 1; }

/* BLIS picks its configuration from the CPU model at first use; asking for
 * the id triggers that choice (once per process) and reads it back. */
lattice__blis_fit lattice__blis_describe(lattice__kernel_report *report)
{
    arch_t id = bli_arch_query_id();
    snprintf(report->library, sizeof(report->library), "BLIS %s", bli_info_get_version_str());
    snprintf(report->kernels, sizeof(report->kernels), "%s", bli_arch_string(id));
    report->optimised = id != BLIS_ARCH_GENERIC;
    if (id == BLIS_ARCH_GENERIC)
        return LATTICE__BLIS_GENERIC;
    if (id == BLIS_ARCH_HASWELL || id == BLIS_ARCH_SANDYBRIDGE)
        return LATTICE__BLIS_AVX2_INTEL;
    return LATTICE__BLIS_OTHER;
}

void lattice__blis_fill_ops(lattice_backend_ops *ops, lattice_backend *be)
{
    ops->user = be;
    ops->sgemm = blis_sgemm;
    ops->sgemm_batched = blis_sgemm_batched;
}

#else

int lattice__blis_available(void) { return 0; }

lattice__blis_fit lattice__blis_describe(lattice__kernel_report *report)
{
    (void)report;
    return LATTICE__BLIS_ABSENT;
}

void lattice__blis_fill_ops(lattice_backend_ops *ops, lattice_backend *be)
{
    (void)ops;
    (void)be;
}

#endif
