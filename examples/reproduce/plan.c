/* Size and time before running: memory and FLOPs, cost of an arm, the plan of jobs, estimate. */
#include "plan.h"

#include <pthread.h>
#include <sched.h>
#include "preset.h"
#include "runs.h"
#include "jobs.h"

/* ---- size and time before running ---------------------------------------------------- */

/* Active-layer steps of an arm, in units of full-depth steps. */
double arm_cost(const preset *p, const arm *a)
{
    lattice_schedule_phase ph[MAX_PHASES];
    const int n = arm_phases(p, a, ph);
    double c = 0;
    const int L = p->blocks * p->block_size;
    for (int i = 0; i < n; i++)
        c += (double)ph[i].steps * ph[i].active_layers / L;
    return c;
}

int fits_here(const preset *p, int *jobs)
{
    lattice_model_params mp = model_shape(p, p->blocks * p->block_size, p->init_std, 1);
    lattice_norm *n;
    lattice_norm_create(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 1e-6f, &n);
    int64_t params = 0;
    size_t bytes = 0;
    lattice_model_params tmp = model_shape(p, p->t_layers, p->t_init_std, 1);
    int64_t tparams = 0;
    size_t tbytes = 0;
    lattice_status st = lattice_model_estimate(&mp, n, &params, &bytes);
    if (st == LATTICE_OK)
        st = lattice_model_estimate(&tmp, n, &tparams, &tbytes);
    lattice_norm_destroy(n);
    if (st != LATTICE_OK)
        die("the preset's shape is not valid: %s", lattice_status_string(st));
    /* FLOPs of one student step (forward + backward) and its optimizer state */
    double N = (double)p->batch * p->seq_len, D = p->d_model, W = (p->heads + 2.0 * p->kv_heads) * p->head_dim;
    double per_layer = 2 * N * D * (W + p->heads * (double)p->head_dim + 3.0 * p->d_ff) +
                       4.0 * p->batch * p->heads * (double)p->seq_len * p->seq_len * p->head_dim;
    double step = 3 * (per_layer * p->blocks * p->block_size + 2 * N * D * VOCAB);
    double need = (double)bytes + 8.0 * (double)params + (double)tbytes;
    double have = (double)sysconf(_SC_PHYS_PAGES) * (double)sysconf(_SC_PAGESIZE);
    int grow = -1;
    for (int a = 0; a < p->n_arms && grow < 0; a++)
        if (p->arms[a].schedule == LATTICE_SCHEDULE_PRESET_GROW)
            grow = a;
    say("student %.3gM parameters, teacher %.3gM; memory %.1f GiB (student arenas + AdamW "
        "moments + teacher); one student step %.3g FLOP; %s %.3g FLOP; this machine has %.1f GiB\n",
        params / 1e6, tparams / 1e6, need / (1 << 30), step,
        grow >= 0 ? "the grow arm" : "the first arm",
        step * arm_cost(p, &p->arms[grow >= 0 ? grow : 0]), have / (1 << 30));
    /* every run side by side holds its own student and teacher */
    if (need >= 0.8 * have)
        return 0;
    const int fit = (int)(0.8 * have / need);
    if (*jobs > fit) {
        say("%d runs side by side would need %.1f GiB, more than 80%% of this machine's %.1f "
            "GiB: %d at a time instead\n", *jobs, *jobs * need / (1 << 30), have / (1 << 30), fit);
        *jobs = fit;
    }
    return 1;
}

/* Time a few full-depth student steps (with the teacher's forward) on the
 * real data and extrapolate the whole study. */
/* Runs side by side by default: the cores this process may use over the
 * threads each run takes, at least 1. */
int default_jobs(int threads)
{
    int cores = 0;
    cpu_set_t set;
    if (sched_getaffinity(0, sizeof set, &set) == 0)
        cores = CPU_COUNT(&set);
    if (cores < 1)
        cores = (int)sysconf(_SC_NPROCESSORS_ONLN);
    int j = cores / (threads > 0 ? threads : 1);
    return j < 1 ? 1 : j > MAX_JOBS ? MAX_JOBS : j;
}

/* The wall time of runs handed out longest first to jobs workers, each taking
 * the next when it is free (runs in hand-out order). */
static double makespan(const double *secs, const int *order, int n, int jobs)
{
    double load[MAX_JOBS] = {0}, end = 0;
    for (int k = 0; k < n; k++) {
        int w = 0;
        for (int j = 1; j < jobs; j++)
            if (load[j] < load[w])
                w = j;
        load[w] += secs[order[k]];
        end = load[w] > end ? load[w] : end;
    }
    return end;
}

/* One job of the calibration: a student of the study's shape with a teacher
 * of the preset's, the study's distillation loss and data, and the two
 * trainers a run steps (distilled) and that a plain step would use. */
