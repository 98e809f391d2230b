/* The model's passes: forward and backward, each step's pair side by side
 * (a norm, a sublayer's input and output, a layer, the whole rows), and the
 * losses on the logits (cross-entropy, evaluation). Each op's shapes are in
 * kernels.h and attention.h; how a pass uses threads is model_threads.c. */
#include "model_internal.h"

#include "attention.h"
#include "backend_impl.h"
#include "kernels.h"

#include <math.h>
#include <stdio.h>
#include <string.h>

#define NT (m->be->n_threads)

/* ---- norms --------------------------------------------------------------- */

static void norm_fwd(lattice_model *m, float *out, norm_stats *st, const float *in,
                     const norm_params *np, long n)
{
    PROF(LATTICE_OP_NORM,
         lattice__norm_forward(m->norm.kind == LATTICE_NORM_KIND_LAYER, out, st->mean, st->rstd, in,
                               np->w, np->b, m->norm.eps, n, m->p.d_model, NT));
}

static void norm_bwd(lattice_model *m, float *din, int accumulate, const norm_params *np,
                     int trainable, const float *dout, const float *in, const norm_stats *st,
                     long n)
{
    float *dw = trainable ? lattice__grad_of(m, np->w) : NULL;
    float *db = trainable && np->b ? lattice__grad_of(m, np->b) : NULL;
    PROF(LATTICE_OP_NORM,
         lattice__norm_backward(m->norm.kind == LATTICE_NORM_KIND_LAYER, din, accumulate, dw, db, dout,
                                in, np->w, st->mean, st->rstd, n, m->p.d_model, m->red, NT));
}

/* ---- a sublayer: its input and its output -------------------------------- */

/* A sublayer's input: Norm_in(x) under pre and peri, x itself under post. */
static const float *sublayer_input(lattice_model *m, float *buf, norm_stats *st, const float *x,
                                   const norm_params *np, long n)
{
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST)
        return x;
    norm_fwd(m, buf, st, x, np, n);
    return buf;
}

/* The residual's share and the input path's share (d_in, the gradient of the
 * sublayer's input after Norm_in) joined into *g, the gradient of x. */
static void sublayer_input_grad(lattice_model *m, float *g, const float *x, const norm_stats *st,
                                const norm_params *np, int tr, long n)
{
    const long cells = n * m->p.d_model;
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST) /* g = a g + d_in, one pass */
        PROF(LATTICE_OP_ELEMWISE, lattice__axpby(g, m->norm.residual_scale, m->d_in, cells, NT));
    else
        norm_bwd(m, g, 1, np, tr, m->d_in, x, st, n);
}

/* norm_fwd with a residual join fused in (lattice__norm_join_forward). */
static void norm_join_fwd(lattice_model *m, float *out, norm_stats *st, float *sum,
                          const float *x, float xa, const float *res, const norm_params *np,
                          long n)
{
    PROF(LATTICE_OP_NORM,
         lattice__norm_join_forward(m->norm.kind == LATTICE_NORM_KIND_LAYER, out, st->mean,
                                    st->rstd, sum, x, xa, res, np->w, np->b, m->norm.eps, n,
                                    m->p.d_model, NT));
}

/* The next sublayer's input norm, for sublayer_output to fuse its residual
 * add into (pre-norm; NULL: none). */
typedef struct next_norm {
    float *out;
    norm_stats *st;
    const norm_params *np;
} next_norm;

/* Join a sublayer's output projection y = in W^T (W is [D, k]) to its input
 * stream x, as the placement says: pre out = x + y (and, given next, the
 * next sublayer's input Norm(out) in the same pass); peri out = x + Norm(y),
 * keeping y; post out = Norm(a x + y), keeping the sum r. The joins run
 * inside the norms' passes over the rows. */
static lattice_status sublayer_output(lattice_model *m, float *out, const float *x, const float *in,
                                      const float *w, int k, float *y, float *r, norm_stats *st,
                                      const norm_params *np, long n, lattice_op gemm_op,
                                      const next_norm *next)
{
    const int D = m->p.d_model;
    const lattice_norm_placement pl = m->norm.placement;
    float *proj = pl == LATTICE_NORM_PLACEMENT_PERI ? y : pl == LATTICE_NORM_PLACEMENT_POST ? r
                                                                                          : out;
    PROF(gemm_op,
         TRY(lattice__gemm(m->be, 0, 1, (int)n, D, k, 1.0f, in, k, w, k, 0.0f, proj, D)));
    if (pl == LATTICE_NORM_PLACEMENT_PERI)
        norm_join_fwd(m, out, st, y, NULL, 1.0f, x, np, n);
    else if (pl == LATTICE_NORM_PLACEMENT_POST)
        norm_join_fwd(m, out, st, r, x, m->norm.residual_scale, NULL, np, n);
    else if (next)
        norm_join_fwd(m, next->out, next->st, out, x, 1.0f, NULL, next->np, n);
    else
        PROF(LATTICE_OP_ELEMWISE, lattice__axpby(out, 1.0f, x, n * D, NT));
    return LATTICE_OK;
}

