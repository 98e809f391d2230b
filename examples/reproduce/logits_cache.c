/* The teacher's logits for every training row, computed once per study (logits_cache.h). */
#include "logits_cache.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>
#include <xxhash.h>

#include "files.h"
#include "runs.h"

/* every run's batches so far: from the file, and computed by the teacher */
static atomic_llong all_from_file, all_computed;

/* The file:
 *   lc_head (HEAD_BYTES, zero-padded)
 *   logits: n_pos x vocab float32, every row's real positions, rows one after another
 *   tokens: n_pos int32, the rows' tokens at those positions
 *   lens:   n_rows int32, each row's positions
 * check is XXH64 of every byte after the head. Written on this host for this
 * host: the byte order is the machine's, and a file from another fails the key. */
#define HEAD_BYTES 4096
#define NAME "teacher_logits.bin"
static const char MAGIC[8] = {'L', 'A', 'T', 'L', 'O', 'G', 0, 1};
/* headroom the disk keeps after the file: the runs' own files, the reports */
#define DISK_SPARE ((uint64_t)1 << 30)

typedef struct lc_head {
    char magic[8];
    uint32_t byte_order; /* 0x01020304 as written */
    uint32_t vocab, seq_len, pad_id, threads, reserved;
    uint64_t n_rows, n_pos, check;
    char teacher[24], corpus[24], backend[32];
} lc_head;

struct logits_cache {
    const float *logits;
    const int32_t *tokens, *lens;
    int64_t *start; /* [n_rows + 1]: each row's first position */
    int64_t *slot;  /* open addressing: row index + 1, 0 for empty */
    uint64_t *slot_key;
    size_t slot_mask;
    lc_head h;
    void *map;
    size_t map_size;
};

/* A row's key: its n tokens without the pad ids that end them, so that a
 * batch row (its real tokens, then padding) and the file's rows it may match
 * (find_row) share it. Every token counts: rows that open alike (a licence,
 * a header) do not share a probe chain. */
static uint64_t row_key(const int32_t *tok, int n, int pad)
{
    while (n > 0 && tok[n - 1] == pad)
        n--;
    return xxh_bytes(tok, sizeof(int32_t) * (size_t)n);
}

/* the key a row of the file has */
static uint64_t stored_key(const logits_cache *c, int64_t r)
{
    return row_key(c->tokens + c->start[r], c->lens[r], (int)c->h.pad_id);
}

/* The file's row matching a batch row of seq tokens: its real tokens, then
 * padding. -1 when none does. A batch row does not carry its length, and
 * the pad id is a token text may hold (byte 0), so rows of the file whose
 * tokens are the batch row's with fewer of its trailing pad ids may match
 * too: the longest is taken. It holds every real position of the batch row,
 * and each of those positions' logits depends only on the tokens up to it,
 * which the two rows share; a shorter one would leave real positions
 * without logits. */
static int64_t find_row(const logits_cache *c, const int32_t *row, int seq)
{
    const uint64_t key = row_key(row, seq, (int)c->h.pad_id);
    int64_t best = -1;
    for (size_t i = key & c->slot_mask; c->slot[i]; i = (i + 1) & c->slot_mask) {
        if (c->slot_key[i] != key)
            continue;
        const int64_t r = c->slot[i] - 1;
        const int n = c->lens[r];
        if (n > seq || (best >= 0 && n <= c->lens[best]) ||
            memcmp(row, c->tokens + c->start[r], sizeof(int32_t) * (size_t)n) != 0)
            continue;
        int j = n;
        while (j < seq && row[j] == (int32_t)c->h.pad_id)
            j++;
        if (j == seq)
            best = r;
    }
    return best;
}

void logits_cache_close(logits_cache *c)
{
    if (!c)
        return;
    if (c->map)
        munmap(c->map, c->map_size);
    free(c->start);
    free(c->slot);
    free(c->slot_key);
    free(c);
}

