/* The BLIS backend: every GEMM through bli_sgemm_ex with row-major strides,
 * one thread per call (no global BLIS state is touched). */
#include "backend_impl.h"

#include <stdio.h>

#ifdef LATTICE_HAVE_BLIS
#include <blis.h>

/* One thread per call, always: BLIS 0.9's thread barrier spins without
 * yielding (upstream issue #604), so two processes that share the cores, each
 * with BLIS threads, stall each other. The library's own OpenMP team splits
 * the work instead (backend.c), and its waits are bounded. */
static void blis_call(int sup, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                      int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    rntm_t rntm;
    bli_rntm_init(&rntm);
    bli_rntm_set_num_threads(1, &rntm);
    bli_rntm_set_l3_sup(sup != 0, &rntm);
    bli_sgemm_ex(ta ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE, tb ? BLIS_TRANSPOSE : BLIS_NO_TRANSPOSE,
                 m, n, k, &alpha, (float *)a, lda, 1, (float *)b, ldb, 1, &beta, c, ldc, 1,
                 NULL, &rntm);
}

/* A GEMM that backend.c may split over threads. BLIS sends a problem with a
 * dimension below its thresholds (a few hundred) to its small-matrix path,
 * whose kernels sum an element in another order than the packed path's: a
 * 512-row call ran packed whole and small-matrix in two 256-row halves, and
 * 239,059 of 262,144 elements differed between 1 and 2 threads. Without the
 * small-matrix path each element is summed by the packed microkernel over k
 * in the same order whatever rows or columns the call covers, so the split
 * gives the serial call's bits. */
static int blis_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                      const float *a, int lda, const float *b, int ldb, float beta, float *c,
                      int ldc)
{
    (void)user;
    blis_call(0, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    return 0;
}

/* A GEMM backend.c never splits, by its shape alone (whatever the thread
 * count): BLIS's own choice of path, the small-matrix one included. */
static int blis_sgemm_whole(void *user, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, const float *b, int ldb, float beta,
                            float *c, int ldc)
{
    (void)user;
    blis_call(1, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
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

void lattice__blis_fill(lattice_backend *be)
{
    be->ops.user = be;
    be->ops.sgemm = blis_sgemm;
    be->sgemm_whole = blis_sgemm_whole;
    lattice__blis_describe(&be->report);
}

#else

int lattice__blis_available(void) { return 0; }

lattice__blis_fit lattice__blis_describe(lattice__kernel_report *report)
{
    (void)report;
    return LATTICE__BLIS_ABSENT;
}

void lattice__blis_fill(lattice_backend *be) { (void)be; }

#endif
