/*
 * train_text: train a byte-level language model on a text file.
 *
 *   train_text [options] FILE
 *
 * The file is read by lattice_data (lattice_data_create_text): bytes are
 * tokens 0..255, form feeds separate documents, each document opens with the
 * boundary token 256 (so the vocabulary is 257), and documents longer than
 * seq + 1 tokens are cut into rows of seq + 1 (split_long), so a file without
 * form feeds is trained on whole. The last 10% of the rows (--val-fraction),
 * or a separate file (--val), form the validation split. Each step takes the
 * data's next batch, runs forward, cross-entropy (padding masked out),
 * backward and one AdamW step. The last line on stdout is
 *
 *   final train_loss X val_loss Y tokens_per_s Z
 *
 * where X is the mean training loss of the last steps (up to 10) and Y the
 * loss over the whole validation split.
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
#include <time.h>
#include <unistd.h>

#define PROG "train_text"

#include "example_util.h"
/* Steps averaged into the reported final training loss. */
#define LOSS_WINDOW 10

typedef struct options {
    int steps, batch, seq, layers, d_model, heads, kv_heads, head_dim, d_ff;
    float lr;
    int warmup;
    lattice_norm_placement placement;
    const char *backend;
    int threads;
    uint64_t seed;
    int eval_every; /* -1: steps / 5 */
    float val_fraction; /* -1: 0.1, or 0 with --val */
    const char *val_path;
    int quiet;
    const char *path;
} options;