static void head_want(lc_head *h, const preset *p, int vocab, lattice_backend *be,
                      const char *teacher_hex, const char *corpus_hex)
{
    memset(h, 0, sizeof *h);
    memcpy(h->magic, MAGIC, sizeof MAGIC);
    h->byte_order = 0x01020304u;
    h->vocab = (uint32_t)vocab;
    h->seq_len = (uint32_t)p->seq_len;
    h->threads = (uint32_t)lattice_backend_get_threads(be);
    snprintf(h->teacher, sizeof h->teacher, "%s", teacher_hex);
    snprintf(h->corpus, sizeof h->corpus, "%s", corpus_hex);
    snprintf(h->backend, sizeof h->backend, "%s", lattice_backend_get_name(be));
}

/* Whether the file's head is the one wanted; what differs into why. */
static int head_matches(const lc_head *got, const lc_head *want, char *why, size_t n)
{
    if (memcmp(got->magic, MAGIC, sizeof MAGIC) != 0 || got->byte_order != want->byte_order)
        snprintf(why, n, "not a logits file of this version and host");
    else if (strncmp(got->teacher, want->teacher, sizeof got->teacher) != 0)
        snprintf(why, n, "made for another teacher");
    else if (strncmp(got->corpus, want->corpus, sizeof got->corpus) != 0)
        snprintf(why, n, "made on another corpus");
    else if (strncmp(got->backend, want->backend, sizeof got->backend) != 0 ||
             got->threads != want->threads)
        snprintf(why, n, "made by another backend or thread count");
    else if (got->vocab != want->vocab || got->seq_len != want->seq_len)
        snprintf(why, n, "made for another vocabulary or row length");
    else
        return 1;
    return 0;
}

/* Map the file and index its rows: NULL with why when it is not the one wanted. */
static logits_cache *open_file(const char *path, const lc_head *want, char *why, size_t why_n)
{
    uint64_t size;
    const int fd = open_regular(path, &size);
    if (fd < 0) {
        snprintf(why, why_n, "%s", errno == ENOENT ? "none yet" : strerror(errno));
        return NULL;
    }
    logits_cache *c = calloc(1, sizeof *c);
    if (!c)
        die("out of memory");
    if (size < HEAD_BYTES || size > SIZE_MAX) {
        snprintf(why, why_n, "a file of %llu bytes", (unsigned long long)size);
        goto fail;
    }
    c->map_size = (size_t)size;
    c->map = mmap(NULL, c->map_size, PROT_READ, MAP_SHARED, fd, 0);
    if (c->map == MAP_FAILED) {
        c->map = NULL;
        snprintf(why, why_n, "cannot map it: %s", strerror(errno));
        goto fail;
    }
    memcpy(&c->h, c->map, sizeof c->h);
    if (!head_matches(&c->h, want, why, why_n))
        goto fail;
    const uint64_t v = c->h.vocab, np = c->h.n_pos, nr = c->h.n_rows;
    /* sizes bounded before they are multiplied: a damaged head is refused, never trusted */
    if (np > ((uint64_t)1 << 40) / (v + 1) || nr > np + ((uint64_t)1 << 32) ||
        size != HEAD_BYTES + np * v * 4 + np * 4 + nr * 4) {
        snprintf(why, why_n, "its size does not match its head");
        goto fail;
    }
    const char *body = (const char *)c->map + HEAD_BYTES;
    if (xxh_bytes(body, c->map_size - HEAD_BYTES) != c->h.check) {
        snprintf(why, why_n, "its checksum does not match its bytes");
        goto fail;
    }
    c->logits = (const float *)body;
    c->tokens = (const int32_t *)(body + np * v * 4);
    c->lens = c->tokens + np;
    c->start = malloc(sizeof(int64_t) * (nr + 1));
    size_t slots = 16;
    while (slots < 2 * nr)
        slots *= 2;
    c->slot = calloc(slots, sizeof(int64_t));
    c->slot_key = calloc(slots, sizeof(uint64_t));
    if (!c->start || !c->slot || !c->slot_key)
        die("out of memory");
    c->slot_mask = slots - 1;
    c->start[0] = 0;
    for (uint64_t r = 0; r < nr; r++) {
        if (c->lens[r] < 0 || c->lens[r] > (int32_t)c->h.seq_len ||
            (uint64_t)(c->start[r] + c->lens[r]) > np) {
            snprintf(why, why_n, "row %llu's length does not fit", (unsigned long long)r);
            goto fail;
        }
        c->start[r + 1] = c->start[r] + c->lens[r];
    }
    if ((uint64_t)c->start[nr] != np) {
        snprintf(why, why_n, "its rows do not cover its positions");
        goto fail;
    }
    for (uint64_t r = 0; r < nr; r++) {
        const uint64_t key = stored_key(c, (int64_t)r);
        size_t i = key & c->slot_mask;
        while (c->slot[i])
            i = (i + 1) & c->slot_mask;
        c->slot[i] = (int64_t)r + 1;
        c->slot_key[i] = key;
    }
    close(fd);
    return c;
fail:
    close(fd);
    logits_cache_close(c);
    return NULL;
}

