/* Token streams: byte-level text or token-id files, documents, the train and
 * validation splits, batches (padded or packed) in a seeded order. */
#include "data_access.h"
#include "fields.h"
#include "handle.h"

#include "atomic_file.h"

#include <errno.h>
#include <stddef.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lattice_data {
    lattice_data_params p;
    int32_t *ids;
    int64_t n_ids;
    int64_t *doc_start; /* n_docs + 1 offsets into ids */
    int64_t n_docs, n_train;
    /* training iterator */
    int64_t epoch, index;
    int64_t *perm;     /* this epoch's order of the training documents */
    int64_t *cum;      /* packing: tokens before each document in perm order */
    int64_t *rows;     /* documents of the batch being built */
    int64_t perm_epoch; /* epoch perm was drawn for (-1: none) */
    /* the current batch */
    int32_t *tok, *tgt;
    uint8_t *mask;
    uint64_t corpus_hash; /* lattice__data_corpus_hash, computed at its first call */
    int have_hash;
    char err[LATTICE_ERRMSG_MAX];
    lattice_borrow borrow; /* by its trainer */
    lattice_busy busy;     /* the thread inside a call that changes it (handle.h) */
};

void lattice_data_params_init(lattice_data_params *p)
{
    if (!p)
        return;
    memset(p, 0, sizeof(*p));
    p->size = sizeof(*p);
    p->vocab_size = 257;
    p->boundary_id = 256;
    p->separator = "\f";
    p->batch_size = 8;
    p->seq_len = 256;
    p->pack = 0;
    p->trim = 1;
    p->val_fraction = 0.0f;
    p->seed = 0;
    p->pad_id = 0;
    /* Without it a plain text file (one document) trains on its first
     * seq_len + 1 bytes and nothing else. */
    p->split_long = 1;
}

static lattice_status check_params(const lattice_data_params *p, int text, char *err)
{
#define BAD(...) return lattice__set_error(err, LATTICE_ERR_INVALID_CONFIG, __VA_ARGS__)
    if (p->vocab_size < 1)
        BAD("vocab_size %d must be positive", p->vocab_size);
    if (p->boundary_id < -1 || p->boundary_id >= p->vocab_size)
        BAD("boundary_id %d outside -1..vocab_size-1", p->boundary_id);
    if (text && (p->vocab_size < 257 || p->boundary_id < 256))
        BAD("byte-level text needs a boundary id of 256 or more (it marks documents) and "
            "vocab_size above it");
    if (text && p->separator && !p->separator[0])
        BAD("the document separator must not be empty");
    if (!text && p->val_path)
        BAD("val_path is read by lattice_data_create_text only: give a token loader its "
            "validation documents with val_fraction, or load them as a data object of their own");
    if (p->batch_size < 1 || p->seq_len < 1 || p->batch_size > (1 << 20) || p->seq_len > (1 << 24))
        BAD("batch_size %d and seq_len %d must be in 1..%d and 1..%d", p->batch_size, p->seq_len,
            1 << 20, 1 << 24);
    if (!(p->val_fraction >= 0.0f && p->val_fraction < 1.0f))
        BAD("val_fraction must lie in [0, 1)");
    if (p->pad_id < 0 || p->pad_id >= p->vocab_size)
        BAD("pad_id %d outside the vocabulary", p->pad_id);
    if (p->val_path && p->val_fraction > 0.0f)
        BAD("give either a validation file or a val_fraction, not both");
    if (p->split_long && p->boundary_id < 0)
        BAD("split_long needs a boundary id to open each piece");
    return LATTICE_OK;
#undef BAD
}

static void data_free(lattice_data *d)
{
    free(d->ids);
    free(d->doc_start);
    free(d->perm);
    free(d->cum);
    free(d->rows);
    free(d->tok);
    free(d->tgt);
    free(d->mask);
    free(d);
}

LATTICE__BORROWABLE(lattice_data, data, "data", data_free)

lattice_busy *lattice__data_busy(lattice_data *h) { return &h->busy; }

