/* AdamW against a double-precision reference of the update, the warmup +
 * cosine schedule, clipping, resets, frozen groups and non-finite gradients. */
#include <limits.h>
#include "testutil.h"
#include "optim_access.h"

typedef struct fixture {
    lattice_backend *be;
    lattice_norm *norm;
    lattice_model *m;
    lattice_optim *o;
} fixture;

static fixture open_fixture(const lattice_optim_params *op)
{
    fixture f;
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 6;
    p.d_model = 4;
    p.n_layers = 2;
    p.n_active_layers = 1;
    p.n_heads = 1;
    p.n_kv_heads = 1;
    p.head_dim = 2;
    p.d_ff = 4;
    p.max_batch = 1;
    p.max_seq = 2;
    f.be = tu_backend("ref", 1);
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &f.norm),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_create(&p, f.norm, f.be, &f.m), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_create(f.m, op, &f.o), LATTICE_OK);
    return f;
}

static void close_fixture(fixture *f)
{
    lattice_optim_destroy(f->o);
    lattice_model_destroy(f->m);
    lattice_norm_destroy(f->norm);
    lattice_backend_destroy(f->be);
}

/* Write gradient values g(step, tensor, j) into every tensor. */
static void set_grads(lattice_model *m, int step, float scale)
{
    for (int t = 0; t < lattice_model_get_n_tensors(m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, t, &ti);
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ti.grad[j] = scale * (float)sin(1.0 + step * 0.7 + t * 1.3 + j * 0.11);
    }
}

START_TEST(test_schedule)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 1e-3f;
    op.min_lr = 1e-5f;
    op.warmup_steps = 4;
    op.total_steps = 14;
    fixture f = open_fixture(&op);
    for (int s = 0; s < 20; s++) {
        double want;
        if (s < 4)
            want = 1e-3 * (s + 1) / 4.0;
        else {
            double pr = (s - 4) / 10.0;
            pr = pr > 1 ? 1 : pr;
            want = 1e-5 + 0.5 * (1e-3 - 1e-5) * (1 + cos(M_PI * pr));
        }
        ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), want, 1e-9);
        set_grads(f.m, s, 0.01f);
        ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    }
    ck_assert_int_eq(lattice_optim_get_steps(f.o), 20);
    ck_assert_int_eq(lattice_optim_reset(f.o), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_get_steps(f.o), 0);
    ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), 1e-3 / 4, 1e-9); /* warmup restarts */
    close_fixture(&f);
}
END_TEST

/* Warmup, stable, decay: held at lr, then a straight line to min_lr over the
 * last decay_fraction of the steps after warmup; constant with fraction 0;
 * restarts with the optimizer. */
START_TEST(test_schedule_wsd)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    ck_assert_int_eq(op.lr_shape, LATTICE_OPTIM_LR_SHAPE_COSINE);
    op.lr = 1e-3f;
    op.min_lr = 1e-5f;
    op.warmup_steps = 4;
    op.total_steps = 24; /* 20 after warmup */
    op.lr_shape = LATTICE_OPTIM_LR_SHAPE_WSD;
    op.decay_fraction = 0.25f; /* the last 5: steps 19..23 */
    fixture f = open_fixture(&op);
    for (int s = 0; s < 30; s++) {
        double want;
        if (s < 4)
            want = 1e-3 * (s + 1) / 4.0;
        else if (s < 19)
            want = 1e-3;
        else {
            double q = (s - 19) / 5.0;
            q = q > 1 ? 1 : q;
            want = 1e-3 - (1e-3 - 1e-5) * q;
        }
        ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), want, 1e-9);
        set_grads(f.m, s, 0.01f);
        ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    }
    ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), 1e-5, 1e-9);
    ck_assert_int_eq(lattice_optim_reset(f.o), LATTICE_OK);
    ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), 1e-3 / 4, 1e-9);

    /* no decay steps: constant after warmup, to the end and past it */
    op.decay_fraction = 0.0f;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_OK);
    for (int s = 0; s < 30; s++) {
        if (s >= 4)
            ck_assert_double_eq_tol(lattice_optim_get_lr(f.o), 1e-3, 1e-9);
        set_grads(f.m, s, 0.01f);
        ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    }
    lattice_optim_params back = {.size = sizeof(back)};
    ck_assert_int_eq(lattice_optim_get_params(f.o, &back), LATTICE_OK);
    ck_assert_int_eq(back.lr_shape, LATTICE_OPTIM_LR_SHAPE_WSD);
    ck_assert_float_eq(back.decay_fraction, 0.0f);

    /* refused, naming the field; the settings in use do not change */
    op.decay_fraction = 1.5f;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "decay_fraction 1.5 must lie in [0, 1]"));
    op.decay_fraction = NAN;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    op.decay_fraction = 0.5f;
    op.lr_shape = (lattice_optim_lr_shape)7;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "lr_shape 7 is not a shape"));
    ck_assert_int_eq(lattice_optim_get_params(f.o, &back), LATTICE_OK);
    ck_assert_float_eq(back.decay_fraction, 0.0f);
    close_fixture(&f);
}
END_TEST

