/* lattice_model_create_grown: a model of larger capacity from a smaller one,
 * under every placement and model option: every tensor and setting copied,
 * the new layers as lattice_model_create draws them, the small model's logits
 * while only its layers are active, and bad arguments refused by name. */
#include "testutil.h"

/* One model setup the suite runs over. */
typedef struct grow_case {
    const char *what;
    lattice_norm_placement placement;
    lattice_norm_kind kind;
    float residual_scale;
    int tie, kv_heads, qk_norm, block_norm, block_rescale;
    float massive_offset;
} grow_case;

static const grow_case cases[] = {
    {"pre rms", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 0, 1, 1, 0, 0, 0.0f},
    {"post rms, residual scale 2", LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 2.0f, 0, 1,
     1, 0, 0, 0.0f},
    {"peri layernorm, no q/k norm", LATTICE_NORM_PLACEMENT_PERI, LATTICE_NORM_KIND_LAYER, 1.0f, 0,
     1, 0, 0, 0, 0.0f},
    {"pre tied, no grouping", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 1, 2, 1, 0,
     0, 0.0f},
    {"pre block_norm 2", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_LAYER, 1.0f, 0, 1, 1, 2, 0,
     0.0f},
    {"pre block_rescale 2", LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1.0f, 0, 1, 1, 0, 2,
     0.0f},
    {"post massive_offset 4", LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1.0f, 0, 1, 1, 0,
     0, 4.0f},
};
enum { N_CASES = (int)(sizeof cases / sizeof cases[0]) };

enum { BATCH = 2, SEQ = 5 };

static void case_params(const grow_case *c, int n_layers, lattice_model_params *p)
{
    tu_tiny_params(p);
    p->n_layers = n_layers;
    p->n_active_layers = 2;
    p->n_kv_heads = c->kv_heads;
    p->qk_norm = c->qk_norm;
    p->tie_embeddings = c->tie;
    tu_option(p, LATTICE_MODEL_OPTION_BLOCK_NORM, c->block_norm);
    tu_option(p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, c->block_rescale);
    tu_option(p, LATTICE_MODEL_OPTION_MASSIVE_OFFSET, c->massive_offset);
    tu_option(p, LATTICE_MODEL_OPTION_MASSIVE_LAYER, 1);
    tu_option(p, LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, 3);
    p->seed = 17;
}

static lattice_model *case_model(const grow_case *c, lattice_backend *be, int n_layers)
{
    lattice_model_params p;
    case_params(c, n_layers, &p);
    return tu_model(be, c->placement, c->kind, 1e-5f, c->residual_scale, &p);
}

/* Move every value off its initial one, as training would (a running
 * regular RMS to a positive value), so that a copy is told from a draw. */
static void perturb(lattice_model *m)
{
    tu_rng r = {99};
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        ck_assert_int_eq(lattice_model_get_tensor(m, i, &ti), LATTICE_OK);
        const long n = (long)(ti.shape[0] * ti.shape[1]);
        for (long k = 0; k < n; k++)
            ti.data[k] = ti.group == LATTICE_MODEL_GROUP_STATISTIC
                             ? 0.8f + 0.1f * (float)tu_uniform(&r)
                             : ti.data[k] + 0.05f * (float)tu_uniform(&r);
    }
}

static float *logits_of(lattice_model *m, const int32_t *tok)
{
    ck_assert_msg(lattice_model_forward(m, tok, BATCH, SEQ) == LATTICE_OK, "%s",
                  lattice_model_errmsg(m));
    const size_t n = (size_t)BATCH * SEQ * 11;
    float *out = malloc(sizeof(float) * n);
    ck_assert_ptr_nonnull(out);
    memcpy(out, lattice_model_get_logits(m), sizeof(float) * n);
    return out;
}

static int same_logits(const float *a, const float *b)
{
    return memcmp(a, b, sizeof(float) * (size_t)BATCH * SEQ * 11) == 0;
}

/* Whether model b holds tensor ta (by name) with the same shape and values. */
static int holds(lattice_model *b, const lattice_model_tensor_info *ta)
{
    lattice_model_tensor_info tb;
    if (lattice_model_find_tensor(b, ta->name, &tb) != LATTICE_OK)
        return 0;
    return tb.shape[0] == ta->shape[0] && tb.shape[1] == ta->shape[1] && tb.group == ta->group &&
           tb.layer == ta->layer &&
           memcmp(tb.data, ta->data, sizeof(float) * (size_t)(ta->shape[0] * ta->shape[1])) == 0;
}

static int trainable(lattice_model *m, lattice_model_group g, int layer)
{
    int t = -1;
    ck_assert_int_eq(lattice_model_get_trainable(m, g, layer, &t), LATTICE_OK);
    return t;
}

