/* A checkpoint's state as JSON (checkpoint_state.h): written from a run, and
 * read back with every value checked before anything changes. */
#include "checkpoint_state.h"

#include "fields.h"

#include "json.h"
#include "model_access.h"
#include "optim_access.h"
#include "schedule_access.h"
#include "setup.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The oldest state a load reads: 0.5's, the first with model.setup. Its
 * every field must be there (lattice__fields_from_json). */
#define RECORD_SINCE 5

static json_object *i64(int64_t v) { return json_object_new_int64(v); }
static json_object *dbl(double v) { return json_object_new_double(v); }

/* A setup field as JSON: integers as themselves (an unsigned one by its
 * bits), reals as doubles, digests as 16 hex digits. */
static json_object *field_json(const lattice__setup_field *f)
{
    double d;
    char hex[24];
    switch (f->kind) {
    case LATTICE__SETUP_REAL:
        memcpy(&d, &f->value, sizeof(d));
        return json_object_new_double(d);
    case LATTICE__SETUP_HASH:
        snprintf(hex, sizeof hex, "%016llx", (unsigned long long)(uint64_t)f->value);
        return json_object_new_string(hex);
    default:
        return json_object_new_int64(f->value);
    }
}

char *lattice__checkpoint_state_json(lattice_trainer *t)
{
    const lattice_model *m = t->model;
    const lattice_optim *o = t->optim;
    lattice__schedule_at s;
    lattice__schedule_where(t->schedule, &s);
    lattice_data_position pos;
    lattice_data_get_position(t->data, &pos);
    json_object *j = json_object_new_object(), *op = json_object_new_object(),
                *sc = json_object_new_object(), *md = json_object_new_object(),
                *layers = json_object_new_array(), *phases = json_object_new_array(),
                *dt = json_object_new_object();
    /* since 0.4: the data's settings and corpus, the whole schedule (their
     * names are constant keys: the list outlives j) */
    lattice__setup data, model;
    int ok = lattice__setup_of(t, LATTICE__PART_DATA, 0, &data);
    /* since 0.5: the model's setup (setup.c's model part), which a load compares */
    json_object *arch = json_object_new_object();
    ok = lattice__setup_of(t, LATTICE__PART_MODEL, 0, &model) && ok;
    ok = lattice__json_add(md, "setup", arch) && ok;
    /* the containers join j first, so that one put of j frees whatever was built */
    ok = lattice__json_add(md, "trainable_layers", layers) && ok;
    ok = lattice__json_add(sc, "phases", phases) && ok;
    ok = lattice__json_add(j, "optim", op) && ok;
    ok = lattice__json_add(j, "schedule", sc) && ok;
    ok = lattice__json_add(j, "model", md) && ok;
    ok = lattice__json_add(j, "data", dt) && ok;
#define ADD(obj, k, v) ok = ok && lattice__json_add(obj, k, v)
    ADD(op, "step", i64(lattice_optim_get_steps(o)));
    ok = ok && lattice__fields_to_json(&lattice__optim_fields, lattice__optim_params(o), op);
    ADD(sc, "n_phases", i64(s.n_phases));
    ADD(sc, "phase", i64(s.phase));
    ADD(sc, "step_in_phase", i64(s.step_in_phase));
    ADD(sc, "nonpad_in_phase", i64(s.nonpad_in_phase));
    ADD(sc, "steps", i64(s.counters.steps));
    ADD(sc, "tokens", i64(s.counters.tokens));
    ADD(sc, "nonpad_tokens", i64(s.counters.nonpad_tokens));
    ADD(sc, "active_layer_tokens", i64(s.counters.active_layer_tokens));
    ADD(sc, "flops", dbl(s.counters.flops));
    for (int i = 0; ok && i < s.n_phases; i++) {
        const lattice_schedule_phase *ph = &s.phases[i];
        json_object *o = json_object_new_object();
        ok = lattice__json_push(phases, o) && lattice__fields_to_json(&lattice__phase_fields, ph, o);
    }
    for (int i = 0; ok && i < data.n; i++)
        ADD(dt, data.f[i].name, field_json(&data.f[i]));
    for (int i = 0; ok && i < model.n; i++)
        ADD(arch, model.f[i].name, field_json(&model.f[i]));
    lattice__model_run run;
    lattice__model_get_run(m, &run);
    ADD(md, "n_active", i64(run.n_active));
    ADD(md, "trainable_embedding", i64(run.trainable_embedding));
    ADD(md, "trainable_boundary", i64(run.trainable_boundary));
    ADD(md, "trainable_head", i64(run.trainable_head));
    for (int i = 0; ok && i < lattice__model_params(m)->n_layers; i++)
        ok = lattice__json_push(layers, i64(run.trainable_layer[i]));
    ADD(j, "data_epoch", i64(pos.epoch));
    ADD(j, "data_index", i64(pos.index));
    ADD(j, "applied_phase", i64(t->applied_phase));
    if (t->have_origin) { /* since 0.2: where rewinding phases send the data back to */
        ADD(j, "data_origin_epoch", i64(t->data_origin.epoch));
        ADD(j, "data_origin_index", i64(t->data_origin.index));
    }
    if (t->has_coll) /* since 0.3: the rank count, which fixes each rank's share and sums */
        ADD(j, "ranks", i64(t->n_ranks));
#undef ADD
    char *out = ok ? lattice__json_dump(j) : NULL;
    json_object_put(j);
    lattice__setup_free(&data);
    lattice__setup_free(&model);
    return out;
}

