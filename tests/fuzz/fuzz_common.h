/* Shared by the libFuzzer targets: every input is written to a file, since the
 * loaders under test read files, as users' programs do. */
#ifndef LATTICE_FUZZ_COMMON_H
#define LATTICE_FUZZ_COMMON_H

#include <lattice/lattice.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "../rig.h"

static inline const char *fuzz_path(const char *suffix)
{
    static char path[4096];
    if (!path[0]) {
        const char *dir = getenv("TMPDIR");
        snprintf(path, sizeof path, "%s/lattice-fuzz-%d%s", dir && dir[0] ? dir : "/tmp",
                 (int)getpid(), suffix);
    }
    return path;
}

/* The harness itself is broken, not the library: say why and stop. */
static inline _Noreturn void fuzz_setup_failed(const char *what)
{
    fprintf(stderr, "fuzz harness: %s failed: %s\n", what, lattice_last_error());
    abort();
}

static inline const char *fuzz_write(const uint8_t *data, size_t size, const char *suffix)
{
    const char *path = fuzz_path(suffix);
    FILE *f = fopen(path, "wb");
    if (!f || (size && fwrite(data, 1, size, f) != size))
        fuzz_setup_failed(path);
    fclose(f);
    return path;
}

/* The small run every target loads into: the rig's tiny model (vocabulary 13,
 * 6 positions) in a two-phase grow run over a few documents in memory. */
static inline void fuzz_run(rig *r)
{
    static const int32_t ids[] = {12, 1, 2, 3, 12, 4, 5, 6, 7, 12, 8, 9};
    rig_options o;
    rig_options_init(&o);
    o.model.vocab_size = 13;
    o.model.max_seq = 6;
    o.ids = ids;
    o.n_ids = sizeof ids / sizeof ids[0];
    o.optim.total_steps = 3; /* each phase restarts the optimizer for its 3 steps */
    o.steps_per_phase = 3;
    if (rig_open(r, &o) != LATTICE_OK)
        fuzz_setup_failed("the small run");
}

#endif
