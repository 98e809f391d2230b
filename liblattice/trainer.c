#include "study_impl.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>


#define FAIL(t, st, ...) lattice__set_error((t)->err, (st), __VA_ARGS__)

void lattice_trainer_params_init(lattice_trainer_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
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
    if (!model || !data || !optim || !schedule || (teacher && !distill) ||
        (params && params->size == 0))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_create: invalid argument (failed check: !model || !data || !optim || !schedule || (teacher && !distill) || (params && params->size == 0))");
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_data_params dp = {.size = sizeof(dp)};
    lattice_model_get_params(model, &mp);
    lattice_data_get_params(data, &dp);
    if (dp.vocab_size > mp.vocab_size)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the data's vocab_size %d exceeds the model's %d",
                             dp.vocab_size, mp.vocab_size);
    if (dp.batch_size > mp.max_batch)
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
    if (lattice_schedule_get_n_phases(schedule) < 1)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the schedule has no phases");
    if (lattice_schedule_get_max_layers(schedule) > mp.n_layers)
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_trainer_create: the schedule grows to %d layers but the model has %d",
                             lattice_schedule_get_max_layers(schedule), mp.n_layers);
    lattice_trainer *t = calloc(1, sizeof(*t));
    if (!t)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_trainer_create: out of memory");
    t->model = model;
    t->teacher = teacher;
    t->distill = distill;
    t->data = data;
    t->optim = optim;
    t->schedule = schedule;
    lattice_trainer_params_init(&t->p);
    if (params)
        memcpy(&t->p, params, params->size < sizeof(t->p) ? params->size : sizeof(t->p));
    t->p.size = sizeof(t->p);
    t->base_optim.size = sizeof(t->base_optim);
    lattice_optim_get_params(optim, &t->base_optim);
    t->applied_phase = -1;
    t->undo_trainable = calloc((size_t)mp.n_layers, sizeof(int));
    if (!t->undo_trainable) {
        free(t);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_trainer_create: out of memory");
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
    free(t);
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
static lattice_status apply_phase(lattice_trainer *t, int index)
{
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    lattice_schedule_get_phase(t->schedule, index, &ph);
    int current;
    int64_t step_in_phase = 0;
    lattice_schedule_get_position(t->schedule, &current, &step_in_phase);
    if (!t->have_origin) {
        /* the run begins here (a resumed run brings its origin from the checkpoint) */
        lattice_data_get_position(t->data, &t->data_origin);
        t->have_origin = 1;
    }
    const int prev = t->applied_phase < 0 ? ph.active_layers : lattice_model_get_active_layers(t->model);
    lattice_status st = lattice_model_set_active_layers(t->model, ph.active_layers);
    const int added = ph.active_layers - prev;
    for (int i = prev; i < ph.active_layers && st == LATTICE_OK; i++) {
        if (ph.block_init == LATTICE_SCHEDULE_BLOCK_INIT_IDENTITY)
            st = lattice_model_zero_layer_outputs(t->model, i);
        else if (ph.block_init == LATTICE_SCHEDULE_BLOCK_INIT_COPY)
            st = lattice_model_copy_layer(t->model, i, i - added >= 0 ? i - added : i % prev);
    }
    for (int i = 0; i < ph.active_layers && st == LATTICE_OK; i++)
        st = lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_LAYER, i, i >= ph.train_from);
    if (st == LATTICE_OK)
        st = apply_boundary(t, &ph);
    if (st != LATTICE_OK)
        return FAIL(t, st, "phase %d: %s", index, lattice_model_errmsg(t->model));
    /* only at the phase's true start: a run bound mid-phase reads on */
    if (ph.rewind_data && step_in_phase == 0 &&
        (st = lattice_data_set_position(t->data, &t->data_origin)) != LATTICE_OK)
        return FAIL(t, st, "phase %d: rewinding the data: %s", index, lattice_data_errmsg(t->data));
    t->applied_phase = index;
    return LATTICE_OK;
}