/* Backward through sublayer_output up to its projection: *g holds the
 * gradient of the sublayer's output stream. Post-norm swaps in the gradient of
 * the residual sum; returns the gradient of the projection's output y. */
static const float *sublayer_output_grad(lattice_model *m, float **g, float **spare, const float *y,
                                         const float *r, const norm_stats *st,
                                         const norm_params *np, int tr, long n)
{
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST) {
        norm_bwd(m, *spare, 0, np, tr, *g, r, st, n);
        float *tmp = *g;
        *g = *spare;
        *spare = tmp;
    }
    if (m->norm.placement != LATTICE_NORM_PLACEMENT_PERI)
        return *g;
    norm_bwd(m, m->d_tmp, 0, np, tr, *g, y, st, n);
    return m->d_tmp;
}

/* ---- the row-start rescale (block_rescale) -------------------------------- */

/* RMS of one position's stream, with the norm's eps, as every norm takes it. */
static double stream_rms(const float *x, int D, float eps)
{
    double ss = 0.0;
    for (int d = 0; d < D; d++)
        ss += (double)x[d] * x[d];
    return sqrt(ss / D + eps);
}

/* Mean RMS of positions 1 .. T-1 of a row (T > 1). */
static double others_rms(const float *row, int T, int D, float eps)
{
    double s = 0.0;
    for (int t = 1; t < T; t++)
        s += stream_rms(row + (long)t * D, D, eps);
    return s / (T - 1);
}

/* y = x, except each row's position 0: y0 = x0 * s / r0, with r0 its RMS and
 * s the layer's running regular RMS (earlier steps' statistic: causal). Before
 * s is measured (0) the row start passes unchanged. */
static void rescale_forward(const lattice_model *m, int i, float *y, const float *x)
{
    const int T = m->seq, D = m->p.d_model;
    const float eps = m->norm.eps;
    const double s = m->layers[i].ref_rms[0];
    memcpy(y, x, sizeof(float) * (size_t)m->batch * T * D);
    if (!(s > 0.0))
        return;
    for (int b = 0; b < m->batch; b++) {
        const float *row = x + (long)b * T * D;
        const double k = s / stream_rms(row, D, eps);
        float *y0 = y + (long)b * T * D;
        for (int d = 0; d < D; d++)
            y0[d] = (float)(row[d] * k);
    }
}

/* In place: g, the gradient of y, becomes the gradient of x. With
 * c = x0.g0 / (D r0), dL/dx0 = (s / r0) (g0 - c x0 / r0); s is a constant of
 * the pass and the other positions pass unchanged. */
static void rescale_backward(const lattice_model *m, int i, float *g, const float *x)
{
    const int T = m->seq, D = m->p.d_model;
    const float eps = m->norm.eps;
    const double s = m->layers[i].ref_rms[0];
    if (!(s > 0.0))
        return;
    for (int b = 0; b < m->batch; b++) {
        const float *row = x + (long)b * T * D;
        float *grow = g + (long)b * T * D;
        const double r0 = stream_rms(row, D, eps);
        double dot = 0.0;
        for (int d = 0; d < D; d++)
            dot += (double)row[d] * grow[d];
        const double c = dot / (D * r0);
        for (int d = 0; d < D; d++)
            grow[d] = (float)(s / r0 * (grow[d] - c * row[d] / r0));
    }
}

/* The induced massive activation (massive_offset): position 0 of every row
 * of hs[i] gets k sqrt(D) s on one channel. A constant of the pass: its
 * gradient is the identity, and backward has nothing to do. */
static void massive_forward(lattice_model *m, int i)
{
    const double s = m->layers[i].ref_rms[0];
    if (!(s > 0.0))
        return;
    const int T = m->seq, D = m->p.d_model;
    const float add = (float)(m->p.massive_offset * sqrt((double)D) * s);
    for (int b = 0; b < m->batch; b++)
        m->hs[i][(long)b * T * D + m->p.massive_channel] += add;
}

