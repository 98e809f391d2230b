/* The study's objects together: schedules and their presets, teachers,
 * student initialisation, and the trainer running every kind of phase. */
#include "testutil.h"

#include <stddef.h>
#include <unistd.h>

/* ---- schedules ------------------------------------------------------------------ */

static void expect_phases(lattice_schedule_preset preset, int n, const int *active,
                          const int *train_from, const int64_t *steps, const int *train_boundary)
{
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create_preset(preset, 3, 3, 100, LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, &s),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_n_phases(s), n);
    for (int i = 0; i < n; i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        ck_assert_int_eq(lattice_schedule_get_phase(s, i, &ph), LATTICE_OK);
        ck_assert_int_eq(ph.size, sizeof(lattice_schedule_phase));
        ck_assert_int_eq(ph.active_layers, active[i]);
        ck_assert_int_eq(ph.train_from, train_from[i]);
        ck_assert_int_eq(ph.steps, steps[i]);
        ck_assert_int_eq(ph.reset_optimizer, 1);
        ck_assert_int_eq(ph.train_boundary, train_boundary[i]);
        ck_assert_int_eq(ph.rewind_data, 0); /* no preset replays data unless asked */
    }
    ck_assert_int_eq(lattice_schedule_set_rewind_data(s, 1), LATTICE_OK);
    for (int i = 0; i < n; i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        lattice_schedule_get_phase(s, i, &ph);
        ck_assert_int_eq(ph.rewind_data, i > 0); /* the first phase has nothing to rewind to */
    }
    lattice_schedule_destroy(s);
}

START_TEST(test_presets)
{
    const int64_t s1[] = {100}, s2[] = {100, 100}, s3[] = {100, 100, 100};
    const int zero[] = {0, 0, 0}, nine[] = {9, 9, 9}, ones[] = {1, 1, 1};
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT, 1, nine, zero, s1, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_GROW, 3, (const int[]){3, 6, 9}, zero, s3, ones);
    /* freeze: after phase 0 the head and boundary norm are fixed with the earlier blocks */
    expect_phases(LATTICE_SCHEDULE_PRESET_FREEZE, 3, (const int[]){3, 6, 9}, (const int[]){0, 3, 6}, s3,
                  (const int[]){1, 0, 0});
    expect_phases(LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1, (const int[]){3}, zero, s1, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 2, nine, zero, s2, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 3, nine, zero, s3, ones);
    ck_assert_int_eq(lattice_schedule_set_rewind_data(NULL, 1), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* The phase struct grew in 0.2; a caller built against 0.1 passes the shorter one. */
enum { PHASE_SIZE_0_1 = offsetof(lattice_schedule_phase, rewind_data) };

START_TEST(test_phase_of_an_older_caller)
{
    lattice_schedule_phase def;
    lattice_schedule_phase_init(&def);
    ck_assert_int_eq(def.size, sizeof(lattice_schedule_phase));
    ck_assert_int_eq(def.rewind_data, 0);
    ck_assert_int_eq(def.train_boundary, 1);
    /* add: the bytes past a 0.1 struct are not the caller's and must not be read */
    lattice_schedule_phase old = def;
    old.size = PHASE_SIZE_0_1;
    old.steps = 7;
    old.active_layers = 2;
    old.rewind_data = 1;    /* stands for whatever lies past the caller's struct */
    old.train_boundary = 0;
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(s, &old), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(s, &old), LATTICE_OK);
    lattice_schedule_phase got;
    lattice_schedule_phase_init(&got);
    ck_assert_int_eq(lattice_schedule_get_phase(s, 1, &got), LATTICE_OK);
    ck_assert_int_eq(got.steps, 7);
    ck_assert_int_eq(got.active_layers, 2);
    ck_assert_int_eq(got.rewind_data, 0);    /* 0.1 behaviour: the data reads on */
    ck_assert_int_eq(got.train_boundary, 1); /* and the boundary trains */
    /* a 0.2 caller's fields are taken */
    lattice_schedule_phase now = def;
    now.rewind_data = 5; /* any non-zero */
    now.train_boundary = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &now), LATTICE_OK);
    lattice_schedule_get_phase(s, 2, &got);
    ck_assert_int_eq(got.rewind_data, 1);
    ck_assert_int_eq(got.train_boundary, 0);
    /* get: an output whose size is not this version's gets only the 0.1 fields */
    const size_t sizes[] = {0, PHASE_SIZE_0_1, 12345};
    for (int k = 0; k < 3; k++) {
        struct {
            lattice_schedule_phase phase;
            unsigned char beyond[16];
        } out;
        memset(&out, 0xA5, sizeof out);
        out.phase.size = sizes[k];
        ck_assert_int_eq(lattice_schedule_get_phase(s, 2, &out.phase), LATTICE_OK);
        ck_assert_int_eq(out.phase.size, PHASE_SIZE_0_1);
        ck_assert_int_eq(out.phase.steps, 1000);
        const unsigned char *bytes = (const unsigned char *)&out;
        for (size_t b = PHASE_SIZE_0_1; b < sizeof out; b++)
            ck_assert_int_eq(bytes[b], 0xA5);
    }
    lattice_schedule_destroy(s);
}
END_TEST

