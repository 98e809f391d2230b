/*
 * bench_gemm: the GEMM libraries side by side at a training step's own GEMM
 * shapes. One step (forward, cross-entropy, backward) of a student runs on a
 * backend that records every GEMM the model asks for (and computes it on
 * "default"); then each distinct projection shape, and the step's projection
 * GEMMs as a whole, run on every GEMM library this build has (blis, openblas,
 * onednn), the libraries interleaved round by round, one result line each.
 * Attention's GEMMs (the model's GEMM path, which custom backends take) are
 * listed but not timed: the built-in backends run the fused kernel at head
 * widths up to 64.
 *
 * Output: "key value" lines; lines starting with '#' are for people.
 */
#define _POSIX_C_SOURCE 200809L

#include <lattice/lattice.h>

#include <getopt.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define PROG "bench_gemm"

#include "example_util.h"
#include "roofline.h"

/* What the recording backend saw: projections (sgemm) and attention (batched). */
typedef struct recorder {
    lattice_backend *inner;
    rl_list proj;
    long attn_calls, attn_problems;
    int oom;
} recorder;

static int rec_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                     int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    recorder *r = user;
    if (rl_add(&r->proj, ta, tb, m, n, k, lda, ldb, ldc, alpha, beta))
        r->oom = 1;
    return lattice_backend_sgemm(r->inner, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) !=
           LATTICE_OK;
}

static int rec_batched(void *user, int ta, int tb, int m, int n, int k, float alpha,
                       const float *const *a, int lda, const float *const *b, int ldb, float beta,
                       float *const *c, int ldc, int count)
{
    recorder *r = user;
    r->attn_calls++;
    r->attn_problems += count;
    for (int i = 0; i < count; i++)
        if (lattice_backend_sgemm(r->inner, ta, tb, m, n, k, alpha, a[i], lda, b[i], ldb, beta,
                                  c[i], ldc) != LATTICE_OK)
            return 1;
    return 0;
}

