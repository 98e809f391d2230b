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
    const double tau = d->p.tau, s = 1.0 / tau;
    const double inv = count ? 1.0 / (double)count : 0.0;
    const double wkd = d->p.alpha * tau * inv; /* alpha tau^2 * (1/tau) / count */
    const double wce = d->p.gamma * inv;
    const int reverse = d->p.direction == LATTICE_KL_REVERSE;
    if ((st = rows_for(d, n)) != LATTICE_OK)
        return st;
    double *rows = d->rows;
    const int nt = d->p.n_threads;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        const float *z = student + i * vocab, *t = teacher + i * vocab;
        float *dz = dlogits ? dlogits + i * vocab : NULL;
        if (dz)
            memset(dz, 0, sizeof(float) * vocab);
        rows[2 * i] = rows[2 * i + 1] = 0.0;
        if (mask && !mask[i])
            continue;
        const double lq = lse_scaled(z, vocab, s), lp = lse_scaled(t, vocab, s);
        double kl = 0.0;
        for (int j = 0; j < vocab; j++) {
            double logq = z[j] * s - lq, logp = t[j] * s - lp;
            kl += reverse ? exp(logq) * (logq - logp) : exp(logp) * (logp - logq);
        }
        if (dz)
            for (int j = 0; j < vocab; j++) {
                double logq = z[j] * s - lq, logp = t[j] * s - lp, q = exp(logq);
                double g = reverse ? q * ((logq - logp) - kl) : q - exp(logp);
                dz[j] = (float)(wkd * g);
            }
        rows[2 * i] = kl;
        if (targets)
            rows[2 * i + 1] = ce_row(z, vocab, targets[i], wce, dz);
    }
    return finish(d, n, count, result);
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
    const double tau = d->p.tau, s = 1.0 / tau;
    const double inv = count ? 1.0 / (double)count : 0.0;
    const double wkd = d->p.alpha * tau * inv, wce = d->p.gamma * inv;
    if ((st = rows_for(d, n)) != LATTICE_OK)
        return st;
    double *rows = d->rows;
    const int nt = d->p.n_threads;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int64_t i = 0; i < n; i++) {
        const float *z = student + i * vocab, *v = teacher_value + i * k;
        const int32_t *idx = teacher_index + i * k;
        float *dz = dlogits ? dlogits + i * vocab : NULL;
        if (dz)
            memset(dz, 0, sizeof(float) * vocab);
        rows[2 * i] = rows[2 * i + 1] = 0.0;
        if (mask && !mask[i])
            continue;
        const double lq = lse_scaled(z, vocab, s), lp = lse_scaled(v, k, s);
        double kl = 0.0;
        for (int e = 0; e < k; e++) {
            double logp = v[e] * s - lp, logq = z[idx[e]] * s - lq;
            kl += exp(logp) * (logp - logq);
        }
        if (dz) {
            for (int j = 0; j < vocab; j++)
                dz[j] = (float)(wkd * exp(z[j] * s - lq));
            for (int e = 0; e < k; e++)
                dz[idx[e]] -= (float)(wkd * exp(v[e] * s - lp));
        }
        rows[2 * i] = kl;
        if (targets)
            rows[2 * i + 1] = ce_row(z, vocab, targets[i], wce, dz);
    }
    return finish(d, n, count, result);
}