/* A struct smaller than this library's (0.1/0.2's 48 bytes with int step
 * counts, 0.3's 56 without lr_shape, sizes between, one byte short) is a
 * program built against a release before 1.0: create, set and get refuse it
 * and name both sizes; nothing is read past it or written into it (each is
 * heap-exact, so that the sanitizer build sees a byte too far). */
START_TEST(test_params_before_1_0)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 2e-3f;
    fixture f = open_fixture(&op);
    const size_t ours = sizeof(lattice_optim_params);
    const size_t sizes[] = {TU_OPTIM_PARAMS_0_2_SIZE, TU_OPTIM_PARAMS_0_2_SIZE + 4,
                            TU_OPTIM_PARAMS_0_3_SIZE, ours - 1};
    for (int k = 0; k < 4; k++) {
        unsigned char *old = malloc(sizes[k]);
        memcpy(old, &op, sizes[k]);
        memcpy(old, &sizes[k], sizeof(size_t));
        lattice_optim *o = (lattice_optim *)(void *)old; /* anything but NULL */
        ck_assert_int_eq(lattice_optim_create(f.m, (const lattice_optim_params *)(void *)old, &o),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_null(o);
        tu_expect_pre_1_0("create", sizes[k], ours);
        ck_assert_int_eq(lattice_optim_set_params(f.o, (const lattice_optim_params *)(void *)old),
                         LATTICE_ERR_INVALID_ARGUMENT);
        tu_expect_pre_1_0("set_params", sizes[k], ours);
        ck_assert_str_eq(lattice_optim_errmsg(f.o), lattice_last_error());
        memset(old, 0xA5, sizes[k]);
        memcpy(old, &sizes[k], sizeof(size_t));
        ck_assert_int_eq(lattice_optim_get_params(f.o, (lattice_optim_params *)(void *)old),
                         LATTICE_ERR_INVALID_ARGUMENT);
        tu_expect_pre_1_0("get_params", sizes[k], ours);
        size_t kept;
        memcpy(&kept, old, sizeof(kept));
        ck_assert_uint_eq(kept, sizes[k]);
        for (size_t b = sizeof(size_t); b < sizes[k]; b++)
            ck_assert_int_eq(old[b], 0xA5);
        free(old);
    }
    /* the settings in use did not move */
    lattice_optim_params now = {.size = sizeof(now)};
    ck_assert_int_eq(lattice_optim_get_params(f.o, &now), LATTICE_OK);
    ck_assert_float_eq(now.lr, 2e-3f);
    ck_assert_int_eq(now.total_steps, op.total_steps);
    /* a newer caller's larger struct: read up to ours when the bytes past
     * ours are 0, refused when one is not; written up to ours */
    struct {
        lattice_optim_params p;
        unsigned char beyond[16];
    } newer;
    memset(&newer, 0xA5, sizeof newer);
    newer.p = op;
    newer.p.size = sizeof newer;
    newer.p.lr = 3e-3f;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &newer.p), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "a field of a later release"));
    ck_assert_int_eq(lattice_optim_get_params(f.o, &now), LATTICE_OK);
    ck_assert_float_eq(now.lr, 2e-3f); /* kept */
    memset(newer.beyond, 0, sizeof newer.beyond);
    ck_assert_int_eq(lattice_optim_set_params(f.o, &newer.p), LATTICE_OK);
    memset(&newer, 0xA5, sizeof newer);
    newer.p.size = sizeof newer;
    ck_assert_int_eq(lattice_optim_get_params(f.o, &newer.p), LATTICE_OK);
    ck_assert_uint_eq(newer.p.size, ours);
    ck_assert_float_eq(newer.p.lr, 3e-3f);
    for (size_t b = 0; b < sizeof newer.beyond; b++)
        ck_assert_int_eq(newer.beyond[b], 0xA5);
    close_fixture(&f);
}
END_TEST

