/* The hand-out of runs: one after another, side by side (--jobs), or over MPI ranks. */
#include "jobs.h"

#include <pthread.h>
#include <time.h>
#ifdef LATTICE_HAVE_MPI
#include <mpi.h>
#endif

#include "files.h"
#include "runs.h"
#include "store.h"
#include "plan.h"

/* Whether a launcher (mpirun, mpiexec, srun) started this process: only then
 * is MPI initialised, so that a plain start is exactly a single process, with
 * no MPI runtime at all. */
int launched_by_mpi(void)
{
    static const char *const vars[] = {"OMPI_COMM_WORLD_SIZE", "PMIX_RANK", "PMI_RANK", "PMI_SIZE"};
    for (size_t i = 0; i < sizeof vars / sizeof vars[0]; i++)
        if (getenv(vars[i]))
            return 1;
    return 0;
}

/* The jobs in the order they are handed out (to MPI ranks or to --jobs
 * workers): longest arm first, by a stable insertion sort, so that ties keep
 * the given order (seeds outermost). */
void longest_first(const preset *p, const int *jobs, int n, int *order)
{
    double cost[MAX_ARMS];
    for (int a = 0; a < p->n_arms; a++)
        cost[a] = arm_cost(p, &p->arms[a]);
    for (int j = 0; j < n; j++) {
        int k = j;
        while (k > 0 && cost[order[k - 1] % p->n_arms] < cost[jobs[j] % p->n_arms]) {
            order[k] = order[k - 1];
            k--;
        }
        order[k] = jobs[j];
    }
}

/* ---- runs side by side in one process (--jobs) -------------------------------------- */

/* With --jobs J, J worker threads take the runs in longest_first order, each
 * with its own backend of the preset's threads and its own copy of the
 * teacher. The main thread loads every copy, from the file whose checksum it
 * verified (the folder's lock keeps other studies from replacing it), before
 * any worker starts. A run's numbers depend on its seed, its thread count
 * and the teacher only, so the results are those of one process running them
 * one after another. A worker that fails stops the others at their next
 * step (their runs in progress are not kept; those that ended are), and the
 * study ends once they have all stopped. */
typedef struct pool {
    study *s;
    int order[MAX_ARMS * MAX_SEEDS];
    int n_jobs, next;
    pthread_mutex_t lock;
    progress pr; /* each worker starts from a copy */
} pool;

typedef struct worker {
    pool *pl;
    lattice_backend *be;
    lattice_model *teacher;
} worker;

static void *pool_worker(void *arg)
{
    worker *w = arg;
    pool *pl = w->pl;
    in_worker = 1;
    progress pr = pl->pr;
    for (;;) {
        pthread_mutex_lock(&pl->lock);
        const int k = pl->next < pl->n_jobs && !atomic_load(&workers_stop) ? pl->next++ : -1;
        pthread_mutex_unlock(&pl->lock);
        if (k < 0)
            break;
        const int job = pl->order[k];
        /* each cell and file is written by one worker; the cells are read after the join */
        keep_run(pl->s, job, run_job(pl->s->p, w->be, w->teacher, job, k + 1, &pr));
    }
    return NULL;
}

/* The teacher file as the study verified it. */
static void verify_teacher(const char *path, const char *hex)
{
    uint64_t h;
    char got[17];
    if (xxh_file(path, &h) != 0)
        die("cannot read the teacher %s: %s", path, strerror(errno));
    hex64(got, h);
    if (strcmp(got, hex) != 0)
        die("the teacher %s changed while the study ran (checksum %s, not %s): another process "
            "wrote it", path, got, hex);
}

