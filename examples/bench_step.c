/*
 * bench_step: time one full training step (forward, cross-entropy, backward,
 * AdamW) of a student of any shape (default: the benchmark student, 9 layers,
 * d_model 256, 4 heads of 64, SwiGLU d_ff 768, vocab 256, batch 16 x 256,
 * qk-norm; --preset study: the study's student), break the step down by op
 * category, then time the same step's GEMMs alone through
 * lattice_backend_sgemm, to see how close the step comes to the backend's GEMM
 * throughput on its own shapes, and the roofline: the best sgemm rate over
 * the GEMM libraries (blis, openblas, onednn) at the step's projection and
 * head GEMMs, measured in the same run (--rounds: alternating with rounds of
 * steps), and the step's rate over it; the core's FMA peak, and the floor
 * it puts under the fused attention.
 *
 * Results are "key value" lines (step_ms, tokens_per_s, op_<name>_ms, step_gflops,
 * sgemm_gflops, ratio, arena_mib, peak_rss_mib, roofline_gflops, roofline_ratio,
 * ...); lines starting with '#' are for people. The per-op figures come from the library's private
 * profiling counters, which is why this program links the static library.
 */
#define _POSIX_C_SOURCE 200809L

#include <lattice/lattice.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define PROG "bench_step"

#include "example_util.h"
#include "profile.h" /* private: lattice__model_profile */
#include "roofline.h"
#define WARMUP_STEPS 2
#define MAX_ROUNDS 20
#define TOKEN_SEED 20240611ULL

static double peak_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NAN;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

/* ---- the step's GEMMs, replayed through lattice_backend_sgemm ------------ */

enum { CAT_PROJ = 1, CAT_ATTN = 2, CAT_ALL = CAT_PROJ | CAT_ATTN };

/* Buffers standing in for the model's weights, activations and gradients. One
 * per role, shared by the layers: the shapes and strides are the step's own. */
typedef struct replay {
    lattice_backend *be;
    int B, T, D, H, KV, hd, F, V, L;
    int beta_res; /* 1: o_proj and down_proj accumulate into the residual (pre, post) */
    int cats;     /* categories to run */
    rl_list *record; /* when set, the calls are listed here instead of run */
    double secs[3], flops[3];
    float *x, *dy, *d_in, *wqkv, *wo, *wgu, *wd, *whead, *gwqkv, *gwo, *gwgu, *gwd, *gwhead;
    float *raw, *d_raw, *q, *k, *v, *dq, *dk, *dv, *p, *dp, *att, *d_att, *out, *gu, *d_gu, *s,
        *d_s, *logits, *dlogits;
} replay;

static lattice_status gemm(replay *r, int cat, int ta, int tb, int m, int n, int k, float alpha,
                           const float *a, int lda, const float *b, int ldb, float beta, float *c,
                           int ldc)
{
    if (!(r->cats & cat))
        return LATTICE_OK;
    if (r->record)
        return rl_add(r->record, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta)
                   ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_OK;
    double t0 = ex_now();
    lattice_status st =
        lattice_backend_sgemm(r->be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    r->secs[cat] += ex_now() - t0;
    r->flops[cat] += 2.0 * m * n * k;
    return st;
}

#define TRY(expr)                                                                                  \
    do {                                                                                           \
        lattice_status st_ = (expr);                                                               \
        if (st_ != LATTICE_OK)                                                                     \
            return st_;                                                                            \
    } while (0)

/* The B * H problems of one attention GEMM, one call each, with the model's
 * head-major q, k, v, its [N, H * hd] attention output and its [B, H, T, T]
 * probabilities. */
static lattice_status attention_forward(replay *r)
{
    const int T = r->T, hd = r->hd, H = r->H, G = r->H / r->KV, ldo = r->H * r->hd;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < r->B; b++)
        for (int h = 0; h < H; h++) {
            size_t i = (size_t)b * H + h, kv = (size_t)b * r->KV + h / G;
            TRY(gemm(r, CAT_ATTN, 0, 1, T, T, hd, scale, r->q + i * T * hd, hd,
                     r->k + kv * T * hd, hd, 0.0f, r->p + i * T * T, T));
        }
    for (int b = 0; b < r->B; b++)
        for (int h = 0; h < H; h++) {
            size_t i = (size_t)b * H + h, kv = (size_t)b * r->KV + h / G;
            TRY(gemm(r, CAT_ATTN, 0, 0, T, hd, T, 1.0f, r->p + i * T * T, T, r->v + kv * T * hd,
                     hd, 0.0f, r->att + (size_t)b * T * ldo + (size_t)h * hd, ldo));
        }
    return LATTICE_OK;
}