/* The update of one trainable, active matrix against a double reference,
 * with clipping active on some steps and weight decay on. */
START_TEST(test_adamw_matches_reference)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 1e-2f;
    op.min_lr = 1e-3f;
    op.warmup_steps = 2;
    op.total_steps = 6;
    op.weight_decay = 0.1f;
    op.clip_norm = 1.5f;
    fixture f = open_fixture(&op);
    lattice_model_tensor_info w;
    ck_assert_int_eq(lattice_model_find_tensor(f.m, "model.layers.0.mlp.down_proj.weight", &w),
                     LATTICE_OK);
    const long n = (long)(w.shape[0] * w.shape[1]);
    double ref[64], m1[64] = {0}, m2[64] = {0};
    tu_to_double(ref, w.data, n);
    for (int s = 0; s < 6; s++) {
        set_grads(f.m, s, s % 2 ? 0.02f : 1.0f); /* large steps get clipped */
        /* global norm over trainable active tensors (layer 1 is inactive) */
        double ss = 0.0;
        for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
            lattice_model_tensor_info ti;
            lattice_model_get_tensor(f.m, t, &ti);
            if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer == 1)
                continue;
            for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
                ss += (double)ti.grad[j] * ti.grad[j];
        }
        double norm = sqrt(ss), clip = norm > 1.5 ? 1.5 / norm : 1.0;
        double lr = lattice_optim_get_lr(f.o);
        float gn;
        ck_assert_int_eq(lattice_optim_step(f.o, &gn), LATTICE_OK);
        ck_assert_double_eq_tol(gn, norm, 1e-5 * norm);
        for (long j = 0; j < n; j++) {
            double g = w.grad[j] * clip;
            m1[j] = 0.9 * m1[j] + 0.1 * g;
            m2[j] = 0.95 * m2[j] + 0.05 * g * g;
            double mh = m1[j] / (1 - pow(0.9, s + 1)), vh = m2[j] / (1 - pow(0.95, s + 1));
            ref[j] -= lr * (mh / (sqrt(vh) + 1e-8) + 0.1 * ref[j]);
        }
        for (long j = 0; j < n; j++)
            ck_assert_double_eq_tol(w.data[j], ref[j], 1e-6);
    }
    close_fixture(&f);
}
END_TEST

START_TEST(test_frozen_inactive_and_nonfinite)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.warmup_steps = 0;
    op.lr = 0.1f;
    fixture f = open_fixture(&op);
    ck_assert_int_eq(lattice_model_set_trainable(f.m, LATTICE_MODEL_GROUP_EMBEDDING, -1, 0), LATTICE_OK);
    lattice_model_tensor_info emb, l1, head;
    lattice_model_find_tensor(f.m, "model.embed_tokens.weight", &emb);
    lattice_model_find_tensor(f.m, "model.layers.1.self_attn.q_proj.weight", &l1);
    lattice_model_find_tensor(f.m, "lm_head.weight", &head);
    float e0 = emb.data[3], q0 = l1.data[1], h0 = head.data[2];
    set_grads(f.m, 0, 1.0f);
    ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    ck_assert_float_eq(emb.data[3], e0); /* frozen */
    ck_assert_float_eq(l1.data[1], q0);  /* inactive */
    ck_assert_float_ne(head.data[2], h0);
    /* NaN anywhere in a trainable gradient: clear status, nothing updated. */
    float h1 = head.data[2];
    set_grads(f.m, 1, 1.0f);
    head.grad[0] = NAN;
    float gn;
    ck_assert_int_eq(lattice_optim_step(f.o, &gn), LATTICE_ERR_NON_FINITE);
    ck_assert(isnan(gn));
    ck_assert_float_eq(head.data[2], h1);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "not finite"));
    ck_assert_int_eq(lattice_optim_get_steps(f.o), 1);
    close_fixture(&f);
}
END_TEST