START_TEST(test_grow_keeps_everything)
{
    const grow_case *c = &cases[_i];
    static const int32_t tok[BATCH * SEQ] = {1, 4, 2, 9, 0, 3, 3, 10, 5, 7};
    lattice_backend *be = tu_backend("ref", 1);
    lattice_model *small = case_model(c, be, 3);
    perturb(small);
    ck_assert_int_eq(lattice_model_set_trainable(small, LATTICE_MODEL_GROUP_LAYER, 1, 0),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_model_set_trainable(small, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1, 0),
                     LATTICE_OK);
    float *small2 = logits_of(small, tok); /* 2 of 3 layers active */

    lattice_model *big = NULL;
    ck_assert_msg(lattice_model_create_grown(small, 5, 3, 0, NULL, &big) == LATTICE_OK,
                  "%s: %s", c->what, lattice_model_errmsg(small));
    ck_assert_ptr_nonnull(big);

    /* The settings: small's, at the new capacity. */
    lattice_model_params ps, pb;
    ps.size = pb.size = sizeof ps;
    ck_assert_int_eq(lattice_model_get_params(small, &ps), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_params(big, &pb), LATTICE_OK);
    ck_assert_int_eq(pb.n_layers, 5);
    ck_assert_int_eq(pb.max_batch, 3);
    ck_assert_int_eq(pb.max_seq, ps.max_seq);
    ck_assert_int_eq(pb.n_active_layers, 2);
    pb.n_layers = ps.n_layers;
    pb.max_batch = ps.max_batch;
    ck_assert_msg(memcmp(&ps, &pb, sizeof ps) == 0, "%s: params differ beyond the capacity",
                  c->what);
    ck_assert_int_eq(lattice_model_get_placement(big), c->placement);
    ck_assert_int_eq(lattice_model_get_active_layers(big), 2);
    ck_assert_int_eq(trainable(big, LATTICE_MODEL_GROUP_LAYER, 0), 1);
    ck_assert_int_eq(trainable(big, LATTICE_MODEL_GROUP_LAYER, 1), 0);
    ck_assert_int_eq(trainable(big, LATTICE_MODEL_GROUP_BOUNDARY_NORM, -1), 0);
    ck_assert_int_eq(trainable(big, LATTICE_MODEL_GROUP_EMBEDDING, -1), 1);
    for (int layer = 2; layer < 5; layer++)
        ck_assert_int_eq(trainable(big, LATTICE_MODEL_GROUP_LAYER, layer), 1);

    /* Every tensor of small, bit for bit; the rest are the new layers'. */
    int new_tensors = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(small); i++) {
        lattice_model_tensor_info ta;
        ck_assert_int_eq(lattice_model_get_tensor(small, i, &ta), LATTICE_OK);
        ck_assert_msg(holds(big, &ta), "%s: tensor %s not copied", c->what, ta.name);
    }
    /* The new layers as lattice_model_create draws them at this capacity. */
    lattice_model *fresh = case_model(c, be, 5);
    for (int i = 0; i < lattice_model_get_n_tensors(big); i++) {
        lattice_model_tensor_info tb;
        ck_assert_int_eq(lattice_model_get_tensor(big, i, &tb), LATTICE_OK);
        if (tb.layer < 3)
            continue;
        new_tensors++;
        ck_assert_msg(holds(fresh, &tb), "%s: new tensor %s not as created", c->what, tb.name);
    }
    ck_assert_int_eq(lattice_model_get_n_tensors(big),
                     lattice_model_get_n_tensors(small) + new_tensors);
    ck_assert_int_eq(lattice_model_get_n_tensors(big), lattice_model_get_n_tensors(fresh));
    ck_assert_int_eq(lattice_model_get_n_params(big), lattice_model_get_n_params(fresh));

    /* Only small's layers active: small's logits, bit for bit (2 active, then 3). */
    float *big2 = logits_of(big, tok);
    ck_assert_msg(same_logits(small2, big2), "%s: logits at 2 active layers differ", c->what);
    ck_assert_int_eq(lattice_model_set_active_layers(small, 3), LATTICE_OK);
    ck_assert_int_eq(lattice_model_set_active_layers(big, 3), LATTICE_OK);
    float *small3 = logits_of(small, tok), *big3 = logits_of(big, tok);
    ck_assert_msg(same_logits(small3, big3), "%s: logits at 3 active layers differ", c->what);
    /* A skip range goes with the model. */
    ck_assert_int_eq(lattice_model_set_skip(small, 1, 1), LATTICE_OK);
    lattice_model *skipping = NULL;
    ck_assert_int_eq(lattice_model_create_grown(small, 4, 0, 0, be, &skipping), LATTICE_OK);
    float *small_skip = logits_of(small, tok), *big_skip = logits_of(skipping, tok);
    ck_assert_msg(same_logits(small_skip, big_skip), "%s: the skip range was not kept", c->what);
    ck_assert_msg(!same_logits(small3, small_skip), "%s: the skip changed nothing", c->what);

    /* The new layers switch on, train, and take the larger batch. */
    ck_assert_int_eq(lattice_model_set_active_layers(big, 5), LATTICE_OK);
    float *big5 = logits_of(big, tok);
    ck_assert_msg(!same_logits(big3, big5), "%s: layers 3 and 4 changed nothing", c->what);
    int32_t tok3[3 * SEQ];
    for (int k = 0; k < 3 * SEQ; k++)
        tok3[k] = k % 11;
    ck_assert_int_eq(lattice_model_forward(big, tok3, 3, SEQ), LATTICE_OK);
    ck_assert_int_eq(lattice_model_forward(small, tok3, 3, SEQ), LATTICE_ERR_INVALID_ARGUMENT);
    float loss;
    ck_assert_int_eq(lattice_model_cross_entropy(big, tok3, NULL, &loss, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_model_backward(big), LATTICE_OK);

    /* Deterministic: a second grow is the same model. */
    lattice_model *again = NULL;
    ck_assert_int_eq(lattice_model_set_skip(small, 0, 0), LATTICE_OK);
    ck_assert_int_eq(lattice_model_create_grown(small, 5, 3, 0, NULL, &again), LATTICE_OK);
    for (int i = 0; i < lattice_model_get_n_tensors(again); i++) {
        lattice_model_tensor_info ta;
        ck_assert_int_eq(lattice_model_get_tensor(again, i, &ta), LATTICE_OK);
        ck_assert_msg(ta.layer < 3 || holds(fresh, &ta), "%s: %s differs between grows", c->what,
                      ta.name);
        if (ta.layer < 3)
            ck_assert_msg(holds(small, &ta), "%s: %s differs between grows", c->what, ta.name);
    }
    /* To its own capacity: a copy. */
    lattice_model *copy = NULL;
    ck_assert_int_eq(lattice_model_create_grown(small, 3, 0, 0, NULL, &copy), LATTICE_OK);
    ck_assert_int_eq(lattice_model_get_n_tensors(copy), lattice_model_get_n_tensors(small));
    float *copy3 = logits_of(copy, tok);
    ck_assert_msg(same_logits(small3, copy3), "%s: a grow to 3 layers is not a copy", c->what);

    free(small2);
    free(big2);
    free(small3);
    free(big3);
    free(small_skip);
    free(big_skip);
    free(big5);
    free(copy3);
    lattice_model_destroy(copy);
    lattice_model_destroy(again);
    lattice_model_destroy(skipping);
    lattice_model_destroy(fresh);
    lattice_model_destroy(big);
    lattice_model_destroy(small);
    lattice_backend_destroy(be);
}
END_TEST

