/* Every op's backward against double-precision central differences of a
 * double-precision reference forward, and the BLIS backend against the
 * reference one op by op. */
#include "testutil.h"

#include "attention.h"
#include "backend_impl.h"
#include "kernels.h"

/* ---- norms ---------------------------------------------------------------- */

typedef struct norm_ctx {
    int layer;
    long n;
    int c;
    double eps;
    double *x, *w, *b, *r; /* r: the weights of the scalar loss sum(y * r) */
} norm_ctx;

static double norm_loss(void *p)
{
    norm_ctx *k = p;
    double loss = 0.0;
    for (long i = 0; i < k->n; i++) {
        const double *x = k->x + i * k->c;
        double mu = 0.0, ss = 0.0;
        if (k->layer) {
            for (int j = 0; j < k->c; j++)
                mu += x[j];
            mu /= k->c;
        }
        for (int j = 0; j < k->c; j++)
            ss += (x[j] - mu) * (x[j] - mu);
        double rs = 1.0 / sqrt(ss / k->c + k->eps);
        for (int j = 0; j < k->c; j++) {
            double y = (x[j] - mu) * rs * k->w[j] + (k->layer ? k->b[j] : 0.0);
            loss += y * k->r[i * k->c + j];
        }
    }
    return loss;
}

START_TEST(test_norm_grad)
{
    /* _i: 0 RMSNorm, 1 LayerNorm */
    enum { N = 37, C = 9 }; /* N spans more than one reduction chunk */
    tu_rng rng = {11 + _i};
    float x[N * C], w[C], b[C], r[N * C], y[N * C], mean[N], rstd[N];
    float dx[N * C], dw[C] = {0}, db[C] = {0};
    float *scratch = calloc(lattice__reduce_scratch(N, 2 * C), sizeof(float));
    tu_fill(x, N * C, 2.0, &rng);
    for (int j = 0; j < N * C; j++)
        x[j] += 0.5f; /* a mean away from 0 exercises LayerNorm's centring */
    tu_fill(w, C, 1.0, &rng);
    tu_fill(b, C, 1.0, &rng);
    tu_fill(r, N * C, 1.0, &rng);
    lattice__norm_forward(_i, y, mean, rstd, x, w, b, 1e-5f, N, C, 2);
    lattice__norm_backward(_i, dx, 0, dw, _i ? db : NULL, r, x, w, mean, rstd, N, C, scratch, 2);

    double xd[N * C], wd[C], bd[C], rd[N * C];
    tu_to_double(xd, x, N * C);
    tu_to_double(wd, w, C);
    tu_to_double(bd, b, C);
    tu_to_double(rd, r, N * C);
    norm_ctx k = {_i, N, C, 1e-5, xd, wd, bd, rd};
    tu_fd_input in[] = {{"x", xd, dx, N * C}, {"w", wd, dw, C}, {"b", bd, db, C}};
    tu_fd_check(norm_loss, &k, in, _i ? 3 : 2, 1e-5, 1e-4);

    /* accumulate mode adds to what is there */
    float acc[N * C];
    for (int j = 0; j < N * C; j++)
        acc[j] = 1.0f;
    lattice__norm_backward(_i, acc, 1, NULL, NULL, r, x, w, mean, rstd, N, C, scratch, 1);
    for (int j = 0; j < N * C; j++)
        ck_assert_float_eq_tol(acc[j], 1.0f + dx[j], 1e-5f);
    free(scratch);
}
END_TEST

/* ---- q/k norm + RoPE ---------------------------------------------------------- */

enum { QB = 2, QT = 3, QH = 4, QKV = 2, QHD = 6 };
#define QW ((QH + 2 * QKV) * QHD)
#define QN (QB * QT)

typedef struct qkv_ctx {
    int norm;
    double theta, eps;
    double *raw, *qw, *kw, *rq, *rk, *rv;
} qkv_ctx;

/* One head: norm (optional) then rotation; returns sum(out * r). */
static double head_ref(const double *x, const double *w, int norm, double eps, int t,
                       double theta, const double *r)
{
    double y[QHD], ss = 0.0;
    for (int j = 0; j < QHD; j++)
        ss += x[j] * x[j];
    double rs = norm ? 1.0 / sqrt(ss / QHD + eps) : 1.0;
    for (int j = 0; j < QHD; j++)
        y[j] = x[j] * rs * (norm ? w[j] : 1.0);
    double loss = 0.0;
    for (int i = 0; i < QHD / 2; i++) {
        double ang = t * pow(theta, -2.0 * i / QHD);
        double a = y[i], b = y[i + QHD / 2];
        loss += (a * cos(ang) - b * sin(ang)) * r[i];
        loss += (b * cos(ang) + a * sin(ang)) * r[i + QHD / 2];
    }
    return loss;
}

static double qkv_loss(void *p)
{
    qkv_ctx *k = p;
    double loss = 0.0;
    for (int b = 0; b < QB; b++)
        for (int t = 0; t < QT; t++) {
            const double *x = k->raw + (b * QT + t) * QW;
            for (int h = 0; h < QH; h++)
                loss += head_ref(x + h * QHD, k->qw, k->norm, k->eps, t, k->theta,
                                 k->rq + ((b * QH + h) * QT + t) * QHD);
            for (int h = 0; h < QKV; h++) {
                loss += head_ref(x + (QH + h) * QHD, k->kw, k->norm, k->eps, t, k->theta,
                                 k->rk + ((b * QKV + h) * QT + t) * QHD);
                for (int j = 0; j < QHD; j++)
                    loss += x[(QH + QKV + h) * QHD + j] * k->rv[((b * QKV + h) * QT + t) * QHD + j];
            }
        }
    return loss;
}

