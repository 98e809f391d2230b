/* The trainer: one step (phase start, data, teacher, loss, backward, update)
 * and whole runs; over ranks, and validation, in trainer_collective.c. */
#include "trainer_impl.h"
#include "setup.h"

#include "data_access.h"
#include "distill_access.h"
#include "model_access.h"
#include "optim_access.h"
#include "schedule_access.h"
#include "teacher_access.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

void lattice_trainer_params_init(lattice_trainer_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
}

/* The steps a phase's optimizer restart runs the LR schedule over: its step
 * budget, or for a token budget the steps that budget takes without padding,
 * ceil(tokens / (batch_size x seq_len)); padding makes such a phase longer,
 * and its last steps keep the schedule's final LR. 0 when the data's batch
 * has no positions. */
static int64_t phase_lr_steps(const lattice_data *data, const lattice_schedule_phase *ph)
{
    if (ph->steps > 0)
        return ph->steps;
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    if (lattice_data_get_params(data, &dp) != LATTICE_OK)
        return 0;
    const int64_t per_step = (int64_t)dp.batch_size * dp.seq_len;
    return per_step > 0 ? ph->tokens / per_step + (ph->tokens % per_step != 0) : 0;
}

/* Settings that each pass on their own but together would train, or measure,
 * other than the caller asked, with no error at any step. */
static lattice_status check_run(lattice_data *data, lattice_optim *optim,
                                lattice_schedule *schedule, const lattice_trainer_params *params)
{
    lattice_optim_params op = {.size = sizeof(op)};
    lattice_optim_get_params(optim, &op);
    for (int i = 0; i < lattice_schedule_get_n_phases(schedule); i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        lattice_schedule_get_phase(schedule, i, &ph);
        /* the phase's restart makes its step count the optimizer's total_steps */
        const int64_t lr_steps = phase_lr_steps(data, &ph);
        if (ph.reset_optimizer && lr_steps > 0 && op.warmup_steps > lr_steps)
            return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                                 "lattice_trainer_create: phase %d restarts the optimizer for "
                                 "%lld steps%s, fewer than its warmup_steps %lld: the learning "
                                 "rate would never leave warmup (make warmup_steps at most the "
                                 "shortest such phase's steps)",
                                 i, (long long)lr_steps,
                                 ph.steps > 0 ? "" : " (its token budget over full batches)",
                                 (long long)op.warmup_steps);
    }
    const int64_t n_val = lattice_data_get_n_val_batches(data);
    if (params->eval_every < 0 || params->eval_batches < 0)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: eval_every %lld and eval_batches %lld must "
                             "be >= 0 (0: at phase ends only; 0: every validation batch)",
                             (long long)params->eval_every, (long long)params->eval_batches);
    if (params->eval_every > 0 && n_val == 0)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: eval_every %lld asks for validation, but the "
                             "data has no validation documents (give the data a val_fraction "
                             "above 0, or set eval_every to 0)",
                             (long long)params->eval_every);
    if (params->eval_batches > n_val)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: eval_batches %lld exceeds the data's %lld "
                             "validation batches (0 uses all of them)",
                             (long long)params->eval_batches, (long long)n_val);
    return LATTICE_OK;
}

/* What a trainer binds it borrows (handle.h): their destroys wait for the
 * trainer's. Its optimizer borrows the model again, a teacher its own model. */
static void unborrow_all(lattice_model *model, lattice_teacher *teacher, lattice_distill *distill,
                         lattice_data *data, lattice_optim *optim, lattice_schedule *schedule)
{
    lattice__model_unborrow(model);
    lattice__teacher_unborrow(teacher);
    lattice__distill_unborrow(distill);
    lattice__data_unborrow(data);
    lattice__optim_unborrow(optim);
    lattice__schedule_unborrow(schedule);
}

