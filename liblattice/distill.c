/* The distillation loss: alpha tau^2 KL (forward or reverse, dense or top-k
 * teacher logits) plus gamma CE, with its dlogits. */
/* float selects in the row maxima must if-convert to vectorise (see kernels.c) */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include "distill_access.h"

#include "internal.h"
#include "kernels.h"
#include "model_access.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

struct lattice_distill {
    lattice_distill_params p;
    uint32_t *stamp; /* per-token marks for validating top-k indices */
    int stamp_len;
    double *rows; /* per-position kl then ce, summed in order for determinism */
    int64_t rows_len;
    double *exps; /* per thread: 3 rows of exponentials (student, teacher, student at tau 1) */
    size_t exps_len;
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
    lattice_busy busy;     /* the thread inside a call that changes it (handle.h) */
};

/* Threads are a backend setting: a loss computed for a model (through
 * lattice_distill_model or the trainer) runs on the model's backend's count,
 * its caller's nt; the raw-pointer calls have no backend, and take n_threads
 * (0: one). The bodies below take nt, 0 for the loss's own. */
static int loss_threads(const lattice_distill *d, int nt)
{
    if (nt > 0)
        return nt;
    return d->p.n_threads > 0 ? d->p.n_threads : 1;
}

void lattice_distill_params_init(lattice_distill_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->alpha = 0.7f;
    p->gamma = 0.3f;
    p->tau = 1.0f;
    p->direction = LATTICE_DISTILL_KL_FORWARD;
    p->n_threads = 0;
}

lattice_status lattice_distill_create(const lattice_distill_params *params, lattice_distill **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_distill_create: invalid argument: out is NULL");
    *out = NULL;
    lattice_distill_params p;
    lattice_distill_params_init(&p);
    TRY(lattice__copy_in(
        NULL, "lattice_distill_create",
        LATTICE__SIZED(lattice_distill_params, "params", LATTICE__DISTILL_PARAMS_1_0, 0), &p,
        params));
    if (!(p.alpha >= 0.0f) || !isfinite(p.alpha) || !(p.gamma >= 0.0f) || !isfinite(p.gamma) ||
        !(p.tau >= LATTICE_DISTILL_TAU_MIN && p.tau <= LATTICE_DISTILL_TAU_MAX) ||
        p.n_threads < 0 || p.n_threads > 4096 ||
        (p.direction != LATTICE_DISTILL_KL_FORWARD && p.direction != LATTICE_DISTILL_KL_REVERSE))
        return lattice__fail(LATTICE_ERR_INVALID_CONFIG,
                             "lattice_distill_create: alpha %g, gamma %g, tau %g, n_threads %d, "
                             "direction %d: needs finite alpha >= 0, gamma >= 0, tau in %g..%g, "
                             "n_threads in 0..4096 and a known direction",
                             (double)p.alpha, (double)p.gamma, (double)p.tau, p.n_threads,
                             (int)p.direction, (double)LATTICE_DISTILL_TAU_MIN,
                             (double)LATTICE_DISTILL_TAU_MAX);
    lattice_distill *d = calloc(1, sizeof(*d));
    if (!d)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_distill_create: out of memory");
    d->p = p;
    *out = d;
    return LATTICE_OK;
}

static void distill_free(lattice_distill *d)
{
    free(d->stamp);
    free(d->rows);
    free(d->exps);
    free(d);
}

LATTICE__BORROWABLE(lattice_distill, distill, "distill loss", distill_free)

lattice_busy *lattice__distill_busy(lattice_distill *h) { return &h->busy; }

const char *lattice_distill_errmsg(const lattice_distill *d)
{
    return d ? d->err : "no distillation loss (NULL handle)";
}

lattice_status lattice_distill_get_params(const lattice_distill *d, lattice_distill_params *out)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_distill_get_params", 2,
                      (const void *)d, "distill", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    return lattice__copy_out(LATTICE__ERRBUF(d), "lattice_distill_get_params", out, &d->p, sizeof(d->p),
                             LATTICE__DISTILL_PARAMS_1_0);
}

