/* The schedule's private body, shared with the trainer's checkpoints (which
 * save and restore where it stands). */
#ifndef LATTICE_SCHEDULE_IMPL_H
#define LATTICE_SCHEDULE_IMPL_H

#include "internal.h"

struct lattice_schedule {
    lattice_schedule_phase *phases;
    int n_phases, cap;
    int phase;                /* current phase (n_phases once finished) */
    int64_t step_in_phase;
    int64_t nonpad_in_phase;
    lattice_schedule_counters counters;
    char err[LATTICE_ERRMSG_MAX];
};

#endif
