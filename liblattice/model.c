#include "model_impl.h"

#include "attention.h"
#include "backend_impl.h"
#include "kernels.h"

#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define FAIL(m, st, ...) lattice__set_error((m)->err, (st), __VA_ARGS__)
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        lattice_status st_ = (expr);                                                               \
        if (st_ != LATTICE_OK)                                                                     \
            return st_;                                                                            \
    } while (0)

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
    const int lim = 1 << 20;
    if (p->vocab_size < 1 || p->vocab_size > (1 << 24))
        BAD("vocab_size %d out of range 1..16777216", p->vocab_size);
    if (p->d_model < 1 || p->d_model > lim)
        BAD("d_model %d out of range", p->d_model);
    if (p->n_layers < 1 || p->n_layers > 4096)
        BAD("n_layers %d: a model needs at least one layer", p->n_layers);
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
        BAD("max_batch %d and max_seq %d must be positive", p->max_batch, p->max_seq);
    if (!(p->init_std >= 0.0f) || !isfinite(p->init_std))
        BAD("init_std must be finite and >= 0");
    if (p->block_norm < 0 || p->block_norm > p->n_layers)
        BAD("block_norm %d not in 0..n_layers (%d): the layers per block whose entry is "
            "normalised, or 0 for none", p->block_norm, p->n_layers);
    /* Everything sized from these must fit comfortably in memory arithmetic. */
    double n = (double)p->max_batch * p->max_seq;
    double per_layer = n * (12.0 * p->d_model + 4.0 * p->d_ff +
                            3.0 * (p->n_heads + 2.0 * p->n_kv_heads) * p->head_dim) +
                       (double)p->max_batch * p->n_heads * p->max_seq * p->max_seq;
    double total = per_layer * p->n_layers + n * 2.0 * p->vocab_size;
    if (total * sizeof(float) > (double)(SIZE_MAX / 4) || n > (double)INT_MAX)
        BAD("the activations of this shape would not fit in memory");
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
static size_t layout_params(lattice_model *m, char *base, size_t *n_floats)
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
    }
#undef T1
#undef T2
    if (n_floats)
        *n_floats = ar.floats; /* every float is a parameter */
    return ar.used;
}

/* Carve the activation and scratch arena (base NULL: measure). Buffers a
 * placement does not use are not allocated. */
static size_t layout_acts(lattice_model *m, char *base)
{
    const lattice_model_params *p = &m->p;
    lattice_arena ar = {base, 0, 0};
    const size_t N = (size_t)p->max_batch * p->max_seq;
    const size_t D = p->d_model, hd = p->head_dim, H = p->n_heads, KV = p->n_kv_heads;
    const size_t F = p->d_ff, V = p->vocab_size, W = (H + 2 * KV) * hd;
    const size_t PT = (size_t)p->max_batch * H * p->max_seq * p->max_seq;
    const lattice_norm_placement pl = m->norm.placement;
    const int ln = m->norm.kind == LATTICE_NORM_KIND_LAYER;
#define F32(n) lattice__arena_floats(&ar, (n))
#define STATS(st)                                                                                  \
    do {                                                                                           \
        (st).mean = ln ? F32(N) : NULL;                                                            \
        (st).rstd = F32(N);                                                                        \
    } while (0)

    m->tokens = lattice__arena_bytes(&ar, N * sizeof(int32_t));
    m->emb = pl == LATTICE_NORM_PLACEMENT_POST ? F32(N * D) : NULL;
    STATS(m->bst);
    for (int i = 0; i <= p->n_layers; i++)
        m->hs[i] = F32(N * D);
    if (pl != LATTICE_NORM_PLACEMENT_POST)
        m->emb = m->hs[0];
    for (int i = 0; i < p->n_layers; i++) {
        layer_acts *A = &m->acts[i];
        memset(A, 0, sizeof(*A));
        for (int s = 0; s < N_SLOTS; s++)
            if (has_slot(pl, s))
                STATS(A->st[s]);
        if (pl != LATTICE_NORM_PLACEMENT_POST) {
            A->a1 = F32(N * D);
            A->a2 = F32(N * D);
        }
        A->raw = F32(N * W);
        A->q = F32(N * H * hd);
        A->k = F32(N * KV * hd);
        A->v = F32(N * KV * hd);
        if (p->qk_norm) {
            A->rstd_q = F32(N * H);
            A->rstd_k = F32(N * KV);
        }
        A->p = F32(PT);
        A->att = F32(N * H * hd);
        if (pl == LATTICE_NORM_PLACEMENT_PERI) {
            A->y1 = F32(N * D);
            A->y2 = F32(N * D);
        }
        if (pl == LATTICE_NORM_PLACEMENT_POST) {
            A->r1 = F32(N * D);
            A->r2 = F32(N * D);
        }
        A->mid = F32(N * D);
        A->gu = F32(N * 2 * F);
        A->s = F32(N * F);
        if (lattice__block_entry(m, i)) {
            A->bn = F32(N * D);
            STATS(A->bst);
        }
    }
    m->final_out = pl != LATTICE_NORM_PLACEMENT_POST ? F32(N * D) : NULL;
    m->logits = F32(N * V);
    m->dlogits = F32(N * V);
    m->rope = F32((size_t)p->max_seq * hd);

    m->d_a = F32(N * D);
    m->d_b = F32(N * D);
    m->d_in = F32(N * D);
    m->d_tmp = pl == LATTICE_NORM_PLACEMENT_PERI ? F32(N * D) : NULL;
    m->d_raw = F32(N * W);
    m->dq = F32(N * H * hd);
    m->dk = F32(N * KV * hd);
    m->dv = F32(N * KV * hd);
    m->dp = F32(PT);
    m->kv_t = F32(N * KV * hd);
    m->d_att = F32(N * H * hd);
    m->d_gu = F32(N * 2 * F);
    m->d_s = F32(N * F);
    long red_d = lattice__reduce_scratch((long)N, 2 * (long)D);
    long red_h = lattice__reduce_scratch((long)N, 2 * (long)hd);
    m->red = F32((size_t)(red_d > red_h ? red_d : red_h));
    m->rowloss = lattice__arena_bytes(&ar, N * sizeof(double));
    size_t nptr = (size_t)p->max_batch * H;
    m->ptr_a = lattice__arena_bytes(&ar, nptr * sizeof(float *));
    m->ptr_b = lattice__arena_bytes(&ar, nptr * sizeof(float *));
    m->ptr_c = lattice__arena_bytes(&ar, nptr * sizeof(float *));
#undef STATS
#undef F32
    return ar.used;
}

