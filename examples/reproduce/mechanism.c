/* The verdict table's mechanism rows (mechanism.h). */
#include "mechanism.h"

#include "contrasts.h"
#include "paper.h"
#include "stats.h"

int grow_pairs(const study *s, int *pre, int *post)
{
    int n = 0;
    for (int a = 0; a < s->p->n_arms; a++) {
        const arm *am = &s->p->arms[a];
        if (am->placement != LATTICE_NORM_PLACEMENT_PRE ||
            am->schedule != LATTICE_SCHEDULE_PRESET_GROW || strncmp(am->name, "pre-", 4) != 0)
            continue;
        char partner[64];
        snprintf(partner, sizeof partner, "post-%s", am->name + 4);
        const int b = arm_index(s, partner);
        if (b >= 0 && s->p->arms[b].schedule == LATTICE_SCHEDULE_PRESET_GROW) {
            pre[n] = a;
            post[n++] = b;
        }
    }
    return n;
}

/* The shortest phase length of the study's arms (each arm may set its own). */
static int shortest_phase(const preset *p)
{
    int m = p->n_arms ? INT_MAX : p->steps_per_phase;
    for (int a = 0; a < p->n_arms; a++)
        m = p->arms[a].steps_per_phase < m ? p->arms[a].steps_per_phase : m;
    return m;
}

/* Whether the teacher is GO (1), NO-GO (0), or was not measured (-1). */
static int teacher_go(const study *s)
{
    return s->teacher.n > 0 && isfinite(s->teacher.max_ratio) ? s->teacher.max_ratio >= 3 : -1;
}

/* One grow pair: the pre and post arms' indexes, the seeds, and the
 * mechanism rows' precondition (rule_mechanism_gate). */
typedef struct grow_pair {
    int pre, post, n;
    verdict gate;
} grow_pair;

/* A pair's row: head (its finding and the paper's cells, "| ... | ..."),
 * ours, and its verdict v with the p pv of its test (not applicable, no p,
 * when an arm of the pair did not learn). */
static void pair_row(vtable *t, const study *s, const grow_pair *g, verdict v, double pv,
                     const char *head, const char *ours)
{
    const char *pair[2] = {s->p->arms[g->pre].name, s->p->arms[g->post].name};
    char cell[600];
    verdict_cell(cell, sizeof cell, s, pair, 2, v, &pv);
    vrow(t, pv, "%s | %s | %s |", head, ours, cell);
}

/* The first phase change of a run that appends layers (-1: none). */
static int first_append(const run_result *r)
{
    for (int k = 0; k < r->n_appends; k++)
        if (r->is_append[k])
            return k;
    return -1;
}

/* At a run's first append: the share of what phase 0 learned (the loss at
 * step 1 down to the baseline before the append) that the jump gives back,
 * the jump, and the steps to recover (a run that never recovers within its
 * phase counts the phase's length: a lower bound). 0 when it has none. */
static int append_shape(const arm *am, const run_result *r, double *share, double *jump,
                        double *recovery)
{
    const int k = first_append(r);
    if (k < 0 || r->n_steps == 0)
        return 0;
    const kept_response *x = &r->resp[k];
    *jump = x->jump;
    *share = x->jump / (r->losses[0] - x->baseline);
    *recovery = x->recovery >= 0 ? (double)x->recovery : (double)am->steps_per_phase;
    return 1;
}

/* The evaluation of a run at the end of phase k (the trajectory's point at
 * that step with the phase's layers active: the evaluation batches, not the
 * final evaluation); NULL when it has none. */
static const point *phase_end(const preset *p, const arm *am, const run_result *r, int k)
{
    const int64_t step = (int64_t)(k + 1) * am->steps_per_phase;
    for (int j = 0; j < r->n_pts; j++)
        if (r->pts[j].step == step && r->pts[j].active == (k + 1) * p->block_size)
            return &r->pts[j];
    return NULL;
}

/* The row-start / regular RMS ratio of a run at the end of phase k (after
 * block k + 1, the stream block k + 2 reads when it is appended); NaN when
 * the run has no evaluation there. */
static double ratio_at_phase_end(const preset *p, const arm *am, const run_result *r, int k)
{
    const point *pt = phase_end(p, am, r, k);
    return pt ? pt->rms_boundary / pt->rms_regular : NAN;
}