/* check() for a step of the file's making: on a failure the partial file (as
 * large as the whole) goes first, then the study stops with the message. */
static void check_making(outfile *o, lattice_status st, const char *what, const char *detail)
{
    if (st != LATTICE_OK)
        out_abort(o);
    check(st, what, detail);
}

/* Compute every training row's logits into path, whole or not at all: 0, or
 * -1 with why (too little room on the disk). */
static int build_file(const preset *p, lattice_model *teacher, const lc_head *want,
                      const char *dir, const char *path, char *why, size_t why_n)
{
    lattice_data *d = open_data(p, 1);
    const int64_t n_rows = lattice_data_get_n_documents(d, LATTICE_DATA_SPLIT_TRAIN);
    const int B = p->batch, V = (int)want->vocab;
    const int64_t n_batches = (n_rows + B - 1) / B;
    lattice_data_params dp;
    dp.size = sizeof dp;
    check(lattice_data_get_params(d, &dp), "the data's settings", lattice_data_errmsg(d));
    /* the rows and their lengths first: the size the file will take */
    int32_t *lens = malloc(sizeof(int32_t) * (size_t)(n_rows > 0 ? n_rows : 1));
    if (!lens)
        die("out of memory");
    int64_t n_pos = 0, r = 0;
    for (int64_t b = 0; b < n_batches; b++) {
        lattice_data_batch bt;
        check(lattice_data_next(d, &bt), "the training rows", lattice_data_errmsg(d));
        for (int i = 0; i < bt.batch && r < n_rows; i++, r++) {
            int n = 0;
            while (n < bt.seq && bt.mask[(size_t)i * bt.seq + n])
                n++;
            lens[r] = n;
            n_pos += n;
        }
    }
    const uint64_t bytes = HEAD_BYTES + (uint64_t)n_pos * ((uint64_t)V * 4 + 4) + (uint64_t)n_rows * 4;
    struct statvfs fs;
    if (statvfs(dir, &fs) == 0 && (uint64_t)fs.f_bavail * fs.f_frsize < bytes + DISK_SPARE) {
        snprintf(why, why_n, "it would take %.2f GB and the disk has %.2f GB free (less 1 GiB "
                 "kept spare)", bytes / 1e9, (double)fs.f_bavail * fs.f_frsize / 1e9);
        free(lens);
        lattice_data_destroy(d);
        return -1;
    }
    say("the teacher's logits for the %lld training rows, once for every run (%.*f %s in %s)...\n",
        (long long)n_rows, bytes >= 1e9 ? 2 : 1, bytes >= 1e9 ? bytes / 1e9 : bytes / 1e6,
        bytes >= 1e9 ? "GB" : "MB", NAME);
    const double t0 = ex_now();
    int32_t *tokens = malloc(sizeof(int32_t) * (size_t)(n_pos > 0 ? n_pos : 1));
    if (!tokens)
        die("out of memory");
    /* the same rows again, from the start of the same order */
    const lattice_data_position first = {0, 0};
    check(lattice_data_set_position(d, &first), "the training rows", lattice_data_errmsg(d));
    outfile o;
    out_open(&o, path);
    static const char zeros[HEAD_BYTES];
    fwrite(zeros, 1, HEAD_BYTES, o.f);
    XXH64_state_t *xs = XXH64_createState();
    if (!xs) {
        out_abort(&o);
        die("out of memory");
    }
    XXH64_reset(xs, 0);
    int64_t at = 0;
    r = 0;
    for (int64_t b = 0; b < n_batches; b++) {
        lattice_data_batch bt;
        check_making(&o, lattice_data_next(d, &bt), "the training rows", lattice_data_errmsg(d));
        check_making(&o, lattice_model_forward(teacher, bt.tokens, bt.batch, bt.seq),
                     "the teacher's logits", lattice_model_errmsg(teacher));
        const float *z = lattice_model_get_logits(teacher);
        for (int i = 0; i < bt.batch && r < n_rows; i++, r++) {
            const int n = lens[r];
            const float *zi = z + (size_t)i * bt.seq * V;
            const size_t nb = sizeof(float) * (size_t)n * V;
            fwrite(zi, 1, nb, o.f);
            XXH64_update(xs, zi, nb);
            memcpy(tokens + at, bt.tokens + (size_t)i * bt.seq, sizeof(int32_t) * (size_t)n);
            at += n;
        }
        if (interrupted) { /* no partial file of gigabytes left behind */
            out_abort(&o);
            stop_if_interrupted(dir);
        }
    }
    fwrite(tokens, sizeof(int32_t), (size_t)n_pos, o.f);
    XXH64_update(xs, tokens, sizeof(int32_t) * (size_t)n_pos);
    fwrite(lens, sizeof(int32_t), (size_t)n_rows, o.f);
    XXH64_update(xs, lens, sizeof(int32_t) * (size_t)n_rows);
    lc_head h = *want;
    h.pad_id = (uint32_t)dp.pad_id;
    h.n_rows = (uint64_t)n_rows;
    h.n_pos = (uint64_t)n_pos;
    h.check = XXH64_digest(xs);
    XXH64_freeState(xs);
    if (fseek(o.f, 0, SEEK_SET) != 0) {
        const int e = errno;
        out_abort(&o);
        die("cannot write %s: %s", path, strerror(e));
    }
    fwrite(&h, sizeof h, 1, o.f);
    out_commit(&o);
    say("the teacher's logits: %lld rows, %lld positions in %.1f s\n", (long long)n_rows,
        (long long)n_pos, ex_now() - t0);
    free(tokens);
    free(lens);
    lattice_data_destroy(d);
    return 0;
}