static void init_tensor(lattice_model *m, const tensor_entry *t, uint64_t seed)
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

/* The caller's params over the defaults: an older, shorter struct keeps the
 * defaults of the fields it lacks. */
static lattice_status adopt_params(lattice_model_params *dst, const lattice_model_params *src,
                                   char *err)
{
    if (!src || src->size == 0)
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT,
                                  "params missing or not initialised (size 0)");
    lattice_model_params_init(dst);
    memcpy(dst, src, src->size < sizeof(*dst) ? src->size : sizeof(*dst));
    dst->size = sizeof(*dst);
    return check_params(dst, err);
}

/* A block-entry norm is an intervention on pre-norm's stream: post-norm
 * normalises its stream at every layer already, and peri-norm's output norms
 * bound it. */
static lattice_status check_block_norm(const lattice_model_params *p, const lattice_norm *norm,
                                       const char *fn)
{
    if (p->block_norm > 0 && norm->placement != LATTICE_NORM_PLACEMENT_PRE)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "%s: block_norm %d needs the pre-norm placement (post- and peri-norm "
                             "normalise the stream already)", fn, p->block_norm);
    return LATTICE_OK;
}

lattice_status lattice_model_params_check(const lattice_model_params *params, char *errmsg)
{
    lattice_model_params p;
    if (errmsg)
        errmsg[0] = 0;
    return adopt_params(&p, params, errmsg);
}

lattice_status lattice_model_estimate(const lattice_model_params *params, const lattice_norm *norm,
                                      int64_t *n_params, size_t *arena_bytes)
{
    if (lattice__need(NULL, "lattice_model_estimate", 2, (const void *)params, "params",
                      (const void *)norm, "norm") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (params->size == 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_estimate: invalid argument: params->size is 0: call lattice_model_params_init first");
    lattice_model m;
    memset(&m, 0, sizeof(m));
    lattice_status st = adopt_params(&m.p, params, NULL);
    if (st == LATTICE_OK)
        st = check_block_norm(&m.p, norm, "lattice_model_estimate");
    if (st != LATTICE_OK)
        return st;
    m.norm = *norm;
    const int L = m.p.n_layers;
    m.layers = calloc((size_t)L, sizeof(layer_params));
    m.acts = calloc((size_t)L, sizeof(layer_acts));
    m.hs = calloc((size_t)L + 1, sizeof(float *));
    if (!m.layers || !m.acts || !m.hs) {
        st = lattice__fail(LATTICE_ERR_OUT_OF_MEMORY, "lattice_model_estimate: out of memory");
    } else {
        /* Measuring passes: nothing is allocated or registered. */
        size_t floats;
        size_t pbytes = layout_params(&m, NULL, &floats);
        size_t abytes = (layout_acts(&m, NULL) + 63) / 64 * 64;
        if (n_params)
            *n_params = (int64_t)floats;
        if (arena_bytes)
            *arena_bytes = 2 * ((pbytes + 63) / 64 * 64) + abytes;
    }
    free(m.layers);
    free(m.acts);
    free(m.hs);
    return st;
}

lattice_status lattice_model_create(const lattice_model_params *params, const lattice_norm *norm,
                                    lattice_backend *backend, lattice_model **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_create: invalid argument: out is NULL");
    *out = NULL;
    if (lattice__need(NULL, "lattice_model_create", 3, (const void *)params, "params",
                      (const void *)norm, "norm", (const void *)backend, "backend") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (params->size == 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_create: invalid argument: params->size is 0: call lattice_model_params_init first");
    lattice_model *m = calloc(1, sizeof(*m));
    if (!m)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_model_create: out of memory");
    m->norm = *norm;
    m->be = backend;
    const char *par = getenv("LATTICE_PARALLEL");
    m->parallel = par && strcmp(par, "ops") == 0    ? PARALLEL_OPS
                  : par && strcmp(par, "rows") == 0 ? PARALLEL_ROWS
                                                    : PARALLEL_AUTO;
    lattice_status st = adopt_params(&m->p, params, NULL);
    if (st == LATTICE_OK)
        st = check_block_norm(&m->p, norm, "lattice_model_create");
    if (st != LATTICE_OK) {
        free(m);
        return st;
    }
    const int L = m->p.n_layers;
    m->n_active = m->p.n_active_layers;
    m->trainable_embedding = m->trainable_boundary = m->trainable_head = 1;
    m->trainable_layer = calloc((size_t)L, sizeof(int));
    m->layers = calloc((size_t)L, sizeof(layer_params));
    m->acts = calloc((size_t)L, sizeof(layer_acts));
    m->hs = calloc((size_t)L + 1, sizeof(float *));
    m->tensors = calloc((size_t)L * 20 + 8, sizeof(tensor_entry));
    if (!m->trainable_layer || !m->layers || !m->acts || !m->hs || !m->tensors)
        goto oom;
    for (int i = 0; i < L; i++)
        m->trainable_layer[i] = 1;

    size_t pbytes = layout_params(m, NULL, NULL);
    m->params = aligned_alloc(64, (pbytes + 63) / 64 * 64);
    m->grads = aligned_alloc(64, (pbytes + 63) / 64 * 64);
    if (!m->params || !m->grads)
        goto oom;
    memset(m->params, 0, pbytes);
    memset(m->grads, 0, pbytes);
    m->n_params = pbytes / sizeof(float);
    layout_params(m, (char *)m->params, NULL);

    m->acts_bytes = (layout_acts(m, NULL) + 63) / 64 * 64;
    m->acts_base = aligned_alloc(64, m->acts_bytes);
    if (!m->acts_base)
        goto oom;
    layout_acts(m, m->acts_base);
    lattice__rope_table(m->rope, m->p.max_seq, m->p.head_dim, m->p.rope_theta);

    for (int i = 0; i < m->n_tensors; i++)
        init_tensor(m, &m->tensors[i], m->p.seed);
    *out = m;
    return LATTICE_OK;
oom:
    lattice_model_destroy(m);
    return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
        "lattice_model_create: out of memory");
}

static void split_free(model_split *ws);

void lattice_model_destroy(lattice_model *m)
{
    if (!m)
        return;
    free(m->params);
    free(m->grads);
    free(m->acts_base);
    free(m->trainable_layer);
    free(m->layers);
    free(m->acts);
    free(m->hs);
    free(m->tensors);
    split_free(&m->split);
    free(m);
}

const char *lattice_model_errmsg(const lattice_model *m)
{
    return m ? m->err : "no model (NULL handle)";
}

lattice_status lattice_model_get_params(const lattice_model *m, lattice_model_params *out)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_get_params", 2,
                      (const void *)m, "model", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_model_params p = m->p;
    p.n_active_layers = m->n_active;
    /* no field was added since 0.1: its size is today's */
    return lattice__copy_out(LATTICE__ERRBUF(m), "lattice_model_get_params", out, &p, sizeof(p),
                             sizeof(p));
}

lattice_norm_placement lattice_model_get_placement(const lattice_model *m)
{
    return m ? m->norm.placement : LATTICE_NORM_PLACEMENT_PRE;
}

lattice_status lattice_model_set_active_layers(lattice_model *m, int n_active)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_set_active_layers: invalid argument: model is NULL");
    if (n_active < 1 || n_active > m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "active layers %d not in 1..%d", n_active,
                    m->p.n_layers);
    m->n_active = n_active;
    m->batch = m->seq = 0; /* the stored activations no longer match */
    return LATTICE_OK;
}

int lattice_model_get_active_layers(const lattice_model *m) { return m ? m->n_active : 0; }

lattice_status lattice_model_init_layer(lattice_model *m, int layer, uint64_t seed)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_init_layer: invalid argument: model is NULL");
    if (layer < 0 || layer >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layer %d not in 0..%d", layer,
                    m->p.n_layers - 1);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].group == LATTICE_MODEL_GROUP_LAYER && m->tensors[i].layer == layer)
            init_tensor(m, &m->tensors[i], seed);
    return LATTICE_OK;
}