static int get64(json_object *o, const char *key, int64_t *v)
{
    json_object *x;
    if (!o || !json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_int))
        return 0;
    *v = json_object_get_int64(x);
    return 1;
}

static int getd(json_object *o, const char *key, double *v)
{
    json_object *x;
    if (!o || !json_object_object_get_ex(o, key, &x) ||
        !(json_object_is_type(x, json_type_double) || json_object_is_type(x, json_type_int)))
        return 0;
    *v = json_object_get_double(x);
    return 1;
}

/* Reading the state: the first missing, mistyped or out-of-range value is
 * named, and nothing after it is read. */
typedef struct reader {
    lattice_trainer *t;
    int ok;
    lattice_status st; /* the first refusal's: LATTICE_ERR_FORMAT, or out of memory */
} reader;

static void no_memory(reader *rd, const char *what)
{
    if (rd->ok)
        rd->st = FAIL(rd->t, LATTICE_ERR_OUT_OF_MEMORY, "no memory to %s", what);
    rd->ok = 0;
}

__attribute__((format(printf, 2, 3)))
static void refuse(reader *rd, const char *fmt, ...)
{
    if (!rd->ok)
        return;
    char msg[LATTICE_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    rd->st = FAIL(rd->t, LATTICE_ERR_FORMAT, "%s", msg);
    rd->ok = 0;
}

static json_object *need_object(reader *rd, json_object *o, const char *key)
{
    json_object *x = NULL;
    if (rd->ok && (!json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_object)))
        refuse(rd, "the checkpoint's state lacks the object '%s'", key);
    return rd->ok ? x : NULL;
}

static void need64(reader *rd, json_object *o, const char *obj, const char *key, int64_t *v)
{
    if (rd->ok && !get64(o, key, v))
        refuse(rd, "the checkpoint's state lacks %s%s%s, or it is not an integer", obj ? obj : "",
               obj ? "." : "", key);
}

static void needd(reader *rd, json_object *o, const char *obj, const char *key, double *v)
{
    if (rd->ok && !getd(o, key, v))
        refuse(rd, "the checkpoint's state lacks %s.%s, or it is not a number", obj, key);
}

static void in_range(reader *rd, const char *what, int64_t v, int64_t lo, int64_t hi)
{
    if (rd->ok && (v < lo || v > hi))
        refuse(rd, "the checkpoint's %s %lld is out of range (%lld..%lld)", what, (long long)v,
               (long long)lo, (long long)hi);
}

