/* Files the study reads and writes, safely.
 *
 * Names checked against one rule, folders made without a shell, outputs
 * written whole (temporary file, fsync, rename) or not at all, reads of
 * regular files only and bounded, programs run from an argument vector, the
 * output folder's lock, and xxHash checksums. */
#ifndef REPRODUCE_FILES_H
#define REPRODUCE_FILES_H

#include "study.h"

/* ---- names --------------------------------------------------------------------- */

/* The longest arm, probe or preset name. */
#define NAME_MAX_LEN 47
/* The rule every arm, probe and preset name follows, for messages. */
#define NAME_RULE                                                                          \
    "1 to 47 characters: letters, digits and - _ . +, not starting with a dot"

/* 1 when name follows NAME_RULE. */
int name_ok(const char *name);

/* ---- folders ------------------------------------------------------------------- */

/* mkdir -p, with the C library: every missing folder of path is created
 * (0777 less the umask). 0, or -1 with errno set and the failing part in
 * failed (when not NULL). */
int make_dirs(const char *path, char *failed, size_t failed_size);

/* ---- reading --------------------------------------------------------------------- */

/* Open a file for reading only if it is a regular file (never blocks on a
 * FIFO or a device): a descriptor, or -1 with errno set (EINVAL for a file
 * that is not regular, EISDIR for a folder). *size gets its size. */
int open_regular(const char *path, uint64_t *size);

/* The whole of a regular file of at most max bytes into a malloc'd buffer
 * (with a NUL after it); 0, or -1 with errno set (EFBIG above max). */
int read_regular(const char *path, uint64_t max, char **buf, size_t *len);

/* ---- writing, whole or not at all --------------------------------------------------- */

/* An output being written: to a temporary file beside path, unique to this
 * process, that replaces path only when every byte reached the disk. */
typedef struct outfile {
    FILE *f;
    char path[2048], tmp[2200];
} outfile;

/* Start writing path; dies (naming the file and the reason) when it cannot. */
void out_open(outfile *o, const char *path);

/* Finish: check every write, flush, fsync, close, rename over path and sync
 * its folder. On any failure the temporary file is removed, path is left as
 * it was, and the study dies naming the file and the reason. */
void out_commit(outfile *o);

/* Sync the folder that holds path (after a rename into it); best effort. */
void sync_folder_of(const char *path);

/* Sync a file (folder 0) or a folder (1) by its path; best effort. */
void sync_path(const char *path, int folder);

/* n bytes written to path whole (out_open, out_commit): dies as out_commit does. */
void write_file_whole(const char *path, const void *bytes, size_t n);

/* Give up writing: the temporary file is removed, path is untouched. */
void out_abort(outfile *o);

/* 0, or -1 with errno set: path does not exist or is a regular file that may
 * be replaced, and its folder can be written (a probe file is created and
 * removed there). */
int check_writable(const char *dir, const char *name);

/* ---- programs ----------------------------------------------------------------------- */

/* Run a program found on PATH, in folder cwd, from an argument vector (no
 * shell), its stderr to /dev/null when quiet; its exit status, or -1 when it
 * could not be started or did not exit normally. */
int run_program(const char *cwd, char *const argv[], int quiet);

/* Whether a program of this name is on PATH (an executable regular file). */
int have_program(const char *name);

/* ---- the output folder's lock ------------------------------------------------------- */

/* Take DIR/.lock for the life of the process (flock, exclusive, never
 * waiting); dies naming the holder's pid when another study holds it. */
void lock_study_dir(const char *dir);

/* ---- checksums ---------------------------------------------------------------------- */

/* XXH64 (seed 0) of a regular file's bytes: 0, or -1 with errno set. */
int xxh_file(const char *path, uint64_t *h);

/* XXH64 (seed 0) of bytes. */
uint64_t xxh_bytes(const void *data, size_t n);

/* A checksum as 16 lowercase hex digits into buf (17 bytes at least). */
void hex64(char *buf, uint64_t h);

#endif