lattice_status lattice_model_copy_layer(lattice_model *m, int dst, int src)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_copy_layer: invalid argument: model is NULL");
    if (dst < 0 || src < 0 || dst >= m->p.n_layers || src >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layers %d <- %d not in 0..%d", dst, src,
                    m->p.n_layers - 1);
    if (dst == src)
        return LATTICE_OK;
    /* Every layer registers the same tensors in the same order. */
    int s0 = -1, d0 = -1, count = 0;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        if (t->group != LATTICE_MODEL_GROUP_LAYER)
            continue;
        if (t->layer == src && s0 < 0)
            s0 = i;
        if (t->layer == dst && d0 < 0)
            d0 = i;
        count += t->layer == src;
    }
    for (int j = 0; j < count; j++) {
        const tensor_entry *from = &m->tensors[s0 + j], *to = &m->tensors[d0 + j];
        memcpy(to->data, from->data, sizeof(float) * from->rows * from->cols);
    }
    return LATTICE_OK;
}

lattice_status lattice_model_zero_layer_outputs(lattice_model *m, int layer)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_zero_layer_outputs: invalid argument: model is NULL");
    if (layer < 0 || layer >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layer %d not in 0..%d", layer,
                    m->p.n_layers - 1);
    const lattice_model_params *p = &m->p;
    memset(m->layers[layer].wo, 0, sizeof(float) * p->d_model * p->n_heads * p->head_dim);
    memset(m->layers[layer].wd, 0, sizeof(float) * p->d_model * p->d_ff);
    return LATTICE_OK;
}

static int *trainable_flag(lattice_model *m, lattice_model_group group, int layer)
{
    switch (group) {
    case LATTICE_MODEL_GROUP_EMBEDDING: return &m->trainable_embedding;
    case LATTICE_MODEL_GROUP_BOUNDARY_NORM: return &m->trainable_boundary;
    case LATTICE_MODEL_GROUP_HEAD: return m->p.tie_embeddings ? &m->trainable_embedding : &m->trainable_head;
    case LATTICE_MODEL_GROUP_LAYER:
        return layer >= 0 && layer < m->p.n_layers ? &m->trainable_layer[layer] : NULL;
    }
    return NULL;
}

lattice_status lattice_model_set_trainable(lattice_model *m, lattice_model_group group, int layer,
                                           int trainable)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_set_trainable: invalid argument: model is NULL");
    int *f = trainable_flag(m, group, layer);
    if (!f)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "no parameter group %d (layer %d)", (int)group,
                    layer);
    *f = trainable != 0;
    return LATTICE_OK;
}

lattice_status lattice_model_get_trainable(const lattice_model *m, lattice_model_group group, int layer,
                                           int *trainable)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_get_trainable", 2,
                      (const void *)m, "model", (const void *)trainable, "trainable") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    int *f = trainable_flag((lattice_model *)m, group, layer);
    if (!f)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_get_trainable: no group %d, layer %d", (int)group, layer);
    *trainable = *f;
    return LATTICE_OK;
}

