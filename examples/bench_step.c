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
 *
 * This file builds the model, times the steps and prints their lines;
 * bench_step_replay.c replays the step's GEMMs, measures the roofline and the
 * FMA peak, and prints theirs.
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

#include "bench_step_replay.h"
#include "example_util.h"
#include "profile.h" /* private: lattice__model_profile */
#include "roofline.h"
#define WARMUP_STEPS 2
#define TOKEN_SEED 20240611ULL

static double peak_rss_mib(void)
{
    struct rusage ru;
    if (getrusage(RUSAGE_SELF, &ru) != 0)
        return NAN;
    return (double)ru.ru_maxrss / 1024.0; /* KiB on Linux */
}

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

/* What the command line asked for. */
typedef struct options {
    lattice_norm_placement placement;
    const char *backend_name, *precision;
    int threads, steps, rounds, do_sgemm, do_profile, cpu_clock, distill;
    ex_shape sh;
} options;

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

/* The shape options given explicitly (given[i] >= 0), applied over whichever
 * preset came, in any order. */
static void apply_shape(ex_shape *sh, const int *given)
{
    int *field[OPT_QKNORM - OPT_LAYERS + 1];
    field[OPT_LAYERS - OPT_LAYERS] = &sh->layers;
    field[OPT_DMODEL - OPT_LAYERS] = &sh->d_model;
    field[OPT_HEADS - OPT_LAYERS] = &sh->heads;
    field[OPT_KV - OPT_LAYERS] = &sh->kv_heads;
    field[OPT_HD - OPT_LAYERS] = &sh->head_dim;
    field[OPT_DFF - OPT_LAYERS] = &sh->d_ff;
    field[OPT_VOCAB - OPT_LAYERS] = &sh->vocab;
    field[OPT_BATCH - OPT_LAYERS] = &sh->batch;
    field[OPT_SEQ - OPT_LAYERS] = &sh->seq;
    field[OPT_QKNORM - OPT_LAYERS] = &sh->qk_norm;
    for (size_t i = 0; i < sizeof field / sizeof field[0]; i++)
        if (given[i] >= 0)
            *field[i] = given[i];
}

/* One option c (its argument optarg; idx its longopts entry) into o and
 * given: -1 to go on, else the exit status (0 after --help, 2 refused). */
static int parse_option(int c, int idx, options *o, int *given)
{
    switch (c) {
    case 'p':
        if (lattice_norm_placement_from_name(optarg, &o->placement) != LATTICE_OK) {
            fprintf(stderr, PROG ": --placement: '%s' is not pre, post or peri\n", optarg);
            return 2;
        }
        return -1;
    case 'b': o->backend_name = optarg; return -1;
    case OPT_PRECISION: o->precision = optarg; return -1;
    case 't': return ex_parse_int("threads", optarg, 1, 4096, &o->threads) ? 2 : -1;
    case 's': return ex_parse_int("steps", optarg, 1, 1000000, &o->steps) ? 2 : -1;
    case OPT_ROUNDS: return ex_parse_int("rounds", optarg, 1, MAX_ROUNDS, &o->rounds) ? 2 : -1;
    case OPT_PRESET: return ex_parse_preset(optarg, &o->sh) < 0 ? 2 : -1;
    case OPT_LAYERS: case OPT_DMODEL: case OPT_HEADS: case OPT_KV: case OPT_HD: case OPT_DFF:
    case OPT_VOCAB: case OPT_BATCH: case OPT_SEQ: case OPT_QKNORM: {
        long hi = c == OPT_QKNORM ? 1 : 1L << 20;
        return ex_parse_int(longopts[idx].name, optarg, c == OPT_QKNORM ? 0 : 1, hi,
                            &given[c - OPT_LAYERS]) ? 2 : -1;
    }
    case OPT_NO_SGEMM: o->do_sgemm = 0; return -1;
    case OPT_NO_PROFILE: o->do_profile = 0; return -1;
    case OPT_CPU_CLOCK: o->cpu_clock = 1; return -1;
    case OPT_LOSS:
        if (strcmp(optarg, "distill") == 0)
            o->distill = 1;
        else if (strcmp(optarg, "ce") == 0)
            o->distill = 0;
        else {
            fprintf(stderr, PROG ": --loss: '%s' is not distill or ce\n", optarg);
            return 2;
        }
        return -1;
    case 'h': usage(stdout); return 0;
    default: usage(stderr); return 2;
    }
}

