/* Schedules: the presets and their phases, an older caller's phase struct,
 * the counters and matched budgets, token budgets and phases refused, and a
 * token budget over documents that count no token. */
#include "testutil.h"
#include "fields.h"

static void expect_phases(lattice_schedule_preset preset, int n, const int *active,
                          const int *train_from, const int64_t *steps, const int *train_boundary)
{
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create_preset(preset, 3, 3, 100, LATTICE_SCHEDULE_BLOCK_INIT_RANDOM, &s),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_n_phases(s), n);
    for (int i = 0; i < n; i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        ck_assert_int_eq(lattice_schedule_get_phase(s, i, &ph), LATTICE_OK);
        ck_assert_int_eq(ph.size, sizeof(lattice_schedule_phase));
        ck_assert_int_eq(ph.active_layers, active[i]);
        ck_assert_int_eq(ph.train_from, train_from[i]);
        ck_assert_int_eq(ph.steps, steps[i]);
        ck_assert_int_eq(ph.reset_optimizer, 1);
        ck_assert_int_eq(ph.train_boundary, train_boundary[i]);
        ck_assert_int_eq(ph.rewind_data, 0); /* no preset replays data unless asked */
    }
    ck_assert_int_eq(lattice_schedule_set_rewind_data(s, 1), LATTICE_OK);
    for (int i = 0; i < n; i++) {
        lattice_schedule_phase ph;
        lattice_schedule_phase_init(&ph);
        lattice_schedule_get_phase(s, i, &ph);
        ck_assert_int_eq(ph.rewind_data, i > 0); /* the first phase has nothing to rewind to */
    }
    lattice_schedule_destroy(s);
}

START_TEST(test_presets)
{
    const int64_t s1[] = {100}, s2[] = {100, 100}, s3[] = {100, 100, 100};
    const int zero[] = {0, 0, 0}, nine[] = {9, 9, 9}, ones[] = {1, 1, 1};
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT, 1, nine, zero, s1, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_GROW, 3, (const int[]){3, 6, 9}, zero, s3, ones);
    /* freeze: after phase 0 the head and boundary norm are fixed with the earlier blocks */
    expect_phases(LATTICE_SCHEDULE_PRESET_FREEZE, 3, (const int[]){3, 6, 9}, (const int[]){0, 3, 6}, s3,
                  (const int[]){1, 0, 0});
    expect_phases(LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK, 1, (const int[]){3}, zero, s1, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 2, nine, zero, s2, ones);
    expect_phases(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL, 3, nine, zero, s3, ones);
    ck_assert_int_eq(lattice_schedule_set_rewind_data(NULL, 1), LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* A phase is read and written at this library's size: a smaller one (a
 * program built against a release before 1.0) is refused both ways, a
 * larger one (a newer caller) is read up to ours when its bytes past ours
 * are 0 and refused when one is not, and written up to ours. */
