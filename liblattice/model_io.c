/* Models to and from files: the weights and lattice.config in a safetensors
 * file, and config.json (what each says of the model: model_desc.c). */
#include "model_internal.h"

#include "atomic_file.h"
#include "json.h"
#include "safetensors.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lattice_status model_save(const lattice_model *cm, const char *path)
{
    lattice_model *m = (lattice_model *)cm; /* only its error buffer is written */
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    st_entry *e = calloc((size_t)m->n_tensors, sizeof(*e));
    char *cfg = lattice__model_desc_config(m);
    if (!e || !cfg) {
        free(e);
        free(cfg);
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY, "no memory to save the model");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        e[i] = (st_entry){t->name, ST_F32, t->ndim, {t->rows, t->cols}, t->data};
    }
    const char *meta[] = {"format", "pt", "lattice.version", LATTICE_VERSION_STRING,
                          "lattice.config", cfg, NULL};
    lattice_status st = lattice__st_write(path, e, m->n_tensors, meta, m->err);
    free(e);
    free(cfg);
    return st;
}

static lattice_status model_save_config(const lattice_model *cm, const char *path,
                                        unsigned flags)
{
    lattice_model *m = (lattice_model *)cm; /* only its error buffer is written */
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    const unsigned known = LATTICE_MODEL_CONFIG_FLAG_LATTICE;
    if (flags & ~known)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_model_save_config: invalid argument: flags 0x%x has bits no "
                    "lattice_model_config_flag names (0x%x)", flags, flags & ~known);
    json_object *o;
    TRY(lattice__model_desc_hf(m, flags & LATTICE_MODEL_CONFIG_FLAG_LATTICE, &o));
    char *text = lattice__json_dump_pretty(o);
    json_object_put(o);
    if (!text)
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY, "no memory to write the config");
    lattice__atomic_file af;
    lattice_status st = lattice__atomic_begin(&af, path, m->err);
    if (st == LATTICE_OK) {
        const size_t n = strlen(text);
        const int ok = fwrite(text, 1, n, af.f) == n && fputc('\n', af.f) != EOF;
        st = lattice__atomic_commit(&af, ok, path, m->err);
    }
    free(text);
    return st;
}

/* The tensor `name` of the file sf (named path) at the shape [rows, cols] (a
 * vector: ndim 1), or NULL with why in err. */
static const st_tensor *shaped(const st_file *sf, const char *path, const char *name, int ndim,
                               int64_t rows, int64_t cols, char *err)
{
    const st_tensor *f = lattice__st_find(sf, name);
    char got[96] = "";
    if (f && f->ndim == ndim && f->shape[0] == rows && (ndim == 1 || f->shape[1] == cols))
        return f;
    for (int d = 0, n = 0; f && d < f->ndim && n < (int)sizeof got; d++)
        n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", d ? ", " : "",
                      (long long)f->shape[d]);
    if (!f)
        lattice__set_error(err, LATTICE_ERR_FORMAT, "%s: tensor '%s' is missing from the file",
                           path, name);
    else
        lattice__set_error(err, LATTICE_ERR_FORMAT, "%s: tensor '%s' has shape [%s] in the file, "
                           "the model's is [%lld%s%lld]", path, name, got, (long long)rows,
                           ndim == 2 ? ", " : "", ndim == 2 ? (long long)cols : 0LL);
    return NULL;
}

/* The file's lattice.config, where it has one, must describe m in every
 * setting, whether m was made by the caller, from the file itself or from a
 * config.json given beside it (named ours in messages): weights of a
 * block_rescale model loaded under a plain Qwen3 config.json gave other
 * logits without a word. */
static lattice_status load_open(lattice_model *m, const st_file *sf, const char *path,
                                const char *ours)
{
    const char *cfg = lattice__st_meta(sf, "lattice.config");
    json_object *o = NULL;
    lattice_status st =
        cfg ? lattice__json_parse(cfg, strlen(cfg), 0, "lattice.config", &o, m->err) : LATTICE_OK;
    if (st == LATTICE_OK && o)
        st = lattice__model_desc_compare(m, o, ours);
    json_object_put(o);
    if (st != LATTICE_OK)
        return st;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        const st_tensor *f = shaped(sf, path, t->name, t->ndim, t->rows, t->cols, m->err);
        if (!f)
            return LATTICE_ERR_FORMAT;
        TRY(lattice__st_read_f32(sf, f, t->data, t->rows * t->cols, m->err));
    }
    return LATTICE_OK;
}

