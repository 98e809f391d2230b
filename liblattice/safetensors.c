#include "safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every file this library reads (models, checkpoints, teacher logits) has a
 * header well under this: a model of 10,000 tensors needs about 1 MiB. */
#define MAX_HEADER (16u << 20)

static const struct {
    const char *name;
    st_dtype dtype;
    int bytes;
} dtypes[] = {{"F32", ST_F32, 4}, {"F16", ST_F16, 2}, {"BF16", ST_BF16, 2}, {"I32", ST_I32, 4},
              {"I64", ST_I64, 8}, {"U8", ST_U8, 1},   {"F64", ST_F64, 8}};

static int dtype_bytes(st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d)
            return dtypes[i].bytes;
    return 0;
}

static const char *dtype_name(st_dtype d)
{
    for (size_t i = 0; i < sizeof dtypes / sizeof dtypes[0]; i++)
        if (dtypes[i].dtype == d)
            return dtypes[i].name;
    return "?";
}

#define BAD(...) lattice__set_error(err, LATTICE_ERR_FORMAT, __VA_ARGS__)

/* parse_entry admits only shapes whose product (zero dims left out) fits in
 * int64, so this cannot overflow for an opened file; -1 if it ever would. */
int64_t lattice__st_numel(const st_tensor *t)
{
    int64_t n = 1;
    for (int i = 0; i < t->ndim; i++)
        if (t->shape[i] < 0 || __builtin_mul_overflow(n, t->shape[i], &n))
            return -1;
    return n;
}

/* An integer of JSON that fits in int64 (json-c clamps larger ones to INT64_MAX). */
static int int_of(json_object *o, int64_t *out)
{
    if (!o || !json_object_is_type(o, json_type_int))
        return 0;
    *out = json_object_get_int64(o);
    return *out != INT64_MAX || json_object_get_uint64(o) == (uint64_t)INT64_MAX;
}

/* Validate one tensor entry of the header. */
static lattice_status parse_entry(st_tensor *t, const char *name, json_object *v, uint64_t data_size,
                                  char *err)
{
    json_object *dt, *shape, *offs;
    if (!json_object_is_type(v, json_type_object) || !json_object_object_get_ex(v, "dtype", &dt) ||
        !json_object_object_get_ex(v, "shape", &shape) ||
        !json_object_object_get_ex(v, "data_offsets", &offs))
        return BAD("tensor '%s': needs dtype, shape and data_offsets", name);
    const char *ds = json_object_get_string(dt);
    int found = 0;
    for (size_t i = 0; ds && json_object_is_type(dt, json_type_string) &&
                       i < sizeof dtypes / sizeof dtypes[0];
         i++)
        if (strcmp(ds, dtypes[i].name) == 0) {
            t->dtype = dtypes[i].dtype;
            found = 1;
        }
    if (!found)
        return BAD("tensor '%s': unsupported dtype %s", name, ds ? ds : "(not a string)");
    if (!json_object_is_type(shape, json_type_array) || json_object_array_length(shape) > 8)
        return BAD("tensor '%s': shape must be an array of at most 8 sizes", name);
    t->ndim = (int)json_object_array_length(shape);
    /* The product of the nonzero sizes must fit in int64, in elements and in
     * bytes, whatever the order: then so does every partial product a reader
     * forms, even for an empty tensor such as U8 [INT64_MAX, 2, 0]. */
    int64_t nonzero = 1, bytes_nonzero = dtype_bytes(t->dtype);
    int empty = 0;
    for (int i = 0; i < t->ndim; i++) {
        int64_t s;
        if (!int_of(json_object_array_get_idx(shape, i), &s) || s < 0)
            return BAD("tensor '%s': shape entry %d is not an integer in 0..2^63-1", name, i);
        t->shape[i] = s;
        if (s == 0)
            empty = 1;
        else if (__builtin_mul_overflow(nonzero, s, &nonzero) ||
                 __builtin_mul_overflow(bytes_nonzero, s, &bytes_nonzero))
            return BAD("tensor '%s': the shape's size overflows", name);
    }
    const uint64_t bytes = empty ? 0 : (uint64_t)bytes_nonzero;
    int64_t b, e;
    if (!json_object_is_type(offs, json_type_array) || json_object_array_length(offs) != 2 ||
        !int_of(json_object_array_get_idx(offs, 0), &b) ||
        !int_of(json_object_array_get_idx(offs, 1), &e) || b < 0 || e < b)
        return BAD("tensor '%s': data_offsets must be [begin, end] with 0 <= begin <= end", name);
    if ((uint64_t)e > data_size)
        return BAD("tensor '%s': data [%lld, %lld) runs past the end of the file (%llu bytes of data)",
                   name, (long long)b, (long long)e, (unsigned long long)data_size);
    if ((uint64_t)(e - b) != bytes)
        return BAD("tensor '%s': %lld bytes of data for a %s tensor needing %llu", name,
                   (long long)(e - b), dtype_name(t->dtype), (unsigned long long)bytes);
    t->name = name;
    t->begin = (uint64_t)b;
    t->end = (uint64_t)e;
    return LATTICE_OK;
}