/* A forward of two tokens, its cross-entropy and the backward. */
static void train_pass(lattice_model *m)
{
    static const int32_t tok[2] = {1, 4}, tgt[2] = {4, 2};
    float loss;
    ck_assert_int_eq(lattice_model_forward(m, tok, 1, 2), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(m, tgt, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
}

START_TEST(test_shrink_leaves_stale_gradients_unread)
{
    /* After the depth shrinks, a layer beyond it keeps the gradient of the last
     * backward that ran it. Neither the optimizer nor the next backward reads
     * it: poisoned with NaN it changes no norm and no weight (weight decay
     * on), and once the layer is active again backward overwrites it. */
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.warmup_steps = 0;
    op.lr = 0.1f;
    op.weight_decay = 0.5f;
    fixture f = open_fixture(&op);
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 2), LATTICE_OK);
    for (int i = 0; i < 2; i++) {
        train_pass(f.m);
        ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    }
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 1), LATTICE_OK);
    /* layer 1: its weights now, and a NaN in every gradient */
    long n1 = 0;
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer == 1)
            n1 += (long)(ti.shape[0] * ti.shape[1]);
    }
    float *w1 = malloc(sizeof(float) * (size_t)n1), *p = w1;
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        if (ti.group != LATTICE_MODEL_GROUP_LAYER || ti.layer != 1)
            continue;
        memcpy(p, ti.data, sizeof(float) * (size_t)(ti.shape[0] * ti.shape[1]));
        p += ti.shape[0] * ti.shape[1];
        ti.grad[0] = NAN;
    }
    train_pass(f.m);
    double ss = 0.0; /* the norm over what is active */
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_LAYER && ti.layer == 1) {
            ck_assert(isnan(ti.grad[0])); /* still stale */
            continue;
        }
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ss += (double)ti.grad[j] * ti.grad[j];
    }
    float gn;
    ck_assert_int_eq(lattice_optim_step(f.o, &gn), LATTICE_OK);
    ck_assert_float_eq_tol(gn, (float)sqrt(ss), 1e-6f * (float)sqrt(ss));
    p = w1;
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        if (ti.group != LATTICE_MODEL_GROUP_LAYER || ti.layer != 1)
            continue;
        ck_assert_msg(memcmp(p, ti.data, sizeof(float) * (size_t)(ti.shape[0] * ti.shape[1])) == 0,
                      "%s moved while inactive", ti.name);
        p += ti.shape[0] * ti.shape[1];
    }
    /* active again: its gradients zeroed (lattice_model_set_active_layers),
     * then, poisoned once more, written afresh by backward, which never
     * adds to what a layer held */
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 2), LATTICE_OK);
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        if (ti.group != LATTICE_MODEL_GROUP_LAYER || ti.layer != 1)
            continue;
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ck_assert_float_eq(ti.grad[j], 0.0f);
        ti.grad[0] = NAN;
    }
    train_pass(f.m);
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(f.m, t, &ti);
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ck_assert_msg(isfinite(ti.grad[j]), "%s[%ld] = %g", ti.name, j, (double)ti.grad[j]);
    }
    ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    free(w1);
    close_fixture(&f);
}
END_TEST

/* A step applies only what the last backward wrote: a layer unfrozen, or made
 * active, after that backward has its gradient zeroed, so an older pass's
 * gradient never moves it (only its own moments and decay could: both 0
 * here, lr 0.1). And backward runs only on a forward whose loss wrote the
 * gradient of the logits, with the weights that forward saw. */
