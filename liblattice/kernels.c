#include "kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define CHUNK LATTICE_REDUCE_CHUNK

long lattice__reduce_scratch(long n_rows, long cols)
{
    return (n_rows + CHUNK - 1) / CHUNK * cols;
}

/* acc[j] += sum over chunks, in chunk order, of partial[ch * stride + j], j < cols. */
static void reduce_chunks(float *acc, const float *partial, long n_chunks, int stride, int cols,
                          int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (int j = 0; j < cols; j++) {
        float s = 0.0f;
        for (long ch = 0; ch < n_chunks; ch++)
            s += partial[ch * stride + j];
        acc[j] += s;
    }
}

void lattice__embedding_forward(float *out, const int32_t *tokens, const float *wte, long n, int c,
                                int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++)
        memcpy(out + i * c, wte + (long)tokens[i] * c, sizeof(float) * c);
}

void lattice__embedding_backward(float *dwte, const float *dout, const int32_t *tokens, long n,
                                 int c, int nt)
{
    /* Threads own column slices, so the accumulation order is the row order. */
    (void)nt;
#pragma omp parallel num_threads(nt)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int j0 = (int)((long)c * t / T), j1 = (int)((long)c * (t + 1) / T);
        for (long i = 0; i < n; i++) {
            float *dst = dwte + (long)tokens[i] * c;
            const float *src = dout + i * c;
            for (int j = j0; j < j1; j++)
                dst[j] += src[j];
        }
    }
}

void lattice__norm_forward(int layer, float *out, float *mean, float *rstd, const float *in,
                           const float *w, const float *b, float eps, long n, int c, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++) {
        const float *x = in + i * c;
        float *y = out + i * c;
        float mu = 0.0f;
        if (layer) {
            for (int j = 0; j < c; j++)
                mu += x[j];
            mu /= c;
            mean[i] = mu;
        }
        float ss = 0.0f;
        for (int j = 0; j < c; j++) {
            float d = x[j] - mu;
            ss += d * d;
        }
        float r = 1.0f / sqrtf(ss / c + eps);
        rstd[i] = r;
        if (layer)
            for (int j = 0; j < c; j++)
                y[j] = (x[j] - mu) * r * w[j] + b[j];
        else
            for (int j = 0; j < c; j++)
                y[j] = x[j] * r * w[j];
    }
}

void lattice__norm_backward(int layer, float *din, int accumulate, float *dw, float *db,
                            const float *dout, const float *in, const float *w, const float *mean,
                            const float *rstd, long n, int c, float *scratch, int nt)
{
    long n_chunks = (n + CHUNK - 1) / CHUNK;
    int want_params = dw || db;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long ch = 0; ch < n_chunks; ch++) {
        float *pw = scratch + ch * 2 * c, *pb = pw + c;
        if (want_params)
            memset(pw, 0, sizeof(float) * 2 * c);
        long i1 = (ch + 1) * CHUNK < n ? (ch + 1) * CHUNK : n;
        for (long i = ch * CHUNK; i < i1; i++) {
            const float *x = in + i * c, *dy = dout + i * c;
            float *dx = din + i * c;
            float mu = layer ? mean[i] : 0.0f, r = rstd[i];
            float sum_g = 0.0f, sum_gx = 0.0f; /* sums of dxhat and dxhat * xhat */
            for (int j = 0; j < c; j++) {
                float xh = (x[j] - mu) * r;
                float g = dy[j] * w[j];
                sum_g += g;
                sum_gx += g * xh;
                if (want_params) {
                    pw[j] += dy[j] * xh;
                    pb[j] += dy[j];
                }
            }
            float mg = layer ? sum_g / c : 0.0f, mgx = sum_gx / c;
            for (int j = 0; j < c; j++) {
                float xh = (x[j] - mu) * r;
                float v = r * (dy[j] * w[j] - mg - xh * mgx);
                dx[j] = accumulate ? dx[j] + v : v;
            }
        }
    }
    if (dw)
        reduce_chunks(dw, scratch, n_chunks, 2 * c, c, nt);
    if (db)
        reduce_chunks(db, scratch + c, n_chunks, 2 * c, c, nt);
}

void lattice__rope_table(float *rope, int seq, int head_dim, float theta)
{
    int half = head_dim / 2;
    for (int t = 0; t < seq; t++) {
        for (int i = 0; i < half; i++) {
            double freq = pow((double)theta, -2.0 * i / head_dim);
            double ang = t * freq;
            rope[((long)t * half + i) * 2] = (float)cos(ang);
            rope[((long)t * half + i) * 2 + 1] = (float)sin(ang);
        }
    }
}

