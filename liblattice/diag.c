/* Boundary diagnostics: the residual stream's scale at each block boundary,
 * block removal, the loss's response at an append, attention sinks. */
#include "attention.h"
#include "internal.h"
#include "model_access.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lattice_diag {
    lattice_model *model;
    double *rms;     /* per-token RMS of one boundary */
    uint8_t *cls;    /* per-token class */
    float *h_in;     /* a boundary kept across a second forward */
    char err[LATTICE_ERRMSG_MAX];
};

lattice_status lattice_diag_create(lattice_model *model, lattice_diag **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_diag_create: invalid argument: out is NULL");
    *out = NULL;
    if (!model)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_diag_create: invalid argument: model is NULL");
    lattice_diag *d = calloc(1, sizeof(*d));
    if (!d)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_diag_create: out of memory");
    lattice_status st = lattice__model_borrow(model, "lattice_diag_create");
    if (st != LATTICE_OK) {
        free(d);
        return st;
    }
    const lattice_model_params *p = lattice__model_params(model);
    size_t n = (size_t)p->max_batch * p->max_seq;
    d->model = model;
    d->rms = malloc(sizeof(double) * n);
    d->cls = malloc(n);
    d->h_in = malloc(sizeof(float) * n * (size_t)p->d_model);
    if (!d->rms || !d->cls || !d->h_in) {
        lattice_diag_destroy(d);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_diag_create: out of memory");
    }
    *out = d;
    return LATTICE_OK;
}

void lattice_diag_destroy(lattice_diag *d)
{
    if (!d)
        return;
    lattice_model *m = d->model;
    free(d->rms);
    free(d->cls);
    free(d->h_in);
    free(d);
    lattice__model_unborrow(m);
}

const char *lattice_diag_errmsg(const lattice_diag *d)
{
    return d ? d->err : "no diagnostics context (NULL handle)";
}

/* ---- the callers' structs ------------------------------------------------------------
 * The lattice_diag_measure_ calls fill structs that begin with their size: a
 * lone struct through lattice__copy_out, an array at the stride its first
 * entry's size gives. */

typedef lattice_diag_boundary_scale_result scale_result;
typedef lattice_diag_block_removal_result removal_result;
typedef lattice_diag_loss_response_result response_result;
typedef lattice_diag_attention_sinks_result sinks_result;

/* Where a caller's array puts its entries: the size of its first entry,
 * within lattice__check_size's bounds (an unset size would stride past the
 * caller's array) and a whole number of our struct's alignment, so that
 * every entry lies aligned within the array the caller sized. */
static lattice_status stride_of(lattice_diag *d, const char *fn, const char *what,
                                const void *first, size_t ours, size_t align, size_t *stride)
{
    size_t theirs;
    memcpy(&theirs, first, sizeof(theirs));
    TRY(lattice__check_size(d->err, fn, "out[0].size", what, theirs, ours));
    if (theirs % align != 0)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "out[0].size %zu: set it to sizeof(%s) (%zu here) before the call", theirs,
                    what, ours);
    *stride = theirs;
    return LATTICE_OK;
}

/* Entry i of an array of sized structs at stride: the figures, and its size. */
static void put_entry(void *out, size_t stride, long i, const void *r, size_t ours)
{
    char *e = (char *)out + (size_t)i * stride;
    memcpy(e, r, ours);
    memcpy(e, &ours, sizeof(ours));
}

static lattice_status check_batch(lattice_diag *d, const int32_t *tokens, int batch, int seq)
{
    if (!tokens)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "tokens is NULL");
    const lattice_model_params *p = lattice__model_params(d->model);
    if (batch < 1 || seq < 1 || batch > p->max_batch || seq > p->max_seq)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "batch %d x %d beyond the model's %d x %d",
                    batch, seq, p->max_batch, p->max_seq);
    return LATTICE_OK;
}

