/* The verdict rules: pure functions from the study's numbers to a verdict.
 *
 * Each claims no more than its seeds allow. verdicts.c gathers the numbers
 * and prints the table; tests/reproduce/test_rules.c tests every branch. */
#ifndef REPRODUCE_RULES_H
#define REPRODUCE_RULES_H

#include "paper.h"
#include "study.h"

typedef enum verdict {
    V_NOT_RUN,        /* the arms it needs did not run */
    V_REPRODUCED,
    V_NOT_REPRODUCED,
    V_INCONCLUSIVE,   /* the interval cannot tell (one seed always) */
    V_NOT_APPLICABLE, /* a mechanism row without its precondition (GO teacher, long enough runs) */
    V_NOT_AVAILABLE,  /* a diagnostic failed (NaN): never a pass */
    /* rule_effect's (appended): */
    V_EQUIVALENT,     /* the 90% interval inside +-EQUIVALENCE_MARGIN: no effect that large */
    V_BELOW_ZERO,     /* the 95% interval below 0: a direction shown */
    V_ABOVE_ZERO      /* the 95% interval above 0 */
} verdict;

const char *verdict_text(verdict v);

/* The paper's grow effect, post - pre = -0.0328 nats per Qwen3 token
 * (paper.h), in nats per byte: Qwen3's tokenizer averages about 4 bytes of
 * English text per token (PAPER_BYTES_PER_TOKEN), so 0.0082 nats/byte.
 * Parity is an equivalence test with this margin: a difference smaller than
 * the effect the paper reports for grow.
 *
 * The bytes per token are an assumption, not a measurement of the paper's
 * text: at b bytes per token the margin is 0.0328 / b. A verdict that reads
 * the margin holds only over the range of b it survives: the 4-pass grow
 * gap's exclusion of the paper's effect (its 95% interval's lower end above
 * -0.0328 / b) holds up to 4.65 bytes per token, and the cross report
 * (examples/reproduce/cross.py) prints that bound, from the kept runs, beside
 * the claim. */
#define PAPER_GROW_EFFECT_PER_TOKEN (-PAPER_GROW_DELTA)
#define PARITY_MARGIN (PAPER_GROW_EFFECT_PER_TOKEN / PAPER_BYTES_PER_TOKEN)

/* The margin of every equivalence test (delta): 0.0082 nats/byte, the parity
 * margin above. The paper's interaction, -0.0332 nats/token, is 0.0083
 * nats/byte at the same 4 bytes per token. delta is the paper's own effect,
 * so a row equivalent at delta is "within the paper's effect (±delta)":
 * smaller than what the paper reports, never absent. */
#define EQUIVALENCE_MARGIN PARITY_MARGIN

/* The second margin, delta / 2 = 0.0041 nats/byte: only a row whose 90%
 * interval lies inside +-ABSENCE_MARGIN may be called absent ("gone", "level",
 * "closed", "flat", "no effect"); its verdict is "equivalent". */
#define ABSENCE_MARGIN (EQUIVALENCE_MARGIN / 2)

/* Mechanism rows need phases at least this long (steps): shorter runs say
 * nothing about what training grows. */
#define MECHANISM_MIN_STEPS 500

/* A paired difference expected on the side of sign (-1 or +1): reproduced
 * when the 95% interval lies on that side, not reproduced when it lies on
 * the other, else inconclusive. One seed has no interval: inconclusive. */
verdict rule_direction(const summary *d, int sign);

/* Parity within margin (two one-sided tests at 95%: the 90% interval inside
 * +-margin): reproduced; the interval wholly outside +-margin: not
 * reproduced; else, and with one seed, inconclusive. */
verdict rule_parity(const summary *d, double margin);

/* The interaction is reproduced only when its interval is below 0 and the
 * budget controls (grow beats post-joint matched on active-layer and on
 * total tokens) are reproduced too; when the controls did not run or are
 * inconclusive, the compute confound is open: inconclusive. */
verdict rule_interaction(const summary *i, verdict controls);

/* Both budget controls (post-joint-matched - post-grow > 0). */
verdict rule_controls(const summary *active, const summary *total);

/* Mechanism rows: the precondition, then the rule. go: the teacher's
 * largest boundary/regular ratio reached 3 (-1: not measured); steps: the
 * shortest phase. NOT_APPLICABLE without them; NOT_AVAILABLE on NaN. */
verdict rule_mechanism_gate(int go, int64_t steps);

/* The loss jump's shape at an append, over seeds: post-norm loses a larger
 * share of what phase 0 learned (share_gap: post's share - pre's, paired by
 * seed, > 0) and recovers more slowly (log_recovery: log(post's recovery
 * steps / pre's), paired by seed, > 0). Reproduced when both directions
 * are; not reproduced when either lies on the other side; else (and with
 * one seed) inconclusive. */
