/* Every failing call says why: one failure of each public function that
 * returns a status, with the reason it must leave in lattice_last_error() and,
 * where the call has a handle with a message of its own, in that message too.
 * check_error_table.py checks that the table names every such function. */
#include "testutil.h"

#include <pthread.h>

#define SENTINEL "primed-by-the-test"

/* The rig's run (a 2-layer student of vocabulary 5, 12 ids, a grow schedule,
 * no teacher), and beside it what the failures need: a schedule deeper than
 * the model, a loss, a teacher over the student itself, diagnostics. */
typedef struct world {
    rig r;
    /* the rig's objects under the short names the table below uses */
    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *m;
    lattice_data *d;
    lattice_optim *o;
    lattice_schedule *s, *big;
    lattice_distill *ds;
    lattice_teacher *tch;
    lattice_trainer *t;
    lattice_diag *dg;
} world;

static void open_world(world *w)
{
    static const int32_t ids[12] = {0, 1, 2, 3, 4, 1, 2, 3, 4, 0, 1, 4};
    rig_options o;
    rig_options_init(&o);
    o.model.vocab_size = 5;
    o.model.d_ff = 8;
    o.model.max_seq = 4;
    o.ids = ids;
    o.n_ids = 12;
    tu_rig_open(&w->r, &o);
    w->be = w->r.be;
    w->norm = w->r.norm;
    w->m = w->r.model;
    w->d = w->r.data;
    w->o = w->r.optim;
    w->s = w->r.schedule;
    w->t = w->r.trainer;
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 3, 1, 2,
                                                    LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, &w->big),
                     LATTICE_OK);
    lattice_distill_params kp;
    lattice_distill_params_init(&kp);
    ck_assert_int_eq(lattice_distill_create(&kp, &w->ds), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_create_model(w->m, &w->tch), LATTICE_OK);
    ck_assert_int_eq(lattice_diag_create(w->m, &w->dg), LATTICE_OK);
}

static void close_world(world *w)
{
    lattice_diag_destroy(w->dg);
    lattice_teacher_destroy(w->tch);
    lattice_distill_destroy(w->ds);
    lattice_schedule_destroy(w->big);
    rig_close(&w->r);
}

/* A failure of another call first, so that a call which records nothing
 * leaves this message behind and fails the check. */
static void prime(void)
{
    lattice_norm_placement pl;
    ck_assert_int_eq(lattice_norm_placement_from_name(SENTINEL, &pl), LATTICE_ERR_NOT_FOUND);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), SENTINEL));
}

static void expect_reason(const char *fn, const char *where, const char *msg, const char *reason)
{
    ck_assert_msg(msg && msg[0], "%s: empty %s", fn, where);
    ck_assert_msg(!strstr(msg, SENTINEL), "%s: %s is stale: '%s'", fn, where, msg);
    ck_assert_msg(strstr(msg, reason), "%s: %s '%s' lacks '%s'", fn, where, msg, reason);
}