static void summarise(const double *x, const uint8_t *cls, const uint8_t *mask, long n, int want,
                      scale_result *s)
{
    /* want < 0: every counted token */
    double sum = 0.0, mx = 0.0;
    int64_t c = 0;
    for (long i = 0; i < n; i++)
        if ((!mask || mask[i]) && (want < 0 || cls[i] == want)) {
            sum += x[i];
            mx = x[i] > mx ? x[i] : mx;
            c++;
        }
    memset(s, 0, sizeof(*s));
    s->count = c;
    if (!c)
        return;
    double mean = sum / (double)c, m2 = 0.0, m4 = 0.0;
    for (long i = 0; i < n; i++)
        if ((!mask || mask[i]) && (want < 0 || cls[i] == want)) {
            double dv = x[i] - mean;
            m2 += dv * dv;
            m4 += dv * dv * dv * dv;
        }
    m2 /= (double)c;
    m4 /= (double)c;
    s->mean = mean;
    s->std = sqrt(m2);
    s->kurtosis = c > 1 && m2 > 0.0 ? m4 / (m2 * m2) : 0.0;
    s->max = mx;
}

/* The boundary scale into out: sized entries at the stride of out[0].size. */
static lattice_status boundary_scale_held(lattice_diag *d, const char *fn, const int32_t *tokens,
                                          const uint8_t *mask, int batch, int seq,
                                          const uint8_t *classes, int n_classes, void *out,
                                          int out_len)
{
    if (!d)
        return lattice__set_error(LATTICE__ERRBUF(d), LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: diag is NULL", fn);
    lattice_status st = check_batch(d, tokens, batch, seq);
    if (st != LATTICE_OK)
        return st;
    lattice_model *m = d->model;
    const int k = lattice_model_get_active_layers(m), D = lattice__model_params(m)->d_model;
    const long n = (long)batch * seq;
    if (n_classes < 1 || n_classes > 255 || (!classes && n_classes != 2))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "n_classes %d: 1..255, and 2 for the default classes", n_classes);
    if (!out || out_len < 1 || (int64_t)out_len < (int64_t)(k + 1) * (n_classes + 1))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "out needs %lld entries",
                    (long long)(k + 1) * (n_classes + 1));
    size_t stride = 0;
    if ((st = stride_of(d, fn, "lattice_diag_boundary_scale_result", out, sizeof(scale_result),
                        _Alignof(scale_result), &stride)) != LATTICE_OK)
        return st;
    for (long i = 0; i < n; i++) {
        d->cls[i] = classes ? classes[i] : (uint8_t)(i % seq == 0);
        if (d->cls[i] >= n_classes)
            return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "class %d at %ld not below %d", d->cls[i],
                        i, n_classes);
    }
    if ((st = lattice_model_forward(m, tokens, batch, seq)) != LATTICE_OK)
        return FAIL(d, st, "forward: %s", lattice_model_errmsg(m));
    for (int b = 0; b <= k; b++) {
        const float *h = NULL;
        if ((st = lattice_model_get_hidden(m, b, &h)) != LATTICE_OK)
            return FAIL(d, st, "boundary %d: %s", b, lattice_model_errmsg(m));
        for (long i = 0; i < n; i++) {
            double ss = 0.0;
            for (int j = 0; j < D; j++)
                ss += (double)h[i * D + j] * h[i * D + j];
            d->rms[i] = sqrt(ss / D);
            if (!isfinite(d->rms[i]))
                return FAIL(d, LATTICE_ERR_NON_FINITE,
                            "boundary %d, position %ld: the stream's RMS is %g, not finite (the "
                            "weights or inputs overflow)", b, i, d->rms[i]);
        }
        for (int c = 0; c <= n_classes; c++) {
            scale_result r;
            summarise(d->rms, d->cls, mask, n, c == n_classes ? -1 : c, &r);
            const long i = (long)b * (n_classes + 1) + c;
            put_entry(out, stride, i, &r, sizeof(r));
        }
    }
    return LATTICE_OK;
}

