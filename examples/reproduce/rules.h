/* The verdict rules: pure functions from the study's numbers to a verdict,
 * each claiming no more than its seeds allow. verdicts.c gathers the numbers
 * and prints the table; tests/reproduce/test_rules.c tests every branch. */
#ifndef REPRODUCE_RULES_H
#define REPRODUCE_RULES_H

#include "study.h"

typedef enum verdict {
    V_NOT_RUN,        /* the arms it needs did not run */
    V_REPRODUCED,
    V_NOT_REPRODUCED,
    V_INCONCLUSIVE,   /* the interval cannot tell (one seed always) */
    V_NOT_APPLICABLE, /* a mechanism row without its precondition (GO teacher, long enough runs) */
    V_NOT_AVAILABLE   /* a diagnostic failed (NaN): never a pass */
} verdict;

const char *verdict_text(verdict v);

/* The paper's grow effect, post - pre = -0.0328 nats per Qwen3 token, in
 * nats per byte: Qwen3's tokenizer averages about 4 bytes of English text
 * per token (PAPER_BYTES_PER_TOKEN), so 0.0082 nats/byte. Parity is an
 * equivalence test with this margin: a difference smaller than the effect
 * the paper reports for grow. */
#define PAPER_GROW_EFFECT_PER_TOKEN 0.0328
#define PAPER_BYTES_PER_TOKEN 4.0
#define PARITY_MARGIN (PAPER_GROW_EFFECT_PER_TOKEN / PAPER_BYTES_PER_TOKEN)

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

/* The loss jump at the first append: post's jump above 3x pre's (and above
 * 0.005), per seed mean. */
verdict rule_loss_jump(double pre, double post);

/* Block removal: pre-grow's last block a near no-op (dCE below 1/4 of
 * post-grow's smallest block's), every post-grow block effective (dCE at
 * least floor, and angle above pre's last). */
#define BLOCK_REMOVAL_FLOOR 0.05 /* nats/byte: a block that matters changes the loss at least this */
verdict rule_block_removal(double pre_last_dce, double pre_last_angle, double post_min_dce,
                           double post_min_angle, double floor);

/* Boundary tokens massive under pre-norm and not under post, at the same
 * depth: pre's boundary/regular ratio at least 3 and its RMS std growing,
 * post's below half of pre's. Post's ratio reaching half of pre's, or pre's
 * under 1.5: not reproduced. */
verdict rule_boundary(double pre_ratio, double post_ratio, double pre_std0, double pre_std1);

#endif
