/* Reproduce "Rethinking Normalization Placement for LLMs: Post-Norm under
 * Curriculum Depth Growing" (arXiv 2608.13156) end to end: train a teacher,
 * distil it into 9-layer students under every arm of the paper with paired
 * seeds, and write the tables, curves and diagnostics.
 *
 *   reproduce --preset examples/reproduce/presets/quick.json [--out DIR]
 *
 * A preset is a JSON file (copy one and edit it). Everything the run measures
 * lands in DIR: results.json, curves.csv, report.md, and plots when gnuplot is
 * installed. */
#define _GNU_SOURCE
#include <lattice/lattice.h>

#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <json-c/json.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#ifdef LATTICE_HAVE_MPI
#include <mpi.h>
#endif

#define PROG "reproduce"

#include "../example_util.h"
#define MAX_SEEDS 16
#define MAX_JOBS 256
#define MAX_POINTS 4096

/* ---- the preset -------------------------------------------------------------- */

#define MAX_ARMS 24
#define MAX_PHASES 16

/* An arm: a placement, a schedule (a preset or explicit phases), how appended
 * blocks start, what the freeze arm freezes, how the data iterator behaves at
 * phase starts, and the init gain. */
typedef struct arm {
    char name[48];
    lattice_norm_placement placement;
    double residual_scale;        /* post-norm's a (DeepNorm-style); 1 for plain */
    int schedule;                 /* a lattice_schedule_preset, or -1 for explicit phases */
    lattice_schedule_phase phases[MAX_PHASES];
    int n_phases;                 /* explicit phases */
    lattice_schedule_block_init block_init;
    int train_boundary;           /* -1: the schedule's rule; 0/1 forces it on phases after the first */
    int replay;                   /* 1: every phase restarts at the shard's beginning */
    double init_gain;             /* <= 0: the preset's student gain */
} arm;

typedef struct preset {
    char name[64], train[1024], val[1024];
    int seq_len, batch, split_long;
    int t_layers, t_steps, t_warmup;
    double t_lr, t_init_std;
    int d_model, heads, kv_heads, head_dim, d_ff, blocks, block_size, qk_norm;
    double rope_theta, init_gain, init_std;
    int steps_per_phase, warmup, eval_every, eval_batches, final_eval_batches;
    double lr, min_lr, clip, alpha, gamma, tau;
    int seeds, threads;
    arm arms[MAX_ARMS];
    int n_arms;
    json_object *json; /* the whole preset, recorded with the results */
} preset;

/* The paper's arms by name. Grow, freeze and single-block replay one shard
 * per phase (the paper's rule); the budget controls read on into fresh data
 * (the paper: "fresh data"). */
static const struct {
    const char *name;
    lattice_norm_placement placement;
    lattice_schedule_preset schedule;
    int replay;
} named_arms[] = {
    {"pre-joint", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"post-joint", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"peri-joint", LATTICE_NORM_PLACEMENT_PERI, LATTICE_SCHEDULE_PRESET_JOINT, 1},
    {"pre-grow", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"post-grow", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"peri-grow", LATTICE_NORM_PLACEMENT_PERI, LATTICE_SCHEDULE_PRESET_GROW, 1},
    {"pre-single", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1},
    {"post-single", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1},
    {"pre-freeze", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_FREEZE, 1},
    {"post-freeze", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_FREEZE, 1},
    {"pre-joint-active", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 0},
    {"post-joint-active", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 0},
    {"pre-joint-total", LATTICE_NORM_PLACEMENT_PRE, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 0},
    {"post-joint-total", LATTICE_NORM_PLACEMENT_POST, LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 0},
};
#define N_NAMED ((int)(sizeof named_arms / sizeof named_arms[0]))

static const char *const schedule_names[] = {"joint", "grow", "freeze", "single", "joint-active",
                                             "joint-total"};
static const char *const placement_names[] = {"pre", "post", "peri"};
static const char *const block_init_names[] = {"random", "identity", "copy"};

/* This process's place in an MPI job: rank 0 of 1 when started without a
 * launcher (or built without MPI). */
static int rank = 0, n_ranks = 1;
/* The name messages start with: the program's, and its rank when there are several. */
static char who[48] = PROG;
#ifdef LATTICE_HAVE_MPI
static int mpi_on; /* MPI_Init was called */
/* A rank other than 0 that rank 0 has let through its gate: rank 0 now waits
 * for it to ask for runs, so it may not end quietly until it has been told
 * that none are left. */
static int owes_rank0;
#endif

/* A message on stderr, prefixed with who. */
__attribute__((format(printf, 1, 2))) static void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    va_end(ap);
}

/* The message, then the end of the whole job: with several ranks MPI_Abort,
 * so that no rank waits for one that has gone. */
__attribute__((format(printf, 1, 2), noreturn)) static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "%s: ", who);
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    fflush(stderr);
#ifdef LATTICE_HAVE_MPI
    if (mpi_on && n_ranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (mpi_on)
        MPI_Finalize();
#endif
    exit(1);
}

/* The paper's default gain: std 0.02 at width 4096 (0.02 * sqrt(4096)). */
#define PAPER_GAIN 1.28
/* The paper's LR per unit of init std: 1e-4 at std 0.02. */
#define PAPER_LR_PER_STD (1e-4 / 0.02)

/* Every key a preset may hold, by path; anything else is an error. "*" marks
 * the elements of a list. */
static const char *const known_keys[] = {
    "name", "about", "seeds", "threads", "data", "teacher", "student", "train", "arms",
    "data.train", "data.val", "data.seq_len", "data.batch_size", "data.split_long",
    "teacher.layers", "teacher.steps", "teacher.lr", "teacher.warmup", "teacher.init_gain",
    "teacher.init_std",
    "student.d_model", "student.n_heads", "student.n_kv_heads", "student.head_dim", "student.d_ff",
    "student.blocks", "student.block_size", "student.qk_norm", "student.rope_theta",
    "student.init_gain", "student.init_std",
    "train.steps_per_phase", "train.lr", "train.lr_per_std", "train.min_lr", "train.warmup",
    "train.clip", "train.alpha", "train.gamma", "train.tau", "train.eval_every",
    "train.eval_batches", "train.final_eval_batches",
    "arms.*.name", "arms.*.placement", "arms.*.residual_scale", "arms.*.schedule", "arms.*.phases",
    "arms.*.block_init", "arms.*.train_boundary", "arms.*.data", "arms.*.init_gain",
    "arms.*.phases.*.steps", "arms.*.phases.*.tokens", "arms.*.phases.*.active_layers",
    "arms.*.phases.*.train_from", "arms.*.phases.*.reset_optimizer", "arms.*.phases.*.block_init",
    "arms.*.phases.*.rewind_data", "arms.*.phases.*.train_boundary",
};

static void check_keys(json_object *o, const char *path, const char *pattern)
{
    if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            char p2[256], pat2[256];
            snprintf(p2, sizeof p2, "%s[%zu]", path, i);
            snprintf(pat2, sizeof pat2, "%s.*", pattern);
            check_keys(json_object_array_get_idx(o, i), p2, pat2);
        }
        return;
    }
    if (!json_object_is_type(o, json_type_object))
        return;
    json_object_object_foreach(o, key, val)
    {
        char pat[256], full[256];
        snprintf(pat, sizeof pat, "%s%s%s", pattern, pattern[0] ? "." : "", key);
        snprintf(full, sizeof full, "%s%s%s", path, path[0] ? "." : "", key);
        int ok = 0;
        for (size_t k = 0; k < sizeof known_keys / sizeof known_keys[0] && !ok; k++)
            ok = strcmp(known_keys[k], pat) == 0;
        if (!ok)
            die("preset: unknown key '%s' (a typo? see examples/reproduce/presets/README.md)", full);
        check_keys(val, full, pat);
    }
}

static json_object *member(json_object *o, const char *path)
{
    /* "a.b" walks nested objects */
    char buf[128];
    snprintf(buf, sizeof buf, "%s", path);
    json_object *cur = o;
    for (char *tok = strtok(buf, "."); tok; tok = strtok(NULL, ".")) {
        if (!cur || !json_object_is_type(cur, json_type_object) ||
            !json_object_object_get_ex(cur, tok, &cur))
            return NULL;
    }
    return cur;
}

static int get_i(json_object *o, const char *path, int fallback, int lo, int hi)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean))
        die("preset: %s must be an integer", path);
    int64_t x = json_object_get_int64(v);
    if (x < lo || x > hi)
        die("preset: %s = %lld outside %d..%d", path, (long long)x, lo, hi);
    return (int)x;
}

static double get_d(json_object *o, const char *path, double fallback)
{
    json_object *v = member(o, path);
    if (!v)
        return fallback;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        die("preset: %s must be a number", path);
    double x = json_object_get_double(v);
    if (!isfinite(x) || x < 0)
        die("preset: %s must be finite and >= 0", path);
    return x;
}

static void get_s(json_object *o, const char *path, char *dst, size_t n, const char *fallback)
{
    json_object *v = member(o, path);
    if (v && !json_object_is_type(v, json_type_string))
        die("preset: %s must be a string", path);
    snprintf(dst, n, "%s", v ? json_object_get_string(v) : fallback);
}

/* A string member that must be one of names[]; returns its index, or fallback when absent. */
static int get_enum(json_object *o, const char *key, const char *where, const char *const *names,
                    int n, int fallback)
{
    char s[64];
    if (!member(o, key))
        return fallback;
    get_s(o, key, s, sizeof s, "");
    for (int i = 0; i < n; i++)
        if (strcmp(s, names[i]) == 0)
            return i;
    char known[256] = "";
    for (int i = 0; i < n; i++)
        snprintf(known + strlen(known), sizeof known - strlen(known), "%s%s", i ? ", " : "", names[i]);
    die("preset: %s.%s = '%s' is not one of: %s", where, key, s, known);
    return -1;
}

/* A path in a preset is relative to the preset's own folder. */
static void resolve_path(char *dst, size_t n, const char *preset_path, const char *rel)
{
    if (rel[0] == '/') {
        snprintf(dst, n, "%s", rel);
        return;
    }
    const char *slash = strrchr(preset_path, '/');
    int dirlen = slash ? (int)(slash - preset_path) : 1;
    snprintf(dst, n, "%.*s/%s", dirlen, slash ? preset_path : ".", rel);
}

static void parse_arm(preset *p, json_object *v, int index)
{
    arm *a = &p->arms[p->n_arms];
    memset(a, 0, sizeof(*a));
    a->residual_scale = 1.0;
    a->train_boundary = -1;
    a->block_init = LATTICE_SCHEDULE_BLOCK_INIT_RANDOM;
    char where[64];
    snprintf(where, sizeof where, "arms[%d]", index);
    const char *name = json_object_is_type(v, json_type_string) ? json_object_get_string(v) : NULL;
    json_object *spec = json_object_is_type(v, json_type_object) ? v : NULL;
    if (!name && !spec)
        die("preset: %s must be an arm's name or an object", where);
    if (spec) {
        get_s(spec, "name", a->name, sizeof a->name, "");
        if (!a->name[0])
            die("preset: %s needs a name", where);
    } else {
        snprintf(a->name, sizeof a->name, "%s", name);
    }
    int named = -1;
    for (int i = 0; i < N_NAMED && named < 0; i++)
        if (strcmp(named_arms[i].name, a->name) == 0)
            named = i;
    if (!spec && named < 0)
        die("preset: unknown arm '%s' (known: pre-/post- joint, grow, single, freeze, joint-active, "
            "joint-total, peri-joint, peri-grow; or give an object with placement and schedule)",
            a->name);
    a->placement = named >= 0 ? named_arms[named].placement : LATTICE_NORM_PLACEMENT_PRE;
    a->schedule = named >= 0 ? (int)named_arms[named].schedule : -1;
    a->replay = named >= 0 ? named_arms[named].replay : 1;
    for (int i = 0; i < p->n_arms; i++)
        if (strcmp(p->arms[i].name, a->name) == 0)
            die("preset: arm '%s' is listed twice", a->name);
    if (spec) {
        a->placement = (lattice_norm_placement)get_enum(spec, "placement", where, placement_names, 3,
                                                        named >= 0 ? (int)a->placement : -1);
        if ((int)a->placement < 0)
            die("preset: %s needs a placement (pre, post or peri)", where);
        a->residual_scale = get_d(spec, "residual_scale", 1.0);
        if (a->residual_scale <= 0)
            die("preset: %s.residual_scale must be > 0", where);
        a->schedule = get_enum(spec, "schedule", where, schedule_names, 6, a->schedule);
        a->block_init = (lattice_schedule_block_init)get_enum(spec, "block_init", where, block_init_names, 3, 0);
        a->train_boundary = member(spec, "train_boundary") ? get_i(spec, "train_boundary", 1, 0, 1) : -1;
        static const char *const data_modes[] = {"continue", "replay"};
        a->replay = get_enum(spec, "data", where, data_modes, 2, a->replay);
        a->init_gain = get_d(spec, "init_gain", 0);
        json_object *ph = member(spec, "phases");
        if (ph) {
            if (!json_object_is_type(ph, json_type_array) || json_object_array_length(ph) == 0 ||
                json_object_array_length(ph) > MAX_PHASES)
                die("preset: %s.phases must be a list of 1..%d phases", where, MAX_PHASES);
            a->schedule = -1;
            const int L = p->blocks * p->block_size;
            for (size_t k = 0; k < json_object_array_length(ph); k++) {
                json_object *e = json_object_array_get_idx(ph, k);
                lattice_schedule_phase *f = &a->phases[a->n_phases++];
                lattice_schedule_phase_init(f);
                f->steps = get_i(e, "steps", member(e, "tokens") ? 0 : p->steps_per_phase, 0, 1 << 30);
                f->tokens = member(e, "tokens") ? (int64_t)get_d(e, "tokens", 0) : 0;
                f->active_layers = get_i(e, "active_layers", L, 1, L);
                f->train_from = get_i(e, "train_from", 0, 0, L - 1);
                f->reset_optimizer = get_i(e, "reset_optimizer", 1, 0, 1);
                f->block_init = (lattice_schedule_block_init)get_enum(e, "block_init", where, block_init_names,
                                                             3, (int)a->block_init);
                f->rewind_data = get_i(e, "rewind_data", k > 0 && a->replay, 0, 1);
                f->train_boundary = get_i(e, "train_boundary", 1, 0, 1);
            }
        } else if (a->schedule < 0) {
            die("preset: %s needs a schedule (%s, ...) or phases", where, schedule_names[0]);
        }
    }
    p->n_arms++;
}

