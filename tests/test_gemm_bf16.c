/* The bf16 GEMM precision (lattice_backend_set_gemm_precision): a GEMM
 * against an oracle that rounds the operands to bf16 itself and sums in
 * double, the same bits on 1 and 2 threads, the refusals, and a few training
 * steps against fp32's. Where bf16 cannot run (another CPU, oneDNN capped or
 * absent) the refusals still run and the program exits 77, which meson
 * reports as a skip, saying why; on a CPU that has AVX512-BF16 or AMX and an
 * uncapped oneDNN, bf16 must be available (test_available_where_expected). */
#include "testutil.h"

#include "backend_impl.h"
#include "backend_onednn_bf16.h"

/* The test's own rounding to bf16 (8 significant bits, to nearest, ties to
 * even: nearbyint in the default rounding mode), in double, independent of
 * the library's bit manipulation. NaN and infinities pass through frexp. */
static double bf16_round(float x)
{
    if (isnan(x) || isinf(x) || x == 0.0f)
        return x;
    int e;
    const double m = frexp((double)x, &e); /* |m| in [0.5, 1) */
    return ldexp(nearbyint(ldexp(m, 8)), e - 8);
}

/* Element (i, j) of op(X) for a row-major X of leading dimension ld. */
static float at(const float *x, int trans, int i, int j, int ld)
{
    return trans ? x[(long)j * ld + i] : x[(long)i * ld + j];
}

/* C = alpha op(A) op(B) + beta C in double, the operands rounded to bf16 or
 * not; bound[] gets alpha sum |a'||b'| per element, the scale of fp32
 * accumulation's error. */
static void oracle(int ta, int tb, int m, int n, int k, float alpha, const float *a, int lda,
                   const float *b, int ldb, float beta, const float *c, int ldc, int round,
                   double *out, double *bound)
{
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++) {
            double s = 0, sa = 0;
            for (int p = 0; p < k; p++) {
                const double x = round ? bf16_round(at(a, ta, i, p, lda)) : at(a, ta, i, p, lda);
                const double y = round ? bf16_round(at(b, tb, p, j, ldb)) : at(b, tb, p, j, ldb);
                s += x * y;
                sa += fabs(x * y);
            }
            const double prior = beta == 0.0f ? 0.0 : (double)beta * c[(long)i * ldc + j];
            out[(long)i * n + j] = alpha * s + prior;
            if (bound)
                bound[(long)i * n + j] = fabs(alpha) * sa + fabs(prior);
        }
}

/* The onednn backend on threads threads in bf16, or NULL where bf16 is refused. */
static lattice_backend *bf16_backend(int threads)
{
    lattice_backend *be = NULL;
    if (lattice_backend_create("onednn", &be) != LATTICE_OK)
        return NULL;
    if (lattice_backend_set_gemm_precision(be, "bf16") != LATTICE_OK) {
        lattice_backend_destroy(be);
        return NULL;
    }
    ck_assert_int_eq(lattice_backend_set_threads(be, threads), LATTICE_OK);
    ck_assert_str_eq(lattice_backend_get_gemm_precision(be), "bf16");
    return be;
}

/* Why bf16 cannot run here ("" where it can). */
static char why_not[LATTICE_ERRMSG_SIZE];

/* Outside a test too (no assertions). */
static int bf16_here(void)
{
    lattice_backend *be = NULL;
    if (lattice_backend_create("onednn", &be) != LATTICE_OK) {
        snprintf(why_not, sizeof why_not, "%s", lattice_last_error());
        return 0;
    }
    const lattice_status st = lattice_backend_set_gemm_precision(be, "bf16");
    snprintf(why_not, sizeof why_not, "%s", st == LATTICE_OK ? "" : lattice_last_error());
    lattice_backend_destroy(be);
    return st == LATTICE_OK;
}

/* ---- one GEMM against the oracle ------------------------------------------------ */

/* Loop index: bits 0-1 the transposes, bit 2 beta (0 over NaN, or -0.75),
 * bits 3-4 the shape (odd, a row, a column, k = 1). Every element within
 * fp32 accumulation's error of the bf16 oracle, and, where the operands'
 * low mantissa bits are set, far from the unrounded product (the rounding
 * took effect); beyond n, C untouched. */
