/* The study's numbers for other programs: curves.csv, bands.csv, results.json. */
#include "results.h"

#include "design.h"

#include "files.h"
#include "preset.h"
#include "record.h"
#include "report.h"
#include "rules.h"
#include "runs.h"
#include "stats.h"
#include "verdicts.h"


/* Each counted target of a batch added to counts. */
static void count_targets(const lattice_data_batch *b, double *counts)
{
    for (int64_t k = 0; k < (int64_t)b->batch * b->seq; k++)
        if (b->mask[k] && b->targets[k] >= 0 && b->targets[k] < VOCAB)
            counts[b->targets[k]] += 1;
}

double unigram_ce(const preset *p)
{
    lattice_data *d = open_data(p, 1);
    lattice_data_batch b;
    lattice_data_position pos = {0, 0};
    double train[VOCAB] = {0}, last[VOCAB];
    int64_t n = 0;
    /* one pass, as report.c's batches_per_pass walks it: a batch that turns
     * the epoch after a pass of whole batches is all next pass's */
    while (pos.epoch == 0) {
        check(lattice_data_next(d, &b), "data", lattice_data_errmsg(d));
        check(lattice_data_get_position(d, &pos), "data", lattice_data_errmsg(d));
        memset(last, 0, sizeof last);
        count_targets(&b, last);
        for (int t = 0; t < VOCAB; t++)
            train[t] += last[t];
        n++;
    }
    if (pos.index == p->batch && n > 1)
        for (int t = 0; t < VOCAB; t++)
            train[t] -= last[t];
    double total = 0;
    for (int t = 0; t < VOCAB; t++)
        total += train[t] + 1;
    /* the final evaluation's batches: final_eval_batches of them, else all */
    int64_t nb = lattice_data_get_n_val_batches(d);
    if (p->final_eval_batches > 0 && p->final_eval_batches < nb)
        nb = p->final_eval_batches;
    double sum = 0, count = 0;
    for (int64_t i = 0; i < nb; i++) {
        check(lattice_data_get_val_batch(d, i, &b), "validation batch", lattice_data_errmsg(d));
        double val[VOCAB] = {0};
        count_targets(&b, val);
        for (int t = 0; t < VOCAB; t++) {
            sum -= val[t] * log((train[t] + 1) / total);
            count += val[t];
        }
    }
    lattice_data_destroy(d);
    return count > 0 ? sum / count : NAN;
}

int did_not_learn(double mean_ce, double unigram)
{
    return isfinite(unigram) && !(mean_ce < unigram - LEARN_MARGIN);
}

int not_learned(const study *s, const char *const *names, int n, char *buf, size_t len)
{
    int count = 0;
    if (len)
        buf[0] = 0;
    const double u = s->unigram;
    for (int k = 0; k < n; k++) {
        int seen = 0; /* an arm named twice (a row's corners) counts once */
        for (int j = 0; j < k && !seen; j++)
            seen = strcmp(names[j], names[k]) == 0;
        double x[MAX_SEEDS];
        const int m = seen ? 0 : finals(s, names[k], x);
        if (m == 0 || !did_not_learn(summarise(x, m).mean, u))
            continue;
        if (len)
            snprintf(buf + strlen(buf), len - strlen(buf), "%s%s", count ? ", " : "", names[k]);
        count++;
    }
    return count;
}

int runs_not_learned(const study *s, char *buf, size_t len)
{
    int count = 0;
    if (len)
        buf[0] = 0;
    for (int a = 0; a < s->p->n_arms; a++) {
        double x[MAX_SEEDS];
        const int m = finals(s, s->p->arms[a].name, x);
        if (m == 0 || did_not_learn(summarise(x, m).mean, s->unigram))
            continue; /* an arm that did not learn is named as one */
        for (int i = 0; i < m; i++) {
            if (!did_not_learn(x[i], s->unigram))
                continue;
            if (len)
                snprintf(buf + strlen(buf), len - strlen(buf), "%s`%s` seed %d (%.4f)",
                         count ? ", " : "", s->p->arms[a].name, i + 1, x[i]);
            count++;
        }
    }
    return count;
}

/* One row per training step of every run: its training loss, and at the
 * steps that were evaluated, the validation CE and the boundary statistics
 * (empty elsewhere). */
void write_csv(const char *path, const study *s)
{
    outfile o;
    out_open(&o, path);
    record_csv_header(o.f);
    for (int a = 0; a < s->p->n_arms; a++)
        for (int i = 0; i < s->p->seeds; i++)
            record_csv_rows(o.f, s->p->arms[a].name, i + 1, s->res[a][i]);
    out_commit(&o);
}