/* A run's validation CE at its evaluation at the end of phase k; NaN when
 * it has none. */
static double val_at_phase_end(const preset *p, const arm *am, const run_result *r, int k)
{
    const point *pt = phase_end(p, am, r, k);
    return pt ? pt->val_ce : NAN;
}

/* "share of phase 0's learning lost: pre ..., post ...; recovery ...; jump
 * ...": ours of the loss jump's row. */
static void jump_words(char *ours, size_t n, const summary *ssh, const summary *sgap,
                       const summary *src, const summary *slrec, const summary *sjp)
{
    char a1[140], a2[140], a3[140], r1[140], r2[140], j1[140], j2[140];
    fmt_pm(a1, sizeof a1, &ssh[0], "%.0f%%", 100);
    fmt_pm(a2, sizeof a2, &ssh[1], "%.0f%%", 100);
    fmt_pm(a3, sizeof a3, sgap, "%+.0f", 100);
    fmt_pm(r1, sizeof r1, &src[0], "%.0f", 1);
    fmt_pm(r2, sizeof r2, &src[1], "%.0f", 1);
    fmt_pm(j1, sizeof j1, &sjp[0], "%+.3f", 1);
    fmt_pm(j2, sizeof j2, &sjp[1], "%+.3f", 1);
    snprintf(ours, n,
             "share of phase 0's learning lost: pre %s, post %s (post - pre %s points); "
             "recovery: pre %s, post %s steps (post / pre %.1fx); jump: pre %s, post %s "
             "nats/byte (post's is %.0fx the paper's at %.0f bytes per token)",
             a1, a2, a3, r1, r2, exp(slrec->mean), j1, j2,
             sjp[1].mean * PAPER_BYTES_PER_TOKEN / (0.5 * (PAPER_JUMP_POST_LO + PAPER_JUMP_POST_HI)),
             PAPER_BYTES_PER_TOKEN);
}

/* 7 the loss jump's shape at the first append: post loses more of phase 0's
 * learning and recovers more slowly. */
static void jump_row(vtable *t, const study *s, const grow_pair *g)
{
    const preset *p = s->p;
    const int n = g->n;
    double sh[2][MAX_SEEDS], jp[2][MAX_SEEDS], rc[2][MAX_SEEDS], gap[MAX_SEEDS], lrec[MAX_SEEDS];
    int ok = 1;
    for (int i = 0; i < n && ok; i++)
        for (int w = 0; w < 2 && ok; w++) {
            const int a = w ? g->post : g->pre;
            ok = append_shape(&p->arms[a], s->res[a][i], &sh[w][i], &jp[w][i], &rc[w][i]);
        }
    verdict v = V_NOT_RUN;
    double pv = NAN;
    char ours[1200] = "n/a", head[1024];
    if (ok) {
        summary ssh[2], sjp[2], src[2];
        for (int i = 0; i < n; i++) {
            gap[i] = sh[1][i] - sh[0][i];
            lrec[i] = log(fmax(rc[1][i], 1.0) / fmax(rc[0][i], 1.0));
        }
        for (int w = 0; w < 2; w++) {
            ssh[w] = summarise(sh[w], n);
            sjp[w] = summarise(jp[w], n);
            src[w] = summarise(rc[w], n);
        }
        const summary sgap = summarise(gap, n), slrec = summarise(lrec, n);
        v = g->gate != V_REPRODUCED ? g->gate : rule_jump_shape(&sgap, &slrec);
        const double p1 = p_against(&sgap, 0), p2 = p_against(&slrec, 0);
        pv = sided_p(v, fmax(p1, p2), fmin(p1, p2));
        jump_words(ours, sizeof ours, ssh, &sgap, src, &slrec, sjp);
    }
    snprintf(head, sizeof head,
             "| loss jump at the first append, %s / %s: post loses more of phase 0's learning "
             "and recovers more slowly (rule: both paired differences' intervals above 0) | "
             "jump pre %.3f, post %.2f-%.2f nats/token; recovery pre ~%.0f, post ~%.0fk steps "
             "(%.0fx)",
             p->arms[g->pre].name, p->arms[g->post].name, PAPER_JUMP_PRE, PAPER_JUMP_POST_LO,
             PAPER_JUMP_POST_HI, PAPER_RECOVERY_PRE, PAPER_RECOVERY_POST / 1000,
             PAPER_RECOVERY_POST / PAPER_RECOVERY_PRE);
    pair_row(t, s, g, v, pv, head, ours);
}

