/* Backends: the built-in ones, a table that creation and "default" walk;
 * custom ones from a user's ops table; threads; and the GEMM entry points
 * every op goes through (backend_impl.h). The passes' settings a backend
 * holds are the passes' own (backend_impl.h, struct lattice_backend). */
#include "backend_impl.h"
#include "backend_onednn_bf16.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* The floors are 1.0's sizes, as its ABI (tests/abi) has them. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(LATTICE__BACKEND_OPS_1_0 == 56 && LATTICE__BACKEND_INFO_1_0 == 528,
               "a 1.0 floor differs from 1.0's struct size (tests/abi/liblattice-1.0.abi)");
#endif

void lattice_backend_ops_init(lattice_backend_ops *ops)
{
    if (!ops)
        return;
    memset(ops, 0, sizeof(*ops));
    ops->size = sizeof(*ops);
    ops->version = LATTICE_BACKEND_OPS_VERSION;
}

int lattice_backend_has_blis(void) { return lattice__blis_available(); }

/* The reference batched GEMM: a loop over the backend's own sgemm slot. */
static int loop_sgemm_batched(lattice_backend *be, int ta, int tb, int m, int n, int k,
                              float alpha, const float *const *a, int lda,
                              const float *const *b, int ldb, float beta,
                              float *const *c, int ldc, int count)
{
    for (int i = 0; i < count; i++) {
        int rc = be->ops.sgemm(be->ops.user, ta, tb, m, n, k, alpha, a[i], lda, b[i], ldb,
                               beta, c[i], ldc);
        if (rc)
            return rc;
    }
    return 0;
}

static lattice_backend *backend_alloc(const char *name)
{
    lattice_backend *be = calloc(1, sizeof(*be));
    if (!be)
        return NULL;
    snprintf(be->name, sizeof(be->name), "%s", name ? name : "");
    be->n_threads = 1;
    lattice_backend_ops_init(&be->ops);
    return be;
}

/* ---- the built-in backends, and which one "default" runs ----------------- */

/* What "default" decides from, never a timing: the same machine always gets
 * the same backend. */
typedef struct default_facts {
    lattice__cpu cpu;
    lattice__kernel_report blis; /* BLIS's version and kernels */
    lattice__blis_fit fit;
    const char *mismatch; /* how BLIS's kernels miss the CPU; NULL: they match it */
} default_facts;

/* A built-in backend: its name, whether it runs in this build and system,
 * how a new one is set up, and its rank for "default" on the facts (-1:
 * never), with why "default" would choose it into why. */
typedef struct builtin {
    const char *name;
    int (*available)(void);
    void (*fill)(lattice_backend *be);
    int (*rank)(const default_facts *f, char *why, size_t size);
} builtin;

static int ref_available(void) { return 1; }

/* ref: built without BLIS, where OpenBLAS cannot be loaded either. */
static int ref_rank(const default_facts *f, char *why, size_t size)
{
    (void)f;
    snprintf(why, size, "built without BLIS, and %s", lattice__openblas_why_not());
    return 0;
}

/* BLIS: where its kernels match the CPU; where they miss it, only where
 * OpenBLAS cannot be loaded. */
static int blis_rank(const default_facts *f, char *why, size_t size)
{
    if (f->mismatch)
        snprintf(why, size, "%s runs '%s', %s, but OpenBLAS is not available (%s): BLIS anyway",
                 f->blis.library, f->blis.kernels, f->mismatch, lattice__openblas_why_not());
    else
        snprintf(why, size, "%s runs '%s' kernels, which match the CPU", f->blis.library,
                 f->blis.kernels);
    return f->fit == LATTICE__BLIS_ABSENT ? -1 : f->mismatch ? 1 : 3;
}

/* OpenBLAS: in a build without BLIS, or where BLIS's kernels miss the CPU. */
static int openblas_rank(const default_facts *f, char *why, size_t size)
{
    if (f->fit == LATTICE__BLIS_ABSENT)
        snprintf(why, size, "built without BLIS");
    else
        snprintf(why, size, "%s would run '%s', %s: OpenBLAS instead", f->blis.library,
                 f->blis.kernels, f->mismatch);
    return 2;
}

