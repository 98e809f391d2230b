/* One arm x seed run: data, models, optimizer, the trainer's callbacks, the diagnostics. */
#include "runs.h"

#include <pthread.h>
#include "jobs.h"
#include "paper.h"
#include "preset.h"
#include "teacher.h"
#include "logits_cache.h"
#include "resume.h"


/* Per-token RMS statistics after every active layer on the fixed batch:
 * out[(boundary * 3) + class], classes regular, row-start, all. */
lattice_status boundary_stats(lattice_diag *dg, lattice_model *m, const int32_t *tokens,
                              const uint8_t *mask, int batch, int seq, kept_scale *out,
                              int out_len)
{
    const int active = lattice_model_get_active_layers(m);
    const int n = (active + 1) * 3;
    if (n > out_len || active > MAX_LAYERS)
        return LATTICE_ERR_INVALID_ARGUMENT;
    lattice_diag_boundary_scale_result st[(MAX_LAYERS + 1) * 3];
    st[0].size = sizeof st[0];
    const lattice_status rc =
        lattice_diag_measure_boundary_scale(dg, tokens, mask, batch, seq, NULL, 2, st, n);
    for (int k = 0; rc == LATTICE_OK && k < n; k++)
        out[k] = (kept_scale){st[k].count, st[k].mean, st[k].std, st[k].kurtosis, st[k].max};
    return rc;
}

lattice_status attention_sinks(lattice_diag *dg, const int32_t *tokens, int batch, int seq,
                               lattice_diag_attention_sinks_result *out, int out_len)
{
    out[0].size = sizeof out[0];
    return lattice_diag_measure_attention_sinks(dg, tokens, batch, seq, SINK_THRESHOLD, out,
                                                out_len, NULL, 0);
}

/* The loss response at an append, into the record's own struct. */
static lattice_status loss_response(const double *losses, int64_t n, int64_t at, int64_t window,
                                    int64_t horizon, kept_response *out)
{
    lattice_diag_loss_response_result x;
    x.size = sizeof x;
    const lattice_status rc = lattice_diag_measure_loss_response(losses, n, at, window, horizon, &x);
    if (rc == LATTICE_OK)
        *out = (kept_response){x.baseline, x.jump, x.area, x.recovery};
    return rc;
}