static lattice_status borrow_all(lattice_model *model, lattice_teacher *teacher,
                                 lattice_distill *distill, lattice_data *data,
                                 lattice_optim *optim, lattice_schedule *schedule)
{
    static const char fn[] = "lattice_trainer_create";
    lattice_status st = lattice__model_borrow(model, fn);
    if (st != LATTICE_OK)
        return st;
    if (teacher && (st = lattice__teacher_borrow(teacher, fn)) != LATTICE_OK)
        goto no_teacher;
    if (distill && (st = lattice__distill_borrow(distill, fn)) != LATTICE_OK)
        goto no_distill;
    if ((st = lattice__data_borrow(data, fn)) != LATTICE_OK)
        goto no_data;
    if ((st = lattice__optim_borrow(optim, fn)) != LATTICE_OK)
        goto no_optim;
    if ((st = lattice__schedule_borrow(schedule, fn)) != LATTICE_OK)
        goto no_schedule;
    return LATTICE_OK;
no_schedule:
    lattice__optim_unborrow(optim);
no_optim:
    lattice__data_unborrow(data);
no_data:
    lattice__distill_unborrow(distill);
no_distill:
    lattice__teacher_unborrow(teacher);
no_teacher:
    lattice__model_unborrow(model);
    return st;
}

/* lattice_trainer_create's checks of the objects against each other: the
 * first failing status, its reason in lattice_last_error(). */
static lattice_status check_create(lattice_model *model, lattice_teacher *teacher,
                                   const lattice_distill *distill,
                                   lattice_data *data, lattice_optim *optim,
                                   lattice_schedule *schedule, const lattice_trainer_params *tp,
                                   lattice_model_params *mpo)
{
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_data_params dp = {.size = sizeof(dp)};
    lattice_model_get_params(model, &mp);
    lattice_data_get_params(data, &dp);
    *mpo = mp;
    if (dp.vocab_size > mp.vocab_size)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the data's vocab_size %d exceeds the model's %d",
                             dp.vocab_size, mp.vocab_size);
    /* with a collective from the start, set_collective checks each rank's share */
    if (dp.batch_size > mp.max_batch && !tp->collective)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the data's batch_size %d exceeds the model's max_batch %d",
                             dp.batch_size, mp.max_batch);
    if (dp.seq_len > mp.max_seq)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the data's seq_len %d exceeds the model's max_seq %d",
                             dp.seq_len, mp.max_seq);
    if (teacher && lattice_teacher_get_vocab_size(teacher) != mp.vocab_size)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the teacher's vocab_size %d differs from the model's %d",
                             lattice_teacher_get_vocab_size(teacher), mp.vocab_size);
    lattice_distill_params kp = {.size = sizeof(kp)};
    if (teacher && distill && lattice_teacher_get_k(teacher) > 0 &&
        lattice_distill_get_params(distill, &kp) == LATTICE_OK &&
        kp.direction == LATTICE_DISTILL_KL_REVERSE)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: a top-k teacher (k %d) with reverse KL: "
                             "reverse KL needs the teacher's dense logits (p is 0 off its top k)",
                             lattice_teacher_get_k(teacher));
    if (lattice__optim_model(optim) != model)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "lattice_trainer_create: invalid argument: the optimizer was created "
                             "for another model: its steps would update that one's weights");
    if (lattice_schedule_get_n_phases(schedule) < 1)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the schedule has no phases");
    if (lattice_schedule_get_max_layers(schedule) > mp.n_layers)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the schedule grows to %d layers but the model has %d",
                             lattice_schedule_get_max_layers(schedule), mp.n_layers);
    return check_run(data, optim, schedule, tp);
}

/* With a collective from the start, the ranks compare their setups in
 * lattice_trainer_set_collective, which needs a trainer on every rank: a rank
 * that refused its own objects before it had one left the others waiting
 * there. So every rank first says whether it could build one, and all refuse
 * together: st, this rank's verdict, or the others'. A collective whose
 * slots cannot be called is left to set_collective to refuse. */