/* Active-layer tokens: grow = 9 layers x (2/3 of its tokens), as the paper. */
START_TEST(test_counters_and_matching)
{
    lattice_schedule *grow, *active;
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 3, 3, 10, 0, &grow);
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 3, 3, 10, 0, &active);
    int ended, ends = 0;
    while (!lattice_schedule_is_finished(grow)) {
        ck_assert_int_eq(lattice_schedule_record(grow, 64, 50, 1.0, &ended), LATTICE_OK);
        ends += ended;
    }
    ck_assert_int_eq(ends, 3);
    while (!lattice_schedule_is_finished(active))
        lattice_schedule_record(active, 64, 50, 1.0, NULL);
    lattice_schedule_counters a, b;
    lattice_schedule_get_counters(grow, &a);
    lattice_schedule_get_counters(active, &b);
    ck_assert_int_eq(a.steps, 30);
    ck_assert_int_eq(a.tokens, 30 * 64);
    ck_assert_int_eq(a.nonpad_tokens, 30 * 50);
    ck_assert_int_eq(a.active_layer_tokens, 50 * 10 * (3 + 6 + 9));
    ck_assert_int_eq(a.active_layer_tokens, b.active_layer_tokens);
    ck_assert_double_eq(a.flops, 30.0);
    ck_assert_int_eq(lattice_schedule_record(grow, 1, 1, 0, NULL), LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_schedule_set_position(grow, 1, 3, &a), LATTICE_OK);
    int ph;
    int64_t sp;
    lattice_schedule_get_position(grow, &ph, &sp);
    ck_assert_int_eq(ph, 1);
    ck_assert_int_eq(sp, 3);
    ck_assert_int_eq(lattice_schedule_set_position(grow, 1, 10, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_schedule_destroy(grow);
    lattice_schedule_destroy(active);
}
END_TEST

START_TEST(test_token_budget_and_bad_phases)
{
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = 0;
    ph.tokens = 100;
    ph.active_layers = 2;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_total_steps(s), -1);
    int ended = 0, steps = 0;
    while (!ended) {
        lattice_schedule_record(s, 40, 30, 0, &ended);
        steps++;
    }
    ck_assert_int_eq(steps, 4); /* 30, 60, 90, 120 >= 100 */
    ph.tokens = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.steps = 5;
    ph.train_from = 2;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.train_from = 0;
    ph.active_layers = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_schedule_add_phase(s, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_schedule_destroy(s);
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 0, 3, 10, 0, &s),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_schedule_create_preset((lattice_schedule_preset)42, 3, 3, 10, 0, &s),
                     LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* ---- a small world: backend, models, data -------------------------------------- */

enum { VOCAB = 257, DM = 16 };

typedef struct world {
    lattice_backend *be;
    lattice_norm *pre, *post;
    lattice_model *teacher_model, *student;
    lattice_teacher *teacher;
    lattice_distill *distill;
    lattice_data *data;
    lattice_optim *optim;
    lattice_schedule *schedule;
    lattice_trainer *trainer;
} world;

static const char *corpus =
    "The quick brown fox jumps over the lazy dog.\f"
    "A stitch in time saves nine.\f"
    "All that glitters is not gold.\f"
    "Where there is a will there is a way.\f"
    "Actions speak louder than words.\f"
    "Better late than never, but never late is better.\f"
    "Fortune favours the bold.\f"
    "Knowledge is power.";

static lattice_model *make_model(world *w, lattice_norm *norm, int layers, int active, uint64_t seed)
{
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = VOCAB;
    p.d_model = DM;
    p.n_layers = layers;
    p.n_active_layers = active;
    p.n_heads = 2;
    p.n_kv_heads = 1;
    p.head_dim = 8;
    p.d_ff = 32;
    p.max_batch = 4;
    p.max_seq = 48;
    p.seed = seed;
    lattice_model *m;
    ck_assert_int_eq(lattice_model_create(&p, norm, w->be, &m), LATTICE_OK);
    return m;
}

static void open_world(world *w, lattice_norm_placement student_pl, lattice_schedule_preset preset,
                       lattice_teacher *teacher_override)
{
    memset(w, 0, sizeof(*w));
    w->be = tu_backend(lattice_backend_has_blis() ? "blis" : "ref", 2);
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &w->pre), LATTICE_OK);
    ck_assert_int_eq(lattice_norm_create(student_pl, LATTICE_NORM_KIND_RMS, 1e-6f, &w->post), LATTICE_OK);
    w->teacher_model = make_model(w, w->pre, 3, 3, 11);
    w->student = make_model(w, w->post, 4, 4, 12);
    if (teacher_override)
        w->teacher = teacher_override;
    else
        ck_assert_int_eq(lattice_teacher_create_model(w->teacher_model, &w->teacher), LATTICE_OK);
    lattice_distill_params dp;
    lattice_distill_params_init(&dp);
    ck_assert_int_eq(lattice_distill_create(&dp, &w->distill), LATTICE_OK);
    char path[] = "/tmp/lattice-study-XXXXXX";
    int fd = mkstemp(path);
    ck_assert_int_ge(fd, 0);
    FILE *f = fdopen(fd, "w");
    fputs(corpus, f);
    fclose(f);
    lattice_data_params da;
    lattice_data_params_init(&da);
    da.batch_size = 4;
    da.seq_len = 48;
    da.val_fraction = 0.25f;
    da.seed = 5;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_data_create_text(path, &da, &w->data, err) == LATTICE_OK, "%s", err);
    remove(path);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f;
    op.min_lr = 3e-4f;
    op.warmup_steps = 2;
    ck_assert_int_eq(lattice_optim_create(w->student, &op, &w->optim), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_create_preset(preset, 2, 2, 6, LATTICE_SCHEDULE_BLOCK_INIT_RANDOM,
                                                    &w->schedule),
                     LATTICE_OK);
}

static void close_world(world *w)
{
    lattice_trainer_destroy(w->trainer);
    lattice_schedule_destroy(w->schedule);
    lattice_optim_destroy(w->optim);
    lattice_data_destroy(w->data);
    lattice_distill_destroy(w->distill);
    lattice_teacher_destroy(w->teacher);
    lattice_model_destroy(w->student);
    lattice_model_destroy(w->teacher_model);
    lattice_norm_destroy(w->pre);
    lattice_norm_destroy(w->post);
    lattice_backend_destroy(w->be);
}

static float *copy_tensor(lattice_model *m, const char *name, long *n)
{
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(m, name, &ti), LATTICE_OK);
    *n = (long)(ti.shape[0] * ti.shape[1]);
    float *c = malloc(sizeof(float) * *n);
    memcpy(c, ti.data, sizeof(float) * *n);
    return c;
}

