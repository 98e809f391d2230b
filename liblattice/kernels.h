/* The non-GEMM kernels of the model, forward and backward, as plain functions.
 * Shapes are given row-major; N = batch * seq rows. Every kernel takes the
 * thread count nt; results never depend on it (reductions over rows go through
 * fixed-size chunks summed in order). */
#ifndef LATTICE_KERNELS_H
#define LATTICE_KERNELS_H

#include <stdint.h>

/* Hot row kernels are built three times on x86-64 with GCC: for AVX-512
 * (x86-64-v4), for AVX2/FMA (x86-64-v3) and for the baseline, chosen once at
 * load time (ifunc). Their loops are short vectorised passes, about twice as
 * fast at 8 lanes with FMA as without, and the norms, SwiGLU and the losses
 * faster again at 16. The q/k norm and RoPE kernels stop at AVX2
 * (LATTICE_VEC_CLONES_V3): at head widths of 16 their 16-lane code was
 * slower than the 8-lane one (doc/PERFORMANCE.md, round 7). Results differ
 * between the builds only by float rounding (FMA, the order of a row's
 * sums), and a given machine always runs the same one. */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define LATTICE_VEC_CLONES                                                                         \
    __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
#define LATTICE_VEC_CLONES_V3 __attribute__((target_clones("arch=x86-64-v3", "default")))
#else
#define LATTICE_VEC_CLONES
#define LATTICE_VEC_CLONES_V3
#endif

/* Rows per chunk of a deterministic column reduction. */
#define LATTICE_REDUCE_CHUNK 32

/* Scratch floats a column reduction over n_rows rows of width cols needs. */
long lattice__reduce_scratch(long n_rows, long cols);

/* out[N,C] = wte[tokens[n], :] */
void lattice__embedding_forward(float *out, const int32_t *tokens, const float *wte, long n, int c,
                                int nt);
/* dwte[tokens[n], :] += dout[n, :] */
void lattice__embedding_backward(float *dwte, const float *dout, const int32_t *tokens, long n,
                                 int c, int nt);

/* Norm over the last axis of in[N,C] -> out[N,C]. layer != 0: LayerNorm
 * (mean[N] written, bias b); otherwise RMSNorm (mean and b unused, may be NULL). */
void lattice__norm_forward(int layer, float *out, float *mean, float *rstd, const float *in,
                           const float *w, const float *b, float eps, long n, int c, int nt);
/* The norm with a residual join fused in, one pass over the rows (its twin:
 * lattice__axpby and lattice__norm_forward, equal up to FMA rounding): sum[N,C] becomes
 * sum + xa x where x is not NULL (the residual add before a norm: pre's
 * stream into the next sublayer's input norm, post's a x + y), then out =
 * Norm(sum), plus res where res is not NULL (peri's x + Norm(y)). out must
 * not alias sum or res. */
void lattice__norm_join_forward(int layer, float *out, float *mean, float *rstd, float *sum,
                                const float *x, float xa, const float *res, const float *w,
                                const float *b, float eps, long n, int c, int nt);
/* din[N,C] (=, or += when accumulate) from dout; dw[C], db[C] += (either may be
 * NULL: frozen). scratch: lattice__reduce_scratch(n, 2 * c) floats. */
void lattice__norm_backward(int layer, float *din, int accumulate, float *dw, float *db,
                            const float *dout, const float *in, const float *w, const float *mean,
                            const float *rstd, long n, int c, float *scratch, int nt);

/* Queries/keys/values from the fused projection raw[N, (H + 2 Hkv) * hd]:
 * optional per-head RMSNorm (weights qw[hd], kw[hd]), RoPE at position t, and
 * the head-major layouts q[B,H,T,hd], k[B,Hkv,T,hd], v[B,Hkv,T,hd].
 * rope[T, 2, hd/2] holds the cosines then the sines of each position (so
 * that the rotation loops read both contiguously). rstd_q[N*H], rstd_k[N*Hkv] used when qk_norm. */
typedef struct lattice_qkv_dims {
    int batch, seq, n_heads, n_kv_heads, head_dim, qk_norm;
    float eps;
} lattice_qkv_dims;

