/* The trainer's private body, shared by its files: trainer.c (the step),
 * trainer_collective.c (over ranks), checkpoint.c and setup.c. */
#ifndef LATTICE_TRAINER_IMPL_H
#define LATTICE_TRAINER_IMPL_H

#include "internal.h"

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

/* This rank's rows of a batch: [r B/N, (r+1) B/N), which for training
 * batches (B divides by N) are B/N rows each; the whole batch alone. */
lattice_data_batch lattice__trainer_share_of(const lattice_trainer *t, const lattice_data_batch *b);

/* Over ranks: the gradients and losses of the global batch b, each rank's
 * weighted by its share of the counted tokens (n_local, this rank's). */
lattice_status lattice__trainer_reduce_step(lattice_trainer *t, const lattice_data_batch *b,
                                            int64_t n_local, lattice_trainer_metrics *m);

/* Hold the trainer's model and teacher (and the teacher's model) for call fn
 * (handle.h): a second thread's call on the trainer, or on what it binds, is
 * refused while one is inside. The thread inside may nest calls: the step's
 * callbacks run held, and may evaluate or save on their trainer. Every
 * LATTICE_OK is paired with one lattice__trainer_leave. */
lattice_status lattice__trainer_enter(lattice_trainer *t, const char *fn);
void lattice__trainer_leave(lattice_trainer *t);

/* Return expr (a call's body) run held, or the refusal; a NULL trainer runs
 * expr alone, which refuses it. */
#define LATTICE__TRAINER_HELD(t, fn, expr)                                                         \
    do {                                                                                           \
        if (!(t))                                                                                  \
            return (expr);                                                                         \
        lattice_status held_st_ = lattice__trainer_enter((t), (fn));                               \
        if (held_st_ != LATTICE_OK)                                                                \
            return held_st_;                                                                       \
        held_st_ = (expr);                                                                         \
        lattice__trainer_leave(t);                                                                 \
        return held_st_;                                                                           \
    } while (0)

#endif