static int head_trains(const lattice_model *m)
{
    return m->p.tie_embeddings ? m->trainable_embedding : m->trainable_head;
}

uint64_t lattice__model_hash(const lattice_model *m, const float *arena, uint64_t h)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *te = &m->tensors[i];
        h = lattice__hash(h, arena + (te->data - m->params),
                          sizeof(float) * (size_t)(te->rows * te->cols));
    }
    return h;
}

int lattice__tensor_updatable(const lattice_model *m, const tensor_entry *t)
{
    switch (t->group) {
    case LATTICE_MODEL_GROUP_EMBEDDING: return m->trainable_embedding;
    case LATTICE_MODEL_GROUP_BOUNDARY_NORM: return m->trainable_boundary;
    case LATTICE_MODEL_GROUP_HEAD: return m->trainable_head;
    case LATTICE_MODEL_GROUP_LAYER: return t->layer < m->n_active && m->trainable_layer[t->layer];
    }
    return 0;
}

lattice_status lattice_model_set_skip(lattice_model *m, int first, int count)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_set_skip: invalid argument: model is NULL");
    if (count < 0 || first < 0 || (count > 0 && first + (long)count > m->p.n_layers))
        /* the end in long: first + count overflows int for the ranges refused here */
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "skip range [%d, %ld) outside 0..%d", first,
                    (long)first + count, m->p.n_layers);
    m->skip_first = count ? first : 0;
    m->skip_count = count;
    m->batch = m->seq = 0;
    return LATTICE_OK;
}

static int skipped(const lattice_model *m, int layer)
{
    return layer >= m->skip_first && layer < m->skip_first + m->skip_count;
}

/* ---- forward ------------------------------------------------------------- */

#define NT (m->be->n_threads)
/* Time stmt under op when the model's profiling is on. */
#define PROF(op, stmt)                                                                             \
    do {                                                                                           \
        double t0_ = lattice__prof_begin(&m->prof);                                                \
        stmt;                                                                                      \
        lattice__prof_end(&m->prof, (op), t0_);                                                    \
    } while (0)

static const char *const op_names[LATTICE_OP_COUNT] = {
    "embed", "gemm_qkv", "gemm_o", "gemm_mlp", "gemm_head", "attn_score", "attn_value",
    "softmax", "attn_fused", "norm", "rope", "elementwise", "loss", "optim", "grad_sum",
};

const char *lattice__op_name(lattice_op op)
{
    return (unsigned)op < LATTICE_OP_COUNT ? op_names[op] : "?";
}

void lattice__model_profile(lattice_model *m, int on)
{
    memset(&m->prof, 0, sizeof(m->prof));
    m->prof.on = on;
}

const lattice_prof *lattice__model_profile_get(const lattice_model *m) { return &m->prof; }

static void norm_fwd(lattice_model *m, float *out, norm_stats *st, const float *in,
                     const norm_params *np, long n)
{
    PROF(LATTICE_OP_NORM,
         lattice__norm_forward(m->norm.kind == LATTICE_NORM_KIND_LAYER, out, st->mean, st->rstd, in,
                               np->w, np->b, m->norm.eps, n, m->p.d_model, NT));
}

/* A sublayer's input: Norm_in(x) under pre and peri, x itself under post. */
static const float *sublayer_input(lattice_model *m, float *buf, norm_stats *st, const float *x,
                                   const norm_params *np, long n)
{
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST)
        return x;
    norm_fwd(m, buf, st, x, np, n);
    return buf;
}

/* Join a sublayer's output projection y = in W^T (W is [D, k]) to its input
 * stream x, as the placement says: pre out = x + y; peri out = x + Norm(y),
 * keeping y; post out = Norm(a x + y), keeping the sum r. */
static lattice_status sublayer_output(lattice_model *m, float *out, const float *x, const float *in,
                                      const float *w, int k, float *y, float *r, norm_stats *st,
                                      const norm_params *np, long n, lattice_op gemm_op)
{
    const int D = m->p.d_model;
    const lattice_norm_placement pl = m->norm.placement;
    if (pl == LATTICE_NORM_PLACEMENT_PERI) {
        PROF(gemm_op, TRY(lattice__gemm(m->be, 0, 1, (int)n, D, k, 1.0f, in, k, w, k, 0.0f, y, D)));
        norm_fwd(m, out, st, y, np, n);
        PROF(LATTICE_OP_ELEMWISE, lattice__axpby(out, 1.0f, x, n * D, NT));
        return LATTICE_OK;
    }
    float *sum = pl == LATTICE_NORM_PLACEMENT_POST ? r : out;
    PROF(LATTICE_OP_ELEMWISE, {
        memcpy(sum, x, sizeof(float) * n * D);
        if (m->norm.residual_scale != 1.0f)
            lattice__scale(sum, m->norm.residual_scale, n * D, NT);
    });
    PROF(gemm_op, TRY(lattice__gemm(m->be, 0, 1, (int)n, D, k, 1.0f, in, k, w, k, 1.0f, sum, D)));
    if (pl == LATTICE_NORM_PLACEMENT_POST)
        norm_fwd(m, out, st, r, np, n);
    return LATTICE_OK;
}

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
    }

    const float *a = sublayer_input(m, A->a1, &A->st[SLOT_IN1], x, &L->norm[SLOT_IN1], N);
    PROF(LATTICE_OP_GEMM_QKV,
         TRY(lattice__gemm(m->be, 0, 1, (int)N, W, D, 1.0f, a, D, L->wqkv, D, 0.0f, A->raw, W)));
    lattice_qkv_dims qd = {m->batch, m->seq, H, KV, hd, p->qk_norm, m->norm.eps};
    PROF(LATTICE_OP_ROPE, lattice__qkv_forward(A->q, A->k, A->v, A->rstd_q, A->rstd_k, A->raw,
                                               L->qn, L->kn, m->rope, &qd, NT));
    lattice_attn_dims ad = {m->batch, m->seq, H, KV, hd, 0, LATTICE_ATTN_AUTO};
    lattice_attn_ptrs ptrs = {m->ptr_a, m->ptr_b, m->ptr_c, &m->prof, m->kv_t};
    TRY(lattice__attention_forward(m->be, A->att, A->p, A->q, A->k, A->v, &ad, &ptrs));
    TRY(sublayer_output(m, A->mid, x, A->att, L->wo, H * hd, A->y1, A->r1, &A->st[SLOT_OUT1],
                        &L->norm[SLOT_OUT1], N, LATTICE_OP_GEMM_O));

    const float *a2 = sublayer_input(m, A->a2, &A->st[SLOT_IN2], A->mid, &L->norm[SLOT_IN2], N);
    PROF(LATTICE_OP_GEMM_MLP, TRY(lattice__gemm(m->be, 0, 1, (int)N, 2 * F, D, 1.0f, a2, D, L->wgu,
                                                D, 0.0f, A->gu, 2 * F)));
    PROF(LATTICE_OP_ELEMWISE, lattice__swiglu_forward(A->s, A->gu, N, F, NT));
    return sublayer_output(m, m->hs[i + 1], A->mid, A->s, L->wd, F, A->y2, A->r2,
                           &A->st[SLOT_OUT2], &L->norm[SLOT_OUT2], N, LATTICE_OP_GEMM_MLP);
}

