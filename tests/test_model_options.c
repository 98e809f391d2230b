/* Every option of a model through every operation that touches layers or
 * files (issue 38 part 1): copy_layer (and a grow phase with block_init
 * copy), skip, save/load (and create_from_file), checkpoint save/load, the
 * config writer and the setup the ranks compare. One table lists every field
 * of lattice_model_params and every setting of the norm; a test fails when
 * the struct holds a field the table lacks, so that the next option cannot be
 * forgotten: add its row, and every operation below walks it. */
#include "testutil.h"

#include <json-c/json.h>
#include <pthread.h>
#include <stddef.h>
#include <unistd.h>

/* A model's whole setup: its params and its norm. */
typedef struct variant {
    lattice_model_params p;
    lattice_norm_placement placement;
    lattice_norm_kind kind;
    float eps, residual_scale;
} variant;

#define NORM_SETTING SIZE_MAX /* a row of the norm's, not of lattice_model_params */

/* One option. An architecture row (arch) has a variant set otherwise than
 * the base (base: the base's own change first, for options that mean
 * something only beside another), and what each operation says of it. */
typedef struct option_row {
    const char *field;
    size_t offset, size; /* in lattice_model_params, or NORM_SETTING */
    int arch;            /* 0: no operation compares it (why says why) */
    const char *why;
    void (*base)(variant *);
    void (*set)(variant *);
    const char *load_says; /* the refusal of lattice_model_load names it so */
    const char *ckpt_says; /* and the checkpoint's */
    const char *setup_name; /* its name in the setup the ranks compare */
    const char *cfg_key;    /* its key in config.json ("lattice.x": in the lattice object) */
    double cfg_value;       /* the variant's value there (or cfg_str) */
    const char *cfg_str;
    const char *qwen3_says; /* NULL: a Qwen3 config.json holds it, else why not */
} option_row;

#define PF(f) offsetof(lattice_model_params, f), sizeof(((lattice_model_params *)0)->f)

static void set_vocab(variant *v) { v->p.vocab_size = 13; }
static void set_d_model(variant *v) { v->p.d_model = 12; }
static void set_n_layers(variant *v) { v->p.n_layers = v->p.n_active_layers = 5; }
static void set_n_heads(variant *v) { v->p.n_heads = 4; }
static void set_n_kv(variant *v) { v->p.n_kv_heads = 2; }
static void set_head_dim(variant *v) { v->p.head_dim = 6; }
static void set_d_ff(variant *v) { v->p.d_ff = 16; }
static void set_rope(variant *v) { v->p.rope_theta = 1e4f; }
static void set_qk_norm(variant *v) { v->p.qk_norm = 0; }
static void set_tie(variant *v) { v->p.tie_embeddings = 1; }
#define OPT(key, x) tu_option(&v->p, LATTICE_MODEL_OPTION_##key, x)
static void set_block_norm(variant *v) { OPT(BLOCK_NORM, 2); }
static void set_block_rescale(variant *v) { OPT(BLOCK_RESCALE, 2); }
static void set_massive(variant *v)
{
    OPT(MASSIVE_OFFSET, 3);
    OPT(MASSIVE_LAYER, 2);
}
static void set_massive_layer(variant *v) { OPT(MASSIVE_LAYER, 1); }
static void set_massive_channel(variant *v) { OPT(MASSIVE_CHANNEL, 3); }
#undef OPT
static void set_placement(variant *v) { v->placement = LATTICE_NORM_PLACEMENT_PERI; }
static void set_kind(variant *v) { v->kind = LATTICE_NORM_KIND_LAYER; }
static void set_eps(variant *v) { v->eps = 1e-5f; }
static void set_post(variant *v) { v->placement = LATTICE_NORM_PLACEMENT_POST; }
static void set_residual(variant *v) { v->residual_scale = 2.0f; } /* post-norm only */

