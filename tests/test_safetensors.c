/* safetensors: round trips under every placement, F16/BF16 loading, a corpus
 * of broken files, and atomic writes under a kill (config.json:
 * test_qwen3_config.c). */
#include "testutil.h"

#include <dirent.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* Under UBSan, undefined behaviour fails the test instead of printing a line. */
const char *__ubsan_default_options(void);
const char *__ubsan_default_options(void) { return "halt_on_error=1:print_stacktrace=1"; }

#include "model_files.h"

START_TEST(test_round_trip)
{
    /* _i: placement x kind, then tied */
    lattice_norm_placement pl = (lattice_norm_placement)(_i % 3);
    lattice_norm_kind kind = (lattice_norm_kind)((_i / 3) % 2);
    lattice_model *a = small_model(pl, kind, _i >= 6, 1), *c = small_model(pl, kind, _i >= 6, 2);
    char *path = temp_path(".safetensors");
    ck_assert_int_eq(lattice_model_save(a, path), LATTICE_OK);
    lattice_model *b;
    char err[LATTICE_ERRMSG_SIZE];
    ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) == LATTICE_OK, "%s", err);
    ck_assert_int_eq(lattice_model_get_placement(b), pl);
    ck_assert_int_eq(lattice_model_get_active_layers(b), 2);
    expect_same_logits(a, b);
    ck_assert_int_eq(lattice_model_load(c, path), LATTICE_OK);
    expect_same_logits(a, c);
    /* a file of another placement does not fit */
    lattice_model *other = small_model((lattice_norm_placement)((_i + 1) % 3), kind, _i >= 6, 1);
    ck_assert_int_eq(lattice_model_load(other, path), LATTICE_ERR_FORMAT);
    ck_assert_ptr_nonnull(strstr(lattice_model_errmsg(other), "the file's placement is "));
    unlink(path);
    lattice_model_destroy(a);
    lattice_model_destroy(b);
    lattice_model_destroy(c);
    lattice_model_destroy(other);
}
END_TEST

/* ---- hand-made files -------------------------------------------------------------- */

typedef struct blob {
    unsigned char *data;
    size_t len, cap;
} blob;

static void put(blob *b, const void *p, size_t n)
{
    if (b->len + n > b->cap) {
        b->cap = (b->len + n) * 2;
        b->data = realloc(b->data, b->cap);
    }
    memcpy(b->data + b->len, p, n);
    b->len += n;
}

/* A file with the given header text and data bytes. */
static char *write_file(const char *header, uint64_t header_len, const void *data, size_t n)
{
    blob b = {0};
    unsigned char len[8];
    for (int i = 0; i < 8; i++)
        len[i] = (unsigned char)(header_len >> (8 * i));
    put(&b, len, 8);
    put(&b, header, strlen(header));
    if (data && n)
        put(&b, data, n);
    char *path = temp_path(".bad");
    FILE *f = fopen(path, "wb");
    fwrite(b.data, 1, b.len, f);
    fclose(f);
    free(b.data);
    return path;
}

static uint16_t to_bf16(float x)
{
    uint32_t u;
    memcpy(&u, &x, 4);
    return (uint16_t)(u >> 16);
}

static uint16_t to_f16(float x) /* normal range, round toward zero: enough for a test */
{
    uint32_t u;
    memcpy(&u, &x, 4);
    uint32_t sign = (u >> 16) & 0x8000, exp = (u >> 23) & 0xff, man = u & 0x7fffff;
    if (exp == 0 || x == 0.0f)
        return (uint16_t)sign;
    int e = (int)exp - 127 + 15;
    if (e <= 0)
        return (uint16_t)sign;
    return (uint16_t)(sign | (uint32_t)e << 10 | man >> 13);
}

/* Rewrite a model as a file of 16-bit floats (F16 or BF16). */
static char *write_half_model(lattice_model *m, int bf16)
{
    char header[16384];
    size_t hl = 0;
    blob data = {0};
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "{");
    for (int i = 0; i < lattice_model_get_n_tensors(m); i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(m, i, &ti);
        long n = (long)(ti.shape[0] * ti.shape[1]);
        size_t begin = data.len;
        for (long j = 0; j < n; j++) {
            uint16_t h = bf16 ? to_bf16(ti.data[j]) : to_f16(ti.data[j]);
            unsigned char le[2] = {(unsigned char)h, (unsigned char)(h >> 8)};
            put(&data, le, 2);
        }
        if (ti.ndim == 2)
            hl += (size_t)snprintf(header + hl, sizeof header - hl,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld,%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", ti.name, bf16 ? "BF16" : "F16",
                                   (long long)ti.shape[0], (long long)ti.shape[1], begin, data.len);
        else
            hl += (size_t)snprintf(header + hl, sizeof header - hl,
                                   "%s\"%s\":{\"dtype\":\"%s\",\"shape\":[%lld],\"data_offsets\":[%zu,%zu]}",
                                   i ? "," : "", ti.name, bf16 ? "BF16" : "F16",
                                   (long long)ti.shape[0], begin, data.len);
    }
    hl += (size_t)snprintf(header + hl, sizeof header - hl, "}");
    char *path = write_file(header, hl, data.data, data.len);
    free(data.data);
    return path;
}