START_TEST(test_bf16_gemm_vs_oracle)
{
    const int ta = _i & 1, tb = (_i >> 1) & 1, with_beta = (_i >> 2) & 1, shape = _i >> 3;
    static const int shapes[4][3] = {{37, 29, 23}, {1, 45, 67}, {53, 1, 31}, {19, 21, 1}};
    const int m = shapes[shape][0], n = shapes[shape][1], k = shapes[shape][2], LD = 71;
    tu_rng rng = {700 + _i};
    static float a[71 * 71], b[71 * 71], c[71 * 71], c0[71 * 71];
    static double want[71 * 71], bound[71 * 71], exact[71 * 71];
    tu_fill(a, LD * LD, 1.0, &rng);
    tu_fill(b, LD * LD, 1.0, &rng);
    tu_fill(c, LD * LD, 1.0, &rng);
    if (!with_beta)
        for (int i = 0; i < LD * LD; i++)
            c[i] = NAN;
    memcpy(c0, c, sizeof c);
    const float alpha = 0.5f, beta = with_beta ? -0.75f : 0.0f;
    oracle(ta, tb, m, n, k, alpha, a, LD, b, LD, beta, c, LD, 1, want, bound);
    oracle(ta, tb, m, n, k, alpha, a, LD, b, LD, beta, c, LD, 0, exact, NULL);
    lattice_backend *be = bf16_backend(1);
    ck_assert_ptr_nonnull(be);
    ck_assert_int_eq(lattice_backend_sgemm(be, ta, tb, m, n, k, alpha, a, LD, b, LD, beta, c, LD),
                     LATTICE_OK);
    double far = 0;
    for (int i = 0; i < m; i++) {
        for (int j = 0; j < n; j++) {
            const double got = c[i * LD + j], w = want[(long)i * n + j];
            const double tol = (k + 2) * ldexp(1.0, -23) * bound[(long)i * n + j] + 1e-30;
            ck_assert_msg(fabs(got - w) <= tol, "C[%d,%d] = %.9g, the bf16 oracle %.9g (tol %.3g)",
                          i, j, got, w, tol);
            const double off = fabs(got - exact[(long)i * n + j]) / (bound[(long)i * n + j] + 1e-30);
            far = off > far ? off : far;
        }
        for (int j = n; j < LD; j++)
            ck_assert(memcmp(&c[i * LD + j], &c0[i * LD + j], sizeof(float)) == 0);
    }
    /* bf16 keeps 8 significant bits: the unrounded product is ~2^-9 away,
     * many times fp32's error */
    ck_assert_msg(far > 64 * (k + 2) * ldexp(1.0, -23),
                  "bf16 within %.3g of the unrounded product: the operands were not rounded", far);
    lattice_backend_destroy(be);
}
END_TEST

/* A NaN whose only set mantissa bits are low stays a NaN (truncating it
 * would make an infinity); a value that rounds up carries into the exponent. */
START_TEST(test_bf16_nan_and_carry)
{
    lattice_backend *be = bf16_backend(1);
    ck_assert_ptr_nonnull(be);
    const uint32_t nan_low = 0x7f800001u;
    float a[2 * 3] = {1, 2, 3, 1, 1, 1}, b[3 * 2] = {1, 1, 1, 1, 1, 1}, c[2 * 2];
    memcpy(&a[1], &nan_low, sizeof nan_low);
    a[3] = nextafterf(2.0f, 0.0f); /* 1.11..1b x 2^0: rounds up to 2 */
    ck_assert_int_eq(lattice_backend_sgemm(be, 0, 0, 2, 2, 3, 1.0f, a, 3, b, 2, 0.0f, c, 2),
                     LATTICE_OK);
    ck_assert_msg(isnan(c[0]) && isnan(c[1]), "row 0 has a NaN in A: %g %g", c[0], c[1]);
    ck_assert_float_eq(c[2], 4.0f);
    ck_assert_float_eq(c[3], 4.0f);
    lattice_backend_destroy(be);
}
END_TEST