/* EXPECT(function, status, reason, handle message or NULL, call) */
#define EXPECT(fn, status, reason, handle_msg, call)                                         \
    do {                                                                                      \
        prime();                                                                              \
        const lattice_status got_ = (call);                                                   \
        ck_assert_msg((int)got_ == (int)(status), #fn ": status %d, expected %d (%s)", (int)got_,       \
                      (int)(status), lattice_last_error());                                   \
        expect_reason(#fn, "lattice_last_error()", lattice_last_error(), reason);             \
        const char *hm_ = (handle_msg);                                                       \
        if (hm_)                                                                              \
            expect_reason(#fn, "the handle's message", hm_, reason);                          \
    } while (0)

enum { INV = LATTICE_ERR_INVALID_ARGUMENT, CFG = LATTICE_ERR_INVALID_CONFIG };

static int failing_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                           float *z)
{
    (void)user, (void)tokens, (void)batch, (void)seq, (void)vocab, (void)z;
    return 1;
}

START_TEST(test_every_failure_says_why)
{
    world w;
    open_world(&w);
    lattice_model *m = w.m;
    char err[LATTICE_ERRMSG_SIZE];
    const int32_t tokens[8] = {0, 1, 2, 3, 1, 2, 3, 0};
    const uint8_t mask[8] = {1, 1, 1, 1, 1, 1, 1, 1};
    float logits[8 * 5] = {0}, dlogits[8 * 5];
    lattice_distill_result dr;
    lattice_backend *be2;
    lattice_data *d2;
    lattice_model *m2;
    lattice_teacher *t2;
    lattice_schedule *s2;
    lattice_distill *ds2;
    lattice_trainer *tr2;
    lattice_diag *dg2;
    lattice_optim *o2;
    lattice_norm *n2;
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    const lattice_model_tensor_info *no_info = NULL;
    (void)no_info;
    lattice_model_tensor_info info;
    const float *hidden;

    /* backend */
    EXPECT(lattice_backend_create, LATTICE_ERR_NOT_FOUND, "no backend named 'nope'", NULL,
           lattice_backend_create("nope", &be2));
    EXPECT(lattice_backend_create_custom, INV, "lattice_backend_create_custom", NULL,
           lattice_backend_create_custom("mine", NULL, &be2));
    EXPECT(lattice_backend_set_threads, INV, "n_threads", NULL,
           lattice_backend_set_threads(w.be, 0));
    EXPECT(lattice_backend_set_parallel, INV, "mode 9 is not auto (0), ops (1) or rows (2)", NULL,
           lattice_backend_set_parallel(w.be, (lattice_backend_parallel)9));
    EXPECT(lattice_backend_set_attention_kernel, INV, "'avx9' names no attention kernel", NULL,
           lattice_backend_set_attention_kernel(w.be, "avx9"));
    EXPECT(lattice_backend_set_gemm_precision, INV, "'fp64' names no GEMM precision", NULL,
           lattice_backend_set_gemm_precision(w.be, "fp64"));
    EXPECT(lattice_backend_sgemm, INV, "lattice_backend_sgemm", NULL,
           lattice_backend_sgemm(w.be, 0, 0, 2, 2, 2, 1.0f, NULL, 2, NULL, 2, 0.0f, logits, 2));
    EXPECT(lattice_backend_get_info, INV, "lattice_backend_get_info", NULL,
           lattice_backend_get_info(w.be, NULL));

    /* norm */
    EXPECT(lattice_norm_create, INV, "placement", NULL,
           lattice_norm_create((lattice_norm_placement)99, LATTICE_NORM_KIND_RMS, 1e-6f, &n2));
    EXPECT(lattice_norm_set_residual_scale, INV, "scale", NULL,
           lattice_norm_set_residual_scale(w.norm, 0.0f));
    lattice_norm_placement pl;
    EXPECT(lattice_norm_placement_from_name, LATTICE_ERR_NOT_FOUND, "unknown placement 'sideways'",
           NULL, lattice_norm_placement_from_name("sideways", &pl));

    /* model: before any forward pass */
    EXPECT(lattice_model_backward, LATTICE_ERR_STATE, "forward", lattice_model_errmsg(m),
           lattice_model_backward(m));
    EXPECT(lattice_model_get_hidden, LATTICE_ERR_STATE, "no forward pass", lattice_model_errmsg(m),
           lattice_model_get_hidden(m, 0, &hidden));
    int fb = -1, fs = -1;
    EXPECT(lattice_model_get_forward_shape, LATTICE_ERR_STATE, "holds no forward's activations",
           lattice_model_errmsg(m), lattice_model_get_forward_shape(m, &fb, &fs));
    ck_assert_int_eq(fb, 0);
    ck_assert_int_eq(fs, 0);
    double ce_;
    EXPECT(lattice_model_cross_entropy_value, LATTICE_ERR_STATE, "forward pass first", lattice_model_errmsg(m),
           lattice_model_cross_entropy_value(m, tokens, NULL, &ce_, NULL));
    EXPECT(lattice_model_evaluate, INV, "data and val_ce", lattice_model_errmsg(m),
           lattice_model_evaluate(m, NULL, 0, &ce_));
    EXPECT(lattice_model_forward_inference, INV, "batch", lattice_model_errmsg(m),
           lattice_model_forward_inference(m, tokens, 7, 4));
    double lo_, hi_;
    EXPECT(lattice_model_params_set_option, INV, "massive_channel 1048576 not in 0..1048575",
           NULL, lattice_model_params_set_option(&mp, LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, 1 << 20));
    EXPECT(lattice_model_params_get_option, LATTICE_ERR_UNSUPPORTED, "no model option has the key 7",
           NULL, lattice_model_params_get_option(&mp, (lattice_model_option)7, &lo_));
    EXPECT(lattice_model_option_bounds, INV, "lo is NULL", NULL,
           lattice_model_option_bounds(LATTICE_MODEL_OPTION_BLOCK_NORM, NULL, &hi_));
    mp.d_model = 0;
    EXPECT(lattice_model_params_check, CFG, "d_model", err, lattice_model_params_check(&mp, err));
    EXPECT(lattice_model_estimate, CFG, "d_model", NULL,
           lattice_model_estimate(&mp, w.norm, NULL, NULL));
    EXPECT(lattice_model_create, CFG, "d_model", NULL, lattice_model_create(&mp, w.norm, w.be, &m2));
    EXPECT(lattice_model_create_from_file, LATTICE_ERR_IO, "/nonexistent/student", err,
           lattice_model_create_from_file("/nonexistent/student.safetensors", NULL, w.be, 2, 4,
                                          &m2, err));
    EXPECT(lattice_model_create_grown, INV, "n_layers 1 is below the model's 2 layers",
           lattice_model_errmsg(m), lattice_model_create_grown(m, 1, 0, 0, NULL, &m2));
    ck_assert_ptr_null(m2);
    EXPECT(lattice_model_get_params, INV, "lattice_model_get_params", lattice_model_errmsg(m),
           lattice_model_get_params(m, NULL));
    EXPECT(lattice_model_set_active_layers, INV, "active layers 7", lattice_model_errmsg(m),
           lattice_model_set_active_layers(m, 7));
    EXPECT(lattice_model_init_layer, INV, "layer 7", lattice_model_errmsg(m),
           lattice_model_init_layer(m, 7, 1));
    EXPECT(lattice_model_copy_layer, INV, "7", lattice_model_errmsg(m),
           lattice_model_copy_layer(m, 7, 0));
    EXPECT(lattice_model_zero_layer_outputs, INV, "7", lattice_model_errmsg(m),
           lattice_model_zero_layer_outputs(m, 7));
    EXPECT(lattice_model_set_trainable, INV, "7", lattice_model_errmsg(m),
           lattice_model_set_trainable(m, LATTICE_MODEL_GROUP_LAYER, 7, 1));
    EXPECT(lattice_model_get_trainable, INV, "trainable is NULL", lattice_model_errmsg(m),
           lattice_model_get_trainable(m, LATTICE_MODEL_GROUP_LAYER, 0, NULL));
    EXPECT(lattice_model_set_skip, INV, "skip", lattice_model_errmsg(m),
           lattice_model_set_skip(m, 0, 7));
    EXPECT(lattice_model_forward, INV, "batch", lattice_model_errmsg(m),
           lattice_model_forward(m, tokens, 7, 4));
    EXPECT(lattice_model_cross_entropy, INV, "targets and loss", lattice_model_errmsg(m),
           lattice_model_cross_entropy(m, tokens, mask, NULL, NULL));
    EXPECT(lattice_model_get_tensor, INV, "index out of range", lattice_model_errmsg(m),
           lattice_model_get_tensor(m, -1, &info));
    EXPECT(lattice_model_find_tensor, LATTICE_ERR_NOT_FOUND, "no tensor named 'no.such'",
           lattice_model_errmsg(m), lattice_model_find_tensor(m, "no.such", &info));
    EXPECT(lattice_model_save, LATTICE_ERR_IO, "/nonexistent/dir", lattice_model_errmsg(m),
           lattice_model_save(m, "/nonexistent/dir/m.safetensors"));
    EXPECT(lattice_model_load, LATTICE_ERR_IO, "/nonexistent/m", lattice_model_errmsg(m),
           lattice_model_load(m, "/nonexistent/m.safetensors"));
    EXPECT(lattice_model_save_config, LATTICE_ERR_IO, "/nonexistent/dir", lattice_model_errmsg(m),
           lattice_model_save_config(m, "/nonexistent/dir/config.json", 0));

    /* data */
    EXPECT(lattice_data_create_text, LATTICE_ERR_IO, "/nonexistent/corpus.txt", err,
           lattice_data_create_text("/nonexistent/corpus.txt", &dp, &d2, err));
    EXPECT(lattice_data_create_tokens, LATTICE_ERR_IO, "/nonexistent/ids.bin", err,
           lattice_data_create_tokens("/nonexistent/ids.bin", 2, &dp, &d2, err));
    dp.vocab_size = 3;
    dp.boundary_id = 2;
    EXPECT(lattice_data_create_memory, LATTICE_ERR_FORMAT, "3", err,
           lattice_data_create_memory(tokens, 8, &dp, &d2, err));
    EXPECT(lattice_data_get_params, INV, "lattice_data_get_params", lattice_data_errmsg(w.d),
           lattice_data_get_params(w.d, NULL));
    EXPECT(lattice_data_next, INV, "lattice_data_next", lattice_data_errmsg(w.d),
           lattice_data_next(w.d, NULL));
    lattice_data_batch b;
    EXPECT(lattice_data_get_val_batch, INV, "99", lattice_data_errmsg(w.d),
           lattice_data_get_val_batch(w.d, 99, &b));
    EXPECT(lattice_data_get_position, INV, "lattice_data_get_position", lattice_data_errmsg(w.d),
           lattice_data_get_position(w.d, NULL));
    EXPECT(lattice_data_set_position, INV, "lattice_data_set_position", lattice_data_errmsg(w.d),
           lattice_data_set_position(w.d, NULL));

    /* optimizer */
    EXPECT(lattice_optim_create, INV, "lattice_optim_create", NULL,
           lattice_optim_create(m, NULL, &o2));
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = -1.0f;
    EXPECT(lattice_optim_set_params, CFG, "learning rates", lattice_optim_errmsg(w.o),
           lattice_optim_set_params(w.o, &op));
    EXPECT(lattice_optim_get_params, INV, "lattice_optim_get_params", lattice_optim_errmsg(w.o),
           lattice_optim_get_params(w.o, NULL));
    EXPECT(lattice_optim_step, INV, "optim is NULL", NULL, lattice_optim_step(NULL, NULL));
    EXPECT(lattice_optim_reset, INV, "optim is NULL", NULL, lattice_optim_reset(NULL));

    /* schedule */
    EXPECT(lattice_schedule_create, INV, "lattice_schedule_create", NULL,
           lattice_schedule_create(NULL));
    EXPECT(lattice_schedule_create_preset, CFG, "n_blocks 0", NULL,
           lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 0, 1, 1, LATTICE_SCHEDULE_BLOCK_INIT_RANDOM,
                                          &s2));
    int n_phases;
    EXPECT(lattice_schedule_get_preset_phases, INV, "n_phases is NULL", NULL,
           lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 2, 1, 1,
                                              LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, NULL, 0, NULL));
    EXPECT(lattice_schedule_get_preset_phases, CFG, "n_blocks 0", NULL,
           lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 0, 1, 1,
                                              LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, NULL, 0,
                                              &n_phases));
    EXPECT(lattice_schedule_add_phase, INV, "phase is NULL",
           lattice_schedule_errmsg(w.s), lattice_schedule_add_phase(w.s, NULL));
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    EXPECT(lattice_schedule_get_phase, INV, "lattice_schedule_get_phase", lattice_schedule_errmsg(w.s),
           lattice_schedule_get_phase(w.s, 99, &ph));
    EXPECT(lattice_schedule_set_rewind_data, INV, "schedule is NULL", NULL,
           lattice_schedule_set_rewind_data(NULL, 1));
    EXPECT(lattice_schedule_get_position, INV, "lattice_schedule_get_position",
           lattice_schedule_errmsg(w.s), lattice_schedule_get_position(w.s, NULL, NULL));
    EXPECT(lattice_schedule_record, INV, "lattice_schedule_record", lattice_schedule_errmsg(w.s),
           lattice_schedule_record(w.s, -1, 0, 0.0, NULL));
    EXPECT(lattice_schedule_get_counters, INV, "lattice_schedule_get_counters",
           lattice_schedule_errmsg(w.s), lattice_schedule_get_counters(w.s, NULL));
    EXPECT(lattice_schedule_set_position, INV, "99", lattice_schedule_errmsg(w.s),
           lattice_schedule_set_position(w.s, 99, 0, NULL));

    /* distillation */
    lattice_distill_params kp;
    lattice_distill_params_init(&kp);
    kp.tau = 0.0f;
    EXPECT(lattice_distill_create, CFG, "tau 0", NULL, lattice_distill_create(&kp, &ds2));
    EXPECT(lattice_distill_get_params, INV, "lattice_distill_get_params",
           lattice_distill_errmsg(w.ds), lattice_distill_get_params(w.ds, NULL));
    EXPECT(lattice_distill_dense, INV, "bad size", lattice_distill_errmsg(w.ds),
           lattice_distill_dense(w.ds, logits, logits, tokens, mask, 8, 0, dlogits, &dr));
    EXPECT(lattice_distill_topk, INV, "k", lattice_distill_errmsg(w.ds),
           lattice_distill_topk(w.ds, logits, tokens, logits, 0, tokens, mask, 8, 5, dlogits,
                                &dr));

    EXPECT(lattice_distill_model, LATTICE_ERR_STATE, "no forward pass", lattice_distill_errmsg(w.ds),
           lattice_distill_model(w.ds, m, logits, 5, tokens, mask, &dr));

    /* teachers */
    EXPECT(lattice_teacher_create_model, INV, "lattice_teacher_create_model", NULL,
           lattice_teacher_create_model(NULL, &t2));
    EXPECT(lattice_teacher_create_callback, INV, "lattice_teacher_create_callback", NULL,
           lattice_teacher_create_callback(failing_teacher, NULL, 0, 1, 1, &t2));
    EXPECT(lattice_teacher_create_file, LATTICE_ERR_IO, "/nonexistent/topk", err,
           lattice_teacher_create_file("/nonexistent/topk.safetensors", &t2, err));
    const float *z;
    EXPECT(lattice_teacher_logits, INV, "batch", lattice_teacher_errmsg(w.tch),
           lattice_teacher_logits(w.tch, tokens, 7, 4, &z));
    EXPECT(lattice_teacher_init_student, INV, "lattice_teacher_init_student",
           lattice_teacher_errmsg(w.tch), lattice_teacher_init_student(w.tch, NULL));
    const int32_t *ti;
    const float *tv;
    EXPECT(lattice_teacher_topk, LATTICE_ERR_UNSUPPORTED, "dense teacher", lattice_teacher_errmsg(w.tch),
           lattice_teacher_topk(w.tch, tokens, 2, 4, &ti, &tv));
    EXPECT(lattice_teacher_record, INV, "data", lattice_teacher_errmsg(w.tch),
           lattice_teacher_record(w.tch, NULL, 1, 2, "/nonexistent/rec.safetensors"));

    /* diagnostics */
    EXPECT(lattice_diag_create, INV, "lattice_diag_create", NULL, lattice_diag_create(NULL, &dg2));
    lattice_diag_boundary_scale_result rs[4] = {{.size = sizeof(rs[0])}};
    EXPECT(lattice_diag_measure_boundary_scale, INV, "batch", lattice_diag_errmsg(w.dg),
           lattice_diag_measure_boundary_scale(w.dg, tokens, mask, 7, 4, NULL, 0, rs, 4));
    lattice_diag_block_removal_result rm = {.size = sizeof(rm)};
    EXPECT(lattice_diag_measure_block_removal, INV, "7", lattice_diag_errmsg(w.dg),
           lattice_diag_measure_block_removal(w.dg, tokens, tokens, mask, 2, 4, 7, 1, &rm));
    rm.size = 0;
    EXPECT(lattice_diag_measure_block_removal, INV, "out->size 0 is below", lattice_diag_errmsg(w.dg),
           lattice_diag_measure_block_removal(w.dg, tokens, tokens, mask, 2, 4, 0, 1, &rm));
    lattice_diag_loss_response_result resp = {.size = sizeof(resp)};
    EXPECT(lattice_diag_measure_loss_response, INV, "lattice_diag_measure_loss_response", NULL,
           lattice_diag_measure_loss_response(NULL, 0, 0, 1, 1, &resp));
    lattice_diag_attention_sinks_result sk[8] = {{.size = sizeof(sk[0])}};
    EXPECT(lattice_diag_measure_attention_sinks, INV, "at least 2 positions", lattice_diag_errmsg(w.dg),
           lattice_diag_measure_attention_sinks(w.dg, tokens, 1, 1, 0.5, sk, 8, NULL, 0));
    sk[0].size = sizeof(sk[0]) - 8;
    EXPECT(lattice_diag_measure_attention_sinks, INV, "out[0].size", lattice_diag_errmsg(w.dg),
           lattice_diag_measure_attention_sinks(w.dg, tokens, 1, 2, 0.5, sk, 8, NULL, 0));

    /* trainer */
    EXPECT(lattice_trainer_create, CFG, "grows to 3 layers but the model has 2", NULL,
           lattice_trainer_create(m, NULL, NULL, w.d, w.o, w.big, NULL, &tr2));
    EXPECT(lattice_trainer_step, INV, "trainer is NULL", NULL, lattice_trainer_step(NULL, NULL));
    EXPECT(lattice_trainer_run, INV, "trainer is NULL", NULL, lattice_trainer_run(NULL));
    EXPECT(lattice_trainer_set_collective, INV, "trainer is NULL", NULL,
           lattice_trainer_set_collective(NULL, NULL, NULL));
    EXPECT(lattice_trainer_collective_reduce_gradients, INV,
           "lattice_trainer_collective_reduce_gradients", NULL,
           lattice_trainer_collective_reduce_gradients(NULL, NULL, m, 1.0));
    EXPECT(lattice_trainer_evaluate, INV, "lattice_trainer_evaluate", lattice_trainer_errmsg(w.t),
           lattice_trainer_evaluate(w.t, NULL));
    EXPECT(lattice_trainer_save_checkpoint, INV, "path is NULL", lattice_trainer_errmsg(w.t),
           lattice_trainer_save_checkpoint(w.t, NULL));
    EXPECT(lattice_trainer_load_checkpoint, LATTICE_ERR_IO, "/nonexistent/ck",
           lattice_trainer_errmsg(w.t), lattice_trainer_load_checkpoint(w.t, "/nonexistent/ck"));
    EXPECT(lattice_trainer_load_checkpoint_flags, INV, "has bits no lattice_trainer_load_flag names",
           lattice_trainer_errmsg(w.t),
           lattice_trainer_load_checkpoint_flags(w.t, "/nonexistent/ck", 0x80u));

    close_world(&w);
}
END_TEST

