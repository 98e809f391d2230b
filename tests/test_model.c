/* The whole model: gradients under every placement against central
 * differences, learning, determinism, growth, frozen groups, block skipping,
 * and bad input. */
#include "testutil.h"

#include "profile.h" /* private: the profile says how a pass was split */

#include <limits.h>

#include "model_grads.h"

START_TEST(test_model_grad_placements)
{
    /* _i: placement (pre, post, peri) x norm kind (RMS, Layer); then tied
     * embeddings, and DeepNorm-style scaled post-norm. */
    lattice_model_params p;
    tiny_params(&p);
    lattice_norm_placement pl = (lattice_norm_placement)(_i % 3);
    lattice_norm_kind kind = (lattice_norm_kind)((_i / 3) % 2);
    float alpha = 1.0f;
    if (_i >= 6) {
        p.tie_embeddings = 1;
        p.qk_norm = _i != 6;
        alpha = pl == LATTICE_NORM_PLACEMENT_POST ? 1.7f : 1.0f;
    }
    tiny t = tiny_open("ref", pl, kind, alpha, &p);
    check_model_grads(t.m);
    tiny_close(&t);
}
END_TEST

/* head_dim 8 takes the fused attention path on the built-in backends (4 is
 * too narrow for it): the whole model's gradients through it, pre and post. */
START_TEST(test_model_grad_fused_attention)
{
    lattice_model_params p;
    tiny_params(&p);
    p.head_dim = 8;
    tiny t = tiny_open(tu_backend_name(_i / 2), _i % 2 ? LATTICE_NORM_PLACEMENT_POST : LATTICE_NORM_PLACEMENT_PRE,
                       LATTICE_NORM_KIND_RMS, 1.0f, &p);
    check_model_grads(t.m);
    tiny_close(&t);
}
END_TEST

START_TEST(test_model_grad_frozen_and_skip)
{
    /* Frozen embedding and first layer (the paper's student freezes the
     * embedding; the freeze arm freezes earlier blocks), a skipped layer,
     * and a partly active model: the rest still gets exact gradients. */
    lattice_model_params p;
    tiny_params(&p);
    p.n_layers = 4;
    p.n_active_layers = 3;
    tiny t = tiny_open("ref", _i == 0 ? LATTICE_NORM_PLACEMENT_PRE : LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS,
                       1.0f, &p);
    ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_EMBEDDING, -1, 0), LATTICE_OK);
    ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_LAYER, 0, 0), LATTICE_OK);
    check_model_grads(t.m);
    ck_assert_int_eq(lattice_model_set_skip(t.m, 1, 1), LATTICE_OK);
    check_model_grads(t.m);
    tiny_close(&t);
}
END_TEST

START_TEST(test_model_skip_and_hidden)
{
    lattice_model_params p;
    tiny_params(&p);
    p.n_layers = 3;
    p.n_active_layers = 3;
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    const float *h;
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 0, &h), LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_model_set_skip(t.m, 1, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    const float *h1, *h2;
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &h1), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 2, &h2), LATTICE_OK);
    /* A skipped layer passes its input through exactly. */
    ck_assert_int_eq(memcmp(h1, h2, sizeof(float) * 10 * 8), 0);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 4, &h), LATTICE_ERR_INVALID_ARGUMENT);
    /* Boundary 0 is the embedding under pre-norm. */
    lattice_model_tensor_info emb;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "model.embed_tokens.weight", &emb), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 0, &h), LATTICE_OK);
    ck_assert_int_eq(memcmp(h + 8, emb.data + grad_tokens[1] * 8, sizeof(float) * 8), 0);
    tiny_close(&t);
}
END_TEST

/* ---- learning ------------------------------------------------------------------ */

static const char *text =
    "It is a truth universally acknowledged, that a single man in possession of a good "
    "fortune, must be in want of a wife. However little known the feelings or views of such "
    "a man may be on his first entering a neighbourhood, this truth is so well fixed.";

/* A byte-level model that learns the text above by hand: forward, loss,
 * backward and an optimizer step on four fixed rows of it. The rig builds
 * the objects (its data and schedule go unused: no trainer is bound). */
typedef struct trainer {
    rig r;
    int32_t tok[4 * 32], tgt[4 * 32];
} trainer;

