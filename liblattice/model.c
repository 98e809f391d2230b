/* The model: create and destroy, its settings (active layers, trainable
 * groups, skipped layers, layer edits), and inspection (tensors, hidden
 * states, sizes, FLOPs). The passes are in model_pass.c. */
#include "model_internal.h"
#include "backend_impl.h"
#include "model_access.h"

#include "fields.h"
#include "kernels.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The model's copy of a norm's settings. */
static lattice__norm_spec norm_spec(const lattice_norm *n)
{
    return (lattice__norm_spec){lattice_norm_get_placement(n), lattice_norm_get_kind(n),
                                lattice_norm_get_eps(n), lattice_norm_get_residual_scale(n)};
}

lattice_status lattice_model_estimate(const lattice_model_params *params, const lattice_norm *norm,
                                      int64_t *n_params, size_t *arena_bytes)
{
    if (lattice__need(NULL, "lattice_model_estimate", 2, (const void *)params, "params",
                      (const void *)norm, "norm") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_model m;
    memset(&m, 0, sizeof(m));
    lattice_status st = lattice__model_adopt_params(&m.p, params, "lattice_model_estimate", NULL);
    if (st == LATTICE_OK)
        st = lattice__model_check_block_norm(&m.p, norm, "lattice_model_estimate");
    if (st != LATTICE_OK)
        return st;
    m.norm = norm_spec(norm);
    const int L = m.p.n_layers;
    m.layers = calloc((size_t)L, sizeof(layer_params));
    m.acts = calloc((size_t)L, sizeof(layer_acts));
    m.hs = calloc((size_t)L + 1, sizeof(float *));
    if (!m.layers || !m.acts || !m.hs) {
        st = lattice__fail(LATTICE_ERR_OUT_OF_MEMORY, "lattice_model_estimate: out of memory");
    } else {
        /* Measuring passes: nothing is allocated or registered. */
        size_t floats;
        size_t pbytes = lattice__model_layout_params(&m, NULL, &floats);
        size_t abytes = (lattice__model_layout_acts(&m, NULL) + 63) / 64 * 64;
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

/* A model of checked params p with the norm's settings: lattice_model_create's
 * body after its checks, and lattice_model_create_grown's; fn names the call
 * in a refusal. Every weight is drawn from p->seed, as the group's text says. */
static lattice_status model_new(const lattice_model_params *p, lattice__norm_spec norm,
                                lattice_backend *backend, const char *fn, lattice_model **out)
{
    lattice_model *m = calloc(1, sizeof(*m));
    if (!m)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
    m->norm = norm;
    m->be = backend;
    m->busy.hold = &backend->hold; /* a call inside the model holds its backend's settings */
    m->busy.err = m->err;
    m->p = *p;
    const int L = m->p.n_layers;
    m->n_active = m->p.n_active_layers;
    m->trainable_embedding = m->trainable_boundary = m->trainable_head = 1;
    m->trainable_layer = calloc((size_t)L, sizeof(int));
    m->layers = calloc((size_t)L, sizeof(layer_params));
    m->acts = calloc((size_t)L, sizeof(layer_acts));
    m->hs = calloc((size_t)L + 1, sizeof(float *));
    m->tensors = calloc((size_t)L * 20 + 8, sizeof(tensor_entry));
    m->ref_pending = malloc((size_t)L * sizeof(double));
    if (!m->trainable_layer || !m->layers || !m->acts || !m->hs || !m->tensors || !m->ref_pending)
        goto oom;
    for (int i = 0; i < L; i++) {
        m->trainable_layer[i] = 1;
        m->ref_pending[i] = NAN;
    }

    size_t pbytes = lattice__model_layout_params(m, NULL, NULL);
    m->params = aligned_alloc(64, (pbytes + 63) / 64 * 64);
    m->grads = aligned_alloc(64, (pbytes + 63) / 64 * 64);
    if (!m->params || !m->grads)
        goto oom;
    memset(m->params, 0, pbytes);
    memset(m->grads, 0, pbytes);
    m->n_params = pbytes / sizeof(float);
    lattice__model_layout_params(m, (char *)m->params, NULL);

    m->acts_bytes = (lattice__model_layout_acts(m, NULL) + 63) / 64 * 64;
    m->acts_base = aligned_alloc(64, m->acts_bytes);
    if (!m->acts_base)
        goto oom;
    lattice__model_layout_acts(m, m->acts_base);
    lattice__rope_table(m->rope, m->p.max_seq, m->p.head_dim, m->p.rope_theta);

    for (int i = 0; i < m->n_tensors; i++)
        lattice__model_init_tensor(m, &m->tensors[i], m->p.seed);
    *out = m;
    return LATTICE_OK;
oom:
    lattice_model_destroy(m);
    return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY, "%s: out of memory", fn);
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
    lattice_model_params p;
    TRY(lattice__model_adopt_params(&p, params, "lattice_model_create", NULL));
    TRY(lattice__model_check_block_norm(&p, norm, "lattice_model_create"));
    return model_new(&p, norm_spec(norm), backend, "lattice_model_create", out);
}

static void model_free(lattice_model *m)
{
    free(m->params);
    free(m->grads);
    free(m->acts_base);
    free(m->trainable_layer);
    free(m->layers);
    free(m->acts);
    free(m->hs);
    free(m->tensors);
    free(m->ref_pending);
    lattice__model_split_free(&m->split);
    free(m);
}

void lattice_model_destroy(lattice_model *m)
{
    if (m && lattice__destroy_now(&m->borrow, "lattice_model_destroy", "model"))
        model_free(m);
}

void lattice__model_unborrow(lattice_model *m)
{
    if (m && lattice__unborrow(&m->borrow))
        model_free(m);
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
    return lattice__copy_out(LATTICE__ERRBUF(m), "lattice_model_get_params", out, &p, sizeof(p),
                             sizeof(p));
}

lattice_norm_placement lattice_model_get_placement(const lattice_model *m)
{
    return m ? m->norm.placement : LATTICE_NORM_PLACEMENT_PRE;
}

static void zero_grad(lattice_model *m, const tensor_entry *t)
{
    memset(lattice__grad_of(m, t->data), 0, sizeof(float) * (size_t)(t->rows * t->cols));
}

static lattice_status model_set_active_layers(lattice_model *m, int n_active)
{
    if (n_active < 1 || n_active > m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "active layers %d not in 1..%d", n_active,
                    m->p.n_layers);
    const int was = m->n_active;
    m->n_active = n_active;
    m->batch = m->seq = 0; /* the stored activations no longer match */
    /* a layer made active was in no backward since: its gradient is zero, not
     * the one an older pass left (lattice_optim_step reads it) */
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        if (t->group == LATTICE_MODEL_GROUP_LAYER && t->layer >= was && t->layer < n_active)
            zero_grad(m, t);
    }
    return LATTICE_OK;
}

int lattice_model_get_active_layers(const lattice_model *m) { return m ? m->n_active : 0; }

static lattice_status model_init_layer(lattice_model *m, int layer, uint64_t seed)
{
    if (layer < 0 || layer >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layer %d not in 0..%d", layer,
                    m->p.n_layers - 1);
    for (int i = 0; i < m->n_tensors; i++)
        if (m->tensors[i].group == LATTICE_MODEL_GROUP_LAYER && m->tensors[i].layer == layer)
            lattice__model_init_tensor(m, &m->tensors[i], seed);
    m->batch = m->seq = 0; /* the stored activations no longer match the weights */
    return LATTICE_OK;
}

/* A layer tensor's role: its name after "model.layers.N." (the whole name if
 * it has no such prefix). */
static const char *layer_role(const tensor_entry *t)
{
    static const char prefix[] = "model.layers.";
    if (strncmp(t->name, prefix, sizeof prefix - 1) != 0)
        return t->name;
    const char *dot = strchr(t->name + sizeof prefix - 1, '.');
    return dot ? dot + 1 : t->name;
}

/* Layer layer's trainable tensor of that role, or NULL. */
static const tensor_entry *layer_tensor(const lattice_model *m, int layer, const char *role)
{
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        if (t->group == LATTICE_MODEL_GROUP_LAYER && t->layer == layer &&
            strcmp(layer_role(t), role) == 0)
            return t;
    }
    return NULL;
}

