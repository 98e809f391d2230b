/* Teachers: where teacher logits come from (a model, a callback, a recorded
 * file), and recording a model's into such a file. */
#include "teacher_access.h"

#include "handle.h"
#include "model_access.h"
#include "safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lattice_teacher {
    lattice_model *model; /* borrowed; NULL for a callback teacher */
    lattice_teacher_fn fn;
    void *user;
    int vocab, max_batch, max_seq;
    float *buf; /* callback and dense-file teachers' logits */
    /* a file teacher: stored batches [n, max_batch, max_seq] */
    st_file sf;
    int is_file, k;
    int64_t n_stored, cursor;
    int32_t *stored_tokens, *ibuf;
    uint64_t *seen, stamp; /* a top-k teacher: where each token was last seen in a row */
    const st_tensor *t_logits, *t_index, *t_value;
    char err[LATTICE_ERRMSG_MAX];
    lattice_busy busy;     /* the thread inside a call that asks the teacher */
    lattice_borrow borrow; /* by its trainer */
};

lattice_status lattice_teacher_create_model(lattice_model *model, lattice_teacher **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_model: invalid argument: out is NULL");
    *out = NULL;
    if (!model)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_model: invalid argument: model is NULL");
    lattice_teacher *t = calloc(1, sizeof(*t));
    if (!t)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_teacher_create_model: out of memory");
    lattice_status st = lattice__model_borrow(model, "lattice_teacher_create_model");
    if (st != LATTICE_OK) {
        free(t);
        return st;
    }
    t->model = model;
    const lattice_model_params *mp = lattice__model_params(model);
    t->vocab = mp->vocab_size;
    t->max_batch = mp->max_batch;
    t->max_seq = mp->max_seq;
    *out = t;
    return LATTICE_OK;
}

lattice_status lattice_teacher_create_callback(lattice_teacher_fn fn, void *user, int vocab_size,
                                               int max_batch, int max_seq, lattice_teacher **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_callback: invalid argument: out is NULL");
    *out = NULL;
    if (!fn)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_callback: invalid argument: fn is NULL");
    if (vocab_size < 1 || max_batch < 1 || max_seq < 1)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_callback: invalid argument: vocab_size %d, max_batch %d and "
            "max_seq %d must each be >= 1", vocab_size, max_batch, max_seq);
    if ((double)vocab_size * max_batch * max_seq > (double)(SIZE_MAX / 8))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_callback: invalid argument: vocab_size %d x max_batch %d x "
            "max_seq %d logits would not fit in memory", vocab_size, max_batch, max_seq);
    lattice_teacher *t = calloc(1, sizeof(*t));
    if (!t)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_teacher_create_callback: out of memory");
    t->fn = fn;
    t->user = user;
    t->vocab = vocab_size;
    t->max_batch = max_batch;
    t->max_seq = max_seq;
    t->buf = malloc(sizeof(float) * (size_t)vocab_size * max_batch * max_seq);
    if (!t->buf) {
        free(t);
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_teacher_create_callback: out of memory");
    }
    *out = t;
    return LATTICE_OK;
}

static void teacher_free(lattice_teacher *t)
{
    lattice_model *m = t->model;
    if (t->is_file)
        lattice__st_close(&t->sf);
    free(t->buf);
    free(t->stored_tokens);
    free(t->ibuf);
    free(t->seen);
    free(t);
    lattice__model_unborrow(m);
}

LATTICE__BORROWABLE(lattice_teacher, teacher, "teacher", teacher_free)

lattice_status lattice__teacher_enter(lattice_teacher *t, const char *fn)
{
    lattice_status st = lattice__busy_enter(&t->busy, fn, "teacher");
    if (st != LATTICE_OK || !t->model)
        return st;
    if ((st = lattice__busy_enter(lattice__model_busy(t->model), fn, "model")) != LATTICE_OK)
        lattice__busy_leave(&t->busy);
    return st;
}

void lattice__teacher_leave(lattice_teacher *t)
{
    if (t->model)
        lattice__busy_leave(lattice__model_busy(t->model));
    lattice__busy_leave(&t->busy);
}

/* Check a file tensor's dims against [n, batch, seq, last]. */
static int dims_are(const st_tensor *x, int ndim, const int64_t *want)
{
    if (!x || x->ndim != ndim)
        return 0;
    for (int i = 0; i < ndim; i++)
        if (x->shape[i] != want[i])
            return 0;
    return 1;
}

