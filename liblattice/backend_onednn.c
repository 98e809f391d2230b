/* The oneDNN backend: every GEMM through dnnl_sgemm (row-major, like the
 * library), one thread per call. oneDNN picks its kernels from the CPU's
 * features at run time (its "effective ISA"); DNNL_MAX_CPU_ISA in the
 * environment caps that choice, and OPENBLAS_CORETYPE does not concern it. */
#include "backend_impl.h"

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
 * setting: outside a region that is set to 1 for the call and given back.
 * dnnl_sgemm allocates its packing buffer in every call and frees it before
 * returning (doc/PERFORMANCE.md). */
static int onednn_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                        const float *a, int lda, const float *b, int ldb, float beta, float *c,
                        int ldc)
{
    (void)user; /* k = 0 and alpha = 0 never get here: backend.c scales C itself */
#ifdef _OPENMP
    const int outside = !omp_in_parallel();
    const int saved = outside ? omp_get_max_threads() : 0;
    if (outside)
        omp_set_num_threads(1);
#endif
    dnnl_status_t st = dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, lda, b, ldb,
                                  beta, c, ldc);
#ifdef _OPENMP
    if (outside)
        omp_set_num_threads(saved);
#endif
    return st == dnnl_success ? 0 : 1000 + (int)st;
}

int lattice__onednn_available(void) { return 1; }

void lattice__onednn_fill(lattice_backend_ops *ops, lattice_backend *be)
{
    ops->user = be;
    ops->sgemm = onednn_sgemm;
    lattice__onednn_describe(&be->report);
}

#else

int lattice__onednn_available(void) { return 0; }

lattice__onednn_fit lattice__onednn_describe(lattice__kernel_report *report)
{
    (void)report;
    return LATTICE__ONEDNN_ABSENT;
}

void lattice__onednn_fill(lattice_backend_ops *ops, lattice_backend *be)
{
    (void)ops;
    (void)be;
}

#endif