static lattice_status attention_backward(replay *r)
{
    const int T = r->T, hd = r->hd, H = r->H, KV = r->KV, G = H / KV, ldo = H * hd;
    const float scale = 1.0f / sqrtf((float)hd);
    for (int b = 0; b < r->B; b++) /* dP = dO V^T */
        for (int h = 0; h < H; h++) {
            size_t i = (size_t)b * H + h, kv = (size_t)b * KV + h / G;
            TRY(gemm(r, CAT_ATTN, 0, 1, T, T, hd, 1.0f, r->d_att + (size_t)b * T * ldo + h * hd,
                     ldo, r->v + kv * T * hd, hd, 0.0f, r->dp + i * T * T, T));
        }
    for (int g = 0; g < G; g++) /* dV = P^T dO, summed over a group */
        for (int b = 0; b < r->B; b++)
            for (int kh = 0; kh < KV; kh++) {
                size_t i = (size_t)b * KV + kh, h = (size_t)kh * G + g;
                TRY(gemm(r, CAT_ATTN, 1, 0, T, hd, T, 1.0f, r->p + ((size_t)b * H + h) * T * T, T,
                         r->d_att + (size_t)b * T * ldo + h * hd, ldo, g ? 1.0f : 0.0f,
                         r->dv + i * T * hd, hd));
            }
    for (int b = 0; b < r->B; b++) /* dQ = scale dS K */
        for (int h = 0; h < H; h++) {
            size_t i = (size_t)b * H + h, kv = (size_t)b * KV + h / G;
            TRY(gemm(r, CAT_ATTN, 0, 0, T, hd, T, scale, r->dp + i * T * T, T, r->k + kv * T * hd,
                     hd, 0.0f, r->dq + i * T * hd, hd));
        }
    for (int g = 0; g < G; g++) /* dK = scale dS^T Q, summed over a group */
        for (int b = 0; b < r->B; b++)
            for (int kh = 0; kh < KV; kh++) {
                size_t i = (size_t)b * KV + kh, h = (size_t)kh * G + g;
                TRY(gemm(r, CAT_ATTN, 1, 0, T, hd, T, scale, r->dp + ((size_t)b * H + h) * T * T,
                         T, r->q + ((size_t)b * H + h) * T * hd, hd, g ? 1.0f : 0.0f,
                         r->dk + i * T * hd, hd));
            }
    return LATTICE_OK;
}

/* Every GEMM of one step with all groups trainable, in the model's order. */
static lattice_status replay_step(replay *r)
{
    const int N = r->B * r->T, D = r->D, F = r->F, V = r->V, Hd = r->H * r->hd;
    const int W = (r->H + 2 * r->KV) * r->hd;
    const float br = r->beta_res ? 1.0f : 0.0f;
    for (int l = 0; l < r->L; l++) {
        TRY(gemm(r, CAT_PROJ, 0, 1, N, W, D, 1.0f, r->x, D, r->wqkv, D, 0.0f, r->raw, W));
        TRY(attention_forward(r));
        TRY(gemm(r, CAT_PROJ, 0, 1, N, D, Hd, 1.0f, r->att, Hd, r->wo, Hd, br, r->out, D));
        TRY(gemm(r, CAT_PROJ, 0, 1, N, 2 * F, D, 1.0f, r->x, D, r->wgu, D, 0.0f, r->gu, 2 * F));
        TRY(gemm(r, CAT_PROJ, 0, 1, N, D, F, 1.0f, r->s, F, r->wd, F, br, r->out, D));
    }
    TRY(gemm(r, CAT_PROJ, 0, 1, N, V, D, 1.0f, r->x, D, r->whead, D, 0.0f, r->logits, V));

    TRY(gemm(r, CAT_PROJ, 1, 0, V, D, N, 1.0f, r->dlogits, V, r->x, D, 1.0f, r->gwhead, D));
    TRY(gemm(r, CAT_PROJ, 0, 0, N, D, V, 1.0f, r->dlogits, V, r->whead, D, 0.0f, r->dy, D));
    for (int l = r->L - 1; l >= 0; l--) {
        TRY(gemm(r, CAT_PROJ, 1, 0, D, F, N, 1.0f, r->dy, D, r->s, F, 1.0f, r->gwd, F));
        TRY(gemm(r, CAT_PROJ, 0, 0, N, F, D, 1.0f, r->dy, D, r->wd, F, 0.0f, r->d_s, F));
        TRY(gemm(r, CAT_PROJ, 1, 0, 2 * F, D, N, 1.0f, r->d_gu, 2 * F, r->x, D, 1.0f, r->gwgu, D));
        TRY(gemm(r, CAT_PROJ, 0, 0, N, D, 2 * F, 1.0f, r->d_gu, 2 * F, r->wgu, D, 0.0f, r->d_in,
                 D));
        TRY(gemm(r, CAT_PROJ, 1, 0, D, Hd, N, 1.0f, r->dy, D, r->att, Hd, 1.0f, r->gwo, Hd));
        TRY(gemm(r, CAT_PROJ, 0, 0, N, Hd, D, 1.0f, r->dy, D, r->wo, Hd, 0.0f, r->d_att, Hd));
        TRY(attention_backward(r));
        TRY(gemm(r, CAT_PROJ, 1, 0, W, D, N, 1.0f, r->d_raw, W, r->x, D, 1.0f, r->gwqkv, D));
        TRY(gemm(r, CAT_PROJ, 0, 0, N, D, W, 1.0f, r->d_raw, W, r->wqkv, D, 0.0f, r->d_in, D));
    }
    return LATTICE_OK;
}

static float *random_buffer(size_t n, uint64_t *rng)
{
    float *buf = malloc(n * sizeof(float));
    if (buf) /* small values keep the accumulating gradient GEMMs finite */
        for (size_t i = 0; i < n; i++)
            buf[i] = (float)((double)(ex_rng_next(rng) >> 11) * 0x1.0p-53 - 0.5) * 0.02f;
    return buf;
}