static void trainer_open(trainer *tr, const char *backend, lattice_norm_placement pl, int layers,
                         int active, uint64_t seed)
{
    rig_options o;
    rig_options_init(&o);
    o.backend = backend;
    o.threads = 2;
    o.placement = pl;
    o.norm_eps = 1e-5f;
    lattice_model_params *p = &o.model;
    lattice_model_params_init(p);
    p->vocab_size = 256;
    p->d_model = 32;
    p->n_layers = layers;
    p->n_active_layers = active;
    p->n_heads = 2;
    p->n_kv_heads = 2;
    p->head_dim = 16;
    p->d_ff = 64;
    p->max_batch = 4;
    p->max_seq = 32;
    p->seed = seed;
    o.optim.lr = 3e-3f;
    o.optim.min_lr = 3e-4f;
    o.optim.warmup_steps = 10;
    o.optim.total_steps = 200;
    o.optim.clip_norm = 1.0f;
    o.defer_trainer = 1;
    tu_rig_open(&tr->r, &o);
    for (int b = 0; b < 4; b++)
        for (int s = 0; s < 32; s++) {
            tr->tok[b * 32 + s] = (unsigned char)text[b * 40 + s];
            tr->tgt[b * 32 + s] = (unsigned char)text[b * 40 + s + 1];
        }
}

static float trainer_step(trainer *tr)
{
    float loss, gn;
    ck_assert_int_eq(lattice_model_forward(tr->r.model, tr->tok, 4, 32), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(tr->r.model, tr->tgt, NULL, &loss, NULL),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(tr->r.model), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_step(tr->r.optim, &gn), LATTICE_OK);
    return loss;
}

static void trainer_close(trainer *tr) { rig_close(&tr->r); }

static const char *fast_backend(void) { return lattice_backend_has_blis() ? "blis" : "ref"; }

START_TEST(test_model_overfits)
{
    trainer tr;
    trainer_open(&tr, fast_backend(), (lattice_norm_placement)_i, 2, 2, 1);
    float first = trainer_step(&tr), last = first;
    for (int s = 1; s < 150; s++)
        last = trainer_step(&tr);
    ck_assert_msg(first > 5.0f && last < 0.25f * first, "%s: loss %.3f -> %.3f",
                  lattice_norm_placement_name((lattice_norm_placement)_i), first, last);
    trainer_close(&tr);
}
END_TEST

START_TEST(test_model_deterministic)
{
    float a[6], b[6], c[6];
    trainer tr;
    for (int run = 0; run < 3; run++) {
        trainer_open(&tr, fast_backend(), LATTICE_NORM_PLACEMENT_POST, 2, 2, run == 2 ? 2 : 1);
        float *out = run == 0 ? a : run == 1 ? b : c;
        for (int s = 0; s < 6; s++)
            out[s] = trainer_step(&tr);
        trainer_close(&tr);
    }
    ck_assert_int_eq(memcmp(a, b, sizeof a), 0); /* bit-identical */
    ck_assert_int_ne(memcmp(a, c, sizeof a), 0); /* another seed differs */
}
END_TEST

static float *snapshot_layer(lattice_model *m, int layer, long *n_out)
{
    long n = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer == layer)
            n += (long)(ti.shape[0] * ti.shape[1]);
    }
    float *buf = malloc(sizeof(float) * n), *p = buf;
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer == layer) {
            memcpy(p, ti.data, sizeof(float) * ti.shape[0] * ti.shape[1]);
            p += ti.shape[0] * ti.shape[1];
        }
    }
    *n_out = n;
    return buf;
}

START_TEST(test_model_growth)
{
    trainer tr;
    trainer_open(&tr, fast_backend(), (lattice_norm_placement)_i, 4, 2, 3);
    long n;
    float *l3_init = snapshot_layer(tr.r.model, 3, &n);
    for (int s = 0; s < 20; s++)
        trainer_step(&tr);
    float *l3_before = snapshot_layer(tr.r.model, 3, &n);
    ck_assert_int_eq(memcmp(l3_init, l3_before, sizeof(float) * n), 0); /* inactive: untouched */
    float *l0_before = snapshot_layer(tr.r.model, 0, &n);
    float before = trainer_step(&tr);
    float *l0_mid = snapshot_layer(tr.r.model, 0, &n);
    ck_assert_int_ne(memcmp(l0_before, l0_mid, sizeof(float) * n), 0);
    ck_assert_int_eq(lattice_model_set_active_layers(tr.r.model, 4), LATTICE_OK);
    float *l0_grown = snapshot_layer(tr.r.model, 0, &n);
    ck_assert_int_eq(memcmp(l0_mid, l0_grown, sizeof(float) * n), 0); /* growing keeps weights */
    lattice_optim_reset(tr.r.optim);
    float after = 0.0f;
    for (int s = 0; s < 40; s++)
        after = trainer_step(&tr);
    float *l3_after = snapshot_layer(tr.r.model, 3, &n);
    ck_assert_int_ne(memcmp(l3_before, l3_after, sizeof(float) * n), 0); /* new layers train */
    ck_assert_msg(after < before, "loss after growth %.3f not below %.3f", after, before);
    free(l3_init);
    free(l3_before);
    free(l0_before);
    free(l0_mid);
    free(l0_grown);
    free(l3_after);
    trainer_close(&tr);
}
END_TEST

