/*
 * bench_bf16: the onednn backend's GEMM slots side by side at a step's own
 * GEMM shapes (liblattice/model_pass.c's lattice__gemm calls, both
 * transposes as the model makes them), on one thread:
 *   fp32    dnnl_sgemm (the default precision);
 *   api     the operands rounded to bf16, then dnnl_gemm_bf16bf16f32;
 *   matmul  the operands rounded to bf16, then oneDNN's matmul primitive,
 *           cached per shape (the bf16 precision's slot).
 * The bf16 slots' times include rounding the fp32 operands; the column
 * "round" times that rounding alone (both operands, as the matmul slot does
 * it), so that matmul minus round is the primitive and its call. Each round runs
 * every slot in turn (A B C A B C ...), so load that comes and goes falls on
 * all of them; the medians over rounds are reported, in wall time and in the
 * thread's CPU time, and their ratios to fp32's.
 *
 * Output: "key value" lines; lines starting with '#' are for people.
 */
#define _POSIX_C_SOURCE 200809L

#include <lattice/lattice.h>

#include <getopt.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define PROG "bench_bf16"

#include "backend_impl.h"
#include "backend_onednn_bf16.h"
#include "example_util.h"

enum { SLOTS = 3, MAX_ROUNDS = 1000 };
static const char *const slot_name[SLOTS] = {"fp32", "api", "matmul"};

typedef struct shape {
    const char *what;
    int ta, tb, m, n, k, lda, ldb, ldc;
    float beta;
    int per_step; /* calls per step */
} shape;

static double thread_cpu(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* The step's GEMMs for a model of this shape: per layer the forward's four
 * projections, the backward's weight gradient (k = the tokens, beta 1) and
 * input gradient of each, and the head's three. */
static int step_shapes(const ex_shape *sh, shape *out)
{
    const int N = sh->batch * sh->seq, D = sh->d_model, F = sh->d_ff, V = sh->vocab;
    const int Hd = sh->heads * sh->head_dim, W = (sh->heads + 2 * sh->kv_heads) * sh->head_dim;
    const int L = sh->layers;
    const shape s[] = {
        {"qkv_fwd", 0, 1, N, W, D, D, D, W, 0.0f, L},
        {"out_fwd", 0, 1, N, D, Hd, Hd, Hd, D, 0.0f, L},
        {"mlp_gu_fwd", 0, 1, N, 2 * F, D, D, D, 2 * F, 0.0f, L},
        {"mlp_down_fwd", 0, 1, N, D, F, F, F, D, 0.0f, L},
        {"head_fwd", 0, 1, N, V, D, D, D, V, 0.0f, 1},
        {"head_dw", 1, 0, V, D, N, V, D, D, 1.0f, 1},
        {"head_dx", 0, 0, N, D, V, V, D, D, 0.0f, 1},
        {"mlp_down_dw", 1, 0, D, F, N, D, F, F, 1.0f, L},
        {"mlp_down_dx", 0, 0, N, F, D, D, F, F, 0.0f, L},
        {"mlp_gu_dw", 1, 0, 2 * F, D, N, 2 * F, D, D, 1.0f, L},
        {"mlp_gu_dx", 0, 0, N, D, 2 * F, 2 * F, D, D, 0.0f, L},
        {"out_dw", 1, 0, D, Hd, N, D, Hd, Hd, 1.0f, L},
        {"out_dx", 0, 0, N, Hd, D, D, Hd, Hd, 0.0f, L},
        {"qkv_dw", 1, 0, W, D, N, W, D, D, 1.0f, L},
        {"qkv_dx", 0, 0, N, D, W, W, D, D, 0.0f, L},
    };
    memcpy(out, s, sizeof s);
    return (int)(sizeof s / sizeof s[0]);
}

static long elements(int trans, int rows, int cols, int ld)
{
    return (long)(trans ? cols : rows) * ld; /* rows x cols of op(X), stored transposed or not */
}

/* reps calls of one shape on one slot: wall and CPU seconds per call. */
static int time_slot(lattice_backend *be, const shape *g, int reps, const float *a, const float *b,
                     float *c, double *wall, double *cpu)
{
    const double w0 = ex_now(), c0 = thread_cpu();
    for (int r = 0; r < reps; r++)
        if (lattice_backend_sgemm(be, g->ta, g->tb, g->m, g->n, g->k, 1.0f, a, g->lda, b, g->ldb,
                                  g->beta, c, g->ldc) != LATTICE_OK)
            return -1;
    *wall = (ex_now() - w0) / reps;
    *cpu = (thread_cpu() - c0) / reps;
    return 0;
}

/* reps roundings of one shape's two operands to bf16, as the matmul slot
 * rounds them: seconds per call. */
static double time_round(const shape *g, int reps, const float *a, const float *b, uint16_t *out)
{
    const int a_rows = g->ta ? g->k : g->m, a_cols = g->ta ? g->m : g->k;
    const int b_rows = g->tb ? g->n : g->k, b_cols = g->tb ? g->k : g->n;
    const double w0 = ex_now();
    for (int r = 0; r < reps; r++) {
        lattice__to_bf16(a, a_rows, a_cols, g->lda, out);
        lattice__to_bf16(b, b_rows, b_cols, g->ldb, out + (size_t)a_rows * (size_t)a_cols);
    }
    return (ex_now() - w0) / reps;
}

/* The largest |x - y| over C, relative to the largest |y|. */
static double rel_diff(const float *x, const float *y, long n)
{
    double d = 0, s = 0;
    for (long i = 0; i < n; i++) {
        d = fmax(d, fabs((double)x[i] - y[i]));
        s = fmax(s, fabs((double)y[i]));
    }
    return s > 0 ? d / s : d;
}

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " [--preset study|d256] [--rounds N] [--ms X]\n"
               "Time the onednn backend's fp32 and bf16 GEMM slots at a step's GEMM shapes,\n"
               "1 thread, interleaved; N rounds (15), each slot about X ms per shape per round (20).\n");
}

