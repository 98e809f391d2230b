/* The onednn backend's bf16 GEMMs through oneDNN's matmul primitive (see
 * backend_onednn_bf16.h). oneDNN's gemm API (dnnl_gemm_bf16bf16f32) runs
 * AVX512-BF16 kernels and, at the model's small shapes, was slower than
 * dnnl_sgemm on an AMX CPU; the matmul primitive runs brgemm on AMX tiles
 * (examples/bench_bf16.c measures the three side by side).
 *
 * A primitive is made for one call shape: the transposes, m, n, k, C's
 * leading dimension, alpha (an output scale) and beta (a sum post-op, none
 * when beta is 0, so that C is not read). A and B reach it as dense bf16
 * copies, so their leading dimensions are not part of the shape. Every
 * primitive is created with oneDNN's threads set to 1 and runs on its
 * caller's thread: backend.c splits a GEMM over its own threads, and a
 * primitive planned for more threads could split k and sum in another order. */
#include "backend_onednn_bf16.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include <oneapi/dnnl/dnnl.h>
#ifdef _OPENMP
#include <omp.h>
#endif

/* fp32 to bf16 (see the header), branch-free so that the loop vectorises. */
static uint16_t bf16_bits(float f)
{
    uint32_t u;
    memcpy(&u, &f, sizeof u);
    const uint32_t nan = (u & 0x7fffffffu) > 0x7f800000u;
    const uint32_t rounded = (u + 0x7fffu + ((u >> 16) & 1u)) >> 16;
    const uint32_t quiet = (u >> 16) | 0x40u;
    return (uint16_t)(nan ? quiet : rounded);
}

static void row_bf16(const float *x, int n, uint16_t *out)
{
    for (int j = 0; j < n; j++)
        out[j] = bf16_bits(x[j]);
}

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#include <immintrin.h>
/* The same by AVX512-BF16's vcvtneps2bf16, 16 at a time (the tail masked):
 * the same rounding and NaNs, but a denormal becomes a signed zero, as AMX
 * and AVX512-BF16's dot products take a denormal bf16 anyway (they treat
 * their inputs as DAZ), so the GEMM's result is the same. */
__attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))
static void row_bf16_avx512(const float *x, int n, uint16_t *out)
{
    int j = 0;
    for (; j + 16 <= n; j += 16)
        _mm256_storeu_si256((__m256i *)(out + j), (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(x + j)));
    if (j < n) {
        const __mmask16 mask = (__mmask16)((1u << (n - j)) - 1u);
        const __m256bh v = _mm512_cvtneps_pbh(_mm512_maskz_loadu_ps(mask, x + j));
        _mm256_mask_storeu_epi16(out + j, mask, (__m256i)v);
    }
}

static int have_avx512_bf16(void)
{
    return __builtin_cpu_supports("avx512bf16") && __builtin_cpu_supports("avx512bw") &&
           __builtin_cpu_supports("avx512vl");
}
#else
static void row_bf16_avx512(const float *x, int n, uint16_t *out) { row_bf16(x, n, out); }
static int have_avx512_bf16(void) { return 0; }
#endif

void lattice__to_bf16(const float *x, int rows, int cols, int ld, uint16_t *out)
{
    void (*row)(const float *, int, uint16_t *) = have_avx512_bf16() ? row_bf16_avx512 : row_bf16;
    for (int i = 0; i < rows; i++)
        row(x + (size_t)i * (size_t)ld, cols, out + (size_t)i * (size_t)cols);
}

/* LATTICE__BF16MM_CAP primitives: enough for a model's shapes, each split in
 * blocks over its threads, and the evaluation's and teacher's batch sizes. */
enum { MM_CAP = LATTICE__BF16MM_CAP };

typedef struct mm_key {
    int ta, tb, m, n, k, ldc;
    uint32_t alpha, beta; /* their bits */
} mm_key;

typedef struct mm_prim {
    mm_key key;
    dnnl_primitive_t prim;
    dnnl_memory_desc_t src, wei, dst, pad; /* pad: the scratchpad's */
    size_t pad_bytes;
} mm_prim;

struct lattice__bf16mm {
    pthread_mutex_t lock;
    dnnl_engine_t engine;
    mm_prim *cached[MM_CAP]; /* never removed before lattice__bf16mm_destroy */
    int n;
    long hits, misses;
};

lattice__bf16mm *lattice__bf16mm_create(void)
{
    lattice__bf16mm *mm = calloc(1, sizeof *mm);
    if (mm && pthread_mutex_init(&mm->lock, NULL) != 0) {
        free(mm);
        return NULL;
    }
    return mm;
}

static void prim_free(mm_prim *p)
{
    if (!p)
        return;
    dnnl_primitive_destroy(p->prim);
    free(p);
}