START_TEST(test_model_param_count_matches_across_placements)
{
    lattice_model_params p;
    tiny_params(&p);
    tiny a = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    tiny b = tiny_open("ref", LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    ck_assert_int_eq(lattice_model_get_n_params(a.m), lattice_model_get_n_params(b.m));
    /* Same seed: every weight the two share is identical (paired seeds). */
    lattice_model_tensor_info x, y;
    ck_assert_int_eq(lattice_model_find_tensor(a.m, "model.layers.1.mlp.down_proj.weight", &x),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_find_tensor(b.m, "model.layers.1.mlp.down_proj.weight", &y),
                     LATTICE_OK);
    ck_assert_int_eq(memcmp(x.data, y.data, sizeof(float) * x.shape[0] * x.shape[1]), 0);
    ck_assert_int_eq(lattice_model_find_tensor(a.m, "model.norm.weight", &x), LATTICE_OK);
    ck_assert_int_eq(lattice_model_find_tensor(b.m, "model.entry_norm.weight", &y), LATTICE_OK);
    ck_assert_int_eq(lattice_model_find_tensor(b.m, "model.norm.weight", &y), LATTICE_ERR_NOT_FOUND);
    /* 11*8 embedding + 11*8 head + 8 boundary + per layer:
     * q 8*8, k 4*8, v 4*8, o 8*8, q/k norm 4+4, gate/up 2*12*8, down 8*12, two norms 2*8 */
    int64_t per_layer = 64 + 32 + 32 + 64 + 8 + 192 + 96 + 16;
    ck_assert_int_eq(lattice_model_get_n_params(a.m), 88 + 88 + 8 + 2 * per_layer);
    /* the estimate without a model agrees with the model, for every placement and kind */
    for (int pl = 0; pl < 3; pl++)
        for (int kind = 0; kind < 2; kind++)
            for (int tied = 0; tied < 2; tied++) {
                p.tie_embeddings = tied;
                tiny c = tiny_open("ref", (lattice_norm_placement)pl, (lattice_norm_kind)kind,
                                   1.0f, &p);
                lattice_norm *norm; /* the same norm as c's, for the estimate */
                ck_assert_int_eq(rig_norm_create((lattice_norm_placement)pl,
                                                 (lattice_norm_kind)kind, 1e-5f, 1.0f, &norm),
                                 LATTICE_OK);
                int64_t n = -1;
                size_t bytes = 0;
                ck_assert_int_eq(lattice_model_estimate(&p, norm, &n, &bytes), LATTICE_OK);
                ck_assert_int_eq(n, lattice_model_get_n_params(c.m));
                ck_assert_uint_eq(bytes, lattice_model_get_arena_bytes(c.m));
                lattice_norm_destroy(norm);
                tiny_close(&c);
            }
    tiny_close(&a);
    tiny_close(&b);
}
END_TEST

/* ---- bad input ------------------------------------------------------------------ */

static lattice_status try_create(void (*edit)(lattice_model_params *))
{
    lattice_model_params p;
    tiny_params(&p);
    edit(&p);
    lattice_backend *be = tu_backend("ref", 1);
    lattice_norm *n;
    lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n);
    lattice_model *m = (lattice_model *)&p; /* must be overwritten with NULL */
    lattice_status st = lattice_model_create(&p, n, be, &m);
    char why[LATTICE_ERRMSG_SIZE];
    ck_assert_int_eq(lattice_model_params_check(&p, why), st); /* same verdict, with a reason */
    if (st != LATTICE_OK) {
        ck_assert_ptr_null(m);
        ck_assert_msg(why[0] != 0, "no reason given for status %d", st);
    }
    lattice_model_destroy(m);
    lattice_norm_destroy(n);
    lattice_backend_destroy(be);
    return st;
}

static void zero_layers(lattice_model_params *p) { p->n_layers = 0; }
static void zero_head_dim(lattice_model_params *p) { p->head_dim = 0; }
static void odd_head_dim(lattice_model_params *p) { p->head_dim = 3; }
static void kv_not_dividing(lattice_model_params *p) { p->n_heads = 3; p->n_kv_heads = 2; }
static void too_many_active(lattice_model_params *p) { p->n_active_layers = 3; }
static void zero_vocab(lattice_model_params *p) { p->vocab_size = 0; }
static void nan_theta(lattice_model_params *p) { p->rope_theta = NAN; }
static void huge(lattice_model_params *p) { p->max_seq = 1 << 20; p->max_batch = 1 << 20; }
static void uninitialised(lattice_model_params *p) { p->size = 0; }
/* weights past SIZE_MAX bytes with one position of activations (their sizing
 * alone let this through, and the arena's size wrapped) */
