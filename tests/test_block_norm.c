/* The block-entry interventions (lattice_model_params.block_norm and
 * block_rescale): every gradient against central differences, the stream each
 * hands a block against a hand computation, where the norm's tensors sit, the
 * placements and settings that refuse them, and a save and load that keep them. */
#include "model_grads.h"

#include <unistd.h>

/* A tiny model of layers layers with blocks of block: a block-entry norm
 * there, or the row-start rescale when rescale is set. */
static void entry_params(lattice_model_params *p, int layers, int block, int rescale)
{
    tiny_params(p);
    p->n_layers = layers;
    p->n_active_layers = layers;
    if (rescale)
        tu_option(p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, block);
    else
        tu_option(p, LATTICE_MODEL_OPTION_BLOCK_NORM, block);
}

static void block_params(lattice_model_params *p, int layers, int block)
{
    entry_params(p, layers, block, 0);
}

/* Give every block-entry norm weight (and bias) values away from 1 (and 0),
 * and every statistic a value away from 0, so that the checks see them act. */
static void perturb_block_norms(lattice_model *m)
{
    /* and the rescale's running regular RMS as after training (0 would pass
     * the row start unchanged) */
    for (int k = 0; k < lattice_model_get_n_tensors(m); k++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, k, &ti);
        if (ti.group == LATTICE_MODEL_GROUP_STATISTIC)
            ti.data[0] = 1.3f;
    }
    tu_rng rng = {5};
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(m, i, &ti), LATTICE_OK);
        if (!strstr(ti.name, "block_entry_norm"))
            continue;
        const long n = (long)(ti.shape[0] * ti.shape[1]);
        float *noise = malloc(sizeof(float) * n);
        tu_fill(noise, n, 0.5, &rng);
        for (long j = 0; j < n; j++)
            ti.data[j] += noise[j];
        free(noise);
    }
}

/* i: every layer a block (1) or blocks of 2, RMS or LayerNorm; then the
 * first layer frozen (the gradient stops above it) */
static void check_entry_grads(int rescale, int i)
{
    lattice_model_params p;
    entry_params(&p, 4, i % 2 ? 2 : 1, rescale);
    const lattice_norm_kind kind = (i / 2) % 2 ? LATTICE_NORM_KIND_LAYER : LATTICE_NORM_KIND_RMS;
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, kind, 1.0f, &p);
    perturb_block_norms(t.m);
    if (i >= 4) {
        ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_EMBEDDING, -1, 0),
                         LATTICE_OK);
        ck_assert_int_eq(lattice_model_set_trainable(t.m, LATTICE_MODEL_GROUP_LAYER, 0, 0),
                         LATTICE_OK);
    }
    check_model_grads(t.m);
    tiny_close(&t);
}

START_TEST(test_block_norm_gradients)
{
    check_entry_grads(0, _i);
}
END_TEST

START_TEST(test_block_norm_tensors)
{
    /* blocks of 3 over 9 layers: entries at layers 3 and 6 only */
    lattice_model_params p;
    block_params(&p, 9, 3);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    int found[9] = {0};
    for (int i = 0; i < lattice_model_get_n_tensors(t.m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(t.m, i, &ti);
        if (!strstr(ti.name, "block_entry_norm"))
            continue;
        ck_assert_int_eq(ti.group, LATTICE_MODEL_GROUP_LAYER);
        ck_assert_int_eq((int)ti.shape[0], p.d_model);
        for (long j = 0; j < ti.shape[0]; j++)
            ck_assert_float_eq(ti.data[j], 1.0f); /* initialised to 1 */
        found[ti.layer]++;
    }
    for (int l = 0; l < 9; l++)
        ck_assert_int_eq(found[l], l == 3 || l == 6);
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "model.layers.3.block_entry_norm.weight", &ti),
                     LATTICE_OK);
    /* one more D-vector per entry than the same model without */
    lattice_model_params q;
    block_params(&q, 9, 0);
    tiny u = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &q);
    ck_assert_int_eq(lattice_model_get_n_params(t.m), lattice_model_get_n_params(u.m) + 2 * p.d_model);
    /* and without it the same weights as ever: the tensors it adds take no draw */
    ck_assert_int_eq(lattice_model_find_tensor(u.m, "model.layers.4.mlp.down_proj.weight", &ti),
                     LATTICE_OK);
    lattice_model_tensor_info tj;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "model.layers.4.mlp.down_proj.weight", &tj),
                     LATTICE_OK);
    ck_assert_int_eq(memcmp(ti.data, tj.data, sizeof(float) * ti.shape[0] * ti.shape[1]), 0);
    tiny_close(&u);
    tiny_close(&t);
}
END_TEST

START_TEST(test_block_norm_by_hand)
{
    /* Two layers, the second a block's entry, its sublayers' output
     * projections zeroed: the layer passes its input through, so the stream
     * after it is exactly the block-entry norm of the stream before it,
     * RMSNorm(h) * w = h / sqrt(mean(h^2) + eps) * w, computed here. */
    lattice_model_params p;
    block_params(&p, 2, 1);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    perturb_block_norms(t.m);
    ck_assert_int_eq(lattice_model_zero_layer_outputs(t.m, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward(t.m, grad_tokens, 2, 5), LATTICE_OK);
    const float *h1, *h2;
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 1, &h1), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_hidden(t.m, 2, &h2), LATTICE_OK);
    lattice_model_tensor_info w;
    ck_assert_int_eq(lattice_model_find_tensor(t.m, "model.layers.1.block_entry_norm.weight", &w),
                     LATTICE_OK);
    const int D = p.d_model;
    double worst = 0, scale = 0;
    for (int r = 0; r < 10; r++) {
        double ss = 0;
        for (int d = 0; d < D; d++)
            ss += (double)h1[r * D + d] * h1[r * D + d];
        const double rstd = 1.0 / sqrt(ss / D + 1e-5);
        for (int d = 0; d < D; d++) {
            const double want = h1[r * D + d] * rstd * w.data[d];
            worst = fmax(worst, fabs(h2[r * D + d] - want));
            scale = fmax(scale, fabs(want));
        }
    }
    ck_assert_msg(worst <= 1e-5 * scale, "block-entry norm off by %g (scale %g)", worst, scale);
    /* without the norm the same model passes the raw stream through */
    ck_assert_double_gt(scale, 0);
    tiny_close(&t);
}
END_TEST

