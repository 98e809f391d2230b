/* Helpers shared by the Check suites: backends to loop over, the rig's
 * objects and a model alone, tensors compared, random fills, and a
 * finite-difference harness evaluated in double precision. */
#ifndef LATTICE_TESTUTIL_H
#define LATTICE_TESTUTIL_H

#include <check.h>
#include <lattice/lattice.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "rig.h"

/* Whether this build and system have the oneDNN backend. */
static inline int tu_has_onednn(void)
{
    lattice_backend *be = NULL;
    if (lattice_backend_create("onednn", &be) != LATTICE_OK)
        return 0;
    lattice_backend_destroy(be);
    return 1;
}

/* Backends a loop test runs over: "ref" always, then "blis" and "onednn" where built. */
static inline int tu_n_backends(void) { return 1 + lattice_backend_has_blis() + tu_has_onednn(); }
static inline const char *tu_backend_name(int i)
{
    if (i == 0)
        return "ref";
    return i == 1 && lattice_backend_has_blis() ? "blis" : "onednn";
}

static inline lattice_backend *tu_backend(const char *name, int threads)
{
    lattice_backend *be = NULL;
    ck_assert_int_eq(lattice_backend_create(name, &be), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_threads(be, threads), LATTICE_OK);
    return be;
}

/* The rig's objects (rig.h), or the test fails saying why. */
static inline void tu_rig_open(rig *r, const rig_options *o)
{
    const lattice_status st = rig_open(r, o);
    ck_assert_msg(st == LATTICE_OK, "the rig: %s: %s", lattice_status_string(st),
                  lattice_last_error());
}

static inline void tu_rig_bind(rig *r, const lattice_trainer_params *params)
{
    const lattice_status st = rig_bind(r, params);
    ck_assert_msg(st == LATTICE_OK, "the rig's trainer: %s: %s", lattice_status_string(st),
                  lattice_last_error());
}

/* A model alone, over a norm of its own (a residual scale other than 1 set). */
static inline lattice_model *tu_model(lattice_backend *be, lattice_norm_placement placement,
                                      lattice_norm_kind kind, float eps, float residual_scale,
                                      const lattice_model_params *p)
{
    lattice_norm *n;
    ck_assert_int_eq(rig_norm_create(placement, kind, eps, residual_scale, &n), LATTICE_OK);
    lattice_model *m;
    const lattice_status st = lattice_model_create(p, n, be, &m);
    lattice_norm_destroy(n);
    ck_assert_msg(st == LATTICE_OK, "%s", lattice_last_error());
    return m;
}

/* A copy of a tensor's values (the caller frees), and whether it still holds them. */
static inline float *tu_copy_tensor(lattice_model *m, const char *name, long *n)
{
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(m, name, &ti), LATTICE_OK);
    *n = (long)(ti.shape[0] * ti.shape[1]);
    float *c = malloc(sizeof(float) * (size_t)*n);
    ck_assert_ptr_nonnull(c);
    memcpy(c, ti.data, sizeof(float) * (size_t)*n);
    return c;
}

static inline int tu_same_tensor(lattice_model *m, const char *name, const float *values)
{
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(m, name, &ti), LATTICE_OK);
    return memcmp(ti.data, values, sizeof(float) * (size_t)(ti.shape[0] * ti.shape[1])) == 0;
}

/* A small deterministic generator for test data (independent of the library's). */
typedef struct tu_rng {
    uint64_t s;
} tu_rng;

static inline double tu_uniform(tu_rng *r) /* in [-1, 1) */
{
    r->s = r->s * 6364136223846793005ULL + 1442695040888963407ULL;
    return (double)(r->s >> 11) * 0x1.0p-52 - 1.0;
}

static inline void tu_fill(float *x, long n, double scale, tu_rng *r)
{
    for (long i = 0; i < n; i++)
        x[i] = (float)(scale * tu_uniform(r));
}

static inline void tu_to_double(double *d, const float *f, long n)
{
    for (long i = 0; i < n; i++)
        d[i] = f[i];
}