static void load_preset(preset *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    json_object *o = json_object_from_file(path);
    if (!o || !json_object_is_type(o, json_type_object))
        die("cannot read the preset %s (missing, or not a JSON object)", path);
    check_keys(o, "", "");
    p->json = o;
    char rel[1024];
    get_s(o, "name", p->name, sizeof p->name, "custom");
    get_s(o, "data.train", rel, sizeof rel, "../../data/austen/train.txt");
    resolve_path(p->train, sizeof p->train, path, rel);
    get_s(o, "data.val", rel, sizeof rel, "../../data/austen/val.txt");
    resolve_path(p->val, sizeof p->val, path, rel);
    p->seq_len = get_i(o, "data.seq_len", 128, 2, 1 << 16);
    p->batch = get_i(o, "data.batch_size", 16, 1, 4096);
    p->split_long = get_i(o, "data.split_long", 1, 0, 1);
    p->d_model = get_i(o, "student.d_model", 128, 1, 1 << 16);
    p->heads = get_i(o, "student.n_heads", 4, 1, 1024);
    p->kv_heads = get_i(o, "student.n_kv_heads", p->heads, 1, 1024);
    p->head_dim = get_i(o, "student.head_dim", p->d_model / p->heads, 2, 1 << 16);
    p->d_ff = get_i(o, "student.d_ff", 3 * p->d_model, 1, 1 << 20);
    p->blocks = get_i(o, "student.blocks", 3, 1, 64);
    p->block_size = get_i(o, "student.block_size", 3, 1, 64);
    p->qk_norm = get_i(o, "student.qk_norm", 1, 0, 1);
    p->rope_theta = get_d(o, "student.rope_theta", 10000.0);
    /* Init: a gain (std = gain / sqrt(d_model)), the paper's by default, or a
     * std given outright. */
    p->init_gain = get_d(o, "student.init_gain", PAPER_GAIN);
    p->init_std = member(o, "student.init_std") ? get_d(o, "student.init_std", 0.02)
                                                : p->init_gain / sqrt((double)p->d_model);
    if (member(o, "student.init_std"))
        p->init_gain = p->init_std * sqrt((double)p->d_model);
    double t_gain = get_d(o, "teacher.init_gain", PAPER_GAIN);
    p->t_init_std = member(o, "teacher.init_std") ? get_d(o, "teacher.init_std", 0.02)
                                                  : t_gain / sqrt((double)p->d_model);
    if (!(p->init_std > 0) || !(p->t_init_std > 0))
        die("preset: the init std (or gain) must be > 0");
    p->t_layers = get_i(o, "teacher.layers", 12, 1, 1024);
    p->t_steps = get_i(o, "teacher.steps", 1000, 1, 1 << 30);
    /* LR in the paper's proportion to the init std unless given */
    double lr_per_std = get_d(o, "train.lr_per_std", PAPER_LR_PER_STD);
    p->t_lr = get_d(o, "teacher.lr", lr_per_std * p->t_init_std);
    p->t_warmup = get_i(o, "teacher.warmup", 50, 0, 1 << 30);
    p->steps_per_phase = get_i(o, "train.steps_per_phase", 300, 1, 1 << 30);
    p->lr = get_d(o, "train.lr", lr_per_std * p->init_std);
    p->min_lr = get_d(o, "train.min_lr", p->lr / 100);
    p->warmup = get_i(o, "train.warmup", 15, 0, 1 << 30);
    p->clip = get_d(o, "train.clip", 0.5);
    p->alpha = get_d(o, "train.alpha", 0.7);
    p->gamma = get_d(o, "train.gamma", 0.3);
    p->tau = get_d(o, "train.tau", 1.0);
    p->eval_every = get_i(o, "train.eval_every", 50, 0, 1 << 30);
    p->eval_batches = get_i(o, "train.eval_batches", 8, 0, 1 << 30);
    p->final_eval_batches = get_i(o, "train.final_eval_batches", 0, 0, 1 << 30);
    p->seeds = get_i(o, "seeds", 3, 1, MAX_SEEDS);
    p->threads = get_i(o, "threads", 2, 1, 256);
    json_object *arms = member(o, "arms");
    if (arms && !json_object_is_type(arms, json_type_array))
        die("preset: arms must be a list");
    int n = arms ? (int)json_object_array_length(arms) : 0;
    if (n > MAX_ARMS)
        die("preset: at most %d arms", MAX_ARMS);
    for (int i = 0; i < n; i++)
        parse_arm(p, json_object_array_get_idx(arms, i), i);
    if (!p->n_arms)
        die("preset: no arms to run");
}

/* The schedule of an arm: the preset's phases (or the explicit ones), with
 * the arm's block init, data rule and boundary freeze applied. */
static lattice_schedule *arm_schedule(const preset *p, const arm *a)
{
    lattice_schedule_phase ph[MAX_PHASES];
    int n = a->n_phases;
    if (a->schedule >= 0) {
        lattice_schedule *s;
        if (lattice_schedule_create_preset((lattice_schedule_preset)a->schedule, p->blocks,
                                           p->block_size, p->steps_per_phase, a->block_init,
                                           &s) != LATTICE_OK)
            die("arm %s: the schedule preset does not fit the student", a->name);
        n = lattice_schedule_get_n_phases(s);
        if (n > MAX_PHASES)
            die("arm %s: too many phases", a->name);
        for (int i = 0; i < n; i++) {
            lattice_schedule_phase_init(&ph[i]);
            lattice_schedule_get_phase(s, i, &ph[i]);
            ph[i].rewind_data = i > 0 && a->replay;
            if (i > 0 && a->train_boundary >= 0)
                ph[i].train_boundary = a->train_boundary;
        }
        lattice_schedule_destroy(s);
    } else {
        memcpy(ph, a->phases, sizeof(ph[0]) * (size_t)n);
    }
    lattice_schedule *s;
    if (lattice_schedule_create(&s) != LATTICE_OK)
        die("out of memory");
    for (int i = 0; i < n; i++)
        if (lattice_schedule_add_phase(s, &ph[i]) != LATTICE_OK)
            die("arm %s: phase %d: %s", a->name, i, lattice_schedule_errmsg(s));
    return s;
}

/* ---- results ------------------------------------------------------------------ */

typedef struct point {
    int64_t step, active_layer_tokens;
    int phase, active;
    double val_ce;
    /* the residual stream after the last active layer, on the fixed batch:
     * RMS std and kurtosis over all tokens, mean RMS of boundary and regular tokens */
    double rms_std, rms_kurt, rms_boundary, rms_regular;
} point;

typedef struct run_result {
    double final_val;
    point pts[MAX_POINTS];
    int n_pts;
    double *losses; /* per step */
    int *step_phase, *step_active; /* per step */
    int64_t *step_alt;             /* per step: active-layer tokens so far */
    int64_t n_steps, append_steps[8];
    int n_appends, is_append[8]; /* a phase change that adds layers (else a restart) */
    lattice_diag_response resp[8];
    double area2[8], area10[8]; /* excess loss per step over 2% and 10% of a phase */
    lattice_diag_removal removal[8];
    int n_blocks_measured;
    lattice_diag_rms_stats rms[8][3]; /* per block boundary: regular, boundary, all */
    int n_boundaries;
    double seconds, tokens_per_s;
} run_result;

/* ---- progress ------------------------------------------------------------------ */

typedef struct progress {
    const char *arm;
    int seed, run_index, n_runs, n_phases, tty;
    int64_t steps_done_before, steps_total_all, run_steps;
    double start, nonpad_tokens;
    run_result *res;
    int64_t last_print;
    /* boundary statistics at every evaluation */
    lattice_diag *diag;
    lattice_model *model;
    const int32_t *diag_tokens;
    const uint8_t *diag_mask;
    int diag_batch, diag_seq;
    /* rank 0 of several: hands out runs and takes in results between its own steps */
    struct dispatch *dispatch;
} progress;

#ifdef LATTICE_HAVE_MPI
static void serve_ranks(struct dispatch *d, int until_done);
#endif
/* LATTICE_REPRODUCE_FAIL_RANK=R (a test hook, honoured only with several
 * ranks): rank R fails at the second training step of its first run (or, when
 * it gets no run at all, when it is told so), so that the tests can watch one
 * rank's error end the whole job. */
static int fail_here;

/* Per-token RMS statistics after every active layer on the fixed batch:
 * out[(boundary * 3) + class], classes regular, document boundary, all. */
static lattice_status boundary_stats(lattice_diag *dg, lattice_model *m, const int32_t *tokens,
                                     const uint8_t *mask, int batch, int seq,
                                     lattice_diag_rms_stats *out, int out_len)
{
    const int active = lattice_model_get_active_layers(m);
    if ((active + 1) * 3 > out_len)
        return LATTICE_ERR_INVALID_ARGUMENT;
    return lattice_diag_boundary_scale(dg, tokens, mask, batch, seq, NULL, 2, out, (active + 1) * 3);
}

static int on_step(void *user, const lattice_trainer_metrics *m)
{
    progress *pr = user;
    run_result *r = pr->res;
    if (r->n_steps < pr->run_steps) {
        if (r->step_phase) {
            r->step_phase[r->n_steps] = m->phase;
            r->step_active[r->n_steps] = m->active_layers;
            r->step_alt[r->n_steps] = m->counters.active_layer_tokens;
        }
        r->losses[r->n_steps++] = m->loss;
    }
    if (fail_here && m->step >= 2)
        die("failing on purpose at step %lld of %s seed %d (LATTICE_REPRODUCE_FAIL_RANK=%d, a "
            "test hook)", (long long)m->step, pr->arm, pr->seed, rank);
#ifdef LATTICE_HAVE_MPI
    if (pr->dispatch)
        serve_ranks(pr->dispatch, 0);
#endif
    if (m->phase_end && r->n_appends < 8 && m->step < pr->run_steps)
        r->append_steps[r->n_appends++] = m->step; /* index of the next phase's first step */
    pr->nonpad_tokens += (double)m->counters.nonpad_tokens;
    double el = ex_now() - pr->start;
    int64_t done = pr->steps_done_before + m->step;
    double eta = el / (double)done * (double)(pr->steps_total_all - done);
    char e[32];
    ex_format_duration(e, sizeof e, eta);
    if (pr->tty) {
        fprintf(stderr, "\r\033[K[%d/%d] %-17s seed %d  phase %d/%d  step %lld/%lld  loss %.4f  "
                        "%.0f tok/s  ETA %s",
                pr->run_index, pr->n_runs, pr->arm, pr->seed, m->phase + 1, pr->n_phases,
                (long long)m->step, (long long)pr->run_steps, m->loss,
                m->seconds > 0 ? (double)(m->counters.tokens) / (double)m->step / m->seconds : 0.0,
                e);
        fflush(stderr);
    }
    return 0;
}

static int on_eval(void *user, const lattice_trainer_metrics *m)
{
    progress *pr = user;
    run_result *r = pr->res;
    if (r->n_pts >= MAX_POINTS)
        return 0;
    point pt = {m->step, m->counters.active_layer_tokens, m->phase, m->active_layers, m->val_ce,
                NAN, NAN, NAN, NAN};
    lattice_diag_rms_stats st[(256 + 1) * 3];
    if (pr->diag && boundary_stats(pr->diag, pr->model, pr->diag_tokens, pr->diag_mask,
                                   pr->diag_batch, pr->diag_seq, st, 257 * 3) == LATTICE_OK) {
        const lattice_diag_rms_stats *top = &st[m->active_layers * 3];
        pt.rms_std = top[2].std;
        pt.rms_kurt = top[2].kurtosis;
        pt.rms_boundary = top[1].mean;
        pt.rms_regular = top[0].mean;
    }
    r->pts[r->n_pts++] = pt;
    return 0;
}

/* ---- building blocks ------------------------------------------------------------ */

static void check(lattice_status st, const char *what, const char *detail)
{
    if (st != LATTICE_OK)
        die("%s: %s%s%s", what, lattice_status_string(st), detail && detail[0] ? ": " : "",
            detail ? detail : "");
}

static lattice_data *open_data(const preset *p, uint64_t seed)
{
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.batch_size = p->batch;
    dp.seq_len = p->seq_len;
    dp.split_long = p->split_long;
    dp.val_path = p->val;
    dp.seed = seed;
    lattice_data *d;
    char err[LATTICE_ERRMSG_SIZE];
    lattice_status st = lattice_data_create_text(p->train, &dp, &d, err);
    if (st == LATTICE_ERR_IO)
        die("%s (prepare the corpus first: python3 examples/data/prepare_austen.py)", err);
    check(st, "data", err);
    return d;
}

static lattice_model_params model_shape(const preset *p, int layers, double init_std, uint64_t seed)
{
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.vocab_size = 257;
    mp.d_model = p->d_model;
    mp.n_layers = layers;
    mp.n_active_layers = layers;
    mp.n_heads = p->heads;
    mp.n_kv_heads = p->kv_heads;
    mp.head_dim = p->head_dim;
    mp.d_ff = p->d_ff;
    mp.rope_theta = (float)p->rope_theta;
    mp.qk_norm = p->qk_norm;
    mp.max_batch = p->batch;
    mp.max_seq = p->seq_len;
    mp.seed = seed;
    mp.init_std = (float)init_std;
    return mp;
}

static lattice_model *new_model(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                                double residual_scale, int layers, double init_std, uint64_t seed)
{
    lattice_norm *norm;
    check(lattice_norm_create(pl, LATTICE_NORM_KIND_RMS, 1e-6f, &norm), "norm", NULL);
    if (residual_scale != 1.0)
        check(lattice_norm_set_residual_scale(norm, (float)residual_scale), "norm residual scale", NULL);
    lattice_model_params mp = model_shape(p, layers, init_std, seed);
    char err[LATTICE_ERRMSG_SIZE];
    check(lattice_model_params_check(&mp, err), "model", err);
    lattice_model *m;
    check(lattice_model_create(&mp, norm, be, &m), "model", NULL);
    lattice_norm_destroy(norm);
    return m;
}

static lattice_optim *new_optim(lattice_model *m, double lr, double min_lr, int warmup, int total,
                                double clip)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = (float)lr;
    op.min_lr = (float)min_lr;
    op.warmup_steps = warmup;
    op.total_steps = total;
    op.clip_norm = (float)clip;
    lattice_optim *o;
    check(lattice_optim_create(m, &op, &o), "optimizer", NULL);
    return o;
}

