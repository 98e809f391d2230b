/* The row-start options that keep a running regular RMS (block_rescale, and
 * the induced massive activation massive_offset): the statistic measured by a
 * training forward and taken in by an optimizer step only, the offset by hand,
 * gradients against central differences, files, refusals, and that no logit
 * depends on a later position of its row under every model option. */
#include "model_grads.h"
#include "rig.h"

#include <unistd.h>

#define BLOCK_NORM LATTICE_MODEL_OPTION_BLOCK_NORM
#define BLOCK_RESCALE LATTICE_MODEL_OPTION_BLOCK_RESCALE
#define OFFSET LATTICE_MODEL_OPTION_MASSIVE_OFFSET
#define LAYER LATTICE_MODEL_OPTION_MASSIVE_LAYER
#define CHANNEL LATTICE_MODEL_OPTION_MASSIVE_CHANNEL

/* Every statistic of the model (its running regular RMS) set to s. Returns how many. */
static int set_refs(lattice_model *m, float s)
{
    int n = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(m, i, &ti), LATTICE_OK);
        if (ti.group != LATTICE_MODEL_GROUP_STATISTIC)
            continue;
        ck_assert_int_eq((int)(ti.shape[0] * ti.shape[1]), 1);
        ck_assert_ptr_nonnull(strstr(ti.name, "input_regular_rms"));
        ti.data[0] = s;
        n++;
    }
    return n;
}

static float ref_of(lattice_model *m, int layer)
{
    char name[96];
    snprintf(name, sizeof name, "model.layers.%d.input_regular_rms", layer);
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(m, name, &ti), LATTICE_OK);
    ck_assert_int_eq(ti.group, LATTICE_MODEL_GROUP_STATISTIC);
    ck_assert_int_eq(ti.layer, layer);
    return ti.data[0];
}

/* Mean over rows and positions 1.. of each position's RMS (eps 1e-5). */
static double regular_rms(const float *h, int batch, int T, int D)
{
    double s = 0;
    for (int b = 0; b < batch; b++)
        for (int t = 1; t < T; t++) {
            double ss = 0;
            for (int d = 0; d < D; d++)
                ss += (double)h[((long)b * T + t) * D + d] * h[((long)b * T + t) * D + d];
            s += sqrt(ss / D + 1e-5);
        }
    return s / (batch * (T - 1));
}

static void massive_params(lattice_model_params *p, int layers, float k)
{
    tiny_params(p);
    p->n_layers = layers;
    p->n_active_layers = layers;
    tu_option(p, OFFSET, k);
    tu_option(p, LAYER, 1);
    tu_option(p, CHANNEL, 3);
}

/* One optimizer step of lr 0 on the model's last backward (weights stay). */
static lattice_optim *still_optim(lattice_model *m)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = 0.0f;
    op.min_lr = 0.0f;
    op.weight_decay = 0.0f;
    lattice_optim *o;
    ck_assert_int_eq(lattice_optim_create(m, &op, &o), LATTICE_OK);
    return o;
}