static int by_name(const void *a, const void *b)
{
    return strcmp(((const st_tensor *)a)->name, ((const st_tensor *)b)->name);
}

static int by_begin(const void *a, const void *b)
{
    const st_tensor *x = a, *y = b;
    return x->begin < y->begin ? -1 : x->begin > y->begin;
}

lattice_status lattice__st_open(st_file *sf, const char *path, char *err)
{
    memset(sf, 0, sizeof(*sf));
    int64_t file_size;
    lattice_status st = lattice__open_regular(path, &sf->f, &file_size, err);
    if (st != LATTICE_OK)
        return st;
    const uint64_t size = (uint64_t)file_size;
    unsigned char lenbuf[8];
    char *header = NULL;
    uint64_t hlen = 0;
    if (size < 8 || fread(lenbuf, 1, 8, sf->f) != 8) {
        st = BAD("%s: truncated (no header length)", path);
        goto out;
    }
    for (int i = 7; i >= 0; i--)
        hlen = hlen << 8 | lenbuf[i];
    if (hlen < 2 || hlen > MAX_HEADER || hlen > size - 8) {
        st = BAD("%s: header length %llu impossible for a %llu-byte file", path,
                 (unsigned long long)hlen, (unsigned long long)size);
        goto out;
    }
    header = malloc(hlen);
    if (!header) {
        st = lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the header");
        goto out;
    }
    if (fread(header, 1, hlen, sf->f) != hlen) {
        st = BAD("%s: truncated header", path);
        goto out;
    }
    sf->data_start = 8 + hlen;
    sf->data_size = size - sf->data_start;
    char what[LATTICE_ERRMSG_MAX / 2];
    snprintf(what, sizeof what, "%s: the header", path);
    json_object *root;
    if ((st = lattice__json_parse(header, hlen, 1, what, &root, err)) != LATTICE_OK)
        goto out;
    sf->root = root;
    int n = json_object_object_length(root);
    sf->t = calloc((size_t)(n > 0 ? n : 1), sizeof(st_tensor));
    if (!sf->t) {
        st = lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %d tensors", n);
        goto out;
    }
    json_object_object_foreach(root, key, val)
    {
        if (strcmp(key, "__metadata__") == 0) {
            if (!json_object_is_type(val, json_type_object)) {
                st = BAD("%s: __metadata__ must be an object", path);
                goto out;
            }
            json_object_object_foreach(val, mk, mv)
            {
                if (!json_object_is_type(mv, json_type_string)) {
                    st = BAD("%s: metadata '%s' is not a string", path, mk);
                    goto out;
                }
            }
            sf->meta = val;
            continue;
        }
        if ((st = parse_entry(&sf->t[sf->n], key, val, sf->data_size, err)) != LATTICE_OK)
            goto out;
        sf->n++;
    }
    /* No two tensors may share bytes. */
    st_tensor *sorted = malloc(sizeof(st_tensor) * (size_t)(sf->n ? sf->n : 1));
    if (!sorted) {
        st = lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory");
        goto out;
    }
    memcpy(sorted, sf->t, sizeof(st_tensor) * (size_t)sf->n);
    qsort(sorted, (size_t)sf->n, sizeof(st_tensor), by_begin);
    uint64_t reach = 0; /* end of the data claimed so far */
    const char *claimant = NULL;
    for (int i = 0; i < sf->n; i++) {
        if (sorted[i].begin == sorted[i].end)
            continue; /* empty tensors own no bytes */
        if (sorted[i].begin < reach) {
            st = BAD("%s: tensors '%s' and '%s' overlap", path, claimant, sorted[i].name);
            break;
        }
        reach = sorted[i].end;
        claimant = sorted[i].name;
    }
    free(sorted);
    /* by name, for lattice__st_find: a loader looks up every tensor it needs */
    qsort(sf->t, (size_t)sf->n, sizeof(st_tensor), by_name);
out:
    free(header);
    if (st != LATTICE_OK)
        lattice__st_close(sf);
    return st;
}

void lattice__st_close(st_file *sf)
{
    if (sf->f)
        fclose(sf->f);
    if (sf->root)
        json_object_put(sf->root);
    free(sf->t);
    memset(sf, 0, sizeof(*sf));
}

const st_tensor *lattice__st_find(const st_file *sf, const char *name)
{
    const st_tensor key = {.name = name};
    return sf->n ? bsearch(&key, sf->t, (size_t)sf->n, sizeof(st_tensor), by_name) : NULL;
}