/* A batch (the attention heads' path) through the same slot: each problem the oracle's. */
START_TEST(test_bf16_batched_vs_oracle)
{
    enum { COUNT = 5, M = 17, N = 13, K = 29 };
    tu_rng rng = {77};
    static float a[COUNT][M * K], b[COUNT][N * K], c[COUNT][M * N];
    static double want[M * N], bound[M * N];
    const float *pa[COUNT], *pb[COUNT];
    float *pc[COUNT];
    for (int i = 0; i < COUNT; i++) {
        tu_fill(a[i], M * K, 1.0, &rng);
        tu_fill(b[i], N * K, 1.0, &rng);
        pa[i] = a[i], pb[i] = b[i], pc[i] = c[i];
    }
    lattice_backend *be = bf16_backend(2);
    ck_assert_ptr_nonnull(be);
    ck_assert_int_eq(lattice__gemm_batched(be, 0, 1, M, N, K, 1.0f, pa, K, pb, K, 0.0f, pc, N,
                                           COUNT),
                     LATTICE_OK);
    for (int i = 0; i < COUNT; i++) {
        oracle(0, 1, M, N, K, 1.0f, a[i], K, b[i], K, 0.0f, c[i], N, 1, want, bound);
        for (int e = 0; e < M * N; e++)
            ck_assert_msg(fabs(c[i][e] - want[e]) <= (K + 2) * ldexp(1.0, -23) * bound[e],
                          "problem %d element %d: %.9g against %.9g", i, e, c[i][e], want[e]);
    }
    lattice_backend_destroy(be);
}
END_TEST

/* ---- threads ------------------------------------------------------------------- */

/* A GEMM big enough to be split (by rows, then by columns, with each
 * transposition): the same bits on 1 and 2 threads. Loop index: bits 0-1
 * the transposes, bit 2 the wider side (m, or n with a longer k). */
START_TEST(test_bf16_same_bits_any_threads)
{
    const int ta = _i & 1, tb = (_i >> 1) & 1, wide_n = (_i >> 2) & 1;
    const int m = wide_n ? 67 : 301, n = wide_n ? 333 : 75, k = wide_n ? 1031 : 259;
    tu_rng rng = {900 + _i};
    float *a = malloc(sizeof(float) * m * k), *b = malloc(sizeof(float) * k * n);
    float *c1 = malloc(sizeof(float) * m * n), *c2 = malloc(sizeof(float) * m * n);
    ck_assert(a && b && c1 && c2);
    tu_fill(a, (long)m * k, 1.0, &rng);
    tu_fill(b, (long)k * n, 1.0, &rng);
    tu_fill(c1, (long)m * n, 1.0, &rng);
    memcpy(c2, c1, sizeof(float) * m * n);
    lattice_backend *one = bf16_backend(1), *two = bf16_backend(2);
    ck_assert(one && two);
    const int lda = ta ? m : k, ldb = tb ? k : n;
    ck_assert_int_eq(lattice_backend_sgemm(one, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.5f, c1, n),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_backend_sgemm(two, ta, tb, m, n, k, 1.0f, a, lda, b, ldb, 0.5f, c2, n),
                     LATTICE_OK);
    long differ = 0;
    for (long i = 0; i < (long)m * n; i++)
        differ += memcmp(&c1[i], &c2[i], sizeof(float)) != 0;
    ck_assert_msg(differ == 0, "%ld of %d elements differ between 1 and 2 threads", differ, m * n);
    lattice_backend_destroy(one);
    lattice_backend_destroy(two);
    free(a), free(b), free(c1), free(c2);
}
END_TEST

/* ---- the primitive cache -------------------------------------------------------- */

/* One GEMM of m x n x k (NN, lda k, ldb n, ldc n) against the oracle. */
static void check_one(lattice_backend *be, int m, int n, int k, float alpha, float beta, int seed)
{
    tu_rng rng = {seed};
    float a[8 * 40], b[40 * 8], c[8 * 8];
    double want[8 * 8], bound[8 * 8];
    tu_fill(a, m * k, 1.0, &rng);
    tu_fill(b, k * n, 1.0, &rng);
    tu_fill(c, m * n, 1.0, &rng);
    oracle(0, 0, m, n, k, alpha, a, k, b, n, beta, c, n, 1, want, bound);
    ck_assert_int_eq(lattice_backend_sgemm(be, 0, 0, m, n, k, alpha, a, k, b, n, beta, c, n),
                     LATTICE_OK);
    for (int e = 0; e < m * n; e++)
        ck_assert_msg(fabs(c[e] - want[e]) <= (k + 2) * ldexp(1.0, -23) * bound[e] + 1e-30,
                      "%dx%dx%d alpha %g beta %g, element %d: %.9g against %.9g", m, n, k,
                      (double)alpha, (double)beta, e, c[e], want[e]);
}

/* A primitive per shape, alpha and beta: the same call again finds its
 * primitive, another alpha or beta makes its own (each right: a cache that
 * matched on the shape alone would scale by the first call's); switching to
 * fp32 frees the cache. */