/* One shape's rounds; its medians into wall[] and cpu[] (seconds per call). */
static int bench_shape(lattice_backend **be, const shape *g, int rounds, double ms, float *a,
                       float *b, float *c, float *ref, uint16_t *rounded, double *wall,
                       double *cpu, double *round)
{
    const long nc = (long)g->m * g->ldc;
    double w[SLOTS][MAX_ROUNDS], t[SLOTS][MAX_ROUNDS], rd[MAX_ROUNDS], diff[SLOTS];
    double once_w, once_c;
    int reps = 1;
    for (int s = 0; s < SLOTS; s++) { /* warm up (the matmul primitive is made here) */
        memset(c, 0, sizeof(float) * (size_t)nc);
        if (time_slot(be[s], g, 1, a, b, c, &once_w, &once_c))
            return -1;
        if (s == 0) {
            memcpy(ref, c, sizeof(float) * (size_t)nc);
            reps = (int)fmax(1.0, ms * 1e-3 / fmax(once_w, 1e-7));
        }
        diff[s] = rel_diff(c, ref, nc);
    }
    for (int r = 0; r < rounds; r++) {
        for (int s = 0; s < SLOTS; s++)
            if (time_slot(be[s], g, reps, a, b, c, &w[s][r], &t[s][r]))
                return -1;
        rd[r] = time_round(g, reps, a, b, rounded);
    }
    *round = ex_median(rd, rounds);
    for (int s = 0; s < SLOTS; s++) {
        wall[s] = ex_median(w[s], rounds);
        cpu[s] = ex_median(t[s], rounds);
    }
    printf("gemm %-13s %c%c %5dx%4dx%5d beta%g x%-2d  fp32 %7.1f us  api %7.1f us  matmul %7.1f us"
           "  round %7.1f us  fp32/api %.2f  fp32/matmul %.2f  (cpu: %.2f %.2f)  diff api %.1e matmul %.1e\n",
           g->what, g->ta ? 'T' : 'N', g->tb ? 'T' : 'N', g->m, g->n, g->k, (double)g->beta,
           g->per_step, wall[0] * 1e6, wall[1] * 1e6, wall[2] * 1e6, *round * 1e6, wall[0] / wall[1],
           wall[0] / wall[2], cpu[0] / cpu[1], cpu[0] / cpu[2], diff[1], diff[2]);
    fflush(stdout);
    return 0;
}