int on_step(void *user, const lattice_trainer_metrics *m)
{
    progress *pr = user;
    const double t_in = ex_now();
    pr->prof.steps += m->seconds;
    run_result *r = pr->res;
    if (r->n_steps < pr->run_steps) {
        if (r->step_phase) {
            r->step_phase[r->n_steps] = m->phase;
            r->step_active[r->n_steps] = m->active_layers;
            r->step_alt[r->n_steps] = m->counters.active_layer_tokens;
        }
        r->losses[r->n_steps++] = m->loss;
    }
    if (in_worker && atomic_load(&workers_stop))
        pthread_exit(NULL); /* another worker failed: this run is not kept */
    stop_if_interrupted(proc.study_dir);
    if (getenv("LATTICE_REPRODUCE_FAIL_JOB") && in_worker && m->step >= 2 &&
        pr->run_index == atoi(getenv("LATTICE_REPRODUCE_FAIL_JOB")))
        die("failing on purpose at step %lld of %s seed %d (LATTICE_REPRODUCE_FAIL_JOB, a test "
            "hook)", (long long)m->step, pr->arm, pr->seed);
    if (proc.fail_here && m->step >= 2)
        die("failing on purpose at step %lld of %s seed %d (LATTICE_REPRODUCE_FAIL_RANK=%d, a "
            "test hook)", (long long)m->step, pr->arm, pr->seed, proc.rank);
#ifdef LATTICE_HAVE_MPI
    if (pr->dispatch)
        serve_ranks(pr->dispatch, 0);
#endif
    if (m->phase_end && r->n_appends < MAX_PHASE_CHANGES && m->step < pr->run_steps)
        r->append_steps[r->n_appends++] = m->step; /* index of the next phase's first step */
    pr->nonpad_tokens += (double)m->counters.nonpad_tokens;
    double el = ex_now() - pr->start;
    int64_t done = pr->steps_done_before + m->step;
    double eta = el / (double)done * (double)(pr->steps_total_all - done);
    char e[32];
    ex_format_duration(e, sizeof e, eta);
    char val[32] = "";
    if (r->n_pts > 0)
        snprintf(val, sizeof val, "val CE %.4f", r->pts[r->n_pts - 1].val_ce);
    const double tps =
        m->seconds > 0 ? (double)(m->counters.tokens) / (double)m->step / m->seconds : 0.0;
    if (pr->tty) {
        fprintf(stderr, "\r\033[K[%d/%d] %-17s seed %d  phase %d/%d  step %lld/%lld  loss %.4f  "
                        "%s%s%.0f tok/s  ETA %s",
                pr->run_index, pr->n_runs, pr->arm, pr->seed, m->phase + 1, pr->n_phases,
                (long long)m->step, (long long)pr->run_steps, m->loss, val, val[0] ? "  " : "",
                tps, e);
        fflush(stderr);
    } else if (proc.progress_every > 0) {
        const double now = ex_now();
        if (pr->last_line == 0)
            pr->last_line = now;
        if (now - pr->last_line >= proc.progress_every) {
            /* this run's own ETA: others may run beside it */
            const double run_el = now - pr->run_start;
            char re[32];
            ex_format_duration(re, sizeof re,
                               m->step > 0 ? run_el / (double)m->step *
                                                 (double)(pr->run_steps - m->step)
                                           : 0.0);
            char name[96];
            if (pr->seed > 0)
                snprintf(name, sizeof name, "[%d/%d] %s seed %d", pr->run_index, pr->n_runs,
                         pr->arm, pr->seed);
            else
                snprintf(name, sizeof name, "%s", pr->arm);
            say("%s: phase %d/%d, step %lld/%lld, loss %.4f, %s%s%.0f tok/s, this run's ETA %s\n",
                name, m->phase + 1, pr->n_phases, (long long)m->step, (long long)pr->run_steps,
                m->loss, val, val[0] ? ", " : "", tps, re);
            pr->last_line = now;
        }
    }
    pr->prof.callbacks += ex_now() - t_in;
    return 0;
}

/* An evaluation's point: the validation CE, and the boundary statistics and
 * attention sinks on the fixed batch. */
static void eval_point(progress *pr, const lattice_trainer_metrics *m)
{
    run_result *r = pr->res;
    if (r->n_pts >= MAX_POINTS)
        return;
    point pt = {m->step, m->counters.active_layer_tokens, m->phase, m->active_layers, m->val_ce,
                NAN, NAN, NAN, NAN};
    kept_scale st[(MAX_LAYERS + 1) * 3];
    if (pr->diag && boundary_stats(pr->diag, pr->model, pr->diag_tokens, pr->diag_mask,
                                   pr->diag_batch, pr->diag_seq, st, (MAX_LAYERS + 1) * 3) == LATTICE_OK) {
        const kept_scale *top = &st[m->active_layers * 3];
        pt.rms_std = top[2].std;
        pt.rms_kurt = top[2].kurtosis;
        pt.rms_boundary = top[1].mean;
        pt.rms_regular = top[0].mean;
    }
    sink_point sp = {NAN, NAN, NAN, NAN};
    lattice_diag_attention_sinks_result sk[MAX_LAYERS];
    if (pr->diag && attention_sinks(pr->diag, pr->diag_tokens, pr->diag_batch, pr->diag_seq, sk,
                                    MAX_LAYERS) == LATTICE_OK) {
        sp.mass0 = sp.sink_rate = sp.top_ratio = 0.0;
        sp.value_norm0 = INFINITY;
        int n = 0;
        for (int k = 0; k < m->active_layers; k++) {
            if (isnan(sk[k].mass0))
                continue; /* a skipped layer */
            sp.mass0 += sk[k].mass0;
            sp.sink_rate = fmax(sp.sink_rate, sk[k].sink_rate);
            sp.top_ratio = fmax(sp.top_ratio, sk[k].top_ratio);
            sp.value_norm0 = fmin(sp.value_norm0, sk[k].value_norm0);
            n++;
        }
        sp.mass0 = n ? sp.mass0 / n : NAN;
        if (!n)
            sp.sink_rate = sp.top_ratio = sp.value_norm0 = NAN;
    }
    r->sinks[r->n_pts] = sp;
    r->pts[r->n_pts++] = pt;
}

