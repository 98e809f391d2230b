/* Resource bounds of the loaders: a small file must cost little, whatever its
 * header or config claims. Each load runs in a forked child that measures its
 * own time and peak resident memory and, outside AddressSanitizer (whose shadow
 * memory needs terabytes of address space), runs under an address-space limit,
 * so that a loader that allocates first and checks later fails the test
 * instead of the machine. */
#include "testutil.h"

#include <sys/resource.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define UNDER_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define UNDER_ASAN 1
#endif
#endif
#ifndef UNDER_ASAN
#define UNDER_ASAN 0
#endif

const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

#define AS_LIMIT (512L << 20)

static lattice_backend *be;

static void setup(void) { be = tu_backend("ref", 1); }
static void teardown(void) { lattice_backend_destroy(be); }

static char *temp_path(const char *suffix)
{
    static char buf[4][96];
    static int k;
    char *p = buf[k++ % 4];
    snprintf(p, 96, "/tmp/lattice-limits-%d-%d%s", (int)getpid(), k, suffix);
    return p;
}

/* A safetensors file: the header text as given, then n zero bytes of data. */
static void write_st(const char *path, const char *header, size_t n)
{
    FILE *f = fopen(path, "wb");
    ck_assert_ptr_nonnull(f);
    const uint64_t hl = strlen(header);
    for (int i = 0; i < 8; i++)
        fputc((int)(hl >> (8 * i)) & 0xff, f);
    fwrite(header, 1, hl, f);
    for (size_t i = 0; i < n; i++)
        fputc(0, f);
    ck_assert_int_eq(fclose(f), 0);
}

/* What a load in a child gave. */
typedef struct outcome {
    lattice_status st;
    double seconds; /* CPU time of the load */
    long rss_growth_kb; /* peak resident set during the load, less what it was before */
    char err[LATTICE_ERRMSG_SIZE];
} outcome;

typedef lattice_status (*load_fn)(const char *path, const char *config, char *err);

static long max_rss_kb(void)
{
    struct rusage ru;
    getrusage(RUSAGE_SELF, &ru);
    return ru.ru_maxrss;
}

static outcome in_child(load_fn load, const char *path, const char *config)
{
    int fds[2];
    ck_assert_int_eq(pipe(fds), 0);
    fflush(NULL);
    const pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0) {
        close(fds[0]);
        outcome o;
        memset(&o, 0, sizeof o);
        if (!UNDER_ASAN) {
            struct rlimit rl = {AS_LIMIT, AS_LIMIT};
            setrlimit(RLIMIT_AS, &rl);
        }
        const long before = max_rss_kb();
        /* the child's CPU time, not the wall clock's: a busy machine (other
         * jobs on its cores) must not fail a bound meant for the loader's work */
        struct timespec a, b;
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &a);
        o.st = load(path, config, o.err);
        clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &b);
        o.seconds = (double)(b.tv_sec - a.tv_sec) + 1e-9 * (double)(b.tv_nsec - a.tv_nsec);
        o.rss_growth_kb = max_rss_kb() - before;
        const ssize_t w = write(fds[1], &o, sizeof o);
        _exit(w == (ssize_t)sizeof o ? 0 : 1);
    }
    close(fds[1]);
    outcome o;
    const ssize_t r = read(fds[0], &o, sizeof o);
    close(fds[0]);
    int wst;
    ck_assert_int_eq(waitpid(pid, &wst, 0), pid);
    ck_assert_msg(WIFEXITED(wst) && WEXITSTATUS(wst) == 0 && r == (ssize_t)sizeof o,
                  "the loading child died (status 0x%x)", wst);
    if (UNDER_ASAN)
        printf("limits: AddressSanitizer build: no address-space limit, RSS not checked\n");
    return o;
}

static lattice_status create_from(const char *path, const char *config, char *err)
{
    lattice_model *m = NULL;
    lattice_status st = lattice_model_create_from_file(path, config, be, 2, 8, &m, err);
    lattice_model_destroy(m);
    return st;
}

