/* Messages (say, die, check), this process's place in an MPI job, and FNV-1a checksums. */
#include "study.h"

#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stdlib.h>
#ifdef LATTICE_HAVE_MPI
#include <mpi.h>
#endif

#include "files.h"

/* The process's one description, written where main.c and jobs.c set it up
 * (its rank, the option --progress, the output folder) and read by the
 * messages and the hooks. */
process proc = {.rank = 0, .n_ranks = 1, .who = PROG, .progress_every = 60};

/* A message on stderr, prefixed with who. */
/* who, then the message, in one write: the lines of other ranks (and mpirun's
 * own) go to the same stream, and would land inside a line written in parts. */
static void say_line(const char *fmt, va_list ap, int newline)
{
    char buf[4096];
    int n = snprintf(buf, sizeof buf, "%s: ", proc.who);
    if (n < 0 || (size_t)n >= sizeof buf)
        n = 0;
    int m = vsnprintf(buf + n, sizeof buf - (size_t)n, fmt, ap);
    size_t len = m < 0 ? (size_t)n : strnlen(buf, sizeof buf - 2);
    if (newline)
        buf[len++] = '\n';
    fwrite(buf, 1, len, stderr);
}

void say(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(fmt, ap, 0);
    va_end(ap);
}

/* A --jobs worker thread: it may not end the process (the other workers
 * are still training, and exit() would pull their memory from under them). */
_Thread_local int in_worker;
/* Set by a worker that failed: the others stop at their next step. */
atomic_int workers_stop;
/* Set by SIGINT or SIGTERM: the study stops at the next step (see stop_if_interrupted). */
volatile sig_atomic_t interrupted;

/* The message, then the end of the whole job: with several ranks MPI_Abort,
 * so that no rank waits for one that has gone. In a --jobs worker, the end
 * of that worker: the others stop at their next step, and the main thread
 * ends the process once they all have. */
void die(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    say_line(fmt, ap, 1);
    va_end(ap);
    fflush(stderr);
    if (in_worker) {
        atomic_store(&workers_stop, 1);
        pthread_exit(NULL);
    }
#ifdef LATTICE_HAVE_MPI
    if (proc.mpi_on && proc.n_ranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 1);
    if (proc.mpi_on)
        MPI_Finalize();
#endif
    exit(1);
}

/* ---- building blocks ------------------------------------------------------------ */

void check(lattice_status st, const char *what, const char *detail)
{
    if (st == LATTICE_OK)
        return;
    /* without an object to ask (a create that failed), the library's own
     * reason is this thread's last error */
    if (!detail || !detail[0])
        detail = lattice_last_error();
    /* a library message that already says the status is not prefixed with it again */
    const char *status = lattice_status_string(st);
    if (detail && detail[0] && strstr(detail, status))
        die("%s: %s", what, detail);
    die("%s: %s%s%s", what, status, detail && detail[0] ? ": " : "", detail ? detail : "");
}
/* FNV-1a checksums: the ranks check that they run rank 0's study. */

uint64_t fnv(uint64_t h, const void *data, size_t n)
{
    const unsigned char *b = data;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 1099511628211ULL;
    return h;
}

void study_backend_resolve(preset *p, const char *want)
{
    const char *env = getenv("LATTICE_BACKEND");
    const char *name = env && *env ? env : want && *want ? want : "openblas";
    lattice_backend *be = NULL;
    if (lattice_backend_create(name, &be) != LATTICE_OK) {
        if ((env && *env) || (want && *want)) /* asked for by name: it must exist */
            check(lattice_backend_create(name, &be), env && *env ? "LATTICE_BACKEND" : "preset's backend",
                  lattice_last_error());
        check(lattice_backend_create("default", &be), "backend", NULL);
    }
    snprintf(p->backend, sizeof p->backend, "%s", lattice_backend_get_name(be));
    lattice_backend_destroy(be);
}