static const option_row rows[] = {
    {"size", PF(size), 0, "the caller's struct size, not a setting", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"vocab_size", PF(vocab_size), 1, NULL, NULL, set_vocab, "the file's vocab_size is 11, the model's 13",
     "model vocab_size", "vocab_size", "vocab_size", 13, NULL, NULL},
    {"d_model", PF(d_model), 1, NULL, NULL, set_d_model, "the file's d_model is 8, the model's 12",
     "model d_model", "d_model", "hidden_size", 12, NULL, NULL},
    {"n_layers", PF(n_layers), 1, NULL, NULL, set_n_layers, "the file's n_layers is 4, the model's 5",
     "layers (model.trainable_layers) and this run's model has", "n_layers", "num_hidden_layers", 5, NULL, NULL},
    {"n_active_layers", PF(n_active_layers), 0, "where a run stands: a checkpoint restores it, a "
     "weights file does not", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"n_heads", PF(n_heads), 1, NULL, NULL, set_n_heads, "the file's n_heads is 2, the model's 4",
     "model n_heads", "n_heads", "num_attention_heads", 4, NULL, NULL},
    {"n_kv_heads", PF(n_kv_heads), 1, NULL, NULL, set_n_kv, "the file's n_kv_heads is 1, the model's 2",
     "model n_kv_heads", "n_kv_heads", "num_key_value_heads", 2, NULL, NULL},
    {"head_dim", PF(head_dim), 1, NULL, NULL, set_head_dim, "the file's head_dim is 4, the model's 6",
     "model head_dim", "head_dim", "head_dim", 6, NULL, NULL},
    {"d_ff", PF(d_ff), 1, NULL, NULL, set_d_ff, "the file's d_ff is 12, the model's 16",
     "model d_ff", "d_ff", "intermediate_size", 16, NULL, NULL},
    {"rope_theta", PF(rope_theta), 1, NULL, NULL, set_rope,
     "the file's rope_theta is 1000000, the model's 10000", "model rope_theta", "rope_theta",
     "rope_theta", 1e4, NULL, NULL},
    {"qk_norm", PF(qk_norm), 1, NULL, NULL, set_qk_norm, "the file's qk_norm is 1, the model's 0",
     "model qk_norm", "qk_norm", "lattice.qk_norm", 0, NULL, "without q/k norm"},
    {"tie_embeddings", PF(tie_embeddings), 1, NULL, NULL, set_tie,
     "the file's tie_embeddings is 0, the model's 1", "model tie_embeddings", "tie_embeddings",
     "tie_word_embeddings", 1, NULL, NULL},
    {"max_batch", PF(max_batch), 0, "sizes the arenas only (ranks may hold other shares)", 0, 0, 0,
     0, 0, 0, 0, 0, 0},
    {"max_seq", PF(max_seq), 0, "sizes the arenas only", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"seed", PF(seed), 0, "draws the initial weights only (the weights themselves are loaded)", 0,
     0, 0, 0, 0, 0, 0, 0, 0},
    {"init_std", PF(init_std), 0, "draws the initial weights only", 0, 0, 0, 0, 0, 0, 0, 0, 0},
    {"block_norm", PF(lattice_reserved_block_norm), 1, NULL, NULL, set_block_norm,
     "the file's block_norm is 0, the model's 2", "model block_norm", "block_norm",
     "lattice.block_norm", 2, NULL, "block_norm 2"},
    {"block_rescale", PF(lattice_reserved_block_rescale), 1, NULL, NULL, set_block_rescale,
     "the file's block_rescale is 0, the model's 2", "model block_rescale", "block_rescale",
     "lattice.block_rescale", 2, NULL, "block_rescale 2"},
    {"massive_offset", PF(lattice_reserved_massive_offset), 1, NULL, NULL, set_massive,
     "the file's massive_offset is 0, the model's 3", "model massive_offset", "massive_offset",
     "lattice.massive_offset", 3, NULL, "massive_offset 3"},
    {"massive_layer", PF(lattice_reserved_massive_layer), 1, NULL, set_massive, set_massive_layer,
     "the file's massive_layer is 2, the model's 1", "model massive_layer", "massive_layer",
     "lattice.massive_layer", 1, NULL, "massive_offset 3"},
    {"massive_channel", PF(lattice_reserved_massive_channel), 1, NULL, set_massive,
     set_massive_channel,
     "the file's massive_channel is 0, the model's 3", "model massive_channel", "massive_channel",
     "lattice.massive_channel", 3, NULL, "massive_offset 3"},
    {"norm placement", NORM_SETTING, 0, 1, NULL, NULL, set_placement,
     "the file's placement is pre, the model's peri", "model placement", "placement",
     "lattice.placement", 0, "peri", "peri-norm"},
    {"norm kind", NORM_SETTING, 0, 1, NULL, NULL, set_kind, "the file's norm is rms, the model's layer",
     "model norm_kind", "norm_kind", "lattice.norm", 0, "layer", "LayerNorm"},
    {"norm eps", NORM_SETTING, 0, 1, NULL, NULL, set_eps, "the file's eps is 9.99999997e-07, the "
     "model's 9.99999975e-06", "model norm_eps", "norm_eps", "rms_norm_eps", 1e-5, NULL, NULL},
    {"residual_scale", NORM_SETTING, 0, 1, NULL, set_post, set_residual,
     "the file's residual_scale is 1, the model's 2", "model residual_scale", "residual_scale",
     "lattice.residual_scale", 2, NULL, "post-norm"},
};
#define N_ROWS ((int)(sizeof rows / sizeof rows[0]))