lattice_status lattice_teacher_create_file(const char *path, lattice_teacher **out, char *errmsg)
{
    char local[LATTICE_ERRMSG_MAX];
    char *err = errmsg ? errmsg : local;
    err[0] = 0;
    if (!out) /* the caller's buffer says it too (ERRORS.md) */
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_create_file: invalid argument: out is NULL");
    *out = NULL;
    if (!path)
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    lattice_teacher *t = calloc(1, sizeof(*t));
    if (!t)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_teacher_create_file: out of memory");
    lattice_status st = lattice__st_open(&t->sf, path, err);
    if (st != LATTICE_OK) {
        free(t);
        return st;
    }
    t->is_file = 1;
    const st_tensor *tok = lattice__st_find(&t->sf, "tokens");
#define BADF(...) do { st = lattice__set_error(err, LATTICE_ERR_FORMAT, __VA_ARGS__); goto fail; } while (0)
    if (!tok || tok->dtype != ST_I32 || tok->ndim != 3 || tok->shape[0] < 1 || tok->shape[1] < 1 ||
        tok->shape[2] < 1 || tok->shape[1] > (1 << 20) || tok->shape[2] > (1 << 24))
        BADF("%s: needs an I32 tensor 'tokens' [n, batch, seq]", path);
    t->n_stored = tok->shape[0];
    t->max_batch = (int)tok->shape[1];
    t->max_seq = (int)tok->shape[2];
    t->t_logits = lattice__st_find(&t->sf, "logits");
    t->t_index = lattice__st_find(&t->sf, "topk_index");
    t->t_value = lattice__st_find(&t->sf, "topk_value");
    if (t->t_logits) {
        if (t->t_logits->ndim != 4 || t->t_logits->shape[3] < 1 || t->t_logits->shape[3] > (1 << 24))
            BADF("%s: 'logits' must be [n, batch, seq, vocab]", path);
        if (!lattice__st_is_float(t->t_logits->dtype))
            BADF("%s: 'logits' must be F32, F16, BF16 or F64", path);
        t->vocab = (int)t->t_logits->shape[3];
        int64_t want[4] = {t->n_stored, t->max_batch, t->max_seq, t->vocab};
        if (!dims_are(t->t_logits, 4, want))
            BADF("%s: 'logits' and 'tokens' disagree on [n, batch, seq]", path);
    } else {
        const char *vs = lattice__st_meta(&t->sf, "vocab_size");
        char *end = NULL;
        long v = vs ? strtol(vs, &end, 10) : 0;
        if (!t->t_index || !t->t_value || !vs || *end || v < 1 || v > (1 << 24))
            BADF("%s: needs 'logits', or 'topk_index' and 'topk_value' with a vocab_size in the metadata",
                 path);
        t->vocab = (int)v;
        if (t->t_index->ndim != 4 || t->t_index->dtype != ST_I32 || t->t_index->shape[3] < 1 ||
            t->t_index->shape[3] > t->vocab)
            BADF("%s: 'topk_index' must be I32 [n, batch, seq, k] with k <= vocab_size", path);
        t->k = (int)t->t_index->shape[3];
        int64_t want[4] = {t->n_stored, t->max_batch, t->max_seq, t->k};
        if (!dims_are(t->t_index, 4, want) || !dims_are(t->t_value, 4, want))
            BADF("%s: 'topk_index', 'topk_value' and 'tokens' disagree on their shapes", path);
        if (!lattice__st_is_float(t->t_value->dtype))
            BADF("%s: 'topk_value' must be F32, F16, BF16 or F64", path);
    }
    const int64_t cells = (int64_t)t->max_batch * t->max_seq;
    const int64_t per = t->k ? t->k : t->vocab;
    t->stored_tokens = malloc(sizeof(int32_t) * (size_t)(t->n_stored * cells));
    t->buf = malloc(sizeof(float) * (size_t)(cells * per));
    t->ibuf = t->k ? malloc(sizeof(int32_t) * (size_t)(cells * t->k)) : NULL;
    t->seen = t->k ? calloc((size_t)t->vocab, sizeof(uint64_t)) : NULL;
    if (!t->stored_tokens || !t->buf || (t->k && (!t->ibuf || !t->seen))) {
        st = lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %s", path);
        goto fail;
    }
    if ((st = lattice__st_read_raw(&t->sf, tok, ST_I32, t->stored_tokens, t->n_stored * cells, err)) !=
        LATTICE_OK)
        goto fail;
#undef BADF
    *out = t;
    return LATTICE_OK;
fail:
    lattice_teacher_destroy(t);
    return st;
}

int lattice_teacher_get_k(const lattice_teacher *t) { return t ? t->k : 0; }

