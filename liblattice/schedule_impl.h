/* The schedule's private body, shared with the trainer's checkpoints (which
 * save and restore where it stands). */
#ifndef LATTICE_SCHEDULE_IMPL_H
#define LATTICE_SCHEDULE_IMPL_H

#include "handle.h"
#include "internal.h"

struct lattice_schedule {
    lattice_schedule_phase *phases;
    int n_phases, cap;
    int phase;                /* current phase (n_phases once finished) */
    int64_t step_in_phase;
    int64_t nonpad_in_phase;
    lattice_schedule_counters counters;
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
};

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__schedule_borrow(lattice_schedule *s, const char *fn);
void lattice__schedule_unborrow(lattice_schedule *s);


#endif