/* The trainer's configuration errors each name their own reason. */
START_TEST(test_trainer_config_reasons)
{
    world w;
    open_world(&w);
    lattice_trainer *t;
    lattice_teacher *cb;
    ck_assert_int_eq(lattice_teacher_create_callback(failing_teacher, NULL, 6, 2, 4, &cb),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_create(w.m, cb, w.ds, w.d, w.o, w.s, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "teacher's vocab_size 6"));
    lattice_schedule *empty;
    ck_assert_int_eq(lattice_schedule_create(&empty), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, empty, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "no phases"));
    lattice_schedule_destroy(empty);
    /* pairs of settings that would train or measure other than asked */
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = 3; /* the world's data has no validation split */
    ck_assert_int_eq(lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, w.s, &tp, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(),
                                 "eval_every 3 asks for validation, but the data has no validation"));
    lattice_trainer_params_init(&tp);
    tp.eval_batches = 1;
    ck_assert_int_eq(lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, w.s, &tp, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "eval_batches 1 exceeds the data's 0"));
    lattice_optim_params op = {.size = sizeof(op)};
    ck_assert_int_eq(lattice_optim_get_params(w.o, &op), LATTICE_OK);
    op.warmup_steps = 3; /* the world's phases restart the optimizer for 2 steps */
    ck_assert_int_eq(lattice_optim_set_params(w.o, &op), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, w.s, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(),
                                 "phase 0 restarts the optimizer for 2 steps, fewer than its "
                                 "warmup_steps 3"));
    lattice_teacher_destroy(cb);
    close_world(&w);
}
END_TEST