/* ---- command line ------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " [options] FILE\n"
            "Train a byte-level transformer on FILE, a regular file of documents separated\n"
            "by form feeds (or just one), cut into rows of T + 1 tokens.\n"
            "\n"
            "  --steps N         training steps (300)\n"
            "  --batch B         rows per step (8)\n"
            "  --seq T           predicted tokens per row at most (128)\n"
            "  --val-fraction X  share of the rows held out for validation (0.1; 0: none)\n"
            "  --val FILE        validation documents from FILE instead\n"
            "  --layers L        transformer layers (4)\n"
            "  --d-model D       residual width (128)\n"
            "  --heads H         query heads (4)\n"
            "  --kv-heads K      key/value heads, dividing H (H)\n"
            "  --head-dim E      per-head width, even (D / H)\n"
            "  --d-ff F          SwiGLU hidden width (3 * D)\n"
            "  --lr X            peak learning rate (1e-3; cosine decay to X / 10)\n"
            "  --warmup N        linear warmup steps (30)\n"
            "  --placement P     norm placement: pre, post or peri (pre)\n"
            "  --backend NAME    ref, blis, openblas or default (default)\n"
            "  --threads N       threads (2)\n"
            "  --seed S          seed of the weights and of the batches (1)\n"
            "  --eval-every N    validation every N steps, 0 only at the end (steps / 5)\n"
            "  -q, --quiet       print only the final line (and errors)\n"
            "  -h, --help        this help\n");
}

static int parse_u64(const char *name, const char *s, uint64_t *out)
{
    char *end;
    errno = 0;
    unsigned long long v = strtoull(s, &end, 10);
    if (errno || end == s || *end || s[0] == '-') {
        fprintf(stderr, PROG ": --%s: '%s' is not a non-negative integer\n", name, s);
        return -1;
    }
    *out = (uint64_t)v;
    return 0;
}

static int parse_float(const char *name, const char *s, float lo, float hi, float *out)
{
    char *end;
    errno = 0;
    float v = strtof(s, &end);
    if (errno || end == s || *end || !(v >= lo && v <= hi)) {
        fprintf(stderr, PROG ": --%s: '%s' is not a number in %g..%g\n", name, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

/* Returns 0 to run, 1 to exit successfully (--help), -1 on a usage error. */
static int parse_options(int argc, char **argv, options *o)
{
    enum {
        OPT_STEPS = 256, OPT_BATCH, OPT_SEQ, OPT_LAYERS, OPT_D_MODEL, OPT_HEADS, OPT_KV_HEADS,
        OPT_HEAD_DIM, OPT_D_FF, OPT_LR, OPT_WARMUP, OPT_PLACEMENT, OPT_BACKEND, OPT_THREADS,
        OPT_SEED, OPT_EVAL_EVERY, OPT_VAL_FRACTION, OPT_VAL
    };
    static const struct option longopts[] = {
        {"steps", required_argument, NULL, OPT_STEPS},
        {"batch", required_argument, NULL, OPT_BATCH},
        {"seq", required_argument, NULL, OPT_SEQ},
        {"layers", required_argument, NULL, OPT_LAYERS},
        {"d-model", required_argument, NULL, OPT_D_MODEL},
        {"heads", required_argument, NULL, OPT_HEADS},
        {"kv-heads", required_argument, NULL, OPT_KV_HEADS},
        {"head-dim", required_argument, NULL, OPT_HEAD_DIM},
        {"d-ff", required_argument, NULL, OPT_D_FF},
        {"lr", required_argument, NULL, OPT_LR},
        {"warmup", required_argument, NULL, OPT_WARMUP},
        {"placement", required_argument, NULL, OPT_PLACEMENT},
        {"backend", required_argument, NULL, OPT_BACKEND},
        {"threads", required_argument, NULL, OPT_THREADS},
        {"seed", required_argument, NULL, OPT_SEED},
        {"eval-every", required_argument, NULL, OPT_EVAL_EVERY},
        {"val-fraction", required_argument, NULL, OPT_VAL_FRACTION},
        {"val", required_argument, NULL, OPT_VAL},
        {"quiet", no_argument, NULL, 'q'},
        {"help", no_argument, NULL, 'h'},
        {NULL, 0, NULL, 0},
    };
    const long big = 1L << 20;
    int rc = 0, c;
    while (rc == 0 && (c = getopt_long(argc, argv, "qh", longopts, NULL)) != -1) {
        switch (c) {
        case OPT_STEPS: rc = ex_parse_int("steps", optarg, 1, INT_MAX, &o->steps); break;
        case OPT_BATCH: rc = ex_parse_int("batch", optarg, 1, big, &o->batch); break;
        case OPT_SEQ: rc = ex_parse_int("seq", optarg, 1, big, &o->seq); break;
        case OPT_LAYERS: rc = ex_parse_int("layers", optarg, 1, 4096, &o->layers); break;
        case OPT_D_MODEL: rc = ex_parse_int("d-model", optarg, 1, big, &o->d_model); break;
        case OPT_HEADS: rc = ex_parse_int("heads", optarg, 1, 4096, &o->heads); break;
        case OPT_KV_HEADS: rc = ex_parse_int("kv-heads", optarg, 1, 4096, &o->kv_heads); break;
        case OPT_HEAD_DIM: rc = ex_parse_int("head-dim", optarg, 2, 65536, &o->head_dim); break;
        case OPT_D_FF: rc = ex_parse_int("d-ff", optarg, 1, big, &o->d_ff); break;
        case OPT_LR: rc = parse_float("lr", optarg, 0.0f, 10.0f, &o->lr); break;
        case OPT_WARMUP: rc = ex_parse_int("warmup", optarg, 0, INT_MAX, &o->warmup); break;
        case OPT_PLACEMENT:
            if (lattice_norm_placement_from_name(optarg, &o->placement) != LATTICE_OK) {
                fprintf(stderr, PROG ": --placement: '%s' is not pre, post or peri\n", optarg);
                rc = -1;
            }
            break;
        case OPT_BACKEND: o->backend = optarg; break;
        case OPT_THREADS: rc = ex_parse_int("threads", optarg, 1, 4096, &o->threads); break;
        case OPT_SEED: rc = parse_u64("seed", optarg, &o->seed); break;
        case OPT_EVAL_EVERY: rc = ex_parse_int("eval-every", optarg, 0, INT_MAX, &o->eval_every); break;
        case OPT_VAL_FRACTION:
            rc = parse_float("val-fraction", optarg, 0.0f, 0.99f, &o->val_fraction);
            break;
        case OPT_VAL: o->val_path = optarg; break;
        case 'q': o->quiet = 1; break;
        case 'h': usage(stdout); return 1;
        default: rc = -1; break; /* getopt_long has printed why */
        }
    }
    if (rc)
        return -1;
    if (optind != argc - 1) {
        fprintf(stderr, PROG ": %s\n", optind >= argc ? "no input file" : "exactly one input file");
        usage(stderr);
        return -1;
    }
    o->path = argv[optind];

    if (o->kv_heads == 0)
        o->kv_heads = o->heads;
    if (o->head_dim == 0) {
        if (o->d_model % o->heads || (o->d_model / o->heads) % 2) {
            fprintf(stderr,
                    PROG ": d_model %d / heads %d is not an even whole number: give --head-dim\n",
                    o->d_model, o->heads);
            return -1;
        }
        o->head_dim = o->d_model / o->heads;
    }
    if (o->d_ff == 0)
        o->d_ff = 3 * o->d_model;
    if (o->eval_every < 0)
        o->eval_every = o->steps / 5;
    if (o->val_path && o->val_fraction > 0.0f) {
        fprintf(stderr, PROG ": give either --val or --val-fraction, not both\n");
        return -1;
    }
    if (o->val_fraction < 0.0f)
        o->val_fraction = o->val_path ? 0.0f : 0.1f;
    return 0;
}