/* The teacher is cached in the output folder with the settings that made it. */
static lattice_model *get_teacher(const preset *p, lattice_backend *be, const char *dir, int retrain)
{
    char path[2048], meta[2048];
    snprintf(path, sizeof path, "%s/teacher.safetensors", dir);
    snprintf(meta, sizeof meta, "%s/teacher.json", dir);
    json_object *want = json_object_new_object();
    json_object_object_add(want, "teacher", json_object_get(member(p->json, "teacher")));
    json_object_object_add(want, "student", json_object_get(member(p->json, "student")));
    json_object_object_add(want, "data", json_object_get(member(p->json, "data")));
    /* the derived settings too: a default may change between versions */
    json_object_object_add(want, "init_std", json_object_new_double(p->t_init_std));
    json_object_object_add(want, "lr", json_object_new_double(p->t_lr));
    const char *want_s = json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN);
    json_object *have = retrain ? NULL : json_object_from_file(meta);
    int same = have && strcmp(json_object_to_json_string_ext(have, JSON_C_TO_STRING_PLAIN), want_s) == 0;
    json_object_put(have);
    lattice_model *t = NULL;
    if (same) {
        char err[LATTICE_ERRMSG_SIZE];
        if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) == LATTICE_OK) {
            say("teacher: reusing %s\n", path);
            json_object_put(want);
            return t;
        }
        say("teacher: cached file unusable (%s); training again\n", err);
    }
    t = new_model(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, p->t_layers, p->t_init_std, 1000);
    lattice_data *d = open_data(p, 1000);
    lattice_optim *o = new_optim(t, p->t_lr, p->t_lr / 10, p->t_warmup, p->t_steps, 1.0);
    lattice_schedule *s;
    check(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, p->t_layers, 1, p->t_steps,
                                         LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, &s),
          "schedule", NULL);
    run_result *r = calloc(1, sizeof(*r));
    r->losses = calloc((size_t)p->t_steps + 1, sizeof(double));
    progress pr = {0};
    pr.arm = "teacher";
    pr.n_runs = 0;
    pr.n_phases = 1;
    pr.tty = isatty(2);
    pr.steps_total_all = pr.run_steps = p->t_steps;
    pr.start = ex_now();
    pr.res = r;
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_batches = p->eval_batches;
    tp.on_step = on_step;
    tp.on_eval = on_eval;
    tp.user = &pr;
    lattice_trainer *tr;
    check(lattice_trainer_create(t, NULL, NULL, d, o, s, &tp, &tr), "teacher trainer", NULL);
    lattice_status st = lattice_trainer_run(tr);
    if (pr.tty)
        fputc('\n', stderr);
    check(st, "teacher training", lattice_trainer_errmsg(tr));
    say("teacher: %d layers, %d steps, val CE %.4f (%.0fs)\n", p->t_layers, p->t_steps,
        r->n_pts ? r->pts[r->n_pts - 1].val_ce : NAN, ex_now() - pr.start);
    check(lattice_model_save(t, path), "saving the teacher", lattice_model_errmsg(t));
    FILE *f = fopen(meta, "w");
    if (!f || fputs(want_s, f) < 0 || fclose(f) != 0)
        die("cannot write %s", meta);
    lattice_trainer_destroy(tr);
    lattice_schedule_destroy(s);
    lattice_optim_destroy(o);
    lattice_data_destroy(d);
    free(r->losses);
    free(r);
    json_object_put(want);
    return t;
}

/* ---- the teacher's go/no-go ------------------------------------------------------- */

/* The paper's mechanism rests on pre-norm residual streams growing massive
 * activations on document-boundary tokens. Measure them in the teacher. */
typedef struct gonogo {
    int n;                      /* boundaries measured (layers + 1) */
    double ratio[257], kurt[257], boundary[257], regular[257];
    double max_ratio;
} gonogo;

static void teacher_gonogo(const preset *p, lattice_model *teacher, gonogo *g)
{
    memset(g, 0, sizeof(*g));
    lattice_data *d = open_data(p, 1000);
    lattice_data_batch b;
    check(lattice_data_get_val_batch(d, 0, &b), "validation batch", lattice_data_errmsg(d));
    lattice_diag *dg;
    check(lattice_diag_create(teacher, &dg), "diagnostics", NULL);
    lattice_diag_rms_stats st[257 * 3];
    check(boundary_stats(dg, teacher, b.tokens, b.mask, b.batch, b.seq, st, 257 * 3),
          "teacher boundary scale", lattice_diag_errmsg(dg));
    g->n = lattice_model_get_active_layers(teacher) + 1;
    for (int k = 0; k < g->n; k++) {
        g->boundary[k] = st[k * 3 + 1].mean;
        g->regular[k] = st[k * 3].mean;
        g->kurt[k] = st[k * 3 + 2].kurtosis;
        g->ratio[k] = g->regular[k] > 0 ? g->boundary[k] / g->regular[k] : NAN;
        if (k > 0 && g->ratio[k] > g->max_ratio)
            g->max_ratio = g->ratio[k];
    }
    say("teacher go/no-go: boundary-token / regular RMS by layer:");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.2f", g->ratio[k]);
    fputc('\n', stderr);
    say("teacher kurtosis of per-token RMS by layer:");
    for (int k = 1; k < g->n; k++)
        fprintf(stderr, " %.1f", g->kurt[k]);
    fputc('\n', stderr);
    say("teacher go/no-go: %s (largest ratio %.2f; the paper's pre-norm streams reach 37x)\n",
        g->max_ratio >= 3 ? "GO, boundary tokens carry massive activations"
                          : "NO-GO, no massive boundary activations",
        g->max_ratio);
    lattice_diag_destroy(dg);
    lattice_data_destroy(d);
}

/* ---- one student run ------------------------------------------------------------ */

static int64_t response_window(const preset *p)
{
    const int64_t w = (p->steps_per_phase * 4 + 500) / 1000;
    return w > 3 ? w : 3;
}

static double arm_std(const preset *p, const arm *a)
{
    return a->init_gain > 0 ? a->init_gain / sqrt((double)p->d_model) : p->init_std;
}

static void run_arm(const preset *p, lattice_backend *be, lattice_model *teacher_model,
                    const arm *kind, int seed, progress *pr, run_result *r)
{
    const int L = p->blocks * p->block_size;
    lattice_schedule *s = arm_schedule(p, kind);
    /* Paired seeds: pre and post of one seed share initial weights and data order. */
    const double std = arm_std(p, kind);
    lattice_model *m = new_model(p, be, kind->placement, kind->residual_scale, L, std,
                                 100 + (uint64_t)seed);
    lattice_teacher *t;
    check(lattice_teacher_create_model(teacher_model, &t), "teacher", NULL);
    check(lattice_teacher_init_student(t, m), "student init", lattice_teacher_errmsg(t));
    lattice_distill_params dp;
    lattice_distill_params_init(&dp);
    dp.alpha = (float)p->alpha;
    dp.gamma = (float)p->gamma;
    dp.tau = (float)p->tau;
    lattice_distill *loss;
    check(lattice_distill_create(&dp, &loss), "loss", NULL);
    lattice_data *d = open_data(p, 200 + (uint64_t)seed);
    /* LR in proportion to this arm's init std when the arm sets its own gain */
    const double lr_scale = std / p->init_std;
    lattice_optim *o = new_optim(m, p->lr * lr_scale, p->min_lr * lr_scale, p->warmup,
                                 p->steps_per_phase, p->clip);
    int64_t total = lattice_schedule_get_total_steps(s);
    if (total <= 0)
        die("arm %s: every phase needs a step budget in the reproduction", kind->name);
    r->losses = calloc((size_t)total + 1, sizeof(double));
    r->step_phase = calloc((size_t)total + 1, sizeof(int));
    r->step_active = calloc((size_t)total + 1, sizeof(int));
    r->step_alt = calloc((size_t)total + 1, sizeof(int64_t));
    if (!r->losses || !r->step_phase || !r->step_active || !r->step_alt)
        die("out of memory");
    pr->res = r;
    pr->run_steps = total;
    pr->n_phases = lattice_schedule_get_n_phases(s);
    /* diagnostics on a fixed batch: the first validation batch */
    lattice_diag *dg;
    check(lattice_diag_create(m, &dg), "diagnostics", NULL);
    lattice_data_batch b;
    check(lattice_data_get_val_batch(d, 0, &b), "validation batch", lattice_data_errmsg(d));
    /* the batch's buffers may be reused by the data object: keep a copy */
    int32_t *fixed_tokens = malloc(sizeof(int32_t) * (size_t)b.batch * (size_t)b.seq);
    int32_t *fixed_targets = malloc(sizeof(int32_t) * (size_t)b.batch * (size_t)b.seq);
    uint8_t *fixed_mask = malloc((size_t)b.batch * (size_t)b.seq);
    if (!fixed_tokens || !fixed_targets || !fixed_mask)
        die("out of memory");
    memcpy(fixed_tokens, b.tokens, sizeof(int32_t) * (size_t)b.batch * (size_t)b.seq);
    memcpy(fixed_targets, b.targets, sizeof(int32_t) * (size_t)b.batch * (size_t)b.seq);
    memcpy(fixed_mask, b.mask, (size_t)b.batch * (size_t)b.seq);
    pr->diag = dg;
    pr->model = m;
    pr->diag_tokens = fixed_tokens;
    pr->diag_mask = fixed_mask;
    pr->diag_batch = b.batch;
    pr->diag_seq = b.seq;
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = p->eval_every;
    tp.eval_batches = p->eval_batches;
    tp.on_step = on_step;
    tp.on_eval = on_eval;
    tp.user = pr;
    lattice_trainer *tr;
    check(lattice_trainer_create(m, t, loss, d, o, s, &tp, &tr), "trainer", NULL);
    double t0 = ex_now();
    lattice_status st = lattice_trainer_run(tr);
    check(st, "training", lattice_trainer_errmsg(tr));
    r->seconds = ex_now() - t0;
    pr->diag = NULL;
    lattice_schedule_counters c;
    lattice_schedule_get_counters(s, &c);
    r->tokens_per_s = (double)c.tokens / r->seconds;
    /* the reported number: validation CE at the scheduled end, over the whole
     * held-out set unless the preset caps it */
    lattice_trainer_params full = tp;
    full.eval_batches = p->final_eval_batches;
    full.on_eval = NULL;
    lattice_trainer_destroy(tr);
    check(lattice_trainer_create(m, t, loss, d, o, s, &full, &tr), "trainer", NULL);
    check(lattice_trainer_evaluate(tr, &r->final_val), "evaluation", lattice_trainer_errmsg(tr));

    const int active = lattice_model_get_active_layers(m);
    lattice_diag_rms_stats stats[257 * 3];
    check(boundary_stats(dg, m, fixed_tokens, fixed_mask, b.batch, b.seq, stats, 257 * 3),
          "boundary scale", lattice_diag_errmsg(dg));
    r->n_boundaries = 0;
    for (int blk = 1; blk * p->block_size <= active && r->n_boundaries < 8; blk++, r->n_boundaries++)
        memcpy(r->rms[r->n_boundaries], &stats[blk * p->block_size * 3], sizeof r->rms[0]);
    r->n_blocks_measured = 0;
    for (int blk = 0; (blk + 1) * p->block_size <= active && blk < 8; blk++, r->n_blocks_measured++)
        check(lattice_diag_block_removal(dg, fixed_tokens, fixed_targets, fixed_mask, b.batch, b.seq,
                                         blk * p->block_size, p->block_size, &r->removal[blk]),
              "block removal", lattice_diag_errmsg(dg));
    /* The paper smooths over 200 of 50k steps (0.4% of a phase): the same
     * share here, at least 3 steps; areas per step over 2% and 10% of a phase. */
    const int64_t window = response_window(p);
    for (int a = 0; a < r->n_appends; a++) {
        /* the a-th phase change: from phase a to a + 1 */
        lattice_schedule_phase ph0, ph1;
        lattice_schedule_phase_init(&ph0);
        lattice_schedule_phase_init(&ph1);
        lattice_schedule_get_phase(s, a, &ph0);
        lattice_schedule_get_phase(s, a + 1, &ph1);
        r->is_append[a] = ph1.active_layers > ph0.active_layers;
        lattice_diag_response *rs = &r->resp[a];
        lattice_diag_response r2, r10;
        const int64_t h2 = p->steps_per_phase / 50 > 1 ? p->steps_per_phase / 50 : 1;
        const int64_t h10 = p->steps_per_phase / 10 > 1 ? p->steps_per_phase / 10 : 1;
        if (lattice_diag_loss_response(r->losses, r->n_steps, r->append_steps[a], window,
                                       p->steps_per_phase, rs) != LATTICE_OK ||
            lattice_diag_loss_response(r->losses, r->n_steps, r->append_steps[a], window, h2,
                                       &r2) != LATTICE_OK ||
            lattice_diag_loss_response(r->losses, r->n_steps, r->append_steps[a], window, h10,
                                       &r10) != LATTICE_OK) {
            memset(rs, 0, sizeof(*rs));
            r->area2[a] = r->area10[a] = NAN;
            continue;
        }
        r->area2[a] = r2.area / (double)h2;
        r->area10[a] = r10.area / (double)h10;
    }
    lattice_diag_destroy(dg);
    free(fixed_tokens);
    free(fixed_targets);
    free(fixed_mask);
    lattice_trainer_destroy(tr);
    lattice_optim_destroy(o);
    lattice_data_destroy(d);
    lattice_distill_destroy(loss);
    lattice_teacher_destroy(t);
    lattice_model_destroy(m);
    lattice_schedule_destroy(s);
}

/* ---- statistics ------------------------------------------------------------------ */

/* Two-sided 95% Student t quantiles, df 1..30. */
static double t95(int df)
{
    static const double q[] = {12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228,
                               2.201,  2.179, 2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086,
                               2.080,  2.074, 2.069, 2.064, 2.060, 2.056, 2.052, 2.048, 2.045, 2.042};
    return df < 1 ? NAN : df <= 30 ? q[df - 1] : 1.96;
}

typedef struct summary {
    double mean, sd, half; /* half-width of the 95% interval of the mean */
    int n;
} summary;