lattice_backend *study_student_backend(const preset *p, lattice_backend *be)
{
    if (strcmp(p->gemm_precision, "fp32") == 0)
        return NULL;
    lattice_backend *own = NULL;
    check(lattice_backend_create(lattice_backend_get_name(be), &own), "the student's backend",
          lattice_last_error());
    check(lattice_backend_set_threads(own, lattice_backend_get_threads(be)), "the student's backend",
          NULL);
    check(lattice_backend_set_parallel(own, lattice_backend_get_parallel(be)),
          "the student's backend", NULL);
    check(lattice_backend_set_attention_kernel(own, lattice_backend_get_attention_kernel(be)),
          "the student's backend", NULL);
    check(lattice_backend_set_gemm_precision(own, p->gemm_precision), "preset's gemm_precision",
          lattice_last_error());
    return own;
}

void study_gemm_check(const preset *p)
{
    if (strcmp(p->gemm_precision, "fp32") == 0)
        return;
    lattice_backend *be = NULL;
    check(lattice_backend_create(p->backend, &be), "backend", lattice_last_error());
    const lattice_status st = lattice_backend_set_gemm_precision(be, p->gemm_precision);
    char why[LATTICE_ERRMSG_SIZE];
    snprintf(why, sizeof why, "%s", lattice_last_error());
    lattice_backend_destroy(be);
    if (st != LATTICE_OK)
        die("preset: gemm_precision %s cannot run on the %s backend here (%s)",
            p->gemm_precision, p->backend, why);
}

const char *study_gemm_words(const preset *p)
{
    return strcmp(p->gemm_precision, "bf16") == 0 ? ", the students' GEMMs in bf16 (the teacher's "
                                                     "in fp32)"
                                                   : "";
}

lattice_backend *study_backend(const preset *p, int threads)
{
    lattice_backend *be = NULL;
    check(lattice_backend_create(p->backend, &be), "backend", lattice_last_error());
    check(lattice_backend_set_threads(be, threads), "backend", NULL);
    if (ex_backend_env_options(be) != 0) /* LATTICE_PARALLEL, LATTICE_ATTN_ISA */
        die("the environment's backend options are not valid (above)");
    return be;
}

/* A regular file's bytes folded into *h; -1 (errno set) when it cannot be read. */
int fnv_file(const char *path, uint64_t *h)
{
    const int fd = open_regular(path, NULL);
    FILE *f = fd < 0 ? NULL : fdopen(fd, "rb");
    if (!f) {
        if (fd >= 0)
            close(fd);
        return -1;
    }
    unsigned char buf[1 << 16];
    size_t n;
    while ((n = fread(buf, 1, sizeof buf, f)) > 0)
        *h = fnv(*h, buf, n);
    const int bad = ferror(f);
    fclose(f);
    if (bad)
        errno = EIO;
    return bad ? -1 : 0;
}


/* ---- an interrupted study ---------------------------------------------------------- */

static void on_signal(int sig) { interrupted = sig; }

void catch_interrupts(void)
{
    struct sigaction sa;
    memset(&sa, 0, sizeof sa);
    sa.sa_handler = on_signal;
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, NULL);
    sigaction(SIGTERM, &sa, NULL);
}

void stop_if_interrupted(const char *dir)
{
    if (!interrupted)
        return;
    if (in_worker) { /* the main thread says it, once every worker has stopped */
        atomic_store(&workers_stop, 1);
        pthread_exit(NULL);
    }
    say_interrupted(dir);
}

void say_interrupted(const char *dir)
{
    fflush(stdout);
    say("interrupted (%s): what ended is kept in %s (the teacher once trained, every run that "
        "ended in runs/); the same command run again resumes the study, running only what is "
        "missing\n",
        interrupted == SIGTERM ? "SIGTERM" : "SIGINT", dir ? dir : ".");
#ifdef LATTICE_HAVE_MPI
    if (proc.mpi_on && proc.n_ranks > 1)
        MPI_Abort(MPI_COMM_WORLD, 130);
    if (proc.mpi_on)
        MPI_Finalize();
#endif
    /* at once: every file was written whole, and the runs in progress (their memory
     * still held) are what the interrupt asked to drop */
    fflush(stderr);
    _exit(130);
}