/* Read a whole file; *len gets its size. */
static lattice_status read_file(const char *path, unsigned char **buf, int64_t *len, char *err)
{
    FILE *f;
    int64_t size;
    *buf = NULL;
    *len = 0;
    lattice_status st = lattice__open_regular(path, &f, &size, err);
    if (st != LATTICE_OK)
        return st;
    if (size == 0) {
        st = lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is empty", path);
    } else if ((uint64_t)size > SIZE_MAX / 8 || !(*buf = malloc((size_t)size))) {
        st = lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %s (%lld bytes)",
                                path, (long long)size);
    } else if (fread(*buf, 1, (size_t)size, f) != (size_t)size) {
        free(*buf);
        *buf = NULL;
        st = lattice__set_error(err, LATTICE_ERR_IO, "short read of %s", path);
    }
    fclose(f);
    if (st == LATTICE_OK)
        *len = size;
    return st;
}

/* Offsets of the documents of ids (a boundary id starts one) into a new
 * array of n_docs + 1 entries. */
static int64_t *document_starts(const int32_t *ids, int64_t n, int32_t boundary, int64_t *n_docs)
{
    int64_t k = 0;
    for (int64_t i = 0; i < n; i++)
        k += i == 0 || ids[i] == boundary;
    int64_t *starts = malloc(sizeof(int64_t) * (size_t)(k + 1));
    if (!starts)
        return NULL;
    k = 0;
    for (int64_t i = 0; i < n; i++)
        if (i == 0 || ids[i] == boundary)
            starts[k++] = i;
    starts[k] = n;
    *n_docs = k;
    return starts;
}

/* Cut long documents into pieces of at most seq_len + 1 tokens; every piece
 * after a document's first opens with a boundary token. *train_docs (the
 * leading documents that are training ones) becomes a count of pieces. */
static lattice_status split_long_documents(lattice_data *d, int32_t **ids, int64_t *n,
                                           int64_t *train_docs, char *err)
{
    int64_t n_docs, piece = (int64_t)d->p.seq_len + 1, extra = 0;
    int64_t *st = document_starts(*ids, *n, d->p.boundary_id, &n_docs);
    if (!st)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory");
    for (int64_t i = 0; i < n_docs; i++) {
        int64_t len = st[i + 1] - st[i];
        if (len > piece) /* pieces after the first carry seq_len tokens of text */
            extra += (len - piece + d->p.seq_len - 1) / d->p.seq_len;
    }
    int32_t *out = malloc(sizeof(int32_t) * (size_t)(*n + extra));
    if (!out) {
        free(st);
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory");
    }
    int64_t w = 0, train_pieces = 0;
    for (int64_t i = 0; i < n_docs; i++) {
        const int32_t *doc = *ids + st[i];
        int64_t len = st[i + 1] - st[i], pieces = 1;
        int64_t first = len < piece ? len : piece;
        memcpy(out + w, doc, sizeof(int32_t) * (size_t)first);
        w += first;
        for (int64_t at = first; at < len; at += d->p.seq_len, pieces++) {
            int64_t m = len - at < d->p.seq_len ? len - at : d->p.seq_len;
            out[w++] = d->p.boundary_id;
            memcpy(out + w, doc + at, sizeof(int32_t) * (size_t)m);
            w += m;
        }
        if (i < *train_docs)
            train_pieces += pieces;
    }
    free(st);
    free(*ids);
    *ids = out;
    *n = w;
    *train_docs = train_pieces;
    return LATTICE_OK;
}

/* Split ids into documents, apply the split (train_docs leading training
 * documents, or -1 for val_fraction), and allocate the batch buffers. Takes
 * ownership of ids. */