static json_object *jd(double v) { return isfinite(v) ? json_object_new_double(v) : NULL; }

static json_object *interval_json(int ok, double lo, double hi)
{
    if (!ok || !isfinite(lo) || !isfinite(hi))
        return NULL;
    json_object *a = json_object_new_array();
    json_object_array_add(a, json_object_new_double(lo));
    json_object_array_add(a, json_object_new_double(hi));
    return a;
}

/* A paired difference over seeds as report.md's comparison and interaction
 * tables give it: n, mean, sd, the 95% half-width, the 95% and 90% intervals
 * (null without one: fewer than 2 seeds), and rule_effect's verdict, as a
 * word (verdict_kind) and as the table's cell (verdict). */
static json_object *effect_json(json_object *o, const summary *sm)
{
    char cell[256];
    double lo90 = NAN, hi90 = NAN;
    const int has90 = interval90(sm, &lo90, &hi90);
    json_object_object_add(o, "n", json_object_new_int(sm->n));
    json_object_object_add(o, "mean", sm->n ? jd(sm->mean) : NULL);
    json_object_object_add(o, "sd", sm->n > 1 ? jd(sm->sd) : NULL);
    json_object_object_add(o, "half_width_95", sm->n > 1 ? jd(sm->half) : NULL);
    json_object_object_add(o, "ci95", interval_json(sm->n > 1, sm->mean - sm->half,
                                                    sm->mean + sm->half));
    json_object_object_add(o, "ci90", interval_json(has90, lo90, hi90));
    json_object_object_add(o, "verdict_kind",
                           json_object_new_string(effect_kind(sm, EQUIVALENCE_MARGIN)));
    json_object_object_add(o, "verdict", json_object_new_string(effect_cell(
                                             cell, sizeof cell, sm, EQUIVALENCE_MARGIN, 0)));
    /* the same interval at half the margin: only "equivalent" there shows an absence */
    json_object_object_add(o, "absence_margin", json_object_new_double(ABSENCE_MARGIN));
    json_object_object_add(o, "verdict_kind_half",
                           json_object_new_string(effect_kind(sm, ABSENCE_MARGIN)));
    json_object_object_add(o, "verdict_half", json_object_new_string(half_cell(cell, sizeof cell, sm)));
    /* the p of the test the verdict reads, and of each test (report.md adjusts
     * them over the preset's contrasts by Holm) */
    json_object_object_add(o, "p", sm->n > 1 ? jd(effect_p(sm, EQUIVALENCE_MARGIN)) : NULL);
    json_object_object_add(o, "p_zero", sm->n > 1 ? jd(p_against(sm, 0)) : NULL);
    json_object_object_add(o, "p_within_margin",
                           sm->n > 1 ? jd(p_tost(sm, EQUIVALENCE_MARGIN)) : NULL);
    json_object_object_add(o, "p_within_half_margin",
                           sm->n > 1 ? jd(p_tost(sm, ABSENCE_MARGIN)) : NULL);
    return o;
}

static json_object *names_json(const char *const *names, int n)
{
    json_object *a = json_object_new_array();
    for (int k = 0; k < n; k++)
        json_object_array_add(a, json_object_new_string(names[k]));
    return a;
}

/* A row that rests on an arm that did not learn: those arms (did_not_learn,
 * [] for none), and then no verdict but NOT_LEARNED_VERDICT, no p. */
static json_object *not_learned_json(json_object *o, const study *s, const char *const *names,
                                     int n)
{
    char dnl[512];
    json_object *list = json_object_new_array();
    if (not_learned(s, names, n, dnl, sizeof dnl)) {
        char buf[600];
        for (int k = 0; k < n; k++) {
            int seen = 0;
            for (int j = 0; j < k && !seen; j++)
                seen = strcmp(names[j], names[k]) == 0;
            if (!seen && not_learned(s, &names[k], 1, buf, sizeof buf))
                json_object_array_add(list, json_object_new_string(names[k]));
        }
        snprintf(buf, sizeof buf, NOT_LEARNED_VERDICT ": %s", dnl);
        json_object_object_add(o, "verdict_kind", json_object_new_string("not applicable"));
        json_object_object_add(o, "verdict", json_object_new_string(buf));
        json_object_object_add(o, "verdict_kind_half", json_object_new_string("not applicable"));
        json_object_object_add(o, "verdict_half", json_object_new_string("not applicable"));
        json_object_object_add(o, "p", NULL);
    }
    json_object_object_add(o, "did_not_learn", list);
    return o;
}