static lattice_status agree_before_create(const lattice_trainer_params *tp, lattice_status st)
{
    const lattice_trainer_collective *c = tp->collective;
    void *user = tp->collective_user;
    if (c->size < LATTICE__TRAINER_COLLECTIVE_1_0 || lattice__collective_missing_slot(c))
        return st;
    const int rank = c->rank(user), n = c->n_ranks(user);
    if (n < 2 || rank < 0 || rank >= n)
        return st;
    int64_t refused[2] = {st != LATTICE_OK, st != LATTICE_OK ? rank + 1 : 0}; /* count, ranks + 1 */
    const int rc = c->sum_int64(user, refused, 2);
    if (rc != 0)
        return lattice__fail(LATTICE_ERR_BACKEND,
                             "lattice_trainer_create: the ranks' agreement on their setups failed "
                             "(status %d): %s", rc, c->errmsg ? c->errmsg(user) : "");
    if (st != LATTICE_OK || refused[0] == 0)
        return st;
    if (refused[0] == 1)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: rank %lld refused its setup (its own message "
                             "says why): every rank refuses with it",
                             (long long)(refused[1] - 1));
    return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                         "lattice_trainer_create: %lld of %d ranks refused their setups (their own "
                         "messages say why): every rank refuses with them",
                         (long long)refused[0], n);
}

lattice_status lattice_trainer_create(lattice_model *model, lattice_teacher *teacher,
                                      lattice_distill *distill, lattice_data *data,
                                      lattice_optim *optim, lattice_schedule *schedule,
                                      const lattice_trainer_params *params, lattice_trainer **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_create: invalid argument: out is NULL");
    *out = NULL;
    if (lattice__need(NULL, "lattice_trainer_create", 4, (const void *)model, "model",
                      (const void *)data, "data", (const void *)optim, "optim",
                      (const void *)schedule, "schedule") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (teacher && !distill)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_create: invalid argument: distill is NULL, but a teacher needs a "
            "distill loss (or pass no teacher to train on cross-entropy alone)");
    /* the caller's (internal.h's lattice__copy_in), or NULL for the defaults */
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    if (params)
        TRY(lattice__copy_in(
            NULL, "lattice_trainer_create",
            LATTICE__SIZED(lattice_trainer_params, "params", LATTICE__TRAINER_PARAMS_1_0, 1), &tp,
            params));
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_status st = check_create(model, teacher, distill, data, optim, schedule, &tp, &mp);
    if (tp.collective)
        st = agree_before_create(&tp, st);
    if (st != LATTICE_OK)
        return st;
    if ((st = borrow_all(model, teacher, distill, data, optim, schedule)) != LATTICE_OK)
        return st;
    lattice_trainer *t = calloc(1, sizeof(*t));
    if (!t) {
        unborrow_all(model, teacher, distill, data, optim, schedule);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_trainer_create: out of memory");
    }
    t->model = model;
    t->teacher = teacher;
    t->distill = distill;
    t->data = data;
    t->optim = optim;
    t->schedule = schedule;
    t->p = tp;
    t->base_optim.size = sizeof(t->base_optim);
    lattice_optim_get_params(optim, &t->base_optim);
    t->applied_phase = -1;
    t->empty_phase = -1;
    t->n_ranks = 1;
    t->undo_trainable = calloc((size_t)mp.n_layers, sizeof(int));
    if (!t->undo_trainable) {
        lattice_trainer_destroy(t);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_trainer_create: out of memory");
    }
    if (tp.collective) {
        st = lattice_trainer_set_collective(t, tp.collective, tp.collective_user);
        if (st != LATTICE_OK) {
            lattice__fail(st, "lattice_trainer_create: %s", t->err);
            lattice_trainer_destroy(t);
            return st;
        }
    }
    *out = t;
    return LATTICE_OK;
}

void lattice_trainer_destroy(lattice_trainer *t)
{
    if (!t)
        return;
    free(t->undo_trainable);
    free(t->undo_weights);
    free(t->rank_status);
    unborrow_all(t->model, t->teacher, t->distill, t->data, t->optim, t->schedule);
    free(t);
}

/* The busy words of what a trainer binds besides its teacher (the
 * optimizer's is its model's), in the order they are entered; NULL where it
 * binds none (a distill loss without a teacher). */
enum { N_HELD = 4 };
static void held_words(lattice_trainer *t, lattice_busy *w[N_HELD], const char *what[N_HELD])
{
    w[0] = lattice__model_busy(t->model), what[0] = "model";
    w[1] = t->distill ? lattice__distill_busy(t->distill) : NULL, what[1] = "distill loss";
    w[2] = lattice__data_busy(t->data), what[2] = "data";
    w[3] = lattice__schedule_busy(t->schedule), what[3] = "schedule";
}