START_TEST(test_qkv_rope_grad)
{
    /* _i: q/k norm off (RoPE alone) or on */
    tu_rng rng = {21 + _i};
    const int nq = QN * QH * QHD, nk = QN * QKV * QHD;
    float raw[QN * QW], qw[QHD], kw[QHD], rope[QT * QHD];
    float q[QN * QH * QHD], k[QN * QKV * QHD], v[QN * QKV * QHD], rsq[QN * QH], rsk[QN * QKV];
    float rq[QN * QH * QHD], rk[QN * QKV * QHD], rv[QN * QKV * QHD];
    float draw[QN * QW], dqw[QHD] = {0}, dkw[QHD] = {0};
    float *scratch = calloc(lattice__reduce_scratch(QN, 2 * QHD), sizeof(float));
    tu_fill(raw, QN * QW, 1.5, &rng);
    tu_fill(qw, QHD, 1.0, &rng);
    tu_fill(kw, QHD, 1.0, &rng);
    tu_fill(rq, nq, 1.0, &rng);
    tu_fill(rk, nk, 1.0, &rng);
    tu_fill(rv, nk, 1.0, &rng);
    lattice__rope_table(rope, QT, QHD, 100.0f);
    lattice_qkv_dims d = {QB, QT, QH, QKV, QHD, _i, 1e-6f};
    lattice__qkv_forward(q, k, v, rsq, rsk, raw, qw, kw, rope, &d, 2);
    lattice__qkv_backward(draw, dqw, dkw, rq, rk, rv, raw, qw, kw, rsq, rsk, rope, &d, scratch, 2);

    double rawd[QN * QW], qwd[QHD], kwd[QHD], rqd[QN * QH * QHD], rkd[QN * QKV * QHD],
        rvd[QN * QKV * QHD];
    tu_to_double(rawd, raw, QN * QW);
    tu_to_double(qwd, qw, QHD);
    tu_to_double(kwd, kw, QHD);
    tu_to_double(rqd, rq, nq);
    tu_to_double(rkd, rk, nk);
    tu_to_double(rvd, rv, nk);
    qkv_ctx c = {_i, 100.0, 1e-6, rawd, qwd, kwd, rqd, rkd, rvd};
    /* the forward itself matches the reference */
    double fwd = 0.0;
    for (int j = 0; j < nq; j++)
        fwd += (double)q[j] * rq[j];
    for (int j = 0; j < nk; j++)
        fwd += (double)k[j] * rk[j] + (double)v[j] * rv[j];
    ck_assert_double_eq_tol(fwd, qkv_loss(&c), 1e-4);
    tu_fd_input in[] = {{"raw", rawd, draw, QN * QW}, {"q_norm", qwd, dqw, QHD},
                        {"k_norm", kwd, dkw, QHD}};
    tu_fd_check(qkv_loss, &c, in, _i ? 3 : 1, 1e-5, 1e-4);
    free(scratch);
}
END_TEST

/* ---- attention (GQA) -------------------------------------------------------- */

enum { AB = 2, AT = 5, AH = 4, AKV = 2, AHD = 3 };

typedef struct attn_ctx {
    double *q, *k, *v, *r;
} attn_ctx;

static double attn_loss(void *p)
{
    attn_ctx *c = p;
    const int G = AH / AKV;
    double loss = 0.0;
    for (int b = 0; b < AB; b++)
        for (int h = 0; h < AH; h++)
            for (int i = 0; i < AT; i++) {
                const double *qi = c->q + ((b * AH + h) * AT + i) * AHD;
                double s[AT], mx = -1e300, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    const double *kj = c->k + ((b * AKV + h / G) * AT + j) * AHD;
                    s[j] = 0.0;
                    for (int e = 0; e < AHD; e++)
                        s[j] += qi[e] * kj[e];
                    s[j] /= sqrt((double)AHD);
                    mx = s[j] > mx ? s[j] : mx;
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(s[j] - mx);
                for (int e = 0; e < AHD; e++) {
                    double o = 0.0;
                    for (int j = 0; j <= i; j++)
                        o += exp(s[j] - mx) / sum * c->v[((b * AKV + h / G) * AT + j) * AHD + e];
                    loss += o * c->r[(b * AT + i) * AH * AHD + h * AHD + e];
                }
            }
    return loss;
}

typedef struct attn_run {
    float q[AB * AH * AT * AHD], k[AB * AKV * AT * AHD], v[AB * AKV * AT * AHD];
    float r[AB * AT * AH * AHD];
    float att[AB * AT * AH * AHD], p[AB * AH * AT * AT], dp[AB * AH * AT * AT];
    float dq[AB * AH * AT * AHD], dk[AB * AKV * AT * AHD], dv[AB * AKV * AT * AHD];
} attn_run;

/* Query blocks of 2 rows, so that the blocked path (keys cut at each block's
 * last row) is what the finite differences check. */
enum { AQB = 2 };

static void attn_compute(attn_run *a, const char *backend)
{
    lattice_backend *be = tu_backend(backend, 2);
    const float *pa[AB * AH], *pb[AB * AH];
    float *pc[AB * AH];
    lattice_attn_ptrs ptrs = {pa, pb, pc, NULL};
    lattice_attn_dims d = {AB, AT, AH, AKV, AHD, AQB, LATTICE_ATTN_GEMM, 0};
    ck_assert_int_eq(lattice__attention_forward(be, a->att, a->p, a->q, a->k, a->v, &d, &ptrs),
                     LATTICE_OK);
    ck_assert_int_eq(lattice__attention_backward(be, a->dq, a->dk, a->dv, a->dp, a->r, a->att,
                                                 a->p, a->q, a->k, a->v, &d, &ptrs),
                     LATTICE_OK);
    lattice_backend_destroy(be);
}

