/* Allocation failure: every allocation inside a save, a recording or a load is
 * made to fail in turn. The call must return a status (never abort or crash),
 * and a failed save must leave the previous file byte-identical.
 *
 * malloc, calloc, realloc and strdup are defined here, so that they interpose
 * for the whole process: the static library, json-c and libc's own callers
 * (fopen, fdopen) all come through them. They forward to the next definition
 * (libc's, or the sanitizer's) and fail only the N-th allocation made by the
 * armed thread, so OpenMP workers and Check itself are never touched. */
#include "testutil.h"

#include <dirent.h>
#include <dlfcn.h>
#include <errno.h>
#include <unistd.h>

static void *(*next_malloc)(size_t);
static void *(*next_calloc)(size_t, size_t);
static void *(*next_realloc)(void *, size_t);

static __thread int armed;
static long fail_at; /* 0: count only */
static long seen;
static int injected;

/* dlsym may allocate while the pointers are being looked up: serve it from here. */
static _Alignas(16) char boot[4096];
static size_t boot_used;
static int resolving;

static void *boot_alloc(size_t n)
{
    n = (n + 15) / 16 * 16;
    if (boot_used + n > sizeof boot)
        return NULL;
    void *p = boot + boot_used;
    boot_used += n;
    return p;
}

static void resolve(void)
{
    if (next_malloc || resolving)
        return;
    resolving = 1;
    next_calloc = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "calloc");
    next_realloc = (void *(*)(void *, size_t))dlsym(RTLD_NEXT, "realloc");
    next_malloc = (void *(*)(size_t))dlsym(RTLD_NEXT, "malloc");
    resolving = 0;
}

/* Counting mode for the step test: every thread's allocations, with their
 * callers kept for attribution once counting stops (dladdr is not called
 * inside malloc). */
static int counting;
static long n_counted;
static void *callers[4096];

static void count_caller(void *caller)
{
    if (!__atomic_load_n(&counting, __ATOMIC_RELAXED))
        return;
    const long i = __atomic_fetch_add(&n_counted, 1, __ATOMIC_RELAXED);
    if (i < (long)(sizeof callers / sizeof callers[0]))
        callers[i] = caller;
}

/* Fail only allocations made from this executable's own code (the static
 * library), not a shared library's (oneDNN's own): set by the bf16 case. */
static int own_only;
extern const char __executable_start[], etext[];

static int own(const void *caller)
{
    return (const char *)caller >= __executable_start && (const char *)caller < etext;
}

static int fail_now(const void *caller)
{
    if (!armed || (own_only && !own(caller)))
        return 0;
    if (++seen != fail_at)
        return 0;
    injected = 1;
    errno = ENOMEM;
    return 1;
}

void *malloc(size_t n)
{
    resolve();
    if (!next_malloc)
        return boot_alloc(n);
    count_caller(__builtin_return_address(0));
    return fail_now(__builtin_return_address(0)) ? NULL : next_malloc(n);
}

void *calloc(size_t n, size_t size)
{
    resolve();
    if (!next_calloc)
        return boot_alloc(n * size); /* boot is zero and never reused */
    count_caller(__builtin_return_address(0));
    return fail_now(__builtin_return_address(0)) ? NULL : next_calloc(n, size);
}

void *realloc(void *p, size_t n)
{
    resolve();
    count_caller(__builtin_return_address(0));
    return fail_now(__builtin_return_address(0)) ? NULL : next_realloc(p, n);
}

/* aligned allocations are counted, and failed only where own_only is set */
void *aligned_alloc(size_t align, size_t n)
{
    static void *(*next)(size_t, size_t);
    if (!next)
        next = (void *(*)(size_t, size_t))dlsym(RTLD_NEXT, "aligned_alloc");
    count_caller(__builtin_return_address(0));
    return own_only && fail_now(__builtin_return_address(0)) ? NULL : next(align, n);
}

int posix_memalign(void **out, size_t align, size_t n)
{
    static int (*next)(void **, size_t, size_t);
    if (!next)
        next = (int (*)(void **, size_t, size_t))dlsym(RTLD_NEXT, "posix_memalign");
    count_caller(__builtin_return_address(0));
    if (own_only && fail_now(__builtin_return_address(0)))
        return ENOMEM;
    return next(out, align, n);
}

