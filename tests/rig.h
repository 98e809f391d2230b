/* The tests' one trainer set-up: backend, norm, student, teacher, loss, data,
 * optimizer, schedule and trainer, built by rig_open from a struct of options
 * and destroyed by rig_close. rig_options_init gives the tiny run most tests
 * want (tu_tiny_params' model on "ref", its vocabulary's last id the
 * boundary, a grow schedule of 2 one-layer blocks of 2 steps, no teacher); a
 * test changes only the fields it is about.
 *
 * No Check here: the MPI tests and the fuzz targets use it too. A failure
 * returns the library's status (lattice_last_error() says why) and leaves
 * nothing built; testutil.h's tu_rig_open asserts instead. */
#ifndef LATTICE_RIG_H
#define LATTICE_RIG_H

#include <lattice/lattice.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "tiny_model.h"

typedef enum rig_teacher {
    RIG_TEACHER_NONE,
    RIG_TEACHER_MODEL,    /* a model of the student's shape (teacher_layers, _seed, _placement) */
    RIG_TEACHER_CALLBACK, /* teacher_fn(teacher_user, ...) at the student's vocabulary and shape */
    RIG_TEACHER_FILE,     /* teacher_file, logits recorded by lattice_teacher_record */
} rig_teacher;

typedef struct rig_options {
    const char *backend; /* "ref" */
    int threads;         /* 1 */

    /* the student */
    lattice_norm_placement placement; /* pre */
    lattice_norm_kind norm_kind;      /* RMS */
    float norm_eps;                   /* 1e-6 */
    lattice_model_params model;       /* tu_tiny_params */

    /* the teacher, and with any teacher a distill loss of these params */
    rig_teacher teacher;
    int teacher_layers;                       /* MODEL: 0 is the student's n_layers */
    uint64_t teacher_seed;                    /* MODEL: 7 */
    lattice_norm_placement teacher_placement; /* MODEL: pre */
    lattice_teacher_fn teacher_fn;            /* CALLBACK */
    void *teacher_user;                       /* CALLBACK */
    const char *teacher_file;                 /* FILE */
    lattice_distill_params distill;

    /* the data: vocab_size 0 is the model's, with its last id the boundary;
     * batch_size and seq_len 0 are the model's max_batch and max_seq */
    lattice_data_params data;
    const int32_t *ids;    /* the token ids in memory (n_ids of them), */
    int64_t n_ids;
    const char *text;      /* else byte-level text, read through a temporary file, */
    const char *text_path; /* else a text file, */
    int n_generated;       /* else this many ids (0: 600) in documents of 3..8, boundary first */

    /* the optimizer: the library's defaults, but warmup_steps 1, no longer
     * than any phase (since 0.4 a phase that restarts the optimizer for fewer
     * steps than its warmup is refused) */
    lattice_optim_params optim;

    /* the schedule: a preset, or phases of one's own */
    lattice_schedule_preset preset; /* grow */
    int n_blocks;                   /* 2 */
    int block_size;                 /* 1 */
    int64_t steps_per_phase;        /* 2 */
    lattice_schedule_block_init block_init; /* random */
    int rewind_data;                        /* lattice_schedule_set_rewind_data */
    const lattice_schedule_phase *phases;   /* instead of the preset: n_phases of them */
    int n_phases;

    /* the trainer */
    lattice_trainer_params trainer;
    int defer_trainer; /* no trainer: the test binds one with rig_bind (after changes of its own) */
} rig_options;

typedef struct rig {
    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *model, *teacher_model;
    lattice_teacher *teacher;
    lattice_distill *distill;
    lattice_data *data;
    lattice_optim *optim;
    lattice_schedule *schedule;
    lattice_trainer *trainer;
} rig;

