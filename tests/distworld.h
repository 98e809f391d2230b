/* One tiny run, built identically on every rank, for the data-parallel tests
 * (the in-process fake collective of test_collective.c and the MPI suite):
 * a 2-layer student grown 1 -> 2 layers (the first phase a token budget, so
 * that the counters must be global for the phases to end together), an
 * optional 2-layer teacher, byte-like data with documents of 3..8 tokens and
 * a validation split. No Check here: the MPI tests use their own asserts. */
#ifndef LATTICE_DISTWORLD_H
#define LATTICE_DISTWORLD_H

#include <lattice/lattice.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "tiny_model.h"

#define DW_VOCAB 11 /* tu_tiny_params' vocab */
#define DW_SEQ 6
#define DW_N_IDS 600

typedef struct dw_world {
    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *m, *tm;
    lattice_teacher *teacher;
    lattice_distill *ds;
    lattice_data *d;
    lattice_optim *o;
    lattice_schedule *s;
    lattice_trainer *t;
    int32_t ids[DW_N_IDS];
} dw_world;

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
} dw_config;

/* The tests' tiny model, on this world's batch and rows. */
static inline void dw_model_params(lattice_model_params *p, int max_batch, uint64_t seed)
{
    tu_tiny_params(p);
    p->max_batch = max_batch;
    p->max_seq = DW_SEQ;
    p->seed = seed;
}

static inline void dw_close(dw_world *w)
{
    lattice_trainer_destroy(w->t);
    lattice_schedule_destroy(w->s);
    lattice_optim_destroy(w->o);
    lattice_data_destroy(w->d);
    lattice_distill_destroy(w->ds);
    lattice_teacher_destroy(w->teacher);
    lattice_model_destroy(w->tm);
    lattice_model_destroy(w->m);
    lattice_norm_destroy(w->norm);
    lattice_backend_destroy(w->be);
    memset(w, 0, sizeof(*w));
}

/* Returns the first failing status (lattice_last_error() says why). */
static inline lattice_status dw_open(dw_world *w, const dw_config *c)
{
    memset(w, 0, sizeof(*w));
    lattice_status st;
#define DW_TRY(call)                                                                              \
    do {                                                                                          \
        if ((st = (call)) != LATTICE_OK) {                                                        \
            dw_close(w);                                                                          \
            return st;                                                                            \
        }                                                                                         \
    } while (0)
    /* documents of 3..8 tokens, each starting with the boundary id 10 */
    uint64_t x = 12345;
    for (int i = 0; i < DW_N_IDS;) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        int len = 3 + (int)((x >> 33) % 6);
        w->ids[i++] = 10;
        for (int j = 1; j < len && i < DW_N_IDS; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            w->ids[i++] = (int32_t)((x >> 35) % 10);
        }
    }
    DW_TRY(lattice_backend_create("ref", &w->be));
    DW_TRY(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &w->norm));
    lattice_model_params mp;
    dw_model_params(&mp, c->max_batch, c->model_seed ? c->model_seed : 42);
    DW_TRY(lattice_model_create(&mp, w->norm, w->be, &w->m));
    if (c->teacher_file) {
        DW_TRY(lattice_teacher_create_file(c->teacher_file, &w->teacher, NULL));
    } else if (c->teacher_fn) {
        DW_TRY(lattice_teacher_create_callback(c->teacher_fn, c->user, DW_VOCAB, c->max_batch,
                                               DW_SEQ, &w->teacher));
    } else if (c->teacher) {
        dw_model_params(&mp, c->max_batch, 7);
        DW_TRY(lattice_model_create(&mp, w->norm, w->be, &w->tm));
        DW_TRY(lattice_teacher_create_model(w->tm, &w->teacher));
    }
    if (w->teacher) {
        lattice_distill_params kp;
        lattice_distill_params_init(&kp);
        DW_TRY(lattice_distill_create(&kp, &w->ds));
    }
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = DW_VOCAB;
    dp.boundary_id = 10;
    dp.batch_size = c->batch;
    dp.seq_len = DW_SEQ;
    dp.seed = c->data_seed ? c->data_seed : 3;
    dp.val_fraction = 0.1f;
    DW_TRY(lattice_data_create_memory(w->ids, DW_N_IDS, &dp, &w->d, NULL));
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 1e-2f;
    op.warmup_steps = 2;
    op.total_steps = 20;
    op.clip_norm = 1.0f;
    DW_TRY(lattice_optim_create(w->m, &op, &w->o));
    DW_TRY(lattice_schedule_create(&w->s));
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = 0;
    ph.tokens = 80; /* a token budget: ends at the same step only with global counters */
    ph.active_layers = 1;
    DW_TRY(lattice_schedule_add_phase(w->s, &ph));
    ph.steps = c->phase2_steps ? c->phase2_steps : 12;
    ph.active_layers = 2;
    ph.reset_optimizer = 1;
    ph.block_init = LATTICE_SCHEDULE_BLOCK_INIT_COPY;
    DW_TRY(lattice_schedule_add_phase(w->s, &ph));
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = 4;
    tp.on_step = c->on_step;
    tp.user = c->user;
    tp.collective = c->coll;
    tp.collective_user = c->coll_user;
    DW_TRY(lattice_trainer_create(w->m, w->teacher, w->ds, w->d, w->o, w->s, &tp, &w->t));
#undef DW_TRY
    return LATTICE_OK;
}

/* The student's weights, concatenated (caller frees). */
static inline float *dw_weights(lattice_model *m, size_t *count)
{
    size_t n = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        n += (size_t)(ti.shape[0] * ti.shape[1]);
    }
    float *w = malloc(n * sizeof(float) + 1);
    size_t off = 0;
    for (int i = 0; w && i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        const size_t k = (size_t)(ti.shape[0] * ti.shape[1]);
        memcpy(w + off, ti.data, k * sizeof(float));
        off += k;
    }
    *count = n;
    return w;
}

#endif