int on_eval(void *user, const lattice_trainer_metrics *m)
{
    progress *pr = user;
    const double t_in = ex_now();
    eval_point(pr, m);
    pr->prof.diagnostics += ex_now() - t_in;
    return 0;
}

lattice_data *open_data(const preset *p, uint64_t seed)
{
    return open_data_rows(p, seed, p->batch, p->seq_len);
}

lattice_data *open_data_rows(const preset *p, uint64_t seed, int batch, int seq_len)
{
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.batch_size = batch;
    dp.seq_len = seq_len;
    dp.split_long = p->split_long;
    dp.separator = p->separator;
    dp.val_path = p->val;
    dp.seed = seed;
    lattice_data *d;
    char err[LATTICE_ERRMSG_SIZE];
    lattice_status st = lattice_data_create_text(p->train, &dp, &d, err);
    if (st == LATTICE_ERR_IO)
        die("%s (prepare the corpus first: python3 examples/data/prepare_austen.py)", err);
    check(st, "data", err);
    return d;
}

lattice_model_params model_shape(const preset *p, int layers, double init_std, uint64_t seed)
{
    return model_shape_rows(p, layers, init_std, seed, p->batch, p->seq_len);
}

lattice_model_params model_shape_rows(const preset *p, int layers, double init_std, uint64_t seed,
                                      int batch, int seq_len)
{
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    mp.vocab_size = VOCAB;
    mp.d_model = p->d_model;
    mp.n_layers = layers;
    mp.n_active_layers = layers;
    mp.n_heads = p->heads;
    mp.n_kv_heads = p->kv_heads;
    mp.head_dim = p->head_dim;
    mp.d_ff = p->d_ff;
    mp.rope_theta = (float)p->rope_theta;
    mp.qk_norm = p->qk_norm;
    mp.max_batch = batch;
    mp.max_seq = seq_len;
    mp.seed = seed;
    mp.init_std = (float)init_std;
    return mp;
}

lattice_model *new_model(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                         double residual_scale, int layers, double init_std, uint64_t seed)
{
    return new_model_rows(p, be, pl, residual_scale, layers, init_std, seed, p->batch, p->seq_len,
                          NULL);
}

lattice_norm *new_norm(lattice_norm_placement pl, double residual_scale)
{
    lattice_norm *norm;
    check(lattice_norm_create(pl, LATTICE_NORM_KIND_RMS, 1e-6f, &norm), "norm", NULL);
    if (residual_scale != 1.0)
        check(lattice_norm_set_residual_scale(norm, (float)residual_scale), "norm residual scale", NULL);
    return norm;
}

void arm_options(lattice_model_params *mp, const arm *a)
{
    const struct {
        lattice_model_option key;
        double value;
    } set[] = {{LATTICE_MODEL_OPTION_BLOCK_NORM, a->block_norm},
               {LATTICE_MODEL_OPTION_BLOCK_RESCALE, a->block_rescale},
               {LATTICE_MODEL_OPTION_MASSIVE_OFFSET, a->massive_offset},
               {LATTICE_MODEL_OPTION_MASSIVE_LAYER, a->massive_layer},
               {LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, a->massive_channel}};
    /* the offset's layer and channel mean nothing without it (a named arm holds 0s) */
    const size_t n = a->massive_offset > 0 ? sizeof set / sizeof set[0] : 3;
    for (size_t i = 0; i < n; i++)
        check(lattice_model_params_set_option(mp, set[i].key, set[i].value), "model option", NULL);
}