/* The checkpoint's schedule, every phase, against this run's. */
static void check_schedule(reader *rd, json_object *sc, int64_t n_phases,
                           const lattice_schedule *schedule)
{
    json_object *arr;
    if (!rd->ok)
        return;
    if (!json_object_object_get_ex(sc, "phases", &arr) ||
        !json_object_is_type(arr, json_type_array) ||
        (int64_t)json_object_array_length(arr) != n_phases) {
        refuse(rd, "the checkpoint's state lacks schedule.phases, an array of schedule.n_phases "
                   "(%lld) phases: this run cannot tell whether it resumes the same schedule",
               (long long)n_phases);
        return;
    }
    lattice__schedule_at now;
    lattice__schedule_where(schedule, &now);
    lattice__setup have = {0}, want = {0};
    lattice_schedule_phase *ph = calloc((size_t)n_phases + 1, sizeof(*ph));
    if (!ph) {
        no_memory(rd, "read the checkpoint's schedule");
        return;
    }
    for (int64_t i = 0; rd->ok && i < n_phases; i++) {
        char what[48], why[LATTICE_ERRMSG_SIZE];
        snprintf(what, sizeof what, "schedule.phases[%lld]", (long long)i);
        lattice_schedule_phase_init(&ph[i]);
        if (!lattice__fields_from_json(&lattice__phase_fields,
                                       json_object_array_get_idx(arr, (size_t)i), what,
                                       RECORD_SINCE, &ph[i], why, sizeof why))
            refuse(rd, "the checkpoint's state %s", why);
    }
    if (rd->ok)
        lattice__setup_phases(ph, (int)n_phases, &have);
    free(ph);
    lattice__setup_phases(now.phases, now.n_phases, &want);
    if (have.failed || want.failed)
        no_memory(rd, "compare the checkpoint's schedule");
    const int at = rd->ok ? lattice__setup_first_difference(&have, &want) : -1;
    if (at >= 0) {
        char what[LATTICE_ERRMSG_SIZE];
        lattice__setup_describe(what, sizeof what, "the checkpoint", "this run", LATTICE__PART_SCHEDULE,
                                &have, &want, at);
        refuse(rd, "%s: another schedule (resume with the schedule the checkpoint was written with)",
               what);
    }
    lattice__setup_free(&have);
    lattice__setup_free(&want);
}

/* Where the run stands against where its schedule stands: the trainer
 * applies a phase's start (its depth, trainable layers, optimizer restart)
 * at the phase's first step, so the last phase applied is the current one
 * once a step into it, the one before at a phase's start, or none (-1) for
 * a run bound to its schedule since its last step; and the active layers
 * are the applied phase's. A state that says otherwise would resume another
 * run: 0.4 and 1.0 before issue 48 loaded n_active 3 for a phase of 4. */
static void check_run_state(reader *rd, const checkpoint_restored *r, const lattice_schedule *s)
{
    if (!rd->ok || r->applied_phase < 0)
        return;
    lattice__schedule_at at;
    lattice__schedule_where(s, &at);
    const int64_t a = r->applied_phase, p = r->phase;
    if (a > p)
        refuse(rd, "the checkpoint's applied_phase %lld is after its schedule.phase %lld: a run "
                   "applies a phase only once it stands in it", (long long)a, (long long)p);
    else if (a < p && (a != p - 1 || r->step_in_phase != 0 || r->nonpad_in_phase != 0))
        refuse(rd, "the checkpoint's applied_phase %lld is before its schedule.phase %lld, "
                   "%lld steps into it: a run applies a phase at its first step",
               (long long)a, (long long)p, (long long)r->step_in_phase);
    else if (r->n_active != at.phases[a].active_layers)
        refuse(rd, "the checkpoint's model.n_active %lld is not the %d active layers of its "
                   "applied phase %lld", (long long)r->n_active, at.phases[a].active_layers,
               (long long)a);
}

/* The checkpoint's values (the JSON object obj, named what) of this run's
 * fields want, in want's order, into have. */
