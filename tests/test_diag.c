/* Diagnostics on constructed cases with known answers. */
#include "testutil.h"

#include <limits.h>

typedef struct setup {
    lattice_backend *be;
    lattice_model *m;
    lattice_diag *d;
} setup_t;

static setup_t open_setup(lattice_norm_placement pl, uint64_t seed)
{
    setup_t s;
    s.be = tu_backend("ref", 1);
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 9;
    p.d_model = 8;
    p.n_layers = 3;
    p.n_active_layers = 3;
    p.n_heads = 2;
    p.n_kv_heads = 2;
    p.head_dim = 4;
    p.d_ff = 16;
    p.max_batch = 2;
    p.max_seq = 5;
    p.seed = seed;
    p.init_std = 0.3f;
    s.m = tu_model(s.be, pl, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f, &p);
    ck_assert_int_eq(lattice_diag_create(s.m, &s.d), LATTICE_OK);
    return s;
}

static void close_setup(setup_t *s)
{
    lattice_diag_destroy(s->d);
    lattice_model_destroy(s->m);
    lattice_backend_destroy(s->be);
}

static const int32_t tok[10] = {0, 3, 4, 1, 2, 0, 8, 7, 5, 6};
static const int32_t tgt[10] = {3, 4, 1, 2, 7, 8, 7, 5, 6, 1};

START_TEST(test_identity_block_is_invisible)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 1);
    ck_assert_int_eq(lattice_model_zero_layer_outputs(s.m, 1), LATTICE_OK);
    lattice_diag_block_removal_result r = {.size = sizeof(r)};
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 1, 1, &r), LATTICE_OK);
    ck_assert_double_eq(r.dce, 0.0);
    ck_assert_double_eq_tol(r.angle, 0.0, 1e-6);
    /* a real block moves the stream and the loss */
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 2, 1, &r), LATTICE_OK);
    ck_assert_double_gt(r.angle, 1e-3);
    ck_assert_double_ne(r.dce, 0.0);
    ck_assert_double_eq_tol(r.ce_removed - r.ce_full, r.dce, 1e-12);
    /* and the skip is cleared afterwards */
    const float *h1, *h2;
    ck_assert_int_eq(lattice_model_forward(s.m, tok, 2, 5), LATTICE_OK);
    lattice_model_get_hidden(s.m, 2, &h1);
    lattice_model_get_hidden(s.m, 3, &h2);
    ck_assert_int_ne(memcmp(h1, h2, sizeof(float) * 10 * 8), 0);
    close_setup(&s);
}
END_TEST

START_TEST(test_scaled_stream_scales_rms)
{
    /* Pre-norm with identity layers: every boundary is the embedding. Scale
     * the embedding by c and every RMS statistic scales by c, kurtosis not. */
    setup_t a = open_setup(LATTICE_NORM_PLACEMENT_PRE, 2), b = open_setup(LATTICE_NORM_PLACEMENT_PRE, 2);
    const float c = 3.5f;
    lattice_model_tensor_info e;
    lattice_model_find_tensor(b.m, "model.embed_tokens.weight", &e);
    for (long j = 0; j < e.shape[0] * e.shape[1]; j++)
        e.data[j] *= c;
    for (int l = 0; l < 3; l++) {
        lattice_model_zero_layer_outputs(a.m, l);
        lattice_model_zero_layer_outputs(b.m, l);
    }
    lattice_diag_boundary_scale_result sa[4 * 3] = {{.size = sizeof(sa[0])}}, sb[4 * 3] = {{.size = sizeof(sb[0])}};
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(a.d, tok, NULL, 2, 5, NULL, 2, sa, 12), LATTICE_OK);
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(b.d, tok, NULL, 2, 5, NULL, 2, sb, 12), LATTICE_OK);
    for (int i = 0; i < 12; i++) {
        ck_assert_int_eq(sa[i].count, sb[i].count);
        ck_assert_double_eq_tol(sb[i].mean, c * sa[i].mean, 1e-5 * sb[i].mean);
        ck_assert_double_eq_tol(sb[i].std, c * sa[i].std, 1e-5 * sb[i].mean);
        ck_assert_double_eq_tol(sb[i].max, c * sa[i].max, 1e-5 * sb[i].max);
        if (sa[i].count > 1)
            ck_assert_double_eq_tol(sb[i].kurtosis, sa[i].kurtosis, 1e-3);
    }
    /* default classes: position 0 of each row is class 1 */
    ck_assert_int_eq(sa[1].count, 2);
    ck_assert_int_eq(sa[0].count, 8);
    ck_assert_int_eq(sa[2].count, 10);
    close_setup(&a);
    close_setup(&b);
}
END_TEST