START_TEST(test_stale_gradients_never_applied)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.warmup_steps = 0;
    op.lr = 0.1f;
    op.weight_decay = 0.0f;
    fixture f = open_fixture(&op);
    const int32_t tok[2] = {1, 4}, tgt[2] = {4, 2};
    float loss;
    lattice_model_tensor_info q0, q1;
    lattice_model_find_tensor(f.m, "model.layers.0.self_attn.q_proj.weight", &q0);
    lattice_model_find_tensor(f.m, "model.layers.1.self_attn.q_proj.weight", &q1);
    /* a backward with layer 0 trainable, then one with it frozen; unfrozen before the step */
    ck_assert_int_eq(lattice_model_forward(f.m, tok, 1, 2), LATTICE_OK);
    /* reading the buffer is no loss: the const getter marks nothing */
    const float *read = lattice_model_get_dlogits_const(f.m);
    ck_assert_ptr_nonnull(read);
    ck_assert_int_eq(lattice_model_backward(f.m), LATTICE_ERR_STATE); /* no loss yet */
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(f.m), "no loss since the last forward"));
    ck_assert_int_eq(lattice_model_cross_entropy(f.m, tgt, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_ptr_eq(lattice_model_get_dlogits_const(f.m), read);
    ck_assert_float_ne(read[0], 0.0f); /* the loss's gradient, where the loss wrote it */
    ck_assert_int_eq(lattice_model_backward(f.m), LATTICE_OK);
    ck_assert_int_eq(lattice_model_set_trainable(f.m, LATTICE_MODEL_GROUP_LAYER, 0, 0), LATTICE_OK);
    train_pass(f.m);
    ck_assert_int_eq(lattice_model_set_trainable(f.m, LATTICE_MODEL_GROUP_LAYER, 0, 1), LATTICE_OK);
    float w = q0.data[0];
    for (long j = 0; j < q0.shape[0] * q0.shape[1]; j++)
        ck_assert_float_eq(q0.grad[j], 0.0f);
    ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    ck_assert_float_eq(q0.data[0], w);
    /* layer 1 ran in a backward, then the depth shrank and a backward ran
     * without it; grown again before the step, it does not move */
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 2), LATTICE_OK);
    train_pass(f.m);
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 1), LATTICE_OK);
    train_pass(f.m);
    ck_assert_int_eq(lattice_model_set_active_layers(f.m, 2), LATTICE_OK);
    w = q1.data[0];
    ck_assert_int_eq(lattice_optim_step(f.o, NULL), LATTICE_OK);
    ck_assert_float_eq(q1.data[0], w);
    /* weights changed after the forward: its activations are dropped */
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(lattice_model_forward(f.m, tok, 1, 2), LATTICE_OK);
        ck_assert_int_eq(lattice_model_cross_entropy(f.m, tgt, NULL, &loss, NULL), LATTICE_OK);
        ck_assert_int_eq(k == 0   ? lattice_model_init_layer(f.m, 1, 7)
                         : k == 1 ? lattice_model_copy_layer(f.m, 1, 0)
                                  : lattice_model_zero_layer_outputs(f.m, 1),
                         LATTICE_OK);
        ck_assert_int_eq(lattice_model_backward(f.m), LATTICE_ERR_STATE);
        ck_assert_ptr_null(lattice_model_get_logits(f.m));
    }
    /* a caller given the buffer after the forward writes the loss's gradient */
    ck_assert_int_eq(lattice_model_forward(f.m, tok, 1, 2), LATTICE_OK);
    float *dz = lattice_model_get_dlogits(f.m);
    memset(dz, 0, sizeof(float) * 2 * 6);
    dz[3] = 1.0f;
    ck_assert_int_eq(lattice_model_backward(f.m), LATTICE_OK);
    close_fixture(&f);
}
END_TEST

START_TEST(test_optim_bad_input)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    fixture f = open_fixture(&op);
    lattice_optim *o;
    ck_assert_int_eq(lattice_optim_create(NULL, &op, &o), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(o);
    ck_assert_int_eq(lattice_optim_create(f.m, NULL, &o), LATTICE_ERR_INVALID_ARGUMENT);
    op.beta2 = 1.0f;
    ck_assert_int_eq(lattice_optim_create(f.m, &op, &o), LATTICE_ERR_INVALID_CONFIG);
    lattice_optim_params_init(&op);
    op.lr = NAN;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    op.lr = 1e-3f;
    op.total_steps = 0;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_optim_step(NULL, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_optim_reset(NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_optim_destroy(NULL);
    close_fixture(&f);
}
END_TEST

/* Settings that would train at a rate no one asked for are refused, and the
 * message names both values. */
START_TEST(test_rate_traps)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    fixture f = open_fixture(&op);
    lattice_optim *o = (lattice_optim *)&op;
    op.warmup_steps = 100;
    op.total_steps = 50;
    ck_assert_int_eq(lattice_optim_create(f.m, &op, &o), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_null(o);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "warmup_steps 100 > total_steps 50"));
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "warmup_steps 100 > total_steps 50"));
    op.warmup_steps = 50; /* warmup over the whole run: allowed */
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_OK);
    lattice_optim_params_init(&op);
    op.lr = 1e-4f;
    op.min_lr = 1e-3f;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "min_lr 0.001 > lr 0.0001"));
    op.min_lr = op.lr; /* a constant rate after warmup: allowed */
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_OK);
    close_fixture(&f);
}
END_TEST