static void huge_weights(lattice_model_params *p)
{
    p->d_model = p->d_ff = 1 << 20;
    p->n_heads = p->n_kv_heads = 4096;
    p->head_dim = 65536;
    p->n_layers = p->n_active_layers = 4096;
    p->max_batch = p->max_seq = 1;
}

START_TEST(test_model_bad_configs)
{
    ck_assert_int_eq(try_create(zero_layers), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(zero_head_dim), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(odd_head_dim), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(kv_not_dividing), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(too_many_active), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(zero_vocab), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(nan_theta), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(huge), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(try_create(huge_weights), LATTICE_ERR_INVALID_CONFIG);
    {   /* the same without a model: the check and the estimate refuse it */
        lattice_model_params p;
        lattice_model_params_init(&p);
        huge_weights(&p);
        p.n_active_layers = 1;
        char why[LATTICE_ERRMSG_SIZE] = "";
        ck_assert_int_eq(lattice_model_params_check(&p, why), LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_nonnull(strstr(why, "weights and activations"));
        lattice_norm *n;
        ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS,
                                             1e-6f, &n), LATTICE_OK);
        int64_t n_params = -1;
        size_t bytes = 1;
        ck_assert_int_eq(lattice_model_estimate(&p, n, &n_params, &bytes),
                         LATTICE_ERR_INVALID_CONFIG);
        lattice_norm_destroy(n);
    }
    ck_assert_int_eq(try_create(uninitialised), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_model_null_handles)
{
    lattice_model_params p;
    tiny_params(&p);
    lattice_backend *be = tu_backend("ref", 1);
    lattice_norm *n;
    lattice_model *m;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_model_create(NULL, n, be, &m), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_create(&p, NULL, be, &m), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_create(&p, n, NULL, &m), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_create(&p, n, be, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward(NULL, grad_tokens, 1, 1), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_backward(NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_set_active_layers(NULL, 1), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(lattice_model_get_logits(NULL));
    ck_assert_ptr_null(lattice_model_get_dlogits(NULL));
    ck_assert_int_eq(lattice_model_get_n_tensors(NULL), 0);
    ck_assert_str_ne(lattice_model_errmsg(NULL), "");
    lattice_model_destroy(NULL);
    lattice_norm_destroy(n);
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0.0f, &n),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(n);
    ck_assert_int_eq(lattice_norm_create((lattice_norm_placement)9, LATTICE_NORM_KIND_RMS, 1e-6f, &n),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n), LATTICE_OK);
    ck_assert_int_eq(lattice_norm_set_residual_scale(n, 2.0f), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_norm_destroy(n);
    lattice_backend_destroy(be);
}
END_TEST

START_TEST(test_model_bad_calls)
{
    lattice_model_params p;
    tiny_params(&p);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    float loss;
    int32_t bad[10];
    memcpy(bad, grad_tokens, sizeof bad);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL),
                     LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_ERR_STATE);
    bad[3] = 11; /* == vocab */
    ck_assert_int_eq(lattice_model_forward(t.m, bad, 2, 5), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "vocabulary"));
    bad[3] = -1;
    ck_assert_int_eq(lattice_model_forward(t.m, bad, 2, 5), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 1, 6), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "max_seq"));
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 3, 2), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 0, 2), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward(t.m, NULL, 1, 2), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    bad[3] = 50;
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, bad, NULL, &loss, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_set_active_layers(t.m, 0), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_set_active_layers(t.m, 3), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_LAYER, 2, 0),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_set_skip(t.m, 1, 2), LATTICE_ERR_INVALID_ARGUMENT);
    /* the range's end is past INT_MAX: said as it is (not wrapped, not UB) */
    ck_assert_int_eq(lattice_model_set_skip(t.m, INT_MAX, 1), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(lattice_model_errmsg(t.m), "skip range [2147483647, 2147483648) outside 0..2");
    ck_assert_int_eq(lattice_model_set_skip(t.m, 1, INT_MAX), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(lattice_model_errmsg(t.m), "skip range [1, 2147483648) outside 0..2");
    ck_assert_int_eq(lattice_model_init_layer(t.m, 2, 0), LATTICE_ERR_INVALID_ARGUMENT);
    /* A NaN weight gives a clear status from the loss, not garbage. */
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "lm_head.weight", &ti), LATTICE_OK);
    ti.data[0] = NAN;
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL),
                     LATTICE_ERR_NON_FINITE);
    tiny_close(&t);
}
END_TEST