/* The command line into o: -1 to run, else the exit status. */
static int parse_options(int argc, char **argv, options *o)
{
    *o = (options){.placement = LATTICE_NORM_PLACEMENT_PRE, .backend_name = "default",
                   .precision = getenv("LATTICE_GEMM_PRECISION"), .threads = 2, .steps = 10,
                   .rounds = 1, .do_sgemm = 1, .do_profile = 1, .cpu_clock = 0, .distill = 1,
                   .sh = EX_PRESET_D256};
    int given[OPT_QKNORM - OPT_LAYERS + 1];
    memset(given, -1, sizeof given);
    int c, idx, rc;
    while ((c = getopt_long(argc, argv, "h", longopts, &idx)) != -1)
        if ((rc = parse_option(c, idx, o, given)) >= 0)
            return rc;
    if (optind != argc) {
        fprintf(stderr, PROG ": unexpected argument '%s'\n", argv[optind]);
        return 2;
    }
    apply_shape(&o->sh, given);
    return -1;
}

/* What a run holds: the library's objects, the batch, the teacher's logits
 * and the sgemm replay's buffers. */
typedef struct bench {
    lattice_backend *backend;
    lattice_norm *norm;
    lattice_model *model;
    lattice_optim *optim;
    int32_t *tokens, *targets;
    float *teacher_logits;
    lattice_distill *dloss;
    replay r;
} bench;

static void bench_free(bench *b)
{
    replay_free(&b->r);
    lattice_optim_destroy(b->optim);
    lattice_model_destroy(b->model);
    lattice_norm_destroy(b->norm);
    lattice_backend_destroy(b->backend);
    free(b->targets);
    free(b->tokens);
    free(b->teacher_logits);
    lattice_distill_destroy(b->dloss);
}

/* The backend, norm, model and optimizer o asks for: 0, or 1 after a message. */
static int model_setup(bench *b, const options *o)
{
    lattice_status st = ex_backend_create(o->backend_name, &b->backend);
    if (st != LATTICE_OK) {
        fprintf(stderr, PROG ": backend '%s': %s%s\n", o->backend_name, lattice_status_string(st),
                st == LATTICE_ERR_UNSUPPORTED ? " (not available in this build or system)" :
                st == LATTICE_ERR_NOT_FOUND ? " (use ref, blis, openblas, onednn or default)" : "");
        return 1;
    }
    if ((st = lattice_backend_set_threads(b->backend, o->threads)) != LATTICE_OK)
        return fail("set threads", st, NULL);
    if (o->precision && *o->precision &&
        (st = lattice_backend_set_gemm_precision(b->backend, o->precision)) != LATTICE_OK)
        return fail("GEMM precision", st, lattice_last_error());
    if ((st = lattice_norm_create(o->placement, LATTICE_NORM_KIND_RMS, 1e-6f, &b->norm)) !=
        LATTICE_OK)
        return fail("norm", st, NULL);
    lattice_model_params mp;
    ex_shape_model_params(&o->sh, &mp);
    mp.seed = 1;
    char err[LATTICE_ERRMSG_SIZE];
    if ((st = lattice_model_params_check(&mp, err)) != LATTICE_OK)
        return fail("model shape", st, err);
    if ((st = lattice_model_create(&mp, b->norm, b->backend, &b->model)) != LATTICE_OK)
        return fail("model", st, NULL);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    if ((st = lattice_optim_create(b->model, &op, &b->optim)) != LATTICE_OK)
        return fail("optimizer", st, NULL);
    return 0;
}

/* The batch (random sequences, targets shifted by one) and, for the
 * distillation loss, fixed teacher logits and the loss: 0, or 1 after a
 * message. */
