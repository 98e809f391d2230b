/* Runs kept: a run's record as bytes (for the MPI wire and for the output
 * folder), the settings a run's numbers depend on, and the output folder's
 * runs/ (one file per arm x seed, reused by a later run whose settings match). */
#ifndef REPRODUCE_STORE_H
#define REPRODUCE_STORE_H

#include "study.h"

/* A run's record: job, the run_result (its pointers meaningless), its
 * per-step arrays. *bytes is its size; dies when out of memory. */
char *run_pack(int32_t job, const run_result *r, size_t *bytes);

/* The record back, every count checked against its array; NULL with the
 * reason in why when the bytes do not hold a run. */
run_result *run_unpack(const char *buf, size_t bytes, int32_t *job, char *why, size_t why_size);

/* ... of a record whose fixed part has header bytes: this build's, or 0.3's
 * (before run_result gained its sinks, which are then NaN). */
run_result *run_unpack_sized(const char *buf, size_t bytes, size_t header, int32_t *job,
                             char *why, size_t why_size);

/* Whether a record's fixed part of this many bytes can be read. */
int run_header_known(uint64_t header);

/* What one arm's runs depend on besides the seed: the preset's settings (all
 * but its name, description, seed count, arm list, comparisons, probes and
 * require_go), the arm as resolved,
 * the threads per run, the corpus and the teacher file (its checksum). */
uint64_t run_settings(const preset *p, const arm *a, uint64_t teacher_sum);

/* Keep a finished run: into the study, and into DIR/runs/ when the study
 * has an output folder. Thread-safe for different jobs. */
void keep_run(study *s, int job, run_result *r);

/* Every kept run of the study's arms and seeds whose settings match into
 * s->res; the others (missing, or made with other settings, which are
 * named on stderr unless quiet) are left NULL. Returns the number loaded. */
int load_kept_runs(study *s, int quiet);

/* Remove every kept run (--fresh). */
void clear_kept_runs(const char *dir);

#endif