START_TEST(test_half_precision)
{
    lattice_model *a = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 3);
    lattice_model *b = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 4);
    char *path = write_half_model(a, _i);
    ck_assert_msg(lattice_model_load(b, path) == LATTICE_OK, "%s", lattice_model_errmsg(b));
    const float tol = _i ? 1.0f / 128 : 1.0f / 1024; /* bf16 keeps 8 bits, f16 11 */
    for (int i = 0; i < lattice_model_get_n_tensors(a); i++) {
        lattice_model_tensor_info x, y;
        lattice_model_get_tensor(a, i, &x);
        lattice_model_get_tensor(b, i, &y);
        for (long j = 0; j < x.shape[0] * x.shape[1]; j++)
            ck_assert_msg(fabsf(x.data[j] - y.data[j]) <= tol * fabsf(x.data[j]) + 1e-7f,
                          "%s[%ld]: %g vs %g", x.name, j, x.data[j], y.data[j]);
    }
    unlink(path);
    lattice_model_destroy(a);
    lattice_model_destroy(b);
}
END_TEST

/* ---- broken files -------------------------------------------------------------------- */

static void expect_refused(const char *path, const char *why)
{
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1), *b;
    lattice_status st = lattice_model_load(m, path);
    ck_assert_msg(st == LATTICE_ERR_FORMAT || st == LATTICE_ERR_IO, "%s: status %d", why, st);
    ck_assert_msg(lattice_model_errmsg(m)[0] != 0, "%s: no message", why);
    char err[LATTICE_ERRMSG_SIZE];
    st = lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err);
    ck_assert_msg(st == LATTICE_ERR_FORMAT || st == LATTICE_ERR_IO, "%s: create gave %d", why, st);
    ck_assert_ptr_null(b);
    lattice_model_destroy(m);
}

#define ONE_TENSOR(dtype, shape, offs) \
    "{\"model.embed_tokens.weight\":{\"dtype\":\"" dtype "\",\"shape\":" shape ",\"data_offsets\":" offs "}}"

START_TEST(test_broken_corpus)
{
    static unsigned char zeros[4096];
    struct {
        const char *header;
        int64_t len_delta; /* added to the true header length */
        size_t data;
        const char *why;
    } cases[] = {
        {"", -1, 0, "empty header"},
        {"{}", 1000, 0, "header length past the end"},
        {"{}", -((int64_t)1 << 40), 0, "absurd header length"},
        {"{\"a\": ", 0, 0, "truncated JSON"},
        {"[1, 2, 3]", 0, 0, "JSON that is not an object"},
        {"{\"a\": 1} junk", 0, 0, "trailing bytes after the JSON"},
        {ONE_TENSOR("Q8", "[13,8]", "[0,416]"), 0, 416, "unknown dtype"},
        {ONE_TENSOR("F32", "[-13,8]", "[0,416]"), 0, 416, "negative shape"},
        {ONE_TENSOR("F32", "[4294967296,4294967296,4294967296]", "[0,416]"), 0, 416,
         "shape whose size overflows"},
        {ONE_TENSOR("F32", "[13,8]", "[0,416]"), 0, 100, "data past the end (truncated file)"},
        {ONE_TENSOR("F32", "[13,8]", "[0,400]"), 0, 416, "offsets that disagree with the shape"},
        {ONE_TENSOR("F32", "[13,8]", "[416,0]"), 0, 416, "end before begin"},
        {ONE_TENSOR("F32", "13", "[0,416]"), 0, 416, "shape not an array"},
        {ONE_TENSOR("F32", "[13,8]", "[0]"), 0, 416, "one offset"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]},"
         "\"y\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[8,24]}}",
         0, 24, "overlapping tensors"},
        {"{\"__metadata__\":{\"a\":1}}", 0, 0, "metadata that is not a string"},
        {"{\"__metadata__\":[]}", 0, 0, "metadata that is not an object"},
        {"{\"x\":{\"dtype\":\"F32\",\"shape\":[4],\"data_offsets\":[0,16]}}", 0, 16,
         "a valid file without the model's tensors"},
        {"{\"x\":5}", 0, 0, "an entry that is not an object"},
        {"{\"model.embed_tokens.weight\":{\"dtype\":\"I32\",\"shape\":[13,8],\"data_offsets\":[0,416]}}",
         0, 416, "integer data where floats belong"},
        {"{\"model.embed_tokens.weight\":{\"dtype\":\"F32\",\"shape\":[8,13],\"data_offsets\":[0,416]}}",
         0, 416, "transposed shape"},
        {"{\"__metadata__\":{\"lattice.config\":\"{\\\"d_model\\\": \\\"eight\\\"}\"}}", 0, 0,
         "a config of the wrong types"},
        {"{\"__metadata__\":{\"lattice.config\":\"not json\"}}", 0, 0, "a config that is not JSON"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        uint64_t hl = (uint64_t)((int64_t)strlen(cases[i].header) + cases[i].len_delta);
        char *path = write_file(cases[i].header, hl, zeros, cases[i].data);
        expect_refused(path, cases[i].why);
        unlink(path);
    }
    /* files cut at every length of a valid one */
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1);
    char *good = temp_path(".safetensors");
    ck_assert_int_eq(lattice_model_save(m, good), LATTICE_OK);
    FILE *f = fopen(good, "rb");
    fseek(f, 0, SEEK_END);
    long size = ftell(f);
    fseek(f, 0, SEEK_SET);
    unsigned char *all = malloc((size_t)size);
    ck_assert_int_eq(fread(all, 1, (size_t)size, f), (size_t)size);
    fclose(f);
    char *cut = temp_path(".cut");
    for (long len = 0; len < size; len += len < 64 ? 1 : 97) {
        f = fopen(cut, "wb");
        fwrite(all, 1, (size_t)len, f);
        fclose(f);
        expect_refused(cut, "a truncated file");
    }
    ck_assert_int_eq(lattice_model_load(m, "/nonexistent/model.safetensors"), LATTICE_ERR_IO);
    ck_assert_int_eq(lattice_model_load(m, "/tmp"), LATTICE_ERR_IO);
    unlink(cut);
    unlink(good);
    free(all);
    lattice_model_destroy(m);
}
END_TEST

