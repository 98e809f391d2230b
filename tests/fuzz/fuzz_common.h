/* Shared by the libFuzzer targets: every input is written to a file, since the
 * loaders under test read files, as users' programs do. */
#ifndef LATTICE_FUZZ_COMMON_H
#define LATTICE_FUZZ_COMMON_H

#include <lattice/lattice.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

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

/* A tiny model every target can load into. */
static inline lattice_model *fuzz_model(lattice_backend **be)
{
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 13;
    p.d_model = 8;
    p.n_layers = 2;
    p.n_active_layers = 2;
    p.n_heads = 2;
    p.n_kv_heads = 1;
    p.head_dim = 4;
    p.d_ff = 12;
    p.max_batch = 2;
    p.max_seq = 6;
    lattice_norm *n;
    lattice_model *m;
    if (lattice_backend_create("ref", be) != LATTICE_OK ||
        lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n) != LATTICE_OK ||
        lattice_model_create(&p, n, *be, &m) != LATTICE_OK)
        fuzz_setup_failed("the tiny model");
    lattice_norm_destroy(n);
    return m;
}

/* A two-phase grow run over a few documents in memory, for checkpoint inputs. */
static inline lattice_trainer *fuzz_trainer(lattice_model *m, lattice_data **data,
                                            lattice_optim **o, lattice_schedule **s)
{
    static const int32_t ids[] = {12, 1, 2, 3, 12, 4, 5, 6, 7, 12, 8, 9};
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = 13;
    dp.boundary_id = 12;
    dp.batch_size = 2;
    dp.seq_len = 6;
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.warmup_steps = 1; /* each phase restarts the optimizer for its 3 steps */
    op.total_steps = 3;
    lattice_trainer *t;
    if (lattice_data_create_memory(ids, 12, &dp, data, NULL) != LATTICE_OK ||
        lattice_optim_create(m, &op, o) != LATTICE_OK ||
        lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 2, 1, 3, 0, s) != LATTICE_OK ||
        lattice_trainer_create(m, NULL, NULL, *data, *o, *s, NULL, &t) != LATTICE_OK)
        fuzz_setup_failed("the small run");
    return t;
}

#endif