START_TEST(test_known_rms)
{
    /* Token 0's embedding has RMS 5, every other token's RMS 1: boundary 0
     * (the embedding under pre-norm) shows exactly that per class. */
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 3);
    lattice_model_tensor_info e;
    lattice_model_find_tensor(s.m, "model.embed_tokens.weight", &e);
    for (int v = 0; v < 9; v++)
        for (int j = 0; j < 8; j++)
            e.data[v * 8 + j] = v == 0 ? (j % 2 ? 5.0f : -5.0f) : 1.0f;
    uint8_t mask[10] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 0};
    lattice_diag_boundary_scale_result st[4 * 3] = {{.size = sizeof(st[0])}};
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, mask, 2, 5, NULL, 2, st, 12), LATTICE_OK);
    ck_assert_double_eq_tol(st[1].mean, 5.0, 1e-6); /* boundary tokens: both are token 0 */
    ck_assert_double_eq_tol(st[1].std, 0.0, 1e-6);
    ck_assert_double_eq_tol(st[0].mean, 1.0, 1e-6);
    ck_assert_int_eq(st[0].count, 7); /* the masked token is not counted */
    ck_assert_double_eq_tol(st[2].mean, (2 * 5.0 + 7 * 1.0) / 9, 1e-6);
    ck_assert_double_eq_tol(st[2].max, 5.0, 1e-6);
    /* two values a, b with weights 2/9, 7/9: kurtosis = (p^3 + q^3) / (p q) */
    double p = 2.0 / 9, q = 7.0 / 9;
    ck_assert_double_eq_tol(st[2].kurtosis, (p * p * p + q * q * q) / (p * q), 1e-6);
    /* custom classes */
    uint8_t cls[10] = {0, 1, 2, 0, 1, 2, 0, 1, 2, 0};
    lattice_diag_boundary_scale_result c3[4 * 4] = {{.size = sizeof(c3[0])}};
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, cls, 3, c3, 16), LATTICE_OK);
    ck_assert_int_eq(c3[0].count + c3[1].count + c3[2].count, c3[3].count);
    close_setup(&s);
}
END_TEST


/* Queries and keys zeroed: every score is 0, so attention is uniform over the
 * causal keys and the mass on position 0 at query t is 1 / (t + 1). The
 * values, the top activation and its median are computed here by hand from
 * the tensors and the hidden states. */