/* The measure inside the model's busy section: it runs the model's passes. */
static lattice_status boundary_scale(lattice_diag *d, const char *fn, const int32_t *tokens,
                                     const uint8_t *mask, int batch, int seq,
                                     const uint8_t *classes, int n_classes, void *out,
                                     int out_len)
{
    LATTICE__INSIDE_BUSY(d ? lattice__model_busy(d->model) : NULL, fn, "model",
                         boundary_scale_held(d, fn, tokens, mask, batch, seq, classes, n_classes,
                                             out, out_len));
}

lattice_status lattice_diag_measure_boundary_scale(lattice_diag *d, const int32_t *tokens,
                                                   const uint8_t *mask, int batch, int seq,
                                                   const uint8_t *classes, int n_classes,
                                                   scale_result *out, int out_len)
{
    return boundary_scale(d, "lattice_diag_measure_boundary_scale", tokens, mask, batch, seq,
                          classes, n_classes, out, out_len);
}

static lattice_status ce_of(lattice_diag *d, const int32_t *tokens, const int32_t *targets,
                            const uint8_t *mask, int batch, int seq, double *ce)
{
    float loss;
    lattice_status st = lattice_model_forward(d->model, tokens, batch, seq);
    if (st == LATTICE_OK)
        st = lattice_model_cross_entropy(d->model, targets, mask, &loss, NULL);
    if (st != LATTICE_OK)
        return FAIL(d, st, "%s", lattice_model_errmsg(d->model));
    *ce = loss;
    return LATTICE_OK;
}

static lattice_status block_removal_held(lattice_diag *d, const char *fn, const int32_t *tokens,
                                         const int32_t *targets, const uint8_t *mask, int batch,
                                         int seq, int first, int count, removal_result *out)
{
    if (!d)
        return lattice__set_error(LATTICE__ERRBUF(d), LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: diag is NULL", fn);
    lattice_status st = check_batch(d, tokens, batch, seq);
    if (st != LATTICE_OK)
        return st;
    lattice_model *m = d->model;
    /* compared without adding: first + count can overflow */
    const int active = lattice_model_get_active_layers(m);
    if (!targets || !out || first < 0 || count < 1 || first > active || count > active - first)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "block of %d layers from %d must lie within the %d active layers", count,
                    first, active);
    const int D = lattice__model_params(m)->d_model;
    const long n = (long)batch * seq;
    lattice_model_set_skip(m, 0, 0);
    if ((st = ce_of(d, tokens, targets, mask, batch, seq, &out->ce_full)) != LATTICE_OK)
        return st;
    const float *hi = NULL, *ho = NULL;
    if ((st = lattice_model_get_hidden(m, first, &hi)) != LATTICE_OK ||
        (st = lattice_model_get_hidden(m, first + count, &ho)) != LATTICE_OK)
        return FAIL(d, st, "boundary states: %s", lattice_model_errmsg(m));
    double angle = 0.0;
    int64_t c = 0;
    for (long i = 0; i < n; i++) {
        if (mask && !mask[i])
            continue;
        double dot = 0.0, na = 0.0, nb = 0.0;
        for (int j = 0; j < D; j++) {
            dot += (double)hi[i * D + j] * ho[i * D + j];
            na += (double)hi[i * D + j] * hi[i * D + j];
            nb += (double)ho[i * D + j] * ho[i * D + j];
        }
        double cs = na > 0.0 && nb > 0.0 ? dot / sqrt(na * nb) : 1.0;
        cs = cs > 1.0 ? 1.0 : cs < -1.0 ? -1.0 : cs;
        angle += acos(cs) / M_PI;
        c++;
    }
    out->angle = c ? angle / (double)c : 0.0;
    lattice_model_set_skip(m, first, count);
    st = ce_of(d, tokens, targets, mask, batch, seq, &out->ce_removed);
    lattice_model_set_skip(m, 0, 0);
    if (st != LATTICE_OK)
        return st;
    out->dce = out->ce_removed - out->ce_full;
    return LATTICE_OK;
}

