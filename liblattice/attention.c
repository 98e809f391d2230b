/* Causal attention over head-major tensors, forward and backward: a GEMM path
 * and a fused kernel (attention.h). */
/* float selects in the loops must if-convert (see kernels.c) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")
/* v8f travels only between always_inline helpers: no call, so no ABI, is
 * crossed (a real call between the AVX clone and a baseline helper would
 * disagree on how a v8f is passed; -O0 builds make such calls) */
#pragma GCC diagnostic ignored "-Wpsabi"

#include "attention.h"

#include "kernels.h"

#include <math.h>
#include <string.h>

#define PROF(op, stmt)                                                                             \
    do {                                                                                           \
        double t0_ = lattice__prof_begin(ptr->prof);                                               \
        stmt;                                                                                      \
        lattice__prof_end(ptr->prof, (op), t0_);                                                   \
    } while (0)

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        lattice_status st_ = (expr);                                                               \
        if (st_ != LATTICE_OK)                                                                     \
            return st_;                                                                            \
    } while (0)

/* Fill the pointer arrays for one batched GEMM over every (batch, query head):
 * x_off etc. give the element offset of head (b, h)'s operand. */
typedef size_t (*offset_fn)(const lattice_attn_dims *d, int b, int h);

static size_t off_q(const lattice_attn_dims *d, int b, int h)
{
    return ((size_t)b * d->n_heads + h) * d->seq * d->head_dim;
}
static size_t off_kv(const lattice_attn_dims *d, int b, int h)
{
    int g = d->n_heads / d->n_kv_heads;
    return ((size_t)b * d->n_kv_heads + h / g) * d->seq * d->head_dim;
}
static size_t off_p(const lattice_attn_dims *d, int b, int h)
{
    return ((size_t)b * d->n_heads + h) * d->seq * d->seq;
}
static size_t off_att(const lattice_attn_dims *d, int b, int h)
{
    return (size_t)b * d->seq * d->n_heads * d->head_dim + (size_t)h * d->head_dim;
}

/* Query rows per block. Each block's GEMMs cover only the keys up to its last
 * row, so the work above the diagonal shrinks to the diagonal blocks. */
#define QBLOCK 32

static int q_block(const lattice_attn_dims *d)
{
    return d->q_block > 0 ? d->q_block : QBLOCK;
}

/* Fill the pointer arrays for one batched GEMM over every (batch, query head);
 * da, db, dc are added to every operand's offset (the block's first row). */
static void fill_all(const lattice_attn_dims *d, const lattice_attn_ptrs *ptr, const float *a,
                     offset_fn oa, size_t da, const float *b, offset_fn ob, size_t db, float *c,
                     offset_fn oc, size_t dc)
{
    for (int bi = 0; bi < d->batch; bi++)
        for (int h = 0; h < d->n_heads; h++) {
            int i = bi * d->n_heads + h;
            ptr->a[i] = a + oa(d, bi, h) + da;
            ptr->b[i] = b + ob(d, bi, h) + db;
            ptr->c[i] = c + oc(d, bi, h) + dc;
        }
}

/* The same over one query head of each group, so that the problems write
 * distinct kv-head outputs (c indexed by the kv head). */
static void fill_group(const lattice_attn_dims *d, const lattice_attn_ptrs *ptr, int g,
                       const float *a, offset_fn oa, size_t da, const float *b, offset_fn ob,
                       size_t db, float *c)
{
    int G = d->n_heads / d->n_kv_heads;
    for (int bi = 0; bi < d->batch; bi++)
        for (int kh = 0; kh < d->n_kv_heads; kh++) {
            int i = bi * d->n_kv_heads + kh, h = kh * G + g;
            ptr->a[i] = a + oa(d, bi, h) + da;
            ptr->b[i] = b + ob(d, bi, h) + db;
            ptr->c[i] = c + off_kv(d, bi, h);
        }
}