static void attn_inputs(attn_run *a, uint64_t seed)
{
    tu_rng rng = {seed};
    tu_fill(a->q, sizeof a->q / sizeof(float), 1.5, &rng);
    tu_fill(a->k, sizeof a->k / sizeof(float), 1.5, &rng);
    tu_fill(a->v, sizeof a->v / sizeof(float), 1.0, &rng);
    tu_fill(a->r, sizeof a->r / sizeof(float), 1.0, &rng);
}

START_TEST(test_attention_grad)
{
    static attn_run a;
    attn_inputs(&a, 31);
    attn_compute(&a, tu_backend_name(_i));
    enum { NQ = AB * AH * AT * AHD, NK = AB * AKV * AT * AHD, NO = AB * AT * AH * AHD };
    static double q[NQ], k[NK], v[NK], r[NO];
    tu_to_double(q, a.q, NQ);
    tu_to_double(k, a.k, NK);
    tu_to_double(v, a.v, NK);
    tu_to_double(r, a.r, NO);
    attn_ctx c = {q, k, v, r};
    double fwd = 0.0;
    for (int j = 0; j < NO; j++)
        fwd += (double)a.att[j] * a.r[j];
    ck_assert_double_eq_tol(fwd, attn_loss(&c), 1e-4);
    /* causality: the probabilities written above the diagonal (those of the
     * diagonal blocks, read by the blocks' GEMMs) are exactly 0 */
    for (int m = 0; m < AB * AH; m++)
        for (int i = 0; i < AT; i++)
            for (int j = i + 1; j < (i / AQB + 1) * AQB && j < AT; j++)
                ck_assert_float_eq(a.p[(m * AT + i) * AT + j], 0.0f);
    tu_fd_input in[] = {{"q", q, a.dq, NQ}, {"k", k, a.dk, NK}, {"v", v, a.dv, NK}};
    tu_fd_check(attn_loss, &c, in, 3, 1e-5, 1e-4);
}
END_TEST

START_TEST(test_attention_blis_vs_ref)
{
    static attn_run x, y;
    attn_inputs(&x, 41);
    y = x;
    attn_compute(&x, "ref");
    attn_compute(&y, "blis");
    const float tol = 1e-5f;
    for (size_t j = 0; j < sizeof x.att / sizeof(float); j++)
        ck_assert_float_eq_tol(x.att[j], y.att[j], tol);
    for (size_t j = 0; j < sizeof x.dq / sizeof(float); j++)
        ck_assert_float_eq_tol(x.dq[j], y.dq[j], tol);
    for (size_t j = 0; j < sizeof x.dk / sizeof(float); j++) {
        ck_assert_float_eq_tol(x.dk[j], y.dk[j], tol);
        ck_assert_float_eq_tol(x.dv[j], y.dv[j], tol);
    }
}
END_TEST

/* Blocked attention (query rows in blocks, keys cut at each block's end) must
 * give what one block over all rows gives, for every block size. */
enum { QB_B = 2, QB_T = 37, QB_H = 4, QB_KV = 2, QB_HD = 8 };
enum { QB_NQ = QB_B * QB_H * QB_T * QB_HD, QB_NK = QB_B * QB_KV * QB_T * QB_HD };

typedef struct qb_run {
    float q[QB_NQ], k[QB_NK], v[QB_NK], r[QB_NQ], att[QB_NQ], dq[QB_NQ], dk[QB_NK], dv[QB_NK];
    float p[QB_B * QB_H * QB_T * QB_T], dp[QB_B * QB_H * QB_T * QB_T];
} qb_run;

static void qb_compute(qb_run *a, lattice_backend *be, int q_block, int path)
{
    const float *pa[QB_B * QB_H], *pb[QB_B * QB_H];
    float *pc[QB_B * QB_H];
    lattice_attn_ptrs ptrs = {pa, pb, pc, NULL};
    lattice_attn_dims d = {QB_B, QB_T, QB_H, QB_KV, QB_HD, q_block, path, 0};
    /* stale values in the scratch must not matter */
    for (size_t j = 0; j < sizeof a->p / sizeof(float); j++)
        a->p[j] = a->dp[j] = NAN;
    ck_assert_int_eq(lattice__attention_forward(be, a->att, a->p, a->q, a->k, a->v, &d, &ptrs),
                     LATTICE_OK);
    ck_assert_int_eq(lattice__attention_backward(be, a->dq, a->dk, a->dv, a->dp, a->r, a->att,
                                                 a->p, a->q, a->k, a->v, &d, &ptrs),
                     LATTICE_OK);
}

static void qb_assert_close(const float *x, const float *y, size_t n)
{
    for (size_t j = 0; j < n; j++)
        ck_assert_float_eq_tol(x[j], y[j], 1e-5f * (1.0f + fabsf(y[j])));
}

START_TEST(test_attention_blocked_vs_whole)
{
    static qb_run whole, blocked;
    tu_rng rng = {77};
    tu_fill(whole.q, QB_NQ, 1.5, &rng);
    tu_fill(whole.k, QB_NK, 1.5, &rng);
    tu_fill(whole.v, QB_NK, 1.0, &rng);
    tu_fill(whole.r, QB_NQ, 1.0, &rng);
    lattice_backend *be = tu_backend(tu_backend_name(_i), 2);
    qb_compute(&whole, be, QB_T, LATTICE_ATTN_GEMM);
    const int blocks[] = {1, 5, 8, 32, 36};
    for (size_t b = 0; b < sizeof blocks / sizeof blocks[0]; b++) {
        memcpy(blocked.q, whole.q, sizeof whole.q);
        memcpy(blocked.k, whole.k, sizeof whole.k);
        memcpy(blocked.v, whole.v, sizeof whole.v);
        memcpy(blocked.r, whole.r, sizeof whole.r);
        qb_compute(&blocked, be, blocks[b], LATTICE_ATTN_GEMM);
        qb_assert_close(blocked.att, whole.att, QB_NQ);
        qb_assert_close(blocked.dq, whole.dq, QB_NQ);
        qb_assert_close(blocked.dk, whole.dk, QB_NK);
        qb_assert_close(blocked.dv, whole.dv, QB_NK);
    }
    lattice_backend_destroy(be);
}
END_TEST

