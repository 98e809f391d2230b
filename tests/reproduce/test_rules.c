/* The reproduction's verdict rules (examples/reproduce/rules.h) on synthetic
 * numbers: every branch of every rule; and the paper's table (paper.h) at one
 * with itself. */
#include <check.h>

#include "../../examples/reproduce/paper.h"
#include "../../examples/reproduce/rules.h"
#include "../../examples/reproduce/stats.h"

static summary of(const double *x, int n) { return summarise(x, n); }

/* A summary by its mean and 95% half-width (sd set equal; n seeds). */
static summary S(double mean, double half, int n)
{
    const summary s = {mean, half, half, n};
    return s;
}

START_TEST(test_direction)
{
    const double below[3] = {-0.05, -0.04, -0.06}, above[3] = {0.05, 0.04, 0.06};
    const double across[3] = {-0.05, 0.04, 0.01}, one[1] = {-0.5};
    summary s = of(below, 3);
    ck_assert_int_eq(rule_direction(&s, -1), V_REPRODUCED);
    ck_assert_int_eq(rule_direction(&s, +1), V_NOT_REPRODUCED);
    s = of(above, 3);
    ck_assert_int_eq(rule_direction(&s, +1), V_REPRODUCED);
    s = of(across, 3);
    ck_assert_int_eq(rule_direction(&s, -1), V_INCONCLUSIVE);
    s = of(one, 1); /* however large, one seed has no interval */
    ck_assert_int_eq(rule_direction(&s, -1), V_INCONCLUSIVE);
    summary none = {0, 0, NAN, 0};
    ck_assert_int_eq(rule_direction(&none, -1), V_NOT_RUN);
    const double nan3[3] = {NAN, 0.1, 0.2};
    s = of(nan3, 3);
    ck_assert_int_eq(rule_direction(&s, -1), V_NOT_AVAILABLE);
}
END_TEST

START_TEST(test_parity)
{
    const double m = PARITY_MARGIN;
    ck_assert(fabs(m - 0.0082) < 1e-4); /* 0.0328 nats/token at 4 bytes/token */
    const double tight[4] = {0.001, -0.001, 0.0005, 0.0};
    const double far[3] = {0.05, 0.06, 0.055}, wide[3] = {0.02, -0.02, 0.0}, one[1] = {0.0};
    summary s = of(tight, 4);
    ck_assert_int_eq(rule_parity(&s, m), V_REPRODUCED);
    s = of(far, 3);
    ck_assert_int_eq(rule_parity(&s, m), V_NOT_REPRODUCED);
    s = of(wide, 3); /* mean 0, but the interval reaches past the margin */
    ck_assert_int_eq(rule_parity(&s, m), V_INCONCLUSIVE);
    s = of(one, 1); /* a single exact tie proves nothing */
    ck_assert_int_eq(rule_parity(&s, m), V_INCONCLUSIVE);
    summary none = {0, 0, NAN, 0};
    ck_assert_int_eq(rule_parity(&none, m), V_NOT_RUN);
}
END_TEST

START_TEST(test_interaction_needs_controls)
{
    const double neg[3] = {-0.05, -0.04, -0.06}, pos[3] = {0.05, 0.04, 0.06};
    const double across[3] = {-0.05, 0.04, 0.01};
    summary i = of(neg, 3), a = of(pos, 3), t = of(pos, 3), x = of(across, 3), n = of(neg, 3);
    summary none = {0, 0, NAN, 0};
    ck_assert_int_eq(rule_controls(&a, &t), V_REPRODUCED);
    ck_assert_int_eq(rule_controls(&a, &x), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_controls(&a, &n), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_controls(&a, &none), V_NOT_RUN);
    ck_assert_int_eq(rule_interaction(&i, V_REPRODUCED), V_REPRODUCED);
    /* below 0, but the compute confound is open */
    ck_assert_int_eq(rule_interaction(&i, V_NOT_RUN), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_interaction(&i, V_INCONCLUSIVE), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_interaction(&i, V_NOT_REPRODUCED), V_INCONCLUSIVE);
    summary p = of(pos, 3);
    ck_assert_int_eq(rule_interaction(&p, V_REPRODUCED), V_NOT_REPRODUCED);
}
END_TEST

