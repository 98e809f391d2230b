/* What the modes that look at a study's folder share (session.h). */
#include "session.h"

#include "files.h"
#include "logits_cache.h"
#include "plan.h"
#include "plot.h"
#include "preset.h"
#include "report.h"
#include "results.h"
#include "runs.h"
#include "store.h"
#include "teacher.h"

void runs_to_do(session *x, int retrain, int fresh, int quiet, char *why_teacher,
                size_t why_size)
{
    study *s = &x->s;
    const preset *p = s->p;
    for (int a = 0; a < p->n_arms; a++)
        for (int i = 0; i < p->seeds; i++) {
            free_run(s->res[a][i]);
            s->res[a][i] = NULL;
        }
    char why[1300];
    why[0] = 0;
    const int have_teacher =
        !retrain && cached_teacher(p, s->dir, s->corpus_hex, lattice_backend_get_name(x->be),
                                   s->teacher_hex, why, sizeof why);
    if (!have_teacher)
        snprintf(s->teacher_hex, sizeof s->teacher_hex, "none");
    if (why_teacher)
        snprintf(why_teacher, why_size, "%s", why);
    for (int a = 0; a < p->n_arms; a++) {
        free(s->settings[a]);
        s->settings[a] = run_settings(p, &p->arms[a], s->corpus_hex, s->teacher_hex);
    }
    if (have_teacher)
        load_kept_runs(s, quiet, fresh);
    s->n_todo = 0;
    for (int i = 0; i < p->seeds; i++)
        for (int a = 0; a < p->n_arms; a++)
            if (p->arms[a].selected && !s->res[a][i])
                s->todo[s->n_todo++] = i * p->n_arms + a;
}

/* A file the study will write, or die saying why it cannot be. */
static void check_one_output(const char *dir, const char *name, const char *option)
{
    if (check_writable(dir, name) != 0)
        die("%scannot write %s/%s: %s (nothing was run)", option, dir, name,
            errno == EINVAL ? "it is not a regular file" : strerror(errno));
}

/* A folder, FIFO or link in the way, or a folder that cannot be written, is
 * found now, not after hours of training. */
void check_outputs(const study *s)
{
    static const char *const outs[] = {"report.md",    "results.json",   "curves.csv",
                                       "bands.csv",    "curves.gp",      "teacher.safetensors",
                                       "teacher.json", "curves_steps.png", "curves_steps.svg",
                                       "curves_active_layer_tokens.png",
                                       "curves_active_layer_tokens.svg"};
    for (size_t k = 0; k < sizeof outs / sizeof outs[0]; k++)
        check_one_output(s->dir, outs[k], "");
    char runs[2100];
    snprintf(runs, sizeof runs, "%s/runs", s->dir);
    if (s->n_todo == 0)
        return;
    if (make_dirs(runs, NULL, 0) != 0)
        die("cannot create %s: %s (nothing was run)", runs, strerror(errno));
    for (int k = 0; k < s->n_todo; k++) {
        const int job = s->todo[k];
        const char *arm = s->p->arms[job % s->p->n_arms].name;
        const int seed = job / s->p->n_arms + 1;
        char name[128];
        snprintf(name, sizeof name, "%s.seed%d.run", arm, seed);
        check_one_output(runs, name, "");
        /* --save-students: the model each run saves once it has trained */
        snprintf(name, sizeof name, "%s.seed%d.safetensors", arm, seed);
        if (s->p->students[0])
            check_one_output(s->p->students, name, "--save-students: ");
    }
}

int64_t todo_steps(const study *s)
{
    int64_t steps = 0;
    for (int k = 0; k < s->n_todo; k++) {
        lattice_schedule_phase ph[MAX_PHASES];
        steps += phases_steps(ph, arm_phases(s->p, &s->p->arms[s->todo[k] % s->p->n_arms], ph));
    }
    return steps;
}

/* Whether seed i's kept run has seed 1's phase changes, measured blocks and
 * boundaries: the report's tables average them entry by entry. */
static int same_shape(const run_result *r0, const run_result *r)
{
    if (r->n_appends != r0->n_appends || r->n_blocks_measured != r0->n_blocks_measured ||
        r->n_boundaries != r0->n_boundaries)
        return 0;
    for (int k = 0; k < r0->n_appends; k++)
        if (r->is_append[k] != r0->is_append[k])
            return 0;
    return 1;
}

