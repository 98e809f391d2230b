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
#include <json-c/json.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PROG "reproduce"

#include "../example_util.h"
#define MAX_SEEDS 16
#define MAX_POINTS 4096

/* ---- the preset -------------------------------------------------------------- */

typedef struct preset {
    char name[64], train[1024], val[1024];
    int seq_len, batch, split_long;
    int t_layers, t_steps, t_warmup;
    double t_lr;
    int d_model, heads, kv_heads, head_dim, d_ff, blocks, block_size, qk_norm;
    double rope_theta;
    int steps_per_phase, warmup, eval_every, eval_batches, final_eval_batches;
    double lr, min_lr, clip, alpha, gamma, tau;
    int seeds, threads;
    char arms[16][32];
    int n_arms;
    json_object *json; /* the whole preset, recorded with the results */
} preset;

/* An arm: a placement and a schedule preset. */
typedef struct arm_kind {
    const char *name;
    lattice_norm_placement placement;
    lattice_schedule_preset schedule;
} arm_kind;

static const arm_kind arm_kinds[] = {
    {"pre-joint", LATTICE_NORM_PRE, LATTICE_PRESET_JOINT},
    {"post-joint", LATTICE_NORM_POST, LATTICE_PRESET_JOINT},
    {"pre-grow", LATTICE_NORM_PRE, LATTICE_PRESET_GROW},
    {"post-grow", LATTICE_NORM_POST, LATTICE_PRESET_GROW},
    {"pre-single", LATTICE_NORM_PRE, LATTICE_PRESET_SINGLE_BLOCK},
    {"post-single", LATTICE_NORM_POST, LATTICE_PRESET_SINGLE_BLOCK},
    {"pre-freeze", LATTICE_NORM_PRE, LATTICE_PRESET_FREEZE},
    {"post-freeze", LATTICE_NORM_POST, LATTICE_PRESET_FREEZE},
    {"pre-joint-active", LATTICE_NORM_PRE, LATTICE_PRESET_JOINT_MATCHED_ACTIVE},
    {"post-joint-active", LATTICE_NORM_POST, LATTICE_PRESET_JOINT_MATCHED_ACTIVE},
    {"pre-joint-total", LATTICE_NORM_PRE, LATTICE_PRESET_JOINT_MATCHED_TOTAL},
    {"post-joint-total", LATTICE_NORM_POST, LATTICE_PRESET_JOINT_MATCHED_TOTAL},
};
#define N_KINDS ((int)(sizeof arm_kinds / sizeof arm_kinds[0]))

static const arm_kind *find_kind(const char *name)
{
    for (int i = 0; i < N_KINDS; i++)
        if (strcmp(arm_kinds[i].name, name) == 0)
            return &arm_kinds[i];
    return NULL;
}

static void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, PROG ": ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
    exit(1);
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

