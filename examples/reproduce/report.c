/* report.md: the study in words and tables beside the paper's numbers, and its files. */
#include "report.h"

#include "paper.h"
#include "results.h"
#include "rules.h"
#include "runs.h"
#include "stats.h"
#include "verdicts.h"

/* ---- sections ----------------------------------------------------------------------------- */

/* The teacher's go/no-go figures, layer by layer. */
static void teacher_table(FILE *f, const study *s)
{
    const gonogo *g = &s->teacher;
    fprintf(f, "## Teacher go/no-go\n\nOn the first validation batch, after each layer: the per-token RMS of the teacher's residual stream, row-start tokens against regular ones; the attention mass queries put on position 0 (mean over heads) and the share of heads above %.1f (sink heads); the largest |activation| over the median, and where it sits (row x seq + position : dimension); position 0's value norm over the others'.\n\n| after layer | row-start RMS | regular RMS | ratio | kurtosis (all tokens) | mass on position 0 | sink heads | top / median | at | value norm ratio |\n|---|---|---|---|---|---|---|---|---|---|\n",
            SINK_THRESHOLD);
    for (int k = 1; k < g->n; k++)
        fprintf(f, "| %d | %.3f | %.3f | %.2f | %.1f | %.3f | %.0f%% | %.1f | %lld:%d | %.2f |\n", k,
                g->boundary[k], g->regular[k], g->ratio[k], g->kurt[k], g->mass0[k],
                100 * g->sink_rate[k], g->top_ratio[k], (long long)g->top_token[k], g->top_dim[k],
                g->value_norm0[k]);
}

/* Every arm's val CE over its seeds, its speed, and the paper's number. */
static void every_arm(FILE *f, const study *s, double unigram)
{
    const preset *p = s->p;
    fprintf(f, "\n## Every arm\n\n| arm | val CE (mean ± sd) | seeds | tokens/s | paper (nats/token, Qwen3 tokens) |\n|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        finals(s, p->arms[a].name, x);
        summary sm = summarise(x, p->seeds);
        double tps = 0;
        for (int i = 0; i < p->seeds; i++)
            tps += s->res[a][i]->tokens_per_s / p->seeds;
        char paper[64], ms[64];
        fmt_num(paper, sizeof paper, paper_value(p->arms[a].name), "%.4f");
        mean_sd(ms, sizeof ms, &sm);
        fprintf(f, "| %s | %s%s | %d | %.0f | %s |\n", p->arms[a].name, ms,
                did_not_learn(sm.mean, unigram) ? ", **did not learn**" : "", p->seeds, tps, paper);
    }
}

/* The unigram baseline under the table of every arm, and the arms that did
 * not learn by its rule (results.h). */
static void baseline_words(FILE *f, const study *s, double unigram)
{
    const preset *p = s->p;
    char u[32], t[32];
    fmt_num(u, sizeof u, unigram, "%.4f");
    fmt_num(t, sizeof t, unigram - LEARN_MARGIN, "%.4f");
    fprintf(f, "\nBaseline: the unigram CE of the held-out text is **%s** nats/byte, the "
               "cross-entropy of its targets under the byte (token) frequencies of one pass over "
               "the training text at the students' rows (add-one smoothed over the 257 tokens), "
               "counted as the final evaluation counts (its batches, padding masked, "
               "token-weighted): what a model of byte frequencies alone scores. An arm whose mean "
               "val CE is above the unigram CE minus %.1f nats/byte (%s) did not learn, and is "
               "flagged so in the table; ",
            u, LEARN_MARGIN, t);
    int flagged = 0;
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        const summary sm = summarise(x, finals(s, p->arms[a].name, x));
        if (did_not_learn(sm.mean, unigram))
            fprintf(f, "%s`%s` (%.4f)", flagged++ ? ", " : "here these did not learn: ",
                    p->arms[a].name, sm.mean);
    }
    fprintf(f, "%s.", flagged ? " (a comparison with one of them sets a model that barely "
                                 "learned beside one that did)"
                               : "here every arm learned");
    char runs[MAX_ARMS * MAX_SEEDS * 80]; /* every run: its arm's name (< 48), seed, CE */
    if (runs_not_learned(s, runs, sizeof runs))
        fprintf(f, " Single runs did not learn by the same rule in arms whose mean did: %s; "
                   "the rows that rest on those arms carry them.", runs);
    fputc('\n', f);
}

