/* Causal multi-head attention with grouped-query heads, on head-major tensors.
 * Its GEMMs go through the backend as batches of per-head problems. */
#ifndef LATTICE_ATTENTION_H
#define LATTICE_ATTENTION_H

#include "backend_impl.h"
#include "profile.h"

typedef struct lattice_attn_dims {
    int batch, seq, n_heads, n_kv_heads, head_dim;
    int q_block; /* query rows per block of the GEMM path (0: the default); seq or more: one block */
    int path;    /* LATTICE_ATTN_AUTO, _GEMM or _FUSED */
} lattice_attn_dims;

/* How the attention core runs. GEMM: batched backend GEMMs per query block
 * plus the row softmax; what a custom backend always gets. FUSED: one pass per
 * head with the library's own vectorised loops over the causal part only, for
 * head_dim a multiple of 8 up to LATTICE_ATTN_FUSED_MAX_HD. AUTO: FUSED for
 * the built-in backends where it is faster (measured), else GEMM. */
enum { LATTICE_ATTN_AUTO = 0, LATTICE_ATTN_GEMM = 1, LATTICE_ATTN_FUSED = 2 };
#define LATTICE_ATTN_FUSED_MAX_HD 256

/* Whether the fused path can run this shape. */
int lattice__attention_fused_ok(const lattice_attn_dims *d);

/* Pointer scratch for batched GEMMs: batch * n_heads entries each. */
typedef struct lattice_attn_ptrs {
    const float **a, **b;
    float **c;
    lattice_prof *prof; /* may be NULL */
    float *kv_t;        /* fused path: batch * n_kv_heads * head_dim * seq floats of scratch */
} lattice_attn_ptrs;

/* q[B,H,T,hd], k, v[B,KV,T,hd] -> p[B,H,T,T] (softmax probabilities, kept for
 * backward; only the causal part and the diagonal blocks are written, entries
 * above the diagonal that are written are 0) and att[B*T, H*hd] (heads side by
 * side). */
lattice_status lattice__attention_forward(lattice_backend *be, float *att, float *p,
                                          const float *q, const float *k, const float *v,
                                          const lattice_attn_dims *d, const lattice_attn_ptrs *ptr);

/* From datt[B*T, H*hd] to dq[B,H,T,hd], dk, dv[B,KV,T,hd] (all =). dp[B,H,T,T]
 * is scratch. */
lattice_status lattice__attention_backward(lattice_backend *be, float *dq, float *dk, float *dv,
                                           float *dp, const float *datt, const float *p,
                                           const float *q, const float *k, const float *v,
                                           const lattice_attn_dims *d,
                                           const lattice_attn_ptrs *ptr);

#endif
