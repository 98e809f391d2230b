/* Hostile checkpoints: each numeric field of a valid checkpoint, in its state
 * and in its tensors, is set to hostile values; a load must refuse it clearly,
 * or accept it and then train a step to finite weights. Damaged keys and
 * shapes, and a checkpoint of one setup loaded into another, are refused. */
#include "testutil.h"

#include <json-c/json.h>
#include <unistd.h>

static const int32_t ids[] = {10, 1, 2, 3, 4, 10, 5, 6, 7, 10, 8, 9, 1, 2, 10, 3, 3, 4, 10, 2, 2};
/* another corpus of as many tokens and documents (one token differs), and one
 * with a document more */
static const int32_t ids_edited[] = {10, 1, 2, 3, 4, 10, 5, 6, 7, 10, 8, 9, 1, 2, 10, 3, 3, 4, 10, 2, 3};
static const int32_t ids_longer[] = {10, 1, 2, 3, 4, 10, 5, 6, 7, 10, 8, 9, 1, 2, 10, 3, 3, 4, 10, 2, 2,
                                     10, 4, 4};

/* How a run differs from the one open_run builds (zero: the same). */
typedef struct variant {
    uint64_t data_seed;
    int batch;       /* rows (2) */
    int corpus;      /* 1: ids_edited, 2: ids_longer */
    int n_layers;    /* the model's capacity (2) */
    int joint;       /* the joint preset instead of grow */
    int64_t steps;   /* steps per phase (3) */
    int post;        /* post-norm instead of pre */
    int set_beta2;   /* beta2 from below instead of the default */
    float beta2;
} variant;

/* The rig's tiny grow run (seed 3, learning rate 1e-2, 3 steps a phase), as v changes it. */
static void open_run_as(rig *r, const variant *v)
{
    rig_options o;
    rig_options_init(&o);
    o.norm_eps = 1e-5f;
    o.model.seed = 3;
    if (v->n_layers)
        o.model.n_layers = v->n_layers;
    if (v->batch)
        o.data.batch_size = v->batch;
    o.data.seed = v->data_seed;
    o.ids = v->corpus == 1 ? ids_edited : v->corpus == 2 ? ids_longer : ids;
    o.n_ids = v->corpus == 2 ? (int64_t)(sizeof ids_longer / sizeof ids_longer[0])
                             : (int64_t)(sizeof ids / sizeof ids[0]);
    o.optim.lr = 1e-2f;
    if (v->joint)
        o.preset = LATTICE_SCHEDULE_PRESET_JOINT;
    o.steps_per_phase = v->steps ? v->steps : 3;
    if (v->post)
        o.placement = LATTICE_NORM_PLACEMENT_POST;
    if (v->set_beta2)
        o.optim.beta2 = v->beta2;
    tu_rig_open(r, &o);
}

static void open_run(rig *r)
{
    const variant same = {0};
    open_run_as(r, &same);
}

/* A checkpoint in memory: its header as JSON, its data section as bytes. */
typedef struct ckpt {
    json_object *header;
    unsigned char *data;
    size_t data_len;
} ckpt;

static void read_ckpt(const char *path, ckpt *c)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    long len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)len);
    ck_assert_int_eq(fread(b, 1, (size_t)len, f), (size_t)len);
    fclose(f);
    uint64_t hl = 0;
    for (int i = 7; i >= 0; i--)
        hl = hl << 8 | b[i];
    char *h = strndup((char *)b + 8, hl);
    c->header = json_tokener_parse(h);
    ck_assert_ptr_nonnull(c->header);
    free(h);
    c->data_len = (size_t)len - 8 - hl;
    c->data = malloc(c->data_len);
    memcpy(c->data, b + 8 + hl, c->data_len);
    free(b);
}

static void write_ckpt(const char *path, const ckpt *c)
{
    const char *h = json_object_to_json_string_ext(c->header, JSON_C_TO_STRING_PLAIN);
    size_t hl = strlen(h), padded = (hl + 7) / 8 * 8;
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    for (int i = 0; i < 8; i++)
        fputc((int)((padded >> (8 * i)) & 0xff), f);
    fwrite(h, 1, hl, f);
    for (size_t i = hl; i < padded; i++)
        fputc(' ', f);
    fwrite(c->data, 1, c->data_len, f);
    fclose(f);
}