START_TEST(test_block_norm_refused)
{
    lattice_model_params p;
    block_params(&p, 4, 2);
    lattice_backend *be = tu_backend("ref", 1);
    for (int pl = LATTICE_NORM_PLACEMENT_POST; pl <= LATTICE_NORM_PLACEMENT_PERI; pl++) {
        lattice_norm *n;
        ck_assert_int_eq(lattice_norm_create((lattice_norm_placement)pl, LATTICE_NORM_KIND_RMS, 1e-5f,
                                             &n), LATTICE_OK);
        lattice_model *m = NULL;
        ck_assert_int_eq(lattice_model_create(&p, n, be, &m), LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_null(m);
        ck_assert_ptr_nonnull(strstr(lattice_last_error(), "block_norm 2 needs the pre-norm"));
        int64_t np;
        size_t bytes;
        ck_assert_int_eq(lattice_model_estimate(&p, n, &np, &bytes), LATTICE_ERR_INVALID_CONFIG);
        lattice_norm_destroy(n);
    }
    char err[LATTICE_ERRMSG_SIZE];
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_NORM, 5);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "block_norm 5 not in 0..n_layers (4)"));
    p.lattice_reserved_block_norm = -1; /* as a program built against 1.0 could write it */
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    lattice_backend_destroy(be);
}
END_TEST

/* A model with blocks of 2 (weights perturbed) saved and loaded back: the
 * field comes back, the other stays 0, and the loss is the same. Returns it. */
static double save_and_reload(int rescale)
{
    lattice_model_params p;
    entry_params(&p, 4, 2, rescale);
    tiny t = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &p);
    perturb_block_norms(t.m);
    char path[64];
    snprintf(path, sizeof path, "/tmp/lattice-%s-%d.safetensors", rescale ? "brescale" : "bnorm",
             (int)getpid());
    ck_assert_int_eq(lattice_model_save(t.m, path), LATTICE_OK);
    lattice_model *back;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_int_eq(lattice_model_create_from_file(path, NULL, t.be, 2, 5, &back, err), LATTICE_OK);
    lattice_model_params q;
    q.size = sizeof q;
    ck_assert_int_eq(lattice_model_get_params(back, &q), LATTICE_OK);
    ck_assert_double_eq(tu_get_option(&q, LATTICE_MODEL_OPTION_BLOCK_NORM), rescale ? 0 : 2);
    ck_assert_double_eq(tu_get_option(&q, LATTICE_MODEL_OPTION_BLOCK_RESCALE), rescale ? 2 : 0);
    const double a = model_loss(t.m), b = model_loss(back);
    ck_assert_double_eq(a, b);
    lattice_model_destroy(back);
    unlink(path);
    tiny_close(&t);
    return a;
}

START_TEST(test_block_norm_saved_and_loaded)
{
    save_and_reload(0);
}
END_TEST

static void rescale_params(lattice_model_params *p, int layers, int block)
{
    entry_params(p, layers, block, 1);
}

START_TEST(test_block_rescale_gradients)
{
    check_entry_grads(1, _i);
}
END_TEST

START_TEST(test_block_rescale_refused)
{
    lattice_model_params p;
    rescale_params(&p, 4, 2);
    lattice_backend *be = tu_backend("ref", 1);
    lattice_norm *n;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-5f,
                                         &n), LATTICE_OK);
    lattice_model *m = NULL;
    ck_assert_int_eq(lattice_model_create(&p, n, be, &m), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_null(m);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "block_rescale 2 needs the pre-norm"));
    lattice_norm_destroy(n);
    char err[LATTICE_ERRMSG_SIZE];
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_NORM, 2);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "block_norm 2 and block_rescale 2 are both set"));
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_NORM, 0);
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, 5);
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "block_rescale 5 not in 0..n_layers (4)"));
    lattice_backend_destroy(be);
}
END_TEST

START_TEST(test_block_rescale_saved_and_loaded)
{
    const double a = save_and_reload(1);
    /* and the rescale acts: the same weights without it give another loss */
    lattice_model_params r;
    rescale_params(&r, 4, 0);
    tiny u = tiny_open("ref", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, &r);
    ck_assert_double_ne(model_loss(u.m), a);
    tiny_close(&u);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("block_norm");
    TCase *c = tcase_create("block_norm");
    tcase_set_timeout(c, 120);
    tcase_add_loop_test(c, test_block_norm_gradients, 0, 6);
    tcase_add_test(c, test_block_norm_tensors);
    tcase_add_test(c, test_block_norm_by_hand);
    tcase_add_test(c, test_block_norm_refused);
    tcase_add_test(c, test_block_norm_saved_and_loaded);
    tcase_add_loop_test(c, test_block_rescale_gradients, 0, 6);
    tcase_add_test(c, test_block_rescale_refused);
    tcase_add_test(c, test_block_rescale_saved_and_loaded);
    suite_add_tcase(s, c);
    return tu_run(s);
}