int lattice__teacher_is_file(const lattice_teacher *t) { return t && t->is_file; }

uint64_t lattice__teacher_identity(const lattice_teacher *t, int *kind)
{
    uint64_t h = LATTICE__HASH_START;
    *kind = !t ? 0 : t->is_file ? 3 : t->model ? 1 : 2;
    if (*kind == 1) {
        h = lattice__model_identity(t->model, h);
    } else if (*kind == 3) {
        /* the batches it answers for (a callback is known only by its address,
         * which differs between processes) */
        const int64_t cells = (int64_t)t->max_batch * t->max_seq;
        h = lattice__hash(h, &t->n_stored, sizeof(t->n_stored));
        h = lattice__hash(h, t->stored_tokens, sizeof(int32_t) * (size_t)(t->n_stored * cells));
    }
    return h;
}

/* The stored batch whose first seq positions of its first batch rows match. */
static int64_t find_stored(lattice_teacher *t, const int32_t *tokens, int batch, int seq)
{
    const int64_t cells = (int64_t)t->max_batch * t->max_seq;
    for (int64_t probe = 0; probe < t->n_stored; probe++) {
        int64_t b = (t->cursor + probe) % t->n_stored;
        const int32_t *st = t->stored_tokens + b * cells;
        int same = 1;
        for (int r = 0; r < batch && same; r++)
            same = memcmp(st + (int64_t)r * t->max_seq, tokens + (int64_t)r * seq,
                          sizeof(int32_t) * (size_t)seq) == 0;
        if (same) {
            t->cursor = (b + 1) % t->n_stored;
            return b;
        }
    }
    return -1;
}

/* Rows [0, batch) and positions [0, seq) of stored batch b's tensor x (last dim w) into dst. */
static lattice_status read_rows(lattice_teacher *t, const st_tensor *x, int64_t b, int batch,
                                int seq, int64_t w, void *dst, int is_index)
{
    for (int r = 0; r < batch; r++) {
        int64_t first = ((b * t->max_batch + r) * t->max_seq) * w;
        int64_t count = (int64_t)seq * w;
        lattice_status st;
        if (is_index) {
            /* integer rows: a view onto this row's span of the tensor */
            st_tensor view = *x;
            view.begin = x->begin + (uint64_t)first * 4;
            view.end = view.begin + (uint64_t)count * 4;
            view.ndim = 1;
            view.shape[0] = count;
            st = lattice__st_read_raw(&t->sf, &view, ST_I32, (int32_t *)dst + (int64_t)r * count,
                                      count, t->err);
        } else {
            st = lattice__st_read_f32_range(&t->sf, x, first, (float *)dst + (int64_t)r * count,
                                            count, t->err);
        }
        if (st != LATTICE_OK)
            return st;
    }
    return LATTICE_OK;
}

static lattice_status check_request(lattice_teacher *t, const int32_t *tokens, int batch, int seq)
{
    if (!tokens)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "tokens must not be NULL");
    if (batch < 1 || seq < 1 || batch > t->max_batch || seq > t->max_seq)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "batch %d x %d beyond the teacher's %d x %d",
                    batch, seq, t->max_batch, t->max_seq);
    return LATTICE_OK;
}

static lattice_status teacher_topk(lattice_teacher *t, const int32_t *tokens, int batch, int seq,
                                   const int32_t **index, const float **value)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_topk: invalid argument: teacher is NULL");
    if (!index || !value)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "index and value must not be NULL");
    *index = NULL;
    *value = NULL;
    if (!t->k)
        return FAIL(t, LATTICE_ERR_UNSUPPORTED, "a dense teacher: use lattice_teacher_logits");
    lattice_status st = check_request(t, tokens, batch, seq);
    if (st != LATTICE_OK)
        return st;
    int64_t b = find_stored(t, tokens, batch, seq);
    if (b < 0)
        return FAIL(t, LATTICE_ERR_NOT_FOUND, "no stored batch matches these tokens");
    if ((st = read_rows(t, t->t_index, b, batch, seq, t->k, t->ibuf, 1)) != LATTICE_OK ||
        (st = read_rows(t, t->t_value, b, batch, seq, t->k, t->buf, 0)) != LATTICE_OK)
        return st;
    const int64_t n = (int64_t)batch * seq * t->k;
    for (int64_t i = 0; i < n; i++) {
        if (i % t->k == 0)
            t->stamp++; /* a position's k tokens: distinct, as the loss reads them */
        if (t->ibuf[i] < 0 || t->ibuf[i] >= t->vocab)
            return FAIL(t, LATTICE_ERR_FORMAT, "stored top-k index %d outside the vocabulary",
                        (int)t->ibuf[i]);
        if (t->seen[t->ibuf[i]] == t->stamp)
            return FAIL(t, LATTICE_ERR_FORMAT,
                        "stored top-k index %d repeated at position %lld of the batch: a "
                        "position's k tokens are distinct", (int)t->ibuf[i],
                        (long long)(i / t->k));
        t->seen[t->ibuf[i]] = t->stamp;
        if (!isfinite(t->buf[i]))
            return FAIL(t, LATTICE_ERR_NON_FINITE, "stored top-k value %lld is not finite",
                        (long long)i);
    }
    *index = t->ibuf;
    *value = t->buf;
    return LATTICE_OK;
}