START_TEST(test_mechanism_rows)
{
    ck_assert_int_eq(rule_mechanism_gate(1, MECHANISM_MIN_STEPS), V_REPRODUCED); /* open */
    ck_assert_int_eq(rule_mechanism_gate(0, 100000), V_NOT_APPLICABLE);          /* NO-GO */
    ck_assert_int_eq(rule_mechanism_gate(1, MECHANISM_MIN_STEPS - 1), V_NOT_APPLICABLE);
    ck_assert_int_eq(rule_mechanism_gate(-1, 100000), V_NOT_AVAILABLE);
    const double fl = BLOCK_REMOVAL_FLOOR;
    /* the jump's shape: both halves over seeds */
    const summary up = S(0.7, 0.1, 3), down = S(-0.5, 0.1, 3), wide = S(0.1, 0.3, 3),
                  one = S(0.7, NAN, 1), none = {0, 0, NAN, 0}, nan = S(NAN, 0.1, 3);
    ck_assert_int_eq(rule_jump_shape(&up, &up), V_REPRODUCED);
    ck_assert_int_eq(rule_jump_shape(&up, &wide), V_INCONCLUSIVE);   /* slower: not shown */
    ck_assert_int_eq(rule_jump_shape(&up, &down), V_NOT_REPRODUCED); /* post recovers faster */
    ck_assert_int_eq(rule_jump_shape(&down, &up), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_jump_shape(&one, &one), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_jump_shape(&none, &up), V_NOT_RUN);
    ck_assert_int_eq(rule_jump_shape(&nan, &up), V_NOT_AVAILABLE);
    /* block removal over seeds: the case 0.4 passed by 5% (ratios 0.241, 0.248, 0.219) */
    const double r3[3] = {0.241, 0.248, 0.219};
    const summary close = summarise(r3, 3), small = S(0.05, 0.01, 3), big = S(0.6, 0.05, 3),
                  post = S(0.4, 0.05, 3), weak = S(0.01, 0.005, 3), gap = S(0.2, 0.02, 3),
                  neg = S(-0.2, 0.02, 3);
    ck_assert_int_eq(rule_block_removal(&close, &post, &gap, fl), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_block_removal(&small, &post, &gap, fl), V_REPRODUCED);
    ck_assert_int_eq(rule_block_removal(&big, &post, &gap, fl), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_block_removal(&small, &weak, &gap, fl), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_block_removal(&small, &post, &neg, fl), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_block_removal(&small, &one, &gap, fl), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_block_removal(&small, &nan, &gap, fl), V_NOT_AVAILABLE);
    /* row-start tokens, at the same depth and step */
    const summary r37 = S(37, 2, 3), r2 = S(2.0, 0.1, 3), r1 = S(1.2, 0.05, 3),
                  below = S(-10, 1, 3), above = S(0.5, 0.1, 3), straddle = S(0, 1, 3);
    ck_assert_int_eq(rule_boundary(&r37, &below), V_REPRODUCED);
    ck_assert_int_eq(rule_boundary(&r37, &above), V_NOT_REPRODUCED); /* post reaches half */
    ck_assert_int_eq(rule_boundary(&r1, &below), V_NOT_REPRODUCED);  /* pre not massive */
    ck_assert_int_eq(rule_boundary(&r2, &below), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_boundary(&r37, &straddle), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_boundary(&nan, &below), V_NOT_AVAILABLE);
    ck_assert_int_eq(interval_side(&r37, 3), 1);
    ck_assert_int_eq(interval_side(&one, 0), 0);
    ck_assert_str_eq(verdict_text(V_NOT_APPLICABLE), "not applicable");
    ck_assert_str_eq(verdict_text(V_NOT_AVAILABLE), "not available");
}
END_TEST

/* The effect rule: a direction shown, equivalence within the margin, or
 * inconclusive, with its edges, one seed, none and NaN. */
