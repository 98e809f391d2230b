/* The trainer running every kind of phase: grow and freeze under either norm,
 * the boundary's flags, data rewound or read on, a non-finite teacher (the
 * step and a phase's start undone), cross-entropy alone and bad bindings; and
 * a run resumed from its checkpoint, bit-exact. */
#include "study_run.h"

#include <unistd.h>

START_TEST(test_trainer_grow)
{
    /* _i: pre, post */
    cb_state s = {0};
    rig w;
    study_open_cb(&w, _i ? LATTICE_NORM_PLACEMENT_POST : LATTICE_NORM_PLACEMENT_PRE,
                  LATTICE_SCHEDULE_PRESET_GROW, cb_teacher, &s);
    log_t l;
    study_bind(&w, &l, 4);
    long n;
    float *l3 = tu_copy_tensor(w.model, "model.layers.3.mlp.down_proj.weight", &n);
    /* first phase: layers 2-3 stay untouched */
    for (int i = 0; i < 6; i++)
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    ck_assert(tu_same_tensor(w.model, "model.layers.3.mlp.down_proj.weight", l3));
    ck_assert_int_eq(lattice_trainer_run(w.trainer), LATTICE_OK);
    ck_assert(!tu_same_tensor(w.model, "model.layers.3.mlp.down_proj.weight", l3));
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
    rig_close(&w);
}
END_TEST

START_TEST(test_trainer_freeze)
{
    /* _i: freeze pre, freeze post, grow pre, grow post. The paper's freeze arm
     * trains the newest block alone: its input (earlier blocks, the boundary
     * norm, which for post-norm is the entry norm below them) and the head stay
     * fixed. Grow trains them all. */
    const int post = _i & 1, freeze = _i < 2;
    rig w;
    study_open(&w, post ? LATTICE_NORM_PLACEMENT_POST : LATTICE_NORM_PLACEMENT_PRE,
               freeze ? LATTICE_SCHEDULE_PRESET_FREEZE : LATTICE_SCHEDULE_PRESET_GROW);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.model), LATTICE_OK);
    log_t l;
    study_bind(&w, &l, 0);
    for (int i = 0; i < 6; i++) /* phase 0: block 0 (layers 0-1) */
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    const char *boundary = post ? "model.entry_norm.weight" : "model.norm.weight";
    long n;
    float *bnd = tu_copy_tensor(w.model, boundary, &n);
    const int nt = lattice_model_get_n_tensors(w.model);
    float **before = calloc((size_t)nt, sizeof(*before));
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(w.model, i, &ti), LATTICE_OK);
        before[i] = tu_copy_tensor(w.model, ti.name, &n);
    }
    lattice_trainer_metrics m = {.size = sizeof(m)};
    ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK); /* phase 1's first step */
    ck_assert_int_eq(m.phase, 1);
    ck_assert_msg(tu_same_tensor(w.model, boundary, bnd) == freeze, "%s %s", boundary,
                  freeze ? "moved under freeze" : "did not train under grow");
    int earlier_moved = 0, newest_moved[4] = {0};
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(w.model, i, &ti);
        const int same = tu_same_tensor(w.model, ti.name, before[i]);
        switch (ti.group) {
        case LATTICE_MODEL_GROUP_EMBEDDING: /* frozen by init_student, as the paper */
            ck_assert_msg(same, "%s moved", ti.name);
            break;
        case LATTICE_MODEL_GROUP_STATISTIC: /* the plain model of this test has none */
            ck_abort_msg("%s: a statistic in a plain model", ti.name);
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
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_HEAD, -1, &tr);
    ck_assert_int_eq(tr, !freeze);
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &tr);
    ck_assert_int_eq(tr, !freeze);
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_EMBEDDING, -1, &tr);
    ck_assert_int_eq(tr, 0); /* as the caller (init_student) left it */
    ck_assert_int_eq(lattice_trainer_run(w.trainer), LATTICE_OK);
    ck_assert_int_eq(l.evals, 2); /* at each phase end */
    rig_close(&w);
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
    const int active[] = {2, 4, 4, 4}, from[] = {0, 2, 0, 0}, trains[] = {1, 0, 1, 1};
    lattice_schedule_phase phases[4];
    for (int i = 0; i < 4; i++) {
        lattice_schedule_phase_init(&phases[i]);
        phases[i].steps = 1;
        phases[i].active_layers = active[i];
        phases[i].train_from = from[i];
        phases[i].train_boundary = trains[i];
    }
    rig_options o;
    study_options(&o, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT);
    o.phases = phases;
    o.n_phases = 4;
    o.optim.warmup_steps = 1; /* phases of one step */
    rig w;
    tu_rig_open(&w, &o);
    log_t l;
    study_bind(&w, &l, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.model, 1);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.model, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    expect_boundary_trains(w.model, 1); /* restored */
    /* the caller freezes the head between phases that both train the boundary:
     * the trainer has nothing to restore and leaves it */
    lattice_model_set_trainable(w.model, LATTICE_MODEL_GROUP_HEAD, -1, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    int head;
    lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_HEAD, -1, &head);
    ck_assert_int_eq(head, 0);
    rig_close(&w);
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
     * batches); phases of one's own at their defaults (read on, train the
     * boundary) */
    static tape tp; /* 12 KiB: off the stack */
    memset(&tp, 0, sizeof tp);
    rig_options o;
    study_options(&o, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW);
    o.teacher = RIG_TEACHER_CALLBACK;
    o.teacher_fn = taping_teacher;
    o.teacher_user = &tp;
    o.rewind_data = _i == 1;
    lattice_schedule_phase own[2];
    for (int b = 0; b < 2; b++) {
        lattice_schedule_phase_init(&own[b]);
        own[b].steps = 6;
        own[b].active_layers = 2 * (b + 1);
    }
    if (_i == 2) {
        o.phases = own;
        o.n_phases = 2;
    }
    rig w;
    tu_rig_open(&w, &o);
    log_t l;
    study_bind(&w, &l, 0);
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
        lattice_model_get_trainable(w.model, LATTICE_MODEL_GROUP_HEAD, -1, &boundary);
        ck_assert_int_eq(boundary, 1); /* a phase at its defaults trains the head */
    }
    /* the batches within phase 0 were distinct, so equality above means replay */
    ck_assert(!same_batch(&tp, 1, 0));
    rig_close(&w);
}
END_TEST

