/* The model options by key (lattice_model_params_set_option, _get_option,
 * lattice_model_option_bounds): each key reaches its slot of
 * lattice_model_params and comes back; the bounds are what the setter
 * enforces; unknown keys, NULL and unset structs are refused and change
 * nothing. */
#include "testutil.h"

#include <stddef.h>

/* What the header documents for each key: the oracle. */
static const struct {
    lattice_model_option key;
    const char *name;
    size_t slot;
    int integer;
    double lo, hi;
} keys[] = {
    {LATTICE_MODEL_OPTION_BLOCK_NORM, "block_norm",
     offsetof(lattice_model_params, lattice_reserved_block_norm), 1, 0, 4096},
    {LATTICE_MODEL_OPTION_BLOCK_RESCALE, "block_rescale",
     offsetof(lattice_model_params, lattice_reserved_block_rescale), 1, 0, 4096},
    {LATTICE_MODEL_OPTION_MASSIVE_OFFSET, "massive_offset",
     offsetof(lattice_model_params, lattice_reserved_massive_offset), 0, 0, 1e6},
    {LATTICE_MODEL_OPTION_MASSIVE_LAYER, "massive_layer",
     offsetof(lattice_model_params, lattice_reserved_massive_layer), 1, 1, 4095},
    {LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, "massive_channel",
     offsetof(lattice_model_params, lattice_reserved_massive_channel), 1, 0, 1048575},
};
#define N_KEYS ((int)(sizeof keys / sizeof keys[0]))

static double slot_value(const lattice_model_params *p, int i)
{
    const char *at = (const char *)p + keys[i].slot;
    return keys[i].integer ? *(const int *)at : *(const float *)at;
}

/* value is refused with status and a message naming reason; p is unchanged. */
static void refused(lattice_model_params *p, lattice_model_option key, double value,
                    lattice_status status, const char *reason)
{
    lattice_model_params before = *p;
    ck_assert_int_eq(lattice_model_params_set_option(p, key, value), status);
    ck_assert_msg(strstr(lattice_last_error(), reason), "'%s' lacks '%s'", lattice_last_error(),
                  reason);
    ck_assert(memcmp(&before, p, sizeof before) == 0);
}

START_TEST(test_each_key_round_trips)
{
    const int i = _i;
    lattice_model_params p;
    lattice_model_params_init(&p);
    const double mid = keys[i].integer ? 3 : 2.5;
    const double values[] = {keys[i].lo, keys[i].hi, mid};
    for (int k = 0; k < 3; k++) {
        ck_assert_int_eq(lattice_model_params_set_option(&p, keys[i].key, values[k]), LATTICE_OK);
        double got = -7;
        ck_assert_int_eq(lattice_model_params_get_option(&p, keys[i].key, &got), LATTICE_OK);
        ck_assert_double_eq(got, values[k]);
        ck_assert_double_eq(slot_value(&p, i), values[k]); /* the slot the library reads */
    }
}
END_TEST

START_TEST(test_bounds_are_what_the_setter_enforces)
{
    const int i = _i;
    double lo = -7, hi = -7;
    ck_assert_int_eq(lattice_model_option_bounds(keys[i].key, &lo, &hi), LATTICE_OK);
    ck_assert_double_eq(lo, keys[i].lo);
    ck_assert_double_eq(hi, keys[i].hi);
    lattice_model_params p;
    lattice_model_params_init(&p);
    ck_assert_int_eq(lattice_model_params_set_option(&p, keys[i].key, lo), LATTICE_OK);
    ck_assert_int_eq(lattice_model_params_set_option(&p, keys[i].key, hi), LATTICE_OK);
    const double step = keys[i].integer ? 1 : 0; /* an int's next value, else the next double */
    const double below = step ? lo - step : nextafter(lo, -INFINITY);
    const double above = step ? hi + step : nextafter(hi, INFINITY);
    refused(&p, keys[i].key, below, LATTICE_ERR_INVALID_ARGUMENT, keys[i].name);
    refused(&p, keys[i].key, above, LATTICE_ERR_INVALID_ARGUMENT, "not in");
    refused(&p, keys[i].key, NAN, LATTICE_ERR_INVALID_ARGUMENT, "not in");
    refused(&p, keys[i].key, INFINITY, LATTICE_ERR_INVALID_ARGUMENT, "not in");
    if (keys[i].integer)
        refused(&p, keys[i].key, lo + 0.5, LATTICE_ERR_INVALID_ARGUMENT, "is not an integer");
}
END_TEST