static summary summarise(const double *x, int n)
{
    summary s = {0, 0, NAN, n};
    for (int i = 0; i < n; i++)
        s.mean += x[i] / n;
    for (int i = 0; i < n && n > 1; i++)
        s.sd += (x[i] - s.mean) * (x[i] - s.mean) / (n - 1);
    s.sd = sqrt(s.sd);
    if (n > 1)
        s.half = t95(n - 1) * s.sd / sqrt((double)n);
    return s;
}

/* ---- output ------------------------------------------------------------------------ */

typedef struct study {
    const preset *p;
    run_result *res[MAX_ARMS][MAX_SEEDS]; /* [arm][seed] */
    gonogo teacher;
    int seeds_done; /* complete seeds (every arm ran) */
} study;

static int arm_index(const study *s, const char *name)
{
    for (int a = 0; a < s->p->n_arms; a++)
        if (strcmp(s->p->arms[a].name, name) == 0)
            return a;
    return -1;
}

/* Final val CE of an arm over seeds into x; returns the count (0 if the arm did not run). */
static int finals(const study *s, const char *name, double *x)
{
    int a = arm_index(s, name);
    if (a < 0)
        return 0;
    for (int i = 0; i < s->p->seeds; i++)
        x[i] = s->res[a][i]->final_val;
    return s->p->seeds;
}

/* Paired differences of two arms' finals (b - a); the count, 0 if either is missing. */
static int paired(const study *s, const char *arm_a, const char *arm_b, double *d)
{
    double x[MAX_SEEDS], y[MAX_SEEDS];
    if (!finals(s, arm_a, x) || !finals(s, arm_b, y))
        return 0;
    for (int i = 0; i < s->p->seeds; i++)
        d[i] = y[i] - x[i];
    return s->p->seeds;
}

static const struct {
    const char *arm;
    double value;
} paper_numbers[] = {{"pre-joint", 2.7603},  {"post-joint", 2.7607},        {"pre-grow", 2.7658},
                     {"post-grow", 2.7330},  {"pre-single", 2.9802},        {"post-single", 2.9846},
                     {"pre-freeze", 2.9104}, {"post-freeze", 2.8772},       {"post-joint-active", 2.7518},
                     {"post-joint-total", 2.7428}};

static double paper_value(const char *arm)
{
    for (size_t i = 0; i < sizeof paper_numbers / sizeof paper_numbers[0]; i++)
        if (strcmp(paper_numbers[i].arm, arm) == 0)
            return paper_numbers[i].value;
    return NAN;
}

static void fmt_num(char *buf, size_t n, double v, const char *f)
{
    if (isnan(v))
        snprintf(buf, n, "n/a");
    else
        snprintf(buf, n, f, v);
}

/* ---- verdicts ---------------------------------------------------------------------- */

/* Differences of validation CE smaller than this (nats/byte) count as parity. */
#define PARITY_TOL 0.01

enum { V_NA, V_YES, V_NO, V_UNSURE };
static const char *verdict_name(int v, int n)
{
    static char buf[64];
    const char *w = v == V_YES ? "reproduced" : v == V_NO ? "not reproduced" : v == V_UNSURE ? "inconclusive" : "not run";
    snprintf(buf, sizeof buf, "%s%s", w, v != V_NA && n == 1 ? " (1 seed)" : "");
    return buf;
}

/* A difference expected to have sign `sign` (-1 or +1): with seeds, the 95%
 * interval decides; with one seed, the parity tolerance does. */
static int directional(const summary *sm, int sign)
{
    if (sm->n == 0)
        return V_NA;
    if (sm->n >= 2) {
        double lo = sm->mean - sm->half, hi = sm->mean + sm->half;
        if ((sign < 0 && hi < 0) || (sign > 0 && lo > 0))
            return V_YES;
        if ((sign < 0 && lo > 0) || (sign > 0 && hi < 0))
            return V_NO;
        return V_UNSURE;
    }
    if (sm->mean * sign > PARITY_TOL)
        return V_YES;
    if (sm->mean * sign < -PARITY_TOL)
        return V_NO;
    return V_UNSURE;
}

/* Parity: |difference| within the tolerance. */
static int parity(const summary *sm)
{
    if (sm->n == 0)
        return V_NA;
    double half = sm->n >= 2 ? sm->half : 0;
    if (fabs(sm->mean) + half <= PARITY_TOL || (sm->n == 1 && fabs(sm->mean) <= PARITY_TOL))
        return V_YES;
    if (fabs(sm->mean) - half > PARITY_TOL * (sm->n == 1 ? 3 : 1))
        return V_NO;
    return V_UNSURE;
}

static void fmt_summary(char *buf, size_t n, const summary *sm)
{
    if (sm->n == 0)
        snprintf(buf, n, "n/a");
    else if (sm->n == 1 || isnan(sm->half))
        snprintf(buf, n, "%+.4f", sm->mean);
    else
        snprintf(buf, n, "%+.4f ± %.4f", sm->mean, sm->half);
}

/* Mean over seeds of the first phase change that appends layers, for one arm. */
static double mean_jump(const study *s, const char *name, int *found)
{
    int a = arm_index(s, name);
    *found = 0;
    if (a < 0)
        return NAN;
    double j = 0;
    for (int i = 0; i < s->p->seeds; i++) {
        const run_result *r = s->res[a][i];
        int k = 0;
        while (k < r->n_appends && !r->is_append[k])
            k++;
        if (k == r->n_appends)
            return NAN;
        j += r->resp[k].jump / s->p->seeds;
    }
    *found = 1;
    return j;
}

/* Mean over seeds of the last trajectory point's boundary/regular RMS ratio,
 * and of the RMS std at the first and last points. */
static int trajectory_ends(const study *s, const char *name, double *ratio, double *std0, double *std1)
{
    int a = arm_index(s, name);
    if (a < 0)
        return 0;
    *ratio = *std0 = *std1 = 0;
    for (int i = 0; i < s->p->seeds; i++) {
        const run_result *r = s->res[a][i];
        if (r->n_pts == 0)
            return 0;
        const point *first = &r->pts[0], *last = &r->pts[r->n_pts - 1];
        *ratio += last->rms_boundary / last->rms_regular / s->p->seeds;
        *std0 += first->rms_std / s->p->seeds;
        *std1 += last->rms_std / s->p->seeds;
    }
    return 1;
}

static void verdicts(FILE *f, const study *s)
{
    const preset *p = s->p;
    const int n = p->seeds;
    double d[MAX_SEEDS], e[MAX_SEEDS];
    char ours[160], b1[64], nseeds[160];
    if (n == 1)
        snprintf(nseeds, sizeof nseeds, "; with one seed there is no interval, so each verdict is "
                                        "marked (1 seed)");
    else
        snprintf(nseeds, sizeof nseeds, "; ± is the half-width of the 95%% t interval over %d seeds", n);
    fprintf(f, "## Verdict: what reproduced\n\n"
               "One row per finding of the paper. Differences are paired by seed (post minus pre, "
               "nats/byte)%s. Rules: a "
               "direction counts as reproduced when the interval excludes 0 on the paper's side "
               "(one seed: when it exceeds %.2f), parity when |difference| is within %.2f; the "
               "mechanism rows use the seed means with the thresholds named in the row.\n\n"
               "| finding | paper | ours | verdict |\n|---|---|---|---|\n",
            nseeds, PARITY_TOL, PARITY_TOL);
    int k;
    summary sj = {0}, sg = {0};
    /* 1 joint parity */
    if ((k = paired(s, "pre-joint", "post-joint", d)))
        sj = summarise(d, k);
    fmt_summary(ours, sizeof ours, &sj);
    fprintf(f, "| joint: post ≈ pre | +0.0004 | %s | %s |\n", ours, verdict_name(parity(&sj), n));
    /* 2 post-grow < pre-grow */
    if ((k = paired(s, "pre-grow", "post-grow", e)))
        sg = summarise(e, k);
    fmt_summary(ours, sizeof ours, &sg);
    fprintf(f, "| grow: post < pre | -0.0328 | %s | %s |\n", ours,
            verdict_name(directional(&sg, -1), n));
    /* 3 interaction */
    summary si = {0};
    if (sj.n && sg.n) {
        double x[MAX_SEEDS];
        for (int i = 0; i < n; i++)
            x[i] = e[i] - d[i];
        si = summarise(x, n);
    }
    fmt_summary(ours, sizeof ours, &si);
    fprintf(f, "| interaction I < 0 | -0.0332 | %s | %s |\n", ours,
            verdict_name(directional(&si, -1), n));
    /* 4 single-block parity */
    summary ss = {0};
    if ((k = paired(s, "pre-single", "post-single", d)))
        ss = summarise(d, k);
    fmt_summary(ours, sizeof ours, &ss);
    fprintf(f, "| single block: post ≈ pre | +0.0044 | %s | %s |\n", ours, verdict_name(parity(&ss), n));
    /* 5 freeze ordering */
    summary sf = {0};
    if ((k = paired(s, "pre-freeze", "post-freeze", d)))
        sf = summarise(d, k);
    fmt_summary(ours, sizeof ours, &sf);
    fprintf(f, "| freeze: post < pre | -0.0332 | %s | %s |\n", ours,
            verdict_name(directional(&sf, -1), n));
    /* 6 budget controls: post-joint matched on active-layer or total tokens stays worse than post-grow */
    summary sa = {0}, st = {0};
    if ((k = paired(s, "post-grow", "post-joint-active", d)))
        sa = summarise(d, k);
    if ((k = paired(s, "post-grow", "post-joint-total", d)))
        st = summarise(d, k);
    int va = directional(&sa, +1), vt = directional(&st, +1);
    int vb = (va == V_NA || vt == V_NA) ? V_NA : (va == V_NO || vt == V_NO) ? V_NO
                                                 : (va == V_YES && vt == V_YES) ? V_YES : V_UNSURE;
    char oa[64], ot[64];
    fmt_summary(oa, sizeof oa, &sa);
    fmt_summary(ot, sizeof ot, &st);
    fprintf(f, "| budget controls: post-joint matched on active-layer / total tokens - post-grow > 0 | "
               "+0.0188 / +0.0098 | %s / %s | %s |\n", oa, ot, verdict_name(vb, n));
    /* 7 loss jump */
    int f1, f2;
    double jpre = mean_jump(s, "pre-grow", &f1), jpost = mean_jump(s, "post-grow", &f2);
    int vj = !(f1 && f2) ? V_NA : (jpost > 0 && jpost > 3 * fmax(jpre, 0.005)) ? V_YES
                                  : jpost <= jpre ? V_NO : V_UNSURE;
    snprintf(ours, sizeof ours, f1 && f2 ? "pre %+.3f, post %+.3f" : "n/a", jpre, jpost);
    fprintf(f, "| loss jump at the first append: post >> pre (rule: post > 3 x pre) | pre 0.023, post 0.25-0.28 | %s | %s |\n",
            ours, verdict_name(vj, n));
    /* 8 block removal */
    int ag = arm_index(s, "pre-grow"), bg = arm_index(s, "post-grow");
    int vr = V_NA;
    if (ag >= 0 && bg >= 0) {
        const int nb = s->res[ag][0]->n_blocks_measured;
        double last_d = 0, last_a = 0, min_post = INFINITY, min_post_a = INFINITY;
        for (int i = 0; i < n; i++) {
            last_d += s->res[ag][i]->removal[nb - 1].dce / n;
            last_a += s->res[ag][i]->removal[nb - 1].angle / n;
        }
        for (int b = 0; b < s->res[bg][0]->n_blocks_measured; b++) {
            double md = 0, ma = 0;
            for (int i = 0; i < n; i++) {
                md += s->res[bg][i]->removal[b].dce / n;
                ma += s->res[bg][i]->removal[b].angle / n;
            }
            min_post = fmin(min_post, md);
            min_post_a = fmin(min_post_a, ma);
        }
        vr = (last_d < 0.25 * min_post && min_post_a > last_a) ? V_YES
             : last_d >= min_post ? V_NO : V_UNSURE;
        snprintf(ours, sizeof ours, "pre-grow last block dCE %.3f, angle %.3f; post-grow every block dCE >= %.3f, angle >= %.3f",
                 last_d, last_a, min_post, min_post_a);
    } else {
        snprintf(ours, sizeof ours, "n/a");
    }
    fprintf(f, "| block removal: pre-grow's last block a near no-op, every post-grow block effective (rule: pre's dCE < 1/4 of post's smallest) | pre last dCE 0.02, angle 0.031; post dCE >= 2.38, angle > 0.34 | %s | %s |\n",
            ours, verdict_name(vr, n));
    /* 9 boundary-token growth in pre-norm */
    double rpre, s0pre, s1pre, rpost, s0post, s1post;
    int vg = V_NA;
    const char *apre = arm_index(s, "pre-grow") >= 0 ? "pre-grow" : "pre-joint";
    const char *apost = arm_index(s, "post-grow") >= 0 ? "post-grow" : "post-joint";
    if (trajectory_ends(s, apre, &rpre, &s0pre, &s1pre) && trajectory_ends(s, apost, &rpost, &s0post, &s1post)) {
        vg = (rpre >= 3 && rpre >= 2 * rpost && s1pre > s0pre) ? V_YES : rpre < 1.5 ? V_NO : V_UNSURE;
        snprintf(ours, sizeof ours, "%s: boundary/regular RMS %.2fx, RMS std %.3f -> %.3f; %s: %.2fx, std %.3f -> %.3f",
                 apre, rpre, s0pre, s1pre, apost, rpost, s0post, s1post);
    } else {
        snprintf(ours, sizeof ours, "n/a");
    }
    fprintf(f, "| boundary tokens grow massive under pre-norm, not post (rule: pre ratio >= 3, >= 2x post's, std growing) | pre 37x, std 5.81 -> 19.98; post < 2.5, std 0.07-0.19 | %s | %s |\n",
            ours, verdict_name(vg, n));
    fmt_num(b1, sizeof b1, s->teacher.max_ratio, "%.2f");
    fprintf(f, "\nTeacher go/no-go: the largest boundary-token / regular RMS ratio over the teacher's "
               "layers is %s: %s.\n\n",
            b1, s->teacher.max_ratio >= 3 ? "GO (massive boundary activations present)"
                                          : "NO-GO (the teacher shows no massive boundary activations; "
                                            "the paper's mechanism has nothing to act on)");
}