/* The vectorisable exp the softmaxes, the loss and SwiGLU use: within 2 ulp of
 * exp over its domain, 0 below -87, NaN through. */
START_TEST(test_expf)
{
    double worst = 0.0;
    for (float x = -87.0f; x <= 88.0f; x += 0.00731f) {
        double e = exp((double)x);
        double rel = fabs((double)lattice__expf(x) - e) / e;
        worst = rel > worst ? rel : worst;
    }
    ck_assert_double_lt(worst, 2.0 * 0x1.0p-23);
    ck_assert_float_eq(lattice__expf(0.0f), 1.0f);
    ck_assert_float_eq(lattice__expf(-87.5f), 0.0f);
    ck_assert_float_eq(lattice__expf(-1e30f), 0.0f);
    ck_assert_float_eq(lattice__expf(-INFINITY), 0.0f);
    ck_assert(isnan(lattice__expf(NAN)));
}
END_TEST

/* The fused attention (one vectorised pass per head over the causal part)
 * against the GEMM path, at a length that is not a multiple of its 8-row
 * blocks and with two query heads per kv head. */
START_TEST(test_attention_fused_vs_gemm)
{
    static qb_run ref, fused;
    tu_rng rng = {91};
    tu_fill(ref.q, QB_NQ, 1.5, &rng);
    tu_fill(ref.k, QB_NK, 1.5, &rng);
    tu_fill(ref.v, QB_NK, 1.0, &rng);
    tu_fill(ref.r, QB_NQ, 1.0, &rng);
    memcpy(&fused, &ref, sizeof ref);
    lattice_backend *be = tu_backend(tu_backend_name(_i), 2);
    qb_compute(&ref, be, QB_T, LATTICE_ATTN_GEMM);
    qb_compute(&fused, be, 0, LATTICE_ATTN_FUSED);
    qb_assert_close(fused.att, ref.att, QB_NQ);
    qb_assert_close(fused.dq, ref.dq, QB_NQ);
    qb_assert_close(fused.dk, ref.dk, QB_NK);
    qb_assert_close(fused.dv, ref.dv, QB_NK);
    lattice_backend_destroy(be);
}
END_TEST

/* The fused path against the GEMM path at wider heads: 16 and 32 (the mixes
 * run 16 lanes wide where the CPU has AVX-512), 24 (8 lanes), over 37 and 40
 * positions (with and without a partial last chunk), three query heads per kv
 * head. */
static void fused_width_run(lattice_backend *be, int hd, int T, int path, float *out)
{
    enum { B = 2, H = 6, KV = 2 };
    const size_t nq = (size_t)B * H * T * hd, nk = (size_t)B * KV * T * hd, pt = (size_t)B * H * T * T;
    float *q = out, *k = q + nq, *v = k + nk, *r = v + nk, *att = r + nq, *dq = att + nq;
    float *dk = dq + nq, *dv = dk + nk;
    float *p = malloc(sizeof(float) * 2 * pt), *dp = p + pt;
    ck_assert_ptr_nonnull(p);
    for (size_t j = 0; j < 2 * pt; j++)
        p[j] = NAN;
    tu_rng rng = {hd * 100 + T};
    tu_fill(q, (long)nq, 1.5, &rng);
    tu_fill(k, (long)nk, 1.5, &rng);
    tu_fill(v, (long)nk, 1.0, &rng);
    tu_fill(r, (long)nq, 1.0, &rng);
    const float *pa[B * H], *pb[B * H];
    float *pc[B * H];
    lattice_attn_ptrs ptrs = {pa, pb, pc, NULL};
    lattice_attn_dims d = {B, T, H, KV, hd, T, path, 0};
    ck_assert_int_eq(lattice__attention_forward(be, att, p, q, k, v, &d, &ptrs), LATTICE_OK);
    ck_assert_int_eq(lattice__attention_backward(be, dq, dk, dv, dp, r, att, p, q, k, v, &d, &ptrs),
                     LATTICE_OK);
    free(p);
}

START_TEST(test_attention_fused_widths)
{
    static const int hds[] = {16, 24, 32};
    const int hd = hds[_i % 3], T = _i < 3 ? 37 : 40;
    const size_t n = (size_t)2 * 6 * T * hd * 5 + (size_t)2 * 2 * T * hd * 4;
    float *ref = malloc(sizeof(float) * n), *fused = malloc(sizeof(float) * n);
    ck_assert(ref && fused);
    lattice_backend *be = tu_backend("ref", 2);
    fused_width_run(be, hd, T, LATTICE_ATTN_GEMM, ref);
    fused_width_run(be, hd, T, LATTICE_ATTN_FUSED, fused);
    qb_assert_close(fused, ref, n);
    lattice_backend_destroy(be);
    free(ref);
    free(fused);
}
END_TEST

/* ---- the flash kernels: every instance this CPU runs ------------------------ */

static const int flash_isas[] = {LATTICE_ATTN_ISA_PORTABLE, LATTICE_ATTN_ISA_AVX2,
                                 LATTICE_ATTN_ISA_AVX512};
enum { N_FLASH_ISAS = 3 };

typedef struct attn_shape {
    int B, T, H, KV, hd;
} attn_shape;

static size_t shape_nq(const attn_shape *s) { return (size_t)s->B * s->H * s->T * s->hd; }
static size_t shape_nk(const attn_shape *s) { return (size_t)s->B * s->KV * s->T * s->hd; }