START_TEST(test_attention_sinks_by_hand)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 5);
    const int L = 3, H = 2, hd = 4, D = 8, B = 2, T = 5;
    for (int i = 0; i < L; i++) {
        char name[96];
        lattice_model_tensor_info w;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.q_proj.weight", i);
        ck_assert_int_eq(lattice_model_find_tensor(s.m, name, &w), LATTICE_OK);
        memset(w.data, 0, sizeof(float) * (size_t)(w.shape[0] * w.shape[1]));
        snprintf(name, sizeof name, "model.layers.%d.self_attn.k_proj.weight", i);
        ck_assert_int_eq(lattice_model_find_tensor(s.m, name, &w), LATTICE_OK);
        memset(w.data, 0, sizeof(float) * (size_t)(w.shape[0] * w.shape[1]));
    }
    lattice_diag_attention_sinks_result out[3] = {{.size = sizeof(out[0])}};
    double heads[3 * 2];
    /* mass 0.3208: every head above 0.3 */
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, B, T, 0.3, out, 3, heads, 6), LATTICE_OK);
    double mass = 0; /* mean over t = 1..4 of 1 / (t + 1) */
    for (int t = 1; t < T; t++)
        mass += 1.0 / (t + 1) / (T - 1);
    for (int i = 0; i < L; i++) {
        ck_assert_double_eq_tol(out[i].mass0, mass, 1e-6);
        for (int h = 0; h < H; h++)
            ck_assert_double_eq_tol(heads[i * H + h], mass, 1e-6);
        ck_assert_double_eq(out[i].sink_rate, 1.0);
        /* values of layer i: v = RMSNorm(h_i) W_v, the norm weights being 1 */
        const float *h;
        ck_assert_int_eq(lattice_model_get_hidden(s.m, i, &h), LATTICE_OK);
        char name[96];
        lattice_model_tensor_info wv;
        snprintf(name, sizeof name, "model.layers.%d.self_attn.v_proj.weight", i);
        ck_assert_int_eq(lattice_model_find_tensor(s.m, name, &wv), LATTICE_OK);
        double n0 = 0, nr = 0;
        for (int r = 0; r < B * T; r++) {
            double ms = 0;
            for (int j = 0; j < D; j++)
                ms += (double)h[r * D + j] * h[r * D + j] / D;
            const double rs = 1.0 / sqrt(ms + 1e-6);
            for (int g = 0; g < H; g++) { /* kv heads = heads here */
                double sq = 0;
                for (int c = 0; c < hd; c++) {
                    double v = 0;
                    for (int j = 0; j < D; j++)
                        v += h[r * D + j] * rs * wv.data[(g * hd + c) * D + j];
                    sq += v * v;
                }
                if (r % T == 0)
                    n0 += sqrt(sq) / (B * H);
                else
                    nr += sqrt(sq) / (B * H * (T - 1));
            }
        }
        ck_assert_double_eq_tol(out[i].value_norm0, n0 / nr, 1e-4 * (n0 / nr));
        /* the output stream's top |activation| over its median */
        const float *o;
        ck_assert_int_eq(lattice_model_get_hidden(s.m, i + 1, &o), LATTICE_OK);
        double a[2 * 5 * 8], top = -1;
        int at = -1;
        for (int k = 0; k < B * T * D; k++) {
            a[k] = fabs(o[k]);
            if (a[k] > top) {
                top = a[k];
                at = k;
            }
        }
        for (int x = 1; x < B * T * D; x++) /* insertion sort */
            for (int y = x; y > 0 && a[y - 1] > a[y]; y--) {
                const double t = a[y];
                a[y] = a[y - 1];
                a[y - 1] = t;
            }
        const double median = 0.5 * (a[B * T * D / 2 - 1] + a[B * T * D / 2]);
        ck_assert_double_eq_tol(out[i].top_ratio, top / median, 1e-5 * top / median);
        ck_assert_int_eq(out[i].top_token, at / D);
        ck_assert_int_eq(out[i].top_dim, at % D);
    }
    /* a skipped layer: not measured */
    ck_assert_int_eq(lattice_model_set_skip(s.m, 1, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, B, T, 0.4, out, 3, NULL, 0), LATTICE_OK);
    ck_assert(isnan(out[1].mass0) && out[1].top_token == -1);
    ck_assert(!isnan(out[2].mass0));
    ck_assert_double_eq(out[2].sink_rate, 0.0); /* no head above 0.4 */
    /* bad input */
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, B, T, 0.4, out, 2, NULL, 0),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "out holds 2 layers"));
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, B, T, 1.5, out, 3, NULL, 0),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, B, T, 0.4, out, 3, heads, 5),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(NULL, tok, B, T, 0.4, out, 3, NULL, 0),
                     LATTICE_ERR_INVALID_ARGUMENT);
    close_setup(&s);
}
END_TEST