static int data_setup(bench *b, const options *o)
{
    const int BATCH = o->sh.batch, SEQ = o->sh.seq, VOCAB = o->sh.vocab;
    const size_t n_tok = (size_t)BATCH * SEQ;
    b->tokens = malloc(n_tok * sizeof(*b->tokens));
    b->targets = malloc(n_tok * sizeof(*b->targets));
    /* fixed teacher logits: sums of uniforms (about N(0, 2^2)), as a trained teacher's spread */
    b->teacher_logits = o->distill ? malloc(n_tok * (size_t)VOCAB * sizeof(float)) : NULL;
    if (!b->tokens || !b->targets || (o->distill && !b->teacher_logits)) {
        fprintf(stderr, PROG ": out of memory\n");
        return 1;
    }
    uint64_t rng = TOKEN_SEED;
    for (int s = 0; s < BATCH; s++) { /* random sequences of SEQ + 1, shifted by one */
        int32_t prev = (int32_t)(ex_rng_next(&rng) % VOCAB);
        for (int t = 0; t < SEQ; t++) {
            int32_t next = (int32_t)(ex_rng_next(&rng) % VOCAB);
            b->tokens[(size_t)s * SEQ + t] = prev;
            b->targets[(size_t)s * SEQ + t] = next;
            prev = next;
        }
    }
    if (!o->distill)
        return 0;
    uint64_t trng = TOKEN_SEED + 1;
    for (size_t i = 0; i < n_tok * (size_t)VOCAB; i++) {
        double u = 0;
        for (int k = 0; k < 4; k++)
            u += (double)(ex_rng_next(&trng) >> 11) * 0x1.0p-53 - 0.5;
        b->teacher_logits[i] = (float)(u * 2.0 * sqrt(3.0));
    }
    lattice_distill_params dpar;
    lattice_distill_params_init(&dpar);
    lattice_status st = lattice_distill_create(&dpar, &b->dloss);
    return st != LATTICE_OK ? fail("distillation loss", st, NULL) : 0;
}

/* The lines that say what runs: the library, backend, kernels, model and
 * steps. 0, or 1 after a message. */
static int header_lines(const bench *b, const options *o)
{
    lattice_backend_info bi;
    bi.size = sizeof bi;
    lattice_status st = lattice_backend_get_info(b->backend, &bi);
    if (st != LATTICE_OK)
        return fail("backend info", st, NULL);
    const ex_shape *sh = &o->sh;
    printf("# lattice %s, backend %s%s, GEMMs in %s, %d threads, %s-norm, %s loss\n",
           lattice_version_string(), lattice_backend_get_name(b->backend),
           ex_backend_origin(o->backend_name), lattice_backend_get_gemm_precision(b->backend),
           o->threads, lattice_norm_placement_name(o->placement),
           o->distill ? "distillation (0.7 KL + 0.3 CE, fixed teacher logits)" : "cross-entropy");
    printf("# kernels: %s, %s%s%s%s\n", bi.library, bi.kernels,
           bi.optimised ? "" : " (NOT optimised for this CPU)", bi.reason[0] ? "; " : "", bi.reason);
    printf("# model: %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, vocab %d, "
           "qk-norm %s, %.2fM parameters; batch %d x %d tokens\n",
           sh->layers, sh->d_model, sh->heads, sh->kv_heads, sh->head_dim, sh->d_ff, sh->vocab,
           sh->qk_norm ? "on" : "off", (double)lattice_model_get_n_params(b->model) / 1e6,
           sh->batch, sh->seq);
    printf("# %d warmup steps, %d timed steps\n", WARMUP_STEPS, o->steps);
    printf("backend %s\n", lattice_backend_get_name(b->backend));
    printf("kernels %s\n", bi.kernels);
    printf("gemm_precision %s\n", lattice_backend_get_gemm_precision(b->backend));
    printf("threads %d\n", o->threads);
    printf("omp_wait_policy %s\n", getenv("OMP_WAIT_POLICY") ? getenv("OMP_WAIT_POLICY") : "(unset)");
    fflush(stdout);
    return 0;
}