static void load_preset(preset *p, const char *path)
{
    memset(p, 0, sizeof(*p));
    json_object *o = json_object_from_file(path);
    if (!o || !json_object_is_type(o, json_type_object))
        die("cannot read the preset %s (missing, or not a JSON object)", path);
    p->json = o;
    get_s(o, "name", p->name, sizeof p->name, "custom");
    get_s(o, "data.train", p->train, sizeof p->train, "examples/data/austen/train.txt");
    get_s(o, "data.val", p->val, sizeof p->val, "examples/data/austen/val.txt");
    p->seq_len = get_i(o, "data.seq_len", 128, 2, 1 << 16);
    p->batch = get_i(o, "data.batch_size", 16, 1, 4096);
    p->split_long = get_i(o, "data.split_long", 1, 0, 1);
    p->t_layers = get_i(o, "teacher.layers", 12, 1, 1024);
    p->t_steps = get_i(o, "teacher.steps", 1000, 1, 1 << 30);
    p->t_lr = get_d(o, "teacher.lr", 1e-3);
    p->t_warmup = get_i(o, "teacher.warmup", 50, 0, 1 << 30);
    p->d_model = get_i(o, "student.d_model", 128, 1, 1 << 16);
    p->heads = get_i(o, "student.n_heads", 4, 1, 1024);
    p->kv_heads = get_i(o, "student.n_kv_heads", p->heads, 1, 1024);
    p->head_dim = get_i(o, "student.head_dim", p->d_model / p->heads, 2, 1 << 16);
    p->d_ff = get_i(o, "student.d_ff", 3 * p->d_model, 1, 1 << 20);
    p->blocks = get_i(o, "student.blocks", 3, 1, 64);
    p->block_size = get_i(o, "student.block_size", 3, 1, 64);
    p->qk_norm = get_i(o, "student.qk_norm", 1, 0, 1);
    p->rope_theta = get_d(o, "student.rope_theta", 10000.0);
    p->steps_per_phase = get_i(o, "train.steps_per_phase", 300, 1, 1 << 30);
    p->lr = get_d(o, "train.lr", 1e-3);
    p->min_lr = get_d(o, "train.min_lr", 1e-5);
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
        die("preset: arms must be a list of names");
    int n = arms ? (int)json_object_array_length(arms) : 0;
    for (int i = 0; i < n && p->n_arms < 16; i++) {
        const char *a = json_object_get_string(json_object_array_get_idx(arms, i));
        if (!a || !find_kind(a))
            die("preset: unknown arm '%s' (known: pre-/post- joint, grow, single, freeze, "
                "joint-active, joint-total)", a ? a : "?");
        snprintf(p->arms[p->n_arms++], sizeof p->arms[0], "%s", a);
    }
    if (!p->n_arms)
        die("preset: no arms to run");
}

/* ---- results ------------------------------------------------------------------ */

typedef struct point {
    int64_t step, active_layer_tokens;
    int phase, active;
    double val_ce;
} point;

typedef struct run_result {
    double final_val;
    point pts[MAX_POINTS];
    int n_pts;
    double *losses; /* per step */
    int64_t n_steps, append_steps[8];
    int n_appends;
    lattice_response resp[8];
    lattice_removal removal[8];
    int n_blocks_measured;
    lattice_rms_stats rms[8][3]; /* per block boundary: regular, boundary, all */
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
} progress;