/* arm - reference, paired by seed: a comparisons entry. */
static void add_comparison(json_object *list, const study *s, const char *reference,
                           const char *arm, const char *from)
{
    double d[MAX_SEEDS];
    summary sm = {0, 0, NAN, 0};
    const int n = paired(s, reference, arm, d);
    if (n)
        sm = summarise(d, n);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "from", json_object_new_string(from));
    json_object_object_add(o, "arm", json_object_new_string(arm));
    json_object_object_add(o, "reference", json_object_new_string(reference));
    json_object_object_add(o, "difference", json_object_new_string("arm - reference"));
    const char *names[2] = {reference, arm};
    json_object_array_add(list, not_learned_json(effect_json(o, &sm), s, names, 2));
}

/* I = (q[3] - q[2]) - (q[1] - q[0]), paired by seed: an interactions entry. */
static void add_interaction(json_object *list, const study *s, const char *const q[4],
                            const char *from)
{
    double dg[MAX_SEEDS];
    summary sm = {0, 0, NAN, 0};
    const int n = paired_interaction(s, q[0], q[1], q[2], q[3], dg);
    if (n)
        sm = summarise(dg, n);
    json_object *o = json_object_new_object();
    json_object_object_add(o, "from", json_object_new_string(from));
    json_object_object_add(o, "order", json_object_new_int(2));
    json_object_object_add(o, "arms", names_json(q, 4));
    json_object_object_add(o, "interaction",
                           json_object_new_string("(arms[3] - arms[2]) - (arms[1] - arms[0])"));
    json_object_array_add(list, not_learned_json(effect_json(o, &sm), s, q, 4));
}

/* The unigram baseline, and each arm's final val CE over seeds against it. */
static void add_baseline(json_object *o, const study *s)
{
    const preset *p = s->p;
    const double u = s->unigram;
    char rule[400];
    json_object *b = json_object_new_object(), *flagged = json_object_new_array(),
                *summaries = json_object_new_object();
    snprintf(rule, sizeof rule, "an arm did not learn when its mean final val_ce over seeds is "
                                "above unigram_ce - margin (%g nats/byte)", LEARN_MARGIN);
    json_object_object_add(b, "unigram_ce", jd(u));
    json_object_object_add(
        b, "what",
        json_object_new_string("cross-entropy (nats/byte) of the held-out targets under the "
                               "token frequencies of one pass over the training text (the "
                               "students' rows), add-one smoothed over 257 tokens; over the "
                               "final evaluation's batches with its padding mask, token-weighted"));
    json_object_object_add(b, "margin", json_object_new_double(LEARN_MARGIN));
    json_object_object_add(b, "threshold", jd(u - LEARN_MARGIN));
    json_object_object_add(b, "rule", json_object_new_string(rule));
    for (int a = 0; a < p->n_arms; a++) {
        double x[MAX_SEEDS];
        const int n = finals(s, p->arms[a].name, x);
        const summary sm = summarise(x, n);
        const int dnl = did_not_learn(sm.mean, u);
        json_object *e = json_object_new_object();
        json_object_object_add(e, "n", json_object_new_int(n));
        json_object_object_add(e, "mean", jd(sm.mean));
        json_object_object_add(e, "sd", n > 1 ? jd(sm.sd) : NULL);
        json_object_object_add(e, "half_width_95", n > 1 ? jd(sm.half) : NULL);
        json_object_object_add(e, "ci95", interval_json(n > 1, sm.mean - sm.half, sm.mean + sm.half));
        json_object_object_add(e, "below_unigram", jd(u - sm.mean));
        json_object_object_add(e, "did_not_learn", json_object_new_boolean(dnl));
        json_object_object_add(summaries, p->arms[a].name, e);
        if (dnl)
            json_object_array_add(flagged, json_object_new_string(p->arms[a].name));
    }
    json_object_object_add(b, "did_not_learn", flagged);
    json_object_object_add(o, "baseline", b);
    json_object_object_add(o, "arm_summaries", summaries);
}

/* The statistics report.md prints, for programs: Table 1's pairs and the
 * preset's comparisons, Table 1's interaction and the preset's, the verdict
 * table's rows. */