START_TEST(test_trainer_lr_restart_length)
{
    /* A phase's optimizer restart runs the LR schedule over the phase: its
     * steps, in 64 bits (no clamp to INT32_MAX), or for a token budget the
     * steps it takes over full batches, rounded up. A token budget shorter
     * than warmup_steps is refused at create, as a step budget is. */
    rig_options o;
    study_options(&o, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_GROW);
    const int64_t per_step = (int64_t)o.model.max_batch * o.model.max_seq;
    lattice_schedule_phase ph[2];
    for (int b = 0; b < 2; b++) {
        lattice_schedule_phase_init(&ph[b]);
        ph[b].active_layers = 2 * (b + 1);
    }
    ph[0].steps = 3;
    ph[1].steps = 0;
    ph[1].tokens = 4 * per_step - 1; /* 4 full batches, the last one short */
    o.phases = ph;
    o.n_phases = 2;
    rig w;
    tu_rig_open(&w, &o);
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    ck_assert_int_eq(rig_bind(&w, &tp), LATTICE_OK);
    lattice_optim_params op = {.size = sizeof(op)};
    for (int i = 0; i < 3; i++)
        ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    lattice_optim_get_params(w.optim, &op);
    ck_assert_int_eq(op.total_steps, 3);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK); /* phase 1 starts */
    lattice_optim_get_params(w.optim, &op);
    ck_assert_int_eq(op.total_steps, 4);
    ck_assert_int_eq(lattice_optim_get_steps(w.optim), 1);
    rig_close(&w);

    o.optim.warmup_steps = 5;
    ph[0].steps = 6;
    tu_rig_open(&w, &o);
    ck_assert_int_eq(rig_bind(&w, &tp), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_msg(strstr(lattice_last_error(), "phase 1 restarts the optimizer for 4 steps (its "
                                                "token budget over full batches)") != NULL,
                  "%s", lattice_last_error());
    rig_close(&w);
}
END_TEST

START_TEST(test_trainer_non_finite_leaves_model)
{
    cb_state s = {0};
    s.nan_at = 3;
    rig w;
    study_open_cb(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, cb_teacher, &s);
    log_t l;
    study_bind(&w, &l, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    long n;
    float *q = tu_copy_tensor(w.model, "model.layers.1.self_attn.q_proj.weight", &n);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "teacher"));
    ck_assert(tu_same_tensor(w.model, "model.layers.1.self_attn.q_proj.weight", q));
    int ph;
    int64_t sp;
    lattice_schedule_get_position(w.schedule, &ph, &sp);
    ck_assert_int_eq(sp, 2);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK); /* can go on */
    free(q);
    rig_close(&w);
}
END_TEST