static void train_forward_backward(lattice_model *m)
{
    float loss;
    ck_assert_int_eq(lattice_model_forward(m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_model_cross_entropy(m, grad_targets, grad_mask, &loss, NULL),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(m), LATTICE_OK);
}

START_TEST(test_running_rms_taken_in_by_steps_only)
{
    /* massive_offset at layer 1 and a rescale at layer 2 of 3 (blocks of 2):
     * statistics at layers 1 and 2 only, 0 until a step takes a measurement in */
    lattice_model_params p;
    massive_params(&p, 3, 4.0f);
    tu_option(&p, BLOCK_RESCALE, 2);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    int found[3] = {0};
    for (int i = 0; i < lattice_model_get_n_tensors(t.m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t.m, i, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_STATISTIC)
            found[ti.layer]++;
    }
    ck_assert_int_eq(found[0], 0);
    ck_assert_int_eq(found[1], 1);
    ck_assert_int_eq(found[2], 1);
    ck_assert_float_eq(ref_of(t.m, 1), 0.0f);
    int tr = 1;
    ck_assert_int_eq(lattice_model_get_trainable(t.m, LATTICE_MODEL_GROUP_STATISTIC, 1, &tr),
                     LATTICE_OK);
    ck_assert_int_eq(tr, 0);
    ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_STATISTIC, 1, 1),
                     LATTICE_ERR_INVALID_ARGUMENT);
    lattice_optim *o = still_optim(t.m);
    /* an inference forward measures nothing a step could take in */
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 5), LATTICE_OK);
    train_forward_backward(t.m);
    const float *h1, *h2;
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &h1), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 2, &h2), LATTICE_OK);
    const double want1 = regular_rms(h1, 2, 5, p.d_model), want2 = regular_rms(h2, 2, 5, p.d_model);
    ck_assert_float_eq(ref_of(t.m, 1), 0.0f); /* the forward alone changes nothing */
    ck_assert_int_eq(lattice_optim_step(o, NULL), LATTICE_OK);
    ck_assert_double_eq_tol(ref_of(t.m, 1), want1, 1e-6 * want1);
    ck_assert_double_eq_tol(ref_of(t.m, 2), want2, 1e-6 * want2);
    /* a second step: 0.99 s + 0.01 measured */
    const float s1 = ref_of(t.m, 1);
    train_forward_backward(t.m);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &h1), LATTICE_OK);
    const double m1 = regular_rms(h1, 2, 5, p.d_model);
    ck_assert_int_eq(lattice_optim_step(o, NULL), LATTICE_OK);
    ck_assert_double_eq_tol(ref_of(t.m, 1), 0.99 * s1 + 0.01 * m1, 1e-6 * s1);
    const float s2 = ref_of(t.m, 1);
    ck_assert_int_eq(lattice_model_forward_inference(t.m, grad_tokens, 2, 5), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_step(o, NULL), LATTICE_OK); /* no training forward since */
    ck_assert_float_eq(ref_of(t.m, 1), s2);
    lattice_optim_destroy(o);
    tiny_close(&t);
}
END_TEST

START_TEST(test_trainer_evaluate_measures_nothing)
{
    /* lattice_trainer_evaluate ran the training forward: the validation
     * batches' measurement was left pending, and the next optimizer step took
     * it in; now an evaluation leaves the statistic to the training batches */
    rig_options o;
    rig_options_init(&o);
    massive_params(&o.model, 2, 4.0f);
    o.data.val_fraction = 0.2f;
    o.optim.lr = 0.0f;
    o.optim.min_lr = 0.0f;
    o.optim.weight_decay = 0.0f;
    rig r;
    ck_assert_int_eq(rig_open(&r, &o), LATTICE_OK);
    train_forward_backward(r.model);
    ck_assert_int_eq(lattice_optim_step(r.optim, NULL), LATTICE_OK);
    const float s = ref_of(r.model, 1);
    ck_assert(s > 0.0f);
    double ce;
    ck_assert_int_eq(lattice_trainer_evaluate(r.trainer, &ce), LATTICE_OK);
    ck_assert_int_eq(lattice_optim_step(r.optim, NULL), LATTICE_OK); /* no training forward since */
    ck_assert_float_eq(ref_of(r.model, 1), s);
    /* and the evaluation is an inference forward: nothing for backward */
    ck_assert_int_eq(lattice_model_backward(r.model), LATTICE_ERR_STATE);
    rig_close(&r);
}
END_TEST