const char *lattice__st_meta(const st_file *sf, const char *key)
{
    json_object *v;
    if (!sf->meta || !json_object_object_get_ex(sf->meta, key, &v))
        return NULL;
    return json_object_get_string(v);
}

static lattice_status read_at(const st_file *sf, uint64_t off, void *dst, size_t bytes, char *err)
{
    if (fseeko(sf->f, (off_t)(sf->data_start + off), SEEK_SET) != 0 ||
        fread(dst, 1, bytes, sf->f) != bytes)
        return lattice__set_error(err, LATTICE_ERR_IO, "read error in tensor data");
    return LATTICE_OK;
}

static float half_to_float(uint16_t h)
{
    uint32_t sign = (uint32_t)(h >> 15) << 31, exp = (h >> 10) & 0x1f, man = h & 0x3ff, bits;
    if (exp == 0) {
        if (man == 0) {
            bits = sign;
        } else { /* subnormal: normalise */
            int e = -1;
            do {
                e++;
                man <<= 1;
            } while (!(man & 0x400));
            bits = sign | (uint32_t)(127 - 15 - e) << 23 | (man & 0x3ff) << 13;
        }
    } else if (exp == 31) {
        bits = sign | 0x7f800000u | man << 13;
    } else {
        bits = sign | (exp + 127 - 15) << 23 | man << 13;
    }
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

lattice_status lattice__st_read_f32_range(const st_file *sf, const st_tensor *t, int64_t first,
                                          float *dst, int64_t count, char *err)
{
    const int64_t numel = lattice__st_numel(t);
    if (first < 0 || count < 0 || numel < 0 || first > numel || count > numel - first)
        /* first and count as given: their sum may not fit an int64_t */
        return BAD("tensor '%s': %lld values from %lld lie outside its %lld", t->name,
                   (long long)count, (long long)first, (long long)lattice__st_numel(t));
    const int w = dtype_bytes(t->dtype);
    const uint64_t base = t->begin + (uint64_t)first * (uint64_t)w;
    if (t->dtype == ST_F32)
        return read_at(sf, base, dst, (size_t)count * 4, err);
    if (t->dtype != ST_F16 && t->dtype != ST_BF16 && t->dtype != ST_F64)
        return BAD("tensor '%s' is %s, not a float type", t->name, dtype_name(t->dtype));
    /* Convert in chunks through a small buffer. */
    unsigned char buf[1 << 16];
    const int64_t per = (int64_t)sizeof buf / w;
    for (int64_t i = 0; i < count; i += per) {
        int64_t m = count - i < per ? count - i : per;
        lattice_status st = read_at(sf, base + (uint64_t)(i * w), buf, (size_t)(m * w), err);
        if (st != LATTICE_OK)
            return st;
        for (int64_t j = 0; j < m; j++) {
            const unsigned char *p = buf + j * w;
            if (t->dtype == ST_F64) {
                double v;
                memcpy(&v, p, 8);
                dst[i + j] = (float)v;
            } else {
                uint16_t h = (uint16_t)(p[0] | p[1] << 8);
                if (t->dtype == ST_F16) {
                    dst[i + j] = half_to_float(h);
                } else {
                    uint32_t bits = (uint32_t)h << 16;
                    memcpy(&dst[i + j], &bits, 4);
                }
            }
        }
    }
    return LATTICE_OK;
}

lattice_status lattice__st_read_f32(const st_file *sf, const st_tensor *t, float *dst, int64_t count,
                                    char *err)
{
    if (lattice__st_numel(t) != count)
        return BAD("tensor '%s' holds %lld values, expected %lld", t->name,
                   (long long)lattice__st_numel(t), (long long)count);
    return lattice__st_read_f32_range(sf, t, 0, dst, count, err);
}

lattice_status lattice__st_read_raw(const st_file *sf, const st_tensor *t, st_dtype dtype, void *dst,
                                    int64_t count, char *err)
{
    if (t->dtype != dtype)
        return BAD("tensor '%s' is %s, expected %s", t->name, dtype_name(t->dtype), dtype_name(dtype));
    if (lattice__st_numel(t) != count)
        return BAD("tensor '%s' holds %lld values, expected %lld", t->name,
                   (long long)lattice__st_numel(t), (long long)count);
    return read_at(sf, t->begin, dst, (size_t)count * (size_t)dtype_bytes(dtype), err);
}

/* ---- strict JSON ------------------------------------------------------------------ */

#define JSON_MAX_DEPTH 32
#define BARE_WORD "a bare word (JSON has only true, false and null: no NaN, Infinity or others)" /* json-c's default: a deeper text would fail there anyway */

typedef struct jscan {
    const unsigned char *start, *p, *end;
    int64_t keys; /* object members seen, for the duplicate check */
    int64_t top_keys; /* members of the outermost object */
    int64_t values;   /* JSON values of every kind, containers included */
    int depth;
    const char *why;
} jscan;

static int js_fail(jscan *s, const char *why)
{
    s->why = why;
    return 0;
}

static int js_is_ws(unsigned char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }

static void js_ws(jscan *s)
{
    while (s->p < s->end && js_is_ws(*s->p))
        s->p++;
}

static int js_digit(const jscan *s) { return s->p < s->end && *s->p >= '0' && *s->p <= '9'; }

static int js_hex4(jscan *s, unsigned *u)
{
    *u = 0;
    if (s->end - s->p < 4)
        return js_fail(s, "a truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        const unsigned char c = *s->p++;
        const int v = c >= '0' && c <= '9' ? c - '0'
                      : c >= 'a' && c <= 'f' ? c - 'a' + 10
                      : c >= 'A' && c <= 'F' ? c - 'A' + 10
                                             : -1;
        if (v < 0)
            return js_fail(s, "a bad \\u escape");
        *u = *u << 4 | (unsigned)v;
    }
    return 1;
}

static int js_string(jscan *s)
{
    s->p++; /* the opening quote */
    for (;;) {
        if (s->p >= s->end)
            return js_fail(s, "an unterminated string");
        const unsigned char c = *s->p;
        if (c == '"') {
            s->p++;
            return 1;
        }
        if (c < 0x20)
            return js_fail(s, "a control character (or NUL) in a string");
        if (c == '\\') {
            if (s->end - s->p < 2)
                return js_fail(s, "an unterminated string");
            const unsigned char e = s->p[1];
            s->p += 2;
            if (e == '"' || e == '\\' || e == '/' || e == 'b' || e == 'f' || e == 'n' || e == 'r' ||
                e == 't')
                continue;
            if (e != 'u')
                return js_fail(s, "a bad escape in a string");
            unsigned u, lo;
            if (!js_hex4(s, &u))
                return 0;
            if (u == 0)
                return js_fail(s, "\\u0000 in a string");
            if (u >= 0xdc00 && u < 0xe000)
                return js_fail(s, "a lone low surrogate");
            if (u >= 0xd800 && u < 0xdc00) {
                if (s->end - s->p < 2 || s->p[0] != '\\' || s->p[1] != 'u')
                    return js_fail(s, "a lone high surrogate");
                s->p += 2;
                if (!js_hex4(s, &lo))
                    return 0;
                if (lo < 0xdc00 || lo >= 0xe000)
                    return js_fail(s, "a lone high surrogate");
            }
            continue;
        }
        if (c < 0x80) {
            s->p++;
            continue;
        }
        /* one UTF-8 sequence: shortest form, no surrogates, at most U+10FFFF */
        int more;
        uint32_t cp, min;
        if (c >= 0xc2 && c <= 0xdf) {
            more = 1, cp = c & 0x1f, min = 0x80;
        } else if ((c & 0xf0) == 0xe0) {
            more = 2, cp = c & 0x0f, min = 0x800;
        } else if (c >= 0xf0 && c <= 0xf4) {
            more = 3, cp = c & 0x07, min = 0x10000;
        } else {
            return js_fail(s, "invalid UTF-8 in a string");
        }
        if (s->end - s->p <= more)
            return js_fail(s, "invalid UTF-8 in a string");
        for (int i = 1; i <= more; i++) {
            if ((s->p[i] & 0xc0) != 0x80)
                return js_fail(s, "invalid UTF-8 in a string");
            cp = cp << 6 | (s->p[i] & 0x3f);
        }
        if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp < 0xe000))
            return js_fail(s, "invalid UTF-8 in a string");
        s->p += more + 1;
    }
}

