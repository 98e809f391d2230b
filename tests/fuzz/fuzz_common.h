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
    static char path[128];
    if (!path[0])
        snprintf(path, sizeof path, "/tmp/lattice-fuzz-%d%s", (int)getpid(), suffix);
    return path;
}

static inline const char *fuzz_write(const uint8_t *data, size_t size, const char *suffix)
{
    const char *path = fuzz_path(suffix);
    FILE *f = fopen(path, "wb");
    if (!f)
        abort(); /* the harness itself is broken, not the library */
    if (size && fwrite(data, 1, size, f) != size)
        abort();
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
        abort();
    lattice_norm_destroy(n);
    return m;
}

/* A two-phase grow run over a few documents in memory, for checkpoint inputs. */
static inline lattice_trainer *fuzz_trainer(lattice_model *m, lattice_data **data)
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
    lattice_optim *o;
    lattice_schedule *s;
    lattice_trainer *t;
    if (lattice_data_create_memory(ids, 12, &dp, data, NULL) != LATTICE_OK ||
        lattice_optim_create(m, &op, &o) != LATTICE_OK ||
        lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 2, 1, 3, 0, &s) != LATTICE_OK ||
        lattice_trainer_create(m, NULL, NULL, *data, o, s, NULL, &t) != LATTICE_OK)
        abort();
    return t; /* the optimizer and schedule live as long as the process */
}

#endif