verdict rule_jump_shape(const summary *share_gap, const summary *log_recovery);

/* Block removal over seeds, per seed: ratio = pre-grow's last-block dCE /
 * post-grow's smallest block dCE; post_min = post-grow's smallest block dCE;
 * angle_gap = post-grow's smallest angle - pre-grow's last-block angle.
 * Reproduced: ratio's 95% interval below 1/4, post_min's above the floor and
 * angle_gap's above 0. Not reproduced: ratio's above 1/4, post_min's below
 * the floor, or angle_gap's below 0. Else inconclusive. */
#define BLOCK_REMOVAL_FLOOR 0.05 /* nats/byte: a block that matters changes the loss at least this */
#define BLOCK_REMOVAL_RATIO 0.25
verdict rule_block_removal(const summary *ratio, const summary *post_min, const summary *angle_gap,
                           double floor);

/* Row-start tokens massive under pre-norm and not under post, at a
 * boundary an appended block reads, at the same depth and step: pre_ratio
 * is pre-norm's row-start / regular RMS ratio over seeds; half_gap, per
 * seed, post's ratio - half of pre's. Reproduced: pre_ratio's 95% interval
 * above 3 and half_gap's below 0. Not reproduced: pre_ratio's below 1.5,
 * or half_gap's above 0. Else inconclusive. */
verdict rule_boundary(const summary *pre_ratio, const summary *half_gap);

/* The paper's crossover: post-norm behind or level on the single block, ahead
 * once blocks are appended. last: post - pre at the last phase's end, paired
 * by seed; change: that minus post - pre at the end of phase 0. Reproduced:
 * both 95% intervals below 0 (post ends ahead, and gained across the
 * appends). Not reproduced: either above 0. Else, and with one seed,
 * inconclusive. */
verdict rule_crossover(const summary *last, const summary *change);

/* An interaction, comparison, intervention or trend row, with no side
 * expected: direction shown (V_BELOW_ZERO / V_ABOVE_ZERO) when the 95%
 * interval excludes 0; else equivalent (V_EQUIVALENT) when the 90% interval
 * lies strictly inside +-margin (two one-sided tests at 5%); else
 * inconclusive. A shown direction is never equivalent, however small: only
 * an equivalent row may be called absent ("gone", "flat", "level with", "no
 * effect"). No seeds: not run; a NaN: not available; one seed (no
 * interval): inconclusive. */
verdict rule_effect(const summary *d, double margin);

/* The 90% interval of a summary (the one rule_effect's and rule_parity's
 * equivalence test reads): 0 with no interval (fewer than 2 seeds, NaN). */
int interval90(const summary *d, double *lo, double *hi);

/* What the 95% interval still allows, in words: "allows effects from
 * -0.0204 to +0.0021, up to 2.5x the margin" (the larger end's size over the
 * margin); "one seed: no interval" with one seed, "not run" with none, "n/a"
 * on a NaN. Returns buf. */
char *effect_allows(char *buf, size_t n, const summary *d, double margin);

/* A row's verdict cell from rule_effect at margin: "below 0" / "above 0";
 * with sign (the side a finding expects, -1 or +1; 0 for none) "reproduced
 * (below 0)" or "not reproduced (above 0)"; inside the margin, at
 * EQUIVALENCE_MARGIN "within the paper's effect (90% CI [-0.0050, +0.0040]
 * inside ±0.0082)", at ABSENCE_MARGIN "equivalent (90% CI ... inside
 * ±0.0041)"; "inconclusive: 90% CI [-0.0170, +0.0010] not inside ±0.0082; "
 * and effect_allows(); "inconclusive (1 seed)", "not run", "not available".
 * Returns buf. */
char *effect_cell(char *buf, size_t n, const summary *d, double margin, int sign);

/* The verdict at ABSENCE_MARGIN in a few words: "below 0" / "above 0",
 * "equivalent (90% CI [..] inside ±0.0041)", "not inside ±0.0041", "inconclusive
 * (1 seed)", "not run", "not available". Returns buf. */
char *half_cell(char *buf, size_t n, const summary *d);

/* The verdict word at a margin: verdict_text(rule_effect()), but
 * "equivalent" only at ABSENCE_MARGIN or below ("within the paper's effect"
 * at a larger margin). */
const char *effect_kind(const summary *d, double margin);

/* The p of the test rule_effect's verdict reads: the two-sided t test
 * against 0 for a shown direction, the equivalence test at margin for a row
 * inside it, and for an undecided row the smaller of the two (the test
 * nearest to deciding it). NaN without an interval. */
double effect_p(const summary *d, double margin);

/* The interval of a summary wholly above (+1) or below (-1) x; 0 when it
 * straddles x or has no interval. */
int interval_side(const summary *s, double x);

#endif