static void report(FILE *f, const study *s)
{
    const preset *p = s->p;
    double x[MAX_SEEDS], y[MAX_SEEDS], d[MAX_SEEDS];
    char b1[64], b2[64];
    fprintf(f, "# Reproduction: preset `%s`\n\n", p->name);
    fprintf(f, "Students: %d layers (%d blocks x %d), d_model %d, %d heads (%d kv) of %d, d_ff %d, "
               "init std %.4g (gain %.3g / sqrt(d_model)), peak LR %.3g; %d steps per phase, batch "
               "%d x %d bytes; %d paired seed%s. Teacher: %d layers, init std %.4g, %d steps. "
               "Validation CE in nats per byte at the scheduled end, over %s.\n\n",
            p->blocks * p->block_size, p->blocks, p->block_size, p->d_model, p->heads, p->kv_heads,
            p->head_dim, p->d_ff, p->init_std, p->init_gain, p->lr, p->steps_per_phase, p->batch,
            p->seq_len, p->seeds, p->seeds == 1 ? "" : "s", p->t_layers, p->t_init_std, p->t_steps,
            p->final_eval_batches ? "the first batches of the held-out set (final_eval_batches)"
                                  : "the whole held-out set (Persuasion)");
    verdicts(f, s);
    fprintf(f, "## Teacher go/no-go\n\nPer-token RMS of the teacher's residual stream after each layer on the first validation batch; boundary tokens = position 0 of each row (the document-boundary token).\n\n| after layer | boundary RMS | regular RMS | ratio | kurtosis (all tokens) |\n|---|---|---|---|---|\n");
    for (int k = 1; k < s->teacher.n; k++)
        fprintf(f, "| %d | %.3f | %.3f | %.2f | %.1f |\n", k, s->teacher.boundary[k],
                s->teacher.regular[k], s->teacher.ratio[k], s->teacher.kurt[k]);
    fprintf(f, "\n## Every arm\n\n| arm | val CE (mean ± sd) | seeds | tokens/s | paper (nats/token, Qwen3 tokens) |\n|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        finals(s, p->arms[a].name, x);
        summary sm = summarise(x, p->seeds);
        double tps = 0;
        for (int i = 0; i < p->seeds; i++)
            tps += s->res[a][i]->tokens_per_s / p->seeds;
        fmt_num(b1, sizeof b1, paper_value(p->arms[a].name), "%.4f");
        fprintf(f, "| %s | %.4f ± %.4f | %d | %.0f | %s |\n", p->arms[a].name, sm.mean,
                isnan(sm.sd) ? 0.0 : sm.sd, p->seeds, tps, b1);
    }
    /* Table 1: post - pre per regime, paired by seed, and the interaction */
    fprintf(f, "\n## Table 1 analogue\n\n| regime | pre | post | post - pre (95%% CI) | paper post - pre |\n|---|---|---|---|---|\n");
    const char *regimes[2][3] = {{"joint", "pre-joint", "post-joint"}, {"grow", "pre-grow", "post-grow"}};
    double delta[2][MAX_SEEDS];
    int have[2] = {0, 0};
    for (int r = 0; r < 2; r++) {
        int n1 = finals(s, regimes[r][1], x), n2 = finals(s, regimes[r][2], y);
        if (!n1 || !n2)
            continue;
        have[r] = 1;
        for (int i = 0; i < p->seeds; i++)
            delta[r][i] = y[i] - x[i];
        summary sx = summarise(x, p->seeds), sy = summarise(y, p->seeds),
                sd = summarise(delta[r], p->seeds);
        fmt_num(b1, sizeof b1, sd.half, "%.4f");
        fprintf(f, "| %s | %.4f | %.4f | %+.4f ± %s | %+.4f |\n", regimes[r][0], sx.mean, sy.mean,
                sd.mean, b1, paper_value(regimes[r][2]) - paper_value(regimes[r][1]));
    }
    if (have[0] && have[1]) {
        for (int i = 0; i < p->seeds; i++)
            d[i] = delta[1][i] - delta[0][i];
        summary si = summarise(d, p->seeds);
        fmt_num(b1, sizeof b1, si.mean - si.half, "%+.4f");
        fmt_num(b2, sizeof b2, si.mean + si.half, "%+.4f");
        fprintf(f, "\nInteraction I = (post - pre | grow) - (post - pre | joint) = **%+.4f**, 95%% CI "
                   "[%s, %s] over %d seed%s (t interval of the per-seed interactions); paper: -0.0332.\n",
                si.mean, b1, b2, p->seeds, p->seeds == 1 ? "" : "s");
    }
    /* controls */
    fprintf(f, "\n## Controls\n\n| control | val CE (mean ± sd) | paper |\n|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        const char *nm = p->arms[a].name;
        if (strstr(nm, "-joint") && !strstr(nm, "joint-"))
            continue; /* the main arms are above */
        if (strstr(nm, "-grow") && !strchr(strstr(nm, "-grow") + 5, '-') && strncmp(nm, "peri", 4) != 0)
            continue;
        finals(s, nm, x);
        summary sm = summarise(x, p->seeds);
        fmt_num(b1, sizeof b1, paper_value(nm), "%.4f");
        fprintf(f, "| %s | %.4f ± %.4f | %s |\n", nm, sm.mean, isnan(sm.sd) ? 0.0 : sm.sd, b1);
    }
    /* loss response at phase changes */
    fprintf(f, "\n## Loss response at each phase change (mean over seeds)\n\n"
               "The paper smooths over 200 of 50k steps (0.4%% of a phase): here the baseline (mean "
               "training loss before the change) and the trailing mean span %lld steps. Jump: loss of "
               "the first step after the change minus the baseline. Area: excess over the baseline "
               "per step over the first 2%% and 10%% of a phase. Recovery: steps until the trailing "
               "mean is back at the baseline. An *append* adds layers; a *restart* (the budget "
               "controls) only restarts the LR. Paper: jump pre ~0.023, post ~0.25-0.28; recovery pre "
               "~100 steps, post ~20k (of 50k-step phases).\n\n"
               "| arm | change | kind | jump | area/step 2%% | area/step 10%% | recovery (steps) |\n|---|---|---|---|---|---|---|\n",
            (long long)response_window(p));
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_appends; k++) {
            double j = 0, a2 = 0, a10 = 0, rec = 0;
            int never = 0;
            for (int i = 0; i < p->seeds; i++) {
                j += s->res[a][i]->resp[k].jump / p->seeds;
                a2 += s->res[a][i]->area2[k] / p->seeds;
                a10 += s->res[a][i]->area10[k] / p->seeds;
                never |= s->res[a][i]->resp[k].recovery < 0;
                rec += (double)s->res[a][i]->resp[k].recovery / p->seeds;
            }
            if (never)
                snprintf(b1, sizeof b1, "not within the phase%s", p->seeds > 1 ? " (some seeds)" : "");
            else
                snprintf(b1, sizeof b1, "%.0f", rec);
            fprintf(f, "| %s | %d | %s | %+.4f | %.4f | %.4f | %s |\n", p->arms[a].name, k + 1,
                    r0->is_append[k] ? "append" : "restart", j, a2, a10, b1);
        }
    }
    /* block removal */
    fprintf(f, "\n## Block removal on a fixed batch (first validation batch)\n\nPaper: pre-grow's last block dCE 0.02, angle 0.031; every post-grow block dCE >= 2.38, angle > 0.34.\n\n| arm | block | dCE (mean ± sd) | angle (mean ± sd) |\n|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        for (int k = 0; k < s->res[a][0]->n_blocks_measured; k++) {
            for (int i = 0; i < p->seeds; i++) {
                x[i] = s->res[a][i]->removal[k].dce;
                y[i] = s->res[a][i]->removal[k].angle;
            }
            summary sd = summarise(x, p->seeds), sa = summarise(y, p->seeds);
            fprintf(f, "| %s | %d | %.4f ± %.4f | %.4f ± %.4f |\n", p->arms[a].name, k + 1, sd.mean,
                    isnan(sd.sd) ? 0.0 : sd.sd, sa.mean, isnan(sa.sd) ? 0.0 : sa.sd);
        }
    }
    /* boundary scale trajectory */
    fprintf(f, "\n## Boundary scale over training (mean over seeds)\n\nAt every evaluation, the per-token RMS of the residual stream after the last active layer on the first validation batch (the paper: a trajectory over growth checkpoints). Boundary tokens = position 0 of each row. Paper, pre-norm: std across tokens 5.81 -> 19.98, kurtosis > 2400, boundary tokens 119 -> 425 vs regular 7.1 -> 11.5; post-norm: std 0.07-0.19, both below 2.5.\n\n| arm | step | active layers | RMS std | kurtosis | RMS boundary | RMS regular | ratio |\n|---|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        const char *nm = p->arms[a].name;
        if (!strstr(nm, "-grow") && !(strstr(nm, "-joint") && !strstr(nm, "joint-")))
            continue;
        for (int k = 0; k < r0->n_pts; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const point *pt = &s->res[a][i]->pts[k < s->res[a][i]->n_pts ? k : s->res[a][i]->n_pts - 1];
                v[0] += pt->rms_std / p->seeds;
                v[1] += pt->rms_kurt / p->seeds;
                v[2] += pt->rms_boundary / p->seeds;
                v[3] += pt->rms_regular / p->seeds;
            }
            fprintf(f, "| %s | %lld | %d | %.3f | %.1f | %.3f | %.3f | %.2f |\n", nm,
                    (long long)r0->pts[k].step, r0->pts[k].active, v[0], v[1], v[2], v[3],
                    v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
    /* boundary scale at the end, by block boundary */
    fprintf(f, "\n## Boundary scale at block boundaries at the end (first validation batch, mean over seeds)\n\n| arm | after block | RMS std (all) | kurtosis (all) | RMS boundary | RMS regular | ratio |\n|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_boundaries; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const lattice_diag_rms_stats *st = s->res[a][i]->rms[k];
                v[0] += st[2].std / p->seeds;
                v[1] += st[2].kurtosis / p->seeds;
                v[2] += st[1].mean / p->seeds;
                v[3] += st[0].mean / p->seeds;
            }
            fprintf(f, "| %s | %d | %.3f | %.1f | %.3f | %.3f | %.1f |\n", p->arms[a].name, k + 1,
                    v[0], v[1], v[2], v[3], v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
}

/* One row per training step of every run: its training loss, and at the
 * steps that were evaluated, the validation CE and the boundary statistics
 * (empty elsewhere). */
static void write_csv(const char *path, const study *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "arm,seed,step,phase,active_layers,active_layer_tokens,train_loss,val_ce,rms_std,"
               "rms_kurtosis,rms_boundary,rms_regular\n");
    for (int a = 0; a < s->p->n_arms; a++)
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            int k = 0;
            for (int64_t t = 0; t < r->n_steps; t++) {
                fprintf(f, "%s,%d,%lld,%d,%d,%lld,%.6f", s->p->arms[a].name, i + 1, (long long)t + 1,
                        r->step_phase[t], r->step_active[t], (long long)r->step_alt[t], r->losses[t]);
                while (k < r->n_pts && r->pts[k].step < t + 1)
                    k++;
                if (k < r->n_pts && r->pts[k].step == t + 1)
                    fprintf(f, ",%.6f,%.6g,%.6g,%.6g,%.6g\n", r->pts[k].val_ce, r->pts[k].rms_std,
                            r->pts[k].rms_kurt, r->pts[k].rms_boundary, r->pts[k].rms_regular);
                else
                    fprintf(f, ",,,,,\n");
            }
        }
    fclose(f);
}

static json_object *jd(double v) { return isfinite(v) ? json_object_new_double(v) : NULL; }

static void write_json(const char *path, const study *s, double wall)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "preset", json_object_get(s->p->json));
    json_object_object_add(o, "lattice_version", json_object_new_string(lattice_version_string()));
    json_object_object_add(o, "wall_seconds", json_object_new_double(wall));
    json_object *tg = json_object_new_array();
    for (int k = 1; k < s->teacher.n; k++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "boundary_rms", jd(s->teacher.boundary[k]));
        json_object_object_add(e, "regular_rms", jd(s->teacher.regular[k]));
        json_object_object_add(e, "kurtosis", jd(s->teacher.kurt[k]));
        json_object_array_add(tg, e);
    }
    json_object_object_add(o, "teacher_boundary_scale", tg);
    json_object *arms = json_object_new_object();
    for (int a = 0; a < s->p->n_arms; a++) {
        json_object *seeds = json_object_new_array();
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            json_object *ro = json_object_new_object();
            json_object_object_add(ro, "val_ce", jd(r->final_val));
            json_object_object_add(ro, "seconds", json_object_new_double(r->seconds));
            json_object_object_add(ro, "tokens_per_s", json_object_new_double(r->tokens_per_s));
            json_object *rm = json_object_new_array(), *rs = json_object_new_array(),
                        *bs = json_object_new_array(), *tj = json_object_new_array();
            for (int k = 0; k < r->n_blocks_measured; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "dce", jd(r->removal[k].dce));
                json_object_object_add(e, "angle", jd(r->removal[k].angle));
                json_object_array_add(rm, e);
            }
            for (int k = 0; k < r->n_appends; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "step", json_object_new_int64(r->append_steps[k]));
                json_object_object_add(e, "kind", json_object_new_string(r->is_append[k] ? "append" : "restart"));
                json_object_object_add(e, "jump", jd(r->resp[k].jump));
                json_object_object_add(e, "area_per_step_2pct", jd(r->area2[k]));
                json_object_object_add(e, "area_per_step_10pct", jd(r->area10[k]));
                json_object_object_add(e, "recovery", json_object_new_int64(r->resp[k].recovery));
                json_object_array_add(rs, e);
            }
            for (int k = 0; k < r->n_boundaries; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "std_all", jd(r->rms[k][2].std));
                json_object_object_add(e, "kurtosis_all", jd(r->rms[k][2].kurtosis));
                json_object_object_add(e, "mean_boundary", jd(r->rms[k][1].mean));
                json_object_object_add(e, "mean_regular", jd(r->rms[k][0].mean));
                json_object_array_add(bs, e);
            }
            for (int k = 0; k < r->n_pts; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "step", json_object_new_int64(r->pts[k].step));
                json_object_object_add(e, "active_layers", json_object_new_int(r->pts[k].active));
                json_object_object_add(e, "val_ce", jd(r->pts[k].val_ce));
                json_object_object_add(e, "rms_std", jd(r->pts[k].rms_std));
                json_object_object_add(e, "rms_kurtosis", jd(r->pts[k].rms_kurt));
                json_object_object_add(e, "rms_boundary", jd(r->pts[k].rms_boundary));
                json_object_object_add(e, "rms_regular", jd(r->pts[k].rms_regular));
                json_object_array_add(tj, e);
            }
            json_object_object_add(ro, "block_removal", rm);
            json_object_object_add(ro, "loss_response", rs);
            json_object_object_add(ro, "boundary_scale", bs);
            json_object_object_add(ro, "trajectory", tj);
            json_object_array_add(seeds, ro);
        }
        json_object_object_add(arms, s->p->arms[a].name, seeds);
    }
    json_object_object_add(o, "arms", arms);
    if (json_object_to_file_ext(path, o, JSON_C_TO_STRING_PRETTY) != 0)
        die("cannot write %s", path);
    json_object_put(o);
}

