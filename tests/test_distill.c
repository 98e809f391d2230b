/* Distillation losses: gradients against central differences, the exact
 * identities, masking, and top-k against dense. */
#include "testutil.h"

enum { N = 5, V = 7 };
static const int32_t labels[N] = {1, 6, 0, 3, 2};
static const uint8_t mask[N] = {1, 1, 0, 1, 1};

static lattice_distill *make(float alpha, float gamma, float tau, lattice_distill_kl_direction dir)
{
    lattice_distill_params p;
    lattice_distill_params_init(&p);
    p.alpha = alpha;
    p.gamma = gamma;
    p.tau = tau;
    p.direction = dir;
    p.n_threads = 2;
    lattice_distill *d;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_OK);
    return d;
}

/* Double-precision reference of the whole loss from double student logits. */
typedef struct ref_ctx {
    double *z;
    const float *t;
    const int32_t *idx; /* NULL: dense */
    int k;
    double alpha, gamma, tau;
    int reverse;
} ref_ctx;

static double ref_loss(void *p)
{
    ref_ctx *c = p;
    double total = 0.0;
    int cnt = 0;
    for (int i = 0; i < N; i++) {
        if (!mask[i])
            continue;
        cnt++;
        const double *z = c->z + i * V;
        double lq = -1e300, lz = -1e300, q[V], lp_all[V];
        for (int j = 0; j < V; j++) {
            lq = fmax(lq, z[j] / c->tau);
            lz = fmax(lz, z[j]);
        }
        double sq = 0.0, sz = 0.0;
        for (int j = 0; j < V; j++) {
            sq += exp(z[j] / c->tau - lq);
            sz += exp(z[j] - lz);
        }
        lq += log(sq);
        lz += log(sz);
        for (int j = 0; j < V; j++)
            q[j] = z[j] / c->tau - lq; /* log q */
        double kl = 0.0;
        if (c->idx) {
            const float *v = c->t + i * c->k;
            double m = -1e300, s = 0.0;
            for (int e = 0; e < c->k; e++)
                m = fmax(m, v[e] / c->tau);
            for (int e = 0; e < c->k; e++)
                s += exp(v[e] / c->tau - m);
            for (int e = 0; e < c->k; e++) {
                double lp = v[e] / c->tau - m - log(s);
                kl += exp(lp) * (lp - q[c->idx[i * c->k + e]]);
            }
        } else {
            const float *t = c->t + i * V;
            double m = -1e300, s = 0.0;
            for (int j = 0; j < V; j++)
                m = fmax(m, t[j] / c->tau);
            for (int j = 0; j < V; j++)
                s += exp(t[j] / c->tau - m);
            for (int j = 0; j < V; j++)
                lp_all[j] = t[j] / c->tau - m - log(s);
            for (int j = 0; j < V; j++)
                kl += c->reverse ? exp(q[j]) * (q[j] - lp_all[j])
                                 : exp(lp_all[j]) * (lp_all[j] - q[j]);
        }
        double ce = lz - z[labels[i]];
        total += c->alpha * c->tau * c->tau * kl + c->gamma * ce;
    }
    return total / cnt;
}

START_TEST(test_dense_grad)
{
    /* _i: forward or reverse KL, each at tau 1 and tau 2.5, and at the
     * temperatures' edges (0.01 and 100) */
    const int reverse = _i & 1;
    const float tau = _i & 4 ? (_i & 2 ? LATTICE_DISTILL_TAU_MAX : LATTICE_DISTILL_TAU_MIN)
                             : (_i & 2 ? 2.5f : 1.0f);
    tu_rng rng = {3 + _i};
    float z[N * V], t[N * V], dz[N * V];
    tu_fill(z, N * V, 3.0, &rng);
    tu_fill(t, N * V, 3.0, &rng);
    lattice_distill *d = make(0.7f, 0.3f, tau, reverse ? LATTICE_DISTILL_KL_REVERSE : LATTICE_DISTILL_KL_FORWARD);
    lattice_distill_result r;
    ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, mask, N, V, dz, &r), LATTICE_OK);
    ck_assert_int_eq(r.n_counted, 4);
    ck_assert_double_eq_tol(r.loss, (double)0.7f * tau * tau * r.kl + (double)0.3f * r.ce, 1e-12);
    double zd[N * V];
    tu_to_double(zd, z, N * V);
    ref_ctx c = {zd, t, NULL, 0, 0.7f, 0.3f, tau, reverse};
    ck_assert_double_eq_tol(r.loss, ref_loss(&c), 1e-9);
    tu_fd_input in[] = {{"student", zd, dz, N * V}};
    tu_fd_check(ref_loss, &c, in, 1, 1e-7, 1e-5);
    for (int j = 0; j < V; j++)
        ck_assert_float_eq(dz[2 * V + j], 0.0f); /* masked position */
    lattice_distill_destroy(d);
}
END_TEST