/* The measure inside the model's busy section: it runs the model's passes. */
static lattice_status block_removal(lattice_diag *d, const char *fn, const int32_t *tokens,
                                    const int32_t *targets, const uint8_t *mask, int batch,
                                    int seq, int first, int count, removal_result *out)
{
    LATTICE__INSIDE_BUSY(d ? lattice__model_busy(d->model) : NULL, fn, "model",
                         block_removal_held(d, fn, tokens, targets, mask, batch, seq, first, count,
                                            out));
}

lattice_status lattice_diag_measure_block_removal(lattice_diag *d, const int32_t *tokens,
                                                  const int32_t *targets, const uint8_t *mask,
                                                  int batch, int seq, int first, int count,
                                                  removal_result *out)
{
    static const char fn[] = "lattice_diag_measure_block_removal";
    lattice_status st;
    if (d && out && (st = lattice__check_out_size(d->err, fn, out, sizeof(*out))) != LATTICE_OK)
        return st;
    removal_result r = {.size = sizeof(r)};
    if ((st = block_removal(d, fn, tokens, targets, mask, batch, seq, first, count,
                            out ? &r : NULL)) != LATTICE_OK)
        return st;
    return lattice__copy_out(d->err, fn, out, &r, sizeof(r), sizeof(r));
}

static lattice_status loss_response(const char *fn, const double *losses, int64_t n,
                                    int64_t append_step, int64_t window, int64_t horizon,
                                    response_result *out)
{
    if (window < 1 || horizon < 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: window %lld must be >= 1 and horizon %lld >= 0", fn,
            (long long)window, (long long)horizon);
    if (append_step < window || append_step >= n)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "%s: invalid argument: append_step %lld must leave a window "
            "of %lld losses before it and lie within the %lld losses (%lld..%lld)", fn,
            (long long)append_step, (long long)window, (long long)n, (long long)window,
            (long long)n - 1);
    /* every loss the response reads (the baseline's window and the area's
     * horizon here, the steps to recovery as it goes) must be finite: a NaN
     * would pass through the means and drop out of the comparisons unseen */
#define NOT_FINITE(i)                                                                              \
    lattice__fail(LATTICE_ERR_NON_FINITE,                                                          \
        "%s: loss %lld is %g: the losses the response reads (from %lld on: the baseline's "      \
        "window, the area's horizon, the steps to recovery) must be finite", fn, (long long)(i), \
        losses[i], (long long)(append_step - window))
    for (int64_t i = append_step - window; i < n && i - append_step < horizon; i++)
        if (!isfinite(losses[i]))
            return NOT_FINITE(i);
    double base = 0.0;
    for (int64_t i = append_step - window; i < append_step; i++)
        base += losses[i];
    base /= (double)window;
    double area = 0.0;
    /* i - append_step < horizon: append_step + horizon can overflow */
    for (int64_t i = append_step; i < n && i - append_step < horizon; i++)
        area += losses[i] > base ? losses[i] - base : 0.0;
    /* finite losses whose sums pass the double range (near 1e308) */
    if (!isfinite(base) || !isfinite(losses[append_step] - base) || !isfinite(area))
        return lattice__fail(LATTICE_ERR_NON_FINITE,
            "%s: the losses' sums pass the double range (baseline %g, area %g): no response "
            "is measured", fn, base, area);
    out->baseline = base;
    out->jump = losses[append_step] - base;
    out->area = area;
    /* trailing mean over the last `window` steps, starting once a full window
     * lies after the append */
    out->recovery = -1;
    double run = 0.0;
    for (int64_t i = append_step; i < n; i++) {
        if (!isfinite(losses[i]))
            return NOT_FINITE(i);
        run += losses[i];
        if (i - append_step >= window)
            run -= losses[i - window];
        if (!isfinite(run))
            return lattice__fail(LATTICE_ERR_NON_FINITE,
                "%s: the trailing window's sum at loss %lld passes the double range: no "
                "recovery is measured", fn, (long long)i);
        if (i - append_step + 1 >= window && run / (double)window <= base) {
            out->recovery = i + 1 - append_step;
            break;
        }
    }