/* Argument checks name the argument and the rule in words, never a C
 * expression ("failed check: !model || ..."). A representative call per kind
 * of check: NULL pointers, unset sizes, bindings, ranges, enums. */
static void expect_words(const char *what, lattice_status got, const char *words)
{
    const char *msg = lattice_last_error();
    ck_assert_msg(got == LATTICE_ERR_INVALID_ARGUMENT, "%s: status %d (%s)", what, (int)got, msg);
    ck_assert_msg(strstr(msg, words), "%s: '%s' lacks '%s'", what, msg, words);
    ck_assert_msg(!strstr(msg, "failed check") && !strstr(msg, "||") && !strstr(msg, "->size =="),
                  "%s: '%s' reads as C", what, msg);
}

START_TEST(test_arguments_in_words)
{
    world w;
    open_world(&w);
    lattice_trainer *t;
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.size = 0;
    expect_words("trainer without a loss for its teacher",
                 lattice_trainer_create(w.m, w.tch, NULL, w.d, w.o, w.s, NULL, &t),
                 "distill is NULL, but a teacher needs a distill loss");
    expect_words("trainer params never initialised",
                 lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, w.s, &tp, &t),
                 "params->size is 0: call lattice_trainer_params_init first");
    expect_words("trainer without data", lattice_trainer_create(w.m, NULL, NULL, NULL, w.o, w.s, NULL, &t),
                 "lattice_trainer_create: invalid argument: data is NULL");
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.size = 0;
    lattice_model *m;
    expect_words("model params never initialised", lattice_model_create(&mp, w.norm, w.be, &m),
                 "params->size is 0: call lattice_model_params_init first");
    lattice_model_params_init(&mp);
    expect_words("model without a backend", lattice_model_create(&mp, w.norm, NULL, &m),
                 "backend is NULL");
    lattice_distill_params kp;
    lattice_distill_params_init(&kp);
    kp.size = 0;
    lattice_distill *ds;
    expect_words("distill params never initialised", lattice_distill_create(&kp, &ds),
                 "call lattice_distill_params_init first");
    lattice_norm *n;
    expect_words("norm eps", lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, -1.0f, &n),
                 "eps -1 must be finite and > 0");
    expect_words("norm placement",
                 lattice_norm_create((lattice_norm_placement)9, LATTICE_NORM_KIND_RMS, 1e-6f, &n),
                 "placement 9 is none of");
    expect_words("residual scale of a pre norm", lattice_norm_set_residual_scale(w.norm, 2.0f),
                 "only a post norm scales its residual");
    expect_words("threads", lattice_backend_set_threads(w.be, 0), "n_threads 0 not in 1..4096");
    float a[6] = {0}, b[6] = {0}, c[4] = {0};
    expect_words("sgemm leading dimension",
                 lattice_backend_sgemm(w.be, 0, 0, 2, 2, 3, 1.0f, a, 1, b, 2, 0.0f, c, 2),
                 "lda 1 (A's rows: 3)");
    expect_words("sgemm without A", lattice_backend_sgemm(w.be, 0, 0, 2, 2, 3, 1.0f, NULL, 3, b, 2, 0.0f, c, 2),
                 "a (k > 0) is NULL");
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    expect_words("phase index", lattice_schedule_get_phase(w.s, 7, &ph),
                 "index 7 is not a phase of this schedule (0..1)");
    expect_words("recorded tokens", lattice_schedule_record(w.s, 4, 5, 0.0, NULL),
                 "tokens 4 and nonpad_tokens 5");
    const double losses[10] = {0};
    lattice_diag_loss_response_result r = {.size = sizeof(r)};
    expect_words("loss response window", lattice_diag_measure_loss_response(losses, 10, 2, 5, 0, &r),
                 "append_step 2 must leave a window of 5 losses");
    lattice_teacher *tch;
    expect_words("callback teacher shape",
                 lattice_teacher_create_callback(failing_teacher, NULL, 0, 1, 1, &tch),
                 "vocab_size 0, max_batch 1 and max_seq 1 must each be >= 1");
    expect_words("batch out", lattice_data_next(w.d, NULL), "lattice_data_next: invalid argument: batch is NULL");
    expect_words("model get_params", lattice_model_get_params(NULL, &mp), "model is NULL");
    close_world(&w);
}
END_TEST