START_TEST(test_topk_grad_and_dense_equivalence)
{
    enum { K = 3 };
    tu_rng rng = {17};
    float z[N * V], v[N * K], dz[N * V];
    int32_t idx[N * K];
    tu_fill(z, N * V, 2.0, &rng);
    tu_fill(v, N * K, 2.0, &rng);
    for (int i = 0; i < N; i++)
        for (int e = 0; e < K; e++)
            idx[i * K + e] = (i + 2 * e) % V;
    lattice_distill *d = make(0.7f, 0.3f, 1.5f, LATTICE_DISTILL_KL_FORWARD);
    lattice_distill_result r;
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, K, labels, mask, N, V, dz, &r), LATTICE_OK);
    double zd[N * V];
    tu_to_double(zd, z, N * V);
    ref_ctx c = {zd, v, idx, K, 0.7f, 0.3f, 1.5, 0};
    ck_assert_double_eq_tol(r.loss, ref_loss(&c), 1e-9);
    tu_fd_input in[] = {{"student", zd, dz, N * V}};
    tu_fd_check(ref_loss, &c, in, 1, 1e-7, 1e-5);

    /* k = vocab, in a shuffled order, equals the dense loss */
    float t[N * V], full_v[N * V], dz_dense[N * V], dz_topk[N * V];
    int32_t full_i[N * V];
    tu_fill(t, N * V, 2.0, &rng);
    for (int i = 0; i < N; i++)
        for (int e = 0; e < V; e++) {
            int j = (e * 3 + i) % V; /* 3 is coprime with 7: a permutation */
            full_i[i * V + e] = j;
            full_v[i * V + e] = t[i * V + j];
        }
    lattice_distill_result rd, rk;
    ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, mask, N, V, dz_dense, &rd), LATTICE_OK);
    ck_assert_int_eq(lattice_distill_topk(d, z, full_i, full_v, V, labels, mask, N, V, dz_topk, &rk),
                     LATTICE_OK);
    ck_assert_double_eq_tol(rd.loss, rk.loss, 1e-9);
    ck_assert_double_eq_tol(rd.kl, rk.kl, 1e-9);
    for (int j = 0; j < N * V; j++)
        ck_assert_float_eq_tol(dz_dense[j], dz_topk[j], 1e-7f);
    lattice_distill_destroy(d);
}
END_TEST