static int replay_alloc(replay *r)
{
    const size_t N = (size_t)r->B * r->T, D = r->D, F = r->F, V = r->V, Hd = (size_t)r->H * r->hd;
    const size_t W = (size_t)(r->H + 2 * r->KV) * r->hd, KVd = (size_t)r->KV * r->hd;
    const size_t P = (size_t)r->B * r->H * r->T * r->T;
    struct { float **buf; size_t n; } want[] = {
        {&r->x, N * D}, {&r->dy, N * D}, {&r->d_in, N * D}, {&r->out, N * D},
        {&r->wqkv, W * D}, {&r->wo, D * Hd}, {&r->wgu, 2 * F * D}, {&r->wd, D * F},
        {&r->whead, V * D}, {&r->gwqkv, W * D}, {&r->gwo, D * Hd}, {&r->gwgu, 2 * F * D},
        {&r->gwd, D * F}, {&r->gwhead, V * D}, {&r->raw, N * W}, {&r->d_raw, N * W},
        {&r->q, N * Hd}, {&r->k, N * KVd}, {&r->v, N * KVd}, {&r->dq, N * Hd},
        {&r->dk, N * KVd}, {&r->dv, N * KVd}, {&r->p, P}, {&r->dp, P}, {&r->att, N * Hd},
        {&r->d_att, N * Hd}, {&r->gu, N * 2 * F}, {&r->d_gu, N * 2 * F}, {&r->s, N * F},
        {&r->d_s, N * F}, {&r->logits, N * V}, {&r->dlogits, N * V},
    };
    uint64_t rng = 7;
    int ok = 1;
    for (size_t i = 0; i < sizeof want / sizeof want[0]; i++)
        ok &= (*want[i].buf = random_buffer(want[i].n, &rng)) != NULL;
    return ok ? 0 : -1;
}

static void replay_free(replay *r)
{
    float **bufs[] = {&r->x, &r->dy, &r->d_in, &r->wqkv, &r->wo, &r->wgu, &r->wd, &r->whead,
                      &r->gwqkv, &r->gwo, &r->gwgu, &r->gwd, &r->gwhead, &r->raw, &r->d_raw,
                      &r->q, &r->k, &r->v, &r->dq, &r->dk, &r->dv, &r->p, &r->dp, &r->att,
                      &r->d_att, &r->out, &r->gu, &r->d_gu, &r->s, &r->d_s, &r->logits,
                      &r->dlogits};
    for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) {
        free(*bufs[i]);
        *bufs[i] = NULL;
    }
}

/* Run rounds of the step's GEMMs (of the categories in cats) after one
 * untimed round; r->secs and r->flops then hold the timed rounds' sums. */
static lattice_status replay_time(replay *r, int cats, int rounds)
{
    r->cats = cats;
    TRY(replay_step(r));
    memset(r->secs, 0, sizeof r->secs);
    memset(r->flops, 0, sizeof r->flops);
    for (int i = 0; i < rounds; i++)
        TRY(replay_step(r));
    return LATTICE_OK;
}

/* The roofline: the best sgemm rate over the GEMM libraries at the step's
 * own projection and head GEMMs (what a step with fused attention sends to a
 * GEMM library), split over the threads as the step split them, measured now
 * into *res; *about gets a line for people. parts: the step's rows-split
 * thread count (each thread its block of sequences, one-thread GEMMs, all at
 * once), or 1 for the ops split (each GEMM shared by `threads`). */
static lattice_status roofline_measure(replay *r, int threads, int parts, int cpu_clock,
                                       rl_result *res, char *about, size_t about_size)
{
    parts = parts < 1 ? 1 : parts;
    rl_list *list = calloc((size_t)parts, sizeof(rl_list));
    if (!list)
        return LATTICE_ERR_OUT_OF_MEMORY;
    const int B = r->B;
    lattice_status st = LATTICE_OK;
    r->cats = CAT_PROJ;
    for (int t = 0; t < parts && st == LATTICE_OK; t++) {
        /* the model's blocks: sequences [B t / parts, B (t + 1) / parts) */
        r->B = (int)((long)B * (t + 1) / parts) - (int)((long)B * t / parts);
        r->record = &list[t];
        st = replay_step(r);
    }
    r->B = B;
    r->record = NULL;
    double flop = 0.0;
    long calls = 0;
    for (int t = 0; t < parts; t++) {
        flop += rl_flop(&list[t]);
        for (size_t i = 0; i < list[t].n; i++)
            calls += list[t].g[i].count;
    }
    if (st == LATTICE_OK) {
        /* about 60 GFLOP per library, at least 3 rounds */
        int rounds = flop > 0 ? (int)ceil(60e9 / flop) : 3;
        rounds = rounds < 3 ? 3 : rounds > 50 ? 50 : rounds;
        st = parts > 1 ? rl_measure_rows(list, parts, 1, rounds, cpu_clock, 1, res)
                       : rl_measure(&list[0], threads, rounds, cpu_clock, 1, res);
        char split[96];
        if (parts > 1)
            snprintf(split, sizeof split, "split as the step's rows: %d threads at once, each on "
                     "its block with one-thread calls", parts);
        else
            snprintf(split, sizeof split, "%d thread(s) sharing each call", threads);
        int len = snprintf(about, about_size,
                           "# roofline: the step's %ld projection and head GEMMs (%.2f GFLOP), "
                           "%d rounds, the libraries interleaved, %s, %s time:",
                           calls, flop / 1e9, rounds, split,
                           cpu_clock && parts < 2 ? "CPU" : "wall");
        for (int j = 0; j < res->n_libs && len >= 0 && (size_t)len < about_size; j++)
            len += snprintf(about + len, about_size - (size_t)len, "%s %s (%s)", j ? ";" : "",
                            res->lib[j].name, res->lib[j].kernels);
    }
    for (int t = 0; t < parts; t++)
        rl_free(&list[t]);
    free(list);
    if (st != LATTICE_OK)
        return st;
    return res->best < 0 ? LATTICE_ERR_UNSUPPORTED : LATTICE_OK;
}

/* The median of x[0..n-1], x left as it is. */
static double median(const double *x, int n)
{
    double s[MAX_ROUNDS];
    memcpy(s, x, sizeof(double) * (size_t)n);
    return ex_median(s, n);
}