static lattice_status model_copy_layer(lattice_model *m, int dst, int src)
{
    if (dst < 0 || src < 0 || dst >= m->p.n_layers || src >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layers %d <- %d not in 0..%d", dst, src,
                    m->p.n_layers - 1);
    if (dst == src)
        return LATTICE_OK;
    /* Tensor by tensor, matched by role (the name after "model.layers.N."):
     * layers differ in what they hold (a block-entry norm, a running RMS). A
     * statistic describes the stream its layer reads, not the layer's
     * weights: it stays. A role only one of the two layers has is left alone.
     * Every shape is checked before anything is written. */
    for (int pass = 0; pass < 2; pass++)
        for (int i = 0; i < m->n_tensors; i++) {
            const tensor_entry *to = &m->tensors[i];
            if (to->group != LATTICE_MODEL_GROUP_LAYER || to->layer != dst)
                continue;
            const tensor_entry *from = layer_tensor(m, src, layer_role(to));
            if (!from)
                continue;
            if (pass == 0 && (from->rows != to->rows || from->cols != to->cols))
                return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                            "layers %d <- %d: tensor '%s' is [%lld, %lld] and '%s' [%lld, %lld]",
                            dst, src, to->name, (long long)to->rows, (long long)to->cols,
                            from->name, (long long)from->rows, (long long)from->cols);
            if (pass == 1)
                memcpy(to->data, from->data, sizeof(float) * (size_t)(from->rows * from->cols));
        }
    m->batch = m->seq = 0; /* the stored activations no longer match the weights */
    return LATTICE_OK;
}