/* Every handle the trainer binds, not only its model: a distill loss, data
 * or schedule shared by two trainers on two threads is refused, where the
 * two runs' steps used to mix (issue 48 part 2). */
lattice_status lattice__trainer_enter(lattice_trainer *t, const char *fn)
{
    lattice_busy *w[N_HELD];
    const char *what[N_HELD];
    held_words(t, w, what);
    lattice_status st = LATTICE_OK;
    int entered = 0;
    for (; entered < N_HELD; entered++)
        if (w[entered] && (st = lattice__busy_enter(w[entered], fn, what[entered])) != LATTICE_OK)
            break;
    if (st == LATTICE_OK && t->teacher)
        st = lattice__teacher_enter(t->teacher, fn);
    if (st != LATTICE_OK) /* leave those entered before the refusal */
        while (entered-- > 0)
            if (w[entered])
                lattice__busy_leave(w[entered]);
    return st;
}

void lattice__trainer_leave(lattice_trainer *t)
{
    lattice_busy *w[N_HELD];
    const char *what[N_HELD];
    held_words(t, w, what);
    if (t->teacher)
        lattice__teacher_leave(t->teacher);
    for (int i = N_HELD - 1; i >= 0; i--)
        if (w[i])
            lattice__busy_leave(w[i]);
}

const char *lattice_trainer_errmsg(const lattice_trainer *t)
{
    return t ? t->err : "no trainer (NULL handle)";
}

/* The head and boundary norm of the freeze arm: frozen while a phase says so,
 * trainable again once a later phase trains them. A tied head is the embedding,
 * which stays as the caller set it. */
static lattice_status apply_boundary(lattice_trainer *t, const lattice_schedule_phase *ph)
{
    int was_frozen = 0;
    if (t->applied_phase >= 0) {
        lattice_schedule_phase prev;
        lattice_schedule_phase_init(&prev);
        lattice_schedule_get_phase(t->schedule, t->applied_phase, &prev);
        was_frozen = !prev.train_boundary;
    }
    if (ph->train_boundary && !was_frozen)
        return LATTICE_OK; /* leave the caller's flags alone */
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_model_get_params(t->model, &mp);
    lattice_status st =
        lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, ph->train_boundary);
    if (st == LATTICE_OK && !mp.tie_embeddings)
        st = lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_HEAD, -1, ph->train_boundary);
    return st;
}

/* The phase start: depth, frozen prefix and boundary, new layers, data rewind,
 * optimizer restart. */
static lattice_status apply_phase(lattice_trainer *t, int index, const lattice_schedule_phase *ph)
{
    int current;
    int64_t step_in_phase = 0;
    lattice_schedule_get_position(t->schedule, &current, &step_in_phase);
    if (!t->have_origin) {
        /* the run begins here (a resumed run brings its origin from the checkpoint) */
        lattice_data_get_position(t->data, &t->data_origin);
        t->have_origin = 1;
    }
    const int prev = t->applied_phase < 0 ? ph->active_layers : lattice_model_get_active_layers(t->model);
    lattice_status st = lattice_model_set_active_layers(t->model, ph->active_layers);
    const int added = ph->active_layers - prev;
    for (int i = prev; i < ph->active_layers && st == LATTICE_OK; i++) {
        if (ph->block_init == LATTICE_SCHEDULE_BLOCK_INIT_IDENTITY)
            st = lattice_model_zero_layer_outputs(t->model, i);
        else if (ph->block_init == LATTICE_SCHEDULE_BLOCK_INIT_COPY)
            st = lattice_model_copy_layer(t->model, i, i - added >= 0 ? i - added : i % prev);
    }
    for (int i = 0; i < ph->active_layers && st == LATTICE_OK; i++)
        st = lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_LAYER, i, i >= ph->train_from);
    if (st == LATTICE_OK)
        st = apply_boundary(t, ph);
    if (st != LATTICE_OK)
        return FAIL(t, st, "phase %d: %s", index, lattice_model_errmsg(t->model));
    /* only at the phase's true start: a run bound mid-phase reads on */
    if (ph->rewind_data && step_in_phase == 0 &&
        (st = lattice_data_set_position(t->data, &t->data_origin)) != LATTICE_OK)
        return FAIL(t, st, "phase %d: rewinding the data: %s", index, lattice_data_errmsg(t->data));
    t->applied_phase = index;
    return LATTICE_OK;
}