void lattice__model_measure_refs(lattice_model *m)
{
    const int T = m->seq, D = m->p.d_model;
    for (int i = 0; i < m->p.n_layers; i++) {
        m->ref_pending[i] = NAN;
        if (!m->layers[i].ref_rms || i > m->n_active || T < 2 || !m->batch)
            continue;
        double s = 0.0;
        for (int b = 0; b < m->batch; b++)
            s += others_rms(m->hs[i] + (long)b * T * D, T, D, m->norm.eps);
        m->ref_pending[i] = s / m->batch;
    }
}

void lattice__model_commit_refs(lattice_model *m)
{
    for (int i = 0; i < m->p.n_layers; i++) {
        float *s = m->layers[i].ref_rms;
        const double x = m->ref_pending[i];
        m->ref_pending[i] = NAN;
        if (!s || !isfinite(x))
            continue;
        s[0] = s[0] > 0.0f ? (float)(0.99 * s[0] + 0.01 * x) : (float)x;
    }
}

/* ---- a layer ------------------------------------------------------------- */

/* One layer: attention from hs[i] to mid, then the MLP from mid to hs[i + 1]. */
static lattice_status layer_forward(lattice_model *m, int i)
{
    const lattice_model_params *p = &m->p;
    layer_params *L = &m->layers[i];
    layer_acts *A = &m->acts[i];
    const long N = (long)m->batch * m->seq;
    const int D = p->d_model, H = p->n_heads, KV = p->n_kv_heads, hd = p->head_dim, F = p->d_ff;
    const int W = (H + 2 * KV) * hd;
    const float *x = m->hs[i];
    if (L->bnorm.w) { /* a block's entry: the block reads, and the stream goes on from, Norm(x) */
        norm_fwd(m, A->bn, &A->bst, x, &L->bnorm, N);
        x = A->bn;
    } else if (lattice__block_rescaled(m, i)) { /* the same, with only the row starts rescaled */
        PROF(LATTICE_OP_NORM, rescale_forward(m, i, A->bn, x));
        x = A->bn;
    }

    const float *a = sublayer_input(m, A->a1, &A->st[SLOT_IN1], x, &L->norm[SLOT_IN1], N);
    PROF(LATTICE_OP_GEMM_QKV,
         TRY(lattice__gemm(m->be, 0, 1, (int)N, W, D, 1.0f, a, D, L->wqkv, D, 0.0f, A->raw, W)));
    lattice_qkv_dims qd = {m->batch, m->seq, H, KV, hd, p->qk_norm, m->norm.eps};
    PROF(LATTICE_OP_ROPE, lattice__qkv_forward(A->q, A->k, A->v, A->rstd_q, A->rstd_k, A->raw,
                                               L->qn, L->kn, m->rope, &qd, NT));
    lattice_attn_dims ad = {m->batch, m->seq, H, KV, hd, 0, LATTICE_ATTN_AUTO, 0};
    lattice_attn_ptrs ptrs = {m->ptr_a, m->ptr_b, m->ptr_c, &m->prof};
    TRY(lattice__attention_forward(m->be, A->att, A->p, A->q, A->k, A->v, &ad, &ptrs));
    /* under pre-norm the MLP's input norm takes the residual add into its pass */
    const next_norm in2 = {A->a2, &A->st[SLOT_IN2], &L->norm[SLOT_IN2]};
    const int pre = m->norm.placement == LATTICE_NORM_PLACEMENT_PRE;
    TRY(sublayer_output(m, A->mid, x, A->att, L->wo, H * hd, A->y1, A->r1, &A->st[SLOT_OUT1],
                        &L->norm[SLOT_OUT1], N, LATTICE_OP_GEMM_O, pre ? &in2 : NULL));

    const float *a2 =
        pre ? A->a2 : sublayer_input(m, A->a2, &A->st[SLOT_IN2], A->mid, &L->norm[SLOT_IN2], N);
    PROF(LATTICE_OP_GEMM_MLP, TRY(lattice__gemm(m->be, 0, 1, (int)N, 2 * F, D, 1.0f, a2, D, L->wgu,
                                                D, 0.0f, A->gu, 2 * F)));
    /* s goes to the backward's scratch, which makes it again from gu (not kept) */
    PROF(LATTICE_OP_ELEMWISE, lattice__swiglu_forward(m->d_s, A->gu, N, F, NT));
    return sublayer_output(m, m->hs[i + 1], A->mid, m->d_s, L->wd, F, A->y2, A->r2,
                           &A->st[SLOT_OUT2], &L->norm[SLOT_OUT2], N, LATTICE_OP_GEMM_MLP, NULL);
}