static lattice_status model_zero_layer_outputs(lattice_model *m, int layer)
{
    if (layer < 0 || layer >= m->p.n_layers)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "layer %d not in 0..%d", layer,
                    m->p.n_layers - 1);
    const lattice_model_params *p = &m->p;
    memset(m->layers[layer].wo, 0, sizeof(float) * p->d_model * p->n_heads * p->head_dim);
    memset(m->layers[layer].wd, 0, sizeof(float) * p->d_model * p->d_ff);
    m->batch = m->seq = 0; /* the stored activations no longer match the weights */
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
    case LATTICE_MODEL_GROUP_STATISTIC: return NULL; /* never trainable */
    }
    return NULL;
}

static lattice_status model_set_trainable(lattice_model *m, lattice_model_group group, int layer,
                                          int trainable)
{
    if (group == LATTICE_MODEL_GROUP_STATISTIC)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "group %d (statistic) is never trainable",
                    (int)group);
    int *f = trainable_flag(m, group, layer);
    if (!f)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "no parameter group %d (layer %d)", (int)group,
                    layer);
    const int was = *f;
    *f = trainable != 0;
    /* a group made trainable was left out of every backward since it was
     * frozen: its gradient is zero, not the one an older pass left */
    for (int i = 0; i < m->n_tensors && !was && *f; i++)
        if (trainable_flag(m, m->tensors[i].group, m->tensors[i].layer) == f)
            zero_grad(m, &m->tensors[i]);
    return LATTICE_OK;
}

lattice_status lattice_model_get_trainable(const lattice_model *m, lattice_model_group group, int layer,
                                           int *trainable)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_get_trainable", 2,
                      (const void *)m, "model", (const void *)trainable, "trainable") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (group == LATTICE_MODEL_GROUP_STATISTIC && layer >= 0 && layer < m->p.n_layers) {
        *trainable = 0; /* a statistic is never trained */
        return LATTICE_OK;
    }
    int *f = trainable_flag((lattice_model *)m, group, layer);
    if (!f)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_get_trainable: no group %d, layer %d", (int)group, layer);
    *trainable = *f;
    return LATTICE_OK;
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
    case LATTICE_MODEL_GROUP_STATISTIC: return 0;
    }
    return 0;
}

static lattice_status model_set_skip(lattice_model *m, int first, int count)
{
    if (count < 0 || first < 0 || (count > 0 && first + (long)count > m->p.n_layers))
        /* the end in long: first + count overflows int for the ranges refused here */
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "skip range [%d, %ld) outside 0..%d", first,
                    (long)first + count, m->p.n_layers);
    m->skip_first = count ? first : 0;
    m->skip_count = count;
    m->batch = m->seq = 0;
    return LATTICE_OK;
}

/* ---- a model of larger capacity ------------------------------------------ */

/* Model m's tensor of that name, or NULL. */
static const tensor_entry *tensor_named(const lattice_model *m, const char *name)
{
    for (int i = 0; i < m->n_tensors; i++)
        if (strcmp(m->tensors[i].name, name) == 0)
            return &m->tensors[i];
    return NULL;
}

