/* Runs kept: records as bytes, their settings, the output folder's runs/.
 *
 * A run's record as bytes (for the MPI wire, and in the runs kept by 0.5 to
 * 1.0), the settings a run's numbers depend on, and the output folder's runs/
 * (one file per arm x seed, as JSON since 1.1, reused by a later run whose
 * settings match). */
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

/* What one arm's runs depend on besides the seed, as canonical JSON
 * (malloc'd): the preset's settings (all but its name, description, seed
 * count, thread count as written, arm list, comparisons, interactions,
 * probes and require_go), the threads per run, the arm as written and as
 * resolved, the corpus's checksum and the teacher file's. Two presets that
 * hold the same values give the same text. */
char *run_settings(const preset *p, const arm *a, const char *corpus_hex, const char *teacher_hex);

/* XXH64 of the training and validation texts, as hex (17 bytes). */
void corpus_checksum(const preset *p, char *hex);

/* DIR/runs/ARM.seedN.run */
void run_path(char *buf, size_t n, const char *dir, const char *arm, int seed);

/* What kept_parse found. */
enum { KEPT_NONE = 0, KEPT_OK = 1, KEPT_BAD = -1, KEPT_STALE = -2, KEPT_OLD = -3 };

/* The magic of a run kept by 0.4 or before (format 1). */
extern const char KEPT_MAGIC_1[8];

/* A kept run's file as bytes (format 3, JSON): the arm's name and seed
 * (from 1), the job, the settings it was made with, the record (record.h),
 * and a checksum over them all. */
char *kept_pack(const char *arm_name, int seed, const char *settings, int32_t job,
                const run_result *r, size_t *bytes);

/* A kept run's file of either format back: KEPT_OK with *out only when its checksum holds,
 * it names this arm and seed, and its settings are these; else KEPT_BAD
 * (damaged, or another arm's or seed's), KEPT_STALE (other settings: why
 * names the keys that differ) or KEPT_OLD (format 1), with the reason. */
int kept_parse(const char *buf, size_t bytes, const char *arm_name, int seed,
               const char *settings, run_result **out, char *why, size_t why_size);

/* A kept run's settings (DIR/runs/NAME, of either format) as a new JSON
 * object, or NULL. Not checked against the file's checksum: a witness only
 * (teacher.c's, of the corpus and threads a teacher was made with). */
json_object *kept_settings(const char *path);

/* Keep a finished run: into the study, and into DIR/runs/ when the study
 * has an output folder. Thread-safe for different jobs. */
void keep_run(study *s, int job, run_result *r);

/* Every kept run of the study's arms and seeds whose settings match into
 * s->res; the others (missing, damaged, or made with other settings, named
 * on stderr with the reason unless quiet) are left NULL. With fresh, the
 * selected arms' runs are not looked at (they run again). A run kept by 0.4
 * or before ends the study with the way to convert it. Returns the number
 * loaded. */
int load_kept_runs(study *s, int quiet, int fresh);

#endif