/* in: q, k, v, r (dO) back to back; out: att, dq, dk, dv. The scratch (p, dp)
 * starts as NaN: nothing stale may be read. */
static void attn_path_run(lattice_backend *be, const attn_shape *s, int path, const float *in,
                          float *out)
{
    const size_t nq = shape_nq(s), nk = shape_nk(s), pt = (size_t)s->B * s->H * s->T * s->T;
    const float *q = in, *k = q + nq, *v = k + nk, *r = v + nk;
    float *att = out, *dq = att + nq, *dk = dq + nq, *dv = dk + nk;
    float *p = malloc(sizeof(float) * 2 * pt), *dp = p + pt;
    const float **pa = malloc(sizeof(float *) * s->B * s->H * 2);
    float **pc = malloc(sizeof(float *) * s->B * s->H);
    ck_assert(p && pa && pc);
    for (size_t j = 0; j < 2 * pt; j++)
        p[j] = NAN;
    lattice_attn_ptrs ptrs = {pa, pa + s->B * s->H, pc, NULL};
    lattice_attn_dims d = {s->B, s->T, s->H, s->KV, s->hd, 0, path, 0};
    ck_assert_int_eq(lattice__attention_forward(be, att, p, q, k, v, &d, &ptrs), LATTICE_OK);
    ck_assert_int_eq(lattice__attention_backward(be, dq, dk, dv, dp, r, att, p, q, k, v, &d, &ptrs),
                     LATTICE_OK);
    free(p);
    free(pa);
    free(pc);
}

/* The flash path against the reference (the GEMM path on the ref backend),
 * forward and backward, for head_dim 16/32/64/128, lengths 1, 7 and 129
 * (one row; a partial block; a long run with a partial last block) and 1, 2
 * and 4 query heads per kv head, with each instance the CPU can run. */
START_TEST(test_attention_flash_vs_reference)
{
    static const int hds[] = {16, 32, 64, 128}, Ts[] = {1, 7, 129}, Gs[] = {1, 2, 4};
    const int hd = hds[_i % 4], T = Ts[_i / 4 % 3], G = Gs[_i / 12];
    const attn_shape s = {T > 100 ? 1 : 2, T, 2 * G, 2, hd};
    const size_t nq = shape_nq(&s), nk = shape_nk(&s), n = 2 * nq + 2 * nk;
    float *in = malloc(sizeof(float) * n), *ref = malloc(sizeof(float) * n);
    float *got[N_FLASH_ISAS] = {0};
    ck_assert(in && ref);
    tu_rng rng = {(uint64_t)(hd * 1000 + T * 10 + G)};
    tu_fill(in, (long)(nq + 2 * nk), 1.5, &rng);
    tu_fill(in + nq + 2 * nk, (long)nq, 1.0, &rng);
    lattice_backend *be = tu_backend("ref", 2);
    attn_path_run(be, &s, LATTICE_ATTN_GEMM, in, ref);
    int ran = 0;
    for (int t = 0; t < N_FLASH_ISAS; t++) {
        if (lattice_backend_set_attention_kernel(be, lattice__attn_isa_name(flash_isas[t])) !=
            LATTICE_OK)
            continue;
        got[t] = malloc(sizeof(float) * n);
        ck_assert_ptr_nonnull(got[t]);
        attn_path_run(be, &s, LATTICE_ATTN_FUSED, in, got[t]);
        ck_assert_int_eq(lattice_backend_set_attention_kernel(be, "auto"), LATTICE_OK);
        qb_assert_close(got[t], ref, n);
        ran++;
    }
    ck_assert_int_ge(ran, 1); /* the portable build always runs */
    for (int t = 0; t < N_FLASH_ISAS; t++)
        free(got[t]);
    lattice_backend_destroy(be);
    free(in);
    free(ref);
}
END_TEST

/* Finite differences through the flash path, with each instance: head_dim
 * 8 over 11 positions (a full 8-row block and a partial one; a partial
 * 16-row block), head_dim 16 over 7 positions with 4 query heads per kv
 * head, head_dim 16 over 19 positions with 2 per kv head. */
static const attn_shape fd_shapes[] = {{1, 11, 2, 1, 8}, {1, 7, 4, 1, 16}, {1, 19, 2, 1, 16}};

typedef struct fused_ctx {
    attn_shape s;
    double *q, *k, *v, *r;
} fused_ctx;

static double fused_loss(void *ctx)
{
    fused_ctx *c = ctx;
    const int B = c->s.B, T = c->s.T, H = c->s.H, KV = c->s.KV, hd = c->s.hd, G = H / KV;
    double loss = 0.0, sc[32];
    for (int b = 0; b < B; b++)
        for (int h = 0; h < H; h++)
            for (int i = 0; i < T; i++) {
                const double *qi = c->q + ((size_t)(b * H + h) * T + i) * hd;
                const size_t kv = (size_t)(b * KV + h / G) * T * hd;
                double mx = -1e300, sum = 0.0;
                for (int j = 0; j <= i; j++) {
                    sc[j] = 0.0;
                    for (int e = 0; e < hd; e++)
                        sc[j] += qi[e] * c->k[kv + (size_t)j * hd + e];
                    sc[j] /= sqrt((double)hd);
                    mx = sc[j] > mx ? sc[j] : mx;
                }
                for (int j = 0; j <= i; j++)
                    sum += exp(sc[j] - mx);
                for (int e = 0; e < hd; e++) {
                    double o = 0.0;
                    for (int j = 0; j <= i; j++)
                        o += exp(sc[j] - mx) / sum * c->v[kv + (size_t)j * hd + e];
                    loss += o * c->r[((size_t)b * T + i) * H * hd + (size_t)h * hd + e];
                }
            }
    return loss;
}