static lattice_status model_create_grown(const lattice_model *s, int n_layers, int max_batch,
                                         int max_seq, lattice_backend *backend,
                                         lattice_model **out)
{
    static const char fn[] = "lattice_model_create_grown";
    char *err = LATTICE__ERRBUF(s);
    if (n_layers < s->p.n_layers)
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: n_layers %d is below the model's %d layers (a grown model "
            "holds every layer of the model it grows)", fn, n_layers, s->p.n_layers);
    if (max_batch < 0 || max_seq < 0)
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: max_batch %d, max_seq %d: each is positive, or 0 to keep "
            "the model's (%d, %d)", fn, max_batch, max_seq, s->p.max_batch, s->p.max_seq);
    /* Everything the small model was made with, its seed too: the new layers
     * are drawn as lattice_model_create draws them at this capacity (each
     * tensor's stream depends on the seed and the tensor alone). */
    lattice_model_params p = s->p;
    p.n_layers = n_layers;
    p.n_active_layers = s->n_active;
    if (max_batch)
        p.max_batch = max_batch;
    if (max_seq)
        p.max_seq = max_seq;
    lattice_model_params checked;
    TRY(lattice__model_adopt_params(&checked, &p, fn, err));
    lattice_model *m = NULL;
    lattice_status st = model_new(&checked, s->norm, backend ? backend : s->be, fn, &m);
    if (st != LATTICE_OK) {
        char why[LATTICE_ERRMSG_MAX];
        snprintf(why, sizeof why, "%s", lattice_last_error());
        return lattice__set_error(err, st, "%s", why);
    }
    /* Layers 0 .. n_layers - 1 of the small model hold in the grown one the
     * tensors they held (which a layer holds depends on the params and its
     * index, not on the capacity), as do the embedding, boundary norm and
     * head: every tensor is copied by name, statistics included. */
    for (int i = 0; i < s->n_tensors; i++) {
        const tensor_entry *from = &s->tensors[i];
        const tensor_entry *to = tensor_named(m, from->name);
        if (!to || to->rows != from->rows || to->cols != from->cols) {
            lattice_model_destroy(m);
            return lattice__set_error(err, LATTICE_ERR_INVALID_CONFIG,
                "%s: the grown model has no tensor '%s' of the model's shape [%lld, %lld]", fn,
                from->name, (long long)from->rows, (long long)from->cols);
        }
        memcpy(to->data, from->data, sizeof(float) * (size_t)(from->rows * from->cols));
    }
    m->trainable_embedding = s->trainable_embedding;
    m->trainable_boundary = s->trainable_boundary;
    m->trainable_head = s->trainable_head;
    memcpy(m->trainable_layer, s->trainable_layer, sizeof(int) * (size_t)s->p.n_layers);
    m->skip_first = s->skip_first;
    m->skip_count = s->skip_count;
    *out = m;
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

lattice_status lattice_model_get_forward_shape(const lattice_model *m, int *batch, int *seq)
{
    if (lattice__need(LATTICE__ERRBUF(m), "lattice_model_get_forward_shape", 3, (const void *)m,
                      "model", (const void *)batch, "batch", (const void *)seq,
                      "seq") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *batch = m->batch;
    *seq = m->batch ? m->seq : 0;
    if (!m->batch)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_STATE,
            "lattice_model_get_forward_shape: the model holds no forward's activations (none "
            "ran, or a change of the active layers or of a layer's weights, a skip range, a "
            "load or a failed pass dropped them)");
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
    const tensor_entry *t = tensor_named(m, name);
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_NOT_FOUND,
                                  "lattice_model_find_tensor: no tensor named '%s'", name);
    fill_info(m, t, out);
    return LATTICE_OK;
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
        active += !lattice__model_skipped(m, i);
    total += active * (proj + attn);
    if (!with_backward)
        return total;
    /* Backward: input gradients plus weight gradients of trainable layers
     * (the attention core's four GEMMs count twice its forward two). */
    double bwd = head * (1 + lattice__model_head_trains(m));
    for (int i = 0; i < m->n_active; i++)
        if (!lattice__model_skipped(m, i))
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

/* ---- the public calls, each inside the model's busy section (MODEL_CALL) ---- */

