/* The onednn backend's bf16 GEMMs (lattice_backend_set_gemm_precision): the
 * operands rounded to bf16 into scratch, then oneDNN's matmul primitive (its
 * brgemm kernels: AMX tiles where the CPU has them) with fp32 accumulation
 * and an fp32 C, one primitive per call shape, created once and kept in a
 * cache per backend. */
#ifndef LATTICE_BACKEND_ONEDNN_BF16_H
#define LATTICE_BACKEND_ONEDNN_BF16_H

#include <stddef.h>
#include <stdint.h>

typedef struct lattice__bf16mm lattice__bf16mm;

/* The primitives a cache keeps: a call whose shape finds it full gets one of
 * its own, made and freed in the call. */
enum { LATTICE__BF16MM_CAP = 256 };
/* lattice__bf16mm_gemm's code for out of memory (backend.c names it). */
enum { LATTICE__BF16MM_NO_MEMORY = 2000 };

/* fp32 to bf16, rounding to nearest, ties to even; a NaN stays a NaN (its
 * quiet bit set); a finite value past bf16's largest rounds to infinity. A
 * stored matrix of rows x cols (leading dimension ld) into dense bf16. */
/* One OpenMP thread for a oneDNN call (its previous count returned), and
 * that count given back: both GEMM slots of backend_onednn.c use them. */
int lattice__onednn_threads_one(void);
void lattice__onednn_threads_back(int saved);

void lattice__to_bf16(const float *x, int rows, int cols, int ld, uint16_t *out);

/* An empty cache (NULL when out of memory); its oneDNN engine is made on first use. */
lattice__bf16mm *lattice__bf16mm_create(void);
/* Frees every cached primitive and the engine; NULL is a no-op. No call may be in flight. */
void lattice__bf16mm_destroy(lattice__bf16mm *mm);
/* C = alpha op(A) op(B) + beta C (row-major, as lattice_backend_ops.sgemm)
 * with A and B rounded to bf16, on the calling thread alone. Safe to call
 * from several threads at once. 0, or an error code
 * (LATTICE__BF16MM_NO_MEMORY, or 1000 + oneDNN's status). */
int lattice__bf16mm_gemm(lattice__bf16mm *mm, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc);
/* The number of primitives cached, and of calls that found theirs there. */
void lattice__bf16mm_counts(lattice__bf16mm *mm, int *cached, long *hits, long *misses);

#endif