typedef struct timing_job {
    const preset *p;
    lattice_backend *be;
    lattice_model *stu, *tm;
    lattice_teacher *t;
    lattice_distill *loss;
    lattice_data *d;
    lattice_optim *o;
    lattice_schedule *s;
    lattice_trainer *distilled, *plain;
    /* a step whose teacher logits are copied out of memory, as the study's
     * logits file serves them */
    lattice_teacher *tf;
    lattice_trainer *filed;
    float *fixed;
    pthread_barrier_t *bar;
    double distilled_s, plain_s, filed_s, eval_s; /* per step; per validation batch */
} timing_job;

#define TIMING_STEPS 3
#define TIMING_EVAL_BATCHES 2

/* The logits file's answer, timed: a batch's logits copied from memory. */
static int copied_logits(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                         float *out)
{
    (void)tokens;
    memcpy(out, ((timing_job *)user)->fixed, sizeof(float) * (size_t)batch * seq * vocab);
    return 0;
}

static void timing_open(timing_job *j, const preset *p, lattice_backend *be)
{
    const int L = p->blocks * p->block_size;
    j->p = p;
    j->be = be;
    j->stu = new_model(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, L, p->init_std, 1);
    j->tm = new_model(p, be, LATTICE_NORM_PLACEMENT_PRE, 1.0, p->t_layers, p->t_init_std, 1000);
    check(lattice_teacher_create_model(j->tm, &j->t), "timing teacher", NULL);
    lattice_distill_params dp;
    lattice_distill_params_init(&dp);
    dp.alpha = (float)p->alpha;
    dp.gamma = (float)p->gamma;
    dp.tau = (float)p->tau;
    check(lattice_distill_create(&dp, &j->loss), "timing loss", NULL);
    j->d = open_data(p, 1);
    j->o = new_optim(j->stu, p->lr, p->min_lr, 1, 100, p->clip, p->weight_decay, p->beta2,
                     p->decay);
    check(lattice_schedule_create_preset(LATTICE_SCHEDULE_PRESET_JOINT, L, 1, 1000, 0, &j->s),
          "schedule", NULL);
    lattice_trainer_params tp;
    lattice_trainer_params_init(&tp);
    tp.eval_batches = TIMING_EVAL_BATCHES;
    check(lattice_trainer_create(j->stu, j->t, j->loss, j->d, j->o, j->s, &tp, &j->distilled),
          "timing trainer", NULL);
    check(lattice_trainer_create(j->stu, NULL, NULL, j->d, j->o, j->s, &tp, &j->plain),
          "timing trainer", NULL);
    j->fixed = calloc((size_t)p->batch * p->seq_len * VOCAB, sizeof(float));
    if (!j->fixed)
        die("out of memory");
    check(lattice_teacher_create_callback(copied_logits, j, VOCAB, p->batch, p->seq_len, &j->tf),
          "timing teacher", NULL);
    check(lattice_trainer_create(j->stu, j->tf, j->loss, j->d, j->o, j->s, &tp, &j->filed),
          "timing trainer", NULL);
}

static void timing_close(timing_job *j)
{
    lattice_trainer_destroy(j->filed);
    lattice_teacher_destroy(j->tf);
    free(j->fixed);
    lattice_trainer_destroy(j->plain);
    lattice_trainer_destroy(j->distilled);
    lattice_schedule_destroy(j->s);
    lattice_optim_destroy(j->o);
    lattice_data_destroy(j->d);
    lattice_distill_destroy(j->loss);
    lattice_teacher_destroy(j->t);
    lattice_model_destroy(j->tm);
    lattice_model_destroy(j->stu);
}

static double timed_steps(lattice_trainer *tr)
{
    const double t0 = ex_now();
    for (int i = 0; i < TIMING_STEPS; i++)
        check(lattice_trainer_step(tr, NULL), "timing step", lattice_trainer_errmsg(tr));
    return (ex_now() - t0) / TIMING_STEPS;
}

/* Every job steps at once, as the runs will side by side: a warm-up step,
 * then distilled steps, plain steps and an evaluation, each phase started
 * together. */
static void *timing_worker(void *arg)
{
    timing_job *j = arg;
    check(lattice_trainer_step(j->distilled, NULL), "timing step",
          lattice_trainer_errmsg(j->distilled));
    pthread_barrier_wait(j->bar);
    j->distilled_s = timed_steps(j->distilled);
    pthread_barrier_wait(j->bar);
    j->plain_s = timed_steps(j->plain);
    pthread_barrier_wait(j->bar);
    j->filed_s = timed_steps(j->filed);
    pthread_barrier_wait(j->bar);
    double loss;
    const double t0 = ex_now();
    check(lattice_trainer_evaluate(j->distilled, &loss), "timing evaluation",
          lattice_trainer_errmsg(j->distilled));
    j->eval_s = (ex_now() - t0) / TIMING_EVAL_BATCHES;
    return NULL;
}