static int on_step(void *user, const lattice_metrics *m)
{
    progress *pr = user;
    run_result *r = pr->res;
    if (r->n_steps < pr->run_steps)
        r->losses[r->n_steps++] = m->loss;
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

static int on_eval(void *user, const lattice_metrics *m)
{
    progress *pr = user;
    run_result *r = pr->res;
    if (r->n_pts < MAX_POINTS)
        r->pts[r->n_pts++] = (point){m->step, m->counters.active_layer_tokens, m->phase,
                                     m->active_layers, m->val_ce};
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

static lattice_model_params model_shape(const preset *p, int layers, uint64_t seed)
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
    return mp;
}

static lattice_model *new_model(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                                int layers, uint64_t seed)
{
    lattice_norm *norm;
    check(lattice_norm_create(pl, LATTICE_NORM_RMS, 1e-6f, &norm), "norm", NULL);
    lattice_model_params mp = model_shape(p, layers, seed);
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
    const char *want_s = json_object_to_json_string_ext(want, JSON_C_TO_STRING_PLAIN);
    json_object *have = retrain ? NULL : json_object_from_file(meta);
    int same = have && strcmp(json_object_to_json_string_ext(have, JSON_C_TO_STRING_PLAIN), want_s) == 0;
    json_object_put(have);
    lattice_model *t = NULL;
    if (same) {
        char err[LATTICE_ERRMSG_SIZE];
        if (lattice_model_create_from_file(path, NULL, be, p->batch, p->seq_len, &t, err) == LATTICE_OK) {
            fprintf(stderr, PROG ": teacher: reusing %s\n", path);
            json_object_put(want);
            return t;
        }
        fprintf(stderr, PROG ": teacher: cached file unusable (%s); training again\n", err);
    }
    t = new_model(p, be, LATTICE_NORM_PRE, p->t_layers, 1000);
    lattice_data *d = open_data(p, 1000);
    lattice_optim *o = new_optim(t, p->t_lr, p->t_lr / 10, p->t_warmup, p->t_steps, 1.0);
    lattice_schedule *s;
    check(lattice_schedule_create_preset(LATTICE_PRESET_JOINT, p->t_layers, 1, p->t_steps,
                                         LATTICE_BLOCK_INIT_RANDOM, &s),
          "schedule", NULL);
    run_result *r = calloc(1, sizeof(*r));
    r->losses = calloc((size_t)p->t_steps + 1, sizeof(double));
    progress pr = {"teacher", 0, 0, 0, 1, isatty(2), 0, p->t_steps, p->t_steps, ex_now(), 0, r, 0};
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
    fprintf(stderr, PROG ": teacher: %d layers, %d steps, val CE %.4f (%.0fs)\n", p->t_layers,
            p->t_steps, r->n_pts ? r->pts[r->n_pts - 1].val_ce : NAN, ex_now() - pr.start);
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

/* ---- one student run ------------------------------------------------------------ */

static void run_arm(const preset *p, lattice_backend *be, lattice_model *teacher_model,
                    const arm_kind *kind, int seed, progress *pr, run_result *r)
{
    const int L = p->blocks * p->block_size;
    lattice_schedule *s;
    check(lattice_schedule_create_preset(kind->schedule, p->blocks, p->block_size,
                                         p->steps_per_phase, LATTICE_BLOCK_INIT_RANDOM, &s),
          "schedule", NULL);
    /* Paired seeds: pre and post of one seed share initial weights and data order. */
    lattice_model *m = new_model(p, be, kind->placement, L, 100 + (uint64_t)seed);
    lattice_teacher *t;
    check(lattice_teacher_create_model(teacher_model, &t), "teacher", NULL);
    check(lattice_teacher_init_student(t, m), "student init", lattice_teacher_errmsg(t));
    lattice_distill_params dp;
    lattice_distill_params_init(&dp);
    dp.alpha = (float)p->alpha;
    dp.gamma = (float)p->gamma;
    dp.tau = (float)p->tau;
    dp.n_threads = p->threads;
    lattice_distill *loss;
    check(lattice_distill_create(&dp, &loss), "loss", NULL);
    lattice_data *d = open_data(p, 200 + (uint64_t)seed);
    lattice_optim *o = new_optim(m, p->lr, p->min_lr, p->warmup, p->steps_per_phase, p->clip);
    int64_t total = lattice_schedule_total_steps(s);
    r->losses = calloc((size_t)total + 1, sizeof(double));
    pr->res = r;
    pr->run_steps = total;
    pr->n_phases = lattice_schedule_n_phases(s);
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
    lattice_counters c;
    lattice_schedule_counters(s, &c);
    r->tokens_per_s = (double)c.tokens / r->seconds;
    /* the reported number: validation CE at the scheduled end, over the whole
     * held-out set unless the preset caps it */
    lattice_trainer_params full = tp;
    full.eval_batches = p->final_eval_batches;
    lattice_trainer_destroy(tr);
    check(lattice_trainer_create(m, t, loss, d, o, s, &full, &tr), "trainer", NULL);
    check(lattice_trainer_evaluate(tr, &r->final_val), "evaluation", lattice_trainer_errmsg(tr));

    /* diagnostics on a fixed batch: the first validation batch */
    lattice_diag *dg;
    check(lattice_diag_create(m, &dg), "diagnostics", NULL);
    lattice_batch b;
    check(lattice_data_val_batch(d, 0, &b), "validation batch", lattice_data_errmsg(d));
    const int active = lattice_model_active_layers(m);
    lattice_rms_stats stats[(64 * 3 + 1) * 3];
    check(lattice_diag_boundary_scale(dg, b.tokens, b.mask, b.batch, b.seq, NULL, 2, stats,
                                      (active + 1) * 3),
          "boundary scale", lattice_diag_errmsg(dg));
    r->n_boundaries = 0;
    for (int blk = 1; blk * p->block_size <= active && r->n_boundaries < 8; blk++, r->n_boundaries++)
        memcpy(r->rms[r->n_boundaries], &stats[blk * p->block_size * 3], sizeof r->rms[0]);
    r->n_blocks_measured = 0;
    for (int blk = 0; (blk + 1) * p->block_size <= active && blk < 8; blk++, r->n_blocks_measured++)
        check(lattice_diag_block_removal(dg, b.tokens, b.targets, b.mask, b.batch, b.seq,
                                         blk * p->block_size, p->block_size, &r->removal[blk]),
              "block removal", lattice_diag_errmsg(dg));
    /* windows scale with the run: 1/20 of a phase, at least 3 steps */
    int64_t window = p->steps_per_phase / 20 > 3 ? p->steps_per_phase / 20 : 3;
    for (int a = 0; a < r->n_appends; a++) {
        lattice_response *rs = &r->resp[a];
        if (lattice_diag_loss_response(r->losses, r->n_steps, r->append_steps[a], window,
                                       p->steps_per_phase, rs) != LATTICE_OK)
            memset(rs, 0, sizeof(*rs));
    }
    lattice_diag_destroy(dg);
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
    run_result *res[16][MAX_SEEDS]; /* [arm][seed] */
} study;

static int arm_index(const study *s, const char *name)
{
    for (int a = 0; a < s->p->n_arms; a++)
        if (strcmp(s->p->arms[a], name) == 0)
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

static void report(FILE *f, const study *s)
{
    const preset *p = s->p;
    double x[MAX_SEEDS], y[MAX_SEEDS], d[MAX_SEEDS];
    char b1[64], b2[64];
    fprintf(f, "# Reproduction: preset `%s`\n\n", p->name);
    fprintf(f, "Students: %d layers (%d blocks x %d), d_model %d, %d heads (%d kv) of %d, d_ff %d; "
               "%d steps per phase, batch %d x %d bytes; %d paired seeds. Validation CE in nats per "
               "byte at the scheduled end, over %s.\n\n",
            p->blocks * p->block_size, p->blocks, p->block_size, p->d_model, p->heads, p->kv_heads,
            p->head_dim, p->d_ff, p->steps_per_phase, p->batch, p->seq_len, p->seeds,
            p->final_eval_batches ? "the first batches of the held-out set (final_eval_batches)"
                                  : "the whole held-out set (Persuasion)");
    fprintf(f, "## Every arm\n\n| arm | val CE (mean ± sd) | seeds | tokens/s | paper (nats/token, Qwen3 tokens) |\n|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        finals(s, p->arms[a], x);
        summary sm = summarise(x, p->seeds);
        double tps = 0;
        for (int i = 0; i < p->seeds; i++)
            tps += s->res[a][i]->tokens_per_s / p->seeds;
        fmt_num(b1, sizeof b1, paper_value(p->arms[a]), "%.4f");
        fprintf(f, "| %s | %.4f ± %.4f | %d | %.0f | %s |\n", p->arms[a], sm.mean, sm.sd, p->seeds,
                tps, b1);
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
        fprintf(f, "| %s | %.4f ± %.4f | %.4f ± %.4f | %+.4f ± %s | %+.4f |\n", regimes[r][0],
                sx.mean, sx.sd, sy.mean, sy.sd, sd.mean, b1,
                paper_value(regimes[r][2]) - paper_value(regimes[r][1]));
    }
    if (have[0] && have[1]) {
        for (int i = 0; i < p->seeds; i++)
            d[i] = delta[1][i] - delta[0][i];
        summary si = summarise(d, p->seeds);
        fmt_num(b1, sizeof b1, si.mean - si.half, "%+.4f");
        fmt_num(b2, sizeof b2, si.mean + si.half, "%+.4f");
        fprintf(f, "\nInteraction I = (post - pre | grow) - (post - pre | joint) = **%+.4f**, 95%% CI "
                   "[%s, %s] over %d seeds (t interval of the per-seed interactions); paper: -0.0332.\n",
                si.mean, b1, b2, p->seeds);
    }
    /* controls */
    fprintf(f, "\n## Controls\n\n| control | val CE (mean ± sd) | paper |\n|---|---|---|\n");
    const char *controls[] = {"pre-single", "post-single", "pre-freeze", "post-freeze",
                              "post-joint-active", "post-joint-total", "pre-joint-active",
                              "pre-joint-total"};
    for (size_t c = 0; c < sizeof controls / sizeof controls[0]; c++) {
        if (!finals(s, controls[c], x))
            continue;
        summary sm = summarise(x, p->seeds);
        fmt_num(b1, sizeof b1, paper_value(controls[c]), "%.4f");
        fprintf(f, "| %s | %.4f ± %.4f | %s |\n", controls[c], sm.mean, sm.sd, b1);
    }
    /* loss response at appends */
    fprintf(f, "\n## Loss response at each append (mean over seeds)\n\nWindows scale with the run: the baseline and the trailing mean span max(3, steps_per_phase / 20) = %d steps; the area sums the excess over the next %d steps (one phase). Paper: jump pre ~0.023, post ~0.25-0.28; recovery pre ~100 steps, post ~20k (of 50k-step phases).\n\n| arm | append | jump | area | recovery (steps) |\n|---|---|---|---|---|\n",
            p->steps_per_phase / 20 > 3 ? p->steps_per_phase / 20 : 3, p->steps_per_phase);
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_appends; k++) {
            double j = 0, ar = 0, rec = 0;
            int never = 0;
            for (int i = 0; i < p->seeds; i++) {
                j += s->res[a][i]->resp[k].jump / p->seeds;
                ar += s->res[a][i]->resp[k].area / p->seeds;
                never |= s->res[a][i]->resp[k].recovery < 0;
                rec += (double)s->res[a][i]->resp[k].recovery / p->seeds;
            }
            if (never)
                snprintf(b1, sizeof b1, "not within the phase (some seeds)");
            else
                snprintf(b1, sizeof b1, "%.0f", rec);
            fprintf(f, "| %s | %d | %+.4f | %.3f | %s |\n", p->arms[a], k + 1, j, ar, b1);
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
            fprintf(f, "| %s | %d | %.4f ± %.4f | %.4f ± %.4f |\n", p->arms[a], k + 1, sd.mean,
                    sd.sd, sa.mean, sa.sd);
        }
    }
    /* boundary scale */
    fprintf(f, "\n## Boundary scale at block boundaries (first validation batch, seed 1)\n\nPer-token RMS of the residual stream after each block. Boundary tokens = position 0 of each row (each row opens with the document-boundary token). Paper, pre-norm: std across tokens 5.81 -> 19.98, kurtosis > 2400, boundary tokens 119 -> 425 vs regular 7.1 -> 11.5; post-norm: std 0.07-0.19, both below 2.5.\n\n| arm | after block | RMS std (all) | kurtosis (all) | RMS boundary | RMS regular | ratio |\n|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_boundaries; k++) {
            const lattice_rms_stats *st = r0->rms[k];
            fprintf(f, "| %s | %d | %.3f | %.1f | %.3f | %.3f | %.1f |\n", p->arms[a], k + 1,
                    st[2].std, st[2].kurtosis, st[1].mean, st[0].mean,
                    st[0].mean > 0 ? st[1].mean / st[0].mean : NAN);
        }
    }
}