static inline void rig_options_init(rig_options *o)
{
    memset(o, 0, sizeof(*o));
    o->backend = "ref";
    o->threads = 1;
    o->placement = LATTICE_NORM_PLACEMENT_PRE;
    o->norm_kind = LATTICE_NORM_KIND_RMS;
    o->norm_eps = 1e-6f;
    tu_tiny_params(&o->model);
    o->teacher = RIG_TEACHER_NONE;
    o->teacher_seed = 7;
    o->teacher_placement = LATTICE_NORM_PLACEMENT_PRE;
    lattice_distill_params_init(&o->distill);
    lattice_data_params_init(&o->data);
    o->data.vocab_size = 0;
    o->data.batch_size = 0;
    o->data.seq_len = 0;
    lattice_optim_params_init(&o->optim);
    o->optim.warmup_steps = 1;
    o->preset = LATTICE_SCHEDULE_PRESET_GROW;
    o->n_blocks = 2;
    o->block_size = 1;
    o->steps_per_phase = 2;
    o->block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM;
    lattice_trainer_params_init(&o->trainer);
}

static inline void rig_close(rig *r)
{
    lattice_trainer_destroy(r->trainer);
    lattice_schedule_destroy(r->schedule);
    lattice_optim_destroy(r->optim);
    lattice_data_destroy(r->data);
    lattice_distill_destroy(r->distill);
    lattice_teacher_destroy(r->teacher);
    lattice_model_destroy(r->teacher_model);
    lattice_model_destroy(r->model);
    lattice_norm_destroy(r->norm);
    lattice_backend_destroy(r->be);
    memset(r, 0, sizeof(*r));
}

/* A norm of the given placement and kind; a residual scale other than 1 set. */
static inline lattice_status rig_norm_create(lattice_norm_placement placement,
                                             lattice_norm_kind kind, float eps,
                                             float residual_scale, lattice_norm **out)
{
    lattice_status st = lattice_norm_create(placement, kind, eps, out);
    if (st == LATTICE_OK && residual_scale != 1.0f &&
        (st = lattice_norm_set_residual_scale(*out, residual_scale)) != LATTICE_OK) {
        lattice_norm_destroy(*out);
        *out = NULL;
    }
    return st;
}

/* The trainer over the rig's objects (after rig_open with defer_trainer). */
static inline lattice_status rig_bind(rig *r, const lattice_trainer_params *params)
{
    return lattice_trainer_create(r->model, r->teacher, r->distill, r->data, r->optim,
                                  r->schedule, params, &r->trainer);
}

/* Documents of 3..8 ids, each opened by the boundary id, the others below it. */
static inline void rig_generate(int32_t *ids, int n, int32_t boundary)
{
    uint64_t x = 12345;
    for (int i = 0; i < n;) {
        x = x * 6364136223846793005ULL + 1442695040888963407ULL;
        const int len = 3 + (int)((x >> 33) % 6);
        ids[i++] = boundary;
        for (int j = 1; j < len && i < n; j++) {
            x = x * 6364136223846793005ULL + 1442695040888963407ULL;
            ids[i++] = (int32_t)((x >> 35) % (uint64_t)boundary);
        }
    }
}

static inline lattice_status rig_data_create(rig *r, const rig_options *o)
{
    lattice_data_params dp = o->data;
    if (dp.vocab_size == 0) {
        dp.vocab_size = o->model.vocab_size;
        dp.boundary_id = dp.vocab_size - 1;
    }
    if (dp.batch_size == 0)
        dp.batch_size = o->model.max_batch;
    if (dp.seq_len == 0)
        dp.seq_len = o->model.max_seq;
    if (o->ids)
        return lattice_data_create_memory(o->ids, o->n_ids, &dp, &r->data, NULL);
    if (o->text_path)
        return lattice_data_create_text(o->text_path, &dp, &r->data, NULL);
    if (o->text) {
        char path[] = "/tmp/lattice-rig-XXXXXX";
        const int fd = mkstemp(path);
        if (fd < 0) {
            lattice_set_last_error("rig: no temporary file for the text");
            return LATTICE_ERR_IO;
        }
        const size_t n = strlen(o->text);
        const int written = write(fd, o->text, n) == (ssize_t)n;
        close(fd);
        lattice_status st = LATTICE_ERR_IO;
        if (written)
            st = lattice_data_create_text(path, &dp, &r->data, NULL);
        else
            lattice_set_last_error("rig: the text was not written");
        unlink(path);
        return st;
    }
    const int n = o->n_generated ? o->n_generated : 600;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) {
        lattice_set_last_error("rig: no memory for the generated corpus");
        return LATTICE_ERR_OUT_OF_MEMORY;
    }
    rig_generate(ids, n, dp.boundary_id);
    const lattice_status st = lattice_data_create_memory(ids, n, &dp, &r->data, NULL);
    free(ids);
    return st;
}