START_TEST(test_massive_offset_by_hand)
{
    /* the same weights with and without the offset: hs[1] differs exactly at
     * position 0 of each row on the chosen channel, by k sqrt(D) s; under
     * each placement */
    for (int pl = LATTICE_NORM_PLACEMENT_PRE; pl <= LATTICE_NORM_PLACEMENT_PERI; pl++) {
        lattice_model_params p, q;
        massive_params(&p, 2, 4.0f);
        massive_params(&q, 2, 0.0f);
        tiny t = tiny_open("ref", (lattice_norm_placement)pl, LATTICE_NORM_KIND_RMS, 1.0f, &p);
        tiny u = tiny_open("ref", (lattice_norm_placement)pl, LATTICE_NORM_KIND_RMS, 1.0f, &q);
        ck_assert_int_eq(lattice_model_get_n_params(t.m), lattice_model_get_n_params(u.m) + 1);
        /* before s is measured the offset adds nothing */
        ck_assert_double_eq(model_loss(t.m), model_loss(u.m));
        ck_assert_int_eq(set_refs(t.m, 0.75f), 1);
        ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
        ck_assert_int_eq(lattice_model_forward(u.m, grad_tokens, 2, 5), LATTICE_OK);
        const float *a, *b;
        ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &a), LATTICE_OK);
        ck_assert_int_eq(lattice_model_get_hidden(u.m, 1, &b), LATTICE_OK);
        const int D = p.d_model;
        const double add = 4.0 * sqrt((double)D) * 0.75;
        for (int r = 0; r < 10; r++)
            for (int d = 0; d < D; d++) {
                const int hit = r % 5 == 0 && d == 3;
                ck_assert_double_eq_tol(a[r * D + d], b[r * D + d] + (hit ? add : 0.0), 1e-5);
            }
        /* the ratio where it is added: about k */
        double r0 = 0;
        for (int d = 0; d < D; d++)
            r0 += (double)a[d] * a[d];
        r0 = sqrt(r0 / D);
        const double ratio = r0 / regular_rms(a, 2, 5, D);
        ck_assert_msg(ratio > 2.5 && ratio < 8, "ratio %g for k 4", ratio);
        tiny_close(&u);
        tiny_close(&t);
    }
}
END_TEST

/* i: placement (pre, post, peri) x (the offset; under pre also the rescale) */
START_TEST(test_row_start_gradients)
{
    const lattice_norm_placement pl = (lattice_norm_placement)(_i % 3);
    const int rescale = _i >= 3;
    lattice_model_params p;
    massive_params(&p, 4, rescale ? 0.0f : 3.0f);
    tu_option(&p, LAYER, 2);
    if (rescale)
        tu_option(&p, BLOCK_RESCALE, 2);
    tiny t = tiny_open("ref", rescale ? LATTICE_NORM_PLACEMENT_PRE : pl, LATTICE_NORM_KIND_RMS,
                       1.0f, &p);
    ck_assert_int_eq(set_refs(t.m, 1.3f), 1);
    check_model_grads(t.m);
    tiny_close(&t);
}
END_TEST

START_TEST(test_rescale_by_hand)
{
    /* Two layers, the second a block's entry, its output projections zeroed:
     * the stream after it is the rescaled stream before it. Position 0 of
     * each row: h0 * s / rms(h0), rms(h) = sqrt(mean(h^2) + eps), s the
     * running regular RMS; every other position: h itself. With s not yet
     * measured (0) every position passes unchanged. */
    lattice_model_params p;
    tiny_params(&p);
    tu_option(&p, BLOCK_RESCALE, 1);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    ck_assert_int_eq(lattice_model_zero_layer_outputs(t.m, 1), LATTICE_OK);
    const int D = p.d_model, T = 5;
    for (int k = 0; k < 2; k++) {
        const float s = k ? 2.5f : 0.0f;
        ck_assert_int_eq(set_refs(t.m, s), 1);
        ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, T), LATTICE_OK);
        const float *h1, *h2;
        ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &h1), LATTICE_OK);
        ck_assert_int_eq(lattice_model_get_hidden(t.m, 2, &h2), LATTICE_OK);
        double worst = 0, scale = 0, moved = 0;
        for (int b = 0; b < 2; b++) {
            const float *row = h1 + (long)b * T * D;
            double ss = 0;
            for (int d = 0; d < D; d++)
                ss += (double)row[d] * row[d];
            const double r0 = sqrt(ss / D + 1e-5);
            for (int q = 0; q < T; q++)
                for (int d = 0; d < D; d++) {
                    const double x = row[q * D + d];
                    const double want = q == 0 && s > 0 ? x * s / r0 : x;
                    const double got = h2[((long)b * T + q) * D + d];
                    worst = fmax(worst, fabs(got - want));
                    scale = fmax(scale, fabs(want));
                    moved = fmax(moved, fabs(got - x));
                }
        }
        ck_assert_msg(worst <= 1e-5 * scale, "rescale off by %g (scale %g)", worst, scale);
        if (s > 0)
            ck_assert_double_gt(moved, 1e-3 * scale);
        else
            ck_assert_double_eq(moved, 0);
    }
    tiny_close(&t);
}
END_TEST

