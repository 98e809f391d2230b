/* The oneDNN backend: every GEMM through dnnl_sgemm (row-major, like the
 * library), one thread per call. oneDNN picks its kernels from the CPU's
 * features at run time (its "effective ISA"); DNNL_MAX_CPU_ISA in the
 * environment caps that choice, and OPENBLAS_CORETYPE does not concern it. */
#include "backend_impl.h"
#include "backend_onednn_bf16.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LATTICE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>

/* oneDNN's own names for its ISA levels (those DNNL_MAX_CPU_ISA takes, in lower case). */
static const char *isa_name(dnnl_cpu_isa_t isa)
{
    switch (isa) {
    case dnnl_cpu_isa_sse41: return "sse41";
    case dnnl_cpu_isa_avx: return "avx";
    case dnnl_cpu_isa_avx2: return "avx2";
    case dnnl_cpu_isa_avx2_vnni: return "avx2_vnni";
    case dnnl_cpu_isa_avx512_mic: return "avx512_mic";
    case dnnl_cpu_isa_avx512_mic_4ops: return "avx512_mic_4ops";
    case dnnl_cpu_isa_avx512_core: return "avx512_core";
    case dnnl_cpu_isa_avx512_core_vnni: return "avx512_core_vnni";
    case dnnl_cpu_isa_avx512_core_bf16: return "avx512_core_bf16";
    case dnnl_cpu_isa_avx512_core_amx: return "avx512_core_amx";
    default: return "unknown";
    }
}

/* How oneDNN's ISA stands against the CPU's features: its sgemm has AVX2 and
 * AVX-512 kernels, so it matches when it reaches the widest vectors the CPU has. */
lattice__onednn_fit lattice__onednn_describe(lattice__kernel_report *report)
{
    const dnnl_version_t *v = dnnl_version();
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const unsigned bits = (unsigned)isa;
    const int avx512 = (bits & (unsigned)dnnl_cpu_isa_avx512_core) ==
                       (unsigned)dnnl_cpu_isa_avx512_core;
    const int avx2 = (bits & (unsigned)dnnl_cpu_isa_avx2) == (unsigned)dnnl_cpu_isa_avx2;
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    snprintf(report->library, sizeof(report->library), "oneDNN %d.%d.%d", v->major, v->minor,
             v->patch);
    snprintf(report->kernels, sizeof(report->kernels), "%s", isa_name(isa));
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    if (cap && *cap)
        snprintf(report->reason, sizeof(report->reason),
                 "ISA %s: DNNL_MAX_CPU_ISA=%s set by the user", report->kernels, cap);
    else
        snprintf(report->reason, sizeof(report->reason), "ISA %s chosen by oneDNN from the CPU",
                 report->kernels);
    lattice__onednn_fit fit = cpu.avx512 ? (avx512 ? LATTICE__ONEDNN_AVX512 : LATTICE__ONEDNN_BELOW)
                              : cpu.avx2_fma ? (avx2 ? LATTICE__ONEDNN_AVX2 : LATTICE__ONEDNN_BELOW)
                                             : LATTICE__ONEDNN_BELOW;
    report->optimised = avx512 || avx2;
    return fit;
}

/* dnnl_sgemm allocates its packing buffer in every call and frees it before
 * returning (doc/PERFORMANCE.md). */
static int onednn_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc)
{
    (void)user; /* k = 0 and alpha = 0 never get here: backend.c scales C itself */
    const int saved = lattice__onednn_threads_one();
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                  beta, c, ldc);
    lattice__onednn_threads_back(saved);
    return st == dnnl_success ? 0 : 1000 + (int)st;
}

/* ---- bf16 GEMMs (lattice_backend_set_gemm_precision) --------------------------------- */

/* oneDNN's bf16 GEMM: libdnnl exports it (C linkage, row-major like
 * dnnl_sgemm: C = alpha op(A) op(B) + beta C with bf16 A and B, fp32 C and
 * fp32 accumulation), but 2.x declares it only in its own tests' headers, so
 * it is declared here, its bf16 operands as their 16 bits. Weak: a oneDNN
 * without it leaves it NULL, and onednn_gemm_bf16_api says so. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n,
                                           dnnl_dim_t k, float alpha, const uint16_t *a,
                                           dnnl_dim_t lda, const uint16_t *b, dnnl_dim_t ldb,
                                           float beta, float *c, dnnl_dim_t ldc)
    __attribute__((weak));

/* bf16 through dnnl_gemm_bf16bf16f32: this call's operands (its block of A
 * or B, when backend.c splits the call) rounded into scratch, then one call
 * on one thread. oneDNN runs its AVX512-BF16 GEMM kernels here, not AMX: the
 * slot before the matmul one, kept as examples/bench_bf16.c's baseline
 * (lattice__onednn_use_bf16 with LATTICE__ONEDNN_BF16_GEMM_API). */