START_TEST(test_unknown_keys_refused)
{
    const int unknown[] = {-1, 0, 999, LATTICE_MODEL_OPTION_EXPERIMENTAL_FIRST + N_KEYS, 1 << 30};
    lattice_model_params p;
    lattice_model_params_init(&p);
    for (int k = 0; k < (int)(sizeof unknown / sizeof unknown[0]); k++) {
        const lattice_model_option key = (lattice_model_option)unknown[k];
        char want[64];
        snprintf(want, sizeof want, "no model option has the key %d", unknown[k]);
        refused(&p, key, 0, LATTICE_ERR_UNSUPPORTED, want);
        double v = -7, lo = -7, hi = -7;
        ck_assert_int_eq(lattice_model_params_get_option(&p, key, &v), LATTICE_ERR_UNSUPPORTED);
        ck_assert_int_eq(lattice_model_option_bounds(key, &lo, &hi), LATTICE_ERR_UNSUPPORTED);
        ck_assert_ptr_nonnull(strstr(lattice_last_error(), want));
        ck_assert(v == -7 && lo == -7 && hi == -7);
    }
}
END_TEST

START_TEST(test_null_and_unset_refused)
{
    const lattice_model_option key = LATTICE_MODEL_OPTION_BLOCK_NORM;
    double v, lo;
    ck_assert_int_eq(lattice_model_params_set_option(NULL, key, 1), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "params is NULL"));
    ck_assert_int_eq(lattice_model_params_get_option(NULL, key, &v), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "params is NULL"));
    lattice_model_params p;
    lattice_model_params_init(&p);
    ck_assert_int_eq(lattice_model_params_get_option(&p, key, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "value is NULL"));
    ck_assert_int_eq(lattice_model_option_bounds(key, &lo, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "hi is NULL"));
    /* a struct its _init never filled */
    memset(&p, 0, sizeof p);
    refused(&p, key, 1, LATTICE_ERR_INVALID_ARGUMENT, "params->size 0 is below");
    ck_assert_int_eq(lattice_model_params_get_option(&p, key, &v), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A value set by key reaches the model: created with block_rescale 2, the
 * model says so, and its params check sees the key's value. */
START_TEST(test_keys_reach_the_model)
{
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.n_layers = p.n_active_layers = 2;
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, 3);
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_int_eq(lattice_model_params_check(&p, err), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(err, "block_rescale 3 not in 0..n_layers (2)"));
    tu_option(&p, LATTICE_MODEL_OPTION_BLOCK_RESCALE, 1);
    lattice_backend *be = tu_backend("ref", 1);
    lattice_model *m =
        tu_model(be, LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, 1.0f, &p);
    lattice_model_params q;
    q.size = sizeof q;
    ck_assert_int_eq(lattice_model_get_params(m, &q), LATTICE_OK);
    ck_assert_double_eq(tu_get_option(&q, LATTICE_MODEL_OPTION_BLOCK_RESCALE), 1);
    lattice_model_destroy(m);
    lattice_backend_destroy(be);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("option-keys");
    TCase *c = tcase_create("keys");
    tcase_add_loop_test(c, test_each_key_round_trips, 0, N_KEYS);
    tcase_add_loop_test(c, test_bounds_are_what_the_setter_enforces, 0, N_KEYS);
    tcase_add_test(c, test_unknown_keys_refused);
    tcase_add_test(c, test_null_and_unset_refused);
    tcase_add_test(c, test_keys_reach_the_model);
    suite_add_tcase(s, c);
    return tu_run(s);
}