static int same_tensor(lattice_model *m, const char *name, const float *ref)
{
    lattice_model_tensor_info ti;
    lattice_model_find_tensor(m, name, &ti);
    return memcmp(ti.data, ref, sizeof(float) * ti.shape[0] * ti.shape[1]) == 0;
}

/* ---- teachers ------------------------------------------------------------------ */

/* Documents of one token predict nothing: a token budget over them never
 * fills. Whether stepped by lattice_trainer_step or run, the phase is refused
 * with LATTICE_ERR_STATE once a whole pass over the training data has counted
 * no token; over the six documents and the four of issue 21, with batches of
 * 1 and 2 rows (a pass then straddles two shuffled epochs or not). */
START_TEST(test_token_budget_without_tokens)
{
    const int n_ids = _i < 2 ? 6 : 4, batch = _i % 2 ? 2 : 1;
    const int vocab = _i < 2 ? 5 : 13, seq = _i < 2 ? 4 : 6;
    lattice_backend *be = tu_backend("ref", 1);
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = vocab;
    p.d_model = 8;
    p.n_layers = 1;
    p.n_active_layers = 1;
    p.n_heads = 2;
    p.n_kv_heads = 1;
    p.head_dim = 4;
    p.d_ff = 8;
    p.max_batch = 2;
    p.max_seq = seq;
    lattice_norm *n;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n), LATTICE_OK);
    lattice_model *m;
    ck_assert_int_eq(lattice_model_create(&p, n, be, &m), LATTICE_OK);
    int32_t ids[6]; /* documents of only their boundary */
    for (int i = 0; i < n_ids; i++)
        ids[i] = vocab - 1;
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = vocab;
    dp.boundary_id = vocab - 1;
    dp.batch_size = batch;
    dp.seq_len = seq;
    lattice_data *d;
    ck_assert_int_eq(lattice_data_create_memory(ids, n_ids, &dp, &d, NULL), LATTICE_OK);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    lattice_optim *o;
    ck_assert_int_eq(lattice_optim_create(m, &op, &o), LATTICE_OK);
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = 0;
    ph.tokens = 10;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    lattice_trainer *t;
    ck_assert_int_eq(lattice_trainer_create(m, NULL, NULL, d, o, s, NULL, &t), LATTICE_OK);
    /* a pass is n_ids draws; it lies whole within 2 passes and a batch of draws */
    const int most = (2 * n_ids + batch) / batch + 1;
    lattice_status st = LATTICE_OK;
    int steps = 0;
    while (st == LATTICE_OK && steps <= most) {
        st = lattice_trainer_step(t, NULL);
        steps += st == LATTICE_OK;
    }
    ck_assert_int_eq(st, LATTICE_ERR_STATE);
    ck_assert_int_ge(steps, n_ids / batch); /* not before a pass */
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "counted none"));
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "budget of 10 counted tokens"));
    lattice_schedule_counters c;
    lattice_schedule_get_counters(s, &c);
    ck_assert_int_eq(c.steps, steps); /* the refused step was not taken */
    ck_assert_int_eq(lattice_trainer_step(t, NULL), LATTICE_ERR_STATE); /* and stays refused */
    ck_assert_int_eq(lattice_trainer_run(t), LATTICE_ERR_STATE);
    lattice_trainer_destroy(t);
    lattice_schedule_destroy(s);
    /* run from the start ends the same way */
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_create(m, NULL, NULL, d, o, s, NULL, &t), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_run(t), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "counted none"));
    lattice_schedule_get_counters(s, &c);
    ck_assert_int_le(c.steps, most);
    lattice_trainer_destroy(t);
    lattice_schedule_destroy(s);
    lattice_optim_destroy(o);
    lattice_data_destroy(d);
    lattice_model_destroy(m);
    lattice_norm_destroy(n);
    lattice_backend_destroy(be);
}
END_TEST

START_TEST(test_init_student)
{
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, NULL);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.student), LATTICE_OK);
    long n;
    float *te = copy_tensor(w.teacher_model, "model.embed_tokens.weight", &n);
    float *th = copy_tensor(w.teacher_model, "lm_head.weight", &n);
    float *tn = copy_tensor(w.teacher_model, "model.norm.weight", &n);
    ck_assert(same_tensor(w.student, "model.embed_tokens.weight", te));
    ck_assert(same_tensor(w.student, "lm_head.weight", th));
    ck_assert(same_tensor(w.student, "model.entry_norm.weight", tn)); /* post: entry norm */
    int tr;
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_EMBEDDING, -1, &tr);
    ck_assert_int_eq(tr, 0);
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_HEAD, -1, &tr);
    ck_assert_int_eq(tr, 1);
    /* a post-norm teacher has no final norm; a callback teacher has no weights */
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_teacher *self;
    lattice_teacher_create_model(w.student, &self);
    ck_assert_int_eq(lattice_teacher_init_student(self, w.teacher_model), LATTICE_ERR_INVALID_CONFIG);
    lattice_teacher_destroy(self);
    free(te);
    free(th);
    free(tn);
    close_world(&w);
}
END_TEST

typedef struct cb_state {
    int calls;
    int nan_at; /* call number that returns a NaN (0: never) */
    int fail;
} cb_state;

/* A deterministic callback teacher: prefers the token after the input token. */
static int cb_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab, float *z)
{
    cb_state *s = user;
    s->calls++;
    if (s->fail)
        return 1;
    for (int i = 0; i < batch * seq; i++)
        for (int v = 0; v < vocab; v++)
            z[(long)i * vocab + v] = v == (tokens[i] + 1) % vocab ? 4.0f : 0.0f;
    if (s->calls == s->nan_at)
        z[3] = NAN;
    return 0;
}

