/* The program's modes: what the command line asks for, and one function per mode.
 *
 * main.c parses the options and calls one mode; each sets up what it needs
 * (session.h holds the setup the study's modes share) and tears it down
 * before it returns its exit status. --probe and --rekey are probe.c's and
 * rekey.c's. */
#ifndef REPRODUCE_MODES_H
#define REPRODUCE_MODES_H

#include "study.h"
#include "logits_cache.h"

/* The command line. */
typedef struct options {
    const char *preset_path, *out, *only_arms;
    int retrain, threads, seeds, jobs, fresh, save_students;
    /* the mode: at most one of these stops before the runs */
    int teacher_only, estimate_only, check_only, probe_only, rekey, report_only;
    logits_mode logits; /* --teacher-logits */
    /* --progress (NaN: not given; the process's, study.h), and the runs'
     * (progress): --checkpoint-every (300 unless given), --profile */
    double progress_every, checkpoint_every;
    int profile;
} options;

/* --check: the preset as understood, every object built on the real shapes. */
int mode_check(preset *p, int jobs);

/* --estimate: the plan and its wall time, with nothing written. */
int mode_estimate(const options *o, preset *p, int jobs, const char *dir);

/* --teacher-only: the teacher trained or loaded, and its go/no-go. */
int mode_teacher(const options *o, preset *p, int jobs, const char *dir);

/* --report-only: the outputs written again from the runs kept in dir. */
int mode_report(const options *o, preset *p, const char *dir);

/* The study: the teacher, every run to do (over the ranks, side by side or
 * one after another), the outputs. setup_sum and teacher_sum: rank 0's, on
 * the other ranks. */
int mode_study(const options *o, preset *p, int jobs, const char *dir, uint64_t setup_sum,
               uint64_t teacher_sum);

#endif