/* The list's distinct calls (shape, strides, scalars), each with its count over the list. */
static int distinct(const rl_list *in, rl_list *out)
{
    for (size_t i = 0; i < in->n; i++) {
        const rl_gemm *g = &in->g[i];
        size_t j = 0;
        for (; j < out->n; j++) {
            const rl_gemm *h = &out->g[j];
            if (h->ta == g->ta && h->tb == g->tb && h->m == g->m && h->n == g->n &&
                h->k == g->k && h->lda == g->lda && h->ldb == g->ldb && h->ldc == g->ldc &&
                h->alpha == g->alpha && h->beta == g->beta)
                break;
        }
        if (j < out->n) {
            out->g[j].count += g->count;
            continue;
        }
        if (rl_add(out, g->ta, g->tb, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->alpha,
                   g->beta))
            return -1;
        out->g[out->n - 1].count = g->count;
    }
    return 0;
}

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options]\n"
            "Time the GEMM libraries (blis, openblas, onednn) at one training step's GEMM shapes.\n"
            "\n"
            "  --preset NAME   study (the default: 9 layers, d_model 64, 4 heads (2 kv) of 16,\n"
            "                  d_ff 192, vocab 257, 16 x 128 tokens) or d256\n"
            "  --batch N       sequences (the preset's)\n"
            "  --seq N         tokens per sequence (the preset's)\n"
            "  --threads N     threads per GEMM, split as the library splits them (1)\n"
            "  --rounds N      timed rounds per shape, the libraries interleaved (9)\n"
            "  --gflop X       work per shape per round, in GFLOP (0.5)\n"
            "  --cpu-clock     time in process CPU time instead of wall time (with --threads 1\n"
            "                  on a busy machine: leaves out the waits for a core)\n"
            "  -h, --help      this help\n"
            "\n"
            "Output: 'gemm LABEL LIBRARY MEDIAN BEST' lines (GFLOP/s over the rounds), a 'best'\n"
            "line per shape (the highest median), and 'step_gemms LIBRARY MEDIAN BEST' for the\n"
            "step's projection GEMMs as a whole (each round's FLOP over its time).\n");
}

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    ex_shape sh = EX_PRESET_STUDY;
    int threads = 1, rounds = 9, batch = -1, seq = -1, cpu_clock = 0;
    double gflop = 0.5;
    static const struct option longopts[] = {
        {"preset", required_argument, NULL, 'p'}, {"batch", required_argument, NULL, 'b'},
        {"seq", required_argument, NULL, 's'},    {"threads", required_argument, NULL, 't'},
        {"rounds", required_argument, NULL, 'r'}, {"gflop", required_argument, NULL, 'g'},
        {"cpu-clock", no_argument, NULL, 'c'},    {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    int c;
    while ((c = getopt_long(argc, argv, "h", longopts, NULL)) != -1) {
        switch (c) {
        case 'p':
            if (ex_parse_preset(optarg, &sh) < 0)
                return 2;
            break;
        case 'b':
            if (ex_parse_int("batch", optarg, 1, 1 << 16, &batch))
                return 2;
            break;
        case 's':
            if (ex_parse_int("seq", optarg, 1, 1 << 16, &seq))
                return 2;
            break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 4096, &threads))
                return 2;
            break;
        case 'r':
            if (ex_parse_int("rounds", optarg, 1, 1000, &rounds))
                return 2;
            break;
        case 'g': {
            char *end;
            gflop = strtod(optarg, &end);
            if (end == optarg || *end || !(gflop > 0 && gflop <= 1000)) {
                fprintf(stderr, PROG ": --gflop: '%s' is not a number in (0, 1000]\n", optarg);
                return 2;
            }
            break;
        }
        case 'c': cpu_clock = 1; break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    if (batch > 0)
        sh.batch = batch;
    if (seq > 0)
        sh.seq = seq;

    int rc = 1;
    recorder rec = {0};
    rl_list shapes = {0};
    lattice_backend *be = NULL;
    lattice_norm *norm = NULL;
    lattice_model *model = NULL;
    int32_t *tokens = NULL;
    lattice_status st;
    const char *what = "backend";
    if ((st = ex_backend_create("default", &rec.inner)) != LATTICE_OK)
        goto fail;
    lattice_backend_ops ops;
    lattice_backend_ops_init(&ops);
    ops.user = &rec;
    ops.sgemm = rec_sgemm;
    ops.sgemm_batched = rec_batched;
    what = "recording backend";
    if ((st = lattice_backend_create_custom("record", &ops, &be)) != LATTICE_OK)
        goto fail;
    what = "norm";
    if ((st = lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f,
                                  &norm)) != LATTICE_OK)
        goto fail;
    lattice_model_params mp;
    ex_shape_model_params(&sh, &mp);
    mp.seed = 1;
    what = "model";
    if ((st = lattice_model_create(&mp, norm, be, &model)) != LATTICE_OK)
        goto fail;
    const size_t n_tok = (size_t)sh.batch * sh.seq;
    tokens = malloc((n_tok + 1) * sizeof(*tokens));
    if (!tokens) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }
    uint64_t rng = 20240611ULL;
    for (size_t i = 0; i <= n_tok; i++)
        tokens[i] = (int32_t)(ex_rng_next(&rng) % (uint64_t)sh.vocab);
    float loss;
    what = "the recorded step";
    if ((st = lattice_model_forward(model, tokens, sh.batch, sh.seq)) != LATTICE_OK ||
        (st = lattice_model_cross_entropy(model, tokens + 1, NULL, &loss, NULL)) != LATTICE_OK ||
        (st = lattice_model_backward(model)) != LATTICE_OK)
        goto fail;
    if (rec.oom || distinct(&rec.proj, &shapes)) {
        fprintf(stderr, PROG ": out of memory for the recorded shapes\n");
        goto out;
    }

    printf("# lattice %s, shapes recorded through backend %s%s; %d layers, d_model %d, %d heads "
           "(%d kv) of %d, d_ff %d, vocab %d; batch %d x %d\n", lattice_version_string(),
           lattice_backend_get_name(rec.inner), ex_backend_origin("default"), sh.layers, sh.d_model, sh.heads,
           sh.kv_heads, sh.head_dim, sh.d_ff, sh.vocab, sh.batch, sh.seq);
    long calls = 0;
    for (size_t i = 0; i < shapes.n; i++)
        calls += shapes.g[i].count;
    printf("# one step's projection and head GEMMs: %ld calls, %zu distinct, %.3f GFLOP; "
           "attention (not timed): %ld batched calls of %ld problems\n",
           calls, shapes.n, rl_flop(&rec.proj) / 1e9, rec.attn_calls, rec.attn_problems);
    printf("# %d thread(s), %d rounds, %.2f GFLOP per shape per round, %s; OPENBLAS_CORETYPE "
           "%s, DNNL_MAX_CPU_ISA %s\n", threads, rounds, gflop,
           cpu_clock ? "CPU time" : "wall time",
           getenv("OPENBLAS_CORETYPE") ? getenv("OPENBLAS_CORETYPE") : "(unset)",
           getenv("DNNL_MAX_CPU_ISA") ? getenv("DNNL_MAX_CPU_ISA") : "(unset)");
    printf("threads %d\n", threads);
    fflush(stdout);

    rl_result res;
    int described = 0;
    for (size_t i = 0; i < shapes.n; i++) {
        const rl_gemm *g = &shapes.g[i];
        rl_list one = {0};
        const double f = 2.0 * g->m * g->n * g->k;
        const long reps = f > 0 ? (long)ceil(gflop * 1e9 / f) : 1;
        for (long r = 0; r < reps; r++)
            if (rl_add(&one, g->ta, g->tb, g->m, g->n, g->k, g->lda, g->ldb, g->ldc, g->alpha,
                       g->beta)) {
                fprintf(stderr, PROG ": out of memory\n");
                rl_free(&one);
                goto out;
            }
        what = "sgemm";
        st = rl_measure(&one, threads, rounds, cpu_clock, 0, &res);
        rl_free(&one);
        if (st != LATTICE_OK)
            goto out; /* rl_measure said why */
        if (!described) {
            for (int j = 0; j < res.n_libs; j++)
                printf("# %s: %s\n", res.lib[j].name, res.lib[j].kernels);
            described = 1;
        }
        char label[96];
        snprintf(label, sizeof label, "%c%c_%dx%dx%d_beta%g%s", g->ta ? 'T' : 'N',
                 g->tb ? 'T' : 'N', g->m, g->n, g->k, (double)g->beta,
                 g->alpha != 1.0f ? "_scaled" : "");
        for (int j = 0; j < res.n_libs; j++)
            if (res.lib[j].available)
                printf("gemm %s %s %.1f %.1f\n", label, res.lib[j].name,
                       res.lib[j].gflops_median, res.lib[j].gflops_best);
        printf("best %s %s x%d\n", label, res.best >= 0 ? res.lib[res.best].name : "none",
               g->count);
        fflush(stdout);
    }
    if ((st = rl_measure(&rec.proj, threads, rounds, cpu_clock, 0, &res)) != LATTICE_OK)
        goto out;
    for (int j = 0; j < res.n_libs; j++)
        if (res.lib[j].available)
            printf("step_gemms %s %.1f %.1f\n", res.lib[j].name, res.lib[j].gflops_median,
                   res.lib[j].gflops_best);
    printf("step_gemms_best %s\n", res.best >= 0 ? res.lib[res.best].name : "none");
    rc = 0;
    goto out;
fail:
    fprintf(stderr, PROG ": %s: %s: %s\n", what, lattice_status_string(st), lattice_last_error());
out:
    free(tokens);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    lattice_backend_destroy(rec.inner);
    rl_free(&rec.proj);
    rl_free(&shapes);
    return rc;
}