/* ---- atomic writes --------------------------------------------------------------------- */

/* Entries of a directory, . and .. left out. */
static int entries_in(const char *dir)
{
    DIR *d = opendir(dir);
    ck_assert_ptr_nonnull(d);
    int n = 0;
    for (struct dirent *e; (e = readdir(d)) != NULL;)
        n += strcmp(e->d_name, ".") != 0 && strcmp(e->d_name, "..") != 0;
    closedir(d);
    return n;
}

START_TEST(test_atomic_write_survives_kill)
{
    char dir[] = "/tmp/lattice-atomic-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_POST, LATTICE_NORM_KIND_RMS, 0, 5);
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    for (int round = 0; round < 5; round++) {
        pid_t pid = fork();
        ck_assert_int_ge(pid, 0);
        if (pid == 0) { /* a writer that saves forever until killed */
            for (;;)
                lattice_model_save(m, path);
        }
        usleep(2000 + 3000 * round);
        kill(pid, SIGKILL);
        waitpid(pid, NULL, 0);
        lattice_model *b;
        char err[LATTICE_ERRMSG_SIZE];
        ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) == LATTICE_OK,
                      "round %d: %s", round, err);
        expect_same_logits(m, b);
        lattice_model_destroy(b);
    }
    /* the killed writers' temporary files go with the next save */
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    ck_assert_int_eq(entries_in(dir), 1);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
    lattice_model_destroy(m);
}
END_TEST


/* ---- paths that are not regular files ------------------------------------------------ */

/* A trainer over a small model, for checkpoint loads: the rig's grow run of
 * 3 one-layer blocks over small_model's shape. */
static const int32_t run_ids[] = {12, 1, 2, 3, 4, 12, 5, 6, 7, 12, 8, 9, 1, 2, 12, 3, 3, 4};

static void open_small_run(rig *r)
{
    rig_options o;
    rig_options_init(&o);
    o.norm_eps = 1e-5f;
    o.model.vocab_size = 13;
    o.model.n_layers = 3;
    o.model.max_seq = 6;
    o.model.seed = 7;
    o.model.init_std = 0.2f;
    o.ids = run_ids;
    o.n_ids = sizeof run_ids / sizeof run_ids[0];
    o.n_blocks = 3;
    tu_rig_open(r, &o);
}

static void expect_not_regular(lattice_status st, const char *msg, const char *loader,
                               const char *kind)
{
    ck_assert_msg(st == LATTICE_ERR_IO, "%s on a %s: status %d (%s)", loader, kind, st, msg);
    ck_assert_msg(strstr(msg, "not a regular file") && strstr(msg, kind), "%s on a %s: '%s'",
                  loader, kind, msg);
}