/* ---- output ------------------------------------------------------------- */

typedef struct progress {
    int tty;   /* stderr is a terminal: one line rewritten in place */
    int shown; /* a partial line is on the terminal */
    int quiet;
    double last_draw;
} progress;

/* Remove the live line so that other output starts on a clean line. */
static void progress_clear(progress *pr)
{
    if (pr->shown) {
        fprintf(stderr, "\r%*s\r", 79, "");
        fflush(stderr);
        pr->shown = 0;
    }
}

static void progress_update(progress *pr, int step, int steps, float loss, double tok_per_s,
                            double eta_s)
{
    if (pr->quiet)
        return;
    char eta[32];
    ex_format_duration(eta, sizeof eta, eta_s);
    if (pr->tty) {
        double t = ex_now();
        if (step != steps && t - pr->last_draw < 0.1)
            return;
        pr->last_draw = t;
        fprintf(stderr, "\rstep %d/%d  loss %.4f  %.0f tok/s  ETA %s   ", step, steps, loss,
                tok_per_s, eta);
        fflush(stderr);
        pr->shown = 1;
        if (step == steps) {
            fputc('\n', stderr);
            pr->shown = 0;
        }
    } else {
        int every = steps >= 10 ? steps / 10 : 1;
        if (step == 1 || step % every == 0 || step == steps)
            fprintf(stderr, "step %d/%d loss %.4f tok/s %.0f eta %s\n", step, steps, loss,
                    tok_per_s, eta);
    }
}

/* Print a failed call's status and message (NULL: the library's last error,
 * which says why); returns the exit code. */
static int fail(progress *pr, const char *what, lattice_status st, const char *detail)
{
    if (!detail)
        detail = lattice_last_error();
    progress_clear(pr);
    fprintf(stderr, PROG ": %s: %s%s%s\n", what, lattice_status_string(st),
            detail && *detail ? ": " : "", detail ? detail : "");
    return 1;
}

/* ---- evaluation --------------------------------------------------------- */

/* Mean cross-entropy over the whole validation split, weighted by counted tokens. */
static lattice_status evaluate(lattice_model *model, lattice_data *data, double *mean_loss,
                               const char **what, const char **detail)
{
    double sum = 0.0;
    int64_t count = 0;
    const int64_t n_batches = lattice_data_get_n_val_batches(data);
    for (int64_t i = 0; i < n_batches; i++) {
        lattice_data_batch b;
        lattice_status st = lattice_data_get_val_batch(data, i, &b);
        if (st != LATTICE_OK) {
            *what = "validation batch";
            *detail = lattice_data_errmsg(data);
            return st;
        }
        float loss = NAN;
        int64_t n;
        if ((st = lattice_model_forward(model, b.tokens, b.batch, b.seq)) != LATTICE_OK)
            *what = "validation forward";
        else if ((st = lattice_model_cross_entropy(model, b.targets, b.mask, &loss, &n)) != LATTICE_OK)
            *what = "validation cross-entropy";
        if (st != LATTICE_OK) {
            *detail = lattice_model_errmsg(model);
            return st;
        }
        sum += (double)loss * (double)n;
        count += n;
    }
    *mean_loss = count ? sum / (double)count : NAN;
    return LATTICE_OK;
}