/* ---- fused path ----------------------------------------------------------
 * Per head, over the causal part only: row blocks of FR rows and key chunks of
 * FK keys, both aligned to multiples of 8 from row 0, so that a row block's
 * keys end where its last chunk ends. Probabilities (and dS) are kept [T, T]
 * per head like the GEMM path's, with 0 above the diagonal up to the end of
 * each row's chunk; what lies beyond is never read. */

typedef float v8f __attribute__((vector_size(32)));
#define FR 8 /* rows per block: 8 independent FMA chains */
#define FK 8 /* keys per chunk: one v8f */

#define VINLINE __attribute__((always_inline)) static inline

VINLINE v8f ld8(const float *x)
{
    v8f v;
    memcpy(&v, x, sizeof v);
    return v;
}

VINLINE void st8(float *x, v8f v) { memcpy(x, &v, sizeof v); }

/* (scalar op vector broadcasts with one instruction; a {x, x, ...} literal
 * was built lane by lane) */
VINLINE v8f bc8(float x) { return (v8f){0} + x; }

static inline int imin(int a, int b) { return a < b ? a : b; }

typedef int v8i __attribute__((vector_size(32)));
typedef unsigned v8u __attribute__((vector_size(32)));

VINLINE v8f max8(v8f a, v8f b)
{
    const v8i m = a > b;
    return (v8f)(((v8i)a & m) | ((v8i)b & ~m));
}

/* lattice__expf on 8 lanes, the same operations in the same order */
VINLINE v8f exp8(v8f x)
{
    const v8f shifter = bc8(12582912.0f); /* 1.5 * 2^23 */
    const v8f t = x * 1.44269504088896341f + shifter;
    const v8f n = t - shifter;
    v8f r = x - n * 0.693145751953125f;
    r = r - n * 1.428606765330187045e-06f;
    v8f p = bc8(1.0f / 5040.0f);
    p = p * r + 1.0f / 720.0f;
    p = p * r + 1.0f / 120.0f;
    p = p * r + 1.0f / 24.0f;
    p = p * r + 1.0f / 6.0f;
    p = p * r + 0.5f;
    p = p * r + 1.0f;
    p = p * r + 1.0f;
    const v8u sc = ((v8u)t - 0x4B400000u + 127u) << 23;
    const v8f y = p * (v8f)sc;
    return (v8f)((v8i)y & ~(x < -87.0f));
}

/* horizontal max and sum, in a fixed order */
VINLINE float hmax8(v8f v)
{
    float t[8];
    st8(t, v);
    float m = t[0];
    for (int l = 1; l < 8; l++)
        m = t[l] > m ? t[l] : m;
    return m;
}

VINLINE float hsum8(v8f v)
{
    float t[8];
    st8(t, v);
    return ((t[0] + t[1]) + (t[2] + t[3])) + ((t[4] + t[5]) + (t[6] + t[7]));
}

/* Softmax of row[0..n) in place, n a multiple of 8; the entries past the
 * diagonal hold -inf and become 0. */
VINLINE void softmax_chunks(float *row, int n)
{
    v8f mv = ld8(row);
    for (int j = 8; j < n; j += 8)
        mv = max8(mv, ld8(row + j));
    const float mx = hmax8(mv);
    v8f sv = {0};
    for (int j = 0; j < n; j += 8) {
        const v8f e = exp8(ld8(row + j) - mx);
        st8(row + j, e);
        sv += e;
    }
    const float inv = 1.0f / hsum8(sv);
    for (int j = 0; j < n; j += 8)
        st8(row + j, ld8(row + j) * inv);
}

/* g <- p * (g - dot(g, p)) over g[0..n), n a multiple of 8; p is 0 past the
 * diagonal, so g is 0 there. */
VINLINE void softmax_backward_chunks(float *g, const float *p, int n)
{
    v8f dv = {0};
    for (int j = 0; j < n; j += 8)
        dv += ld8(g + j) * ld8(p + j);
    const float dot = hsum8(dv);
    for (int j = 0; j < n; j += 8)
        st8(g + j, ld8(p + j) * (ld8(g + j) - dot));
}

