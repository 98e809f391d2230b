/* AdamW: warmup and cosine decay, global-norm clipping, state resets, frozen groups. */
#include "optim_access.h"

#include "fields.h"

#include "kernels.h"
#include "model_access.h"

#include <stddef.h>
#include <math.h>
#ifdef _OPENMP
#include <omp.h>
#endif
#include <stdlib.h>
#include <string.h>

struct lattice_optim {
    lattice_model *model;
    lattice_optim_params p;
    float *m1, *m2;    /* moments, laid out like the model's parameter arena */
    int64_t *t_tensor; /* updates each tensor has had since the last reset */
    int64_t step;      /* schedule position */
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
};

/* A gradient norm's sum over fewer floats than this runs on the calling
 * thread: waking a team per tensor cost more than the sum (at the study's
 * shape most tensors are 64 x 64; bench_step op_optim_ms, 2 threads). */
#define OPTIM_SERIAL (1L << 18)
/* The update wakes a team once for all tensors above this many weights in
 * all (the study's student: 0.48M). */
#define OPTIM_TEAM (1L << 16)


/* The settings' fields, once: the setup digest the ranks compare, a
 * checkpoint's optim object and its reading back derive from this table
 * (fields.h). The step counts stay far from overflow (and exact as
 * doubles): a run adds to them. */