static void free_ckpt(ckpt *c)
{
    json_object_put(c->header);
    free(c->data);
}

/* The state JSON inside the metadata, parsed (caller puts). */
static json_object *state_of(const ckpt *c)
{
    json_object *meta, *st;
    ck_assert(json_object_object_get_ex(c->header, "__metadata__", &meta));
    ck_assert(json_object_object_get_ex(meta, "lattice.checkpoint", &st));
    json_object *s = json_tokener_parse(json_object_get_string(st));
    ck_assert_ptr_nonnull(s);
    return s;
}

static void set_state(ckpt *c, json_object *s)
{
    json_object *meta;
    json_object_object_get_ex(c->header, "__metadata__", &meta);
    json_object_object_add(meta, "lattice.checkpoint",
                           json_object_new_string(json_object_to_json_string_ext(s, JSON_C_TO_STRING_PLAIN)));
}

/* Load path into a fresh run: refused with a message, or a step trains to finite weights. */
static void expect_refused_or_sane(const char *path, const char *what)
{
    rig r;
    open_run(&r);
    lattice_status st = lattice_trainer_load_checkpoint(r.trainer, path);
    if (st != LATTICE_OK) {
        ck_assert_msg(st == LATTICE_ERR_FORMAT, "%s: %s", what, lattice_status_string(st));
        ck_assert_msg(lattice_trainer_errmsg(r.trainer)[0], "%s: refused without a message", what);
    } else if (!lattice_schedule_is_finished(r.schedule)) {
        st = lattice_trainer_step(r.trainer, NULL);
        ck_assert_msg(st == LATTICE_OK, "%s: accepted, then the step failed: %s", what,
                      lattice_trainer_errmsg(r.trainer));
        for (int i = 0; i < lattice_model_get_n_tensors(r.model); i++) {
            lattice_model_tensor_info ti;
            ck_assert_int_eq(lattice_model_get_tensor(r.model, i, &ti), LATTICE_OK);
            for (int64_t j = 0; j < ti.shape[0] * ti.shape[1]; j++)
                ck_assert_msg(isfinite(ti.data[j]), "%s: accepted, then %s[%lld] = %g", what,
                              ti.name, (long long)j, (double)ti.data[j]);
        }
    }
    rig_close(&r);
}

static const char *const state_fields[][2] = {
    {"optim", "step"},           {"optim", "lr"},           {"optim", "min_lr"},
    {"optim", "warmup_steps"},   {"optim", "total_steps"},  {"optim", "beta1"},
    {"optim", "beta2"},          {"optim", "eps"},          {"optim", "weight_decay"},
    {"optim", "clip_norm"},      {"optim", "lr_shape"},     {"optim", "decay_fraction"},
    {"schedule", "n_phases"},  {"schedule", "phase"},
    {"schedule", "step_in_phase"}, {"schedule", "nonpad_in_phase"}, {"schedule", "steps"},
    {"schedule", "tokens"},      {"schedule", "nonpad_tokens"}, {"schedule", "active_layer_tokens"},
    {"schedule", "flops"},       {"model", "n_active"},     {"model", "trainable_embedding"},
    {NULL, "data_epoch"},        {NULL, "data_index"},      {NULL, "applied_phase"},
    {NULL, "data_origin_epoch"}, {NULL, "data_origin_index"},
    {"data", "seed"},            {"data", "batch_size"},    {"data", "val_fraction"},
    {"data", "corpus_tokens"},   {"data", "corpus_hash"},   {"schedule", "phases"},
    {NULL, "data"},
};

static json_object *hostile(int v)
{
    switch (v) {
    case 0: return json_object_new_double(NAN);
    case 1: return json_object_new_double(INFINITY);
    case 2: return json_object_new_double(-INFINITY);
    case 3: return json_object_new_int64(-1);
    case 4: return json_object_new_int64(0);
    case 5: return json_object_new_int64(1);
    case 6: return json_object_new_int64(2);
    case 7: return json_object_new_double(1e300);
    case 8: return json_object_new_int64(INT64_MAX);
    case 9: return json_object_new_int64(INT64_MIN);
    default: return json_object_new_int64(INT64_MAX - 1);
    }
}
#define N_HOSTILE 11

static char *saved_checkpoint(char *path, size_t n)
{
    rig r;
    open_run(&r);
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    snprintf(path, n, "/tmp/lattice-ckfuzz-%d.safetensors", (int)getpid());
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, path), LATTICE_OK);
    rig_close(&r);
    return path;
}