/* ---- versioned out-structs: the library writes no more than the caller's size ---- */

typedef lattice_status (*getter_fn)(const void *handle, void *out);

/* A getter given a struct of exactly `size` bytes (heap, so that ASan sees
 * any write past it), a struct too small by one byte, size 0, and a struct
 * from a newer caller (larger): the first and the last succeed and say what
 * they wrote, the others are refused with nothing written. */
static void expect_honours_size(const char *what, getter_fn get, const void *handle, size_t size)
{
    unsigned char *exact = malloc(size);
    memset(exact, 0xA5, size);
    memcpy(exact, &size, sizeof(size));
    ck_assert_msg(get(handle, exact) == LATTICE_OK, "%s: %s", what, lattice_last_error());
    size_t written;
    memcpy(&written, exact, sizeof(written));
    ck_assert_uint_eq(written, size);
    free(exact);

    const size_t refused[] = {0, size - 1, sizeof(size_t)};
    for (int i = 0; i < 3; i++) {
        unsigned char *small = malloc(size);
        memset(small, 0xA5, size);
        memcpy(small, &refused[i], sizeof(size_t));
        prime();
        ck_assert_int_eq(get(handle, small), LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_msg(strstr(lattice_last_error(), "size"), "%s: '%s'", what, lattice_last_error());
        size_t kept;
        memcpy(&kept, small, sizeof(kept));
        ck_assert_uint_eq(kept, refused[i]);
        for (size_t b = sizeof(size_t); b < size; b++)
            ck_assert_int_eq(small[b], 0xA5);
        free(small);
    }

    const size_t newer = size + 32;
    unsigned char *big = malloc(newer);
    memset(big, 0xA5, newer);
    memcpy(big, &newer, sizeof(newer));
    ck_assert_int_eq(get(handle, big), LATTICE_OK);
    memcpy(&written, big, sizeof(written));
    ck_assert_uint_eq(written, size);
    for (size_t b = size; b < newer; b++)
        ck_assert_int_eq(big[b], 0xA5);
    free(big);
}

static lattice_status get_model(const void *h, void *out) { return lattice_model_get_params(h, out); }
static lattice_status get_data(const void *h, void *out) { return lattice_data_get_params(h, out); }
static lattice_status get_optim(const void *h, void *out) { return lattice_optim_get_params(h, out); }
static lattice_status get_distill(const void *h, void *out)
{
    return lattice_distill_get_params(h, out);
}
static lattice_status step(const void *h, void *out)
{
    return lattice_trainer_step((lattice_trainer *)h, out);
}

START_TEST(test_getters_honour_size)
{
    world w;
    open_world(&w);
    /* each is refused below its sizeof, the 1.0 rule */
    expect_honours_size("model params", get_model, w.m, sizeof(lattice_model_params));
    expect_honours_size("data params", get_data, w.d, sizeof(lattice_data_params));
    expect_honours_size("optim params", get_optim, w.o, sizeof(lattice_optim_params));
    expect_honours_size("distill params", get_distill, w.ds, sizeof(lattice_distill_params));
    /* the values arrive too */
    lattice_model_params *p = malloc(sizeof(*p));
    p->size = sizeof(*p);
    ck_assert_int_eq(lattice_model_get_params(w.m, p), LATTICE_OK);
    ck_assert_int_eq(p->vocab_size, 5);
    ck_assert_int_eq(p->n_layers, 2);
    free(p);
    /* a refused metrics struct refuses the step: the schedule does not move */
    lattice_schedule_counters before, after;
    lattice_schedule_get_counters(w.s, &before);
    expect_honours_size("metrics", step, w.t, sizeof(lattice_trainer_metrics));
    lattice_schedule_get_counters(w.s, &after);
    ck_assert_int_eq(after.steps, before.steps + 2); /* the exact and the newer struct */
    close_world(&w);
}
END_TEST

/* ---- every caller's size bounded from above too (issue 48 part 1) ---- */

/* A size no program sets: stack garbage, a pointer's bits. Each call that
 * reads a struct's size refuses it, naming the size ("never set"); before,
 * only sizes below ours were refused, and an unset size was taken as a newer
 * caller's. */
START_TEST(test_sizes_bounded_above)
{
    world w;
    open_world(&w);
    const size_t garbage[] = {4096, (size_t)0x7ffd12345678ULL, SIZE_MAX};
    for (int g = 0; g < 3; g++) {
        const size_t bad = garbage[g];
        /* inputs */
        lattice_model_params mp;
        lattice_model_params_init(&mp);
        mp.size = bad;
        lattice_model *m = NULL;
        EXPECT(lattice_model_create, INV, "never set", NULL,
               lattice_model_create(&mp, w.norm, w.be, &m));
        lattice_data_params dp;
        lattice_data_params_init(&dp);
        dp.size = bad;
        lattice_data *d = NULL;
        const int32_t ids[4] = {0, 1, 2, 3};
        EXPECT(lattice_data_create_memory, INV, "never set", NULL,
               lattice_data_create_memory(ids, 4, &dp, &d, NULL));
        lattice_optim_params op;
        lattice_optim_params_init(&op);
        op.size = bad;
        EXPECT(lattice_optim_set_params, INV, "never set", lattice_optim_errmsg(w.o),
               lattice_optim_set_params(w.o, &op));
        lattice_distill_params kp;
        lattice_distill_params_init(&kp);
        kp.size = bad;
        lattice_distill *ds = NULL;
        EXPECT(lattice_distill_create, INV, "never set", NULL, lattice_distill_create(&kp, &ds));
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        ph.size = bad;
        EXPECT(lattice_schedule_add_phase, INV, "never set", lattice_schedule_errmsg(w.big),
               lattice_schedule_add_phase(w.big, &ph));
        lattice_trainer_params tp;
        lattice_trainer_params_init(&tp);
        tp.size = bad;
        lattice_trainer *t = NULL;
        EXPECT(lattice_trainer_create, INV, "never set", NULL,
               lattice_trainer_create(w.m, NULL, NULL, w.d, w.o, w.s, &tp, &t));
        lattice_backend_ops ops;
        lattice_backend_ops_init(&ops);
        ops.size = bad;
        lattice_backend *be = NULL;
        EXPECT(lattice_backend_create_custom, INV, "never set", NULL,
               lattice_backend_create_custom("garbage", &ops, &be));
        /* outputs: nothing is written */
        lattice_backend_info info;
        memset(&info, 0x5A, sizeof info);
        info.size = bad;
        EXPECT(lattice_backend_get_info, INV, "never set", NULL,
               lattice_backend_get_info(w.be, &info));
        ck_assert_uint_eq(info.size, bad);
        ck_assert_int_eq((unsigned char)info.name[0], 0x5A);
        lattice_model_params got;
        memset(&got, 0x5A, sizeof got);
        got.size = bad;
        EXPECT(lattice_model_get_params, INV, "never set", lattice_model_errmsg(w.m),
               lattice_model_get_params(w.m, &got));
        ck_assert_uint_eq(got.size, bad);
        lattice_trainer_metrics tm;
        memset(&tm, 0, sizeof tm);
        tm.size = bad;
        lattice_schedule_counters before, after;
        lattice_schedule_get_counters(w.s, &before);
        EXPECT(lattice_trainer_step, INV, "never set", lattice_trainer_errmsg(w.t),
               lattice_trainer_step(w.t, &tm));
        lattice_schedule_get_counters(w.s, &after);
        ck_assert_int_eq(after.steps, before.steps); /* refused before the step */
        ck_assert_ptr_null(m);
        ck_assert_ptr_null(d);
        ck_assert_ptr_null(ds);
        ck_assert_ptr_null(t);
        ck_assert_ptr_null(be);
    }
    /* twice ours is the largest a later 1.x header can have */
    lattice_model_params *wide = calloc(2, sizeof(lattice_model_params));
    wide->size = 2 * sizeof(lattice_model_params);
    ck_assert_int_eq(lattice_model_get_params(w.m, wide), LATTICE_OK);
    ck_assert_uint_eq(wide->size, sizeof(lattice_model_params));
    free(wide);
    close_world(&w);
}
END_TEST

/* Counts a caller passes beside its buffers: one whose bytes cannot exist is
 * refused before any multiplication by it (which wrapped around: 2^62 + 1 ids
 * became a copy of 4 bytes, then a read of 2^62 + 1). */
START_TEST(test_counts_bounded)
{
    const int32_t ids[4] = {0, 1, 2, 3};
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = 4;
    dp.boundary_id = 0;
    lattice_data *d = NULL;
    char err[LATTICE_ERRMSG_SIZE];
    EXPECT(lattice_data_create_memory, INV, "cannot be in memory", NULL,
           lattice_data_create_memory(ids, ((int64_t)1 << 62) + 1, &dp, &d, err));
    ck_assert_ptr_null(d);
    lattice_distill_params kp;
    lattice_distill_params_init(&kp);
    kp.gamma = 0.0f;
    lattice_distill *ds = NULL;
    ck_assert_int_eq(lattice_distill_create(&kp, &ds), LATTICE_OK);
    float logits[8] = {0}, dl[8];
    const uint8_t mask[2] = {0, 0};
    lattice_distill_result res;
    EXPECT(lattice_distill_dense, INV, "cannot be in memory", lattice_distill_errmsg(ds),
           lattice_distill_dense(ds, logits, logits, NULL, mask, (int64_t)1 << 61, 4, dl, &res));
    lattice_distill_destroy(ds);
}
END_TEST

/* ---- raw pointers checked against the model ---- */

START_TEST(test_distill_model_checks_widths)
{
    world w;
    open_world(&w);
    const int32_t tokens[8] = {0, 1, 2, 3, 1, 2, 3, 0};
    ck_assert_int_eq(lattice_model_forward(w.m, tokens, 2, 4), LATTICE_OK);
    enum { N = 8, V = 5 };
    float teacher[N * (V + 1)];
    tu_rng r = {3};
    tu_fill(teacher, N * (V + 1), 2.0, &r);
    lattice_distill_result res;
    /* a teacher one wider than the student: dense would read it out of step */
    ck_assert_int_eq(lattice_distill_model(w.ds, w.m, teacher, V + 1, tokens, NULL, &res),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "6 wide"));
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "vocab_size is 5"));
    ck_assert_str_eq(lattice_distill_errmsg(w.ds), lattice_last_error());
    ck_assert_int_eq(lattice_distill_model(w.ds, w.m, teacher, V - 1, tokens, NULL, &res),
                     LATTICE_ERR_INVALID_ARGUMENT);
    /* the right width: the same loss and gradient as dense over the model's buffers */
    ck_assert_int_eq(lattice_distill_model(w.ds, w.m, teacher, V, tokens, NULL, &res), LATTICE_OK);
    float grad[N * V], want_grad[N * V];
    memcpy(grad, lattice_model_get_dlogits(w.m), sizeof(grad));
    lattice_distill_result want;
    ck_assert_int_eq(lattice_distill_dense(w.ds, lattice_model_get_logits(w.m), teacher, tokens, NULL,
                                           N, V, want_grad, &want),
                     LATTICE_OK);
    ck_assert_double_eq_tol(res.loss, want.loss, 1e-12);
    ck_assert_double_eq_tol(res.kl, want.kl, 1e-12);
    for (int i = 0; i < N * V; i++)
        ck_assert_float_eq_tol(grad[i], want_grad[i], 1e-7f);
    close_world(&w);
}
END_TEST