#define OPTIM_FIELD(f, type, since, lo, hi) \
    {#f, type, offsetof(lattice_optim_params, f), since, lo, hi}
#define STEPS_MAX ((int64_t)1 << 50)
static const lattice__field optim_fields[] = {
    OPTIM_FIELD(lr, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(min_lr, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(warmup_steps, LATTICE__F_I64, 1, 0, STEPS_MAX),
    OPTIM_FIELD(total_steps, LATTICE__F_I64, 1, 1, STEPS_MAX),
    OPTIM_FIELD(beta1, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(beta2, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(eps, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(weight_decay, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(clip_norm, LATTICE__F_FLOAT, 1, 1, 0),
    OPTIM_FIELD(lr_shape, LATTICE__F_ENUM, 4, 0, INT32_MAX),
    OPTIM_FIELD(decay_fraction, LATTICE__F_FLOAT, 4, 1, 0),
};
#undef OPTIM_FIELD
#undef STEPS_MAX
const lattice__fields lattice__optim_fields = {optim_fields,
                                               (int)(sizeof optim_fields / sizeof optim_fields[0])};

void lattice_optim_params_init(lattice_optim_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->lr = 1e-4f;
    p->min_lr = 1e-6f;
    p->warmup_steps = 750;
    p->total_steps = 50000;
    p->beta1 = 0.9f;
    p->beta2 = 0.95f;
    p->eps = 1e-8f;
    p->weight_decay = 0.0f;
    p->clip_norm = 0.5f;
    p->lr_shape = LATTICE_OPTIM_LR_SHAPE_COSINE;
    p->decay_fraction = 0.2f;
}

static lattice_status check(const lattice_optim_params *p, char *err)
{
#define BAD(...) return lattice__set_error(err, LATTICE_ERR_INVALID_CONFIG, __VA_ARGS__)
    if (!(p->lr >= 0.0f) || !isfinite(p->lr) || !(p->min_lr >= 0.0f) || !isfinite(p->min_lr))
        BAD("learning rates must be finite and >= 0");
    if (p->warmup_steps < 0 || p->total_steps < 1)
        BAD("warmup_steps must be >= 0 and total_steps >= 1");
    /* either would train at a rate the caller never asked for, without a word:
     * a warmup that outlasts the run never reaches lr, and a floor above the
     * peak makes the "decay" a climb */
    if (p->warmup_steps > p->total_steps)
        BAD("warmup_steps %lld > total_steps %lld: the learning rate would still be warming "
            "up when the run ends (make warmup_steps at most total_steps)",
            (long long)p->warmup_steps, (long long)p->total_steps);
    if (p->min_lr > p->lr)
        BAD("min_lr %g > lr %g: the decay would climb from lr to min_lr (make min_lr at "
            "most lr)", (double)p->min_lr, (double)p->lr);
    if (!(p->beta1 >= 0.0f && p->beta1 < 1.0f) || !(p->beta2 >= 0.0f && p->beta2 < 1.0f))
        BAD("betas must lie in [0, 1)");
    if (!(p->eps > 0.0f) || !isfinite(p->eps))
        BAD("eps must be positive");
    if (!(p->weight_decay >= 0.0f) || !isfinite(p->weight_decay))
        BAD("weight_decay must be finite and >= 0");
    /* decoupled decay scales each weight by 1 - lr * weight_decay: outside
     * [0, 1] it flips the weight's sign or grows it without bound */
    const double peak_lr = p->lr > p->min_lr ? p->lr : p->min_lr;
    if (peak_lr * p->weight_decay > 1.0)
        BAD("weight_decay %g with learning rates up to %g: the decay factor "
            "1 - lr * weight_decay (%g) must lie in [0, 1]",
            (double)p->weight_decay, peak_lr, 1.0 - peak_lr * p->weight_decay);
    if (!(p->clip_norm >= 0.0f) || !isfinite(p->clip_norm))
        BAD("clip_norm must be finite and >= 0");
    if (p->lr_shape != LATTICE_OPTIM_LR_SHAPE_COSINE && p->lr_shape != LATTICE_OPTIM_LR_SHAPE_WSD)
        BAD("lr_shape %d is not a shape (LATTICE_OPTIM_LR_SHAPE_COSINE or _WSD)", (int)p->lr_shape);
    if (!(p->decay_fraction >= 0.0f && p->decay_fraction <= 1.0f))
        BAD("decay_fraction %g must lie in [0, 1] (the share of the steps after warmup spent "
            "decaying)", (double)p->decay_fraction);
    return LATTICE_OK;
#undef BAD
}

/* Read the caller's params (internal.h's lattice__copy_in) into *dst when
 * they pass check(). */
static lattice_status copy_params(lattice_optim_params *dst, const lattice_optim_params *src,
                                  const char *fn, char *err)
{
    lattice_optim_params tmp;
    lattice_optim_params_init(&tmp);
    TRY(lattice__copy_in(
        err, fn, LATTICE__SIZED(lattice_optim_params, "params", LATTICE__OPTIM_PARAMS_1_0, 0), &tmp,
        src));
    lattice_status st = check(&tmp, err);
    if (st == LATTICE_OK)
        *dst = tmp;
    return st;
}

lattice_status lattice_optim_create(lattice_model *model, const lattice_optim_params *params,
                                    lattice_optim **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_optim_create: invalid argument: out is NULL");
    *out = NULL;
    if (lattice__need(NULL, "lattice_optim_create", 2,
                      (const void *)model, "model", (const void *)params, "params") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_optim *o = calloc(1, sizeof(*o));
    if (!o)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_optim_create: out of memory");
    lattice_status st = copy_params(&o->p, params, "lattice_optim_create", NULL);
    if (st != LATTICE_OK) {
        free(o);
        return st;
    }
    if ((st = lattice__model_borrow(model, "lattice_optim_create")) != LATTICE_OK) {
        free(o);
        return st;
    }
    o->model = model;
    o->m1 = calloc(lattice__model_arena_floats(model), sizeof(float));
    o->m2 = calloc(lattice__model_arena_floats(model), sizeof(float));
    o->t_tensor = calloc((size_t)lattice_model_get_n_tensors(model), sizeof(int64_t));
    if (!o->m1 || !o->m2 || !o->t_tensor) {
        lattice_optim_destroy(o);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_optim_create: out of memory");
    }
    *out = o;
    return LATTICE_OK;
}

static void optim_free(lattice_optim *o)
{
    lattice_model *m = o->model;
    free(o->m1);
    free(o->m2);
    free(o->t_tensor);
    free(o);
    lattice__model_unborrow(m);
}

LATTICE__BORROWABLE(lattice_optim, optim, "optimizer", optim_free)

const char *lattice_optim_errmsg(const lattice_optim *o)
{
    return o ? o->err : "no optimizer (NULL handle)";
}

lattice_status lattice_optim_set_params(lattice_optim *o, const lattice_optim_params *params)
{
    if (!o)
        return lattice__set_error(LATTICE__ERRBUF(o), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_optim_set_params: invalid argument: optim is NULL");
    /* its model's busy section: a trainer's step reads the settings */
    LATTICE__INSIDE_BUSY(lattice__model_busy(o->model), "lattice_optim_set_params", "model",
                         copy_params(&o->p, params, "lattice_optim_set_params", o->err));
}

lattice_model *lattice__optim_model(const lattice_optim *o) { return o->model; }

lattice_status lattice_optim_get_params(const lattice_optim *o, lattice_optim_params *out)
{
    if (lattice__need(LATTICE__ERRBUF(o), "lattice_optim_get_params", 2,
                      (const void *)o, "optim", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    return lattice__copy_out(LATTICE__ERRBUF(o), "lattice_optim_get_params", out, &o->p, sizeof(o->p),
                             LATTICE__OPTIM_PARAMS_1_0);
}

static double lr_at(const lattice_optim_params *p, int64_t s)
{
    if (s < p->warmup_steps)
        return (double)p->lr * (double)(s + 1) / p->warmup_steps;
    const int64_t n = p->total_steps - p->warmup_steps;
    if (p->lr_shape == LATTICE_OPTIM_LR_SHAPE_WSD) {
        /* in double, clamped before the conversion: n may be near INT64_MAX */
        const double dd = round((double)p->decay_fraction * (double)n);
        const int64_t d = dd >= (double)n ? n : (int64_t)dd;
        if (d <= 0)
            return p->lr;
        double q = (double)(s - (p->total_steps - d)) / (double)d;
        q = q < 0.0 ? 0.0 : q > 1.0 ? 1.0 : q;
        return (double)p->lr - ((double)p->lr - p->min_lr) * q;
    }
    double prog = n > 0 ? (double)(s - p->warmup_steps) / (double)n : 1.0;
    if (prog > 1.0)
        prog = 1.0;
    return p->min_lr + 0.5 * ((double)p->lr - p->min_lr) * (1.0 + cos(M_PI * prog));
}

float lattice_optim_get_lr(const lattice_optim *o) { return o ? (float)lr_at(&o->p, o->step) : 0.0f; }

int64_t lattice_optim_get_steps(const lattice_optim *o) { return o ? o->step : 0; }

void lattice__optim_get_moments(lattice_optim *o, lattice__optim_moments *out)
{
    out->m1 = o->m1;
    out->m2 = o->m2;
    out->t_tensor = o->t_tensor;
}

const lattice_optim_params *lattice__optim_params(const lattice_optim *o) { return &o->p; }

lattice_status lattice__optim_check_params(const lattice_optim_params *p, char *err)
{
    lattice_optim_params tmp;
    return copy_params(&tmp, p, "lattice_optim_set_params", err);
}

void lattice__optim_restore(lattice_optim *o, const lattice_optim_params *p, int64_t step)
{
    o->p = *p;
    o->step = step;
}

static lattice_status optim_reset(lattice_optim *o)
{
    memset(o->m1, 0, lattice__model_arena_floats(o->model) * sizeof(float));
    memset(o->m2, 0, lattice__model_arena_floats(o->model) * sizeof(float));
    memset(o->t_tensor, 0, (size_t)lattice_model_get_n_tensors(o->model) * sizeof(int64_t));
    o->step = 0;
    return LATTICE_OK;
}

lattice_status lattice_optim_reset(lattice_optim *o)
{
    if (!o)
        return lattice__set_error(LATTICE__ERRBUF(o), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_optim_reset: invalid argument: optim is NULL");
    /* its model's busy section, as its step: a step on another thread reads the moments */
    LATTICE__INSIDE_BUSY(lattice__model_busy(o->model), "lattice_optim_reset", "model",
                         optim_reset(o));
}

/* Sum of squares of g[0..n) in double: chunks of NORM_CHUNK elements, each
 * summed in order, then the chunks' sums added in order. The same bits for
 * any thread count, run after run (an OpenMP reduction combines its threads'
 * sums in an unspecified order), so ranks of a data-parallel run, which clip
 * by this norm, never drift apart. */
#define NORM_CHUNK 65536L
double lattice__sum_squares(const float *g, long n, int nt)
{
    enum { GROUP = 64 }; /* chunks per parallel region */
    (void)nt;
    const long n_chunks = (n + NORM_CHUNK - 1) / NORM_CHUNK;
    double total = 0.0;
    for (long c0 = 0; c0 < n_chunks; c0 += GROUP) {
        const int nc = n_chunks - c0 < GROUP ? (int)(n_chunks - c0) : GROUP;
        double part[GROUP];
#pragma omp parallel for schedule(static) num_threads(nt) if (n > OPTIM_SERIAL)
        for (int c = 0; c < nc; c++) {
            const long a = (c0 + c) * NORM_CHUNK;
            const long e = a + NORM_CHUNK < n ? a + NORM_CHUNK : n;
            /* 8 lanes, added in a fixed tree: it vectorises (one chain of
             * double adds ran at its latency, 4 cycles a float) */
            double l[8] = {0};
            long j = a;
            for (; j + 8 <= e; j += 8)
                for (int k = 0; k < 8; k++)
                    l[k] += (double)g[j + k] * g[j + k];
            double s = ((l[0] + l[1]) + (l[2] + l[3])) + ((l[4] + l[5]) + (l[6] + l[7]));
            for (; j < e; j++)
                s += (double)g[j] * g[j];
            part[c] = s;
        }
        for (int c = 0; c < nc; c++)
            total += part[c];
    }
    return total;
}

static lattice_status optim_update(lattice_optim *o, lattice_model *m, float *grad_norm);

lattice_status lattice_optim_step(lattice_optim *o, float *grad_norm)
{
    if (!o)
        return lattice__set_error(LATTICE__ERRBUF(o), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_optim_step: invalid argument: optim is NULL");
    lattice_model *m = o->model;
    /* the step writes the model's weights and its running statistics */
    lattice_status st = lattice__busy_enter(lattice__model_busy(m), "lattice_optim_step", "model");
    if (st != LATTICE_OK)
        return st;
    lattice_prof *prof = lattice__model_prof(m);
    double t0 = lattice__prof_begin(prof);
    st = optim_update(o, m, grad_norm);
    lattice__prof_end(prof, LATTICE_OP_OPTIM, t0);
    lattice__busy_leave(lattice__model_busy(m));
    return st;
}

/* Built per instruction set like the row kernels (kernels.h): the update's
 * loop is one vectorised pass over each tensor. */
LATTICE_VEC_CLONES
static lattice_status optim_update(lattice_optim *o, lattice_model *m, float *grad_norm)
{
    const int nt = lattice_backend_get_threads(lattice__model_backend(m));
    const int n_tensors = lattice_model_get_n_tensors(m);
    (void)nt;
    /* The global norm in double, tensor by tensor in a fixed order. */
    double ss = 0.0;
    long total = 0; /* weights to update */
    for (int i = 0; i < n_tensors; i++) {
        lattice__model_tensor t;
        lattice__model_tensor_at(m, i, &t);
        if (!t.updatable)
            continue;
        total += (long)(t.rows * t.cols);
        ss += lattice__sum_squares(t.grad, (long)(t.rows * t.cols), nt);
    }
    double norm = sqrt(ss);
    if (grad_norm)
        *grad_norm = (float)norm;
    if (!isfinite(norm))
        return lattice__set_error(o->err, LATTICE_ERR_NON_FINITE,
                                  "gradient norm is not finite; no parameter was updated");
    const float clip = o->p.clip_norm > 0.0f && norm > o->p.clip_norm
                           ? (float)(o->p.clip_norm / norm) : 1.0f;
    const float lr = (float)lr_at(&o->p, o->step);
    const float b1 = o->p.beta1, b2 = o->p.beta2, eps = o->p.eps;
    long kept = 0;       /* weights whose update was not finite */
    int first_bad = -1;  /* the tensor of the first of them */
    for (int i = 0; i < n_tensors; i++) { /* this update's step, per tensor */
        lattice__model_tensor t;
        lattice__model_tensor_at(m, i, &t);
        if (t.updatable)
            o->t_tensor[i]++;
    }
    /* One team for every tensor, each split in contiguous thirds, halves...
     * with no join between tensors; each weight's update is the same
     * arithmetic on any thread, so the bits do not depend on the count. */
    const int team = nt > 1 && total > OPTIM_TEAM ? nt : 1;
    (void)team;
#pragma omp parallel num_threads(team) if (team > 1)
    {
        int th = 0, T = 1;
#ifdef _OPENMP
        th = omp_get_thread_num(), T = omp_get_num_threads();
#endif
        long my_bad = 0;
        int my_first = -1;
        for (int i = 0; i < n_tensors; i++) {
            lattice__model_tensor t;
            lattice__model_tensor_at(m, i, &t);
            if (!t.updatable)
                continue;
            const int64_t step = o->t_tensor[i];
            const float c1 = (float)(1.0 - pow(b1, (double)step));
            const float c2 = (float)(1.0 - pow(b2, (double)step));
            const float inv_c1 = 1.0f / c1, inv_c2 = 1.0f / c2;
            const float wd = t.ndim == 2 ? o->p.weight_decay : 0.0f;
            float *w = t.data;
            const float *g = t.grad;
            float *m1 = o->m1 + t.offset, *m2 = o->m2 + t.offset;
            const long n = (long)(t.rows * t.cols);
            const long lo = n * th / T, hi = n * (th + 1) / T;
            long bad = 0;
            for (long j = lo; j < hi; j++) {
                float gj = g[j] * clip;
                const float m1j = b1 * m1[j] + (1.0f - b1) * gj;
                const float m2j = b2 * m2[j] + (1.0f - b2) * gj * gj;
                float mh = m1j * inv_c1, vh = m2j * inv_c2;
                const float next = w[j] - lr * (mh / (sqrtf(vh) + eps) + wd * w[j]);
                /* a weight whose update or moments would overflow keeps its value
                 * and its moments: the caller hears of it below rather than
                 * training on through Inf and NaN (a squared gradient beyond
                 * FLT_MAX makes m2 Inf and the update a silent 0) */
                if (isfinite(next) && isfinite(m2j) && isfinite(m1j)) {
                    m1[j] = m1j;
                    m2[j] = m2j;
                    w[j] = next;
                } else {
                    bad++;
                }
            }
            if (bad && my_first < 0)
                my_first = i;
            my_bad += bad;
        }
#pragma omp critical(lattice_optim_bad)
        {
            kept += my_bad;
            if (my_first >= 0 && (first_bad < 0 || my_first < first_bad))
                first_bad = my_first;
        }
    }
    o->step++;
    lattice__model_commit_refs(m);
    if (kept) {
        lattice__model_tensor bad;
        lattice__model_tensor_at(m, first_bad, &bad);
        return lattice__set_error(o->err, LATTICE_ERR_NON_FINITE,
                                  "the update of %ld weights (the first in '%s') was not finite; "
                                  "they kept their values",
                                  kept, bad.name);
    }
    return LATTICE_OK;
}

void lattice__optim_setup(const lattice_optim *o, const lattice_model *m, int with_state,
                          lattice__setup *s)
{
    lattice__fields_setup(&lattice__optim_fields, &o->p, "", s);
    if (!with_state)
        return;
    SETUP_INT(s, o->step, "step");
    uint64_t h = lattice__model_hash(m, o->m1, LATTICE__HASH_START);
    h = lattice__model_hash(m, o->m2, h);
    h = lattice__hash(h, o->t_tensor, sizeof(int64_t) * (size_t)lattice_model_get_n_tensors(m));
    SETUP_HASH(s, h, "moments_hash");
}