/* The stream the LM head reads: the final norm's output, or the last boundary. */
static const float *head_input(const lattice_model *m)
{
    return m->norm.placement == LATTICE_NORM_PLACEMENT_POST ? m->hs[m->n_active] : m->final_out;
}

/* ---- threads: ops split or rows split ------------------------------------
 *
 * A pass uses the backend's threads one of two ways. Ops split: each op runs
 * over the whole batch and splits its own work (a GEMM's rows or columns, a
 * kernel's rows) across the team, joining after every op. Rows split: the
 * batch's sequences are dealt out in contiguous blocks, one per thread, and
 * each thread runs the whole pass (every layer) on its block with serial
 * kernels, through a view: a copy of the model whose activation pointers
 * start at its block. Every op is row-local or sequence-local except the
 * weight gradients, which each thread sums into its own arena; the arenas are
 * then added into the model's in thread order. The block boundaries and the
 * order of that sum depend only on the thread count, so reruns at one count
 * give the same bits. Small shapes take the rows split: their GEMMs are too
 * small to share, and the ops split would join dozens of times per layer. */

/* Per-row multiply-adds of a layer's projections (q/k/v, o, gate/up, down)
 * below which a pass takes the rows split (the study's d64 student: 49k;
 * the d256 benchmark student: 852k). Measured: doc/PERFORMANCE.md. */
#define ROWS_SPLIT_MAX_ROW_MACS 200000L

static int rows_threads(const lattice_model *m)
{
    const lattice_model_params *p = &m->p;
    int nt = m->be->n_threads;
    if (nt < 2 || m->batch < 2 || m->parallel == PARALLEL_OPS || !lattice__backend_builtin(m->be))
        return 1;
#ifdef _OPENMP
    if (omp_in_parallel()) /* a caller's thread: no team to split over */
        return 1;
#endif
    const long W = (long)(p->n_heads + 2 * p->n_kv_heads) * p->head_dim;
    const long row_macs =
        (long)p->d_model * (W + (long)p->n_heads * p->head_dim + 3L * p->d_ff);
    if (m->parallel == PARALLEL_AUTO && row_macs >= ROWS_SPLIT_MAX_ROW_MACS)
        return 1;
    return nt < m->batch ? nt : m->batch;
}

static void split_free(model_split *ws)
{
    free(ws->grads);
    free(ws->red);
    free(ws->views);
    free(ws->hs);
    free(ws->acts);
    free(ws->be);
    free(ws->status);
    memset(ws, 0, sizeof(*ws));
}

static size_t grads_stride(const lattice_model *m) /* floats, a 64-byte multiple */
{
    return (m->n_params + 15) / 16 * 16;
}

/* The workspace for nt threads: made at the first rows-split pass (and again
 * when the thread count changes), kept to the model's end. */
static lattice_status split_alloc(lattice_model *m, int nt)
{
    model_split *ws = &m->split;
    split_free(ws);
    const lattice_model_params *p = &m->p;
    const long rows = (long)p->max_batch * p->max_seq;
    long red_d = lattice__reduce_scratch(rows, 2 * (long)p->d_model);
    long red_h = lattice__reduce_scratch(rows, 2 * (long)p->head_dim);
    ws->red_floats = (size_t)(red_d > red_h ? red_d : red_h);
    const size_t gbytes = (size_t)(nt - 1) * grads_stride(m) * sizeof(float);
    ws->grads = aligned_alloc(64, gbytes);
    ws->red = malloc((size_t)(nt - 1) * ws->red_floats * sizeof(float));
    ws->views = calloc((size_t)nt, sizeof(lattice_model));
    ws->hs = calloc((size_t)nt * (p->n_layers + 1), sizeof(float *));
    ws->acts = calloc((size_t)nt * p->n_layers, sizeof(layer_acts));
    ws->be = calloc((size_t)nt, sizeof(struct lattice_backend));
    ws->status = calloc((size_t)nt, sizeof(lattice_status));
    if (!ws->grads || !ws->red || !ws->views || !ws->hs || !ws->acts || !ws->be || !ws->status) {
        split_free(ws);
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY,
                    "out of memory for the %d threads' gradient arenas of the rows split", nt);
    }
    memset(ws->grads, 0, gbytes);
    ws->n = nt;
    ws->bytes = gbytes + (size_t)(nt - 1) * ws->red_floats * sizeof(float);
    return LATTICE_OK;
}