lattice_model *new_model_rows(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                              double residual_scale, int layers, double init_std, uint64_t seed,
                              int batch, int seq_len, const arm *kind)
{
    lattice_norm *norm = new_norm(pl, residual_scale);
    lattice_model_params mp = model_shape_rows(p, layers, init_std, seed, batch, seq_len);
    if (kind) /* the arm's interventions, at every block of the curriculum */
        arm_options(&mp, kind);
    char err[LATTICE_ERRMSG_SIZE];
    check(lattice_model_params_check(&mp, err), "model", err);
    lattice_model *m;
    check(lattice_model_create(&mp, norm, be, &m), "model", NULL);
    lattice_norm_destroy(norm);
    return m;
}

lattice_optim *new_optim(lattice_model *m, double lr, double min_lr, int warmup, int total,
                         double clip, double weight_decay, double beta2, double decay)
{
    lattice_optim_params op;
    lattice_optim_params_init(&op);
    op.lr = (float)lr;
    op.min_lr = (float)min_lr;
    op.warmup_steps = warmup;
    op.total_steps = total;
    op.clip_norm = (float)clip;
    op.weight_decay = (float)weight_decay;
    if (beta2 >= 0)
        op.beta2 = (float)beta2;
    if (decay >= 0) {
        op.lr_shape = LATTICE_OPTIM_LR_SHAPE_WSD;
        op.decay_fraction = (float)decay;
    }
    lattice_optim *o;
    check(lattice_optim_create(m, &op, &o),
          "the optimizer (train.lr or lr_per_std, min_lr, warmup, weight_decay, beta2, clip, "
          "lr_shape, decay_fraction; an arm's own train; teacher.* for the teacher)", NULL);
    return o;
}

const char *lr_shape_words(double lr, double min_lr, double decay, char *buf, size_t n)
{
    if (decay > 0 && min_lr != lr)
        snprintf(buf, n, "WSD (decay to %.3g over the last %g%%)", min_lr, decay * 100);
    else
        snprintf(buf, n, "%s", min_lr == lr || decay == 0 ? "constant" : "cosine");
    return buf;
}

/* ---- one student run ------------------------------------------------------------ */

int64_t response_window_steps(int64_t steps_per_phase)
{
    /* the paper's share of a phase, rounded to the nearest step */
    const int64_t w = (steps_per_phase * PAPER_SMOOTHING_STEPS + PAPER_PHASE_STEPS / 2) /
                      PAPER_PHASE_STEPS;
    return w > 3 ? w : 3;
}

int64_t response_window(const preset *p) { return response_window_steps(p->steps_per_phase); }

double arm_std(const preset *p, const arm *a)
{
    return a->init_gain > 0 ? a->init_gain / sqrt((double)p->d_model) : p->init_std;
}

/* A run's objects, from its setup (arm_run_models to arm_run_trainer) to its
 * teardown (arm_run_close). */
typedef struct {
    lattice_schedule_phase phases[MAX_PHASES];
    int n_phases;
    lattice_schedule *s;
    lattice_backend *own; /* the student's backend where the preset's precision needs one */
    lattice_model *m;
    lattice_teacher *t;
    run_teacher *rt;
    lattice_teacher *teach; /* the logits the student learns from */
    lattice_distill *loss;
    lattice_data *d;
    lattice_optim *o;
    lattice_diag *dg;
    int32_t *fixed_tokens, *fixed_targets; /* the fixed batch, copied */
    uint8_t *fixed_mask;
    int batch, seq;
    lattice_trainer *tr;
} arm_run;