/* Eight accumulators as named locals (an array of them ended up on the stack). */
#define ACC8_DECL v8f c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0}, c6 = {0}, c7 = {0}
#define ACC8_FMA(x0, x1, x2, x3, x4, x5, x6, x7, y)                                               \
    do {                                                                                           \
        c0 += (y) * (x0);                                                                       \
        c1 += (y) * (x1);                                                                       \
        c2 += (y) * (x2);                                                                       \
        c3 += (y) * (x3);                                                                       \
        c4 += (y) * (x4);                                                                       \
        c5 += (y) * (x5);                                                                       \
        c6 += (y) * (x6);                                                                       \
        c7 += (y) * (x7);                                                                       \
    } while (0)
#define ACC8_OUT(arr)                                                                              \
    do {                                                                                           \
        (arr)[0] = c0, (arr)[1] = c1, (arr)[2] = c2, (arr)[3] = c3;                                \
        (arr)[4] = c4, (arr)[5] = c5, (arr)[6] = c6, (arr)[7] = c7;                                \
    } while (0)

/* out[i, j] = alpha a_i . b_j for the rows i of the block i0 .. i0 + FR - 1
 * (< T) and every key j of the chunks up to theirs (j < min(i0 + FK, T));
 * mask_diag: -inf for the keys past each row's own (j > i).
 * a rows: stride lda; bT: the keys transposed, [hd, T]; out rows: stride T.
 * Row-block by row-block, so that the caller can take the block's softmax
 * and its mix while its rows are in L1. */
VINLINE void dots_block(float *out, const float *a, int lda, const float *bT, int i0, int T,
                        int hd, float alpha, int mask_diag)
{
    const float *a0 = a + (size_t)imin(i0 + 0, T - 1) * lda;
    const float *a1 = a + (size_t)imin(i0 + 1, T - 1) * lda;
    const float *a2 = a + (size_t)imin(i0 + 2, T - 1) * lda;
    const float *a3 = a + (size_t)imin(i0 + 3, T - 1) * lda;
    const float *a4 = a + (size_t)imin(i0 + 4, T - 1) * lda;
    const float *a5 = a + (size_t)imin(i0 + 5, T - 1) * lda;
    const float *a6 = a + (size_t)imin(i0 + 6, T - 1) * lda;
    const float *a7 = a + (size_t)imin(i0 + 7, T - 1) * lda;
    for (int j0 = 0; j0 <= i0; j0 += FK) {
        const int kc = imin(FK, T - j0);
        ACC8_DECL;
        if (kc == FK) {
            for (int e = 0; e < hd; e++)
                ACC8_FMA(a0[e], a1[e], a2[e], a3[e], a4[e], a5[e], a6[e], a7[e],
                         ld8(bT + (size_t)e * T + j0));
        } else { /* the last, partial chunk: keys past T count as 0 */
            for (int e = 0; e < hd; e++) {
                float col[FK] = {0};
                for (int c = 0; c < kc; c++)
                    col[c] = bT[(size_t)e * T + j0 + c];
                ACC8_FMA(a0[e], a1[e], a2[e], a3[e], a4[e], a5[e], a6[e], a7[e], ld8(col));
            }
        }
        v8f acc[FR];
        ACC8_OUT(acc);
        if (mask_diag && j0 == i0) { /* keys past row i0 + r's own: -inf */
            const v8i lane = {0, 1, 2, 3, 4, 5, 6, 7};
            const v8f ninf = bc8(-__builtin_inff());
            for (int r = 0; r < FR; r++) {
                const v8i past = lane > r;
                acc[r] = (v8f)(((v8i)(acc[r] * alpha) & ~past) | ((v8i)ninf & past));
            }
            alpha = 1.0f;
        }
        for (int r = 0; r < FR && i0 + r < T; r++) {
            float *o = out + (size_t)(i0 + r) * T + j0;
            if (kc == FK) {
                st8(o, acc[r] * alpha);
            } else {
                float row[FK];
                st8(row, acc[r] * alpha);
                for (int c = 0; c < kc; c++)
                    o[c] = row[c];
            }
        }
    }
}