/* lattice.config of a model of vocab 2^22 x d_model 64: 268M parameters per
 * matrix, gigabytes of arenas */
#define HUGE_CONFIG                                                                                \
    "{\\\"vocab_size\\\":4194304,\\\"d_model\\\":64,\\\"n_layers\\\":2,"                           \
    "\\\"n_active_layers\\\":2,\\\"n_heads\\\":2,\\\"n_kv_heads\\\":1,\\\"head_dim\\\":32,"        \
    "\\\"d_ff\\\":128,\\\"qk_norm\\\":1,\\\"tie_embeddings\\\":0,\\\"rope_theta\\\":10000.0,"     \
    "\\\"placement\\\":\\\"pre\\\",\\\"norm\\\":\\\"rms\\\",\\\"eps\\\":1e-06,"                    \
    "\\\"residual_scale\\\":1.0}"

static void expect_fast_refusal(const outcome *o, const char *what, const char *tensor,
                                const char *why)
{
    ck_assert_msg(o->st == LATTICE_ERR_FORMAT, "%s: %s (%s)", what, lattice_status_string(o->st),
                  o->err);
    ck_assert_msg(strstr(o->err, tensor) && strstr(o->err, why), "%s: '%s' names no %s (%s)", what,
                  o->err, tensor, why);
    ck_assert_msg(o->seconds < 1.0, "%s: took %.2f s", what, o->seconds);
    if (!UNDER_ASAN)
        ck_assert_msg(o->rss_growth_kb < 64 * 1024, "%s: resident memory grew by %ld KiB", what,
                      o->rss_growth_kb);
}

START_TEST(test_huge_config_small_file)
{
    /* the embedding is there but 4 x 64; then no tensor at all */
    char *path = temp_path(".safetensors");
    write_st(path,
             "{\"__metadata__\":{\"lattice.config\":\"" HUGE_CONFIG "\"},"
             "\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[4,64],"
             "\"data_offsets\":[0,1024]}}",
             1024);
    outcome o = in_child(create_from, path, NULL);
    expect_fast_refusal(&o, "a 4 x 64 embedding", "'model.embed_tokens.weight'", "4194304, 64");
    write_st(path, "{\"__metadata__\":{\"lattice.config\":\"" HUGE_CONFIG "\"}}", 0);
    o = in_child(create_from, path, NULL);
    expect_fast_refusal(&o, "no tensors", "'model.embed_tokens.weight'", "missing");
    unlink(path);
}
END_TEST

START_TEST(test_huge_qwen3_config)
{
    /* a real small Qwen3-shaped file under a config.json that asks for 2^22 x 64 */
    lattice_model_params p;
    tu_tiny_params(&p);
    p.vocab_size = 13;
    p.max_seq = 8;
    lattice_norm *n;
    ck_assert_int_eq(lattice_norm_create(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 1e-6f, &n), LATTICE_OK);
    lattice_model *m;
    ck_assert_int_eq(lattice_model_create(&p, n, be, &m), LATTICE_OK);
    lattice_norm_destroy(n);
    char *path = temp_path(".safetensors"), *cfg = temp_path(".json");
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    lattice_model_destroy(m);
    FILE *f = fopen(cfg, "w");
    fprintf(f, "{\"hidden_size\": %d, \"intermediate_size\": 12, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, "
               "\"vocab_size\": %d, \"tie_word_embeddings\": false}",
            _i ? 8 : 64, 1 << 22);
    fclose(f);
    outcome o = in_child(create_from, path, cfg);
    expect_fast_refusal(&o, "Qwen3 config.json", "'model.embed_tokens.weight'",
                        _i ? "[4194304, 8]" : "[4194304, 64]");
    /* the same config with the file's own sizes loads */
    f = fopen(cfg, "w");
    fprintf(f, "{\"hidden_size\": 8, \"intermediate_size\": 12, \"num_hidden_layers\": 2, "
               "\"num_attention_heads\": 2, \"num_key_value_heads\": 1, \"head_dim\": 4, "
               "\"vocab_size\": 13, \"tie_word_embeddings\": false}");
    fclose(f);
    o = in_child(create_from, path, cfg);
    ck_assert_msg(o.st == LATTICE_OK, "%s", o.err);
    unlink(path);
    unlink(cfg);
}
END_TEST