/* The students' attention sinks and massive activations at their last
 * evaluation (mean over seeds), or why a run has none. */
static void students_sinks(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Attention sinks and massive activations in the students (last evaluation, "
               "mean over seeds)\n\nOn the first validation batch, over the active layers: the "
               "attention mass on position 0 (mean over layers), the largest share of sink heads "
               "(mass above %.1f), the largest |activation| over the median, and the smallest "
               "value-norm ratio of position 0. The teacher's are in its go/no-go table above.\n\n"
               "| arm | mass on position 0 | sink heads | top / median | value norm ratio |\n"
               "|---|---|---|---|---|\n",
            SINK_THRESHOLD);
    int unmeasured = 0;
    for (int a = 0; a < p->n_arms; a++) {
        double v[4] = {0, 0, 0, 0};
        int ok = 1;
        for (int i = 0; i < p->seeds && ok; i++) {
            const run_result *r = s->res[a][i];
            if (r->n_pts == 0 || !isfinite(r->sinks[r->n_pts - 1].mass0)) {
                ok = 0;
                break;
            }
            const sink_point *sp = &r->sinks[r->n_pts - 1];
            v[0] += sp->mass0 / p->seeds;
            v[1] += sp->sink_rate / p->seeds;
            v[2] += sp->top_ratio / p->seeds;
            v[3] += sp->value_norm0 / p->seeds;
        }
        if (ok)
            fprintf(f, "| %s | %.3f | %.0f%% | %.1f | %.2f |\n", p->arms[a].name, v[0],
                    100 * v[1], v[2], v[3]);
        else
            fprintf(f, "| %s | not measured | | | |\n", p->arms[a].name), unmeasured++;
    }
    if (unmeasured)
        fprintf(f, "\nNot measured: runs kept from 0.3, whose trajectory did not carry these "
                   "figures yet; a kept run cannot gain them without running again.\n");
}

/* How the contrast tables read: the verdicts, the margins, the family. */
static void contrast_words(FILE *f, int has_table1, int family)
{
    fprintf(f, "\n## %s\n\nThe verdict column of %s comparison "
               "and interaction tables below: below 0 or above 0 when the 95%% interval excludes 0; within the paper's effect when the 90%% interval lies within ±%.4f "
               "nats/byte (delta, the equivalence margin, examples/reproduce/rules.h: the paper's grow "
               "effect of %.4f nats per Qwen3 token at an assumed %.0f bytes per token; its interaction is %.4f nats/byte): smaller than the "
               "paper's effect, not absent; else inconclusive, with the "
               "effects the 95%% interval still allows in multiples of that margin. The next column "
               "reads the same interval at half the margin, ±%.4f: only a row equivalent there shows "
               "an effect absent. The comparisons and interactions the preset asks for are one "
               "family of %d: each row's p is that of the test its verdict reads (the two-sided t "
               "test against 0 for a direction, the two one-sided tests at ±%.4f for a row within it, "
               "for an undecided row the smaller of the two), beside Holm's adjustment over the "
               "family; a verdict holds for the family only where its Holm p is below 0.05.\n\n",
            has_table1 ? "Table 1 analogue" : "How the tables below read",
            has_table1 ? "this table and of the" : "the",
            EQUIVALENCE_MARGIN, PAPER_GROW_EFFECT_PER_TOKEN, PAPER_BYTES_PER_TOKEN,
            -PAPER_INTERACTION / PAPER_BYTES_PER_TOKEN, ABSENCE_MARGIN, family,
            EQUIVALENCE_MARGIN);
}