/* The roofline lines from n measurements (one per round of timed steps,
 * step_gflops[i] the round's rate): each library's median rate, the best
 * library's, and the step's rate over it. With several rounds each round's
 * ratio is its own steps' rate over the roofline measured right after them,
 * and roofline_ratio is their median. */
static void roofline_lines(const rl_result *res, int n, const double *step_gflops,
                           const char *about)
{
    printf("%s\n", about);
    double lib_rate[RL_MAX_LIBS] = {0}, best[MAX_ROUNDS] = {0}, ratio[MAX_ROUNDS] = {0};
    double v[MAX_ROUNDS] = {0};
    int wins[RL_MAX_LIBS] = {0};
    for (int j = 0; j < res[0].n_libs; j++) {
        if (!res[0].lib[j].available)
            continue;
        for (int i = 0; i < n; i++)
            v[i] = res[i].lib[j].gflops_median;
        lib_rate[j] = median(v, n);
        printf("roofline_%s_gflops %.1f\n", res[0].lib[j].name, lib_rate[j]);
    }
    for (int i = 0; i < n; i++) {
        best[i] = res[i].lib[res[i].best].gflops_median;
        ratio[i] = step_gflops[i] / best[i];
        wins[res[i].best]++;
    }
    int lib = 0;
    for (int j = 1; j < res[0].n_libs; j++)
        lib = wins[j] > wins[lib] ? j : lib;
    printf("roofline_gflops %.1f\n", median(best, n));
    printf("roofline_library %s\n", res[0].lib[lib].name);
    printf("roofline_ratio %.3f\n", median(ratio, n));
    if (n < 2)
        return;
    double lo = ratio[0], hi = ratio[0];
    for (int i = 0; i < n; i++) {
        printf("round_%d_step_gflops %.1f\n", i + 1, step_gflops[i]);
        printf("round_%d_roofline_gflops %.1f\n", i + 1, best[i]);
        printf("round_%d_roofline_ratio %.3f\n", i + 1, ratio[i]);
        lo = ratio[i] < lo ? ratio[i] : lo;
        hi = ratio[i] > hi ? ratio[i] : hi;
    }
    printf("roofline_ratio_min %.3f\n", lo);
    printf("roofline_ratio_max %.3f\n", hi);
}

/* The core's FMA peak on one thread, and what it says of the fused attention:
 * its kernels' multiply-adds (7 per causal score and head element: forward
 * q.k and p v, backward the score again, dP, dV, dK and dQ), at that peak on
 * every thread, against the step's other ops as timed. */
static void fma_lines(const ex_shape *sh, int threads, int cpu_clock, double step_ms,
                      double attn_ms)
{
    const char *isa;
    const double peak = rl_fma_peak(5, cpu_clock, &isa);
    printf("fma_isa %s\n", isa);
    printf("fma_peak_gflops %.1f\n", peak);
    if (threads > 1) { /* how far the cores' FMA units scale: SMT siblings share theirs */
        const double all = rl_fma_peak_threads(threads, 5, &isa);
        printf("fma_peak_all_threads_gflops %.1f\n", all);
        printf("fma_peak_scaling %.2f\n", all / peak);
    }
    if (!(attn_ms > 0))
        return; /* no fused attention ran (or no per-op counters) */
    const double T = sh->seq, causal = T * (T + 1) / 2;
    const double flop = 14.0 * causal * sh->head_dim * sh->heads * sh->batch * sh->layers;
    const double floor_ms = 1e3 * flop / (peak * 1e9 * threads);
    printf("attn_causal_gflop %.4f\n", flop / 1e9);
    printf("attn_causal_gflops %.1f\n", flop / attn_ms / 1e6);
    printf("attn_floor_ms %.3f\n", floor_ms);
    printf("attn_floor_share %.3f\n", floor_ms / (floor_ms + step_ms - attn_ms));
}

static int replay_setup(replay *r, lattice_backend *be, const ex_shape *sh,
                        lattice_norm_placement placement)
{
    r->be = be;
    r->B = sh->batch, r->T = sh->seq, r->D = sh->d_model, r->H = sh->heads;
    r->KV = sh->kv_heads, r->hd = sh->head_dim, r->F = sh->d_ff, r->V = sh->vocab;
    r->L = sh->layers;
    r->beta_res = placement != LATTICE_NORM_PLACEMENT_PERI;
    return replay_alloc(r);
}

/* ---- main --------------------------------------------------------------- */