START_TEST(test_loss_response)
{
    /* flat at 2.0, then at the append a jump to 2.5 decaying linearly to 2.0 over 50 steps */
    double loss[300];
    for (int i = 0; i < 300; i++)
        loss[i] = i < 100 ? 2.0 : i < 150 ? 2.5 - 0.01 * (i - 100) : 2.0;
    lattice_diag_loss_response_result r = {.size = sizeof(r)};
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 100, &r), LATTICE_OK);
    ck_assert_double_eq_tol(r.baseline, 2.0, 1e-12);
    ck_assert_double_eq_tol(r.jump, 0.5, 1e-12);
    ck_assert_double_eq_tol(r.area, 0.01 * (50 * 51) / 2, 1e-9); /* 0.5 + 0.49 + ... + 0.01 */
    /* the trailing 20-step mean first reaches 2.0 with the window of steps
     * 150..169, all past the decay: 70 steps after the append at 100 */
    ck_assert_int_eq(r.recovery, 70);
    /* never recovers */
    for (int i = 100; i < 300; i++)
        loss[i] = 3.0;
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 100, &r), LATTICE_OK);
    ck_assert_int_eq(r.recovery, -1);
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 10, 20, 100, &r), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 300, 20, 100, &r), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_loss_response(NULL, 300, 100, 20, 100, &r), LATTICE_ERR_INVALID_ARGUMENT);
    /* a NaN or infinity anywhere it reads is refused, naming the step; one before the window is not read */
    const double bad[] = {NAN, INFINITY, -INFINITY};
    const int at[] = {80, 99, 100, 299};
    for (int b = 0; b < 3; b++)
        for (int k = 0; k < 4; k++) {
            const double keep = loss[at[k]];
            loss[at[k]] = bad[b];
            ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 100, &r),
                             LATTICE_ERR_NON_FINITE);
            char want[32];
            snprintf(want, sizeof want, "loss %d is ", at[k]);
            ck_assert_ptr_nonnull(strstr(lattice_last_error(), want));
            loss[at[k]] = keep;
        }
    /* finite losses whose sums overflow: refused, not an Inf baseline */
    double huge[300];
    for (int i = 0; i < 300; i++)
        huge[i] = 1e308;
    ck_assert_int_eq(lattice_diag_measure_loss_response(huge, 300, 100, 20, 100, &r),
                     LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "pass the double range"));
    /* or whose trailing window's sum overflows after the horizon */
    for (int i = 0; i < 300; i++)
        huge[i] = i < 100 ? 2.0 : i < 150 ? 3.0 : 1e308; /* no recovery before 150 */
    ck_assert_int_eq(lattice_diag_measure_loss_response(huge, 300, 100, 20, 40, &r),
                     LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "trailing window's sum"));
    loss[79] = NAN;
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 100, &r), LATTICE_OK);
    /* nor one past both the area's horizon and the recovery (70 steps after the append) */
    for (int i = 0; i < 300; i++)
        loss[i] = i < 100 ? 2.0 : i < 150 ? 2.5 - 0.01 * (i - 100) : 2.0;
    loss[250] = NAN;
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 100, &r), LATTICE_OK);
    ck_assert_int_eq(r.recovery, 70);
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 300, 100, 20, 200, &r),
                     LATTICE_ERR_NON_FINITE); /* a horizon that reaches it */
}
END_TEST

START_TEST(test_bad_input)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_POST, 4);
    lattice_diag_boundary_scale_result st[16] = {{.size = sizeof(st[0])}};
    lattice_diag_block_removal_result r = {.size = sizeof(r)};
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 3, st, 16),
                     LATTICE_ERR_INVALID_ARGUMENT); /* default classes are two */
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 2, st, 5),
                     LATTICE_ERR_INVALID_ARGUMENT); /* out too small */
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 3, 5, NULL, 2, st, 16),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 2, 2, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, NULL, NULL, 2, 5, 0, 1, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_diag_measure_block_removal(NULL, tok, tgt, NULL, 2, 5, 0, 1, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_str_ne(lattice_diag_errmsg(s.d), "");
    lattice_diag *d;
    ck_assert_int_eq(lattice_diag_create(NULL, &d), LATTICE_ERR_INVALID_ARGUMENT);
    /* a NaN weight: the figures would be NaN, so each measure refuses, as
     * block removal does */
    lattice_model_tensor_info ti;
    ck_assert_int_eq(lattice_model_find_tensor(s.m, "model.layers.0.mlp.down_proj.weight", &ti),
                     LATTICE_OK);
    ti.data[0] = NAN;
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 2, st, 16),
                     LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "not finite"));
    lattice_diag_attention_sinks_result sk[3] = {{.size = sizeof(sk[0])}};
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, 2, 5, 0.3, sk, 3, NULL, 0),
                     LATTICE_ERR_NON_FINITE);
    ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "layer 0's output is nan"));
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 0, 1, &r),
                     LATTICE_ERR_NON_FINITE);
    close_setup(&s);
}
END_TEST

/* Hostile integers for every public diag function: a status, never a crash, and
 * OK only for ranges that are truly inside. */