START_TEST(test_phase_size)
{
    lattice_schedule_phase def;
    lattice_schedule_phase_init(&def);
    ck_assert_int_eq(def.size, sizeof(lattice_schedule_phase));
    ck_assert_int_eq(def.rewind_data, 0);
    ck_assert_int_eq(def.train_boundary, 1);
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    /* add: 0.1's 40 bytes, and one byte short, are refused */
    const size_t short_sizes[] = {TU_PHASE_0_1_SIZE, sizeof(lattice_schedule_phase) - 1};
    for (int k = 0; k < 2; k++) {
        lattice_schedule_phase old = def;
        old.size = short_sizes[k];
        old.steps = 7;
        ck_assert_int_eq(lattice_schedule_add_phase(s, &old), LATTICE_ERR_INVALID_ARGUMENT);
        tu_expect_pre_1_0("add_phase", short_sizes[k], sizeof(lattice_schedule_phase));
        ck_assert_str_eq(lattice_schedule_errmsg(s), lattice_last_error());
    }
    ck_assert_int_eq(lattice_schedule_get_n_phases(s), 0);
    /* the caller's fields are taken; a newer caller's bytes past ours must be 0 */
    struct {
        lattice_schedule_phase phase;
        unsigned char beyond[16];
    } newer;
    memset(&newer, 0xA5, sizeof newer);
    newer.phase = def;
    newer.phase.size = sizeof newer;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &newer.phase), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "a field of a later release"));
    ck_assert_int_eq(lattice_schedule_get_n_phases(s), 0);
    memset(&newer, 0, sizeof newer);
    newer.phase = def;
    newer.phase.size = sizeof newer;
    newer.phase.steps = 7;
    newer.phase.active_layers = 2;
    newer.phase.rewind_data = 5; /* any non-zero */
    newer.phase.train_boundary = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &def), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(s, &newer.phase), LATTICE_OK);
    lattice_schedule_phase got;
    lattice_schedule_phase_init(&got);
    ck_assert_int_eq(lattice_schedule_get_phase(s, 1, &got), LATTICE_OK);
    ck_assert_int_eq(got.size, sizeof got);
    ck_assert_int_eq(got.steps, 7);
    ck_assert_int_eq(got.active_layers, 2);
    ck_assert_int_eq(got.rewind_data, 1);
    ck_assert_int_eq(got.train_boundary, 0);
    /* get: below ours is refused with nothing written, and so is a size
     * above twice ours (never set: issue 48 part 1); a newer caller's struct
     * gets ours, its size says so, and the bytes past ours stay */
    const size_t sizes[] = {0, TU_PHASE_0_1_SIZE, sizeof(lattice_schedule_phase) - 1, 12345,
                            sizeof(lattice_schedule_phase) + 16};
    for (int k = 0; k < 5; k++) {
        struct {
            lattice_schedule_phase phase;
            unsigned char beyond[16];
        } out;
        memset(&out, 0xA5, sizeof out);
        out.phase.size = sizes[k];
        const unsigned char *bytes = (const unsigned char *)&out;
        if (sizes[k] < sizeof(lattice_schedule_phase) ||
            sizes[k] > 2 * sizeof(lattice_schedule_phase)) {
            ck_assert_int_eq(lattice_schedule_get_phase(s, 1, &out.phase),
                             LATTICE_ERR_INVALID_ARGUMENT);
            if (sizes[k] < sizeof(lattice_schedule_phase))
                tu_expect_pre_1_0("get_phase", sizes[k], sizeof(lattice_schedule_phase));
            else
                ck_assert_ptr_nonnull(strstr(lattice_last_error(), "a size never set"));
            ck_assert_uint_eq(out.phase.size, sizes[k]);
            for (size_t b = sizeof(size_t); b < sizeof out; b++)
                ck_assert_int_eq(bytes[b], 0xA5);
            continue;
        }
        ck_assert_int_eq(lattice_schedule_get_phase(s, 1, &out.phase), LATTICE_OK);
        ck_assert_uint_eq(out.phase.size, sizeof(lattice_schedule_phase));
        ck_assert_int_eq(out.phase.steps, 7);
        ck_assert_int_eq(out.phase.train_boundary, 0);
        for (size_t b = sizeof(lattice_schedule_phase); b < sizeof out; b++)
            ck_assert_int_eq(bytes[b], 0xA5);
    }
    lattice_schedule_destroy(s);
}
END_TEST

