/* One tiny run, built identically on every rank, for the data-parallel tests
 * (the in-process fake collective of test_collective.c and the MPI suite):
 * a 2-layer student grown 1 -> 2 layers (the first phase a token budget, so
 * that the counters must be global for the phases to end together), an
 * optional 2-layer teacher, byte-like data with documents of 3..8 tokens and
 * a validation split. The rig (rig.h) builds it; this header says how the
 * ranks' runs are set up. No Check here: the MPI tests use their own asserts. */
#ifndef LATTICE_DISTWORLD_H
#define LATTICE_DISTWORLD_H

#include "rig.h"

#define DW_SEQ 6

/* How to build a world: the data's (global) batch, the model's max_batch,
 * with or without a teacher, and the trainer's callbacks. */
typedef struct dw_config {
    int batch;
    int max_batch;
    int teacher;
    lattice_trainer_metrics_fn on_step;
    void *user;
    lattice_teacher_fn teacher_fn; /* a callback teacher instead of the model one */
    const char *teacher_file;      /* a recorded teacher (lattice_teacher_record) instead */
    const lattice_trainer_collective *coll; /* data-parallel from the trainer's creation */
    void *coll_user;
    /* a rank set up unlike the others (0: the defaults) */
    uint64_t data_seed;   /* 3 */
    uint64_t model_seed;  /* 42 */
    int64_t phase2_steps; /* 12 */
    int max_seq;          /* DW_SEQ: the model's; the data's rows stay DW_SEQ long */
} dw_config;

/* The rig's options for the world c describes (phases: storage for its two). */
static inline void dw_options(rig_options *o, lattice_schedule_phase phases[2], const dw_config *c)
{
    rig_options_init(o);
    o->model.max_batch = c->max_batch;
    o->model.max_seq = c->max_seq ? c->max_seq : DW_SEQ;
    o->model.seed = c->model_seed ? c->model_seed : 42;
    if (c->teacher_file) {
        o->teacher = RIG_TEACHER_FILE;
        o->teacher_file = c->teacher_file;
    } else if (c->teacher_fn) {
        o->teacher = RIG_TEACHER_CALLBACK;
        o->teacher_fn = c->teacher_fn;
        o->teacher_user = c->user;
    } else if (c->teacher) {
        o->teacher = RIG_TEACHER_MODEL;
    }
    o->data.batch_size = c->batch;
    o->data.seq_len = DW_SEQ;
    o->data.seed = c->data_seed ? c->data_seed : 3;
    o->data.val_fraction = 0.1f;
    o->optim.lr = 1e-2f;
    o->optim.warmup_steps = 2;
    o->optim.total_steps = 20;
    o->optim.clip_norm = 1.0f;
    lattice_schedule_phase_init(&phases[0]);
    phases[0].steps = 0;
    phases[0].tokens = 80; /* a token budget: ends at the same step only with global counters */
    phases[0].active_layers = 1;
    phases[1] = phases[0];
    phases[1].steps = c->phase2_steps ? c->phase2_steps : 12;
    phases[1].active_layers = 2;
    phases[1].reset_optimizer = 1;
    phases[1].block_init = LATTICE_SCHEDULE_BLOCK_INIT_COPY;
    o->phases = phases;
    o->n_phases = 2;
    o->trainer.eval_every = 4;
    o->trainer.on_step = c->on_step;
    o->trainer.user = c->user;
    o->trainer.collective = c->coll;
    o->trainer.collective_user = c->coll_user;
}

/* Returns the first failing status (lattice_last_error() says why). */
static inline lattice_status dw_open(rig *w, const dw_config *c)
{
    rig_options o;
    lattice_schedule_phase phases[2];
    dw_options(&o, phases, c);
    return rig_open(w, &o);
}

#endif