START_TEST(test_not_regular_files)
{
    /* every loader, given a directory or a FIFO without a writer, says so at
     * once; a loader that blocked on the FIFO would be killed by the alarm */
    alarm(60);
    char dir[] = "/tmp/lattice-special-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char fifo[96], sub[96], model_path[96], text_path[96];
    snprintf(fifo, sizeof fifo, "%s/fifo", dir);
    snprintf(sub, sizeof sub, "%s/dir", dir);
    snprintf(model_path, sizeof model_path, "%s/model.safetensors", dir);
    snprintf(text_path, sizeof text_path, "%s/text", dir);
    ck_assert_int_eq(mkfifo(fifo, 0600), 0);
    ck_assert_int_eq(mkdir(sub, 0700), 0);
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1);
    ck_assert_int_eq(lattice_model_save(m, model_path), LATTICE_OK);
    FILE *f = fopen(text_path, "w");
    fputs("one document\fanother one", f);
    fclose(f);
    rig r;
    open_small_run(&r);
    const char *paths[2] = {sub, fifo}, *kinds[2] = {"directory", "FIFO"};
    for (int k = 0; k < 2; k++) {
        const char *p = paths[k];
        char err[LATTICE_ERRMSG_SIZE];
        expect_not_regular(lattice_model_load(m, p), lattice_model_errmsg(m), "model_load", kinds[k]);
        lattice_model *b = NULL;
        expect_not_regular(lattice_model_create_from_file(p, NULL, be, 2, 6, &b, err), err,
                           "create_from_file", kinds[k]);
        ck_assert_ptr_null(b);
        expect_not_regular(lattice_model_create_from_file(model_path, p, be, 2, 6, &b, err), err,
                           "create_from_file's config.json", kinds[k]);
        ck_assert_ptr_null(b);
        lattice_data_params dp;
        lattice_data_params_init(&dp);
        dp.batch_size = 1;
        dp.seq_len = 4;
        lattice_data *d = NULL;
        expect_not_regular(lattice_data_create_text(p, &dp, &d, err), err, "data_create_text",
                           kinds[k]);
        ck_assert_ptr_null(d);
        dp.val_path = p;
        expect_not_regular(lattice_data_create_text(text_path, &dp, &d, err), err,
                           "data_create_text's val_path", kinds[k]);
        ck_assert_ptr_null(d);
        dp.val_path = NULL;
        dp.vocab_size = 13;
        dp.boundary_id = 12;
        for (int w = 2; w <= 4; w += 2) {
            expect_not_regular(lattice_data_create_tokens(p, w, &dp, &d, err), err,
                               "data_create_tokens", kinds[k]);
            ck_assert_ptr_null(d);
        }
        lattice_teacher *t = NULL;
        expect_not_regular(lattice_teacher_create_file(p, &t, err), err, "teacher_create_file",
                           kinds[k]);
        ck_assert_ptr_null(t);
        expect_not_regular(lattice_trainer_load_checkpoint(r.trainer, p),
                           lattice_trainer_errmsg(r.trainer), "trainer_load_checkpoint", kinds[k]);
    }
    rig_close(&r);
    lattice_model_destroy(m);
    alarm(0);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* ---- hostile shapes ---------------------------------------------------------------- */

START_TEST(test_hostile_shapes)
{
    /* shapes whose element or byte count overflows (in any order, also beside
     * a zero that makes the tensor empty), negative sizes, sizes past int64,
     * and more than 8 dims, as every tensor a loader reads: refused by the
     * reader with the reason, before any count is formed (UBSan halts on an
     * overflow) */
    static const struct {
        const char *shape, *offsets, *why;
    } bad[] = {
        {"[9223372036854775807,2]", "[0,0]", "overflows"},
        {"[9223372036854775807,2,0]", "[0,0]", "overflows"},
        {"[0,9223372036854775807,2]", "[0,0]", "overflows"},
        {"[4294967296,4294967296,0]", "[0,0]", "overflows"},
        {"[4611686018427387904,2,0]", "[0,0]", "overflows"}, /* 2^63 elements */
        {"[-1,0]", "[0,0]", "0..2^63-1"},
        {"[0,-9223372036854775808]", "[0,0]", "0..2^63-1"},
        {"[9223372036854775808,0]", "[0,0]", "0..2^63-1"},
        {"[18446744073709551615,0]", "[0,0]", "0..2^63-1"},
        {"[1,1,1,1,1,1,1,1,1]", "[0,1]", "at most 8"},
        {"[0,0,0,0,0,0,0,0,0]", "[0,0]", "at most 8"},
    };
    static const char *const names[] = {"model.embed_tokens.weight", "optim.steps", "tokens",
                                        "logits"};
    static const char *const dtypes[] = {"U8", "F32", "I64"};
    static unsigned char zeros[8];
    rig r;
    open_small_run(&r);
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++)
        for (size_t n = 0; n < sizeof names / sizeof names[0]; n++)
            for (size_t d = 0; d < sizeof dtypes / sizeof dtypes[0]; d++) {
                char header[512], what[640], err[LATTICE_ERRMSG_SIZE];
                int hl = snprintf(header, sizeof header,
                                  "{\"%s\":{\"dtype\":\"%s\",\"shape\":%s,\"data_offsets\":%s}}",
                                  names[n], dtypes[d], bad[i].shape, bad[i].offsets);
                snprintf(what, sizeof what, "%s %s %s", names[n], dtypes[d], bad[i].shape);
                char *path = write_file(header, (uint64_t)hl, zeros, 1);
                ck_assert_msg(lattice_model_load(m, path) == LATTICE_ERR_FORMAT, "%s", what);
                ck_assert_msg(strstr(lattice_model_errmsg(m), bad[i].why), "%s: '%s'", what,
                              lattice_model_errmsg(m));
                ck_assert_msg(lattice_trainer_load_checkpoint(r.trainer, path) == LATTICE_ERR_FORMAT,
                              "%s", what);
                ck_assert_msg(strstr(lattice_trainer_errmsg(r.trainer), bad[i].why), "%s: '%s'",
                              what, lattice_trainer_errmsg(r.trainer));
                lattice_teacher *t = NULL;
                ck_assert_msg(lattice_teacher_create_file(path, &t, err) == LATTICE_ERR_FORMAT, "%s",
                              what);
                ck_assert_msg(strstr(err, bad[i].why), "%s: '%s'", what, err);
                lattice_model *b = NULL;
                ck_assert_msg(lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err) ==
                                  LATTICE_ERR_FORMAT, "%s", what);
                ck_assert_msg(strstr(err, bad[i].why), "%s: '%s'", what, err);
                unlink(path);
            }
    /* empty tensors of huge but representable shapes stay readable: a U8
     * [0, 2^63-1] is a valid empty tensor, refused only as the wrong tensor */
    const char *empty = "{\"optim.steps\":{\"dtype\":\"U8\",\"shape\":[0,9223372036854775807],"
                        "\"data_offsets\":[0,0]}}";
    char *path = write_file(empty, strlen(empty), zeros, 1);
    ck_assert_int_eq(lattice_trainer_load_checkpoint(r.trainer, path), LATTICE_ERR_FORMAT);
    ck_assert_ptr_null(strstr(lattice_trainer_errmsg(r.trainer), "overflows"));
    unlink(path);
    lattice_model_destroy(m);
    rig_close(&r);
}
END_TEST