double estimate_wall(const preset *p, lattice_backend *be, int teacher_cached,
                     logits_plan logits, int jobs, const int *todo, int n_todo)
{
    const int L = p->blocks * p->block_size;
    /* Calibrate as the runs will run: jobs students side by side, each with
     * its teacher's forward and the distillation loss (a distilled step, and a
     * plain one: the student's own part, which scales with its active layers),
     * and a validation batch's evaluation. */
    const int nj = jobs > 1 ? (jobs < n_todo ? jobs : (n_todo > 1 ? n_todo : 1)) : 1;
    timing_job tj[MAX_JOBS];
    pthread_t th[MAX_JOBS];
    pthread_barrier_t bar;
    pthread_barrier_init(&bar, NULL, (unsigned)nj);
    for (int k = 0; k < nj; k++) {
        timing_open(&tj[k], p, k ? study_backend(p, p->threads) : be);
        tj[k].bar = &bar;
    }
    for (int k = 1; k < nj; k++)
        if (pthread_create(&th[k], NULL, timing_worker, &tj[k]) != 0)
            die("the estimate cannot start a thread");
    timing_worker(&tj[0]);
    for (int k = 1; k < nj; k++)
        pthread_join(th[k], NULL);
    pthread_barrier_destroy(&bar);
    double distilled = 0, plain = 0, filed = 0, eval = 0;
    for (int k = 0; k < nj; k++) {
        distilled += tj[k].distilled_s / nj;
        plain += tj[k].plain_s / nj;
        filed += tj[k].filed_s / nj;
        eval += tj[k].eval_s / nj;
        lattice_backend *own = k ? tj[k].be : NULL;
        timing_close(&tj[k]);
        lattice_backend_destroy(own);
    }
    /* the teacher's forward and the loss: what a distilled step adds, every
     * step, whatever the student's active depth; with the logits file, the
     * loss and the copy only, and the teacher's forward once per training
     * batch when the file is made */
    const double forward = distilled > filed ? distilled - filed : 0;
    const double extra = logits == LOGITS_IN_STEPS ? (distilled > plain ? distilled - plain : 0)
                                                   : (filed > plain ? filed - plain : 0);
    const double step = plain;
    /* the teacher trains alone, on the runs' thread count: plain steps of its depth */
    double teacher = teacher_cached ? 0 : step * p->t_steps * p->t_layers / L;
    if (logits == LOGITS_FILE_TO_MAKE) {
        lattice_data *dt = open_data(p, 1);
        teacher += forward * (double)((lattice_data_get_n_documents(dt, LATTICE_DATA_SPLIT_TRAIN) +
                                       p->batch - 1) / p->batch);
        lattice_data_destroy(dt);
    }
    double run_s[MAX_ARMS * MAX_SEEDS], serial = 0;
    lattice_data *dv = open_data(p, 1);
    double n_val = (double)lattice_data_get_n_val_batches(dv);
    lattice_data_destroy(dv);
    for (int a = 0; a < p->n_arms; a++) {
        lattice_schedule_phase ph[MAX_PHASES];
        const int n_phases = arm_phases(p, &p->arms[a], ph);
        int64_t steps = phases_steps(ph, n_phases);
        double ev = (p->eval_every ? (double)steps / p->eval_every : 0) + n_phases;
        double evals = ev * (p->eval_batches ? fmin(p->eval_batches, n_val) : n_val) +
                       (p->final_eval_batches ? fmin(p->final_eval_batches, n_val) : n_val);
        for (int i = 0; i < p->seeds; i++)
            run_s[i * p->n_arms + a] =
                step * arm_cost(p, &p->arms[a]) + extra * (double)steps + evals * eval;
    }
    for (int k = 0; k < n_todo; k++)
        serial += run_s[todo[k]];
    int order[MAX_ARMS * MAX_SEEDS];
    longest_first(p, todo, n_todo, order);
    double total = teacher + (jobs > 1 ? makespan(run_s, order, n_todo, jobs) : serial);
    char e[32];
    ex_format_duration(e, sizeof e, total);
    const int kept = p->n_arms * p->seeds - n_todo;
    say("estimated wall time %s for %d run%s with %d job%s x %d thread%s (timed now with %d "
        "student%s stepping side by side at %d thread%s, on this machine as loaded now: a "
        "full-depth step %.0f ms, %s %.0f ms more, a validation "
        "batch %.0f ms%s%s%s%s)\n",
        e, n_todo, n_todo == 1 ? "" : "s", jobs, jobs > 1 ? "s" : "", p->threads,
        p->threads > 1 ? "s" : "", nj, nj > 1 ? "s" : "", p->threads, p->threads > 1 ? "s" : "",
        step * 1e3,
        logits == LOGITS_IN_STEPS ? "the teacher's forward and the loss"
                                  : "the loss on logits from the file", extra * 1e3, eval * 1e3,
        jobs > nj ? "; more jobs than runs to time side by side" : "",
        teacher_cached ? "; the teacher is cached" : "",
        logits == LOGITS_FILE_TO_MAKE ? "; the teacher's logits file to be made"
        : logits == LOGITS_FILE_MADE  ? "; the teacher's logits file made"
                                      : "",
        kept > 0 ? "; the other runs are kept or not selected" : "");
    return total;
}

