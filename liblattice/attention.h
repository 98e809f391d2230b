/* Causal multi-head attention with grouped-query heads, on head-major tensors.
 * Its GEMMs go through the backend as batches of per-head problems. */
#ifndef LATTICE_ATTENTION_H
#define LATTICE_ATTENTION_H

#include "internal.h"
#include "profile.h"

typedef struct lattice_attn_dims {
    int batch, seq, n_heads, n_kv_heads, head_dim;
    int q_block; /* query rows per block of the GEMM path (0: the default); seq or more: one block */
    int path;    /* LATTICE_ATTN_AUTO, _GEMM or _FUSED */
    int isa;     /* the fused path's kernels: LATTICE_ATTN_ISA_* (AUTO, 0: the backend's
                  * lattice_backend_set_attention_kernel, else the CPU's best) */
} lattice_attn_dims;

/* How the attention core runs. GEMM: batched backend GEMMs per query block
 * plus the row softmax; the reference, and what a custom backend always gets.
 * FUSED: the flash path (attention_flash.c), one kernel per kv head and its
 * group of query heads over the causal part only, the scores kept in
 * registers and L1 with an online softmax, backward recomputing them from
 * each row's log-sum-exp; head_dim a multiple of 8 up to
 * LATTICE_FLASH_MAX_HD. AUTO: FUSED for the built-in backends where it runs,
 * else GEMM. */
enum { LATTICE_ATTN_AUTO = 0, LATTICE_ATTN_GEMM = 1, LATTICE_ATTN_FUSED = 2 };
#define LATTICE_FLASH_MAX_HD 128

/* Whether the fused path can run this shape. */
int lattice__attention_fused_ok(const lattice_attn_dims *d);

/* Pointer scratch for batched GEMMs: batch * n_heads entries each. */
typedef struct lattice_attn_ptrs {
    const float **a, **b;
    float **c;
    lattice_prof *prof; /* may be NULL */
} lattice_attn_ptrs;

/* q[B,H,T,hd], k, v[B,KV,T,hd] -> att[B*T, H*hd] (heads side by side) and
 * p[B,H,T,T], what backward needs: the GEMM path's softmax probabilities
 * (only the causal part and the diagonal blocks are written, entries above
 * the diagonal that are written are 0), or the fused path's log-sum-exp of
 * each row's scores (head (b, h)'s T values at the start of its T x T). */
lattice_status lattice__attention_forward(lattice_backend *be, float *att, float *p,
                                          const float *q, const float *k, const float *v,
                                          const lattice_attn_dims *d, const lattice_attn_ptrs *ptr);

/* The probability row t of head (b, h) gave key j (j <= t) in the forward
 * that left p, on either path (the fused one recomputes it from q, k and the
 * row's log-sum-exp). */
double lattice__attention_prob(const lattice_backend *be, const lattice_attn_dims *d,
                               const float *p, const float *q, const float *k, int b, int h, int t,
                               int j);

/* From datt[B*T, H*hd] to dq[B,H,T,hd], dk, dv[B,KV,T,hd] (all =); att and p
 * as the forward left them. dp[B,H,T,T] is scratch. */
lattice_status lattice__attention_backward(lattice_backend *be, float *dq, float *dk, float *dv,
                                           float *dp, const float *datt, const float *att,
                                           const float *p,
                                           const float *q, const float *k, const float *v,
                                           const lattice_attn_dims *d,
                                           const lattice_attn_ptrs *ptr);

/* ---- the flash path's kernels (attention_flash.c) ----
 * Built for AVX-512 (16 lanes), AVX2/FMA (8) and plain C, the one that runs
 * chosen from the CPU's features (lattice__cpu_detect), or by the dims' isa
 * (a backend's lattice_backend_set_attention_kernel) where the CPU can run
 * it. Each lane is one
 * query row (forward) or one key (backward), so every value's chain of
 * operations is the same at 8 and 16 lanes; the instances may still round
 * differently where the compiler fuses a multiply and an add in one and not
 * the other (seen in a -O2 build, not in the -O3 release build). */
enum { LATTICE_ATTN_ISA_AUTO = 0, LATTICE_ATTN_ISA_PORTABLE = 1, LATTICE_ATTN_ISA_AVX2 = 2,
       LATTICE_ATTN_ISA_AVX512 = 3 };
const char *lattice__attn_isa_name(int isa);
int lattice__attn_isa_supported(int isa);
/* The instance that runs for a request: it, where the CPU can run it; else
 * (AUTO too) the CPU's best. */
int lattice__attn_isa_resolve(int requested);
int lattice__flash_ok(int head_dim);

/* att (as above) and lse: head (b, h)'s rows' log-sum-exp of their scaled
 * scores at lse + (b H + h) lse_stride. nt threads over the batch's kv heads. */
void lattice__flash_forward(float *att, float *lse, size_t lse_stride, const float *q,
                            const float *k, const float *v, const lattice_attn_dims *d, int nt);
/* dq, dk, dv (=) from datt, the forward's att and lse; dd: scratch laid out
 * as lse. */
void lattice__flash_backward(float *dq, float *dk, float *dv, float *dd, const float *datt,
                             const float *att, const float *lse, size_t lse_stride,
                             const float *q, const float *k, const float *v,
                             const lattice_attn_dims *d, int nt);

#endif