/* Mean over seeds with a min..max band, per arm and evaluation, for the plots. */
static void write_bands(const char *path, const study *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "arm_index,step,active_layer_tokens,mean,min,max\n");
    for (int a = 0; a < s->p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_pts; k++) {
            double m = 0, lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < s->p->seeds; i++) {
                const run_result *r = s->res[a][i];
                double v = r->pts[k < r->n_pts ? k : r->n_pts - 1].val_ce;
                m += v / s->p->seeds;
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
            fprintf(f, "%d,%lld,%lld,%.6f,%.6f,%.6f\n", a, (long long)r0->pts[k].step,
                    (long long)r0->pts[k].active_layer_tokens, m, lo, hi);
        }
        fprintf(f, "\n\n"); /* one gnuplot data block per arm */
    }
    fclose(f);
}

/* Curves through gnuplot when it is installed (PNG and SVG): the mean over
 * seeds with a min-max band; colours by placement (pre blue, post red, peri
 * green), line styles by schedule, so arms that coincide in a phase (the first
 * phases of grow and freeze) stay distinguishable. */
static void plot(const char *dir, const study *s)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        say("gnuplot not found: curves are in curves.csv only\n");
        return;
    }
    char gp[2048];
    snprintf(gp, sizeof gp, "%s/curves.gp", dir);
    FILE *f = fopen(gp, "w");
    if (!f)
        return;
    static const char *const shades[3][4] = {{"#1f4e9c", "#4a86e8", "#7fb2ff", "#0b2a5b"},
                                             {"#b3261e", "#e06666", "#f4a09a", "#6d1410"},
                                             {"#2e7d32", "#66bb6a", "#a5d6a7", "#1b4d1e"}};
    fprintf(f, "set datafile separator ','\nset key outside right\nset grid\nset ylabel 'validation CE (nats/byte)'\n");
    for (int fmt = 0; fmt < 2; fmt++) {
        for (int x = 0; x < 2; x++) {
            fprintf(f, "set terminal %s size 1200,650\nset output '%s/curves_%s.%s'\n",
                    fmt ? "svg" : "pngcairo", dir, x ? "active_layer_tokens" : "steps",
                    fmt ? "svg" : "png");
            fprintf(f, "set xlabel '%s'\nset title 'mean over %d seed%s, band = min..max'\n",
                    x ? "active-layer tokens" : "steps", s->p->seeds, s->p->seeds == 1 ? "" : "s");
            fprintf(f, "unset arrow\n");
            if (!x)
                for (int k = 1; k < s->p->blocks; k++)
                    fprintf(f, "set arrow from %d, graph 0 to %d, graph 1 nohead dt 2 lc 'gray'\n",
                            k * s->p->steps_per_phase, k * s->p->steps_per_phase);
            fprintf(f, "plot ");
            int used[3] = {0, 0, 0};
            for (int a = 0; a < s->p->n_arms; a++) {
                const arm *am = &s->p->arms[a];
                const char *c = shades[am->placement][used[am->placement]++ % 4];
                int dt = am->schedule < 0 ? 5 : am->schedule + 1;
                if (s->p->seeds > 1)
                    fprintf(f, "'%s/bands.csv' index %d using %d:5:6 with filledcurves lc rgb '%s' "
                               "fs transparent solid 0.15 notitle, ",
                            dir, a, x ? 3 : 2, c);
                fprintf(f, "'%s/bands.csv' index %d using %d:4 with linespoints lw 2 dt %d pt %d "
                           "ps 0.6 lc rgb '%s' title '%s'%s",
                        dir, a, x ? 3 : 2, dt, a % 12 + 1, c, am->name,
                        a + 1 < s->p->n_arms ? ", " : "");
            }
            fprintf(f, "\n");
        }
    }
    fclose(f);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>/dev/null", gp);
    if (system(cmd) != 0)
        say("gnuplot failed; curves are in curves.csv\n");
}

/* ---- size and time before running ---------------------------------------------------- */

/* Active-layer steps of an arm, in units of full-depth steps. */
static double arm_cost(const preset *p, const arm *a)
{
    lattice_schedule *s = arm_schedule(p, a);
    double c = 0;
    const int L = p->blocks * p->block_size;
    for (int i = 0; i < lattice_schedule_get_n_phases(s); i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        lattice_schedule_get_phase(s, i, &ph);
        c += (double)ph.steps * ph.active_layers / L;
    }
    lattice_schedule_destroy(s);
    return c;
}

static int fits_here(const preset *p)
{
    lattice_model_params mp = model_shape(p, p->blocks * p->block_size, p->init_std, 1);
    lattice_norm *n;
    lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-6f, &n);
    int64_t params = 0;
    size_t bytes = 0;
    lattice_model_params tmp = model_shape(p, p->t_layers, p->t_init_std, 1);
    int64_t tparams = 0;
    size_t tbytes = 0;
    lattice_status st = lattice_model_estimate(&mp, n, &params, &bytes);
    if (st == LATTICE_OK)
        st = lattice_model_estimate(&tmp, n, &tparams, &tbytes);
    lattice_norm_destroy(n);
    if (st != LATTICE_OK)
        die("the preset's shape is not valid: %s", lattice_status_string(st));
    /* FLOPs of one student step (forward + backward) and its optimizer state */
    double N = (double)p->batch * p->seq_len, D = p->d_model, W = (p->heads + 2.0 * p->kv_heads) * p->head_dim;
    double per_layer = 2 * N * D * (W + p->heads * (double)p->head_dim + 3.0 * p->d_ff) +
                       4.0 * p->batch * p->heads * (double)p->seq_len * p->seq_len * p->head_dim;
    double step = 3 * (per_layer * p->blocks * p->block_size + 2 * N * D * 257);
    double need = (double)bytes + 8.0 * (double)params + (double)tbytes;
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    int grow = -1;
    for (int a = 0; a < p->n_arms && grow < 0; a++)
        if (p->arms[a].schedule == LATTICE_SCHEDULE_PRESET_GROW)
            grow = a;
    say("student %.3gM parameters, teacher %.3gM; memory %.1f GiB (student arenas + AdamW "
        "moments + teacher); one student step %.3g FLOP; %s %.3g FLOP; this machine has %.1f GiB\n",
        params / 1e6, tparams / 1e6, need / (1 << 30), step,
        grow >= 0 ? "the grow arm" : "the first arm",
        step * arm_cost(p, &p->arms[grow >= 0 ? grow : 0]), have / (1 << 30));
    return need < 0.8 * have;
}

/* Time a few full-depth student steps (with the teacher's forward) on the
 * real data and extrapolate the whole study. */
static void longest_first(const preset *p, int *order);

/* Runs side by side by default: the cores this process may use over the
 * threads each run takes, at least 1. */
static int default_jobs(int threads)
{
    int cores = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    if (cores < 1)
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int j = cores / (threads > 0 ? threads : 1);
    return j < 1 ? 1 : j > MAX_JOBS ? MAX_JOBS : j;
}

/* The wall time of runs handed out longest first to jobs workers, each taking
 * the next when it is free (runs in hand-out order). */
static double makespan(const double *secs, const int *order, int n, int jobs)
{
    double load[MAX_JOBS] = {0}, end = 0;
    for (int k = 0; k < n; k++) {
        int w = 0;
        for (int j = 1; j < jobs; j++)
            if (load[j] < load[w])
                w = j;
        load[w] += secs[order[k]];
        end = load[w] > end ? load[w] : end;
    }
    return end;
}

static double estimate_wall(const preset *p, lattice_backend *be, int teacher_cached, int jobs)
{
    const int L = p->blocks * p->block_size;
    lattice_model *stu = new_model(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, L, p->init_std, 1);
    lattice_data *d = open_data(p, 1);
    lattice_optim *o = new_optim(stu, p->lr, p->min_lr, 1, 100, p->clip);
    lattice_schedule *s;
    check(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, L, 1, 5, 0, &s), "schedule", NULL);
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_batches = 1;
    lattice_trainer *tr;
    check(lattice_trainer_create(stu, NULL, NULL, d, o, s, &tp, &tr), "trainer", NULL);
    check(lattice_trainer_step(tr, NULL), "timing step", lattice_trainer_errmsg(tr));
    double t0 = ex_now();
    for (int i = 0; i < 3; i++)
        check(lattice_trainer_step(tr, NULL), "timing step", lattice_trainer_errmsg(tr));
    double step = (ex_now() - t0) / 3;
    lattice_trainer_destroy(tr);
    lattice_schedule_destroy(s);
    lattice_optim_destroy(o);
    lattice_data_destroy(d);
    lattice_model_destroy(stu);
    /* a distilled step adds the teacher's forward: a third of a step per layer */
    const double with_teacher = step * (1.0 + p->t_layers / (3.0 * L));
    /* the teacher trains alone, on the runs' thread count */
    double teacher = teacher_cached ? 0 : step * p->t_steps * p->t_layers / L;
    /* evaluation: a forward (a third of a step) per validation batch */
    lattice_data *dv = open_data(p, 1);
    double n_val = (double)lattice_data_get_n_val_batches(dv);
    lattice_data_destroy(dv);
    double run_s[MAX_ARMS * MAX_SEEDS], serial = 0;
    for (int a = 0; a < p->n_arms; a++) {
        lattice_schedule *sa = arm_schedule(p, &p->arms[a]);
        int64_t steps = lattice_schedule_get_total_steps(sa);
        double ev = (p->eval_every ? (double)steps / p->eval_every : 0) + lattice_schedule_get_n_phases(sa);
        double evals = ev * (p->eval_batches ? fmin(p->eval_batches, n_val) : n_val) +
                       (p->final_eval_batches ? fmin(p->final_eval_batches, n_val) : n_val);
        lattice_schedule_destroy(sa);
        for (int i = 0; i < p->seeds; i++)
            run_s[i * p->n_arms + a] = with_teacher * arm_cost(p, &p->arms[a]) + evals * step / 3;
    }
    const int n_jobs = p->n_arms * p->seeds;
    for (int j = 0; j < n_jobs; j++)
        serial += run_s[j];
    int order[MAX_ARMS * MAX_SEEDS];
    longest_first(p, order);
    double total = teacher + (jobs > 1 ? makespan(run_s, order, n_jobs, jobs) : serial);
    char e[32];
    ex_format_duration(e, sizeof e, total);
    say("estimated wall time %s with %d job%s x %d thread%s (a full-depth step takes %.0f ms "
        "here at %d thread%s%s)\n",
        e, jobs, jobs > 1 ? "s" : "", p->threads, p->threads > 1 ? "s" : "", step * 1e3,
        p->threads, p->threads > 1 ? "s" : "", teacher_cached ? "; the teacher is cached" : "");
    return total;
}

/* Keep only the named arms (a comma-separated list), in the preset's order. */
static void select_arms(preset *p, const char *list)
{
    int keep[MAX_ARMS] = {0}, n = 0;
    char buf[1024];
    snprintf(buf, sizeof buf, "%s", list);
    for (char *tok = strtok(buf, ","); tok; tok = strtok(NULL, ",")) {
        int found = 0;
        for (int a = 0; a < p->n_arms; a++)
            if (strcmp(p->arms[a].name, tok) == 0)
                keep[a] = found = 1;
        if (!found)
            die("--arms: the preset has no arm '%s'", tok);
    }
    for (int a = 0; a < p->n_arms; a++)
        if (keep[a])
            p->arms[n++] = p->arms[a];
    p->n_arms = n;
}

/* The preset as understood: data, init, and every arm's phases. */
static void print_preset(const preset *p)
{
    printf("preset %s\ntrain %s\nval %s\n", p->name, p->train, p->val);
    printf("student init_std %.6g (gain %.4g), lr %.6g, min_lr %.6g; teacher %d layers, init_std "
           "%.6g, lr %.6g\n",
           p->init_std, p->init_gain, p->lr, p->min_lr, p->t_layers, p->t_init_std, p->t_lr);
    for (int a = 0; a < p->n_arms; a++) {
        const arm *am = &p->arms[a];
        lattice_schedule *s = arm_schedule(p, am);
        printf("arm %s: %s-norm", am->name, placement_names[am->placement]);
        if (am->residual_scale != 1.0)
            printf(" (residual scale %g)", am->residual_scale);
        printf(", init std %.6g, cost %.4g full-depth steps\n", arm_std(p, am), arm_cost(p, am));
        for (int i = 0; i < lattice_schedule_get_n_phases(s); i++) {
            lattice_schedule_phase ph;
            lattice_schedule_phase_init(&ph);
            lattice_schedule_get_phase(s, i, &ph);
            printf("  phase %d: %lld steps, %d active, train_from %d, reset %d, block_init %s, "
                   "rewind_data %d, train_boundary %d\n",
                   i, (long long)ph.steps, ph.active_layers, ph.train_from, ph.reset_optimizer,
                   block_init_names[ph.block_init], ph.rewind_data, ph.train_boundary);
        }
        lattice_schedule_destroy(s);
    }
}

/* ---- runs, and the study over the ranks of an MPI job -------------------------------- */

/* Job j is seed j / n_arms of arm j % n_arms: numbered the way a single
 * process runs them, seeds outermost. */

/* One arm x seed run, and the line that says it is done. */
static run_result *run_job(const preset *p, lattice_backend *be, lattice_model *teacher, int job,
                           int run_index, progress *pr)
{
    const int a = job % p->n_arms, i = job / p->n_arms;
    run_result *r = calloc(1, sizeof(*r));
    if (!r)
        die("out of memory");
    pr->arm = p->arms[a].name;
    pr->seed = i + 1;
    pr->run_index = run_index;
    run_arm(p, be, teacher, &p->arms[a], i + 1, pr, r);
    pr->steps_done_before += r->n_steps;
    if (!pr->tty) /* one write per line: other ranks and workers write to the same stream */
        fprintf(stderr, "%s%s[%d/%d] %s seed %d: val CE %.4f (%.1fs, %.0f tokens/s)\n",
                n_ranks > 1 ? who : "", n_ranks > 1 ? ": " : "", run_index, pr->n_runs,
                p->arms[a].name, i + 1, r->final_val, r->seconds, r->tokens_per_s);
    return r;
}