START_TEST(test_row_start_refused)
{
    lattice_model_params p;
    char err[LATTICE_ERRMSG_SIZE];
    massive_params(&p, 3, 4.0f);
    tu_option(&p, LAYER, 3);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "massive_layer 3 not in 1..2"));
    /* values the setter refuses, written into the slots as a program built
     * against 1.0 could: the check refuses them too */
    p.lattice_reserved_massive_layer = 0;
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    tu_option(&p, LAYER, 1);
    tu_option(&p, CHANNEL, 8);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "massive_channel 8 not in 0..7"));
    tu_option(&p, CHANNEL, 0);
    p.lattice_reserved_massive_offset = -1.0f;
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "massive_offset -1 must be finite and in 0..1e+06"));
    p.lattice_reserved_massive_offset = NAN;
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    /* layer and channel mean nothing without an offset */
    tu_option(&p, OFFSET, 0);
    tu_option(&p, LAYER, 99);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_OK);
}
END_TEST

START_TEST(test_row_start_saved_and_loaded)
{
    /* the options and the statistics come back; the loss is the same */
    lattice_model_params p;
    massive_params(&p, 4, 16.0f);
    tu_option(&p, LAYER, 2);
    tu_option(&p, BLOCK_RESCALE, 2);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    ck_assert_int_eq(set_refs(t.m, 0.6f), 1); /* layer 2 holds both's one statistic */
    char path[64];
    snprintf(path, sizeof path, "/tmp/lattice-rowstart-%d.safetensors", (int)getpid());
    ck_assert_int_eq(lattice_model_save(t.m, path), LATTICE_OK);
    lattice_model *back;
    char err[LATTICE_ERRMSG_SIZE];
    const lattice_status st = lattice_model_create_from_file(path, NULL, t.be, 2, 5, &back, err);
    ck_assert_msg(st == LATTICE_OK, "%s", err);
    lattice_model_params q;
    q.size = sizeof q;
    ck_assert_int_eq(lattice_model_get_params(back, &q), LATTICE_OK);
    ck_assert_double_eq(tu_get_option(&q, OFFSET), 16.0);
    ck_assert_double_eq(tu_get_option(&q, LAYER), 2);
    ck_assert_double_eq(tu_get_option(&q, CHANNEL), 3);
    ck_assert_double_eq(tu_get_option(&q, BLOCK_RESCALE), 2);
    ck_assert_float_eq(ref_of(back, 2), 0.6f);
    ck_assert_double_eq(model_loss(t.m), model_loss(back));
    lattice_model_destroy(back);
    unlink(path);
    tiny_close(&t);
}
END_TEST

/* Logits for two batches whose rows agree before position cut and differ
 * from it on, under one model: the largest difference before cut, and (in
 * *after) from it on. */
static double later_token_effect(lattice_model *m, int cut, double *after)
{
    int32_t a[10], b[10];
    memcpy(a, grad_tokens, sizeof a);
    memcpy(b, grad_tokens, sizeof b);
    for (int r = 0; r < 2; r++)
        for (int q = cut; q < 5; q++)
            b[r * 5 + q] = (a[r * 5 + q] + 3 + q) % 11;
    float za[10 * 11];
    ck_assert_int_eq(lattice_model_forward(m, a, 2, 5), LATTICE_OK);
    memcpy(za, lattice_model_get_logits(m), sizeof za);
    ck_assert_int_eq(lattice_model_forward(m, b, 2, 5), LATTICE_OK);
    const float *zb = lattice_model_get_logits(m);
    double worst = 0;
    *after = 0;
    for (int r = 0; r < 2; r++)
        for (int q = 0; q < 5; q++)
            for (int v = 0; v < 11; v++) {
                const double e = fabs(za[(r * 5 + q) * 11 + v] - zb[(r * 5 + q) * 11 + v]);
                if (q < cut)
                    worst = fmax(worst, e);
                else
                    *after = fmax(*after, e);
            }
    return worst;
}