static void add_statistics(json_object *o, const study *s)
{
    const preset *p = s->p;
    json_object *cmp = json_object_new_array(), *inter = json_object_new_array();
    static const char *const table1[4] = {"pre-joint", "post-joint", "pre-grow", "post-grow"};
    int have = 0;
    for (int r = 0; r < 2; r++)
        if (arm_index(s, table1[2 * r]) >= 0 && arm_index(s, table1[2 * r + 1]) >= 0) {
            add_comparison(cmp, s, table1[2 * r], table1[2 * r + 1], "table 1");
            have++;
        }
    for (int k = 0; k < p->n_compare; k++) {
        const char *label = design_compare_label(p, k);
        add_comparison(cmp, s, p->compare[k][0], p->compare[k][1], label ? "design" : "preset");
        if (label) /* the design's contrast, in its factor's and levels' words */
            json_object_object_add(json_object_array_get_idx(
                                       cmp, json_object_array_length(cmp) - 1),
                                   "label", json_object_new_string(label));
    }
    if (have == 2)
        add_interaction(inter, s, table1, "table 1");
    for (int k = 0; k < p->n_interact; k++) {
        const char *q[4] = {p->interact[k][0], p->interact[k][1], p->interact[k][2],
                            p->interact[k][3]};
        const char *label = design_interact_label(p, k);
        add_interaction(inter, s, q, label ? "design" : "preset");
        if (label)
            json_object_object_add(json_object_array_get_idx(
                                       inter, json_object_array_length(inter) - 1),
                                   "label", json_object_new_string(label));
    }
    /* the design's interactions of order 3 and more, after its 2-way ones */
    higher_row hr[MAX_HIGHER];
    const int nh = p->design.n_factors ? design_higher(p, hr, MAX_HIGHER) : 0;
    for (int k = 0; k < nh; k++) {
        double x[MAX_SEEDS];
        const char *names[1 << MAX_FACTORS];
        const int m = 1 << hr[k].order;
        for (int j = 0; j < m; j++)
            names[j] = p->arms[hr[k].arm[j]].name;
        const summary sm = higher_summary(s, &hr[k], x);
        json_object *e = json_object_new_object(), *signs = json_object_new_array();
        for (int j = 0; j < m; j++)
            json_object_array_add(signs, json_object_new_int(higher_sign(hr[k].order, j)));
        json_object_object_add(e, "from", json_object_new_string("design"));
        json_object_object_add(e, "order", json_object_new_int(hr[k].order));
        json_object_object_add(e, "arms", names_json(names, m));
        json_object_object_add(e, "signs", signs);
        json_object_object_add(e, "interaction",
                               json_object_new_string("sum of signs[j] x arms[j]: the order - 1 "
                                                      "interaction at the last factor's level "
                                                      "minus the same at its reference"));
        json_object_object_add(e, "label", json_object_new_string(hr[k].label));
        json_object_array_add(inter, not_learned_json(effect_json(e, &sm), s, names, m));
    }
    json_object_object_add(o, "comparisons", cmp);
    json_object_object_add(o, "interactions", inter);
    json_object_object_add(o, "equivalence_margin", json_object_new_double(EQUIVALENCE_MARGIN));
    json_object_object_add(o, "absence_margin", json_object_new_double(ABSENCE_MARGIN));
    json_object_object_add(o, "verdicts", verdict_rows(s));
}