/* The gradient norm's sum of squares has the same bits at every thread
 * count, run after run: ranks of a data-parallel run clip by it. (An OpenMP
 * reduction, as before 0.3, gives other bits at 1 and 2 threads here.) */
START_TEST(test_norm_same_bits_any_threads)
{
    const long n = 3 * 65536 * 4 + 12345; /* above the serial threshold: threads split it */
    float *g = malloc(sizeof(float) * (size_t)n);
    for (long j = 0; j < n; j++)
        g[j] = (float)sin(0.37 * (double)j) * (float)(1.0 + (double)(j % 977) * 1e-3);
    const double first = lattice__sum_squares(g, n, 1);
    double serial = 0.0; /* the plain sum: equal to rounding, not in bits */
    for (long j = 0; j < n; j++)
        serial += (double)g[j] * g[j];
    ck_assert_double_eq_tol(first, serial, 1e-12 * serial);
    for (int rep = 0; rep < 5; rep++)
        for (int threads = 1; threads <= 4; threads++) {
            const double s = lattice__sum_squares(g, n, threads);
            ck_assert_msg(memcmp(&s, &first, sizeof s) == 0, "%.17g at %d threads, %.17g at 1", s,
                          threads, first);
        }
    free(g);
}
END_TEST

/* A student above the size where the update wakes a team for all its tensors
 * (the study's width: 0.1M weights): 1 and 2 threads give the same bits, step
 * after step, and the overflow of one weight in a late tensor (on the second
 * thread's half) is reported by that tensor's name, the others updated. */
static fixture open_wide(int threads)
{
    fixture f;
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 257;
    p.d_model = 64;
    p.n_layers = 2;
    p.n_active_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.head_dim = 16;
    p.d_ff = 192;
    p.max_batch = 2;
    p.max_seq = 8;
    f.be = tu_backend("ref", threads);
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f,
                                         &f.norm), LATTICE_OK);
    ck_assert_int_eq(lattice_model_create(&p, f.norm, f.be, &f.m), LATTICE_OK);
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 1e-2f;
    op.warmup_steps = 1;
    op.weight_decay = 0.1f;
    op.clip_norm = 1.0f;
    ck_assert_int_eq(lattice_optim_create(f.m, &op, &f.o), LATTICE_OK);
    return f;
}