START_TEST(test_hostile_ranges)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 5);
    const int v[] = {INT_MIN, INT_MIN + 1, -2, -1, 0, 1, 2, 3, 4, INT_MAX - 1, INT_MAX};
    const int nv = (int)(sizeof v / sizeof v[0]);
    const int k = lattice_model_get_active_layers(s.m);
    for (int a = 0; a < nv; a++)
        for (int b = 0; b < nv; b++) {
            lattice_diag_block_removal_result r;
            memset(&r, 0, sizeof r);
            r.size = sizeof r;
            const int64_t first = v[a], count = v[b];
            const int inside = first >= 0 && count >= 1 && first + count <= k;
            lattice_status st = lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, v[a], v[b], &r);
            ck_assert_msg(st == (inside ? LATTICE_OK : LATTICE_ERR_INVALID_ARGUMENT),
                          "block_removal(%d, %d): %s", v[a], v[b], lattice_status_string(st));
            if (inside)
                ck_assert(isfinite(r.ce_full) && isfinite(r.ce_removed) && r.angle >= 0.0 &&
                          r.angle <= 1.0);
            /* batch and seq hostile too */
            st = lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, v[a], v[b], 0, 1, &r);
            ck_assert_int_eq(st, v[a] >= 1 && v[a] <= 2 && v[b] >= 1 && v[b] <= 5
                                     ? LATTICE_OK : LATTICE_ERR_INVALID_ARGUMENT);
            lattice_diag_boundary_scale_result out[64] = {{.size = sizeof(out[0])}};
            st = lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, v[a], out,
                                             v[b] > 64 ? 64 : v[b]);
            ck_assert_int_eq(st, v[a] == 2 && v[b] >= (k + 1) * 3 ? LATTICE_OK
                                                                 : LATTICE_ERR_INVALID_ARGUMENT);
        }
    /* loss response: append step, window and horizon at the int64 edges */
    const double losses[8] = {3, 3, 3, 5, 4, 3, 2, 2};
    const int64_t w[] = {INT64_MIN, -1, 0, 1, 2, 3, 7, 8, INT64_MAX - 1, INT64_MAX};
    const int nw = (int)(sizeof w / sizeof w[0]);
    for (int a = 0; a < nw; a++)
        for (int b = 0; b < nw; b++)
            for (int c = 0; c < nw; c++) {
                lattice_diag_loss_response_result r = {.size = sizeof(r)};
                lattice_status st = lattice_diag_measure_loss_response(losses, 8, w[a], w[b], w[c], &r);
                const int ok = w[b] >= 1 && w[c] >= 0 && w[a] >= w[b] && w[a] < 8;
                ck_assert_msg(st == (ok ? LATTICE_OK : LATTICE_ERR_INVALID_ARGUMENT),
                              "loss_response(%lld, %lld, %lld)", (long long)w[a], (long long)w[b],
                              (long long)w[c]);
                if (ok)
                    ck_assert(isfinite(r.area) && r.area >= 0.0);
            }
    close_setup(&s);
}
END_TEST

/* A caller built against a later header has a larger struct: its size is the
 * stride of its array; the library writes its own fields into each entry, says
 * so in each entry's size, and leaves the bytes past them alone. */
typedef struct {
    lattice_diag_boundary_scale_result r;
    double later[3];
} wide_scale;
typedef struct {
    lattice_diag_attention_sinks_result r;
    int64_t later[2];
} wide_sinks;
typedef struct {
    lattice_diag_block_removal_result r;
    double later;
} wide_removal;

