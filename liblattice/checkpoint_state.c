/* A checkpoint's state as JSON (checkpoint_state.h): written from a run, and
 * read back with every value checked before anything changes. */
#include "checkpoint_state.h"

#include "fields.h"

#include "json.h"
#include "optim_access.h"
#include "setup.h"

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The oldest state a load reads: 0.5's, the first with model.setup. Its
 * every field must be there (lattice__fields_from_json). */
#define RECORD_SINCE 5

/* The trainer's own values in the state, and the optimizer's step count. */
static const lattice__field own_fields[] = {
    {"step", LATTICE__F_I64, offsetof(checkpoint_state, optim_step), 1, 0, LATTICE__COUNT_MAX},
    {"applied_phase", LATTICE__F_INT, offsetof(checkpoint_state, applied_phase), 1, -1, INT32_MAX},
    {"ranks", LATTICE__F_INT, offsetof(checkpoint_state, ranks), 3, 1, INT32_MAX},
};
static const lattice__fields optim_step = {own_fields, 1}, applied_phase = {own_fields + 1, 1},
                             ranks = {own_fields + 2, 1};

/* The run's state, part by part in the order a checkpoint writes them: each
 * a table over its struct at offset `at` of checkpoint_state, in the JSON
 * object named (NULL: the top level). An optional part is there where the
 * int at offset `has` says so (the data's origin once the run has begun,
 * the rank count with a collective), and then with all its keys. */
typedef struct state_part {
    const char *object;
    const lattice__fields *fields;
    size_t at, has; /* has 0: always there */
} state_part;
#define PART(object, fields, at, has) {object, fields, offsetof(checkpoint_state, at), has}
static const state_part parts[] = {
    {"optim", &optim_step, 0, 0},
    PART("optim", &lattice__optim_fields, op, 0),
    PART("schedule", &lattice__schedule_at_fields, at, 0),
    PART("model", &lattice__model_run_fields, run, 0),
    PART(NULL, &lattice__data_position_fields, data, 0),
    {NULL, &applied_phase, 0, 0},
    PART(NULL, &lattice__data_origin_fields, data, offsetof(checkpoint_state, data.have_origin)),
    {NULL, &ranks, 0, offsetof(checkpoint_state, has_ranks)},
};
#undef PART
#define N_PARTS (sizeof parts / sizeof parts[0])

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
    checkpoint_state s = {.optim_step = lattice_optim_get_steps(t->optim),
                          .op = *lattice__optim_params(t->optim),
                          .run = lattice__model_get_run(t->model),
                          .data = {.have_origin = t->have_origin, .origin = t->data_origin},
                          .applied_phase = t->applied_phase,
                          .has_ranks = t->has_coll,
                          .ranks = t->n_ranks};
    lattice__schedule_where(t->schedule, &s.at);
    lattice_data_get_position(t->data, &s.data.pos);
    json_object *j = json_object_new_object(), *sc = json_object_new_object(),
                *md = json_object_new_object(), *arch = json_object_new_object(),
                *layers = json_object_new_array(), *phases = json_object_new_array(),
                *dt = json_object_new_object();
    /* the setups a load compares: the data's settings and corpus and the
     * whole schedule (since 0.4), the model's (since 1.0); their names are
     * constant keys: the lists outlive j */
    lattice__setup data, model;
    int ok = lattice__setup_of(t, LATTICE__PART_DATA, 0, &data);
    ok = lattice__setup_of(t, LATTICE__PART_MODEL, 0, &model) && ok;
    /* the containers join their objects, and these j, before anything else
     * (so that one put of j frees whatever was built), in the order written,
     * each object with what comes before the parts in it */
    ok = lattice__json_add(sc, "phases", phases) && ok;
    ok = lattice__json_add(md, "setup", arch) && ok;
    ok = lattice__json_add(md, "trainable_layers", layers) && ok;
    ok = lattice__json_add(j, "optim", json_object_new_object()) && ok;
    ok = lattice__json_add(j, "schedule", sc) && ok;
    ok = lattice__json_add(j, "model", md) && ok;
    ok = lattice__json_add(j, "data", dt) && ok;
    for (size_t i = 0; ok && i < N_PARTS; i++) {
        json_object *o = j;
        if (parts[i].object)
            json_object_object_get_ex(j, parts[i].object, &o);
        if (!parts[i].has || *(const int *)((const char *)&s + parts[i].has))
            ok = lattice__fields_to_json(parts[i].fields, (const char *)&s + parts[i].at, o);
    }
    for (int i = 0; ok && i < s.at.n_phases; i++) {
        json_object *o = json_object_new_object();
        ok = lattice__json_push(phases, o) &&
             lattice__fields_to_json(&lattice__phase_fields, &s.at.phases[i], o);
    }
    for (int i = 0; ok && i < data.n; i++)
        ok = lattice__json_add(dt, data.f[i].name, field_json(&data.f[i]));
    for (int i = 0; ok && i < model.n; i++)
        ok = lattice__json_add(arch, model.f[i].name, field_json(&model.f[i]));
    for (int i = 0; ok && i < lattice__model_params(t->model)->n_layers; i++)
        ok = lattice__json_push(layers, json_object_new_int64(s.run.trainable_layer[i]));
    char *out = ok ? lattice__json_dump(j) : NULL;
    json_object_put(j);
    lattice__setup_free(&data);
    lattice__setup_free(&model);
    return out;
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