/* The base: a tiny 4-layer pre-norm RMSNorm model. */
static void base_variant(variant *v)
{
    memset(v, 0, sizeof(*v));
    tu_tiny_params(&v->p);
    v->p.n_layers = v->p.n_active_layers = 4;
    v->placement = LATTICE_NORM_PLACEMENT_PRE;
    v->kind = LATTICE_NORM_KIND_RMS;
    v->eps = 1e-6f;
    v->residual_scale = 1.0f;
}

/* The row's pair: a (its base) and b (a with the option changed). */
static void row_pair(const option_row *r, variant *a, variant *b)
{
    base_variant(a);
    if (r->base)
        r->base(a);
    *b = *a;
    r->set(b);
}

static lattice_backend *be;
static void setup(void) { be = tu_backend("ref", 1); }
static void teardown(void) { lattice_backend_destroy(be); }

/* The running regular RMS set, so that the row-start options act. */
static void set_statistics(lattice_model *m, float value)
{
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_STATISTIC)
            ti.data[0] = value;
    }
}

static lattice_model *make_model(const variant *v, uint64_t seed)
{
    lattice_model_params p = v->p;
    p.seed = seed;
    lattice_model *m = tu_model(be, v->placement, v->kind, v->eps, v->residual_scale, &p);
    set_statistics(m, 0.5f);
    return m;
}

static const int32_t toks[10] = {1, 5, 2, 10, 0, 7, 3, 3, 9, 4};

static float *logits_of(lattice_model *m)
{
    lattice_model_params p;
    p.size = sizeof p;
    lattice_model_get_params(m, &p);
    ck_assert_int_eq(lattice_model_forward(m, toks, 2, 5), LATTICE_OK);
    const size_t n = (size_t)10 * p.vocab_size;
    float *c = malloc(sizeof(float) * n);
    memcpy(c, lattice_model_get_logits(m), sizeof(float) * n);
    return c;
}

static int n_logits(lattice_model *m)
{
    lattice_model_params p;
    p.size = sizeof p;
    lattice_model_get_params(m, &p);
    return 10 * p.vocab_size;
}

/* ---- the table covers the struct ---------------------------------------- */

/* Every byte of lattice_model_params is a row's field or padding before the
 * next one: a field added to the struct without a row fails here. */
START_TEST(test_table_covers_params)
{
    size_t end = 0;
    int fields = 0;
    for (int i = 0; i < N_ROWS; i++) {
        if (rows[i].offset == NORM_SETTING)
            continue;
        ck_assert_msg(rows[i].offset >= end && rows[i].offset - end < 8,
                      "row %s at %zu: a field between %zu and it has no row", rows[i].field,
                      rows[i].offset, end);
        end = rows[i].offset + rows[i].size;
        fields++;
        ck_assert_msg(rows[i].arch || rows[i].why, "row %s: neither compared nor said why not",
                      rows[i].field);
    }
    ck_assert_msg((end + 7) / 8 * 8 == sizeof(lattice_model_params),
                  "lattice_model_params is %zu bytes, its rows end at %zu: a field without a row",
                  sizeof(lattice_model_params), end);
    ck_assert_int_eq(fields, 21);
}
END_TEST

/* ---- copy_layer ----------------------------------------------------------- */

/* Every pair of layers of the row's variant: each destination tensor whose
 * role the source has becomes the source's; nothing else changes (other
 * layers, statistics, a block-entry norm the source lacks). */