/* ---- inference and evaluation without a trainer ---- */

/* The inference forward gives the training forward's logits and hidden states,
 * bit for bit, under every placement and backend. */
START_TEST(test_model_inference_logits)
{
    static const lattice_norm_placement pls[3] = {LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_PLACEMENT_POST,
                                                  LATTICE_NORM_PLACEMENT_PERI};
    lattice_model_params p;
    tiny_params(&p);
    tiny t = tiny_open(tu_backend_name(_i / 3), pls[_i % 3], LATTICE_NORM_KIND_RMS, 1.0f, &p);
    const size_t nz = 10 * 11, nh = 10 * 8;
    float *z = malloc(sizeof(float) * nz), *h = malloc(sizeof(float) * nh);
    const float *hs;
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    memcpy(z, lattice_model_get_logits(t.m), sizeof(float) * nz);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &hs), LATTICE_OK);
    memcpy(h, hs, sizeof(float) * nh);
    /* another batch in between, so equal buffers are not left-overs */
    ck_assert_int_eq(lattice_model_forward(t.m, grad_targets, 2, 5), LATTICE_OK);
    ck_assert_int_ne(memcmp(z, lattice_model_get_logits(t.m), sizeof(float) * nz), 0);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(memcmp(z, lattice_model_get_logits(t.m), sizeof(float) * nz), 0);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &hs), LATTICE_OK);
    ck_assert_int_eq(memcmp(h, hs, sizeof(float) * nh), 0);
    free(z);
    free(h);
    tiny_close(&t);
}
END_TEST

START_TEST(test_model_inference_refuses_backward)
{
    lattice_model_params p;
    tiny_params(&p);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    float loss;
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "the last forward was an inference forward"));
    /* a training forward lifts it */
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_OK);
    /* an inference forward between a training forward and its backward is caught */
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_targets, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_ERR_STATE);
    /* a training forward that fails its checks leaves the mark */
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 3, 5), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_ERR_STATE);
    /* and an inference forward that fails its checks changes nothing */
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 6),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_OK);
    tiny_close(&t);
}
END_TEST

/* The loss without a gradient: cross_entropy's loss and a double reference,
 * dlogits untouched. */
START_TEST(test_model_loss_no_gradient)
{
    lattice_model_params p;
    tiny_params(&p);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PERI, LATTICE_NORM_KIND_LAYER, 1.0f, &p);
    const double ref = model_loss(t.m); /* runs a forward */
    for (int masked = 0; masked < 2; masked++) {
        const uint8_t *mask = masked ? grad_mask : NULL;
        float loss;
        int64_t n_ce = -1, n = -1;
        ck_assert_int_eq(lattice_model_cross_entropy(t.m, grad_targets, mask, &loss, &n_ce),
                         LATTICE_OK);
        float *dz = lattice_model_get_dlogits(t.m);
        for (int i = 0; i < 110; i++)
            dz[i] = 7.0f;
        double ce = -1.0;
        ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, grad_targets, mask, &ce, &n), LATTICE_OK);
        for (int i = 0; i < 110; i++)
            ck_assert_msg(dz[i] == 7.0f, "dlogits[%d] written by the loss", i);
        ck_assert_int_eq(n, n_ce);
        ck_assert_int_eq(n, masked ? 9 : 10);
        ck_assert_double_eq_tol(ce, loss, 1e-6 * fabs(ce) + 1e-7);
        if (masked)
            ck_assert_double_eq_tol(ce, ref, 1e-5);
    }
    /* a masked position's target is not checked; a counted one is */
    int32_t bad[10];
    memcpy(bad, grad_targets, sizeof bad);
    bad[4] = 99;
    double ce;
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, bad, grad_mask, &ce, NULL), LATTICE_OK);
    ck_assert_double_eq_tol(ce, ref, 1e-5);
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, bad, NULL, &ce, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "vocabulary"));
    bad[4] = -1;
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, bad, NULL, &ce, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, NULL, NULL, &ce, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, grad_targets, NULL, NULL, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_cross_entropy_value(NULL, grad_targets, NULL, &ce, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    /* a NaN weight: a clear status */
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "lm_head.weight", &ti), LATTICE_OK);
    ti.data[0] = NAN;
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, grad_targets, NULL, &ce, NULL),
                     LATTICE_ERR_NON_FINITE);
    tiny_close(&t);
    /* before any forward */
    t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    ck_assert_int_eq(lattice_model_cross_entropy_value(t.m, grad_targets, NULL, &ce, NULL), LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_model_forward_inference(NULL, grad_tokens, 2, 5),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, NULL, 2, 5), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 3, 5),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "max_batch"));
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 0),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(lattice_model_get_logits(t.m));
    tiny_close(&t);
}
END_TEST