/* oneDNN: on the CPU class where its sgemm measured fastest of the three
 * libraries at the study's GEMM shapes, on every host of it seen
 * (doc/PERFORMANCE.md: Zen 5 in rounds 4 and 6, Emerald Rapids without AMX
 * in round 8 and with it in round 9; Zen 4, where BLIS runs its matching
 * zen3 kernels, in issue 52): AVX-512. On AVX2-only CPUs it was not
 * measured faster, so BLIS or OpenBLAS stays there. */
static int onednn_rank(const default_facts *f, char *why, size_t size)
{
    snprintf(why, size, "oneDNN, measured fastest at the study's GEMMs on every AVX-512 CPU "
                        "class seen (Zen 4, Zen 5, Emerald Rapids with and without AMX)");
    return f->cpu.avx512 ? 4 : -1;
}

static const builtin builtins[] = {
    {"ref", ref_available, lattice__ref_fill, ref_rank},
    {"blis", lattice__blis_available, lattice__blis_fill, blis_rank},
    {"openblas", lattice__openblas_load, lattice__openblas_fill, openblas_rank},
    {"onednn", lattice__onednn_available, lattice__onednn_fill, onednn_rank},
};
#define N_BUILTINS (sizeof builtins / sizeof builtins[0])

/* What "default" runs (include/lattice/backend.h states the rule): the
 * available backend of the highest rank, each asked whether it is available
 * only when its turn comes (loading OpenBLAS is a step of its own), its why
 * the last one written into reason. */
static const builtin *choose_default(char *reason, size_t size)
{
    default_facts f;
    memset(&f, 0, sizeof f);
    f.fit = lattice__blis_describe(&f.blis);
    lattice__cpu_detect(&f.cpu);
    f.mismatch = f.fit == LATTICE__BLIS_GENERIC && f.cpu.avx2_fma
                     ? "its generic reference kernels on a CPU with AVX2"
                 : f.fit == LATTICE__BLIS_AVX2_INTEL && f.cpu.avx512
                     ? "AVX2-class kernels on a CPU with AVX-512"
                     : NULL;
    for (int rank = 4; rank >= 0; rank--)
        for (const builtin *b = builtins; b < builtins + N_BUILTINS; b++)
            if (b->rank(&f, reason, size) == rank && b->available())
                return b;
    return builtins; /* not reached: "ref" ranks 0 and always runs */
}

lattice_status lattice_backend_create(const char *name, lattice_backend **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_create: invalid argument: out is NULL");
    *out = NULL;
    if (!name)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_create: invalid argument: name is NULL");
    char reason[LATTICE_BACKEND_INFO_REASONLEN] = "";
    const builtin *b = strcmp(name, "default") == 0 ? choose_default(reason, sizeof reason) : NULL;
    for (size_t i = 0; i < N_BUILTINS && !b; i++)
        if (strcmp(name, builtins[i].name) == 0)
            b = &builtins[i];
    if (!b)
        return lattice__fail(LATTICE_ERR_NOT_FOUND,
            "lattice_backend_create: no backend named '%.64s': the names are default, ref, "
            "blis, openblas and onednn", name);
    if (!b->available())
        return lattice__fail(LATTICE_ERR_UNSUPPORTED,
            "lattice_backend_create: backend '%s' is not available in this build or system",
            b->name);
    lattice_backend *be = backend_alloc(b->name);
    if (!be)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_backend_create: out of memory");
    b->fill(be); /* OpenBLAS's and oneDNN's reason: how the core or ISA was chosen */
    if (*reason) {
        /* the choice first, then how the chosen library set itself up; cut to fit */
        char both[2 * LATTICE_BACKEND_INFO_REASONLEN + 4];
        snprintf(both, sizeof both, "%s%s%s", reason, *reason && *be->report.reason ? "; " : "",
                 be->report.reason);
        snprintf(be->report.reason, sizeof(be->report.reason), "%.*s",
                 (int)sizeof(be->report.reason) - 1, both);
    }
    *out = be;
    return LATTICE_OK;
}