/* One input of a finite-difference check: the double copy the reference
 * function reads, and the analytic gradient to compare with. */
typedef struct tu_fd_input {
    const char *name;
    double *x;
    const float *grad;
    long n;
} tu_fd_input;

/* Central differences of f (in double, step h) against each input's analytic
 * gradient: |analytic - numeric| <= atol + rtol * max|numeric| per input. */
static inline void tu_fd_check(double (*f)(void *), void *ctx, const tu_fd_input *in, int n_in,
                               double atol, double rtol)
{
    const double h = 1e-5;
    for (int t = 0; t < n_in; t++) {
        double *num = malloc(sizeof(double) * in[t].n);
        ck_assert_ptr_nonnull(num);
        double mx = 0.0;
        for (long i = 0; i < in[t].n; i++) {
            double save = in[t].x[i];
            in[t].x[i] = save + h;
            double fp = f(ctx);
            in[t].x[i] = save - h;
            double fm = f(ctx);
            in[t].x[i] = save;
            num[i] = (fp - fm) / (2 * h);
            mx = fabs(num[i]) > mx ? fabs(num[i]) : mx;
        }
        for (long i = 0; i < in[t].n; i++) {
            double err = fabs(num[i] - in[t].grad[i]);
            ck_assert_msg(err <= atol + rtol * mx,
                          "%s[%ld]: analytic %.8g numeric %.8g (max %.3g)", in[t].name, i,
                          (double)in[t].grad[i], num[i], mx);
        }
        free(num);
    }
}

/* Set a model option by key; the setter must take it. */
static inline void tu_option(lattice_model_params *p, lattice_model_option key, double value)
{
    ck_assert_msg(lattice_model_params_set_option(p, key, value) == LATTICE_OK, "option %d = %g: %s",
                  (int)key, value, lattice_last_error());
}

/* A model option's value, read by key. */
static inline double tu_get_option(const lattice_model_params *p, lattice_model_option key)
{
    double v = -1;
    ck_assert_int_eq(lattice_model_params_get_option(p, key, &v), LATTICE_OK);
    return v;
}

/* The sizes of structs in releases before 1.0 (LP64), written out here apart
 * from the library: what a program built against those headers passes,
 * which 1.0 refuses. */
enum {
    TU_MODEL_PARAMS_0_3_SIZE = 80,   /* 0.1-0.3: up to init_std */
    TU_MODEL_PARAMS_0_4_SIZE = 88,   /* 0.4: up to block_rescale */
    TU_OPTIM_PARAMS_0_2_SIZE = 48,   /* 0.1, 0.2: int step counts */
    TU_OPTIM_PARAMS_0_3_SIZE = 56,   /* 0.3: before lr_shape */
    TU_PHASE_0_1_SIZE = 40,          /* 0.1: before rewind_data */
    TU_TRAINER_PARAMS_0_2_SIZE = 56, /* 0.1, 0.2: before collective */
    TU_COLLECTIVE_0_3_SIZE = 64      /* up to broadcast, without errmsg */
};

/* The last failing call refused a struct of theirs bytes, below ours, as a
 * struct of a program built against a release before 1.0. */
static inline void tu_expect_pre_1_0(const char *what, size_t theirs, size_t ours)
{
    const char *msg = lattice_last_error();
    char sizes[64];
    snprintf(sizes, sizeof sizes, "%zu is below %zu", theirs, ours);
    ck_assert_msg(strstr(msg, sizes) && strstr(msg, "built against a release before 1.0") &&
                      strstr(msg, "rebuild it"),
                  "%s: '%s' does not refuse %zu bytes as a pre-1.0 struct of %zu", what, msg,
                  theirs, ours);
}

/* Run a suite the Check way (CK_ENV: CK_FORK, CK_RUN_CASE...) and give main's status. */
static inline int tu_run(Suite *suite)
{
    SRunner *sr = srunner_create(suite);
    srunner_run_all(sr, CK_ENV);
    int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? EXIT_FAILURE : EXIT_SUCCESS;
}

#endif
