#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lattice_distill {
    lattice_distill_params p;
    uint32_t *stamp; /* per-token marks for validating top-k indices */
    int stamp_len;
    double *rows; /* per-position kl then ce, summed in order for determinism */
    int64_t rows_len;
    char err[LATTICE_ERRMSG_MAX];
};

#define FAIL(d, st, ...) lattice__set_error((d)->err, (st), __VA_ARGS__)

void lattice_distill_params_init(lattice_distill_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->alpha = 0.7f;
    p->gamma = 0.3f;
    p->tau = 1.0f;
    p->direction = LATTICE_KL_FORWARD;
    p->n_threads = 1;
}

lattice_status lattice_distill_create(const lattice_distill_params *params, lattice_distill **out)
{
    if (!out)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *out = NULL;
    if (!params || params->size == 0)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_distill_params p;
    lattice_distill_params_init(&p);
    memcpy(&p, params, params->size < sizeof(p) ? params->size : sizeof(p));
    p.size = sizeof(p);
    if (!(p.alpha >= 0.0f) || !isfinite(p.alpha) || !(p.gamma >= 0.0f) || !isfinite(p.gamma) ||
        !(p.tau > 0.0f) || !isfinite(p.tau) || p.n_threads < 1 ||
        (p.direction != LATTICE_KL_FORWARD && p.direction != LATTICE_KL_REVERSE))
        return LATTICE_ERR_INVALID_CONFIG;
    lattice_distill *d = calloc(1, sizeof(*d));
    if (!d)
        return LATTICE_ERR_OUT_OF_MEMORY;
    d->p = p;
    *out = d;
    return LATTICE_OK;
}

void lattice_distill_destroy(lattice_distill *d)
{
    if (!d)
        return;
    free(d->stamp);
    free(d->rows);
    free(d);
}

const char *lattice_distill_errmsg(const lattice_distill *d)
{
    return d ? d->err : "no distillation loss (NULL handle)";
}

lattice_status lattice_distill_get_params(const lattice_distill *d, lattice_distill_params *out)
{
    if (!d || !out)
        return LATTICE_ERR_INVALID_ARGUMENT;
    *out = d->p;
    return LATTICE_OK;
}

/* max and log-sum-exp of x[0..n) * s */
static double lse_scaled(const float *x, int n, double s)
{
    double mx = x[0] * s;
    for (int j = 1; j < n; j++)
        mx = x[j] * s > mx ? x[j] * s : mx;
    double sum = 0.0;
    for (int j = 0; j < n; j++)
        sum += exp(x[j] * s - mx);
    return mx + log(sum);
}

static lattice_status check_common(lattice_distill *d, const float *student,
                                   const int32_t *targets, const uint8_t *mask, int64_t n,
                                   int vocab, lattice_distill_result *result, int64_t *count)
{
    if (!student || !result || n < 0 || vocab < 1)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "NULL logits or result, or a bad size");
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

/* Cross-entropy of one row at temperature 1 and its gradient added to dz with
 * weight w (dz may be NULL). */
static double ce_row(const float *z, int vocab, int32_t target, double w, float *dz)
{
    double lse = lse_scaled(z, vocab, 1.0);
    if (dz) {
        for (int j = 0; j < vocab; j++)
            dz[j] += (float)(w * exp(z[j] - lse));
        dz[target] -= (float)w;
    }
    return lse - z[target];
}