static double step_clock(int cpu)
{
    return cpu ? lattice__prof_clock(LATTICE_PROF_CPU) : ex_now();
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "Time a training step (forward, cross-entropy, backward, AdamW) of a student, the\n"
            "share of each op category in it, and the backend's sgemm on the step's GEMMs.\n"
            "\n"
            "  --preset NAME     d256 (the benchmark student, the default) or study (9 layers,\n"
            "                    d_model 64, 4 heads (2 kv) of 16, d_ff 192, vocab 257, 16 x 128);\n"
            "                    the shape options below override the preset, in any order\n"
            "  --layers N        layers (9)\n"
            "  --d-model N       model width (256)\n"
            "  --heads N         query heads (4)\n"
            "  --kv-heads N      key/value heads (4)\n"
            "  --head-dim N      head width (64)\n"
            "  --d-ff N          SwiGLU hidden width (768)\n"
            "  --vocab N         vocabulary (256)\n"
            "  --batch N         sequences per step (16)\n"
            "  --seq N           tokens per sequence (256)\n"
            "  --qk-norm 0|1     RMSNorm on queries and keys (1)\n"
            "  --placement P     pre, post or peri (pre)\n"
            "  --backend NAME    ref, blis, openblas, onednn or default (default)\n"
            "  --gemm-precision P  fp32 or bf16 (onednn on a CPU with AVX512-BF16 or AMX;\n"
            "                    default: LATTICE_GEMM_PRECISION, else fp32); the sgemm\n"
            "                    replay runs in it too, the roofline in fp32\n"
            "  --loss L          distill: 0.7 KL + 0.3 CE against fixed teacher logits, as the\n"
            "                    study trains (default); ce: cross-entropy only\n"
            "  --threads N       threads (2)\n"
            "  --steps N         timed steps, after %d warmup steps (10)\n"
            "  --rounds N        N rounds of --steps timed steps (1; at most %d), each\n"
            "                    followed by a roofline measurement, so that the step and the\n"
            "                    core's sgemm alternate A B A B: roofline_ratio is the median\n"
            "                    of the rounds' ratios, each round's is printed\n"
            "  --no-sgemm        skip the sgemm replay and the roofline (faster; no sgemm_*,\n"
            "                    ratio or roofline_* lines)\n"
            "  --no-profile      time the steps without the per-op counters\n"
            "  --cpu-clock       time steps and ops in process CPU time instead of wall time\n"
            "                    (with --threads 1 on a busy machine: leaves out the waits\n"
            "                    for a core; with more threads it sums them)\n"
            "  -h, --help        this help\n"
            "\n"
            "OpenMP: unless OMP_WAIT_POLICY or GOMP_SPINCOUNT is set, the program runs itself\n"
            "again with OMP_WAIT_POLICY=PASSIVE (idle threads sleep instead of spinning).\n"
            "\n"
            "Output: one 'key value' line per figure (e.g. 'tokens_per_s 15000', 'step_ms 136.5',\n"
            "'op_gemm_mlp_ms 30.1', 'op_gemm_mlp_share 0.221', 'backend blis'); lines starting\n"
            "with '#' are comments for people. Per-op times are means per timed step.\n",
            WARMUP_STEPS, MAX_ROUNDS);
}

static int fail(const char *what, lattice_status st, const char *detail)
{
    fprintf(stderr, PROG ": %s: %s%s%s\n", what, lattice_status_string(st),
            detail && *detail ? ": " : "", detail ? detail : "");
    return 1;
}