static void write_csv(const char *path, const study *s)
{
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s: %s", path, strerror(errno));
    fprintf(f, "arm,seed,step,phase,active_layers,active_layer_tokens,val_ce\n");
    for (int a = 0; a < s->p->n_arms; a++)
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            for (int k = 0; k < r->n_pts; k++)
                fprintf(f, "%s,%d,%lld,%d,%d,%lld,%.6f\n", s->p->arms[a], i + 1,
                        (long long)r->pts[k].step, r->pts[k].phase, r->pts[k].active,
                        (long long)r->pts[k].active_layer_tokens, r->pts[k].val_ce);
        }
    fclose(f);
}

static void write_json(const char *path, const study *s, double wall)
{
    json_object *o = json_object_new_object();
    json_object_object_add(o, "preset", json_object_get(s->p->json));
    json_object_object_add(o, "lattice_version", json_object_new_string(lattice_version_string()));
    json_object_object_add(o, "wall_seconds", json_object_new_double(wall));
    json_object *arms = json_object_new_object();
    for (int a = 0; a < s->p->n_arms; a++) {
        json_object *seeds = json_object_new_array();
        for (int i = 0; i < s->p->seeds; i++) {
            const run_result *r = s->res[a][i];
            json_object *ro = json_object_new_object();
            json_object_object_add(ro, "val_ce", json_object_new_double(r->final_val));
            json_object_object_add(ro, "seconds", json_object_new_double(r->seconds));
            json_object_object_add(ro, "tokens_per_s", json_object_new_double(r->tokens_per_s));
            json_object *rm = json_object_new_array(), *rs = json_object_new_array(),
                        *bs = json_object_new_array();
            for (int k = 0; k < r->n_blocks_measured; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "dce", json_object_new_double(r->removal[k].dce));
                json_object_object_add(e, "angle", json_object_new_double(r->removal[k].angle));
                json_object_array_add(rm, e);
            }
            for (int k = 0; k < r->n_appends; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "step", json_object_new_int64(r->append_steps[k]));
                json_object_object_add(e, "jump", json_object_new_double(r->resp[k].jump));
                json_object_object_add(e, "area", json_object_new_double(r->resp[k].area));
                json_object_object_add(e, "recovery", json_object_new_int64(r->resp[k].recovery));
                json_object_array_add(rs, e);
            }
            for (int k = 0; k < r->n_boundaries; k++) {
                json_object *e = json_object_new_object();
                json_object_object_add(e, "std_all", json_object_new_double(r->rms[k][2].std));
                json_object_object_add(e, "kurtosis_all", json_object_new_double(r->rms[k][2].kurtosis));
                json_object_object_add(e, "mean_boundary", json_object_new_double(r->rms[k][1].mean));
                json_object_object_add(e, "mean_regular", json_object_new_double(r->rms[k][0].mean));
                json_object_array_add(bs, e);
            }
            json_object_object_add(ro, "block_removal", rm);
            json_object_object_add(ro, "loss_response", rs);
            json_object_object_add(ro, "boundary_scale", bs);
            json_object_array_add(seeds, ro);
        }
        json_object_object_add(arms, s->p->arms[a], seeds);
    }
    json_object_object_add(o, "arms", arms);
    if (json_object_to_file_ext(path, o, JSON_C_TO_STRING_PRETTY) != 0)
        die("cannot write %s", path);
    json_object_put(o);
}