START_TEST(test_callback_teacher)
{
    cb_state s = {0};
    lattice_teacher *t;
    ck_assert_int_eq(lattice_teacher_create_callback(cb_teacher, &s, 10, 2, 3, &t), LATTICE_OK);
    const int32_t tok[6] = {1, 2, 3, 4, 5, 9};
    const float *z;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_OK);
    ck_assert_float_eq(z[5 * 10 + 0], 4.0f); /* after 9 comes 0 */
    ck_assert_float_eq(z[0 * 10 + 2], 4.0f);
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 3, 3, &z), LATTICE_ERR_INVALID_ARGUMENT);
    s.nan_at = 2;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_ERR_NON_FINITE);
    s.fail = 1;
    ck_assert_int_eq(lattice_teacher_logits(t, tok, 2, 3, &z), LATTICE_ERR_BACKEND);
    ck_assert_ptr_null(z);
    lattice_teacher_destroy(t);
    ck_assert_int_eq(lattice_teacher_create_callback(NULL, &s, 10, 2, 3, &t), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* ---- the trainer -------------------------------------------------------------- */

typedef struct log {
    int steps, evals, phase_ends;
    int active[64];
    double last_val, first_kl, last_kl;
} log_t;

static int on_step(void *user, const lattice_trainer_metrics *m)
{
    log_t *l = user;
    if (l->steps == 0)
        l->first_kl = m->kl;
    l->last_kl = m->kl;
    l->active[l->steps++] = m->active_layers;
    l->phase_ends += m->phase_end;
    return 0;
}

static int on_eval(void *user, const lattice_trainer_metrics *m)
{
    log_t *l = user;
    l->evals++;
    l->last_val = m->val_ce;
    return 0;
}

static void bind(world *w, log_t *l, int64_t eval_every)
{
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = eval_every;
    tp.on_step = on_step;
    tp.on_eval = on_eval;
    tp.user = l;
    memset(l, 0, sizeof(*l));
    ck_assert_int_eq(lattice_trainer_create(w->student, w->teacher, w->distill, w->data, w->optim,
                                            w->schedule, &tp, &w->trainer),
                     LATTICE_OK);
}

START_TEST(test_file_teacher)
{
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT, NULL);
    char dense[64], sparse[64], full[64];
    snprintf(dense, sizeof dense, "/tmp/lattice-logits-%d-d.safetensors", (int)getpid());
    snprintf(sparse, sizeof sparse, "/tmp/lattice-logits-%d-s.safetensors", (int)getpid());
    snprintf(full, sizeof full, "/tmp/lattice-logits-%d-f.safetensors", (int)getpid());
    const lattice_data_position start = {0, 0};
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 3, 0, dense), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 3, 5, sparse), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    ck_assert_int_eq(lattice_teacher_record(w.teacher, w.data, 6, VOCAB, full), LATTICE_OK);
    lattice_data_set_position(w.data, &start);
    lattice_teacher *fd, *fs, *ff;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_teacher_create_file(dense, &fd, err) == LATTICE_OK, "%s", err);
    ck_assert_msg(lattice_teacher_create_file(sparse, &fs, err) == LATTICE_OK, "%s", err);
    ck_assert_msg(lattice_teacher_create_file(full, &ff, err) == LATTICE_OK, "%s", err);
    ck_assert_int_eq(lattice_teacher_get_k(fd), 0);
    ck_assert_int_eq(lattice_teacher_get_k(fs), 5);
    ck_assert_int_eq(lattice_teacher_get_vocab_size(fs), VOCAB);
    /* the stored logits are the model teacher's, batch by batch, even out of order */
    lattice_data_batch b[3];
    int32_t toks[3][4 * 48];
    int seqs[3];
    for (int i = 0; i < 3; i++) {
        lattice_data_next(w.data, &b[i]);
        memcpy(toks[i], b[i].tokens, sizeof(int32_t) * b[i].batch * b[i].seq);
        seqs[i] = b[i].seq;
    }
    for (int i = 2; i >= 0; i--) {
        const float *zm, *zf;
        const int32_t *ix;
        const float *vx;
        ck_assert_int_eq(lattice_teacher_logits(fd, toks[i], 4, seqs[i], &zf), LATTICE_OK);
        ck_assert_int_eq(lattice_teacher_logits(w.teacher, toks[i], 4, seqs[i], &zm), LATTICE_OK);
        ck_assert_int_eq(memcmp(zf, zm, sizeof(float) * 4 * seqs[i] * VOCAB), 0);
        ck_assert_int_eq(lattice_teacher_topk(fs, toks[i], 4, seqs[i], &ix, &vx), LATTICE_OK);
        for (int c = 0; c < 4 * seqs[i]; c++) {
            const float *row = zm + (long)c * VOCAB;
            for (int e = 0; e < 5; e++) {
                ck_assert_float_eq(vx[c * 5 + e], row[ix[c * 5 + e]]);
                int above = 0; /* the e-th largest has exactly e values above it */
                for (int v = 0; v < VOCAB; v++)
                    above += row[v] > vx[c * 5 + e];
                ck_assert_int_le(above, e);
            }
        }
    }
    const float *z;
    int32_t other[4 * 48];
    for (int i = 0; i < 4 * 48; i++)
        other[i] = 7;
    ck_assert_int_eq(lattice_teacher_logits(fd, other, 4, 5, &z), LATTICE_ERR_NOT_FOUND);
    ck_assert_int_eq(lattice_teacher_logits(fs, toks[0], 4, seqs[0], &z), LATTICE_ERR_UNSUPPORTED);
    /* training on a top-k file with k = vocab is training on the dense teacher */
    double dense_loss[3], topk_loss[3];
    for (int pass = 0; pass < 2; pass++) {
        world v;
        open_world(&v, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT, pass ? ff : NULL);
        log_t l;
        bind(&v, &l, 0);
        for (int i = 0; i < 3; i++) {
            lattice_trainer_metrics m = {.size = sizeof(m)};
            ck_assert_msg(lattice_trainer_step(v.trainer, &m) == LATTICE_OK, "%s",
                          lattice_trainer_errmsg(v.trainer));
            (pass ? topk_loss : dense_loss)[i] = m.loss;
        }
        if (pass)
            v.teacher = NULL; /* ff is destroyed below */
        close_world(&v);
    }
    for (int i = 0; i < 3; i++)
        ck_assert_double_eq_tol(dense_loss[i], topk_loss[i], 1e-5);
    lattice_teacher_destroy(fd);
    lattice_teacher_destroy(fs);
    lattice_teacher_destroy(ff);
    /* files that are not logits files */
    ck_assert_int_eq(lattice_model_save(w.student, dense), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_create_file(dense, &fd, err), LATTICE_ERR_FORMAT);
    ck_assert_ptr_null(fd);
    ck_assert_ptr_nonnull(strstr(err, "tokens"));
    ck_assert_int_eq(lattice_teacher_create_file("/nonexistent", &fd, err), LATTICE_ERR_IO);
    remove(dense);
    remove(sparse);
    remove(full);
    close_world(&w);
}
END_TEST