void run_study_jobs(study *s, const char *teacher_path, int jobs, const progress *pr)
{
    const preset *p = s->p;
    pool *pl = calloc(1, sizeof(*pl));
    worker *w = calloc(MAX_JOBS, sizeof(*w));
    pthread_t th[MAX_JOBS];
    if (!pl || !w)
        die("out of memory");
    pl->s = s;
    pl->n_jobs = s->n_todo;
    pl->pr = *pr;
    pl->pr.tty = 0; /* one line per finished run: several bars would overwrite each other */
    longest_first(p, s->todo, s->n_todo, pl->order);
    pthread_mutex_init(&pl->lock, NULL);
    if (jobs > pl->n_jobs)
        jobs = pl->n_jobs;
    verify_teacher(teacher_path, s->teacher_hex);
    for (int j = 0; j < jobs; j++) {
        w[j].pl = pl;
        w[j].be = study_backend(p, p->threads);
        char err[LATTICE_ERRMSG_SIZE];
        if (lattice_model_create_from_file(teacher_path, NULL, w[j].be, p->batch, p->seq_len,
                                           &w[j].teacher, err) != LATTICE_OK)
            die("cannot load the teacher %s: %s", teacher_path, err);
    }
    verify_teacher(teacher_path, s->teacher_hex);
    int started = 0;
    for (; started < jobs; started++)
        if (pthread_create(&th[started], NULL, pool_worker, &w[started]) != 0) {
            say("cannot start worker %d of %d: %s\n", started + 1, jobs, strerror(errno));
            atomic_store(&workers_stop, 1);
            break;
        }
    for (int j = 0; j < started; j++)
        pthread_join(th[j], NULL);
    for (int j = 0; j < jobs; j++) {
        lattice_model_destroy(w[j].teacher);
        lattice_backend_destroy(w[j].be);
    }
    pthread_mutex_destroy(&pl->lock);
    free(pl);
    free(w);
    if (interrupted)
        say_interrupted(s->dir);
    if (atomic_load(&workers_stop))
        die("stopped: a run failed (above); the runs that ended before are kept in %s/runs/",
            s->dir);
}

#ifdef LATTICE_HAVE_MPI
/* With several ranks, rank 0 does everything a single process does before
 * the students (the estimate, the teacher and its go/no-go) while the others
 * wait. It then releases them (a gate message carrying the teacher file's
 * checksum; they load the teacher from the output folder) and hands out the
 * arm x seed runs one at a time, longest arm first, to whichever rank asks;
 * it runs runs of its own in between and answers between its training steps,
 * so no rank idles while runs remain. Results come back as the bytes of the
 * run's record: rank 0 then holds bit for bit what a single process would
 * have computed, and writes the same files. The waits poll with short sleeps:
 * a blocking MPI wait spins and would take a core from the training. */

enum { TAG_GATE = 1, TAG_READY, TAG_RESULT, TAG_JOB };

typedef struct dispatch {
    study *s;
    int order[MAX_ARMS * MAX_SEEDS]; /* jobs, longest arm first */
    int n_jobs, next;
    int workers_left; /* ranks not yet told that the runs are all handed out */
} dispatch;

static void nap(void)
{
    const struct timespec ts = {0, 2000000};
    nanosleep(&ts, NULL);
}

/* Wait for a request to complete, without spinning. */
static void await(MPI_Request *rq)
{
    for (int done = 0;;) {
        MPI_Test(rq, &done, MPI_STATUS_IGNORE);
        if (done)
            return;
        nap();
    }
}

/* Rank 0 to every other rank: go on, or end with this status. With "go" come
 * the checksums of rank 0's setup and teacher file, which each rank checks
 * against its own. */
void open_gate(int code, uint64_t setup_sum, uint64_t teacher_sum)
{
    int64_t msg[3] = {code, (int64_t)setup_sum, (int64_t)teacher_sum};
    for (int r = 1; r < proc.n_ranks; r++)
        MPI_Send(msg, 3, MPI_INT64_T, r, TAG_GATE, MPI_COMM_WORLD);
}

int await_gate(uint64_t *setup_sum, uint64_t *teacher_sum)
{
    int64_t msg[3];
    MPI_Request rq;
    MPI_Irecv(msg, 3, MPI_INT64_T, 0, TAG_GATE, MPI_COMM_WORLD, &rq);
    await(&rq);
    *setup_sum = (uint64_t)msg[1];
    *teacher_sum = (uint64_t)msg[2];
    return (int)msg[0];
}