/* The timed steps' sums, the per-op counters' and what each round measured. */
typedef struct timing {
    double t_fwd, t_bwd, t_opt, loss_first, loss_last;
    double op_secs[LATTICE_OP_COUNT], rss_mib;
    int rows_threads;
    double rows_wait, rows_fork; /* rows-split passes: thread 0's waits, the team's cost */
    double round_s[MAX_ROUNDS];  /* each round's mean step */
    rl_result round_res[MAX_ROUNDS];
    char about[600];
    int n_step; /* steps run, untimed ones too */
} timing;

/* One training step: forward, the loss, backward, the optimizer; t[0..3]
 * the clock around them, *loss the loss. 0, or 1 after a message. */
static int one_step(bench *b, const options *o, double t[4], float *loss)
{
    lattice_status st;
    const char *what = NULL;
    t[0] = step_clock(o->cpu_clock);
    if ((st = lattice_model_forward(b->model, b->tokens, o->sh.batch, o->sh.seq)) != LATTICE_OK)
        what = "forward";
    else if (!o->distill && (st = lattice_model_cross_entropy(b->model, b->targets, NULL, loss,
                                                              NULL)) != LATTICE_OK)
        what = "cross-entropy";
    else if (o->distill) {
        lattice_distill_result res;
        /* through the model: the loss runs on the backend's threads */
        if ((st = lattice_distill_model(b->dloss, b->model, b->teacher_logits, o->sh.vocab,
                                        b->targets, NULL, &res)) != LATTICE_OK)
            return fail("distillation loss", st, lattice_distill_errmsg(b->dloss));
        *loss = (float)res.loss;
    }
    t[1] = step_clock(o->cpu_clock);
    if (!what && (st = lattice_model_backward(b->model)) != LATTICE_OK)
        what = "backward";
    if (what)
        return fail(what, st, lattice_model_errmsg(b->model));
    t[2] = step_clock(o->cpu_clock);
    if ((st = lattice_optim_step(b->optim, NULL)) != LATTICE_OK)
        return fail("optimizer step", st, lattice_optim_errmsg(b->optim));
    t[3] = step_clock(o->cpu_clock);
    return 0;
}

/* Round `round` of steps: its untimed steps (WARMUP_STEPS in the first, one
 * after a roofline, to warm the caches again), then --steps timed ones with
 * the per-op counters on, summed into tm. 0, or 1 after a message. */
static int step_round(bench *b, const options *o, timing *tm, int round)
{
    const int untimed = round == 0 ? WARMUP_STEPS : 1;
    const double before = tm->t_fwd + tm->t_bwd + tm->t_opt;
    for (int i = 0; i < untimed + o->steps; i++, tm->n_step++) {
        float loss = NAN;
        double t[4];
        if (i == untimed)
            lattice__model_profile(b->model, o->do_profile ? (o->cpu_clock ? LATTICE_PROF_CPU
                                                                            : LATTICE_PROF_WALL)
                                                           : 0);
        if (one_step(b, o, t, &loss))
            return 1;
        if (tm->n_step == 0)
            tm->loss_first = loss;
        tm->loss_last = loss;
        if (i >= untimed) {
            tm->t_fwd += t[1] - t[0];
            tm->t_bwd += t[2] - t[1];
            tm->t_opt += t[3] - t[2];
        }
    }
    const lattice_prof *prof = lattice__model_profile_get(b->model);
    for (int op = 0; op < LATTICE_OP_COUNT; op++)
        tm->op_secs[op] += prof->secs[op];
    tm->rows_wait += prof->rows_wait_secs;
    tm->rows_fork += prof->rows_fork_secs;
    tm->rows_threads = prof->rows_threads;
    lattice__model_profile(b->model, 0);
    tm->round_s[round] = (tm->t_fwd + tm->t_bwd + tm->t_opt - before) / o->steps;
    return 0;
}

/* Rounds of timed steps, each after the first followed by a roofline
 * measurement: the step's rate and the core's sgemm rate side by side,
 * A B A B. 0, or 1 after a message. */