START_TEST(test_trainer_grow)
{
    /* _i: pre, post */
    cb_state s = {0};
    lattice_teacher *cb;
    ck_assert_int_eq(lattice_teacher_create_callback(cb_teacher, &s, VOCAB, 4, 48, &cb), LATTICE_OK);
    world w;
    open_world(&w, _i ? LATTICE_NORM_PLACEMENT_POST : LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_GROW, cb);
    log_t l;
    bind(&w, &l, 4);
    long n;
    float *l3 = copy_tensor(w.student, "model.layers.3.mlp.down_proj.weight", &n);
    /* first phase: layers 2-3 stay untouched */
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    ck_assert(same_tensor(w.student, "model.layers.3.mlp.down_proj.weight", l3));
    ck_assert_int_eq(lattice_trainer_run(w.trainer), LATTICE_OK);
    ck_assert(!same_tensor(w.student, "model.layers.3.mlp.down_proj.weight", l3));
    ck_assert_int_eq(l.steps, 12);
    ck_assert_int_eq(s.calls, 12); /* the teacher ran once per batch */
    ck_assert_int_eq(l.active[0], 2);
    ck_assert_int_eq(l.active[5], 2);
    ck_assert_int_eq(l.active[6], 4);
    ck_assert_int_eq(l.phase_ends, 2);
    ck_assert_int_eq(l.evals, 4); /* steps 4, 6 (phase end), 8, 12 (both) */
    ck_assert(isfinite(l.last_val) && l.last_val > 0.0);
    ck_assert_msg(l.last_kl < l.first_kl, "KL %.3f -> %.3f", l.first_kl, l.last_kl);
    lattice_schedule_counters c;
    lattice_schedule_get_counters(w.schedule, &c);
    ck_assert_int_eq(c.steps, 12);
    ck_assert_int_gt(c.nonpad_tokens, 0);
    ck_assert_int_lt(c.nonpad_tokens, c.tokens); /* unpacked documents are padded */
    ck_assert_int_gt(c.active_layer_tokens, 2 * c.nonpad_tokens);
    ck_assert_int_lt(c.active_layer_tokens, 4 * c.nonpad_tokens);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_ERR_STATE);
    free(l3);
    close_world(&w);
}
END_TEST

START_TEST(test_trainer_freeze)
{
    /* _i: freeze pre, freeze post, grow pre, grow post. The paper's freeze arm
     * trains the newest block alone: its input (earlier blocks, the boundary
     * norm, which for post-norm is the entry norm below them) and the head stay
     * fixed. Grow trains them all. */
    const int post = _i & 1, freeze = _i < 2;
    world w;
    open_world(&w, post ? LATTICE_NORM_PLACEMENT_POST : LATTICE_NORM_PLACEMENT_PRE,
               freeze ? LATTICE_SCHEDULE_PRESET_FREEZE : LATTICE_SCHEDULE_PRESET_GROW, NULL);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.student), LATTICE_OK);
    log_t l;
    bind(&w, &l, 0);
    for (int i = 0; i < 6; i++) /* phase 0: block 0 (layers 0-1) */
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    const char *boundary = post ? "model.entry_norm.weight" : "model.norm.weight";
    long n;
    float *bnd = copy_tensor(w.student, boundary, &n);
    const int nt = lattice_model_get_n_tensors(w.student);
    float **before = calloc((size_t)nt, sizeof(*before));
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(w.student, i, &ti), LATTICE_OK);
        before[i] = copy_tensor(w.student, ti.name, &n);
    }
    lattice_trainer_metrics m = {.size = sizeof(m)};
    ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK); /* phase 1's first step */
    ck_assert_int_eq(m.phase, 1);
    ck_assert_msg(same_tensor(w.student, boundary, bnd) == freeze, "%s %s", boundary,
                  freeze ? "moved under freeze" : "did not train under grow");
    int earlier_moved = 0, newest_moved[4] = {0};
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(w.student, i, &ti);
        const int same = same_tensor(w.student, ti.name, before[i]);
        switch (ti.group) {
        case LATTICE_MODEL_GROUP_EMBEDDING: /* frozen by init_student, as the paper */
            ck_assert_msg(same, "%s moved", ti.name);
            break;
        case LATTICE_MODEL_GROUP_HEAD:
        case LATTICE_MODEL_GROUP_BOUNDARY_NORM:
            ck_assert_msg(same == freeze, "%s: same %d under %s", ti.name, same,
                          freeze ? "freeze" : "grow");
            break;
        case LATTICE_MODEL_GROUP_LAYER:
            if (ti.layer < 2 && freeze)
                ck_assert_msg(same, "%s of an earlier block moved under freeze", ti.name);
            if (ti.layer < 2)
                earlier_moved |= !same;
            else
                newest_moved[ti.layer] |= !same;
            break;
        }
        free(before[i]);
    }
    free(before);
    free(bnd);
    ck_assert_int_eq(earlier_moved, !freeze);
    ck_assert(newest_moved[2] && newest_moved[3]);
    int tr;
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_HEAD, -1, &tr);
    ck_assert_int_eq(tr, !freeze);
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &tr);
    ck_assert_int_eq(tr, !freeze);
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_EMBEDDING, -1, &tr);
    ck_assert_int_eq(tr, 0); /* as the caller (init_student) left it */
    ck_assert_int_eq(lattice_trainer_run(w.trainer), LATTICE_OK);
    ck_assert_int_eq(l.evals, 2); /* at each phase end */
    close_world(&w);
}
END_TEST