/* One head vector: optional RMSNorm with weight w, then rotation at rope row cs. */
static void head_forward(float *out, float *rstd, const float *x, const float *w, const float *cs,
                         int hd, int norm, float eps)
{
    int half = hd / 2;
    float r = 1.0f;
    if (norm) {
        float ss = 0.0f;
        for (int j = 0; j < hd; j++)
            ss += x[j] * x[j];
        r = 1.0f / sqrtf(ss / hd + eps);
        *rstd = r;
    }
    for (int i = 0; i < half; i++) {
        float a = x[i] * r * (norm ? w[i] : 1.0f);
        float b = x[i + half] * r * (norm ? w[i + half] : 1.0f);
        float c = cs[2 * i], s = cs[2 * i + 1];
        out[i] = a * c - b * s;
        out[i + half] = b * c + a * s;
    }
}

/* Backward of head_forward: dx (=) from dout; pw[hd] += dL/dw. */
static void head_backward(float *dx, float *pw, const float *dout, const float *x, const float *w,
                          float rstd, const float *cs, int hd, int norm)
{
    int half = hd / 2;
    /* Inverse rotation gives the gradient of the normalised vector y. */
    float dot = 0.0f;
    for (int i = 0; i < half; i++) {
        float c = cs[2 * i], s = cs[2 * i + 1];
        float dya = dout[i] * c + dout[i + half] * s;
        float dyb = -dout[i] * s + dout[i + half] * c;
        dx[i] = dya;
        dx[i + half] = dyb;
    }
    if (!norm)
        return;
    for (int j = 0; j < hd; j++) {
        float xh = x[j] * rstd;
        if (pw)
            pw[j] += dx[j] * xh;
        dx[j] *= w[j]; /* now d xhat */
        dot += dx[j] * xh;
    }
    dot /= hd;
    for (int j = 0; j < hd; j++)
        dx[j] = rstd * (dx[j] - x[j] * rstd * dot);
}

void lattice__qkv_forward(float *q, float *k, float *v, float *rstd_q, float *rstd_k,
                          const float *raw, const float *qw, const float *kw, const float *rope,
                          const lattice_qkv_dims *d, int nt)
{
    const int B = d->batch, T = d->seq, H = d->n_heads, KV = d->n_kv_heads, hd = d->head_dim;
    const long ld = (long)(H + 2 * KV) * hd;
    const long n = (long)B * T;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long row = 0; row < n; row++) {
        long b = row / T, t = row % T;
        const float *x = raw + row * ld;
        const float *cs = rope + t * hd; /* hd/2 pairs of (cos, sin) */
        for (int h = 0; h < H; h++)
            head_forward(q + ((b * H + h) * T + t) * hd, rstd_q + row * H + h, x + (long)h * hd,
                         qw, cs, hd, d->qk_norm, d->eps);
        for (int h = 0; h < KV; h++) {
            head_forward(k + ((b * KV + h) * T + t) * hd, rstd_k + row * KV + h,
                         x + (long)(H + h) * hd, kw, cs, hd, d->qk_norm, d->eps);
            memcpy(v + ((b * KV + h) * T + t) * hd, x + (long)(H + KV + h) * hd,
                   sizeof(float) * hd);
        }
    }
}

void lattice__qkv_backward(float *draw, float *dqw, float *dkw, const float *dq, const float *dk,
                           const float *dv, const float *raw, const float *qw, const float *kw,
                           const float *rstd_q, const float *rstd_k, const float *rope,
                           const lattice_qkv_dims *d, float *scratch, int nt)
{
    const int B = d->batch, T = d->seq, H = d->n_heads, KV = d->n_kv_heads, hd = d->head_dim;
    const long ld = (long)(H + 2 * KV) * hd;
    const long n = (long)B * T;
    const long n_chunks = (n + CHUNK - 1) / CHUNK;
    int want = d->qk_norm && (dqw || dkw);
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long ch = 0; ch < n_chunks; ch++) {
        float *pq = scratch + ch * 2 * hd, *pk = pq + hd;
        if (want)
            memset(pq, 0, sizeof(float) * 2 * hd);
        long r1 = (ch + 1) * CHUNK < n ? (ch + 1) * CHUNK : n;
        for (long row = ch * CHUNK; row < r1; row++) {
            long b = row / T, t = row % T;
            const float *x = raw + row * ld;
            float *dx = draw + row * ld;
            const float *cs = rope + t * hd;
            for (int h = 0; h < H; h++)
                head_backward(dx + (long)h * hd, want ? pq : NULL,
                              dq + ((b * H + h) * T + t) * hd, x + (long)h * hd, qw,
                              d->qk_norm ? rstd_q[row * H + h] : 1.0f, cs, hd, d->qk_norm);
            for (int h = 0; h < KV; h++) {
                head_backward(dx + (long)(H + h) * hd, want ? pk : NULL,
                              dk + ((b * KV + h) * T + t) * hd, x + (long)(H + h) * hd, kw,
                              d->qk_norm ? rstd_k[row * KV + h] : 1.0f, cs, hd, d->qk_norm);
                memcpy(dx + (long)(H + KV + h) * hd, dv + ((b * KV + h) * T + t) * hd,
                       sizeof(float) * hd);
            }
        }
    }
    if (want && dqw)
        reduce_chunks(dqw, scratch, n_chunks, 2 * hd, hd, nt);
    if (want && dkw)
        reduce_chunks(dkw, scratch + hd, n_chunks, 2 * hd, hd, nt);
}