/* ---- strict JSON ------------------------------------------------------------------- */

#define EMB "\"model.embed_tokens.weight\""
#define EMB_ENTRY "{\"dtype\":\"F32\",\"shape\":[13,8],\"data_offsets\":[0,416]}"

START_TEST(test_strict_headers)
{
    /* headers other safetensors readers would read differently from json-c (a
     * key cut at \u0000, a key named twice) or not at all: every loader refuses
     * them, naming the reason */
    static const struct {
        const char *header, *why;
    } bad[] = {
        {"{" EMB ":" EMB_ENTRY ",\"model.embed_tokens.weight\\u0000x\":" EMB_ENTRY "}", "\\u0000"},
        {"{\"model.embed_tokens.weight\\u0000\":" EMB_ENTRY "}", "\\u0000"},
        {"{" EMB ":" EMB_ENTRY "," EMB ":" EMB_ENTRY "}", "twice"},
        {"{\"model.embed_tokens.\\u0077eight\":" EMB_ENTRY "," EMB ":" EMB_ENTRY "}", "twice"},
        {"{\"__metadata__\":{\"format\":\"pt\",\"format\":\"np\"}}", "twice"},
        {"{" EMB ":{\"dtype\":\"F32\",\"dtype\":\"F32\",\"shape\":[13,8],\"data_offsets\":[0,416]}}",
         "twice"},
        {"{/* comment */" EMB ":" EMB_ENTRY "}", "comment"},
        {"{" EMB ":" EMB_ENTRY "// comment\n}", "comment"},
        {"{'model.embed_tokens.weight':" EMB_ENTRY "}", "single-quoted"},
        {"{" EMB ":{\"dtype\":'F32',\"shape\":[13,8],\"data_offsets\":[0,416]}}", "single-quoted"},
        {"{" EMB ":" EMB_ENTRY ",}", "trailing comma"},
        {"{" EMB ":{\"dtype\":\"F32\",\"shape\":[13,8,],\"data_offsets\":[0,416]}}", "trailing comma"},
        {"{" EMB ":{\"dtype\":\"F32\",\"shape\":[13,NaN],\"data_offsets\":[0,416]}}", "NaN"},
        {"{\"__metadata__\":{\"a\":\"b\"},\"x\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4],"
         "\"flag\":TRUE}}",
         "bare word"},
        {"{" EMB ":{\"dtype\":\"F32\",\"shape\":[013,8],\"data_offsets\":[0,416]}}", "byte"},
        {"{\"model.embed_tokens.weight\xff\":" EMB_ENTRY "}", "UTF-8"},
        {"{\"model.embed_tokens.weight\xc0\xae\":" EMB_ENTRY "}", "UTF-8"},
        {"{\"model.embed_tokens.weight\\ud800\":" EMB_ENTRY "}", "surrogate"},
        {"{\"model.embed_tokens.weight\\udc00\":" EMB_ENTRY "}", "surrogate"},
        {"{\"model.embed\x01tokens.weight\":" EMB_ENTRY "}", "control character"},
        {" {" EMB ":" EMB_ENTRY "}", "no '{'"},
        {"{" EMB ":" EMB_ENTRY "}\n", "other than spaces"},
        {"{" EMB ":" EMB_ENTRY "}  \t", "other than spaces"},
        {"{" EMB ":" EMB_ENTRY "}{}", "other than spaces"},
        /* the JSON inside the metadata is held to the same rules */
        {"{\"__metadata__\":{\"lattice.config\":\"{\\\"placement\\\":\\\"pre\\\",\\\"placement\\\":"
         "\\\"post\\\"}\",\"lattice.checkpoint\":\"{\\\"optim\\\":{},\\\"optim\\\":{}}\"}}",
         "twice"},
        {"{\"__metadata__\":{\"lattice.config\":\"{/**/}\",\"lattice.checkpoint\":\"{/**/}\"}}",
         "comment"},
    };
    static float zeros[104];
    rig r;
    open_small_run(&r);
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 1);
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = write_file(bad[i].header, strlen(bad[i].header), zeros, sizeof zeros);
        char err[LATTICE_ERRMSG_SIZE];
        lattice_status st = lattice_model_load(m, path);
        ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(lattice_model_errmsg(m), bad[i].why),
                      "case %zu, load: %d '%s'", i, st, lattice_model_errmsg(m));
        lattice_model *b = NULL;
        st = lattice_model_create_from_file(path, NULL, be, 2, 6, &b, err);
        ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(err, bad[i].why),
                      "case %zu, create_from_file: %d '%s'", i, st, err);
        st = lattice_trainer_load_checkpoint(r.trainer, path);
        ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(lattice_trainer_errmsg(r.trainer), bad[i].why),
                      "case %zu, load_checkpoint: %d '%s'", i, st, lattice_trainer_errmsg(r.trainer));
        /* the teacher reads no lattice.* metadata */
        if (!strstr(bad[i].header, "lattice.config")) {
            lattice_teacher *t = NULL;
            st = lattice_teacher_create_file(path, &t, err);
            ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(err, bad[i].why),
                          "case %zu, teacher: %d '%s'", i, st, err);
        }
        unlink(path);
    }
    /* spaces after the object are the format's padding */
    const char *padded = "{" EMB ":" EMB_ENTRY "}       ";
    char *path = write_file(padded, strlen(padded), zeros, sizeof zeros);
    ck_assert_msg(lattice_model_load(m, path) == LATTICE_ERR_FORMAT &&
                      strstr(lattice_model_errmsg(m), "missing"),
                  "%s", lattice_model_errmsg(m));
    unlink(path);
    lattice_model_destroy(m);
    rig_close(&r);
}
END_TEST

