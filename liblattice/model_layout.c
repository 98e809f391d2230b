/* The model's params (defaults and checks) and the layout of its arenas:
 * which tensors a shape and placement have, where each one lies, what it
 * starts as. */
#include "model_internal.h"

#include "kernels.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <string.h>

void lattice_model_params_init(lattice_model_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->vocab_size = 257;
    p->d_model = 256;
    p->n_layers = 9;
    p->n_active_layers = 9;
    p->n_heads = 4;
    p->n_kv_heads = 4;
    p->head_dim = 64;
    p->d_ff = 768;
    p->rope_theta = 1e6f;
    p->qk_norm = 1;
    p->tie_embeddings = 0;
    p->max_batch = 16;
    p->max_seq = 256;
    p->seed = 0;
    p->init_std = 0.02f;
    p->block_norm = 0;
    p->block_rescale = 0;
    p->massive_offset = 0.0f;
    p->massive_layer = 1;
    p->massive_channel = 0;
}

static int has_slot(lattice_norm_placement pl, int slot)
{
    switch (pl) {
    case LATTICE_NORM_PLACEMENT_PRE: return slot == SLOT_IN1 || slot == SLOT_IN2;
    case LATTICE_NORM_PLACEMENT_POST: return slot == SLOT_OUT1 || slot == SLOT_OUT2;
    case LATTICE_NORM_PLACEMENT_PERI: return 1;
    }
    return 0;
}

static const char *slot_name(lattice_norm_placement pl, int slot)
{
    /* Hugging Face names: Qwen3 for pre-norm, Gemma-2 style for the others. */
    if (pl == LATTICE_NORM_PLACEMENT_PRE)
        return slot == SLOT_IN1 ? "input_layernorm" : "post_attention_layernorm";
    switch (slot) {
    case SLOT_IN1: return "input_layernorm";
    case SLOT_OUT1: return "post_attention_layernorm";
    case SLOT_IN2: return "pre_feedforward_layernorm";
    default: return "post_feedforward_layernorm";
    }
}