/* Table 1: post - pre per regime, paired by seed, and the interaction. */
static void table1(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "| regime | pre | post | post - pre (95%% CI) | paper post - pre | verdict "
               "| at ±%.4f |\n|---|---|---|---|---|---|---|\n", ABSENCE_MARGIN);
    static const char *const four[4] = {"pre-joint", "post-joint", "pre-grow", "post-grow"};
    static const char *const regime[2] = {"joint", "grow"};
    double delta[2][MAX_SEEDS];
    int have[2] = {0, 0};
    contrast_cells c;
    for (int r = 0; r < 2; r++) {
        double x[MAX_SEEDS], y[MAX_SEEDS];
        if (!finals(s, four[2 * r], x) || !finals(s, four[2 * r + 1], y))
            continue;
        have[r] = 1;
        for (int i = 0; i < p->seeds; i++)
            delta[r][i] = y[i] - x[i];
        const summary sx = summarise(x, p->seeds), sy = summarise(y, p->seeds),
                      sd = summarise(delta[r], p->seeds);
        contrast_cells_fill(&c, s, &four[2 * r], 2, &sd, NAN);
        fprintf(f, "| %s | %.4f | %.4f | %+.4f ± %s | %+.4f | %s | %s |\n", regime[r], sx.mean,
                sy.mean, sd.mean, c.half,
                paper_value(four[2 * r + 1]) - paper_value(four[2 * r]), c.verdict, c.absence);
    }
    if (!have[0] || !have[1])
        return;
    double d[MAX_SEEDS];
    for (int i = 0; i < p->seeds; i++)
        d[i] = delta[1][i] - delta[0][i];
    const summary si = summarise(d, p->seeds);
    contrast_cells_fill(&c, s, four, 4, &si, NAN);
    fprintf(f, "\nInteraction I = (post - pre | grow) - (post - pre | joint) = **%+.4f**, 95%% CI "
               "[%s, %s] over %d seed%s (t interval of the per-seed interactions); paper: %+.4f; "
               "verdict: %s; at ±%.4f: %s.\n",
            si.mean, c.lo, c.hi, p->seeds, p->seeds == 1 ? "" : "s", PAPER_INTERACTION,
            c.verdict, ABSENCE_MARGIN, c.absence);
}

/* The controls: the arms of neither Table 1 nor a design. */
static void controls_table(FILE *f, const study *s)
{
    const preset *p = s->p;
    for (int a = 0, told = 0; a < p->n_arms; a++) {
        const char *nm = p->arms[a].name;
        if (a >= p->n_arms - p->design.n_cells)
            continue; /* the design's arms come last, in a table of their own */
        if (strstr(nm, "-joint") && !strstr(nm, "joint-") && strncmp(nm, "peri", 4) != 0)
            continue; /* the main arms are above (peri-norm's are not) */
        if (strstr(nm, "-grow") && !strchr(strstr(nm, "-grow") + 5, '-') && strncmp(nm, "peri", 4) != 0)
            continue;
        double x[MAX_SEEDS];
        finals(s, nm, x);
        summary sm = summarise(x, p->seeds);
        char paper[64], ms[64];
        fmt_num(paper, sizeof paper, paper_value(nm), "%.4f");
        mean_sd(ms, sizeof ms, &sm);
        if (!told++)
            fprintf(f, "\n## Controls\n\n| control | val CE (mean ± sd) | paper |\n|---|---|---|\n");
        fprintf(f, "| %s | %s | %s |\n", nm, ms, paper);
    }
}

/* The loss's response at each phase change, mean over seeds. */
static void response_table(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Loss response at each phase change (mean over seeds)\n\n"
               "The paper smooths over %d of %dk steps (%.1f%% of a phase): here the baseline (mean "
               "training loss before the change) and the trailing mean span %lld steps. Jump: loss of "
               "the first step after the change minus the baseline. Area: excess over the baseline "
               "per step over the first 2%% and 10%% of a phase. Recovery: steps until the trailing "
               "mean is back at the baseline. An *append* adds layers; a *restart* (the budget "
               "controls) only restarts the LR. Paper: jump pre ~%.3f, post ~%.2f-%.2f; recovery pre "
               "~%.0f steps, post ~%.0fk (of %dk-step phases).\n\n"
               "| arm | change | kind | jump | area/step 2%% | area/step 10%% | recovery (steps) |\n|---|---|---|---|---|---|---|\n",
            PAPER_SMOOTHING_STEPS, PAPER_PHASE_STEPS / 1000,
            100.0 * PAPER_SMOOTHING_STEPS / PAPER_PHASE_STEPS, (long long)response_window(p),
            PAPER_JUMP_PRE, PAPER_JUMP_POST_LO, PAPER_JUMP_POST_HI, PAPER_RECOVERY_PRE,
            PAPER_RECOVERY_POST / 1000, PAPER_PHASE_STEPS / 1000);
    for (int a = 0; a < p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_appends; k++) {
            double j = 0, a2 = 0, a10 = 0, rec = 0;
            int never = 0;
            for (int i = 0; i < p->seeds; i++) {
                const run_result *r = s->res[a][i];
                j += r->resp[k].jump / p->seeds;
                a2 += r->area2[k] / p->seeds;
                a10 += r->area10[k] / p->seeds;
                never |= r->resp[k].recovery < 0;
                rec += (double)r->resp[k].recovery / p->seeds;
            }
            char recovery[64];
            if (never)
                snprintf(recovery, sizeof recovery, "not within the phase%s",
                         p->seeds > 1 ? " (some seeds)" : "");
            else
                snprintf(recovery, sizeof recovery, "%.0f", rec);
            fprintf(f, "| %s | %d | %s | %+.4f | %.4f | %.4f | %s |\n", p->arms[a].name, k + 1,
                    r0->is_append[k] ? "append" : "restart", j, a2, a10, recovery);
        }
    }
}