START_TEST(test_attention_fused_grad)
{
    const attn_shape s = fd_shapes[_i];
    ck_assert_int_le(s.T, 32);
    const size_t nq = shape_nq(&s), nk = shape_nk(&s), n = 2 * nq + 2 * nk;
    float *in = malloc(sizeof(float) * n), *out = malloc(sizeof(float) * n);
    double *x = malloc(sizeof(double) * n);
    ck_assert(in && out && x);
    tu_rng rng = {57 + (uint64_t)_i};
    tu_fill(in, (long)(nq + 2 * nk), 1.5, &rng);
    tu_fill(in + nq + 2 * nk, (long)nq, 1.0, &rng);
    tu_to_double(x, in, (long)n);
    fused_ctx c = {s, x, x + nq, x + nq + nk, x + nq + 2 * nk};
    const double want = fused_loss(&c);
    lattice_backend *be = tu_backend("ref", 2);
    int ran = 0;
    for (int t = 0; t < N_FLASH_ISAS; t++) {
        if (lattice_backend_set_attention_kernel(be, lattice__attn_isa_name(flash_isas[t])) !=
            LATTICE_OK)
            continue;
        attn_path_run(be, &s, LATTICE_ATTN_FUSED, in, out);
        ck_assert_int_eq(lattice_backend_set_attention_kernel(be, "auto"), LATTICE_OK);
        double fwd = 0.0;
        for (size_t j = 0; j < nq; j++)
            fwd += (double)out[j] * in[nq + 2 * nk + j];
        ck_assert_double_eq_tol(fwd, want, 1e-4);
        tu_fd_input fd[] = {{"q", c.q, out + nq, (long)nq},
                            {"k", c.k, out + 2 * nq, (long)nk},
                            {"v", c.v, out + 2 * nq + nk, (long)nk}};
        tu_fd_check(fused_loss, &c, fd, 3, 1e-5, 1e-4);
        ran++;
    }
    ck_assert_int_ge(ran, 1);
    lattice_backend_destroy(be);
    free(in);
    free(out);
    free(x);
}
END_TEST

/* The instance choice: the portable build always runs, AUTO is the CPU's
 * best, an instance the CPU lacks resolves to it, and a head width the
 * kernels do not take is refused by the forced path. */
START_TEST(test_attention_flash_isa_choice)
{
    const int chosen = lattice__attn_isa_resolve(LATTICE_ATTN_ISA_AUTO);
    ck_assert(lattice__attn_isa_supported(chosen));
    ck_assert(lattice__attn_isa_supported(LATTICE_ATTN_ISA_PORTABLE));
    for (int t = 0; t < N_FLASH_ISAS; t++) {
        const int ok = lattice__attn_isa_supported(flash_isas[t]);
        ck_assert_int_eq(lattice__attn_isa_resolve(flash_isas[t]), ok ? flash_isas[t] : chosen);
    }
    ck_assert_int_eq(lattice__attn_isa_resolve(99), chosen);
    ck_assert_str_eq(lattice__attn_isa_name(LATTICE_ATTN_ISA_AVX2), "avx2");
    lattice_backend *be = tu_backend("ref", 1);
    float x[4 * 12] = {0}, p[16] = {0};
    const float *pa[2];
    float *pc[1];
    lattice_attn_ptrs ptrs = {pa, pa + 1, pc, NULL};
    lattice_attn_dims d = {1, 4, 1, 1, 12, 0, LATTICE_ATTN_FUSED, 0};
    ck_assert_int_eq(lattice__attention_forward(be, x, p, x, x, x, &d, &ptrs),
                     LATTICE_ERR_UNSUPPORTED);
    d.path = LATTICE_ATTN_AUTO; /* the GEMM path takes it */
    ck_assert_int_eq(lattice__attention_forward(be, x, p, x, x, x, &d, &ptrs), LATTICE_OK);
    lattice_backend_destroy(be);
}
END_TEST

/* ---- the norm with its residual join fused in -------------------------------- */

/* lattice__norm_join_forward against its twin (lattice__axpby, then
 * lattice__norm_forward, then lattice__axpby for a residual after the norm),
 * RMS and LayerNorm, for each join: x + y into the norm (pre), a x + y (post,
 * a = 0.7), x + Norm(y) (peri); 1 and 2 threads give the same bits. */
START_TEST(test_norm_join_vs_twin)
{
    enum { N = 37, C = 24 };
    const int layer = _i % 2, join = _i / 2;
    static float x[N * C], y[N * C], w[C], b[C];
    static float sum[N * C], out[N * C], mean[N], rstd[N];
    static float tsum[N * C], tout[N * C], tmean[N], trstd[N], sum2[N * C], out2[N * C];
    static float mean2[N], rstd2[N];
    tu_rng rng = {400 + (uint64_t)_i};
    tu_fill(x, N * C, 2.0, &rng);
    tu_fill(y, N * C, 1.5, &rng);
    tu_fill(w, C, 1.0, &rng);
    tu_fill(b, C, 0.5, &rng);
    const float xa = join == 1 ? 0.7f : 1.0f;
    const float *jx = join < 2 ? x : NULL, *res = join == 2 ? x : NULL;
    memcpy(sum, y, sizeof y);
    memcpy(sum2, y, sizeof y);
    lattice__norm_join_forward(layer, out, mean, rstd, sum, jx, xa, res, w, b, 1e-5f, N, C, 1);
    lattice__norm_join_forward(layer, out2, mean2, rstd2, sum2, jx, xa, res, w, b, 1e-5f, N, C, 2);
    ck_assert(memcmp(out, out2, sizeof out) == 0 && memcmp(sum, sum2, sizeof sum) == 0);
    ck_assert(memcmp(rstd, rstd2, sizeof rstd) == 0);
    /* the twin */
    memcpy(tsum, y, sizeof y);
    if (jx) {
        float ax[N * C];
        for (int j = 0; j < N * C; j++)
            ax[j] = xa * x[j];
        lattice__axpby(tsum, 1.0f, ax, N * C, 1);
    }
    lattice__norm_forward(layer, tout, tmean, trstd, tsum, w, b, 1e-5f, N, C, 1);
    if (res)
        lattice__axpby(tout, 1.0f, res, N * C, 1);
    for (int j = 0; j < N * C; j++) {
        ck_assert_float_eq_tol(sum[j], tsum[j], 1e-6f * (1.0f + fabsf(tsum[j])));
        ck_assert_float_eq_tol(out[j], tout[j], 1e-6f * (1.0f + fabsf(tout[j])));
    }
    for (int i = 0; i < N; i++) {
        ck_assert_float_eq_tol(rstd[i], trstd[i], 1e-6f * trstd[i]);
        if (layer)
            ck_assert_float_eq_tol(mean[i], tmean[i], 1e-6f * (1.0f + fabsf(tmean[i])));
    }
}
END_TEST

