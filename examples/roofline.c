/* The best sgemm rate over the GEMM libraries at a list of shapes (roofline.h). */
#define _POSIX_C_SOURCE 200809L

#include "roofline.h"

#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static double now(int cpu_clock)
{
    struct timespec ts;
    clock_gettime(cpu_clock ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

int rl_add(rl_list *l, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc,
           float alpha, float beta)
{
    if (l->n > 0) {
        rl_gemm *last = &l->g[l->n - 1];
        if (last->ta == ta && last->tb == tb && last->m == m && last->n == n && last->k == k &&
            last->lda == lda && last->ldb == ldb && last->ldc == ldc && last->alpha == alpha &&
            last->beta == beta) {
            last->count++;
            return 0;
        }
    }
    if (l->n == l->cap) {
        size_t cap = l->cap ? 2 * l->cap : 32;
        rl_gemm *g = realloc(l->g, cap * sizeof(*g));
        if (!g)
            return -1;
        l->g = g;
        l->cap = cap;
    }
    l->g[l->n++] = (rl_gemm){ta, tb, m, n, k, lda, ldb, ldc, alpha, beta, 1};
    return 0;
}

void rl_free(rl_list *l)
{
    free(l->g);
    memset(l, 0, sizeof(*l));
}

double rl_flop(const rl_list *l)
{
    double f = 0;
    for (size_t i = 0; i < l->n; i++)
        f += 2.0 * l->g[i].m * l->g[i].n * l->g[i].k * l->g[i].count;
    return f;
}

static int cmp_double(const void *a, const void *b)
{
    double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* One pass over the list on one backend; the seconds it took, or -1 on failure. */
static double run_list(lattice_backend *be, const rl_list *l, const float *a, const float *b,
                       float *c, int cpu_clock, lattice_status *st)
{
    double t0 = now(cpu_clock);
    for (size_t i = 0; i < l->n; i++) {
        const rl_gemm *g = &l->g[i];
        for (int r = 0; r < g->count; r++) {
            *st = lattice_backend_sgemm(be, g->ta, g->tb, g->m, g->n, g->k, g->alpha, a, g->lda,
                                        b, g->ldb, g->beta, c, g->ldc);
            if (*st != LATTICE_OK)
                return -1;
        }
    }
    return now(cpu_clock) - t0;
}

/* ---- a team of threads that each run their own list, all at once -------- */

/* One worker's part: its list, its operands and (per library) its backend. */
typedef struct rl_part {
    const rl_list *l;
    float *a, *b, *c;
    lattice_backend *be[RL_MAX_LIBS];
    double secs;
    lattice_status st;
} rl_part;

/* The workers of one round: started for it, let go at once through a gate,
 * joined at its end. */
typedef struct rl_team {
    rl_part *part;
    int n;                  /* workers, the calling thread included */
    void (*fn)(struct rl_team *tm, int w); /* worker w's part of the round */
    void *ctx;              /* fn's own data */
    int job;                /* the library to run */
    int cpu_clock;
    int go, abort;          /* the gate, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
} rl_team;

typedef struct rl_arg {
    rl_team *tm;
    int w;
} rl_arg;

static void part_run(rl_team *tm, int w)
{
    rl_part *p = &tm->part[w];
    p->secs = run_list(p->be[tm->job], p->l, p->a, p->b, p->c, tm->cpu_clock, &p->st);
}

static void *worker(void *arg)
{
    rl_arg *ra = arg;
    rl_team *tm = ra->tm;
    pthread_mutex_lock(&tm->mu);
    while (!tm->go && !tm->abort)
        pthread_cond_wait(&tm->cv, &tm->mu);
    const int run = !tm->abort;
    pthread_mutex_unlock(&tm->mu);
    if (run)
        tm->fn(tm, ra->w);
    return NULL;
}

static void team_open(rl_team *tm, int go, int abort)
{
    pthread_mutex_lock(&tm->mu);
    tm->go = go, tm->abort = abort;
    pthread_cond_broadcast(&tm->cv);
    pthread_mutex_unlock(&tm->mu);
}

/* Runs library j's lists on every worker at once; the time from the gate's
 * opening to the last one's end, or -1 when a call failed or a thread did
 * not start (*st says why). */
static double team_round(rl_team *tm, int j, lattice_status *st)
{
    enum { MAX_WORKERS = 256 };
    pthread_t tid[MAX_WORKERS];
    rl_arg arg[MAX_WORKERS];
    tm->job = j, tm->go = 0, tm->abort = 0;
    int started = 1;
    for (; started < tm->n; started++) {
        arg[started] = (rl_arg){tm, started};
        if (pthread_create(&tid[started], NULL, worker, &arg[started]) != 0)
            break;
    }
    if (started < tm->n) {
        team_open(tm, 0, 1);
        for (int w = 1; w < started; w++)
            pthread_join(tid[w], NULL);
        fprintf(stderr, "roofline: cannot start thread %d of %d\n", started + 1, tm->n);
        *st = LATTICE_ERR_OUT_OF_MEMORY;
        return -1;
    }
    const double t0 = now(tm->cpu_clock);
    team_open(tm, 1, 0);
    tm->fn(tm, 0);
    for (int w = 1; w < tm->n; w++)
        pthread_join(tid[w], NULL);
    const double secs = now(tm->cpu_clock) - t0;
    for (int w = 0; tm->part && w < tm->n; w++)
        if (tm->part[w].secs < 0) {
            *st = tm->part[w].st;
            return -1;
        }
    return secs;
}

lattice_status rl_measure_rows(const rl_list *lists, int parts, int threads, int rounds,
                               int cpu_clock, int only_optimised, rl_result *out)
{
    static const char *const names[RL_MAX_LIBS] = {"blis", "openblas", "onednn"};
    memset(out, 0, sizeof(*out));
    out->best = -1;
    out->n_libs = RL_MAX_LIBS;
    if (rounds < 1 || rounds > 1000 || parts < 1 || parts > 256 || (parts > 1 && threads != 1))
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (parts > 1)
        cpu_clock = 0; /* the process's CPU time would sum the parts */
    rl_part *part = calloc((size_t)parts, sizeof(rl_part));
    double *secs = calloc((size_t)RL_MAX_LIBS * (size_t)rounds, sizeof(double));
    lattice_status st = LATTICE_OK;
    rl_team tm = {.part = part, .n = parts, .fn = part_run, .cpu_clock = cpu_clock};
    pthread_mutex_init(&tm.mu, NULL);
    pthread_cond_init(&tm.cv, NULL);
    if (!part || !secs) {
        fprintf(stderr, "roofline: out of memory\n");
        st = LATTICE_ERR_OUT_OF_MEMORY;
        goto done;
    }
    uint64_t x = 0x2545f4914f6cdd1dULL; /* small values: the beta = 1 calls stay finite */
    for (int w = 0; w < parts; w++) {
        const rl_list *l = &lists[w];
        size_t na = 1, nb = 1, nc = 1; /* floats each operand needs, over the list */
        for (size_t i = 0; i < l->n; i++) {
            const rl_gemm *g = &l->g[i];
            size_t a_rows = (size_t)(g->ta ? g->k : g->m), b_rows = (size_t)(g->tb ? g->n : g->k);
            if (a_rows * (size_t)g->lda > na)
                na = a_rows * (size_t)g->lda;
            if (b_rows * (size_t)g->ldb > nb)
                nb = b_rows * (size_t)g->ldb;
            if ((size_t)g->m * (size_t)g->ldc > nc)
                nc = (size_t)g->m * (size_t)g->ldc;
        }
        rl_part *p = &part[w];
        p->l = l;
        p->a = malloc(na * sizeof(float)), p->b = malloc(nb * sizeof(float));
        p->c = malloc(nc * sizeof(float));
        if (!p->a || !p->b || !p->c) {
            fprintf(stderr, "roofline: out of memory for %zu + %zu + %zu floats\n", na, nb, nc);
            st = LATTICE_ERR_OUT_OF_MEMORY;
            goto done;
        }
        for (size_t i = 0; i < na + nb + nc; i++) {
            x ^= x << 13, x ^= x >> 7, x ^= x << 17;
            float v = (float)((double)(x >> 11) * 0x1.0p-53 - 0.5) * 0.02f;
            if (i < na)
                p->a[i] = v;
            else if (i < na + nb)
                p->b[i - na] = v;
            else
                p->c[i - na - nb] = v;
        }
    }
    int optimised[RL_MAX_LIBS] = {0}, any_optimised = 0, have[RL_MAX_LIBS] = {0};
    for (int j = 0; j < RL_MAX_LIBS; j++) {
        rl_lib *lib = &out->lib[j];
        snprintf(lib->name, sizeof lib->name, "%s", names[j]);
        for (int w = 0; w < parts; w++) {
            lattice_status cs = lattice_backend_create(names[j], &part[w].be[j]);
            if (cs != LATTICE_OK) {
                snprintf(lib->kernels, sizeof lib->kernels, "not available: %s",
                         lattice_last_error());
                part[w].be[j] = NULL;
                break;
            }
            lattice_backend_info bi;
            bi.size = sizeof bi;
            if ((st = lattice_backend_set_threads(part[w].be[j], threads)) != LATTICE_OK ||
                (st = lattice_backend_get_info(part[w].be[j], &bi)) != LATTICE_OK) {
                fprintf(stderr, "roofline: %s: %s\n", names[j], lattice_last_error());
                goto done;
            }
            snprintf(lib->kernels, sizeof lib->kernels, "%s, %s%s", bi.library, bi.kernels,
                     bi.optimised ? "" : " (not optimised for this CPU)");
            optimised[j] = bi.optimised;
        }
        have[j] = part[parts - 1].be[j] != NULL;
        lib->available = have[j];
        any_optimised |= have[j] && optimised[j];
    }
    for (int j = 0; j < RL_MAX_LIBS; j++) {
        if (have[j] && only_optimised && any_optimised && !optimised[j]) {
            have[j] = 0;
            out->lib[j].available = 0;
            size_t len = strlen(out->lib[j].kernels);
            snprintf(out->lib[j].kernels + len, sizeof out->lib[j].kernels - len, ": not timed");
        }
        /* untimed: packing buffers, JIT code, caches */
        if (have[j] && team_round(&tm, j, &st) < 0)
            goto failed;
    }
    for (int r = 0; r < rounds; r++)
        for (int j = 0; j < RL_MAX_LIBS; j++) {
            if (!have[j])
                continue;
            double s = team_round(&tm, j, &st);
            if (s < 0)
                goto failed;
            secs[(size_t)j * rounds + r] = s;
        }
    double flop = 0.0;
    for (int w = 0; w < parts; w++)
        flop += rl_flop(&lists[w]);
    for (int j = 0; j < RL_MAX_LIBS; j++) {
        if (!have[j])
            continue;
        double *s = secs + (size_t)j * rounds;
        qsort(s, (size_t)rounds, sizeof(double), cmp_double);
        double med = rounds % 2 ? s[rounds / 2] : 0.5 * (s[rounds / 2 - 1] + s[rounds / 2]);
        out->lib[j].gflops_median = flop / med / 1e9;
        out->lib[j].gflops_best = flop / s[0] / 1e9;
        if (out->best < 0 || out->lib[j].gflops_median > out->lib[out->best].gflops_median)
            out->best = j;
    }
    goto done;
failed:
    fprintf(stderr, "roofline: sgemm: %s: %s\n", lattice_status_string(st), lattice_last_error());
done:
    pthread_mutex_destroy(&tm.mu);
    pthread_cond_destroy(&tm.cv);
    for (int w = 0; part && w < parts; w++) {
        for (int j = 0; j < RL_MAX_LIBS; j++)
            lattice_backend_destroy(part[w].be[j]);
        free(part[w].a);
        free(part[w].b);
        free(part[w].c);
    }
    free(part);
    free(secs);
    return st;
}

lattice_status rl_measure(const rl_list *l, int threads, int rounds, int cpu_clock,
                          int only_optimised, rl_result *out)
{
    return rl_measure_rows(l, 1, threads, rounds, cpu_clock, only_optimised, out);
}

/* ---- the core's FMA peak ---------------------------------------------------- */

/* Twelve independent chains of a = a m + c: more than the FMA units' latency
 * times their count on every x86 core seen (4 cycles x 2 units), so the units
 * never wait for a result. The chains converge to c / (1 - m), far from
 * overflow and from subnormals. */
#define RL_CHAINS(T, SET, FMA, ADD)                                                                \
    T a0 = SET(0.5f), a1 = SET(0.6f), a2 = SET(0.7f), a3 = SET(0.8f), a4 = SET(0.9f);            \
    T a5 = SET(1.0f), a6 = SET(1.1f), a7 = SET(1.2f), a8 = SET(1.3f), a9 = SET(1.4f);            \
    T a10 = SET(1.5f), a11 = SET(1.6f);                                                            \
    const T m = SET(0.9999f), c = SET(1e-4f);                                                      \
    for (long n = 0; n < iters; n++) {                                                             \
        a0 = FMA(a0, m, c), a1 = FMA(a1, m, c), a2 = FMA(a2, m, c), a3 = FMA(a3, m, c);            \
        a4 = FMA(a4, m, c), a5 = FMA(a5, m, c), a6 = FMA(a6, m, c), a7 = FMA(a7, m, c);            \
        a8 = FMA(a8, m, c), a9 = FMA(a9, m, c), a10 = FMA(a10, m, c), a11 = FMA(a11, m, c);        \
    }                                                                                              \
    T s = ADD(ADD(ADD(a0, a1), ADD(a2, a3)), ADD(ADD(a4, a5), ADD(a6, a7)));                       \
    s = ADD(s, ADD(ADD(a8, a9), ADD(a10, a11)))

static float fma_loop_portable(long iters)
{
#define RL_SET(x) (x)
#define RL_FMA(a, b, c) ((a) * (b) + (c))
#define RL_ADD(a, b) ((a) + (b))
    RL_CHAINS(float, RL_SET, RL_FMA, RL_ADD);
    return s;
}

#if defined(__x86_64__) && defined(__GNUC__)
#include <immintrin.h>

__attribute__((target("avx2,fma"))) static float fma_loop_avx2(long iters)
{
    RL_CHAINS(__m256, _mm256_set1_ps, _mm256_fmadd_ps, _mm256_add_ps);
    float out[8];
    _mm256_storeu_ps(out, s);
    return out[0] + out[7];
}

__attribute__((target("avx512f"))) static float fma_loop_avx512(long iters)
{
    RL_CHAINS(__m512, _mm512_set1_ps, _mm512_fmadd_ps, _mm512_add_ps);
    float out[16];
    _mm512_storeu_ps(out, s);
    return out[0] + out[15];
}
#endif

typedef float (*fma_loop_fn)(long);

static fma_loop_fn fma_loop(int *lanes, const char **isa)
{
    fma_loop_fn loop = fma_loop_portable;
    *lanes = 1;
    *isa = "portable";
#if defined(__x86_64__) && defined(__GNUC__)
    __builtin_cpu_init();
    if (__builtin_cpu_supports("avx512f"))
        loop = fma_loop_avx512, *lanes = 16, *isa = "avx512";
    else if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
        loop = fma_loop_avx2, *lanes = 8, *isa = "avx2";
#endif
    return loop;
}

/* A loop count that takes at least 50 ms, and the time it took. */
static long fma_calibrate(fma_loop_fn loop, int cpu_clock, double *secs)
{
    volatile float sink = 0.0f;
    long iters = 1 << 16;
    for (;;) {
        const double t0 = now(cpu_clock);
        sink += loop(iters);
        *secs = now(cpu_clock) - t0;
        if (*secs >= 0.05 || iters > (1L << 40))
            break;
        iters *= *secs > 0.005 ? (long)(0.06 / *secs) + 1 : 10;
    }
    (void)sink;
    return iters;
}

double rl_fma_peak(int reps, int cpu_clock, const char **isa)
{
    int lanes;
    const fma_loop_fn loop = fma_loop(&lanes, isa);
    volatile float sink = 0.0f;
    double secs;
    const long iters = fma_calibrate(loop, cpu_clock, &secs);
    double best = secs;
    for (int r = 0; r < reps; r++) {
        const double t0 = now(cpu_clock);
        sink += loop(iters);
        const double t = now(cpu_clock) - t0;
        best = t < best ? t : best;
    }
    (void)sink;
    return 2.0 * 12.0 * lanes * (double)iters / best / 1e9;
}

typedef struct fma_job {
    fma_loop_fn loop;
    long iters;
    float sink[256];
} fma_job;

static void fma_part(rl_team *tm, int w)
{
    fma_job *job = tm->ctx;
    job->sink[w] = job->loop(job->iters);
}

double rl_fma_peak_threads(int threads, int reps, const char **isa)
{
    if (threads < 1 || threads > 256)
        return 0.0;
    int lanes;
    fma_job job;
    memset(&job, 0, sizeof job);
    job.loop = fma_loop(&lanes, isa);
    double secs;
    job.iters = fma_calibrate(job.loop, 0, &secs);
    rl_team tm = {.n = threads, .fn = fma_part, .ctx = &job};
    pthread_mutex_init(&tm.mu, NULL);
    pthread_cond_init(&tm.cv, NULL);
    double best = -1.0;
    lattice_status st = LATTICE_OK;
    for (int r = 0; r < 1 + reps; r++) {
        const double t = team_round(&tm, 0, &st);
        if (t < 0) {
            best = -1.0;
            break;
        }
        best = best < 0 || t < best ? t : best;
    }
    pthread_mutex_destroy(&tm.mu);
    pthread_cond_destroy(&tm.cv);
    return best > 0 ? 2.0 * 12.0 * lanes * (double)job.iters * threads / best / 1e9 : 0.0;
}