/* bT[e, j] = b[j, e]: b [T, hd] -> bT [hd, T] */
VINLINE void transpose_rows(float *bT, const float *b, int T, int hd)
{
    for (int e = 0; e < hd; e++)
        for (int j = 0; j < T; j++)
            bT[(size_t)e * T + j] = b[(size_t)j * hd + e];
}

/* The mixes below vectorise over head_dim, so each output element is the same
 * chain of FMAs at any vector width: v8f (AVX2) or, where head_dim is a
 * multiple of 16 and the CPU has AVX-512, v16f (one zmm per row at the study's
 * head_dim 16: half the instructions and broadcasts). Both widths give
 * bit-identical results. */
typedef float v16f __attribute__((vector_size(64)));

VINLINE v16f ld16(const float *x)
{
    v16f v;
    memcpy(&v, x, sizeof v);
    return v;
}

VINLINE void st16(float *x, v16f v) { memcpy(x, &v, sizeof v); }

#define ACC_DECL(VT) VT c0 = {0}, c1 = {0}, c2 = {0}, c3 = {0}, c4 = {0}, c5 = {0}, c6 = {0}, c7 = {0}

/* out_i = alpha sum over j <= i of w[i, j] m_j, for the rows i of the block
 * i0 .. i0 + FR - 1 (w as above: 0 past the diagonal within the row's chunk).
 * m rows: stride hd; out rows: stride ldo. */
#define DEFINE_MIX_BLOCK(NAME, VT, W, LD, ST)                                                      \
    VINLINE void NAME(float *out, int ldo, const float *w, const float *m, int i0, int T, int hd,  \
                      float alpha)                                                                 \
    {                                                                                              \
        const int jend = imin(i0 + FR, T);                                                         \
        const float *w0 = w + (size_t)imin(i0 + 0, T - 1) * T;                                     \
        const float *w1 = w + (size_t)imin(i0 + 1, T - 1) * T;                                     \
        const float *w2 = w + (size_t)imin(i0 + 2, T - 1) * T;                                     \
        const float *w3 = w + (size_t)imin(i0 + 3, T - 1) * T;                                     \
        const float *w4 = w + (size_t)imin(i0 + 4, T - 1) * T;                                     \
        const float *w5 = w + (size_t)imin(i0 + 5, T - 1) * T;                                     \
        const float *w6 = w + (size_t)imin(i0 + 6, T - 1) * T;                                     \
        const float *w7 = w + (size_t)imin(i0 + 7, T - 1) * T;                                     \
        for (int e0 = 0; e0 < hd; e0 += W) {                                                       \
            ACC_DECL(VT);                                                                          \
            for (int j = 0; j < jend; j++) {                                                       \
                const VT mv = LD(m + (size_t)j * hd + e0);                                         \
                ACC8_FMA(w0[j], w1[j], w2[j], w3[j], w4[j], w5[j], w6[j], w7[j], mv);             \
            }                                                                                      \
            VT acc[FR];                                                                            \
            ACC8_OUT(acc);                                                                         \
            for (int r = 0; r < FR && i0 + r < T; r++)                                             \
                ST(out + (size_t)(i0 + r) * ldo + e0, acc[r] * alpha);                             \
        }                                                                                          \
    }
DEFINE_MIX_BLOCK(mix_block8, v8f, 8, ld8, st8)
DEFINE_MIX_BLOCK(mix_block16, v16f, 16, ld16, st16)

/* out_j (=, or += when accumulate) alpha sum over i >= j of w[i, j] m_i, for
 * every key j. m rows: stride ldm; out rows: stride hd. */