static lattice_status check_params(const lattice_model_params *p, char *err)
{
#define BAD(...) return lattice__set_error(err, LATTICE_ERR_INVALID_CONFIG, __VA_ARGS__)
    const int lim = LATTICE__MAX_WIDTH;
    if (p->vocab_size < 1 || p->vocab_size > (1 << 24))
        BAD("vocab_size %d out of range 1..16777216", p->vocab_size);
    if (p->d_model < 1 || p->d_model > lim)
        BAD("d_model %d out of range", p->d_model);
    if (p->n_layers < 1 || p->n_layers > LATTICE__MAX_LAYERS)
        BAD("n_layers %d out of range 1..%d", p->n_layers, LATTICE__MAX_LAYERS);
    if (p->n_active_layers < 1 || p->n_active_layers > p->n_layers)
        BAD("n_active_layers %d not in 1..n_layers (%d)", p->n_active_layers, p->n_layers);
    if (p->n_heads < 1 || p->n_heads > 4096)
        BAD("n_heads %d out of range", p->n_heads);
    if (p->n_kv_heads < 1 || p->n_kv_heads > p->n_heads)
        BAD("n_kv_heads %d not in 1..n_heads (%d)", p->n_kv_heads, p->n_heads);
    if (p->n_heads % p->n_kv_heads)
        BAD("n_heads %d is not divisible by n_kv_heads %d", p->n_heads, p->n_kv_heads);
    if (p->head_dim < 2 || p->head_dim % 2 || p->head_dim > 65536)
        BAD("head_dim %d must be a positive even number (RoPE rotates pairs)", p->head_dim);
    if (p->d_ff < 1 || p->d_ff > lim)
        BAD("d_ff %d out of range", p->d_ff);
    if (!(p->rope_theta > 1.0f) || !isfinite(p->rope_theta))
        BAD("rope_theta must be finite and > 1");
    if (p->max_batch < 1 || p->max_seq < 1 || p->max_batch > lim || p->max_seq > lim)
        BAD("max_batch %d and max_seq %d must be in 1..%d", p->max_batch, p->max_seq, lim);
    if (!(p->init_std >= 0.0f) || !isfinite(p->init_std))
        BAD("init_std must be finite and >= 0");
    if (p->block_norm < 0 || p->block_norm > p->n_layers)
        BAD("block_norm %d not in 0..n_layers (%d): the layers per block whose entry is "
            "normalised, or 0 for none", p->block_norm, p->n_layers);
    if (p->block_rescale < 0 || p->block_rescale > p->n_layers)
        BAD("block_rescale %d not in 0..n_layers (%d): the layers per block whose entry "
            "rescales the row-start token, or 0 for none", p->block_rescale, p->n_layers);
    if (p->block_norm > 0 && p->block_rescale > 0)
        BAD("block_norm %d and block_rescale %d are both set: the block-entry norm rescales "
            "every position already; set one", p->block_norm, p->block_rescale);
    double lo, hi; /* what the keyed setter takes; a 1.0 program may write the slot itself */
    lattice_model_option_bounds(LATTICE_MODEL_OPTION_MASSIVE_OFFSET, &lo, &hi);
    if (!(p->massive_offset >= lo && p->massive_offset <= hi))
        BAD("massive_offset %g must be finite and in %g..%g: the induced row-start offset as a "
            "multiple of the stream's regular RMS, or 0 for none", (double)p->massive_offset, lo,
            hi);
    if (p->massive_offset > 0.0f && (p->massive_layer < 1 || p->massive_layer >= p->n_layers))
        BAD("massive_layer %d not in 1..%d (n_layers - 1): the offset goes on the stream a "
            "later layer reads", p->massive_layer, p->n_layers - 1);
    if (p->massive_offset > 0.0f && (p->massive_channel < 0 || p->massive_channel >= p->d_model))
        BAD("massive_channel %d not in 0..%d (d_model - 1)", p->massive_channel, p->d_model - 1);
    /* Everything sized from these must fit comfortably in memory arithmetic. */
    double n = (double)p->max_batch * p->max_seq;
    double per_layer = n * (12.0 * p->d_model + 4.0 * p->d_ff +
                            3.0 * (p->n_heads + 2.0 * p->n_kv_heads) * p->head_dim) +
                       (double)p->max_batch * p->n_heads * p->max_seq * p->max_seq;
    /* the weights (embedding, head, each layer's projections and norms), held
     * with their gradients and the optimizer's two moments */
    const double D = p->d_model, hd = p->head_dim;
    double weights = 2.0 * p->vocab_size * D + 4.0 * D +
                     (double)p->n_layers * (2.0 * D * p->n_heads * hd +
                                            2.0 * D * p->n_kv_heads * hd + 3.0 * D * p->d_ff +
                                            16.0 * D + 4.0 * hd);
    double total = per_layer * p->n_layers + n * 2.0 * p->vocab_size + 4.0 * weights;
    if (total * sizeof(float) > (double)(SIZE_MAX / 4) || n > (double)INT_MAX)
        BAD("the weights and activations of this shape would not fit in memory");
    if ((double)p->max_seq * p->max_seq > (double)INT_MAX)
        BAD("max_seq %d too long", p->max_seq);
    return LATTICE_OK;
#undef BAD
}

/* ---- layout ---------------------------------------------------------------- */

static void add_tensor(lattice_model *m, const char *name, float *data, int64_t rows, int64_t cols,
                       int ndim, lattice_model_group group, int layer, init_kind init, uint32_t key)
{
    tensor_entry *t = &m->tensors[m->n_tensors++];
    snprintf(t->name, sizeof(t->name), "%s", name);
    t->data = data;
    t->rows = rows;
    t->cols = cols;
    t->ndim = ndim;
    t->group = group;
    t->layer = layer;
    t->init = init;
    t->key = key;
}

/* Carve the parameter arena (base NULL: measure). Tensors are registered only
 * when base is set. */