/* The run's schedule, student, teacher, loss, data and optimizer. */
static void arm_run_models(const preset *p, lattice_backend *be, lattice_model *teacher_model,
                           const arm *kind, int seed, const progress *pr, arm_run *x)
{
    const int L = p->blocks * p->block_size;
    x->n_phases = arm_phases(p, kind, x->phases);
    x->s = phases_schedule(kind, x->phases, x->n_phases);
    /* Paired seeds: pre and post of one seed share initial weights and data order. */
    const double std = arm_std(p, kind);
    /* the student's GEMMs in the preset's precision; the teacher's stay on be, in fp32 */
    x->own = study_student_backend(p, be);
    x->m = new_model_rows(p, x->own ? x->own : be, kind->placement, kind->residual_scale, L, std,
                          100 + (uint64_t)seed, p->batch, p->seq_len, kind);
    check(lattice_teacher_create_model(teacher_model, &x->t), "teacher", NULL);
    check(lattice_teacher_init_student(x->t, x->m), "student init", lattice_teacher_errmsg(x->t));
    /* the logits the student learns from: the study's file, or the teacher's forward */
    x->teach = run_teacher_wrap(x->t, pr->logits, pr->logits_verify, p->batch, p->seq_len,
                                pr->profile, &x->rt);
    lattice_distill_params dp;
    lattice_distill_params_init(&dp);
    dp.alpha = (float)kind->alpha;
    dp.gamma = (float)kind->gamma;
    dp.tau = (float)kind->tau;
    dp.direction = (lattice_distill_kl_direction)kind->kl_direction;
    char what[256];
    snprintf(what, sizeof what, "arm %s: the distillation loss (%s)", kind->name,
             kind->own_settings ? "its own train's alpha, gamma, tau, kl_direction"
                                : "train.alpha, gamma, tau");
    check(lattice_distill_create(&dp, &x->loss), what, NULL);
    x->d = open_data(p, 200 + (uint64_t)seed);
    /* LR in proportion to this arm's init std when the arm sets its own gain
     * (and not its own LR) */
    const double lr_scale = kind->lr_given ? 1.0 : std / p->init_std;
    x->o = new_optim(x->m, kind->lr * lr_scale, kind->min_lr * lr_scale, kind->warmup,
                     kind->steps_per_phase, kind->clip, kind->weight_decay, kind->beta2,
                     kind->decay);
}

/* The record's per-step arrays, one slot per step of the schedule. */
static void arm_run_record(const arm *kind, const arm_run *x, progress *pr, run_result *r)
{
    int64_t total = phases_steps(x->phases, x->n_phases);
    if (total <= 0)
        die("arm %s: every phase needs a step budget in the reproduction", kind->name);
    r->losses = calloc((size_t)total + 1, sizeof(double));
    r->step_phase = calloc((size_t)total + 1, sizeof(int));
    r->step_active = calloc((size_t)total + 1, sizeof(int));
    r->step_alt = calloc((size_t)total + 1, sizeof(int64_t));
    if (!r->losses || !r->step_phase || !r->step_active || !r->step_alt)
        die("out of memory");
    pr->res = r;
    pr->run_steps = total;
    pr->n_phases = x->n_phases;
}

/* The diagnostics, on a fixed batch: the first validation batch, copied. */
static void arm_run_fixed_batch(arm_run *x, progress *pr)
{
    check(lattice_diag_create(x->m, &x->dg), "diagnostics", NULL);
    lattice_data_batch b;
    check(lattice_data_get_val_batch(x->d, 0, &b), "validation batch", lattice_data_errmsg(x->d));
    /* the batch's buffers may be reused by the data object: keep a copy */
    const size_t n = (size_t)b.batch * (size_t)b.seq;
    x->fixed_tokens = malloc(sizeof(int32_t) * n);
    x->fixed_targets = malloc(sizeof(int32_t) * n);
    x->fixed_mask = malloc(n);
    if (!x->fixed_tokens || !x->fixed_targets || !x->fixed_mask)
        die("out of memory");
    memcpy(x->fixed_tokens, b.tokens, sizeof(int32_t) * n);
    memcpy(x->fixed_targets, b.targets, sizeof(int32_t) * n);
    memcpy(x->fixed_mask, b.mask, n);
    x->batch = b.batch;
    x->seq = b.seq;
    pr->diag = x->dg;
    pr->model = x->m;
    pr->diag_tokens = x->fixed_tokens;
    pr->diag_mask = x->fixed_mask;
    pr->diag_batch = b.batch;
    pr->diag_seq = b.seq;
}

/* The trainer over the run's objects, and the final evaluation's batches
 * checked before the run trains. */