#define DEFINE_MIX_T(NAME, VT, W, LD, ST)                                                          \
    VINLINE void NAME(float *out, const float *w, const float *m, int ldm, int T, int hd,          \
                      float alpha, int accumulate)                                                 \
    {                                                                                              \
        for (int j0 = 0; j0 < T; j0 += FK) {                                                       \
            const int kc = imin(FK, T - j0);                                                       \
            for (int e0 = 0; e0 < hd; e0 += W) {                                                   \
                ACC_DECL(VT);                                                                      \
                if (kc == FK) {                                                                    \
                    for (int i = j0; i < T; i++) {                                                 \
                        const VT mv = LD(m + (size_t)i * ldm + e0);                                \
                        const float *wi = w + (size_t)i * T + j0;                                  \
                        ACC8_FMA(wi[0], wi[1], wi[2], wi[3], wi[4], wi[5], wi[6], wi[7], mv);     \
                    }                                                                              \
                } else { /* the last, partial chunk: keys past T count as 0 */                     \
                    for (int i = j0; i < T; i++) {                                                 \
                        const VT mv = LD(m + (size_t)i * ldm + e0);                                \
                        const float *wi = w + (size_t)i * T + j0;                                  \
                        float wv[FK] = {0};                                                        \
                        for (int c = 0; c < kc; c++)                                               \
                            wv[c] = wi[c];                                                         \
                        ACC8_FMA(wv[0], wv[1], wv[2], wv[3], wv[4], wv[5], wv[6], wv[7], mv);     \
                    }                                                                              \
                }                                                                                  \
                VT acc[FK];                                                                        \
                ACC8_OUT(acc);                                                                     \
                for (int c = 0; c < kc; c++) {                                                     \
                    float *o = out + (size_t)(j0 + c) * hd + e0;                                   \
                    VT r = acc[c] * alpha;                                                         \
                    if (accumulate)                                                                \
                        r += LD(o);                                                                \
                    ST(o, r);                                                                      \
                }                                                                                  \
            }                                                                                      \
        }                                                                                          \
    }
DEFINE_MIX_T(mix_t8, v8f, 8, ld8, st8)
DEFINE_MIX_T(mix_t16, v16f, 16, ld16, st16)

VINLINE void mix_block(float *out, int ldo, const float *w, const float *m, int i0, int T, int hd,
                       float alpha, int wide)
{
    if (wide)
        mix_block16(out, ldo, w, m, i0, T, hd, alpha);
    else
        mix_block8(out, ldo, w, m, i0, T, hd, alpha);
}

VINLINE void causal_mix_t(float *out, const float *w, const float *m, int ldm, int T, int hd,
                          float alpha, int accumulate, int wide)
{
    if (wide)
        mix_t16(out, w, m, ldm, T, hd, alpha, accumulate);
    else
        mix_t8(out, w, m, ldm, T, hd, alpha, accumulate);
}

/* The fused groups get an AVX-512 clone as well, for the v16f mixes (a v16f
 * in the AVX2 clone would take two ymm registers and spill). */
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && defined(__linux__)
#define ATTN_CLONES __attribute__((target_clones("arch=x86-64-v4", "arch=x86-64-v3", "default")))
static int have_avx512(void)
{
    return __builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512vl") &&
           __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512dq");
}
#else
#define ATTN_CLONES
static int have_avx512(void) { return 0; }
#endif

/* Entries a row's chunk holds past the diagonal end at this column. */
static inline int chunk_end(int i, int T) { return imin((i / FK + 1) * FK, T); }

/* One kv head and its group of G query heads: the keys are transposed once
 * (into kt, [hd, T]) for all G; then per row block the scores, their softmax
 * and the block's output rows. */