#define VINLINE __attribute__((always_inline)) static inline

/* exp(x) in double within about 1 ulp for x <= 709 (callers pass x <= 0),
 * exactly 0 below -708 (where it would be subnormal); NaN stays NaN. Like
 * lattice__expf, branch-free so that loops over it vectorise: libm's exp does
 * not, and a distillation step calls it for every logit of student and
 * teacher. */
VINLINE double exp_d(double x)
{
    union { double f; uint64_t i; } t, sc, y;
    /* x = n ln2 + r, |r| <= ln2 / 2; the shifter rounds x log2(e) to n */
    const double shifter = 6755399441055744.0; /* 1.5 * 2^52 */
    t.f = x * 1.4426950408889634074 + shifter;
    const double n = t.f - shifter;
    double r = x - n * 6.93147180369123816490e-01; /* ln2 high part: n * it is exact */
    r = r - n * 1.90821492927058770002e-10;        /* ln2 low part */
    /* exp(r): Taylor to r^13 (truncation < 5e-18 relative on |r| <= 0.347) */
    double p = 1.0 / 6227020800.0;
    p = p * r + 1.0 / 479001600.0;
    p = p * r + 1.0 / 39916800.0;
    p = p * r + 1.0 / 3628800.0;
    p = p * r + 1.0 / 362880.0;
    p = p * r + 1.0 / 40320.0;
    p = p * r + 1.0 / 5040.0;
    p = p * r + 1.0 / 720.0;
    p = p * r + 1.0 / 120.0;
    p = p * r + 1.0 / 24.0;
    p = p * r + 1.0 / 6.0;
    p = p * r + 0.5;
    p = p * r + 1.0;
    p = p * r + 1.0;
    sc.i = (t.i - 0x4338000000000000ull + 1023u) << 52; /* 2^n for n in -1022..1023 */
    y.f = p * sc.f;
    y.i &= -(uint64_t)!(x < -708.0);
    return y.f;
}

/* e[j] = exp(x[j] s - m) with m = max_j x[j] s (s > 0); *sum gets the sum of
 * e, and the return is the log-sum-exp of x s. Max and sum run in fixed
 * lanes: they vectorise and depend only on the data. */
VINLINE double exps_row(double *e, const float *x, int n, double s, double *sum)
{
    float lm[8];
    for (int l = 0; l < 8; l++)
        lm[l] = x[0];
    int j = 0;
    for (; j + 8 <= n; j += 8)
        for (int l = 0; l < 8; l++)
            lm[l] = x[j + l] > lm[l] ? x[j + l] : lm[l];
    for (; j < n; j++)
        lm[0] = x[j] > lm[0] ? x[j] : lm[0];
    float xm = lm[0]; /* NaN in lane 0 (x[0] is NaN) stays: the sum turns NaN either way */
    for (int l = 1; l < 8; l++)
        xm = lm[l] > xm ? lm[l] : xm;
    const double m = (double)xm * s; /* = max of x s: rounding is monotonic */
    for (j = 0; j < n; j++)
        e[j] = exp_d((double)x[j] * s - m);
    double ls[4] = {0};
    for (j = 0; j + 4 <= n; j += 4)
        for (int l = 0; l < 4; l++)
            ls[l] += e[j + l];
    for (; j < n; j++)
        ls[0] += e[j];
    *sum = (ls[0] + ls[1]) + (ls[2] + ls[3]);
    return m + log(*sum);
}

static lattice_status check_common(lattice_distill *d, const float *student,
                                   const int32_t *targets, const uint8_t *mask, int64_t n,
                                   int vocab, lattice_distill_result *result, int64_t *count)
{
    *count = 0;
    if (!student || !result || n < 0 || vocab < 1)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "NULL logits or result, or a bad size");
    if (!lattice__count_fits(n, sizeof(float) * (size_t)vocab))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "%lld positions of %d logits cannot be in memory", (long long)n, vocab);
    if (!targets && d->p.gamma > 0.0f)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "labels are needed when gamma > 0");
    int64_t c = 0;
    for (int64_t i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        c++;
        if (targets && (targets[i] < 0 || targets[i] >= vocab))
            return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                        "label %d at position %lld outside the vocabulary", (int)targets[i],
                        (long long)i);
    }
    *count = c;
    return LATTICE_OK;
}