static void arm_run_trainer(const preset *p, const arm *kind, progress *pr, arm_run *x)
{
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_every = p->eval_every;
    tp.eval_batches = p->eval_batches;
    tp.on_step = on_step;
    tp.on_eval = on_eval;
    tp.user = pr;
    char what[256];
    snprintf(what, sizeof what, "arm %s: the trainer (train.eval_every, eval_batches, the "
             "schedule, the recipe)", kind->name);
    check(lattice_trainer_create(x->m, x->teach, x->loss, x->d, x->o, x->s, &tp, &x->tr), what,
          NULL);
    if (p->final_eval_batches > lattice_data_get_n_val_batches(x->d))
        die("arm %s: the final evaluation (train.final_eval_batches): final_eval_batches %d "
            "exceeds the data's %lld validation batches", kind->name, p->final_eval_batches,
            (long long)lattice_data_get_n_val_batches(x->d));
}

/* The phases: to the schedule's end, from the run's checkpoint where one was left. */
static void arm_run_train(const preset *p, const arm *kind, int seed, progress *pr, run_result *r,
                          arm_run *x)
{
    double t0 = ex_now();
    train_resumable(p, kind, seed, x->tr, x->s, r, pr);
    pr->prof.train = ex_now() - t0;
}

/* The reported number: validation CE at the scheduled end, over the whole
 * held-out set unless the preset caps it; and the student saved where
 * --save-students asks. */
static void arm_run_final_eval(const preset *p, const arm *kind, int seed, progress *pr,
                               run_result *r, arm_run *x)
{
    pr->diag = NULL;
    lattice_schedule_counters c;
    lattice_schedule_get_counters(x->s, &c);
    r->tokens_per_s = (double)c.tokens / r->seconds;
    check(lattice_model_evaluate(x->m, x->d, p->final_eval_batches, &r->final_val), "evaluation",
          lattice_model_errmsg(x->m));
    if (p->students[0]) { /* --save-students: written whole (the library's save is atomic) */
        char path[1300];
        snprintf(path, sizeof path, "%s/%s.seed%d.safetensors", p->students, kind->name, seed);
        check(lattice_model_save(x->m, path), "--save-students", lattice_model_errmsg(x->m));
    }
}

/* The trained student's boundary scales and block removals on the fixed batch. */
static void arm_run_measures(const preset *p, run_result *r, const arm_run *x)
{
    const int active = lattice_model_get_active_layers(x->m);
    kept_scale stats[(MAX_LAYERS + 1) * 3];
    check(boundary_stats(x->dg, x->m, x->fixed_tokens, x->fixed_mask, x->batch, x->seq, stats,
                         (MAX_LAYERS + 1) * 3),
          "boundary scale", lattice_diag_errmsg(x->dg));
    r->n_boundaries = 0;
    for (int blk = 1; blk * p->block_size <= active && r->n_boundaries < MAX_BLOCKS;
         blk++, r->n_boundaries++)
        memcpy(r->rms[r->n_boundaries], &stats[blk * p->block_size * 3], sizeof r->rms[0]);
    r->n_blocks_measured = 0;
    for (int blk = 0; (blk + 1) * p->block_size <= active && blk < MAX_BLOCKS;
         blk++, r->n_blocks_measured++) {
        lattice_diag_block_removal_result rm;
        rm.size = sizeof rm;
        check(lattice_diag_measure_block_removal(x->dg, x->fixed_tokens, x->fixed_targets,
                                                 x->fixed_mask, x->batch, x->seq,
                                                 blk * p->block_size, p->block_size, &rm),
              "block removal", lattice_diag_errmsg(x->dg));
        r->removal[blk] = (kept_removal){rm.ce_full, rm.ce_removed, rm.dce, rm.angle};
    }
}

/* The loss's response at each phase change. The paper smooths over 200 of
 * 50k steps (0.4% of a phase): the same share here, at least 3 steps; areas
 * per step over 2% and 10% of a phase. */