static void read_fields(reader *rd, json_object *dt, const char *what, const lattice__setup *want,
                        lattice__setup *have)
{
    for (int i = 0; rd->ok && i < want->n; i++) {
        const lattice__setup_field *f = &want->f[i];
        json_object *x;
        int64_t v = 0;
        double d = 0.0;
        int got = json_object_object_get_ex(dt, f->name, &x);
        if (got && f->kind == LATTICE__SETUP_REAL) {
            got = getd(dt, f->name, &d);
            memcpy(&v, &d, sizeof(v));
        } else if (got && f->kind == LATTICE__SETUP_HASH) {
            const char *hex = json_object_is_type(x, json_type_string) ? json_object_get_string(x) : "";
            got = strlen(hex) == 16 && strspn(hex, "0123456789abcdef") == 16;
            v = (int64_t)strtoull(hex, NULL, 16);
        } else if (got) {
            got = get64(dt, f->name, &v);
        }
        if (!got)
            refuse(rd, "the checkpoint's state lacks %s.%s, or it is not %s", what, f->name,
                   f->kind == LATTICE__SETUP_HASH ? "16 hex digits" : "a number");
        lattice__setup_add(have, (lattice__setup_kind)f->kind, v, "%s", f->name);
    }
    if (have->failed)
        no_memory(rd, "compare the checkpoint's setup");
}

/* The checkpoint's model (its setup, model.setup) against this run's: every
 * option of the architecture, named with both values where they first
 * differ. A checkpoint from before 1.0 has its tensors' shapes only, which
 * say nothing of a residual scale or a block_rescale: it is refused. */
static void check_model(reader *rd, json_object *md)
{
    json_object *arch;
    if (!rd->ok)
        return;
    if (!json_object_object_get_ex(md, "setup", &arch) ||
        !json_object_is_type(arch, json_type_object)) {
        refuse(rd, "the checkpoint's state lacks model.setup, the model's settings (placement, "
                   "residual_scale, block_rescale, ...; written since 0.5): this run cannot tell "
                   "whether it resumes the same model");
        return;
    }
    lattice__setup want, have = {0};
    if (!lattice__setup_of(rd->t, LATTICE__PART_MODEL, 0, &want))
        no_memory(rd, "compare the checkpoint's model");
    read_fields(rd, arch, "model.setup", &want, &have);
    const int at = rd->ok ? lattice__setup_first_difference(&have, &want) : -1;
    if (at >= 0) {
        char what[LATTICE_ERRMSG_SIZE];
        lattice__setup_describe(what, sizeof what, "the checkpoint", "this run",
                                LATTICE__PART_MODEL, &have, &want, at);
        refuse(rd, "%s: another model (resume into a model set up as the checkpoint's was)",
               what);
    }
    lattice__setup_free(&have);
    lattice__setup_free(&want);
}

/* The checkpoint's data (since 0.4: its settings and corpus) against this
 * run's. Other data is refused unless flags allow it; then the iterator
 * keeps its own position unless the checkpoint's means the same documents
 * (same corpus, split, seed and packing). */
static void check_data(reader *rd, json_object *dt, unsigned flags, checkpoint_restored *r)
{
    if (!rd->ok)
        return;
    lattice__setup want, have = {0};
    if (!lattice__setup_of(rd->t, LATTICE__PART_DATA, 0, &want)) {
        lattice__setup_free(&want);
        no_memory(rd, "compare the checkpoint's data");
        return;
    }
    read_fields(rd, dt, "data", &want, &have);
    const int at = rd->ok ? lattice__setup_first_difference(&have, &want) : -1;
    if (at >= 0 && !(flags & LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA)) {
        char what[LATTICE_ERRMSG_SIZE];
        lattice__setup_describe(what, sizeof what, "the checkpoint", "this run", LATTICE__PART_DATA,
                                &have, &want, at);
        refuse(rd, "%s: the run would resume on other data (load with "
                   "LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA to do so on purpose)", what);
    } else if (at >= 0) {
        static const char *const order[] = {"boundary_id", "pack", "seed", "split_long",
                                            "corpus_tokens", "corpus_documents",
                                            "train_documents", "corpus_hash"};
        int packed = 0;
        for (int i = 0; i < want.n; i++) {
            const int differs = have.f[i].value != want.f[i].value;
            if (!strcmp(want.f[i].name, "pack"))
                packed = want.f[i].value != 0;
            for (size_t k = 0; k < sizeof order / sizeof order[0]; k++)
                if (differs && !strcmp(want.f[i].name, order[k]))
                    r->keep_data_position = 1;
        }
        /* packed rows are seq_len + 1 tokens: the index counts them */
        for (int i = 0; packed && i < want.n; i++)
            if (!strcmp(want.f[i].name, "seq_len") && have.f[i].value != want.f[i].value)
                r->keep_data_position = 1;
    }
    lattice__setup_free(&have);
    lattice__setup_free(&want);
}