static int js_number(jscan *s)
{
    if (*s->p == '-')
        s->p++;
    if (s->p < s->end && *s->p == '0') {
        s->p++;
    } else if (js_digit(s)) {
        while (js_digit(s))
            s->p++;
    } else {
        return js_fail(s, "a malformed number");
    }
    if (s->p < s->end && *s->p == '.') {
        s->p++;
        if (!js_digit(s))
            return js_fail(s, "a malformed number");
        while (js_digit(s))
            s->p++;
    }
    if (s->p < s->end && (*s->p == 'e' || *s->p == 'E')) {
        s->p++;
        if (s->p < s->end && (*s->p == '+' || *s->p == '-'))
            s->p++;
        if (!js_digit(s))
            return js_fail(s, "a malformed number");
        while (js_digit(s))
            s->p++;
    }
    return 1;
}

static int js_literal(jscan *s, const char *word)
{
    const size_t n = strlen(word);
    if ((size_t)(s->end - s->p) < n || memcmp(s->p, word, n) != 0)
        return js_fail(s, BARE_WORD);
    s->p += n;
    return 1;
}

static int js_value(jscan *s)
{
    s->values++;
    if (s->p >= s->end)
        return js_fail(s, "a truncated text");
    const unsigned char c = *s->p;
    if (c == '{' || c == '[') {
        const unsigned char close = c == '{' ? '}' : ']';
        if (++s->depth > JSON_MAX_DEPTH)
            return js_fail(s, "nesting deeper than 32");
        s->p++;
        js_ws(s);
        if (s->p < s->end && *s->p == close) {
            s->p++;
            s->depth--;
            return 1;
        }
        for (;;) {
            if (c == '{') {
                js_ws(s);
                if (s->p >= s->end)
                    return js_fail(s, "a truncated text");
                if (*s->p != '"')
                    return js_fail(s, *s->p == '/'    ? "a comment"
                                      : *s->p == '\'' ? "a single-quoted key"
                                      : *s->p == '}'  ? "a trailing comma"
                                                      : "an object key that is not a string");
                if (!js_string(s))
                    return 0;
                s->keys++;
                s->top_keys += s->depth == 1;
                js_ws(s);
                if (s->p >= s->end || *s->p != ':')
                    return js_fail(s, "a key without ':'");
                s->p++;
            }
            js_ws(s);
            if (!js_value(s))
                return 0;
            js_ws(s);
            if (s->p < s->end && *s->p == ',') {
                s->p++;
                continue;
            }
            if (s->p < s->end && *s->p == close) {
                s->p++;
                s->depth--;
                return 1;
            }
            if (s->p < s->end && *s->p == '/')
                return js_fail(s, "a comment");
            return js_fail(s, c == '{' ? "a member not followed by ',' or '}'"
                                       : "an element not followed by ',' or ']'");
        }
    }
    switch (c) {
    case '"': return js_string(s);
    case 't': return js_literal(s, "true");
    case 'f': return js_literal(s, "false");
    case 'n': return js_literal(s, "null");
    case '/': return js_fail(s, "a comment");
    case '\'': return js_fail(s, "a single-quoted string");
    case ']':
    case '}': return js_fail(s, "a trailing comma or a stray bracket");
    default:
        if (c == '-' || (c >= '0' && c <= '9'))
            return js_number(s);
        if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z')
            return js_fail(s, BARE_WORD);
        return js_fail(s, "a character that starts no JSON value");
    }
}