/* Every option of the model, one per _i: no logit depends on a later token
 * of its row, with each running statistic set (as after training). */
START_TEST(test_causal_every_option)
{
    lattice_model_params p;
    tiny_params(&p);
    p.n_layers = p.n_active_layers = 4;
    lattice_norm_placement pl = LATTICE_NORM_PLACEMENT_PRE;
    lattice_norm_kind kind = LATTICE_NORM_KIND_RMS;
    float alpha = 1.0f;
    const char *what = "";
    switch (_i) {
    case 0: what = "plain pre"; break;
    case 1: what = "post"; pl = LATTICE_NORM_PLACEMENT_POST; break;
    case 2: what = "peri"; pl = LATTICE_NORM_PLACEMENT_PERI; break;
    case 3: what = "LayerNorm"; kind = LATTICE_NORM_KIND_LAYER; break;
    case 4: what = "post, residual scale 2"; pl = LATTICE_NORM_PLACEMENT_POST; alpha = 2.0f; break;
    case 5: what = "no q/k norm"; p.qk_norm = 0; break;
    case 6: what = "tied head"; p.tie_embeddings = 1; break;
    case 7: what = "block_norm"; tu_option(&p, BLOCK_NORM, 2); break;
    case 8: what = "block_rescale"; tu_option(&p, BLOCK_RESCALE, 2); break;
    case 9: what = "massive_offset, pre"; tu_option(&p, OFFSET, 8); break;
    case 10: what = "massive_offset, post"; tu_option(&p, OFFSET, 8); pl = LATTICE_NORM_PLACEMENT_POST; break;
    case 11: what = "massive_offset, peri"; tu_option(&p, OFFSET, 8); pl = LATTICE_NORM_PLACEMENT_PERI; break;
    case 12: what = "block_rescale and massive_offset"; tu_option(&p, BLOCK_RESCALE, 1); tu_option(&p, OFFSET, 37); break;
    case 13: what = "2 of 4 layers active"; p.n_active_layers = 2; break;
    }
    tiny t = tiny_open("ref", pl, kind, alpha, &p);
    set_refs(t.m, 0.9f);
    double scale = 0;
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    for (int j = 0; j < 110; j++)
        scale = fmax(scale, fabs(lattice_model_get_logits(t.m)[j]));
    for (int cut = 1; cut < 5; cut++) {
        double after;
        const double e = later_token_effect(t.m, cut, &after);
        ck_assert_msg(e <= 1e-6 * scale, "%s: the logits before position %d move by %g when "
                      "later tokens change", what, cut, e);
        /* the change reaches the logits it may reach: the check can see one */
        ck_assert_msg(after > 1e-4 * scale, "%s: changed tokens moved nothing (%g)", what, after);
    }
    tiny_close(&t);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("row_start");
    TCase *c = tcase_create("row_start");
    tcase_set_timeout(c, 120);
    tcase_add_test(c, test_running_rms_taken_in_by_steps_only);
    tcase_add_test(c, test_trainer_evaluate_measures_nothing);
    tcase_add_test(c, test_massive_offset_by_hand);
    tcase_add_loop_test(c, test_row_start_gradients, 0, 4);
    tcase_add_test(c, test_rescale_by_hand);
    tcase_add_test(c, test_row_start_refused);
    tcase_add_test(c, test_row_start_saved_and_loaded);
    tcase_add_loop_test(c, test_causal_every_option, 0, 14);
    suite_add_tcase(s, c);
    return tu_run(s);
}
