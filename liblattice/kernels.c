/* The non-GEMM kernels of a pass, forward and backward (kernels.h). */
/* No FP-exception semantics are needed here; without this GCC may not
 * if-convert the float selects (clamps, max) in the loops and so does not
 * vectorise them. Results are unchanged: it only permits reordering around
 * traps. */
#pragma GCC optimize("no-trapping-math", "no-math-errno")

#include "kernels.h"

#include <math.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

#define CHUNK LATTICE_REDUCE_CHUNK

#define VEC_CLONES LATTICE_VEC_CLONES
#define VEC_CLONES_V3 LATTICE_VEC_CLONES_V3
/* Below this many inner iterations a kernel runs on the calling thread: waking
 * a team (asleep under OMP_WAIT_POLICY=PASSIVE) costs more than it saves. At
 * the study's shape (2048 x 64 rows) two threads made the norms and RoPE
 * slower than one (bench_step op_norm_ms / op_rope_ms). */
#define SERIAL_WORK (1L << 19)
/* SwiGLU's element (an exp and a division) costs about as much as 4 of the
 * norms' or RoPE's inner iterations: at the study's shape (2048 x 192) two
 * threads halve it. */
#define SWIGLU_COST 4

/* Reductions along a row in LANES interleaved partial results, combined in a
 * fixed order: they vectorise, and the result depends only on the data. */
#define LANES 8

static inline float row_max(const float *x, int n)
{
    float acc[LANES];
    for (int l = 0; l < LANES; l++)
        acc[l] = x[0];
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] = x[j + l] > acc[l] ? x[j + l] : acc[l];
    for (; j < n; j++)
        acc[0] = x[j] > acc[0] ? x[j] : acc[0];
    float m = acc[0];
    for (int l = 1; l < LANES; l++)
        m = acc[l] > m ? acc[l] : m;
    return m;
}