/* json-c 0.16's parser does not check its strdup of an object key (it goes on
 * to hash the NULL): that one path cannot be made safe outside json-c, so its
 * copies are left alone. Everything else json-c and the library allocate fails. */
static int from_json_c(const void *caller)
{
    Dl_info info;
    return dladdr(caller, &info) && info.dli_fname && strstr(info.dli_fname, "libjson-c");
}

char *strdup(const char *s)
{
    const size_t n = strlen(s) + 1;
    if (armed && from_json_c(__builtin_return_address(0))) {
        char *p = next_malloc(n);
        if (p)
            memcpy(p, s, n);
        return p;
    }
    char *p = malloc(n);
    if (p)
        memcpy(p, s, n);
    return p;
}

static void arm(long n)
{
    fail_at = n;
    seen = 0;
    injected = 0;
    armed = 1;
}

static void disarm(void) { armed = 0; }

/* ---- fixtures ---- */

static char dir[64];
static lattice_backend *be;

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/lattice-alloc-XXXXXX");
    ck_assert_ptr_nonnull(mkdtemp(dir));
    be = tu_backend("ref", 1);
}

static void teardown(void)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    char p[512];
    while (d && (e = readdir(d)))
        if (e->d_name[0] != '.') {
            snprintf(p, sizeof p, "%s/%s", dir, e->d_name);
            unlink(p);
        }
    if (d)
        closedir(d);
    rmdir(dir);
    lattice_backend_destroy(be);
}

static int files_in_dir(void)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    struct dirent *e;
    while ((e = readdir(d)))
        n += e->d_name[0] != '.';
    closedir(d);
    return n;
}

static unsigned char *slurp(const char *path, long *len)
{
    FILE *f = fopen(path, "rb");
    ck_assert_ptr_nonnull(f);
    fseek(f, 0, SEEK_END);
    *len = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *b = malloc((size_t)*len + 1);
    ck_assert_ptr_nonnull(b);
    ck_assert_int_eq(fread(b, 1, (size_t)*len, f), (size_t)*len);
    fclose(f);
    return b;
}

static const int32_t ids[] = {10, 1, 2, 3, 4, 10, 5, 6, 7, 10, 8, 9, 1, 2, 10, 3, 3, 4};

/* The rig's tiny post-norm grow run over ids (no trainer with defer). */
static void small_options(rig_options *o, uint64_t seed)
{
    rig_options_init(o);
    o->placement = LATTICE_NORM_PLACEMENT_POST;
    o->norm_eps = 1e-5f;
    o->model.seed = seed;
    o->ids = ids;
    o->n_ids = sizeof ids / sizeof ids[0];
}

/* The sweep: a save that either writes the same bytes again or fails with
 * OUT_OF_MEMORY and a message, leaving the file and the directory as they were. */
typedef lattice_status (*save_fn)(void *ctx, const char *path);
typedef const char *(*msg_fn)(void *ctx);

static void sweep_save(save_fn save, msg_fn msg, void *ctx, const char *what)
{
    char path[128];
    snprintf(path, sizeof path, "%s/%s.safetensors", dir, what);
    ck_assert_msg(save(ctx, path) == LATTICE_OK, "%s: %s", what, msg(ctx));
    long good_len;
    unsigned char *good = slurp(path, &good_len);
    arm(0);
    lattice_status st = save(ctx, path);
    disarm();
    const long total = seen;
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_int_gt(total, 10);
    long failures = 0;
    for (long n = 1; n <= total; n++) {
        arm(n);
        st = save(ctx, path);
        disarm();
        ck_assert_msg(injected, "%s: allocation %ld of %ld never came", what, n, total);
        ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_OUT_OF_MEMORY,
                      "%s: failing allocation %ld of %ld gave %s (%s)", what, n, total,
                      lattice_status_string(st), msg(ctx));
        if (st != LATTICE_OK) {
            failures++;
            ck_assert_msg(msg(ctx)[0] != 0, "%s: no message after allocation %ld", what, n);
        }
        long len;
        unsigned char *now = slurp(path, &len);
        ck_assert_msg(len == good_len && memcmp(now, good, (size_t)len) == 0,
                      "%s: failing allocation %ld of %ld (status %s) changed the file", what, n,
                      total, lattice_status_string(st));
        free(now);
        ck_assert_msg(files_in_dir() == 1, "%s: allocation %ld left a temporary file", what, n);
    }
    ck_assert_int_gt(failures, 0);
    free(good);
    unlink(path);
}