START_TEST(test_identities)
{
    tu_rng rng = {23};
    float z[N * V], t[N * V], z2[N * V], dz[N * V];
    tu_fill(z, N * V, 3.0, &rng);
    tu_fill(t, N * V, 3.0, &rng);
    lattice_distill_result r, r2;
    /* KL of equal distributions is exactly 0, in both directions */
    for (int dir = 0; dir < 2; dir++) {
        lattice_distill *d = make(1.0f, 0.0f, 1.7f, (lattice_distill_kl_direction)dir);
        ck_assert_int_eq(lattice_distill_dense(d, z, z, NULL, NULL, N, V, dz, &r), LATTICE_OK);
        ck_assert_double_eq(r.kl, 0.0);
        ck_assert_double_eq(r.ce, 0.0);
        for (int j = 0; j < N * V; j++)
            ck_assert_float_eq_tol(dz[j], 0.0f, 1e-7f);
        lattice_distill_destroy(d);
    }
    /* tau, alpha and gamma scale as the formula says */
    lattice_distill *a = make(0.7f, 0.3f, 2.0f, LATTICE_DISTILL_KL_FORWARD);
    lattice_distill *b = make(1.4f, 0.0f, 2.0f, LATTICE_DISTILL_KL_FORWARD);
    ck_assert_int_eq(lattice_distill_dense(a, z, t, labels, mask, N, V, NULL, &r), LATTICE_OK);
    ck_assert_int_eq(lattice_distill_dense(b, z, t, labels, mask, N, V, NULL, &r2), LATTICE_OK);
    ck_assert_double_eq_tol(r.kl, r2.kl, 1e-12);
    ck_assert_double_eq_tol(r.loss, (double)0.7f * 4.0 * r.kl + (double)0.3f * r.ce, 1e-12);
    ck_assert_double_eq_tol(r2.loss, (double)1.4f * 4.0 * r.kl, 1e-12);
    /* masked positions contribute nothing: change their logits freely */
    memcpy(z2, z, sizeof z);
    for (int j = 0; j < V; j++)
        z2[2 * V + j] = 50.0f * (j % 2);
    ck_assert_int_eq(lattice_distill_dense(a, z2, t, labels, mask, N, V, NULL, &r2), LATTICE_OK);
    ck_assert_double_eq(r.loss, r2.loss);
    /* nothing counted: loss 0, gradient 0 */
    const uint8_t none[N] = {0};
    ck_assert_int_eq(lattice_distill_dense(a, z, t, labels, none, N, V, dz, &r), LATTICE_OK);
    ck_assert_double_eq(r.loss, 0.0);
    ck_assert_int_eq(r.n_counted, 0);
    lattice_distill_destroy(a);
    lattice_distill_destroy(b);
}
END_TEST

START_TEST(test_bad_input)
{
    float z[N * V] = {0}, t[N * V] = {0};
    lattice_distill_result r;
    lattice_distill *d = make(0.7f, 0.3f, 1.0f, LATTICE_DISTILL_KL_FORWARD);
    ck_assert_int_eq(lattice_distill_dense(d, z, t, NULL, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT); /* labels needed when gamma > 0 */
    int32_t bad[N] = {1, 2, 7, 0, 0};
    ck_assert_int_eq(lattice_distill_dense(d, z, t, bad, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_distill_dense(d, z, NULL, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_distill_dense(NULL, z, t, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    t[3] = NAN;
    ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_distill_errmsg(d), "not finite"));
    int32_t idx[N * 2] = {0, 1, 2, 2, 0, 1, 0, 1, 0, 1}; /* position 1 repeats token 2 */
    float v[N * 2] = {0};
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, 2, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    idx[2] = 3;
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, 2, labels, NULL, N, V, NULL, &r), LATTICE_OK);
    idx[0] = V;
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, 2, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    lattice_distill_destroy(d);
    d = make(0.7f, 0.3f, 1.0f, LATTICE_DISTILL_KL_REVERSE);
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, 2, labels, NULL, N, V, NULL, &r),
                     LATTICE_ERR_UNSUPPORTED);
    lattice_distill_destroy(d);
    lattice_distill_params p;
    lattice_distill_params_init(&p);
    p.tau = 0.0f;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_null(d);
    /* temperatures where the KL term is rounding (1e8 gave the CE alone) or
     * finite logits overflow (1e-20 gave NaN): refused, naming the range */
    const float far[] = {1e8f, 101.0f, 0.009f, 1e-20f};
    for (int i = 0; i < 4; i++) {
        p.tau = far[i];
        ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_nonnull(strstr(lattice_last_error(), "tau in 0.01..100"));
    }
    const float edge[] = {LATTICE_DISTILL_TAU_MIN, LATTICE_DISTILL_TAU_MAX};
    for (int i = 0; i < 2; i++) {
        p.tau = edge[i];
        ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_OK);
        lattice_distill_destroy(d);
    }
    p.tau = 1.0f;
    p.alpha = -1.0f;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_distill_create(NULL, &d), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Rows as wide as a real vocabulary (full 8-lane chunks and a tail), with
 * logits far apart (exponentials down to the cut-off to 0), against libm in
 * double: the loss to 1e-12, the gradient to float rounding. */
/* Threads are the backend's: n_threads defaults to 0 (one thread in the raw
 * calls), negative counts are refused, and a loss computed through the model
 * (on its 2-thread backend) equals the single-threaded raw call bit for bit. */