static lattice_status finish_create(lattice_data *d, int32_t *ids, int64_t n, int64_t train_docs,
                                    char *err)
{
    if (d->p.split_long) {
        /* with a val_fraction, the fraction applies to the pieces */
        int64_t keep = train_docs < 0 ? INT64_MAX : train_docs;
        lattice_status s = split_long_documents(d, &ids, &n, &keep, err);
        if (s != LATTICE_OK) {
            free(ids);
            return s;
        }
        if (train_docs >= 0)
            train_docs = keep;
    }
    d->ids = ids;
    d->n_ids = n;
    int64_t n_docs;
    d->doc_start = document_starts(ids, n, d->p.boundary_id, &n_docs);
    if (!d->doc_start)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the documents");
    d->n_docs = n_docs;
    for (int64_t i = 0; i < n_docs; i++)
        if (d->doc_start[i + 1] - d->doc_start[i] > INT32_MAX)
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                      "document %lld is longer than 2^31 - 1 tokens", (long long)i);
    int64_t n_val = train_docs >= 0 ? n_docs - train_docs
                                    : (int64_t)ceil((double)d->p.val_fraction * (double)n_docs);
    d->n_train = n_docs - n_val;
    if (d->n_train < 1)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "no training document left (%lld documents, val_fraction %g)",
                                  (long long)n_docs, (double)d->p.val_fraction);
    size_t cells = (size_t)d->p.batch_size * d->p.seq_len;
    d->perm = malloc(sizeof(int64_t) * (size_t)d->n_train);
    d->cum = malloc(sizeof(int64_t) * (size_t)(d->n_train + 1));
    d->rows = malloc(sizeof(int64_t) * (size_t)d->p.batch_size);
    d->tok = malloc(sizeof(int32_t) * cells);
    d->tgt = malloc(sizeof(int32_t) * cells);
    d->mask = malloc(cells);
    if (!d->perm || !d->cum || !d->rows || !d->tok || !d->tgt || !d->mask)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for batches");
    d->perm_epoch = -1;
    return LATTICE_OK;
}