static void in_range(reader *rd, const char *what, int64_t v, int64_t lo, int64_t hi)
{
    if (rd->ok && (v < lo || v > hi))
        refuse(rd, "the checkpoint's %s %lld is out of range (%lld..%lld)", what, (long long)v,
               (long long)lo, (long long)hi);
}

/* The checkpoint's schedule, every phase, against this run's. */
static void check_schedule(reader *rd, json_object *sc, int64_t n_phases)
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
    lattice__schedule_where(rd->t->schedule, &now);
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

/* The checkpoint's values (the JSON object o, named what) of this run's
 * setup part, in its order, into have, against this run's list want: the
 * first difference (-1: none), described into diff. The caller frees both
 * lists. */
static int compare_setup(reader *rd, json_object *o, const char *what, int part,
                         lattice__setup *have, lattice__setup *want, char *diff, size_t n)
{
    if (!lattice__setup_of(rd->t, part, 0, want))
        no_memory(rd, "compare the checkpoint's setup");
    for (int i = 0; rd->ok && i < want->n; i++) {
        const lattice__setup_field *f = &want->f[i];
        json_object *x;
        int64_t v = 0;
        double d = 0.0;
        int got = json_object_object_get_ex(o, f->name, &x);
        if (got && f->kind == LATTICE__SETUP_REAL) {
            got = json_object_is_type(x, json_type_double) || json_object_is_type(x, json_type_int);
            d = json_object_get_double(x);
            memcpy(&v, &d, sizeof(v));
        } else if (got && f->kind == LATTICE__SETUP_HASH) {
            const char *hex = json_object_is_type(x, json_type_string) ? json_object_get_string(x) : "";
            got = strlen(hex) == 16 && strspn(hex, "0123456789abcdef") == 16;
            v = (int64_t)strtoull(hex, NULL, 16);
        } else if (got) {
            got = json_object_is_type(x, json_type_int);
            v = json_object_get_int64(x);
        }
        if (!got)
            refuse(rd, "the checkpoint's state lacks %s.%s, or it is not %s", what, f->name,
                   f->kind == LATTICE__SETUP_HASH ? "16 hex digits" : "a number");
        lattice__setup_add(have, (lattice__setup_kind)f->kind, v, "%s", f->name);
    }
    if (have->failed)
        no_memory(rd, "compare the checkpoint's setup");
    const int at = rd->ok ? lattice__setup_first_difference(have, want) : -1;
    if (at >= 0)
        lattice__setup_describe(diff, n, "the checkpoint", "this run", part, have, want, at);
    return at;
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
                   "residual_scale, block_rescale, ...; written since 1.0): this run cannot tell "
                   "whether it resumes the same model");
        return;
    }
    lattice__setup want = {0}, have = {0};
    char diff[LATTICE_ERRMSG_SIZE];
    if (compare_setup(rd, arch, "model.setup", LATTICE__PART_MODEL, &have, &want, diff,
                      sizeof diff) >= 0)
        refuse(rd, "%s: another model (resume into a model set up as the checkpoint's was)",
               diff);
    lattice__setup_free(&have);
    lattice__setup_free(&want);
}

/* The checkpoint's data (since 0.4: its settings and corpus) against this
 * run's. Other data is refused unless flags allow it; then the iterator
 * keeps its own position unless the checkpoint's means the same documents
 * (same corpus, split, seed and packing). */