size_t lattice__model_layout_params(lattice_model *m, char *base, size_t *n_floats)
{
    const lattice_model_params *p = &m->p;
    lattice_arena ar = {base, 0, 0};
    const int D = p->d_model, hd = p->head_dim, H = p->n_heads, KV = p->n_kv_heads, F = p->d_ff;
    const int V = p->vocab_size;
    const int layer_norm = m->norm.kind == LATTICE_NORM_KIND_LAYER;
    char name[96];
    int reg = base != NULL;

#define T2(ptr, nm, r, c, grp, ly, key)                                                            \
    do {                                                                                           \
        (ptr) = lattice__arena_floats(&ar, (size_t)(r) * (c));                                     \
        if (reg)                                                                                   \
            add_tensor(m, nm, ptr, r, c, 2, grp, ly, INIT_NORMAL, key);                           \
    } while (0)
#define T1(ptr, nm, n, grp, ly, ini, key)                                                          \
    do {                                                                                           \
        (ptr) = lattice__arena_floats(&ar, (size_t)(n));                                           \
        if (reg)                                                                                   \
            add_tensor(m, nm, ptr, n, 1, 1, grp, ly, ini, key);                                   \
    } while (0)

    T2(m->wte, "model.embed_tokens.weight", V, D, LATTICE_MODEL_GROUP_EMBEDDING, -1, 1);
    const char *bname = m->norm.placement == LATTICE_NORM_PLACEMENT_POST ? "model.entry_norm" : "model.norm";
    snprintf(name, sizeof name, "%s.weight", bname);
    T1(m->bnorm.w, name, D, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, INIT_ONES, 2);
    m->bnorm.b = NULL;
    if (layer_norm) {
        snprintf(name, sizeof name, "%s.bias", bname);
        T1(m->bnorm.b, name, D, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, INIT_ZEROS, 3);
    }
    if (p->tie_embeddings)
        m->whead = m->wte;
    else
        T2(m->whead, "lm_head.weight", V, D, LATTICE_MODEL_GROUP_HEAD, -1, 4);

    for (int i = 0; i < p->n_layers; i++) {
        layer_params *L = &m->layers[i];
        uint32_t k0 = 1000u + 100u * (uint32_t)i;
        const char *pfx = "model.layers";
        /* q, k, v stacked in one matrix so that one GEMM projects all three;
         * each is still its own named tensor. */
        L->wqkv = lattice__arena_floats(&ar, (size_t)(H + 2 * KV) * hd * D);
        if (reg) {
            snprintf(name, sizeof name, "%s.%d.self_attn.q_proj.weight", pfx, i);
            add_tensor(m, name, L->wqkv, (int64_t)H * hd, D, 2, LATTICE_MODEL_GROUP_LAYER, i,
                       INIT_NORMAL, k0 + 1);
            snprintf(name, sizeof name, "%s.%d.self_attn.k_proj.weight", pfx, i);
            add_tensor(m, name, L->wqkv + (size_t)H * hd * D, (int64_t)KV * hd, D, 2,
                       LATTICE_MODEL_GROUP_LAYER, i, INIT_NORMAL, k0 + 2);
            snprintf(name, sizeof name, "%s.%d.self_attn.v_proj.weight", pfx, i);
            add_tensor(m, name, L->wqkv + (size_t)(H + KV) * hd * D, (int64_t)KV * hd, D, 2,
                       LATTICE_MODEL_GROUP_LAYER, i, INIT_NORMAL, k0 + 3);
        }
        snprintf(name, sizeof name, "%s.%d.self_attn.o_proj.weight", pfx, i);
        T2(L->wo, name, D, (int64_t)H * hd, LATTICE_MODEL_GROUP_LAYER, i, k0 + 4);
        L->qn = L->kn = NULL;
        if (p->qk_norm) {
            snprintf(name, sizeof name, "%s.%d.self_attn.q_norm.weight", pfx, i);
            T1(L->qn, name, hd, LATTICE_MODEL_GROUP_LAYER, i, INIT_ONES, k0 + 5);
            snprintf(name, sizeof name, "%s.%d.self_attn.k_norm.weight", pfx, i);
            T1(L->kn, name, hd, LATTICE_MODEL_GROUP_LAYER, i, INIT_ONES, k0 + 6);
        }
        L->wgu = lattice__arena_floats(&ar, (size_t)2 * F * D);
        if (reg) {
            snprintf(name, sizeof name, "%s.%d.mlp.gate_proj.weight", pfx, i);
            add_tensor(m, name, L->wgu, F, D, 2, LATTICE_MODEL_GROUP_LAYER, i, INIT_NORMAL, k0 + 7);
            snprintf(name, sizeof name, "%s.%d.mlp.up_proj.weight", pfx, i);
            add_tensor(m, name, L->wgu + (size_t)F * D, F, D, 2, LATTICE_MODEL_GROUP_LAYER, i,
                       INIT_NORMAL, k0 + 8);
        }
        snprintf(name, sizeof name, "%s.%d.mlp.down_proj.weight", pfx, i);
        T2(L->wd, name, D, F, LATTICE_MODEL_GROUP_LAYER, i, k0 + 9);
        for (int s = 0; s < N_SLOTS; s++) {
            L->norm[s].w = L->norm[s].b = NULL;
            if (!has_slot(m->norm.placement, s))
                continue;
            snprintf(name, sizeof name, "%s.%d.%s.weight", pfx, i, slot_name(m->norm.placement, s));
            T1(L->norm[s].w, name, D, LATTICE_MODEL_GROUP_LAYER, i, INIT_ONES, k0 + 10 + s);
            if (layer_norm) {
                snprintf(name, sizeof name, "%s.%d.%s.bias", pfx, i,
                         slot_name(m->norm.placement, s));
                T1(L->norm[s].b, name, D, LATTICE_MODEL_GROUP_LAYER, i, INIT_ZEROS, k0 + 20 + s);
            }
        }
        L->bnorm.w = L->bnorm.b = NULL;
        if (lattice__block_entry(m, i)) {
            snprintf(name, sizeof name, "%s.%d.block_entry_norm.weight", pfx, i);
            T1(L->bnorm.w, name, D, LATTICE_MODEL_GROUP_LAYER, i, INIT_ONES, k0 + 30);
            if (layer_norm) {
                snprintf(name, sizeof name, "%s.%d.block_entry_norm.bias", pfx, i);
                T1(L->bnorm.b, name, D, LATTICE_MODEL_GROUP_LAYER, i, INIT_ZEROS, k0 + 31);
            }
        }
        L->ref_rms = NULL;
        if (lattice__model_has_ref(m, i)) {
            snprintf(name, sizeof name, "%s.%d.input_regular_rms", pfx, i);
            T1(L->ref_rms, name, 1, LATTICE_MODEL_GROUP_STATISTIC, i, INIT_ZEROS, k0 + 32);
        }
    }
#undef T1
#undef T2
    if (n_floats)
        *n_floats = ar.floats; /* every float is a parameter */
    return ar.used;
}