static void free_run(run_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->step_phase);
    free(r->step_active);
    free(r->step_alt);
    free(r);
}

/* Whether a launcher (mpirun, mpiexec, srun) started this process: only then
 * is MPI initialised, so that a plain start is exactly a single process, with
 * no MPI runtime at all. */
static int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The jobs in the order they are handed out (to MPI ranks or to --jobs
 * workers): longest arm first, by a stable insertion sort, so that ties keep
 * the single process's order (seeds outermost). */
static void longest_first(const preset *p, int *order)
{
    const int n_jobs = p->n_arms * p->seeds;
    double cost[MAX_ARMS];
    for (int a = 0; a < p->n_arms; a++)
        cost[a] = arm_cost(p, &p->arms[a]);
    for (int j = 0; j < n_jobs; j++) {
        int k = j;
        while (k > 0 && cost[order[k - 1] % p->n_arms] < cost[j % p->n_arms]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = j;
    }
}

/* ---- runs side by side in one process (--jobs) -------------------------------------- */

/* With --jobs J, J worker threads take the runs in longest_first order, each
 * with its own backend of the preset's threads and its own copy of the
 * teacher, loaded from the output folder as the MPI ranks load it. A run's
 * numbers depend on its seed, its thread count and the teacher only, so the
 * results are those of one process running them one after another. */
typedef struct pool {
    study *s;
    const char *teacher_path;
    int order[MAX_ARMS * MAX_SEEDS];
    int n_jobs, next;
    pthread_mutex_t lock;
    progress pr; /* each worker starts from a copy */
} pool;

static void *pool_worker(void *arg)
{
    pool *pl = arg;
    const preset *p = pl->s->p;
    lattice_backend *be;
    check(lattice_backend_create("default", &be), "backend", NULL);
    check(lattice_backend_set_threads(be, p->threads), "backend", NULL);
    lattice_model *teacher;
    char err[LATTICE_ERRMSG_SIZE];
    if (lattice_model_create_from_file(pl->teacher_path, NULL, be, p->batch, p->seq_len, &teacher,
                                       err) != LATTICE_OK)
        die("cannot load the teacher %s: %s", pl->teacher_path, err);
    progress pr = pl->pr;
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        const int k = pl->next < pl->n_jobs ? pl->next++ : -1;
        pthread_mutex_unlock(&pl->lock);
        if (k < 0)
            break;
        const int job = pl->order[k];
        /* each cell is written by one worker and read after the join */
        pl->s->res[job % p->n_arms][job / p->n_arms] = run_job(p, be, teacher, job, k + 1, &pr);
    }
    lattice_model_destroy(teacher);
    lattice_backend_destroy(be);
    return NULL;
}

static void run_study_jobs(study *s, const char *teacher_path, int jobs, const progress *pr)
{
    pool *pl = calloc(1, sizeof(*pl));
    pthread_t th[MAX_JOBS];
    if (!pl)
        die("out of memory");
    pl->s = s;
    pl->teacher_path = teacher_path;
    pl->n_jobs = s->p->n_arms * s->p->seeds;
    pl->pr = *pr;
    pl->pr.tty = 0; /* one line per finished run: several bars would overwrite each other */
    longest_first(s->p, pl->order);
    pthread_mutex_init(&pl->lock, NULL);
    if (jobs > pl->n_jobs)
        jobs = pl->n_jobs;
    for (int j = 0; j < jobs; j++)
        if (pthread_create(&th[j], NULL, pool_worker, pl) != 0)
            die("cannot start worker %d of %d: %s", j + 1, jobs, strerror(errno));
    for (int j = 0; j < jobs; j++)
        pthread_join(th[j], NULL);
    pthread_mutex_destroy(&pl->lock);
    free(pl);
}

#ifdef LATTICE_HAVE_MPI
/* With several ranks, rank 0 does everything a single process does before
 * the students (the estimate, the teacher and its go/no-go) while the others
 * wait. It then releases them (a gate message carrying the teacher file's
 * checksum; they load the teacher from the output folder) and hands out the
 * arm x seed runs one at a time, longest arm first, to whichever rank asks;
 * it runs runs of its own in between and answers between its training steps,
 * so no rank idles while runs remain. Results come back as the bytes of the
 * run's record: rank 0 then holds bit for bit what a single process would
 * have computed, and writes the same files. The waits poll with short sleeps:
 * a blocking MPI wait spins and would take a core from the training. */

enum { TAG_GATE = 1, TAG_READY, TAG_RESULT, TAG_JOB };
/* The gate's "go on"; any other value is the status to end with. */
#define GATE_GO (-1)

typedef struct dispatch {
    study *s;
    int order[MAX_ARMS * MAX_SEEDS]; /* jobs, longest arm first */
    int n_jobs, next;
    int workers_left; /* ranks not yet told that the runs are all handed out */
} dispatch;

static void nap(void)
{
    const struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

/* Wait for a request to complete, without spinning. */
static void await(MPI_Request *rq)
{
    for (int done = 0;;) {
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nap();
    }
}

/* Rank 0 to every other rank: go on, or end with this status. With "go" come
 * the checksums of rank 0's setup and teacher file, which each rank checks
 * against its own. */
static void open_gate(int code, uint64_t setup_sum, uint64_t teacher_sum)
{
    int64_t msg[3] = {code, (int64_t)setup_sum, (int64_t)teacher_sum};
    for (int r = 1; r < n_ranks; r++)
        MPI_Send(msg, 3, MPI_INT64_T, r, TAG_GATE, MPI_COMM_WORLD);
}

static int await_gate(uint64_t *setup_sum, uint64_t *teacher_sum)
{
    int64_t msg[3];
    MPI_Request rq;
    MPI_Irecv(msg, 3, MPI_INT64_T, 0, TAG_GATE, MPI_COMM_WORLD, &rq);
    await(&rq);
    *setup_sum = (uint64_t)msg[1];
    *teacher_sum = (uint64_t)msg[2];
    return (int)msg[0];
}

static void dispatch_init(dispatch *d, study *s)
{
    const preset *p = s->p;
    d->s = s;
    d->n_jobs = p->n_arms * p->seeds;
    d->next = 0;
    d->workers_left = n_ranks - 1;
    longest_first(p, d->order);
}

/* A run's record on the wire: the job, the run_result (its pointers
 * meaningless there), then its per-step arrays. Every rank runs the same
 * binary, so the layout is the same on both ends. */
#define RUN_HEADER (sizeof(int32_t) + sizeof(run_result))
#define RUN_PER_STEP (sizeof(double) + 2 * sizeof(int) + sizeof(int64_t))

static char *pack_run(int32_t job, const run_result *r, size_t *bytes)
{
    const size_t n = (size_t)r->n_steps;
    *bytes = RUN_HEADER + n * RUN_PER_STEP;
    if (*bytes > INT_MAX)
        die("the results of one run are too large to send to rank 0 (%zu bytes)", *bytes);
    char *buf = malloc(*bytes), *at = buf;
    if (!buf)
        die("out of memory");
    memcpy(at, &job, sizeof job), at += sizeof job;
    memcpy(at, r, sizeof(*r)), at += sizeof(*r);
    memcpy(at, r->losses, n * sizeof(double)), at += n * sizeof(double);
    memcpy(at, r->step_phase, n * sizeof(int)), at += n * sizeof(int);
    memcpy(at, r->step_active, n * sizeof(int)), at += n * sizeof(int);
    memcpy(at, r->step_alt, n * sizeof(int64_t));
    return buf;
}

static void unpack_run(dispatch *d, const char *buf, size_t bytes, int from)
{
    const preset *p = d->s->p;
    int32_t job;
    run_result *r = calloc(1, sizeof(*r));
    if (!r)
        die("out of memory");
    if (bytes < RUN_HEADER)
        die("rank %d sent a truncated result (%zu bytes)", from, bytes);
    memcpy(&job, buf, sizeof job);
    memcpy(r, buf + sizeof job, sizeof(*r));
    /* the step count the bytes hold, found by division: n_steps * RUN_PER_STEP
     * could wrap around to match */
    const size_t n = (bytes - RUN_HEADER) / RUN_PER_STEP;
    if (job < 0 || job >= d->n_jobs || d->s->res[job % p->n_arms][job / p->n_arms])
        die("rank %d sent a result for job %d, which it was not handed or sent already", from,
            (int)job);
    if ((bytes - RUN_HEADER) % RUN_PER_STEP != 0 || r->n_steps < 0 || (uint64_t)r->n_steps != n)
        die("rank %d sent %zu bytes for job %d, which do not hold the %lld steps it claims", from,
            bytes, (int)job, (long long)r->n_steps);
    /* every count within the array it indexes */
    if (r->n_pts < 0 || r->n_pts > MAX_POINTS || r->n_appends < 0 ||
        (size_t)r->n_appends > sizeof r->append_steps / sizeof r->append_steps[0] ||
        (size_t)r->n_appends > sizeof r->is_append / sizeof r->is_append[0] ||
        (size_t)r->n_appends > sizeof r->resp / sizeof r->resp[0] || r->n_boundaries < 0 ||
        (size_t)r->n_boundaries > sizeof r->rms / sizeof r->rms[0] || r->n_blocks_measured < 0 ||
        (size_t)r->n_blocks_measured > sizeof r->removal / sizeof r->removal[0])
        die("rank %d sent a result for job %d whose counts exceed their arrays (%d points, %d "
            "phase changes, %d boundaries, %d blocks measured)",
            from, (int)job, r->n_pts, r->n_appends, r->n_boundaries, r->n_blocks_measured);
    const char *at = buf + RUN_HEADER;
    r->losses = calloc(n + 1, sizeof(double));
    r->step_phase = calloc(n + 1, sizeof(int));
    r->step_active = calloc(n + 1, sizeof(int));
    r->step_alt = calloc(n + 1, sizeof(int64_t));
    if (!r->losses || !r->step_phase || !r->step_active || !r->step_alt)
        die("out of memory");
    memcpy(r->losses, at, n * sizeof(double)), at += n * sizeof(double);
    memcpy(r->step_phase, at, n * sizeof(int)), at += n * sizeof(int);
    memcpy(r->step_active, at, n * sizeof(int)), at += n * sizeof(int);
    memcpy(r->step_alt, at, n * sizeof(int64_t));
    d->s->res[job % p->n_arms][job / p->n_arms] = r;
}

/* Rank 0: take in every result that has arrived and give each asking rank
 * its next run (or tell it that none are left). With until_done, wait until
 * every other rank has been told. */
static void serve_ranks(dispatch *d, int until_done)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            if (!until_done || d->workers_left == 0)
                return;
            nap();
            continue;
        }
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
        if (!buf)
            die("out of memory");
        MPI_Recv(buf, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st.MPI_TAG == TAG_RESULT)
            unpack_run(d, buf, (size_t)bytes, st.MPI_SOURCE);
        else if (st.MPI_TAG != TAG_READY)
            die("rank %d sent an unexpected message (tag %d)", st.MPI_SOURCE, st.MPI_TAG);
        free(buf);
        int job[2] = {-1, 0}; /* the job and its place in the hand-out order */
        if (d->next < d->n_jobs) {
            job[0] = d->order[d->next++];
            job[1] = d->next;
        } else {
            d->workers_left--;
        }
        MPI_Send(job, 2, MPI_INT, st.MPI_SOURCE, TAG_JOB, MPI_COMM_WORLD);
    }
}

/* Rank 0: every run, its own and the others', into s->res. */
static void run_study_ranks(study *s, lattice_backend *be, lattice_model *teacher, progress *pr)
{
    const preset *p = s->p;
    dispatch d;
    dispatch_init(&d, s);
    pr->dispatch = &d;
    for (;;) {
        serve_ranks(&d, 0);
        if (d.next == d.n_jobs)
            break;
        const int job = d.order[d.next++];
        s->res[job % p->n_arms][job / p->n_arms] = run_job(p, be, teacher, job, d.next, pr);
    }
    pr->dispatch = NULL;
    serve_ranks(&d, 1);
    for (int j = 0; j < d.n_jobs; j++)
        if (!s->res[j % p->n_arms][j / p->n_arms])
            die("no result for %s seed %d", p->arms[j % p->n_arms].name, j / p->n_arms + 1);
}

/* The other ranks: ask for a run, run it, send its results back, until none are left. */
static void work_for_rank0(const preset *p, lattice_backend *be, lattice_model *teacher,
                           progress *pr)
{
    const int n_jobs = p->n_arms * p->seeds;
    MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (int ran = 0;; ran++) {
        int job[2];
        MPI_Request rq;
        MPI_Irecv(job, 2, MPI_INT, 0, TAG_JOB, MPI_COMM_WORLD, &rq);
        await(&rq);
        if (job[0] < 0 && fail_here && !ran)
            die("failing on purpose: no run for this rank (LATTICE_REPRODUCE_FAIL_RANK=%d, a test "
                "hook)", rank);
        if (job[0] < 0)
            return;
        if (job[0] >= n_jobs)
            die("rank 0 handed out run %d of %d: do all ranks run the same preset and options?",
                job[0], n_jobs);
        run_result *r = run_job(p, be, teacher, job[0], job[1], pr);
        size_t bytes;
        char *buf = pack_run(job[0], r, &bytes);
        MPI_Isend(buf, (int)bytes, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD, &rq);
        await(&rq);
        free(buf);
        free_run(r);
    }
}
#endif

/* FNV-1a checksums: the ranks check that they run rank 0's study. */
#define FNV_START 1469598103934665603ULL

static uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

/* A file's bytes folded into *h; -1 (errno set) when it cannot be read. */
static int fnv_file(const char *path, uint64_t *h)
{
    FILE *f = fopen(path, "rb");
    if (!f)
        return -1;
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        *h = fnv(*h, buf, n);
    const int bad = ferror(f);
    fclose(f);
    if (bad)
        errno = EIO;
    return bad ? -1 : 0;
}

/* What a run's numbers depend on besides its seed: the preset, the options
 * that change it, and the corpus. Ranks on other machines read their own
 * copies; a difference would silently change their runs. */
