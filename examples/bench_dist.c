/*
 * bench_dist: data-parallel training steps over MPI ranks, timed.
 *
 *   mpirun -np N bench_dist [--preset d256|study] [--threads T] [--steps S]
 *                           [--batch B] [--backend NAME]
 *
 * Every rank trains the preset's student (as bench_step's) through the
 * trainer with liblattice-mpi attached, on B rows per rank (the preset's
 * batch by default; the global batch is N x B) of random full-length rows.
 * After 2 warmup steps it times S steps and prints, on rank 0, "key value"
 * lines as bench_step does: ranks, tokens_per_s (global), step_ms, and the
 * collective's cost per step: allreduce_ms (the fixed-order sums of
 * gradients, losses and validation, waits for the slowest rank included)
 * and allreduce_share (of a step), averaged over ranks, and the slowest
 * rank's figures. Lines starting with '#' are for people.
 */
#define _POSIX_C_SOURCE 200809L

#include <lattice/dist.h>
#include <lattice/lattice.h>

#include <getopt.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bench_dist"

#include "example_util.h"

#define WARMUP_STEPS 2
#define TOKEN_SEED 20240611ULL

static int g_rank;

static void usage(FILE *f)
{
    fprintf(f,
            "usage: mpirun -np N " PROG " [options]\n"
            "  --preset NAME     d256 (9 layers, d_model 256, 16 x 256 per rank; default) or\n"
            "                    study (9 layers, d_model 64, 16 x 128 per rank)\n"
            "  --threads N       threads per rank (1)\n"
            "  --steps N         timed steps, after %d warmup steps (5)\n"
            "  --batch N         rows per rank (the preset's)\n"
            "  --backend NAME    backend (default)\n"
            "  -h, --help        this help\n",
            WARMUP_STEPS);
}

/* A failure: one line on stderr, and the whole job ends. */
static void die(const char *what, lattice_status st, const char *msg)
{
    fprintf(stderr, PROG ": rank %d: %s: %s%s%s\n", g_rank, what, lattice_status_string(st),
            msg && msg[0] ? ": " : "", msg ? msg : "");
    MPI_Abort(MPI_COMM_WORLD, 1);
}

