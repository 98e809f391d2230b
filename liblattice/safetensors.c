/* safetensors files: a reader that treats its file as hostile, and a writer
 * (saved through atomic_file.h). */
#include "safetensors.h"

#include "atomic_file.h"
#include "json.h"

#include <stdlib.h>
#include <string.h>

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

int lattice__st_is_float(st_dtype d)
{
    return d == ST_F32 || d == ST_F16 || d == ST_BF16 || d == ST_F64;
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
    if (!lattice__st_is_float(t->dtype))
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

lattice_status lattice__st_write(const char *path, const st_entry *e, int n,
                                 const char *const *meta, char *err)
{
    if (n > ST_MAX_TENSORS)
        return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                  "%d tensors: a file may hold at most %d", n, ST_MAX_TENSORS);
    char *js = header_json(e, n, meta);
    if (!js)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY,
                                  "no memory for the safetensors header");
    size_t jl = strlen(js), padded = (jl + 7) / 8 * 8;
    if (padded > MAX_HEADER) {
        free(js);
        return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                  "a header of %zu bytes: readers take at most %u", padded,
                                  MAX_HEADER);
    }
    lattice__atomic_file af;
    lattice_status st = lattice__atomic_begin(&af, path, err);
    if (st != LATTICE_OK) {
        free(js);
        return st;
    }
    FILE *f = af.f;
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
    st = lattice__atomic_commit(&af, ok, path, err);
    free(js);
    return st;
}