int64_t logits_file_batches(const preset *p)
{
    lattice_data *d = open_data(p, 1);
    const int64_t batches =
        (lattice_data_get_n_documents(d, LATTICE_DATA_SPLIT_TRAIN) + p->batch - 1) / p->batch;
    lattice_data_destroy(d);
    return batches;
}

/* made only where the runs ask for more batches than it costs teacher
 * forwards to make (twice as many: its writes and reads besides) */
int logits_file_worth(const preset *p, int64_t steps_to_run)
{
    return steps_to_run >= 2 * logits_file_batches(p);
}

/* How many rows of the first training batch get other logits when the
 * batch's rows move by one place (row i to i + 1). The file computes each row
 * at one place in its batches and a step asks for it at another: where the
 * backend's GEMMs sum a row's elements in an order that depends on its place
 * (OpenBLAS's Haswell kernels, oneDNN's avx2 ones), the file's logits are
 * the teacher's forward to rounding, not bit for bit. */
static int rows_that_move(const preset *p, lattice_model *teacher, int vocab)
{
    lattice_data *d = open_data(p, 1);
    lattice_data_batch bt;
    check(lattice_data_next(d, &bt), "the training rows", lattice_data_errmsg(d));
    const int B = bt.batch, S = bt.seq;
    const size_t row = (size_t)S * vocab;
    int32_t *moved = malloc(sizeof(int32_t) * (size_t)B * S);
    float *z = malloc(sizeof(float) * row * B);
    if (!moved || !z)
        die("out of memory");
    for (int i = 0; i < B; i++)
        memcpy(moved + (size_t)((i + 1) % B) * S, bt.tokens + (size_t)i * S, sizeof(int32_t) * S);
    check(lattice_model_forward(teacher, bt.tokens, B, S), "the teacher's logits",
          lattice_model_errmsg(teacher));
    memcpy(z, lattice_model_get_logits(teacher), sizeof(float) * row * B);
    check(lattice_model_forward(teacher, moved, B, S), "the teacher's logits",
          lattice_model_errmsg(teacher));
    const float *z2 = lattice_model_get_logits(teacher);
    int differ = 0;
    for (int i = 0; i < B; i++) {
        int n = 0; /* the row's real positions: the file keeps only those */
        while (n < S && bt.mask[(size_t)i * S + n])
            n++;
        differ += memcmp(z + row * i, z2 + row * ((i + 1) % B),
                         sizeof(float) * (size_t)n * vocab) != 0;
    }
    free(moved);
    free(z);
    lattice_data_destroy(d);
    return differ;
}