/* The phase start's optimizer restart: it cannot be undone without a copy of
 * the moments, so it runs only once the step's gradients are known finite. */
static lattice_status restart_optimizer(lattice_trainer *t, int index)
{
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    lattice_schedule_get_phase(t->schedule, index, &ph);
    if (!ph.reset_optimizer)
        return LATTICE_OK;
    lattice_optim_params op = t->base_optim;
    if (ph.steps > 0)
        op.total_steps = (int)(ph.steps < INT32_MAX ? ph.steps : INT32_MAX);
    lattice_status st;
    if ((st = lattice_optim_set_params(t->optim, &op)) != LATTICE_OK ||
        (st = lattice_optim_reset(t->optim)) != LATTICE_OK)
        return FAIL(t, st, "phase %d: %s", index, lattice_optim_errmsg(t->optim));
    return LATTICE_OK;
}

/* What a step may change before it knows its loss and gradients are finite:
 * the data position, and on a phase's first step what apply_phase does. */
typedef struct step_undo {
    lattice_data_position pos;
    int phase_start;
    int applied_phase, have_origin, active, boundary, head;
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

static lattice_status save_for_undo(lattice_trainer *t, int phase, step_undo *u)
{
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_model_get_params(t->model, &mp);
    u->phase_start = 1;
    u->applied_phase = t->applied_phase;
    u->have_origin = t->have_origin;
    u->origin = t->data_origin;
    u->active = lattice_model_get_active_layers(t->model);
    lattice_model_get_trainable(t->model, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, &u->boundary);
    lattice_model_get_trainable(t->model, LATTICE_MODEL_GROUP_HEAD, -1, &u->head);
    for (int i = 0; i < mp.n_layers; i++)
        lattice_model_get_trainable(t->model, LATTICE_MODEL_GROUP_LAYER, i, &t->undo_trainable[i]);
    /* the layers the start will initialise (apply_phase: prev .. active) */
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    lattice_schedule_get_phase(t->schedule, phase, &ph);
    u->first = u->last = 0;
    if (t->applied_phase < 0 || ph.block_init == LATTICE_SCHEDULE_BLOCK_INIT_RANDOM ||
        ph.active_layers <= u->active)
        return LATTICE_OK;
    u->first = u->active;
    u->last = ph.active_layers;
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
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_model_get_params(t->model, &mp);
    copy_layers(t, u->first, u->last, 0);
    lattice_model_set_active_layers(t->model, u->active);
    for (int i = 0; i < mp.n_layers; i++)
        lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_LAYER, i, t->undo_trainable[i]);
    lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, u->boundary);
    if (!mp.tie_embeddings)
        lattice_model_set_trainable(t->model, LATTICE_MODEL_GROUP_HEAD, -1, u->head);
    t->applied_phase = u->applied_phase;
    t->have_origin = u->have_origin;
    t->data_origin = u->origin;
    return st;
}

/* Whether every gradient the optimizer will read is finite: the same set as
 * its global norm (trainable groups, active layers). */
static int grads_finite(const lattice_trainer *t)
{
    const int active = lattice_model_get_active_layers(t->model);
    for (int i = 0; i < lattice_model_get_n_tensors(t->model); i++) {
        lattice_model_tensor_info ti;
        int on = 0;
        lattice_model_get_tensor(t->model, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer >= active)
            continue;
        lattice_model_get_trainable(t->model, ti.group, ti.layer, &on);
        const int64_t n = ti.shape[0] * ti.shape[1];
        for (int64_t j = 0; on && j < n; j++)
            if (!isfinite(ti.grad[j]))
                return 0;
    }
    return 1;
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec + ts.tv_nsec * 1e-9;
}