/* The phase start's optimizer restart: it cannot be undone without a copy of
 * the moments, so it runs only once the step's gradients are known finite. */
static lattice_status restart_optimizer(lattice_trainer *t, int index,
                                        const lattice_schedule_phase *ph)
{
    if (!ph->reset_optimizer)
        return LATTICE_OK;
    lattice_optim_params op = t->base_optim;
    const int64_t lr_steps = phase_lr_steps(t->data, ph);
    if (lr_steps > 0)
        op.total_steps = lr_steps;
    lattice_status st;
    if ((st = lattice_optim_set_params(t->optim, &op)) != LATTICE_OK ||
        (st = lattice_optim_reset(t->optim)) != LATTICE_OK)
        return FAIL(t, st, "phase %d: %s", index, lattice_optim_errmsg(t->optim));
    return LATTICE_OK;
}

/* What a step may change before it knows its loss and gradients are finite:
 * the data position, and on a phase's first step what apply_phase does (the
 * model's depth and trainable flags: its run, its layer flags kept in the
 * trainer's undo_trainable). */
typedef struct step_undo {
    lattice_data_position pos;
    int phase_start;
    int applied_phase, have_origin;
    lattice__model_run run;
    lattice_data_position origin;
    int first, last; /* layers whose weights are in undo_weights */
} step_undo;

/* Visit the tensors of layers [first, last): copy them to (save) or from the
 * trainer's undo buffer. */
static void copy_layers(lattice_trainer *t, int first, int last, int save)
{
    size_t off = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(t->model); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t->model, i, &ti);
        if (ti.group != LATTICE_MODEL_GROUP_LAYER || ti.layer < first || ti.layer >= last)
            continue;
        const size_t n = (size_t)(ti.shape[0] * ti.shape[1]);
        if (save)
            memcpy(t->undo_weights + off, ti.data, n * sizeof(float));
        else
            memcpy(ti.data, t->undo_weights + off, n * sizeof(float));
        off += n;
    }
}

static lattice_status save_for_undo(lattice_trainer *t, int phase, const lattice_schedule_phase *ph,
                                    step_undo *u)
{
    u->phase_start = 1;
    u->applied_phase = t->applied_phase;
    u->have_origin = t->have_origin;
    u->origin = t->data_origin;
    u->run = lattice__model_get_run(t->model);
    memcpy(t->undo_trainable, u->run.trainable_layer,
           sizeof(int) * (size_t)lattice__model_params(t->model)->n_layers);
    u->run.trainable_layer = t->undo_trainable;
    /* the layers the start will initialise (apply_phase: prev .. active) */
    u->first = u->last = 0;
    if (t->applied_phase < 0 || ph->block_init == LATTICE_SCHEDULE_BLOCK_INIT_RANDOM ||
        ph->active_layers <= u->run.n_active)
        return LATTICE_OK;
    u->first = u->run.n_active;
    u->last = ph->active_layers;
    size_t need = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(t->model); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t->model, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer >= u->first && ti.layer < u->last)
            need += (size_t)(ti.shape[0] * ti.shape[1]);
    }
    if (need > t->undo_cap) { /* grows only at phase starts, and only once per size */
        float *w = realloc(t->undo_weights, need * sizeof(float));
        if (!w)
            return FAIL(t, LATTICE_ERR_OUT_OF_MEMORY,
                        "phase %d: no memory to keep layers %d..%d until the step succeeds", phase,
                        u->first, u->last - 1);
        t->undo_weights = w;
        t->undo_cap = need;
    }
    copy_layers(t, u->first, u->last, 1);
    return LATTICE_OK;
}

/* Put back what the step changed; st, the step's failure, is returned. */
static lattice_status undo_step(lattice_trainer *t, const step_undo *u, lattice_status st)
{
    lattice_data_set_position(t->data, &u->pos);
    if (!u->phase_start)
        return st;
    copy_layers(t, u->first, u->last, 0);
    lattice__model_set_run(t->model, &u->run);
    t->applied_phase = u->applied_phase;
    t->have_origin = u->have_origin;
    t->data_origin = u->origin;
    return st;
}

