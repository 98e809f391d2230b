/* The OpenBLAS backend: every GEMM through cblas_sgemm of an OpenBLAS loaded
 * at run time. It is not linked because BLIS's library exports the same
 * BLAS/CBLAS symbols; RTLD_LOCAL keeps the two apart, and dlsym on the handle
 * finds OpenBLAS's own. The core type is set from the CPU's features before
 * the load: OpenBLAS 0.3.21 takes CPU models it does not know (Emerald
 * Rapids, Zen 5) for Prescott and runs SSE3 kernels at a fifth of the speed. */
#include "backend_impl.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

#ifdef LATTICE_HAVE_OPENBLAS
#include <dlfcn.h>
#include <pthread.h>
#include <stdlib.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The CBLAS enum values, fixed by the CBLAS standard. */
enum { CBLAS_ROW_MAJOR = 101, CBLAS_NO_TRANS = 111, CBLAS_TRANS = 112 };

typedef void (*cblas_sgemm_fn)(int order, int trans_a, int trans_b, int m, int n, int k,
                               float alpha, const float *a, int lda, const float *b, int ldb,
                               float beta, float *c, int ldc);
typedef void (*set_threads_fn)(int n_threads);
typedef char *(*string_fn)(void);
typedef int (*int_fn)(void);

static struct {
    int ok;
    int openmp; /* the OpenMP build (openblas_get_parallel() == 2) */
    cblas_sgemm_fn sgemm;
    set_threads_fn set_threads;
    lattice__kernel_report report; /* the same for every OpenBLAS backend: one library per process */
} openblas;

static pthread_once_t openblas_once = PTHREAD_ONCE_INIT;

static void features_text(const lattice__cpu *cpu, char *buf, size_t size)
{
    snprintf(buf, size, "%s", cpu->amx           ? "AVX-512 with AMX"
                              : cpu->avx512_bf16 ? "AVX-512 with BF16"
                              : cpu->avx512      ? "AVX-512"
                              : cpu->avx2_fma    ? "AVX2 and FMA"
                                                 : "no AVX2");
}

/* "OpenBLAS 0.3.21 DYNAMIC_ARCH NO_AFFINITY ..." -> "OpenBLAS 0.3.21". */
static void library_text(const char *config, char *buf, size_t size)
{
    const char *end = config;
    for (int words = 0; *end && words < 2; words++) {
        while (*end == ' ')
            end++;
        while (*end && *end != ' ')
            end++;
    }
    snprintf(buf, size, "%.*s", (int)(end - config), config);
}

static void *open_library(const char *user_core, const char *want, int *was_loaded,
                          char *err, size_t err_size)
{
    /* The OpenMP build first: it shares the library's OpenMP runtime and its
     * thread count follows the caller's, where the pthread build spins its own pool. */
    static const char *const candidates[] = {
#ifdef LATTICE_OPENBLAS_PATH
        LATTICE_OPENBLAS_PATH,
#endif
        "libopenblas.so.0",
    };
    const size_t n = sizeof candidates / sizeof candidates[0];
    for (size_t i = 0; i < n; i++) {
        void *h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL | RTLD_NOLOAD);
        if (h) {
            *was_loaded = 1;
            return h;
        }
    }
    /* OpenBLAS reads OPENBLAS_CORETYPE once, in its constructor. setenv is
     * not thread-safe against a concurrent getenv: documented in backend.h. */
    int set = !user_core && want;
    if (set)
        setenv("OPENBLAS_CORETYPE", want, 1);
    void *h = NULL;
    for (size_t i = 0; i < n && !h; i++) {
        h = dlopen(candidates[i], RTLD_NOW | RTLD_LOCAL);
        if (!h) {
            const char *e = dlerror();
            snprintf(err, err_size, "%s", e ? e : candidates[i]);
        }
    }
    if (set)
        unsetenv("OPENBLAS_CORETYPE");
    return h;
}