START_TEST(test_state_fields)
{
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good);
    snprintf(bad, sizeof bad, "%s.bad", good);
    const char *const *f = state_fields[_i];
    for (int v = 0; v < N_HOSTILE; v++) {
        ckpt c;
        read_ckpt(good, &c);
        json_object *s = state_of(&c), *obj = s;
        if (f[0])
            ck_assert(json_object_object_get_ex(s, f[0], &obj));
        json_object_object_add(obj, f[1], hostile(v));
        set_state(&c, s);
        json_object_put(s);
        write_ckpt(bad, &c);
        free_ckpt(&c);
        char what[96];
        snprintf(what, sizeof what, "%s.%s = hostile #%d", f[0] ? f[0] : "", f[1], v);
        expect_refused_or_sane(bad, what);
    }
    remove(bad);
    remove(good);
}
END_TEST

/* The optimizer's lr_shape and decay_fraction: a state without them (0.3's)
 * would resume a WSD run as cosine; a state lacking either is refused by
 * name. */
START_TEST(test_lr_shape_keys_required)
{
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good);
    snprintf(bad, sizeof bad, "%s.bad", good);
    for (int drop = 0; drop < 3; drop++) {
        ckpt c;
        read_ckpt(good, &c);
        json_object *s = state_of(&c), *op;
        ck_assert(json_object_object_get_ex(s, "optim", &op));
        if (drop != 1)
            json_object_object_del(op, "lr_shape");
        if (drop != 2)
            json_object_object_del(op, "decay_fraction");
        set_state(&c, s);
        json_object_put(s);
        write_ckpt(bad, &c);
        free_ckpt(&c);
        rig r;
        open_run(&r);
        ck_assert_int_eq(lattice_trainer_load_checkpoint(r.trainer, bad), LATTICE_ERR_FORMAT);
        ck_assert_msg(strstr(lattice_trainer_errmsg(r.trainer),
                             drop == 1 ? "lacks optim.decay_fraction"
                             : drop == 2 ? "lacks optim.lr_shape" : "lacks optim."),
                      "%s", lattice_trainer_errmsg(r.trainer));
        rig_close(&r);
    }
    remove(bad);
    remove(good);
}
END_TEST

/* Tensor data: one value of a weight, a moment or a step count made hostile. */
static void poke(ckpt *c, const char *name, int64_t index, const void *value, size_t width)
{
    json_object *t, *offs;
    ck_assert_msg(json_object_object_get_ex(c->header, name, &t), "%s", name);
    ck_assert(json_object_object_get_ex(t, "data_offsets", &offs));
    const size_t at = (size_t)json_object_get_int64(json_object_array_get_idx(offs, 0)) +
                      (size_t)index * width;
    ck_assert_uint_le(at + width, c->data_len);
    memcpy(c->data + at, value, width);
}

START_TEST(test_tensor_values)
{
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good);
    snprintf(bad, sizeof bad, "%s.bad", good);
    const float fv[] = {NAN, INFINITY, -INFINITY, -1.0f, 1e38f};
    const int64_t iv[] = {-1, INT64_MAX, INT64_MIN, 1000000};
    const char *ft[] = {"model.embed_tokens.weight", "optim.m1.model.norm.weight",
                        "optim.m2.model.layers.0.mlp.down_proj.weight"};
    for (int k = 0; k < 3; k++)
        for (size_t v = 0; v < sizeof fv / sizeof fv[0]; v++) {
            ckpt c;
            read_ckpt(good, &c);
            poke(&c, ft[k], 1, &fv[v], 4);
            write_ckpt(bad, &c);
            free_ckpt(&c);
            char what[128];
            snprintf(what, sizeof what, "%s[1] = %g", ft[k], (double)fv[v]);
            expect_refused_or_sane(bad, what);
        }
    for (size_t v = 0; v < sizeof iv / sizeof iv[0]; v++)
        for (int i = 0; i < 3; i++) {
            ckpt c;
            read_ckpt(good, &c);
            poke(&c, "optim.steps", i, &iv[v], 8);
            write_ckpt(bad, &c);
            free_ckpt(&c);
            char what[96];
            snprintf(what, sizeof what, "optim.steps[%d] = %lld", i, (long long)iv[v]);
            expect_refused_or_sane(bad, what);
        }
    remove(bad);
    remove(good);
}
END_TEST