START_TEST(test_results_by_size)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_POST, 2);
    lattice_diag_boundary_scale_result plain[12] = {{.size = sizeof(plain[0])}};
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 2, plain, 12),
                     LATTICE_OK);
    wide_scale *w = malloc(sizeof(wide_scale) * 12); /* heap-exact: ASan sees any overrun */
    memset(w, 0xA5, sizeof(wide_scale) * 12);
    w[0].r.size = sizeof(wide_scale);
    ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 2, &w[0].r, 12),
                     LATTICE_OK);
    for (int i = 0; i < 12; i++) {
        ck_assert_uint_eq(plain[i].size, sizeof(lattice_diag_boundary_scale_result));
        ck_assert_uint_eq(w[i].r.size, sizeof(lattice_diag_boundary_scale_result));
        ck_assert_int_eq(w[i].r.count, plain[i].count);
        ck_assert_double_eq(w[i].r.mean, plain[i].mean);
        ck_assert_double_eq(w[i].r.kurtosis, plain[i].kurtosis);
        for (int k = 0; k < 3; k++) {
            uint64_t bits;
            memcpy(&bits, &w[i].later[k], sizeof(bits));
            ck_assert_uint_eq(bits, 0xA5A5A5A5A5A5A5A5ULL);
        }
    }
    free(w);

    lattice_diag_attention_sinks_result sk[3] = {{.size = sizeof(sk[0])}};
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, 2, 5, 0.3, sk, 3, NULL, 0),
                     LATTICE_OK);
    wide_sinks ws[3];
    memset(ws, 0x5A, sizeof(ws));
    ws[0].r.size = sizeof(ws[0]);
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, 2, 5, 0.3, &ws[0].r, 3, NULL, 0),
                     LATTICE_OK);
    for (int i = 0; i < 3; i++) {
        ck_assert_uint_eq(ws[i].r.size, sizeof(lattice_diag_attention_sinks_result));
        ck_assert_double_eq(ws[i].r.mass0, sk[i].mass0);
        ck_assert_int_eq(ws[i].r.top_token, sk[i].top_token);
        ck_assert_uint_eq((uint64_t)ws[i].later[0], 0x5A5A5A5A5A5A5A5AULL);
    }

    wide_removal wr;
    memset(&wr, 0x5A, sizeof(wr));
    wr.r.size = sizeof(wr);
    lattice_diag_block_removal_result r = {.size = sizeof(r)};
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 1, 1, &r), LATTICE_OK);
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 1, 1, &wr.r),
                     LATTICE_OK);
    ck_assert_uint_eq(r.size, sizeof(r));
    ck_assert_uint_eq(wr.r.size, sizeof(r));
    ck_assert_double_eq(wr.r.dce, r.dce);
    uint64_t bits;
    memcpy(&bits, &wr.later, sizeof(bits));
    ck_assert_uint_eq(bits, 0x5A5A5A5A5A5A5A5AULL);
    close_setup(&s);
}
END_TEST

/* A size the library cannot trust (unset, short, or not a whole number of the
 * struct's alignment) is refused before anything is written. */
START_TEST(test_results_bad_size)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 3);
    const size_t bad[] = {0, sizeof(lattice_diag_boundary_scale_result) - 8,
                          sizeof(lattice_diag_boundary_scale_result) + 4};
    for (int i = 0; i < 3; i++) {
        lattice_diag_boundary_scale_result st[12], before[12];
        memset(st, 0x33, sizeof(st));
        st[0].size = bad[i];
        memcpy(before, st, sizeof(st));
        ck_assert_int_eq(lattice_diag_measure_boundary_scale(s.d, tok, NULL, 2, 5, NULL, 2, st, 12),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(memcmp(st, before, sizeof(st)), 0);
        ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "out[0].size"));
        ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "lattice_diag_boundary_scale_result"));

        lattice_diag_attention_sinks_result sk[3], sk0[3];
        memset(sk, 0x33, sizeof(sk));
        sk[0].size = i == 0 ? 0 : i == 1 ? sizeof(sk[0]) - 8 : sizeof(sk[0]) + 4;
        memcpy(sk0, sk, sizeof(sk));
        ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, 2, 5, 0.3, sk, 3, NULL, 0),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(memcmp(sk, sk0, sizeof(sk)), 0);
    }
    lattice_diag_block_removal_result r, r0;
    memset(&r, 0x33, sizeof(r));
    r.size = sizeof(r) - 8;
    r0 = r;
    ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 1, 1, &r),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(memcmp(&r, &r0, sizeof(r)), 0);
    ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "out->size"));
    const double loss[4] = {1, 1, 2, 1};
    lattice_diag_loss_response_result lr = {.size = 0}, lr0;
    lr0 = lr;
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 4, 2, 1, 2, &lr),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(memcmp(&lr, &lr0, sizeof(lr)), 0);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "out->size 0"));
    close_setup(&s);
}
END_TEST

/* An array whose first size was never set (an uninitialised array: stack
 * garbage) is refused: its stride would write past the caller's array
 * (issue 48 part 1: a size of 4096 wrote 45 KiB past a 12-entry array).
 * The arrays are large enough for the stride, so that before the bound the
 * call returned LATTICE_OK instead of crashing the test. */