static void arm_run_responses(const arm *kind, run_result *r, const arm_run *x)
{
    const int64_t window = response_window_steps(kind->steps_per_phase);
    const int64_t phase_len = kind->steps_per_phase;
    for (int a = 0; a < r->n_appends; a++) {
        /* the a-th phase change: from phase a to a + 1 */
        r->is_append[a] = x->phases[a + 1].active_layers > x->phases[a].active_layers;
        kept_response *rs = &r->resp[a];
        kept_response r2, r10;
        const int64_t h2 = phase_len / 50 > 1 ? phase_len / 50 : 1;
        const int64_t h10 = phase_len / 10 > 1 ? phase_len / 10 : 1;
        if (loss_response(r->losses, r->n_steps, r->append_steps[a], window, phase_len,
                          rs) != LATTICE_OK ||
            loss_response(r->losses, r->n_steps, r->append_steps[a], window, h2, &r2) !=
                LATTICE_OK ||
            loss_response(r->losses, r->n_steps, r->append_steps[a], window, h10, &r10) !=
                LATTICE_OK) {
            /* not measured (a loss not finite): NaN, never a 0 that averages in */
            *rs = (kept_response){NAN, NAN, NAN, -1};
            r->area2[a] = r->area10[a] = NAN;
            continue;
        }
        r->area2[a] = r2.area / (double)h2;
        r->area10[a] = r10.area / (double)h10;
    }
}

/* The run's objects, destroyed. */
static void arm_run_close(arm_run *x)
{
    lattice_diag_destroy(x->dg);
    free(x->fixed_tokens);
    free(x->fixed_targets);
    free(x->fixed_mask);
    lattice_trainer_destroy(x->tr);
    lattice_optim_destroy(x->o);
    lattice_data_destroy(x->d);
    lattice_distill_destroy(x->loss);
    run_teacher_destroy(x->rt);
    lattice_teacher_destroy(x->t);
    lattice_model_destroy(x->m);
    lattice_backend_destroy(x->own);
    lattice_schedule_destroy(x->s);
}

/* One run, or with dry only its objects built on the real shapes (every
 * check the run would meet before its first step: --check). */
static void run_arm(const preset *p, lattice_backend *be, lattice_model *teacher_model,
                    const arm *kind, int seed, progress *pr, run_result *r, int dry)
{
    const double t_arm = ex_now();
    memset(&pr->prof, 0, sizeof pr->prof);
    arm_run x;
    memset(&x, 0, sizeof x);
    arm_run_models(p, be, teacher_model, kind, seed, pr, &x);
    arm_run_record(kind, &x, pr, r);
    arm_run_fixed_batch(&x, pr);
    arm_run_trainer(p, kind, pr, &x);
    if (dry) {
        pr->diag = NULL;
        arm_run_close(&x); /* every object built: the run's own teardown */
        return;
    }
    arm_run_train(p, kind, seed, pr, r, &x);
    const double t_final = ex_now();
    arm_run_final_eval(p, kind, seed, pr, r, &x);
    arm_run_measures(p, r, &x);
    arm_run_responses(kind, r, &x);
    pr->prof.final = ex_now() - t_final;
    pr->prof.teacher = run_teacher_seconds(x.rt);
    pr->prof.wall = ex_now() - t_arm;
    arm_run_close(&x);
}

/* ---- runs, and the study over the ranks of an MPI job -------------------------------- */

/* Job j is seed j / n_arms of arm j % n_arms: numbered the way a single
 * process runs them, seeds outermost. */

/* --profile: the sum over the runs this process ran */
static pthread_mutex_t profile_lock = PTHREAD_MUTEX_INITIALIZER;
static run_profile profile_sum;
static int profile_runs;

/* The shares of a run's (or the runs') time, one line. */
static void say_profile(const char *what, const run_profile *x)
{
    const double w = x->wall > 0 ? x->wall / 100 : 1;
    const double evals = fmax(0, x->train - x->steps - x->callbacks - x->diagnostics);
    say("profile %s: %.1f s: student steps %.1f%%, teacher logits %.1f%%, evaluations %.1f%%, "
        "diagnostics at evaluations %.1f%%, final evaluation and measures %.1f%%, progress and "
        "callbacks %.1f%%, setup and teardown %.1f%%\n",
        what, x->wall, (x->steps - x->teacher) / w, x->teacher / w, evals / w,
        x->diagnostics / w, x->final / w, x->callbacks / w,
        fmax(0, x->wall - x->train - x->final) / w);
}

