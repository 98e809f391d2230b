/* Causal attention over head-major tensors, forward and backward: the GEMM
 * path (the reference) and the choice between it and the fused path, whose
 * kernels are attention_flash.c's (attention.h). */

#include "attention.h"

#include "backend_impl.h"
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

/* ---- fused path: attention_flash.c ------------------------------------------ */

int lattice__attention_fused_ok(const lattice_attn_dims *d)
{
    return lattice__flash_ok(d->head_dim);
}

static int use_fused(const lattice_backend *be, const lattice_attn_dims *d)
{
    if (d->path == LATTICE_ATTN_FUSED)
        return 1;
    if (d->path == LATTICE_ATTN_GEMM || !lattice__attention_fused_ok(d))
        return 0;
    /* a custom backend gets its GEMMs (it may run them elsewhere) */
    return be->user_ops.size == 0;
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

/* d with the backend's kernel choice where d makes none. */
static lattice_attn_dims with_backend_isa(const lattice_backend *be, const lattice_attn_dims *d)
{
    lattice_attn_dims dd = *d;
    if (dd.isa == LATTICE_ATTN_ISA_AUTO)
        dd.isa = be->attn_isa;
    return dd;
}

lattice_status lattice__attention_forward(lattice_backend *be, float *att, float *p,
                                          const float *q, const float *k, const float *v,
                                          const lattice_attn_dims *d, const lattice_attn_ptrs *ptr)
{
    if (!use_fused(be, d))
        return gemm_forward(be, att, p, q, k, v, d, ptr);
    if (!lattice__attention_fused_ok(d))
        return LATTICE_ERR_UNSUPPORTED;
    const size_t TT = (size_t)d->seq * d->seq;
    const lattice_attn_dims dd = with_backend_isa(be, d);
    PROF(LATTICE_OP_ATTN_FUSED, lattice__flash_forward(att, p, TT, q, k, v, &dd, be->n_threads));
    return LATTICE_OK;
}

lattice_status lattice__attention_backward(lattice_backend *be, float *dq, float *dk, float *dv,
                                           float *dp, const float *datt, const float *att,
                                           const float *p, const float *q, const float *k,
                                           const float *v, const lattice_attn_dims *d,
                                           const lattice_attn_ptrs *ptr)
{
    if (!use_fused(be, d))
        return gemm_backward(be, dq, dk, dv, dp, datt, p, q, k, v, d, ptr);
    if (!lattice__attention_fused_ok(d))
        return LATTICE_ERR_UNSUPPORTED;
    const size_t TT = (size_t)d->seq * d->seq;
    const lattice_attn_dims dd = with_backend_isa(be, d);
    PROF(LATTICE_OP_ATTN_FUSED, lattice__flash_backward(dq, dk, dv, dp, datt, att, p, TT, q, k, v,
                                                        &dd, be->n_threads));
    return LATTICE_OK;
}

double lattice__attention_prob(const lattice_backend *be, const lattice_attn_dims *d,
                               const float *p, const float *q, const float *k, int b, int h, int t,
                               int j)
{
    const int T = d->seq, H = d->n_heads, hd = d->head_dim, G = H / d->n_kv_heads;
    const size_t bh = (size_t)b * H + h;
    if (!use_fused(be, d))
        return p[(bh * T + t) * T + j];
    const float *qt = q + (bh * T + t) * hd;
    const float *kj = k + (((size_t)b * d->n_kv_heads + h / G) * T + j) * hd;
    double s = 0.0;
    for (int e = 0; e < hd; e++)
        s += (double)qt[e] * kj[e];
    return exp(s / sqrt((double)hd) - p[bh * T * T + t]);
}