/* A step the schedule cannot count (its counters at what a checkpoint keeps)
 * is refused before the optimizer step: the weights, the schedule and the data
 * stay as they were. It went on, the schedule refused to count it and the run
 * never ended. */
START_TEST(test_trainer_step_the_schedule_cannot_count)
{
    cb_state s = {0};
    rig w;
    study_open_cb(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, cb_teacher, &s);
    log_t l;
    study_bind(&w, &l, 0);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_OK);
    lattice_schedule_counters full;
    ck_assert_int_eq(lattice_schedule_get_counters(w.schedule, &full), LATTICE_OK);
    full.tokens = full.nonpad_tokens = (int64_t)1 << 50;
    ck_assert_int_eq(lattice_schedule_set_position(w.schedule, 0, 1, &full), LATTICE_OK);
    long n;
    float *q = tu_copy_tensor(w.model, "model.layers.1.self_attn.q_proj.weight", &n);
    lattice_data_position before, after;
    lattice_data_get_position(w.data, &before);
    const int64_t optim_steps = lattice_optim_get_steps(w.optim);
    ck_assert_int_eq(lattice_trainer_step(w.trainer, NULL), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(w.trainer), "cannot count this step"));
    ck_assert(tu_same_tensor(w.model, "model.layers.1.self_attn.q_proj.weight", q));
    ck_assert_int_eq(lattice_optim_get_steps(w.optim), optim_steps);
    lattice_data_get_position(w.data, &after);
    ck_assert_int_eq(after.epoch, before.epoch);
    ck_assert_int_eq(after.index, before.index);
    int ph;
    int64_t sp;
    lattice_schedule_get_position(w.schedule, &ph, &sp);
    ck_assert_int_eq(sp, 1);
    ck_assert_int_eq(lattice_trainer_run(w.trainer), LATTICE_ERR_STATE); /* ends, refused */
    free(q);
    rig_close(&w);
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

static trainer_state state_of(rig *w)
{
    trainer_state x;
    memset(&x, 0, sizeof x);
    lattice_data_get_position(w->data, &x.pos);
    lattice_schedule_get_position(w->schedule, &x.phase, &x.step_in_phase);
    lattice_schedule_get_counters(w->schedule, &x.counters);
    x.active = lattice_model_get_active_layers(w->model);
    lattice_model_get_trainable(w->model, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &x.boundary);
    lattice_model_get_trainable(w->model, LATTICE_MODEL_GROUP_HEAD, -1, &x.head);
    for (int i = 0; i < 4; i++)
        lattice_model_get_trainable(w->model, LATTICE_MODEL_GROUP_LAYER, i, &x.trainable[i]);
    x.optim_steps = lattice_optim_get_steps(w->optim);
    x.lr = lattice_optim_get_lr(w->optim);
    return x;
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
    size_t n_end = 0;
    for (int run = 0; run < 2; run++) {
        cb_state s = {0};
        s.nan_at = run ? 7 : 0;
        rig_options o;
        study_options(&o, LATTICE_NORM_PLACEMENT_PRE, preset);
        o.teacher = RIG_TEACHER_CALLBACK;
        o.teacher_fn = cb_teacher;
        o.teacher_user = &s;
        o.block_init = init;
        o.rewind_data = 1;
        rig w;
        tu_rig_open(&w, &o);
        log_t l;
        study_bind(&w, &l, 0);
        for (int i = 0; i < 9; i++) {
            lattice_trainer_metrics m = {.size = sizeof(m)};
            if (run && i == 6) {
                const trainer_state before = state_of(&w);
                size_t n;
                float *wb = rig_weights(w.model, &n);
                ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_ERR_NON_FINITE);
                const trainer_state after = state_of(&w);
                ck_assert_int_eq(after.active, 2);
                ck_assert_int_eq(after.pos.epoch, before.pos.epoch);
                ck_assert_int_eq(after.pos.index, before.pos.index);
                ck_assert_int_eq(after.optim_steps, 6);
                ck_assert_msg(memcmp(&before, &after, sizeof before) == 0,
                              "the failed step changed the trainer's state");
                float *wa = rig_weights(w.model, &n);
                ck_assert_msg(memcmp(wa, wb, sizeof(float) * n) == 0,
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
        ck_assert_int_eq(lattice_model_get_active_layers(w.model), 4);
        end[run] = rig_weights(w.model, &n_end);
        rig_close(&w);
    }
    for (int i = 0; i < 9; i++) {
        ck_assert_msg(loss[0][i] == loss[1][i], "step %d: loss %.9g vs %.9g", i, loss[0][i],
                      loss[1][i]);
        ck_assert_msg(gnorm[0][i] == gnorm[1][i], "step %d: grad norm %.9g vs %.9g", i,
                      gnorm[0][i], gnorm[1][i]);
    }
    ck_assert(memcmp(end[0], end[1], sizeof(float) * n_end) == 0);
    free(end[0]);
    free(end[1]);
}
END_TEST

START_TEST(test_trainer_cross_entropy_only_and_bad_binding)
{
    rig w;
    study_open(&w, LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK);
    lattice_trainer *t;
    ck_assert_int_eq(lattice_trainer_create(w.model, w.teacher, NULL, w.data, w.optim, w.schedule,
                                            NULL, &t),
                     LATTICE_ERR_INVALID_ARGUMENT); /* a teacher needs a loss */
    lattice_schedule *big;
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, 5, 1, 3, 0, &big);
    ck_assert_int_eq(lattice_trainer_create(w.model, NULL, NULL, w.data, w.optim, big, NULL, &t),
                     LATTICE_ERR_INVALID_CONFIG); /* 5 layers > capacity 4 */
    lattice_schedule_destroy(big);
    ck_assert_int_eq(lattice_trainer_create(w.model, NULL, NULL, w.data, w.optim, w.schedule,
                                            NULL, &w.trainer),
                     LATTICE_OK); /* cross-entropy alone */
    lattice_trainer_metrics m = {.size = sizeof(m)};
    double before;
    ck_assert_int_eq(lattice_trainer_evaluate(w.trainer, &before), LATTICE_OK);
    while (!lattice_schedule_is_finished(w.schedule))
        ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK);
    ck_assert_double_eq(m.kl, 0.0);
    ck_assert(isfinite(m.val_ce) && m.val_ce < before);
    rig_close(&w);
}
END_TEST