START_TEST(test_threads_follow_backend)
{
    lattice_distill_params p;
    lattice_distill_params_init(&p);
    ck_assert_int_eq(p.n_threads, 0);
    lattice_distill *d;
    p.n_threads = -1;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "n_threads"));
    /* the backend's limit: more threads than that failed in OpenMP's start
     * (an exit) or overflowed the stack */
    p.n_threads = 4097;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "n_threads in 0..4096"));
    p.n_threads = 0;
    ck_assert_int_eq(lattice_distill_create(&p, &d), LATTICE_OK);

    lattice_model_params mp;
    tu_tiny_params(&mp);
    lattice_backend *be = tu_backend("ref", 2);
    lattice_norm *norm;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f,
                                         &norm), LATTICE_OK);
    lattice_model *m;
    ck_assert_int_eq(lattice_model_create(&mp, norm, be, &m), LATTICE_OK);
    const int n = mp.max_batch * mp.max_seq, vocab = mp.vocab_size;
    int32_t tokens[64], targets[64];
    float teacher[64 * 16], dl_raw[64 * 16];
    ck_assert_int_le(n, 64);
    ck_assert_int_le(vocab, 16);
    tu_rng r = {11};
    for (int i = 0; i < n; i++) {
        tokens[i] = (int32_t)(i * 7 % vocab);
        targets[i] = (int32_t)((i * 5 + 3) % vocab);
    }
    tu_fill(teacher, (long)n * vocab, 2.0, &r);
    ck_assert_int_eq(lattice_model_forward(m, tokens, mp.max_batch, mp.max_seq), LATTICE_OK);
    lattice_distill_result raw, through;
    ck_assert_int_eq(lattice_distill_dense(d, lattice_model_get_logits(m), teacher, targets, NULL, n,
                                           vocab, dl_raw, &raw), LATTICE_OK);
    /* a refused loss writes no gradient: backward still has none to read */
    ck_assert_int_eq(lattice_distill_model(d, m, teacher, vocab + 1, targets, NULL, &through),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_distill_model(d, m, teacher, vocab, targets, NULL, &through),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
    ck_assert(raw.loss == through.loss && raw.kl == through.kl && raw.ce == through.ce);
    ck_assert_int_eq(memcmp(dl_raw, lattice_model_get_dlogits(m), sizeof(float) * (size_t)n * vocab),
                     0);
    lattice_model_destroy(m);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(be);
    lattice_distill_destroy(d);
}
END_TEST

START_TEST(test_wide_rows_against_libm)
{
    enum { WN = 3, WV = 301 };
    const int reverse = _i & 1;
    const double tau = _i & 2 ? 0.5 : 1.0;
    tu_rng rng = {41 + _i};
    static float z[WN * WV], t[WN * WV], dz[WN * WV];
    const int32_t lab[WN] = {0, 150, 300};
    tu_fill(z, WN * WV, 8.0, &rng);
    tu_fill(t, WN * WV, 8.0, &rng);
    z[5] = -900.0f; /* exp underflows for this one at any tau */
    t[WV + 7] = 400.0f;
    lattice_distill *d = make(0.7f, 0.3f, (float)tau, reverse ? LATTICE_DISTILL_KL_REVERSE : LATTICE_DISTILL_KL_FORWARD);
    lattice_distill_result r;
    ck_assert_int_eq(lattice_distill_dense(d, z, t, lab, NULL, WN, WV, dz, &r), LATTICE_OK);
    double kl = 0.0, ce = 0.0;
    const double wkd = 0.7f * tau / WN, wce = 0.3f / WN;
    for (int i = 0; i < WN; i++) {
        const float *zi = z + i * WV, *ti = t + i * WV;
        double mq = -1e300, mp = -1e300, m1 = -1e300, sq = 0, sp = 0, s1 = 0, kli = 0;
        for (int j = 0; j < WV; j++) {
            mq = fmax(mq, zi[j] / tau);
            mp = fmax(mp, ti[j] / tau);
            m1 = fmax(m1, zi[j]);
        }
        for (int j = 0; j < WV; j++) {
            sq += exp(zi[j] / tau - mq);
            sp += exp(ti[j] / tau - mp);
            s1 += exp(zi[j] - m1);
        }
        const double lq = mq + log(sq), lp = mp + log(sp), l1 = m1 + log(s1);
        for (int j = 0; j < WV; j++) {
            const double a = zi[j] / tau - lq, b = ti[j] / tau - lp;
            kli += reverse ? exp(a) * (a - b) : exp(b) * (b - a);
        }
        for (int j = 0; j < WV; j++) {
            const double a = zi[j] / tau - lq, b = ti[j] / tau - lp;
            const double g = reverse ? exp(a) * ((a - b) - kli) : exp(a) - exp(b);
            const double want = wkd * g + wce * (exp(zi[j] - l1) - (j == lab[i]));
            ck_assert_float_eq_tol(dz[i * WV + j], want, 2e-8 + 1e-6 * fabs(want));
        }
        kl += kli;
        ce += l1 - zi[lab[i]];
    }
    ck_assert_double_eq_tol(r.kl, kl / WN, 1e-12 * (1.0 + kl / WN));
    ck_assert_double_eq_tol(r.ce, ce / WN, 1e-12 * (1.0 + ce / WN));
    lattice_distill_destroy(d);
}
END_TEST