/* Block removal on a fixed batch: each block's dCE and angle over the seeds. */
static void removal_table(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Block removal on a fixed batch (first validation batch)\n\nPaper: pre-grow's last block dCE %.2f, angle %.3f; every post-grow block dCE >= %.2f, angle > %.2f.\n\n| arm | block | dCE (mean ± sd) | angle (mean ± sd) |\n|---|---|---|---|\n",
            PAPER_REMOVAL_PRE_LAST_DCE, PAPER_REMOVAL_PRE_LAST_ANGLE, PAPER_REMOVAL_POST_DCE,
            PAPER_REMOVAL_POST_ANGLE);
    for (int a = 0; a < p->n_arms; a++) {
        for (int k = 0; k < s->res[a][0]->n_blocks_measured; k++) {
            double x[MAX_SEEDS], y[MAX_SEEDS];
            for (int i = 0; i < p->seeds; i++) {
                x[i] = s->res[a][i]->removal[k].dce;
                y[i] = s->res[a][i]->removal[k].angle;
            }
            summary sd = summarise(x, p->seeds), sa = summarise(y, p->seeds);
            char m1[64], m2[64];
            mean_sd(m1, sizeof m1, &sd);
            mean_sd(m2, sizeof m2, &sa);
            fprintf(f, "| %s | %d | %s | %s |\n", p->arms[a].name, k + 1, m1, m2);
        }
    }
}

/* The boundary scale over training, at every evaluation of the joint and
 * grow arms (the paper's trajectories, on any recipe). */