/* 8 block removal: pre's last block a near no-op, every post block
 * effective; per-seed ratios and gaps with intervals. */
static void removal_row(vtable *t, const study *s, const grow_pair *g)
{
    const preset *p = s->p;
    const int n = g->n;
    const run_result *r0 = s->res[g->pre][0], *q0 = s->res[g->post][0];
    verdict v = V_NOT_RUN;
    double pv = NAN;
    char ours[1200] = "n/a", head[1024];
    if (r0->n_blocks_measured > 0 && q0->n_blocks_measured > 0) {
        double ratio[MAX_SEEDS], pmin[MAX_SEEDS], agap[MAX_SEEDS], last[MAX_SEEDS];
        for (int i = 0; i < n; i++) {
            const run_result *r = s->res[g->pre][i], *q = s->res[g->post][i];
            const kept_removal *lb = &r->removal[r->n_blocks_measured - 1];
            double md = INFINITY, ma = INFINITY;
            for (int b = 0; b < q->n_blocks_measured; b++) {
                md = fmin(md, q->removal[b].dce);
                ma = fmin(ma, q->removal[b].angle);
            }
            last[i] = lb->dce;
            pmin[i] = md;
            ratio[i] = lb->dce / md;
            agap[i] = ma - lb->angle;
        }
        const summary sr = summarise(ratio, n), sm = summarise(pmin, n),
                      sa = summarise(agap, n), sl = summarise(last, n);
        v = g->gate != V_REPRODUCED ? g->gate
                                    : rule_block_removal(&sr, &sm, &sa, BLOCK_REMOVAL_FLOOR);
        const double p1 = p_against(&sr, BLOCK_REMOVAL_RATIO),
                     p2 = p_against(&sm, BLOCK_REMOVAL_FLOOR), p3 = p_against(&sa, 0);
        pv = sided_p(v, fmax(p1, fmax(p2, p3)), fmin(p1, fmin(p2, p3)));
        char t1[140], t2[140], t3[140], t4[140];
        fmt_pm(t1, sizeof t1, &sl, "%.3f", 1);
        fmt_pm(t2, sizeof t2, &sm, "%.3f", 1);
        fmt_pm(t3, sizeof t3, &sr, "%.3f", 1);
        fmt_pm(t4, sizeof t4, &sa, "%+.3f", 1);
        snprintf(ours, sizeof ours, "pre's last block dCE %s; post's smallest %s; ratio %s (per "
                 "seed:", t1, t2, t3);
        for (int i = 0; i < n; i++)
            snprintf(ours + strlen(ours), sizeof ours - strlen(ours), " %.3f", ratio[i]);
        snprintf(ours + strlen(ours), sizeof ours - strlen(ours),
                 "); post's smallest angle - pre's last %s", t4);
    }
    snprintf(head, sizeof head,
             "| block removal, %s / %s: pre's last block a near no-op, every post block "
             "effective (rule: the per-seed ratio of pre's last dCE to post's smallest has its "
             "interval below %.2f, post's smallest dCE above %.2f and the angle gap above 0) | "
             "pre last dCE %.2f, angle %.3f; post dCE >= %.2f, angle > %.2f (nats/token)",
             p->arms[g->pre].name, p->arms[g->post].name, BLOCK_REMOVAL_RATIO,
             BLOCK_REMOVAL_FLOOR, PAPER_REMOVAL_PRE_LAST_DCE, PAPER_REMOVAL_PRE_LAST_ANGLE,
             PAPER_REMOVAL_POST_DCE, PAPER_REMOVAL_POST_ANGLE);
    pair_row(t, s, g, v, pv, head, ours);
}

/* 9 row-start tokens at the boundaries appended blocks read, same depth and
 * step: massive under pre-norm, not post. */
