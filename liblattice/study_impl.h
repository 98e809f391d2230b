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

#endif
