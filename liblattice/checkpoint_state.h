/* A checkpoint's state, the "lattice.checkpoint" JSON beside its tensors:
 * where the run stands (optimizer, schedule, data, trainable groups) and what
 * it was set up with, written by a save and read back, checked, by a load. */
#ifndef LATTICE_CHECKPOINT_STATE_H
#define LATTICE_CHECKPOINT_STATE_H

#include "trainer_impl.h"

/* Everything the checkpoint restores, parsed and checked before any change. */
typedef struct checkpoint_restored {
    lattice_optim_params op;
    int64_t optim_step;
    int64_t phase, step_in_phase, nonpad_in_phase;
    lattice_schedule_counters counters;
    lattice_data_position pos;
    int have_origin;
    lattice_data_position origin;
    int64_t applied_phase, n_active, tr_emb, tr_bnd, tr_head;
    int *tr_layers; /* each layer's trainable flag, 0 or 1 */
    int keep_data_position; /* other data, allowed: the iterator stays where it is */
} checkpoint_restored;

/* The run's state as a JSON string (caller frees); NULL when memory runs out. */
char *lattice__checkpoint_state_json(lattice_trainer *t);

/* Parse the state js (NULL: the checkpoint has none) into r and check it
 * against the run t (its model's setup and capacity, its schedule, its data
 * unless flags allow other data, its rank count unless flags allow another,
 * the optimizer setter's rules) and against itself (the run's state where
 * its schedule stands). A state without a part the run needs to know it
 * resumes itself (model.setup, before 0.5) is refused by that part's name.
 * Returns LATTICE_ERR_FORMAT (or another status) with the reason in t->err;
 * r->tr_layers is the caller's to free either way. */
lattice_status lattice__checkpoint_parse_state(lattice_trainer *t, const char *js, unsigned flags,
                                               checkpoint_restored *r);

#endif