/* Two threads failing at once each read their own reason. */
static void *fail_repeatedly(void *arg)
{
    const char *name = arg;
    for (int i = 0; i < 20000; i++) {
        lattice_norm_placement pl;
        if (lattice_norm_placement_from_name(name, &pl) != LATTICE_ERR_NOT_FOUND)
            return "wrong status";
        if (!strstr(lattice_last_error(), name))
            return "another thread's message";
    }
    return NULL;
}

START_TEST(test_threads_do_not_mix)
{
    lattice_norm_placement pl;
    lattice_norm_placement_from_name("main-thread", &pl);
    pthread_t a, b;
    void *ra, *rb;
    ck_assert_int_eq(pthread_create(&a, NULL, fail_repeatedly, "thread-one"), 0);
    ck_assert_int_eq(pthread_create(&b, NULL, fail_repeatedly, "thread-two"), 0);
    pthread_join(a, &ra);
    pthread_join(b, &rb);
    ck_assert_msg(!ra, "thread one: %s", (const char *)ra);
    ck_assert_msg(!rb, "thread two: %s", (const char *)rb);
    /* this thread's own message is untouched by theirs */
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "main-thread"));
}
END_TEST

int main(void)
{
    Suite *s = suite_create("errors");
    TCase *tc = tcase_create("errors");
    tcase_add_test(tc, test_every_failure_says_why);
    tcase_add_test(tc, test_trainer_config_reasons);
    tcase_add_test(tc, test_arguments_in_words);
    tcase_add_test(tc, test_threads_do_not_mix);
    tcase_add_test(tc, test_getters_honour_size);
    tcase_add_test(tc, test_sizes_bounded_above);
    tcase_add_test(tc, test_counts_bounded);
    tcase_add_test(tc, test_distill_model_checks_widths);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}