/* Every checkpoint a run writes loads back into it, whatever betas it was
 * given: with beta2 0 (or any beta2 <= beta1^2) an embedding row no batch
 * reads keeps a decaying first moment while its second is 0, which no bound
 * of m1 by sqrt(m2) allows; and one step that overflows a second moment
 * (clip_norm 0, a gradient beyond sqrt(FLT_MAX)) is refused by the step,
 * leaving the moments as they were, not saved as Inf. */
START_TEST(test_own_checkpoints_load)
{
    const float beta2[] = {0.0f, 0.5f, 0.95f};
    char path[96];
    snprintf(path, sizeof path, "/tmp/lattice-ckown-%d.safetensors", (int)getpid());
    for (int b = 0; b < 3; b++) {
        const variant v = {.joint = 1, .steps = 12, .set_beta2 = 1, .beta2 = beta2[b]};
        rig r;
        open_run_as(&r, &v);
        for (int k = 0; k < 12; k++) {
            ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
            ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, path), LATTICE_OK);
            ck_assert_msg(lattice_trainer_load_checkpoint(r.trainer, path) == LATTICE_OK,
                          "beta2 %g, after step %d: %s", (double)beta2[b], k + 1,
                          lattice_trainer_errmsg(r.trainer));
        }
        rig_close(&r);
    }
    /* a squared gradient past FLT_MAX: the step refuses it, nothing is Inf */
    rig r;
    open_run(&r);
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    /* after the step: a phase's first step restarts the optimizer's settings */
    lattice_optim_params op = {.size = sizeof op};
    ck_assert_int_eq(lattice_optim_get_params(r.optim, &op), LATTICE_OK);
    op.clip_norm = 0.0f;
    ck_assert_int_eq(lattice_optim_set_params(r.optim, &op), LATTICE_OK);
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(r.model, "lm_head.weight", &ti), LATTICE_OK);
    ti.grad[0] = 1e20f;
    const float w0 = ti.data[0];
    ck_assert_int_eq(lattice_optim_step(r.optim, NULL), LATTICE_ERR_NON_FINITE);
    ck_assert_float_eq(ti.data[0], w0);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, path), LATTICE_OK);
    ck_assert_msg(lattice_trainer_load_checkpoint(r.trainer, path) == LATTICE_OK, "%s",
                  lattice_trainer_errmsg(r.trainer));
    /* a depth the caller changed between steps is not saved, since no load
     * would take it; set back, it is */
    const int depth = lattice_model_get_active_layers(r.model);
    ck_assert_int_eq(lattice_model_set_active_layers(r.model, depth + 1), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, path), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(r.trainer), "would not load"));
    ck_assert_int_eq(lattice_model_set_active_layers(r.model, depth), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, path), LATTICE_OK);
    rig_close(&r);
    remove(path);
}
END_TEST

/* A transposed tensor has the right element count and the wrong shape. */
START_TEST(test_transposed_shape)
{
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good);
    snprintf(bad, sizeof bad, "%s.bad", good);
    ckpt c;
    read_ckpt(good, &c);
    json_object *t, *shape;
    ck_assert(json_object_object_get_ex(c.header, "model.layers.0.mlp.down_proj.weight", &t));
    ck_assert(json_object_object_get_ex(t, "shape", &shape));
    int64_t a = json_object_get_int64(json_object_array_get_idx(shape, 0));
    int64_t b = json_object_get_int64(json_object_array_get_idx(shape, 1));
    ck_assert_int_ne(a, b);
    json_object_array_put_idx(shape, 0, json_object_new_int64(b));
    json_object_array_put_idx(shape, 1, json_object_new_int64(a));
    write_ckpt(bad, &c);
    free_ckpt(&c);
    rig r;
    open_run(&r);
    ck_assert_int_eq(lattice_trainer_load_checkpoint(r.trainer, bad), LATTICE_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(r.trainer), "shape"));
    ck_assert_int_eq(lattice_trainer_load_checkpoint(r.trainer, good), LATTICE_OK);
    rig_close(&r);
    remove(bad);
    remove(good);
}
END_TEST

/* A checkpoint of the default run after one step, loaded into a run set up
 * otherwise: refused, naming the part and both values, and nothing changes.
 * Before 0.4 the data and schedule cases loaded without a word, and the
 * others said only "... from another schedule or model". */