static void boundary_row(vtable *t, const study *s, const grow_pair *g)
{
    const preset *p = s->p;
    const int n = g->n;
    const arm *pre = &p->arms[g->pre], *post = &p->arms[g->post];
    double pr[MAX_SEEDS], hg[MAX_SEEDS], pr2[MAX_SEEDS], po2[MAX_SEEDS], po[MAX_SEEDS];
    int ok = p->blocks >= 2;
    for (int i = 0; i < n && ok; i++) {
        const run_result *r = s->res[g->pre][i], *q = s->res[g->post][i];
        pr[i] = ratio_at_phase_end(p, pre, r, 0);
        po[i] = ratio_at_phase_end(p, post, q, 0);
        pr2[i] = p->blocks >= 3 ? ratio_at_phase_end(p, pre, r, 1) : NAN;
        po2[i] = p->blocks >= 3 ? ratio_at_phase_end(p, post, q, 1) : NAN;
        hg[i] = po[i] - 0.5 * pr[i];
        ok = isfinite(pr[i]) && isfinite(po[i]);
    }
    verdict v = V_NOT_RUN;
    double pv = NAN;
    char ours[1200] = "n/a", head[1024];
    if (ok) {
        const summary spr = summarise(pr, n), shg = summarise(hg, n), spo = summarise(po, n),
                      spr2 = summarise(pr2, n), spo2 = summarise(po2, n);
        v = g->gate != V_REPRODUCED ? g->gate : rule_boundary(&spr, &shg);
        const double ph = p_against(&shg, 0);
        pv = sided_p(v, fmax(p_against(&spr, 3), ph), fmin(p_against(&spr, 1.5), ph));
        char t1[140], t2[140], t3[140], t4[140];
        fmt_pm(t1, sizeof t1, &spr, "%.2fx", 1);
        fmt_pm(t2, sizeof t2, &spo, "%.2fx", 1);
        fmt_pm(t3, sizeof t3, &spr2, "%.2fx", 1);
        fmt_pm(t4, sizeof t4, &spo2, "%.2fx", 1);
        snprintf(ours, sizeof ours,
                 "after block 1 at the end of phase 0: pre %s, post %s; after block 2 at the "
                 "end of phase 1: pre %s, post %s", t1, t2, t3, t4);
    }
    snprintf(head, sizeof head,
             "| row-start tokens massive under pre-norm, not post, where the appended blocks "
             "read, %s / %s (rule: pre's row-start / regular RMS ratio's interval above 3, and "
             "post's ratio minus half of pre's, per seed, below 0) | document-boundary tokens "
             "%.0fx under pre-norm, post-norm below %.1f",
             pre->name, post->name, PAPER_BOUNDARY_RATIO_PRE, PAPER_RMS_POST_BELOW);
    pair_row(t, s, g, v, pv, head, ours);
}

/* The crossover's ours: post - pre at each phase's end (dd[k], paired by
 * seed), its change across each append and from phase 0's end to the last;
 * its verdict and p into *v and *pv. */
static void crossover_words(char *ours, size_t size, const preset *p, double (*dd)[MAX_SEEDS],
                            int phases, int n, verdict *v, double *pv)
{
    char t1[140];
    ours[0] = 0;
    for (int k = 0; k < phases; k++) {
        const summary sk = summarise(dd[k], n);
        int ahead = 0;
        for (int i = 0; i < n; i++)
            ahead += dd[k][i] < 0;
        fmt_pm(t1, sizeof t1, &sk, "%+.4f", 1);
        snprintf(ours + strlen(ours), size - strlen(ours),
                 "%safter phase %d (%d layers): %s (post ahead on %d of %d)", k ? "; " : "", k,
                 (k + 1) * p->block_size, t1, ahead, n);
    }
    double ch[MAX_SEEDS];
    for (int k = 1; k < phases; k++) {
        for (int i = 0; i < n; i++)
            ch[i] = dd[k][i] - dd[k - 1][i];
        const summary sc = summarise(ch, n);
        fmt_pm(t1, sizeof t1, &sc, "%+.4f", 1);
        snprintf(ours + strlen(ours), size - strlen(ours), "; change across append %d: %s", k,
                 t1);
    }
    for (int i = 0; i < n; i++)
        ch[i] = dd[phases - 1][i] - dd[0][i];
    const summary sl = summarise(dd[phases - 1], n), sc = summarise(ch, n);
    *v = rule_crossover(&sl, &sc);
    const double p1 = p_against(&sl, 0), p2 = p_against(&sc, 0);
    *pv = sided_p(*v, fmax(p1, p2), fmin(p1, p2));
    fmt_pm(t1, sizeof t1, &sc, "%+.4f", 1);
    snprintf(ours + strlen(ours), size - strlen(ours), "; from phase 0's end to the last: %s", t1);
}