/* ---- what a save leaves: temporary files, links, modes --------------------------------- */

static int exists(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    struct stat st;
    return lstat(p, &st) == 0;
}

static void touch(const char *dir, const char *name)
{
    char p[256];
    snprintf(p, sizeof p, "%s/%s", dir, name);
    FILE *f = fopen(p, "w");
    ck_assert_ptr_nonnull(f);
    fputs("partial", f);
    fclose(f);
}

static pid_t dead_pid(void)
{
    pid_t pid = fork();
    ck_assert_int_ge(pid, 0);
    if (pid == 0)
        _exit(0);
    waitpid(pid, NULL, 0);
    return pid;
}

START_TEST(test_stale_temps_removed)
{
    char dir[] = "/tmp/lattice-stale-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(dir));
    char path[128], name[128], locked[128];
    snprintf(path, sizeof path, "%s/model.safetensors", dir);
    lattice_model *m = small_model(LATTICE_NORM_PLACEMENT_PRE, LATTICE_NORM_KIND_RMS, 0, 2);
    const pid_t dead = dead_pid(), dead2 = dead_pid();
    /* left by killed writers: removed */
    const char *stale[] = {"model.safetensors.tmp.%d.0", "model.safetensors.tmp.%d.4294967295"};
    /* a live writer's, one another machine or pid namespace is writing (its pid
     * means nothing here, its lock does), and names that are not ours: kept */
    const char *kept[] = {"model.safetensors.tmp.%d", "model.safetensors.tmp.%d.x",
                          "model.safetensors.tmp.%d.1.2", "other.safetensors.tmp.%d.0",
                          "model.safetensorstmp.%d.0", "model.safetensors.tmp.-%d.0"};
    for (size_t i = 0; i < 2; i++) {
        snprintf(name, sizeof name, stale[i], (int)dead);
        touch(dir, name);
    }
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        snprintf(name, sizeof name, kept[i], (int)dead);
        touch(dir, name);
    }
    snprintf(name, sizeof name, "model.safetensors.tmp.%d.3", (int)getpid());
    touch(dir, name);
    snprintf(locked, sizeof locked, "model.safetensors.tmp.%d.9", (int)dead2);
    touch(dir, locked);
    int ready[2];
    ck_assert_int_eq(pipe(ready), 0);
    pid_t holder = fork();
    ck_assert_int_ge(holder, 0);
    if (holder == 0) {
        char p[256];
        snprintf(p, sizeof p, "%s/%s", dir, locked);
        int fd = open(p, O_RDONLY);
        if (fd < 0 || flock(fd, LOCK_EX) != 0)
            _exit(1);
        if (write(ready[1], "x", 1) != 1)
            _exit(1);
        pause();
        _exit(0);
    }
    char c;
    ck_assert_int_eq(read(ready[0], &c, 1), 1);
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    kill(holder, SIGKILL);
    waitpid(holder, NULL, 0);
    close(ready[0]);
    close(ready[1]);
    for (size_t i = 0; i < 2; i++) {
        snprintf(name, sizeof name, stale[i], (int)dead);
        ck_assert_msg(!exists(dir, name), "%s was left", name);
    }
    for (size_t i = 0; i < sizeof kept / sizeof kept[0]; i++) {
        snprintf(name, sizeof name, kept[i], (int)dead);
        ck_assert_msg(exists(dir, name), "%s was removed", name);
    }
    snprintf(name, sizeof name, "model.safetensors.tmp.%d.3", (int)getpid());
    ck_assert_msg(exists(dir, name), "a live process's %s was removed", name);
    ck_assert_msg(exists(dir, locked), "a locked %s was removed", locked);
    /* its lock gone, the next save takes it */
    ck_assert_int_eq(lattice_model_save(m, path), LATTICE_OK);
    ck_assert_msg(!exists(dir, locked), "%s was left after its lock went", locked);
    lattice_model_destroy(m);
    char cmd[160];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* Every writer: a model, a checkpoint, recorded teacher logits. */