ATTN_CLONES
static void fused_forward_group(float *att, int ldo, float *p, const float *q, const float *k,
                                const float *v, float *kt, int G, int T, int hd, float scale,
                                int wide)
{
    const size_t TT = (size_t)T * T, Thd = (size_t)T * hd;
    transpose_rows(kt, k, T, hd);
    for (int g = 0; g < G; g++) {
        float *pg = p + g * TT, *og = att + (size_t)g * hd;
        const float *qg = q + g * Thd;
        for (int i0 = 0; i0 < T; i0 += FR) {
            dots_block(pg, qg, hd, kt, i0, T, hd, scale, 1);
            for (int i = i0; i < imin(i0 + FR, T); i++) {
                if (chunk_end(i, T) % FK == 0)
                    softmax_chunks(pg + (size_t)i * T, chunk_end(i, T));
                else /* the last, partial chunk */
                    lattice__softmax_row(pg + (size_t)i * T, i + 1, T);
            }
            mix_block(og, ldo, pg, v, i0, T, hd, 1.0f, wide);
        }
    }
}

/* One kv head and its group of G query heads (dK, dV sum over the group); vt:
 * [hd, T] scratch for the values transposed. */
ATTN_CLONES
static void fused_backward_group(float *dq, float *dk, float *dv, float *dp, const float *datt,
                                 int ldo, const float *p, const float *q, const float *k,
                                 const float *v, float *vt, int G, int T, int hd, float scale,
                                 int wide)
{
    const size_t TT = (size_t)T * T, Thd = (size_t)T * hd;
    transpose_rows(vt, v, T, hd);
    for (int g = 0; g < G; g++) {
        float *dpg = dp + g * TT;
        const float *pg = p + g * TT, *dog = datt + (size_t)g * hd;
        for (int i0 = 0; i0 < T; i0 += FR) {
            dots_block(dpg, dog, ldo, vt, i0, T, hd, 1.0f, 0); /* dP = dO V^T */
            for (int i = i0; i < imin(i0 + FR, T); i++) {      /* dS, in place */
                float *gi = dpg + (size_t)i * T;
                if (chunk_end(i, T) % FK == 0)
                    softmax_backward_chunks(gi, pg + (size_t)i * T, chunk_end(i, T));
                else
                    lattice__softmax_backward_row(gi, pg + (size_t)i * T, i + 1, T);
            }
            mix_block(dq + g * Thd, hd, dpg, k, i0, T, hd, scale, wide); /* dQ = scale dS K */
        }
        causal_mix_t(dv, pg, dog, ldo, T, hd, 1.0f, g > 0, wide);           /* dV += P^T dO */
        causal_mix_t(dk, dpg, q + g * Thd, hd, T, hd, scale, g > 0, wide); /* dK += scale dS^T Q */
    }
}

int lattice__attention_fused_ok(const lattice_attn_dims *d)
{
    return d->head_dim % 8 == 0 && d->head_dim <= LATTICE_ATTN_FUSED_MAX_HD;
}

/* Largest head_dim for which AUTO picks the fused path on a built-in backend. */
#define FUSED_AUTO_MAX_HD 64

static int use_fused(const lattice_backend *be, const lattice_attn_dims *d)
{
    if (d->path == LATTICE_ATTN_FUSED)
        return 1;
    if (d->path == LATTICE_ATTN_GEMM || !lattice__attention_fused_ok(d))
        return 0;
    /* a custom backend gets its GEMMs (it may run them elsewhere) */
    return be->user_ops.size == 0 && d->head_dim <= FUSED_AUTO_MAX_HD;
}