/* Curves through gnuplot when it is installed (PNG and SVG). */
static void plot(const char *dir, const study *s)
{
    if (system("command -v gnuplot >/dev/null 2>&1") != 0) {
        fprintf(stderr, PROG ": gnuplot not found: curves are in curves.csv only\n");
        return;
    }
    char gp[2048];
    snprintf(gp, sizeof gp, "%s/curves.gp", dir);
    FILE *f = fopen(gp, "w");
    if (!f)
        return;
    fprintf(f, "set datafile separator ','\nset key outside right\nset grid\nset ylabel 'validation CE (nats/byte)'\n");
    for (int fmt = 0; fmt < 2; fmt++) {
        for (int x = 0; x < 2; x++) {
            fprintf(f, "set terminal %s size 1100,600\nset output '%s/curves_%s.%s'\n",
                    fmt ? "svg" : "pngcairo", dir, x ? "active_layer_tokens" : "steps",
                    fmt ? "svg" : "png");
            fprintf(f, "set xlabel '%s'\n", x ? "active-layer tokens" : "steps");
            /* growth points: phase boundaries of the grow schedule */
            fprintf(f, "unset arrow\n");
            if (!x)
                for (int k = 1; k < s->p->blocks; k++)
                    fprintf(f, "set arrow from %d, graph 0 to %d, graph 1 nohead dt 2 lc 'gray'\n",
                            k * s->p->steps_per_phase, k * s->p->steps_per_phase);
            fprintf(f, "plot ");
            for (int a = 0; a < s->p->n_arms; a++)
                fprintf(f, "%s'%s/curves.csv' using ($2==1 && strcol(1) eq '%s' ? $%d : 1/0):7 "
                           "with linespoints title '%s (seed 1)'",
                        a ? ", " : "", dir, s->p->arms[a], x ? 6 : 3, s->p->arms[a]);
            fprintf(f, "\n");
        }
    }
    fclose(f);
    char cmd[4200];
    snprintf(cmd, sizeof cmd, "gnuplot '%s' 2>/dev/null", gp);
    if (system(cmd) != 0)
        fprintf(stderr, PROG ": gnuplot failed; curves are in curves.csv\n");
}