/* A layer's activation buffers, in the order the arena holds them. */
#define ACT(f, w, when) {offsetof(layer_acts, f), (w), (when), ACT_ALWAYS, 0}
#define ACT_STATS(f, when, slot)                                                                   \
    {offsetof(layer_acts, f.mean), ACT_ONE, (when), ACT_LAYER_NORM, (slot)},                     \
    {offsetof(layer_acts, f.rstd), ACT_ONE, (when), ACT_ALWAYS, (slot)}
const act_buffer lattice__act_buffers[] = {
    ACT_STATS(st[SLOT_IN1], ACT_SLOT, SLOT_IN1),
    ACT_STATS(st[SLOT_OUT1], ACT_SLOT, SLOT_OUT1),
    ACT_STATS(st[SLOT_IN2], ACT_SLOT, SLOT_IN2),
    ACT_STATS(st[SLOT_OUT2], ACT_SLOT, SLOT_OUT2),
    ACT(a1, ACT_D, ACT_NOT_POST),
    ACT(a2, ACT_D, ACT_NOT_POST),
    ACT(raw, ACT_W, ACT_ALWAYS),
    ACT(q, ACT_Q, ACT_ALWAYS),
    ACT(k, ACT_KV, ACT_ALWAYS),
    ACT(v, ACT_KV, ACT_ALWAYS),
    ACT(rstd_q, ACT_H, ACT_QK_NORM),
    ACT(rstd_k, ACT_KVH, ACT_QK_NORM),
    ACT(p, ACT_PROBS, ACT_ALWAYS),
    ACT(att, ACT_Q, ACT_ALWAYS),
    ACT(y1, ACT_D, ACT_PERI),
    ACT(y2, ACT_D, ACT_PERI),
    ACT(r1, ACT_D, ACT_POST),
    ACT(r2, ACT_D, ACT_POST),
    ACT(mid, ACT_D, ACT_ALWAYS),
    ACT(gu, ACT_GU, ACT_ALWAYS),
    ACT(bn, ACT_D, ACT_BLOCK_INPUT),
    ACT_STATS(bst, ACT_BLOCK_ENTRY, 0),
};
#undef ACT
#undef ACT_STATS
const int lattice__n_act_buffers = (int)(sizeof lattice__act_buffers / sizeof lattice__act_buffers[0]);

/* The model's own row-indexed buffers, in the order the arena holds them
 * (after the layers'): the embedding's output and the boundary norm's
 * statistics, the final norm's output, the logits and their gradient, and
 * the backward pass's scratch. Post-norm alone keeps the embedding apart: the
 * others read it from the stream entering layer 0 (lattice__model_layout_acts
 * points emb there). */