static logits_cache *logits_cache_say_rounding(logits_cache *c, const preset *p,
                                               lattice_model *teacher, lattice_backend *be,
                                               int vocab)
{
    const int differ = c ? rows_that_move(p, teacher, vocab) : 0;
    if (differ > 0)
        say("the teacher's logits from the file equal its forward in a step to rounding here, "
            "not bit for bit: with the rows of a batch moved by one place, %d of its %d rows "
            "got other logits on this backend's GEMMs (%s); --teacher-logits step computes "
            "them in every step\n",
            differ, p->batch, lattice_backend_get_name(be));
    return c;
}

logits_cache *logits_cache_get(const preset *p, lattice_model *teacher, lattice_backend *be,
                               const char *dir, const char *teacher_hex, const char *corpus_hex,
                               int build, int64_t steps_to_run)
{
    char path[1200], why[256];
    snprintf(path, sizeof path, "%s/%s", dir, NAME);
    lattice_model_params mp;
    lattice_model_params_init(&mp);
    check(lattice_model_get_params(teacher, &mp), "the teacher's settings",
          lattice_model_errmsg(teacher));
    lc_head want;
    head_want(&want, p, mp.vocab_size, be, teacher_hex, corpus_hex);
    logits_cache *c = open_file(path, &want, why, sizeof why);
    if (c || !build) {
        if (!c)
            say("the teacher's logits file %s cannot be used (%s): each run computes them\n",
                path, why);
        return logits_cache_say_rounding(c, p, teacher, be, mp.vocab_size);
    }
    const int64_t batches = logits_file_batches(p);
    if (!logits_file_worth(p, steps_to_run)) {
        say("the teacher's logits: the runs to do take %lld steps, fewer than twice the %lld "
            "batches a file of every training row costs: each run computes them\n",
            (long long)steps_to_run, (long long)batches);
        return NULL;
    }
    if (strcmp(why, "none yet") != 0)
        say("the teacher's logits file %s is replaced (%s)\n", path, why);
    if (build_file(p, teacher, &want, dir, path, why, sizeof why) != 0) {
        say("the teacher's logits are not kept in a file (%s): each run computes them\n", why);
        return NULL;
    }
    c = open_file(path, &want, why, sizeof why);
    if (!c)
        die("cannot read back %s: %s", path, why);
    return logits_cache_say_rounding(c, p, teacher, be, mp.vocab_size);
}

int logits_file_ready(const preset *p, lattice_backend *be, const char *dir,
                      const char *teacher_hex, const char *corpus_hex)
{
    char path[1200], why[64];
    snprintf(path, sizeof path, "%s/%s", dir, NAME);
    lc_head want, got;
    head_want(&want, p, VOCAB, be, teacher_hex, corpus_hex);
    uint64_t size;
    const int fd = open_regular(path, &size);
    if (fd < 0)
        return 0;
    const int ok = size >= HEAD_BYTES && read(fd, &got, sizeof got) == (ssize_t)sizeof got &&
                   head_matches(&got, &want, why, sizeof why);
    close(fd);
    return ok;
}

/* ---- one run's teacher ----------------------------------------------------------------- */