static inline float row_sum(const float *x, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += x[j + l];
    for (; j < n; j++)
        acc[0] += x[j];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* sum of (x[j] - mu)^2 */
static inline float row_sq_dev(const float *x, float mu, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += (x[j + l] - mu) * (x[j + l] - mu);
    for (; j < n; j++)
        acc[0] += (x[j] - mu) * (x[j] - mu);
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

static inline float row_dot(const float *x, const float *y, int n)
{
    float acc[LANES] = {0};
    int j = 0;
    for (; j + LANES <= n; j += LANES)
        for (int l = 0; l < LANES; l++)
            acc[l] += x[j + l] * y[j + l];
    for (; j < n; j++)
        acc[0] += x[j] * y[j];
    float s = 0.0f;
    for (int l = 0; l < LANES; l++)
        s += acc[l];
    return s;
}

/* y[j] = exp(x[j] - shift) */
static inline void row_exp(float *y, const float *x, float shift, int n)
{
    for (int j = 0; j < n; j++)
        y[j] = lattice__expf(x[j] - shift);
}

long lattice__reduce_scratch(long n_rows, long cols)
{
    return (n_rows + CHUNK - 1) / CHUNK * cols;
}

/* acc[j] += sum over chunks, in chunk order, of partial[ch * stride + j], j < cols. */
static void reduce_chunks(float *acc, const float *partial, long n_chunks, int stride, int cols,
                          int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if ((long)cols * n_chunks > SERIAL_WORK)
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
#pragma omp parallel for schedule(static) num_threads(nt) if (n * c > SERIAL_WORK)
    for (long i = 0; i < n; i++)
        memcpy(out + i * c, wte + (long)tokens[i] * c, sizeof(float) * c);
}

void lattice__embedding_backward(float *dwte, const float *dout, const int32_t *tokens, long n,
                                 int c, int nt)
{
    /* Threads own column slices, so the accumulation order is the row order. */
    (void)nt;
#pragma omp parallel num_threads(nt) if (n * c > SERIAL_WORK)
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

#define ALWAYS_INLINE __attribute__((always_inline)) static inline

/* One row of the norm: y = Norm(x) (+ res when res is not NULL). */
ALWAYS_INLINE void norm_row(int layer, float *y, float *mean, float *rstd, const float *x,
                            const float *res, const float *w, const float *b, float eps, int c)
{
    float mu = 0.0f;
    if (layer) {
        mu = row_sum(x, c) / c;
        *mean = mu;
    }
    const float ss = layer ? row_sq_dev(x, mu, c) : row_dot(x, x, c);
    float r = 1.0f / sqrtf(ss / c + eps);
    *rstd = r;
    if (layer && res)
        for (int j = 0; j < c; j++)
            y[j] = (x[j] - mu) * r * w[j] + b[j] + res[j];
    else if (layer)
        for (int j = 0; j < c; j++)
            y[j] = (x[j] - mu) * r * w[j] + b[j];
    else if (res)
        for (int j = 0; j < c; j++)
            y[j] = x[j] * r * w[j] + res[j];
    else
        for (int j = 0; j < c; j++)
            y[j] = x[j] * r * w[j];
}

VEC_CLONES
void lattice__norm_forward(int layer, float *out, float *mean, float *rstd, const float *in,
                           const float *w, const float *b, float eps, long n, int c, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * c > SERIAL_WORK)
    for (long i = 0; i < n; i++)
        norm_row(layer, out + i * c, layer ? mean + i : NULL, rstd + i, in + i * c, NULL, w, b,
                 eps, c);
}

VEC_CLONES
void lattice__norm_join_forward(int layer, float *out, float *mean, float *rstd, float *sum,
                                const float *x, float xa, const float *res, const float *w,
                                const float *b, float eps, long n, int c, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * c > SERIAL_WORK)
    for (long i = 0; i < n; i++) {
        float *s = sum + i * c;
        if (x) {
            const float *xi = x + i * c;
            if (xa == 1.0f)
                for (int j = 0; j < c; j++)
                    s[j] = s[j] + xi[j];
            else
                for (int j = 0; j < c; j++)
                    s[j] = xa * xi[j] + s[j];
        }
        norm_row(layer, out + i * c, layer ? mean + i : NULL, rstd + i, s, res ? res + i * c : NULL,
                 w, b, eps, c);
    }
}

/* One row of the norm's backward: dx (=, or += when accumulate) from dy;
 * pw, pb (the chunk's weight and bias partials) += where not NULL. */
ALWAYS_INLINE void norm_bwd_row(int layer, float *dx, int accumulate, float *pw, float *pb,
                                const float *dy, const float *x, const float *w, float mu,
                                float r, int c)
{
    /* sums of dxhat = dy w and of dxhat * xhat, in lanes */
    float acc_g[LANES] = {0}, acc_gx[LANES] = {0};
    int j = 0;
    for (; j + LANES <= c; j += LANES)
        for (int l = 0; l < LANES; l++) {
            float g = dy[j + l] * w[j + l];
            acc_g[l] += g;
            acc_gx[l] += g * ((x[j + l] - mu) * r);
        }
    for (; j < c; j++) {
        float g = dy[j] * w[j];
        acc_g[0] += g;
        acc_gx[0] += g * ((x[j] - mu) * r);
    }
    float sum_g = 0.0f, sum_gx = 0.0f;
    for (int l = 0; l < LANES; l++) {
        sum_g += acc_g[l];
        sum_gx += acc_gx[l];
    }
    if (pw)
        for (int jj = 0; jj < c; jj++)
            pw[jj] += dy[jj] * ((x[jj] - mu) * r);
    if (pb)
        for (int jj = 0; jj < c; jj++)
            pb[jj] += dy[jj];
    float mg = layer ? sum_g / c : 0.0f, mgx = sum_gx / c;
    for (int j = 0; j < c; j++) {
        float xh = (x[j] - mu) * r;
        float v = r * (dy[j] * w[j] - mg - xh * mgx);
        dx[j] = accumulate ? dx[j] + v : v;
    }
}

/* Rows i0 .. i1 - 1 of lattice__norm_backward, the chunk's partials in pw, pb. */
ALWAYS_INLINE void norm_bwd_rows(int layer, float *din, int accumulate, float *pw, float *pb,
                                 const float *dout, const float *in, const float *w,
                                 const float *mean, const float *rstd, long i0, long i1, int c)
{
    for (long i = i0; i < i1; i++)
        norm_bwd_row(layer, din + i * c, accumulate, pw, pb, dout + i * c, in + i * c, w,
                     layer ? mean[i] : 0.0f, rstd[i], c);
}

/* call(v), with v a constant where it is one of the four common values a ..
 * d: the loops of the kernel inlined into call then become whole vectors,
 * without the trip-count, alias and remainder checks that cost more than the
 * arithmetic at the study's widths. */
#define CONST_CASES(v, call, a, b, c, d)                                                           \
    do {                                                                                           \
        switch (v) {                                                                               \
        case a: call(a); break;                                                                    \
        case b: call(b); break;                                                                    \
        case c: call(c); break;                                                                    \
        case d: call(d); break;                                                                    \
        default: call(v); break;                                                                   \
        }                                                                                          \
    } while (0)

/* The norm backward's widths built with the width a constant: 4x faster at
 * d_model 64, and the same bits as 1.0's general row at every width, both
 * norms, accumulating or not, on 1 and 2 threads. The row keeps the norm
 * kind (layer) a run-time value: built with it a constant 0, GCC folds
 * RMSNorm's mg away and contracts dy w - xh mgx differently, which moved dx
 * by up to 1 ulp at widths 64 and 96. */
#define NORM_WIDTH_CASES(c, call) CONST_CASES(c, call, 64, 128, 256, 512)

VEC_CLONES
void lattice__norm_backward(int layer, float *din, int accumulate, float *dw, float *db,
                            const float *dout, const float *in, const float *w, const float *mean,
                            const float *rstd, long n, int c, float *scratch, int nt)
{
    long n_chunks = (n + CHUNK - 1) / CHUNK;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * c > SERIAL_WORK)
    for (long ch = 0; ch < n_chunks; ch++) {
        float *pw = dw ? scratch + ch * 2 * c : NULL, *pb = db ? scratch + ch * 2 * c + c : NULL;
        if (pw)
            memset(pw, 0, sizeof(float) * c);
        if (pb)
            memset(pb, 0, sizeof(float) * c);
        long i0 = ch * CHUNK, i1 = (ch + 1) * CHUNK < n ? (ch + 1) * CHUNK : n;
#define NB_ROWS(C)                                                                                 \
    norm_bwd_rows(layer, din, accumulate, pw, pb, dout, in, w, mean, rstd, i0, i1, C)
        NORM_WIDTH_CASES(c, NB_ROWS);
#undef NB_ROWS
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
            rope[(long)t * head_dim + i] = (float)cos(ang);
            rope[(long)t * head_dim + half + i] = (float)sin(ang);
        }
    }
}