static void load(void)
{
    lattice__kernel_report *r = &openblas.report;
    lattice__cpu cpu;
    lattice__cpu_detect(&cpu);
    const char *want = lattice__openblas_core_for(&cpu);
    const char *user_core = getenv("OPENBLAS_CORETYPE");
    if (user_core && !*user_core)
        user_core = NULL;
    char err[LATTICE_BACKEND_INFO_REASONLEN] = "";
    int was_loaded = 0;
    void *h = open_library(user_core, want, &was_loaded, err, sizeof err);
    if (!h) {
        snprintf(r->reason, sizeof(r->reason), "OpenBLAS cannot be loaded: %s", err);
        return;
    }
    openblas.sgemm = (cblas_sgemm_fn)dlsym(h, "cblas_sgemm");
    openblas.set_threads = (set_threads_fn)dlsym(h, "openblas_set_num_threads");
    string_fn corename = (string_fn)dlsym(h, "openblas_get_corename");
    string_fn config = (string_fn)dlsym(h, "openblas_get_config");
    int_fn parallel = (int_fn)dlsym(h, "openblas_get_parallel");
    if (!openblas.sgemm || !openblas.set_threads || !corename || !config || !parallel) {
        snprintf(r->reason, sizeof(r->reason),
                 "the loaded libopenblas lacks cblas_sgemm or the openblas_* queries");
        return; /* the handle stays open: dlclose of a BLAS with live threads is not safe */
    }
    openblas.openmp = parallel() == 2;
    if (!openblas.openmp)
        openblas.set_threads(1); /* its own pool would spin beside the library's team */
    const char *core = corename();
    library_text(config(), r->library, sizeof(r->library));
    snprintf(r->kernels, sizeof(r->kernels), "%s", core ? core : "unknown");
    r->optimised = lattice__openblas_core_optimised(core);
    char feats[32];
    features_text(&cpu, feats, sizeof feats);
    int matches = want && core && strcasecmp(core, want) == 0;
    if (was_loaded)
        snprintf(r->reason, sizeof(r->reason),
                 "OpenBLAS was already loaded in this process and runs core %s%s%s%s", r->kernels,
                 want && !matches ? "; the CPU's features call for " : "",
                 want && !matches ? want : "",
                 want && !matches ? ", which needs OPENBLAS_CORETYPE set before it loads" : "");
    else if (user_core)
        snprintf(r->reason, sizeof(r->reason), "OPENBLAS_CORETYPE=%s set by the user: core %s",
                 user_core, r->kernels);
    else if (!want)
        snprintf(r->reason, sizeof(r->reason), "CPU has %s: core %s chosen by OpenBLAS", feats,
                 r->kernels);
    else if (matches)
        snprintf(r->reason, sizeof(r->reason), "core %s chosen from the CPU's features (%s)",
                 r->kernels, feats);
    else
        snprintf(r->reason, sizeof(r->reason),
                 "core %s asked for from the CPU's features (%s), but OpenBLAS runs %s", want,
                 feats, r->kernels);
    openblas.ok = 1;
}

int lattice__openblas_load(void)
{
    pthread_once(&openblas_once, load);
    return openblas.ok;
}

/* One thread per call, as every built-in backend (backend.c splits the work
 * over the library's own OpenMP team). OpenBLAS's thread count is
 * process-wide. Its OpenMP build runs one thread inside a parallel region and
 * otherwise takes the count from the caller's OpenMP setting, which
 * openblas_set_num_threads changes: so outside a region it is set to 1 for
 * the call and the caller's setting given back. The pthread build is set to
 * 1 once, at load. */
static int openblas_sgemm(void *user, int ta, int tb, int m, int n, int k, float alpha,
                          const float *a, int lda, const float *b, int ldb, float beta, float *c,
                          int ldc)
{
    (void)user;
#ifdef _OPENMP
    int outside = openblas.openmp && !omp_in_parallel();
    int saved = outside ? omp_get_max_threads() : 0;
    if (outside)
        openblas.set_threads(1);
#endif
    openblas.sgemm(CBLAS_ROW_MAJOR, ta ? CBLAS_TRANS : CBLAS_NO_TRANS,
                   tb ? CBLAS_TRANS : CBLAS_NO_TRANS, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
#ifdef _OPENMP
    if (outside)
        omp_set_num_threads(saved);
#endif
    return 0;
}

void lattice__openblas_fill(lattice_backend *be)
{
    be->ops.user = be;
    be->ops.sgemm = openblas_sgemm;
    be->report = openblas.report;
    /* The Haswell kernels (cores Haswell, Zen) take C's columns as OpenBLAS
     * sees them, our rows, 12 at a time and sum each element in an order that
     * depends on where the 12 fall; its rows (our columns) in an order that
     * depends on their count. Splitting our rows on multiples of 48 (12 and
     * the AVX-512 kernels' 16) and never our columns keeps every element's
     * sum the serial call's on every core measured (OpenBLAS 0.3.21: Haswell,
     * Zen, SkylakeX, Cooperlake; doc/CHANGES.md 0.5). */
    be->split_align = 48;
    be->split_rows_only = 1;
}

const char *lattice__openblas_why_not(void)
{
    return openblas.report.reason;
}

#else

int lattice__openblas_load(void) { return 0; }

void lattice__openblas_fill(lattice_backend *be) { (void)be; }

const char *lattice__openblas_why_not(void) { return "built without the OpenBLAS backend"; }

#endif