static lattice_status create_common(const char *fn, const lattice_data_params *params, int text,
                                    lattice_data **out, char *errmsg, lattice_data **d)
{
    if (errmsg)
        errmsg[0] = 0;
    if (!out) /* the caller's buffer says it too (ERRORS.md) */
        return lattice__set_error(errmsg, LATTICE_ERR_INVALID_ARGUMENT,
                                  "%s: invalid argument: out is NULL", fn);
    *out = NULL;
    *d = calloc(1, sizeof(**d));
    if (!*d)
        return lattice__set_error(errmsg, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the data");
    /* the caller's params (internal.h's lattice__copy_in), checked */
    lattice_data_params_init(&(*d)->p);
    TRY(lattice__copy_in(errmsg, fn,
                         LATTICE__SIZED(lattice_data_params, "params", LATTICE__DATA_PARAMS_1_0, 0),
                         &(*d)->p, params));
    return check_params(&(*d)->p, text, errmsg);
}

static lattice_status conclude(lattice_data *d, lattice_status st, lattice_data **out)
{
    if (st != LATTICE_OK) {
        lattice_data_destroy(d);
        return st;
    }
    d->p.separator = NULL;
    d->p.val_path = NULL;
    *out = d;
    return LATTICE_OK;
}

/* Append a text file's documents as byte tokens, each opened by the boundary
 * id; *docs counts them. */
static lattice_status append_text(lattice_data *d, const char *path, int32_t **ids, int64_t *n,
                                  int64_t *docs, char *err)
{
    unsigned char *buf = NULL;
    int64_t len = 0;
    lattice_status st = read_file(path, &buf, &len, err);
    if (st != LATTICE_OK)
        return st;
    /* Worst case every byte is its own document: len bytes + len boundaries. */
    int32_t *grown = realloc(*ids, sizeof(int32_t) * (size_t)(*n + 2 * len + 1));
    if (!grown) {
        free(buf);
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %s", path);
    }
    *ids = grown;
    const char *sep = d->p.separator ? d->p.separator : "\f";
    const size_t sl = strlen(sep);
    int64_t doc_bytes = 0, before = *docs;
    for (int64_t i = 0; i < len;) {
        if ((size_t)(len - i) >= sl && memcmp(buf + i, sep, sl) == 0) {
            doc_bytes = 0; /* the next byte opens a new document */
            i += (int64_t)sl;
            continue;
        }
        if (doc_bytes++ == 0) {
            grown[(*n)++] = d->p.boundary_id;
            ++*docs;
        }
        grown[(*n)++] = buf[i++];
    }
    free(buf);
    if (*docs == before)
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s holds only separators", path);
    return LATTICE_OK;
}

lattice_status lattice_data_create_text(const char *path, const lattice_data_params *params,
                                        lattice_data **out, char *errmsg)
{
    lattice_data *d = NULL;
    lattice_status st = create_common("lattice_data_create_text", params, 1, out, errmsg, &d);
    if (st == LATTICE_OK && !path)
        st = lattice__set_error(errmsg, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    int32_t *ids = NULL;
    int64_t n = 0, docs = 0, train_docs = -1;
    if (st == LATTICE_OK)
        st = append_text(d, path, &ids, &n, &docs, errmsg);
    /* d->p, not params: what the caller's size covers, and defaults past it */
    if (st == LATTICE_OK && d->p.val_path) {
        train_docs = docs;
        st = append_text(d, d->p.val_path, &ids, &n, &docs, errmsg);
    }
    if (st != LATTICE_OK) {
        free(ids);
        return conclude(d, st, out);
    }
    return conclude(d, finish_create(d, ids, n, train_docs, errmsg), out);
}

static lattice_status from_ids(lattice_data *d, int32_t *ids, int64_t n, char *errmsg)
{
    for (int64_t i = 0; i < n; i++)
        if (ids[i] < 0 || ids[i] >= d->p.vocab_size) {
            int32_t bad = ids[i];
            free(ids);
            return lattice__set_error(errmsg, LATTICE_ERR_FORMAT,
                                      "token id %lld at index %lld outside the vocabulary 0..%d",
                                      (long long)bad, (long long)i, d->p.vocab_size - 1);
        }
    return finish_create(d, ids, n, -1, errmsg);
}

lattice_status lattice_data_create_tokens(const char *path, int bytes_per_id,
                                          const lattice_data_params *params, lattice_data **out,
                                          char *errmsg)
{
    lattice_data *d = NULL;
    lattice_status st = create_common("lattice_data_create_tokens", params, 0, out, errmsg, &d);
    if (st == LATTICE_OK && (!path || (bytes_per_id != 2 && bytes_per_id != 4)))
        st = lattice__set_error(errmsg, LATTICE_ERR_INVALID_ARGUMENT,
                                "need a path and 2 or 4 bytes per id");
    unsigned char *buf = NULL;
    int64_t len = 0;
    if (st == LATTICE_OK)
        st = read_file(path, &buf, &len, errmsg);
    if (st == LATTICE_OK && len % bytes_per_id) {
        free(buf);
        st = lattice__set_error(errmsg, LATTICE_ERR_FORMAT,
                                "%s: %lld bytes is not a whole number of %d-byte ids", path,
                                (long long)len, bytes_per_id);
    }
    if (st != LATTICE_OK)
        return conclude(d, st, out);
    int64_t n = len / bytes_per_id;
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids) {
        free(buf);
        return conclude(d, lattice__set_error(errmsg, LATTICE_ERR_OUT_OF_MEMORY, "no memory"), out);
    }
    for (int64_t i = 0; i < n; i++) {
        const unsigned char *b = buf + i * bytes_per_id;
        uint32_t v = bytes_per_id == 2 ? (uint32_t)(b[0] | b[1] << 8)
                                       : (uint32_t)b[0] | (uint32_t)b[1] << 8 |
                                             (uint32_t)b[2] << 16 | (uint32_t)b[3] << 24;
        if (v >= (uint32_t)d->p.vocab_size) { /* before it can become a negative int32 */
            free(buf);
            free(ids);
            return conclude(d, lattice__set_error(errmsg, LATTICE_ERR_FORMAT,
                                                  "%s: token id %lu at index %lld outside the "
                                                  "vocabulary 0..%d", path, (unsigned long)v,
                                                  (long long)i, d->p.vocab_size - 1), out);
        }
        ids[i] = (int32_t)v;
    }
    free(buf);
    return conclude(d, from_ids(d, ids, n, errmsg), out);
}

lattice_status lattice_data_create_memory(const int32_t *src, int64_t n,
                                          const lattice_data_params *params, lattice_data **out,
                                          char *errmsg)
{
    lattice_data *d = NULL;
    lattice_status st = create_common("lattice_data_create_memory", params, 0, out, errmsg, &d);
    if (st == LATTICE_OK && (!src || n < 1))
        st = lattice__set_error(errmsg, n == 0 ? LATTICE_ERR_FORMAT : LATTICE_ERR_INVALID_ARGUMENT,
                                "no token ids given");
    if (st == LATTICE_OK && !lattice__count_fits(n, sizeof(int32_t)))
        st = lattice__set_error(errmsg, LATTICE_ERR_INVALID_ARGUMENT,
                                "n %lld token ids cannot be in memory", (long long)n);
    if (st != LATTICE_OK)
        return conclude(d, st, out);
    int32_t *ids = malloc(sizeof(int32_t) * (size_t)n);
    if (!ids)
        return conclude(d, lattice__set_error(errmsg, LATTICE_ERR_OUT_OF_MEMORY, "no memory"), out);
    memcpy(ids, src, sizeof(int32_t) * (size_t)n);
    return conclude(d, from_ids(d, ids, n, errmsg), out);
}

const char *lattice_data_errmsg(const lattice_data *d)
{
    return d ? d->err : "no data object (NULL handle)";
}

lattice_status lattice_data_get_params(const lattice_data *d, lattice_data_params *out)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_data_get_params", 2,
                      (const void *)d, "data", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    return lattice__copy_out(LATTICE__ERRBUF(d), "lattice_data_get_params", out, &d->p, sizeof(d->p),
                             LATTICE__DATA_PARAMS_1_0);
}