/* Active-layer tokens: grow = 9 layers x (2/3 of its tokens), as the paper. */
START_TEST(test_counters_and_matching)
{
    lattice_schedule *grow, *active;
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 3, 3, 10, 0, &grow);
    lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE, 3, 3, 10, 0, &active);
    int ended, ends = 0;
    while (!lattice_schedule_is_finished(grow)) {
        ck_assert_int_eq(lattice_schedule_record(grow, 64, 50, 1.0, &ended), LATTICE_OK);
        ends += ended;
    }
    ck_assert_int_eq(ends, 3);
    while (!lattice_schedule_is_finished(active))
        lattice_schedule_record(active, 64, 50, 1.0, NULL);
    lattice_schedule_counters a, b;
    lattice_schedule_get_counters(grow, &a);
    lattice_schedule_get_counters(active, &b);
    ck_assert_int_eq(a.steps, 30);
    ck_assert_int_eq(a.tokens, 30 * 64);
    ck_assert_int_eq(a.nonpad_tokens, 30 * 50);
    ck_assert_int_eq(a.active_layer_tokens, 50 * 10 * (3 + 6 + 9));
    ck_assert_int_eq(a.active_layer_tokens, b.active_layer_tokens);
    ck_assert_double_eq(a.flops, 30.0);
    ck_assert_int_eq(lattice_schedule_record(grow, 1, 1, 0, NULL), LATTICE_ERR_STATE);
    ck_assert_int_eq(lattice_schedule_set_position(grow, 1, 3, &a), LATTICE_OK);
    int ph;
    int64_t sp;
    lattice_schedule_get_position(grow, &ph, &sp);
    ck_assert_int_eq(ph, 1);
    ck_assert_int_eq(sp, 3);
    ck_assert_int_eq(lattice_schedule_set_position(grow, 1, 10, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_schedule_destroy(grow);
    lattice_schedule_destroy(active);
}
END_TEST

START_TEST(test_token_budget_and_bad_phases)
{
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = 0;
    ph.tokens = 100;
    ph.active_layers = 2;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_total_steps(s), -1);
    int ended = 0, steps = 0;
    while (!ended) {
        lattice_schedule_record(s, 40, 30, 0, &ended);
        steps++;
    }
    ck_assert_int_eq(steps, 4); /* 30, 60, 90, 120 >= 100 */
    ph.tokens = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.steps = 5;
    ph.train_from = 2;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.train_from = 0;
    ph.active_layers = 0;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_schedule_add_phase(s, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    lattice_schedule_destroy(s);
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 0, 3, 10, 0, &s),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(lattice_schedule_create_preset((lattice_schedule_preset)42, 3, 3, 10, 0, &s),
                     LATTICE_ERR_INVALID_ARGUMENT);
}
END_TEST

/* Counts past what a checkpoint keeps (2^50 each, FLOPs INT64_MAX) are
 * refused, never wrapped: a preset whose matched budget would pass it, phases
 * whose steps add up past it, a step that would carry a counter past it,
 * FLOPs that are NaN, infinite or negative, or whose sum would pass
 * INT64_MAX, and counters restored out of range. A refused record counts
 * nothing. */