lattice_status lattice_backend_create_custom(const char *name, const lattice_backend_ops *ops,
                                             lattice_backend **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_create_custom: invalid argument: out is NULL");
    *out = NULL;
    if (!ops)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_create_custom: invalid argument: ops is NULL");
    TRY(lattice__check_size(NULL, "lattice_backend_create_custom", "ops->size",
                            "lattice_backend_ops", ops->size, LATTICE__BACKEND_OPS_1_0));
    if (ops->version < 1 || ops->version > LATTICE_BACKEND_OPS_VERSION)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_create_custom: invalid argument: ops->version %d is not one this "
            "library knows (1..%d: set it to LATTICE_BACKEND_OPS_VERSION)",
            (int)ops->version, LATTICE_BACKEND_OPS_VERSION);
    lattice_backend *be = backend_alloc(name ? name : "custom");
    if (!be)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_backend_create_custom: out of memory");
    /* the caller's slots (common.h: a later table's further slots are never called) */
    memcpy(&be->user_ops, ops, ops->size < sizeof(*ops) ? ops->size : sizeof(*ops));
    be->ops = be->user_ops;
    be->ops.size = sizeof(be->ops);
    snprintf(be->report.kernels, sizeof(be->report.kernels), "custom");
    snprintf(be->report.library, sizeof(be->report.library), "user-supplied");
    if (!be->ops.sgemm)
        lattice__ref_fill(be); /* the reference fallback, its user the backend itself */
    *out = be;
    return LATTICE_OK;
}

void lattice_backend_destroy(lattice_backend *backend)
{
    if (!backend)
        return;
    if (backend->user_ops.destroy)
        backend->user_ops.destroy(backend->user_ops.user);
    lattice__onednn_release(backend);
    free(backend);
}

const char *lattice_backend_get_name(const lattice_backend *backend)
{
    return backend ? backend->name : "";
}

lattice_status lattice_backend_set_threads(lattice_backend *backend, int n_threads)
{
    if (!backend)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_threads: invalid argument: backend is NULL");
    if (n_threads < 1 || n_threads > 4096)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_threads: invalid argument: n_threads %d not in 1..4096", n_threads);
    const lattice_status st =
        lattice__hold_change(&backend->hold, "lattice_backend_set_threads", "backend");
    if (st != LATTICE_OK)
        return st;
    backend->n_threads = n_threads;
    if (backend->user_ops.set_threads)
        backend->user_ops.set_threads(backend->user_ops.user, n_threads);
    lattice__hold_changed(&backend->hold);
    return LATTICE_OK;
}

lattice_status lattice_backend_set_parallel(lattice_backend *backend,
                                            lattice_backend_parallel mode)
{
    if (!backend)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_parallel: invalid argument: backend is NULL");
    if (mode != LATTICE_BACKEND_PARALLEL_AUTO && mode != LATTICE_BACKEND_PARALLEL_OPS &&
        mode != LATTICE_BACKEND_PARALLEL_ROWS)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_parallel: invalid argument: mode %d is not auto (0), ops (1) "
            "or rows (2)", (int)mode);
    const lattice_status st =
        lattice__hold_change(&backend->hold, "lattice_backend_set_parallel", "backend");
    if (st != LATTICE_OK)
        return st;
    backend->parallel = (int)mode;
    lattice__hold_changed(&backend->hold);
    return LATTICE_OK;
}

lattice_backend_parallel lattice_backend_get_parallel(const lattice_backend *backend)
{
    return backend ? (lattice_backend_parallel)backend->parallel : LATTICE_BACKEND_PARALLEL_AUTO;
}

/* bf16 needs oneDNN's bf16 GEMM, so only a built-in "onednn" backend (a
 * custom one's label could say anything) on a CPU that runs it. */