START_TEST(test_other_setup_refused)
{
    static const struct {
        variant v;
        const char *says;
    } cases[] = {
        {{.data_seed = 7}, "the checkpoint's data seed 0 differs from this run's 7"},
        {{.batch = 1}, "the checkpoint's data batch_size 2 differs from this run's 1"},
        {{.corpus = 1}, "the checkpoint's data corpus_hash 0x"},
        {{.corpus = 2}, "the checkpoint's data corpus_tokens 21 differs from this run's 24"},
        {{.steps = 4}, "the checkpoint's schedule phase 0 steps 3 differs from this run's 4"},
        {{.joint = 1}, "the checkpoint's schedule n_phases 2 differs from this run's 1"},
        {{.n_layers = 3}, "the checkpoint is of a model with a capacity of 2 layers "
                          "(model.trainable_layers) and this run's model has 3"},
        /* enums by their names: 1.0 until issue 48 said "placement 0 ... 1" */
        {{.post = 1}, "the checkpoint's model placement pre differs from this run's post"},
    };
    char path[96];
    saved_checkpoint(path, sizeof path);
    rig r;
    open_run_as(&r, &cases[_i].v);
    lattice_data_position before, after;
    lattice_data_get_position(r.data, &before);
    const lattice_status st = lattice_trainer_load_checkpoint(r.trainer, path);
    ck_assert_msg(st == LATTICE_ERR_FORMAT, "case %d: %s: %s", _i, lattice_status_string(st),
                  lattice_trainer_errmsg(r.trainer));
    ck_assert_msg(strstr(lattice_trainer_errmsg(r.trainer), cases[_i].says), "case %d: '%s'", _i,
                  lattice_trainer_errmsg(r.trainer));
    ck_assert_str_eq(lattice_last_error(), lattice_trainer_errmsg(r.trainer));
    lattice_data_get_position(r.data, &after);
    ck_assert(before.epoch == after.epoch && before.index == after.index);
    ck_assert_int_eq(lattice_optim_get_steps(r.optim), 0);
    rig_close(&r);
    remove(path);
}
END_TEST

/* LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA resumes on other data on purpose: the
 * data position is restored where it means the same documents (another
 * batch_size), else the iterator stays where it stands. */
START_TEST(test_other_data_on_purpose)
{
    char path[96];
    saved_checkpoint(path, sizeof path); /* one step of 2 rows: the iterator at index 2 */
    static const variant cases[] = {{.batch = 1}, {.data_seed = 7}, {.corpus = 2}};
    for (int i = 0; i < 3; i++) {
        rig r;
        open_run_as(&r, &cases[i]);
        lattice_data_position start = {0, 1}, pos;
        ck_assert_int_eq(lattice_data_set_position(r.data, &start), LATTICE_OK);
        ck_assert_int_eq(lattice_trainer_load_checkpoint_flags(r.trainer, path, 4u),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(r.trainer), "0x4"));
        const lattice_status st = lattice_trainer_load_checkpoint_flags(
            r.trainer, path, LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA);
        ck_assert_msg(st == LATTICE_OK, "case %d: %s", i, lattice_trainer_errmsg(r.trainer));
        ck_assert_int_eq(lattice_optim_get_steps(r.optim), 1);
        lattice_data_get_position(r.data, &pos);
        ck_assert_int_eq(pos.epoch, 0);
        ck_assert_int_eq(pos.index, i == 0 ? 2 : 1);
        ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
        rig_close(&r);
    }
    /* the same data with the flag: an ordinary resume */
    rig r;
    open_run(&r);
    ck_assert_int_eq(lattice_trainer_load_checkpoint_flags(r.trainer, path,
                                                           LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA),
                     LATTICE_OK);
    lattice_data_position pos;
    lattice_data_get_position(r.data, &pos);
    ck_assert_int_eq(pos.index, 2);
    rig_close(&r);
    remove(path);
}
END_TEST

/* A state that lacks what the run needs to know it resumes itself is
 * refused, naming it: model.setup (before 0.5: a residual scale 2 run
 * resumed at 1, a block_rescale run in a plain model), schedule.phases and
 * data (before 0.4: only the phase count was compared, the data not at
 * all), and the data origin of a run past its first step (0.1's). */