static int step_rounds(bench *b, const options *o, timing *tm)
{
    for (int round = 0; round < o->rounds; round++) {
        if (step_round(b, o, tm, round))
            return 1;
        if (round == 0)
            tm->rss_mib = peak_rss_mib(); /* before the sgemm buffers below */
        if (o->rounds == 1 || !o->do_sgemm)
            continue;
        if (round == 0 && replay_setup(&b->r, b->backend, &o->sh, o->placement)) {
            fprintf(stderr, PROG ": out of memory for the sgemm buffers\n");
            return 1;
        }
        lattice_status st = roofline_measure(&b->r, o->threads, tm->rows_threads, o->cpu_clock,
                                             &tm->round_res[round], tm->about, sizeof tm->about);
        if (st != LATTICE_OK)
            return fail("roofline", st,
                        st == LATTICE_ERR_UNSUPPORTED ? "no GEMM library ran" : NULL);
    }
    return 0;
}

/* The step's lines: its time, rate and threads, each op's time and share
 * (with the per-op counters) and the FMA lines, over the `steps` timed steps
 * of every round. */
static void step_lines(const options *o, const timing *tm, int steps, double step_s,
                       double step_flops)
{
    printf("loss_first %.4f\n", tm->loss_first);
    printf("loss_last %.4f\n", tm->loss_last);
    printf("step_ms %.1f\n", 1e3 * step_s);
    printf("forward_ms %.1f\n", 1e3 * tm->t_fwd / steps);
    printf("backward_ms %.1f\n", 1e3 * tm->t_bwd / steps);
    printf("optim_ms %.1f\n", 1e3 * tm->t_opt / steps);
    printf("tokens_per_s %.0f\n", (double)((size_t)o->sh.batch * o->sh.seq) / step_s);
    printf("step_gflop %.2f\n", step_flops / 1e9);
    printf("step_gflops %.1f\n", step_flops / step_s / 1e9);
    /* how the passes used the threads (doc/PERFORMANCE.md, "Threads") */
    printf("parallel %s\n", tm->rows_threads > 1 ? "rows" : "ops");
    printf("parallel_rows_threads %d\n", tm->rows_threads);
    if (o->do_profile) {
        double sum = 0.0;
        for (int op = 0; op < LATTICE_OP_COUNT; op++)
            sum += tm->op_secs[op];
        for (int op = 0; op < LATTICE_OP_COUNT; op++) {
            const char *name = lattice__op_name((lattice_op)op);
            printf("op_%s_ms %.2f\n", name, 1e3 * tm->op_secs[op] / steps);
            printf("op_%s_share %.3f\n", name, tm->op_secs[op] / (step_s * steps));
        }
        /* what no category covers: the calls' own checks, copies, dispatch */
        printf("op_other_ms %.2f\n", 1e3 * (step_s * steps - sum) / steps);
        if (tm->rows_threads > 1 && !o->cpu_clock) { /* two parts of other */
            printf("rows_wait_ms %.2f\n", 1e3 * tm->rows_wait / steps);
            printf("rows_fork_ms %.2f\n", 1e3 * tm->rows_fork / steps);
        }
    }
    fma_lines(&o->sh, o->threads, o->cpu_clock, 1e3 * step_s,
              o->do_profile ? 1e3 * tm->op_secs[LATTICE_OP_ATTN_FUSED] / steps : 0.0);
    fflush(stdout);
}

/* The same GEMMs alone, on the same backend and threads: the sgemm_* lines,
 * the ratio and the memory lines. 0, or 1 after a message. */