lattice_status lattice__checkpoint_parse_state(lattice_trainer *t, const char *js, unsigned flags,
                                               checkpoint_restored *r)
{
    json_object *j = NULL, *op = NULL, *sc = NULL, *md = NULL, *layers = NULL, *dt = NULL;
    if (!js)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint has no lattice.checkpoint state");
    lattice_status pst = lattice__json_parse(js, strlen(js), 0, "the checkpoint's state", &j, t->err);
    if (pst != LATTICE_OK)
        return pst;
    reader rd = {t, 1, LATTICE_OK};
    if (!j || !json_object_is_type(j, json_type_object))
        refuse(&rd, "the checkpoint's state is not a JSON object");
    op = need_object(&rd, j, "optim");
    sc = need_object(&rd, j, "schedule");
    md = need_object(&rd, j, "model");
    int64_t n_phases = -1;
    need64(&rd, op, "optim", "step", &r->optim_step);
    lattice_optim_params_init(&r->op);
    if (rd.ok) {
        char why[LATTICE_ERRMSG_SIZE];
        if (!lattice__fields_from_json(&lattice__optim_fields, op, "optim", RECORD_SINCE, &r->op,
                                       why, sizeof why))
            refuse(&rd, "the checkpoint's state %s", why);
    }
    need64(&rd, sc, "schedule", "n_phases", &n_phases);
    need64(&rd, sc, "schedule", "phase", &r->phase);
    need64(&rd, sc, "schedule", "step_in_phase", &r->step_in_phase);
    need64(&rd, sc, "schedule", "nonpad_in_phase", &r->nonpad_in_phase);
    need64(&rd, sc, "schedule", "steps", &r->counters.steps);
    need64(&rd, sc, "schedule", "tokens", &r->counters.tokens);
    need64(&rd, sc, "schedule", "nonpad_tokens", &r->counters.nonpad_tokens);
    need64(&rd, sc, "schedule", "active_layer_tokens", &r->counters.active_layer_tokens);
    needd(&rd, sc, "schedule", "flops", &r->counters.flops);
    need64(&rd, md, "model", "n_active", &r->n_active);
    need64(&rd, md, "model", "trainable_embedding", &r->tr_emb);
    need64(&rd, md, "model", "trainable_boundary", &r->tr_bnd);
    need64(&rd, md, "model", "trainable_head", &r->tr_head);
    if (rd.ok && (!json_object_object_get_ex(md, "trainable_layers", &layers) ||
                  !json_object_is_type(layers, json_type_array)))
        refuse(&rd, "the checkpoint's state lacks model.trainable_layers, or it is not an array");
    need64(&rd, j, NULL, "data_epoch", &r->pos.epoch);
    need64(&rd, j, NULL, "data_index", &r->pos.index);
    need64(&rd, j, NULL, "applied_phase", &r->applied_phase);
    if (rd.ok) {
        /* where rewinding phases send the data: written once a run has
         * applied a phase (its first step) */
        int64_t oe = 0, oi = 0;
        const int has_e = json_object_object_get_ex(j, "data_origin_epoch", NULL);
        const int has_i = json_object_object_get_ex(j, "data_origin_index", NULL);
        if (has_e != has_i)
            refuse(&rd, "the checkpoint's state has %s without %s", has_e ? "data_origin_epoch" :
                   "data_origin_index", has_e ? "data_origin_index" : "data_origin_epoch");
        else if (!has_e && r->applied_phase >= 0)
            refuse(&rd, "the checkpoint's state lacks data_origin_epoch and data_origin_index, "
                        "where its run began, which a run past its first step has");
        if (has_e) {
            need64(&rd, j, NULL, "data_origin_epoch", &oe);
            need64(&rd, j, NULL, "data_origin_index", &oi);
        }
        if (rd.ok && has_e) {
            r->have_origin = 1;
            r->origin = (lattice_data_position){oe, oi};
        }
    }
    /* since 0.3, written by runs with a collective; none means one rank */
    int64_t ranks = 1;
    if (rd.ok && json_object_object_get_ex(j, "ranks", NULL)) {
        need64(&rd, j, NULL, "ranks", &ranks);
        in_range(&rd, "ranks", ranks, 1, INT32_MAX);
    }
    /* Counters stay far from overflow (and exact as doubles): a run adds to them. */
    const int64_t big = (int64_t)1 << 50;
    const lattice_schedule_counters *c = &r->counters;
    in_range(&rd, "optim.step", r->optim_step, 0, big);
    in_range(&rd, "schedule.step_in_phase", r->step_in_phase, 0, big);
    in_range(&rd, "schedule.nonpad_in_phase", r->nonpad_in_phase, 0, big);
    in_range(&rd, "schedule.steps", c->steps, 0, big);
    in_range(&rd, "schedule.tokens", c->tokens, 0, big);
    in_range(&rd, "schedule.nonpad_tokens", c->nonpad_tokens, 0, c->tokens);
    in_range(&rd, "schedule.active_layer_tokens", c->active_layer_tokens, 0, big);
    if (rd.ok && (!(c->flops >= 0.0) || !isfinite(c->flops)))
        refuse(&rd, "the checkpoint's schedule.flops %g is not a finite count", c->flops);
    in_range(&rd, "data_epoch", r->pos.epoch, INT64_MIN, big);
    if (r->have_origin)
        in_range(&rd, "data_origin_epoch", r->origin.epoch, INT64_MIN, big);
    in_range(&rd, "schedule.n_phases", n_phases, 1, INT32_MAX);
    in_range(&rd, "schedule.phase", r->phase, 0, n_phases);
    in_range(&rd, "applied_phase", r->applied_phase, -1, n_phases - 1);
    const int64_t capacity = rd.ok ? (int64_t)json_object_array_length(layers) : 0;
    in_range(&rd, "model.n_active", r->n_active, 1, capacity);
    const int n_layers = lattice__model_params(t->model)->n_layers;
    const lattice_schedule *s = t->schedule;
    if (rd.ok && capacity != n_layers)
        refuse(&rd, "the checkpoint is of a model with a capacity of %lld layers "
                    "(model.trainable_layers) and this run's model has %d: another model",
               (long long)capacity, n_layers);
    check_model(&rd, md);
    if (rd.ok) {
        r->tr_layers = calloc((size_t)n_layers, sizeof(int));
        if (!r->tr_layers)
            no_memory(&rd, "restore the checkpoint");
        for (int i = 0; rd.ok && i < n_layers; i++) {
            json_object *x = json_object_array_get_idx(layers, i);
            if (!json_object_is_type(x, json_type_int))
                refuse(&rd, "the checkpoint's model.trainable_layers[%d] is not an integer", i);
            r->tr_layers[i] = json_object_get_int64(x) != 0;
        }
    }
    /* the setup it was written with against this run's */
    check_schedule(&rd, sc, n_phases, s);
    dt = need_object(&rd, j, "data");
    /* the position inside a phase must be one the schedule can reach, and
     * the run's state the one that position leaves */
    char why[LATTICE_ERRMSG_SIZE];
    if (rd.ok && !lattice__schedule_check_position(s, r->phase, r->step_in_phase,
                                                   r->nonpad_in_phase, why, sizeof why))
        refuse(&rd, "the checkpoint's schedule position is not one of this run's schedule: %s",
               why);
    check_run_state(&rd, r, s);
    if (dt)
        check_data(&rd, dt, flags, r);
    json_object_put(j);
    if (!rd.ok)
        return rd.st;
    /* the ranks share one state, and the data position counts global
     * batches: only the sums' rounding depends on the count */
    if (ranks != t->n_ranks && !(flags & LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS))
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                    "the checkpoint was written by a run over %lld rank%s and this run has %d: "
                    "resume it with %lld (each rank's share of a batch, and so every sum, depends "
                    "on the rank count), or load with LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS",
                    (long long)ranks, ranks == 1 ? "" : "s", t->n_ranks, (long long)ranks);
    /* the optimizer settings pass the setter's own checks (nothing is set here) */
    char bad[LATTICE_ERRMSG_MAX];
    if (lattice__optim_check_params(&r->op, bad) != LATTICE_OK)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint's optimizer settings: %s", bad);
    return LATTICE_OK;
}