/* Whether every gradient the optimizer will read is finite: the same set as
 * its global norm (the updatable tensors). */
static int grads_finite(const lattice_trainer *t)
{
    for (int i = 0; i < lattice_model_get_n_tensors(t->model); i++) {
        lattice__model_tensor mt;
        lattice__model_tensor_at(t->model, i, &mt);
        for (int64_t j = 0; mt.updatable && j < mt.rows * mt.cols; j++)
            if (!isfinite(mt.grad[j]))
                return 0;
    }
    return 1;
}

/* A step's work on this rank, up to its gradients: the phase start, the
 * batch (this rank's share of it), the teacher, forward, loss, backward.
 * b is the global batch, n_local the share's counted tokens. */
static lattice_status step_local(lattice_trainer *t, int phase, const lattice_schedule_phase *ph,
                                 int start, step_undo *u, lattice_data_batch *b,
                                 lattice_trainer_metrics *m, int64_t *n_local)
{
    lattice_status st;
    if (start && (st = save_for_undo(t, phase, ph, u)) != LATTICE_OK) {
        u->phase_start = 0; /* nothing was changed, and its copy is incomplete */
        return st;
    }
    if (start && (st = apply_phase(t, phase, ph)) != LATTICE_OK)
        return st;
    if ((st = lattice_data_next(t->data, b)) != LATTICE_OK)
        return FAIL(t, st, "data: %s", lattice_data_errmsg(t->data));
    const lattice_data_batch sb = lattice__trainer_share_of(t, b);
    *n_local = sb.n_tokens;
    /* the teacher runs once per batch (per share): dense logits, or a top-k file's entries */
    const float *zt = NULL, *tv = NULL;
    const int32_t *ti = NULL;
    const int k = lattice_teacher_get_k(t->teacher);
    if (t->teacher) {
        /* A recorded teacher stored whole global batches and finds one by its
         * tokens: ask with the global batch, then take this rank's rows. */
        const int whole = lattice__trainer_distributed(t) && lattice__teacher_is_file(t->teacher);
        const lattice_data_batch *ask = whole ? b : &sb;
        st = k ? lattice_teacher_topk(t->teacher, ask->tokens, ask->batch, ask->seq, &ti, &tv)
               : lattice_teacher_logits(t->teacher, ask->tokens, ask->batch, ask->seq, &zt);
        if (st != LATTICE_OK)
            return FAIL(t, st, "teacher: %s", lattice_teacher_errmsg(t->teacher));
        if (whole) {
            const int64_t first = (int64_t)b->batch * t->rank / t->n_ranks;
            const int64_t skip = first * b->seq;
            if (k) {
                ti += skip * k;
                tv += skip * k;
            } else {
                zt += skip * lattice_teacher_get_vocab_size(t->teacher);
            }
        }
    }
    if ((st = lattice_model_forward(t->model, sb.tokens, sb.batch, sb.seq)) != LATTICE_OK)
        return FAIL(t, st, "student forward: %s", lattice_model_errmsg(t->model));
    const int vocab = lattice_teacher_get_vocab_size(t->teacher);
    if (t->teacher) {
        lattice_distill_result r;
        const int64_t n = (int64_t)sb.batch * sb.seq;
        /* the model's backend sets the loss's threads, as lattice_distill_model does */
        lattice__model_pass pass;
        lattice__model_last_pass(t->model, &pass); /* the forward above ran */
        st = k ? lattice__model_loss_written(
                     t->model, lattice__distill_topk_on(
                                   t->distill,
                                   lattice_backend_get_threads(lattice__model_backend(t->model)),
                                   pass.logits, ti, tv, k, sb.targets, sb.mask, n, vocab,
                                   pass.dlogits, &r))
               : lattice_distill_model(t->distill, t->model, zt, vocab, sb.targets, sb.mask, &r);
        m->loss = r.loss;
        m->kl = r.kl;
        m->ce = r.ce;
        if (st != LATTICE_OK)
            return FAIL(t, st, "loss: %s", lattice_distill_errmsg(t->distill));
    } else {
        float loss;
        st = lattice_model_cross_entropy(t->model, sb.targets, sb.mask, &loss, NULL);
        m->loss = m->ce = loss;
        if (st != LATTICE_OK)
            return FAIL(t, st, "loss: %s", lattice_model_errmsg(t->model));
    }
    if ((st = lattice_model_backward(t->model)) != LATTICE_OK)
        return FAIL(t, st, "backward: %s", lattice_model_errmsg(t->model));
    return LATTICE_OK;
}

