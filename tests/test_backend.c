/* Backends: selection by name, user-supplied ops (a counting wrapper carries a
 * whole training step), failure reporting, and BLIS against the reference on
 * a whole step; versions and status strings. */
#include "testutil.h"

typedef struct counter {
    lattice_backend *inner;
    long sgemm_calls, batched_calls;
    int threads_seen, destroyed;
    int fail;
} counter;

static int count_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha, const float *a,
                       int lda, const float *b, int ldb, float beta, float *c, int ldc)
{
    counter *ct = user;
    ct->sgemm_calls++;
    if (ct->fail)
        return 1;
    return lattice_backend_sgemm(ct->inner, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc) !=
           LATTICE_OK;
}

static void count_threads(void *user, int n) { ((counter *)user)->threads_seen = n; }
static void count_destroy(void *user) { ((counter *)user)->destroyed = 1; }

typedef struct run {
    lattice_norm *norm;
    lattice_model *m;
    lattice_optim *o;
} run;

static const int32_t toks[2 * 8] = {3, 1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3};
static const int32_t tgts[2 * 8] = {1, 4, 1, 5, 9, 2, 6, 5, 3, 5, 8, 9, 7, 9, 3, 2};

static run run_open(lattice_backend *be, int layer_norm)
{
    run r;
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 10;
    p.d_model = 16;
    p.n_layers = 2;
    p.n_active_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.head_dim = 8;
    p.d_ff = 24;
    p.max_batch = 2;
    p.max_seq = 8;
    p.seed = 5;
    p.init_std = 0.2f;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_POST,
                                         layer_norm ? LATTICE_NORM_LAYER : LATTICE_NORM_RMS, 1e-6f,
                                         &r.norm),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_create(&p, r.norm, be, &r.m), LATTICE_OK);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 1e-2f;
    op.warmup_steps = 0;
    op.total_steps = 10;
    ck_assert_int_eq(lattice_optim_create(r.m, &op, &r.o), LATTICE_OK);
    return r;
}

static void run_close(run *r)
{
    lattice_optim_destroy(r->o);
    lattice_model_destroy(r->m);
    lattice_norm_destroy(r->norm);
}