static void fused_forward(lattice_backend *be, float *att, float *p, const float *q,
                          const float *k, const float *v, float *kv_t, const lattice_attn_dims *d)
{
    const int T = d->seq, hd = d->head_dim, H = d->n_heads, KV = d->n_kv_heads, G = H / KV;
    const int ldo = H * hd, nkv = d->batch * KV, nt = be->n_threads;
    const float scale = 1.0f / sqrtf((float)hd);
    const int wide = hd % 16 == 0 && have_avx512();
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nkv > 1)
    for (int bk = 0; bk < nkv; bk++) {
        const int b = bk / KV, kh = bk % KV, h0 = kh * G;
        const size_t bh0 = (size_t)b * H + h0, kv = (size_t)bk * T * hd;
        fused_forward_group(att + (size_t)b * T * ldo + (size_t)h0 * hd, ldo, p + bh0 * T * T,
                            q + bh0 * T * hd, k + kv, v + kv, kv_t + kv, G, T, hd, scale, wide);
    }
}

static void fused_backward(lattice_backend *be, float *dq, float *dk, float *dv, float *dp,
                           const float *datt, const float *p, const float *q, const float *k,
                           const float *v, float *kv_t, const lattice_attn_dims *d)
{
    const int T = d->seq, hd = d->head_dim, H = d->n_heads, KV = d->n_kv_heads, G = H / KV;
    const int ldo = H * hd, nkv = d->batch * KV, nt = be->n_threads;
    const float scale = 1.0f / sqrtf((float)hd);
    const int wide = hd % 16 == 0 && have_avx512();
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (nkv > 1)
    for (int bk = 0; bk < nkv; bk++) {
        const int b = bk / KV, kh = bk % KV, h0 = kh * G;
        const size_t bh0 = (size_t)b * H + h0, kv = (size_t)bk * T * hd;
        fused_backward_group(dq + bh0 * T * hd, dk + kv, dv + kv, dp + bh0 * T * T,
                             datt + (size_t)b * T * ldo + (size_t)h0 * hd, ldo, p + bh0 * T * T,
                             q + bh0 * T * hd, k + kv, v + kv, kv_t + kv, G, T, hd, scale, wide);
    }
}

/* ---- GEMM path ---------------------------------------------------------- */

static lattice_status gemm_forward(lattice_backend *be, float *att, float *p, const float *q,
                                   const float *k, const float *v, const lattice_attn_dims *d,
                                   const lattice_attn_ptrs *ptr)
{
    const int T = d->seq, hd = d->head_dim, ldo = d->n_heads * hd, nb = d->batch * d->n_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    const int QB = q_block(d);
    for (int r0 = 0; r0 < T; r0 += QB) {
        const int rows = T - r0 < QB ? T - r0 : QB, kend = r0 + rows;
        /* S = scale Q K^T over keys 0..kend, then the causal softmax in place gives P. */
        PROF(LATTICE_OP_ATTN_SCORE, {
            fill_all(d, ptr, q, off_q, (size_t)r0 * hd, k, off_kv, 0, p, off_p, (size_t)r0 * T);
            TRY(lattice__gemm_batched(be, 0, 1, rows, kend, hd, scale, ptr->a, hd, ptr->b, hd,
                                      0.0f, ptr->c, T, nb));
        });
        PROF(LATTICE_OP_SOFTMAX, lattice__causal_softmax(p, nb, T, r0, rows, be->n_threads));
        /* O = P V, written straight into the heads-side-by-side layout. */
        PROF(LATTICE_OP_ATTN_VALUE, {
            fill_all(d, ptr, p, off_p, (size_t)r0 * T, v, off_kv, 0, att, off_att,
                     (size_t)r0 * ldo);
            TRY(lattice__gemm_batched(be, 0, 0, rows, hd, kend, 1.0f, ptr->a, T, ptr->b, hd, 0.0f,
                                      ptr->c, ldo, nb));
        });
    }
    return LATTICE_OK;
}