#define ACT(f, w, when) {offsetof(struct lattice_model, f), (w), (when), ACT_ALWAYS, 0}
const act_buffer lattice__model_act_buffers[] = {
    ACT(emb, ACT_D, ACT_POST),
    {offsetof(struct lattice_model, bst.mean), ACT_ONE, ACT_LAYER_NORM, ACT_ALWAYS, 0},
    ACT(bst.rstd, ACT_ONE, ACT_ALWAYS),
    ACT(final_out, ACT_D, ACT_NOT_POST),
    ACT(logits, ACT_V, ACT_ALWAYS),
    ACT(dlogits, ACT_V, ACT_ALWAYS),
    ACT(d_a, ACT_D, ACT_ALWAYS),
    ACT(d_b, ACT_D, ACT_ALWAYS),
    ACT(d_in, ACT_D, ACT_ALWAYS),
    ACT(d_tmp, ACT_D, ACT_PERI),
    ACT(d_raw, ACT_W, ACT_ALWAYS),
    ACT(dq, ACT_Q, ACT_ALWAYS),
    ACT(dk, ACT_KV, ACT_ALWAYS),
    ACT(dv, ACT_KV, ACT_ALWAYS),
    ACT(dp, ACT_PROBS, ACT_ALWAYS),
    ACT(d_att, ACT_Q, ACT_ALWAYS),
    ACT(d_gu, ACT_GU, ACT_ALWAYS),
    ACT(d_s, ACT_F, ACT_ALWAYS),
};
#undef ACT
const int lattice__n_model_act_buffers =
    (int)(sizeof lattice__model_act_buffers / sizeof lattice__model_act_buffers[0]);
/* layer_acts holds float pointers only: each in the list, once */
_Static_assert(sizeof lattice__act_buffers / sizeof lattice__act_buffers[0] * sizeof(float *) ==
                   sizeof(layer_acts),
               "every buffer of layer_acts is in lattice__act_buffers");

size_t lattice__act_width(const lattice_model *m, act_width w, size_t seq)
{
    const lattice_model_params *p = &m->p;
    const size_t hd = (size_t)p->head_dim, H = (size_t)p->n_heads, KV = (size_t)p->n_kv_heads;
    switch (w) {
    case ACT_D: return (size_t)p->d_model;
    case ACT_W: return (H + 2 * KV) * hd;
    case ACT_Q: return H * hd;
    case ACT_KV: return KV * hd;
    case ACT_H: return H;
    case ACT_KVH: return KV;
    case ACT_PROBS: return H * seq;
    case ACT_GU: return 2 * (size_t)p->d_ff;
    case ACT_F: return (size_t)p->d_ff;
    case ACT_ONE: return 1;
    case ACT_V: return (size_t)p->vocab_size;
    }
    return 0;
}

static int act_holds(const lattice_model *m, int i, act_when when, int slot)
{
    const lattice_norm_placement pl = m->norm.placement;
    switch (when) {
    case ACT_ALWAYS: return 1;
    case ACT_NOT_POST: return pl != LATTICE_NORM_PLACEMENT_POST;
    case ACT_PERI: return pl == LATTICE_NORM_PLACEMENT_PERI;
    case ACT_POST: return pl == LATTICE_NORM_PLACEMENT_POST;
    case ACT_QK_NORM: return m->p.qk_norm != 0;
    case ACT_BLOCK_INPUT: return lattice__block_entry(m, i) || lattice__block_rescaled(m, i);
    case ACT_BLOCK_ENTRY: return lattice__block_entry(m, i);
    case ACT_LAYER_NORM: return m->norm.kind == LATTICE_NORM_KIND_LAYER;
    case ACT_SLOT: return has_slot(pl, slot);
    }
    return 0;
}

int lattice__act_present(const lattice_model *m, int i, const act_buffer *b)
{
    return act_holds(m, i, b->when, b->slot) && act_holds(m, i, b->also, b->slot);
}

/* Carve the activation and scratch arena (base NULL: measure). Buffers a
 * placement does not use are not allocated. */