START_TEST(test_effect)
{
    const double m = EQUIVALENCE_MARGIN;
    ck_assert_double_eq_tol(m, 0.0082, 1e-12); /* one margin: the parity margin */
    ck_assert_double_eq_tol(-PAPER_INTERACTION / PAPER_BYTES_PER_TOKEN, 0.0083, 1e-12);
    const double below[3] = {-0.05, -0.04, -0.06}, above[3] = {0.05, 0.04, 0.06};
    const double tight[4] = {0.001, -0.001, 0.0005, 0.0}, wide[3] = {0.02, -0.02, 0.0};
    summary s = summarise(below, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_BELOW_ZERO);
    s = summarise(above, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_ABOVE_ZERO);
    s = summarise(tight, 4);
    ck_assert_int_eq(rule_effect(&s, m), V_EQUIVALENT);
    s = summarise(wide, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_INCONCLUSIVE);
    /* a direction shown stays a direction, however small (inside the margin) */
    const double small[3] = {0.001, 0.0011, 0.0012};
    s = summarise(small, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_ABOVE_ZERO);
    /* all seeds equal: no spread, the interval is the point */
    const double same[3] = {0.0, 0.0, 0.0}, same_far[3] = {0.05, 0.05, 0.05};
    s = summarise(same, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_EQUIVALENT);
    s = summarise(same_far, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_ABOVE_ZERO);
    /* one seed, none, NaN */
    const double one[1] = {0.0};
    s = summarise(one, 1);
    ck_assert_int_eq(rule_effect(&s, m), V_INCONCLUSIVE);
    summary none = {0, 0, NAN, 0};
    ck_assert_int_eq(rule_effect(&none, m), V_NOT_RUN);
    const double nan3[3] = {NAN, 0.1, 0.2};
    s = summarise(nan3, 3);
    ck_assert_int_eq(rule_effect(&s, m), V_NOT_AVAILABLE);
    summary nansd = {0.0, NAN, 0.01, 3}; /* a half-width without an sd */
    ck_assert_int_eq(rule_effect(&nansd, m), V_NOT_AVAILABLE);
    /* the 95% interval's end at 0 exactly shows no direction */
    summary edge0 = {-0.01, 0.004, 0.01, 3};
    ck_assert_int_eq(rule_effect(&edge0, 1.0), V_EQUIVALENT);
    ck_assert_int_eq(rule_effect(&edge0, 0.001), V_INCONCLUSIVE);
    /* the 90% interval's end at the margin exactly is not inside it */
    double lo, hi;
    s = summarise(wide, 3);
    ck_assert(interval90(&s, &lo, &hi));
    ck_assert_double_eq_tol(hi, 2.920 * 0.02 / sqrt(3.0), 1e-12);
    ck_assert_double_eq(lo, -hi);
    ck_assert_int_eq(rule_effect(&s, hi), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_effect(&s, nextafter(hi, 1.0)), V_EQUIVALENT);
    s = summarise(one, 1);
    ck_assert(!interval90(&s, &lo, &hi));
    /* the paper's interval at matched total compute (issue 37): inconclusive */
    summary itot = {-0.0091, 0.0113 / 4.303 * sqrt(3.0), 0.0113, 3};
    ck_assert_int_eq(rule_effect(&itot, m), V_INCONCLUSIVE);
}
END_TEST