static void dispatch_init(dispatch *d, study *s)
{
    d->s = s;
    d->n_jobs = s->n_todo;
    d->next = 0;
    d->workers_left = proc.n_ranks - 1;
    longest_first(s->p, s->todo, s->n_todo, d->order);
}

/* A result from rank `from`: checked, then kept. */
static void take_result(dispatch *d, const char *buf, size_t bytes, int from)
{
    const preset *p = d->s->p;
    int32_t job;
    char why[300];
    run_result *r = run_unpack(buf, bytes, &job, why, sizeof why);
    if (!r)
        die("rank %d sent a result that does not hold a run: %s", from, why);
    int handed = 0;
    for (int k = 0; k < d->next && !handed; k++)
        handed = d->order[k] == job;
    if (!handed || d->s->res[job % p->n_arms][job / p->n_arms])
        die("rank %d sent a result for job %d, which it was not handed or sent already", from,
            (int)job);
    keep_run(d->s, job, r);
}

/* Rank 0: take in every result that has arrived and give each asking rank
 * its next run (or tell it that none are left). With until_done, wait until
 * every other rank has been told. */
void serve_ranks(struct dispatch *d, int until_done)
{
    for (;;) {
        int flag = 0;
        MPI_Status st;
        MPI_Iprobe(MPI_ANY_SOURCE, MPI_ANY_TAG, MPI_COMM_WORLD, &flag, &st);
        if (!flag) {
            if (!until_done || d->workers_left == 0)
                return;
            nap();
            continue;
        }
        int bytes = 0;
        MPI_Get_count(&st, MPI_BYTE, &bytes);
        char *buf = malloc(bytes > 0 ? (size_t)bytes : 1);
        if (!buf)
            die("out of memory");
        MPI_Recv(buf, bytes, MPI_BYTE, st.MPI_SOURCE, st.MPI_TAG, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
        if (st.MPI_TAG == TAG_RESULT)
            take_result(d, buf, (size_t)bytes, st.MPI_SOURCE);
        else if (st.MPI_TAG != TAG_READY)
            die("rank %d sent an unexpected message (tag %d)", st.MPI_SOURCE, st.MPI_TAG);
        free(buf);
        int job[2] = {-1, 0}; /* the job and its place in the hand-out order */
        if (d->next < d->n_jobs) {
            job[0] = d->order[d->next++];
            job[1] = d->next;
        } else {
            d->workers_left--;
        }
        MPI_Send(job, 2, MPI_INT, st.MPI_SOURCE, TAG_JOB, MPI_COMM_WORLD);
    }
}

/* Rank 0: every run, its own and the others', into s->res. */
void run_study_ranks(study *s, lattice_backend *be, lattice_model *teacher, progress *pr)
{
    const preset *p = s->p;
    dispatch d;
    dispatch_init(&d, s);
    pr->dispatch = &d;
    for (;;) {
        serve_ranks(&d, 0);
        if (d.next == d.n_jobs)
            break;
        const int job = d.order[d.next++];
        keep_run(s, job, run_job(p, be, teacher, job, d.next, pr));
    }
    pr->dispatch = NULL;
    serve_ranks(&d, 1);
    for (int k = 0; k < s->n_todo; k++) {
        const int j = s->todo[k];
        if (!s->res[j % p->n_arms][j / p->n_arms])
            die("no result for %s seed %d", p->arms[j % p->n_arms].name, j / p->n_arms + 1);
    }
}

/* The other ranks: ask for a run, run it, send its results back, until none are left. */
void work_for_rank0(const preset *p, lattice_backend *be, lattice_model *teacher,
                           progress *pr)
{
    const int n_jobs = p->n_arms * p->seeds;
    MPI_Send(NULL, 0, MPI_BYTE, 0, TAG_READY, MPI_COMM_WORLD);
    for (int ran = 0;; ran++) {
        int job[2];
        MPI_Request rq;
        MPI_Irecv(job, 2, MPI_INT, 0, TAG_JOB, MPI_COMM_WORLD, &rq);
        await(&rq);
        if (job[0] < 0 && proc.fail_here && !ran)
            die("failing on purpose: no run for this rank (LATTICE_REPRODUCE_FAIL_RANK=%d, a test "
                "hook)", proc.rank);
        if (job[0] < 0)
            return;
        if (job[0] >= n_jobs)
            die("rank 0 handed out run %d of %d: do all ranks run the same preset and options?",
                job[0], n_jobs);
        run_result *r = run_job(p, be, teacher, job[0], job[1], pr);
        size_t bytes;
        char *buf = run_pack(job[0], r, &bytes);
        if (bytes > INT_MAX)
            die("the results of one run are too large to send to rank 0 (%zu bytes)", bytes);
        MPI_Isend(buf, (int)bytes, MPI_BYTE, 0, TAG_RESULT, MPI_COMM_WORLD, &rq);
        await(&rq);
        free(buf);
        free_run(r);
    }
}
#endif

/* What a run's numbers depend on besides its seed: the preset, the options
 * that change it, and the corpus. Ranks on other machines read their own
 * copies; a difference would silently change their runs. */
uint64_t setup_checksum(const preset *p)
{
    const char *js = json_object_to_json_string_ext(p->json, JSON_C_TO_STRING_PLAIN);
    uint64_t h = fnv(FNV_START, js, strlen(js));
    const int v[2] = {p->threads, p->seeds};
    h = fnv(h, v, sizeof v);
    for (int a = 0; a < p->n_arms; a++)
        h = fnv(h, p->arms[a].name, strlen(p->arms[a].name) + 1);
    if (fnv_file(p->train, &h) != 0)
        die("cannot read the training text %s: %s", p->train, strerror(errno));
    if (fnv_file(p->val, &h) != 0)
        die("cannot read the validation text %s: %s", p->val, strerror(errno));
    return h;
}

/* Start MPI when a launcher started this process; the rank goes into every message. */
void ranks_init(int *argc, char ***argv)
{
    if (!launched_by_mpi())
        return;
#ifdef LATTICE_HAVE_MPI
    /* FUNNELED: the backend's OpenMP threads run beside MPI, but only the main
     * thread calls it (the trainer calls serve_ranks from its step callback, on
     * the thread that called lattice_trainer_run). SINGLE would promise that
     * no other thread exists at all. */
    int provided;
    if (MPI_Init_thread(argc, argv, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS) {
        fprintf(stderr, PROG ": MPI_Init failed\n");
        exit(1);
    }
    proc.mpi_on = 1;
    MPI_Comm_rank(MPI_COMM_WORLD, &proc.rank);
    MPI_Comm_size(MPI_COMM_WORLD, &proc.n_ranks);
    if (proc.n_ranks > 1)
        snprintf(proc.who, sizeof proc.who, PROG "[rank %d]", proc.rank);
    if (provided < MPI_THREAD_FUNNELED)
        die("this MPI library provides thread level %d, below MPI_THREAD_FUNNELED (%d), which "
            "the backend's threads beside MPI need",
            provided, MPI_THREAD_FUNNELED);
    if (proc.n_ranks > 1) {
        const char *f = getenv("LATTICE_REPRODUCE_FAIL_RANK");
        char *end;
        if (f && f[0] && strtol(f, &end, 10) == proc.rank && !*end)
            proc.fail_here = 1;
    }
#else
    (void)argc;
    (void)argv;
    fprintf(stderr, PROG ": started by an MPI launcher, but built without MPI: each process runs "
                    "the whole study alone (reconfigure with -Dmpi=enabled)\n");
#endif
}

/* The end of main on every rank: rank 0 tells the others the status to end
 * with (they wait for it), then MPI ends. Another rank that ends while rank 0
 * waits for it to ask for runs (its own options differ from rank 0's) ends
 * the whole job instead, whatever its status: rank 0 would wait forever. */
int finish(int status)
{
#ifdef LATTICE_HAVE_MPI
    if (proc.mpi_on && proc.owes_rank0)
        die("rank %d stopped (status %d) before asking rank 0 for runs; ending the whole job "
            "(every rank must be given the same options)",
            proc.rank, status);
    if (proc.mpi_on) {
        if (proc.rank == 0)
            open_gate(status, 0, 0);
        MPI_Finalize();
    }
#endif
    return status;
}