/* Thread t's view: the model with every row-indexed buffer starting at its
 * first sequence, its own backend copy (one thread), gradient arena and
 * reduction scratch. */
static void split_view(lattice_model *m, int t)
{
    model_split *ws = &m->split;
    const lattice_model_params *p = &m->p;
    const int nt = ws->n, L = p->n_layers, T = m->seq;
    const long D = p->d_model, H = p->n_heads, KV = p->n_kv_heads, hd = p->head_dim;
    const long F = p->d_ff, V = p->vocab_size, W = (H + 2 * KV) * hd;
    const int b0 = (int)((long)m->batch * t / nt), b1 = (int)((long)m->batch * (t + 1) / nt);
    const long r0 = (long)b0 * T, pt0 = (long)b0 * H * T * T;
    lattice_model *v = &ws->views[t];
    *v = *m;
    v->batch = b1 - b0;
    struct lattice_backend *be = &ws->be[t];
    *be = *m->be;
    be->n_threads = 1;
    if (be->ops.user == m->be)
        be->ops.user = be;
    v->be = be;
    if (t > 0) {
        v->grads = ws->grads + (size_t)(t - 1) * grads_stride(m);
        v->red = ws->red + (size_t)(t - 1) * ws->red_floats;
        v->prof.on = 0; /* the op times are thread 0's */
    }
#define AT(ptr, width) ((ptr) ? (ptr) + r0 * (width) : NULL)
    v->tokens = m->tokens + r0;
    v->emb = AT(m->emb, D);
    v->bst.mean = AT(m->bst.mean, 1);
    v->bst.rstd = AT(m->bst.rstd, 1);
    v->hs = ws->hs + (size_t)t * (L + 1);
    for (int i = 0; i <= L; i++)
        v->hs[i] = AT(m->hs[i], D);
    v->acts = ws->acts + (size_t)t * L;
    for (int i = 0; i < L; i++) {
        const layer_acts *A = &m->acts[i];
        layer_acts *B = &v->acts[i];
        B->a1 = AT(A->a1, D);
        B->raw = AT(A->raw, W);
        B->q = AT(A->q, H * hd);
        B->k = AT(A->k, KV * hd);
        B->v = AT(A->v, KV * hd);
        B->rstd_q = AT(A->rstd_q, H);
        B->rstd_k = AT(A->rstd_k, KV);
        B->p = A->p + pt0;
        B->att = AT(A->att, H * hd);
        B->y1 = AT(A->y1, D);
        B->r1 = AT(A->r1, D);
        B->mid = AT(A->mid, D);
        B->a2 = AT(A->a2, D);
        B->gu = AT(A->gu, 2 * F);
        B->s = AT(A->s, F);
        B->y2 = AT(A->y2, D);
        B->r2 = AT(A->r2, D);
        for (int k = 0; k < N_SLOTS; k++) {
            B->st[k].mean = AT(A->st[k].mean, 1);
            B->st[k].rstd = AT(A->st[k].rstd, 1);
        }
        B->bn = AT(A->bn, D);
        B->bst.mean = AT(A->bst.mean, 1);
        B->bst.rstd = AT(A->bst.rstd, 1);
    }
    v->final_out = AT(m->final_out, D);
    v->logits = AT(m->logits, V);
    v->dlogits = AT(m->dlogits, V);
    v->d_a = AT(m->d_a, D);
    v->d_b = AT(m->d_b, D);
    v->d_in = AT(m->d_in, D);
    v->d_tmp = AT(m->d_tmp, D);
    v->d_raw = AT(m->d_raw, W);
    v->dq = AT(m->dq, H * hd);
    v->dk = AT(m->dk, KV * hd);
    v->dv = AT(m->dv, KV * hd);
    v->dp = m->dp + pt0;
    v->kv_t = AT(m->kv_t, KV * hd);
    v->d_att = AT(m->d_att, H * hd);
    v->d_gu = AT(m->d_gu, 2 * F);
    v->d_s = AT(m->d_s, F);
    v->rowloss = m->rowloss + r0;
    v->ptr_a = m->ptr_a + (long)b0 * H;
    v->ptr_b = m->ptr_b + (long)b0 * H;
    v->ptr_c = m->ptr_c + (long)b0 * H;
#undef AT
}

/* This thread's number in its team and the team's size (0 of 1 without OpenMP). */
static void team_place(int *t, int *T)
{
#ifdef _OPENMP
    *t = omp_get_thread_num();
    *T = omp_get_num_threads();
#else
    *t = 0;
    *T = 1;
#endif
}

/* The threads' gradient arenas added into the model's, in thread order. */
static void sum_grads(lattice_model *m)
{
    const model_split *ws = &m->split;
    const int nt = ws->n;
    const size_t stride = grads_stride(m);
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        int t, T;
        team_place(&t, &T);
        for (int e = 0; e < m->n_tensors; e++) {
            const tensor_entry *te = &m->tensors[e];
            if (!lattice__tensor_updatable(m, te))
                continue;
            const size_t off = (size_t)(te->data - m->params);
            const size_t n = (size_t)(te->rows * te->cols);
            const size_t lo = n * t / T, hi = n * (t + 1) / T;
            float *g = m->grads + off;
            for (size_t j = lo; j < hi; j++) {
                float sum = g[j];
                for (int k = 1; k < nt; k++)
                    sum += ws->grads[(size_t)(k - 1) * stride + off + j];
                g[j] = sum;
            }
        }
    }
}

typedef lattice_status (*pass_fn)(lattice_model *m);
static lattice_status backward_rows(lattice_model *m);