static void trajectory_table(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Boundary scale over training (mean over seeds)\n\nAt every evaluation, the per-token RMS of the residual stream after the last active layer on the first validation batch (the paper: a trajectory over growth checkpoints); row-start tokens against regular ones. Paper, pre-norm: std across tokens %.2f -> %.2f, kurtosis > %.0f, document-boundary tokens %.0f -> %.0f vs regular %.1f -> %.1f; post-norm: std %.2f-%.2f, both below %.1f.\n\n| arm | step | active layers | RMS std | kurtosis | RMS row-start | RMS regular | ratio |\n|---|---|---|---|---|---|---|---|\n",
            PAPER_RMS_STD_PRE_FROM, PAPER_RMS_STD_PRE_TO, PAPER_KURTOSIS_PRE,
            PAPER_RMS_BOUNDARY_PRE_FROM, PAPER_RMS_BOUNDARY_PRE_TO, PAPER_RMS_REGULAR_PRE_FROM,
            PAPER_RMS_REGULAR_PRE_TO, PAPER_RMS_STD_POST_LO, PAPER_RMS_STD_POST_HI,
            PAPER_RMS_POST_BELOW);
    for (int a = 0; a < p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        if (p->arms[a].schedule != LATTICE_SCHEDULE_PRESET_JOINT &&
            p->arms[a].schedule != LATTICE_SCHEDULE_PRESET_GROW)
            continue;
        const int n_seeds = seeds_with_points(s, a);
        for (int k = 0; k < r0->n_pts; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const point *pt = seed_point(s, a, i, k);
                if (!pt)
                    continue;
                v[0] += pt->rms_std / n_seeds;
                v[1] += pt->rms_kurt / n_seeds;
                v[2] += pt->rms_boundary / n_seeds;
                v[3] += pt->rms_regular / n_seeds;
            }
            fprintf(f, "| %s | %lld | %d | %.3f | %.1f | %.3f | %.3f | %.2f |\n", p->arms[a].name,
                    (long long)r0->pts[k].step, r0->pts[k].active, v[0], v[1], v[2], v[3],
                    v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
}

/* The boundary scale at the end, by block boundary. */
static void boundary_table(FILE *f, const study *s)
{
    const preset *p = s->p;
    fprintf(f, "\n## Boundary scale at block boundaries at the end (first validation batch, mean over seeds)\n\n| arm | after block | RMS std (all) | kurtosis (all) | RMS row-start | RMS regular | ratio |\n|---|---|---|---|---|---|---|\n");
    for (int a = 0; a < p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        for (int k = 0; k < r0->n_boundaries; k++) {
            double v[4] = {0, 0, 0, 0};
            for (int i = 0; i < p->seeds; i++) {
                const kept_scale *st = s->res[a][i]->rms[k];
                v[0] += st[2].std / p->seeds;
                v[1] += st[2].kurtosis / p->seeds;
                v[2] += st[1].mean / p->seeds;
                v[3] += st[0].mean / p->seeds;
            }
            fprintf(f, "| %s | %d | %.3f | %.1f | %.3f | %.3f | %.1f |\n", p->arms[a].name, k + 1,
                    v[0], v[1], v[2], v[3], v[3] > 0 ? v[2] / v[3] : NAN);
        }
    }
}

void report(FILE *f, const study *s)
{
    const preset *p = s->p;
    report_opening(f, p);
    verdicts(f, s);
    teacher_table(f, s);
    const double unigram = s->unigram;
    every_arm(f, s, unigram);
    baseline_words(f, s, unigram);
    const int table = arm_index(s, "pre-joint") >= 0 || arm_index(s, "post-joint") >= 0 ||
                      arm_index(s, "pre-grow") >= 0 || arm_index(s, "post-grow") >= 0;
    double adj[MAX_CONTRASTS];
    contrast_words(f, table, contrast_family(s, adj));
    if (table)
        table1(f, s);
    controls_table(f, s);
    contrast_tables(f, s, adj);
    response_table(f, s);
    removal_table(f, s);
    trajectory_table(f, s);
    boundary_table(f, s);
    students_sinks(f, s);
}

void report_files(FILE *f, const char *dir)
{
    static const struct {
        const char *file, *what;
        int image;
    } files[] = {
        {"curves_steps.svg", "validation CE against training steps: the mean over seeds with a "
                             "min..max band, one line per arm (pre-norm blue, post-norm red, "
                             "peri-norm green; line style by schedule; dashed lines at phase "
                             "changes)", 1},
        {"curves_active_layer_tokens.svg", "the same curves against active-layer tokens (the "
                                           "compute each arm has spent): grow arms that reach a "
                                           "loss with fewer layer-tokens sit to the left", 1},
        {"curves.csv", "every step's training loss of every run, with the validation CE and "
                       "boundary statistics at evaluated steps", 0},
        {"bands.csv", "the plots' data: mean, min and max over seeds per arm and evaluation", 0},
        {"results.json", "every number of every run, the teacher's go/no-go and the preset", 0},
    };
    fprintf(f, "\n## Files\n\n");
    for (size_t k = 0; k < sizeof files / sizeof files[0]; k++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, files[k].file);
        if (access(path, R_OK) != 0) {
            if (files[k].image)
                fprintf(f, "- `%s`: not drawn (gnuplot is not installed; the data are in "
                           "bands.csv)\n", files[k].file);
            continue;
        }
        if (files[k].image)
            fprintf(f, "- [`%s`](%s) (and .png): %s.\n\n  ![%s](%s)\n\n", files[k].file,
                    files[k].file, files[k].what, files[k].what, files[k].file);
        else
            fprintf(f, "- [`%s`](%s): %s.\n", files[k].file, files[k].file, files[k].what);
    }
}