static void expect_boundary_trains(lattice_model *m, int expect)
{
    int head, bnd;
    lattice_model_get_trainable(m, LATTICE_MODEL_GROUP_HEAD, -1, &head);
    lattice_model_get_trainable(m, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &bnd);
    ck_assert_int_eq(head, expect);
    ck_assert_int_eq(bnd, expect);
}

/* train_boundary 0 freezes for its phase only; a phase that trains the boundary
 * again makes it trainable, and the trainer otherwise leaves the caller's flags. */
START_TEST(test_trainer_boundary_flags)
{
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, NULL);
    lattice_schedule_destroy(w.schedule);
    ck_assert_int_eq(lattice_schedule_create(&w.schedule), LATTICE_OK);
    lattice_optim_params op = {.size = sizeof(op)};
    ck_assert_int_eq(lattice_optim_get_params(w.optim, &op), LATTICE_OK);
    op.warmup_steps = 1; /* phases of one step */
    ck_assert_int_eq(lattice_optim_set_params(w.optim, &op), LATTICE_OK);
    const int active[] = {2, 4, 4, 4}, from[] = {0, 2, 0, 0}, trains[] = {1, 0, 1, 1};
    for (int i = 0; i < 4; i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        ph.steps = 1;
        ph.active_layers = active[i];
        ph.train_from = from[i];
        ph.train_boundary = trains[i];
        ck_assert_int_eq(lattice_schedule_add_phase(w.schedule, &ph), LATTICE_OK);
    }
    log_t l;
    bind(&w, &l, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.student, 1);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.student, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.student, 1); /* restored */
    /* the caller freezes the head between phases that both train the boundary:
     * the trainer has nothing to restore and leaves it */
    lattice_model_set_trainable(w.student, LATTICE_MODEL_GROUP_HEAD, -1, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    int head;
    lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_HEAD, -1, &head);
    ck_assert_int_eq(head, 0);
    close_world(&w);
}
END_TEST

/* A callback teacher that keeps the batches it was shown: the trainer's data, step by step. */
typedef struct tape {
    cb_state cb;
    int calls;
    int seq[16];
    int32_t tokens[16][4 * 48];
} tape;

static int taping_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab, float *z)
{
    tape *t = user;
    if (t->calls < 16) {
        t->seq[t->calls] = batch * seq;
        memcpy(t->tokens[t->calls], tokens, sizeof(int32_t) * (size_t)(batch * seq));
    }
    t->calls++;
    return cb_teacher(&t->cb, tokens, batch, seq, vocab, z);
}

static int same_batch(const tape *t, int a, int b)
{
    return t->seq[a] == t->seq[b] &&
           memcmp(t->tokens[a], t->tokens[b], sizeof(int32_t) * (size_t)t->seq[a]) == 0;
}

static int position_after(lattice_data_position a, lattice_data_position b)
{
    return a.epoch > b.epoch || (a.epoch == b.epoch && a.index > b.index);
}

START_TEST(test_trainer_rewind_data)
{
    /* _i: grow as the preset comes (reads on); with rewind on (replays phase 0's
     * batches); phases of a 0.1 caller whose bytes past its struct say "rewind"
     * (read on, as 0.1 did) */
    static tape tp; /* 12 KiB: off the stack */
    memset(&tp, 0, sizeof tp);
    lattice_teacher *cb;
    ck_assert_int_eq(lattice_teacher_create_callback(taping_teacher, &tp, VOCAB, 4, 48, &cb),
                     LATTICE_OK);
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, cb);
    if (_i == 1)
        ck_assert_int_eq(lattice_schedule_set_rewind_data(w.schedule, 1), LATTICE_OK);
    if (_i == 2) {
        lattice_schedule_destroy(w.schedule);
        ck_assert_int_eq(lattice_schedule_create(&w.schedule), LATTICE_OK);
        for (int b = 0; b < 2; b++) {
            lattice_schedule_phase ph;
            lattice_schedule_phase_init(&ph);
            ph.size = PHASE_SIZE_0_1;
            ph.steps = 6;
            ph.active_layers = 2 * (b + 1);
            ph.rewind_data = 1;
            ph.train_boundary = 0;
            ck_assert_int_eq(lattice_schedule_add_phase(w.schedule, &ph), LATTICE_OK);
        }
    }
    log_t l;
    bind(&w, &l, 0);
    lattice_data_position pos[12];
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
        lattice_data_get_position(w.data, &pos[i]);
    }
    ck_assert_int_eq(tp.calls, 12);
    if (_i == 1) {
        for (int k = 0; k < 6; k++) {
            ck_assert_msg(same_batch(&tp, k + 6, k), "phase 1's batch %d is not phase 0's", k);
            ck_assert_int_eq(pos[k + 6].epoch, pos[k].epoch);
            ck_assert_int_eq(pos[k + 6].index, pos[k].index);
        }
    } else {
        ck_assert(!same_batch(&tp, 6, 0)); /* new text */
        for (int k = 1; k < 12; k++)
            ck_assert(position_after(pos[k], pos[k - 1]));
        int boundary;
        lattice_model_get_trainable(w.student, LATTICE_MODEL_GROUP_HEAD, -1, &boundary);
        ck_assert_int_eq(boundary, 1); /* a 0.1 phase trains the head */
    }
    /* the batches within phase 0 were distinct, so equality above means replay */
    ck_assert(!same_batch(&tp, 1, 0));
    close_world(&w);
}
END_TEST

