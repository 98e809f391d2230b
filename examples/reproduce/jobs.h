/* The hand-out of runs: one after another, side by side (--jobs), or over MPI ranks.
 *
 * And starting and ending MPI. */
#ifndef REPRODUCE_JOBS_H
#define REPRODUCE_JOBS_H

#include "study.h"

/* Whether a launcher (mpirun, mpiexec, srun) started this process. */
int launched_by_mpi(void);

/* Start MPI when a launcher started this process; the rank goes into every message. */
void ranks_init(int *argc, char ***argv);

/* The end of main on every rank (see jobs.c). */
int finish(int status);

/* The n jobs (job = seed index x n_arms + arm) into order, in hand-out
 * order: longest arm first, ties as given. */
void longest_first(const preset *p, const int *jobs, int n, int *order);

/* --jobs J > 1: the study's runs to do (s->todo) kept, J at a time in
 * worker threads, each loading the teacher from teacher_path. */
void run_study_jobs(study *s, const char *teacher_path, int jobs, const progress *pr);

/* What a run's numbers depend on besides its seed (checked across ranks). */
uint64_t setup_checksum(const preset *p);

#ifdef LATTICE_HAVE_MPI
/* The gate's "go on"; any other value is the status to end with. */
#define GATE_GO (-1)

struct dispatch;
/* Rank 0 to every other rank: go on, or end with this status, with the checksums. */
void open_gate(int code, uint64_t setup_sum, uint64_t teacher_sum);
/* The other ranks: wait for rank 0's gate; its code. */
int await_gate(uint64_t *setup_sum, uint64_t *teacher_sum);
/* Rank 0: take in results and hand out runs (between its own training steps). */
void serve_ranks(struct dispatch *d, int until_done);
/* Rank 0: the study's runs to do (s->todo), its own and the others', kept. */
void run_study_ranks(study *s, lattice_backend *be, lattice_model *teacher, progress *pr);
/* The other ranks: ask for a run, run it, send its results back, until none are left. */
void work_for_rank0(const preset *p, lattice_backend *be, lattice_model *teacher, progress *pr);
#endif

#endif