size_t lattice__model_layout_acts(lattice_model *m, char *base)
{
    const lattice_model_params *p = &m->p;
    lattice_arena ar = {base, 0, 0};
    const size_t N = (size_t)p->max_batch * p->max_seq;
    const size_t D = p->d_model, hd = p->head_dim, H = p->n_heads;
#define F32(n) lattice__arena_floats(&ar, (n))

    m->tokens = lattice__arena_bytes(&ar, N * sizeof(int32_t));
    for (int i = 0; i <= p->n_layers; i++)
        m->hs[i] = F32(N * D);
    for (int i = 0; i < p->n_layers; i++) {
        layer_acts *A = &m->acts[i];
        memset(A, 0, sizeof(*A));
        for (int k = 0; k < lattice__n_act_buffers; k++) {
            const act_buffer *b = &lattice__act_buffers[k];
            if (lattice__act_present(m, i, b))
                *(float **)((char *)A + b->offset) =
                    F32(N * lattice__act_width(m, b->width, (size_t)p->max_seq));
        }
    }
    for (int k = 0; k < lattice__n_model_act_buffers; k++) {
        const act_buffer *b = &lattice__model_act_buffers[k];
        *(float **)((char *)m + b->offset) =
            lattice__act_present(m, 0, b)
                ? F32(N * lattice__act_width(m, b->width, (size_t)p->max_seq))
                : NULL;
    }
    if (m->norm.placement != LATTICE_NORM_PLACEMENT_POST)
        m->emb = m->hs[0];
    m->rope = F32((size_t)p->max_seq * hd);
    long red_d = lattice__reduce_scratch((long)N, 2 * (long)D);
    long red_h = lattice__reduce_scratch((long)N, 2 * (long)hd);
    m->red = F32((size_t)(red_d > red_h ? red_d : red_h));
    m->rowloss = lattice__arena_bytes(&ar, N * sizeof(double));
    size_t nptr = (size_t)p->max_batch * H;
    m->ptr_a = lattice__arena_bytes(&ar, nptr * sizeof(float *));
    m->ptr_b = lattice__arena_bytes(&ar, nptr * sizeof(float *));
    m->ptr_c = lattice__arena_bytes(&ar, nptr * sizeof(float *));
#undef F32
    return ar.used;
}

void lattice__model_init_tensor(lattice_model *m, const tensor_entry *t, uint64_t seed)
{
    size_t n = (size_t)t->rows * t->cols;
    if (t->init == INIT_ONES) {
        for (size_t i = 0; i < n; i++)
            t->data[i] = 1.0f;
    } else if (t->init == INIT_ZEROS) {
        memset(t->data, 0, n * sizeof(float));
    } else {
        /* Each tensor draws from its own stream, so pre and post models with
         * one seed share every weight they have in common. */
        lattice_rng rng;
        lattice__rng_seed(&rng, seed ^ (0x9e3779b97f4a7c15ULL * ((uint64_t)t->key + 1)));
        for (size_t i = 0; i < n; i++)
            t->data[i] = (float)(lattice__rng_normal(&rng) * m->p.init_std);
    }
}

/* The caller's params (internal.h's lattice__copy_in), checked. */
lattice_status lattice__model_adopt_params(lattice_model_params *dst,
                                           const lattice_model_params *src, const char *fn,
                                           char *err)
{
    lattice_model_params_init(dst);
    TRY(lattice__copy_in(
        err, fn, LATTICE__SIZED(lattice_model_params, "params", LATTICE__MODEL_PARAMS_1_0, 0), dst,
        src));
    return check_params(dst, err);
}

/* A block-entry norm is an intervention on pre-norm's stream: post-norm
 * normalises its stream at every layer already, and peri-norm's output norms
 * bound it. */
lattice_status lattice__model_check_block_norm(const lattice_model_params *p,
                                               const lattice_norm *norm, const char *fn)
{
    if (p->block_norm > 0 && lattice_norm_get_placement(norm) != LATTICE_NORM_PLACEMENT_PRE)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "%s: block_norm %d needs the pre-norm placement (post- and peri-norm "
                             "normalise the stream already)", fn, p->block_norm);
    if (p->block_rescale > 0 && lattice_norm_get_placement(norm) != LATTICE_NORM_PLACEMENT_PRE)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "%s: block_rescale %d needs the pre-norm placement (post- and "
                             "peri-norm normalise the stream already)", fn, p->block_rescale);
    return LATTICE_OK;
}

lattice_status lattice_model_params_check(const lattice_model_params *params, char *errmsg)
{
    lattice_model_params p;
    if (errmsg)
        errmsg[0] = 0;
    return lattice__model_adopt_params(&p, params, "lattice_model_params_check", errmsg);
}