START_TEST(test_update_same_bits_any_threads)
{
    fixture a = open_wide(1), b = open_wide(2);
    const int nt = lattice_model_get_n_tensors(a.m);
    long total = 0;
    for (int t = 0; t < nt; t++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(a.m, t, &ti);
        total += (long)(ti.shape[0] * ti.shape[1]);
    }
    ck_assert_int_gt(total, 65536); /* above OPTIM_TEAM: 2 threads share the update */
    for (int s = 0; s < 3; s++) {
        set_grads(a.m, s, 0.1f);
        set_grads(b.m, s, 0.1f);
        float ga, gb;
        ck_assert_int_eq(lattice_optim_step(a.o, &ga), LATTICE_OK);
        ck_assert_int_eq(lattice_optim_step(b.o, &gb), LATTICE_OK);
        ck_assert(memcmp(&ga, &gb, sizeof ga) == 0);
        for (int t = 0; t < nt; t++) {
            lattice_model_tensor_info ta, tb;
            lattice_model_get_tensor(a.m, t, &ta);
            lattice_model_get_tensor(b.m, t, &tb);
            const size_t bytes = sizeof(float) * (size_t)(ta.shape[0] * ta.shape[1]);
            ck_assert_msg(memcmp(ta.data, tb.data, bytes) == 0, "step %d: %s differs", s, ta.name);
        }
    }
    /* one weight at the end of the last tensor about to overflow */
    lattice_optim_params op;
    lattice_optim_params_init(&op); /* sets op.size, which get_params reads */
    ck_assert_int_eq(lattice_optim_get_params(b.o, &op), LATTICE_OK);
    op.lr = op.min_lr = 3e38f;
    op.warmup_steps = 0;
    op.clip_norm = 0.0f;
    op.weight_decay = 0.0f;
    ck_assert_int_eq(lattice_optim_set_params(b.o, &op), LATTICE_OK);
    set_grads(b.m, 9, 1.0f);
    lattice_model_tensor_info last;
    ck_assert_int_eq(lattice_model_get_tensor(b.m, nt - 1, &last), LATTICE_OK);
    const long n = (long)(last.shape[0] * last.shape[1]);
    const float doomed = last.grad[n - 1] > 0 ? -3e38f : 3e38f;
    last.data[n - 1] = doomed;
    ck_assert_int_eq(lattice_optim_step(b.o, NULL), LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(b.o), last.name));
    ck_assert_float_eq(last.data[n - 1], doomed);
    close_fixture(&a);
    close_fixture(&b);
}
END_TEST

/* Decay factors outside [0, 1] are refused; a step whose update overflows
 * says so and leaves the weight finite. */
START_TEST(test_decay_and_overflow)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    fixture f = open_fixture(&op);
    const float decays[] = {1e30f, 2e4f}; /* lr 1e-4: factors far below and just below 0 */
    for (int i = 0; i < 2; i++) {
        op.weight_decay = decays[i];
        ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "decay factor"));
    }
    op.weight_decay = 1e4f; /* factor 0 at the peak: allowed */
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_OK);
    op.weight_decay = 0.1f;
    op.lr = 1e-3f;
    op.min_lr = 20.0f; /* the floor counts too when above the peak */
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_ERR_INVALID_CONFIG);

    /* an enormous (finite) learning rate pushes one weight past FLT_MAX */
    lattice_optim_params_init(&op);
    op.lr = op.min_lr = 3e38f;
    op.warmup_steps = 0;
    op.clip_norm = 0.0f;
    ck_assert_int_eq(lattice_optim_set_params(f.o, &op), LATTICE_OK);
    set_grads(f.m, 0, 1.0f);
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_get_tensor(f.m, 0, &ti), LATTICE_OK);
    const float doomed = ti.grad[0] > 0 ? -3e38f : 3e38f;
    ti.data[0] = doomed;
    float gn;
    ck_assert_int_eq(lattice_optim_step(f.o, &gn), LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_optim_errmsg(f.o), "not finite"));
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), ti.name));
    ck_assert_float_eq(ti.data[0], doomed);
    for (int t = 0; t < lattice_model_get_n_tensors(f.m); t++) {
        lattice_model_get_tensor(f.m, t, &ti);
        for (long j = 0; j < ti.shape[0] * ti.shape[1]; j++)
            ck_assert_msg(isfinite(ti.data[j]), "%s[%ld] = %g", ti.name, j, ti.data[j]);
    }
    close_fixture(&f);
}
END_TEST

static Suite *optim_suite(void)
{
    Suite *s = suite_create("optim");
    TCase *tc = tcase_create("adamw");
    tcase_add_test(tc, test_schedule);
    tcase_add_test(tc, test_schedule_wsd);
    tcase_add_test(tc, test_params_before_1_0);
    tcase_add_test(tc, test_adamw_matches_reference);
    tcase_add_test(tc, test_frozen_inactive_and_nonfinite);
    tcase_add_test(tc, test_shrink_leaves_stale_gradients_unread);
    tcase_add_test(tc, test_stale_gradients_never_applied);
    tcase_add_test(tc, test_optim_bad_input);
    tcase_add_test(tc, test_rate_traps);
    tcase_add_test(tc, test_norm_same_bits_any_threads);
    tcase_add_test(tc, test_update_same_bits_any_threads);
    tcase_add_test(tc, test_decay_and_overflow);
    suite_add_tcase(s, tc);
    return s;
}

int main(void)
{
    return tu_run(optim_suite());
}