START_TEST(test_copy_layer)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    lattice_model *m = make_model(&v, 5);
    const int L = v.p.n_layers, nt = lattice_model_get_n_tensors(m);
    for (int dst = 0; dst < L; dst++)
        for (int src = 0; src < L; src++) {
            if (dst == src)
                continue;
            lattice_model_init_layer(m, dst, 100 + (uint64_t)dst); /* dst differs from src */
            set_statistics(m, 0.25f + 0.125f * (float)dst);
            lattice_model_tensor_info ti;
            for (int i = 0; i < nt; i++) { /* every block-entry norm distinct from 1 */
                lattice_model_get_tensor(m, i, &ti);
                if (strstr(ti.name, "block_entry_norm"))
                    for (int j = 0; j < ti.shape[0]; j++)
                        ti.data[j] = 1.0f + 0.01f * (float)(ti.layer + j);
            }
            size_t n;
            float *before = rig_weights(m, &n);
            const lattice_status st = lattice_model_copy_layer(m, dst, src);
            ck_assert_msg(st == LATTICE_OK, "%s: copy %d <- %d: %s", r->field, dst, src,
                          lattice_model_errmsg(m));
            size_t off = 0;
            for (int i = 0; i < nt; i++) {
                lattice_model_get_tensor(m, i, &ti);
                const size_t cnt = (size_t)(ti.shape[0] * ti.shape[1]);
                const float *want = before + off;
                char src_name[128];
                const char *role = ti.layer >= 0 ? strchr(ti.name + strlen("model.layers."), '.') : NULL;
                lattice_model_tensor_info si;
                if (ti.layer == dst && ti.group == LATTICE_MODEL_GROUP_LAYER && role) {
                    snprintf(src_name, sizeof src_name, "model.layers.%d%s", src, role);
                    if (lattice_model_find_tensor(m, src_name, &si) == LATTICE_OK) {
                        ck_assert_int_eq(si.shape[0] * si.shape[1], (int64_t)cnt);
                        /* si's values before the copy: src is never written */
                        want = si.data;
                    }
                }
                ck_assert_msg(memcmp(ti.data, want, sizeof(float) * cnt) == 0,
                              "%s: copy %d <- %d: tensor %s is not what it should be", r->field,
                              dst, src, ti.name);
                off += cnt;
            }
            ck_assert_uint_eq(off, n);
            free(before);
        }
    lattice_model_destroy(m);
}
END_TEST

/* A grow schedule whose new blocks copy the ones below (block_init copy) on
 * the row's variant: runs to its end (0.4 crashed on block_norm). */
START_TEST(test_grow_copy)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    rig_options o;
    rig_options_init(&o);
    o.model = v.p;
    o.placement = v.placement;
    o.norm_kind = v.kind;
    o.norm_eps = v.eps;
    o.model.n_active_layers = 1;
    o.n_blocks = v.p.n_layers; /* each phase adds a layer, a copy of the one below */
    o.block_size = 1;
    o.steps_per_phase = 1;
    o.block_init = LATTICE_SCHEDULE_BLOCK_INIT_COPY;
    o.defer_trainer = 1;
    rig g;
    tu_rig_open(&g, &o);
    if (v.residual_scale != 1.0f) { /* the rig's norm has scale 1: the model over another */
        lattice_optim_destroy(g.optim);
        lattice_model_destroy(g.model);
        lattice_model_params p = o.model;
        g.model = tu_model(g.be, v.placement, v.kind, v.eps, v.residual_scale, &p);
        ck_assert_int_eq(lattice_optim_create(g.model, &o.optim, &g.optim), LATTICE_OK);
    }
    tu_rig_bind(&g, &o.trainer);
    const lattice_status st = lattice_trainer_run(g.trainer);
    ck_assert_msg(st == LATTICE_OK, "%s: %s", r->field, lattice_trainer_errmsg(g.trainer));
    ck_assert_int_eq(lattice_model_get_active_layers(g.model), v.p.n_layers);
    rig_close(&g);
}
END_TEST

/* ---- skip ----------------------------------------------------------------- */

/* Skipping layer 2 (a block's entry under block_norm and block_rescale, the
 * layer reading the massive offset's stream) passes its input through: the
 * streams below it are the unskipped pass's, the one after it is its input
 * (the offset belongs to the boundary, before the layer), the logits change,
 * and backward runs. */
