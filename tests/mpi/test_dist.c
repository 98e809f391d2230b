/* liblattice-mpi under mpirun -np 2 (meson's 'mpi' suite).
 *
 *   test_dist DIR          every case below, in order (DIR: scratch directory)
 *   test_dist kill DIR     train with checkpoints every 2 steps; rank 1 kills
 *                          itself (SIGKILL) at step 6, just before that save
 *   test_dist resume DIR   after 'kill': the last checkpoint loads on 2 ranks
 *                          and the run goes on (kill_test.py drives both)
 *
 * Not Check: a failed assertion on one rank would leave the other waiting in
 * a collective, so every failure prints its reason and calls MPI_Abort,
 * which ends the whole job with a non-zero status. */
#include "../distworld.h"

#include <lattice/dist.h>

#include <dirent.h>
#include <math.h>
#include <signal.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

/* 2 ranks of b rows against 1 of 2b, after 10 steps: equal to rounding
 * (the same sums in another order); the documented tolerance (DISTRIBUTED.md). */
#define REL_TOL 1e-5

static int g_rank;

#define CHECK(cond, ...)                                                                          \
    do {                                                                                          \
        if (!(cond)) {                                                                            \
            fprintf(stderr, "rank %d: %s:%d: check failed: %s: ", g_rank, __FILE__, __LINE__,     \
                    #cond);                                                                       \
            fprintf(stderr, __VA_ARGS__);                                                         \
            fprintf(stderr, " (last error: %s)\n", lattice_last_error());                        \
            MPI_Abort(MPI_COMM_WORLD, 1);                                                         \
        }                                                                                         \
    } while (0)

#define OK(call) CHECK((call) == LATTICE_OK, "%s", #call)

/* EXPECT(function, status, reason, handle message or NULL, call): as in
 * tests/test_errors.c, whose table check_error_table.py reads with this one. */
#define EXPECT(fn, status, reason, handle_msg, call)                                              \
    do {                                                                                          \
        lattice_set_last_error("primed-by-the-test");                                            \
        const lattice_status got_ = (call);                                                       \
        CHECK(got_ == (status), "%s: status %d, expected %d", #fn, (int)got_, (int)(status));      \
        CHECK(strstr(lattice_last_error(), reason), "%s: lattice_last_error() lacks '%s'", #fn,   \
              reason);                                                                            \
        const char *hm_ = (handle_msg);                                                           \
        CHECK(!hm_ || strstr(hm_, reason), "%s: the handle's message '%s' lacks '%s'", #fn, hm_,  \
              reason);                                                                            \
    } while (0)

#define INV LATTICE_ERR_INVALID_ARGUMENT
#define CFG LATTICE_ERR_INVALID_CONFIG

/* A world whose trainer runs over d from its creation (max_batch: the share). */
static void open_dist(rig *w, lattice_dist *d, int batch, int max_batch, int teacher)
{
    static lattice_trainer_params tp; /* only its collective fields are read */
    lattice_trainer_params_init(&tp);
    OK(lattice_dist_trainer_params(d, &tp));
    dw_config c = {.batch = batch, .max_batch = max_batch, .teacher = teacher,
                   .coll = tp.collective, .coll_user = tp.collective_user};
    OK(dw_open(w, &c));
}

static void bad_input(lattice_dist *d)
{
    lattice_dist *d2;
    EXPECT(lattice_dist_create, INV, "MPI_COMM_NULL", NULL, lattice_dist_create(MPI_COMM_NULL, &d2));
    CHECK(d2 == NULL, "out not cleared");
    EXPECT(lattice_dist_create, INV, "out is NULL", NULL, lattice_dist_create(MPI_COMM_WORLD, NULL));
    /* an intercommunicator (each rank a group of its own) summed with no one */
    MPI_Comm local, inter;
    CHECK(MPI_Comm_split(MPI_COMM_WORLD, g_rank, 0, &local) == MPI_SUCCESS, "split");
    CHECK(MPI_Intercomm_create(local, 0, MPI_COMM_WORLD, 1 - g_rank, 99, &inter) == MPI_SUCCESS,
          "intercomm");
    EXPECT(lattice_dist_create, INV, "intercommunicator", NULL, lattice_dist_create(inter, &d2));
    CHECK(d2 == NULL, "out not cleared");
    MPI_Comm_free(&inter);
    MPI_Comm_free(&local);
    rig w;
    dw_config c = {.batch = 3, .max_batch = 3};
    OK(dw_open(&w, &c));
    EXPECT(lattice_dist_attach, CFG, "does not divide by 2 ranks", lattice_dist_errmsg(d),
           lattice_dist_attach(d, w.trainer));
    CHECK(strstr(lattice_trainer_errmsg(w.trainer), "does not divide"), "trainer message");
    EXPECT(lattice_dist_attach, INV, "dist is NULL", NULL, lattice_dist_attach(NULL, w.trainer));
    EXPECT(lattice_dist_attach, INV, "trainer is NULL", lattice_dist_errmsg(d),
           lattice_dist_attach(d, NULL));
    EXPECT(lattice_dist_detach, INV, "lattice_dist_detach", NULL,
           lattice_dist_detach(NULL, w.trainer));
    EXPECT(lattice_dist_allreduce_gradients, INV, "lattice_dist_allreduce_gradients",
           lattice_dist_errmsg(d), lattice_dist_allreduce_gradients(d, NULL, 1.0));
    EXPECT(lattice_dist_sum_floats, INV, "lattice_dist_sum_floats", lattice_dist_errmsg(d),
           lattice_dist_sum_floats(d, NULL, 3));
    EXPECT(lattice_dist_sum_doubles, INV, "lattice_dist_sum_doubles", NULL,
           lattice_dist_sum_doubles(NULL, NULL, 0));
    EXPECT(lattice_dist_sum_int64, INV, "lattice_dist_sum_int64", lattice_dist_errmsg(d),
           lattice_dist_sum_int64(d, NULL, 1));
    lattice_dist_stats stats = {.size = 0};
    EXPECT(lattice_dist_get_stats, INV, "lattice_dist_get_stats", lattice_dist_errmsg(d),
           lattice_dist_get_stats(d, &stats));
    lattice_trainer_params tp = {.size = sizeof(size_t)};
    EXPECT(lattice_dist_trainer_params, INV, "lattice_trainer_params_init",
           lattice_dist_errmsg(d), lattice_dist_trainer_params(d, &tp));
    CHECK(strstr(lattice_last_error(), "the size of lattice_trainer_params in 1.0"),
          "the 1.0 floor named");
    /* a later release's struct (larger, the rest 0) gets its collective;
     * a size above twice the 1.0 struct's is one never set */
    struct {
        lattice_trainer_params p;
        unsigned char later[16];
    } big;
    memset(&big, 0, sizeof big);
    lattice_trainer_params_init(&big.p);
    big.p.size = sizeof big;
    OK(lattice_dist_trainer_params(d, &big.p));
    CHECK(big.p.collective && big.p.collective_user == d, "a later struct's collective fields");
    big.p.size = 3 * sizeof big.p;
    EXPECT(lattice_dist_trainer_params, INV, "a size never set", lattice_dist_errmsg(d),
           lattice_dist_trainer_params(d, &big.p));
    rig_close(&w);
    /* the NULL handle's getters cannot fail */
    CHECK(lattice_dist_get_rank(NULL) == 0 && lattice_dist_get_size(NULL) == 0, "NULL getters");
    CHECK(strstr(lattice_dist_errmsg(NULL), "NULL"), "NULL errmsg");
    lattice_dist_destroy(NULL);
    lattice_dist_reset_stats(NULL);
}

static void scalar_sums(lattice_dist *d)
{
    const int r = lattice_dist_get_rank(d);
    int64_t n[2] = {r + 1, (int64_t)1 << 40};
    OK(lattice_dist_sum_int64(d, n, 2));
    CHECK(n[0] == 3 && n[1] == (int64_t)1 << 41, "int64 sums %lld %lld", (long long)n[0],
          (long long)n[1]);
    double x[3] = {r + 0.25, r ? 1e16 : 1.0, -r};
    OK(lattice_dist_sum_doubles(d, x, 3));
    CHECK(x[0] == 1.5 && x[1] == 1.0 + 1e16 && x[2] == -1.0, "double sums %.17g %.17g %.17g", x[0],
          x[1], x[2]);
    OK(lattice_dist_sum_doubles(d, NULL, 0));
    /* floats: 37 over 2 ranks (uneven segments), each element (in double) x0 + x1 */
    float f[37], want[37];
    for (int i = 0; i < 37; i++) {
        const float a = 0.1f * (float)i + 1e-3f, b = 1.0f / (float)(i + 3);
        f[i] = r == 0 ? a : b;
        want[i] = (float)((double)a + (double)b);
    }
    OK(lattice_dist_sum_floats(d, f, 37));
    CHECK(memcmp(f, want, sizeof f) == 0, "float sums differ from the rank-ordered sum");
    float one = (float)(r + 1); /* fewer elements than ranks */
    OK(lattice_dist_sum_floats(d, &one, 1));
    CHECK(one == 3.0f, "one float %g", (double)one);
    /* counts that differ between ranks: refused on every rank, nothing summed
     * (rank 0's values met rank 1's stale scratch, with LATTICE_OK) */
    double y[3] = {1.0, 2.0, 3.0};
    float g[3] = {1.0f, 2.0f, 3.0f};
    int64_t k[3] = {1, 2, 3};
    EXPECT(lattice_dist_sum_doubles, INV, "the ranks pass different counts (2 to 3",
           lattice_dist_errmsg(d), lattice_dist_sum_doubles(d, y, r ? 2 : 3));
    EXPECT(lattice_dist_sum_floats, INV, "the ranks pass different counts (0 to 3",
           lattice_dist_errmsg(d), lattice_dist_sum_floats(d, g, r ? 0 : 3));
    EXPECT(lattice_dist_sum_int64, INV, "the ranks pass different counts (1 to 3",
           lattice_dist_errmsg(d), lattice_dist_sum_int64(d, k, r ? 1 : 3));
    CHECK(y[0] == 1.0 && y[1] == 2.0 && y[2] == 3.0 && g[2] == 3.0f && k[0] == 1 && k[2] == 3,
          "values changed by a refused sum");
    OK(lattice_dist_sum_doubles(d, y, 3)); /* the next sum is whole again */
    CHECK(y[0] == 2.0 && y[2] == 6.0, "double sums after a refusal %g %g", y[0], y[2]);
}

typedef struct run_out {
    double loss[10];
    lattice_schedule_counters counters[10];
    float *weights;
    size_t n_weights;
} run_out;

static void run_steps(rig *w, int steps, run_out *out)
{
    for (int i = 0; i < steps; i++) {
        lattice_trainer_metrics m = {.size = sizeof(m)};
        CHECK(lattice_trainer_step(w->trainer, &m) == LATTICE_OK, "step %d: %s", i,
              lattice_trainer_errmsg(w->trainer));
        if (out && i < 10) {
            out->loss[i] = m.loss;
            out->counters[i] = m.counters;
        }
    }
    if (out)
        out->weights = rig_weights(w->model, &out->n_weights);
}

/* 2 ranks of 2 rows = 1 process of 4 rows (distillation, grow schedule with a
 * token-budget phase); 2 ranks twice = bit-identical; both ranks hold the same weights. */
static void equivalence_and_determinism(lattice_dist *d)
{
    rig w;
    run_out alone = {0}, two = {0}, again = {0}, attached = {0};
    dw_config c = {.batch = 4, .max_batch = 4, .teacher = 1};
    OK(dw_open(&w, &c)); /* no collective: this process alone */
    run_steps(&w, 10, &alone);
    rig_close(&w);
    open_dist(&w, d, 4, 2, 1);
    run_steps(&w, 10, &two);
    double val_two;
    OK(lattice_trainer_evaluate(w.trainer, &val_two));
    rig_close(&w);
    for (int i = 0; i < 10; i++) {
        const lattice_schedule_counters *a = &alone.counters[i], *b = &two.counters[i];
        CHECK(a->steps == b->steps && a->tokens == b->tokens &&
                  a->nonpad_tokens == b->nonpad_tokens &&
                  a->active_layer_tokens == b->active_layer_tokens,
              "step %d: the counters are not the global ones", i);
        CHECK(fabs(alone.loss[i] - two.loss[i]) <= REL_TOL * fabs(alone.loss[i]),
              "step %d: loss %.9g alone, %.9g over 2 ranks", i, alone.loss[i], two.loss[i]);
    }
    open_dist(&w, d, 4, 2, 1);
    run_steps(&w, 10, &again);
    rig_close(&w);
    CHECK(memcmp(two.weights, again.weights, two.n_weights * sizeof(float)) == 0,
          "two runs over 2 ranks differ");
    /* rank 0's weights on rank 1 */
    float *theirs = malloc(two.n_weights * sizeof(float));
    CHECK(theirs != NULL, "memory");
    memcpy(theirs, two.weights, two.n_weights * sizeof(float));
    MPI_Bcast(theirs, (int)two.n_weights, MPI_FLOAT, 0, MPI_COMM_WORLD);
    CHECK(memcmp(theirs, two.weights, two.n_weights * sizeof(float)) == 0,
          "the ranks' weights differ");
    free(theirs);
    /* attached after creation (a model holding the whole batch): the same run */
    OK(dw_open(&w, &c));
    OK(lattice_dist_attach(d, w.trainer));
    run_steps(&w, 10, &attached);
    double val_attached, val_alone;
    OK(lattice_trainer_evaluate(w.trainer, &val_attached));
    CHECK(val_attached == val_two, "validation %.17g vs %.17g", val_attached, val_two);
    OK(lattice_dist_detach(d, w.trainer));
    OK(lattice_trainer_evaluate(w.trainer, &val_alone)); /* alone again: no collective call */
    CHECK(fabs(val_alone - val_two) <= REL_TOL * val_two, "validation alone %.9g vs %.9g",
          val_alone, val_two);
    rig_close(&w);
    CHECK(memcmp(two.weights, attached.weights, two.n_weights * sizeof(float)) == 0,
          "attaching after creation changed the run");
    free(alone.weights);
    free(two.weights);
    free(again.weights);
    free(attached.weights);
}

/* A loop of one's own: each rank's gradient, weighted and summed, is the
 * whole batch's. */
static void hand_written_loop(lattice_dist *d)
{
    rig one, mine;
    dw_config c = {.batch = 4, .max_batch = 4};
    OK(dw_open(&one, &c));
    OK(dw_open(&mine, &c));
    lattice_data_batch b;
    float loss;
    OK(lattice_data_next(one.data, &b));
    OK(lattice_model_forward(one.model, b.tokens, b.batch, b.seq));
    OK(lattice_model_cross_entropy(one.model, b.targets, b.mask, &loss, NULL));
    OK(lattice_model_backward(one.model));
    OK(lattice_data_next(mine.data, &b));
    const int rows = b.batch / lattice_dist_get_size(d), first = lattice_dist_get_rank(d) * rows;
    const size_t off = (size_t)first * (size_t)b.seq;
    int64_t n[1] = {0};
    for (size_t i = 0; i < (size_t)rows * (size_t)b.seq; i++)
        n[0] += b.mask[off + i];
    const int64_t n_local = n[0];
    OK(lattice_dist_sum_int64(d, n, 1));
    CHECK(n[0] == b.n_tokens, "counted tokens %lld vs %lld", (long long)n[0],
          (long long)b.n_tokens);
    OK(lattice_model_forward(mine.model, b.tokens + off, rows, b.seq));
    OK(lattice_model_cross_entropy(mine.model, b.targets + off, b.mask + off, &loss, NULL));
    OK(lattice_model_backward(mine.model));
    OK(lattice_dist_allreduce_gradients(d, mine.model, (double)n_local / (double)n[0]));
    for (int i = 0; i < lattice_model_get_n_tensors(one.model); i++) {
        lattice_model_tensor_info a, g;
        lattice_model_get_tensor(one.model, i, &a);
        lattice_model_get_tensor(mine.model, i, &g);
        const long k = (long)(a.shape[0] * a.shape[1]);
        double mx = 0.0;
        for (long j = 0; j < k; j++)
            mx = fabs(a.grad[j]) > mx ? fabs(a.grad[j]) : mx;
        for (long j = 0; j < k; j++)
            CHECK(fabs(a.grad[j] - g.grad[j]) <= 1e-5 * mx + 1e-9, "%s[%ld]: %g vs %g", a.name, j,
                  (double)a.grad[j], (double)g.grad[j]);
    }
    rig_close(&one);
    rig_close(&mine);
}

/* Ranks set up differently are refused on every rank, naming the field
 * (before 0.4 they trained without a word): at the trainer's creation with
 * the collective, and at an attach after it. A refused rank stays alone,
 * and the communicator stays usable. */
static void mismatched_ranks(lattice_dist *d)
{
    static const struct {
        dw_config odd; /* rank 1's */
        const char *says;
    } cases[] = {
        {{.batch = 8, .max_batch = 4, .teacher = 1},
         "rank 1's data batch_size 8 differs from rank 0's 4"},
        {{.batch = 4, .max_batch = 2, .teacher = 1, .data_seed = 4},
         "rank 1's data seed 4 differs from rank 0's 3"},
        {{.batch = 4, .max_batch = 2, .teacher = 1, .model_seed = 43},
         "(seed 43) differs from rank 0's 0x"},
    };
    static lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    OK(lattice_dist_trainer_params(d, &tp));
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        dw_config c = {.batch = 4, .max_batch = 2, .teacher = 1};
        if (g_rank == 1)
            c = cases[i].odd;
        c.coll = tp.collective;
        c.coll_user = tp.collective_user;
        rig w;
        lattice_status st = dw_open(&w, &c);
        CHECK(st == CFG, "case %zu: status %d (%s)", i, (int)st, lattice_last_error());
        CHECK(strstr(lattice_last_error(), cases[i].says), "case %zu: '%s'", i,
              lattice_last_error());
        CHECK(strstr(lattice_last_error(), "refused on every rank"), "case %zu", i);
        c.coll = NULL;
        c.coll_user = NULL;
        if (c.batch > c.max_batch)
            c.max_batch = c.batch;
        OK(dw_open(&w, &c));
        EXPECT(lattice_dist_attach, CFG, cases[i].says, lattice_dist_errmsg(d),
               lattice_dist_attach(d, w.trainer));
        CHECK(strstr(lattice_trainer_errmsg(w.trainer), cases[i].says), "the trainer's message");
        OK(lattice_trainer_step(w.trainer, NULL)); /* alone: no collective call */
        rig_close(&w);
    }
    int64_t one[1] = {1};
    OK(lattice_dist_sum_int64(d, one, 1));
    CHECK(one[0] == 2, "the communicator after the refusals: %lld", (long long)one[0]);
    /* a rank that refuses its own objects before the setups are compared
     * (its model's max_seq below the data's rows): every rank refuses with
     * it; rank 0 waited for it in the comparison for ever */
    dw_config short_rows = {.batch = 4, .max_batch = 2, .coll = tp.collective,
                            .coll_user = tp.collective_user};
    if (g_rank == 1)
        short_rows.max_seq = DW_SEQ - 1;
    rig v;
    lattice_set_last_error("primed-by-the-test");
    CHECK(dw_open(&v, &short_rows) == CFG, "a rank's own refusal at creation");
    CHECK(strstr(lattice_last_error(), g_rank ? "exceeds the model's max_seq"
                                              : "rank 1 refused its setup"),
          "the creation's reason: %s", lattice_last_error());
    /* a trainer whose model holds only its share cannot run alone: the
     * refusal in the handle's message too (it was left empty) */
    rig w;
    open_dist(&w, d, 4, 2, 1);
    EXPECT(lattice_dist_detach, CFG, "cannot detach", lattice_dist_errmsg(d),
           lattice_dist_detach(d, w.trainer));
    rig_close(&w);
}

static int n_files(const char *dir)
{
    DIR *dd = opendir(dir);
    int n = 0;
    for (struct dirent *e; dd && (e = readdir(dd));)
        n += e->d_name[0] != '.';
    if (dd)
        closedir(dd);
    return n;
}

/* Written once, by rank 0; resumed by 2 ranks bit-exactly; refused by 1. */
static void checkpoint(lattice_dist *d, const char *dir)
{
    char sub[512], path[600];
    snprintf(sub, sizeof sub, "%s/ck", dir);
    snprintf(path, sizeof path, "%s/run.safetensors", sub);
    if (g_rank == 0) {
        mkdir(sub, 0755);
        unlink(path);
    }
    MPI_Barrier(MPI_COMM_WORLD);
    CHECK(n_files(sub) == 0, "%s is not empty", sub);
    rig w;
    run_out full = {0}, resumed = {0};
    open_dist(&w, d, 4, 2, 1);
    run_steps(&w, 8, &full);
    rig_close(&w);
    open_dist(&w, d, 4, 2, 1);
    run_steps(&w, 4, NULL);
    OK(lattice_trainer_save_checkpoint(w.trainer, path));
    CHECK(n_files(sub) == 1, "the save left %d files in %s", n_files(sub), sub);
    rig_close(&w);
    open_dist(&w, d, 4, 2, 1);
    OK(lattice_trainer_load_checkpoint(w.trainer, path));
    run_steps(&w, 4, &resumed);
    rig_close(&w);
    CHECK(memcmp(full.weights, resumed.weights, full.n_weights * sizeof(float)) == 0,
          "resumed over 2 ranks, the run differs");
    /* another rank count: alone, and over a communicator of one rank */
    dw_config c = {.batch = 4, .max_batch = 4, .teacher = 1};
    OK(dw_open(&w, &c));
    CHECK(lattice_trainer_load_checkpoint(w.trainer, path) == CFG, "loaded alone");
    CHECK(strstr(lattice_trainer_errmsg(w.trainer), "over 2 ranks and this run has 1"),
          "message: %s", lattice_trainer_errmsg(w.trainer));
    MPI_Comm self;
    MPI_Comm_split(MPI_COMM_WORLD, g_rank, 0, &self);
    lattice_dist *d1;
    OK(lattice_dist_create(self, &d1));
    CHECK(lattice_dist_get_size(d1) == 1, "split size");
    OK(lattice_dist_attach(d1, w.trainer));
    CHECK(lattice_trainer_load_checkpoint(w.trainer, path) == CFG, "loaded over 1 rank");
    rig_close(&w);
    lattice_dist_destroy(d1);
    MPI_Comm_free(&self);
    /* a save that fails on rank 0 fails on every rank */
    open_dist(&w, d, 4, 2, 1);
    CHECK(lattice_trainer_save_checkpoint(w.trainer, "/nonexistent/dir/ck") == LATTICE_ERR_IO,
          "a failed save: %s", lattice_trainer_errmsg(w.trainer));
    CHECK(g_rank == 0 || strstr(lattice_trainer_errmsg(w.trainer), "rank 0 could not write"),
          "rank 1's message: %s", lattice_trainer_errmsg(w.trainer));
    /* a load that fails on one rank only fails on both, and changes nothing */
    lattice_data_position before, after;
    lattice_data_get_position(w.data, &before);
    CHECK(lattice_trainer_load_checkpoint(w.trainer, g_rank == 1 ? "/nonexistent/ck" : path) ==
              LATTICE_ERR_IO, "a load missing on rank 1");
    lattice_data_get_position(w.data, &after);
    CHECK(before.epoch == after.epoch && before.index == after.index, "the load moved the data");
    lattice_schedule_counters cn;
    lattice_schedule_get_counters(w.schedule, &cn);
    CHECK(cn.steps == 0, "the refused load changed the schedule");
    rig_close(&w);
    free(full.weights);
    free(resumed.weights);
    unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
}

static void stats(lattice_dist *d)
{
    lattice_dist_stats s = {.size = sizeof(s)};
    OK(lattice_dist_get_stats(d, &s));
    CHECK(s.size == sizeof(s) && s.sum_calls > 0 && s.sum_bytes > 0 && s.sum_seconds >= 0.0 &&
              s.other_calls > 0, "stats");
    lattice_dist_reset_stats(d);
    OK(lattice_dist_get_stats(d, &s));
    CHECK(s.sum_calls == 0 && s.other_calls == 0, "reset");
}

/* Checkpoints every 2 steps; rank 1 dies at step 6 before the save, while
 * rank 0 writes that step's checkpoint (or is killed by mpirun doing so). */
static int kill_run(lattice_dist *d, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/kill.safetensors", dir);
    if (g_rank == 0)
        unlink(path);
    MPI_Barrier(MPI_COMM_WORLD);
    rig w;
    open_dist(&w, d, 4, 2, 1);
    for (int step = 1; step <= 12; step++) {
        OK(lattice_trainer_step(w.trainer, NULL));
        if (step == 6 && g_rank == 1)
            raise(SIGKILL);
        if (step % 2 == 0)
            OK(lattice_trainer_save_checkpoint(w.trainer, path));
    }
    rig_close(&w);
    return 0; /* not reached: kill_test.py fails when the job succeeds */
}

static int resume_run(lattice_dist *d, const char *dir)
{
    char path[600];
    snprintf(path, sizeof path, "%s/kill.safetensors", dir);
    rig w;
    open_dist(&w, d, 4, 2, 1);
    CHECK(lattice_trainer_load_checkpoint(w.trainer, path) == LATTICE_OK, "the last checkpoint: %s",
          lattice_trainer_errmsg(w.trainer));
    lattice_schedule_counters c;
    lattice_schedule_get_counters(w.schedule, &c);
    CHECK(c.steps == 4 || c.steps == 6, "the checkpoint is of step %lld", (long long)c.steps);
    run_steps(&w, 2, NULL);
    OK(lattice_trainer_save_checkpoint(w.trainer, path)); /* removes a killed save's temporary */
    if (g_rank == 0)
        printf("resumed from step %lld\n", (long long)c.steps);
    rig_close(&w);
    return 0;
}

static void mkdir_p(const char *dir)
{
    char buf[512];
    snprintf(buf, sizeof buf, "%s", dir);
    for (char *p = buf + 1; *p; p++)
        if (*p == '/') {
            *p = 0;
            mkdir(buf, 0755);
            *p = '/';
        }
    mkdir(buf, 0755);
}

int main(int argc, char **argv)
{
    const char *mode = argc == 3 ? argv[1] : "all", *dir = argv[argc - 1];
    if (argc < 2 || argc > 3) {
        fprintf(stderr, "usage: %s [kill|resume] DIR\n", argv[0]);
        return 2;
    }
    MPI_Init(&argc, &argv);
    MPI_Comm_rank(MPI_COMM_WORLD, &g_rank);
    int size;
    MPI_Comm_size(MPI_COMM_WORLD, &size);
    CHECK(size == 2, "run with mpirun -np 2 (got %d ranks)", size);
    if (g_rank == 0)
        mkdir_p(dir);
    MPI_Barrier(MPI_COMM_WORLD);
    lattice_dist *d;
    OK(lattice_dist_create(MPI_COMM_WORLD, &d));
    CHECK(lattice_dist_get_rank(d) == g_rank && lattice_dist_get_size(d) == 2, "rank and size");
    int rc = 0;
    if (!strcmp(mode, "kill")) {
        rc = kill_run(d, dir);
    } else if (!strcmp(mode, "resume")) {
        rc = resume_run(d, dir);
    } else {
        bad_input(d);
        scalar_sums(d);
        equivalence_and_determinism(d);
        hand_written_loop(d);
        mismatched_ranks(d);
        checkpoint(d, dir);
        stats(d);
        if (g_rank == 0)
            printf("all cases passed on 2 ranks\n");
    }
    lattice_dist *kept; /* used after MPI_Finalize: refused, not an abort of the job */
    OK(lattice_dist_create(MPI_COMM_WORLD, &kept));
    lattice_dist_destroy(d);
    MPI_Finalize();
    double after = 1.0;
    int64_t count = 1;
    if (lattice_dist_sum_doubles(kept, &after, 1) != LATTICE_ERR_STATE ||
        !strstr(lattice_dist_errmsg(kept), "already finalised") ||
        lattice_dist_sum_int64(kept, &count, 1) != LATTICE_ERR_STATE || after != 1.0) {
        fprintf(stderr, "rank %d: a sum after MPI_Finalize (%s)\n", g_rank, lattice_dist_errmsg(kept));
        return 1;
    }
    lattice_dist_destroy(kept);
    lattice_dist *late; /* MPI_Abort is no longer allowed: report and fail */
    if (lattice_dist_create(MPI_COMM_WORLD, &late) != LATTICE_ERR_STATE ||
        !strstr(lattice_last_error(), "already finalised")) {
        fprintf(stderr, "rank %d: created after MPI_Finalize (%s)\n", g_rank, lattice_last_error());
        return 1;
    }
    return rc;
}