/* Members of every object under o. */
static int64_t json_members(json_object *o)
{
    int64_t n = 0;
    if (json_object_is_type(o, json_type_object)) {
        json_object_object_foreach(o, k, v)
        {
            (void)k;
            n += 1 + json_members(v);
        }
    } else if (json_object_is_type(o, json_type_array)) {
        for (size_t i = 0; i < json_object_array_length(o); i++)
            n += json_members(json_object_array_get_idx(o, i));
    }
    return n;
}

lattice_status lattice__json_parse(const char *text, size_t len, int header, const char *what,
                                   json_object **out, char *err)
{
    *out = NULL;
    jscan s = {(const unsigned char *)text, (const unsigned char *)text,
               (const unsigned char *)text + len, 0, 0, 0, 0, NULL};
    if (!header)
        js_ws(&s);
    const unsigned char *begin = s.p;
    int ok = 1;
    if (s.p >= s.end || *s.p != '{')
        ok = js_fail(&s, "no '{' where the object begins");
    ok = ok && js_value(&s);
    const unsigned char *stop = s.p;
    while (ok && s.p < s.end && (header ? *s.p == ' ' : js_is_ws(*s.p)))
        s.p++;
    if (ok && s.p < s.end)
        ok = js_fail(&s, header ? "bytes other than spaces after the header's object"
                                : "bytes after the object");
    if (!ok)
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is not strict JSON: %s at byte %zu",
                                  what, s.why, (size_t)(s.p - s.start));
    if (stop - begin > INT32_MAX)
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is over 2 GiB", what);
    /* json-c spends a kilobyte or more on an object of a few dozen bytes of
     * text: the counts, not the length, bound what the tree will take */
    if (header && s.top_keys > ST_MAX_TENSORS + 1)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s names %lld tensors, more than the %d a file may hold", what,
                                  (long long)s.top_keys, ST_MAX_TENSORS);
    if (header && s.values > ST_MAX_VALUES)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s holds %lld JSON values, more than the %d its tensors may "
                                  "need", what, (long long)s.values, ST_MAX_VALUES);
    json_tokener *tok = json_tokener_new();
    if (!tok)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the JSON parser");
    json_tokener_set_flags(tok, JSON_TOKENER_STRICT);
    json_object *o = json_tokener_parse_ex(tok, (const char *)begin, (int)(stop - begin));
    const enum json_tokener_error jerr = json_tokener_get_error(tok);
    json_tokener_free(tok);
    if (!o || jerr != json_tokener_success || !json_object_is_type(o, json_type_object)) {
        json_object_put(o);
        /* the text passed the check above: json-c failed for want of memory, or
         * disagrees with RFC 8259 somewhere */
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s: json-c cannot parse it (%s)", what,
                                  json_tokener_error_desc(jerr));
    }
    if (json_members(o) != s.keys) {
        json_object_put(o);
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s names a key twice in one object", what);
    }
    *out = o;
    return LATTICE_OK;
}