/* Backward of one layer. *g holds the gradient of the layer's output stream
 * and is replaced by the gradient of its input (when need_input); the two
 * stream buffers may be swapped. */
static lattice_status layer_backward(lattice_model *m, int i, float **g, float **spare,
                                     int need_input)
{
    const lattice_model_params *p = &m->p;
    layer_params *L = &m->layers[i];
    layer_acts *A = &m->acts[i];
    const long N = (long)m->batch * m->seq;
    const int D = p->d_model, H = p->n_heads, KV = p->n_kv_heads, hd = p->head_dim, F = p->d_ff;
    const int W = (H + 2 * KV) * hd, Hd = H * hd;
    const lattice_norm_placement pl = m->norm.placement;
    const int tr = m->trainable_layer[i];

    /* ---- MLP sublayer: gradient of out -> gradient of mid ---- */
    const float *dy = sublayer_output_grad(m, g, spare, A->y2, A->r2, &A->st[SLOT_OUT2],
                                           &L->norm[SLOT_OUT2], tr, N);
    PROF(LATTICE_OP_GEMM_MLP,
         TRY(lattice__gemm(m->be, 0, 0, (int)N, F, D, 1.0f, dy, D, L->wd, F, 0.0f, m->d_s, F)));
    PROF(LATTICE_OP_ELEMWISE, lattice__swiglu_backward(m->d_gu, m->d_s, A->gu, tr, N, F, NT));
    if (tr)
        PROF(LATTICE_OP_GEMM_MLP, TRY(lattice__gemm(m->be, 1, 0, D, F, (int)N, 1.0f, dy, D, m->d_s,
                                                    F, 1.0f, lattice__grad_of(m, L->wd), F)));
    const float *a2 = pl == LATTICE_NORM_PLACEMENT_POST ? A->mid : A->a2;
    PROF(LATTICE_OP_GEMM_MLP, {
        if (tr)
            TRY(lattice__gemm(m->be, 1, 0, 2 * F, D, (int)N, 1.0f, m->d_gu, 2 * F, a2, D, 1.0f,
                              lattice__grad_of(m, L->wgu), D));
        TRY(lattice__gemm(m->be, 0, 0, (int)N, D, 2 * F, 1.0f, m->d_gu, 2 * F, L->wgu, D, 0.0f,
                          m->d_in, D));
    });
    sublayer_input_grad(m, *g, A->mid, &A->st[SLOT_IN2], &L->norm[SLOT_IN2], tr, N);

    /* ---- attention sublayer: gradient of mid -> gradient of x ---- */
    dy = sublayer_output_grad(m, g, spare, A->y1, A->r1, &A->st[SLOT_OUT1], &L->norm[SLOT_OUT1],
                              tr, N);
    PROF(LATTICE_OP_GEMM_O, {
        if (tr)
            TRY(lattice__gemm(m->be, 1, 0, D, Hd, (int)N, 1.0f, dy, D, A->att, Hd, 1.0f,
                              lattice__grad_of(m, L->wo), Hd));
        TRY(lattice__gemm(m->be, 0, 0, (int)N, Hd, D, 1.0f, dy, D, L->wo, Hd, 0.0f, m->d_att, Hd));
    });
    lattice_attn_dims ad = {m->batch, m->seq, H, KV, hd, 0, LATTICE_ATTN_AUTO, 0};
    lattice_attn_ptrs ptrs = {m->ptr_a, m->ptr_b, m->ptr_c, &m->prof};
    TRY(lattice__attention_backward(m->be, m->dq, m->dk, m->dv, m->dp, m->d_att, A->att, A->p,
                                    A->q, A->k, A->v, &ad, &ptrs));
    lattice_qkv_dims qd = {m->batch, m->seq, H, KV, hd, p->qk_norm, m->norm.eps};
    PROF(LATTICE_OP_ROPE,
         lattice__qkv_backward(m->d_raw, tr && L->qn ? lattice__grad_of(m, L->qn) : NULL,
                               tr && L->kn ? lattice__grad_of(m, L->kn) : NULL, m->dq, m->dk,
                               m->dv, A->raw, L->qn, L->kn, A->rstd_q, A->rstd_k, m->rope, &qd,
                               m->red, NT));
    const float *a1 = pl == LATTICE_NORM_PLACEMENT_POST ? m->hs[i] : A->a1;
    if (tr)
        PROF(LATTICE_OP_GEMM_QKV, TRY(lattice__gemm(m->be, 1, 0, W, D, (int)N, 1.0f, m->d_raw, W,
                                                    a1, D, 1.0f, lattice__grad_of(m, L->wqkv), D)));
    /* Under pre and peri the input norm's weight gradient needs d_in even here. */
    if (!need_input && (pl == LATTICE_NORM_PLACEMENT_POST || !tr))
        return LATTICE_OK;
    PROF(LATTICE_OP_GEMM_QKV, TRY(lattice__gemm(m->be, 0, 0, (int)N, D, W, 1.0f, m->d_raw, W,
                                                L->wqkv, D, 0.0f, m->d_in, D)));
    const int rescaled = lattice__block_rescaled(m, i);
    const float *x = L->bnorm.w || rescaled ? A->bn : m->hs[i];
    sublayer_input_grad(m, *g, x, &A->st[SLOT_IN1], &L->norm[SLOT_IN1], tr, N);
    if (L->bnorm.w) { /* *g is the gradient of Norm(hs[i]): back through the block-entry norm */
        norm_bwd(m, *spare, 0, &L->bnorm, tr, *g, m->hs[i], &A->bst, N);
        float *tmp = *g;
        *g = *spare;
        *spare = tmp;
    } else if (rescaled) {
        PROF(LATTICE_OP_NORM, rescale_backward(m, i, *g, m->hs[i]));
    }
    return LATTICE_OK;
}

