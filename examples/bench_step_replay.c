/*
 * bench_step's replay of the step's GEMMs, its roofline and its FMA lines
 * (bench_step_replay.h says what each does; bench_step.c is the program).
 */
#define _POSIX_C_SOURCE 200809L

#include <lattice/lattice.h>

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bench_step"

#include "bench_step_replay.h"
#include "example_util.h"
#include "roofline.h"

/* ---- the step's GEMMs, replayed through lattice_backend_sgemm ------------ */

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

void replay_free(replay *r)
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
lattice_status replay_time(replay *r, int cats, int rounds)
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
lattice_status roofline_measure(replay *r, int threads, int parts, int cpu_clock,
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
void roofline_lines(const rl_result *res, int n, const double *step_gflops,
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
void fma_lines(const ex_shape *sh, int threads, int cpu_clock, double step_ms,
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

int replay_setup(replay *r, lattice_backend *be, const ex_shape *sh,
                 lattice_norm_placement placement)
{
    r->be = be;
    r->B = sh->batch, r->T = sh->seq, r->D = sh->d_model, r->H = sh->heads;
    r->KV = sh->kv_heads, r->hd = sh->head_dim, r->F = sh->d_ff, r->V = sh->vocab;
    r->L = sh->layers;
    r->beta_res = placement != LATTICE_NORM_PLACEMENT_PERI;
    return replay_alloc(r);
}