int lattice__json_add(json_object *obj, const char *key, json_object *val)
{
    if (!obj || !val ||
        json_object_object_add_ex(obj, key, val, JSON_C_OBJECT_ADD_CONSTANT_KEY) != 0) {
        json_object_put(val);
        return 0;
    }
    return 1;
}

int lattice__json_push(json_object *arr, json_object *val)
{
    if (!arr || !val || json_object_array_add(arr, val) != 0) {
        json_object_put(val);
        return 0;
    }
    return 1;
}

/* JSON text into a growing buffer that remembers a failed allocation. */
typedef struct jbuf {
    char *s;
    size_t len, cap;
    int failed;
} jbuf;

static void jb_put(jbuf *b, const char *p, size_t n)
{
    if (b->failed)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1)
            cap *= 2;
        char *g = realloc(b->s, cap);
        if (!g) {
            b->failed = 1;
            return;
        }
        b->s = g;
        b->cap = cap;
    }
    memcpy(b->s + b->len, p, n);
    b->len += n;
    b->s[b->len] = 0;
}

static void jb_str(jbuf *b, const char *p, size_t n)
{
    jb_put(b, "\"", 1);
    for (size_t i = 0; i < n; i++) {
        const unsigned char c = (unsigned char)p[i];
        char esc[8];
        if (c == '"' || c == '\\') {
            esc[0] = '\\';
            esc[1] = (char)c;
            jb_put(b, esc, 2);
        } else if (c < 0x20) {
            snprintf(esc, sizeof esc, "\\u%04x", c);
            jb_put(b, esc, 6);
        } else {
            jb_put(b, (const char *)&p[i], 1);
        }
    }
    jb_put(b, "\"", 1);
}

static void jb_value(jbuf *b, json_object *o)
{
    char num[40];
    switch (json_object_get_type(o)) {
    case json_type_object: {
        int first = 1;
        jb_put(b, "{", 1);
        json_object_object_foreach(o, k, v)
        {
            if (!first)
                jb_put(b, ",", 1);
            first = 0;
            jb_str(b, k, strlen(k));
            jb_put(b, ":", 1);
            jb_value(b, v);
        }
        jb_put(b, "}", 1);
        break;
    }
    case json_type_array:
        jb_put(b, "[", 1);
        for (size_t i = 0; i < json_object_array_length(o); i++) {
            if (i)
                jb_put(b, ",", 1);
            jb_value(b, json_object_array_get_idx(o, i));
        }
        jb_put(b, "]", 1);
        break;
    case json_type_int:
        jb_put(b, num, (size_t)snprintf(num, sizeof num, "%lld", (long long)json_object_get_int64(o)));
        break;
    case json_type_double: {
        const double x = json_object_get_double(o);
        int n = isnan(x) ? snprintf(num, sizeof num, "NaN")
                : isinf(x) ? snprintf(num, sizeof num, x > 0 ? "Infinity" : "-Infinity")
                           : snprintf(num, sizeof num, "%.17g", x);
        if (isfinite(x) && !strpbrk(num, ".e")) /* stays a double when read back */
            n += snprintf(num + n, sizeof num - (size_t)n, ".0");
        jb_put(b, num, (size_t)n);
        break;
    }
    case json_type_string:
        jb_str(b, json_object_get_string(o), (size_t)json_object_get_string_len(o));
        break;
    case json_type_boolean:
        jb_put(b, json_object_get_boolean(o) ? "true" : "false", json_object_get_boolean(o) ? 4 : 5);
        break;
    default:
        jb_put(b, "null", 4);
    }
}

/* Not json-c's serializer: it drops an append whose allocation fails and carries
 * on (json_object_object_to_json_string ignores printbuf_strappend's result), so
 * its text can be silently truncated, and parsing it back to check is no way
 * out, as json-c 0.16's parser crashes when an allocation of a key fails. */
char *lattice__json_dump(json_object *o)
{
    jbuf b = {NULL, 0, 0, 0};
    if (!o)
        return NULL;
    jb_value(&b, o);
    if (b.failed) {
        free(b.s);
        return NULL;
    }
    return b.s;
}

