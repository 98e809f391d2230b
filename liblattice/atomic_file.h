/* Files as the library opens and saves them: a loader opens a regular file
 * only, and a save replaces its file atomically (a temporary file beside it,
 * fsync, rename), so that a crash mid-write leaves the previous file whole. */
#ifndef LATTICE_ATOMIC_FILE_H
#define LATTICE_ATOMIC_FILE_H

#include "internal.h"

#include <stdio.h>

/* Open path for reading, as every loader does: a regular file only. A
 * directory, FIFO, socket or device is refused with a message saying so, and
 * never blocks (a FIFO without a writer would hang fopen forever). *f is the
 * open stream, *size the file's size in bytes. Returns LATTICE_ERR_IO (or
 * LATTICE_ERR_OUT_OF_MEMORY) with the reason in err. */
lattice_status lattice__open_regular(const char *path, FILE **f, int64_t *size, char *err);

/* A save in progress: the new contents go to f, a temporary file named
 * "<target>.tmp.<pid>.<n>" beside target, the file the save replaces. */
typedef struct lattice__atomic_file {
    FILE *f;
    char *target; /* path, or where its chain of symbolic links ends */
    char *tmp;
} lattice__atomic_file;

/* Begin a save to path: resolve its target (saving through a link replaces
 * the link's target and leaves the link), remove the temporary files of
 * saves to it that were killed, and create this save's temporary file, with
 * the replaced file's permission bits (a new name: 0666 less the umask).
 * Returns LATTICE_ERR_IO or LATTICE_ERR_OUT_OF_MEMORY with the reason in err;
 * then nothing is left to finish. */
lattice_status lattice__atomic_begin(lattice__atomic_file *af, const char *path, char *err);

/* Finish a save begun with lattice__atomic_begin. With ok (every write to
 * af->f succeeded) the file is flushed, synced, closed and renamed over the
 * target, and the directory synced; otherwise, or when one of those fails,
 * the temporary file is removed and the status says why ("cannot write
 * <path>: ...", from errno as the failure left it). Frees af either way. */
lattice_status lattice__atomic_commit(lattice__atomic_file *af, int ok, const char *path,
                                      char *err);

#endif