static int sgemm_lines(bench *b, const options *o, const timing *tm, int steps,
                       double step_flops, double step_gflops)
{
    replay *r = &b->r;
    lattice_status st;
    if (o->rounds == 1 && replay_setup(r, b->backend, &o->sh, o->placement)) {
        fprintf(stderr, PROG ": out of memory for the sgemm buffers\n");
        return 1;
    }
    if ((st = replay_time(r, CAT_ALL, steps)) != LATTICE_OK)
        return fail("sgemm", st, NULL);
    const double proj_s = r->secs[CAT_PROJ], attn_s = r->secs[CAT_ATTN];
    const double proj_f = r->flops[CAT_PROJ], attn_f = r->flops[CAT_ATTN];
    const double sgemm_gflops = (proj_f + attn_f) / (proj_s + attn_s) / 1e9;
    if (fabs((proj_f + attn_f) / steps - step_flops) > 1e-6 * step_flops)
        printf("# warning: the replayed GEMMs count %.4g FLOP per step, the model %.4g\n",
               (proj_f + attn_f) / steps, step_flops);

    /* The library runs the attention problems one per thread, each on one thread. */
    if ((st = lattice_backend_set_threads(b->backend, 1)) == LATTICE_OK)
        st = replay_time(r, CAT_ATTN, steps < 3 ? steps : 3);
    if (st != LATTICE_OK)
        return fail("sgemm (1 thread)", st, NULL);
    const double attn_1t_gflops = r->flops[CAT_ATTN] / r->secs[CAT_ATTN] / 1e9;
    lattice_backend_set_threads(b->backend, o->threads);

    const double arena_mib = (double)lattice_model_get_arena_bytes(b->model) / (1024.0 * 1024.0);
    if (tm->rows_threads > 1) /* the replay shares each call; the step did not */
        printf("# sgemm_* and ratio: the step's GEMMs replayed with each call shared by the %d "
               "threads (the ops split), while the step ran the rows split: the roofline "
               "lines below are split as the step was\n", o->threads);
    printf("sgemm_ms %.1f\n", 1e3 * (proj_s + attn_s) / steps);
    printf("sgemm_gflops %.1f\n", sgemm_gflops);
    printf("sgemm_proj_gflops %.1f\n", proj_f / proj_s / 1e9);
    printf("sgemm_attn_gflops %.1f\n", attn_f / attn_s / 1e9);
    printf("sgemm_attn_1thread_gflops %.1f\n", attn_1t_gflops);
    printf("ratio %.3f\n", step_gflops / sgemm_gflops);
    printf("arena_mib %.1f\n", arena_mib);
    printf("peak_rss_mib %.1f\n", tm->rss_mib);
    printf("rss_over_arena %.3f\n", tm->rss_mib / arena_mib);
    fflush(stdout);
    return 0;
}

/* The roofline lines: with one round, the roofline measured now; with
 * several, each round's steps against the roofline measured after them.
 * 0, or 1 after a message. */
static int roofline_report(bench *b, const options *o, timing *tm, double step_flops,
                           double step_gflops)
{
    if (o->rounds == 1) {
        lattice_status st = roofline_measure(&b->r, o->threads, tm->rows_threads, o->cpu_clock,
                                             &tm->round_res[0], tm->about, sizeof tm->about);
        if (st != LATTICE_OK)
            return fail("roofline", st,
                        st == LATTICE_ERR_UNSUPPORTED ? "no GEMM library ran" : NULL);
        roofline_lines(tm->round_res, 1, &step_gflops, tm->about);
        return 0;
    }
    double round_gflops[MAX_ROUNDS];
    for (int i = 0; i < o->rounds; i++)
        round_gflops[i] = step_flops / tm->round_s[i] / 1e9;
    roofline_lines(tm->round_res, o->rounds, round_gflops, tm->about);
    return 0;
}

/* The lines of the timed steps, then (unless --no-sgemm) the sgemm replay's
 * and the roofline's. 0, or 1 after a message. */
static int report(bench *b, const options *o, timing *tm)
{
    const int steps = o->steps * o->rounds; /* the means are over every timed step */
    const double step_s = (tm->t_fwd + tm->t_bwd + tm->t_opt) / steps;
    const double step_flops = lattice_model_get_flops(b->model, o->sh.batch, o->sh.seq, 1);
    const double step_gflops = step_flops / step_s / 1e9;
    step_lines(o, tm, steps, step_s, step_flops);
    if (!o->do_sgemm)
        return 0;
    if (sgemm_lines(b, o, tm, steps, step_flops, step_gflops))
        return 1;
    return roofline_report(b, o, tm, step_flops, step_gflops);
}

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    options o;
    int rc = parse_options(argc, argv, &o);
    if (rc >= 0)
        return rc;
    bench b = {0};
    timing tm = {.loss_first = NAN, .loss_last = NAN, .rss_mib = NAN, .rows_threads = 1};
    rc = model_setup(&b, &o) || data_setup(&b, &o) || header_lines(&b, &o) ||
         step_rounds(&b, &o, &tm) || report(&b, &o, &tm);
    bench_free(&b);
    return rc;
}