START_TEST(test_effect_words)
{
    const double m = EQUIVALENCE_MARGIN;
    char buf[256];
    summary itot = {-0.0091, 0.0113 / 4.303 * sqrt(3.0), 0.0113, 3};
    ck_assert_str_eq(effect_allows(buf, sizeof buf, &itot, m),
                     "allows effects from -0.0204 to +0.0022, up to 2.5x the margin");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &itot, m, 0),
                     "inconclusive: 90% CI [-0.0168, -0.0014] not inside ±0.0082; allows effects "
                     "from -0.0204 to +0.0022, up to 2.5x the margin");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &itot, m, -1),
                     "inconclusive: 90% CI [-0.0168, -0.0014] not inside ±0.0082; allows effects "
                     "from -0.0204 to +0.0022, up to 2.5x the margin");
    const summary down = {-0.05, 0.005, 0.01, 3}, up = {0.05, 0.005, 0.01, 3};
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &down, m, 0), "below 0");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &up, m, 0), "above 0");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &down, m, -1), "reproduced (below 0)");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &up, m, -1), "not reproduced (above 0)");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &up, m, +1), "reproduced (above 0)");
    const summary eq = {0.001, 0.001, 0.0024843, 3}; /* 90% half-width 2.920 x sd / sqrt(3) */
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &eq, m, 0),
                     "within the paper's effect (90% CI [-0.0007, +0.0027] inside ±0.0082)");
    /* only at half the margin is it "equivalent", the one word that shows an absence */
    ck_assert_str_eq(half_cell(buf, sizeof buf, &eq), "equivalent (90% CI [-0.0007, +0.0027] "
                                                      "inside ±0.0041)");
    ck_assert_str_eq(effect_kind(&eq, ABSENCE_MARGIN), "equivalent");
    ck_assert_str_eq(effect_kind(&eq, m), "within the paper's effect");
    const summary wide = {-0.0033, 0.0045, 0.0045 * 2.365 / sqrt(8.0), 8}; /* the 4-pass grow gap */
    ck_assert_int_eq(rule_effect(&wide, m), V_EQUIVALENT);
    ck_assert_int_eq(rule_effect(&wide, ABSENCE_MARGIN), V_INCONCLUSIVE);
    ck_assert_str_eq(half_cell(buf, sizeof buf, &wide),
                     "not inside ±0.0041 (90% CI [-0.0063, -0.0003])");
    ck_assert_str_eq(half_cell(buf, sizeof buf, &down), "below 0");
    const summary one = {0.3, 0, NAN, 1}, none = {0, 0, NAN, 0}, nan = {NAN, 0.1, 0.1, 3};
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &one, m, 0), "inconclusive (1 seed)");
    ck_assert_str_eq(effect_allows(buf, sizeof buf, &one, m), "one seed: no interval");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &none, m, 0), "not run");
    ck_assert_str_eq(effect_allows(buf, sizeof buf, &none, m), "not run");
    ck_assert_str_eq(effect_cell(buf, sizeof buf, &nan, m, 0), "not available");
    ck_assert_str_eq(effect_allows(buf, sizeof buf, &nan, m), "n/a");
    ck_assert_str_eq(verdict_text(V_EQUIVALENT), "within the margin");
    ck_assert_str_eq(half_cell(buf, sizeof buf, &one), "inconclusive (1 seed)");
    ck_assert_str_eq(half_cell(buf, sizeof buf, &none), "not run");
}
END_TEST

/* The p values: the t distribution against known quantiles, each test's p at
 * its interval's edge, Holm's step-down. */
START_TEST(test_p_values)
{
    ck_assert_double_eq_tol(t_cdf(2.365, 7), 0.975, 2e-4);
    ck_assert_double_eq_tol(t_cdf(-2.262, 9), 0.025, 2e-4);
    ck_assert_double_eq_tol(t_cdf(12.706, 1), 0.975, 2e-4);
    ck_assert_double_eq_tol(t_cdf(0, 5), 0.5, 1e-12);
    ck_assert_double_eq_tol(t_cdf(1.895, 7), 0.95, 2e-4);
    /* a 95% interval that just touches 0 has p 0.05 */
    const summary edge = {0.01, 0.01 / 2.365 * sqrt(8.0) , 0.01, 8};
    ck_assert_double_eq_tol(p_against(&edge, 0), 0.05, 5e-4);
    /* a 90% interval whose end is the margin has the equivalence p 0.05 */
    const double sd = 0.002 * sqrt(8.0) / 1.895;
    const summary eq = {EQUIVALENCE_MARGIN - 0.002, sd, 2.365 * sd / sqrt(8.0), 8};
    ck_assert_double_eq_tol(p_tost(&eq, EQUIVALENCE_MARGIN), 0.05, 5e-4);
    ck_assert_double_eq_tol(effect_p(&eq, EQUIVALENCE_MARGIN), p_against(&eq, 0), 1e-12);
    const summary one = {0.3, 0, NAN, 1};
    ck_assert(isnan(p_against(&one, 0)) && isnan(p_tost(&one, 0.1)));
    /* Holm: sorted, scaled by m, m - 1, ..., kept monotone, capped at 1; NaN out */
    const double pv[5] = {0.01, 0.04, NAN, 0.03, 0.5};
    double adj[5];
    ck_assert_int_eq(holm(pv, 5, adj), 4);
    ck_assert_double_eq_tol(adj[0], 0.04, 1e-12);
    ck_assert_double_eq_tol(adj[3], 0.09, 1e-12);
    ck_assert_double_eq_tol(adj[1], 0.09, 1e-12);
    ck_assert_double_eq_tol(adj[4], 0.5, 1e-12);
    ck_assert(isnan(adj[2]));
}
END_TEST