#undef NOT_FINITE
    return LATTICE_OK;
}

lattice_status lattice_diag_measure_loss_response(const double *losses, int64_t n,
                                                  int64_t append_step, int64_t window,
                                                  int64_t horizon, response_result *out)
{
    static const char fn[] = "lattice_diag_measure_loss_response";
    if (lattice__need(NULL, fn, 2, (const void *)losses, "losses", (const void *)out, "out") !=
        LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_status st = lattice__check_out_size(NULL, fn, out, sizeof(*out));
    if (st != LATTICE_OK)
        return st;
    response_result r = {.size = sizeof(r)};
    if ((st = loss_response(fn, losses, n, append_step, window, horizon, &r)) != LATTICE_OK)
        return st;
    return lattice__copy_out(NULL, fn, out, &r, sizeof(r), sizeof(r));
}

/* ---- attention sinks and massive activations ---------------------------------------- */

static int cmp_float(const void *a, const void *b)
{
    const float x = *(const float *)a, y = *(const float *)b;
    return (x > y) - (x < y);
}

/* The sinks into out: sized entries at the stride of out[0].size. */
static lattice_status attention_sinks_held(lattice_diag *d, const char *fn, const int32_t *tokens,
                                           int batch, int seq, double threshold, void *out,
                                           int out_len, double *head_mass, int head_mass_len)
{
    if (!d)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT, "%s: invalid argument: diag is NULL",
                             fn);
    lattice_model *m = d->model;
    const lattice_model_params *p = lattice__model_params(m);
    const int L = lattice_model_get_active_layers(m), H = p->n_heads, KV = p->n_kv_heads;
    const int hd = p->head_dim, D = p->d_model;
    if (!out)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "out is NULL");
    if (out_len < L)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "out holds %d layers, the model has %d active", out_len, L);
    if (head_mass && head_mass_len < (long)L * H)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "head_mass holds %d values, the model needs %ld (active layers x heads)",
                    head_mass_len, (long)L * H);
    if (!(threshold >= 0.0 && threshold <= 1.0))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "threshold %g not in [0, 1]", threshold);
    lattice_status st;
    size_t stride = 0;
    if ((st = stride_of(d, fn, "lattice_diag_attention_sinks_result", out, sizeof(sinks_result),
                        _Alignof(sinks_result), &stride)) != LATTICE_OK)
        return st;
    st = check_batch(d, tokens, batch, seq);
    if (st != LATTICE_OK)
        return st;
    if (seq < 2)
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "seq %d: attention to position 0 needs at least 2 positions", seq);
    if ((st = lattice_model_forward_inference(m, tokens, batch, seq)) != LATTICE_OK)
        return FAIL(d, st, "forward: %s", lattice_model_errmsg(m));
    const int T = seq;
    const long N = (long)batch * T;
    float *scratch = d->h_in; /* N x D floats, free during this call */
    for (int i = 0; i < L; i++) {
        sinks_result r, *o = &r;
        memset(o, 0, sizeof(*o));
        if (lattice__model_skips(m, i)) {
            /* a skipped layer computes nothing */
            o->mass0 = o->sink_rate = o->top_ratio = o->value_norm0 = NAN;
            o->top_token = -1;
            o->top_dim = -1;
            for (int h = 0; h < H && head_mass; h++)
                head_mass[i * H + h] = NAN;
            put_entry(out, stride, i, o, sizeof(*o));
            continue;
        }
        lattice__model_attention a;
        const float *stream = NULL;
        if (lattice__model_layer_attention(m, i, &a) != LATTICE_OK ||
            lattice_model_get_hidden(m, i + 1, &stream) != LATTICE_OK)
            return FAIL(d, LATTICE_ERR_STATE, "layer %d kept no attention in its forward", i);
        /* a NaN or Inf in the stream (weights or inputs that overflow) leaves
         * no figure to measure: refused rather than NaN figures and -1 places */
        for (long k = 0; k < N * D; k++)
            if (!isfinite(stream[k]))
                return FAIL(d, LATTICE_ERR_NON_FINITE,
                            "layer %d's output is %g at token %ld, dimension %ld: not finite, "
                            "so no sink figure is measured", i, (double)stream[k], k / D, k % D);
        const lattice_backend *be = lattice__model_backend(m);
        /* mass on position 0 of queries 1..T-1, per head over rows and positions */
        int sinks = 0;
        const lattice_attn_dims ad = {batch, T, H, KV, hd, 0, LATTICE_ATTN_AUTO, 0};
        for (int h = 0; h < H; h++) {
            double sum = 0.0;
            for (int b = 0; b < batch; b++)
                for (int t = 1; t < T; t++)
                    sum += lattice__attention_prob(be, &ad, a.p, a.q, a.k, b, h, t, 0);
            const double mass = sum / ((double)batch * (T - 1));
            if (head_mass)
                head_mass[i * H + h] = mass;
            o->mass0 += mass / H;
            sinks += mass > threshold;
        }
        o->sink_rate = (double)sinks / H;
        /* position 0's value vectors against the others' */
        double n0 = 0.0, nr = 0.0;
        for (int b = 0; b < batch; b++)
            for (int g = 0; g < KV; g++) {
                const float *v = a.v + ((size_t)b * KV + g) * T * hd;
                for (int t = 0; t < T; t++) {
                    double s = 0.0;
                    for (int j = 0; j < hd; j++)
                        s += (double)v[(size_t)t * hd + j] * v[(size_t)t * hd + j];
                    if (t == 0)
                        n0 += sqrt(s) / ((double)batch * KV);
                    else
                        nr += sqrt(s) / ((double)batch * KV * (T - 1));
                }
            }
        o->value_norm0 = nr > 0 ? n0 / nr : NAN;
        /* the layer's output stream: its largest |activation| over the median */
        float top = -1.0f;
        for (long k = 0; k < N * D; k++) {
            const float x = fabsf(stream[k]);
            scratch[k] = x;
            if (x > top) {
                top = x;
                o->top_token = k / D;
                o->top_dim = (int)(k % D);
            }
        }
        qsort(scratch, (size_t)(N * D), sizeof(float), cmp_float);
        const long c = N * D;
        const double median = c % 2 ? scratch[c / 2] : 0.5 * ((double)scratch[c / 2 - 1] + scratch[c / 2]);
        o->top_ratio = median > 0 ? top / median : NAN;
        put_entry(out, stride, i, o, sizeof(*o));
    }
    return LATTICE_OK;
}

/* The measure inside the model's busy section: it runs the model's passes. */
static lattice_status attention_sinks(lattice_diag *d, const char *fn, const int32_t *tokens,
                                      int batch, int seq, double threshold, void *out,
                                      int out_len, double *head_mass, int head_mass_len)
{
    LATTICE__INSIDE_BUSY(d ? lattice__model_busy(d->model) : NULL, fn, "model",
                         attention_sinks_held(d, fn, tokens, batch, seq, threshold, out, out_len,
                                              head_mass, head_mass_len));
}

lattice_status lattice_diag_measure_attention_sinks(lattice_diag *d, const int32_t *tokens,
                                                    int batch, int seq, double threshold,
                                                    sinks_result *out, int out_len,
                                                    double *head_mass, int head_mass_len)
{
    return attention_sinks(d, "lattice_diag_measure_attention_sinks", tokens, batch, seq,
                           threshold, out, out_len, head_mass, head_mass_len);
}