static float run_step(run *r)
{
    float loss;
    ck_assert_int_eq(lattice_model_forward(r->m, toks, 2, 8), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(r->m, tgts, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(r->m), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_step(r->o, NULL), LATTICE_OK);
    return loss;
}

START_TEST(test_custom_backend_carries_a_step)
{
    counter ct = {0};
    ct.inner = tu_backend("ref", 1);
    lattice_backend_ops ops;
    lattice_backend_ops_init(&ops);
    ops.user = &ct;
    ops.sgemm = count_sgemm; /* sgemm_batched left NULL: the library loops over sgemm */
    ops.set_threads = count_threads;
    ops.destroy = count_destroy;
    lattice_backend *be;
    ck_assert_int_eq(lattice_backend_create_custom("counting", &ops, &be), LATTICE_OK);
    ck_assert_str_eq(lattice_backend_name(be), "counting");
    ck_assert_int_eq(lattice_backend_set_threads(be, 3), LATTICE_OK);
    ck_assert_int_eq(ct.threads_seen, 3);
    run r = run_open(be, 0);
    float loss = run_step(&r);
    /* Per layer forward: qkv, o, gate/up, down + 2 x 8 attention heads; head 1.
     * Backward: 2 per projection + 4 x 8 attention heads per layer + head 2. */
    long fwd = 2 * (4 + 16) + 1, bwd = 2 * (8 + 32) + 2;
    ck_assert_int_eq(ct.sgemm_calls, fwd + bwd);
    /* The same step on the reference backend directly gives the same loss. */
    lattice_backend *ref = tu_backend("ref", 1);
    run r2 = run_open(ref, 0);
    ck_assert_float_eq(run_step(&r2), loss);
    ck_assert_float_eq(run_step(&r2), run_step(&r));
    run_close(&r2);
    run_close(&r);
    lattice_backend_destroy(be);
    ck_assert_int_eq(ct.destroyed, 1);
    lattice_backend_destroy(ref);
    lattice_backend_destroy(ct.inner);
}
END_TEST

START_TEST(test_custom_backend_failure_is_reported)
{
    counter ct = {0};
    ct.inner = tu_backend("ref", 1);
    ct.fail = 1;
    lattice_backend_ops ops;
    lattice_backend_ops_init(&ops);
    ops.user = &ct;
    ops.sgemm = count_sgemm;
    lattice_backend *be;
    ck_assert_int_eq(lattice_backend_create_custom(NULL, &ops, &be), LATTICE_OK);
    run r = run_open(be, 0);
    ck_assert_int_eq(lattice_model_forward(r.m, toks, 2, 8), LATTICE_ERR_BACKEND);
    ck_assert_ptr_null(lattice_model_logits(r.m));
    ck_assert_int_eq(lattice_model_backward(r.m), LATTICE_ERR_STATE);
    run_close(&r);
    lattice_backend_destroy(be);
    lattice_backend_destroy(ct.inner);
}
END_TEST

START_TEST(test_custom_backend_fallback_and_bad_ops)
{
    lattice_backend_ops ops;
    lattice_backend_ops_init(&ops);
    lattice_backend *be;
    /* No slots at all: everything falls back to the reference implementation. */
    ck_assert_int_eq(lattice_backend_create_custom("empty", &ops, &be), LATTICE_OK);
    float a[4] = {1, 2, 3, 4}, b[4] = {1, 0, 0, 1}, c[4] = {NAN, NAN, NAN, NAN};
    ck_assert_int_eq(lattice_backend_sgemm(be, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2),
                     LATTICE_OK);
    for (int i = 0; i < 4; i++)
        ck_assert_float_eq(c[i], a[i]);
    ck_assert_int_eq(lattice_backend_sgemm(be, 0, 0, 2, 2, 2, 1.0f, a, 1, b, 2, 0.0f, c, 2),
                     LATTICE_ERR_INVALID_ARGUMENT); /* lda too small */
    ck_assert_int_eq(lattice_backend_sgemm(NULL, 0, 0, 2, 2, 2, 1.0f, a, 2, b, 2, 0.0f, c, 2),
                     LATTICE_ERR_INVALID_ARGUMENT);
    lattice_backend_destroy(be);
    ops.version = 99;
    ck_assert_int_eq(lattice_backend_create_custom("x", &ops, &be), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(be);
    ops.version = LATTICE_BACKEND_OPS_VERSION;
    ops.size = 8;
    ck_assert_int_eq(lattice_backend_create_custom("x", &ops, &be), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_backend_create_custom("x", NULL, &be), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

START_TEST(test_backend_names)
{
    lattice_backend *be;
    ck_assert_int_eq(lattice_backend_create("nope", &be), LATTICE_ERR_NOT_FOUND);
    ck_assert_ptr_null(be);
    ck_assert_int_eq(lattice_backend_create(NULL, &be), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_backend_create("default", &be), LATTICE_OK);
    ck_assert_str_eq(lattice_backend_name(be), lattice_backend_has_blis() ? "blis" : "ref");
    ck_assert_int_eq(lattice_backend_threads(be), 1);
    ck_assert_int_eq(lattice_backend_set_threads(be, 0), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_backend_destroy(be);
    lattice_backend_destroy(NULL);
    ck_assert_int_eq(lattice_backend_create("blis", &be),
                     lattice_backend_has_blis() ? LATTICE_OK : LATTICE_ERR_UNSUPPORTED);
    lattice_backend_destroy(be);
}
END_TEST

/* A whole step (forward, backward, update) on BLIS matches the reference. */
START_TEST(test_blis_step_matches_ref)
{
    lattice_backend *ref = tu_backend("ref", 1), *blis = tu_backend("blis", 2);
    run a = run_open(ref, _i), b = run_open(blis, _i);
    for (int s = 0; s < 3; s++) {
        float la = run_step(&a), lb = run_step(&b);
        ck_assert_float_eq_tol(la, lb, 1e-4f);
    }
    /* logits of the forward inside the last step, then weights after it */
    const float *za = lattice_model_logits(a.m), *zb = lattice_model_logits(b.m);
    for (int i = 0; i < 2 * 8 * 10; i++)
        ck_assert_float_eq_tol(za[i], zb[i], 1e-4f);
    for (int t = 0; t < lattice_model_n_tensors(a.m); t++) {
        lattice_tensor_info x, y;
        lattice_model_tensor(a.m, t, &x);
        lattice_model_tensor(b.m, t, &y);
        for (long j = 0; j < x.shape[0] * x.shape[1]; j++) {
            ck_assert_msg(fabsf(x.grad[j] - y.grad[j]) <= 1e-4f + 1e-3f * fabsf(x.grad[j]),
                          "%s grad[%ld]: %g vs %g", x.name, j, x.grad[j], y.grad[j]);
            ck_assert_msg(fabsf(x.data[j] - y.data[j]) <= 1e-4f, "%s[%ld]: %g vs %g", x.name, j,
                          x.data[j], y.data[j]);
        }
    }
    run_close(&a);
    run_close(&b);
    lattice_backend_destroy(ref);
    lattice_backend_destroy(blis);
}
END_TEST

START_TEST(test_version_and_status)
{
    ck_assert_uint_eq(lattice_version_number(), LATTICE_VERSION_NUMBER);
    ck_assert_str_eq(lattice_version_string(), LATTICE_VERSION_STRING);
    ck_assert_uint_eq(LATTICE_VERSION_NUMBER, LATTICE_VERSION_MAJOR * 10000 +
                                                  LATTICE_VERSION_MINOR * 100 +
                                                  LATTICE_VERSION_PATCH);
    char buf[32];
    snprintf(buf, sizeof buf, "%d.%d.%d", LATTICE_VERSION_MAJOR, LATTICE_VERSION_MINOR,
             LATTICE_VERSION_PATCH);
    ck_assert_str_eq(buf, lattice_version_string());
    /* pinned values */
    ck_assert_int_eq(LATTICE_OK, 0);
    ck_assert_int_eq(LATTICE_ERR_INVALID_ARGUMENT, 1);
    ck_assert_int_eq(LATTICE_ERR_NON_FINITE, 7);
    ck_assert_int_eq(LATTICE_ERR_STATE, 10);
    for (int s = 0; s <= 10; s++)
        ck_assert_str_ne(lattice_status_string((lattice_status)s), "unknown status");
    ck_assert_str_eq(lattice_status_string((lattice_status)77), "unknown status");
}
END_TEST

static Suite *backend_suite(void)
{
    Suite *s = suite_create("backend");
    TCase *tc = tcase_create("custom");
    tcase_set_timeout(tc, 120);
    tcase_add_test(tc, test_custom_backend_carries_a_step);
    tcase_add_test(tc, test_custom_backend_failure_is_reported);
    tcase_add_test(tc, test_custom_backend_fallback_and_bad_ops);
    tcase_add_test(tc, test_backend_names);
    tcase_add_test(tc, test_version_and_status);
    suite_add_tcase(s, tc);
    if (lattice_backend_has_blis()) {
        TCase *tb = tcase_create("blis");
        tcase_set_timeout(tb, 120);
        tcase_add_loop_test(tb, test_blis_step_matches_ref, 0, 2);
        suite_add_tcase(s, tb);
    }
    return s;
}

int main(void)
{
    return tu_run(backend_suite());
}