enum { OPT_PRESET = 256, OPT_LAYERS, OPT_DMODEL, OPT_HEADS, OPT_KV, OPT_HD, OPT_DFF, OPT_VOCAB,
       OPT_BATCH, OPT_SEQ, OPT_QKNORM, OPT_NO_SGEMM, OPT_NO_PROFILE, OPT_CPU_CLOCK, OPT_LOSS,
       OPT_ROUNDS, OPT_PRECISION };

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    lattice_norm_placement placement = LATTICE_NORM_PLACEMENT_PRE;
    const char *backend_name = "default";
    const char *precision = getenv("LATTICE_GEMM_PRECISION");
    int threads = 2, steps = 10, rounds = 1, do_sgemm = 1, do_profile = 1, cpu_clock = 0, distill = 1;
    ex_shape sh = EX_PRESET_D256;
    /* Shape options given explicitly, applied over whichever preset comes. */
    int given[OPT_QKNORM - OPT_LAYERS + 1], *field[OPT_QKNORM - OPT_LAYERS + 1];
    memset(given, -1, sizeof given);

    static const struct option longopts[] = {
        {"placement", required_argument, NULL, 'p'},
        {"backend", required_argument, NULL, 'b'},
        {"threads", required_argument, NULL, 't'},
        {"steps", required_argument, NULL, 's'},
        {"rounds", required_argument, NULL, OPT_ROUNDS},
        {"preset", required_argument, NULL, OPT_PRESET},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"d-model", required_argument, NULL, OPT_DMODEL},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"kv-heads", required_argument, NULL, OPT_KV},
        {"head-dim", required_argument, NULL, OPT_HD},
        {"d-ff", required_argument, NULL, OPT_DFF},
        {"vocab", required_argument, NULL, OPT_VOCAB},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"seq", required_argument, NULL, OPT_SEQ},
        {"qk-norm", required_argument, NULL, OPT_QKNORM},
        {"no-sgemm", no_argument, NULL, OPT_NO_SGEMM},
        {"no-profile", no_argument, NULL, OPT_NO_PROFILE},
        {"cpu-clock", no_argument, NULL, OPT_CPU_CLOCK},
        {"loss", required_argument, NULL, OPT_LOSS},
        {"gemm-precision", required_argument, NULL, OPT_PRECISION},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c, idx;
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1) {
        switch (c) {
        case 'p':
            if (lattice_norm_placement_from_name(optarg, &placement) != LATTICE_OK) {
                fprintf(stderr, PROG ": --placement: '%s' is not pre, post or peri\n", optarg);
                return 2;
            }
            break;
        case 'b': backend_name = optarg; break;
        case OPT_PRECISION: precision = optarg; break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 4096, &threads))
                return 2;
            break;
        case 's':
            if (ex_parse_int("steps", optarg, 1, 1000000, &steps))
                return 2;
            break;
        case OPT_ROUNDS:
            if (ex_parse_int("rounds", optarg, 1, MAX_ROUNDS, &rounds))
                return 2;
            break;
        case OPT_PRESET:
            if (ex_parse_preset(optarg, &sh) < 0)
                return 2;
            break;
        case OPT_LAYERS: case OPT_DMODEL: case OPT_HEADS: case OPT_KV: case OPT_HD: case OPT_DFF:
        case OPT_VOCAB: case OPT_BATCH: case OPT_SEQ: case OPT_QKNORM: {
            long hi = c == OPT_QKNORM ? 1 : 1L << 20;
            if (ex_parse_int(longopts[idx].name, optarg, c == OPT_QKNORM ? 0 : 1, hi,
                             &given[c - OPT_LAYERS]))
                return 2;
            break;
        }
        case OPT_NO_SGEMM: do_sgemm = 0; break;
        case OPT_NO_PROFILE: do_profile = 0; break;
        case OPT_CPU_CLOCK: cpu_clock = 1; break;
        case OPT_LOSS:
            if (strcmp(optarg, "distill") == 0)
                distill = 1;
            else if (strcmp(optarg, "ce") == 0)
                distill = 0;
            else {
                fprintf(stderr, PROG ": --loss: '%s' is not distill or ce\n", optarg);
                return 2;
            }
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    field[OPT_LAYERS - OPT_LAYERS] = &sh.layers;
    field[OPT_DMODEL - OPT_LAYERS] = &sh.d_model;
    field[OPT_HEADS - OPT_LAYERS] = &sh.heads;
    field[OPT_KV - OPT_LAYERS] = &sh.kv_heads;
    field[OPT_HD - OPT_LAYERS] = &sh.head_dim;
    field[OPT_DFF - OPT_LAYERS] = &sh.d_ff;
    field[OPT_VOCAB - OPT_LAYERS] = &sh.vocab;
    field[OPT_BATCH - OPT_LAYERS] = &sh.batch;
    field[OPT_SEQ - OPT_LAYERS] = &sh.seq;
    field[OPT_QKNORM - OPT_LAYERS] = &sh.qk_norm;
    for (size_t i = 0; i < sizeof given / sizeof given[0]; i++)
        if (given[i] >= 0)
            *field[i] = given[i];
    const int BATCH = sh.batch, SEQ = sh.seq, VOCAB = sh.vocab;

    int rc = 1;
    lattice_backend *backend = NULL;
    lattice_norm *norm = NULL;
    lattice_model *model = NULL;
    lattice_optim *optim = NULL;
    int32_t *tokens = NULL, *targets = NULL;
    float *teacher_logits = NULL;
    lattice_distill *dloss = NULL;
    replay r = {0};
    lattice_status st;

    st = ex_backend_create(backend_name, &backend);
    if (st != LATTICE_OK) {
        fprintf(stderr, PROG ": backend '%s': %s%s\n", backend_name, lattice_status_string(st),
                st == LATTICE_ERR_UNSUPPORTED ? " (not available in this build or system)" :
                st == LATTICE_ERR_NOT_FOUND ? " (use ref, blis, openblas, onednn or default)" : "");
        goto out;
    }
    if ((st = lattice_backend_set_threads(backend, threads)) != LATTICE_OK) {
        rc = fail("set threads", st, NULL);
        goto out;
    }
    if (precision && *precision &&
        (st = lattice_backend_set_gemm_precision(backend, precision)) != LATTICE_OK) {
        rc = fail("GEMM precision", st, lattice_last_error());
        goto out;
    }
    if ((st = lattice_norm_create(placement, LATTICE_NORM_KIND_RMS, 1e-6f, &norm)) != LATTICE_OK) {
        rc = fail("norm", st, NULL);
        goto out;
    }
    lattice_model_params mp;
    ex_shape_model_params(&sh, &mp);
    mp.seed = 1;
    char err[LATTICE_ERRMSG_SIZE];
    if ((st = lattice_model_params_check(&mp, err)) != LATTICE_OK) {
        rc = fail("model shape", st, err);
        goto out;
    }
    if ((st = lattice_model_create(&mp, norm, backend, &model)) != LATTICE_OK) {
        rc = fail("model", st, NULL);
        goto out;
    }
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    if ((st = lattice_optim_create(model, &op, &optim)) != LATTICE_OK) {
        rc = fail("optimizer", st, NULL);
        goto out;
    }

    const size_t n_tok = (size_t)BATCH * SEQ;
    tokens = malloc(n_tok * sizeof(*tokens));
    targets = malloc(n_tok * sizeof(*targets));
    /* fixed teacher logits: sums of uniforms (about N(0, 2^2)), as a trained teacher's spread */
    teacher_logits = distill ? malloc(n_tok * (size_t)VOCAB * sizeof(float)) : NULL;
    if (!tokens || !targets || (distill && !teacher_logits)) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    uint64_t rng = TOKEN_SEED;
    for (int b = 0; b < BATCH; b++) { /* random sequences of SEQ + 1, shifted by one */
        int32_t prev = (int32_t)(ex_rng_next(&rng) % VOCAB);
        for (int t = 0; t < SEQ; t++) {
            int32_t next = (int32_t)(ex_rng_next(&rng) % VOCAB);
            tokens[(size_t)b * SEQ + t] = prev;
            targets[(size_t)b * SEQ + t] = next;
            prev = next;
        }
    }

    if (distill) {
        uint64_t trng = TOKEN_SEED + 1;
        for (size_t i = 0; i < n_tok * (size_t)VOCAB; i++) {
            double u = 0;
            for (int k = 0; k < 4; k++)
                u += (double)(ex_rng_next(&trng) >> 11) * 0x1.0p-53 - 0.5;
            teacher_logits[i] = (float)(u * 2.0 * sqrt(3.0));
        }
        lattice_distill_params dpar;
        lattice_distill_params_init(&dpar);
        if ((st = lattice_distill_create(&dpar, &dloss)) != LATTICE_OK) {
            rc = fail("distillation loss", st, NULL);
            goto out;
        }
    }
    lattice_backend_info bi;
    bi.size = sizeof bi;
    if ((st = lattice_backend_get_info(backend, &bi)) != LATTICE_OK) {
        rc = fail("backend info", st, NULL);
        goto out;
    }
    printf("# lattice %s, backend %s%s, GEMMs in %s, %d threads, %s-norm, %s loss\n",
           lattice_version_string(), lattice_backend_get_name(backend),
           ex_backend_origin(backend_name), lattice_backend_get_gemm_precision(backend), threads,
           lattice_norm_placement_name(placement),
           distill ? "distillation (0.7 KL + 0.3 CE, fixed teacher logits)" : "cross-entropy");
    printf("# kernels: %s, %s%s%s%s\n", bi.library, bi.kernels,
           bi.optimised ? "" : " (NOT optimised for this CPU)", bi.reason[0] ? "; " : "", bi.reason);
    printf("# model: %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, vocab %d, "
           "qk-norm %s, %.2fM parameters; batch %d x %d tokens\n",
           sh.layers, sh.d_model, sh.heads, sh.kv_heads, sh.head_dim, sh.d_ff, VOCAB,
           sh.qk_norm ? "on" : "off", (double)lattice_model_get_n_params(model) / 1e6, BATCH, SEQ);
    printf("# %d warmup steps, %d timed steps\n", WARMUP_STEPS, steps);
    printf("backend %s\n", lattice_backend_get_name(backend));
    printf("kernels %s\n", bi.kernels);
    printf("gemm_precision %s\n", lattice_backend_get_gemm_precision(backend));
    printf("threads %d\n", threads);
    printf("omp_wait_policy %s\n", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "(unset)");
    fflush(stdout);

    double t_fwd = 0, t_bwd = 0, t_opt = 0, loss_first = NAN, loss_last = NAN;
    double op_secs[LATTICE_OP_COUNT] = {0}, rss_mib = NAN;
    int rows_threads = 1;
    double rows_wait = 0.0, rows_fork = 0.0; /* rows-split passes: thread 0's waits, the team's cost */
    /* Rounds of timed steps, each after the first followed by a roofline
     * measurement (and one untimed step, to warm the caches again): the
     * step's rate and the core's sgemm rate side by side, A B A B. */
    double round_s[MAX_ROUNDS];
    rl_result round_res[MAX_ROUNDS];
    char about[600] = "";
    int n_step = 0;
    for (int round = 0; round < rounds; round++) {
        const int untimed = round == 0 ? WARMUP_STEPS : 1;
        const double before = t_fwd + t_bwd + t_opt;
        for (int i = 0; i < untimed + steps; i++, n_step++) {
            float loss = NAN;
            const char *what = NULL;
            if (i == untimed)
                lattice__model_profile(model, do_profile ? (cpu_clock ? LATTICE_PROF_CPU
                                                                      : LATTICE_PROF_WALL) : 0);
            double t0 = step_clock(cpu_clock);
            if ((st = lattice_model_forward(model, tokens, BATCH, SEQ)) != LATTICE_OK)
                what = "forward";
            else if (!distill && (st = lattice_model_cross_entropy(model, targets, NULL, &loss,
                                                                   NULL)) != LATTICE_OK)
                what = "cross-entropy";
            else if (distill) {
                lattice_distill_result res;
                /* through the model: the loss runs on the backend's threads */
                if ((st = lattice_distill_model(dloss, model, teacher_logits, VOCAB, targets, NULL,
                                                &res)) != LATTICE_OK) {
                    rc = fail("distillation loss", st, lattice_distill_errmsg(dloss));
                    goto out;
                }
                loss = (float)res.loss;
            }
            double t1 = step_clock(cpu_clock);
            if (!what && (st = lattice_model_backward(model)) != LATTICE_OK)
                what = "backward";
            if (what) {
                rc = fail(what, st, lattice_model_errmsg(model));
                goto out;
            }
            double t2 = step_clock(cpu_clock);
            if ((st = lattice_optim_step(optim, NULL)) != LATTICE_OK) {
                rc = fail("optimizer step", st, lattice_optim_errmsg(optim));
                goto out;
            }
            double t3 = step_clock(cpu_clock);
            if (n_step == 0)
                loss_first = loss;
            loss_last = loss;
            if (i >= untimed) {
                t_fwd += t1 - t0;
                t_bwd += t2 - t1;
                t_opt += t3 - t2;
            }
        }
        const lattice_prof *prof = lattice__model_profile_get(model);
        for (int op = 0; op < LATTICE_OP_COUNT; op++)
            op_secs[op] += prof->secs[op];
        rows_wait += prof->rows_wait_secs;
        rows_fork += prof->rows_fork_secs;
        rows_threads = prof->rows_threads;
        lattice__model_profile(model, 0);
        round_s[round] = (t_fwd + t_bwd + t_opt - before) / steps;
        if (round == 0)
            rss_mib = peak_rss_mib(); /* before the sgemm buffers below */
        if (rounds == 1 || !do_sgemm)
            continue;
        if (round == 0 && replay_setup(&r, backend, &sh, placement)) {
            fprintf(stderr, PROG ": out of memory for the sgemm buffers\n");
            goto out;
        }
        if ((st = roofline_measure(&r, threads, rows_threads, cpu_clock, &round_res[round], about,
                                   sizeof about)) != LATTICE_OK) {
            rc = fail("roofline", st, st == LATTICE_ERR_UNSUPPORTED ? "no GEMM library ran" : NULL);
            goto out;
        }
    }
    steps *= rounds; /* the means below are over every timed step */
    const double step_s = (t_fwd + t_bwd + t_opt) / steps;
    const double step_flops = lattice_model_get_flops(model, BATCH, SEQ, 1);
    const double step_gflops = step_flops / step_s / 1e9;
    const double arena_mib = (double)lattice_model_get_arena_bytes(model) / (1024.0 * 1024.0);

    printf("loss_first %.4f\n", loss_first);
    printf("loss_last %.4f\n", loss_last);
    printf("step_ms %.1f\n", 1e3 * step_s);
    printf("forward_ms %.1f\n", 1e3 * t_fwd / steps);
    printf("backward_ms %.1f\n", 1e3 * t_bwd / steps);
    printf("optim_ms %.1f\n", 1e3 * t_opt / steps);
    printf("tokens_per_s %.0f\n", (double)n_tok / step_s);
    printf("step_gflop %.2f\n", step_flops / 1e9);
    printf("step_gflops %.1f\n", step_gflops);
    /* how the passes used the threads (doc/PERFORMANCE.md, "Threads") */
    printf("parallel %s\n", rows_threads > 1 ? "rows" : "ops");
    printf("parallel_rows_threads %d\n", rows_threads);
    if (do_profile) {
        double sum = 0.0;
        for (int op = 0; op < LATTICE_OP_COUNT; op++)
            sum += op_secs[op];
        for (int op = 0; op < LATTICE_OP_COUNT; op++) {
            const char *name = lattice__op_name((lattice_op)op);
            printf("op_%s_ms %.2f\n", name, 1e3 * op_secs[op] / steps);
            printf("op_%s_share %.3f\n", name, op_secs[op] / (step_s * steps));
        }
        /* what no category covers: the calls' own checks, copies, dispatch */
        printf("op_other_ms %.2f\n", 1e3 * (step_s * steps - sum) / steps);
        if (rows_threads > 1 && !cpu_clock) { /* two parts of other */
            printf("rows_wait_ms %.2f\n", 1e3 * rows_wait / steps);
            printf("rows_fork_ms %.2f\n", 1e3 * rows_fork / steps);
        }
    }
    fma_lines(&sh, threads, cpu_clock, 1e3 * step_s,
              do_profile ? 1e3 * op_secs[LATTICE_OP_ATTN_FUSED] / steps : 0.0);
    fflush(stdout);
    if (!do_sgemm) {
        rc = 0;
        goto out;
    }

    /* The same GEMMs alone, on the same backend and threads. */
    if (rounds == 1 && replay_setup(&r, backend, &sh, placement)) {
        fprintf(stderr, PROG ": out of memory for the sgemm buffers\n");
        goto out;
    }
    if ((st = replay_time(&r, CAT_ALL, steps)) != LATTICE_OK) {
        rc = fail("sgemm", st, NULL);
        goto out;
    }
    const double proj_s = r.secs[CAT_PROJ], attn_s = r.secs[CAT_ATTN];
    const double proj_f = r.flops[CAT_PROJ], attn_f = r.flops[CAT_ATTN];
    const double sgemm_gflops = (proj_f + attn_f) / (proj_s + attn_s) / 1e9;
    if (fabs((proj_f + attn_f) / steps - step_flops) > 1e-6 * step_flops)
        printf("# warning: the replayed GEMMs count %.4g FLOP per step, the model %.4g\n",
               (proj_f + attn_f) / steps, step_flops);

    /* The library runs the attention problems one per thread, each on one thread. */
    double attn_1t_gflops = NAN;
    if ((st = lattice_backend_set_threads(backend, 1)) == LATTICE_OK)
        st = replay_time(&r, CAT_ATTN, steps < 3 ? steps : 3);
    if (st != LATTICE_OK) {
        rc = fail("sgemm (1 thread)", st, NULL);
        goto out;
    }
    attn_1t_gflops = r.flops[CAT_ATTN] / r.secs[CAT_ATTN] / 1e9;
    lattice_backend_set_threads(backend, threads);

    if (rows_threads > 1) /* the replay shares each call; the step did not */
        printf("# sgemm_* and ratio: the step's GEMMs replayed with each call shared by the %d "
               "threads (the ops split), while the step ran the rows split: the roofline "
               "lines below are split as the step was\n", threads);
    printf("sgemm_ms %.1f\n", 1e3 * (proj_s + attn_s) / steps);
    printf("sgemm_gflops %.1f\n", sgemm_gflops);
    printf("sgemm_proj_gflops %.1f\n", proj_f / proj_s / 1e9);
    printf("sgemm_attn_gflops %.1f\n", attn_f / attn_s / 1e9);
    printf("sgemm_attn_1thread_gflops %.1f\n", attn_1t_gflops);
    printf("ratio %.3f\n", step_gflops / sgemm_gflops);
    printf("arena_mib %.1f\n", arena_mib);
    printf("peak_rss_mib %.1f\n", rss_mib);
    printf("rss_over_arena %.3f\n", rss_mib / arena_mib);
    fflush(stdout);
    if (rounds == 1) {
        if ((st = roofline_measure(&r, threads, rows_threads, cpu_clock, &round_res[0], about,
                                   sizeof about)) != LATTICE_OK) {
            rc = fail("roofline", st,
                      st == LATTICE_ERR_UNSUPPORTED ? "no GEMM library ran" : NULL);
            goto out;
        }
        roofline_lines(round_res, 1, &step_gflops, about);
    } else {
        double round_gflops[MAX_ROUNDS];
        for (int i = 0; i < rounds; i++)
            round_gflops[i] = step_flops / round_s[i] / 1e9;
        roofline_lines(round_res, rounds, round_gflops, about);
    }
    rc = 0;

out:
    replay_free(&r);
    lattice_optim_destroy(optim);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(backend);
    free(targets);
    free(tokens);
    free(teacher_logits);
    lattice_distill_destroy(dloss);
    return rc;
}