int64_t lattice_data_get_n_documents(const lattice_data *d, lattice_data_split split)
{
    if (!d)
        return 0;
    if (split != LATTICE_DATA_SPLIT_TRAIN && split != LATTICE_DATA_SPLIT_VAL)
        return -1;
    return split == LATTICE_DATA_SPLIT_TRAIN ? d->n_train : d->n_docs - d->n_train;
}

int64_t lattice_data_get_n_tokens(const lattice_data *d, lattice_data_split split)
{
    if (!d)
        return 0;
    if (split != LATTICE_DATA_SPLIT_TRAIN && split != LATTICE_DATA_SPLIT_VAL)
        return -1;
    int64_t mid = d->doc_start[d->n_train];
    return split == LATTICE_DATA_SPLIT_TRAIN ? mid : d->n_ids - mid;
}

static int64_t doc_len(const lattice_data *d, int64_t doc)
{
    return d->doc_start[doc + 1] - d->doc_start[doc];
}

/* Draw the permutation of an epoch (and, for packing, its prefix sums). */
static void ensure_perm(lattice_data *d, int64_t epoch)
{
    if (d->perm_epoch == epoch)
        return;
    lattice_rng rng;
    lattice__rng_seed(&rng, d->p.seed * 0x9e3779b97f4a7c15ULL + (uint64_t)epoch);
    for (int64_t i = 0; i < d->n_train; i++)
        d->perm[i] = i;
    for (int64_t i = d->n_train - 1; i > 0; i--) {
        int64_t j = (int64_t)(lattice__rng_next(&rng) % (uint64_t)(i + 1));
        int64_t t = d->perm[i];
        d->perm[i] = d->perm[j];
        d->perm[j] = t;
    }
    d->cum[0] = 0;
    for (int64_t i = 0; i < d->n_train; i++)
        d->cum[i + 1] = d->cum[i] + doc_len(d, d->perm[i]);
    d->perm_epoch = epoch;
}

/* Rows of seq_len + 1 tokens one packed pass yields. */
static int64_t packed_rows(const lattice_data *d)
{
    int64_t r = d->doc_start[d->n_train] / ((int64_t)d->p.seq_len + 1);
    return r > 0 ? r : 1;
}

static int64_t pass_length(const lattice_data *d)
{
    return d->p.pack ? packed_rows(d) : d->n_train;
}

int64_t lattice__data_pass_length(const lattice_data *d) { return pass_length(d); }

uint64_t lattice__data_corpus_hash(lattice_data *d)
{
    if (!d->have_hash) {
        /* the ids as stored (documents cut, pieces opened) and where the split falls */
        const int64_t sizes[2] = {d->n_ids, d->n_train};
        uint64_t h = lattice__hash(LATTICE__HASH_START, sizes, sizeof(sizes));
        d->corpus_hash = lattice__hash(h, d->ids, sizeof(int32_t) * (size_t)d->n_ids);
        d->have_hash = 1;
    }
    return d->corpus_hash;
}

/* Token at offset off of the epoch's packed stream (wrapping within it). */
static int32_t packed_token(const lattice_data *d, int64_t off)
{
    off %= d->cum[d->n_train];
    int64_t lo = 0, hi = d->n_train - 1;
    while (lo < hi) { /* last document whose start <= off */
        int64_t mid = (lo + hi + 1) / 2;
        if (d->cum[mid] <= off)
            lo = mid;
        else
            hi = mid - 1;
    }
    return d->ids[d->doc_start[d->perm[lo]] + (off - d->cum[lo])];
}