#define TRY(what, call, msg)                                                                      \
    do {                                                                                          \
        lattice_status st_ = (call);                                                              \
        if (st_ != LATTICE_OK)                                                                    \
            die(what, st_, msg);                                                                  \
    } while (0)

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    ex_shape sh = EX_PRESET_D256;
    int threads = 1, steps = 5, batch = 0;
    const char *backend_name = "default";
    static const struct option longopts[] = {
        {"preset", required_argument, NULL, 'p'}, {"threads", required_argument, NULL, 't'},
        {"steps", required_argument, NULL, 's'},  {"batch", required_argument, NULL, 'B'},
        {"backend", required_argument, NULL, 'b'}, {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0}};
    int c, idx;
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        switch (c) {
        case 'p':
            if (ex_parse_preset(optarg, &sh) < 0)
                return 2;
            break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 1024, &threads) < 0)
                return 2;
            break;
        case 's':
            if (ex_parse_int("steps", optarg, 1, 1000000, &steps) < 0)
                return 2;
            break;
        case 'B':
            if (ex_parse_int("batch", optarg, 1, 1 << 16, &batch) < 0)
                return 2;
            break;
        case 'b': backend_name = optarg; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind < argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (batch)
        sh.batch = batch;

    MPI_Init(&argc, &argv);
    int ranks;
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    MPI_Comm_size(MPI_COMM_WORLD, &ranks);
    lattice_dist *dist;
    TRY("lattice_dist_create", lattice_dist_create(MPI_COMM_WORLD, &dist), lattice_last_error());

    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *model;
    lattice_data *data;
    lattice_optim *optim;
    lattice_schedule *sched;
    lattice_trainer *trainer;
    TRY("backend", ex_backend_create(backend_name, &be), lattice_last_error());
    TRY("threads", lattice_backend_set_threads(be, threads), lattice_last_error());
    TRY("norm", lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &norm),
        lattice_last_error());
    lattice_model_params mp;
    ex_shape_model_params(&sh, &mp); /* max_batch: one rank's share */
    TRY("model", lattice_model_create(&mp, norm, be, &model), lattice_last_error());

    /* random ids, packed into full rows: the same on every rank (same seed) */
    const int total_steps = WARMUP_STEPS + steps;
    const int64_t global_rows = (int64_t)sh.batch * ranks;
    const int64_t n_ids = global_rows * (sh.seq + 1) * (int64_t)(total_steps + 1);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n_ids);
    if (!ids)
        die("memory for the tokens", LATTICE_ERR_OUT_OF_MEMORY, NULL);
    uint64_t rng = TOKEN_SEED;
    for (int64_t i = 0; i < n_ids; i++)
        ids[i] = (int32_t)(ex_rng_next(&rng) % (uint64_t)sh.vocab);
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.vocab_size = sh.vocab;
    dp.boundary_id = -1;
    dp.batch_size = (int)global_rows;
    dp.seq_len = sh.seq;
    dp.pack = 1;
    dp.split_long = 0;
    char err[LATTICE_ERRMSG_SIZE] = "";
    TRY("data", lattice_data_create_memory(ids, n_ids, &dp, &data, err), err);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.total_steps = total_steps;
    op.warmup_steps = 0; /* the default 750 exceeds a benchmark's few steps, and is refused */
    TRY("optimizer", lattice_optim_create(model, &op, &optim), lattice_last_error());
    TRY("schedule", lattice_schedule_create(&sched), lattice_last_error());
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = total_steps;
    ph.active_layers = sh.layers;
    TRY("schedule", lattice_schedule_add_phase(sched, &ph), lattice_schedule_errmsg(sched));
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    TRY("collective", lattice_dist_trainer_params(dist, &tp), lattice_dist_errmsg(dist));
    TRY("trainer", lattice_trainer_create(model, NULL, NULL, data, optim, sched, &tp, &trainer),
        lattice_last_error());

    for (int i = 0; i < WARMUP_STEPS; i++)
        TRY("warmup step", lattice_trainer_step(trainer, NULL), lattice_trainer_errmsg(trainer));
    MPI_Barrier(MPI_COMM_WORLD);
    lattice_dist_reset_stats(dist);
    lattice_trainer_metrics m = {.size = sizeof(m)};
    const double t0 = ex_now();
    for (int i = 0; i < steps; i++)
        TRY("step", lattice_trainer_step(trainer, &m), lattice_trainer_errmsg(trainer));
    const double wall = ex_now() - t0;
    lattice_dist_stats stats = {.size = sizeof(stats)};
    TRY("stats", lattice_dist_get_stats(dist, &stats), lattice_dist_errmsg(dist));

    /* per rank: [wall, sums' seconds, other collectives' seconds]; mean and max */
    double mine[3] = {wall, stats.sum_seconds, stats.other_seconds}, mean[3], worst[3];
    MPI_Reduce(mine, mean, 3, MPI_DOUBLE, MPI_SUM, 0, MPI_COMM_WORLD);
    MPI_Reduce(mine, worst, 3, MPI_DOUBLE, MPI_MAX, 0, MPI_COMM_WORLD);
    if (g_rank == 0) {
        for (int k = 0; k < 3; k++)
            mean[k] /= ranks;
        const double step_s = worst[0] / steps;
        const double tokens = (double)global_rows * sh.seq * steps;
        printf("# lattice %s, %d ranks x %d threads, backend %s%s\n", lattice_version_string(),
               ranks, threads, lattice_backend_get_name(be), ex_backend_origin(backend_name));
        printf("# model: %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, vocab %d; "
               "%d x %d rows per rank\n", sh.layers, sh.d_model, sh.heads, sh.kv_heads,
               sh.head_dim, sh.d_ff, sh.vocab, sh.batch, sh.seq);
        printf("# %d warmup steps, %d timed steps\n", WARMUP_STEPS, steps);
        printf("ranks %d\n", ranks);
        printf("threads %d\n", threads);
        printf("batch_per_rank %d\n", sh.batch);
        printf("global_batch %lld\n", (long long)global_rows);
        printf("seq %d\n", sh.seq);
        printf("loss_last %.4f\n", m.loss);
        printf("step_ms %.1f\n", 1e3 * step_s);
        printf("tokens_per_s %.0f\n", tokens / worst[0]);
        printf("allreduce_ms %.2f\n", 1e3 * mean[1] / steps);
        printf("allreduce_share %.3f\n", mean[1] / mean[0]);
        printf("allreduce_ms_max %.2f\n", 1e3 * worst[1] / steps);
        printf("allreduce_mib_per_step %.2f\n", (double)stats.sum_bytes / steps / (1 << 20));
        printf("allreduce_calls_per_step %.1f\n", (double)stats.sum_calls / steps);
        printf("other_collectives_ms %.2f\n", 1e3 * mean[2] / steps);
    }
    lattice_trainer_destroy(trainer);
    lattice_schedule_destroy(sched);
    lattice_optim_destroy(optim);
    lattice_data_destroy(data);
    free(ids);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    lattice_dist_destroy(dist);
    MPI_Finalize();
    return 0;
}