lattice_status lattice_backend_set_gemm_precision(lattice_backend *backend, const char *name)
{
    if (lattice__need(NULL, "lattice_backend_set_gemm_precision", 2, (const void *)backend,
                      "backend", (const void *)name, "name") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    const int bf16 = strcmp(name, "bf16") == 0;
    if (!bf16 && strcmp(name, "fp32") != 0)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_set_gemm_precision: '%.40s' names no GEMM precision (fp32 or bf16)",
            name);
    char why[160];
    const int onednn = backend->user_ops.size == 0 && strcmp(backend->name, "onednn") == 0;
    if (bf16 && !onednn)
        return lattice__fail(LATTICE_ERR_UNSUPPORTED,
            "lattice_backend_set_gemm_precision: bf16 GEMMs run on the built-in \"onednn\" "
            "backend only (oneDNN's bf16 matmul), not on \"%.64s\"", backend->name);
    if (bf16 && lattice__onednn_bf16_why_not(why, sizeof why))
        return lattice__fail(LATTICE_ERR_UNSUPPORTED,
            "lattice_backend_set_gemm_precision: bf16 GEMMs cannot run here: %s", why);
    const lattice_status st =
        lattice__hold_change(&backend->hold, "lattice_backend_set_gemm_precision", "backend");
    if (st != LATTICE_OK)
        return st;
    const int no_memory = onednn && lattice__onednn_use_bf16(backend, bf16) != 0;
    if (!no_memory)
        backend->gemm_bf16 = bf16;
    lattice__hold_changed(&backend->hold);
    if (no_memory)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_backend_set_gemm_precision: out of memory for the bf16 GEMMs' primitives "
            "(the precision stays %s)", backend->gemm_bf16 ? "bf16" : "fp32");
    return LATTICE_OK;
}

const char *lattice_backend_get_gemm_precision(const lattice_backend *backend)
{
    return backend && backend->gemm_bf16 ? "bf16" : "fp32";
}