/* ---- SwiGLU ------------------------------------------------------------------ */

enum { SN = 4, SF = 5 };
typedef struct swiglu_ctx {
    double *gu, *r;
} swiglu_ctx;

static double swiglu_loss(void *p)
{
    swiglu_ctx *c = p;
    double loss = 0.0;
    for (int i = 0; i < SN; i++)
        for (int j = 0; j < SF; j++) {
            double g = c->gu[i * 2 * SF + j], u = c->gu[i * 2 * SF + SF + j];
            loss += g / (1.0 + exp(-g)) * u * c->r[i * SF + j];
        }
    return loss;
}

START_TEST(test_swiglu_grad)
{
    tu_rng rng = {51};
    float gu[SN * 2 * SF], r[SN * SF], s[SN * SF], dgu[SN * 2 * SF];
    tu_fill(gu, SN * 2 * SF, 3.0, &rng);
    tu_fill(r, SN * SF, 1.0, &rng);
    lattice__swiglu_forward(s, gu, SN, SF, 2);
    lattice__swiglu_backward(dgu, r, gu, 0, SN, SF, 2);
    double gud[SN * 2 * SF], rd[SN * SF];
    tu_to_double(gud, gu, SN * 2 * SF);
    tu_to_double(rd, r, SN * SF);
    swiglu_ctx c = {gud, rd};
    tu_fd_input in[] = {{"gate_up", gud, dgu, SN * 2 * SF}};
    tu_fd_check(swiglu_loss, &c, in, 1, 1e-5, 1e-4);
    /* keep_s: the same gradient, and ds turned into the forward's s, bit for bit */
    float r2[SN * SF], dgu2[SN * 2 * SF];
    memcpy(r2, r, sizeof r);
    lattice__swiglu_backward(dgu2, r2, gu, 1, SN, SF, 2);
    ck_assert_mem_eq(dgu2, dgu, sizeof dgu);
    ck_assert_mem_eq(r2, s, sizeof s);
}
END_TEST

/* ---- embedding ------------------------------------------------------------- */

START_TEST(test_embedding_grad)
{
    enum { V = 5, C = 3, N = 7 };
    const int32_t tok[N] = {0, 3, 3, 4, 1, 3, 0};
    tu_rng rng = {61};
    float wte[V * C], out[N * C], r[N * C], dw[V * C] = {0};
    tu_fill(wte, V * C, 1.0, &rng);
    tu_fill(r, N * C, 1.0, &rng);
    lattice__embedding_forward(out, tok, wte, N, C, 2);
    for (int i = 0; i < N; i++)
        for (int j = 0; j < C; j++)
            ck_assert_float_eq(out[i * C + j], wte[tok[i] * C + j]);
    lattice__embedding_backward(dw, r, tok, N, C, 2);
    /* d/dwte[v, j] of sum(out * r) is the sum of r over the rows holding v */
    for (int vv = 0; vv < V; vv++)
        for (int j = 0; j < C; j++) {
            double want = 0.0;
            for (int i = 0; i < N; i++)
                want += tok[i] == vv ? r[i * C + j] : 0.0;
            ck_assert_double_eq_tol(dw[vv * C + j], want, 1e-6);
        }
}
END_TEST

/* ---- LM head + softmax cross-entropy ---------------------------------------- */

enum { HN = 6, HD = 4, HV = 7 };
static const int32_t head_targets[HN] = {1, 6, 0, 3, 3, 2};
static const uint8_t head_mask[HN] = {1, 1, 0, 1, 1, 1};

typedef struct head_ctx {
    double *x, *w;
} head_ctx;

static double head_loss(void *p)
{
    head_ctx *c = p;
    double total = 0.0;
    int cnt = 0;
    for (int i = 0; i < HN; i++) {
        if (!head_mask[i])
            continue;
        double z[HV], mx = -1e300, sum = 0.0;
        for (int v = 0; v < HV; v++) {
            z[v] = 0.0;
            for (int j = 0; j < HD; j++)
                z[v] += c->x[i * HD + j] * c->w[v * HD + j];
            mx = z[v] > mx ? z[v] : mx;
        }
        for (int v = 0; v < HV; v++)
            sum += exp(z[v] - mx);
        total += mx + log(sum) - z[head_targets[i]];
        cnt++;
    }
    return total / cnt;
}