void report_view(const study *s, preset *rp, study *rs, char *missing, size_t n)
{
    const preset *p = s->p;
    *rp = *p;
    memset(rs, 0, sizeof(*rs));
    rs->p = rp;
    rs->teacher = s->teacher;
    rp->n_arms = 0;
    missing[0] = 0;
    for (int a = 0; a < p->n_arms; a++) {
        int have = 0;
        for (int i = 0; i < p->seeds; i++)
            have += s->res[a][i] != NULL;
        int odd = 0; /* the first seed (numbered from 1) not shaped as seed 1 */
        for (int i = 1; have == p->seeds && i < p->seeds && !odd; i++)
            odd = same_shape(s->res[a][0], s->res[a][i]) ? 0 : i + 1;
        const size_t at = strlen(missing);
        if (have == p->seeds && !odd) {
            for (int i = 0; i < p->seeds; i++)
                rs->res[rp->n_arms][i] = s->res[a][i];
            rp->arms[rp->n_arms++] = p->arms[a];
        } else if (odd)
            snprintf(missing + at, n - at,
                     "%s%s (seed %d's kept run has other phase changes, measured blocks or "
                     "boundaries than seed 1's)", at ? ", " : "", p->arms[a].name,
                     odd);
        else if (have > 0)
            snprintf(missing + at, n - at, "%s%s (%d of %d seeds have run)", at ? ", " : "",
                     p->arms[a].name, have, p->seeds);
    }
}

void session_open(session *x, const options *o, preset *p, const char *dir, int quiet,
                  char *why_teacher, size_t why_size)
{
    memset(x, 0, sizeof(*x));
    x->o = o;
    x->s.p = p;
    x->dir = dir;
    snprintf(x->tpath, sizeof x->tpath, "%s/teacher.safetensors", dir);
    /* the teacher's settings name the backend: made before the first look */
    x->be = study_backend(p, p->threads);
    if (proc.rank != 0)
        return;
    x->s.dir = dir;
    corpus_checksum(p, x->s.corpus_hex);
    runs_to_do(x, o->retrain, o->fresh, quiet, why_teacher, why_size);
}

/* "OpenBLAS 0.3.21, Haswell kernels": what the backend runs. */
static void kernels_words(lattice_backend *be, char *out, size_t n, char *reason, size_t rn)
{
    lattice_backend_info bi;
    bi.size = sizeof bi;
    check(lattice_backend_get_info(be, &bi), "backend info", NULL);
    snprintf(out, n, "%s, %s kernels%s", bi.library, bi.kernels,
             bi.optimised ? "" : " (NOT optimised for this CPU)");
    snprintf(reason, rn, "%s", bi.reason);
}

void session_plan(session *x, int jobs)
{
    const preset *p = x->s.p;
    if (jobs > x->s.n_todo)
        jobs = x->s.n_todo > 0 ? x->s.n_todo : 1;
    x->jobs = x->w.jobs = jobs;
    char reason[sizeof ((lattice_backend_info *)0)->reason];
    kernels_words(x->be, x->w.kernels, sizeof x->w.kernels, reason, sizeof reason);
    snprintf(x->w.plan, sizeof x->w.plan, "%d job%s x %d thread%s", jobs, jobs > 1 ? "s" : "",
             p->threads, p->threads > 1 ? "s" : "");
    if (proc.rank == 0)
        say("lattice %s, backend %s (%s)%s, %d thread%s%s, plan %s%s%s\n",
            lattice_version_string(), lattice_backend_get_name(x->be), x->w.kernels,
            study_gemm_words(p), p->threads,
            p->threads == 1 ? "" : "s", proc.n_ranks > 1 ? " per rank" : " per run", x->w.plan,
            reason[0] ? "; " : "", reason);
}

void session_estimate(const session *x)
{
    if (proc.rank != 0)
        return;
    const study *s = &x->s;
    const int cached = strcmp(s->teacher_hex, "none") != 0;
    const logits_mode m = x->o->logits;
    const logits_plan lp =
        m == LOGITS_STEP ? LOGITS_IN_STEPS
        : cached && logits_file_ready(s->p, x->be, x->dir, s->teacher_hex, s->corpus_hex)
            ? LOGITS_FILE_MADE
        : m == LOGITS_VERIFY || logits_file_worth(s->p, todo_steps(s)) ? LOGITS_FILE_TO_MAKE
                                                                       : LOGITS_IN_STEPS;
    estimate_wall(s->p, x->be, cached, lp, x->jobs, s->todo, s->n_todo);
}

