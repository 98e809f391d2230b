/* The oneDNN backend: every GEMM through dnnl_sgemm (row-major, like the
 * library), one thread per call. oneDNN picks its kernels from the CPU's
 * features at run time (its "effective ISA"); DNNL_MAX_CPU_ISA in the
 * environment caps that choice, and OPENBLAS_CORETYPE does not concern it. */
#include "backend_impl.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef LATTICE_HAVE_ONEDNN
#include <oneapi/dnnl/dnnl.h>
#ifdef _OPENMP
#include <omp.h>
#endif

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

/* One thread per call, as every built-in backend (backend.c splits the work
 * over the library's own OpenMP team). oneDNN's OpenMP build runs one thread
 * inside a parallel region and otherwise as many as the caller's OpenMP
 * setting: outside a region that is set to 1 for the call (one_thread) and
 * given back (threads_back). */
static int one_thread(void)
{
#ifdef _OPENMP
    if (omp_in_parallel())
        return 0;
    const int saved = omp_get_max_threads();
    omp_set_num_threads(1);
    return saved;
#else
    return 0;
#endif
}

static void threads_back(int saved)
{
#ifdef _OPENMP
    if (saved > 0)
        omp_set_num_threads(saved);
#else
    (void)saved;
#endif
}

/* dnnl_sgemm allocates its packing buffer in every call and frees it before
 * returning (doc/PERFORMANCE.md). */
static int onednn_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc)
{
    (void)user; /* k = 0 and alpha = 0 never get here: backend.c scales C itself */
    const int saved = one_thread();
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                  beta, c, ldc);
    threads_back(saved);
    return st == dnnl_success ? 0 : 1000 + (int)st;
}

/* ---- bf16 GEMMs (lattice_backend_set_gemm_precision) --------------------------------- */

/* oneDNN's bf16 GEMM: libdnnl exports it (C linkage, row-major like
 * dnnl_sgemm: C = alpha op(A) op(B) + beta C with bf16 A and B, fp32 C and
 * fp32 accumulation), but 2.x declares it only in its own tests' headers, so
 * it is declared here, its bf16 operands as their 16 bits. Weak: a oneDNN
 * without it leaves it NULL, and the precision is refused there. */
extern dnnl_status_t dnnl_gemm_bf16bf16f32(char transa, char transb, dnnl_dim_t m, dnnl_dim_t n,
                                           dnnl_dim_t k, float alpha, const uint16_t *a,
                                           dnnl_dim_t lda, const uint16_t *b, dnnl_dim_t ldb,
                                           float beta, float *c, dnnl_dim_t ldc)
    __attribute__((weak));

/* fp32 to bf16, rounding to nearest, ties to even; a NaN stays a NaN (its
 * quiet bit set, so that dropping the low mantissa bits cannot make it an
 * infinity); a finite value past bf16's largest rounds to infinity. */
static uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    if ((u & 0x7fffffffu) > 0x7f800000u)
        return (uint16_t)((u >> 16) | 0x40u);
    return (uint16_t)((u + 0x7fffu + ((u >> 16) & 1u)) >> 16);
}

/* A stored matrix of rows x cols (leading dimension ld) into dense bf16. */
static void to_bf16(const float *x, int rows, int cols, int ld, uint16_t *out)
{
    for (int i = 0; i < rows; i++)
        for (int j = 0; j < cols; j++)
            out[(size_t)i * (size_t)cols + (size_t)j] = bf16_bits(x[(size_t)i * (size_t)ld + (size_t)j]);
}

/* The bf16 slot: this call's operands (its block of A or B, when backend.c
 * splits the call) rounded into scratch, then one dnnl_gemm_bf16bf16f32 on
 * one thread. Each element of C is op(A)'s row times op(B)'s column summed in
 * fp32 by oneDNN's kernels; the rounding of an operand does not depend on the
 * block it is in. */
static int onednn_gemm_bf16(void *user, int ta, int tb, int m, int n, int k, float alpha,
                            const float *a, int lda, const float *b, int ldb, float beta,
                            float *c, int ldc)
{
    (void)user;
    const int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int b_rows = tb ? n : k, b_cols = tb ? k : n;
    const size_t na = (size_t)a_rows * (size_t)a_cols, nb = (size_t)b_rows * (size_t)b_cols;
    uint16_t *sa = malloc(sizeof(uint16_t) * (na + nb));
    if (!sa)
        return 2000; /* the scratch: out of memory */
    uint16_t *sb = sa + na;
    to_bf16(a, a_rows, a_cols, lda, sa);
    to_bf16(b, b_rows, b_cols, ldb, sb);
    const int saved = one_thread();
    dnnl_status_t st = dnnl_gemm_bf16bf16f32(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, sa,
                                             a_cols, sb, b_cols, beta, c, ldc);
    threads_back(saved);
    free(sa);
    return st == dnnl_success ? 0 : 1000 + (int)st;
}

int lattice__onednn_bf16_why_not(char *why, size_t size)
{
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    const dnnl_cpu_isa_t isa = dnnl_get_effective_cpu_isa();
    const unsigned need = (unsigned)dnnl_cpu_isa_avx512_core_bf16;
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    if (!dnnl_gemm_bf16bf16f32)
        snprintf(why, size, "this oneDNN (%d.%d.%d) has no dnnl_gemm_bf16bf16f32",
                 dnnl_version()->major, dnnl_version()->minor, dnnl_version()->patch);
    else if (!cpu.avx512_bf16 && !cpu.amx)
        snprintf(why, size, "this CPU has neither AVX512-BF16 nor AMX");
    else if (((unsigned)isa & need) != need)
        snprintf(why, size, "oneDNN runs its %s kernels%s%s%s, below avx512_core_bf16",
                 isa_name(isa), cap && *cap ? " (DNNL_MAX_CPU_ISA=" : "", cap && *cap ? cap : "",
                 cap && *cap ? ")" : "");
    else
        return 0;
    return 1;
}

void lattice__onednn_use_bf16(lattice_backend *be, int on)
{
    be->ops.sgemm = on ? onednn_gemm_bf16 : onednn_sgemm;
}

int lattice__onednn_available(void) { return 1; }

void lattice__onednn_fill(lattice_backend *be)
{
    be->ops.user = be;
    be->ops.sgemm = onednn_sgemm;
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

void lattice__onednn_use_bf16(lattice_backend *be, int on)
{
    (void)be;
    (void)on;
}

#endif