/* ---- main --------------------------------------------------------------- */

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    options o = {
        .steps = 300, .batch = 8, .seq = 128, .layers = 4, .d_model = 128, .heads = 4,
        .lr = 1e-3f, .warmup = 30, .placement = LATTICE_NORM_PLACEMENT_PRE, .backend = "default",
        .threads = 2, .seed = 1, .eval_every = -1, .val_fraction = -1.0f,
    };
    int prc = parse_options(argc, argv, &o);
    if (prc)
        return prc > 0 ? 0 : 2;

    progress pr = {.tty = isatty(STDERR_FILENO), .quiet = o.quiet};
    int rc = 1;
    float *recent = NULL;
    lattice_data *data = NULL;
    lattice_backend *backend = NULL;
    lattice_norm *norm = NULL;
    lattice_model *model = NULL;
    lattice_optim *optim = NULL;
    lattice_status st;
    char why[LATTICE_ERRMSG_SIZE];

    /* The defaults are byte-level text: vocabulary 257 (256 bytes and the
     * boundary token), "\f" between documents, long documents split. */
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.batch_size = o.batch;
    dp.seq_len = o.seq;
    dp.split_long = 1;
    dp.val_fraction = o.val_fraction;
    dp.val_path = o.val_path;
    dp.seed = o.seed;
    if ((st = lattice_data_create_text(o.path, &dp, &data, why)) != LATTICE_OK) {
        fprintf(stderr, PROG ": %s: %s: %s%s\n", o.path, lattice_status_string(st), why,
                strstr(why, "no training document") ? " (try --val-fraction 0 or --val FILE)" : "");
        goto out;
    }
    const int64_t n_val_batches = lattice_data_get_n_val_batches(data);

    st = ex_backend_create(o.backend, &backend);
    if (st != LATTICE_OK) {
        fprintf(stderr, PROG ": backend '%s': %s%s\n", o.backend, lattice_status_string(st),
                st == LATTICE_ERR_UNSUPPORTED ? " (this build has no BLIS)" :
                st == LATTICE_ERR_NOT_FOUND ? " (use ref, blis, openblas or default)" : "");
        goto out;
    }
    if ((st = lattice_backend_set_threads(backend, o.threads)) != LATTICE_OK) {
        rc = fail(&pr, "set threads", st, NULL);
        goto out;
    }
    {
        /* say which GEMM kernels run: reference-speed kernels must never go unnoticed */
        lattice_backend_info bi;
        bi.size = sizeof bi;
        if (lattice_backend_get_info(backend, &bi) == LATTICE_OK)
            fprintf(stderr, PROG ": backend %s%s: %s, %s kernels%s, %d threads%s%s\n", bi.name,
                    ex_backend_origin(o.backend), bi.library, bi.kernels,
                    bi.optimised ? "" : " (NOT optimised for this CPU)", o.threads,
                    bi.reason[0] ? "; " : "", bi.reason);
    }
    if (n_val_batches == 0)
        fprintf(stderr, PROG ": note: no validation split (--val-fraction 0): val_loss is nan\n");
    if ((st = lattice_norm_create(o.placement, LATTICE_NORM_KIND_RMS, 1e-6f, &norm)) != LATTICE_OK) {
        rc = fail(&pr, "norm", st, NULL);
        goto out;
    }

    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.vocab_size = dp.vocab_size;
    mp.d_model = o.d_model;
    mp.n_layers = o.layers;
    mp.n_active_layers = o.layers;
    mp.n_heads = o.heads;
    mp.n_kv_heads = o.kv_heads;
    mp.head_dim = o.head_dim;
    mp.d_ff = o.d_ff;
    mp.max_batch = o.batch;
    mp.max_seq = o.seq;
    mp.seed = o.seed;
    st = lattice_model_params_check(&mp, why);
    if (st == LATTICE_OK)
        st = lattice_model_create(&mp, norm, backend, &model);
    if (st != LATTICE_OK) {
        progress_clear(&pr);
        fprintf(stderr, PROG ": model: %s: %s\n", lattice_status_string(st),
                why[0] ? why : "could not create the model");
        goto out;
    }
    lattice_norm_destroy(norm); /* the model keeps a copy */
    norm = NULL;

    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = o.lr;
    op.min_lr = o.lr / 10.0f;
    op.warmup_steps = o.warmup;
    op.total_steps = o.steps;
    op.clip_norm = 1.0f;
    if ((st = lattice_optim_create(model, &op, &optim)) != LATTICE_OK) {
        rc = fail(&pr, "optimizer", st, NULL);
        goto out;
    }

    recent = calloc(LOSS_WINDOW, sizeof(*recent));
    if (!recent) {
        fprintf(stderr, PROG ": out of memory\n");
        goto out;
    }

    if (!o.quiet) {
        printf("# %s: %lld rows of at most %d tokens (%lld train, %lld validation), "
               "%lld tokens\n", o.path,
               (long long)(lattice_data_get_n_documents(data, LATTICE_DATA_SPLIT_TRAIN) +
                           lattice_data_get_n_documents(data, LATTICE_DATA_SPLIT_VAL)),
               o.seq + 1, (long long)lattice_data_get_n_documents(data, LATTICE_DATA_SPLIT_TRAIN),
               (long long)lattice_data_get_n_documents(data, LATTICE_DATA_SPLIT_VAL),
               (long long)(lattice_data_get_n_tokens(data, LATTICE_DATA_SPLIT_TRAIN) +
                           lattice_data_get_n_tokens(data, LATTICE_DATA_SPLIT_VAL)));
        printf("# model: %d layers, d_model %d, %d heads (%d kv) of %d, d_ff %d, %s-norm, "
               "%.2fM parameters\n",
               o.layers, o.d_model, o.heads, o.kv_heads, o.head_dim, o.d_ff,
               lattice_norm_placement_name(o.placement),
               (double)lattice_model_get_n_params(model) / 1e6);
        printf("# training: %d steps of %d x %d tokens, lr %g (warmup %d), backend %s, "
               "%d threads, seed %llu\n",
               o.steps, o.batch, o.seq, (double)o.lr, o.warmup, lattice_backend_get_name(backend),
               o.threads, (unsigned long long)o.seed);
        fflush(stdout);
    }

    double train_s = 0.0, val_loss = NAN;
    int64_t trained_tokens = 0;
    const char *what = NULL, *detail = NULL;
    for (int step = 1; step <= o.steps; step++) {
        double t0 = ex_now();
        lattice_data_batch b;
        float loss = NAN;
        int64_t counted = 0;
        if ((st = lattice_data_next(data, &b)) != LATTICE_OK) {
            what = "next batch";
        } else if ((st = lattice_model_forward(model, b.tokens, b.batch, b.seq)) != LATTICE_OK) {
            what = "forward";
        } else if ((st = lattice_model_cross_entropy(model, b.targets, b.mask, &loss, &counted)) !=
                   LATTICE_OK) {
            what = "cross-entropy";
        } else if ((st = lattice_model_backward(model)) != LATTICE_OK) {
            what = "backward";
        } else if ((st = lattice_optim_step(optim, NULL)) != LATTICE_OK) {
            what = "optimizer";
        }
        if (st != LATTICE_OK) {
            detail = what[0] == 'n' ? lattice_data_errmsg(data)
                     : what[0] == 'o' ? lattice_optim_errmsg(optim)
                                      : lattice_model_errmsg(model);
            char buf[64];
            snprintf(buf, sizeof buf, "step %d: %s", step, what);
            rc = fail(&pr, buf, st, detail);
            goto out;
        }
        train_s += ex_now() - t0;
        trained_tokens += counted;
        recent[(step - 1) % LOSS_WINDOW] = loss;

        double tok_per_s = (double)trained_tokens / train_s;
        progress_update(&pr, step, o.steps, loss, tok_per_s, train_s / step * (o.steps - step));

        if (n_val_batches && ((o.eval_every && step % o.eval_every == 0) || step == o.steps)) {
            if ((st = evaluate(model, data, &val_loss, &what, &detail)) != LATTICE_OK) {
                rc = fail(&pr, what, st, detail);
                goto out;
            }
            if (!o.quiet) {
                progress_clear(&pr);
                printf("step %d val_loss %.4f\n", step, val_loss);
                fflush(stdout);
            }
        }
    }

    int n_recent = o.steps < LOSS_WINDOW ? o.steps : LOSS_WINDOW;
    double train_loss = 0.0;
    for (int i = 0; i < n_recent; i++)
        train_loss += recent[i];
    train_loss /= n_recent;
    progress_clear(&pr);
    printf("final train_loss %.4f val_loss %.4f tokens_per_s %.0f\n", train_loss, val_loss,
           (double)trained_tokens / train_s);
    rc = 0;

out:
    lattice_optim_destroy(optim);
    lattice_model_destroy(model);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(backend);
    lattice_data_destroy(data);
    free(recent);
    return rc;
}