START_TEST(test_state_lacking_a_part_refused)
{
    static const struct {
        const char *obj, *key, *says;
    } cases[] = {
        {"model", "setup", "lacks model.setup"},
        {"schedule", "phases", "lacks schedule.phases"},
        {NULL, "data", "lacks the object 'data'"},
        {NULL, "data_origin_epoch", "has data_origin_index without data_origin_epoch"},
    };
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good);
    snprintf(bad, sizeof bad, "%s.old", good);
    for (size_t i = 0; i <= sizeof cases / sizeof cases[0]; i++) {
        ckpt c;
        read_ckpt(good, &c);
        json_object *s = state_of(&c), *obj = s;
        if (i == sizeof cases / sizeof cases[0]) { /* both origin keys: 0.1's */
            json_object_object_del(s, "data_origin_epoch");
            json_object_object_del(s, "data_origin_index");
        } else {
            if (cases[i].obj)
                ck_assert(json_object_object_get_ex(s, cases[i].obj, &obj));
            json_object_object_del(obj, cases[i].key);
        }
        set_state(&c, s);
        json_object_put(s);
        write_ckpt(bad, &c);
        free_ckpt(&c);
        rig r;
        open_run(&r);
        ck_assert_int_eq(lattice_trainer_load_checkpoint(r.trainer, bad), LATTICE_ERR_FORMAT);
        const char *says = i < sizeof cases / sizeof cases[0] ? cases[i].says
                                                               : "lacks data_origin_epoch and "
                                                                 "data_origin_index";
        ck_assert_msg(strstr(lattice_trainer_errmsg(r.trainer), says), "case %zu: '%s'", i,
                      lattice_trainer_errmsg(r.trainer));
        ck_assert_int_eq(lattice_optim_get_steps(r.optim), 0);
        rig_close(&r);
    }
    remove(bad);
    remove(good);
}
END_TEST

/* The run's state against the schedule's position (issue 48 part 4): the
 * active layers are the applied phase's, and the applied phase is the
 * current one, or the one before at a phase's first step. 1.0 until then
 * loaded each of these and trained on. */
START_TEST(test_run_state_against_position)
{
    static const struct {
        int64_t n_active, phase, step_in_phase, applied;
        const char *says;
    } cases[] = {
        {2, 0, 1, 0, "model.n_active 2 is not the 1 active layers of its applied phase 0"},
        {1, 1, 1, 0, "applied_phase 0 is before its schedule.phase 1, 1 steps into it"},
        {1, 0, 1, 1, "applied_phase 1 is after its schedule.phase 0"},
        {2, 1, 1, -1, NULL}, /* a run bound mid-phase and saved before its step: loads */
    };
    char good[96], bad[112];
    saved_checkpoint(good, sizeof good); /* grow: phase 0 (1 layer), 1 of its 3 steps */
    snprintf(bad, sizeof bad, "%s.bad", good);
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        ckpt c;
        read_ckpt(good, &c);
        json_object *s = state_of(&c), *md, *sc;
        ck_assert(json_object_object_get_ex(s, "model", &md));
        ck_assert(json_object_object_get_ex(s, "schedule", &sc));
        json_object_object_add(md, "n_active", json_object_new_int64(cases[i].n_active));
        json_object_object_add(sc, "phase", json_object_new_int64(cases[i].phase));
        json_object_object_add(sc, "step_in_phase", json_object_new_int64(cases[i].step_in_phase));
        json_object_object_add(s, "applied_phase", json_object_new_int64(cases[i].applied));
        set_state(&c, s);
        json_object_put(s);
        write_ckpt(bad, &c);
        free_ckpt(&c);
        rig r;
        open_run(&r);
        const lattice_status st = lattice_trainer_load_checkpoint(r.trainer, bad);
        if (cases[i].says) {
            ck_assert_msg(st == LATTICE_ERR_FORMAT, "case %zu: %s", i, lattice_status_string(st));
            ck_assert_msg(strstr(lattice_trainer_errmsg(r.trainer), cases[i].says),
                          "case %zu: '%s'", i, lattice_trainer_errmsg(r.trainer));
            ck_assert_int_eq(lattice_optim_get_steps(r.optim), 0);
        } else {
            ck_assert_msg(st == LATTICE_OK, "case %zu: %s", i, lattice_trainer_errmsg(r.trainer));
            ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
        }
        rig_close(&r);
    }
    /* at a phase's start the applied phase is the one before: a checkpoint
     * saved there resumes */
    rig r;
    open_run(&r);
    for (int k = 0; k < 3; k++)
        ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, bad), LATTICE_OK);
    rig_close(&r);
    open_run(&r);
    ck_assert_msg(lattice_trainer_load_checkpoint(r.trainer, bad) == LATTICE_OK, "%s",
                  lattice_trainer_errmsg(r.trainer));
    ck_assert_int_eq(lattice_trainer_step(r.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_active_layers(r.model), 2);
    rig_close(&r);
    remove(bad);
    remove(good);
}
END_TEST