/* Fill row r (of stride seq) from a document: returns predicted positions. */
static int fill_doc_row(lattice_data *d, int r, int seq, int64_t doc)
{
    int64_t len = doc_len(d, doc);
    int use = len - 1 < seq ? (int)(len - 1) : seq;
    const int32_t *src = d->ids + d->doc_start[doc];
    int32_t *tok = d->tok + (size_t)r * seq, *tgt = d->tgt + (size_t)r * seq;
    uint8_t *mk = d->mask + (size_t)r * seq;
    for (int j = 0; j < seq; j++) {
        int real = j < use;
        tok[j] = real ? src[j] : d->p.pad_id;
        tgt[j] = real ? src[j + 1] : d->p.pad_id;
        mk[j] = (uint8_t)real;
    }
    return use;
}

static int doc_positions(const lattice_data *d, int64_t doc)
{
    int64_t len = doc_len(d, doc) - 1;
    return len < d->p.seq_len ? (int)len : d->p.seq_len;
}

static void emit(lattice_data *d, lattice_data_batch *b, int rows, int seq)
{
    b->tokens = d->tok;
    b->targets = d->tgt;
    b->mask = d->mask;
    b->batch = rows;
    b->seq = seq;
    b->n_tokens = 0;
    for (long i = 0; i < (long)rows * seq; i++)
        b->n_tokens += d->mask[i];
}

static lattice_status data_next_body(lattice_data *d, lattice_data_batch *b)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_data_next", 2,
                      (const void *)d, "data", (const void *)b, "batch") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    const int B = d->p.batch_size, T = d->p.seq_len;
    if (d->p.pack) {
        for (int r = 0; r < B; r++) {
            if (d->index >= packed_rows(d)) {
                d->epoch++;
                d->index = 0;
            }
            ensure_perm(d, d->epoch);
            int64_t off = d->index++ * ((int64_t)T + 1);
            for (int j = 0; j < T; j++) {
                d->tok[(size_t)r * T + j] = packed_token(d, off + j);
                d->tgt[(size_t)r * T + j] = packed_token(d, off + j + 1);
                d->mask[(size_t)r * T + j] = 1;
            }
        }
        emit(d, b, B, T);
        return LATTICE_OK;
    }
    int64_t *docs = d->rows;
    int seq = 1;
    for (int r = 0; r < B; r++) {
        if (d->index >= d->n_train) {
            d->epoch++;
            d->index = 0;
        }
        ensure_perm(d, d->epoch);
        docs[r] = d->perm[d->index++];
        int pos = doc_positions(d, docs[r]);
        seq = pos > seq ? pos : seq;
    }
    if (!d->p.trim)
        seq = T;
    for (int r = 0; r < B; r++)
        fill_doc_row(d, r, seq, docs[r]);
    emit(d, b, B, seq);
    return LATTICE_OK;
}

lattice_status lattice_data_next(lattice_data *d, lattice_data_batch *b)
{
    LATTICE__INSIDE(d, "lattice_data_next", "data", data_next_body(d, b));
}

int64_t lattice_data_get_n_val_batches(const lattice_data *d)
{
    if (!d)
        return 0;
    int64_t n_val = d->n_docs - d->n_train;
    return (n_val + d->p.batch_size - 1) / d->p.batch_size;
}

static lattice_status data_get_val_batch_body(lattice_data *d, int64_t index,
                                              lattice_data_batch *b)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_data_get_val_batch", 2,
                      (const void *)d, "data", (const void *)b, "batch") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (index < 0 || index >= lattice_data_get_n_val_batches(d))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "validation batch %lld not in 0..%lld",
                    (long long)index, (long long)lattice_data_get_n_val_batches(d) - 1);
    const int B = d->p.batch_size;
    int64_t first = d->n_train + index * B;
    int rows = (int)(d->n_docs - first < B ? d->n_docs - first : B);
    int seq = 1;
    for (int r = 0; r < rows; r++) {
        int pos = doc_positions(d, first + r);
        seq = pos > seq ? pos : seq;
    }
    if (!d->p.trim)
        seq = d->p.seq_len;
    for (int r = 0; r < rows; r++)
        fill_doc_row(d, r, seq, first + r);
    emit(d, b, rows, seq);
    return LATTICE_OK;
}

lattice_status lattice_data_get_val_batch(lattice_data *d, int64_t index, lattice_data_batch *b)
{
    LATTICE__INSIDE(d, "lattice_data_get_val_batch", "data", data_get_val_batch_body(d, index, b));
}