/* The q/k forward row kernel is inlined with head_dim a constant where it is
 * a common one (HD_CASES): each head's loops then become a few whole vectors,
 * without the trip-count, alias and remainder checks that cost more than the
 * arithmetic at head_dim 16 (callgrind: 27% fewer instructions). Same
 * operations, same order: same results. */
#define HD_CASES(hd, call) CONST_CASES(hd, call, 16, 32, 64, 128)

/* The RMSNorm's 1 / rms of one head vector. */
ALWAYS_INLINE float head_rstd(const float *x, int hd, float eps)
{
    return 1.0f / sqrtf(row_dot(x, x, hd) / hd + eps);
}

/* One head vector: optional RMSNorm with weight w and 1 / rms r (head_rstd),
 * then rotation at rope row cs. */
ALWAYS_INLINE void head_forward(float *out, const float *x, const float *w, float r,
                                const float *cs, int hd, int norm)
{
    int half = hd / 2;
    if (norm) {
        for (int i = 0; i < half; i++) {
            float a = x[i] * r * w[i];
            float b = x[i + half] * r * w[i + half];
            float c = cs[i], s = cs[half + i];
            out[i] = a * c - b * s;
            out[i + half] = b * c + a * s;
        }
        return;
    }
    for (int i = 0; i < half; i++) {
        float a = x[i], b = x[i + half];
        float c = cs[i], s = cs[half + i];
        out[i] = a * c - b * s;
        out[i + half] = b * c + a * s;
    }
}