static int onednn_gemm_bf16_api(void *user, int ta, int tb, int m, int n, int k, float alpha,
                                const float *a, int lda, const float *b, int ldb, float beta,
                                float *c, int ldc)
{
    (void)user;
    if (!dnnl_gemm_bf16bf16f32)
        return 1000 + (int)dnnl_unimplemented; /* this oneDNN does not export it */
    const int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int b_rows = tb ? n : k, b_cols = tb ? k : n;
    const size_t na = (size_t)a_rows * (size_t)a_cols, nb = (size_t)b_rows * (size_t)b_cols;
    uint16_t *sa = malloc(sizeof(uint16_t) * (na + nb));
    if (!sa)
        return 2000; /* the scratch: out of memory */
    uint16_t *sb = sa + na;
    lattice__to_bf16(a, a_rows, a_cols, lda, sa);
    lattice__to_bf16(b, b_rows, b_cols, ldb, sb);
    const int saved = lattice__onednn_threads_one();
    dnnl_status_t st = dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, sa,
                                             a_cols, sb, b_cols, beta, c, ldc);
    lattice__onednn_threads_back(saved);
    free(sa);
    return st == dnnl_success ? 0 : 1000 + (int)st;
}

/* The bf16 slot: oneDNN's matmul primitive, cached per shape in the backend
 * (backend_onednn_bf16.c). Each element of C is op(A)'s row times op(B)'s
 * column summed in fp32 by the same kernel whatever block of the call it is
 * in (tests/test_gemm_bf16.c checks 1 against 2 threads). */
static int onednn_gemm_bf16(void *user, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, const float *b, int ldb, float beta,
                            float *c, int ldc)
{
    lattice_backend *be = user;
    return lattice__bf16mm_gemm(be->onednn_bf16, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c,
                                ldc);
}

int lattice__onednn_bf16_why_not(char *why, size_t size)
{
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const unsigned need = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    if (!cpu.avx512_bf16 && !cpu.amx)
        snprintf(why, size, "this CPU has neither AVX512-BF16 nor AMX");
    else if (((unsigned)isa & need) != need)
        snprintf(why, size, "oneDNN runs its %s kernels%s%s%s, below avx512_core_bf16",
                 isa_name(isa), cap && *cap ? " (DNNL_MAX_CPU_ISA=" : "", cap && *cap ? cap : "",
                 cap && *cap ? ")" : "");
    else
        return 0;
    return 1;
}

/* Below AVX-512 (its avx2 kernels, here on a Zen 1), oneDNN's sgemm sums an
 * element of C in an order that depends on where its row falls in the call's
 * rows: a call split into blocks of 16 rows gave other bits than the whole
 * (230 of 16,384 elements of a 128 x 128 x 128 product). A block of columns
 * leaves every element's sum as it was, at every alignment tried. */
static int fp32_cols_only(void)
{
    const unsigned bits = (unsigned)dnnl_get_effective_cpu_isa();
    return (bits & (unsigned)dnnl_cpu_isa_avx512_core) != (unsigned)dnnl_cpu_isa_avx512_core;
}

int lattice__onednn_use_bf16(lattice_backend *be, int on)
{
    if (on == LATTICE__ONEDNN_BF16_MATMUL && !be->onednn_bf16 &&
        !(be->onednn_bf16 = lattice__bf16mm_create()))
        return -1; /* the slot as it was */
    if (on != LATTICE__ONEDNN_BF16_MATMUL)
        lattice__onednn_release(be);
    /* by rows only: a block of C's columns changes the primitive's n, and
     * with it how oneDNN blocks k (the sums' order); a block of rows does not */
    be->split_rows_only = on == LATTICE__ONEDNN_BF16_MATMUL;
    be->split_cols_only = on == LATTICE__ONEDNN_FP32 && fp32_cols_only();
    be->ops.sgemm = on == LATTICE__ONEDNN_BF16_MATMUL   ? onednn_gemm_bf16
                    : on == LATTICE__ONEDNN_BF16_GEMM_API ? onednn_gemm_bf16_api
                                                         : onednn_sgemm;
    return 0;
}

void lattice__onednn_release(lattice_backend *be)
{
    lattice__bf16mm_destroy(be->onednn_bf16);
    be->onednn_bf16 = NULL;
}

int lattice__onednn_bf16_counts(const lattice_backend *be, int *cached, long *hits, long *misses)
{
    if (!be->onednn_bf16)
        return -1;
    lattice__bf16mm_counts(be->onednn_bf16, cached, hits, misses);
    return 0;
}

int lattice__onednn_available(void) { return 1; }

void lattice__onednn_fill(lattice_backend *be)
{
    be->ops.user = be;
    be->ops.sgemm = onednn_sgemm;
    be->split_cols_only = fp32_cols_only();
    lattice__onednn_describe(&be->report);
}

#else

int lattice__onednn_available(void) { return 0; }

lattice__onednn_fit lattice__onednn_describe(lattice__kernel_report *report)
{
    (void)report;
    return LATTICE__ONEDNN_ABSENT;
}

void lattice__onednn_fill(lattice_backend *be) { (void)be; }

int lattice__onednn_bf16_why_not(char *why, size_t size)
{
    snprintf(why, size, "this build has no oneDNN");
    return 1;
}

int lattice__onednn_use_bf16(lattice_backend *be, int on)
{
    (void)be;
    (void)on;
    return 0;
}

void lattice__onednn_release(lattice_backend *be) { (void)be; }

int lattice__onednn_bf16_counts(const lattice_backend *be, int *cached, long *hits, long *misses)
{
    (void)be;
    *cached = 0, *hits = *misses = 0;
    return -1;
}

#endif
