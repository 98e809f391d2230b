/* Private bodies of the optimizer, schedule and trainer, shared with the
 * checkpoint code that saves and restores their state. */
#ifndef LATTICE_STUDY_IMPL_H
#define LATTICE_STUDY_IMPL_H

#include "model_impl.h"

struct lattice_optim {
    lattice_model *model;
    lattice_optim_params p;
    float *m1, *m2;    /* moments, laid out like the model's parameter arena */
    int64_t *t_tensor; /* updates each tensor has had since the last reset */
    int64_t step;      /* schedule position */
    char err[LATTICE_ERRMSG_MAX];
};

struct lattice_schedule {
    lattice_schedule_phase *phases;
    int n_phases, cap;
    int phase;                /* current phase (n_phases once finished) */
    int64_t step_in_phase;
    int64_t nonpad_in_phase;
    lattice_schedule_counters counters;
    char err[LATTICE_ERRMSG_MAX];
};

struct lattice_trainer {
    lattice_model *model;
    lattice_teacher *teacher;
    lattice_distill *distill;
    lattice_data *data;
    lattice_optim *optim;
    lattice_schedule *schedule;
    lattice_trainer_params p;
    lattice_optim_params base_optim; /* as given: each phase restart derives from it */
    int applied_phase;               /* phase whose start actions have run (-1: none) */
    int have_origin;                 /* data_origin is set: the run has begun */
    lattice_data_position data_origin; /* where the data stood when the run began: the
                                          shard's start, for phases that rewind to it */
    int stop;
    /* data-parallel training (lattice_trainer_set_collective) */
    lattice_trainer_collective coll;
    void *coll_user;
    int has_coll;            /* a collective is attached (perhaps of one rank) */
    int rank, n_ranks;       /* 0 and 1 without one */
    int64_t *rank_status;    /* [n_ranks]: each rank's status, summed to agree on one */
    /* what a phase start changes, kept until its first step succeeds */
    int *undo_trainable;  /* [n_layers] */
    float *undo_weights;  /* the layers the start re-initialised */
    size_t undo_cap;      /* floats in undo_weights */
    /* steps of a token-budget phase that counted no token, back to back: the
     * phase they ran in (-1: none) and where the data stood after the first */
    int empty_phase;
    lattice_data_position empty_from;
    char err[LATTICE_ERRMSG_MAX];
};

/* While > 0, the loss runs on n threads (a model's backend's count) instead of
 * its n_threads (distill.c). */
void lattice__distill_set_run_threads(lattice_distill *d, int n);

/* Sum of squares of g[0..n) in double, the same bits for any thread count nt (optim.c). */
double lattice__sum_squares(const float *g, long n, int nt);

/* Draws of the training iterator in one pass (an epoch) over the training data:
 * documents, or packed rows (data.c). A position's index runs 0..this. */
int64_t lattice__data_pass_length(const lattice_data *d);

/* Whether the teacher answers from a recorded file (teacher.c): it looks
 * batches up by their tokens, whole. */
int lattice__teacher_is_file(const lattice_teacher *t);

/* A digest of the corpus as the data object holds it: its ids after
 * splitting, and where the validation split begins (data.c). Computed once. */
uint64_t lattice__data_corpus_hash(lattice_data *d);

/* What a teacher is (0 none, 1 a model, 2 a callback, 3 a recorded file) and
 * a digest of what it answers from: the model's weights, the file's batches
 * (teacher.c). */
uint64_t lattice__teacher_identity(const lattice_teacher *t, int *kind);

/* ---- what a run is set up with (setup.c) ----
 * The settings and state that every rank of a data-parallel run must share,
 * and that a checkpoint must share with the run that loads it, as named
 * values in parts (model, data, schedule, optimizer, trainer). Two lists of a
 * part have the same names up to their first difference: a count (of layers,
 * of phases) comes before the fields it multiplies. */
typedef enum lattice__setup_kind {
    LATTICE__SETUP_INT = 0,  /* a signed integer */
    LATTICE__SETUP_UINT = 1, /* an unsigned one (a seed), its bits */
    LATTICE__SETUP_REAL = 2, /* a double, its bits */
    LATTICE__SETUP_HASH = 3  /* a digest of something large (weights, a corpus) */
} lattice__setup_kind;

/* Fixed-size and plain, so that ranks can send them as bytes. A note (a
 * model's seed beside its weights' digest) is said in messages, never
 * compared. */
typedef struct lattice__setup_field {
    char name[40];
    int32_t kind;
    int32_t has_note;
    int64_t value;
    char note_name[16];
    int64_t note;
} lattice__setup_field;

typedef struct lattice__setup {
    lattice__setup_field *f;
    int n, cap;
    int failed; /* out of memory: the list is incomplete */
} lattice__setup;

enum {
    LATTICE__PART_MODEL,
    LATTICE__PART_DATA,
    LATTICE__PART_SCHEDULE,
    LATTICE__PART_OPTIM,
    LATTICE__PART_TRAINER,
    LATTICE__N_PARTS
};

/* The part's name in messages ("model", "data", ...). */
const char *lattice__setup_part_name(int part);

/* Append one field (name printf-style); a failed allocation marks s->failed. */
void lattice__setup_add(lattice__setup *s, lattice__setup_kind kind, int64_t value,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* One part of a trainer's setup; with state, also where the run stands (data
 * and schedule positions, weights, moments, trainable flags). Returns 0 when
 * memory ran out. */
int lattice__setup_of(lattice_trainer *t, int part, int with_state, lattice__setup *out);

/* The schedule part of a list of phases (without a position). */
void lattice__setup_phases(const lattice_schedule_phase *phases, int n, lattice__setup *out);

void lattice__setup_free(lattice__setup *s);

/* The index of the first compared field where a and b differ, -1 if none. */
int lattice__setup_first_difference(const lattice__setup *a, const lattice__setup *b);

/* A field's value as text ("4", "0.001", "0x9f0c... (seed 42)"). */
void lattice__setup_value(const lattice__setup_field *f, char *buf, size_t n);

/* "the checkpoint's data seed 3 differs from this run's 4": part's field
 * where have and want first differ (i from lattice__setup_first_difference),
 * as "<a>'s <part> <name> <have> differs from <b>'s <want>" into buf. */
void lattice__setup_describe(char *buf, size_t n, const char *a, const char *b, int part,
                             const lattice__setup *have, const lattice__setup *want, int i);

/* Whether the trainer runs over more than one rank. */
static inline int lattice__trainer_distributed(const lattice_trainer *t)
{
    return t->has_coll && t->n_ranks > 1;
}

/* Every rank's status of the same collective call, made on every rank: the
 * first failing rank's status on all of them (st itself where this rank
 * failed, with its own message kept), LATTICE_ERR_BACKEND when the exchange
 * fails. Only for a distributed trainer. */
lattice_status lattice__trainer_agree(lattice_trainer *t, lattice_status st);

/* A failed collective slot as the trainer's message. */
lattice_status lattice__trainer_coll_fail(lattice_trainer *t, const char *slot, int rc);

/* At attach: every rank's setup against rank 0's (setup.c), over the
 * collective c of n ranks that the trainer is not yet attached to. local is
 * this rank's own verdict on the attachment (its message in t->err). Every
 * rank gets the same answer: LATTICE_OK, or the refusal (a setup that differs
 * names the first field and the ranks). */
lattice_status lattice__trainer_agree_setup(lattice_trainer *t, const lattice_trainer_collective *c,
                                            void *user, int rank, int n, lattice_status local);

#endif