/* Documents of 2 .. 8 ids (0 .. 9) after boundary 10, drawn from a fixed seed. */
static int32_t *eval_ids(int64_t *n)
{
    int32_t *ids = malloc(sizeof(int32_t) * 60 * 9);
    tu_rng r = {5};
    int64_t k = 0;
    for (int d = 0; d < 60; d++) {
        ids[k++] = 10;
        int len = 2 + (int)((tu_uniform(&r) + 1.0) * 3.5);
        for (int j = 0; j < len; j++)
            ids[k++] = (int32_t)((tu_uniform(&r) + 1.0) * 5.0) % 10;
    }
    *n = k;
    return ids;
}

static lattice_data *eval_data(int batch_size, float val_fraction)
{
    int64_t n;
    int32_t *ids = eval_ids(&n);
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = 11;
    dp.boundary_id = 10;
    dp.batch_size = batch_size;
    dp.seq_len = 5;
    dp.val_fraction = val_fraction;
    lattice_data *d = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_data_create_memory(ids, n, &dp, &d, err) == LATTICE_OK, "%s", err);
    free(ids);
    return d;
}

/* The model's evaluation equals the trainer's on the same batches, all of
 * them or the first few. */
START_TEST(test_model_evaluate_matches_trainer)
{
    /* the rig's tiny run on eval_ids' documents, 3 steps a phase; trainers bound below */
    int64_t n_ids;
    int32_t *ids = eval_ids(&n_ids);
    rig_options o;
    rig_options_init(&o);
    o.threads = 2;
    o.norm_eps = 1e-5f;
    tiny_params(&o.model);
    o.data.vocab_size = 11;
    o.data.boundary_id = 10;
    o.data.batch_size = 2;
    o.data.seq_len = 5;
    o.data.val_fraction = 0.4f;
    o.ids = ids;
    o.n_ids = n_ids;
    o.steps_per_phase = 3;
    o.defer_trainer = 1;
    rig r;
    tu_rig_open(&r, &o);
    free(ids);
    lattice_model *m = r.model;
    lattice_data *d = r.data;
    const int64_t nb = lattice_data_get_n_val_batches(d);
    ck_assert_int_ge(nb, 3);
    /* more batches than the validation set has: the trainer refuses them (the
     * caller would believe it measured more than it did) */
    lattice_trainer_params over;
    lattice_trainer_params_init(&over);
    over.eval_batches = nb + 1;
    ck_assert_int_eq(rig_bind(&r, &over), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_null(r.trainer);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "exceeds the data's"));
    for (int limit = 0; limit < 3; limit++) {
        const int64_t max_batches = limit == 0 ? 0 : limit == 1 ? 2 : nb;
        lattice_trainer_params tp;
        lattice_trainer_params_init(&tp);
        tp.eval_batches = max_batches;
        tu_rig_bind(&r, &tp);
        double want = -1.0, got = -2.0;
        ck_assert_int_eq(lattice_trainer_evaluate(r.trainer, &want), LATTICE_OK);
        ck_assert_int_eq(lattice_model_evaluate(m, d, max_batches, &got), LATTICE_OK);
        ck_assert_double_eq(got, want); /* one evaluation loop: the same bits */
        ck_assert_double_gt(got, 1.0); /* ~ log 11 for a fresh model */
        lattice_trainer_destroy(r.trainer);
        r.trainer = NULL;
    }
    /* the first two batches by hand: forward, loss, weighted by counted tokens */
    double total = 0.0, got;
    int64_t count = 0;
    for (int64_t i = 0; i < 2; i++) {
        lattice_data_batch b;
        double ce;
        int64_t n;
        ck_assert_int_eq(lattice_data_get_val_batch(d, i, &b), LATTICE_OK);
        ck_assert_int_eq(lattice_model_forward(m, b.tokens, b.batch, b.seq), LATTICE_OK);
        ck_assert_int_eq(lattice_model_cross_entropy_value(m, b.targets, b.mask, &ce, &n), LATTICE_OK);
        ck_assert_int_eq(n, b.n_tokens);
        total += ce * (double)n;
        count += n;
    }
    ck_assert_int_eq(lattice_model_evaluate(m, d, 2, &got), LATTICE_OK);
    ck_assert_double_eq(got, total / (double)count);
    double one;
    ck_assert_int_eq(lattice_model_evaluate(m, d, 1, &one), LATTICE_OK);
    ck_assert_double_ne(one, got);
    /* evaluation leaves an inference forward behind */
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_ERR_STATE);
    rig_close(&r);
}
END_TEST

