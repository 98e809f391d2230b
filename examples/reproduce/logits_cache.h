/* The teacher's logits for every training row, computed once per study.
 *
 * The teacher and the training rows are the same for every arm and seed of a
 * study: only the rows' order changes. A row's logits depend on that row
 * alone (causal attention within a row, rows never packed), so the study
 * computes them once, into DIR/teacher_logits.bin beside the cached teacher,
 * and every run (every --jobs worker, every MPI rank sharing the folder)
 * maps the file and copies a batch's rows out of it instead of running the
 * teacher. The file is keyed by the teacher file's checksum, the corpus's,
 * the backend and its threads (the kernels that computed the logits), and
 * written whole (temporary file, fsync, rename) or not at all. A row the
 * file does not hold is computed by the teacher as before, so the file can
 * only make a run faster, never change what it computes. */
#ifndef REPRODUCE_LOGITS_CACHE_H
#define REPRODUCE_LOGITS_CACHE_H

#include "study.h"

/* How a study's runs get their teacher logits (--teacher-logits). */
typedef enum logits_mode {
    LOGITS_CACHE = 0, /* from the file, made when missing (the default) */
    LOGITS_STEP = 1,  /* the teacher's forward in every step, as before 1.1 */
    LOGITS_VERIFY = 2 /* from the file, and the teacher's forward too: a run dies on
                         any logit that differs in a single bit */
} logits_mode;

typedef struct logits_cache logits_cache;

/* The study's file in dir: opened when it was made for this teacher, corpus,
 * backend and thread count, else computed with the teacher (on rank 0 only:
 * build 0 on the others, which only open it) when the runs to do take at
 * least twice as many steps (steps_to_run) as the file costs batches. NULL,
 * with the reason said, when it is not made or cannot be used: runs too
 * short for it, too little room on the disk, a file that does not match, or
 * a read that failed. */
logits_cache *logits_cache_get(const preset *p, lattice_model *teacher, lattice_backend *be,
                               const char *dir, const char *teacher_hex, const char *corpus_hex,
                               int build, int64_t steps_to_run);

/* 1 when DIR holds a logits file whose head says it was made for this
 * teacher, corpus, backend and thread count (its bytes are checked when
 * logits_cache_get opens it): what --estimate plans with. */
int logits_file_ready(const preset *p, lattice_backend *be, const char *dir,
                      const char *teacher_hex, const char *corpus_hex);

/* The teacher batches a file of every training row costs to make, and
 * whether runs of steps_to_run steps in all are worth it (twice as many). */
int64_t logits_file_batches(const preset *p);
int logits_file_worth(const preset *p, int64_t steps_to_run);

/* Unmap and free. NULL is ignored. */
void logits_cache_close(logits_cache *c);

/* One run's teacher: with c (the study's file, progress.logits), a teacher
 * that answers from the file (and asks model_teacher, a model teacher, for a
 * batch holding a row the file lacks, or with verify for every batch, as
 * LOGITS_VERIFY does), with *rt set; without, model_teacher itself and *rt
 * NULL, unless timed: then a teacher that asks model_teacher for every batch
 * and times it. Dies when it cannot be made. */
typedef struct run_teacher run_teacher;
lattice_teacher *run_teacher_wrap(lattice_teacher *model_teacher, const logits_cache *c,
                                  int verify, int batch, int seq_len, int timed,
                                  run_teacher **rt);
/* The seconds rt spent answering (0 for NULL). */
double run_teacher_seconds(const run_teacher *rt);
/* The batches of every run that has ended in this process: answered from
 * the file, and computed by the teacher's forward (a row the file lacks). */
void logits_counts(int64_t *from_file, int64_t *computed);
/* Destroy the teacher run_teacher_wrap made (not model_teacher). NULL is ignored. */
void run_teacher_destroy(run_teacher *rt);

#endif