static lattice_status model_load(lattice_model *m, const char *path)
{
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    st_file sf;
    lattice_status st = lattice__st_open(&sf, path, m->err);
    if (st != LATTICE_OK)
        return st;
    st = load_open(m, &sf, path, "the model");
    lattice__st_close(&sf);
    m->batch = m->seq = 0;
    return st;
}

/* A JSON object from a file of at most 1 MiB. */
static lattice_status parse_json_file(const char *path, json_object **out, char *err)
{
    *out = NULL;
    FILE *f;
    int64_t size;
    lattice_status st = lattice__open_regular(path, &f, &size, err);
    if (st != LATTICE_OK)
        return st;
    if (size > (1 << 20)) {
        fclose(f);
        return lattice__set_error(err, LATTICE_ERR_FORMAT, "%s is over 1 MiB: not a config.json",
                                  path);
    }
    char *buf = malloc((size_t)size + 1);
    size_t n = buf ? fread(buf, 1, (size_t)size + 1, f) : 0;
    fclose(f);
    if (!buf)
        return lattice__set_error(err, LATTICE_ERR_OUT_OF_MEMORY, "no memory for %s", path);
    if (n != (size_t)size) /* it changed size while being read */
        st = lattice__set_error(err, LATTICE_ERR_IO, "short read of %s", path);
    else
        st = lattice__json_parse(buf, n, 0, path, out, err);
    free(buf);
    return st;
}

/* The config: a given config.json, or the file's own metadata. */
static lattice_status read_config(const st_file *sf, const char *path, const char *config_path,
                                  json_object **out, char *err)
{
    if (config_path)
        return parse_json_file(config_path, out, err);
    const char *s = lattice__st_meta(sf, "lattice.config");
    if (!s)
        return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                  "%s has no lattice.config metadata: give a config.json", path);
    char what[LATTICE_ERRMSG_MAX / 2];
    snprintf(what, sizeof what, "%s: lattice.config", path);
    return lattice__json_parse(s, strlen(s), 0, what, out, err);
}

/* Before the arenas of a model are allocated, the file must hold every tensor
 * load_open will ask for, with its exact shape, so that a small file whose
 * config asks for a huge model fails at once instead of after gigabytes of
 * allocation and initialisation. The names come from a skeleton: a model of the
 * same structure (layers, placement, norm kind, qk-norm, tying) with tiny
 * sizes, so the list is the one model_layout.c makes rather than a copy
 * that could drift. The skeleton's sizes are pairwise distinct, so each extent
 * it gives maps back to exactly one of the real ones. */
static lattice_status check_file_tensors(const st_file *sf, const char *path,
                                         const lattice_model_params *p, const lattice_norm *norm,
                                         lattice_backend *backend, char *err)
{
    lattice_model_params s = *p;
    s.vocab_size = 7;
    s.d_model = 3;
    s.n_heads = 4;
    s.n_kv_heads = 2;
    s.head_dim = 2;
    s.d_ff = 5;
    s.max_batch = s.max_seq = 1;
    s.massive_channel = 0; /* where the offset goes changes no tensor */
    /* 1: a statistic's one value (input_regular_rms) */
    const int64_t small[] = {7, 3, 4 * 2, 2 * 2, 2, 5, 1};
    const int64_t real[] = {p->vocab_size, p->d_model, (int64_t)p->n_heads * p->head_dim,
                            (int64_t)p->n_kv_heads * p->head_dim, p->head_dim, p->d_ff, 1};
    int64_t n_params = 0, matched = 0;
    lattice_model *sk = NULL;
    lattice_status st = lattice_model_estimate(p, norm, &n_params, NULL);
    if (st == LATTICE_OK)
        st = lattice_model_create(&s, norm, backend, &sk);
    if (st != LATTICE_OK)
        return lattice__set_error(err, st, "cannot lay out the model: %s",
                                  lattice_status_string(st));
    for (int i = 0; i < lattice_model_get_n_tensors(sk) && st == LATTICE_OK; i++) {
        lattice_model_tensor_info ti;
        lattice_model_get_tensor(sk, i, &ti);
        int64_t want[2] = {0, ti.ndim == 2 ? 0 : 1};
        for (int d = 0; d < ti.ndim; d++)
            for (size_t k = 0; k < sizeof small / sizeof small[0]; k++)
                if (ti.shape[d] == small[k])
                    want[d] = real[k];
        if (want[0] == 0 || want[1] == 0) { /* a layout this mapping does not know */
            st = lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                    "tensor '%s': cannot derive its shape from the config",
                                    ti.name);
            break;
        }
        if (!shaped(sf, path, ti.name, ti.ndim, want[0], want[1], err)) {
            st = LATTICE_ERR_FORMAT;
            break;
        }
        matched += want[0] * want[1];
    }
    lattice_model_destroy(sk);
    /* every parameter the config asks for is one the file holds */
    if (st == LATTICE_OK && matched != n_params)
        st = lattice__set_error(err, LATTICE_ERR_UNSUPPORTED,
                                "the config's %lld parameters are not the %lld its tensors hold",
                                (long long)n_params, (long long)matched);
    return st;
}