void session_teacher(session *x, int require)
{
    study *s = &x->s;
    /* on the runs' thread count, whatever the plan: the same teacher, so the same
     * numbers, however many runs go side by side */
    x->teacher = get_teacher(s->p, x->be, x->dir, x->o->retrain, s->corpus_hex, s->teacher_hex);
    teacher_gonogo(s->p, x->teacher, &s->teacher);
    if (require && s->p->require_go && !(s->teacher.max_ratio >= 3))
        die("the teacher is NO-GO (largest boundary/regular RMS ratio %.2f, below 3): the "
            "students would test a mechanism that is not there; stopping before any runs "
            "(require_go; probe teacher recipes with --probe)",
            s->teacher.max_ratio);
}

void session_count_kept(session *x)
{
    const preset *p = x->s.p;
    x->w.n_runs = x->s.n_todo;
    for (int a = 0; a < p->n_arms; a++)
        for (int i = 0; i < p->seeds; i++)
            x->w.n_kept += x->s.res[a][i] != NULL;
    if (proc.rank == 0 && x->w.n_kept > 0)
        say("%d run%s kept in %s/runs/ reused; %d to run\n", x->w.n_kept,
            x->w.n_kept == 1 ? "" : "s", x->dir, x->w.n_runs);
}

/* report.md's last lines: how the study ran, and what it does not report. */
static void ran_words(FILE *f, const session *x, const char *missing)
{
    const preset *p = x->s.p;
    const run_words *w = &x->w;
    const char *backend = lattice_backend_get_name(x->be);
    if (w->n_runs > 0)
        fprintf(f, "\nWall time %.0f s (teacher %.0f s), lattice %s, backend %s (%s)%s with %d "
                   "thread%s%s.\n",
                w->wall, w->teacher_s, lattice_version_string(), backend, w->kernels,
                study_gemm_words(p), p->threads,
                p->threads == 1 ? "" : "s",
                proc.n_ranks > 1 ? " on each rank" : w->jobs > 1 ? " per run" : "");
    else
        fprintf(f, "\nNothing ran now: every run reported was kept from an earlier run in this "
                   "folder (each run's own seconds and tokens/s are in results.json). Report "
                   "written by lattice %s, backend %s (%s).\n",
                lattice_version_string(), backend, w->kernels);
    if (w->jobs > 1)
        fprintf(f, "The runs went %d side by side (%s).\n", w->jobs, w->plan);
    if (w->logits_file > 0)
        fprintf(f, "The teacher's logits came from teacher_logits.bin, computed once for every "
                   "run (%lld batches read, %lld computed by the teacher).\n",
                (long long)w->logits_file, (long long)w->logits_computed);
    if (proc.n_ranks > 1)
        fprintf(f, "The runs were spread over %d MPI ranks.\n", proc.n_ranks);
    if (w->n_kept > 0)
        fprintf(f, "%d of the runs were kept from earlier runs in this folder (runs/; same "
                   "settings, corpus and teacher); %d ran now.\n",
                w->n_kept, w->n_runs);
    if (missing[0])
        fprintf(f, "Not reported: %s.\n", missing);
}

void session_write(const session *x)
{
    const char *dir = x->dir;
    /* the report: every arm with all its seeds, run now or kept */
    preset rp;
    study rs;
    char missing[2048];
    report_view(&x->s, &rp, &rs, missing, sizeof missing);
    rs.unigram = unigram_ce(&rp);
    char path[1200];
    /* the data and plots first: report.md links them */
    snprintf(path, sizeof path, "%s/curves.csv", dir);
    write_csv(path, &rs);
    snprintf(path, sizeof path, "%s/bands.csv", dir);
    write_bands(path, &rs);
    snprintf(path, sizeof path, "%s/results.json", dir);
    write_json(path, &rs, x->w.wall);
    plot(dir, &rs);
    snprintf(path, sizeof path, "%s/report.md", dir);
    outfile rep;
    out_open(&rep, path);
    report(rep.f, &rs);
    ran_words(rep.f, x, missing);
    report_files(rep.f, dir);
    out_commit(&rep);
    report_summary(stdout, &rs, dir);
    if (missing[0])
        printf("\nNot reported (not every seed has run): %s.\n", missing);
    printf("\nWall time %.0f s (teacher %.0f s). Results in %s/.\n", x->w.wall, x->w.teacher_s,
           dir);
}

void session_close(session *x)
{
    study *s = &x->s;
    for (int a = 0; a < MAX_ARMS; a++) {
        for (int i = 0; i < MAX_SEEDS; i++) {
            free_run(s->res[a][i]);
            s->res[a][i] = NULL;
        }
        free(s->settings[a]);
        s->settings[a] = NULL;
    }
    logits_cache_close(x->logits);
    x->logits = NULL;
    lattice_model_destroy(x->teacher);
    x->teacher = NULL;
    lattice_backend_destroy(x->be);
    x->be = NULL;
}