void report_summary(FILE *f, const study *s, const char *dir)
{
    const preset *p = s->p;
    /* the verdict table from verdicts(), without its long preamble */
    char *text = NULL;
    verdicts_text(s, &text);
    fprintf(f, "\n# Summary: preset `%s`, %d seed%s, %d arm%s\n\n", p->name, p->seeds,
            p->seeds == 1 ? "" : "s", p->n_arms, p->n_arms == 1 ? "" : "s");
    const char *table = strstr(text, "| finding |");
    if (table) {
        fprintf(f, "Verdicts (rules and the p column: the full report):\n\n");
        for (const char *line = table; *line;) {
            const char *end = strchr(line, '\n');
            const size_t n = end ? (size_t)(end - line) : strlen(line);
            if (n == 0 || line[0] != '|')
                break;
            fprintf(f, "%.*s\n", (int)n, line);
            line = end ? end + 1 : line + n;
        }
    } else {
        fprintf(f, "No row of the paper's verdict table applies to these arms; the design's and "
                   "the preset's own comparisons are in the full report.\n");
    }
    free(text);
    /* did every arm learn? */
    const double u = s->unigram;
    char dnl[1024] = "";
    int n_dnl = 0;
    double lo = INFINITY, hi = -INFINITY;
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        const int n = finals(s, p->arms[a].name, x);
        if (!n)
            continue;
        const double mean = summarise(x, n).mean;
        lo = fmin(lo, mean);
        hi = fmax(hi, mean);
        if (did_not_learn(mean, u))
            snprintf(dnl + strlen(dnl), sizeof dnl - strlen(dnl), "%s%s (%.4f)",
                     n_dnl++ ? ", " : "", p->arms[a].name, mean);
    }
    char ub[32];
    fmt_num(ub, sizeof ub, u, "%.4f");
    if (n_dnl)
        fprintf(f, "\nDid not learn (mean val CE within %.1f nats/byte of the unigram CE %s, or "
                   "above): %s. Every row resting on one of them reads \"" NOT_LEARNED_VERDICT
                   "\".\n",
                LEARN_MARGIN, ub, dnl);
    else if (isfinite(lo))
        fprintf(f, "\nEvery arm learned: mean val CE %.4f to %.4f nats/byte, against %s for a "
                   "model of byte frequencies alone (the unigram CE).\n",
                lo, hi, ub);
    /* where the rest is */
    fprintf(f, "\nThe full report (every table, the rules, each comparison's interval and p): "
               "%s/report.md\n", dir);
    static const char *const plots[] = {"curves_steps.svg", "curves_active_layer_tokens.svg"};
    int drawn = 0;
    for (size_t k = 0; k < sizeof plots / sizeof plots[0]; k++) {
        char path[2048];
        snprintf(path, sizeof path, "%s/%s", dir, plots[k]);
        if (access(path, R_OK) == 0)
            fprintf(f, "%s%s", drawn++ ? ", " : "Plots: ", path);
    }
    fprintf(f, "%s", drawn ? " (and .png)\n" : "Plots: not drawn (gnuplot is not installed; "
                                               "their data are in bands.csv)\n");
    fprintf(f, "The numbers: %s/results.json, %s/curves.csv, %s/bands.csv\n", dir, dir, dir);
    /* how it relates to the committed studies */
    int shortest = INT_MAX;
    for (int a = 0; a < p->n_arms; a++)
        shortest = p->arms[a].steps_per_phase < shortest ? p->arms[a].steps_per_phase : shortest;
    fprintf(f, "\nHow this relates to doc/REPRODUCTION.md: ");
    if (shortest < MECHANISM_MIN_STEPS)
        fprintf(f, "this run's phases are %d steps, shorter than the %d the mechanism rows need, "
                   "and its teacher is %s; it shows that the whole study runs, and what runs "
                   "this short give, not what the paper's claims come to. ",
                shortest, MECHANISM_MIN_STEPS,
                s->teacher.n > 0 && isfinite(s->teacher.max_ratio) && s->teacher.max_ratio >= 3
                    ? "GO"
                    : "NO-GO (no massive row-start activations to act on)");
    fprintf(f, "The committed studies that doc/REPRODUCTION.md reads (doc/results/*/report.md, "
               "each rebuilt from its kept runs with --report-only) run the same code at the lengths where the paper's "
               "mechanism can act, and doc/REPRODUCTION.md says which of the paper's findings "
               "they decide and which they leave open. A verdict here that differs from theirs "
               "is about this preset's sizes; compare with their rows before reading it as a "
               "finding.\n");
}