lattice_status lattice_backend_get_info(const lattice_backend *backend,
                                        lattice_backend_info *info)
{
    if (lattice__need(NULL, "lattice_backend_get_info", 2, (const void *)backend, "backend",
                      (const void *)info, "info") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    TRY(lattice__check_size(NULL, "lattice_backend_get_info", "info->size",
                            "lattice_backend_info", info->size, LATTICE__BACKEND_INFO_1_0));
    lattice_backend_info full;
    memset(&full, 0, sizeof full);
    snprintf(full.name, sizeof full.name, "%s", backend->name);
    memcpy(full.library, backend->report.library, sizeof full.library);
    memcpy(full.kernels, backend->report.kernels, sizeof full.kernels);
    full.optimised = backend->report.optimised;
    memcpy(full.reason, backend->report.reason, sizeof full.reason);
    return lattice__copy_out(NULL, "lattice_backend_get_info", info, &full, sizeof full,
                             LATTICE__BACKEND_INFO_1_0);
}

int lattice_backend_get_threads(const lattice_backend *backend)
{
    return backend ? backend->n_threads : 0;
}

static int gemm_args_ok(int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc)
{
    if (m < 0 || n < 0 || k < 0)
        return 0;
    int a_cols = ta ? m : k, b_cols = tb ? k : n;
    return lda >= (a_cols > 1 ? a_cols : 1) && ldb >= (b_cols > 1 ? b_cols : 1) &&
           ldc >= (n > 1 ? n : 1);
}

/* The bytes a rows x cols matrix of leading dimension ld spans (0 when empty). */
static size_t span_bytes(int rows, int cols, int ld)
{
    return rows > 0 && cols > 0 ? sizeof(float) * ((size_t)(rows - 1) * (size_t)ld + (size_t)cols)
                                : 0;
}

static int64_t floor_div(int64_t a, int64_t b) /* b > 0 */
{
    return a >= 0 ? a / b : -((-a + b - 1) / b);
}

/* Whether matrices X and Y (rows x cols floats, rows ld floats apart) share a
 * byte: rows of one side by side with rows of the other in a wider buffer
 * ([A | C] packed in rows) share none. O(Y's rows), and only where the spans
 * meet. */
static int matrices_overlap(const float *x, int xr, int xc, int xld, const float *y, int yr,
                            int yc, int yld)
{
    const size_t xs = span_bytes(xr, xc, xld), ys = span_bytes(yr, yc, yld);
    if (!xs || !ys || (uintptr_t)x >= (uintptr_t)y + ys || (uintptr_t)y >= (uintptr_t)x + xs)
        return 0;
    const int64_t step = (int64_t)sizeof(float) * xld, w = (int64_t)sizeof(float) * xc;
    const int64_t wy = (int64_t)sizeof(float) * yc, at = (int64_t)((intptr_t)y - (intptr_t)x);
    for (int r = 0; r < yr; r++) {
        /* Y's row r covers [d, d + wy) from x; X's row s covers [s step, s step + w) */
        const int64_t d = at + (int64_t)r * (int64_t)sizeof(float) * yld;
        int64_t lo = floor_div(d - w, step) + 1, hi = -floor_div(-(d + wy), step) - 1;
        if (lo < 0)
            lo = 0;
        if (hi > xr - 1)
            hi = xr - 1;
        if (lo <= hi)
            return 1;
    }
    return 0;
}

/* Threads. A built-in backend's sgemm slot runs one thread per call. A call
 * worth sharing is split here, over the library's own OpenMP team: C's rows
 * (or its columns, when it has more of them) in contiguous blocks, one per
 * thread, each block computed whole by one serial call. No two threads write
 * the same element, and each backend's slot sums an element in the same
 * order whatever block of C its call covers (OpenBLAS's only for blocks of
 * 48 rows, its split_align; oneDNN's below AVX-512 only for blocks of
 * columns, split_cols_only; BLIS's only off its small-matrix path, so a call
 * the split may take runs ops.sgemm and one it never takes sgemm_whole,
 * decided by the shape alone), so the result does not depend on the thread
 * count: the same bits on 1, 2 or more threads, on every built-in backend
 * (test_threads_give_the_same_bits). The team's waits are
 * OpenMP's, which give up the core (OMP_WAIT_POLICY, GOMP_SPINCOUNT); BLIS's
 * own barrier spins without bound (upstream issue #604) and two programs on
 * the same cores would stall each other inside it. Custom backends' own slots
 * get every call whole: they do their own threading. */
int lattice__backend_builtin(const lattice_backend *be)
{
    return be->user_ops.size == 0 || be->ops.sgemm == lattice__ref_sgemm;
}

/* Below this many multiply-adds a call runs on one thread: a fork and join
 * costs about as much as the call. */
#define GEMM_SPLIT_MIN_MACS (1L << 18)
/* Blocks start on multiples of this many rows or columns (a micro-tile). */
#define GEMM_SPLIT_ALIGN 16

/* Whether a call is split by C's rows (else by its columns). */
static int split_by_rows(const lattice_backend *be, int m, int n)
{
    return be->split_rows_only || (!be->split_cols_only && m >= n);
}

/* The blocks a call is split into on enough threads: 1 for a call never
 * split, by its shape alone. */
static int gemm_blocks(const lattice_backend *be, int m, int n, int k)
{
    if (!lattice__backend_builtin(be) || (long)m * n * (k > 0 ? k : 1) < GEMM_SPLIT_MIN_MACS)
        return 1;
    const int align = be->split_align ? be->split_align : GEMM_SPLIT_ALIGN;
    const int len = split_by_rows(be, m, n) ? m : n;
    return (len + align - 1) / align;
}

static int gemm_threads(const lattice_backend *be, int blocks)
{
    int nt = be->n_threads;
    if (nt < 2 || blocks < 2)
        return 1;
#ifdef _OPENMP
    if (omp_in_parallel())
        return 1;
#endif
    return nt < blocks ? nt : blocks;
}

/* The status of a call whose blocks or problems ran on several threads: the
 * blocks' codes ORed, but out of memory (a bf16 block's) whole wherever a
 * block ran out, not mixed into another block's code. */
static int blocks_failed(int rc, int no_memory)
{
    return no_memory ? LATTICE__BF16MM_NO_MEMORY : rc;
}

static int split_sgemm(lattice_backend *be, int nt, int ta, int tb, int m, int n, int k,
                       float alpha, const float *a, int lda, const float *b, int ldb, float beta,
                       float *c, int ldc)
{
    const int rows = split_by_rows(be, m, n), len = rows ? m : n;
    const int align = be->split_align ? be->split_align : GEMM_SPLIT_ALIGN;
    const int blocks = (len + align - 1) / align;
    int rc = 0, no_memory = 0;
    (void)nt;
#pragma omp parallel num_threads(nt) reduction(| : rc, no_memory)
    {
        int t = 0, T = 1;
#ifdef _OPENMP
        t = omp_get_thread_num();
        T = omp_get_num_threads();
#endif
        int lo = (int)((long)blocks * t / T) * align;
        int hi = (int)((long)blocks * (t + 1) / T) * align;
        if (hi > len)
            hi = len;
        int r = 0;
        if (hi > lo) {
            if (rows) /* rows lo..hi of op(A) and of C */
                r = be->ops.sgemm(be->ops.user, ta, tb, hi - lo, n, k, alpha,
                                  a + (ta ? (long)lo : (long)lo * lda), lda, b, ldb, beta,
                                  c + (long)lo * ldc, ldc);
            else /* columns lo..hi of op(B) and of C */
                r = be->ops.sgemm(be->ops.user, ta, tb, m, hi - lo, k, alpha, a, lda,
                                  b + (tb ? (long)lo * ldb : (long)lo), ldb, beta, c + lo, ldc);
        }
        rc |= r;
        no_memory |= r == LATTICE__BF16MM_NO_MEMORY;
    }
    return blocks_failed(rc, no_memory);
}

/* BLAS's rule, kept here for every backend (custom ones included) rather than
 * trusted to each library: where alpha is 0 or k is 0, A and B are not read and
 * C = beta C; where beta is also 0, C is not read either and becomes 0. (A
 * backend that multiplied out would give NaN from a NaN in A or B; oneDNN 2.6
 * returns at k = 0 leaving C as it was.) beta == 0 with alpha != 0 is each
 * slot's to keep: lattice_backend_ops.sgemm says so. */
static int gemm_no_product(int k, float alpha, int m, int n, float beta, float *c, int ldc)
{
    if (alpha != 0.0f && k > 0)
        return 0;
    for (int i = 0; i < m; i++)
        for (int j = 0; j < n; j++)
            c[(long)i * ldc + j] = beta == 0.0f ? 0.0f : beta * c[(long)i * ldc + j];
    return 1;
}

lattice_status lattice__gemm(lattice_backend *be, int ta, int tb, int m, int n, int k,
                             float alpha, const float *a, int lda, const float *b, int ldb,
                             float beta, float *c, int ldc)
{
    if (m == 0 || n == 0 || gemm_no_product(k, alpha, m, n, beta, c, ldc))
        return LATTICE_OK;
    const int blocks = gemm_blocks(be, m, n, k), nt = gemm_threads(be, blocks);
    const lattice__sgemm_fn whole =
        blocks < 2 && be->sgemm_whole ? be->sgemm_whole : be->ops.sgemm;
    int rc = nt > 1 ? split_sgemm(be, nt, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)
                    : whole(be->ops.user, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    if (be->gemm_bf16 && rc == LATTICE__BF16MM_NO_MEMORY)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
                             "backend '%s': bf16 GEMM %dx%dx%d: out of memory", be->name, m, n,
                             k);
    if (rc)
        return lattice__fail(LATTICE_ERR_BACKEND, "backend '%s': sgemm %dx%dx%d returned %d",
                             be->name, m, n, k, rc);
    return LATTICE_OK;
}

/* A built-in backend's batch (attention heads: many small problems): one
 * problem per thread at a time, each on one thread. */
static int team_sgemm_batched(lattice_backend *be, int ta, int tb, int m, int n, int k,
                              float alpha, const float *const *a, int lda,
                              const float *const *b, int ldb, float beta, float *const *c,
                              int ldc, int count)
{
    int nt = be->n_threads < count ? be->n_threads : count, rc = 0, no_memory = 0;
    (void)nt;
    /* each problem whole, on one thread */
    const lattice__sgemm_fn whole = be->sgemm_whole ? be->sgemm_whole : be->ops.sgemm;
#pragma omp parallel for schedule(static) num_threads(nt) reduction(| : rc, no_memory) if (nt > 1)
    for (int i = 0; i < count; i++) {
        const int r =
            whole(be->ops.user, ta, tb, m, n, k, alpha, a[i], lda, b[i], ldb, beta, c[i], ldc);
        rc |= r;
        no_memory |= r == LATTICE__BF16MM_NO_MEMORY;
    }
    return blocks_failed(rc, no_memory);
}

lattice_status lattice__gemm_batched(lattice_backend *be, int ta, int tb, int m, int n, int k,
                                     float alpha, const float *const *a, int lda,
                                     const float *const *b, int ldb, float beta,
                                     float *const *c, int ldc, int count)
{
    if (m == 0 || n == 0 || count == 0)
        return LATTICE_OK;
    if (alpha == 0.0f || k <= 0) {
        for (int i = 0; i < count; i++)
            gemm_no_product(k, alpha, m, n, beta, c[i], ldc);
        return LATTICE_OK;
    }
    int rc = lattice__backend_builtin(be)
                 ? team_sgemm_batched(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                      count)
             : be->ops.sgemm_batched
                 ? be->ops.sgemm_batched(be->ops.user, ta, tb, m, n, k, alpha, a, lda, b, ldb,
                                         beta, c, ldc, count)
                 : loop_sgemm_batched(be, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc,
                                      count);
    if (be->gemm_bf16 && rc == LATTICE__BF16MM_NO_MEMORY)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
                             "backend '%s': bf16 batched GEMM %dx%dx%d (x%d): out of memory",
                             be->name, m, n, k, count);
    if (rc)
        return lattice__fail(LATTICE_ERR_BACKEND,
                             "backend '%s': batched sgemm %dx%dx%d (x%d) returned %d", be->name,
                             m, n, k, count, rc);
    return LATTICE_OK;
}