struct run_teacher {
    lattice_teacher *model_teacher, *teacher;
    const logits_cache *c;
    int verify; /* every batch asked of model_teacher too, and compared */
    int64_t *rows; /* [batch]: the file's row of each batch row */
    int64_t from_file, computed;
    double seconds; /* answering */
};

/* The model teacher's logits for the whole batch into out; 0 or -1. */
static int compute(run_teacher *rt, const int32_t *tokens, int batch, int seq, int vocab,
                   float *out)
{
    const float *z;
    if (lattice_teacher_logits(rt->model_teacher, tokens, batch, seq, &z) != LATTICE_OK)
        return -1;
    memcpy(out, z, sizeof(float) * (size_t)batch * seq * vocab);
    rt->computed++;
    return 0;
}

static int answer_rows(run_teacher *rt, const int32_t *tokens, int batch, int seq, int vocab,
                       float *out)
{
    const logits_cache *c = rt->c;
    if (!c)
        return compute(rt, tokens, batch, seq, vocab, out);
    int64_t *rows = rt->rows;
    for (int i = 0; i < batch; i++) {
        rows[i] = find_row(c, tokens + (size_t)i * seq, seq);
        if (rows[i] < 0)
            return compute(rt, tokens, batch, seq, vocab, out);
    }
    for (int i = 0; i < batch; i++) {
        const int n = c->lens[rows[i]];
        float *o = out + (size_t)i * seq * vocab;
        memcpy(o, c->logits + (size_t)c->start[rows[i]] * vocab, sizeof(float) * (size_t)n * vocab);
        /* padding: masked out of the loss, whatever its logits */
        memset(o + (size_t)n * vocab, 0, sizeof(float) * (size_t)(seq - n) * vocab);
    }
    rt->from_file++;
    if (!rt->verify)
        return 0;
    const float *z;
    if (lattice_teacher_logits(rt->model_teacher, tokens, batch, seq, &z) != LATTICE_OK)
        return -1;
    for (int i = 0; i < batch; i++) {
        const size_t nb = sizeof(float) * (size_t)c->lens[rows[i]] * vocab;
        if (memcmp(out + (size_t)i * seq * vocab, z + (size_t)i * seq * vocab, nb) != 0)
            die("--teacher-logits verify: row %d of a batch of %d x %d differs from the teacher's "
                "forward (file row %lld): the file's logits are not bit-identical here",
                i, batch, seq, (long long)rows[i]);
    }
    return 0;
}

static int answer(void *user, const int32_t *tokens, int batch, int seq, int vocab, float *out)
{
    run_teacher *rt = user;
    const double t0 = ex_now();
    const int rc = answer_rows(rt, tokens, batch, seq, vocab, out);
    rt->seconds += ex_now() - t0;
    return rc;
}

double run_teacher_seconds(const run_teacher *rt)
{
    return rt ? rt->seconds : 0.0;
}

lattice_teacher *run_teacher_wrap(lattice_teacher *model_teacher, const logits_cache *c,
                                  int verify, int batch, int seq_len, int timed,
                                  run_teacher **out)
{
    *out = NULL;
    if (!c && !timed)
        return model_teacher;
    run_teacher *rt = calloc(1, sizeof *rt);
    if (!rt || !(rt->rows = malloc(sizeof(int64_t) * (size_t)batch)))
        die("out of memory");
    rt->model_teacher = model_teacher;
    rt->c = c;
    rt->verify = verify;
    check(lattice_teacher_create_callback(answer, rt, lattice_teacher_get_vocab_size(model_teacher),
                                          batch, seq_len, &rt->teacher),
          "the teacher's logits from the file", NULL);
    *out = rt;
    return rt->teacher;
}

void logits_counts(int64_t *from_file, int64_t *computed)
{
    *from_file = atomic_load(&all_from_file);
    *computed = atomic_load(&all_computed);
}

void run_teacher_destroy(run_teacher *rt)
{
    if (!rt)
        return;
    atomic_fetch_add(&all_from_file, rt->from_file);
    atomic_fetch_add(&all_computed, rt->computed);
    lattice_teacher_destroy(rt->teacher);
    free(rt->rows);
    free(rt);
}