/* The safetensors header of entries e as a new string; NULL when memory runs out. */
static char *header_json(const st_entry *e, int n, const char *const *meta)
{
    json_object *root = json_object_new_object();
    int ok = root != NULL;
    if (ok && meta && meta[0]) {
        json_object *m = json_object_new_object();
        for (int i = 0; m && meta[i] && meta[i + 1]; i += 2)
            if (!lattice__json_add(m, meta[i], json_object_new_string(meta[i + 1]))) {
                json_object_put(m);
                m = NULL;
            }
        ok = lattice__json_add(root, "__metadata__", m);
    }
    uint64_t off = 0;
    for (int i = 0; ok && i < n; i++) {
        json_object *t = json_object_new_object(), *shape = json_object_new_array(),
                    *offs = json_object_new_array();
        uint64_t bytes = (uint64_t)dtype_bytes(e[i].dtype);
        ok = shape && offs;
        for (int d = 0; ok && d < e[i].ndim; d++) {
            ok = lattice__json_push(shape, json_object_new_int64(e[i].shape[d]));
            bytes *= (uint64_t)e[i].shape[d];
        }
        ok = ok && lattice__json_push(offs, json_object_new_int64((int64_t)off)) &&
             lattice__json_push(offs, json_object_new_int64((int64_t)(off + bytes)));
        /* each add releases what it was given, even after an earlier failure */
        ok = lattice__json_add(t, "dtype", json_object_new_string(dtype_name(e[i].dtype))) && ok;
        ok = lattice__json_add(t, "shape", shape) && ok;
        ok = lattice__json_add(t, "data_offsets", offs) && ok;
        ok = lattice__json_add(root, e[i].name, ok ? t : (json_object_put(t), NULL)) && ok;
        off += bytes;
    }
    char *js = ok ? lattice__json_dump(root) : NULL;
    json_object_put(root);
    return js;
}

#define NOMEM(what) lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %s", what)

/* The file a save to path replaces: path itself, or where its chain of
 * symbolic links ends, so that saving through a link replaces the link's
 * target and leaves the link (a dangling link's target is created). NULL with
 * errno set on failure. */
static char *save_target(const char *path)
{
    char *cur = strdup(path);
    for (int hop = 0; cur; hop++) {
        struct stat st;
        if (lstat(cur, &st) != 0 || !S_ISLNK(st.st_mode))
            return cur; /* a file, a new name, or an error that open will report */
        char link[PATH_MAX];
        const ssize_t n = hop < 40 ? readlink(cur, link, sizeof link) : -1;
        const int why = hop >= 40 ? ELOOP : n < 0 ? errno : ENAMETOOLONG;
        if (n < 0 || n == (ssize_t)sizeof link) {
            free(cur);
            errno = why;
            return NULL;
        }
        /* a relative target is relative to the link's directory */
        const char *slash = link[0] == '/' ? NULL : strrchr(cur, '/');
        const size_t dl = slash ? (size_t)(slash - cur) + 1 : 0;
        char *next = malloc(dl + (size_t)n + 1);
        if (next) {
            memcpy(next, cur, dl);
            memcpy(next + dl, link, (size_t)n);
            next[dl + (size_t)n] = 0;
        }
        free(cur);
        cur = next;
    }
    errno = ENOMEM;
    return NULL;
}

/* digits then stop: the end of the digits, or NULL if there are none or they
 * are not followed by stop */
static const char *digits_then(const char *s, char stop)
{
    const char *p = s;
    while (*p >= '0' && *p <= '9')
        p++;
    return p > s && p - s < 12 && *p == stop ? p : NULL;
}

/* Remove what killed saves to target left behind: files named
 * "<target>.tmp.<pid>.<n>" (the names lattice__st_write gives) whose process
 * is gone and on which no lock is held (a writer holds one on its temporary
 * file from creation to rename; the pid check covers the moment between the
 * two). Best effort: what cannot be checked is left alone. */
static void remove_stale_temps(const char *target)
{
    const char *slash = strrchr(target, '/');
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    const char *base = slash ? slash + 1 : target;
    const size_t bl = strlen(base);
    DIR *d = dir ? opendir(dir) : NULL;
    free(dir);
    if (!d)
        return;
    const struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *nm = e->d_name, *pid_end, *n_end;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0 ||
            !(pid_end = digits_then(nm + bl + 5, '.')) || !(n_end = digits_then(pid_end + 1, 0)))
            continue;
        const long pid = strtol(nm + bl + 5, NULL, 10);
        if (pid <= 0 || pid > INT_MAX || kill((pid_t)pid, 0) == 0 || errno != ESRCH)
            continue; /* alive, or not ours to tell (EPERM: alive) */
        const int fd = openat(dirfd(d), nm, O_RDONLY | O_NOFOLLOW | O_NONBLOCK | O_CLOEXEC);
        if (fd < 0)
            continue;
        struct stat st;
        if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && flock(fd, LOCK_EX | LOCK_NB) == 0)
            unlinkat(dirfd(d), nm, 0);
        close(fd);
    }
    closedir(d);
}