static lattice_status save_model(void *ctx, const char *path) { return lattice_model_save(ctx, path); }
static const char *model_msg(void *ctx) { return lattice_model_errmsg(ctx); }

START_TEST(test_model_save)
{
    rig_options o;
    small_options(&o, 1);
    lattice_model *m = tu_model(be, o.placement, o.norm_kind, o.norm_eps, 1.0f, &o.model);
    sweep_save(save_model, model_msg, m, "model");
    lattice_model_destroy(m);
}
END_TEST

/* The small run after its first step. */
static void open_run(rig *r)
{
    rig_options o;
    small_options(&o, 2);
    tu_rig_open(r, &o);
    ck_assert_msg(lattice_trainer_step(r->trainer, NULL) == LATTICE_OK, "%s",
                  lattice_trainer_errmsg(r->trainer));
}

static lattice_status save_ckpt(void *ctx, const char *path)
{
    return lattice_trainer_save_checkpoint(((rig *)ctx)->trainer, path);
}
static const char *ckpt_msg(void *ctx) { return lattice_trainer_errmsg(((rig *)ctx)->trainer); }

START_TEST(test_checkpoint_save)
{
    rig r;
    open_run(&r);
    sweep_save(save_ckpt, ckpt_msg, &r, "checkpoint");
    rig_close(&r);
}
END_TEST

static int cb_teacher(void *user, const int32_t *tokens, int batch, int seq, int vocab, float *z)
{
    (void)user;
    for (int i = 0; i < batch * seq; i++)
        for (int v = 0; v < vocab; v++)
            z[(long)i * vocab + v] = v == (tokens[i] + 1) % vocab ? 3.0f : (float)v / vocab;
    return 0;
}

typedef struct recording {
    lattice_teacher *teacher;
    lattice_data *data;
    int k;
} recording;

static lattice_status record(void *ctx, const char *path)
{
    recording *r = ctx;
    /* the same batches every time, so that a successful recording writes the same bytes */
    const lattice_data_position start = {0, 0};
    if (lattice_data_set_position(r->data, &start) != LATTICE_OK) /* no ck_assert while armed */
        return LATTICE_ERR_STATE;
    return lattice_teacher_record(r->teacher, r->data, 3, r->k, path);
}
static const char *record_msg(void *ctx) { return lattice_teacher_errmsg(((recording *)ctx)->teacher); }

START_TEST(test_teacher_record)
{
    rig_options o;
    small_options(&o, 2);
    o.teacher = RIG_TEACHER_CALLBACK;
    o.teacher_fn = cb_teacher;
    o.defer_trainer = 1;
    rig run;
    tu_rig_open(&run, &o);
    recording r = {run.teacher, run.data, _i ? 3 : 0};
    sweep_save(record, record_msg, &r, _i ? "topk" : "dense");
    rig_close(&run);
}
END_TEST

/* Loads under failure: a status, never a crash; a failure says why. */
START_TEST(test_loads)
{
    rig r;
    open_run(&r);
    char mpath[128], cpath[128], tpath[128];
    snprintf(mpath, sizeof mpath, "%s/m.safetensors", dir);
    snprintf(cpath, sizeof cpath, "%s/c.safetensors", dir);
    snprintf(tpath, sizeof tpath, "%s/corpus.txt", dir);
    ck_assert_int_eq(lattice_model_save(r.model, mpath), LATTICE_OK);
    ck_assert_int_eq(lattice_trainer_save_checkpoint(r.trainer, cpath), LATTICE_OK);
    FILE *f = fopen(tpath, "w");
    fputs("one document\fand another\fand a third one", f);
    fclose(f);
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    dp.batch_size = 2;
    dp.seq_len = 8;
    dp.val_fraction = 0.3f;
    for (int what = 0; what < 4; what++) {
        long total = 0;
        for (long n = 0; n == 0 || n <= total; n++) {
            char err[LATTICE_ERRMSG_SIZE] = "";
            lattice_status st;
            lattice_model *m = NULL;
            lattice_data *d = NULL;
            arm(n);
            switch (what) {
            case 0:
                st = lattice_model_load(r.model, mpath);
                snprintf(err, sizeof err, "%s", lattice_model_errmsg(r.model));
                break;
            case 1:
                st = lattice_trainer_load_checkpoint(r.trainer, cpath);
                snprintf(err, sizeof err, "%s", lattice_trainer_errmsg(r.trainer));
                break;
            case 2:
                st = lattice_model_create_from_file(mpath, NULL, be, 2, 5, &m, err);
                break;
            default:
                st = lattice_data_create_text(tpath, &dp, &d, err);
                break;
            }
            disarm();
            if (n == 0) {
                total = seen;
                ck_assert_msg(st == LATTICE_OK, "load %d: %s", what, err);
            } else {
                ck_assert_msg(injected, "load %d: allocation %ld of %ld never came", what, n, total);
                /* json-c's parser reports a failed allocation as a syntax error */
                ck_assert_msg(st == LATTICE_OK || st == LATTICE_ERR_OUT_OF_MEMORY ||
                                  st == LATTICE_ERR_FORMAT,
                              "load %d, allocation %ld: %s", what, n, lattice_status_string(st));
                ck_assert_msg(st == LATTICE_OK || err[0], "load %d, allocation %ld: no message",
                              what, n);
            }
            ck_assert(st == LATTICE_OK || (!m && !d));
            lattice_model_destroy(m);
            lattice_data_destroy(d);
        }
        ck_assert_int_gt(total, 3);
    }
    rig_close(&r);
}
END_TEST