/* 10 the crossover: post - pre at each phase's end, paired by seed, and its
 * change across each append. */
static void crossover_row(vtable *t, const study *s, const grow_pair *g)
{
    const preset *p = s->p;
    const int n = g->n, phases = p->blocks;
    double dd[MAX_BLOCKS][MAX_SEEDS];
    int ok = phases >= 2;
    for (int k = 0; k < phases && ok; k++)
        for (int i = 0; i < n && ok; i++) {
            dd[k][i] = val_at_phase_end(p, &p->arms[g->post], s->res[g->post][i], k) -
                       val_at_phase_end(p, &p->arms[g->pre], s->res[g->pre][i], k);
            ok = isfinite(dd[k][i]);
        }
    verdict v = V_NOT_RUN;
    double pv = NAN;
    char ours[1200] = "n/a", head[1024];
    if (ok)
        crossover_words(ours, sizeof ours, p, dd, phases, n, &v, &pv);
    snprintf(head, sizeof head,
             "| crossover, %s / %s: post - pre at each phase's end, paired by seed, on the "
             "evaluations during training (the first %d batches of the held-out text, not the "
             "final evaluation over all of it); post-norm behind or level on the single block, "
             "ahead once blocks are appended (rule: post - pre at the last phase's end and its "
             "change from phase 0's end both below 0) | single block %+.4f, grow %+.4f (post "
             "takes the lead once blocks are appended)",
             p->arms[g->pre].name, p->arms[g->post].name, p->eval_batches, PAPER_SINGLE_DELTA,
             PAPER_GROW_DELTA);
    pair_row(t, s, g, v, pv, head, ours);
}

void mechanism_rows(vtable *t, const study *s)
{
    const preset *p = s->p;
    int pre[MAX_ARMS], post[MAX_ARMS];
    const int ng = grow_pairs(s, pre, post);
    grow_pair g[MAX_ARMS];
    for (int k = 0; k < ng; k++)
        g[k] = (grow_pair){pre[k], post[k], p->seeds,
                           rule_mechanism_gate(teacher_go(s), shortest_phase(p))};
    for (int k = 0; k < ng; k++)
        jump_row(t, s, &g[k]);
    for (int k = 0; k < ng; k++)
        removal_row(t, s, &g[k]);
    for (int k = 0; k < ng; k++)
        boundary_row(t, s, &g[k]);
    for (int k = 0; k < ng; k++)
        crossover_row(t, s, &g[k]);
    if (ng == 0)
        vrow(t, NAN, "| loss jump, block removal, row-start tokens | (the grow arms) | n/a | not run "
                     "|");
}

void gate_words(FILE *f, const study *s)
{
    const int go = teacher_go(s);
    char b1[64], layers[512] = "", go_at[256] = "";
    fmt_num(b1, sizeof b1, s->teacher.max_ratio, "%.2f");
    for (int k = 1; k < s->teacher.n; k++) {
        snprintf(layers + strlen(layers), sizeof layers - strlen(layers), " %.2f",
                 s->teacher.ratio[k]);
        if (s->teacher.ratio[k] >= 3)
            snprintf(go_at + strlen(go_at), sizeof go_at - strlen(go_at), "%s%d",
                     go_at[0] ? ", " : "", k);
    }
    fprintf(f, "\nTeacher go/no-go: the largest row-start / regular RMS ratio over the teacher's "
               "layers is %s%s%d: %s. Per layer (after layer 1, 2, ...):%s; the gate (3 or "
               "more) passes %s%s.%s\n\n",
            b1, s->teacher.max_layer > 0 ? ", after layer " : "", s->teacher.max_layer,
            go < 0 ? "not measured" : go ? "GO (massive row-start activations present)"
                                         : "NO-GO (the teacher shows no massive row-start "
                                           "activations; the paper's mechanism has nothing to act "
                                           "on)",
            layers[0] ? layers : " n/a", go_at[0] ? "after layer " : "at no layer", go_at,
            shortest_phase(s->p) < MECHANISM_MIN_STEPS
                ? " The phases are shorter than the mechanism rows need: they are not applicable."
                : "");
}