void lattice__bf16mm_destroy(lattice__bf16mm *mm)
{
    if (!mm)
        return;
    for (int i = 0; i < mm->n; i++)
        prim_free(mm->cached[i]);
    if (mm->engine)
        dnnl_engine_destroy(mm->engine);
    pthread_mutex_destroy(&mm->lock);
    free(mm);
}

void lattice__bf16mm_counts(lattice__bf16mm *mm, int *cached, long *hits, long *misses)
{
    pthread_mutex_lock(&mm->lock);
    *cached = mm->n;
    *hits = mm->hits;
    *misses = mm->misses;
    pthread_mutex_unlock(&mm->lock);
}

/* One thread per oneDNN call, as every built-in backend (backend.c splits
 * the work over the library's own OpenMP team): oneDNN's OpenMP build plans
 * and runs a primitive, and sizes dnnl_sgemm's team outside a parallel
 * region, on the caller's OpenMP thread count (inside a region too, where it
 * is this thread's setting for regions it would open): 1 for the call, then
 * given back. */
int lattice__onednn_threads_one(void)
{
#ifdef _OPENMP
    const int saved = omp_get_max_threads();
    if (saved != 1)
        omp_set_num_threads(1);
    return saved;
#else
    return 1;
#endif
}

void lattice__onednn_threads_back(int saved)
{
#ifdef _OPENMP
    if (saved != 1)
        omp_set_num_threads(saved);
#else
    (void)saved;
#endif
}

/* The descriptors of one shape: op(A) m x k and B's k x n as the dense bf16
 * copies store them, C m x n of leading dimension ldc. */
static dnnl_status_t shape_descs(const mm_key *key, mm_prim *p)
{
    const dnnl_dims_t src_dims = {key->m, key->k}, wei_dims = {key->k, key->n};
    const dnnl_dims_t dst_dims = {key->m, key->n}, dst_strides = {key->ldc, 1};
    dnnl_dims_t src_strides = {key->k, 1}, wei_strides = {key->n, 1};
    if (key->ta) /* A stored k x m */
        src_strides[0] = 1, src_strides[1] = key->m;
    if (key->tb) /* B stored n x k */
        wei_strides[0] = 1, wei_strides[1] = key->k;
    dnnl_status_t st = dnnl_memory_desc_init_by_strides(&p->src, 2, src_dims, dnnl_bf16,
                                                        src_strides);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_strides(&p->wei, 2, wei_dims, dnnl_bf16, wei_strides);
    if (st == dnnl_success)
        st = dnnl_memory_desc_init_by_strides(&p->dst, 2, dst_dims, dnnl_f32, dst_strides);
    return st;
}

/* alpha as an output scale (none at 1), beta as a sum post-op (none at 0),
 * the scratchpad the caller's. */
static dnnl_status_t shape_attr(float alpha, float beta, dnnl_primitive_attr_t *attr)
{
    dnnl_status_t st = dnnl_primitive_attr_create(attr);
    if (st != dnnl_success)
        return st;
    st = dnnl_primitive_attr_set_scratchpad_mode(*attr, dnnl_scratchpad_mode_user);
    if (st == dnnl_success && alpha != 1.0f)
        st = dnnl_primitive_attr_set_output_scales(*attr, 1, 0, &alpha);
    if (st == dnnl_success && beta != 0.0f) {
        dnnl_post_ops_t po = NULL;
        st = dnnl_post_ops_create(&po);
        if (st == dnnl_success)
            st = dnnl_post_ops_append_sum(po, beta);
        if (st == dnnl_success)
            st = dnnl_primitive_attr_set_post_ops(*attr, po);
        dnnl_post_ops_destroy(po);
    }
    return st;
}

/* A new primitive for key on one thread, into *out. */
static dnnl_status_t prim_make(dnnl_engine_t engine, const mm_key *key, float alpha, float beta,
                               mm_prim **out)
{
    mm_prim *p = calloc(1, sizeof *p);
    if (!p)
        return dnnl_out_of_memory;
    p->key = *key;
    dnnl_primitive_attr_t attr = NULL;
    dnnl_primitive_desc_t pd = NULL;
    dnnl_matmul_desc_t desc;
    const int saved = lattice__onednn_threads_one();
    dnnl_status_t st = shape_descs(key, p);
    if (st == dnnl_success)
        st = shape_attr(alpha, beta, &attr);
    if (st == dnnl_success)
        st = dnnl_matmul_desc_init(&desc, &p->src, &p->wei, NULL, &p->dst);
    if (st == dnnl_success)
        st = dnnl_primitive_desc_create(&pd, &desc, attr, engine, NULL);
    if (st == dnnl_success)
        st = dnnl_primitive_create(&p->prim, pd);
    if (st == dnnl_success) {
        p->pad = *dnnl_primitive_desc_query_md(pd, dnnl_query_scratchpad_md, 0);
        p->pad_bytes = dnnl_memory_desc_get_size(&p->pad);
    }
    lattice__onednn_threads_back(saved);
    dnnl_primitive_desc_destroy(pd);
    dnnl_primitive_attr_destroy(attr);
    if (st != dnnl_success) {
        free(p);
        return st;
    }
    *out = p;
    return dnnl_success;
}