START_TEST(test_bf16_cache_keys)
{
    lattice_backend *be = bf16_backend(1);
    ck_assert_ptr_nonnull(be);
    int cached;
    long hits, misses;
    check_one(be, 7, 5, 33, 0.5f, 0.0f, 1);
    check_one(be, 7, 5, 33, 2.0f, -0.75f, 2);
    check_one(be, 7, 5, 33, 0.5f, 1.0f, 3);
    check_one(be, 7, 5, 33, 0.5f, 0.0f, 4);
    check_one(be, 7, 5, 34, 0.5f, 0.0f, 5);
    ck_assert_int_eq(lattice__onednn_bf16_counts(be, &cached, &hits, &misses), 0);
    ck_assert_int_eq(cached, 4);
    ck_assert_int_eq(hits, 1);
    ck_assert_int_eq(misses, 4);
    ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "fp32"), LATTICE_OK);
    ck_assert_int_eq(lattice__onednn_bf16_counts(be, &cached, &hits, &misses), -1);
    ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "bf16"), LATTICE_OK);
    check_one(be, 7, 5, 33, 0.5f, 0.0f, 6);
    lattice_backend_destroy(be);
}
END_TEST

/* Past the cache's bound, calls still run (a primitive made and freed in
 * each) and the cache holds its bound. */
START_TEST(test_bf16_cache_bound)
{
    lattice_backend *be = bf16_backend(1);
    ck_assert_ptr_nonnull(be);
    const int extra = 3;
    for (int i = 0; i < LATTICE__BF16MM_CAP + extra; i++)
        check_one(be, 1 + i % 8, 1 + i / 8 % 8, 1 + i / 64 % 8 + 8 * (i / 512), 1.0f, 0.0f, i);
    int cached;
    long hits, misses;
    ck_assert_int_eq(lattice__onednn_bf16_counts(be, &cached, &hits, &misses), 0);
    ck_assert_int_eq(cached, LATTICE__BF16MM_CAP);
    ck_assert_int_eq(misses, LATTICE__BF16MM_CAP + extra);
    check_one(be, 1 + (LATTICE__BF16MM_CAP + 1) % 8, 1 + (LATTICE__BF16MM_CAP + 1) / 8 % 8,
              1 + (LATTICE__BF16MM_CAP + 1) / 64 % 8, 1.0f, 0.0f, 9);
    ck_assert_int_eq(lattice__onednn_bf16_counts(be, &cached, &hits, &misses), 0);
    ck_assert_int_eq(misses, LATTICE__BF16MM_CAP + extra + 1); /* not kept: made again */
    lattice_backend_destroy(be);
}
END_TEST

/* ---- a model ------------------------------------------------------------------- */

enum { VOCAB = 64, B = 2, T = 32, STEPS = 4 };

typedef struct trained {
    float loss[STEPS];
    float *logits; /* after the last step's forward */
    float *grads;  /* every tensor's gradient, in order, after the first step's backward */
    long n_grads, sizes[64];
    int n_tensors;
} trained;

/* STEPS steps of AdamW on a small model (every op split over threads
 * threads) on the backend, bf16 or not. */
static trained train(lattice_backend *be, int threads)
{
    ck_assert_int_eq(lattice_backend_set_threads(be, threads), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_parallel(be, LATTICE_BACKEND_PARALLEL_OPS), LATTICE_OK);
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = VOCAB;
    p.d_model = 128;
    p.n_layers = p.n_active_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.head_dim = 32;
    p.d_ff = 256;
    p.max_batch = B;
    p.max_seq = T;
    p.seed = 11;
    lattice_model *m = tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f,
                                &p);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f;
    op.warmup_steps = 0;
    op.total_steps = STEPS;
    lattice_optim *o;
    ck_assert_int_eq(lattice_optim_create(m, &op, &o), LATTICE_OK);
    int32_t tok[B * T], tgt[B * T];
    for (int i = 0; i < B * T; i++) {
        tok[i] = (i * 29 + 3) % VOCAB;
        tgt[i] = (i * 29 + 32) % VOCAB;
    }
    trained r;
    memset(&r, 0, sizeof r);
    r.n_tensors = lattice_model_get_n_tensors(m);
    ck_assert_int_le(r.n_tensors, 64);
    for (int i = 0; i < r.n_tensors; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        r.sizes[i] = (long)(ti.shape[0] * ti.shape[1]);
        r.n_grads += r.sizes[i];
    }
    r.grads = malloc(sizeof(float) * (size_t)r.n_grads);
    r.logits = malloc(sizeof(float) * B * T * VOCAB);
    ck_assert(r.grads && r.logits);
    for (int s = 0; s < STEPS; s++) {
        ck_assert_int_eq(lattice_model_forward(m, tok, B, T), LATTICE_OK);
        ck_assert_int_eq(lattice_model_cross_entropy(m, tgt, NULL, &r.loss[s], NULL), LATTICE_OK);
        ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
        for (long i = 0, at = 0; s == 0 && i < r.n_tensors; at += r.sizes[i++]) {
            lattice_model_tensor_info ti;
            lattice_model_get_tensor(m, (int)i, &ti);
            memcpy(r.grads + at, ti.grad, sizeof(float) * (size_t)r.sizes[i]);
        }
        ck_assert_int_eq(lattice_optim_step(o, NULL), LATTICE_OK);
    }
    memcpy(r.logits, lattice_model_get_logits(m), sizeof(float) * B * T * VOCAB);
    lattice_optim_destroy(o);
    lattice_model_destroy(m);
    return r;
}