/* ---- resuming from a checkpoint ----------------------------------------------- */

enum { CK_STEPS = 12 };

/* Losses of steps from..CK_STEPS-1 of a grow run; when stop_at > 0 the run is
 * checkpointed after stop_at steps, torn down, rebuilt and resumed. */
static void grow_losses(int stop_at, double *loss, const char *path, int corrupt_first, int rewind)
{
    rig_options o;
    study_options(&o, LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW);
    o.rewind_data = rewind;
    rig w;
    log_t l;
    lattice_trainer_metrics m = {.size = sizeof(m)};
    /* a rewinding run starts inside the corpus, so its shard's start is not the
     * data's: a resumed trainer can only know it from the checkpoint */
    const lattice_data_position shard = {1, 2};
    tu_rig_open(&w, &o);
    if (rewind)
        ck_assert_int_eq(lattice_data_set_position(w.data, &shard), LATTICE_OK);
    ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.model), LATTICE_OK);
    study_bind(&w, &l, 5);
    int step = 0;
    if (stop_at > 0) {
        for (; step < stop_at; step++)
            ck_assert_int_eq(lattice_trainer_step(w.trainer, &m), LATTICE_OK);
        ck_assert_msg(lattice_trainer_save_checkpoint(w.trainer, path) == LATTICE_OK, "%s",
                      lattice_trainer_errmsg(w.trainer));
        rig_close(&w);
        tu_rig_open(&w, &o);
        ck_assert_int_eq(lattice_teacher_init_student(w.teacher, w.model), LATTICE_OK);
        study_bind(&w, &l, 5);
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
    rig_close(&w);
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
    Suite *s = suite_create("trainer");
    TCase *tr = tcase_create("trainer");
    tcase_set_timeout(tr, 300);
    tcase_add_loop_test(tr, test_trainer_grow, 0, 2);
    tcase_add_loop_test(tr, test_trainer_freeze, 0, 4);
    tcase_add_test(tr, test_trainer_boundary_flags);
    tcase_add_loop_test(tr, test_trainer_rewind_data, 0, 3);
    tcase_add_test(tr, test_trainer_lr_restart_length);
    tcase_add_test(tr, test_trainer_non_finite_leaves_model);
    tcase_add_test(tr, test_trainer_step_the_schedule_cannot_count);
    tcase_add_loop_test(tr, test_trainer_non_finite_phase_start, 0, 6);
    tcase_add_test(tr, test_trainer_cross_entropy_only_and_bad_binding);
    suite_add_tcase(s, tr);
    TCase *ck = tcase_create("checkpoint");
    tcase_set_timeout(ck, 300);
    tcase_add_loop_test(ck, test_resume_is_bit_exact, 0, 6);
    suite_add_tcase(s, ck);
    return tu_run(s);
}