static void check_data(reader *rd, json_object *dt, unsigned flags, checkpoint_state *r)
{
    if (!rd->ok)
        return;
    lattice__setup want = {0}, have = {0};
    char diff[LATTICE_ERRMSG_SIZE];
    const int at = compare_setup(rd, dt, "data", LATTICE__PART_DATA, &have, &want, diff,
                                 sizeof diff);
    if (at >= 0 && !(flags & LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA)) {
        refuse(rd, "%s: the run would resume on other data (load with "
                   "LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA to do so on purpose)", diff);
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

/* Each part of the state into r, every value in its range (its table's). */
static void read_parts(reader *rd, json_object *j, checkpoint_state *r)
{
    for (size_t i = 0; rd->ok && i < N_PARTS; i++) {
        const state_part *p = &parts[i];
        json_object *o = p->object ? need_object(rd, j, p->object) : j;
        char why[LATTICE_ERRMSG_SIZE];
        /* an optional part may be absent as a later release's fields may */
        if (o && !lattice__fields_from_json(p->fields, o, p->object ? p->object : "",
                                            p->has ? 0 : RECORD_SINCE, (char *)r + p->at, why,
                                            sizeof why))
            refuse(rd, "the checkpoint's state %s", why);
        if (rd->ok && p->has)
            *(int *)((char *)r + p->has) = json_object_object_get_ex(o, p->fields->f[0].name, NULL);
    }
}

/* The model's layer flags, model.trainable_layers: one for each layer of
 * this run's model, or the checkpoint is of another. */
static void read_layers(reader *rd, json_object *j, checkpoint_state *r)
{
    json_object *md, *layers;
    if (!rd->ok)
        return;
    json_object_object_get_ex(j, "model", &md);
    if (!json_object_object_get_ex(md, "trainable_layers", &layers) ||
        !json_object_is_type(layers, json_type_array)) {
        refuse(rd, "the checkpoint's state lacks model.trainable_layers, or it is not an array");
        return;
    }
    const int n_layers = lattice__model_params(rd->t->model)->n_layers;
    const size_t capacity = json_object_array_length(layers);
    if (capacity != (size_t)n_layers) {
        refuse(rd, "the checkpoint is of a model with a capacity of %zu layers "
                   "(model.trainable_layers) and this run's model has %d: another model",
               capacity, n_layers);
        return;
    }
    r->layers = calloc((size_t)n_layers, sizeof(int));
    if (!r->layers)
        no_memory(rd, "restore the checkpoint");
    for (int i = 0; rd->ok && i < n_layers; i++) {
        json_object *x = json_object_array_get_idx(layers, (size_t)i);
        if (!json_object_is_type(x, json_type_int))
            refuse(rd, "the checkpoint's model.trainable_layers[%d] is not an integer", i);
        r->layers[i] = json_object_get_int64(x) != 0;
    }
    r->run.trainable_layer = r->layers;
}

/* Where the run stands against where its schedule stands: the trainer
 * applies a phase's start (its depth, trainable layers, optimizer restart)
 * at the phase's first step, so the last phase applied is the current one
 * once a step into it, the one before at a phase's start, or none (-1) for
 * a run bound to its schedule since its last step; and the active layers
 * are the applied phase's. A state that says otherwise would resume another
 * run: 0.4 and 1.0 before issue 48 loaded n_active 3 for a phase of 4. */
static void check_run_state(reader *rd, const checkpoint_state *r, const lattice__schedule_at *at)
{
    const int64_t a = r->applied_phase, p = r->at.phase;
    if (!rd->ok || a < 0)
        return;
    if (a > p)
        refuse(rd, "the checkpoint's applied_phase %lld is after its schedule.phase %lld: a run "
                   "applies a phase only once it stands in it", (long long)a, (long long)p);
    else if (a < p && (a != p - 1 || r->at.step_in_phase != 0 || r->at.nonpad_in_phase != 0))
        refuse(rd, "the checkpoint's applied_phase %lld is before its schedule.phase %lld, "
                   "%lld steps into it: a run applies a phase at its first step",
               (long long)a, (long long)p, (long long)r->at.step_in_phase);
    else if (r->run.n_active != at->phases[a].active_layers)
        refuse(rd, "the checkpoint's model.n_active %d is not the %d active layers of its "
                   "applied phase %lld", r->run.n_active, at->phases[a].active_layers,
               (long long)a);
}

/* Every check that relates two values of the state, or a value to this run
 * (each value's own range is its table's): the one place for them, run once
 * the state is known to be of this run's model, schedule and data. */
static void check_state(reader *rd, const checkpoint_state *r)
{
    if (!rd->ok)
        return;
    lattice__schedule_at at; /* this run's schedule: the checkpoint's (check_schedule) */
    lattice__schedule_where(rd->t->schedule, &at);
    const lattice_schedule_counters *c = &r->at.counters;
    char why[LATTICE_ERRMSG_SIZE];
    /* the counters: the non-padding tokens are among all, the phase's among the run's */
    in_range(rd, "schedule.nonpad_tokens", c->nonpad_tokens, 0, c->tokens);
    if (rd->ok && r->at.nonpad_in_phase > c->nonpad_tokens)
        refuse(rd, "the checkpoint's schedule.nonpad_in_phase %lld is more than its "
                   "schedule.nonpad_tokens %lld: the phase's tokens are among the run's",
               (long long)r->at.nonpad_in_phase, (long long)c->nonpad_tokens);
    /* the position, one the schedule can reach, and the run's state the one it leaves */
    if (rd->ok && !lattice__schedule_check_position(rd->t->schedule, &r->at, why, sizeof why))
        refuse(rd, "the checkpoint's schedule position is not one of this run's schedule: %s",
               why);
    in_range(rd, "applied_phase", r->applied_phase, -1, at.n_phases - 1);
    in_range(rd, "model.n_active", r->run.n_active, 1,
             lattice__model_params(rd->t->model)->n_layers);
    check_run_state(rd, r, &at);
    /* where rewinding phases send the data: there once a run has applied a phase */
    if (rd->ok && !r->data.have_origin && r->applied_phase >= 0)
        refuse(rd, "the checkpoint's state lacks data_origin_epoch and data_origin_index, "
                   "where its run began, which a run past its first step has");
    /* the data's positions within its pass, unless the run reads on where it stands */
    const lattice_data_position *pos[2] = {&r->data.origin, &r->data.pos};
    const int64_t pass = lattice__data_pass_length(rd->t->data);
    for (int i = !r->data.have_origin; !r->keep_data_position && i < 2; i++)
        if (rd->ok && pos[i]->index > pass)
            refuse(rd, "the checkpoint's data %s (pass %lld, index %lld) does not fit this data "
                       "(%lld per pass)", i ? "position" : "origin", (long long)pos[i]->epoch,
                   (long long)pos[i]->index, (long long)pass);
    /* the optimizer's settings pass the setter's own checks (nothing is set here) */
    char bad[LATTICE_ERRMSG_MAX];
    if (rd->ok && lattice__optim_check_params(&r->op, bad) != LATTICE_OK)
        refuse(rd, "the checkpoint's optimizer settings: %s", bad);
}

lattice_status lattice__checkpoint_parse_state(lattice_trainer *t, const char *js, unsigned flags,
                                               checkpoint_state *r)
{
    json_object *j = NULL;
    if (!js)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint has no lattice.checkpoint state");
    lattice_status pst = lattice__json_parse(js, strlen(js), 0, "the checkpoint's state", &j, t->err);
    if (pst != LATTICE_OK)
        return pst;
    reader rd = {t, 1, LATTICE_OK};
    if (!j || !json_object_is_type(j, json_type_object))
        refuse(&rd, "the checkpoint's state is not a JSON object");
    lattice_optim_params_init(&r->op);
    r->ranks = 1; /* none written: one rank */
    read_parts(&rd, j, r);
    read_layers(&rd, j, r);
    /* the setups it was written with against this run's */
    check_model(&rd, need_object(&rd, j, "model"));
    check_schedule(&rd, need_object(&rd, j, "schedule"), r->at.n_phases);
    check_data(&rd, need_object(&rd, j, "data"), flags, r);
    check_state(&rd, r);
    json_object_put(j);
    if (!rd.ok)
        return rd.st;
    /* the ranks share one state, and the data position counts global
     * batches: only the sums' rounding depends on the count */
    if (r->ranks != t->n_ranks && !(flags & LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS))
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                    "the checkpoint was written by a run over %d rank%s and this run has %d: "
                    "resume it with %d (each rank's share of a batch, and so every sum, depends "
                    "on the rank count), or load with LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS",
                    r->ranks, r->ranks == 1 ? "" : "s", t->n_ranks, r->ranks);
    return LATTICE_OK;
}