/* Each refusal names what is wrong, leaves *out NULL and small as it was. */
static void expect_refusal(lattice_model *small, int n_layers, int max_batch, int max_seq,
                           lattice_status status, const char *reason)
{
    lattice_model *out = (lattice_model *)small; /* anything but NULL */
    const lattice_status st =
        lattice_model_create_grown(small, n_layers, max_batch, max_seq, NULL, &out);
    ck_assert_msg(st == status, "grow to %d (%d, %d): status %d, expected %d (%s)", n_layers,
                  max_batch, max_seq, (int)st, (int)status, lattice_last_error());
    ck_assert_ptr_null(out);
    ck_assert_msg(strstr(lattice_last_error(), reason), "'%s' does not say '%s'",
                  lattice_last_error(), reason);
    ck_assert_msg(strstr(lattice_model_errmsg(small), reason), "the model's '%s' does not say '%s'",
                  lattice_model_errmsg(small), reason);
    ck_assert_int_eq(lattice_model_get_active_layers(small), 2);
}

START_TEST(test_grow_refuses_bad_arguments)
{
    lattice_backend *be = tu_backend("ref", 1);
    lattice_model *small = case_model(&cases[0], be, 3);
    expect_refusal(small, 2, 0, 0, LATTICE_ERR_INVALID_ARGUMENT,
                   "n_layers 2 is below the model's 3 layers");
    expect_refusal(small, -1, 0, 0, LATTICE_ERR_INVALID_ARGUMENT, "n_layers -1 is below");
    expect_refusal(small, 5, -1, 0, LATTICE_ERR_INVALID_ARGUMENT, "max_batch -1");
    expect_refusal(small, 5, 0, -7, LATTICE_ERR_INVALID_ARGUMENT, "max_seq -7");
    expect_refusal(small, 5000, 0, 0, LATTICE_ERR_INVALID_CONFIG, "n_layers 5000 out of range");
    expect_refusal(small, 5, 1 << 30, 0, LATTICE_ERR_INVALID_CONFIG, "max_batch 1073741824");

    lattice_model *out = (lattice_model *)small;
    ck_assert_int_eq(lattice_model_create_grown(NULL, 5, 0, 0, be, &out),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_null(out);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "lattice_model_create_grown: invalid "
                                                       "argument: small is NULL"));
    ck_assert_int_eq(lattice_model_create_grown(small, 5, 0, 0, be, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "out is NULL"));
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(small), "out is NULL"));
    lattice_model_destroy(small);
    lattice_backend_destroy(be);
}
END_TEST

static Suite *grow_suite(void)
{
    Suite *s = suite_create("model-grow");
    TCase *k = tcase_create("keeps");
    tcase_set_timeout(k, 120);
    tcase_add_loop_test(k, test_grow_keeps_everything, 0, N_CASES);
    suite_add_tcase(s, k);
    TCase *b = tcase_create("bad_input");
    tcase_add_test(b, test_grow_refuses_bad_arguments);
    suite_add_tcase(s, b);
    return s;
}

int main(void)
{
    return tu_run(grow_suite());
}
