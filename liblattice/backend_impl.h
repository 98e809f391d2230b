/* The internal ops table every kernel goes through. */
#ifndef LATTICE_BACKEND_IMPL_H
#define LATTICE_BACKEND_IMPL_H

#include "handle.h"
#include "internal.h"

/* What a backend reports through lattice_backend_get_info (name and size aside). */
typedef struct lattice__kernel_report {
    char library[LATTICE_BACKEND_INFO_STRLEN];
    char kernels[LATTICE_BACKEND_INFO_STRLEN];
    int optimised;
    char reason[LATTICE_BACKEND_INFO_REASONLEN];
} lattice__kernel_report;

/* A backend's GEMM slot (lattice_backend_ops.sgemm). */
typedef int (*lattice__sgemm_fn)(void *user, int ta, int tb, int m, int n, int k, float alpha,
                                 const float *a, int lda, const float *b, int ldb, float beta,
                                 float *c, int ldc);

struct lattice_backend {
    char name[64];
    int n_threads;
    lattice_backend_ops ops; /* resolved: every slot non-NULL */
    lattice_backend_ops user_ops; /* as given (custom backends only) */
    lattice__kernel_report report;
    /* How backend.c splits a call over threads (backend.c, "Threads"): blocks
     * start on multiples of split_align; rows_only: never by columns;
     * cols_only: never by rows. 0: the defaults (16, rows or columns,
     * whichever C has more of). */
    int split_align, split_rows_only, split_cols_only;
    /* A built-in backend's GEMM for the calls backend.c never splits (by
     * their shape alone: small ones, a batch's problems), where ops.sgemm
     * must give the same bits split or whole; NULL: ops.sgemm. */
    lattice__sgemm_fn sgemm_whole;
    /* How a model's passes run on this backend, the backend only their
     * holder: parallel (lattice_backend_set_parallel, read by the model's
     * passes) and attn_isa (attention_flash.c's lattice_backend_set_attention_kernel,
     * read by attention.c; 0: the CPU's best). */
    int parallel, attn_isa;
    /* lattice_backend_set_gemm_precision: 1 while the GEMMs run in bf16
     * (onednn only: its slot swapped for the bf16 one) */
    int gemm_bf16;
    /* onednn in bf16: its matmul primitives (backend_onednn_bf16.c), freed
     * by lattice__onednn_release */
    struct lattice__bf16mm *onednn_bf16;
    /* its models' calls and its own GEMMs in flight; the setters change it
     * only when none is (handle.h) */
    lattice_hold hold;
};

/* Row-major GEMM through the backend: C[m,n] = alpha op(A) op(B) + beta C. */
lattice_status lattice__gemm(lattice_backend *be, int ta, int tb, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc);

lattice_status lattice__gemm_batched(lattice_backend *be, int ta, int tb, int m, int n, int k,
                                     float alpha, const float *const *a, int lda,
                                     const float *const *b, int ldb, float beta,
                                     float *const *c, int ldc, int count);

/* Whether the backend's GEMMs are the library's own (built-in, or a custom
 * backend on the reference fallback): one thread per call, split by the library. */
int lattice__backend_builtin(const lattice_backend *be);

/* The 1.0 sizes of the backend's sized structs (internal.h's floors). */
#define LATTICE__BACKEND_OPS_1_0 LATTICE__SIZE_1_0(lattice_backend_ops, destroy)
#define LATTICE__BACKEND_INFO_1_0 LATTICE__SIZE_1_0(lattice_backend_info, reason)

/* The built-in backends. Each _fill sets a new backend's ops (user: the
 * backend) and report; call it where the backend is available. */
int lattice__ref_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                       const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc);
void lattice__ref_fill(lattice_backend *be);
int lattice__blis_available(void);
void lattice__blis_fill(lattice_backend *be);

/* How BLIS's run-time kernel selection relates to the CPU. */
typedef enum lattice__blis_fit {
    LATTICE__BLIS_ABSENT,    /* not built with BLIS */
    LATTICE__BLIS_GENERIC,   /* the portable reference kernels */
    LATTICE__BLIS_AVX2_INTEL,/* an Intel configuration without AVX-512 (haswell, sandybridge) */
    LATTICE__BLIS_OTHER      /* anything else: skx, knl, the zen family, ... */
} lattice__blis_fit;

/* BLIS's version and chosen configuration into report (reason untouched). */
lattice__blis_fit lattice__blis_describe(lattice__kernel_report *report);

/* How oneDNN's run-time ISA relates to the CPU. */
typedef enum lattice__onednn_fit {
    LATTICE__ONEDNN_ABSENT, /* not built with oneDNN */
    LATTICE__ONEDNN_BELOW,  /* an ISA below the CPU's widest vectors (capped, or an old CPU) */
    LATTICE__ONEDNN_AVX2,   /* AVX2 kernels on a CPU whose widest vectors are AVX2 */
    LATTICE__ONEDNN_AVX512  /* AVX-512 kernels on a CPU with AVX-512 */
} lattice__onednn_fit;

int lattice__onednn_available(void);
/* oneDNN's version and effective ISA into report (its reason too). */
lattice__onednn_fit lattice__onednn_describe(lattice__kernel_report *report);
void lattice__onednn_fill(lattice_backend *be);
/* 0 where oneDNN's bf16 GEMM runs here; else 1, and why not into why (the
 * oneDNN lacks it, the CPU has neither AVX512-BF16 nor AMX, or oneDNN's ISA
 * is capped below them). */
int lattice__onednn_bf16_why_not(char *why, size_t size);
/* A oneDNN backend's GEMM slot: dnnl_sgemm's (0), bf16 through oneDNN's
 * matmul primitive (1, the precision's), or bf16 through
 * dnnl_gemm_bf16bf16f32 (2: examples/bench_bf16.c's baseline). */
enum { LATTICE__ONEDNN_FP32, LATTICE__ONEDNN_BF16_MATMUL, LATTICE__ONEDNN_BF16_GEMM_API };
/* 0, or -1 where the matmul slot's cache could not be made (the slot unchanged). */
int lattice__onednn_use_bf16(lattice_backend *be, int on);
/* Frees what the bf16 slot keeps (its primitives); the backend's destroy calls it. */
void lattice__onednn_release(lattice_backend *be);
/* The bf16 slot's cache: primitives kept, calls that found theirs, calls that
 * made one. 0, or -1 where the backend has none (not in bf16, no oneDNN). */
int lattice__onednn_bf16_counts(const lattice_backend *be, int *cached, long *hits,
                                long *misses);

/* CPU features that decide kernels; all 0 off x86-64. */
typedef struct lattice__cpu {
    int avx2_fma;   /* AVX2 and FMA3, usable by the OS */
    int avx512;     /* AVX-512 F, BW, VL and DQ (the Skylake-X set), usable */
    int avx512_bf16;
    int amx;        /* AMX tiles, enabled by the OS */
} lattice__cpu;

void lattice__cpu_detect(lattice__cpu *cpu);

/* The OpenBLAS core type the features call for, or NULL to leave it to OpenBLAS. */
const char *lattice__openblas_core_for(const lattice__cpu *cpu);

/* Whether an OpenBLAS core name is vectorised for AVX2 or better. */
int lattice__openblas_core_optimised(const char *core);

/* Load OpenBLAS once per process (thread-safe); 1 when its GEMM can be used. */
int lattice__openblas_load(void);
void lattice__openblas_fill(lattice_backend *be);
/* Why the load failed (or how the core was chosen), for the reason of "default". */
const char *lattice__openblas_why_not(void);


#endif