static uint64_t setup_checksum(const preset *p)
{
    const char *js = json_object_to_json_string_ext(p->json, JSON_C_TO_STRING_PLAIN);
    uint64_t h = fnv(FNV_START, js, strlen(js));
    const int v[2] = {p->threads, p->seeds};
    h = fnv(h, v, sizeof v);
    for (int a = 0; a < p->n_arms; a++)
        h = fnv(h, p->arms[a].name, strlen(p->arms[a].name) + 1);
    if (fnv_file(p->train, &h) != 0)
        die("cannot read the training text %s: %s", p->train, strerror(errno));
    if (fnv_file(p->val, &h) != 0)
        die("cannot read the validation text %s: %s", p->val, strerror(errno));
    return h;
}

/* The other ranks' teacher: the one rank 0 left in the output folder. */
static lattice_model *load_teacher(const preset *p, lattice_backend *be, const char *dir,
                                   uint64_t want_sum)
{
    char path[2048], err[LATTICE_ERRMSG_SIZE];
    snprintf(path, sizeof path, "%s/teacher.safetensors", dir);
    uint64_t sum = FNV_START;
    if (fnv_file(path, &sum) != 0)
        die("cannot read %s, the teacher rank 0 wrote (%s); with ranks on several machines the "
            "output folder must be on a file system they share, at the same path",
            path, strerror(errno));
    if (sum != want_sum)
        die("%s is not the teacher rank 0 wrote (another file at the same path?); with ranks on "
            "several machines the output folder must be on a file system they share",
            path);
    lattice_model *t;
    if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) != LATTICE_OK)
        die("cannot load the teacher %s: %s", path, err);
    return t;
}

/* Start MPI when a launcher started this process; the rank goes into every message. */
static void ranks_init(int *argc, char ***argv)
{
    if (!launched_by_mpi())
        return;
#ifdef LATTICE_HAVE_MPI
    /* FUNNELED: the backend's OpenMP threads run beside MPI, but only the main
     * thread calls it (the trainer calls serve_ranks from its step callback, on
     * the thread that called lattice_trainer_run). SINGLE would promise that
     * no other thread exists at all. */
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, PROG ": MPI_Init failed\n");
        exit(1);
    }
    mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    MPI_Comm_size(MPI_COMM_WORLD, &n_ranks);
    if (n_ranks > 1)
        snprintf(who, sizeof who, PROG "[rank %d]", rank);
    if (provided < MPI_THREAD_FUNNELED)
        die("this MPI library provides thread level %d, below MPI_THREAD_FUNNELED (%d), which "
            "the backend's threads beside MPI need",
            provided, MPI_THREAD_FUNNELED);
    if (n_ranks > 1) {
        const char *f = getenv("LATTICE_REPRODUCE_FAIL_RANK");
        char *end;
        if (f && f[0] && strtol(f, &end, 10) == rank && !*end)
            fail_here = 1;
    }
#else
    (void)argc;
    (void)argv;
    fprintf(stderr, PROG ": started by an MPI launcher, but built without MPI: each process runs "
                    "the whole study alone (reconfigure with -Dmpi=enabled)\n");
#endif
}

/* The end of main on every rank: rank 0 tells the others the status to end
 * with (they wait for it), then MPI ends. Another rank that ends while rank 0
 * waits for it to ask for runs (its own options differ from rank 0's) ends
 * the whole job instead, whatever its status: rank 0 would wait forever. */
static int finish(int status)
{
#ifdef LATTICE_HAVE_MPI
    if (mpi_on && owes_rank0)
        die("rank %d stopped (status %d) before asking rank 0 for runs; ending the whole job "
            "(every rank must be given the same options)",
            rank, status);
    if (mpi_on) {
        if (rank == 0)
            open_gate(status, 0, 0);
        MPI_Finalize();
    }
#endif
    return status;
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f,
            "usage: " PROG " --preset FILE [options]\n"
            "Reproduce the joint-vs-curriculum study of arXiv 2608.13156 with a preset\n"
            "(examples/reproduce/presets/*.json; see presets/README.md for every key).\n\n"
            "  --preset FILE       the study: data, teacher, student, training, arms (required)\n"
            "  --out DIR           where results go (default results/<preset name>): report.md,\n"
            "                      results.json, curves.csv (every step's training loss, and\n"
            "                      validation CE and boundary statistics at evaluations),\n"
            "                      bands.csv, plots\n"
            "  --retrain-teacher   train the teacher again even when DIR holds one trained\n"
            "                      with the same teacher, student and data settings\n"
            "  --teacher-only      train (or load) the teacher, print its go/no-go boundary\n"
            "                      figures, and stop\n"
            "  --estimate          print the estimated wall time and stop\n"
            "  --check             validate the preset, print its arms and schedules, and stop\n"
            "                      (reads no data)\n"
            "  --threads N         threads per run (default: the preset's, else 2)\n"
            "  --jobs N            runs side by side, in one process (default: the cores this\n"
            "                      process may use / threads per run, at least 1); the\n"
            "                      results are those of one run after another\n"
            "  --seeds N           paired seeds (default: the preset's, else 3)\n"
            "  --arms A,B,...      run only these of the preset's arms, in the preset's order\n"
            "  -h, --help          this help\n");
}

int main(int argc, char **argv)
{
    ex_prefer_passive_openmp(argv);
    ranks_init(&argc, &argv);
    /* The other ranks wait while rank 0 checks the options and the preset and
     * trains the teacher: a flag that stops there (--check, --estimate,
     * --teacher-only, a usage error) stops them too, quietly. */
    uint64_t setup_sum = 0, teacher_sum = 0;
#ifdef LATTICE_HAVE_MPI
    if (rank > 0) {
        const int gate = await_gate(&setup_sum, &teacher_sum);
        if (gate != GATE_GO)
            return finish(gate);
        owes_rank0 = 1;
    }
#endif
    const char *preset_path = NULL, *out = NULL, *only_arms = NULL;
    int retrain = 0, threads = 0, seeds = 0, teacher_only = 0, estimate_only = 0, check_only = 0;
    int jobs = 0;
    static const struct option opts[] = {{"preset", required_argument, 0, 'p'},
                                         {"out", required_argument, 0, 'o'},
                                         {"retrain-teacher", no_argument, 0, 'r'},
                                         {"teacher-only", no_argument, 0, 'T'},
                                         {"estimate", no_argument, 0, 'E'},
                                         {"check", no_argument, 0, 'C'},
                                         {"arms", required_argument, 0, 'A'},
                                         {"threads", required_argument, 0, 't'},
                                         {"jobs", required_argument, 0, 'j'},
                                         {"seeds", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "p:o:rt:j:s:h", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': preset_path = optarg; break;
        case 'o': out = optarg; break;
        case 'r': retrain = 1; break;
        case 'T': teacher_only = 1; break;
        case 'E': estimate_only = 1; break;
        case 'C': check_only = 1; break;
        case 'A': only_arms = optarg; break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 256, &threads))
                return finish(2);
            break;
        case 'j':
            if (ex_parse_int("jobs", optarg, 1, MAX_JOBS, &jobs))
                return finish(2);
            break;
        case 's':
            if (ex_parse_int("seeds", optarg, 1, MAX_SEEDS, &seeds))
                return finish(2);
            break;
        case 'h': usage(stdout); return finish(0);
        default: usage(stderr); return finish(2);
        }
    }
    if (!preset_path || optind != argc) {
        usage(stderr);
        return finish(2);
    }
    /* rank 0 got none of these (it let this rank through): the ranks' options differ */
    if (rank > 0 && (check_only || estimate_only || teacher_only))
        die("rank %d was given %s, but rank 0 was not: every rank must be given the same options",
            rank, check_only ? "--check" : estimate_only ? "--estimate" : "--teacher-only");
    preset p;
    load_preset(&p, preset_path);
    if (threads > 0)
        p.threads = threads;
    if (seeds > 0)
        p.seeds = seeds > MAX_SEEDS ? MAX_SEEDS : seeds;
    if (only_arms)
        select_arms(&p, only_arms);
    if (jobs > 1 && n_ranks > 1)
        die("--jobs %d with %d MPI ranks: spread the runs over more ranks instead (each rank "
            "runs one at a time)", jobs, n_ranks);
    if (jobs == 0)
        jobs = n_ranks > 1 ? 1 : default_jobs(p.threads);
    if (jobs > p.n_arms * p.seeds)
        jobs = p.n_arms * p.seeds;
    if (check_only) {
        print_preset(&p);
        json_object_put(p.json);
        return finish(0);
    }
    if (rank == 0 && !fits_here(&p)) {
        say("preset '%s' does not fit on this machine; nothing was run\n", p.name);
        json_object_put(p.json);
        return finish(0);
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", out ? out : "");
    if (!out)
        snprintf(dir, sizeof dir, "results/%s", p.name);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (rank == 0 && system(cmd) != 0)
        die("cannot create %s", dir);

    lattice_backend *be;
    check(lattice_backend_create("default", &be), "backend", NULL);
    check(lattice_backend_set_threads(be, p.threads), "backend", NULL);
    lattice_backend_info bi;
    bi.size = sizeof bi;
    check(lattice_backend_get_info(be, &bi), "backend info", NULL);
    char kernels[512];
    snprintf(kernels, sizeof kernels, "%s, %s kernels%s", bi.library, bi.kernels,
             bi.optimised ? "" : " (NOT optimised for this CPU)");
    char plan[128];
    snprintf(plan, sizeof plan, "%d job%s x %d thread%s", jobs, jobs > 1 ? "s" : "", p.threads,
             p.threads > 1 ? "s" : "");
    if (rank == 0)
        say("lattice %s, backend %s (%s), %d threads%s, plan %s%s%s\n", lattice_version_string(),
            lattice_backend_get_name(be), kernels, p.threads, n_ranks > 1 ? " per rank" : " per run",
            plan, bi.reason[0] ? "; " : "", bi.reason);
    char tpath[1200];
    snprintf(tpath, sizeof tpath, "%s/teacher.safetensors", dir);
    if (rank == 0 && !teacher_only)
        estimate_wall(&p, be, !retrain && access(tpath, R_OK) == 0, jobs);
    if (estimate_only) {
        lattice_backend_destroy(be);
        json_object_put(p.json);
        return finish(0);
    }
    double t0 = ex_now();
    study s = {&p, {{0}}, {0}, 0};
    lattice_model *teacher;
    if (rank == 0) {
        /* on the runs' thread count, whatever the plan: the same teacher, so
         * the same numbers, however many runs go side by side */
        teacher = get_teacher(&p, be, dir, retrain);
        teacher_gonogo(&p, teacher, &s.teacher);
        if (teacher_only) {
            lattice_model_destroy(teacher);
            lattice_backend_destroy(be);
            json_object_put(p.json);
            return finish(0);
        }
#ifdef LATTICE_HAVE_MPI
        if (n_ranks > 1) {
            teacher_sum = FNV_START;
            if (fnv_file(tpath, &teacher_sum) != 0)
                die("cannot read back %s: %s", tpath, strerror(errno));
            open_gate(GATE_GO, setup_checksum(&p), teacher_sum);
        }
#endif
    } else {
        if (setup_checksum(&p) != setup_sum)
            die("this rank's preset, options or corpus differ from rank 0's (%s, %s, %s): every "
                "rank must run the same study",
                preset_path, p.train, p.val);
        teacher = load_teacher(&p, be, dir, teacher_sum);
    }
    double teacher_s = ex_now() - t0;

    int n_runs = p.n_arms * p.seeds, run = 0;
    int64_t all_steps = 0;
    for (int a = 0; a < p.n_arms; a++) {
        lattice_schedule *sc = arm_schedule(&p, &p.arms[a]);
        all_steps += lattice_schedule_get_total_steps(sc) * p.seeds;
        lattice_schedule_destroy(sc);
    }
    progress pr = {0};
    pr.tty = n_ranks == 1 && isatty(2); /* several ranks' progress lines would overwrite each other */
    pr.start = ex_now();
    pr.steps_total_all = all_steps;
    pr.n_runs = n_runs;
#ifdef LATTICE_HAVE_MPI
    if (rank > 0) {
        work_for_rank0(&p, be, teacher, &pr);
        owes_rank0 = 0;
        lattice_model_destroy(teacher);
        lattice_backend_destroy(be);
        json_object_put(p.json);
        /* rank 0's word that the files are written: waiting for it here, and
         * not in MPI_Finalize, costs no CPU while rank 0 finishes its runs */
        return finish(await_gate(&setup_sum, &teacher_sum));
    }
    if (n_ranks > 1)
        run_study_ranks(&s, be, teacher, &pr);
#endif
    if (n_ranks == 1 && jobs > 1)
        run_study_jobs(&s, tpath, jobs, &pr);
    /* seeds outermost: an interrupted run still has complete pairs */
    for (int i = 0; i < p.seeds && n_ranks == 1 && jobs == 1; i++)
        for (int a = 0; a < p.n_arms; a++)
            s.res[a][i] = run_job(&p, be, teacher, i * p.n_arms + a, ++run, &pr);
    if (pr.tty)
        fputs("\r\033[K", stderr);
    double wall = ex_now() - t0;

    char path[1200];
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s", path);
    report(f, &s);
    fprintf(f, "\nWall time %.0f s (teacher %.0f s), lattice %s, backend %s (%s) with %d threads%s.\n",
            wall, teacher_s, lattice_version_string(), lattice_backend_get_name(be), kernels, p.threads,
            n_ranks > 1 ? " on each rank" : jobs > 1 ? " per run" : "");
    if (jobs > 1)
        fprintf(f, "The runs went %d side by side (%s).\n", jobs, plan);
    if (n_ranks > 1)
        fprintf(f, "The runs were spread over %d MPI ranks.\n", n_ranks);
    fclose(f);
    report(stdout, &s);
    printf("\nWall time %.0f s (teacher %.0f s). Results in %s/.\n", wall, teacher_s, dir);
    snprintf(path, sizeof path, "%s/curves.csv", dir);
    write_csv(path, &s);
    snprintf(path, sizeof path, "%s/bands.csv", dir);
    write_bands(path, &s);
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_json(path, &s, wall);
    plot(dir, &s);

    for (int a = 0; a < p.n_arms; a++)
        for (int i = 0; i < p.seeds; i++)
            free_run(s.res[a][i]);
    lattice_model_destroy(teacher);
    lattice_backend_destroy(be);
    json_object_put(p.json);
    return finish(0);
}