const char *lattice_teacher_errmsg(const lattice_teacher *t)
{
    return t ? t->err : "no teacher (NULL handle)";
}

int lattice_teacher_get_vocab_size(const lattice_teacher *t) { return t ? t->vocab : 0; }

static lattice_status teacher_logits(lattice_teacher *t, const int32_t *tokens, int batch,
                                     int seq, const float **logits)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_logits: invalid argument: teacher is NULL");
    if (!tokens || !logits)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "tokens and logits must not be NULL");
    *logits = NULL;
    if (batch < 1 || seq < 1 || batch > t->max_batch || seq > t->max_seq)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "batch %d x %d beyond the teacher's %d x %d",
                    batch, seq, t->max_batch, t->max_seq);
    const float *z;
    if (t->is_file) {
        if (t->k)
            return FAIL(t, LATTICE_ERR_UNSUPPORTED, "a top-k teacher: use lattice_teacher_topk");
        int64_t b = find_stored(t, tokens, batch, seq);
        if (b < 0)
            return FAIL(t, LATTICE_ERR_NOT_FOUND, "no stored batch matches these tokens");
        lattice_status st = read_rows(t, t->t_logits, b, batch, seq, t->vocab, t->buf, 0);
        if (st != LATTICE_OK)
            return st;
        z = t->buf;
    } else if (t->model) {
        lattice_status st = lattice_model_forward(t->model, tokens, batch, seq);
        if (st != LATTICE_OK)
            return FAIL(t, st, "teacher model: %s", lattice_model_errmsg(t->model));
        z = lattice_model_get_logits(t->model);
    } else {
        if (t->fn(t->user, tokens, batch, seq, t->vocab, t->buf) != 0)
            return FAIL(t, LATTICE_ERR_BACKEND, "the teacher callback reported failure");
        z = t->buf;
    }
    const long n = (long)batch * seq * t->vocab;
    for (long i = 0; i < n; i++)
        if (!isfinite(z[i]))
            return FAIL(t, LATTICE_ERR_NON_FINITE, "teacher logit %ld is not finite", i);
    *logits = z;
    return LATTICE_OK;
}

double lattice_teacher_get_flops(const lattice_teacher *t, int batch, int seq)
{
    return t && t->model ? lattice_model_get_flops(t->model, batch, seq, 0) : 0.0;
}

static lattice_status teacher_init_student(lattice_teacher *t, lattice_model *s)
{
    if (lattice__need(LATTICE__ERRBUF(t), "lattice_teacher_init_student", 2,
                      (const void *)t, "teacher", (const void *)s, "s") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (!t->model)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG, "only a model teacher can initialise a student");
    char why[160];
    const lattice_status st = lattice__model_take_ends(s, t->model, why, sizeof why);
    return st == LATTICE_OK ? st : FAIL(t, st, "%s", why);
}

/* The k largest of z[0..v) into idx/val, largest first. */
static void top_k(const float *z, int v, int k, int32_t *idx, float *val)
{
    int n = 0;
    for (int j = 0; j < v; j++) {
        if (n == k && z[j] <= val[k - 1])
            continue;
        int at = n < k ? n++ : k - 1;
        while (at > 0 && val[at - 1] < z[j]) {
            val[at] = val[at - 1];
            idx[at] = idx[at - 1];
            at--;
        }
        val[at] = z[j];
        idx[at] = j;
    }
}

