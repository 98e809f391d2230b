/* What another object may ask of a schedule, as functions over its opaque
 * handle (schedule.c): where it stands and its phases, which checkpoints
 * save and restore, and its borrow. */
#ifndef LATTICE_SCHEDULE_ACCESS_H
#define LATTICE_SCHEDULE_ACCESS_H

#include "handle.h"
#include "internal.h"

/* Where the schedule stands, as a checkpoint saves it: its phases (its own:
 * read only), the current phase (n_phases once finished), the steps and
 * non-padding tokens into it, and the run's counters. Listed once, but the
 * phases, for checkpoints and setups in lattice__schedule_at_fields (fields.h). */
typedef struct lattice__schedule_at {
    const lattice_schedule_phase *phases;
    int n_phases, phase;
    int64_t step_in_phase, nonpad_in_phase;
    lattice_schedule_counters counters;
} lattice__schedule_at;
void lattice__schedule_where(const lattice_schedule *s, lattice__schedule_at *out);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__schedule_borrow(lattice_schedule *s, const char *fn);
void lattice__schedule_unborrow(lattice_schedule *s);
/* Its busy word (handle.h): its own calls that change it enter it, and so
 * does every call of the trainer that borrows it, so that two trainers
 * sharing it on two threads are refused, not mixed. */
lattice_busy *lattice__schedule_busy(lattice_schedule *h);

/* Whether the schedule can stand at at's position (its phase and the steps
 * and tokens into it): 1, or 0 with the reason in why ("step 5 of phase 1,
 * which has 4 steps"). The one rule of lattice_schedule_set_position and a
 * checkpoint's load. */
int lattice__schedule_check_position(const lattice_schedule *s, const lattice__schedule_at *at,
                                     char *why, size_t n);

/* Whether lattice_schedule_record would count a step of these counts: 1, or
 * 0 with the reason in why (a count below 0, FLOPs not finite, a counter
 * that would pass what a checkpoint keeps). The trainer asks before its
 * optimizer step, which cannot be taken back. */
int lattice__schedule_fits(const lattice_schedule *s, int64_t tokens, int64_t nonpad_tokens,
                           double flops, char *why, size_t n);

/* Put the schedule where at says (its phases aside): a checked position
 * and its counters (a checkpoint's commit: nothing fails). */
void lattice__schedule_restore(lattice_schedule *s, const lattice__schedule_at *at);

#endif