void say_profile_sum(void)
{
    pthread_mutex_lock(&profile_lock);
    const run_profile x = profile_sum;
    const int n = profile_runs;
    pthread_mutex_unlock(&profile_lock);
    if (n > 0) {
        char what[64];
        snprintf(what, sizeof what, n == 1 ? "of the %d run's time" : "of the %d runs' time summed", n);
        say_profile(what, &x);
    }
}

/* One arm x seed run, and the line that says it is done. */
run_result *run_job(const preset *p, lattice_backend *be, lattice_model *teacher, int job,
                           int run_index, progress *pr)
{
    const int a = job % p->n_arms, i = job / p->n_arms;
    run_result *r = calloc(1, sizeof(*r));
    if (!r)
        die("out of memory");
    pr->arm = p->arms[a].name;
    pr->seed = i + 1;
    pr->run_index = run_index;
    pr->run_start = pr->last_line = ex_now();
    run_arm(p, be, teacher, &p->arms[a], i + 1, pr, r, 0);
    pr->steps_done_before += r->n_steps;
    if (pr->profile) {
        char what[96];
        snprintf(what, sizeof what, "%s seed %d", p->arms[a].name, i + 1);
        say_profile(what, &pr->prof);
        pthread_mutex_lock(&profile_lock);
        run_profile *t = &profile_sum;
        const run_profile *x = &pr->prof;
        t->wall += x->wall;
        t->train += x->train;
        t->steps += x->steps;
        t->teacher += x->teacher;
        t->callbacks += x->callbacks;
        t->diagnostics += x->diagnostics;
        t->final += x->final;
        profile_runs++;
        pthread_mutex_unlock(&profile_lock);
    }
    if (!pr->tty) /* one write per line: other ranks and workers write to the same stream */
    {
        char idx[32];
        if (pr->n_runs > 0)
            snprintf(idx, sizeof idx, "[%d/%d]", run_index, pr->n_runs);
        else /* a rank other than 0 does not know how many runs there are */
            snprintf(idx, sizeof idx, "[run %d]", run_index);
        fprintf(stderr, "%s%s%s %s seed %d: val CE %.4f (%.1fs, %.0f tokens/s)\n",
                proc.n_ranks > 1 ? proc.who : "", proc.n_ranks > 1 ? ": " : "", idx, p->arms[a].name, i + 1,
                r->final_val, r->seconds, r->tokens_per_s);
    }
    return r;
}

void check_study(const preset *p)
{
    lattice_backend *be = study_backend(p, 1);
    /* the teacher as it trains, on its own rows */
    teacher_trainer tt;
    teacher_trainer_open(p, be, 1, NULL, "the teacher's trainer (teacher.*, train.eval_batches)",
                         &tt);
    lattice_model *t = teacher_trainer_close(&tt);
    lattice_model_destroy(t);
    /* the teacher as it teaches, on the students' rows; every arm's objects */
    t = new_model_rows(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, p->t_layers, p->t_init_std, 1000,
                       p->batch, p->seq_len, NULL);
    for (int a = 0; a < p->n_arms; a++) {
        progress pr;
        memset(&pr, 0, sizeof pr);
        pr.arm = p->arms[a].name;
        run_result *r = calloc(1, sizeof(*r));
        if (!r)
            die("out of memory");
        run_arm(p, be, t, &p->arms[a], 1, &pr, r, 1);
        free_run(r);
    }
    lattice_model_destroy(t);
    lattice_backend_destroy(be);
}

void free_run(run_result *r)
{
    if (!r)
        return;
    free(r->losses);
    free(r->step_phase);
    free(r->step_active);
    free(r->step_alt);
    free(r);
}