void lattice__qkv_forward(float *q, float *k, float *v, float *rstd_q, float *rstd_k,
                          const float *raw, const float *qw, const float *kw, const float *rope,
                          const lattice_qkv_dims *d, int nt);
/* Inverse of the above: draw[N, (H + 2 Hkv) * hd] (=) from dq, dk, dv
 * (head-major); dqw, dkw += (NULL: frozen). scratch: reduce_scratch(N, 2 * hd). */
void lattice__qkv_backward(float *draw, float *dqw, float *dkw, const float *dq, const float *dk,
                           const float *dv, const float *raw, const float *qw, const float *kw,
                           const float *rstd_q, const float *rstd_k, const float *rope,
                           const lattice_qkv_dims *d, float *scratch, int nt);

/* rope[T, 2, hd/2]: cos, then sin, of t * theta^(-2i/hd). */
void lattice__rope_table(float *rope, int seq, int head_dim, float theta);

/* In place over rows r0 .. r0 + rows - 1 of each p[R, T, T] (R = batch *
 * heads): causal softmax of entries 0..i of row i; entries i+1 .. r0+rows-1
 * become 0 and the rest of the row is not touched. */
void lattice__causal_softmax(float *p, long n_mats, int t, int r0, int rows, int nt);
/* The softmax backward over the same rows and entries, in place:
 * dp <- p * (dp - rowsum(dp * p)). */
void lattice__softmax_backward(float *dp, const float *p, long n_mats, int t, int r0, int rows,
                               int nt);

/* One row of those: softmax of row[0..n) in place, row[n..zero_to) = 0. */
void lattice__softmax_row(float *row, int n, int zero_to);
/* g[0..n) <- p * (g - dot(g, p)) over the first n entries, g[n..zero_to) = 0. */
void lattice__softmax_backward_row(float *g, const float *p, int n, int zero_to);

/* exp(x) within about 2 ulp for x <= 88 (callers pass x <= 0: softmax
 * arguments x - max, sigmoid of -|x|); exactly 0 below -87, where the result
 * would be subnormal; NaN stays NaN. Inline and free of float selects so that
 * loops over it vectorise and never touch subnormals (which cost a microcode
 * assist per operation; a clamp of x made GCC evaluate the clamped branch on
 * every lane and hit them). */
static inline float lattice__expf(float x)
{
    union { float f; uint32_t i; } t, s, y;
    /* x = n ln2 + r, |r| <= ln2 / 2; the shifter rounds x log2(e) to n. */
    const float shifter = 12582912.0f; /* 1.5 * 2^23 */
    t.f = x * 1.44269504088896341f + shifter;
    const float n = t.f - shifter;
    float r = x - n * 0.693145751953125f;       /* ln2 high part: n * it is exact */
    r = r - n * 1.428606765330187045e-06f;      /* ln2 low part */
    /* exp(r): Taylor to r^7 (truncation < 1e-8 relative on |r| <= 0.347) */
    float p = 1.0f / 5040.0f;
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    s.i = (t.i - 0x4B400000u + 127u) << 23; /* 2^n for n in -126..127 */
    y.f = p * s.f;
    y.i &= -(uint32_t)!(x < -87.0f);
    return y.f;
}

/* s[N,F] = silu(gu[:, :F]) * gu[:, F:] */
void lattice__swiglu_forward(float *s, const float *gu, long n, int f, int nt);
/* dgu[N,2F] (=) from ds[N,F]; where keep_s, ds then holds the forward's s
 * (bit for bit: the same operations), for the down projection's weight
 * gradient, so that the forward need not keep it. */
void lattice__swiglu_backward(float *dgu, float *ds, const float *gu, int keep_s, long n, int f,
                              int nt);

/* Mean cross-entropy of logits[N,V] against targets over positions with
 * mask != 0 (mask NULL: all). Writes dlogits (=) when non-NULL. rowloss: N
 * doubles of scratch. Returns the mean; *count gets the counted positions. */
double lattice__cross_entropy(float *dlogits, const float *logits, const int32_t *targets,
                              const uint8_t *mask, long n, int v, double *rowloss,
                              int64_t *count, int nt);

/* y[i] = a * y[i] + x[i] */
void lattice__axpby(float *y, float a, const float *x, long n, int nt);

#endif