START_TEST(test_trainer_non_finite_leaves_model)
{
    cb_state s = {0};
    s.nan_at = 3;
    lattice_teacher *cb;
    lattice_teacher_create_callback(cb_teacher, &s, VOCAB, 4, 48, &cb);
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, cb);
    log_t l;
    bind(&w, &l, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    long n;
    float *q = copy_tensor(w.student, "model.layers.1.self_attn.q_proj.weight", &n);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "teacher"));
    ck_assert(same_tensor(w.student, "model.layers.1.self_attn.q_proj.weight", q));
    int ph;
    int64_t sp;
    lattice_schedule_get_position(w.schedule, &ph, &sp);
    ck_assert_int_eq(sp, 2);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK); /* can go on */
    free(q);
    close_world(&w);
}
END_TEST

/* The state a NaN on a phase's first step must leave as it was. */
typedef struct trainer_state {
    lattice_data_position pos;
    int phase, active, boundary, head, trainable[4];
    int64_t step_in_phase, optim_steps;
    float lr;
    lattice_schedule_counters counters;
} trainer_state;

static trainer_state state_of(world *w)
{
    trainer_state x;
    memset(&x, 0, sizeof x);
    lattice_data_get_position(w->data, &x.pos);
    lattice_schedule_get_position(w->schedule, &x.phase, &x.step_in_phase);
    lattice_schedule_get_counters(w->schedule, &x.counters);
    x.active = lattice_model_get_active_layers(w->student);
    lattice_model_get_trainable(w->student, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &x.boundary);
    lattice_model_get_trainable(w->student, LATTICE_MODEL_GROUP_HEAD, -1, &x.head);
    for (int i = 0; i < 4; i++)
        lattice_model_get_trainable(w->student, LATTICE_MODEL_GROUP_LAYER, i, &x.trainable[i]);
    x.optim_steps = lattice_optim_get_steps(w->optim);
    x.lr = lattice_optim_get_lr(w->optim);
    return x;
}

/* Every parameter of the student, concatenated. */
static float *all_weights(lattice_model *m, long *n)
{
    *n = (long)lattice_model_get_n_params(m);
    float *c = malloc(sizeof(float) * (size_t)*n), *p = c;
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        memcpy(p, ti.data, sizeof(float) * (size_t)(ti.shape[0] * ti.shape[1]));
        p += ti.shape[0] * ti.shape[1];
    }
    return c;
}

START_TEST(test_trainer_non_finite_phase_start)
{
    /* _i: block init (random, identity, copy) x preset (grow, freeze). A NaN
     * from the teacher on phase 1's first step (the 7th batch) must undo the
     * phase start (depth, new layers' weights, trainable flags, data rewind,
     * optimizer restart) and the batch read, so that the run then goes on
     * exactly as one that never saw the NaN. */
    const lattice_schedule_block_init init = (lattice_schedule_block_init)(_i % 3);
    const lattice_schedule_preset preset = _i < 3 ? LATTICE_SCHEDULE_PRESET_GROW : LATTICE_SCHEDULE_PRESET_FREEZE;
    double loss[2][9], gnorm[2][9];
    float *end[2];
    long n_end = 0;
    for (int run = 0; run < 2; run++) {
        cb_state s = {0};
        s.nan_at = run ? 7 : 0;
        lattice_teacher *cb;
        ck_assert_int_eq(lattice_teacher_create_callback(cb_teacher, &s, VOCAB, 4, 48, &cb),
                         LATTICE_OK);
        world w;
        open_world(&w, LATTICE_NORM_PLACEMENT_PRE, preset, cb);
        lattice_schedule_destroy(w.schedule);
        ck_assert_int_eq(lattice_schedule_create_preset(preset, 2, 2, 6, init, &w.schedule),
                         LATTICE_OK);
        ck_assert_int_eq(lattice_schedule_set_rewind_data(w.schedule, 1), LATTICE_OK);
        log_t l;
        bind(&w, &l, 0);
        for (int i = 0; i < 9; i++) {
            lattice_trainer_metrics m = {.size = sizeof(m)};
            if (run && i == 6) {
                const trainer_state before = state_of(&w);
                long n;
                float *wb = all_weights(w.student, &n);
                ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_ERR_NON_FINITE);
                const trainer_state after = state_of(&w);
                ck_assert_int_eq(after.active, 2);
                ck_assert_int_eq(after.pos.epoch, before.pos.epoch);
                ck_assert_int_eq(after.pos.index, before.pos.index);
                ck_assert_int_eq(after.optim_steps, 6);
                ck_assert_msg(memcmp(&before, &after, sizeof before) == 0,
                              "the failed step changed the trainer's state");
                float *wa = all_weights(w.student, &n);
                ck_assert_msg(memcmp(wa, wb, sizeof(float) * (size_t)n) == 0,
                              "the failed step changed the weights");
                free(wa);
                free(wb);
            }
            ck_assert_msg(lattice_trainer_step(w.trainer, &m) == LATTICE_OK, "step %d: %s", i,
                          lattice_trainer_errmsg(w.trainer));
            loss[run][i] = m.loss;
            gnorm[run][i] = m.grad_norm;
        }
        ck_assert_int_eq(s.calls, run ? 10 : 9);
        ck_assert_int_eq(lattice_model_get_active_layers(w.student), 4);
        end[run] = all_weights(w.student, &n_end);
        close_world(&w);
    }
    for (int i = 0; i < 9; i++) {
        ck_assert_msg(loss[0][i] == loss[1][i], "step %d: loss %.9g vs %.9g", i, loss[0][i],
                      loss[1][i]);
        ck_assert_msg(gnorm[0][i] == gnorm[1][i], "step %d: grad norm %.9g vs %.9g", i,
                      gnorm[0][i], gnorm[1][i]);
    }
    ck_assert(memcmp(end[0], end[1], sizeof(float) * (size_t)n_end) == 0);
    free(end[0]);
    free(end[1]);
}
END_TEST

