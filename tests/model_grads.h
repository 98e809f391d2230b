/* A tiny model to open and close, and its gradients checked against central
 * differences (tests/test_model.c, tests/test_block_norm.c). */
#ifndef TESTS_MODEL_GRADS_H
#define TESTS_MODEL_GRADS_H

#include "testutil.h"

typedef struct tiny {
    lattice_backend *be;
    lattice_model *m;
} tiny;

static inline void tiny_params(lattice_model_params *p)
{
    tu_tiny_params(p);
    p->rope_theta = 100.0f;
    p->init_std = 0.3f;
    p->seed = 7;
}

/* A model alone on a backend of 2 threads: the placement, norm kind (eps
 * 1e-5) and residual scale alpha given (testutil.h's tu_model). */
static inline tiny tiny_open(const char *backend, lattice_norm_placement pl, lattice_norm_kind kind,
                             float alpha, const lattice_model_params *p)
{
    tiny t;
    t.be = tu_backend(backend, 2);
    t.m = tu_model(t.be, pl, kind, 1e-5f, alpha, p);
    return t;
}

static inline void tiny_close(tiny *t)
{
    lattice_model_destroy(t->m);
    lattice_backend_destroy(t->be);
}

static const int32_t grad_tokens[10] = {1, 4, 9, 2, 2, 0, 10, 3, 7, 5};
static const int32_t grad_targets[10] = {4, 9, 2, 2, 6, 10, 3, 7, 5, 1};
static const uint8_t grad_mask[10] = {1, 1, 1, 1, 0, 1, 1, 1, 1, 1};

/* Cross-entropy of the current weights, reduced in double from the logits. */
static inline double model_loss(lattice_model *m)
{
    ck_assert_int_eq(lattice_model_forward(m, grad_tokens, 2, 5), LATTICE_OK);
    const float *z = lattice_model_get_logits(m);
    double total = 0.0;
    int cnt = 0;
    for (int i = 0; i < 10; i++) {
        if (!grad_mask[i])
            continue;
        const float *zi = z + i * 11;
        double mx = zi[0], sum = 0.0;
        for (int v = 1; v < 11; v++)
            mx = zi[v] > mx ? zi[v] : mx;
        for (int v = 0; v < 11; v++)
            sum += exp(zi[v] - mx);
        total += mx + log(sum) - zi[grad_targets[i]];
        cnt++;
    }
    return total / cnt;
}

/* Directional derivative of the loss along dir, by central differences with
 * one Richardson step (error O(h^4)); dir is applied to the float weights. */
static inline double directional_fd(lattice_model *m, float *w, const float *dir, long n)
{
    float *save = malloc(sizeof(float) * n);
    memcpy(save, w, sizeof(float) * n);
    double d[2];
    const double hs[2] = {2e-3, 1e-3};
    for (int k = 0; k < 2; k++) {
        for (long i = 0; i < n; i++)
            w[i] = (float)(save[i] + hs[k] * dir[i]);
        double fp = model_loss(m);
        for (long i = 0; i < n; i++)
            w[i] = (float)(save[i] - hs[k] * dir[i]);
        double fm = model_loss(m);
        d[k] = (fp - fm) / (2 * hs[k]);
    }
    memcpy(w, save, sizeof(float) * n);
    free(save);
    return (4.0 * d[1] - d[0]) / 3.0;
}

/* Check every trainable tensor's gradient along a random direction; frozen
 * tensors must keep the sentinel written into their gradients. */
static inline void check_model_grads(lattice_model *m)
{
    const int nt = lattice_model_get_n_tensors(m);
    const float sentinel = 12345.0f;
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(m, i, &ti), LATTICE_OK);
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ti.grad[j] = sentinel;
    }
    float loss;
    ck_assert_int_eq(lattice_model_forward(m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(m, grad_targets, grad_mask, &loss, NULL), LATTICE_OK);
    ck_assert_double_eq_tol(loss, model_loss(m), 1e-5);
    ck_assert_int_eq(lattice_model_forward(m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(m, grad_targets, grad_mask, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
    tu_rng rng = {99};
    for (int i = 0; i < nt; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        long n = (long)(ti.shape[0] * ti.shape[1]);
        int tr = 0;
        lattice_model_get_trainable(m, ti.group, ti.layer, &tr);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer >= lattice_model_get_active_layers(m))
            tr = 0;
        if (!tr) {
            for (long j = 0; j < n; j++)
                ck_assert_msg(ti.grad[j] == sentinel, "frozen %s got a gradient", ti.name);
            continue;
        }
        float *dir = malloc(sizeof(float) * n);
        tu_fill(dir, n, 1.0, &rng);
        double an = 0.0;
        for (long j = 0; j < n; j++)
            an += (double)ti.grad[j] * dir[j];
        double num = directional_fd(m, ti.data, dir, n);
        ck_assert_msg(fabs(an - num) <= 2e-4 + 2e-3 * fabs(num), "%s: analytic %.7g numeric %.7g",
                      ti.name, an, num);
        free(dir);
    }
}

#endif