/* One pass (forward or backward) over the batch the model holds, split as
 * rows_threads says. */
static lattice_status run_pass(lattice_model *m, pass_fn pass)
{
    const int nt = rows_threads(m);
    m->prof.rows_threads = nt;
    if (nt < 2)
        return pass(m);
    if (m->split.n != nt)
        TRY(split_alloc(m, nt));
    model_split *ws = &m->split;
    for (int t = 0; t < nt; t++)
        split_view(m, t);
#pragma omp parallel num_threads(nt)
    {
        int t, T;
        team_place(&t, &T);
        for (int k = t; k < nt; k += T) /* every view, however many threads came */
            ws->status[k] = pass(&ws->views[k]);
    }
    m->prof = ws->views[0].prof;
    m->prof.rows_threads = nt;
    for (int t = 0; t < nt; t++)
        if (ws->status[t] != LATTICE_OK)
            return ws->status[t];
    if (pass == backward_rows)
        PROF(LATTICE_OP_GRAD_SUM, sum_grads(m));
    return LATTICE_OK;
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
        if (skipped(m, i))
            PROF(LATTICE_OP_ELEMWISE, memcpy(m->hs[i + 1], m->hs[i], sizeof(float) * N * D));
        else
            st = layer_forward(m, i);
    }
    if (st == LATTICE_OK && m->norm.placement != LATTICE_NORM_PLACEMENT_POST)
        norm_fwd(m, m->final_out, &m->bst, m->hs[m->n_active], &m->bnorm, N);
    if (st == LATTICE_OK)
        PROF(LATTICE_OP_GEMM_HEAD,
             st = lattice__gemm(m->be, 0, 1, (int)N, m->p.vocab_size, D, 1.0f, head_input(m), D,
                                m->whead, D, 0.0f, m->logits, m->p.vocab_size));
    return st;
}

lattice_status lattice_model_forward(lattice_model *m, const int32_t *tokens, int batch, int seq)
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
    memcpy(m->tokens, tokens, sizeof(int32_t) * N);
    m->batch = batch;
    m->seq = seq;
    lattice_status st = run_pass(m, forward_rows);
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

float *lattice_model_get_dlogits(lattice_model *m) { return m && m->batch ? m->dlogits : NULL; }

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

lattice_status lattice_model_cross_entropy(lattice_model *m, const int32_t *targets,
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
    *loss = (float)l;
    if (!isfinite(l))
        return FAIL(m, LATTICE_ERR_NON_FINITE, "the cross-entropy is not finite");
    return LATTICE_OK;
}

/* ---- backward ------------------------------------------------------------ */

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

/* The residual's share and the input path's share (d_in, the gradient of the
 * sublayer's input after Norm_in) joined into *g, the gradient of x. */
static void sublayer_input_grad(lattice_model *m, float *g, const float *x, const norm_stats *st,
                                const norm_params *np, int tr, long n)
{
    const long cells = n * m->p.d_model;
    if (m->norm.residual_scale != 1.0f)
        PROF(LATTICE_OP_ELEMWISE, lattice__scale(g, m->norm.residual_scale, cells, NT));
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST)
        PROF(LATTICE_OP_ELEMWISE, lattice__axpby(g, 1.0f, m->d_in, cells, NT));
    else
        norm_bwd(m, g, 1, np, tr, m->d_in, x, st, n);
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
    PROF(LATTICE_OP_GEMM_MLP, {
        if (tr)
            TRY(lattice__gemm(m->be, 1, 0, D, F, (int)N, 1.0f, dy, D, A->s, F, 1.0f,
                              lattice__grad_of(m, L->wd), F));
        TRY(lattice__gemm(m->be, 0, 0, (int)N, F, D, 1.0f, dy, D, L->wd, F, 0.0f, m->d_s, F));
    });
    PROF(LATTICE_OP_ELEMWISE, lattice__swiglu_backward(m->d_gu, m->d_s, A->gu, N, F, NT));
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
    lattice_attn_dims ad = {m->batch, m->seq, H, KV, hd, 0, LATTICE_ATTN_AUTO};
    lattice_attn_ptrs ptrs = {m->ptr_a, m->ptr_b, m->ptr_c, &m->prof, m->kv_t};
    TRY(lattice__attention_backward(m->be, m->dq, m->dk, m->dv, m->dp, m->d_att, A->p, A->q,
                                    A->k, A->v, &ad, &ptrs));
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
    const float *x = L->bnorm.w ? A->bn : m->hs[i];
    sublayer_input_grad(m, *g, x, &A->st[SLOT_IN1], &L->norm[SLOT_IN1], tr, N);
    if (L->bnorm.w) { /* *g is the gradient of Norm(hs[i]): back through the block-entry norm */
        norm_bwd(m, *spare, 0, &L->bnorm, tr, *g, m->hs[i], &A->bst, N);
        float *tmp = *g;
        *g = *spare;
        *spare = tmp;
    }
    return LATTICE_OK;
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
        if (m->trainable_layer[i] && !skipped(m, i)) {
            lowest = i;
            break;
        }
    int stop = need_emb ? 0 : lowest;

    lattice_status st = LATTICE_OK;
    const float *hin = head_input(m);
    if (head_trains(m))
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
        if (skipped(m, i))
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

lattice_status lattice_model_backward(lattice_model *m)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_backward: invalid argument: model is NULL");
    if (!m->batch)
        return FAIL(m, LATTICE_ERR_STATE, "backward needs a forward pass first");
    if (m->inference)
        return FAIL(m, LATTICE_ERR_STATE, "the last forward was an inference forward: backward "
                                          "needs lattice_model_forward");
    lattice_status st = run_pass(m, backward_rows);
    if (st != LATTICE_OK)
        return st == LATTICE_ERR_OUT_OF_MEMORY ? st : FAIL(m, st, "the backend failed during backward");
    return LATTICE_OK;
}