/* The crossover: post ends ahead and gained across the appends. */
START_TEST(test_crossover)
{
    const summary below = {-0.03, 0.005, 0.005, 8}, above = {0.03, 0.005, 0.005, 8},
                  across = {0.001, 0.01, 0.01, 8}, one = {-0.03, 0, NAN, 1}, none = {0, 0, NAN, 0};
    ck_assert_int_eq(rule_crossover(&below, &below), V_REPRODUCED);
    ck_assert_int_eq(rule_crossover(&above, &below), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_crossover(&below, &above), V_NOT_REPRODUCED);
    ck_assert_int_eq(rule_crossover(&below, &across), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_crossover(&one, &one), V_INCONCLUSIVE);
    ck_assert_int_eq(rule_crossover(&none, &below), V_NOT_RUN);
}
END_TEST

/* What the paper states as a difference is the difference of the CEs it
 * states, to its 4 decimals (a typo in one of them shows here); the
 * reproduction's table of the paper's CEs is the paper's. */
START_TEST(test_paper_numbers_agree)
{
    const double half_unit = 0.5e-4 + 1e-12;
    ck_assert_double_eq_tol(PAPER_CE_POST_JOINT - PAPER_CE_PRE_JOINT, PAPER_JOINT_DELTA, half_unit);
    ck_assert_double_eq_tol(PAPER_CE_POST_GROW - PAPER_CE_PRE_GROW, PAPER_GROW_DELTA, half_unit);
    ck_assert_double_eq_tol(PAPER_GROW_DELTA - PAPER_JOINT_DELTA, PAPER_INTERACTION, half_unit);
    ck_assert_double_eq_tol(PAPER_CE_POST_FREEZE - PAPER_CE_PRE_FREEZE, PAPER_FREEZE_DELTA,
                            half_unit);
    ck_assert_double_eq_tol(PAPER_GAIN, PAPER_INIT_STD * sqrt(PAPER_WIDTH), 1e-12);
    ck_assert_double_eq_tol(PARITY_MARGIN, 0.0082, 1e-12);
    const char *arms[] = {"pre-joint", "post-joint", "pre-grow", "post-grow", "pre-single",
                          "post-single", "pre-freeze", "post-freeze", "post-joint-active",
                          "post-joint-total"};
    const double ce[] = {PAPER_CE_PRE_JOINT, PAPER_CE_POST_JOINT, PAPER_CE_PRE_GROW,
                         PAPER_CE_POST_GROW, PAPER_CE_PRE_SINGLE, PAPER_CE_POST_SINGLE,
                         PAPER_CE_PRE_FREEZE, PAPER_CE_POST_FREEZE, PAPER_CE_POST_JOINT_ACTIVE,
                         PAPER_CE_POST_JOINT_TOTAL};
    for (int i = 0; i < 10; i++)
        ck_assert_double_eq(paper_value(arms[i]), ce[i]);
    ck_assert(isnan(paper_value("peri-joint"))); /* the paper ran no peri-norm */
}
END_TEST

int main(void)
{
    Suite *s = suite_create("rules");
    TCase *tc = tcase_create("rules");
    tcase_add_test(tc, test_direction);
    tcase_add_test(tc, test_parity);
    tcase_add_test(tc, test_interaction_needs_controls);
    tcase_add_test(tc, test_mechanism_rows);
    tcase_add_test(tc, test_effect);
    tcase_add_test(tc, test_effect_words);
    tcase_add_test(tc, test_paper_numbers_agree);
    tcase_add_test(tc, test_p_values);
    tcase_add_test(tc, test_crossover);
    suite_add_tcase(s, tc);
    SRunner *sr = srunner_create(s);
    srunner_run_all(sr, CK_NORMAL);
    const int failed = srunner_ntests_failed(sr);
    srunner_free(sr);
    return failed ? 1 : 0;
}