static lattice_status teacher_record(lattice_teacher *t, lattice_data *data, int64_t n_batches,
                                     int k, const char *path)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_teacher_record: invalid argument: teacher is NULL");
    if (!data || !path || n_batches < 1 || k < 0 || k > t->vocab)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT,
                    "need data, a path, n_batches >= 1 and 0 <= k <= vocab (%d)", t->vocab);
    if (t->k)
        return FAIL(t, LATTICE_ERR_UNSUPPORTED, "a top-k teacher cannot record dense logits");
    lattice_data_params dp = {.size = sizeof(dp)};
    lattice_data_get_params(data, &dp);
    const int B = dp.batch_size, T = dp.seq_len, V = t->vocab, w = k ? k : V;
    if (dp.vocab_size > V)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "the data's vocabulary exceeds the teacher's");
    const double cells = (double)n_batches * B * T;
    if (cells * (w + 2.0) * 4.0 > (double)(SIZE_MAX / 2))
        return FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "the recording would not fit in memory");
    int32_t *tok = malloc(sizeof(int32_t) * (size_t)cells);
    float *val = calloc((size_t)(cells * w), sizeof(float));
    int32_t *idx = k ? calloc((size_t)(cells * k), sizeof(int32_t)) : NULL;
    lattice_status st = LATTICE_OK;
    if (!tok || !val || (k && !idx))
        st = FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the recording");
    for (size_t i = 0; st == LATTICE_OK && i < (size_t)cells; i++)
        tok[i] = dp.pad_id;
    for (int64_t i = 0; st == LATTICE_OK && i < n_batches; i++) {
        lattice_data_batch b;
        const float *z;
        if ((st = lattice_data_next(data, &b)) != LATTICE_OK)
            break;
        if ((st = lattice_teacher_logits(t, b.tokens, b.batch, b.seq, &z)) != LATTICE_OK)
            break;
        for (int r = 0; r < b.batch; r++)
            for (int j = 0; j < b.seq; j++) {
                const int64_t cell = (i * B + r) * T + j, src = (int64_t)r * b.seq + j;
                tok[cell] = b.tokens[src];
                if (k)
                    top_k(z + src * V, V, k, idx + cell * k, val + cell * k);
                else
                    memcpy(val + cell * V, z + src * V, sizeof(float) * (size_t)V);
            }
    }
    if (st == LATTICE_OK) {
        char vs[32];
        snprintf(vs, sizeof vs, "%d", V);
        const char *meta[] = {"format", "pt", "vocab_size", vs, NULL};
        st_entry e[3] = {{"tokens", ST_I32, 3, {n_batches, B, T}, tok},
                         {k ? "topk_value" : "logits", ST_F32, 4, {n_batches, B, T, w}, val},
                         {"topk_index", ST_I32, 4, {n_batches, B, T, k}, idx}};
        st = lattice__st_write(path, e, k ? 3 : 2, meta, t->err);
    }
    free(tok);
    free(val);
    free(idx);
    return st;
}

/* ---- the public calls, each holding the teacher and its model (handle.h) ---- */

static lattice_status init_student_held(lattice_teacher *t, lattice_model *s)
{
    if (!t)
        return teacher_init_student(t, s);
    lattice_status st = lattice__teacher_enter(t, "lattice_teacher_init_student");
    if (st != LATTICE_OK)
        return st;
    st = teacher_init_student(t, s);
    lattice__teacher_leave(t);
    return st;
}

#define TEACHER_HELD(t, fn, expr)                                                                  \
    do {                                                                                           \
        if (!(t))                                                                                  \
            return (expr);                                                                         \
        lattice_status held_st_ = lattice__teacher_enter((t), (fn));                               \
        if (held_st_ != LATTICE_OK)                                                                \
            return held_st_;                                                                       \
        held_st_ = (expr);                                                                         \
        lattice__teacher_leave(t);                                                                 \
        return held_st_;                                                                           \
    } while (0)

lattice_status lattice_teacher_topk(lattice_teacher *t, const int32_t *tokens, int batch, int seq,
                                    const int32_t **index, const float **value)
{
    TEACHER_HELD(t, "lattice_teacher_topk", teacher_topk(t, tokens, batch, seq, index, value));
}

lattice_status lattice_teacher_logits(lattice_teacher *t, const int32_t *tokens, int batch,
                                      int seq, const float **logits)
{
    TEACHER_HELD(t, "lattice_teacher_logits", teacher_logits(t, tokens, batch, seq, logits));
}

lattice_status lattice_teacher_init_student(lattice_teacher *t, lattice_model *s)
{
    /* the student's weights are written: it is held too */
    LATTICE__INSIDE_BUSY(lattice__model_busy(s), "lattice_teacher_init_student", "model",
                         init_student_held(t, s));
}

lattice_status lattice_teacher_record(lattice_teacher *t, lattice_data *data, int64_t n_batches,
                                      int k, const char *path)
{
    TEACHER_HELD(t, "lattice_teacher_record", teacher_record(t, data, n_batches, k, path));
}