/* ---- inspection ---------------------------------------------------------- */

lattice_status lattice_model_get_hidden(const lattice_model *m, int boundary, const float **out)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_get_hidden", 2,
                      (const void *)m, "model", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (!m->batch)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_STATE,
            "lattice_model_get_hidden: no forward pass has run yet");
    if (boundary < 0 || boundary > m->n_active)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_get_hidden: boundary %d not in 0..%d", boundary, m->n_active);
    *out = m->hs[boundary];
    return LATTICE_OK;
}

int lattice_model_get_n_tensors(const lattice_model *m) { return m ? m->n_tensors : 0; }

static void fill_info(const lattice_model *m, const tensor_entry *t, lattice_model_tensor_info *out)
{
    out->name = t->name;
    out->ndim = t->ndim;
    out->shape[0] = t->rows;
    out->shape[1] = t->cols;
    out->data = t->data;
    out->grad = lattice__grad_of(m, t->data);
    out->group = t->group;
    out->layer = t->layer;
}

lattice_status lattice_model_get_tensor(const lattice_model *m, int index, lattice_model_tensor_info *out)
{
    if (!m || !out || index < 0 || index >= m->n_tensors)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_get_tensor: %s", !m ? "model is NULL" : !out ? "out is NULL"
                                                            : "index out of range");
    fill_info(m, &m->tensors[index], out);
    return LATTICE_OK;
}

lattice_status lattice_model_find_tensor(const lattice_model *m, const char *name,
                                         lattice_model_tensor_info *out)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_find_tensor", 3,
                      (const void *)m, "model", (const void *)name, "name", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0) {
            fill_info(m, &m->tensors[i], out);
            return LATTICE_OK;
        }
    return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_NOT_FOUND,
        "lattice_model_find_tensor: no tensor named '%s'", name);
}

int64_t lattice_model_get_n_params(const lattice_model *m)
{
    int64_t n = 0;
    if (m)
        for (int i = 0; i < m->n_tensors; i++)
            n += m->tensors[i].rows * m->tensors[i].cols;
    return n;
}

double lattice_model_get_flops(const lattice_model *m, int batch, int seq, int with_backward)
{
    if (!m || batch < 1 || seq < 1)
        return 0.0;
    const lattice_model_params *p = &m->p;
    const double N = (double)batch * seq, D = p->d_model, hd = p->head_dim, H = p->n_heads;
    const double W = (p->n_heads + 2.0 * p->n_kv_heads) * hd, F = p->d_ff, V = p->vocab_size;
    const double proj = 2.0 * N * D * (W + H * hd + 3.0 * F); /* qkv, o, gate+up, down */
    const double attn = 2.0 * 2.0 * batch * H * (double)seq * seq * hd; /* QK^T and PV */
    const double head = 2.0 * N * D * V;
    double total = head;
    int active = 0;
    for (int i = 0; i < m->n_active; i++)
        active += !skipped(m, i);
    total += active * (proj + attn);
    if (!with_backward)
        return total;
    /* Backward: input gradients plus weight gradients of trainable layers
     * (the attention core's four GEMMs count twice its forward two). */
    double bwd = head * (1 + head_trains(m));
    for (int i = 0; i < m->n_active; i++)
        if (!skipped(m, i))
            bwd += proj * (1 + m->trainable_layer[i]) + 2.0 * attn;
    return total + bwd;
}

size_t lattice_model_get_arena_bytes(const lattice_model *m)
{
    if (!m)
        return 0;
    /* as allocated: each parameter-sized arena rounded up to 64 bytes */
    return 2 * ((m->n_params * sizeof(float) + 63) / 64 * 64) + m->acts_bytes + m->split.bytes;
}

/* ---- inference and evaluation -------------------------------------------- */

/* Nothing of the forward can be skipped for inference without changing its
 * numbers or its kernels: the attention probabilities are also the GEMM
 * path's score buffer, the norm kernels write their statistics as they go,
 * and every other activation feeds a later op. So the pass is the training
 * one, and the mark is what it adds: an evaluation run between a training
 * forward and its backward overwrites the activations, and backward must then
 * refuse rather than compute gradients of the evaluation batch. */
lattice_status lattice_model_forward_inference(lattice_model *m, const int32_t *tokens, int batch,
                                               int seq)
{
    lattice_status st = lattice_model_forward(m, tokens, batch, seq);
    if (st == LATTICE_OK)
        m->inference = 1;
    return st;
}

lattice_status lattice_model_loss(lattice_model *m, const int32_t *targets, const uint8_t *mask,
                                  double *ce, int64_t *n_counted)
{
    if (!m)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "lattice_model_loss: no model (NULL)");
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

lattice_status lattice_model_evaluate(lattice_model *m, lattice_data *data, int64_t max_batches,
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
    /* Weighted by counted positions, as lattice_trainer_evaluate does, so the
     * two agree on the same batches. */
    double total = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < nb; i++) {
        lattice_data_batch b;
        double ce;
        int64_t n = 0;
        lattice_status st = lattice_data_get_val_batch(data, i, &b);
        if (st != LATTICE_OK)
            return FAIL(m, st, "validation batch %lld: %s", (long long)i,
                        lattice_data_errmsg(data));
        if ((st = lattice_model_forward_inference(m, b.tokens, b.batch, b.seq)) == LATTICE_OK)
            st = lattice_model_loss(m, b.targets, b.mask, &ce, &n);
        if (st != LATTICE_OK) {
            char why[LATTICE_ERRMSG_MAX];
            snprintf(why, sizeof why, "%s", m->err);
            return FAIL(m, st, "validation batch %lld: %s", (long long)i, why);
        }
        total += ce * (double)n;
        count += n;
    }
    *val_ce = count ? total / (double)count : 0.0;
    return LATTICE_OK;
}