static inline lattice_status rig_teacher_create(rig *r, const rig_options *o)
{
    const lattice_model_params *p = &o->model;
    switch (o->teacher) {
    case RIG_TEACHER_NONE:
        return LATTICE_OK;
    case RIG_TEACHER_MODEL: {
        lattice_model_params tp = *p;
        if (o->teacher_layers)
            tp.n_layers = tp.n_active_layers = o->teacher_layers;
        tp.seed = o->teacher_seed;
        lattice_norm *n;
        lattice_status st =
            rig_norm_create(o->teacher_placement, o->norm_kind, o->norm_eps, 1.0f, &n);
        if (st != LATTICE_OK)
            return st;
        st = lattice_model_create(&tp, n, r->be, &r->teacher_model);
        lattice_norm_destroy(n);
        if (st != LATTICE_OK)
            return st;
        return lattice_teacher_create_model(r->teacher_model, &r->teacher);
    }
    case RIG_TEACHER_CALLBACK:
        return lattice_teacher_create_callback(o->teacher_fn, o->teacher_user, p->vocab_size,
                                               p->max_batch, p->max_seq, &r->teacher);
    case RIG_TEACHER_FILE:
        return lattice_teacher_create_file(o->teacher_file, &r->teacher, NULL);
    }
    lattice_set_last_error("rig: no such teacher kind");
    return LATTICE_ERR_INVALID_ARGUMENT;
}

static inline lattice_status rig_schedule_create(rig *r, const rig_options *o)
{
    lattice_status st;
    if (o->phases) {
        if ((st = lattice_schedule_create(&r->schedule)) != LATTICE_OK)
            return st;
        for (int i = 0; i < o->n_phases; i++)
            if ((st = lattice_schedule_add_phase(r->schedule, &o->phases[i])) != LATTICE_OK)
                return st;
    } else if ((st = lattice_schedule_create_preset(o->preset, o->n_blocks, o->block_size,
                                                    o->steps_per_phase, o->block_init,
                                                    &r->schedule)) != LATTICE_OK) {
        return st;
    }
    return o->rewind_data ? lattice_schedule_set_rewind_data(r->schedule, 1) : LATTICE_OK;
}

/* Every object the options ask for, in the order a program creates them. */
static inline lattice_status rig_open(rig *r, const rig_options *o)
{
    memset(r, 0, sizeof(*r));
    lattice_status st;
#define RIG_TRY(call)                                                                             \
    do {                                                                                          \
        if ((st = (call)) != LATTICE_OK) {                                                        \
            rig_close(r);                                                                         \
            return st;                                                                            \
        }                                                                                         \
    } while (0)
    RIG_TRY(lattice_backend_create(o->backend, &r->be));
    RIG_TRY(lattice_backend_set_threads(r->be, o->threads));
    RIG_TRY(rig_norm_create(o->placement, o->norm_kind, o->norm_eps, 1.0f, &r->norm));
    RIG_TRY(lattice_model_create(&o->model, r->norm, r->be, &r->model));
    RIG_TRY(rig_teacher_create(r, o));
    if (r->teacher)
        RIG_TRY(lattice_distill_create(&o->distill, &r->distill));
    RIG_TRY(rig_data_create(r, o));
    RIG_TRY(lattice_optim_create(r->model, &o->optim, &r->optim));
    RIG_TRY(rig_schedule_create(r, o));
    if (!o->defer_trainer)
        RIG_TRY(rig_bind(r, &o->trainer));
#undef RIG_TRY
    return LATTICE_OK;
}

/* A model's weights, every tensor in order, concatenated (the caller frees). */
static inline float *rig_weights(lattice_model *m, size_t *count)
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