START_TEST(test_skip)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    lattice_model *m = make_model(&v, 5);
    const int D = v.p.d_model;
    const size_t N = (size_t)10 * D;
    float *full = logits_of(m);
    float *h[3];
    for (int b = 0; b < 3; b++) {
        const float *x;
        ck_assert_int_eq(lattice_model_get_hidden(m, b, &x), LATTICE_OK);
        h[b] = malloc(sizeof(float) * N);
        memcpy(h[b], x, sizeof(float) * N);
    }
    ck_assert_int_eq(lattice_model_set_skip(m, 2, 1), LATTICE_OK);
    float *skipped = logits_of(m);
    const float *x;
    for (int b = 0; b < 3; b++) {
        ck_assert_int_eq(lattice_model_get_hidden(m, b, &x), LATTICE_OK);
        ck_assert_msg(memcmp(x, h[b], sizeof(float) * N) == 0, "%s: stream %d changed", r->field, b);
    }
    const float *in, *out;
    ck_assert_int_eq(lattice_model_get_hidden(m, 2, &in), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_hidden(m, 3, &out), LATTICE_OK);
    ck_assert_msg(memcmp(in, out, sizeof(float) * N) == 0, "%s: the skipped layer acted", r->field);
    ck_assert_msg(memcmp(full, skipped, sizeof(float) * (size_t)n_logits(m)) != 0,
                  "%s: skipping layer 2 changed nothing", r->field);
    int32_t targets[10];
    memcpy(targets, toks, sizeof targets);
    float loss;
    ck_assert_int_eq(lattice_model_cross_entropy(m, targets, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
    for (int b = 0; b < 3; b++)
        free(h[b]);
    free(full);
    free(skipped);
    lattice_model_destroy(m);
}
END_TEST

/* ---- save and load -------------------------------------------------------- */

static char *temp_file(const char *suffix)
{
    static char buf[4][96];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 96, "/tmp/lattice-options-%d-%d%s", (int)getpid(), k, suffix);
    return p;
}

/* A file of a loaded into b (and back) is refused naming the option and both
 * values, before any weight is read; into a model of its own kind it loads
 * and computes the same; create_from_file makes that model again. */
