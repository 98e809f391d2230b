/* The study's run in miniature, for the teacher and trainer suites: a 4-layer
 * student of 257 byte ids grown in 2 blocks of 2 layers (6 steps each) under
 * a 3-layer pre-norm teacher, on eight proverbs with a validation split;
 * built by the rig with the trainer left to study_bind. Also a callback
 * teacher with known logits, and a log of the trainer's callbacks. */
#ifndef LATTICE_STUDY_RUN_H
#define LATTICE_STUDY_RUN_H

#include "testutil.h"

enum { VOCAB = 257 };

static const char *const study_corpus =
    "The quick brown fox jumps over the lazy dog.\f"
    "A stitch in time saves nine.\f"
    "All that glitters is not gold.\f"
    "Where there is a will there is a way.\f"
    "Actions speak louder than words.\f"
    "Better late than never, but never late is better.\f"
    "Fortune favours the bold.\f"
    "Knowledge is power.";

/* The run's options: the student's norm placement and the schedule's preset. */
static inline void study_options(rig_options *o, lattice_norm_placement student,
                                 lattice_schedule_preset preset)
{
    rig_options_init(o);
    o->backend = lattice_backend_has_blis() ? "blis" : "ref";
    o->threads = 2;
    o->placement = student;
    o->model.vocab_size = VOCAB;
    o->model.d_model = 16;
    o->model.n_layers = o->model.n_active_layers = 4;
    o->model.head_dim = 8;
    o->model.d_ff = 32;
    o->model.max_batch = 4;
    o->model.max_seq = 48;
    o->model.seed = 12;
    o->teacher = RIG_TEACHER_MODEL;
    o->teacher_layers = 3;
    o->teacher_seed = 11;
    o->text = study_corpus;
    o->data.val_fraction = 0.25f;
    o->data.seed = 5;
    o->optim.lr = 3e-3f;
    o->optim.min_lr = 3e-4f;
    o->optim.warmup_steps = 2;
    o->preset = preset;
    o->block_size = 2;
    o->steps_per_phase = 6;
    o->defer_trainer = 1;
}

static inline void study_open(rig *r, lattice_norm_placement student,
                              lattice_schedule_preset preset)
{
    rig_options o;
    study_options(&o, student, preset);
    tu_rig_open(r, &o);
}

typedef struct cb_state {
    int calls;
    int nan_at; /* call number that returns a NaN (0: never) */
    int fail;
} cb_state;

/* A deterministic callback teacher: prefers the token after the input token. */
static inline int cb_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                             float *z)
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

/* The run with a callback teacher (cb_teacher, or one of the test's own). */
static inline void study_open_cb(rig *r, lattice_norm_placement student,
                                 lattice_schedule_preset preset, lattice_teacher_fn fn, void *user)
{
    rig_options o;
    study_options(&o, student, preset);
    o.teacher = RIG_TEACHER_CALLBACK;
    o.teacher_fn = fn;
    o.teacher_user = user;
    tu_rig_open(r, &o);
}

typedef struct log {
    int steps, evals, phase_ends;
    int active[64];
    double last_val, first_kl, last_kl;
} log_t;

static inline int on_step(void *user, const lattice_trainer_metrics *m)
{
    log_t *l = user;
    if (l->steps == 0)
        l->first_kl = m->kl;
    l->last_kl = m->kl;
    l->active[l->steps++] = m->active_layers;
    l->phase_ends += m->phase_end;
    return 0;
}

static inline int on_eval(void *user, const lattice_trainer_metrics *m)
{
    log_t *l = user;
    l->evals++;
    l->last_val = m->val_ce;
    return 0;
}

/* The trainer, its callbacks logging into l, validating every eval_every steps. */
static inline void study_bind(rig *r, log_t *l, int64_t eval_every)
{
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = eval_every;
    tp.on_step = on_step;
    tp.on_eval = on_eval;
    tp.user = l;
    memset(l, 0, sizeof(*l));
    tu_rig_bind(r, &tp);
}

#endif