/* Backward of head_forward: dx (=) from dout; pw[hd] += dL/dw. */
ALWAYS_INLINE void head_backward(float *dx, float *pw, const float *dout, const float *x,
                                 const float *w, float rstd, const float *cs, int hd, int norm)
{
    int half = hd / 2;
    /* Inverse rotation gives the gradient of the normalised vector y. */
    float dot = 0.0f;
    for (int i = 0; i < half; i++) {
        float c = cs[i], s = cs[half + i];
        float dya = dout[i] * c + dout[i + half] * s;
        float dyb = -dout[i] * s + dout[i + half] * c;
        dx[i] = dya;
        dx[i + half] = dyb;
    }
    if (!norm)
        return;
    if (pw)
        for (int j = 0; j < hd; j++)
            pw[j] += dx[j] * (x[j] * rstd);
    for (int j = 0; j < hd; j++)
        dx[j] *= w[j]; /* now d xhat */
    dot = row_dot(dx, x, hd) * rstd / hd;
    for (int j = 0; j < hd; j++)
        dx[j] = rstd * (dx[j] - x[j] * rstd * dot);
}

/* Row `row` of lattice__qkv_forward. */
ALWAYS_INLINE void qkv_forward_row(float *q, float *k, float *v, float *rstd_q, float *rstd_k,
                                   const float *raw, const float *qw, const float *kw,
                                   const float *rope, const lattice_qkv_dims *d, long row, int hd)
{
    const int T = d->seq, H = d->n_heads, KV = d->n_kv_heads;
    const long ld = (long)(H + 2 * KV) * hd;
    long b = row / T, t = row % T;
    const float *x = raw + row * ld;
    const float *cs = rope + t * hd; /* hd/2 cosines, then hd/2 sines */
    /* without q/k norm the rstd arrays are NULL: no offset from them (UB) */
    const int nq = d->qk_norm;
    /* every head's 1 / rms first: their sums, square roots and divisions are
     * independent chains that overlap, where one head's rotation waited on
     * its own (same operations: same results) */
    if (nq) {
        for (int h = 0; h < H; h++)
            rstd_q[row * H + h] = head_rstd(x + (long)h * hd, hd, d->eps);
        for (int h = 0; h < KV; h++)
            rstd_k[row * KV + h] = head_rstd(x + (long)(H + h) * hd, hd, d->eps);
    }
    for (int h = 0; h < H; h++)
        head_forward(q + ((b * H + h) * T + t) * hd, x + (long)h * hd, qw,
                     nq ? rstd_q[row * H + h] : 1.0f, cs, hd, nq);
    for (int h = 0; h < KV; h++) {
        head_forward(k + ((b * KV + h) * T + t) * hd, x + (long)(H + h) * hd, kw,
                     nq ? rstd_k[row * KV + h] : 1.0f, cs, hd, nq);
        memcpy(v + ((b * KV + h) * T + t) * hd, x + (long)(H + KV + h) * hd, sizeof(float) * hd);
    }
}