START_TEST(test_save_load)
{
    const option_row *r = &rows[_i];
    variant a, v;
    if (!r->arch) {
        /* not compared: a file loads across it */
        base_variant(&a);
        v = a;
        v.p.seed = 77;
        v.p.init_std = 0.05f;
        v.p.max_batch = 3;
        v.p.max_seq = 7;
        v.p.n_active_layers = 1;
        lattice_model *ma = make_model(&a, 1), *mv = make_model(&v, 2);
        char *path = temp_file(".safetensors");
        ck_assert_int_eq(lattice_model_save(ma, path), LATTICE_OK);
        ck_assert_msg(lattice_model_load(mv, path) == LATTICE_OK, "%s: %s", r->field,
                      lattice_model_errmsg(mv));
        remove(path);
        lattice_model_destroy(ma);
        lattice_model_destroy(mv);
        return;
    }
    row_pair(r, &a, &v);
    lattice_model *ma = make_model(&a, 1), *mv = make_model(&v, 2), *mv2 = make_model(&v, 3);
    char *pa = temp_file(".safetensors"), *pv = temp_file(".safetensors");
    ck_assert_int_eq(lattice_model_save(ma, pa), LATTICE_OK);
    ck_assert_int_eq(lattice_model_save(mv, pv), LATTICE_OK);
    size_t n;
    float *w = rig_weights(mv, &n);
    lattice_status st = lattice_model_load(mv, pa);
    ck_assert_msg(st == LATTICE_ERR_FORMAT, "%s: the base's file loaded into the variant (%s)",
                  r->field, lattice_status_string(st));
    ck_assert_msg(strstr(lattice_model_errmsg(mv), r->load_says), "%s: '%s'", r->field,
                  lattice_model_errmsg(mv));
    size_t n2;
    float *w2 = rig_weights(mv, &n2);
    ck_assert_msg(n == n2 && memcmp(w, w2, sizeof(float) * n) == 0, "%s: a refused load wrote",
                  r->field);
    free(w2);
    st = lattice_model_load(ma, pv);
    ck_assert_msg(st == LATTICE_ERR_FORMAT, "%s: the variant's file loaded into the base (%s)",
                  r->field, lattice_status_string(st));
    char key[64];
    snprintf(key, sizeof key, "%.*s", (int)(strstr(r->load_says, " is ") + 4 - r->load_says),
             r->load_says);
    ck_assert_msg(strstr(lattice_model_errmsg(ma), key), "%s: '%s' is not '%s...'", r->field,
                  lattice_model_errmsg(ma), key);
    /* its own kind: loads, the same logits */
    ck_assert_msg(lattice_model_load(mv2, pv) == LATTICE_OK, "%s: %s", r->field,
                  lattice_model_errmsg(mv2));
    set_statistics(mv, 0.5f);
    float *la = logits_of(mv), *lb = logits_of(mv2);
    ck_assert(memcmp(la, lb, sizeof(float) * (size_t)n_logits(mv)) == 0);
    /* and the file's own config makes it again */
    lattice_model *mc = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_model_create_from_file(pv, NULL, be, 2, 5, &mc, err) == LATTICE_OK,
                  "%s: %s", r->field, err);
    lattice_model_params pc, pw = v.p;
    pc.size = sizeof pc;
    lattice_model_get_params(mc, &pc);
    pw.seed = pc.seed;
    pw.init_std = pc.init_std;
    pw.max_batch = pc.max_batch;
    pw.max_seq = pc.max_seq;
    if (pw.lattice_reserved_massive_offset == 0.0f) { /* the slots, compared as bytes below */
        pw.lattice_reserved_massive_layer = pc.lattice_reserved_massive_layer;
        pw.lattice_reserved_massive_channel = pc.lattice_reserved_massive_channel;
    }
    ck_assert_msg(memcmp(&pc, &pw, sizeof pc) == 0, "%s: create_from_file made other params",
                  r->field);
    ck_assert_int_eq(lattice_model_get_placement(mc), v.placement);
    float *lc = logits_of(mc);
    ck_assert_msg(memcmp(la, lc, sizeof(float) * (size_t)n_logits(mv)) == 0,
                  "%s: create_from_file computes otherwise", r->field);
    free(la);
    free(lb);
    free(lc);
    free(w);
    remove(pa);
    remove(pv);
    lattice_model_destroy(mc);
    lattice_model_destroy(ma);
    lattice_model_destroy(mv);
    lattice_model_destroy(mv2);
}
END_TEST

/* ---- checkpoints ------------------------------------------------------------ */

/* The run of a variant, its norm's residual scale included. */
static void open_run(rig *g, const variant *v, uint64_t seed)
{
    rig_options o;
    rig_options_init(&o);
    o.model = v->p;
    o.model.seed = seed;
    o.placement = v->placement;
    o.norm_kind = v->kind;
    o.norm_eps = v->eps;
    o.n_blocks = 1;
    o.block_size = v->p.n_layers;
    o.defer_trainer = 1;
    tu_rig_open(g, &o);
    if (v->residual_scale != 1.0f) {
        lattice_optim_destroy(g->optim);
        lattice_model_destroy(g->model);
        g->model = tu_model(g->be, v->placement, v->kind, v->eps, v->residual_scale, &o.model);
        ck_assert_int_eq(lattice_optim_create(g->model, &o.optim, &g->optim), LATTICE_OK);
    }
    tu_rig_bind(g, &o.trainer);
}

/* A checkpoint of one set-up loaded by a run of the other is refused naming
 * the option and both values; by a run of its own it loads. */
