/**
 * @file backend.h
 * @brief Compute backends: the reference C backend, BLIS, OpenBLAS, oneDNN and user-supplied ones.
 */
#ifndef LATTICE_BACKEND_H
#define LATTICE_BACKEND_H

#include <lattice/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup backend Backends
 *
 * A backend carries out the library's GEMMs (and owns the thread count used by
 * every kernel of the models that borrow it). Four are built in: "ref",
 * portable C and the correctness oracle; "blis", every GEMM through
 * bli_sgemm; "openblas", every GEMM through OpenBLAS's cblas_sgemm; and
 * "onednn" (where the library was built with oneDNN), every GEMM through
 * dnnl_sgemm, whose kernels oneDNN picks from the CPU's features
 * (`DNNL_MAX_CPU_ISA` caps them; `OPENBLAS_CORETYPE` does not apply). A
 * caller can provide its own through ::lattice_backend_ops; slots it leaves
 * NULL fall back to the reference implementation.
 *
 * Which kernels run is never left to chance: ::lattice_backend_info tells the
 * library, the kernel configuration and whether it is optimised for this CPU.
 *
 * **"default"** picks, deterministically from the CPU's features and the
 * kernels BLIS selects (never by timing; the library reads no environment
 * variable of its own: a program maps `LATTICE_BACKEND` to the name it
 * passes, as the examples and the Python package do):
 * - oneDNN on a CPU with AVX-512, where it is built in: measured the fastest
 *   at the study's shapes on every AVX-512 class seen (Zen 4, Zen 5,
 *   Emerald Rapids with and without AMX; doc/PERFORMANCE.md), BLIS's
 *   matching zen3 kernels on Zen 4 included;
 * - else BLIS, when its kernels match the CPU (e.g. zen3 on AMD);
 * - OpenBLAS instead when BLIS would run its `generic` reference kernels on
 *   a CPU with AVX2, or an AVX2-only Intel configuration (haswell,
 *   sandybridge) on a CPU with AVX-512, and OpenBLAS can be loaded; if it
 *   cannot, BLIS, and the reason says so;
 * - OpenBLAS in a build without BLIS, else "ref".
 *
 * **OpenBLAS** is not linked: the library loads it once per process when an
 * "openblas" backend is first created (the OpenMP build preferred), so that
 * it cannot clash with the BLAS symbols BLIS exports. Before loading it, and
 * only if the user has not set `OPENBLAS_CORETYPE`, the library sets that
 * variable for the duration of the load to the core the CPU's features call
 * for (SapphireRapids with AMX, Cooperlake with AVX-512 BF16, SkylakeX with
 * AVX-512, Haswell with AVX2 and FMA), because OpenBLAS's own detection falls
 * back to slow generic cores on CPU models it does not know. If OpenBLAS was
 * already loaded by someone else (NumPy, say), its core cannot change; the
 * info reason says so. The OpenBLAS thread count is process-wide, so the
 * backend sets it before each call; OpenBLAS's OpenMP build takes it from
 * the calling thread's OpenMP setting, which the backend restores afterwards.
 * Two "openblas" backends with different thread counts should not run
 * GEMMs concurrently.
 *
 * All matrices are row-major: element (i, j) of a matrix with leading
 * dimension ld lives at [i * ld + j].
 * @{
 */

/** An opaque compute backend. */
typedef struct lattice_backend lattice_backend;

/** The current version of ::lattice_backend_ops. */
#define LATTICE_BACKEND_OPS_VERSION 1

/**
 * @brief Operations a user-supplied backend provides.
 *
 * Fill it with ::lattice_backend_ops_init, then set the slots you implement.
 * Each slot returns 0 on success and non-zero on failure (the library then
 * reports ::LATTICE_ERR_BACKEND). New slots are only ever appended.
 */
typedef struct lattice_backend_ops {
    size_t size;      /**< sizeof(lattice_backend_ops) as the caller compiled it. */
    unsigned version; /**< ::LATTICE_BACKEND_OPS_VERSION as the caller compiled it. */
    void *user;       /**< Passed back as the first argument of every slot. */
    /**
     * C[m,n] = alpha * op(A) * op(B) + beta * C, row-major; op(X) is X or its
     * transpose when trans_x is non-zero. A is m x k after op, B is k x n after op.
     * When beta is 0, C's prior contents (even NaN) must be ignored. Calls
     * with alpha 0 or k 0 never reach the slot: the library sets C = beta C
     * itself, reading neither A nor B, as BLAS does.
     */
    int (*sgemm)(void *user, int trans_a, int trans_b, int m, int n, int k,
                 float alpha, const float *a, int lda, const float *b, int ldb,
                 float beta, float *c, int ldc);
    /**
     * The same GEMM over count independent problems given by pointer arrays.
     * NULL: the library loops over sgemm.
     */
    int (*sgemm_batched)(void *user, int trans_a, int trans_b, int m, int n, int k,
                         float alpha, const float *const *a, int lda,
                         const float *const *b, int ldb, float beta,
                         float *const *c, int ldc, int count);
    /** Called with the thread count set on the backend. May be NULL. */
    void (*set_threads)(void *user, int n_threads);
    /** Called once when the backend is destroyed. May be NULL. */
    void (*destroy)(void *user);
} lattice_backend_ops;

/**
 * @brief Fill ops with its size, version and NULL slots.
 * @param[out] ops The struct to initialise; NULL is ignored.
 */
LATTICE_API void lattice_backend_ops_init(lattice_backend_ops *ops);

/**
 * @brief Create a built-in backend by name.
 * @param name "ref", "blis", "openblas" (since 0.2), "onednn", or "default"
 *        (see @ref backend for how it chooses).
 * @param[out] out The new backend, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_NOT_FOUND for an unknown name,
 *         ::LATTICE_ERR_UNSUPPORTED for "blis" in a build without BLIS, or
 *         "openblas" in a build without it or when OpenBLAS cannot be loaded.
 */
LATTICE_API lattice_status lattice_backend_create(const char *name, lattice_backend **out);

/**
 * @brief Create a backend from caller-supplied operations.
 * @param name A label reported by ::lattice_backend_get_name (copied).
 * @param ops The operations (copied; ops->user is borrowed until destroy).
 * @param[out] out The new backend, or NULL on failure.
 * @return ::LATTICE_OK, or ::LATTICE_ERR_INVALID_ARGUMENT when ops is NULL, its
 *         size is below the 1.0 struct's size (or above twice it: a size never
 *         set), or its version is unknown.
 */
LATTICE_API lattice_status lattice_backend_create_custom(const char *name,
                                                         const lattice_backend_ops *ops,
                                                         lattice_backend **out);

/**
 * @brief Destroy a backend. NULL is ignored.
 *
 * Models borrowing the backend must be destroyed first.
 * @param backend The backend.
 */
LATTICE_API void lattice_backend_destroy(lattice_backend *backend);

/**
 * @brief The backend's name ("ref", "blis", or the custom label).
 * @param backend The backend; NULL gives "".
 * @return A string valid while the backend lives.
 */
LATTICE_API const char *lattice_backend_get_name(const lattice_backend *backend);

/**
 * @brief Set the number of threads for GEMMs and kernels (default 1).
 *
 * On every built-in backend ("ref", "blis", "openblas", "onednn") a GEMM's
 * result has the same bits whatever the thread count: the library splits a
 * call into blocks whose elements each backend sums in the serial call's
 * order. So do a model's passes with every op split
 * (::LATTICE_BACKEND_PARALLEL_OPS); the rows split differs from one thread
 * by float rounding (doc/PERFORMANCE.md). A custom backend's own slots get
 * every call whole: their threads are theirs to make deterministic.
 * @param backend The backend.
 * @param n_threads At least 1.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, or
 *         ::LATTICE_ERR_STATE (since 1.1) while any call inside one of the
 *         backend's models, or a ::lattice_backend_sgemm on it, is in flight
 *         (doc/API.md, Handles and threads).
 */
LATTICE_API lattice_status lattice_backend_set_threads(lattice_backend *backend, int n_threads);

/**
 * @brief The thread count.
 * @param backend The backend; NULL gives 0.
 * @return The number of threads.
 */
LATTICE_API int lattice_backend_get_threads(const lattice_backend *backend);

/** How a model's passes use a backend's threads. @since 1.0 */
typedef enum lattice_backend_parallel {
    LATTICE_BACKEND_PARALLEL_AUTO = 0, /**< By shape: a small model's batch split in blocks of sequences, one per thread (the rows split, doc/PERFORMANCE.md); a larger one's every op split over the threads. @since 1.0 */
    LATTICE_BACKEND_PARALLEL_OPS = 1,  /**< Every op split over the threads, whatever the shape. @since 1.0 */
    LATTICE_BACKEND_PARALLEL_ROWS = 2  /**< The rows split whatever the shape (built-in backends, 2 or more sequences). @since 1.0 */
} lattice_backend_parallel;

/**
 * @brief How the models on this backend use its threads (for measuring; the
 *        default, AUTO, chooses by shape). The examples map the environment
 *        variable `LATTICE_PARALLEL` (auto, ops, rows) to it.
 * @param backend The backend.
 * @param mode One of ::lattice_backend_parallel.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, or
 *         ::LATTICE_ERR_STATE (since 1.1) while any call inside one of the
 *         backend's models, or a ::lattice_backend_sgemm on it, is in flight
 *         (doc/API.md, Handles and threads).
 * @since 1.0
 */
LATTICE_API lattice_status lattice_backend_set_parallel(lattice_backend *backend,
                                                        lattice_backend_parallel mode);

/**
 * @brief The mode ::lattice_backend_set_parallel set.
 * @param backend The backend; NULL gives AUTO.
 * @return The mode.
 * @since 1.0
 */
LATTICE_API lattice_backend_parallel lattice_backend_get_parallel(const lattice_backend *backend);

/**
 * @brief Which build of the fused attention kernels the models on this
 *        backend run: "auto" (the default: the best the CPU runs), "portable"
 *        (plain C), "avx2" or "avx512" (for measuring and for comparing the
 *        builds). A custom backend's GEMM path does not use them. The examples
 *        map the environment variable `LATTICE_ATTN_ISA` to it.
 * @param backend The backend.
 * @param name One of the four names.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT for a name that is
 *         none of them, ::LATTICE_ERR_UNSUPPORTED for a build this CPU cannot
 *         run (the message says which runs), or
 *         ::LATTICE_ERR_STATE (since 1.1) while any call inside one of the
 *         backend's models, or a ::lattice_backend_sgemm on it, is in flight
 *         (doc/API.md, Handles and threads).
 *         The choice is unchanged on error.
 * @since 1.0
 */
LATTICE_API lattice_status lattice_backend_set_attention_kernel(lattice_backend *backend,
                                                                const char *name);

/**
 * @brief The build of the fused attention kernels that runs on this backend.
 * @param backend The backend; NULL gives the CPU's best.
 * @return "portable", "avx2" or "avx512" (never "auto"); a static string.
 * @since 1.0
 */
LATTICE_API const char *lattice_backend_get_attention_kernel(const lattice_backend *backend);

/**
 * @brief The precision of the backend's GEMMs: "fp32" (the default) or
 *        "bf16", an opt-in for measuring what bf16 costs and saves; never
 *        the default, and never a committed study's without saying so.
 *
 * In bf16, every GEMM the backend runs (::lattice_backend_sgemm, and every
 * GEMM of the passes of the models on it: forward and backward, the batched
 * ones of the unfused attention included) rounds its operands A and B to
 * bf16 (to nearest, ties to even; a NaN stays a NaN), multiplies them
 * exactly and sums the products in fp32 into C, which stays fp32, through
 * oneDNN's matmul primitive (its AMX or AVX512-BF16 kernels), one made per
 * GEMM shape and kept by the backend. alpha, beta and C are not rounded.
 * Everything else stays fp32: the fused attention kernels, the norms,
 * activations and losses, the gradients between GEMMs, the optimizer and
 * its master weights. So the results differ from fp32's by the rounding of
 * the operands (about 3 significant decimal digits), and a training run's
 * differ more with every step. They do not depend on the thread count: the
 * split (see ::lattice_backend_set_threads) divides a bf16 GEMM by rows
 * only, rounds each block's operands alone, and oneDNN sums an element in
 * the same order in every block of rows.
 *
 * bf16 runs only on the built-in "onednn" backend, on a CPU with
 * AVX512-BF16 or AMX whose oneDNN kernels reach them (not capped below
 * avx512_core_bf16 by `DNNL_MAX_CPU_ISA`). The examples map the environment
 * variable `LATTICE_GEMM_PRECISION` to it (bench_step), the reproduction
 * its preset's "gemm_precision".
 * @param backend The backend.
 * @param name "fp32" or "bf16".
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT for a NULL argument or
 *         a name that is neither, ::LATTICE_ERR_UNSUPPORTED for "bf16" on
 *         another backend or where it cannot run (::lattice_last_error says
 *         why), ::LATTICE_ERR_OUT_OF_MEMORY, or
 *         ::LATTICE_ERR_STATE (since 1.1) while any call inside one of the
 *         backend's models, or a ::lattice_backend_sgemm on it, is in flight
 *         (doc/API.md, Handles and threads).
 *         The precision is unchanged on error.
 * @since 1.1
 */
LATTICE_API lattice_status lattice_backend_set_gemm_precision(lattice_backend *backend,
                                                              const char *name);

/**
 * @brief The precision of the backend's GEMMs (::lattice_backend_set_gemm_precision).
 * @param backend The backend; NULL gives "fp32".
 * @return "fp32" or "bf16"; a static string.
 * @since 1.1
 */
LATTICE_API const char *lattice_backend_get_gemm_precision(const lattice_backend *backend);

/**
 * @brief Run one GEMM through the backend (see ::lattice_backend_ops::sgemm).
 *
 * Exposed so that benchmarks and tests can time or check a backend directly.
 * @param backend The backend.
 * @param trans_a Non-zero to transpose A.
 * @param trans_b Non-zero to transpose B.
 * @param m Rows of C.
 * @param n Columns of C.
 * @param k Inner dimension.
 * @param alpha Scale of the product (0: A and B are not read, C = beta C,
 *        on every backend).
 * @param a Matrix A.
 * @param lda Leading dimension of A.
 * @param b Matrix B.
 * @param ldb Leading dimension of B.
 * @param beta Scale of C's prior contents (0 ignores them).
 * @param c Matrix C, updated in place; it shares no element with A or B (since
 *        1.1 one that does is refused while alpha is not 0 and k is not 0, as
 *        BLAS leaves it undefined; rows side by side in one buffer are apart).
 * @param ldc Leading dimension of C.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (also C sharing an
 *         element with A or B, as above), ::LATTICE_ERR_BACKEND,
 *         ::LATTICE_ERR_OUT_OF_MEMORY (since 1.1: in bf16, a GEMM shape's
 *         primitive or its operands' scratch could not be allocated; the
 *         next call tries again) or
 *         ::LATTICE_ERR_STATE (since 1.1) while one of the backend's setters
 *         runs (another thread's, or a custom backend's set_threads slot
 *         calling it).
 */
LATTICE_API lattice_status lattice_backend_sgemm(lattice_backend *backend, int trans_a, int trans_b,
                                                 int m, int n, int k, float alpha,
                                                 const float *a, int lda, const float *b, int ldb,
                                                 float beta, float *c, int ldc);

/**
 * @brief Whether this build has the BLIS backend.
 * @return 1 or 0.
 */
LATTICE_API int lattice_backend_has_blis(void);

/** Size of the string fields of ::lattice_backend_info. @since 0.2 */
#define LATTICE_BACKEND_INFO_STRLEN 64
/** Size of ::lattice_backend_info::reason. @since 0.2 */
#define LATTICE_BACKEND_INFO_REASONLEN 320

/**
 * @brief Which kernels a backend runs, filled by ::lattice_backend_info.
 *
 * Set size to sizeof(lattice_backend_info) before the call; the library
 * fills as much of the struct as both sides know and sets size to that.
 * Fields are only ever appended.
 * @since 0.2
 */
typedef struct lattice_backend_info {
    size_t size; /**< Set by the caller to sizeof(lattice_backend_info); on return, the bytes filled. @since 0.2 */
    char name[LATTICE_BACKEND_INFO_STRLEN]; /**< The backend's name ("ref", "blis", "openblas", "onednn", or the custom label). @since 0.2 */
    char library[LATTICE_BACKEND_INFO_STRLEN]; /**< What runs the GEMMs: "BLIS 0.9.0", "OpenBLAS 0.3.21", "oneDNN 2.6.3", "liblattice reference", "user-supplied". @since 0.2 */
    char kernels[LATTICE_BACKEND_INFO_STRLEN]; /**< The kernel configuration: BLIS's ("haswell", "zen3", "generic"), OpenBLAS's core ("SkylakeX", "Cooperlake", "Prescott"), oneDNN's ISA ("avx512_core_bf16", "avx2"), "reference" or "custom". @since 0.2 */
    int optimised; /**< Non-zero for kernels written for a CPU family (BLIS's haswell, zen3, skx...; OpenBLAS's Haswell, Zen, SkylakeX, Cooperlake, SapphireRapids; oneDNN's avx2 and avx512_core ISAs); 0 for generic, reference, Prescott-class or custom kernels. @since 0.2 */
    char reason[LATTICE_BACKEND_INFO_REASONLEN]; /**< One line: why "default" chose this backend and, for OpenBLAS and oneDNN, how the core or ISA was chosen; may be empty. @since 0.2 */
} lattice_backend_info;

/**
 * @brief Which library and kernels run a backend's GEMMs.
 * @param backend The backend.
 * @param[in,out] info size set by the caller (see ::lattice_backend_info).
 * @return ::LATTICE_OK, or ::LATTICE_ERR_INVALID_ARGUMENT when backend or info
 *         is NULL or info->size is below the 1.0 struct's size (nothing is
 *         written then).
 * @since 0.2
 */
LATTICE_API lattice_status lattice_backend_get_info(const lattice_backend *backend,
                                                    lattice_backend_info *info);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