/* ---- the paper preset's size check ---------------------------------------------------- */

static int fits_here(const preset *p)
{
    lattice_model_params mp = model_shape(p, p->blocks * p->block_size, 1);
    lattice_norm *n;
    lattice_norm_create(LATTICE_NORM_POST, LATTICE_NORM_RMS, 1e-6f, &n);
    int64_t params = 0;
    size_t bytes = 0;
    lattice_model_params tmp = model_shape(p, p->t_layers, 1);
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
    fprintf(stderr, PROG ": student %.3gM parameters, teacher %.3gM; memory %.1f GiB (student "
                    "arenas + AdamW moments + teacher); one student step %.3g FLOP; grow arm %.3g "
                    "FLOP; this machine has %.1f GiB\n",
            params / 1e6, tparams / 1e6, need / (1 << 30), step,
            step * p->steps_per_phase * (1 + 2 + 3) / 3.0, have / (1 << 30));
    return need < 0.8 * have;
}

/* ---- main --------------------------------------------------------------------------------- */

static void usage(FILE *f)
{
    fprintf(f, "usage: " PROG " --preset FILE [--out DIR] [--retrain-teacher] [--threads N] [--seeds N]\n"
               "Reproduce the joint-vs-curriculum study of arXiv 2608.13156 with a preset\n"
               "(examples/reproduce/presets/{quick,small,paper}.json). Results go to DIR\n"
               "(default results/<preset name>): report.md, results.json, curves.csv, plots.\n");
}