static lattice_status teacher_from(const char *path, const char *config, char *err)
{
    (void)config;
    lattice_teacher *t = NULL;
    lattice_status st = lattice_teacher_create_file(path, &t, err);
    lattice_teacher_destroy(t);
    return st;
}

/* A header of n empty U8 tensors, padded with spaces to at least pad bytes. */
static void write_empty_tensors(const char *path, long n, size_t pad)
{
    const size_t cap = (size_t)n * 64 + pad + 16;
    char *h = malloc(cap);
    ck_assert_ptr_nonnull(h);
    size_t len = 0;
    h[len++] = '{';
    for (long i = 0; i < n; i++)
        len += (size_t)snprintf(h + len, cap - len,
                                "%s\"t%07ld\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[0,0]}",
                                i ? "," : "", i);
    h[len++] = '}';
    while (len < pad)
        h[len++] = ' ';
    h[len] = 0;
    write_st(path, h, 0);
    free(h);
}

START_TEST(test_many_tensors)
{
    /* 8 MiB of empty tensors (147,000 of them) took 262 MB and seconds: more
     * tensors than a file may name are refused before any is built */
    char *path = temp_path(".safetensors");
    write_empty_tensors(path, (8L << 20) / 57, 0);
    const load_fn loads[] = {create_from, teacher_from};
    for (int k = 0; k < 2; k++) {
        outcome o = in_child(loads[k], path, NULL);
        ck_assert_msg(o.st == LATTICE_ERR_FORMAT && strstr(o.err, "tensors"), "loader %d: %s (%s)",
                      k, lattice_status_string(o.st), o.err);
        ck_assert_msg(o.seconds < (UNDER_ASAN ? 5.0 : 1.0), "loader %d: took %.2f s", k, o.seconds);
        if (!UNDER_ASAN)
            ck_assert_msg(o.rss_growth_kb < 48 * 1024, "loader %d: resident memory grew by %ld KiB",
                          k, o.rss_growth_kb);
    }
    /* as many as a file may name parse (the file then lacks what the loader
     * wants), in bounded memory and time */
    write_empty_tensors(path, 1L << 16, 0);
    outcome o = in_child(create_from, path, NULL);
    ck_assert_msg(o.st == LATTICE_ERR_FORMAT && strstr(o.err, "lattice.config"), "%s (%s)",
                  lattice_status_string(o.st), o.err);
    ck_assert_msg(o.seconds < (UNDER_ASAN ? 10.0 : 2.0), "65536 tensors took %.2f s", o.seconds);
    if (!UNDER_ASAN)
        ck_assert_msg(o.rss_growth_kb < 160 * 1024, "65536 tensors: resident memory grew by %ld KiB",
                      o.rss_growth_kb);
    /* a header over 16 MiB is refused by its length alone */
    write_empty_tensors(path, 1, (16u << 20) + 1);
    o = in_child(create_from, path, NULL);
    ck_assert_msg(o.st == LATTICE_ERR_FORMAT && strstr(o.err, "header length"), "%s (%s)",
                  lattice_status_string(o.st), o.err);
    unlink(path);
}
END_TEST

int main(void)
{
    Suite *s = suite_create("limits");
    TCase *tc = tcase_create("limits");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_add_test(tc, test_huge_config_small_file);
    tcase_add_loop_test(tc, test_huge_qwen3_config, 0, 2);
    tcase_add_test(tc, test_many_tensors);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