/* dlogits may be the student's logits themselves (the gradient replaces them,
 * row by row, each row read before it is written); any other overlap with what
 * the loss reads would read gradients as inputs, and is refused. */
static lattice_status check_dlogits(lattice_distill *d, const float *dlogits, const float *student,
                                    int64_t n, int vocab, const void *const in[4],
                                    const size_t in_bytes[4])
{
    if (!dlogits || n == 0)
        return LATTICE_OK;
    const uintptr_t out = (uintptr_t)dlogits;
    const size_t out_bytes = sizeof(float) * (size_t)n * (size_t)vocab;
    static const char *const names[4] = {"the teacher's logits or values", "the teacher's indices",
                                         "the labels", "the mask"};
    if (dlogits != student && out < (uintptr_t)student + out_bytes &&
        (uintptr_t)student < out + out_bytes)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "dlogits overlaps the student logits without being them (give the "
                    "student's own buffer, or one apart)");
    for (int i = 0; i < 4; i++)
        if (in[i] && out < (uintptr_t)in[i] + in_bytes[i] && (uintptr_t)in[i] < out + out_bytes)
            return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "dlogits overlaps %s, which the loss reads",
                        names[i]);
    return LATTICE_OK;
}

/* Per-position scratch, grown on demand (a batch shape change, not every call). */
static lattice_status rows_for(lattice_distill *d, int nt, int64_t n, int vocab, int k)
{
    const size_t exps = (size_t)nt * 3 * (size_t)(vocab > k ? vocab : k);
    if (d->exps_len < exps) {
        double *e = realloc(d->exps, sizeof(double) * exps);
        if (!e)
            return FAIL(d, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %zu exponentials", exps);
        d->exps = e;
        d->exps_len = exps;
    }
    if (d->rows_len >= n)
        return LATTICE_OK;
    double *r = realloc(d->rows, sizeof(double) * 2 * (size_t)(n > 0 ? n : 1));
    if (!r)
        return FAIL(d, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %lld positions", (long long)n);
    d->rows = r;
    d->rows_len = n;
    return LATTICE_OK;
}

static lattice_status finish(lattice_distill *d, int64_t n, int64_t count,
                             lattice_distill_result *result)
{
    double kl = 0.0, ce = 0.0;
    for (int64_t i = 0; i < n; i++) {
        kl += d->rows[2 * i];
        ce += d->rows[2 * i + 1];
    }
    const double inv = count ? 1.0 / (double)count : 0.0;
    const double tau = d->p.tau;
    result->kl = kl * inv;
    result->ce = ce * inv;
    result->loss = d->p.alpha * tau * tau * result->kl + d->p.gamma * result->ce;
    result->n_counted = count;
    if (!isfinite(result->loss))
        return FAIL(d, LATTICE_ERR_NON_FINITE, "the distillation loss is not finite (kl %g, ce %g)",
                    result->kl, result->ce);
    return LATTICE_OK;
}

/* One loss call: the KL term of a row comes from a dense or a top-k teacher;
 * the rest (masking, the CE term, per-row sums) is shared. */
typedef struct kl_job {
    const float *student, *teacher;      /* teacher: dense [n, vocab] or top-k values [n, k] */
    const int32_t *index;                /* top-k ids [n, k], NULL for dense */
    int vocab, k, reverse;
    double s, wkd;                       /* 1 / tau; alpha * tau / count */
} kl_job;

/* out = the sum over c in 0..n of term (an expression in c), in 4 fixed
 * lanes: it vectorises, and the result depends only on the data */
#define LANE_SUM(out, n, term)                                                                     \
    do {                                                                                           \
        double ls_[4] = {0};                                                                       \
        int c0_ = 0;                                                                               \
        for (; c0_ + 4 <= (n); c0_ += 4)                                                           \
            for (int l_ = 0; l_ < 4; l_++) {                                                       \
                const int c = c0_ + l_;                                                            \
                ls_[l_] += (term);                                                                 \
            }                                                                                      \
        for (int c = c0_; c < (n); c++)                                                            \
            ls_[0] += (term);                                                                      \
        (out) = (ls_[0] + ls_[1]) + (ls_[2] + ls_[3]);                                             \
    } while (0)

/* Row i: out[0] its KL, out[1] its cross-entropy at temperature 1 (0 without
 * targets); when dz is non-NULL the row's gradient, wkd d(KL) + wce d(CE), is
 * written to it. Every exponential is taken once: e holds 3 rows of scratch
 * (student at 1/tau, teacher, student at temperature 1 when tau is not 1). */
LATTICE_VEC_CLONES
static void loss_row(const kl_job *j, int64_t i, const int32_t *targets, double wce, float *dz,
                     double *e, double out[2])
{
    const int V = j->vocab, K = j->index ? j->k : V;
    const double s = j->s, wkd = j->wkd;
    const float *z = j->student + i * V;
    double *eq = e, *ep = e + (V > K ? V : K), *e1 = ep + (V > K ? V : K);
    double sq, sp, s1;
    const double lq = exps_row(eq, z, V, s, &sq), iq = 1.0 / sq;
    const float *t = j->teacher + i * K;
    const double lp = exps_row(ep, t, K, s, &sp), ip = 1.0 / sp;
    /* the cross-entropy's softmax: the student's own when tau is 1 */
    double l1 = lq, i1 = iq;
    if (targets && s != 1.0) {
        l1 = exps_row(e1, z, V, 1.0, &s1);
        i1 = 1.0 / s1;
    } else {
        e1 = eq;
    }
    const double w1 = targets ? wce * i1 : 0.0;
    /* read before the row's gradient is written: dz may be the student's row itself */
    out[1] = targets ? l1 - z[targets[i]] : 0.0;
    double kl;
    if (j->index) {
        const int32_t *idx = j->index + i * K;
        LANE_SUM(kl, K, ep[c] * ip * ((t[c] * s - lp) - (z[idx[c]] * s - lq)));
        if (dz) {
            for (int c = 0; c < V; c++)
                dz[c] = (float)(wkd * iq * eq[c] + w1 * e1[c]);
            for (int c = 0; c < K; c++)
                dz[idx[c]] -= (float)(wkd * ip * ep[c]);
        }
    } else if (!j->reverse) {
        LANE_SUM(kl, V, ep[c] * ip * ((t[c] * s - lp) - (z[c] * s - lq)));
        if (dz)
            for (int c = 0; c < V; c++)
                dz[c] = (float)(wkd * (eq[c] * iq - ep[c] * ip) + w1 * e1[c]);
    } else {
        LANE_SUM(kl, V, eq[c] * iq * ((z[c] * s - lq) - (t[c] * s - lp)));
        if (dz)
            for (int c = 0; c < V; c++) {
                const double q = eq[c] * iq, g = q * (((z[c] * s - lq) - (t[c] * s - lp)) - kl);
                dz[c] = (float)(wkd * g + w1 * e1[c]);
            }
    }
    out[0] = kl;
    if (targets && dz)
        dz[targets[i]] -= (float)wce;
}

static lattice_status run_loss(lattice_distill *d, int nt, kl_job *j, const int32_t *targets,
                               const uint8_t *mask, int64_t n, float *dlogits, int64_t count,
                               lattice_distill_result *result)
{
    const double inv = count ? 1.0 / (double)count : 0.0;
    const double wce = d->p.gamma * inv;
    j->s = 1.0 / d->p.tau;
    j->wkd = d->p.alpha * d->p.tau * inv; /* alpha tau^2 * (1/tau) / count */
    lattice_status st = rows_for(d, nt, n, j->vocab, j->index ? j->k : j->vocab);
    if (st != LATTICE_OK)
        return st;
    double *rows = d->rows;
    const int V = j->vocab;
    const size_t per_thread = 3 * (size_t)(V > j->k ? V : j->k);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        int tid = 0;
#ifdef _OPENMP
        tid = omp_get_thread_num();
#endif
        float *dz = dlogits ? dlogits + i * V : NULL;
        rows[2 * i] = rows[2 * i + 1] = 0.0;
        if (mask && !mask[i]) {
            if (dz)
                memset(dz, 0, sizeof(float) * V);
            continue;
        }
        loss_row(j, i, targets, wce, dz, d->exps + (size_t)tid * per_thread, rows + 2 * i);
    }
    return finish(d, n, count, result);
}

static lattice_status distill_dense_body(lattice_distill *d, int nt, const float *student,
                                         const float *teacher, const int32_t *targets,
                                         const uint8_t *mask, int64_t n, int vocab, float *dlogits,
                                         lattice_distill_result *result)
{
    if (!d)
        return lattice__set_error(LATTICE__ERRBUF(d), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_distill_dense: invalid argument: distill is NULL");
    if (!teacher)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "teacher logits are NULL");
    int64_t count;
    lattice_status st = check_common(d, student, targets, mask, n, vocab, result, &count);
    if (st != LATTICE_OK)
        return st;
    const void *const in[4] = {teacher, NULL, targets, mask};
    const size_t in_bytes[4] = {sizeof(float) * (size_t)n * (size_t)vocab, 0,
                                sizeof(int32_t) * (size_t)n, (size_t)n};
    st = check_dlogits(d, dlogits, student, n, vocab, in, in_bytes);
    if (st != LATTICE_OK)
        return st;
    kl_job j = {student, teacher, NULL, vocab, 0, d->p.direction == LATTICE_DISTILL_KL_REVERSE, 0, 0};
    return run_loss(d, loss_threads(d, nt), &j, targets, mask, n, dlogits, count, result);
}

static lattice_status distill_dense_on(lattice_distill *d, int nt, const float *student,
                                       const float *teacher, const int32_t *targets,
                                       const uint8_t *mask, int64_t n, int vocab, float *dlogits,
                                       lattice_distill_result *result)
{
    LATTICE__INSIDE(d, "lattice_distill_dense", "distill loss",
                    distill_dense_body(d, nt, student, teacher, targets, mask, n, vocab, dlogits,
                                       result));
}

lattice_status lattice_distill_dense(lattice_distill *d, const float *student,
                                     const float *teacher, const int32_t *targets,
                                     const uint8_t *mask, int64_t n, int vocab, float *dlogits,
                                     lattice_distill_result *result)
{
    return distill_dense_on(d, 0, student, teacher, targets, mask, n, vocab, dlogits, result);
}

static lattice_status distill_topk_body(lattice_distill *d, int nt, const float *student,
                                        const int32_t *teacher_index, const float *teacher_value,
                                        int k, const int32_t *targets, const uint8_t *mask,
                                        int64_t n, int vocab, float *dlogits,
                                        lattice_distill_result *result)
{
    if (!d)
        return lattice__set_error(LATTICE__ERRBUF(d), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_distill_topk: invalid argument: distill is NULL");
    if (d->p.direction == LATTICE_DISTILL_KL_REVERSE)
        return FAIL(d, LATTICE_ERR_UNSUPPORTED,
                    "reverse KL needs the teacher's whole distribution (dense logits)");
    if (!teacher_index || !teacher_value || k < 1 || k > vocab)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "top-k teacher needs indices, values and 1 <= k <= vocab");
    int64_t count;
    lattice_status st = check_common(d, student, targets, mask, n, vocab, result, &count);
    if (st != LATTICE_OK)
        return st;
    const size_t nk = (size_t)n * (size_t)k;
    const void *const in[4] = {teacher_value, teacher_index, targets, mask};
    const size_t in_bytes[4] = {sizeof(float) * nk, sizeof(int32_t) * nk,
                                sizeof(int32_t) * (size_t)n, (size_t)n};
    st = check_dlogits(d, dlogits, student, n, vocab, in, in_bytes);
    if (st != LATTICE_OK)
        return st;
    if (d->stamp_len < vocab) {
        uint32_t *s = realloc(d->stamp, sizeof(uint32_t) * vocab);
        if (!s)
            return FAIL(d, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %d marks", vocab);
        d->stamp = s;
        d->stamp_len = vocab;
    }
    memset(d->stamp, 0, sizeof(uint32_t) * vocab);
    for (int64_t i = 0; i < n; i++) {
        const int32_t *idx = teacher_index + i * k;
        uint32_t mark = (uint32_t)(i % 0xfffffffeu) + 1u;
        for (int e = 0; e < k; e++) {
            if (idx[e] < 0 || idx[e] >= vocab || d->stamp[idx[e]] == mark)
                return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                            "top-k index %d at position %lld is out of range or repeated",
                            (int)idx[e], (long long)i);
            d->stamp[idx[e]] = mark;
        }
    }
    kl_job j = {student, teacher_value, teacher_index, vocab, k, 0, 0, 0};
    return run_loss(d, loss_threads(d, nt), &j, targets, mask, n, dlogits, count, result);
}

lattice_status lattice__distill_topk_on(lattice_distill *d, int nt, const float *student,
                                       const int32_t *teacher_index, const float *teacher_value,
                                       int k, const int32_t *targets, const uint8_t *mask,
                                       int64_t n, int vocab, float *dlogits,
                                       lattice_distill_result *result)
{
    LATTICE__INSIDE(d, "lattice_distill_topk", "distill loss",
                    distill_topk_body(d, nt, student, teacher_index, teacher_value, k, targets,
                                      mask, n, vocab, dlogits, result));
}

lattice_status lattice_distill_topk(lattice_distill *d, const float *student,
                                    const int32_t *teacher_index, const float *teacher_value,
                                    int k, const int32_t *targets, const uint8_t *mask, int64_t n,
                                    int vocab, float *dlogits, lattice_distill_result *result)
{
    return lattice__distill_topk_on(d, 0, student, teacher_index, teacher_value, k, targets, mask,
                                    n, vocab, dlogits, result);
}

static lattice_status distill_model(lattice_distill *d, lattice_model *student,
                                    const float *teacher, int teacher_vocab,
                                    const int32_t *targets, const uint8_t *mask,
                                    lattice_distill_result *result)
{
    if (!d)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "lattice_distill_model: invalid argument: distill is NULL");
    if (!student || !teacher)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "lattice_distill_model: %s is NULL",
                    student ? "teacher" : "student");
    lattice__model_pass pass;
    if (lattice__model_last_pass(student, &pass) != LATTICE_OK)
        return FAIL(d, LATTICE_ERR_STATE, "the student has run no forward pass");
    if (teacher_vocab != pass.vocab)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "the teacher's logits are %d wide but the student's vocab_size is %d",
                    teacher_vocab, pass.vocab);
    return lattice__model_loss_written(
        student, distill_dense_on(d, pass.threads, pass.logits, teacher, targets, mask, pass.rows,
                                  pass.vocab, pass.dlogits, result));
}

/* Inside the student's busy section (handle.h): it reads its logits and
 * writes its dlogits. */
lattice_status lattice_distill_model(lattice_distill *d, lattice_model *student,
                                     const float *teacher, int teacher_vocab,
                                     const int32_t *targets, const uint8_t *mask,
                                     lattice_distill_result *result)
{
    LATTICE__INSIDE_BUSY(lattice__model_busy(student), "lattice_distill_model", "model",
                         distill_model(d, student, teacher, teacher_vocab, targets, mask, result));
}