void lattice__causal_softmax(float *p, long n_mats, int t, int nt)
{
    long rows = n_mats * t;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long r = 0; r < rows; r++) {
        int i = (int)(r % t);
        float *row = p + r * t;
        float mx = row[0];
        for (int j = 1; j <= i; j++)
            mx = row[j] > mx ? row[j] : mx;
        float sum = 0.0f;
        for (int j = 0; j <= i; j++) {
            row[j] = expf(row[j] - mx);
            sum += row[j];
        }
        float inv = 1.0f / sum;
        for (int j = 0; j <= i; j++)
            row[j] *= inv;
        for (int j = i + 1; j < t; j++)
            row[j] = 0.0f;
    }
}

void lattice__softmax_backward(float *dp, const float *p, long n_mats, int t, int nt)
{
    long rows = n_mats * t;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long r = 0; r < rows; r++) {
        int i = (int)(r % t);
        float *g = dp + r * t;
        const float *pr = p + r * t;
        float dot = 0.0f;
        for (int j = 0; j <= i; j++)
            dot += g[j] * pr[j];
        for (int j = 0; j <= i; j++)
            g[j] = pr[j] * (g[j] - dot);
        for (int j = i + 1; j < t; j++)
            g[j] = 0.0f;
    }
}

static inline float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

void lattice__swiglu_forward(float *s, const float *gu, long n, int f, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++) {
        const float *g = gu + i * 2 * f, *u = g + f;
        float *o = s + i * f;
        for (int j = 0; j < f; j++)
            o[j] = g[j] * sigmoidf(g[j]) * u[j];
    }
}

void lattice__swiglu_backward(float *dgu, const float *ds, const float *gu, long n, int f, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++) {
        const float *g = gu + i * 2 * f, *u = g + f, *d = ds + i * f;
        float *dg = dgu + i * 2 * f, *du = dg + f;
        for (int j = 0; j < f; j++) {
            float sg = sigmoidf(g[j]);
            float silu = g[j] * sg;
            du[j] = d[j] * silu;
            dg[j] = d[j] * u[j] * sg * (1.0f + g[j] * (1.0f - sg));
        }
    }
}

double lattice__cross_entropy(float *dlogits, const float *logits, const int32_t *targets,
                              const uint8_t *mask, long n, int v, double *rowloss,
                              int64_t *count, int nt)
{
    int64_t cnt = 0;
    for (long i = 0; i < n; i++)
        cnt += !mask || mask[i];
    float inv = cnt ? 1.0f / (float)cnt : 0.0f;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++) {
        const float *z = logits + i * v;
        int on = !mask || mask[i];
        float mx = z[0];
        for (int j = 1; j < v; j++)
            mx = z[j] > mx ? z[j] : mx;
        double sum = 0.0;
        for (int j = 0; j < v; j++)
            sum += exp((double)(z[j] - mx));
        double lse = mx + log(sum);
        rowloss[i] = on ? lse - z[targets[i]] : 0.0;
        if (dlogits) {
            float *dz = dlogits + i * v;
            if (!on) {
                memset(dz, 0, sizeof(float) * v);
                continue;
            }
            for (int j = 0; j < v; j++)
                dz[j] = (float)exp((double)z[j] - lse) * inv;
            dz[targets[i]] -= inv;
        }
    }
    double total = 0.0;
    for (long i = 0; i < n; i++)
        total += rowloss[i];
    if (count)
        *count = cnt;
    return cnt ? total / (double)cnt : 0.0;
}

void lattice__axpby(float *y, float a, const float *x, long n, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++)
        y[i] = a * y[i] + x[i];
}

void lattice__scale(float *y, float a, long n, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt)
    for (long i = 0; i < n; i++)
        y[i] *= a;
}