START_TEST(test_results_size_bounded)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 3);
    const size_t bad[] = {4096, 2 * sizeof(lattice_diag_attention_sinks_result) + 8};
    for (int i = 0; i < 2; i++) {
        const size_t bytes = 12 * bad[i];
        unsigned char *buf = malloc(bytes), *before = malloc(bytes);
        memset(buf, 0x33, bytes);
        memcpy(buf, &bad[i], sizeof bad[i]);
        memcpy(before, buf, bytes);
        ck_assert_int_eq(lattice_diag_measure_boundary_scale(
                             s.d, tok, NULL, 2, 5, NULL, 2,
                             (lattice_diag_boundary_scale_result *)(void *)buf, 12),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "never set"));
        ck_assert_int_eq(memcmp(buf, before, bytes), 0);
        ck_assert_int_eq(lattice_diag_measure_attention_sinks(
                             s.d, tok, 2, 5, 0.3,
                             (lattice_diag_attention_sinks_result *)(void *)buf, 3, NULL, 0),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(lattice_diag_errmsg(s.d), "out[0].size"));
        ck_assert_int_eq(memcmp(buf, before, bytes), 0);
        lattice_diag_block_removal_result *r = (lattice_diag_block_removal_result *)(void *)buf;
        ck_assert_int_eq(lattice_diag_measure_block_removal(s.d, tok, tgt, NULL, 2, 5, 1, 1, r),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(memcmp(buf, before, bytes), 0);
        const double loss[4] = {1, 1, 2, 1};
        ck_assert_int_eq(lattice_diag_measure_loss_response(
                             loss, 4, 2, 1, 2, (lattice_diag_loss_response_result *)(void *)buf),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_int_eq(memcmp(buf, before, bytes), 0);
        free(buf);
        free(before);
    }
    close_setup(&s);
}
END_TEST

/* Figures known by hand: a loss that jumps at step 20 and falls back; a
 * skipped layer's sinks are NaN (its head masses too). */
START_TEST(test_response_and_skipped_sinks)
{
    setup_t s = open_setup(LATTICE_NORM_PLACEMENT_PRE, 4);
    /* flat at 1, a jump to 1.5 at step 20 falling back to 1 at step 45: the
     * trailing 5-step mean is back at the baseline over steps 45..49 */
    double loss[60];
    for (int i = 0; i < 60; i++)
        loss[i] = i < 20 ? 1.0 : fmax(1.0, 1.5 - 0.02 * (i - 20));
    lattice_diag_loss_response_result lr = {.size = sizeof(lr)};
    ck_assert_int_eq(lattice_diag_measure_loss_response(loss, 60, 20, 5, 10, &lr), LATTICE_OK);
    ck_assert_double_eq(lr.baseline, 1.0);
    ck_assert_double_eq_tol(lr.jump, 0.5, 1e-12);
    ck_assert_int_eq(lr.recovery, 30);
    lattice_diag_attention_sinks_result sk[3] = {{.size = sizeof(sk[0])}};
    double hm[6];
    ck_assert_int_eq(lattice_model_set_skip(s.m, 1, 1), LATTICE_OK);
    ck_assert_int_eq(lattice_diag_measure_attention_sinks(s.d, tok, 2, 5, 0.3, sk, 3, hm, 6), LATTICE_OK);
    ck_assert(isnan(sk[1].mass0));
    ck_assert(isnan(sk[1].value_norm0));
    ck_assert_int_eq(sk[1].top_token, -1);
    ck_assert(isnan(hm[2]) && isnan(hm[3]));
    ck_assert(!isnan(sk[0].mass0) && !isnan(sk[2].mass0));
    close_setup(&s);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("diag");
    TCase *tc = tcase_create("diag");
    tcase_add_test(tc, test_identity_block_is_invisible);
    tcase_add_test(tc, test_scaled_stream_scales_rms);
    tcase_add_test(tc, test_known_rms);
    tcase_add_test(tc, test_attention_sinks_by_hand);
    tcase_add_test(tc, test_loss_response);
    tcase_add_test(tc, test_bad_input);
    tcase_add_test(tc, test_hostile_ranges);
    tcase_add_test(tc, test_results_by_size);
    tcase_add_test(tc, test_results_bad_size);
    tcase_add_test(tc, test_results_size_bounded);
    tcase_add_test(tc, test_response_and_skipped_sinks);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