/* A token-budget phase ends once its batches have counted its tokens. Over
 * data whose documents are all too short to predict from (one token each),
 * no batch ever counts one, and the phase would step for ever: once a whole
 * pass over the training data has gone by without a counted token, the next
 * step is refused. The data position tells a pass, whatever the batch size,
 * the shuffle or the ranks (every rank reads the same global batches). */
static void note_empty_batch(lattice_trainer *t, int phase, const lattice_schedule_phase *ph,
                             const lattice_data_batch *b)
{
    if (ph->steps != 0 || b->n_tokens != 0) {
        t->empty_phase = -1;
        return;
    }
    if (t->empty_phase != phase) {
        /* counted from after this batch: a phase start may have rewound the
         * data before it, and one batch more is no harm */
        t->empty_phase = phase;
        lattice_data_get_position(t->data, &t->empty_from);
    }
}

static lattice_status check_budget_can_fill(lattice_trainer *t, int phase,
                                            const lattice_schedule_phase *ph)
{
    if (t->empty_phase != phase)
        return LATTICE_OK;
    lattice_data_position now;
    lattice_data_get_position(t->data, &now);
    const lattice_data_position from = t->empty_from;
    if (now.epoch < from.epoch || (now.epoch == from.epoch && now.index < from.index)) {
        t->empty_phase = -1; /* the caller moved the data back: count afresh */
        return LATTICE_OK;
    }
    /* A whole epoch lies between from and now (compared without multiplying
     * epochs by the pass length, which could overflow): the first epoch that
     * starts at or after from, and its end at or before now. */
    const int64_t pass = lattice__data_pass_length(t->data);
    const int64_t first_whole = from.index == 0 ? from.epoch : from.epoch + 1;
    if (now.epoch > first_whole || (now.epoch == first_whole && now.index >= pass)) {
        return FAIL(t, LATTICE_ERR_STATE,
                    "phase %d has a budget of %lld counted tokens, but a whole pass over the "
                    "training data (%lld documents) counted none: every training document is too "
                    "short to predict from (a document needs 2 tokens or more); the step was not "
                    "taken",
                    phase, (long long)ph->tokens,
                    (long long)lattice_data_get_n_documents(t->data, LATTICE_DATA_SPLIT_TRAIN));
    }
    return LATTICE_OK;
}