lattice_status lattice_trainer_evaluate(lattice_trainer *t, double *val_ce)
{
    if (!t || !val_ce)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_evaluate: invalid argument (failed check: !t || !val_ce)");
    int64_t nb = lattice_data_get_n_val_batches(t->data);
    if (nb == 0)
        return FAIL(t, LATTICE_ERR_STATE, "the data has no validation documents");
    if (t->p.eval_batches > 0 && t->p.eval_batches < nb)
        nb = t->p.eval_batches;
    double total = 0.0;
    int64_t count = 0;
    for (int64_t i = 0; i < nb; i++) {
        lattice_data_batch b;
        float loss;
        int64_t n;
        lattice_status st = lattice_data_get_val_batch(t->data, i, &b);
        if (st == LATTICE_OK)
            st = lattice_model_forward(t->model, b.tokens, b.batch, b.seq);
        if (st == LATTICE_OK)
            st = lattice_model_cross_entropy(t->model, b.targets, b.mask, &loss, &n);
        if (st != LATTICE_OK)
            return FAIL(t, st, "validation batch %lld: %s", (long long)i,
                        lattice_model_errmsg(t->model));
        total += (double)loss * (double)n;
        count += n;
    }
    *val_ce = count ? total / (double)count : 0.0;
    return LATTICE_OK;
}

lattice_status lattice_trainer_step(lattice_trainer *t, lattice_trainer_metrics *out)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_step: invalid argument: trainer is NULL");
    /* checked before the step, which cannot be taken back once it has run */
    if (out && out->size < sizeof(lattice_trainer_metrics))
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT,
                    "metrics->size %zu is below %zu, the struct's 0.1 size (set it to "
                    "sizeof(lattice_trainer_metrics))", out->size, sizeof(lattice_trainer_metrics));
    int phase;
    lattice_schedule_get_position(t->schedule, &phase, NULL);
    if (lattice_schedule_is_finished(t->schedule))
        return FAIL(t, LATTICE_ERR_STATE, "the schedule has finished");
    lattice_status st;
    /* Until the optimizer step, a failure (a non-finite loss or gradient among
     * them) puts back the data position and the phase start: the step changed
     * nothing. */
    step_undo u;
    memset(&u, 0, sizeof(u));
    lattice_data_get_position(t->data, &u.pos);
    const int start = t->applied_phase != phase;
    if (start && (st = save_for_undo(t, phase, &u)) != LATTICE_OK)
        return st;
    if (start && (st = apply_phase(t, phase)) != LATTICE_OK)
        return undo_step(t, &u, st);
    const double t0 = now_seconds();
    lattice_data_batch b;
    if ((st = lattice_data_next(t->data, &b)) != LATTICE_OK)
        return undo_step(t, &u, FAIL(t, st, "data: %s", lattice_data_errmsg(t->data)));
    /* the teacher runs once per batch: dense logits, or a top-k file's entries */
    const float *zt = NULL, *tv = NULL;
    const int32_t *ti = NULL;
    const int k = lattice_teacher_get_k(t->teacher);
    if (t->teacher) {
        st = k ? lattice_teacher_topk(t->teacher, b.tokens, b.batch, b.seq, &ti, &tv)
               : lattice_teacher_logits(t->teacher, b.tokens, b.batch, b.seq, &zt);
        if (st != LATTICE_OK)
            return undo_step(t, &u,
                             FAIL(t, st, "teacher: %s", lattice_teacher_errmsg(t->teacher)));
    }
    if ((st = lattice_model_forward(t->model, b.tokens, b.batch, b.seq)) != LATTICE_OK)
        return undo_step(t, &u,
                         FAIL(t, st, "student forward: %s", lattice_model_errmsg(t->model)));
    lattice_trainer_metrics m;
    memset(&m, 0, sizeof(m));
    m.size = sizeof(m);
    m.phase = phase;
    m.active_layers = lattice_model_get_active_layers(t->model);
    m.val_ce = NAN;
    const int vocab = lattice_teacher_get_vocab_size(t->teacher);
    if (t->teacher) {
        lattice_distill_result r;
        const int64_t n = (int64_t)b.batch * b.seq;
        st = k ? lattice_distill_topk(t->distill, lattice_model_get_logits(t->model), ti, tv, k,
                                      b.targets, b.mask, n, vocab, lattice_model_get_dlogits(t->model),
                                      &r)
               : lattice_distill_model(t->distill, t->model, zt, vocab, b.targets, b.mask, &r);
        m.loss = r.loss;
        m.kl = r.kl;
        m.ce = r.ce;
        if (st != LATTICE_OK)
            return undo_step(t, &u, FAIL(t, st, "loss: %s", lattice_distill_errmsg(t->distill)));
    } else {
        float loss;
        st = lattice_model_cross_entropy(t->model, b.targets, b.mask, &loss, NULL);
        m.loss = m.ce = loss;
        if (st != LATTICE_OK)
            return undo_step(t, &u, FAIL(t, st, "loss: %s", lattice_model_errmsg(t->model)));
    }
    if ((st = lattice_model_backward(t->model)) != LATTICE_OK)
        return undo_step(t, &u, FAIL(t, st, "backward: %s", lattice_model_errmsg(t->model)));
    if (start && !grads_finite(t))
        return undo_step(t, &u,
                         FAIL(t, LATTICE_ERR_NON_FINITE,
                              "phase %d's first step: a gradient is not finite; nothing changed",
                              phase));
    if (start && (st = restart_optimizer(t, phase)) != LATTICE_OK)
        return undo_step(t, &u, st);
    m.lr = lattice_optim_get_lr(t->optim);
    float gn;
    /* a non-finite norm updates nothing (lattice_optim_step) */
    if ((st = lattice_optim_step(t->optim, &gn)) != LATTICE_OK)
        return undo_step(t, &u, FAIL(t, st, "optimizer: %s", lattice_optim_errmsg(t->optim)));
    m.grad_norm = gn;
    double flops = lattice_model_get_flops(t->model, b.batch, b.seq, 1);
    lattice_schedule_record(t->schedule, (int64_t)b.batch * b.seq, b.n_tokens, flops, &m.phase_end);
    lattice_schedule_get_counters(t->schedule, &m.counters);
    m.step = m.counters.steps;
    m.seconds = now_seconds() - t0;
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
        lattice__copy_out(NULL, "lattice_trainer_step", out, &m, sizeof(m), sizeof(m));
    return LATTICE_OK;
}