/* Per-position scratch, grown on demand (a batch shape change, not every call). */
static lattice_status rows_for(lattice_distill *d, int64_t n)
{
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

/* KL of row i, and its gradient (weighted by wkd) written to dz when non-NULL. */
static double kl_row(const kl_job *j, int64_t i, float *dz)
{
    const int V = j->vocab;
    const double s = j->s;
    const float *z = j->student + i * V;
    const double lq = lse_scaled(z, V, s);
    double kl = 0.0;
    if (j->index) {
        const float *v = j->teacher + i * j->k;
        const int32_t *idx = j->index + i * j->k;
        const double lp = lse_scaled(v, j->k, s);
        for (int e = 0; e < j->k; e++) {
            double logp = v[e] * s - lp, logq = z[idx[e]] * s - lq;
            kl += exp(logp) * (logp - logq);
        }
        if (dz) {
            for (int c = 0; c < V; c++)
                dz[c] = (float)(j->wkd * exp(z[c] * s - lq));
            for (int e = 0; e < j->k; e++)
                dz[idx[e]] -= (float)(j->wkd * exp(v[e] * s - lp));
        }
        return kl;
    }
    const float *t = j->teacher + i * V;
    const double lp = lse_scaled(t, V, s);
    for (int c = 0; c < V; c++) {
        double logq = z[c] * s - lq, logp = t[c] * s - lp;
        kl += j->reverse ? exp(logq) * (logq - logp) : exp(logp) * (logp - logq);
    }
    if (dz)
        for (int c = 0; c < V; c++) {
            double logq = z[c] * s - lq, logp = t[c] * s - lp, q = exp(logq);
            double g = j->reverse ? q * ((logq - logp) - kl) : q - exp(logp);
            dz[c] = (float)(j->wkd * g);
        }
    return kl;
}

static lattice_status run_loss(lattice_distill *d, kl_job *j, const int32_t *targets,
                               const uint8_t *mask, int64_t n, float *dlogits, int64_t count,
                               lattice_distill_result *result)
{
    const double inv = count ? 1.0 / (double)count : 0.0;
    const double wce = d->p.gamma * inv;
    j->s = 1.0 / d->p.tau;
    j->wkd = d->p.alpha * d->p.tau * inv; /* alpha tau^2 * (1/tau) / count */
    lattice_status st = rows_for(d, n);
    if (st != LATTICE_OK)
        return st;
    double *rows = d->rows;
    const int V = j->vocab, nt = d->p.n_threads;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        float *dz = dlogits ? dlogits + i * V : NULL;
        rows[2 * i] = rows[2 * i + 1] = 0.0;
        if (mask && !mask[i]) {
            if (dz)
                memset(dz, 0, sizeof(float) * V);
            continue;
        }
        rows[2 * i] = kl_row(j, i, dz);
        if (targets)
            rows[2 * i + 1] = ce_row(j->student + i * V, V, targets[i], wce, dz);
    }
    return finish(d, n, count, result);
}

lattice_status lattice_distill_dense(lattice_distill *d, const float *student,
                                     const float *teacher, const int32_t *targets,
                                     const uint8_t *mask, int64_t n, int vocab, float *dlogits,
                                     lattice_distill_result *result)
{
    if (!d)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (!teacher)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "teacher logits are NULL");
    int64_t count;
    lattice_status st = check_common(d, student, targets, mask, n, vocab, result, &count);
    if (st != LATTICE_OK)
        return st;
    kl_job j = {student, teacher, NULL, vocab, 0, d->p.direction == LATTICE_KL_REVERSE, 0, 0};
    return run_loss(d, &j, targets, mask, n, dlogits, count, result);
}

lattice_status lattice_distill_topk(lattice_distill *d, const float *student,
                                    const int32_t *teacher_index, const float *teacher_value,
                                    int k, const int32_t *targets, const uint8_t *mask, int64_t n,
                                    int vocab, float *dlogits, lattice_distill_result *result)
{
    if (!d)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (d->p.direction == LATTICE_KL_REVERSE)
        return FAIL(d, LATTICE_ERR_UNSUPPORTED,
                    "reverse KL needs the teacher's whole distribution (dense logits)");
    if (!teacher_index || !teacher_value || k < 1 || k > vocab)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "top-k teacher needs indices, values and 1 <= k <= vocab");
    int64_t count;
    lattice_status st = check_common(d, student, targets, mask, n, vocab, result, &count);
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
    return run_loss(d, &j, targets, mask, n, dlogits, count, result);
}