START_TEST(test_trainer_cross_entropy_only_and_bad_binding)
{
    world w;
    open_world(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, NULL);
    lattice_trainer *t;
    ck_assert_int_eq(lattice_trainer_create(w.student, w.teacher, NULL, w.data, w.optim, w.schedule,
                                            NULL, &t),
                     LATTICE_ERR_INVALID_ARGUMENT); /* a teacher needs a loss */
    lattice_schedule *big;
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, 5, 1, 3, 0, &big);
    ck_assert_int_eq(lattice_trainer_create(w.student, NULL, NULL, w.data, w.optim, big, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG); /* 5 layers > capacity 4 */
    lattice_schedule_destroy(big);
    ck_assert_int_eq(lattice_trainer_create(w.student, NULL, NULL, w.data, w.optim, w.schedule,
                                            NULL, &w.trainer),
                     LATTICE_OK);
    lattice_trainer_metrics m = {.size = sizeof(m)};
    double before;
    ck_assert_int_eq(lattice_trainer_evaluate(w.trainer, &before), LATTICE_OK);
    while (!lattice_schedule_is_finished(w.schedule))
        ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK);
    ck_assert_double_eq(m.kl, 0.0);
    ck_assert(isfinite(m.val_ce) && m.val_ce < before);
    close_world(&w);
}
END_TEST

/* ---- checkpoints ------------------------------------------------------------ */

enum { CK_STEPS = 12 };

/* Losses of steps from..CK_STEPS-1 of a grow run; when stop_at > 0 the run is
 * checkpointed after stop_at steps, torn down, rebuilt and resumed. */
static void grow_losses(int stop_at, double *loss, const char *path, int corrupt_first, int rewind)
{
    world w;
    log_t l;
    lattice_trainer_metrics m = {.size = sizeof(m)};
    /* a rewinding run starts inside the corpus, so its shard's start is not the
     * data's: a resumed trainer can only know it from the checkpoint */
    const lattice_data_position shard = {1, 2};
    open_world(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, NULL);
    lattice_schedule_set_rewind_data(w.schedule, rewind);
    if (rewind)
        ck_assert_int_eq(lattice_data_set_position(w.data, &shard), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.student), LATTICE_OK);
    bind(&w, &l, 5);
    int step = 0;
    if (stop_at > 0) {
        for (; step < stop_at; step++)
            ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK);
        ck_assert_msg(lattice_trainer_save_checkpoint(w.trainer, path) == LATTICE_OK, "%s",
                      lattice_trainer_errmsg(w.trainer));
        close_world(&w);
        open_world(&w, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, NULL);
        lattice_schedule_set_rewind_data(w.schedule, rewind);
        ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.student), LATTICE_OK);
        bind(&w, &l, 5);
        if (corrupt_first) {
            /* a damaged copy is refused and changes nothing */
            char bad[256];
            snprintf(bad, sizeof bad, "%s.cut", path);
            FILE *in = fopen(path, "rb"), *out = fopen(bad, "wb");
            char buf[4096];
            size_t n = fread(buf, 1, sizeof buf, in);
            fwrite(buf, 1, n, out);
            fclose(in);
            fclose(out);
            lattice_status st = lattice_trainer_load_checkpoint(w.trainer, bad);
            ck_assert(st == LATTICE_ERR_FORMAT || st == LATTICE_ERR_IO);
            remove(bad);
        }
        ck_assert_msg(lattice_trainer_load_checkpoint(w.trainer, path) == LATTICE_OK, "%s",
                      lattice_trainer_errmsg(w.trainer));
    }
    for (; step < CK_STEPS; step++) {
        ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK);
        loss[step] = m.loss;
    }
    lattice_schedule_counters c;
    lattice_schedule_get_counters(w.schedule, &c);
    ck_assert_int_eq(c.steps, CK_STEPS);
    close_world(&w);
}

START_TEST(test_resume_is_bit_exact)
{
    /* _i % 3: stop inside phase 0, exactly at the phase boundary, inside phase 1;
     * _i / 3: the data reads on, or phase 1 rewinds to the run's start (at the
     * boundary the resumed trainer must know that start from the checkpoint) */
    const int stops[] = {4, 6, 8}, stop = stops[_i % 3], rewind = _i / 3;
    double ref[CK_STEPS], got[CK_STEPS];
    char path[64];
    snprintf(path, sizeof path, "/tmp/lattice-ckpt-%d.safetensors", (int)getpid());
    grow_losses(0, ref, NULL, 0, rewind);
    grow_losses(stop, got, path, _i == 1, rewind);
    for (int k = stop; k < CK_STEPS; k++)
        ck_assert_msg(memcmp(&ref[k], &got[k], sizeof(double)) == 0,
                      "step %d: %.17g uninterrupted, %.17g resumed", k + 1, ref[k], got[k]);
    remove(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("study");
    TCase *sc = tcase_create("schedule");
    tcase_add_test(sc, test_presets);
    tcase_add_test(sc, test_counters_and_matching);
    tcase_add_test(sc, test_token_budget_and_bad_phases);
    tcase_add_test(sc, test_phase_of_an_older_caller);
    tcase_add_loop_test(sc, test_token_budget_without_tokens, 0, 4);
    suite_add_tcase(s, sc);
    TCase *tt = tcase_create("teacher");
    tcase_add_test(tt, test_init_student);
    tcase_add_test(tt, test_callback_teacher);
    tcase_add_test(tt, test_file_teacher);
    suite_add_tcase(s, tt);
    TCase *tr = tcase_create("trainer");
    tcase_set_timeout(tr, 300);
    tcase_add_loop_test(tr, test_trainer_grow, 0, 2);
    tcase_add_loop_test(tr, test_trainer_freeze, 0, 4);
    tcase_add_test(tr, test_trainer_boundary_flags);
    tcase_add_loop_test(tr, test_trainer_rewind_data, 0, 3);
    tcase_add_test(tr, test_trainer_non_finite_leaves_model);
    tcase_add_loop_test(tr, test_trainer_non_finite_phase_start, 0, 6);
    tcase_add_test(tr, test_trainer_cross_entropy_only_and_bad_binding);
    suite_add_tcase(s, tr);
    TCase *ck = tcase_create("checkpoint");
    tcase_set_timeout(ck, 300);
    tcase_add_loop_test(ck, test_resume_is_bit_exact, 0, 6);
    suite_add_tcase(s, ck);
    return tu_run(s);
}