lattice_status lattice_data_get_position(const lattice_data *d, lattice_data_position *pos)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_data_get_position", 2,
                      (const void *)d, "data", (const void *)pos, "pos") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    pos->epoch = d->epoch;
    pos->index = d->index;
    return LATTICE_OK;
}

static lattice_status data_set_position_body(lattice_data *d, const lattice_data_position *pos)
{
    if (lattice__need(LATTICE__ERRBUF(d), "lattice_data_set_position", 2,
                      (const void *)d, "data", (const void *)pos, "pos") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    /* epochs are counted up from here: keep far from overflow */
    if (pos->epoch < 0 || pos->epoch > LATTICE__COUNT_MAX || pos->index < 0 ||
        pos->index > pass_length(d))
        return FAIL(d, LATTICE_ERR_INVALID_ARGUMENT, "position (%lld, %lld) outside a pass of %lld",
                    (long long)pos->epoch, (long long)pos->index, (long long)pass_length(d));
    d->epoch = pos->epoch;
    d->index = pos->index;
    return LATTICE_OK;
}

lattice_status lattice_data_set_position(lattice_data *d, const lattice_data_position *pos)
{
    LATTICE__INSIDE(d, "lattice_data_set_position", "data", data_set_position_body(d, pos));
}

/* The data's settings, in the order a setup lists them. Not here: separator
 * and val_path (text only, borrowed during create: the corpus's digest
 * stands for what they made). */
#define DATA_FIELD(f, type) {#f, type, offsetof(lattice_data_params, f), 1, 1, 0}
static const lattice__field data_fields[] = {
    DATA_FIELD(vocab_size, LATTICE__F_INT),   DATA_FIELD(boundary_id, LATTICE__F_INT),
    DATA_FIELD(batch_size, LATTICE__F_INT),   DATA_FIELD(seq_len, LATTICE__F_INT),
    DATA_FIELD(pack, LATTICE__F_INT),         DATA_FIELD(trim, LATTICE__F_FLAG),
    DATA_FIELD(val_fraction, LATTICE__F_FLOAT), DATA_FIELD(seed, LATTICE__F_U64),
    DATA_FIELD(pad_id, LATTICE__F_INT),       DATA_FIELD(split_long, LATTICE__F_FLAG),
};
#undef DATA_FIELD
const lattice__fields lattice__data_fields = {data_fields,
                                              (int)(sizeof data_fields / sizeof data_fields[0])};

/* Where a run stands in the data (lattice__data_run): its position, and its origin (since
 * 0.2) once begun. An index runs to the pass's length (checked by checkpoint_state.c). */
#define RUN_FIELD(name, f, since, hi) \
    {name, LATTICE__F_I64, offsetof(lattice__data_run, f), since, 0, hi}
static const lattice__field run_fields[] = {
    RUN_FIELD("data_epoch", pos.epoch, 1, LATTICE__COUNT_MAX),
    RUN_FIELD("data_index", pos.index, 1, INT64_MAX),
    RUN_FIELD("data_origin_epoch", origin.epoch, 2, LATTICE__COUNT_MAX),
    RUN_FIELD("data_origin_index", origin.index, 2, INT64_MAX)};
#undef RUN_FIELD
const lattice__fields lattice__data_position_fields = {run_fields, 2},
                      lattice__data_origin_fields = {run_fields + 2, 2};

void lattice__data_setup(lattice_data *d, lattice__setup *s)
{
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    lattice_data_get_params(d, &dp);
    lattice__fields_setup(&lattice__data_fields, &dp, "", s);
    const int64_t docs = lattice_data_get_n_documents(d, LATTICE_DATA_SPLIT_TRAIN);
    SETUP_INT(s, lattice_data_get_n_tokens(d, LATTICE_DATA_SPLIT_TRAIN) +
                     lattice_data_get_n_tokens(d, LATTICE_DATA_SPLIT_VAL), "corpus_tokens");
    SETUP_INT(s, docs + lattice_data_get_n_documents(d, LATTICE_DATA_SPLIT_VAL), "corpus_documents");
    SETUP_INT(s, docs, "train_documents");
    SETUP_HASH(s, lattice__data_corpus_hash(d), "corpus_hash");
}