/* ---- the rows the model (or a view of it) holds -------------------------- */

/* The stream the LM head reads: the final norm's output, or the last boundary. */
static const float *head_input(const lattice_model *m)
{
    return m->norm.placement == LATTICE_NORM_PLACEMENT_POST ? m->hs[m->n_active] : m->final_out;
}

/* The forward of the batch's rows the model (or a view of it) holds. */
static lattice_status forward_rows(lattice_model *m)
{
    const long N = (long)m->batch * m->seq;
    const int D = m->p.d_model;
    PROF(LATTICE_OP_EMBED, lattice__embedding_forward(m->emb, m->tokens, m->wte, N, D, NT));
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST)
        norm_fwd(m, m->hs[0], &m->bst, m->emb, &m->bnorm, N);
    lattice_status st = LATTICE_OK;
    for (int i = 0; i < m->n_active && st == LATTICE_OK; i++) {
        if (lattice__model_skipped(m, i))
            PROF(LATTICE_OP_ELEMWISE, memcpy(m->hs[i + 1], m->hs[i], sizeof(float) * N * D));
        else
            st = layer_forward(m, i);
        if (st == LATTICE_OK && i + 1 < m->p.n_layers && lattice__massive_at(m, i + 1))
            PROF(LATTICE_OP_ELEMWISE, massive_forward(m, i + 1));
    }
    if (st == LATTICE_OK && m->norm.placement != LATTICE_NORM_PLACEMENT_POST)
        norm_fwd(m, m->final_out, &m->bst, m->hs[m->n_active], &m->bnorm, N);
    if (st == LATTICE_OK)
        PROF(LATTICE_OP_GEMM_HEAD,
             st = lattice__gemm(m->be, 0, 1, (int)N, m->p.vocab_size, D, 1.0f, head_input(m), D,
                                m->whead, D, 0.0f, m->logits, m->p.vocab_size));
    return st;
}

static void zero_trainable_grads(lattice_model *m)
{
    for (int t = 0; t < m->n_tensors; t++) {
        const tensor_entry *e = &m->tensors[t];
        if (lattice__tensor_updatable(m, e))
            memset(lattice__grad_of(m, e->data), 0, sizeof(float) * e->rows * e->cols);
    }
}

/* The backward of the rows the model (or a view of it) holds, into its
 * gradient arena. */