lattice_status lattice_backend_sgemm(lattice_backend *backend, int trans_a, int trans_b, int m,
                                     int n, int k, float alpha, const float *a, int lda,
                                     const float *b, int ldb, float beta, float *c, int ldc)
{
    if (lattice__need(NULL, "lattice_backend_sgemm", 2, (const void *)backend, "backend",
                      (const void *)c, "c") != LATTICE_OK ||
        (k > 0 && lattice__need(NULL, "lattice_backend_sgemm", 2, (const void *)a, "a (k > 0)",
                                (const void *)b, "b (k > 0)") != LATTICE_OK))
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (!gemm_args_ok(trans_a, trans_b, m, n, k, lda, ldb, ldc))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_sgemm: invalid argument: m %d, n %d and k %d must be >= 0, and "
            "each leading dimension at least its row's length and 1: lda %d (A's rows: %d), "
            "ldb %d (B's: %d), ldc %d (C's: %d)", m, n, k, lda, trans_a ? m : k, ldb,
            trans_b ? k : n, ldc, n);
    /* C is written while A and B are read (in blocks, on several threads): as in
     * BLAS, it may share no element with them */
    const int over_a = matrices_overlap(a, trans_a ? k : m, trans_a ? m : k, lda, c, m, n, ldc);
    if (alpha != 0.0f &&
        (over_a || matrices_overlap(b, trans_b ? n : k, trans_b ? k : n, ldb, c, m, n, ldc)))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_backend_sgemm: invalid argument: C overlaps %s, which the product reads "
            "(give C memory of its own)", over_a ? "A" : "B");
    lattice_status st = lattice__hold_enter(&backend->hold, "lattice_backend_sgemm", "backend");
    if (st != LATTICE_OK)
        return st;
    st = lattice__gemm(backend, trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
    lattice__hold_leave(&backend->hold);
    return st;
}