lattice_status lattice_model_set_active_layers(lattice_model *m, int n_active)
{
    MODEL_CALL(m, "lattice_model_set_active_layers", model_set_active_layers(m, n_active));
}

lattice_status lattice_model_init_layer(lattice_model *m, int layer, uint64_t seed)
{
    MODEL_CALL(m, "lattice_model_init_layer", model_init_layer(m, layer, seed));
}

lattice_status lattice_model_copy_layer(lattice_model *m, int dst, int src)
{
    MODEL_CALL(m, "lattice_model_copy_layer", model_copy_layer(m, dst, src));
}

lattice_status lattice_model_zero_layer_outputs(lattice_model *m, int layer)
{
    MODEL_CALL(m, "lattice_model_zero_layer_outputs", model_zero_layer_outputs(m, layer));
}

lattice_status lattice_model_set_trainable(lattice_model *m, lattice_model_group group, int layer,
                                           int trainable)
{
    MODEL_CALL(m, "lattice_model_set_trainable", model_set_trainable(m, group, layer, trainable));
}

lattice_status lattice_model_set_skip(lattice_model *m, int first, int count)
{
    MODEL_CALL(m, "lattice_model_set_skip", model_set_skip(m, first, count));
}

lattice_status lattice_model_create_grown(const lattice_model *small, int n_layers, int max_batch,
                                          int max_seq, lattice_backend *backend,
                                          lattice_model **out)
{
    if (!out)
        return lattice__set_error(LATTICE__ERRBUF(small), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_create_grown: invalid argument: out is NULL");
    *out = NULL;
    if (lattice__need(NULL, "lattice_model_create_grown", 1, (const void *)small, "small") !=
        LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    LATTICE__INSIDE(small, "lattice_model_create_grown", "model",
                    model_create_grown(small, n_layers, max_batch, max_seq, backend, out));
}

/* The architecture (the description's rows, model_desc.c), and with state the run and
 * the weights. max_batch and max_seq only size the arenas: a rank may hold another share.
 * The seed made the weights: said beside them, not compared (loaded weights make it moot). */
void lattice__model_setup(const lattice_model *m, int with_state, lattice__setup *s)
{
    lattice__model_setup_desc(m, s);
    if (!with_state)
        return;
    const lattice__model_run run = lattice__model_get_run(m);
    lattice__fields_setup(&lattice__model_run_fields, &run, "", s);
    for (int i = 0; i < m->p.n_layers; i++)
        SETUP_INT(s, m->trainable_layer[i], "layer %d trainable", i);
    SETUP_HASH(s, lattice__model_hash(m, m->params, LATTICE__HASH_START), "weights_hash");
    if (!s->failed) {
        lattice__setup_field *f = &s->f[s->n - 1];
        f->has_note = 1;
        snprintf(f->note_name, sizeof(f->note_name), "seed");
        f->note = (int64_t)m->p.seed;
    }
}

void lattice__model_profile(lattice_model *m, int on)
{
    memset(&m->prof, 0, sizeof(m->prof));
    m->prof.on = on;
}

const lattice_prof *lattice__model_profile_get(const lattice_model *m) { return &m->prof; }

lattice_busy *lattice__model_busy(lattice_model *m) { return m ? &m->busy : NULL; }

lattice_status lattice__model_last_pass(lattice_model *m, lattice__model_pass *out)
{
    if (!m->batch)
        return LATTICE_ERR_STATE;
    out->rows = (int64_t)m->batch * m->seq;
    out->vocab = m->p.vocab_size;
    out->threads = m->be->n_threads;
    out->logits = m->logits;
    out->dlogits = m->dlogits;
    return LATTICE_OK;
}

lattice_status lattice__model_loss_written(lattice_model *m, lattice_status st)
{
    if (st == LATTICE_OK || st == LATTICE_ERR_NON_FINITE)
        __atomic_store_n(&m->has_loss, 1, __ATOMIC_RELAXED);
    return st;
}

lattice_status lattice__model_borrow(lattice_model *m, const char *fn)
{
    return lattice__borrow(&m->borrow, fn, "model");
}

const lattice_model_params *lattice__model_params(const lattice_model *m) { return &m->p; }

const struct lattice_backend *lattice__model_backend(const lattice_model *m) { return m->be; }

lattice_prof *lattice__model_prof(lattice_model *m) { return &m->prof; }

size_t lattice__model_arena_floats(const lattice_model *m) { return m->n_params; }

void lattice__model_tensor_at(const lattice_model *m, int i, lattice__model_tensor *out)
{
    const tensor_entry *t = &m->tensors[i];
    out->name = t->name;
    out->data = t->data;
    out->grad = lattice__grad_of(m, t->data);
    out->offset = (size_t)(t->data - m->params);
    out->rows = t->rows;
    out->cols = t->cols;
    out->ndim = t->ndim;
    out->updatable = lattice__tensor_updatable(m, t);
}

#define RUN_FLAG(f) {#f, LATTICE__F_FLAG, offsetof(lattice__model_run, f), 1, 1, 0}
static const lattice__field run_fields[] = {
    {"n_active", LATTICE__F_INT, offsetof(lattice__model_run, n_active), 1, 1, INT32_MAX},
    RUN_FLAG(trainable_embedding), RUN_FLAG(trainable_boundary), RUN_FLAG(trainable_head)};
#undef RUN_FLAG
const lattice__fields lattice__model_run_fields = {run_fields, 4};

lattice__model_run lattice__model_get_run(const lattice_model *m)
{
    return (lattice__model_run){m->n_active, m->trainable_embedding, m->trainable_boundary,
                                m->trainable_head, m->trainable_layer};
}

void lattice__model_set_run(lattice_model *m, const lattice__model_run *r)
{
    m->n_active = r->n_active;
    m->trainable_embedding = r->trainable_embedding != 0;
    m->trainable_boundary = r->trainable_boundary != 0;
    m->trainable_head = r->trainable_head != 0;
    for (int i = 0; i < m->p.n_layers; i++)
        m->trainable_layer[i] = r->trainable_layer[i] != 0;
    m->batch = m->seq = 0; /* the stored activations no longer match */
    /* nor does any backward's gradient belong to the state restored (a
     * checkpoint's, or the one before an undone step): an optimizer step
     * before the next backward moves nothing by it */
    for (int i = 0; i < m->n_tensors; i++)
        zero_grad(m, &m->tensors[i]);
}

int lattice__model_skips(const lattice_model *m, int layer) { return lattice__model_skipped(m, layer); }

lattice_status lattice__model_layer_attention(const lattice_model *m, int layer,
                                              lattice__model_attention *out)
{
    if (!m->batch || layer < 0 || layer >= m->n_active || lattice__model_skipped(m, layer))
        return LATTICE_ERR_STATE;
    const layer_acts *a = &m->acts[layer];
    out->p = a->p;
    out->q = a->q;
    out->k = a->k;
    out->v = a->v;
    return LATTICE_OK;
}

uint64_t lattice__model_identity(const lattice_model *m, uint64_t h)
{
    h = lattice__model_hash(m, m->params, h);
    return lattice__hash(h, &m->n_active, sizeof(m->n_active));
}

lattice_status lattice__model_take_ends(lattice_model *s, const lattice_model *m, char *why,
                                        size_t n)
{
    if (m->p.vocab_size != s->p.vocab_size || m->p.d_model != s->p.d_model) {
        snprintf(why, n, "teacher (vocab %d, d_model %d) and student (vocab %d, d_model %d) differ",
                 m->p.vocab_size, m->p.d_model, s->p.vocab_size, s->p.d_model);
        return LATTICE_ERR_INVALID_CONFIG;
    }
    if (m->norm.placement == LATTICE_NORM_PLACEMENT_POST) {
        snprintf(why, n, "a post-norm teacher has no final norm to copy");
        return LATTICE_ERR_INVALID_CONFIG;
    }
    if (m->norm.kind != s->norm.kind) {
        snprintf(why, n, "teacher and student norm kinds differ");
        return LATTICE_ERR_INVALID_CONFIG;
    }
    const size_t d = sizeof(float) * (size_t)s->p.d_model, vd = d * (size_t)s->p.vocab_size;
    memcpy(s->wte, m->wte, vd);
    if (s->whead != s->wte)
        memcpy(s->whead, m->whead, vd);
    memcpy(s->bnorm.w, m->bnorm.w, d);
    if (s->bnorm.b)
        memcpy(s->bnorm.b, m->bnorm.b, d);
    s->trainable_embedding = 0;
    return LATTICE_OK;
}