static void trained_free(trained *r)
{
    free(r->logits);
    free(r->grads);
}

/* A few steps in bf16 follow fp32's within a loose tolerance (the loss to
 * 1%, the logits to 0.05) without being fp32's: the losses and logits
 * differ, and so does every tensor's first gradient (each comes through
 * a GEMM in the backward). The same bits on 1 and 2 threads. */
START_TEST(test_bf16_training_follows_fp32)
{
    lattice_backend *fp = NULL;
    ck_assert_int_eq(lattice_backend_create("onednn", &fp), LATTICE_OK);
    lattice_backend *half = bf16_backend(1);
    ck_assert_ptr_nonnull(half);
    trained f = train(fp, 1), h = train(half, 1), h2 = train(half, 2);
    int same_loss = 1;
    for (int s = 0; s < STEPS; s++) {
        ck_assert_msg(fabsf(h.loss[s] - f.loss[s]) <= 0.01f * f.loss[s],
                      "step %d: loss %.6f in bf16, %.6f in fp32", s, h.loss[s], f.loss[s]);
        same_loss &= h.loss[s] == f.loss[s];
    }
    ck_assert_msg(!same_loss, "bf16's losses are fp32's: the precision did not take effect");
    ck_assert_msg(f.loss[STEPS - 1] < f.loss[0] && h.loss[STEPS - 1] < h.loss[0],
                  "the loss did not fall: %g to %g (fp32), %g to %g (bf16)", f.loss[0],
                  f.loss[STEPS - 1], h.loss[0], h.loss[STEPS - 1]);
    long differ = 0;
    for (int i = 0; i < B * T * VOCAB; i++) {
        ck_assert_msg(fabsf(h.logits[i] - f.logits[i]) <= 0.05f, "logit %d: %g in bf16, %g in fp32",
                      i, h.logits[i], f.logits[i]);
        differ += h.logits[i] != f.logits[i];
    }
    ck_assert_msg(differ > B * T * VOCAB / 2, "only %ld logits differ from fp32's", differ);
    ck_assert_int_eq(memcmp(h.logits, h2.logits, sizeof(float) * B * T * VOCAB), 0);
    ck_assert_int_eq(memcmp(h.grads, h2.grads, sizeof(float) * (size_t)h.n_grads), 0);
    /* every tensor's gradient differs from fp32's somewhere */
    for (long i = 0, at = 0; i < f.n_tensors; at += f.sizes[i++])
        ck_assert_msg(memcmp(h.grads + at, f.grads + at, sizeof(float) * (size_t)f.sizes[i]) != 0,
                      "tensor %ld's gradient in bf16 is fp32's", i);
    trained_free(&f);
    trained_free(&h);
    trained_free(&h2);
    lattice_backend_destroy(fp);
    lattice_backend_destroy(half);
}
END_TEST

/* ---- refusals, everywhere ------------------------------------------------------- */

/* bf16 on every other backend is UNSUPPORTED saying so, the precision still
 * fp32; fp32 is accepted everywhere; unknown names and NULLs are
 * INVALID_ARGUMENT; a failed set leaves the precision as it was. */