/* The cached primitive for key, made and kept on a miss; *own is 1 where the
 * cache was full and the caller must free it. */
static dnnl_status_t prim_find(lattice__bf16mm *mm, const mm_key *key, float alpha, float beta,
                               mm_prim **out, int *own)
{
    *own = 0;
    pthread_mutex_lock(&mm->lock);
    dnnl_status_t st = dnnl_success;
    if (!mm->engine)
        st = dnnl_engine_create(&mm->engine, dnnl_cpu, 0);
    for (int i = 0; st == dnnl_success && i < mm->n; i++)
        if (memcmp(&mm->cached[i]->key, key, sizeof *key) == 0) {
            mm->hits++;
            *out = mm->cached[i];
            pthread_mutex_unlock(&mm->lock);
            return dnnl_success;
        }
    if (st == dnnl_success)
        st = prim_make(mm->engine, key, alpha, beta, out);
    if (st == dnnl_success) {
        mm->misses++;
        if (mm->n < MM_CAP)
            mm->cached[mm->n++] = *out;
        else
            *own = 1;
    }
    pthread_mutex_unlock(&mm->lock);
    return st;
}

/* One execution on a stream of the caller's own. */
static dnnl_status_t prim_run(dnnl_engine_t engine, const mm_prim *p, uint16_t *sa, uint16_t *sb,
                              float *c, void *pad)
{
    dnnl_stream_t stream = NULL;
    dnnl_memory_t mem[4] = {NULL, NULL, NULL, NULL};
    const int nargs = p->pad_bytes ? 4 : 3;
    dnnl_status_t st = dnnl_stream_create(&stream, engine, dnnl_stream_default_flags);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mem[0], &p->src, engine, sa);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mem[1], &p->wei, engine, sb);
    if (st == dnnl_success)
        st = dnnl_memory_create(&mem[2], &p->dst, engine, c);
    if (st == dnnl_success && nargs == 4)
        st = dnnl_memory_create(&mem[3], &p->pad, engine, pad);
    if (st == dnnl_success) {
        const dnnl_exec_arg_t args[4] = {{DNNL_ARG_SRC, mem[0]}, {DNNL_ARG_WEIGHTS, mem[1]},
                                         {DNNL_ARG_DST, mem[2]}, {DNNL_ARG_SCRATCHPAD, mem[3]}};
        const int saved = lattice__onednn_threads_one();
        st = dnnl_primitive_execute(p->prim, stream, nargs, args);
        if (st == dnnl_success)
            st = dnnl_stream_wait(stream);
        lattice__onednn_threads_back(saved);
    }
    for (int i = 0; i < 4; i++)
        if (mem[i])
            dnnl_memory_destroy(mem[i]);
    if (stream)
        dnnl_stream_destroy(stream);
    return st;
}

int lattice__bf16mm_gemm(lattice__bf16mm *mm, int ta, int tb, int m, int n, int k, float alpha,
                         const float *a, int lda, const float *b, int ldb, float beta, float *c,
                         int ldc)
{
    if (!mm)
        return LATTICE__BF16MM_NO_MEMORY; /* the cache could not be made */
    mm_key key = {ta != 0, tb != 0, m, n, k, ldc, 0, 0};
    memcpy(&key.alpha, &alpha, sizeof alpha);
    memcpy(&key.beta, &beta, sizeof beta);
    mm_prim *p = NULL;
    int own = 0;
    dnnl_status_t st = prim_find(mm, &key, alpha, beta, &p, &own);
    if (st != dnnl_success)
        return st == dnnl_out_of_memory ? LATTICE__BF16MM_NO_MEMORY : 1000 + (int)st;
    const int a_rows = ta ? k : m, a_cols = ta ? m : k;
    const int b_rows = tb ? n : k, b_cols = tb ? k : n;
    const size_t na = (size_t)a_rows * (size_t)a_cols, nb = (size_t)b_rows * (size_t)b_cols;
    const size_t ops = (na + nb) * sizeof(uint16_t), at = (ops + 63) & ~(size_t)63;
    unsigned char *scratch = aligned_alloc(64, (at + p->pad_bytes + 63) & ~(size_t)63);
    if (!scratch) {
        if (own)
            prim_free(p);
        return LATTICE__BF16MM_NO_MEMORY;
    }
    uint16_t *sa = (uint16_t *)scratch, *sb = sa + na;
    lattice__to_bf16(a, a_rows, a_cols, lda, sa);
    lattice__to_bf16(b, b_rows, b_cols, ldb, sb);
    st = prim_run(mm->engine, p, sa, sb, c, scratch + at);
    free(scratch);
    if (own)
        prim_free(p);
    return st == dnnl_success ? 0 : 1000 + (int)st;
}