/* dlogits may be the student buffer itself: the same loss, bit for bit, and the
 * gradient in place of the logits, in each direction and for top-k; another
 * overlap with what the loss reads is refused, nothing written. */
START_TEST(test_gradient_in_place)
{
    enum { K = 3 };
    tu_rng rng = {23};
    float z[N * V], t[N * V], v[N * K], dz[N * V], work[N * V];
    int32_t idx[N * K];
    tu_fill(z, N * V, 2.0, &rng);
    tu_fill(t, N * V, 2.0, &rng);
    tu_fill(v, N * K, 2.0, &rng);
    for (int i = 0; i < N; i++)
        for (int e = 0; e < K; e++)
            idx[i * K + e] = (i + 2 * e) % V;
    for (int c = 0; c < 3; c++) {
        lattice_distill *d = make(0.7f, 0.3f, 1.5f, c == 1 ? LATTICE_DISTILL_KL_REVERSE
                                                            : LATTICE_DISTILL_KL_FORWARD);
        lattice_distill_result apart, inside;
        memcpy(work, z, sizeof z);
        if (c < 2) {
            ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, mask, N, V, dz, &apart),
                             LATTICE_OK);
            ck_assert_int_eq(lattice_distill_dense(d, work, t, labels, mask, N, V, work, &inside),
                             LATTICE_OK);
        } else {
            ck_assert_int_eq(lattice_distill_topk(d, z, idx, v, K, labels, mask, N, V, dz, &apart),
                             LATTICE_OK);
            ck_assert_int_eq(lattice_distill_topk(d, work, idx, v, K, labels, mask, N, V, work,
                                                  &inside), LATTICE_OK);
        }
        ck_assert(inside.loss == apart.loss && inside.kl == apart.kl && inside.ce == apart.ce);
        ck_assert_mem_eq(work, dz, sizeof dz);
        lattice_distill_destroy(d);
    }
    lattice_distill *d = make(0.7f, 0.3f, 1.5f, LATTICE_DISTILL_KL_FORWARD);
    lattice_distill_result r;
    memcpy(work, z, sizeof z);
    /* one row on: the gradient of row 0 would be row 1's logits */
    ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, NULL, N - 1, V, z + V, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_distill_errmsg(d), "overlaps the student logits"));
    ck_assert_int_eq(lattice_distill_dense(d, z, t, labels, mask, N, V, t, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_distill_errmsg(d), "the teacher's logits"));
    ck_assert_int_eq(lattice_distill_topk(d, z, idx, (float *)idx, K, labels, mask, N, V,
                                          (float *)idx, &r), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_mem_eq(work, z, sizeof z);
    lattice_distill_destroy(d);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("distill");
    TCase *tc = tcase_create("loss");
    tcase_add_loop_test(tc, test_dense_grad, 0, 8);
    tcase_add_test(tc, test_topk_grad_and_dense_equivalence);
    tcase_add_loop_test(tc, test_wide_rows_against_libm, 0, 4);
    tcase_add_test(tc, test_identities);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_threads_follow_backend);
    tcase_add_test(tc, test_gradient_in_place);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