static lattice_status gemm_backward(lattice_backend *be, float *dq, float *dk, float *dv,
                                    float *dp, const float *datt, const float *p, const float *q,
                                    const float *k, const float *v, const lattice_attn_dims *d,
                                    const lattice_attn_ptrs *ptr)
{
    const int T = d->seq, hd = d->head_dim, ldo = d->n_heads * hd;
    const int G = d->n_heads / d->n_kv_heads;
    const int nb = d->batch * d->n_heads, nkv = d->batch * d->n_kv_heads;
    const float scale = 1.0f / sqrtf((float)hd);
    /* Blocks from the last: it covers every key, so it writes dK and dV whole
     * (beta 0) and the earlier blocks add to their prefixes. */
    const int QB = q_block(d);
    for (int r0 = (T - 1) / QB * QB; r0 >= 0; r0 -= QB) {
        const int rows = T - r0 < QB ? T - r0 : QB, kend = r0 + rows;
        const int last = kend == T;
        PROF(LATTICE_OP_ATTN_VALUE, {
            /* dP = dO V^T */
            fill_all(d, ptr, datt, off_att, (size_t)r0 * ldo, v, off_kv, 0, dp, off_p,
                     (size_t)r0 * T);
            TRY(lattice__gemm_batched(be, 0, 1, rows, kend, hd, 1.0f, ptr->a, ldo, ptr->b, hd,
                                      0.0f, ptr->c, T, nb));
            /* dV = sum over a group's query heads of P^T dO, one head per group at a time. */
            for (int g = 0; g < G; g++) {
                fill_group(d, ptr, g, p, off_p, (size_t)r0 * T, datt, off_att, (size_t)r0 * ldo,
                           dv);
                TRY(lattice__gemm_batched(be, 1, 0, kend, hd, rows, 1.0f, ptr->a, T, ptr->b, ldo,
                                          last && g == 0 ? 0.0f : 1.0f, ptr->c, hd, nkv));
            }
        });
        /* dS = P * (dP - rowsum(dP * P)), in place. */
        PROF(LATTICE_OP_SOFTMAX, lattice__softmax_backward(dp, p, nb, T, r0, rows, be->n_threads));
        PROF(LATTICE_OP_ATTN_SCORE, {
            /* dQ = scale dS K */
            fill_all(d, ptr, dp, off_p, (size_t)r0 * T, k, off_kv, 0, dq, off_q, (size_t)r0 * hd);
            TRY(lattice__gemm_batched(be, 0, 0, rows, hd, kend, scale, ptr->a, T, ptr->b, hd, 0.0f,
                                      ptr->c, hd, nb));
            /* dK = scale sum over the group of dS^T Q */
            for (int g = 0; g < G; g++) {
                fill_group(d, ptr, g, dp, off_p, (size_t)r0 * T, q, off_q, (size_t)r0 * hd, dk);
                TRY(lattice__gemm_batched(be, 1, 0, kend, hd, rows, scale, ptr->a, T, ptr->b, hd,
                                          last && g == 0 ? 0.0f : 1.0f, ptr->c, hd, nkv));
            }
        });
    }
    return LATTICE_OK;
}

lattice_status lattice__attention_forward(lattice_backend *be, float *att, float *p,
                                          const float *q, const float *k, const float *v,
                                          const lattice_attn_dims *d, const lattice_attn_ptrs *ptr)
{
    if (!use_fused(be, d))
        return gemm_forward(be, att, p, q, k, v, d, ptr);
    PROF(LATTICE_OP_ATTN_FUSED, fused_forward(be, att, p, q, k, v, ptr->kv_t, d));
    return LATTICE_OK;
}

lattice_status lattice__attention_backward(lattice_backend *be, float *dq, float *dk, float *dv,
                                           float *dp, const float *datt, const float *p,
                                           const float *q, const float *k, const float *v,
                                           const lattice_attn_dims *d,
                                           const lattice_attn_ptrs *ptr)
{
    if (!use_fused(be, d))
        return gemm_backward(be, dq, dk, dv, dp, datt, p, q, k, v, d, ptr);
    PROF(LATTICE_OP_ATTN_FUSED,
         fused_backward(be, dq, dk, dv, dp, datt, p, q, k, v, ptr->kv_t, d));
    return LATTICE_OK;
}