static lattice_status backward_rows(lattice_model *m)
{
    const long N = (long)m->batch * m->seq;
    const int D = m->p.d_model, V = m->p.vocab_size, k = m->n_active;
    const lattice_norm_placement pl = m->norm.placement;
    PROF(LATTICE_OP_ELEMWISE, zero_trainable_grads(m));

    /* How far down the gradient must travel: to the embedding when it (or the
     * entry norm) trains, else to the lowest trainable active layer. */
    int need_emb = m->trainable_embedding || (pl == LATTICE_NORM_PLACEMENT_POST && m->trainable_boundary);
    int lowest = k;
    for (int i = 0; i < k; i++)
        if (m->trainable_layer[i] && !lattice__model_skipped(m, i)) {
            lowest = i;
            break;
        }
    int stop = need_emb ? 0 : lowest;

    lattice_status st = LATTICE_OK;
    const float *hin = head_input(m);
    if (lattice__model_head_trains(m))
        PROF(LATTICE_OP_GEMM_HEAD,
             st = lattice__gemm(m->be, 1, 0, V, D, (int)N, 1.0f, m->dlogits, V, hin, D, 1.0f,
                                lattice__grad_of(m, m->whead), D));
    int need_stream = stop < k || need_emb || (pl != LATTICE_NORM_PLACEMENT_POST && m->trainable_boundary);
    if (st != LATTICE_OK || !need_stream)
        goto done;
    float *g = m->d_a, *spare = m->d_b;
    PROF(LATTICE_OP_GEMM_HEAD,
         st = lattice__gemm(m->be, 0, 0, (int)N, D, V, 1.0f, m->dlogits, V, m->whead, D, 0.0f,
                            pl == LATTICE_NORM_PLACEMENT_POST ? g : spare, D));
    if (st != LATTICE_OK)
        goto done;
    if (pl != LATTICE_NORM_PLACEMENT_POST)
        norm_bwd(m, g, 0, &m->bnorm, m->trainable_boundary, spare, m->hs[k], &m->bst, N);
    for (int i = k - 1; i >= stop && st == LATTICE_OK; i--) {
        if (lattice__model_skipped(m, i))
            continue;
        st = layer_backward(m, i, &g, &spare, i > stop || need_emb);
    }
    if (st != LATTICE_OK || !need_emb)
        goto done;
    const float *demb = g;
    if (pl == LATTICE_NORM_PLACEMENT_POST) {
        norm_bwd(m, spare, 0, &m->bnorm, m->trainable_boundary, g, m->emb, &m->bst, N);
        demb = spare;
    }
    if (m->trainable_embedding)
        PROF(LATTICE_OP_EMBED,
             lattice__embedding_backward(lattice__grad_of(m, m->wte), demb, m->tokens, N, D, NT));
done:
    return st;
}

/* ---- the passes ---------------------------------------------------------- */

static lattice_status model_forward(lattice_model *m, const int32_t *tokens, int batch, int seq)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_forward: invalid argument: model is NULL");
    if (!tokens)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "tokens is NULL");
    if (batch < 1 || batch > m->p.max_batch)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "batch %d not in 1..%d (max_batch)", batch,
                    m->p.max_batch);
    if (seq < 1 || seq > m->p.max_seq)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "seq %d not in 1..%d (max_seq)", seq,
                    m->p.max_seq);
    const long N = (long)batch * seq;
    for (long i = 0; i < N; i++)
        if (tokens[i] < 0 || tokens[i] >= m->p.vocab_size)
            return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                        "token id %d at position %ld outside the vocabulary 0..%d", (int)tokens[i],
                        i, m->p.vocab_size - 1);
    m->inference = 0;
    __atomic_store_n(&m->has_loss, 0, __ATOMIC_RELAXED);
    memcpy(m->tokens, tokens, sizeof(int32_t) * N);
    m->batch = batch;
    m->seq = seq;
    lattice_status st = lattice__model_run_pass(m, forward_rows, 0);
    if (st == LATTICE_OK)
        lattice__model_measure_refs(m);
    if (st != LATTICE_OK) {
        m->batch = m->seq = 0; /* nothing of this pass can be read */
        return st == LATTICE_ERR_OUT_OF_MEMORY ? st : FAIL(m, st, "the backend failed during forward");
    }
    return LATTICE_OK;
}

const float *lattice_model_get_logits(const lattice_model *m)
{
    return m && m->batch ? m->logits : NULL;
}

/* A caller given the buffer writes the loss's gradient into it: backward may run. */
float *lattice_model_get_dlogits(lattice_model *m)
{
    if (!m || !m->batch)
        return NULL;
    lattice__model_loss_written(m, LATTICE_OK);
    return m->dlogits;
}

const float *lattice_model_get_dlogits_const(const lattice_model *m)
{
    return m && m->batch ? m->dlogits : NULL;
}