START_TEST(test_model_evaluate_bad_input)
{
    lattice_model_params p;
    tiny_params(&p);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    lattice_data *d = eval_data(2, 0.4f);
    double ce = 42.0;
    ck_assert_int_eq(lattice_model_evaluate(NULL, d, 0, &ce), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_evaluate(t.m, NULL, 0, &ce), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_evaluate(t.m, d, 0, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_evaluate(t.m, d, -1, &ce), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "max_batches"));
    lattice_data_destroy(d);
    /* batches wider than the model's max_batch */
    d = eval_data(3, 0.4f);
    ck_assert_int_eq(lattice_model_evaluate(t.m, d, 0, &ce), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "max_batch 2"));
    lattice_data_destroy(d);
    /* no validation split */
    d = eval_data(2, 0.0f);
    ck_assert_int_eq(lattice_model_evaluate(t.m, d, 0, &ce), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "validation"));
    ck_assert_double_eq(ce, 42.0);
    lattice_data_destroy(d);
    /* a failing batch is named */
    d = eval_data(2, 0.4f);
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "lm_head.weight", &ti), LATTICE_OK);
    ti.data[3] = INFINITY;
    ck_assert_int_eq(lattice_model_evaluate(t.m, d, 0, &ce), LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "validation batch 0: "));
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(t.m), "not finite"));
    lattice_data_destroy(d);
    tiny_close(&t);
}
END_TEST


/* ---- threads: the rows split against one thread and the ops split ---- */

typedef struct split_run {
    float *logits, *grads;
    long n_logits, n_grads;
    int rows_threads;
} split_run;

/* A model on a backend whose parallel mode is how ("auto", "ops", "rows"), one forward, loss and backward of
 * 3 sequences x 6; its logits, every gradient, and how the passes split. */
static split_run split_step(const char *backend, int threads, const char *how,
                            lattice_norm_placement pl)
{
    lattice_model_params p;
    tiny_params(&p);
    p.n_layers = 3;
    p.n_active_layers = 3;
    p.max_batch = 3;
    p.max_seq = 6;
    p.qk_norm = 1;
    tiny t = tiny_open(backend, pl, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    const lattice_backend_parallel mode = strcmp(how, "ops") == 0    ? LATTICE_BACKEND_PARALLEL_OPS
                                          : strcmp(how, "rows") == 0 ? LATTICE_BACKEND_PARALLEL_ROWS
                                                                     : LATTICE_BACKEND_PARALLEL_AUTO;
    ck_assert_int_eq(lattice_backend_set_parallel(t.be, mode), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_threads(t.be, threads), LATTICE_OK);
    ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_LAYER, 0, 0), LATTICE_OK);
    int32_t tok[18], tgt[18];
    for (int i = 0; i < 18; i++) {
        tok[i] = (i * 7 + 3) % 11;
        tgt[i] = (i * 5 + 1) % 11;
    }
    lattice__model_profile(t.m, LATTICE_PROF_WALL);
    float loss;
    ck_assert_int_eq(lattice_model_forward(t.m, tok, 3, 6), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(t.m, tgt, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(t.m), LATTICE_OK);
    split_run r;
    r.rows_threads = lattice__model_profile_get(t.m)->rows_threads;
    r.n_logits = 18 * 11;
    r.logits = malloc(sizeof(float) * r.n_logits);
    memcpy(r.logits, lattice_model_get_logits(t.m), sizeof(float) * r.n_logits);
    r.n_grads = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(t.m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t.m, i, &ti);
        r.n_grads += (long)(ti.shape[0] * ti.shape[1]);
    }
    r.grads = malloc(sizeof(float) * r.n_grads);
    long at = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(t.m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t.m, i, &ti);
        long n = (long)(ti.shape[0] * ti.shape[1]);
        int tr = 0;
        lattice_model_get_trainable(t.m, ti.group, ti.layer, &tr);
        for (long j = 0; j < n; j++) /* a frozen tensor's gradient is not defined */
            r.grads[at + j] = tr ? ti.grad[j] : 0.0f;
        at += n;
    }
    tiny_close(&t);
    return r;
}

static void split_close(split_run *r)
{
    free(r->logits);
    free(r->grads);
}

static void assert_close(const float *a, const float *b, long n, const char *what)
{
    for (long i = 0; i < n; i++)
        ck_assert_msg(fabsf(a[i] - b[i]) <= 1e-5f + 1e-4f * fabsf(b[i]), "%s[%ld]: %.9g vs %.9g",
                      what, i, (double)a[i], (double)b[i]);
}