START_TEST(test_checkpoint)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    rig ga, gv, gv2;
    open_run(&ga, &a, 1);
    open_run(&gv, &v, 2);
    open_run(&gv2, &v, 3);
    ck_assert_int_eq(lattice_trainer_step(gv.trainer, NULL), LATTICE_OK);
    char *pa = temp_file(".ckpt"), *pv = temp_file(".ckpt");
    ck_assert_int_eq(lattice_trainer_save_checkpoint(ga.trainer, pa), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(gv.trainer, pv), LATTICE_OK);
    lattice_status st = lattice_trainer_load_checkpoint(gv2.trainer, pa);
    ck_assert_msg(st != LATTICE_OK, "%s: the base's checkpoint loaded into the variant", r->field);
    ck_assert_msg(strstr(lattice_trainer_errmsg(gv2.trainer), r->ckpt_says), "%s: '%s'", r->field,
                  lattice_trainer_errmsg(gv2.trainer));
    st = lattice_trainer_load_checkpoint(ga.trainer, pv);
    ck_assert_msg(st != LATTICE_OK, "%s: the variant's checkpoint loaded into the base", r->field);
    ck_assert_msg(strstr(lattice_trainer_errmsg(ga.trainer), r->ckpt_says), "%s: '%s'", r->field,
                  lattice_trainer_errmsg(ga.trainer));
    st = lattice_trainer_load_checkpoint(gv2.trainer, pv);
    ck_assert_msg(st == LATTICE_OK, "%s: %s", r->field, lattice_trainer_errmsg(gv2.trainer));
    size_t n1, n2;
    float *w1 = rig_weights(gv.model, &n1), *w2 = rig_weights(gv2.model, &n2);
    ck_assert(n1 == n2 && memcmp(w1, w2, sizeof(float) * n1) == 0);
    free(w1);
    free(w2);
    remove(pa);
    remove(pv);
    rig_close(&ga);
    rig_close(&gv);
    rig_close(&gv2);
}
END_TEST

/* ---- the config writer ------------------------------------------------------ */

static json_object *config_of(lattice_model *m, unsigned flags, lattice_status *st)
{
    char *path = temp_file(".json");
    *st = lattice_model_save_config(m, path, flags);
    json_object *o = *st == LATTICE_OK ? json_object_from_file(path) : NULL;
    remove(path);
    return o;
}

/* The lattice config.json holds the variant's value under the row's key; a
 * Qwen3 one holds it, or is refused naming it. */
START_TEST(test_config_writer)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    lattice_model *m = make_model(&v, 1);
    lattice_status st;
    json_object *o = config_of(m, LATTICE_MODEL_CONFIG_FLAG_LATTICE, &st);
    ck_assert_msg(st == LATTICE_OK && o, "%s: %s", r->field, lattice_model_errmsg(m));
    json_object *obj = o, *x = NULL;
    const char *key = r->cfg_key;
    if (!strncmp(key, "lattice.", 8)) {
        ck_assert(json_object_object_get_ex(o, "lattice", &obj));
        key += 8;
    }
    ck_assert_msg(json_object_object_get_ex(obj, key, &x), "%s: config.json has no %s", r->field,
                  r->cfg_key);
    if (r->cfg_str)
        ck_assert_str_eq(json_object_get_string(x), r->cfg_str);
    else
        ck_assert_msg((float)json_object_get_double(x) == (float)r->cfg_value,
                      "%s: config.json's %s is %s, not %g", r->field, r->cfg_key,
                      json_object_to_json_string(x), r->cfg_value);
    json_object_put(o);
    o = config_of(m, 0, &st);
    if (r->qwen3_says) {
        ck_assert_msg(st == LATTICE_ERR_UNSUPPORTED, "%s: a Qwen3 config.json was written",
                      r->field);
        ck_assert_msg(strstr(lattice_model_errmsg(m), r->qwen3_says), "%s: '%s'", r->field,
                      lattice_model_errmsg(m));
    } else {
        ck_assert_msg(st == LATTICE_OK && o, "%s: %s", r->field, lattice_model_errmsg(m));
        ck_assert(json_object_object_get_ex(o, key, &x));
        ck_assert((float)json_object_get_double(x) == (float)r->cfg_value);
    }
    json_object_put(o);
    lattice_model_destroy(m);
}
END_TEST

/* ---- the setup the ranks compare ---------------------------------------------- */

typedef struct two_ranks {
    pthread_barrier_t bar;
    void *ptr[2];
} two_ranks;

typedef struct rank_of {
    two_ranks *w;
    int rank;
    rig g;
    lattice_status st;
    char msg[LATTICE_ERRMSG_SIZE];
} rank_of;