START_TEST(test_refusals)
{
    const char *others[] = {"ref", "blis", "openblas"};
    for (int i = 0; i < 3; i++) {
        lattice_backend *be = NULL;
        if (lattice_backend_create(others[i], &be) != LATTICE_OK)
            continue; /* not in this build */
        ck_assert_str_eq(lattice_backend_get_gemm_precision(be), "fp32");
        ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "bf16"), LATTICE_ERR_UNSUPPORTED);
        char want[160];
        snprintf(want, sizeof want, "lattice_backend_set_gemm_precision: bf16 GEMMs run on the "
                 "built-in \"onednn\" backend only (oneDNN's bf16 matmul), not on "
                 "\"%s\"", others[i]);
        ck_assert_str_eq(lattice_last_error(), want);
        ck_assert_str_eq(lattice_backend_get_gemm_precision(be), "fp32");
        ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "fp32"), LATTICE_OK);
        lattice_backend_destroy(be);
    }
    lattice_backend_ops ops;
    lattice_backend_ops_init(&ops);
    lattice_backend *custom = NULL;
    ck_assert_int_eq(lattice_backend_create_custom("onednn", &ops, &custom), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_gemm_precision(custom, "bf16"), LATTICE_ERR_UNSUPPORTED);
    ck_assert_str_eq(lattice_backend_get_gemm_precision(custom), "fp32");
    ck_assert_int_eq(lattice_backend_set_gemm_precision(custom, "fp16"),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_str_eq(lattice_last_error(), "lattice_backend_set_gemm_precision: 'fp16' names no "
                                           "GEMM precision (fp32 or bf16)");
    ck_assert_int_eq(lattice_backend_set_gemm_precision(custom, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "name"));
    ck_assert_int_eq(lattice_backend_set_gemm_precision(NULL, "fp32"), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "backend"));
    ck_assert_str_eq(lattice_backend_get_gemm_precision(NULL), "fp32");
    lattice_backend_destroy(custom);
    lattice_backend *be = bf16_backend(1), *fresh = NULL;
    if (be) { /* where bf16 runs: a refused name leaves it bf16; fp32 gives dnnl_sgemm back */
        ck_assert_int_eq(lattice_backend_create("onednn", &fresh), LATTICE_OK);
        ck_assert(be->ops.sgemm != fresh->ops.sgemm);
        ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "BF16"),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_str_eq(lattice_backend_get_gemm_precision(be), "bf16");
        ck_assert_int_eq(lattice_backend_set_gemm_precision(be, "fp32"), LATTICE_OK);
        ck_assert_str_eq(lattice_backend_get_gemm_precision(be), "fp32");
        ck_assert(be->ops.sgemm == fresh->ops.sgemm);
        lattice_backend_destroy(be);
        lattice_backend_destroy(fresh);
    }
}
END_TEST

/* bf16 runs exactly where the CPU has AVX512-BF16 or AMX, oneDNN is built in
 * and its ISA is not capped; elsewhere the refusal says which of these is missing. */
START_TEST(test_available_where_expected)
{
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    const char *cap = getenv("DNNL_MAX_CPU_ISA");
    const int expect = tu_has_onednn() && (cpu.avx512_bf16 || cpu.amx) && !(cap && *cap);
    if (expect)
        ck_assert_msg(bf16_here(), "bf16 refused on a CPU with AVX512-BF16 or AMX: %s", why_not);
    else if (!bf16_here())
        ck_assert_msg(strstr(why_not, "oneDNN") || strstr(why_not, "AVX512-BF16"),
                      "the refusal does not say why: %s", why_not);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("gemm_bf16");
    TCase *always = tcase_create("refusals");
    tcase_add_test(always, test_refusals);
    tcase_add_test(always, test_available_where_expected);
    suite_add_tcase(s, always);
    const int here = bf16_here();
    if (here) {
        TCase *tc = tcase_create("bf16");
        tcase_set_timeout(tc, 240);
        tcase_add_loop_test(tc, test_bf16_gemm_vs_oracle, 0, 32);
        tcase_add_test(tc, test_bf16_nan_and_carry);
        tcase_add_test(tc, test_bf16_batched_vs_oracle);
        tcase_add_test(tc, test_bf16_cache_keys);
        tcase_add_test(tc, test_bf16_cache_bound);
        tcase_add_loop_test(tc, test_bf16_same_bits_any_threads, 0, 8);
        tcase_add_test(tc, test_bf16_training_follows_fp32);
        suite_add_tcase(s, tc);
    }
    const int rc = tu_run(s);
    if (rc == EXIT_SUCCESS && !here) {
        fprintf(stderr, "gemm-bf16: the bf16 tests skipped: %s\n", why_not);
        return 77; /* meson's skip */
    }
    return rc;
}
