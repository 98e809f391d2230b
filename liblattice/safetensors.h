/* A hostile-input-safe reader and an atomic writer of safetensors files:
 * 8-byte little-endian header length, a JSON header, then raw little-endian
 * tensor data. The header goes through json.h. */
#ifndef LATTICE_SAFETENSORS_H
#define LATTICE_SAFETENSORS_H

#include "internal.h"

#include <stdio.h>

typedef enum st_dtype { ST_F32, ST_F16, ST_BF16, ST_I32, ST_I64, ST_U8, ST_F64 } st_dtype;

typedef struct st_tensor {
    const char *name; /* owned by the file's JSON tree */
    st_dtype dtype;
    int ndim;
    int64_t shape[8];
    uint64_t begin, end; /* relative to the data section */
} st_tensor;

typedef struct st_file {
    FILE *f;
    uint64_t data_start, data_size;
    st_tensor *t;
    int n;
    void *root; /* json_object */
    void *meta; /* json_object, may be NULL */
} st_file;

/* What a header may hold, counted on its text before json-c builds a tree
 * (json-c takes about 1.7 KiB per tensor entry): at most ST_MAX_TENSORS
 * tensors (a model has 11 to 17 per layer, a checkpoint three times the
 * model's), and 16 JSON values per tensor (an entry has at most 14). With the
 * header's 16 MiB cap this bounds an open at about 150 MiB however the header
 * is made. lattice__st_write refuses what a reader would. */
#define ST_MAX_TENSORS (1 << 16)
#define ST_MAX_VALUES (16 * ST_MAX_TENSORS)

/* Open and validate the whole header: dtypes, shapes, offsets (in bounds,
 * sizes that match the shape, no overlap), at most ST_MAX_TENSORS tensors. */
lattice_status lattice__st_open(st_file *sf, const char *path, char *err);
void lattice__st_close(st_file *sf);
const st_tensor *lattice__st_find(const st_file *sf, const char *name);
int64_t lattice__st_numel(const st_tensor *t);
/* Whether the float reads below convert dtype d (F32, F16, BF16, F64). */
int lattice__st_is_float(st_dtype d);
/* Read a float tensor (F32, F16, BF16, F64) converted to float32; count must match. */
lattice_status lattice__st_read_f32(const st_file *sf, const st_tensor *t, float *dst, int64_t count,
                                    char *err);
/* Read count values starting at element first of a float tensor, as float32. */
lattice_status lattice__st_read_f32_range(const st_file *sf, const st_tensor *t, int64_t first,
                                          float *dst, int64_t count, char *err);
/* Read the raw bytes of a tensor of the given dtype; count must match. */
lattice_status lattice__st_read_raw(const st_file *sf, const st_tensor *t, st_dtype dtype,
                                    void *dst, int64_t count, char *err);
/* A metadata string, or NULL. */
const char *lattice__st_meta(const st_file *sf, const char *key);

typedef struct st_entry {
    const char *name;
    st_dtype dtype; /* ST_F32, ST_I32, ST_I64, ST_U8 or ST_F64 */
    int ndim;
    int64_t shape[4];
    const void *data;
} st_entry;

/* Write entries atomically (temporary file in the same directory, fsync,
 * rename). meta: key, value, key, value, ..., NULL. */
lattice_status lattice__st_write(const char *path, const st_entry *e, int n,
                                 const char *const *meta, char *err);

#endif