static lattice_status model_backward(lattice_model *m)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_backward: invalid argument: model is NULL");
    if (!m->batch)
        return FAIL(m, LATTICE_ERR_STATE, "backward needs a forward pass first");
    if (m->inference)
        return FAIL(m, LATTICE_ERR_STATE, "the last forward was an inference forward: backward "
                                          "needs lattice_model_forward");
    if (!__atomic_load_n(&m->has_loss, __ATOMIC_RELAXED))
        return FAIL(m, LATTICE_ERR_STATE,
                    "no loss since the last forward: backward reads the gradient of the logits "
                    "that a loss writes (lattice_model_cross_entropy, a distillation loss into "
                    "lattice_model_get_dlogits)");
    lattice_status st = lattice__model_run_pass(m, backward_rows, 1);
    if (st != LATTICE_OK)
        return st == LATTICE_ERR_OUT_OF_MEMORY ? st : FAIL(m, st, "the backend failed during backward");
    return LATTICE_OK;
}

/* Nothing of the forward can be skipped for inference without changing its
 * numbers or its kernels: the attention probabilities are also the GEMM
 * path's score buffer, the norm kernels write their statistics as they go,
 * and every other activation feeds a later op. So the pass is the training
 * one, and the mark is what it adds: an evaluation run between a training
 * forward and its backward overwrites the activations, and backward must then
 * refuse rather than compute gradients of the evaluation batch. */
static lattice_status model_forward_inference(lattice_model *m, const int32_t *tokens, int batch,
                                              int seq)
{
    lattice_status st = lattice_model_forward(m, tokens, batch, seq);
    if (st == LATTICE_OK) {
        m->inference = 1;
        for (int i = 0; i < m->p.n_layers; i++) /* evaluation never moves a running RMS */
            m->ref_pending[i] = NAN;
    }
    return st;
}

/* ---- losses -------------------------------------------------------------- */

/* Every counted target inside the vocabulary. */
static lattice_status check_targets(lattice_model *m, const int32_t *targets, const uint8_t *mask,
                                    long n)
{
    for (long i = 0; i < n; i++)
        if ((!mask || mask[i]) && (targets[i] < 0 || targets[i] >= m->p.vocab_size))
            return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                        "target id %d at position %ld outside the vocabulary", (int)targets[i], i);
    return LATTICE_OK;
}

static lattice_status model_cross_entropy(lattice_model *m, const int32_t *targets,
                                          const uint8_t *mask, float *loss, int64_t *n_counted)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_cross_entropy: invalid argument: model is NULL");
    if (!targets || !loss)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "targets and loss must not be NULL");
    if (!m->batch)
        return FAIL(m, LATTICE_ERR_STATE, "cross_entropy needs a forward pass first");
    const long N = (long)m->batch * m->seq;
    lattice_status tst = check_targets(m, targets, mask, N);
    if (tst != LATTICE_OK)
        return tst;
    double l;
    PROF(LATTICE_OP_LOSS, l = lattice__cross_entropy(m->dlogits, m->logits, targets, mask, N,
                                                     m->p.vocab_size, m->rowloss, n_counted, NT));
    lattice__model_loss_written(m, LATTICE_OK); /* written, finite or not */
    *loss = (float)l;
    if (!isfinite(l))
        return FAIL(m, LATTICE_ERR_NON_FINITE, "the cross-entropy is not finite");
    return LATTICE_OK;
}

static lattice_status model_loss(lattice_model *m, const int32_t *targets, const uint8_t *mask,
                                 double *ce, int64_t *n_counted)
{
    if (!m)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "lattice_model_cross_entropy_value: no model (NULL)");
    if (!targets || !ce)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "targets and ce must not be NULL");
    if (!m->batch)
        return FAIL(m, LATTICE_ERR_STATE, "the loss needs a forward pass first");
    const long N = (long)m->batch * m->seq;
    lattice_status tst = check_targets(m, targets, mask, N);
    if (tst != LATTICE_OK)
        return tst;
    double l;
    PROF(LATTICE_OP_LOSS, l = lattice__cross_entropy(NULL, m->logits, targets, mask, N,
                                                     m->p.vocab_size, m->rowloss, n_counted, NT));
    *ce = l;
    if (!isfinite(l))
        return FAIL(m, LATTICE_ERR_NON_FINITE, "the cross-entropy is not finite");
    return LATTICE_OK;
}

/* The one evaluation loop (lattice_model_evaluate and lattice_trainer_evaluate):
 * over the first nb validation batches (each cut to this rank's rows by share,
 * when given; a share with no rows is skipped), an inference forward and the
 * double-precision loss; total is the sum of nats over the counted positions,
 * count their number. Messages name the batch, in the model's errmsg. */