/* The state against its own ranges, against itself and against this run's
 * data (issue 49): each value's range is its object's table's, and the
 * checks that relate two values live in one place. Each is refused by name,
 * and nothing changes. Before issue 49 the first two loaded, and the run
 * trained on from a position no run can reach. */
static const struct {
    const char *obj, *key;
    double value; /* an integer but for flops */
    const char *says;
} inconsistent[] = {
    {"schedule", "nonpad_in_phase", 1 << 20,
     "schedule.nonpad_in_phase 1048576 is more than its schedule.nonpad_tokens"},
    {"schedule", "step_in_phase", 0, "tokens into phase 0 before its first step"},
    {NULL, "data_index", 1 << 20,
     "the checkpoint's data position (pass 0, index 1048576) does not fit this data"},
    {NULL, "data_origin_index", 1 << 20,
     "the checkpoint's data origin (pass 0, index 1048576) does not fit this data"},
    {NULL, "data_epoch", -1, "state data_epoch -1 is out of range (0..1125899906842624)"},
    {"schedule", "flops", -1, "schedule.flops -1 is out of range (a finite number, 0..9223372036854775807)"},
    {"model", "n_active", 3, "the checkpoint's model.n_active 3 is out of range (1..2)"},
};

START_TEST(test_state_inconsistent_refused)
{
    char path[96];
    ckpt c;
    read_ckpt(saved_checkpoint(path, sizeof path), &c); /* grow: phase 0, 1 of its 3 steps */
    json_object *s = state_of(&c), *o = s;
    if (inconsistent[_i].obj)
        json_object_object_get_ex(s, inconsistent[_i].obj, &o);
    json_object_object_add(o, inconsistent[_i].key,
                           strcmp(inconsistent[_i].key, "flops")
                               ? json_object_new_int64((int64_t)inconsistent[_i].value)
                               : json_object_new_double(inconsistent[_i].value));
    set_state(&c, s);
    json_object_put(s);
    write_ckpt(path, &c);
    rig r;
    open_run(&r);
    lattice_data_position before, after;
    lattice_data_get_position(r.data, &before);
    const lattice_status st = lattice_trainer_load_checkpoint(r.trainer, path);
    lattice_data_get_position(r.data, &after);
    ck_assert_msg(st == LATTICE_ERR_FORMAT &&
                      strstr(lattice_trainer_errmsg(r.trainer), inconsistent[_i].says),
                  "%s: '%s'", lattice_status_string(st), lattice_trainer_errmsg(r.trainer));
    ck_assert(lattice_optim_get_steps(r.optim) == 0 && before.index == after.index);
    rig_close(&r);
    free_ckpt(&c);
    remove(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("checkpoint-hostile");
    TCase *tc = tcase_create("hostile checkpoints");
    tcase_add_test(tc, test_lr_shape_keys_required);
    tcase_add_loop_test(tc, test_state_fields, 0, (int)(sizeof state_fields / sizeof state_fields[0]));
    tcase_add_test(tc, test_tensor_values);
    tcase_add_test(tc, test_transposed_shape);
    tcase_add_test(tc, test_own_checkpoints_load);
    suite_add_tcase(s, tc);
    TCase *other = tcase_create("another setup");
    tcase_add_loop_test(other, test_other_setup_refused, 0, 8);
    tcase_add_test(other, test_other_data_on_purpose);
    tcase_add_test(other, test_state_lacking_a_part_refused);
    tcase_add_test(other, test_run_state_against_position);
    tcase_add_loop_test(other, test_state_inconsistent_refused, 0,
                        (int)(sizeof inconsistent / sizeof inconsistent[0]));
    suite_add_tcase(s, other);
    return tu_run(s);
}