static lattice_status save_with(int writer, rig *r, const char *path)
{
    if (writer == 0)
        return lattice_model_save(r->model, path);
    if (writer == 1)
        return lattice_trainer_save_checkpoint(r->trainer, path);
    lattice_teacher *t;
    ck_assert_int_eq(lattice_teacher_create_model(r->model, &t), LATTICE_OK);
    lattice_data_position pos;
    lattice_data_get_position(r->data, &pos);
    lattice_status st = lattice_teacher_record(t, r->data, 1, 0, path);
    lattice_data_set_position(r->data, &pos);
    lattice_teacher_destroy(t);
    return st;
}

static mode_t mode_of(const char *p)
{
    struct stat st;
    ck_assert_int_eq(stat(p, &st), 0);
    return st.st_mode & 07777;
}

START_TEST(test_save_through_links_keeps_mode)
{
    /* _i: the writer. A save through a symbolic link (relative, chained)
     * replaces the file at the end of the chain and leaves the links; the file
     * keeps its permission bits; a dangling link's target is created */
    const mode_t was = umask(022);
    char top[] = "/tmp/lattice-links-XXXXXX";
    ck_assert_ptr_nonnull(mkdtemp(top));
    char a[128], b[128], real[160], link1[160], link2[160], dangling[160], fresh[160], loop[160];
    snprintf(a, sizeof a, "%s/a", top);
    snprintf(b, sizeof b, "%s/b", top);
    ck_assert_int_eq(mkdir(a, 0755), 0);
    ck_assert_int_eq(mkdir(b, 0755), 0);
    snprintf(real, sizeof real, "%s/real.safetensors", a);
    snprintf(link1, sizeof link1, "%s/link1", b);
    snprintf(link2, sizeof link2, "%s/link2", b);
    snprintf(dangling, sizeof dangling, "%s/dangling", b);
    snprintf(fresh, sizeof fresh, "%s/fresh.safetensors", b);
    snprintf(loop, sizeof loop, "%s/loop", b);
    rig r;
    open_small_run(&r);
    /* a new file: 0666 less the umask */
    ck_assert_int_eq(save_with(_i, &r, real), LATTICE_OK);
    ck_assert_int_eq(mode_of(real), 0644);
    static const mode_t modes[] = {0600, 0664, 0640, 0604};
    for (int k = 0; k < 4; k++) {
        ck_assert_int_eq(chmod(real, modes[k]), 0);
        ck_assert_int_eq(save_with(_i, &r, real), LATTICE_OK);
        ck_assert_msg(mode_of(real) == modes[k], "mode %o became %o", modes[k], mode_of(real));
    }
    ck_assert_int_eq(symlink("../a/real.safetensors", link1), 0);
    ck_assert_int_eq(symlink("link1", link2), 0);
    ck_assert_int_eq(chmod(real, 0600), 0);
    ck_assert_int_eq(save_with(_i, &r, link2), LATTICE_OK);
    struct stat st;
    ck_assert_int_eq(lstat(link1, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(link2, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(mode_of(real), 0600);
    ck_assert_int_eq(entries_in(a), 1);
    ck_assert_int_eq(entries_in(b), 2);
    /* what went through the links is what a direct save writes */
    char direct[160];
    snprintf(direct, sizeof direct, "%s/direct.safetensors", top);
    ck_assert_int_eq(save_with(_i, &r, direct), LATTICE_OK);
    char cmd[400];
    snprintf(cmd, sizeof cmd, "cmp -s %s %s", direct, real);
    ck_assert_msg(system(cmd) == 0, "the file saved through the links differs");
    ck_assert_int_eq(symlink("fresh.safetensors", dangling), 0);
    ck_assert_int_eq(save_with(_i, &r, dangling), LATTICE_OK);
    ck_assert_int_eq(lstat(dangling, &st), 0);
    ck_assert(S_ISLNK(st.st_mode));
    ck_assert_int_eq(lstat(fresh, &st), 0);
    ck_assert(S_ISREG(st.st_mode));
    /* a loop of links is an error, not a hang */
    ck_assert_int_eq(symlink("loop", loop), 0);
    lattice_status s = save_with(_i, &r, loop);
    ck_assert_int_eq(s, LATTICE_ERR_IO);
    rig_close(&r);
    umask(was);
    snprintf(cmd, sizeof cmd, "rm -rf %s", top);
    ck_assert_int_eq(system(cmd), 0);
}
END_TEST

/* A teacher file whose logits (or top-k values) are not a float type is
 * refused when it is opened, naming the tensor: it opened, and every batch
 * asked of it then failed with the safetensors reader's message. */
START_TEST(test_teacher_file_float_dtypes)
{
    static const struct {
        const char *header, *why;
    } bad[] = {
        {"{\"tokens\":{\"dtype\":\"I32\",\"shape\":[1,1,2],\"data_offsets\":[0,8]},"
         "\"logits\":{\"dtype\":\"I32\",\"shape\":[1,1,2,3],\"data_offsets\":[8,32]}}",
         "'logits' must be F32, F16, BF16 or F64"},
        {"{\"__metadata__\":{\"vocab_size\":\"3\"},"
         "\"tokens\":{\"dtype\":\"I32\",\"shape\":[1,1,2],\"data_offsets\":[0,8]},"
         "\"topk_index\":{\"dtype\":\"I32\",\"shape\":[1,1,2,1],\"data_offsets\":[8,16]},"
         "\"topk_value\":{\"dtype\":\"U8\",\"shape\":[1,1,2,1],\"data_offsets\":[16,18]}}",
         "'topk_value' must be F32, F16, BF16 or F64"},
    };
    static int32_t zeros[8];
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        char *path = write_file(bad[i].header, strlen(bad[i].header), zeros, sizeof zeros);
        char err[LATTICE_ERRMSG_SIZE];
        lattice_teacher *t = NULL;
        const lattice_status st = lattice_teacher_create_file(path, &t, err);
        ck_assert_msg(st == LATTICE_ERR_FORMAT && strstr(err, bad[i].why), "case %zu: %d '%s'", i,
                      st, err);
        ck_assert_ptr_null(t);
        unlink(path);
    }
}
END_TEST

/* A top-k file whose position names one token twice: the loss would count it
 * twice in the teacher's distribution; refused as the file's fault (FORMAT,
 * naming the index and the position) when the batch is read. */
START_TEST(test_topk_repeated_index)
{
    static const char header[] =
        "{\"__metadata__\":{\"vocab_size\":\"3\"},"
        "\"tokens\":{\"dtype\":\"I32\",\"shape\":[1,1,2],\"data_offsets\":[0,8]},"
        "\"topk_index\":{\"dtype\":\"I32\",\"shape\":[1,1,2,2],\"data_offsets\":[8,24]},"
        "\"topk_value\":{\"dtype\":\"F32\",\"shape\":[1,1,2,2],\"data_offsets\":[24,40]}}";
    for (int repeated = 0; repeated < 2; repeated++) {
        struct {
            int32_t tokens[2], index[4];
            float value[4];
        } data = {{0, 1}, {2, 0, 1, repeated ? 1 : 2}, {1.0f, 0.5f, 2.0f, 1.0f}};
        char *path = write_file(header, strlen(header), &data, sizeof data);
        char err[LATTICE_ERRMSG_SIZE];
        lattice_teacher *t = NULL;
        ck_assert_msg(lattice_teacher_create_file(path, &t, err) == LATTICE_OK, "%s", err);
        const int32_t *ix;
        const float *vx;
        const lattice_status st = lattice_teacher_topk(t, data.tokens, 1, 2, &ix, &vx);
        if (repeated) {
            ck_assert_int_eq(st, LATTICE_ERR_FORMAT);
            ck_assert_ptr_nonnull(strstr(lattice_teacher_errmsg(t), "index 1 repeated at position 1"));
        } else {
            ck_assert_int_eq(st, LATTICE_OK);
            ck_assert_int_eq(ix[3], 2);
        }
        lattice_teacher_destroy(t);
        unlink(path);
    }
}
END_TEST

int main(void)
{
    Suite *s = suite_create("safetensors");
    TCase *tc = tcase_create("safetensors");
    tcase_add_checked_fixture(tc, setup, teardown);
    tcase_set_timeout(tc, 120);
    tcase_add_loop_test(tc, test_round_trip, 0, 7);
    tcase_add_loop_test(tc, test_half_precision, 0, 2);
    tcase_add_test(tc, test_broken_corpus);
    tcase_add_test(tc, test_atomic_write_survives_kill);
    tcase_add_test(tc, test_not_regular_files);
    tcase_add_test(tc, test_hostile_shapes);
    tcase_add_test(tc, test_strict_headers);
    tcase_add_test(tc, test_stale_temps_removed);
    tcase_add_test(tc, test_teacher_file_float_dtypes);
    tcase_add_test(tc, test_topk_repeated_index);
    tcase_add_loop_test(tc, test_save_through_links_keeps_mode, 0, 3);
    suite_add_tcase(s, tc);
    return tu_run(s);
}