int main(int argc, char **argv)
{
    ex_shape sh = EX_PRESET_STUDY;
    int rounds = 15;
    double ms = 20;
    static const struct option longopts[] = {
        {"preset", required_argument, NULL, 'p'}, {"rounds", required_argument, NULL, 'r'},
        {"ms", required_argument, NULL, 'm'},     {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int opt;
    while ((opt = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (opt) {
        case 'p':
            if (ex_parse_preset(optarg, &sh) < 0)
                return 2;
            break;
        case 'r':
            if (ex_parse_int("rounds", optarg, 1, MAX_ROUNDS, &rounds))
                return 2;
            break;
        case 'm': {
            char *end;
            ms = strtod(optarg, &end);
            if (end == optarg || *end || !(ms > 0 && ms <= 10000)) {
                fprintf(stderr, PROG ": --ms: '%s' is not a number in (0, 10000]\n", optarg);
                return 2;
            }
            break;
        }
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        usage(stderr);
        return 2;
    }
    lattice_backend *be[SLOTS] = {NULL, NULL, NULL};
    for (int s = 0; s < SLOTS; s++) {
        if (lattice_backend_create("onednn", &be[s]) != LATTICE_OK ||
            (s > 0 && lattice_backend_set_gemm_precision(be[s], "bf16") != LATTICE_OK)) {
            fprintf(stderr, PROG ": %s: %s\n", slot_name[s], lattice_last_error());
            return 1;
        }
    }
    lattice__onednn_use_bf16(be[1], LATTICE__ONEDNN_BF16_GEMM_API);
    shape g[32];
    const int n_shapes = step_shapes(&sh, g);
    long na = 0, nb = 0, nc = 0;
    for (int i = 0; i < n_shapes; i++) {
        na = fmax(na, elements(g[i].ta, g[i].m, g[i].k, g[i].lda));
        nb = fmax(nb, elements(g[i].tb, g[i].k, g[i].n, g[i].ldb));
        nc = fmax(nc, (long)g[i].m * g[i].ldc);
    }
    float *a = malloc(sizeof(float) * na), *b = malloc(sizeof(float) * nb);
    float *c = malloc(sizeof(float) * nc), *ref = malloc(sizeof(float) * nc);
    uint16_t *rounded = malloc(sizeof(uint16_t) * (size_t)(na + nb));
    if (!a || !b || !c || !ref || !rounded) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    uint64_t rng = 52;
    for (long i = 0; i < na; i++)
        a[i] = (float)((double)(ex_rng_next(&rng) >> 11) * 0x1p-52 - 1.0);
    for (long i = 0; i < nb; i++)
        b[i] = (float)((double)(ex_rng_next(&rng) >> 11) * 0x1p-52 - 1.0);
    lattice_backend_info info;
    memset(&info, 0, sizeof info);
    info.size = sizeof info;
    lattice_backend_get_info(be[0], &info);
    printf("# %s (%s); 1 thread, %d rounds, about %g ms per slot per shape per round; times are "
           "medians per call, wall (cpu: the ratios in thread CPU time)\n",
           info.library, info.kernels, rounds, ms);
    double step_w[SLOTS] = {0}, step_c[SLOTS] = {0}, mlp_w[SLOTS] = {0}, step_round = 0;
    int rc = 0;
    for (int i = 0; i < n_shapes && !rc; i++) {
        double w[SLOTS], t[SLOTS], rd = 0;
        rc = bench_shape(be, &g[i], rounds, ms, a, b, c, ref, rounded, w, t, &rd);
        step_round += rd * g[i].per_step;
        for (int s = 0; !rc && s < SLOTS; s++) {
            step_w[s] += w[s] * g[i].per_step;
            step_c[s] += t[s] * g[i].per_step;
            if (strncmp(g[i].what, "mlp", 3) == 0)
                mlp_w[s] += w[s] * g[i].per_step;
        }
    }
    if (rc)
        fprintf(stderr, PROG ": a GEMM failed: %s\n", lattice_last_error());
    else {
        printf("step_gemms_ms fp32 %.2f api %.2f matmul %.2f  fp32/api %.2f  fp32/matmul %.2f  "
               "(cpu: %.2f %.2f)\n", step_w[0] * 1e3, step_w[1] * 1e3, step_w[2] * 1e3,
               step_w[0] / step_w[1], step_w[0] / step_w[2], step_c[0] / step_c[1],
               step_c[0] / step_c[2]);
        printf("step_round_ms %.2f  (of matmul's %.2f: rounding the operands)\n", step_round * 1e3,
               step_w[2] * 1e3);
        printf("mlp_gemms_ms fp32 %.2f api %.2f matmul %.2f  fp32/api %.2f  fp32/matmul %.2f\n",
               mlp_w[0] * 1e3, mlp_w[1] * 1e3, mlp_w[2] * 1e3, mlp_w[0] / mlp_w[1],
               mlp_w[0] / mlp_w[2]);
    }
    for (int s = 0; s < SLOTS; s++)
        lattice_backend_destroy(be[s]);
    free(a), free(b), free(c), free(ref), free(rounded);
    return rc ? 1 : 0;
}