/* ---- steps ---- */

/* Allocations during 8 training steps of a model big enough for the OpenMP
 * regions to run in parallel, by thread count: those made from libgomp, from
 * the GEMM library inside its calls (oneDNN's dnnl_sgemm allocates its
 * packing buffer in every call and frees it before returning), and all
 * others (the library's own, libc's on its behalf). */
static void count_step_allocations(const char *backend, int threads, long *gomp, long *gemm,
                                   long *other)
{
    static int32_t text[4096];
    tu_rng rng = {7};
    for (size_t i = 0; i < sizeof text / sizeof text[0]; i++)
        text[i] = (int32_t)((tu_uniform(&rng) + 1.0) * 31.5);
    rig_options o;
    rig_options_init(&o);
    o.backend = backend;
    o.threads = threads;
    o.model.vocab_size = 64;
    o.model.d_model = 64;
    o.model.n_heads = 4;
    o.model.n_kv_heads = 2;
    o.model.head_dim = 16;
    o.model.d_ff = 128;
    o.model.max_batch = 4;
    o.model.max_seq = 32;
    o.ids = text;
    o.n_ids = sizeof text / sizeof text[0];
    o.preset = LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK;
    o.n_blocks = 1;
    o.block_size = 2;
    o.steps_per_phase = 100;
    rig r;
    tu_rig_open(&r, &o);
    lattice_trainer *t = r.trainer;
    /* the first steps: the phase start, OpenMP's thread pool and first team,
     * BLIS's packing buffers; counted for the record only */
    n_counted = 0;
    __atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
    lattice_status st = LATTICE_OK;
    for (int i = 0; i < 3 && st == LATTICE_OK; i++) /* no ck_assert: Check allocates */
        st = lattice_trainer_step(t, NULL);
    __atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(st, LATTICE_OK);
    long first_gomp = 0;
    for (long i = 0; i < n_counted && i < (long)(sizeof callers / sizeof callers[0]); i++) {
        Dl_info info;
        first_gomp += dladdr(callers[i], &info) && info.dli_fname &&
                      strstr(info.dli_fname, "libgomp");
    }
    printf("alloc-steps: %s, %d thread(s), first 3 steps: %ld allocations, %ld from libgomp\n",
           backend, threads, n_counted, first_gomp);
    n_counted = 0;
    __atomic_store_n(&counting, 1, __ATOMIC_SEQ_CST);
    for (int i = 0; i < 8 && st == LATTICE_OK; i++)
        st = lattice_trainer_step(t, NULL);
    __atomic_store_n(&counting, 0, __ATOMIC_SEQ_CST);
    ck_assert_int_eq(st, LATTICE_OK);
    *gomp = *gemm = *other = 0;
    for (long i = 0; i < n_counted; i++) {
        Dl_info info;
        const int known = i < (long)(sizeof callers / sizeof callers[0]);
        const int where = known && dladdr(callers[i], &info) && info.dli_fname;
        /* the runtimes: libgomp (its teams) and, with threads, BLIS (its
         * pools grow the first time two threads' calls overlap in a new way,
         * which a busy machine can delay past the first steps) */
        const int from_gomp = where && (strstr(info.dli_fname, "libgomp") ||
                                        (threads > 1 && strstr(info.dli_fname, "libblis")));
        const int from_gemm = where && strcmp(backend, "onednn") == 0 &&
                              strstr(info.dli_fname, "libdnnl");
        *(from_gomp ? gomp : from_gemm ? gemm : other) += 1;
        if (!from_gomp && !from_gemm && known && dladdr(callers[i], &info))
            printf("alloc-steps: %s, %d threads: allocation from %s (%s)\n", backend, threads,
                   info.dli_fname ? info.dli_fname : "?", info.dli_sname ? info.dli_sname : "?");
    }
    printf("alloc-steps: %s, %d thread(s), 8 steps: %ld allocations from libgomp%s, %ld inside "
           "the GEMM library's calls, %ld others\n",
           backend, threads, *gomp, threads > 1 ? " or libblis" : "", *gemm, *other);
    rig_close(&r);
}

