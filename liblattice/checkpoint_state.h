/* A checkpoint's state, the "lattice.checkpoint" JSON beside its tensors:
 * where the run stands (optimizer, schedule, data, trainable groups) and what
 * it was set up with, written by a save and read back, checked, by a load. */
#ifndef LATTICE_CHECKPOINT_STATE_H
#define LATTICE_CHECKPOINT_STATE_H

#include "trainer_impl.h"

#include "data_access.h"
#include "model_access.h"
#include "schedule_access.h"

/* The run's state, as a checkpoint keeps it: each object's part in the
 * struct its access header gives, listed by its table (fields.h). A save
 * fills it from the run; a load parses and checks it before any change. */
typedef struct checkpoint_state {
    int64_t optim_step;
    lattice_optim_params op;
    lattice__schedule_at at; /* phases: the run's own (a load compares them) */
    lattice__model_run run;  /* trainable_layer: the model's, or layers */
    lattice__data_run data;
    int applied_phase;
    int has_ranks, ranks; /* the rank count, written by runs with a collective */
    int *layers;          /* a load's layer flags, 0 or 1 (the caller frees) */
    int keep_data_position; /* other data, allowed: the iterator stays where it is */
} checkpoint_state;

/* The run's state as a JSON string (caller frees); NULL when memory runs out. */
char *lattice__checkpoint_state_json(lattice_trainer *t);

/* Parse the state js (NULL: the checkpoint has none) into r and check it
 * against the run t (its model's setup and capacity, its schedule, its data
 * unless flags allow other data, its rank count unless flags allow another,
 * the optimizer setter's rules) and against itself (the run's state where
 * its schedule stands). A state without a part the run needs to know it
 * resumes itself (model.setup, before 0.5) is refused by that part's name.
 * Returns LATTICE_ERR_FORMAT (or another status) with the reason in t->err;
 * r->layers is the caller's to free either way. */
lattice_status lattice__checkpoint_parse_state(lattice_trainer *t, const char *js, unsigned flags,
                                               checkpoint_state *r);

#endif