START_TEST(test_counts_that_would_overflow)
{
    const int64_t most = (int64_t)1 << 50;
    lattice_schedule *s = NULL;
    int n = -7;
    for (int pr = 0; pr <= (int)LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE; pr++) {
        ck_assert_int_eq(lattice_schedule_create_preset((lattice_schedule_preset)pr, 3, 3,
                                                        most / 4 + 1, 0, &s),
                         LATTICE_ERR_INVALID_CONFIG);
        ck_assert_ptr_null(s);
        ck_assert_int_eq(lattice_schedule_get_preset_phases((lattice_schedule_preset)pr, 3, 3,
                                                            INT64_MAX / 2, 0, NULL, 0, &n),
                         LATTICE_ERR_INVALID_CONFIG);
        ck_assert_int_eq(n, 0);
    }
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "2^50 / (n_blocks + 1)"));
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE,
                                                    3, 3, most / 4, 0, &s),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_total_steps(s), most / 4 * 4 / 2);
    lattice_schedule_destroy(s);

    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = INT64_MAX;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.steps = 0;
    ph.tokens = most + 1;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ph.tokens = 0;
    ph.steps = most - 1;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ph.steps = 2;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "add up past"));
    ph.steps = 1;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_n_phases(s), 2);
    ck_assert_int_eq(lattice_schedule_get_total_steps(s), most);

    lattice_schedule_counters c;
    ck_assert_int_eq(lattice_schedule_record(s, most, most, 1.0, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_record(s, 1, 0, 1.0, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "what a checkpoint keeps"));
    ck_assert_int_eq(lattice_schedule_record(s, 0, 0, 1.0, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_int_eq(c.steps, 2);
    ck_assert_int_eq(c.tokens, most);
    ck_assert_int_eq(c.active_layer_tokens, most);
    const double bad_flops[] = {NAN, INFINITY, -1.0, -1e300};
    for (int i = 0; i < 4; i++) {
        ck_assert_int_eq(lattice_schedule_record(s, 0, 0, bad_flops[i], NULL),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "flops"));
    }
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_int_eq(c.steps, 2);
    ck_assert_double_eq(c.flops, 2.0);
    /* the FLOPs, an estimate, stop at INT64_MAX: a checkpoint keeps them */
    ck_assert_int_eq(lattice_schedule_record(s, 0, 0, 1e19, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_record(s, 0, 0, 1e19, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_double_eq(c.flops, (double)INT64_MAX);
    lattice_schedule_destroy(s);

    /* a phase of 3 active layers: the active-layer tokens are 3 per token */
    ck_assert_int_eq(lattice_schedule_create(&s), LATTICE_OK);
    ph.steps = 10;
    ph.active_layers = 3;
    ck_assert_int_eq(lattice_schedule_add_phase(s, &ph), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_record(s, most / 2, most / 2, 0, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_schedule_record(s, most / 3, most / 3, 0, NULL), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_record(s, 1, 1, 0, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_int_eq(c.steps, 1);
    ck_assert_int_eq(c.active_layer_tokens, most / 3 * 3);

    /* restored counters: each in 0 .. 2^50 (FLOPs finite, at most INT64_MAX),
     * the non-padding tokens among all */
    const lattice_schedule_counters good = {.steps = 4, .tokens = 40, .nonpad_tokens = 30,
                                            .active_layer_tokens = 90, .flops = 8.0};
    lattice_schedule_counters bad[8];
    for (int i = 0; i < 8; i++)
        bad[i] = good;
    bad[0].steps = -1;
    bad[1].tokens = -1;
    bad[2].nonpad_tokens = 41;
    bad[3].active_layer_tokens = -3;
    bad[4].flops = NAN;
    bad[5].flops = -INFINITY;
    bad[6].tokens = most + 1;
    bad[7].flops = 1e19;
    for (int i = 0; i < 8; i++) {
        ck_assert_int_eq(lattice_schedule_set_position(s, 0, 4, &bad[i]),
                         LATTICE_ERR_INVALID_ARGUMENT);
        ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "counters"));
    }
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_int_eq(c.steps, 1); /* unchanged by the refusals */
    ck_assert_int_eq(lattice_schedule_set_position(s, 0, 4, &good), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_get_counters(s, &c), LATTICE_OK);
    ck_assert_int_eq(c.tokens, 40);
    lattice_schedule_destroy(s);
}
END_TEST

/* lattice_schedule_get_preset_phases gives, phase for phase, what
 * lattice_schedule_create_preset's schedule holds, for every preset over
 * several shapes (matched-active's short last phase among them); the count
 * alone for NULL and 0; and refuses a short array, NULL n_phases, a bad shape
 * or an unknown preset, writing nothing. */
START_TEST(test_preset_phases)
{
    static const struct { int blocks, size; int64_t steps; } shapes[] = {
        {1, 1, 1}, {3, 3, 100}, {4, 2, 7}, {5, 1, 3}, {2, 4, 1}};
    for (int pr = LATTICE_SCHEDULE_PRESET_JOINT; pr <= LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL;
         pr++)
        for (size_t k = 0; k < sizeof shapes / sizeof shapes[0]; k++) {
            lattice_schedule *s;
            const lattice_schedule_block_init init = (lattice_schedule_block_init)(k % 3);
            ck_assert_int_eq(lattice_schedule_create_preset((lattice_schedule_preset)pr,
                                                            shapes[k].blocks, shapes[k].size,
                                                            shapes[k].steps, init, &s),
                             LATTICE_OK);
            int n = -1;
            ck_assert_int_eq(lattice_schedule_get_preset_phases((lattice_schedule_preset)pr,
                                                                shapes[k].blocks, shapes[k].size,
                                                                shapes[k].steps, init, NULL, 0, &n),
                             LATTICE_OK);
            ck_assert_int_eq(n, lattice_schedule_get_n_phases(s));
            lattice_schedule_phase got[8];
            memset(got, 0xab, sizeof got);
            ck_assert_int_eq(lattice_schedule_get_preset_phases((lattice_schedule_preset)pr,
                                                                shapes[k].blocks, shapes[k].size,
                                                                shapes[k].steps, init, got, 8, &n),
                             LATTICE_OK);
            ck_assert_int_eq(n, lattice_schedule_get_n_phases(s));
            for (int i = 0; i < n; i++) {
                lattice_schedule_phase want;
                lattice_schedule_phase_init(&want);
                lattice_schedule_get_phase(s, i, &want);
                ck_assert_msg(memcmp(&got[i], &want, sizeof want) == 0,
                              "preset %d shape %zu phase %d differs from the schedule's", pr, k, i);
            }
            if (n > 1) { /* one short: refused, nothing written, the count given */
                lattice_schedule_phase few[8];
                memset(few, 0xcd, sizeof few);
                int m = -1;
                ck_assert_int_eq(lattice_schedule_get_preset_phases((lattice_schedule_preset)pr,
                                                                    shapes[k].blocks, shapes[k].size,
                                                                    shapes[k].steps, init, few,
                                                                    n - 1, &m),
                                 LATTICE_ERR_INVALID_ARGUMENT);
                ck_assert_int_eq(m, n);
                ck_assert_int_eq(few[0].active_layers, (int)0xcdcdcdcd);
                ck_assert_ptr_nonnull(strstr(lattice_last_error(), "capacity is"));
            }
            lattice_schedule_destroy(s);
        }
    lattice_schedule_phase ph[4];
    int n = 7;
    ck_assert_int_eq(lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 3, 1, 10, 0,
                                                        ph, 4, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_int_eq(lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 0, 1, 10, 0,
                                                        ph, 4, &n),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_int_eq(n, 0);
    ck_assert_int_eq(lattice_schedule_get_preset_phases((lattice_schedule_preset)42, 3, 1, 10, 0,
                                                        ph, 4, &n),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "unknown preset 42"));
    ck_assert_int_eq(lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 3, 1, 10, 0,
                                                        NULL, 4, &n),
                     LATTICE_ERR_INVALID_ARGUMENT);
    /* a block initialisation create_preset refuses, refused here too, before the count */
    n = 7;
    ck_assert_int_eq(lattice_schedule_get_preset_phases(LATTICE_SCHEDULE_PRESET_GROW, 3, 1, 10,
                                                        (lattice_schedule_block_init)9, ph, 4, &n),
                     LATTICE_ERR_INVALID_CONFIG);
    ck_assert_ptr_nonnull(strstr(lattice_last_error(), "unknown block initialisation 9"));
    ck_assert_int_eq(n, 0);
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 3, 1, 10,
                                                    (lattice_schedule_block_init)9, &s),
                     LATTICE_ERR_INVALID_CONFIG);
}
END_TEST

/* The one description of the phase's and the optimizer settings' fields
 * (fields.h) covers each struct: every field after size, in order, each where
 * the one before ends (up to its alignment), the last ending at sizeof; and
 * what it writes as JSON reads back to the same bytes, a later release's
 * fields absent together or not at all. */
static size_t field_width(const lattice__field *f)
{
    return f->type == LATTICE__F_I64 ? 8 : 4;
}

static void expect_covers(const lattice__fields *fs, size_t size, const char *what)
{
    size_t end = sizeof(size_t);
    for (int i = 0; i < fs->n; i++) {
        const size_t w = field_width(&fs->f[i]);
        const size_t at = (end + w - 1) / w * w;
        ck_assert_msg(fs->f[i].offset == at, "%s.%s at %zu, expected %zu", what, fs->f[i].name,
                      fs->f[i].offset, at);
        end = at + w;
    }
    ck_assert_msg((end + 7) / 8 * 8 == size, "%s: the table ends at %zu of %zu bytes", what, end,
                  size);
}

START_TEST(test_field_tables)
{
    expect_covers(&lattice__phase_fields, sizeof(lattice_schedule_phase), "phase");
    expect_covers(&lattice__optim_fields, sizeof(lattice_optim_params), "optim");
    lattice_schedule_phase ph, back;
    lattice_schedule_phase_init(&ph);
    ph.steps = (int64_t)1 << 40;
    ph.tokens = 77;
    ph.active_layers = 6;
    ph.train_from = 3;
    ph.reset_optimizer = 0;
    ph.block_init = LATTICE_SCHEDULE_BLOCK_INIT_COPY;
    ph.rewind_data = 1;
    ph.train_boundary = 0;
    json_object *o = json_object_new_object();
    ck_assert(lattice__fields_to_json(&lattice__phase_fields, &ph, o));
    lattice_schedule_phase_init(&back);
    char why[256];
    ck_assert(lattice__fields_from_json(&lattice__phase_fields, o, "p", 4, &back, why, sizeof why));
    ck_assert(memcmp(&ph, &back, sizeof ph) == 0);
    json_object_object_del(o, "rewind_data");
    ck_assert(!lattice__fields_from_json(&lattice__phase_fields, o, "p", 4, &back, why, sizeof why));
    ck_assert_str_eq(why, "lacks p.rewind_data, or it is not an integer");
    json_object_put(o);

    lattice_optim_params op, oback;
    lattice_optim_params_init(&op);
    op.lr = 3e-3f;
    op.warmup_steps = 12;
    op.lr_shape = LATTICE_OPTIM_LR_SHAPE_WSD;
    op.decay_fraction = 0.25f;
    o = json_object_new_object();
    ck_assert(lattice__fields_to_json(&lattice__optim_fields, &op, o));
    lattice_optim_params_init(&oback);
    ck_assert(lattice__fields_from_json(&lattice__optim_fields, o, "optim", 1, &oback, why,
                                        sizeof why));
    ck_assert(memcmp(&op, &oback, sizeof op) == 0);
    /* a 0.3 record: neither 0.4 field, the defaults stay; one alone is damage */
    json_object_object_del(o, "decay_fraction");
    lattice_optim_params_init(&oback);
    ck_assert(!lattice__fields_from_json(&lattice__optim_fields, o, "optim", 1, &oback, why,
                                         sizeof why));
    ck_assert_str_eq(why, "has optim.lr_shape without optim.decay_fraction");
    json_object_object_del(o, "lr_shape");
    lattice_optim_params_init(&oback);
    ck_assert(lattice__fields_from_json(&lattice__optim_fields, o, "optim", 1, &oback, why,
                                        sizeof why));
    ck_assert_int_eq(oback.lr_shape, LATTICE_OPTIM_LR_SHAPE_COSINE);
    ck_assert_int_eq(oback.warmup_steps, 12);
    json_object_object_add(o, "warmup_steps", json_object_new_int64(-1));
    ck_assert(!lattice__fields_from_json(&lattice__optim_fields, o, "optim", 1, &oback, why,
                                         sizeof why));
    ck_assert_ptr_nonnull(strstr(why, "optim.warmup_steps -1 is out of range"));
    json_object_put(o);
}
END_TEST

/* One rule for where a schedule can stand (lattice_schedule_set_position and
 * a checkpoint's load): its message says why. */
START_TEST(test_position_rule)
{
    lattice_schedule *s;
    ck_assert_int_eq(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_GROW, 2, 1, 10, 0, &s),
                     LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_set_position(s, 0, 10, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "step 10 of phase 0, which has 10 steps"));
    ck_assert_int_eq(lattice_schedule_set_position(s, 3, 0, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "phase 3 is not one of the schedule's 0..2"));
    ck_assert_int_eq(lattice_schedule_set_position(s, 2, 1, NULL), LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(s), "the schedule has finished"));
    /* a token-budget phase bounds its step count by what a checkpoint keeps
     * (2^50), so recording a step never overflows it */
    lattice_schedule *tok;
    lattice_schedule_phase tp;
    lattice_schedule_phase_init(&tp);
    tp.steps = 0;
    tp.tokens = 100;
    ck_assert_int_eq(lattice_schedule_create(&tok), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(tok, &tp), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_set_position(tok, 0, INT64_MAX, NULL),
                     LATTICE_ERR_INVALID_ARGUMENT);
    ck_assert_ptr_nonnull(strstr(lattice_schedule_errmsg(tok), "a count past 2^50"));
    ck_assert_int_eq(lattice_schedule_set_position(tok, 0, (int64_t)1 << 50, NULL), LATTICE_OK);
    int ended;
    ck_assert_int_eq(lattice_schedule_record(tok, 10, 5, 1.0, &ended), LATTICE_OK);
    lattice_schedule_destroy(tok);
    ck_assert_int_eq(lattice_schedule_set_position(s, 1, 9, NULL), LATTICE_OK);
    int phase;
    int64_t step;
    lattice_schedule_get_position(s, &phase, &step);
    ck_assert_int_eq(phase, 1);
    ck_assert_int_eq(step, 9);
    lattice_schedule_destroy(s);
}
END_TEST