int main(int argc, char **argv)
{
    const char *preset_path = NULL, *out = NULL;
    int retrain = 0, threads = 0, seeds = 0;
    static const struct option opts[] = {{"preset", required_argument, 0, 'p'},
                                         {"out", required_argument, 0, 'o'},
                                         {"retrain-teacher", no_argument, 0, 'r'},
                                         {"threads", required_argument, 0, 't'},
                                         {"seeds", required_argument, 0, 's'},
                                         {"help", no_argument, 0, 'h'},
                                         {0, 0, 0, 0}};
    for (int c; (c = getopt_long(argc, argv, "p:o:rt:s:h", opts, NULL)) != -1;) {
        switch (c) {
        case 'p': preset_path = optarg; break;
        case 'o': out = optarg; break;
        case 'r': retrain = 1; break;
        case 't':
            if (ex_parse_int("threads", optarg, 1, 256, &threads))
                return 2;
            break;
        case 's':
            if (ex_parse_int("seeds", optarg, 1, MAX_SEEDS, &seeds))
                return 2;
            break;
        case 'h': usage(stdout); return 0;
        default: usage(stderr); return 2;
        }
    }
    if (!preset_path || optind != argc) {
        usage(stderr);
        return 2;
    }
    preset p;
    load_preset(&p, preset_path);
    if (threads > 0)
        p.threads = threads;
    if (seeds > 0)
        p.seeds = seeds > MAX_SEEDS ? MAX_SEEDS : seeds;
    if (!fits_here(&p)) {
        fprintf(stderr, PROG ": preset '%s' does not fit on this machine; nothing was run\n", p.name);
        json_object_put(p.json);
        return 0;
    }
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", out ? out : "");
    if (!out)
        snprintf(dir, sizeof dir, "results/%s", p.name);
    char cmd[1100];
    snprintf(cmd, sizeof cmd, "mkdir -p '%s'", dir);
    if (system(cmd) != 0)
        die("cannot create %s", dir);

    lattice_backend *be;
    check(lattice_backend_create("default", &be), "backend", NULL);
    check(lattice_backend_set_threads(be, p.threads), "backend", NULL);
    double t0 = ex_now();
    lattice_model *teacher = get_teacher(&p, be, dir, retrain);
    double teacher_s = ex_now() - t0;

    study s = {&p, {{0}}};
    int n_runs = p.n_arms * p.seeds, run = 0;
    int64_t all_steps = 0;
    for (int a = 0; a < p.n_arms; a++) {
        lattice_schedule *sc;
        check(lattice_schedule_create_preset(find_kind(p.arms[a])->schedule, p.blocks,
                                             p.block_size, p.steps_per_phase, 0, &sc),
              "schedule", NULL);
        all_steps += lattice_schedule_total_steps(sc) * p.seeds;
        lattice_schedule_destroy(sc);
    }
    progress pr = {0};
    pr.tty = isatty(2);
    pr.start = ex_now();
    pr.steps_total_all = all_steps;
    /* seeds outermost: an interrupted run still has complete pairs */
    for (int i = 0; i < p.seeds; i++)
        for (int a = 0; a < p.n_arms; a++) {
            s.res[a][i] = calloc(1, sizeof(run_result));
            pr.arm = p.arms[a];
            pr.seed = i + 1;
            pr.run_index = ++run;
            pr.n_runs = n_runs;
            run_arm(&p, be, teacher, find_kind(p.arms[a]), i + 1, &pr, s.res[a][i]);
            pr.steps_done_before += s.res[a][i]->n_steps;
            if (!pr.tty)
                fprintf(stderr, "[%d/%d] %s seed %d: val CE %.4f (%.1fs, %.0f tokens/s)\n", run,
                        n_runs, p.arms[a], i + 1, s.res[a][i]->final_val, s.res[a][i]->seconds,
                        s.res[a][i]->tokens_per_s);
        }
    if (pr.tty)
        fputs("\r\033[K", stderr);
    double wall = ex_now() - t0;

    char path[1200];
    snprintf(path, sizeof path, "%s/report.md", dir);
    FILE *f = fopen(path, "w");
    if (!f)
        die("cannot write %s", path);
    report(f, &s);
    fprintf(f, "\nWall time %.0f s (teacher %.0f s), lattice %s, backend %s with %d threads.\n",
            wall, teacher_s, lattice_version_string(), lattice_backend_name(be), p.threads);
    fclose(f);
    report(stdout, &s);
    printf("\nWall time %.0f s (teacher %.0f s). Results in %s/.\n", wall, teacher_s, dir);
    snprintf(path, sizeof path, "%s/curves.csv", dir);
    write_csv(path, &s);
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_json(path, &s, wall);
    plot(dir, &s);

    for (int a = 0; a < p.n_arms; a++)
        for (int i = 0; i < p.seeds; i++) {
            free(s.res[a][i]->losses);
            free(s.res[a][i]);
        }
    lattice_model_destroy(teacher);
    lattice_backend_destroy(be);
    json_object_put(p.json);
    return 0;
}