static lattice_status trainer_step(lattice_trainer *t, lattice_trainer_metrics *out)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_step: invalid argument: trainer is NULL");
    /* checked before the step, which cannot be taken back once it has run */
    if (out)
        TRY(lattice__check_size(t->err, "lattice_trainer_step", "metrics->size",
                                "lattice_trainer_metrics", out->size,
                                LATTICE__TRAINER_METRICS_1_0));
    int phase;
    lattice_schedule_get_position(t->schedule, &phase, NULL);
    if (lattice_schedule_is_finished(t->schedule))
        return FAIL(t, LATTICE_ERR_STATE, "the schedule has finished");
    /* the phase, read once for the whole step */
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    lattice_schedule_get_phase(t->schedule, phase, &ph);
    lattice_status st;
    if ((st = check_budget_can_fill(t, phase, &ph)) != LATTICE_OK)
        return st;
    /* Until the optimizer step, a failure (a non-finite loss or gradient among
     * them) puts back the data position and the phase start: the step changed
     * nothing. */
    step_undo u;
    memset(&u, 0, sizeof(u));
    lattice_data_get_position(t->data, &u.pos);
    const int start = t->applied_phase != phase;
    lattice_trainer_metrics m;
    memset(&m, 0, sizeof(m));
    m.size = sizeof(m);
    m.phase = phase;
    m.val_ce = NAN;
    const double t0 = lattice__prof_clock(LATTICE_PROF_WALL);
    lattice_data_batch b;
    int64_t n_local = 0;
    st = step_local(t, phase, &ph, start, &u, &b, &m, &n_local);
    if (lattice__trainer_distributed(t)) {
        /* every rank fails the step, or none; then the sum over ranks */
        st = lattice__trainer_agree(t, st);
        if (st == LATTICE_OK)
            st = lattice__trainer_reduce_step(t, &b, n_local, &m);
    }
    if (st != LATTICE_OK)
        return undo_step(t, &u, st);
    /* the schedule must count the step before the optimizer takes it */
    const double flops = lattice_model_get_flops(t->model, b.batch, b.seq, 1);
    char why[320];
    if (!lattice__schedule_fits(t->schedule, (int64_t)b.batch * b.seq, b.n_tokens, flops, why,
                                sizeof why))
        return undo_step(t, &u, FAIL(t, LATTICE_ERR_STATE,
                                     "the schedule cannot count this step: %s; nothing changed",
                                     why));
    m.active_layers = lattice_model_get_active_layers(t->model);
    if (start && !grads_finite(t))
        return undo_step(t, &u,
                         FAIL(t, LATTICE_ERR_NON_FINITE,
                              "phase %d's first step: a gradient is not finite; nothing changed",
                              phase));
    if (start && (st = restart_optimizer(t, phase, &ph)) != LATTICE_OK)
        return undo_step(t, &u, st);
    m.lr = lattice_optim_get_lr(t->optim);
    float gn;
    /* a non-finite norm updates nothing (lattice_optim_step) */
    if ((st = lattice_optim_step(t->optim, &gn)) != LATTICE_OK)
        return undo_step(t, &u, FAIL(t, st, "optimizer: %s", lattice_optim_errmsg(t->optim)));
    m.grad_norm = gn;
    note_empty_batch(t, phase, &ph, &b);
    if ((st = lattice_schedule_record(t->schedule, (int64_t)b.batch * b.seq, b.n_tokens, flops,
                                      &m.phase_end)) != LATTICE_OK) /* fits said it would */
        return FAIL(t, st, "the schedule: %s", lattice_schedule_errmsg(t->schedule));
    lattice_schedule_get_counters(t->schedule, &m.counters);
    m.step = m.counters.steps;
    m.seconds = lattice__prof_clock(LATTICE_PROF_WALL) - t0;
    int eval = m.phase_end || (t->p.eval_every > 0 && m.step % t->p.eval_every == 0);
    if (eval && lattice_data_get_n_val_batches(t->data) > 0) {
        if ((st = lattice_trainer_evaluate(t, &m.val_ce)) != LATTICE_OK)
            return st;
    }
    if (t->p.on_step && t->p.on_step(t->p.user, &m))
        t->stop = 1;
    if (!isnan(m.val_ce) && t->p.on_eval && t->p.on_eval(t->p.user, &m))
        t->stop = 1;
    if (out)
        lattice__copy_out(NULL, "lattice_trainer_step", out, &m, sizeof(m),
                          LATTICE__TRAINER_METRICS_1_0);
    return LATTICE_OK;
}

static lattice_status trainer_run(lattice_trainer *t)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_run: invalid argument: trainer is NULL");
    t->stop = 0;
    /* a token budget that no batch can fill ends the run with the step's
     * LATTICE_ERR_STATE (check_budget_can_fill) */
    while (!t->stop && !lattice_schedule_is_finished(t->schedule)) {
        lattice_status st = lattice_trainer_step(t, NULL);
        if (st != LATTICE_OK)
            return st;
        if (lattice__trainer_distributed(t)) {
            /* a callback may stop one rank's run: then every rank's stops */
            int64_t stop = t->stop;
            const int rc = t->coll.sum_int64(t->coll_user, &stop, 1);
            if (rc)
                return lattice__trainer_coll_fail(t, "sum_int64", rc);
            t->stop = stop != 0;
        }
    }
    return LATTICE_OK;
}

/* ---- the public calls, each holding what the trainer binds (handle.h) ---- */

lattice_status lattice_trainer_step(lattice_trainer *t, lattice_trainer_metrics *out)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_step", trainer_step(t, out));
}

lattice_status lattice_trainer_run(lattice_trainer *t)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_run", trainer_run(t));
}
