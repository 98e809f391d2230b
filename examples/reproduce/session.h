/* What the modes that look at a study's folder share: the backend, the first
 * look at the folder, the plan, the teacher, the outputs and the teardown.
 *
 * --estimate, --teacher-only, --report-only and the study each open a
 * session, take the steps they need in order, and close it. */
#ifndef REPRODUCE_SESSION_H
#define REPRODUCE_SESSION_H

#include "modes.h"

/* What a study's outputs say of how it ran. */
typedef struct run_words {
    double wall, teacher_s;
    int n_runs, n_kept, jobs;
    int64_t logits_file, logits_computed; /* this process's runs' teacher batches */
    char kernels[512], plan[128];
} run_words;

typedef struct session {
    study s;
    const options *o;
    lattice_backend *be;
    lattice_model *teacher; /* NULL until session_teacher, or the mode's own */
    const char *dir;
    char tpath[1200]; /* DIR/teacher.safetensors */
    int jobs;
    run_words w;
    struct logits_cache *logits; /* the teacher's logits file for the runs, NULL for none */
} session;

/* The study's backend (the teacher's settings name it) and, on rank 0, the
 * first look at dir: the corpus's checksum, the cached teacher and the runs
 * to do (runs_to_do with the options' --retrain-teacher and --fresh). */
void session_open(session *x, const options *o, preset *p, const char *dir, int quiet,
                  char *why_teacher, size_t why_size);

/* The plan: jobs at most the runs to do, and the line that says it, with the
 * backend's kernels (on rank 0). */
void session_plan(session *x, int jobs);

/* Rank 0: the estimated wall time of the runs to do under the plan. */
void session_estimate(const session *x);

/* Rank 0: the teacher (x->teacher) trained or loaded, and its go/no-go;
 * with require, a NO-GO teacher ends the study when the preset has
 * require_go. */
void session_teacher(session *x, int require);

/* What to run: load the kept runs that match (against the cached teacher's
 * checksum; none when the teacher will be trained again: retrain), and list
 * the selected arms' other jobs, seeds outermost. With fresh, the selected
 * arms' kept runs are not loaded: they run again, and replace them as they
 * end. A kept run that cannot be used is named unless quiet. Why there is
 * no cached teacher to use goes to why_teacher (when not NULL). */
void runs_to_do(session *x, int retrain, int fresh, int quiet, char *why_teacher,
                size_t why_size);

/* Before any training: every file the study will write can be written. */
void check_outputs(const study *s);

/* The steps of every run to do. */
int64_t todo_steps(const study *s);

/* The study as reported: the arms whose every seed has a result (in the
 * preset's order) into rp and rs; the others named in missing ("" when none). */
void report_view(const study *s, preset *rp, study *rs, char *missing, size_t n);

/* The runs kept from earlier runs, counted into x->w and said (rank 0). */
void session_count_kept(session *x);

/* curves.csv, bands.csv, results.json, the plots and report.md (written
 * whole), then the report on stdout. */
void session_write(const session *x);

/* Everything the session holds: the runs' results, the arms' settings, the
 * logits file, the teacher and the backend. */
void session_close(session *x);

#endif