START_TEST(test_model_rows_split)
{
    /* _i: placement x backend. 3 sequences over 2 threads (uneven blocks),
     * layer 0 frozen. */
    lattice_norm_placement pl = (lattice_norm_placement)(_i % 3);
    const char *be = tu_backend_name(_i / 3);
    split_run one = split_step(be, 1, "auto", pl);
    split_run rows = split_step(be, 2, "rows", pl);
    split_run again = split_step(be, 2, "rows", pl);
    split_run ops = split_step(be, 2, "ops", pl);
    split_run four = split_step(be, 4, "rows", pl);
    ck_assert_int_eq(one.rows_threads, 1);
    ck_assert_int_eq(rows.rows_threads, 2);
    ck_assert_int_eq(ops.rows_threads, 1);
    ck_assert_int_eq(four.rows_threads, 3); /* no more threads than sequences */
    assert_close(rows.logits, one.logits, one.n_logits, "rows logits");
    assert_close(rows.grads, one.grads, one.n_grads, "rows gradients");
    assert_close(four.grads, one.grads, one.n_grads, "rows x3 gradients");
    assert_close(ops.grads, one.grads, one.n_grads, "ops gradients");
    /* reruns at one thread count: the same bits */
    ck_assert_int_eq(memcmp(rows.grads, again.grads, sizeof(float) * rows.n_grads), 0);
    ck_assert_int_eq(memcmp(rows.logits, again.logits, sizeof(float) * rows.n_logits), 0);
    split_close(&one);
    split_close(&rows);
    split_close(&again);
    split_close(&ops);
    split_close(&four);
}
END_TEST

/* The tiny shapes of the tests take the rows split with 2 threads; the
 * benchmark's d256 student takes the ops split. */
START_TEST(test_model_split_by_shape)
{
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 16;
    p.n_layers = 1;
    p.n_active_layers = 1;
    p.max_batch = 2;
    p.max_seq = 4;
    const int d[2] = {64, 256}, ff[2] = {192, 768}, hd[2] = {16, 64}, kv[2] = {2, 4};
    for (int k = 0; k < 2; k++) {
        p.d_model = d[k];
        p.d_ff = ff[k];
        p.head_dim = hd[k];
        p.n_heads = 4;
        p.n_kv_heads = kv[k];
        tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
        const int32_t tok[8] = {1, 2, 3, 4, 5, 6, 7, 8};
        lattice__model_profile(t.m, LATTICE_PROF_WALL);
        ck_assert_int_eq(lattice_model_forward(t.m, tok, 2, 4), LATTICE_OK);
        ck_assert_int_eq(lattice__model_profile_get(t.m)->rows_threads, k == 0 ? 2 : 1);
        tiny_close(&t);
    }
}
END_TEST

static Suite *model_suite(void)
{
    Suite *s = suite_create("model");
    TCase *g = tcase_create("gradients");
    tcase_set_timeout(g, 300);
    tcase_add_loop_test(g, test_model_grad_placements, 0, 9);
    tcase_add_loop_test(g, test_model_grad_frozen_and_skip, 0, 2);
    tcase_add_loop_test(g, test_model_grad_fused_attention, 0, 2 * tu_n_backends());
    tcase_add_test(g, test_model_skip_and_hidden);
    tcase_add_loop_test(g, test_model_rows_split, 0, 3 * tu_n_backends());
    tcase_add_test(g, test_model_split_by_shape);
    suite_add_tcase(s, g);
    TCase *l = tcase_create("learning");
    tcase_set_timeout(l, 300);
    tcase_add_loop_test(l, test_model_overfits, 0, 3);
    tcase_add_test(l, test_model_deterministic);
    tcase_add_loop_test(l, test_model_growth, 0, 2);
    tcase_add_test(l, test_model_param_count_matches_across_placements);
    suite_add_tcase(s, l);
    TCase *b = tcase_create("bad_input");
    tcase_add_test(b, test_model_bad_configs);
    tcase_add_test(b, test_model_null_handles);
    tcase_add_test(b, test_model_bad_calls);
    suite_add_tcase(s, b);
    TCase *inf = tcase_create("inference");
    tcase_set_timeout(inf, 60);
    tcase_add_loop_test(inf, test_model_inference_logits, 0, 3 * tu_n_backends());
    tcase_add_test(inf, test_model_inference_refuses_backward);
    tcase_add_test(inf, test_model_loss_no_gradient);
    tcase_add_test(inf, test_model_evaluate_matches_trainer);
    tcase_add_test(inf, test_model_evaluate_bad_input);
    suite_add_tcase(s, inf);
    return s;
}

int main(void)
{
    return tu_run(model_suite());
}