/* Row `row` of lattice__qkv_backward; pq, pk: the chunk's weight-gradient partials (NULL: none). */
ALWAYS_INLINE void qkv_backward_row(float *draw, float *pq, float *pk, const float *dq,
                                    const float *dk, const float *dv, const float *raw,
                                    const float *qw, const float *kw, const float *rstd_q,
                                    const float *rstd_k, const float *rope,
                                    const lattice_qkv_dims *d, long row, int hd)
{
    const int T = d->seq, H = d->n_heads, KV = d->n_kv_heads;
    const long ld = (long)(H + 2 * KV) * hd;
    long b = row / T, t = row % T;
    const float *x = raw + row * ld;
    float *dx = draw + row * ld;
    const float *cs = rope + t * hd;
    for (int h = 0; h < H; h++)
        head_backward(dx + (long)h * hd, pq, dq + ((b * H + h) * T + t) * hd, x + (long)h * hd, qw,
                      d->qk_norm ? rstd_q[row * H + h] : 1.0f, cs, hd, d->qk_norm);
    for (int h = 0; h < KV; h++) {
        head_backward(dx + (long)(H + h) * hd, pk, dk + ((b * KV + h) * T + t) * hd,
                      x + (long)(H + h) * hd, kw, d->qk_norm ? rstd_k[row * KV + h] : 1.0f, cs,
                      hd, d->qk_norm);
        memcpy(dx + (long)(H + KV + h) * hd, dv + ((b * KV + h) * T + t) * hd, sizeof(float) * hd);
    }
}

VEC_CLONES_V3
void lattice__qkv_forward(float *q, float *k, float *v, float *rstd_q, float *rstd_k,
                          const float *raw, const float *qw, const float *kw, const float *rope,
                          const lattice_qkv_dims *d, int nt)
{
    const int B = d->batch, T = d->seq, H = d->n_heads, KV = d->n_kv_heads, hd = d->head_dim;
    const long ld = (long)(H + 2 * KV) * hd;
    const long n = (long)B * T;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * ld > SERIAL_WORK)
    for (long row = 0; row < n; row++) {
#define QKV_ROW(HD) qkv_forward_row(q, k, v, rstd_q, rstd_k, raw, qw, kw, rope, d, row, HD)
        HD_CASES(hd, QKV_ROW);
#undef QKV_ROW
    }
}

VEC_CLONES_V3
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
#pragma omp parallel for schedule(static) num_threads(nt) if (n * ld > SERIAL_WORK)
    for (long ch = 0; ch < n_chunks; ch++) {
        float *pq = scratch + ch * 2 * hd, *pk = pq + hd;
        if (want)
            memset(pq, 0, sizeof(float) * 2 * hd);
        long r1 = (ch + 1) * CHUNK < n ? (ch + 1) * CHUNK : n;
        for (long row = ch * CHUNK; row < r1; row++) {
            /* (a constant head_dim made the backward's loops more instructions, not fewer) */
            qkv_backward_row(draw, want ? pq : NULL, want ? pk : NULL, dq, dk, dv, raw, qw, kw,
                             rstd_q, rstd_k, rope, d, row, hd);
        }
    }
    if (want && dqw)
        reduce_chunks(dqw, scratch, n_chunks, 2 * hd, hd, nt);
    if (want && dkw)
        reduce_chunks(dkw, scratch + hd, n_chunks, 2 * hd, hd, nt);
}

VEC_CLONES
void lattice__softmax_row(float *row, int n, int zero_to)
{
    row_exp(row, row, row_max(row, n), n);
    const float inv = 1.0f / row_sum(row, n);
    for (int j = 0; j < n; j++)
        row[j] *= inv;
    for (int j = n; j < zero_to; j++)
        row[j] = 0.0f;
}

VEC_CLONES
void lattice__softmax_backward_row(float *g, const float *p, int n, int zero_to)
{
    const float dot = row_dot(g, p, n);
    for (int j = 0; j < n; j++)
        g[j] = p[j] * (g[j] - dot);
    for (int j = n; j < zero_to; j++)
        g[j] = 0.0f;
}

