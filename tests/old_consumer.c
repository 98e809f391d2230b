/* A program as it was written against an older release's headers (0.1 on):
 * check_old_consumers.py compiles it against that release's include/lattice
 * (from git), binds the symbol versions that release's library gave, and
 * runs it on today's library under AddressSanitizer.
 *
 * Every _init is called on a struct on the stack twice: alone (ASan's red
 * zone follows it) and with a canary after it (which catches a write past
 * the struct even where the library's stores are not seen by ASan, as when
 * the compiler inlined its memset). Then each struct creates its object,
 * which is destroyed. The 0.1 names are used throughout: every later header
 * still declares them (deprecated). */
#include <lattice/lattice.h>

#include <stdint.h>
#include <stdio.h>
#include <string.h>

#define CANARY_BYTES 64
#define CANARY_BYTE 0xA5

static int failures;

#define FAIL(...)                                                                                  \
    do {                                                                                           \
        printf("FAIL: " __VA_ARGS__);                                                              \
        printf("\n");                                                                              \
        failures++;                                                                                \
    } while (0)

#define OK(call)                                                                                   \
    do {                                                                                           \
        lattice_status st_ = (call);                                                               \
        if (st_ != LATTICE_OK) {                                                                   \
            FAIL("%s: status %d", #call, (int)st_);                                                \
            return 1;                                                                              \
        }                                                                                          \
    } while (0)

/* The struct the caller has, and the bytes after it, which nothing may touch. */
#define GUARDED(T)                                                                                 \
    struct {                                                                                       \
        T v;                                                                                       \
        unsigned char canary[CANARY_BYTES];                                                        \
    }

static void canary_set(unsigned char *c) { memset(c, CANARY_BYTE, CANARY_BYTES); }

static void canary_check(const unsigned char *c, const char *fn, size_t struct_size)
{
    for (int i = 0; i < CANARY_BYTES; i++)
        if (c[i] != CANARY_BYTE) {
            FAIL("%s wrote past this program's %zu-byte struct (byte %zu changed)", fn,
                 struct_size, struct_size + (size_t)i);
            return;
        }
}

/* Call INIT on a lone struct and on a guarded one; the guarded one's value is
 * left in OUT. The library may say it filled less than the struct, never more. */
#define INIT_BOTH(T, INIT, OUT)                                                                    \
    do {                                                                                           \
        T lone_;                                                                                   \
        INIT(&lone_);                                                                              \
        GUARDED(T) g_;                                                                             \
        canary_set(g_.canary);                                                                     \
        INIT(&g_.v);                                                                               \
        canary_check(g_.canary, #INIT, sizeof(T));                                                 \
        if (g_.v.size == 0 || g_.v.size > sizeof(T))                                               \
            FAIL("%s set size %zu, this program's struct has %zu bytes", #INIT, g_.v.size,         \
                 sizeof(T));                                                                       \
        if (lone_.size != g_.v.size)                                                               \
            FAIL("%s set size %zu and %zu", #INIT, lone_.size, g_.v.size);                         \
        printf("%-28s %3zu-byte struct, size %zu\n", #INIT, sizeof(T), g_.v.size);                 \
        OUT = g_.v;                                                                                \
    } while (0)

int main(void)
{
    printf("built against liblattice %s headers, running on %s\n", LATTICE_VERSION_STRING,
           lattice_version_string());

    lattice_backend_ops ops;
    INIT_BOTH(lattice_backend_ops, lattice_backend_ops_init, ops);
    (void)ops;

    lattice_backend *be;
    OK(lattice_backend_create("ref", &be));
    lattice_norm *norm;
    OK(lattice_norm_create(LATTICE_NORM_PRE, LATTICE_NORM_RMS, 1e-6f, &norm));

    lattice_model_params mp;
    INIT_BOTH(lattice_model_params, lattice_model_params_init, mp);
    mp.vocab_size = 32;
    mp.d_model = 16;
    mp.n_layers = 2;
    mp.n_active_layers = 2;
    mp.n_heads = 2;
    mp.n_kv_heads = 2;
    mp.head_dim = 8;
    mp.d_ff = 32;
    mp.max_batch = 2;
    mp.max_seq = 8;
    lattice_model *model;
    OK(lattice_model_create(&mp, norm, be, &model));

    lattice_data_params dp;
    INIT_BOTH(lattice_data_params, lattice_data_params_init, dp);
    dp.vocab_size = 32;
    dp.boundary_id = 0;
    dp.batch_size = 2;
    dp.seq_len = 7;
    dp.val_fraction = 0.0f;
    int32_t ids[64];
    for (int i = 0; i < 64; i++)
        ids[i] = i % 8 == 0 ? 0 : 1 + i % 31;
    char err[256] = "";
    lattice_data *data;
    lattice_status st = lattice_data_create_memory(ids, 64, &dp, &data, err);
    if (st != LATTICE_OK) {
        FAIL("lattice_data_create_memory: status %d: %s", (int)st, err);
        return 1;
    }

    lattice_optim_params op;
    INIT_BOTH(lattice_optim_params, lattice_optim_params_init, op);
    op.warmup_steps = 1;
    op.total_steps = 4;
    lattice_optim *optim;
    OK(lattice_optim_create(model, &op, &optim));

    lattice_distill_params kp;
    INIT_BOTH(lattice_distill_params, lattice_distill_params_init, kp);
    lattice_distill *distill;
    OK(lattice_distill_create(&kp, &distill));

    lattice_schedule *schedule;
    OK(lattice_schedule_create(&schedule));
    lattice_phase ph;
    INIT_BOTH(lattice_phase, lattice_phase_init, ph);
    ph.steps = 2;
    ph.active_layers = 2;
    OK(lattice_schedule_add_phase(schedule, &ph));
#if LATTICE_VERSION_MAJOR > 0 || LATTICE_VERSION_MINOR >= 3
    lattice_schedule_phase sph;
    INIT_BOTH(lattice_schedule_phase, lattice_schedule_phase_init, sph);
    sph.steps = 2;
    sph.active_layers = 2;
    OK(lattice_schedule_add_phase(schedule, &sph));
#endif

    lattice_trainer_params tp;
    INIT_BOTH(lattice_trainer_params, lattice_trainer_params_init, tp);
    lattice_trainer *trainer;
    OK(lattice_trainer_create(model, NULL, distill, data, optim, schedule, &tp, &trainer));

    lattice_trainer_destroy(trainer);
    lattice_schedule_destroy(schedule);
    lattice_distill_destroy(distill);
    lattice_optim_destroy(optim);
    lattice_data_destroy(data);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    if (failures)
        printf("%d failures\n", failures);
    return failures ? 1 : 0;
}