START_TEST(test_steps_allocate_nothing)
{
    /* _i: the reference backend, then BLIS and oneDNN where built */
    const char *name = tu_backend_name(_i);
    long gomp, gemm, other;
    count_step_allocations(name, 1, &gomp, &gemm, &other);
    ck_assert_msg(gomp + other == 0, "%s, 1 thread: %ld allocations (%ld from libgomp)", name,
                  gomp + other, gomp);
    /* more threads: libgomp may allocate (its teams) and BLIS (its pools), the
     * library still does not */
    count_step_allocations(name, 2, &gomp, &gemm, &other);
    ck_assert_msg(other == 0, "%s, 2 threads: %ld allocations outside libgomp", name, other);
}
END_TEST

/* ---- bf16 GEMMs ---- */

/* Whether bf16 GEMMs run here (lattice_last_error() says why not). */
static int bf16_ok(void)
{
    lattice_backend *probe = NULL;
    const int ok = lattice_backend_create("onednn", &probe) == LATTICE_OK &&
                   lattice_backend_set_gemm_precision(probe, "bf16") == LATTICE_OK;
    lattice_backend_destroy(probe);
    return ok;
}

/* One bf16 GEMM on a new "onednn" backend: the precision set and the GEMM
 * run with allocation fail_at armed (0: count only); *set and *run their
 * statuses (*run LATTICE_OK untried where the set failed). */
static lattice_backend *bf16_try(long fail_at, const float *a, const float *b, float *c, int m,
                                 int n, int k, lattice_status *set, lattice_status *run)
{
    lattice_backend *bk = NULL;
    ck_assert_int_eq(lattice_backend_create("onednn", &bk), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_threads(bk, 1), LATTICE_OK); /* armed: this thread */
    arm(fail_at);
    *set = lattice_backend_set_gemm_precision(bk, "bf16");
    *run = *set == LATTICE_OK ? lattice_backend_sgemm(bk, 0, 1, m, n, k, 1.0f, a, k, b, k, 0.0f,
                                                      c, n)
                              : LATTICE_OK;
    disarm();
    return bk;
}

/* Every allocation of the library's own while bf16 is set and a GEMM makes
 * its primitive (the cache, the primitive's record, the operands' scratch)
 * fails in turn: the call returns OUT_OF_MEMORY with a message, and the same
 * backend then gives the bits of one that never failed. oneDNN's own
 * allocations are not failed. Where bf16 cannot run, nothing to test. */