static int t_rank(void *u) { return ((rank_of *)u)->rank; }
static int t_n(void *u) { (void)u; return 2; }
#define T_SUM(name, type)                                                                          \
    static int name(void *u, type *data, size_t count)                                             \
    {                                                                                              \
        rank_of *r = u;                                                                            \
        r->w->ptr[r->rank] = data;                                                                 \
        type *tmp = malloc(count * sizeof(type) + 1);                                              \
        pthread_barrier_wait(&r->w->bar);                                                          \
        for (size_t i = 0; i < count; i++)                                                         \
            tmp[i] = ((type *)r->w->ptr[0])[i] + ((type *)r->w->ptr[1])[i];                        \
        pthread_barrier_wait(&r->w->bar);                                                          \
        memcpy(data, tmp, count * sizeof(type));                                                   \
        free(tmp);                                                                                 \
        return 0;                                                                                  \
    }
T_SUM(t_sum_floats, float)
T_SUM(t_sum_doubles, double)
T_SUM(t_sum_int64, int64_t)
static int t_barrier(void *u)
{
    pthread_barrier_wait(&((rank_of *)u)->w->bar);
    return 0;
}
static int t_broadcast(void *u, void *data, size_t bytes, int root)
{
    rank_of *r = u;
    r->w->ptr[r->rank] = data;
    pthread_barrier_wait(&r->w->bar);
    if (r->rank != root)
        memcpy(data, r->w->ptr[root], bytes);
    pthread_barrier_wait(&r->w->bar);
    return 0;
}
static const lattice_trainer_collective two_ops = {
    .size = sizeof(lattice_trainer_collective), .rank = t_rank, .n_ranks = t_n,
    .sum_floats = t_sum_floats, .sum_doubles = t_sum_doubles, .sum_int64 = t_sum_int64,
    .barrier = t_barrier, .broadcast = t_broadcast, .errmsg = NULL,
};

static void *attach(void *arg)
{
    rank_of *r = arg;
    r->st = lattice_trainer_set_collective(r->g.trainer, &two_ops, r);
    snprintf(r->msg, sizeof r->msg, "%s", lattice_trainer_errmsg(r->g.trainer));
    return NULL;
}

/* Rank 0 of the base, rank 1 of the variant: both refuse, naming the option. */
START_TEST(test_setup_digest)
{
    const option_row *r = &rows[_i];
    if (!r->arch)
        return;
    variant a, v;
    row_pair(r, &a, &v);
    two_ranks w;
    rank_of ranks[2] = {{&w, 0, {0}, 0, ""}, {&w, 1, {0}, 0, ""}};
    open_run(&ranks[0].g, &a, 1);
    open_run(&ranks[1].g, &v, 1);
    ck_assert_int_eq(pthread_barrier_init(&w.bar, NULL, 2), 0);
    pthread_t th[2];
    for (int k = 0; k < 2; k++)
        ck_assert_int_eq(pthread_create(&th[k], NULL, attach, &ranks[k]), 0);
    for (int k = 0; k < 2; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&w.bar);
    for (int k = 0; k < 2; k++) {
        ck_assert_msg(ranks[k].st == LATTICE_ERR_INVALID_CONFIG, "%s: rank %d attached (%s)",
                      r->field, k, lattice_status_string(ranks[k].st));
        char says[64];
        snprintf(says, sizeof says, "model %s ", r->setup_name);
        ck_assert_msg(strstr(ranks[k].msg, says), "%s: rank %d: '%s'", r->field, k, ranks[k].msg);
        rig_close(&ranks[k].g);
    }
}
END_TEST

static Suite *options_suite(void)
{
    Suite *s = suite_create("model-options");
    TCase *tc = tcase_create("table");
    tcase_add_test(tc, test_table_covers_params);
    suite_add_tcase(s, tc);
    const struct {
        const char *name;
        const TTest *test;
    } ops[] = {
        {"copy_layer", test_copy_layer},   {"grow_copy", test_grow_copy},
        {"skip", test_skip},               {"save_load", test_save_load},
        {"checkpoint", test_checkpoint},   {"config_writer", test_config_writer},
        {"setup_digest", test_setup_digest},
    };
    for (size_t k = 0; k < sizeof ops / sizeof ops[0]; k++) {
        tc = tcase_create(ops[k].name);
        tcase_add_checked_fixture(tc, setup, teardown);
        tcase_add_loop_test(tc, ops[k].test, 0, N_ROWS);
        suite_add_tcase(s, tc);
    }
    return s;
}

int main(void)
{
    SRunner *sr = srunner_create(options_suite());
    srunner_run_all(sr, CK_ENV);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