lattice_status lattice_model_create_from_file(const char *path, const char *config_path,
                                              lattice_backend *backend, int max_batch, int max_seq,
                                              lattice_model **out, char *errmsg)
{
    char local[LATTICE_ERRMSG_MAX];
    char *err = errmsg ? errmsg : local;
    err[0] = 0;
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_create_from_file: invalid argument: out is NULL");
    *out = NULL;
    if (!path || !backend)
        return lattice__set_error(err, LATTICE_ERR_INVALID_ARGUMENT, "path and backend are needed");
    st_file sf;
    lattice_status st = lattice__st_open(&sf, path, err);
    if (st != LATTICE_OK)
        return st;
    json_object *cfg = NULL;
    lattice_model_params p;
    lattice__norm_spec spec;
    lattice_model_params_init(&p);
    lattice_norm *norm = NULL;
    lattice_model *m = NULL;
    st = read_config(&sf, path, config_path, &cfg, err);
    if (st == LATTICE_OK)
        st = lattice__model_desc_read(cfg, config_path != NULL, &p, &spec, err);
    if (st == LATTICE_OK) {
        p.max_batch = max_batch;
        p.max_seq = max_seq;
        st = lattice_model_params_check(&p, err);
    }
    /* settings the file holds are the file's fault (FORMAT); memory is not */
    if (st == LATTICE_OK &&
        (st = lattice_norm_create(spec.placement, spec.kind, spec.eps, &norm)) != LATTICE_OK)
        st = st == LATTICE_ERR_OUT_OF_MEMORY
                 ? lattice__set_error(err, st, "no memory for the norm")
                 : lattice__set_error(err, LATTICE_ERR_FORMAT, "config: bad norm settings (eps %g)",
                                      (double)spec.eps);
    if (st == LATTICE_OK && spec.residual_scale != 1.0f &&
        (st = lattice_norm_set_residual_scale(norm, spec.residual_scale)))
        st = lattice__set_error(err, LATTICE_ERR_FORMAT, "config: bad residual scale");
    if (st == LATTICE_OK)
        st = check_file_tensors(&sf, path, &p, norm, backend, err);
    if (st == LATTICE_OK && (st = lattice_model_create(&p, norm, backend, &m)) != LATTICE_OK)
        lattice__set_error(err, st, "cannot create the model: %s", lattice_status_string(st));
    if (st == LATTICE_OK &&
        (st = load_open(m, &sf, path, config_path ? "the config.json" : "the model")) !=
            LATTICE_OK)
        snprintf(err, LATTICE_ERRMSG_MAX, "%s", m->err);
    lattice__st_close(&sf);
    json_object_put(cfg);
    lattice_norm_destroy(norm);
    if (st != LATTICE_OK) {
        lattice_model_destroy(m);
        return st;
    }
    *out = m;
    return LATTICE_OK;
}

/* ---- the public calls, each inside the model's busy section (MODEL_CALL) ---- */

lattice_status lattice_model_save(const lattice_model *cm, const char *path)
{
    MODEL_CALL(cm, "lattice_model_save", model_save(cm, path));
}

lattice_status lattice_model_save_config(const lattice_model *cm, const char *path, unsigned flags)
{
    MODEL_CALL(cm, "lattice_model_save_config", model_save_config(cm, path, flags));
}

lattice_status lattice_model_load(lattice_model *m, const char *path)
{
    MODEL_CALL(m, "lattice_model_load", model_load(m, path));
}