START_TEST(test_bf16_gemm)
{
    enum { M = 24, N = 40, K = 56 };
    static float a[M * K], b[N * K], want[M * N], got[M * N];
    for (int i = 0; i < M * K; i++)
        a[i] = (float)((i * 7) % 19) / 19.0f - 0.5f;
    for (int i = 0; i < N * K; i++)
        b[i] = (float)((i * 5) % 23) / 23.0f - 0.5f;
    if (!bf16_ok()) /* every case run at once: alloc-bf16 alone skips (main) */
        return;
    own_only = 1;
    lattice_status set, run;
    lattice_backend *bk = bf16_try(0, a, b, want, M, N, K, &set, &run);
    const long total = seen;
    lattice_backend_destroy(bk);
    ck_assert_int_eq(set, LATTICE_OK);
    ck_assert_int_eq(run, LATTICE_OK);
    ck_assert_int_ge(total, 3); /* the cache, a primitive, the scratch */
    for (long i = 1; i <= total; i++) {
        memset(got, 0, sizeof got);
        bk = bf16_try(i, a, b, got, M, N, K, &set, &run);
        ck_assert_msg(injected, "bf16: allocation %ld of %ld never came", i, total);
        const lattice_status st = set != LATTICE_OK ? set : run;
        ck_assert_msg(st == LATTICE_ERR_OUT_OF_MEMORY, "bf16: failing allocation %ld of %ld gave %s",
                      i, total, lattice_status_string(st));
        ck_assert_msg(strstr(lattice_last_error(), "memory"),
                      "bf16: allocation %ld: the message does not say so: %s", i,
                      lattice_last_error());
        ck_assert_str_eq(lattice_backend_get_gemm_precision(bk), set == LATTICE_OK ? "bf16" : "fp32");
        ck_assert_int_eq(lattice_backend_set_gemm_precision(bk, "bf16"), LATTICE_OK);
        ck_assert_int_eq(lattice_backend_sgemm(bk, 0, 1, M, N, K, 1.0f, a, K, b, K, 0.0f, got, N),
                         LATTICE_OK);
        ck_assert_msg(memcmp(got, want, sizeof got) == 0,
                      "bf16: after allocation %ld failed, the GEMM's bits differ", i);
        lattice_backend_destroy(bk);
    }
    own_only = 0;
    printf("alloc-bf16: each of the library's %ld allocations failed in turn\n", total);
}
END_TEST

/* The bf16 model cases: attention fused (head_dim 8) or by batched GEMMs
 * (6), on 1 thread, or on 2 with the rows split (the model's passes) or
 * with each GEMM split (ops); the armed thread is the caller, thread 0. */
static const struct {
    int head_dim, threads;
    lattice_backend_parallel parallel;
} bf16_cases[] = {
    {8, 1, LATTICE_BACKEND_PARALLEL_AUTO},
    {6, 1, LATTICE_BACKEND_PARALLEL_AUTO},
    {8, 2, LATTICE_BACKEND_PARALLEL_ROWS},
    {6, 2, LATTICE_BACKEND_PARALLEL_OPS},
};

/* A forward, its loss and a backward; the first failing status. */
static lattice_status bf16_step(lattice_model *m, const int32_t *toks, float *loss)
{
    lattice_status st = lattice_model_forward(m, toks, 2, 8);
    if (st == LATTICE_OK)
        st = lattice_model_cross_entropy(m, toks, NULL, loss, NULL);
    if (st == LATTICE_OK)
        st = lattice_model_backward(m);
    return st;
}

/* A bf16 model's forward and backward with allocation fail_at armed (0:
 * count only) on a new "onednn" backend in bf16, as bf16_cases[c] says; st
 * the first failing status, msg the model's message after it; then, unarmed,
 * the same model and backend again: *again its loss. */
static void bf16_pass(long fail_at, int c, lattice_status *st, char *msg, size_t msg_n,
                      float *again)
{
    static const int32_t toks[16] = {1, 2, 3, 4, 5, 6, 7, 8, 8, 7, 6, 5, 4, 3, 2, 1};
    lattice_backend *bk = NULL;
    ck_assert_int_eq(lattice_backend_create("onednn", &bk), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_threads(bk, bf16_cases[c].threads), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_parallel(bk, bf16_cases[c].parallel), LATTICE_OK);
    ck_assert_int_eq(lattice_backend_set_gemm_precision(bk, "bf16"), LATTICE_OK);
    lattice_model_params p;
    lattice_model_params_init(&p);
    p.vocab_size = 10;
    p.d_model = 24;
    p.n_layers = p.n_active_layers = 2;
    p.n_heads = 4;
    p.n_kv_heads = 2;
    p.head_dim = bf16_cases[c].head_dim;
    p.d_ff = 32;
    p.max_batch = 2;
    p.max_seq = 8;
    p.seed = 3;
    lattice_norm *norm = NULL;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f,
                                         &norm), LATTICE_OK);
    lattice_model *m = NULL;
    ck_assert_int_eq(lattice_model_create(&p, norm, bk, &m), LATTICE_OK);
    float loss;
    arm(fail_at);
    *st = bf16_step(m, toks, &loss);
    disarm();
    snprintf(msg, msg_n, "%s", lattice_model_errmsg(m));
    ck_assert_int_eq(bf16_step(m, toks, again), LATTICE_OK);
    lattice_model_destroy(m);
    lattice_norm_destroy(norm);
    lattice_backend_destroy(bk);
}