void write_json(const char *path, const study *s, double wall)
{
    json_object *o = json_object_new_object();
    /* the preset as written (a design not yet expanded): --preset results.json reruns it */
    json_object_object_add(o, "preset", json_object_get(s->p->written ? s->p->written : s->p->json));
    json_object_object_add(o, "lattice_version", json_object_new_string(lattice_version_string()));
    /* the corpus as this study read it (absolute): --preset results.json reads it there */
    {
        json_object *df = json_object_new_object();
        const char *files[2][2] = {{"train", s->p->train}, {"val", s->p->val}};
        for (int k = 0; k < 2; k++) {
            char *abs = realpath(files[k][1], NULL);
            json_object_object_add(df, files[k][0], json_object_new_string(abs ? abs : files[k][1]));
            free(abs);
        }
        json_object_object_add(o, "data_files", df);
    }
    /* the arms as run (a design's cells among them) and each one's training settings */
    json_object *as_run = member(s->p->json, "arms");
    json_object_object_add(o, "arms_as_run", as_run ? json_object_get(as_run) : json_object_new_array());
    json_object *st = json_object_new_object();
    for (int a = 0; a < s->p->n_arms; a++) {
        const arm *am = &s->p->arms[a];
        const double scale = am->lr_given ? 1.0 : arm_std(s->p, am) / s->p->init_std;
        json_object *e = json_object_new_object();
        json_object_object_add(e, "lr", json_object_new_double(am->lr * scale));
        json_object_object_add(e, "min_lr", json_object_new_double(am->min_lr * scale));
        json_object_object_add(e, "warmup", json_object_new_int(am->warmup));
        json_object_object_add(e, "weight_decay", json_object_new_double(am->weight_decay));
        json_object_object_add(e, "clip", json_object_new_double(am->clip));
        json_object_object_add(e, "alpha", json_object_new_double(am->alpha));
        json_object_object_add(e, "gamma", json_object_new_double(am->gamma));
        json_object_object_add(e, "tau", json_object_new_double(am->tau));
        json_object_object_add(e, "kl_direction",
                               json_object_new_string(am->kl_direction ? "reverse" : "forward"));
        json_object_object_add(e, "steps_per_phase", json_object_new_int(am->steps_per_phase));
        json_object_object_add(e, "rewind_data", json_object_new_boolean(am->rewind_data));
        json_object_object_add(st, am->name, e);
    }
    json_object_object_add(o, "arm_settings", st);
    json_object_object_add(o, "wall_seconds", json_object_new_double(wall));
    json_object *tg = json_object_new_array();
    for (int k = 1; k < s->teacher.n; k++) {
        json_object *e = json_object_new_object();
        json_object_object_add(e, "boundary_rms", jd(s->teacher.boundary[k]));
        json_object_object_add(e, "regular_rms", jd(s->teacher.regular[k]));
        json_object_object_add(e, "kurtosis", jd(s->teacher.kurt[k]));
        json_object_object_add(e, "attention_mass_pos0", jd(s->teacher.mass0[k]));
        json_object_object_add(e, "sink_rate", jd(s->teacher.sink_rate[k]));
        json_object_object_add(e, "top_over_median", jd(s->teacher.top_ratio[k]));
        json_object_object_add(e, "top_token", json_object_new_int64(s->teacher.top_token[k]));
        json_object_object_add(e, "top_dim", json_object_new_int(s->teacher.top_dim[k]));
        json_object_object_add(e, "value_norm_ratio_pos0", jd(s->teacher.value_norm0[k]));
        json_object_array_add(tg, e);
    }
    json_object_object_add(o, "teacher_boundary_scale", tg);
    json_object *arms = json_object_new_object();
    for (int a = 0; a < s->p->n_arms; a++) {
        json_object *seeds = json_object_new_array();
        for (int i = 0; i < s->p->seeds; i++)
            json_object_array_add(seeds, record_results(s->res[a][i], i + 1));
        json_object_object_add(arms, s->p->arms[a].name, seeds);
    }
    json_object_object_add(o, "arms", arms);
    add_baseline(o, s);
    add_statistics(o, s);
    outfile out;
    out_open(&out, path);
    fputs(json_object_to_json_string_ext(o, JSON_C_TO_STRING_PRETTY), out.f);
    fputc('\n', out.f);
    out_commit(&out);
    json_object_put(o);
}

const point *seed_point(const study *s, int a, int i, int k)
{
    const run_result *r = s->res[a][i];
    return r->n_pts > 0 ? &r->pts[k < r->n_pts ? k : r->n_pts - 1] : NULL;
}

int seeds_with_points(const study *s, int a)
{
    int n = 0;
    for (int i = 0; i < s->p->seeds; i++)
        n += s->res[a][i]->n_pts > 0;
    return n;
}

/* Mean over seeds with a min..max band, per arm and evaluation, for the plots. */
void write_bands(const char *path, const study *s)
{
    outfile o;
    out_open(&o, path);
    FILE *f = o.f;
    fprintf(f, "arm_index,step,active_layer_tokens,mean,min,max\n");
    for (int a = 0; a < s->p->n_arms; a++) {
        const run_result *r0 = s->res[a][0];
        const int n_seeds = seeds_with_points(s, a);
        for (int k = 0; k < r0->n_pts; k++) {
            double m = 0, lo = INFINITY, hi = -INFINITY;
            for (int i = 0; i < s->p->seeds; i++) {
                const point *pt = seed_point(s, a, i, k);
                if (!pt)
                    continue;
                const double v = pt->val_ce;
                m += v / n_seeds;
                lo = fmin(lo, v);
                hi = fmax(hi, v);
            }
            fprintf(f, "%d,%lld,%lld,%.6f,%.6f,%.6f\n", a, (long long)r0->pts[k].step,
                    (long long)r0->pts[k].active_layer_tokens, m, lo, hi);
        }
        fprintf(f, "\n\n"); /* one gnuplot data block per arm */
    }
    out_commit(&o);
}