/* After a rename, the directory entry is durable only once the directory
 * itself is synced: a power loss could otherwise bring back the old file.
 * Best effort: a file system that cannot sync a directory still renamed. */
static void sync_parent_dir(const char *target)
{
    const char *slash = strrchr(target, '/');
    char *dir = slash ? strndup(target, slash == target ? 1 : (size_t)(slash - target)) : strdup(".");
    if (!dir)
        return;
    const int fd = open(dir, O_RDONLY | O_DIRECTORY);
    if (fd >= 0) {
        (void)fsync(fd);
        close(fd);
    }
    free(dir);
}

lattice_status lattice__st_write(const char *path, const st_entry *e, int n,
                                 const char *const *meta, char *err)
{
    if (n > ST_MAX_TENSORS)
        return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                  "%d tensors: a file may hold at most %d", n, ST_MAX_TENSORS);
    char *js = header_json(e, n, meta);
    if (!js)
        return NOMEM("the safetensors header");
    size_t jl = strlen(js), padded = (jl + 7) / 8 * 8;
    if (padded > MAX_HEADER) {
        free(js);
        return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                  "a header of %zu bytes: readers take at most %u", padded,
                                  MAX_HEADER);
    }

    char *target = save_target(path);
    if (!target) {
        const int why = errno;
        free(js);
        return lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                  "cannot resolve %s: %s", path, strerror(why));
    }
    size_t plen = strlen(target);
    char *tmp = malloc(plen + 32);
    if (!tmp) {
        free(target);
        free(js);
        return NOMEM("the temporary file's name");
    }
    remove_stale_temps(target);
    /* the new file keeps the old one's permission bits (never wider: the
     * umask only takes bits away until fchmod puts them back); a new name
     * gets 0666 less the umask, as with fopen */
    struct stat old;
    const int keep_mode = stat(target, &old) == 0 && S_ISREG(old.st_mode);
    const mode_t mode = keep_mode ? (old.st_mode & 0777) : 0666;
    /* open(O_EXCL) rather than mkstemp: the file gets the caller's umask, not 0600 */
    static unsigned counter;
    int fd = -1;
    for (int attempt = 0; attempt < 100 && fd < 0; attempt++) {
        snprintf(tmp, plen + 32, "%s.tmp.%d.%u", target, (int)getpid(),
                 __atomic_fetch_add(&counter, 1, __ATOMIC_RELAXED));
        fd = open(tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, mode);
        if (fd < 0 && errno != EEXIST)
            break;
    }
    lattice_status st = LATTICE_OK;
    /* the lock tells remove_stale_temps that this file is being written; where
     * locks are not supported, the pid in the name still does */
    if (fd >= 0)
        (void)flock(fd, LOCK_EX | LOCK_NB);
    if (fd >= 0 && keep_mode && fchmod(fd, mode) != 0) {
        const int why = errno;
        close(fd);
        unlink(tmp);
        fd = -1;
        errno = why;
    }
    FILE *f = fd >= 0 ? fdopen(fd, "wb") : NULL;
    if (!f) {
        const int why = errno;
        st = lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                "cannot create %s: %s", tmp, strerror(why));
        if (fd >= 0) {
            close(fd);
            unlink(tmp);
        }
        goto out;
    }
    unsigned char lenbuf[8];
    for (int i = 0; i < 8; i++)
        lenbuf[i] = (unsigned char)((uint64_t)padded >> (8 * i));
    int ok = fwrite(lenbuf, 1, 8, f) == 8 && fwrite(js, 1, jl, f) == jl;
    for (size_t i = jl; ok && i < padded; i++)
        ok = fputc(' ', f) != EOF;
    for (int i = 0; ok && i < n; i++) {
        size_t bytes = (size_t)dtype_bytes(e[i].dtype);
        for (int d = 0; d < e[i].ndim; d++)
            bytes *= (size_t)e[i].shape[d];
        ok = bytes == 0 || fwrite(e[i].data, 1, bytes, f) == bytes;
    }
    ok = ok && fflush(f) == 0 && fsync(fileno(f)) == 0;
    ok = fclose(f) == 0 && ok;
    if (!ok || rename(tmp, target) != 0) {
        const int why = errno;
        st = lattice__set_error(err, why == ENOMEM ? LATTICE_ERR_OUT_OF_MEMORY : LATTICE_ERR_IO,
                                "cannot write %s: %s", path, strerror(why));
        unlink(tmp);
    } else {
        sync_parent_dir(target);
    }
out:
    free(tmp);
    free(target);
    free(js);
    return st;
}