/* The same sweep through a model: every allocation of the library's own on
 * the calling thread in a bf16 forward and backward fails in turn (the
 * primitives', the scratch's, the rows split's views), as each of bf16_cases
 * says. Each failure is OUT_OF_MEMORY in the model's own message, never
 * BACKEND or a crash, and the same model and backend then give the loss of
 * a pass that never failed. */
START_TEST(test_bf16_model_pass)
{
    char msg[LATTICE_ERRMSG_SIZE];
    lattice_status st;
    float want = 0.0f, again;
    if (!bf16_ok())
        return;
    own_only = 1;
    bf16_pass(0, _i, &st, msg, sizeof msg, &want);
    const long total = seen;
    ck_assert_int_eq(st, LATTICE_OK);
    ck_assert_int_gt(total, 10);
    /* on 2 threads a shape's primitive is made by whichever thread reaches it
     * first, so the calling thread's count varies: an allocation that did
     * not come on it is no failure, and the pass must then succeed */
    const int exact = bf16_cases[_i].threads == 1;
    long failed = 0;
    for (long i = 1; i <= total; i++) {
        bf16_pass(i, _i, &st, msg, sizeof msg, &again);
        ck_assert_msg(injected || !exact, "bf16 model, case %d: allocation %ld of %ld never came",
                      _i, i, total);
        ck_assert_msg(again == want, "bf16 model, case %d: after allocation %ld, loss %.9g, not "
                      "%.9g", _i, i, again, want);
        if (!injected) {
            ck_assert_msg(st == LATTICE_OK, "bf16 model, case %d: no allocation failed, yet %s (%s)",
                          _i, lattice_status_string(st), msg);
            continue;
        }
        failed++;
        ck_assert_msg(st == LATTICE_ERR_OUT_OF_MEMORY,
                      "bf16 model, case %d: failing allocation %ld of %ld gave %s (%s)", _i, i,
                      total, lattice_status_string(st), msg);
        ck_assert_msg(strstr(msg, "out of memory"),
                      "bf16 model, case %d: allocation %ld: the model's message does not say so: "
                      "%s", _i, i, msg);
    }
    own_only = 0;
    ck_assert_int_gt(failed, total / 2);
    printf("alloc-bf16: a model's forward and backward, head_dim %d, %d thread(s): %ld of the "
           "library's %ld allocations on the calling thread failed in turn\n",
           bf16_cases[_i].head_dim, bf16_cases[_i].threads, failed, total);
}
END_TEST

int main(void)
{
    resolve();
    Suite *s = suite_create("alloc");
    TCase *tc = tcase_create("saves");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_model_save);
    tcase_add_test(tc, test_checkpoint_save);
    tcase_add_loop_test(tc, test_teacher_record, 0, 2);
    suite_add_tcase(s, tc);
    /* a case of its own: json-c's parser leaks what it had built when an
     * allocation fails, which the sanitizer run suppresses for this case only */
    TCase *tl = tcase_create("loads");
    tcase_add_checked_fixture(tl, setup, teardown);
    tcase_add_test(tl, test_loads);
    suite_add_tcase(s, tl);
    TCase *ts = tcase_create("steps");
    tcase_add_loop_test(ts, test_steps_allocate_nothing, 0, tu_n_backends());
    suite_add_tcase(s, ts);
    TCase *tb = tcase_create("bf16");
    tcase_add_test(tb, test_bf16_gemm);
    tcase_add_loop_test(tb, test_bf16_model_pass, 0,
                        (int)(sizeof bf16_cases / sizeof bf16_cases[0]));
    suite_add_tcase(s, tb); /* before the skip: freeing the suite frees its cases */
    /* the bf16 case alone (alloc-bf16) on a CPU or build where bf16 cannot
     * run: a skip, saying why, not a pass that tested nothing */
    const char *only = getenv("CK_RUN_CASE");
    if (only && strcmp(only, "bf16") == 0 && !bf16_ok()) {
        fprintf(stderr, "alloc-bf16: skipped: %s\n", lattice_last_error());
        srunner_free(srunner_create(s));
        return 77;
    }
    return tu_run(s);
}