lattice_status lattice_trainer_run(lattice_trainer *t)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_run: invalid argument: trainer is NULL");
    t->stop = 0;
    /* A token-budget phase over data whose batches count no tokens (every
     * document one token long) would never end: a whole pass without a counted
     * token in such a phase is an error. */
    lattice_data_params dp = {.size = sizeof(dp)};
    lattice_data_get_params(t->data, &dp);
    const int64_t pass = lattice_data_get_n_documents(t->data, LATTICE_DATA_SPLIT_TRAIN) / dp.batch_size + 2;
    int64_t empty = 0;
    while (!t->stop && !lattice_schedule_is_finished(t->schedule)) {
        int phase;
        lattice_schedule_get_position(t->schedule, &phase, NULL);
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        lattice_schedule_get_phase(t->schedule, phase, &ph);
        lattice_schedule_counters before, after;
        lattice_schedule_get_counters(t->schedule, &before);
        lattice_status st = lattice_trainer_step(t, NULL);
        if (st != LATTICE_OK)
            return st;
        lattice_schedule_get_counters(t->schedule, &after);
        empty = ph.steps == 0 && after.nonpad_tokens == before.nonpad_tokens ? empty + 1 : 0;
        if (empty >= pass)
            return FAIL(t, LATTICE_ERR_STATE,
                        "phase %d has a budget of %lld tokens, but %lld batches in a row (a pass "
                        "of the data) counted none: every document is too short to predict",
                        phase, (long long)ph.tokens, (long long)empty);
    }
    return LATTICE_OK;
}