lattice_status lattice__model_val_sums(lattice_model *m, lattice_data *data, int64_t nb,
                                       lattice_data_batch (*share)(const void *ctx,
                                                                   const lattice_data_batch *b),
                                       const void *ctx, double *total, int64_t *count)
{
    *total = 0.0;
    *count = 0;
    for (int64_t i = 0; i < nb; i++) {
        lattice_data_batch b;
        double ce;
        int64_t n = 0;
        lattice_status st = lattice_data_get_val_batch(data, i, &b);
        if (st != LATTICE_OK)
            return FAIL(m, st, "validation batch %lld: %s", (long long)i,
                        lattice_data_errmsg(data));
        if (share && (b = share(ctx, &b)).batch == 0)
            continue;
        /* an inference forward: what the validation batches measure (a running
         * RMS's pending value) never reaches the next optimizer step */
        if ((st = lattice_model_forward_inference(m, b.tokens, b.batch, b.seq)) == LATTICE_OK)
            st = lattice_model_cross_entropy_value(m, b.targets, b.mask, &ce, &n);
        if (st != LATTICE_OK) {
            char why[LATTICE_ERRMSG_MAX];
            snprintf(why, sizeof why, "%s", m->err);
            return FAIL(m, st, "validation batch %lld: %s", (long long)i, why);
        }
        *total += ce * (double)n;
        *count += n;
    }
    return LATTICE_OK;
}

static lattice_status model_evaluate(lattice_model *m, lattice_data *data, int64_t max_batches,
                                     double *val_ce)
{
    if (!m)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "lattice_model_evaluate: no model (NULL)");
    if (!data || !val_ce)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "data and val_ce must not be NULL");
    if (max_batches < 0)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "max_batches %lld is negative (0: all)",
                    (long long)max_batches);
    lattice_data_params dp;
    dp.size = sizeof dp;
    lattice_status gst = lattice_data_get_params(data, &dp);
    if (gst != LATTICE_OK)
        return FAIL(m, gst, "the data's settings: %s", lattice_data_errmsg(data));
    if (dp.vocab_size > m->p.vocab_size || dp.batch_size > m->p.max_batch ||
        dp.seq_len > m->p.max_seq)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                    "the data (vocab %d, batch %d x %d) does not fit the model (vocab %d, "
                    "max_batch %d x max_seq %d)",
                    dp.vocab_size, dp.batch_size, dp.seq_len, m->p.vocab_size, m->p.max_batch,
                    m->p.max_seq);
    int64_t nb = lattice_data_get_n_val_batches(data);
    if (nb == 0)
        return FAIL(m, LATTICE_ERR_STATE, "the data has no validation documents");
    if (max_batches > 0 && max_batches < nb)
        nb = max_batches;
    double total = 0.0;
    int64_t count = 0;
    lattice_status st = lattice__model_val_sums(m, data, nb, NULL, NULL, &total, &count);
    if (st != LATTICE_OK)
        return st;
    *val_ce = count ? total / (double)count : 0.0;
    return LATTICE_OK;
}

/* ---- the public calls, each inside the model's busy section (handle.h) ---- */

lattice_status lattice_model_forward(lattice_model *m, const int32_t *tokens, int batch, int seq)
{
    LATTICE__INSIDE(m, "lattice_model_forward", "model",
                    model_forward(m, tokens, batch, seq));
}

lattice_status lattice_model_backward(lattice_model *m)
{
    LATTICE__INSIDE(m, "lattice_model_backward", "model",
                    model_backward(m));
}

lattice_status lattice_model_forward_inference(lattice_model *m, const int32_t *tokens, int batch,
                                               int seq)
{
    LATTICE__INSIDE(m, "lattice_model_forward_inference", "model",
                    model_forward_inference(m, tokens, batch, seq));
}

lattice_status lattice_model_cross_entropy(lattice_model *m, const int32_t *targets,
                                           const uint8_t *mask, float *loss, int64_t *n_counted)
{
    LATTICE__INSIDE(m, "lattice_model_cross_entropy", "model",
                    model_cross_entropy(m, targets, mask, loss, n_counted));
}

lattice_status lattice_model_cross_entropy_value(lattice_model *m, const int32_t *targets,
                                                 const uint8_t *mask, double *ce,
                                                 int64_t *n_counted)
{
    LATTICE__INSIDE(m, "lattice_model_cross_entropy_value", "model",
                    model_loss(m, targets, mask, ce, n_counted));
}

lattice_status lattice_model_evaluate(lattice_model *m, lattice_data *data, int64_t max_batches,
                                      double *val_ce)
{
    LATTICE__INSIDE(m, "lattice_model_evaluate", "model",
                    model_evaluate(m, data, max_batches, val_ce));
}