void lattice__causal_softmax(float *p, long n_mats, int t, int r0, int rows, int nt)
{
    const long n = n_mats * rows;
    const int kend = r0 + rows;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * kend > SERIAL_WORK)
    for (long r = 0; r < n; r++) {
        const int i = r0 + (int)(r % rows);
        lattice__softmax_row(p + ((r / rows) * t + i) * t, i + 1, kend);
    }
}

void lattice__softmax_backward(float *dp, const float *p, long n_mats, int t, int r0, int rows,
                               int nt)
{
    const long n = n_mats * rows;
    const int kend = r0 + rows;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * kend > SERIAL_WORK)
    for (long r = 0; r < n; r++) {
        const int i = r0 + (int)(r % rows);
        const long off = ((r / rows) * t + i) * t;
        lattice__softmax_backward_row(dp + off, p + off, i + 1, kend);
    }
}

static inline float sigmoidf(float x)
{
    const float e = lattice__expf(-fabsf(x));
    const float s = 1.0f / (1.0f + e);
    return x >= 0.0f ? s : e * s;
}

VEC_CLONES
void lattice__swiglu_forward(float *s, const float *gu, long n, int f, int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * f * SWIGLU_COST > SERIAL_WORK)
    for (long i = 0; i < n; i++) {
        const float *g = gu + i * 2 * f, *u = g + f;
        float *o = s + i * f;
        for (int j = 0; j < f; j++)
            o[j] = g[j] * sigmoidf(g[j]) * u[j];
    }
}

VEC_CLONES
void lattice__swiglu_backward(float *dgu, float *ds, const float *gu, int keep_s, long n, int f,
                              int nt)
{
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * f * SWIGLU_COST > SERIAL_WORK)
    for (long i = 0; i < n; i++) {
        const float *g = gu + i * 2 * f, *u = g + f;
        float *d = ds + i * f, *dg = dgu + i * 2 * f, *du = dg + f;
        for (int j = 0; j < f; j++) {
            float sg = sigmoidf(g[j]);
            float silu = g[j] * sg, dj = d[j];
            du[j] = dj * silu;
            dg[j] = dj * u[j] * sg * (1.0f + g[j] * (1.0f - sg));
            if (keep_s) /* the forward's s, its operations in its order */
                d[j] = silu * u[j];
        }
    }
}

VEC_CLONES
double lattice__cross_entropy(float *dlogits, const float *logits, const int32_t *targets,
                              const uint8_t *mask, long n, int v, double *rowloss,
                              int64_t *count, int nt)
{
    int64_t cnt = 0;
    for (long i = 0; i < n; i++)
        cnt += !mask || mask[i];
    float inv = cnt ? 1.0f / (float)cnt : 0.0f;
    (void)nt;
#pragma omp parallel for schedule(static) num_threads(nt) if (n * v > SERIAL_WORK)
    for (long i = 0; i < n; i++) {
        const float *z = logits + i * v;
        int on = !mask || mask[i];
        const float mx = row_max(z, v);
        /* exp(z - max) once, kept in dlogits (or the caller's row scratch) for the gradient */
        float *e = dlogits ? dlogits + i * v : NULL;
        float sum = 0.0f;
        if (e) {
            row_exp(e, z, mx, v);
            sum = row_sum(e, v);
        } else {
            for (int j = 0; j < v; j++)
                sum += lattice__expf(z[j] - mx);
        }
        double lse = mx + log((double)sum);
        rowloss[i] = on ? lse - z[targets[i]] : 0.0;
        if (e) {
            if (!on) {
                memset(e, 0, sizeof(float) * v);
                continue;
            }
            const float f = inv / sum;
            for (int j = 0; j < v; j++)
                e[j] *= f;
            e[targets[i]] -= inv;
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
#pragma omp parallel for schedule(static) num_threads(nt) if (n > SERIAL_WORK)
    for (long i = 0; i < n; i++)
        y[i] = a * y[i] + x[i];
}