/* ---- a token budget the trainer cannot fill ------------------------------------ */

/* Documents of one token predict nothing: a token budget over them never
 * fills. Whether stepped by lattice_trainer_step or run, the phase is refused
 * with LATTICE_ERR_STATE once a whole pass over the training data has counted
 * no token; over the six documents and the four of issue 21, with batches of
 * 1 and 2 rows (a pass then straddles two shuffled epochs or not). */
START_TEST(test_token_budget_without_tokens)
{
    const int n_ids = _i < 2 ? 6 : 4, batch = _i % 2 ? 2 : 1;
    const int vocab = _i < 2 ? 5 : 13, seq = _i < 2 ? 4 : 6;
    int32_t ids[6]; /* documents of only their boundary */
    for (int i = 0; i < n_ids; i++)
        ids[i] = vocab - 1;
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    ph.steps = 0;
    ph.tokens = 10;
    rig_options o;
    rig_options_init(&o);
    o.model.vocab_size = vocab;
    o.model.n_layers = o.model.n_active_layers = 1;
    o.model.d_ff = 8;
    o.model.max_seq = seq;
    o.ids = ids;
    o.n_ids = n_ids;
    o.data.batch_size = batch;
    o.phases = &ph;
    o.n_phases = 1;
    rig r;
    tu_rig_open(&r, &o);
    lattice_trainer *t = r.trainer;
    lattice_schedule *s = r.schedule;
    /* a pass is n_ids draws; it lies whole within 2 passes and a batch of draws */
    const int most = (2 * n_ids + batch) / batch + 1;
    lattice_status st = LATTICE_OK;
    int steps = 0;
    while (st == LATTICE_OK && steps <= most) {
        st = lattice_trainer_step(t, NULL);
        steps += st == LATTICE_OK;
    }
    ck_assert_int_eq(st, LATTICE_ERR_STATE);
    ck_assert_int_ge(steps, n_ids / batch); /* not before a pass */
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "counted none"));
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(t), "budget of 10 counted tokens"));
    lattice_schedule_counters c;
    lattice_schedule_get_counters(s, &c);
    ck_assert_int_eq(c.steps, steps); /* the refused step was not taken */
    ck_assert_int_eq(lattice_trainer_step(t, NULL), LATTICE_ERR_STATE); /* and stays refused */
    ck_assert_int_eq(lattice_trainer_run(t), LATTICE_ERR_STATE);
    /* run from the start ends the same way: a new schedule and trainer over the rest */
    lattice_trainer_destroy(r.trainer);
    lattice_schedule_destroy(r.schedule);
    ck_assert_int_eq(lattice_schedule_create(&r.schedule), LATTICE_OK);
    ck_assert_int_eq(lattice_schedule_add_phase(r.schedule, &ph), LATTICE_OK);
    tu_rig_bind(&r, NULL);
    ck_assert_int_eq(lattice_trainer_run(r.trainer), LATTICE_ERR_STATE);
    ck_assert_ptr_nonnull(strstr(lattice_trainer_errmsg(r.trainer), "counted none"));
    lattice_schedule_get_counters(r.schedule, &c);
    ck_assert_int_le(c.steps, most);
    rig_close(&r);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("schedule");
    TCase *sc = tcase_create("schedule");
    tcase_add_test(sc, test_presets);
    tcase_add_test(sc, test_preset_phases);
    tcase_add_test(sc, test_field_tables);
    tcase_add_test(sc, test_position_rule);
    tcase_add_test(sc, test_counters_and_matching);
    tcase_add_test(sc, test_token_budget_and_bad_phases);
    tcase_add_test(sc, test_counts_that_would_overflow);
    tcase_add_test(sc, test_phase_size);
    tcase_add_loop_test(sc, test_token_budget_without_tokens, 0, 4);
    suite_add_tcase(s, sc);
    return tu_run(s);
}
