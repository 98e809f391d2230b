/* Size and time before running: memory and FLOPs, cost of an arm, the plan of jobs, estimate. */
#ifndef REPRODUCE_PLAN_H
#define REPRODUCE_PLAN_H

#include "study.h"

/* Active-layer steps of an arm, in units of full-depth steps. */
double arm_cost(const preset *p, const arm *a);

/* Prints the preset's memory and FLOPs; whether one run fits this machine, with
 * *jobs lowered (and said) to the runs that fit side by side. */
int fits_here(const preset *p, int *jobs);

/* Runs side by side by default: the cores this process may use / threads per run. */
int default_jobs(int threads);

/* Where the runs' teacher logits will come from (logits_cache.h): each
 * step's teacher forward, or the study's file, to be made first or made. */
typedef enum logits_plan { LOGITS_IN_STEPS, LOGITS_FILE_TO_MAKE, LOGITS_FILE_MADE } logits_plan;

/* Times a few steps and prints the wall time of the runs to do (todo) under the plan. */
double estimate_wall(const preset *p, lattice_backend *be, int teacher_cached,
                     logits_plan logits, int jobs, const int *todo, int n_todo);

#endif