START_TEST(test_head_cross_entropy_grad)
{
    lattice_backend *be = tu_backend(tu_backend_name(_i), 2);
    tu_rng rng = {71};
    float x[HN * HD], w[HV * HD], z[HN * HV], dz[HN * HV], dx[HN * HD], dw[HV * HD];
    double rowloss[HN];
    int64_t cnt = 0;
    tu_fill(x, HN * HD, 2.0, &rng);
    tu_fill(w, HV * HD, 1.0, &rng);
    ck_assert_int_eq(lattice__gemm(be, 0, 1, HN, HV, HD, 1.0f, x, HD, w, HD, 0.0f, z, HV),
                     LATTICE_OK);
    double loss = lattice__cross_entropy(dz, z, head_targets, head_mask, HN, HV, rowloss, &cnt, 2);
    ck_assert_int_eq(cnt, 5);
    for (int v = 0; v < HV; v++)
        ck_assert_float_eq(dz[2 * HV + v], 0.0f); /* a masked row has no gradient */
    ck_assert_int_eq(lattice__gemm(be, 0, 0, HN, HD, HV, 1.0f, dz, HV, w, HD, 0.0f, dx, HD),
                     LATTICE_OK);
    ck_assert_int_eq(lattice__gemm(be, 1, 0, HV, HD, HN, 1.0f, dz, HV, x, HD, 0.0f, dw, HD),
                     LATTICE_OK);
    double xd[HN * HD], wd[HV * HD];
    tu_to_double(xd, x, HN * HD);
    tu_to_double(wd, w, HV * HD);
    head_ctx c = {xd, wd};
    ck_assert_double_eq_tol(loss, head_loss(&c), 1e-5);
    tu_fd_input in[] = {{"x", xd, dx, HN * HD}, {"lm_head", wd, dw, HV * HD}};
    tu_fd_check(head_loss, &c, in, 2, 1e-6, 1e-4);
    lattice_backend_destroy(be);
}
END_TEST

START_TEST(test_cross_entropy_identities)
{
    /* Uniform logits give log(V); a fully masked batch gives 0 and no gradient. */
    enum { N = 3, V = 8 };
    float z[N * V], dz[N * V];
    double rowloss[N];
    int32_t t[N] = {0, 5, 7};
    uint8_t none[N] = {0, 0, 0};
    int64_t cnt;
    for (int i = 0; i < N * V; i++)
        z[i] = 0.25f;
    double l = lattice__cross_entropy(dz, z, t, NULL, N, V, rowloss, &cnt, 1);
    ck_assert_double_eq_tol(l, log(8.0), 1e-6);
    ck_assert_int_eq(cnt, N);
    l = lattice__cross_entropy(dz, z, t, none, N, V, rowloss, &cnt, 1);
    ck_assert_double_eq(l, 0.0);
    ck_assert_int_eq(cnt, 0);
    for (int i = 0; i < N * V; i++)
        ck_assert_float_eq(dz[i], 0.0f);
}
END_TEST

/* ---- GEMM: BLIS against the reference on every transposition ------------------ */

START_TEST(test_sgemm_blis_vs_ref)
{
    const int ta = _i & 1, tb = (_i >> 1) & 1, beta_one = (_i >> 2) & 1;
    enum { M = 37, Nn = 29, K = 23, LD = 41 };
    tu_rng rng = {81 + _i};
    static float a[LD * LD], b[LD * LD], c0[M * LD], c1[M * LD];
    tu_fill(a, LD * LD, 1.0, &rng);
    tu_fill(b, LD * LD, 1.0, &rng);
    tu_fill(c0, M * LD, 1.0, &rng);
    if (!beta_one)
        for (int i = 0; i < M * LD; i++)
            c0[i] = NAN; /* beta 0 must ignore whatever C held */
    memcpy(c1, c0, sizeof c0);
    lattice_backend *ref = tu_backend("ref", 1), *blis = tu_backend("blis", 2);
    float beta = beta_one ? 1.0f : 0.0f;
    ck_assert_int_eq(lattice_backend_sgemm(ref, ta, tb, M, Nn, K, 0.5f, a, LD, b, LD, beta, c0, LD),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_backend_sgemm(blis, ta, tb, M, Nn, K, 0.5f, a, LD, b, LD, beta, c1, LD),
                     LATTICE_OK);
    for (int i = 0; i < M; i++)
        for (int j = 0; j < Nn; j++)
            ck_assert_float_eq_tol(c0[i * LD + j], c1[i * LD + j], 2e-5f);
    lattice_backend_destroy(ref);
    lattice_backend_destroy(blis);
}
END_TEST

static Suite *ops_suite(void)
{
    Suite *s = suite_create("ops");
    TCase *tc = tcase_create("gradients");
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_norm_grad, 0, 2);
    tcase_add_loop_test(tc, test_qkv_rope_grad, 0, 2);
    tcase_add_loop_test(tc, test_attention_grad, 0, tu_n_backends());
    tcase_add_loop_test(tc, test_attention_blocked_vs_whole, 0, tu_n_backends());
    tcase_add_loop_test(tc, test_attention_fused_vs_gemm, 0, tu_n_backends());
    tcase_add_loop_test(tc, test_attention_fused_widths, 0, 6);
    tcase_add_loop_test(tc, test_attention_fused_grad, 0, 3);
    tcase_add_loop_test(tc, test_attention_flash_vs_reference, 0, 36);
    tcase_add_test(tc, test_attention_flash_isa_choice);
    tcase_add_loop_test(tc, test_norm_join_vs_twin, 0, 6);
    tcase_add_test(tc, test_expf);
    tcase_add_test(tc, test_swiglu_grad);
    tcase_add_test(tc, test_embedding_grad);
    tcase_add_loop_test(tc, test_head_cross_entropy_grad, 0, tu_n_backends());
    tcase_add_test(tc, test_cross_entropy_identities);
    suite_add_tcase(s, tc);
    if (lattice_backend_has_blis()) {
        TCase *tb = tcase_create("blis");
        tcase_add_test(tb, test_attention_blis_vs_ref);
        tcase_add_loop_test(tb, test_sgemm_blis_vs_ref, 0, 8);
        suite_add_tcase(s, tb);
    }
    return s;
}

int main(void)
{
    return tu_run(ops_suite());
}
