/* The study: the teacher, every run to do, the outputs (modes.h). */
#include "modes.h"

#include "files.h"
#include "jobs.h"
#include "logits_cache.h"
#include "runs.h"
#include "session.h"
#include "store.h"
#include "teacher.h"

/* The other ranks' teacher: the file rank 0 trained or loaded, checked
 * against its checksum, and the logits file rank 0 made before it let this
 * rank through. */
static void rank_teacher(session *x, uint64_t setup_sum, uint64_t teacher_sum)
{
    const preset *p = x->s.p;
    if (setup_checksum(p) != setup_sum)
        die("this rank's preset, options or corpus differ from rank 0's (%s, %s, %s): every "
            "rank must run the same study",
            x->o->preset_path, p->train, p->val);
    x->teacher = load_teacher(p, x->be, x->dir, teacher_sum);
    if (x->o->logits == LOGITS_STEP)
        return;
    char thex[17], chex[17];
    uint64_t h;
    if (xxh_file(x->tpath, &h) != 0)
        die("cannot read the teacher %s: %s", x->tpath, strerror(errno));
    hex64(thex, h);
    corpus_checksum(p, chex);
    x->logits = logits_cache_get(p, x->teacher, x->be, x->dir, thex, chex, 0, 0);
}

/* Rank 0's teacher, trained or loaded, its go/no-go, the runs to do against
 * it, the teacher's logits for every training row (once for all the runs,
 * on the runs' backend and threads: the kernels a run's own forward would
 * use), and the other ranks let through. */
static void study_teacher(session *x)
{
    const options *o = x->o;
    check_outputs(&x->s);
    session_teacher(x, 1);
    runs_to_do(x, 0, o->fresh, 0, NULL, 0);
    check_outputs(&x->s);
    if (x->s.n_todo > 0 && o->logits != LOGITS_STEP)
        x->logits = logits_cache_get(x->s.p, x->teacher, x->be, x->dir, x->s.teacher_hex,
                                     x->s.corpus_hex, 1,
                                     o->logits == LOGITS_VERIFY ? INT64_MAX : todo_steps(&x->s));
#ifdef LATTICE_HAVE_MPI
    if (proc.n_ranks > 1) {
        uint64_t sum = FNV_START;
        if (fnv_file(x->tpath, &sum) != 0)
            die("cannot read back %s: %s", x->tpath, strerror(errno));
        open_gate(GATE_GO, setup_checksum(x->s.p), sum);
    }
#endif
}

/* Every run to do: over the ranks, side by side in jobs, or one after another. */
static void run_all(session *x)
{
    study *s = &x->s;
    const preset *p = s->p;
    session_count_kept(x);
    progress pr = {0};
    pr.tty = proc.n_ranks == 1 && isatty(2); /* several ranks' progress lines would overwrite each other */
    pr.start = ex_now();
    pr.steps_total_all = todo_steps(s);
    pr.n_runs = x->w.n_runs;
    pr.resume = s->dir && proc.n_ranks == 1 ? s : NULL; /* none over MPI ranks */
    pr.take_up = !x->o->fresh;
    pr.logits = x->logits; /* every rank's runs: --teacher-logits verify verifies on each */
    pr.logits_verify = x->o->logits == LOGITS_VERIFY;
    pr.checkpoint_every = x->o->checkpoint_every;
    pr.profile = x->o->profile;
#ifdef LATTICE_HAVE_MPI
    if (proc.rank > 0) {
        work_for_rank0(p, x->be, x->teacher, &pr);
        proc.owes_rank0 = 0;
        return;
    }
    if (proc.n_ranks > 1)
        run_study_ranks(s, x->be, x->teacher, &pr);
#endif
    if (proc.n_ranks == 1 && x->jobs > 1)
        run_study_jobs(s, x->tpath, x->jobs, &pr);
    /* seeds outermost: an interrupted run still has complete pairs */
    for (int k = 0; k < s->n_todo && proc.n_ranks == 1 && x->jobs == 1; k++)
        keep_run(s, s->todo[k], run_job(p, x->be, x->teacher, s->todo[k], k + 1, &pr));
    if (pr.tty)
        fputs("\r\033[K", stderr);
    if (pr.profile)
        say_profile_sum();
    logits_counts(&x->w.logits_file, &x->w.logits_computed);
    if (x->logits && proc.rank == 0)
        say("the teacher's logits: %lld batches read from the file, %lld computed by the "
            "teacher\n", (long long)x->w.logits_file, (long long)x->w.logits_computed);
}

/* --save-students: the folder the runs save their models in. */
static void open_students_dir(preset *p, const char *dir)
{
    char failed[1100];
    snprintf(p->students, sizeof p->students, "%s/students", dir);
    if (proc.rank == 0 && make_dirs(p->students, failed, sizeof failed) != 0)
        die("cannot create %s: %s", failed, strerror(errno));
}

int mode_study(const options *o, preset *p, int jobs, const char *dir, uint64_t setup_sum,
               uint64_t teacher_sum)
{
    if (o->save_students)
        open_students_dir(p, dir);
    session x;
    session_open(&x, o, p, dir, 1, NULL, 0);
    session_plan(&x, jobs);
    session_estimate(&x);
    const double t0 = ex_now();
    if (proc.rank != 0)
        rank_teacher(&x, setup_sum, teacher_sum);
    else
        study_teacher(&x);
    x.w.teacher_s = ex_now() - t0;
    run_all(&x);
    x.w.wall = ex_now() - t0;
    int status = 0;
#ifdef LATTICE_HAVE_MPI
    /* rank 0's word that the files are written: waiting for it here, and not
     * in MPI_Finalize, costs no CPU while rank 0 finishes its runs */
    if (proc.rank > 0)
        status = await_gate(&setup_sum, &teacher_sum);
#endif
    if (proc.rank == 0)
        session_write(&x);
    session_close(&x);
    return status;
}
