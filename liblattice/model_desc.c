/* The model's description: one table of the settings that say what a model
 * is, and its walks for each file that states them (model_io.c writes and
 * reads the files themselves). */
#include "model_internal.h"

#include "json.h"

#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* x as the double of the shortest decimal that reads back as x in float
 * ("1e-06" for 1e-6f, not 9.9999999747524271e-07), so that config.json shows
 * the value the caller set. */
static double float_decimal(float x)
{
    char num[32];
    int digits = 1;
    for (; digits < 9; digits++) { /* 9 always read back */
        snprintf(num, sizeof num, "%.*e", digits - 1, (double)x);
        if (strtof(num, NULL) == x)
            break;
    }
    snprintf(num, sizeof num, "%.*e", digits - 1, (double)x);
    return strtod(num, NULL);
}

/* ---- the model's description: one table drives every file ----------------
 *
 * Each setting that says what a model is has one row below: its key in
 * lattice.config, its name in the setup (what ranks and checkpoints compare),
 * its Qwen3 key in config.json, and how each file treats it. The writes of
 * lattice.config and config.json, their reads, the comparison of a file with
 * a model, the test for a Qwen3 model and the setup walk the table: a new
 * option is one row, at the end. The rows' order is the setup's, whose digest
 * keys kept runs and checkpoints: never reorder them; each file orders its
 * keys by the rows' places in it (at). */

/* What a model is, as its files say it: the params (n_active_layers: the
 * active count) and the norm's settings. */
typedef struct model_desc {
    lattice_model_params p;
    lattice__norm_spec norm;
} model_desc;

/* A flag is compared as zero or not, and is a boolean under a Qwen3 key. */
typedef enum desc_type { D_INT, D_FLAG, D_REAL, D_PLACEMENT, D_KIND } desc_type;

enum {
    SET_ONLY = 1, /* written only when not its default, which a file without it holds */
    ACTIVE = 2,   /* the active count: where a run stands, neither compared nor in the setup;
                   * every layer in a Qwen3 model */
    NEEDS = 4     /* a Qwen3 config.json must hold it */
};

/* The files that list rows in an order of their own. */
enum { AT_CONFIG, AT_QWEN3, AT_LATTICE, N_AT };

typedef struct desc_row {
    const char *key;   /* in lattice.config, and under config.json's "lattice" */
    const char *setup; /* in the setup (NULL: key) */
    const char *q3;    /* Qwen3's key in config.json (NULL: none) */
    desc_type type;
    size_t offset; /* in model_desc */
    unsigned flags;
    double dflt;      /* where a file lacks it (SET_ONLY, or beside with); without a Qwen3 key,
                       * every Qwen3 model's value */
    double lo, hi;    /* the range a file may hold (an enum: its names' indices) */
    const char *with; /* NULL, or the key of the setting it means something beside: written,
                       * compared and set up (else as 0) only where that one is not its default */
    signed char at[N_AT]; /* its place in each (-1: not there) */
    const char *not_q3;   /* printf format of why another value than dflt is not Qwen3's: the
                           * value as text, then n_layers */
} desc_row;

static const char *const placement_names[] = {"pre", "post", "peri"};
static const char *const kind_names[] = {"rms", "layer"};

#define BIG (1 << 30)
#define P(f) offsetof(model_desc, p.f)
#define N(f) offsetof(model_desc, norm.f)
static const desc_row desc_rows[] = {
    /* key, setup name, Qwen3 key, type, offset, flags, default, range, with,
     * {place in lattice.config, among Qwen3's keys, under "lattice"}, not Qwen3 */
    {"vocab_size", 0, "vocab_size", D_INT, P(vocab_size), NEEDS, 0, 1, BIG, 0, {0, 0, -1}, 0},
    {"d_model", 0, "hidden_size", D_INT, P(d_model), NEEDS, 0, 1, BIG, 0, {1, 1, -1}, 0},
    {"n_layers", 0, "num_hidden_layers", D_INT, P(n_layers), NEEDS, 0, 1, BIG, 0, {2, 3, -1}, 0},
    {"n_active_layers", 0, 0, D_INT, P(n_active_layers), ACTIVE, 0, 1, BIG, 0, {3, -1, 5},
     "%s of %d layers active (Qwen3 runs every layer)"},
    {"n_heads", 0, "num_attention_heads", D_INT, P(n_heads), NEEDS, 0, 1, BIG, 0, {4, 4, -1}, 0},
    {"n_kv_heads", 0, "num_key_value_heads", D_INT, P(n_kv_heads), 0, 0, 1, BIG, 0, {5, 5, -1},
     0},
    {"head_dim", 0, "head_dim", D_INT, P(head_dim), 0, 0, 0, BIG, 0, {6, 6, -1}, 0},
    {"d_ff", 0, "intermediate_size", D_INT, P(d_ff), NEEDS, 0, 1, BIG, 0, {7, 2, -1}, 0},
    {"rope_theta", 0, "rope_theta", D_REAL, P(rope_theta), 0, 1e6, 0, FLT_MAX, 0, {14, 8, -1},
     0},
    {"qk_norm", 0, 0, D_FLAG, P(qk_norm), 0, 1, -1, BIG, 0, {8, -1, 4},
     "a model without q/k norm (Qwen3 normalises queries and keys)"},
    {"block_norm", 0, 0, D_INT, P(block_norm), SET_ONLY, 0, 0, BIG, 0, {10, -1, 6},
     "block_norm %s (Qwen3 has no block-entry norm)"},
    {"block_rescale", 0, 0, D_INT, P(block_rescale), SET_ONLY, 0, 0, BIG, 0, {11, -1, 7},
     "block_rescale %s (Qwen3 has no block-entry rescale)"},
    {"massive_offset", 0, 0, D_REAL, P(massive_offset), SET_ONLY, 0, 0, FLT_MAX, 0, {19, -1, 8},
     "massive_offset %s (Qwen3 has no induced row-start offset)"},
    {"massive_layer", 0, 0, D_INT, P(massive_layer), 0, 1, 0, BIG, "massive_offset", {12, -1, 9},
     0},
    {"massive_channel", 0, 0, D_INT, P(massive_channel), 0, 0, 0, BIG, "massive_offset",
     {13, -1, 10}, 0},
    {"tie_embeddings", 0, "tie_word_embeddings", D_FLAG, P(tie_embeddings), 0, 0, -1, BIG, 0,
     {9, 9, -1}, 0},
    {"placement", 0, 0, D_PLACEMENT, N(placement), 0, LATTICE_NORM_PLACEMENT_PRE, 0, 2, 0,
     {15, -1, 0}, "a %s-norm model (Qwen3 is pre-norm)"},
    {"norm", "norm_kind", 0, D_KIND, N(kind), 0, LATTICE_NORM_KIND_RMS, 0, 1, 0, {16, -1, 1},
     "a LayerNorm model (Qwen3's norms are RMSNorm)"},
    {"eps", "norm_eps", "rms_norm_eps", D_REAL, N(eps), 0, 1e-6, 0, FLT_MAX, 0, {17, 7, 2}, 0},
    {"residual_scale", 0, 0, D_REAL, N(residual_scale), 0, 1, 0, FLT_MAX, 0, {18, -1, 3},
     "residual_scale %s (Qwen3 adds its residuals unscaled)"},
};
#undef BIG
#undef P
#undef N
#define N_ROWS ((int)(sizeof desc_rows / sizeof desc_rows[0]))

const char *lattice__model_desc_key(int i, int *compared)
{
    if (i < 0 || i >= N_ROWS)
        return NULL;
    *compared = !(desc_rows[i].flags & ACTIVE);
    return desc_rows[i].key;
}

/* The row at place `place` of the file `at` lists, or NULL past its last. */
static const desc_row *row_at(int at, int place)
{
    for (int i = 0; i < N_ROWS; i++)
        if (desc_rows[i].at[at] == place)
            return &desc_rows[i];
    return NULL;
}

static int is_real(const desc_row *r) { return r->type == D_REAL; }

/* The row's value in d: a float, or an int (an enum is stored as one). */
static double get(const desc_row *r, const model_desc *d)
{
    const char *at = (const char *)d + r->offset;
    return is_real(r) ? *(const float *)at : *(const int *)at;
}

static void set(const desc_row *r, model_desc *d, double x)
{
    char *at = (char *)d + r->offset;
    if (is_real(r))
        *(float *)at = (float)x;
    else
        *(int *)at = (int)x;
}

static const char *const *names_of(const desc_row *r)
{
    return r->type == D_PLACEMENT ? placement_names : r->type == D_KIND ? kind_names : NULL;
}

/* Whether a and b are one value of the row (a flag's: zero or not). */
static int same(const desc_row *r, double a, double b)
{
    return r->type == D_FLAG ? (a != 0) == (b != 0) : a == b;
}

/* Whether the row means something in d: the setting it needs is not its default. */
static int applies(const desc_row *r, const model_desc *d)
{
    for (int i = 0; r->with && i < N_ROWS; i++)
        if (!strcmp(desc_rows[i].key, r->with))
            return get(&desc_rows[i], d) != desc_rows[i].dflt;
    return 1;
}

/* x as text: an enum's name, an integer, or a number of `digits` digits. */
static void value_text(const desc_row *r, double x, int digits, char *buf, size_t n)
{
    if (names_of(r))
        snprintf(buf, n, "%s", x >= r->lo && x <= r->hi ? names_of(r)[(int)x] : "unknown");
    else if (is_real(r))
        snprintf(buf, n, "%.*g", digits, x);
    else
        snprintf(buf, n, "%.0f", x);
}

/* x as the file `at` writes it: in config.json a number as the shortest
 * decimal of its float, and a flag under a Qwen3 key as a boolean. */
static json_object *value_json(const desc_row *r, double x, int at)
{
    if (names_of(r))
        return json_object_new_string(names_of(r)[(int)x]);
    if (is_real(r))
        return json_object_new_double(at == AT_CONFIG ? x : float_decimal((float)x));
    if (at == AT_QWEN3 && r->type == D_FLAG)
        return json_object_new_boolean(x != 0);
    return json_object_new_int64((int64_t)x);
}

/* v as the row holds it: 1, or 0 when v is not of its type (an enum: not one of its names). */
static int value_of(const desc_row *r, json_object *v, double *out)
{
    const char *const *names = names_of(r);
    if (names) {
        for (int i = (int)r->lo; json_object_is_type(v, json_type_string) && i <= (int)r->hi; i++)
            if (!strcmp(json_object_get_string(v), names[i]))
                return *out = i, 1;
        return 0;
    }
    if (!json_object_is_type(v, json_type_int) &&
        !json_object_is_type(v, is_real(r) ? json_type_double : json_type_boolean))
        return 0;
    *out = is_real(r) ? json_object_get_double(v) : (double)json_object_get_int64(v);
    return 1;
}

/* The places from..to-1 of the file `at` as the keys of o, where d lists them. */
static int add_rows(json_object *o, const model_desc *d, int at, int from, int to)
{
    int ok = 1;
    const desc_row *r;
    for (int place = from; ok && place < to && (r = row_at(at, place)); place++)
        if (applies(r, d) && !((r->flags & SET_ONLY) && get(r, d) == r->dflt))
            ok = lattice__json_add(o, at == AT_QWEN3 ? r->q3 : r->key,
                                   value_json(r, get(r, d), at));
    return ok;
}

static model_desc desc_of(const lattice_model *m)
{
    model_desc d = {m->p, m->norm};
    d.p.n_active_layers = m->n_active;
    return d;
}

void lattice__model_setup_desc(const lattice_model *m, lattice__setup *s)
{
    const model_desc d = desc_of(m);
    for (const desc_row *r = desc_rows; r < desc_rows + N_ROWS; r++) {
        /* a row that means nothing here is 0: models without its setting
         * compare equal whatever it says */
        const double x = applies(r, &d) ? get(r, &d) : 0;
        if (!(r->flags & ACTIVE))
            lattice__setup_add(s, is_real(r) ? LATTICE__SETUP_REAL : LATTICE__SETUP_INT,
                               is_real(r) ? lattice__setup_real_bits(x) : (int64_t)x, "%s",
                               r->setup ? r->setup : r->key);
    }
}

char *lattice__model_desc_config(const lattice_model *m)
{
    const model_desc d = desc_of(m);
    json_object *o = json_object_new_object();
    char *s = add_rows(o, &d, AT_CONFIG, 0, N_ROWS) ? lattice__json_dump(o) : NULL;
    json_object_put(o);
    return s;
}

/* What keeps m from being a Hugging Face Qwen3 model (a config.json of
 * model_type "qwen3" would load as something else), or NULL: a setting Qwen3
 * has no key for at another value than every Qwen3 model's, the active count
 * last (the settings say first what else the model is). */
static const char *not_qwen3(const lattice_model *m, char *why, size_t size)
{
    const model_desc d = desc_of(m);
    const desc_row *r;
    for (int active = 0; active < 2; active++)
        for (int place = 0; (r = row_at(AT_LATTICE, place)); place++) {
            const double x = get(r, &d), q3 = active ? d.p.n_layers : r->dflt;
            char text[32];
            if (!(r->flags & ACTIVE) != !active || r->q3 || !applies(r, &d) || same(r, x, q3))
                continue;
            value_text(r, x, 6, text, sizeof text);
            snprintf(why, size, r->not_q3, text, d.p.n_layers);
            return why;
        }
    return NULL;
}

lattice_status lattice__model_desc_hf(lattice_model *m, int lattice_type, json_object **out)
{
    char why[LATTICE_ERRMSG_SIZE / 2];
    const int qwen3 = not_qwen3(m, why, sizeof why) == NULL;
    *out = NULL;
    if (!qwen3 && !lattice_type)
        return FAIL(m, LATTICE_ERR_UNSUPPORTED,
                    "a Qwen3 config.json cannot describe %s: the weights' own metadata holds "
                    "the whole setup, or LATTICE_MODEL_CONFIG_FLAG_LATTICE writes model_type "
                    "\"lattice\"", why);
    const model_desc d = desc_of(m);
    json_object *o = json_object_new_object(), *ours = json_object_new_object(), *arch;
    int ok = o != NULL;
#define ADD(obj, k, v) ok = ok && lattice__json_add(obj, k, v)
    if (qwen3) {
        ADD(o, "architectures", arch = json_object_new_array());
        ok = ok && lattice__json_push(arch, json_object_new_string("Qwen3ForCausalLM"));
    }
    ADD(o, "model_type", json_object_new_string(qwen3 ? "qwen3" : "lattice"));
    ok = ok && add_rows(o, &d, AT_QWEN3, 0, 7); /* the shape */
    ADD(o, "hidden_act", json_object_new_string("silu"));
    ADD(o, "max_position_embeddings", json_object_new_int64(d.p.max_seq));
    ok = ok && add_rows(o, &d, AT_QWEN3, 7, N_ROWS);
    ADD(o, "attention_bias", json_object_new_boolean(0));
    ADD(o, "torch_dtype", json_object_new_string("float32"));
    ADD(o, "lattice", ours);
    ok = ok && add_rows(ours, &d, AT_LATTICE, 0, N_ROWS);
    ADD(ours, "version", json_object_new_string(LATTICE_VERSION_STRING));
#undef ADD
    if (!ok) {
        json_object_put(o);
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY, "no memory to write the config");
    }
    *out = o;
    return LATTICE_OK;
}

/* Every row but the active count (where a run stands, not what the model is)
 * is compared. Tensors of the same names and shapes can mean another model
 * (placements share some names with other meanings, a block-entry rescale has
 * no tensor of its own, a residual scale none at all), and a tensor the model
 * lacks is never read: the settings decide. A key the file lacks holds its
 * default where the file writes it only when set, and is not compared
 * otherwise (a file from before the key). */
lattice_status lattice__model_desc_compare(lattice_model *m, json_object *o, const char *ours)
{
    const model_desc d = desc_of(m);
    for (const desc_row *r = desc_rows; r < desc_rows + N_ROWS; r++) {
        json_object *v;
        double file = r->dflt, model = get(r, &d);
        const int has = json_object_object_get_ex(o, r->key, &v);
        const int known = !has || value_of(r, v, &file);
        char ft[64], mt[64];
        if ((r->flags & ACTIVE) || !applies(r, &d) || (!has && !(r->flags & SET_ONLY)))
            continue;
        if (!known && !names_of(r))
            return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is not %s", r->key,
                        is_real(r) ? "a number" : "an integer");
        if (is_real(r) && fabs(file) <= FLT_MAX)
            file = (float)file;
        if (known && same(r, file, model))
            continue;
        if (r->type == D_FLAG) /* said as zero or one */
            file = file != 0, model = model != 0;
        value_text(r, file, 9, ft, sizeof ft);
        value_text(r, model, 9, mt, sizeof mt);
        return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is %s, %s's %s: another model", r->key,
                    known ? ft : json_object_to_json_string(v), ours, mt);
    }
    return LATTICE_OK;
}

/* Number and string fields of a JSON config. */
static int get_num(json_object *o, const char *key, float *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return 1;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return 0;
    double x = json_object_get_double(v);
    if (!isfinite(x) || fabs(x) > FLT_MAX) /* not a float */
        return 0;
    *out = (float)x;
    return 1;
}

static const char *get_str(json_object *o, const char *key)
{
    json_object *v;
    return json_object_object_get_ex(o, key, &v) && json_object_is_type(v, json_type_string)
               ? json_object_get_string(v) : NULL;
}

/* Settings of a Qwen3 config.json this library does not implement are refused
 * (LATTICE_ERR_UNSUPPORTED, naming the key) rather than ignored: the weights
 * would load and compute something else. Both layouts of the RoPE base are
 * read: "rope_theta" (into *rope_theta, with the other rows, before this)
 * and (transformers >= 4.5x) "rope_parameters": {"rope_theta": ...,
 * "rope_type": "default"}. */
static lattice_status qwen3_unsupported(json_object *o, float *rope_theta, char *err)
{
#define NOPE(...) return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED, "config: " __VA_ARGS__)
#define BADTYPE(key) \
    return lattice__set_error(err, LATTICE_ERR_FORMAT, "config: %s has the wrong type", key)
    json_object *v;
    /* keys every Qwen3 model here holds at one value (a boolean may be null) */
    static const struct {
        const char *key, *only;
        json_type type;
    } fixed[] = {{"model_type", "\"qwen3\"", json_type_string},
                 {"attention_bias", "false", json_type_boolean},
                 {"use_sliding_window", "false", json_type_boolean},
                 {"hidden_act", "\"silu\"", json_type_string}};
    for (size_t i = 0; i < sizeof fixed / sizeof fixed[0]; i++) {
        if (!json_object_object_get_ex(o, fixed[i].key, &v) ||
            (!v && fixed[i].type == json_type_boolean))
            continue;
        if (!json_object_is_type(v, fixed[i].type))
            BADTYPE(fixed[i].key);
        if (strcmp(json_object_to_json_string(v), fixed[i].only) != 0)
            NOPE("%s %s is not implemented (only %s)", fixed[i].key, json_object_to_json_string(v),
                 fixed[i].only);
    }
    if (json_object_object_get_ex(o, "layer_types", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_array))
            BADTYPE("layer_types");
        for (size_t i = 0; i < json_object_array_length(v); i++) {
            json_object *x = json_object_array_get_idx(v, i);
            if (!json_object_is_type(x, json_type_string))
                BADTYPE("layer_types");
            if (strcmp(json_object_get_string(x), "full_attention") != 0)
                NOPE("layer_types[%zu] \"%s\" is not implemented (only \"full_attention\")", i,
                     json_object_get_string(x));
        }
    }
    if (json_object_object_get_ex(o, "rope_scaling", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_object))
            BADTYPE("rope_scaling");
        const char *type = get_str(v, "rope_type") ? get_str(v, "rope_type") : get_str(v, "type");
        NOPE("rope_scaling (\"%s\") is not implemented", type ? type : "?");
    }
    json_object *rp = NULL; /* rope_parameters: read after rope_theta, which it must equal */
    if (json_object_object_get_ex(o, "rope_parameters", &rp) && rp) {
        float inner = 0.0f;
        if (!json_object_is_type(rp, json_type_object))
            BADTYPE("rope_parameters");
        const char *type = get_str(rp, "rope_type");
        if (!type)
            NOPE("rope_parameters without a rope_type string (per-layer-type RoPE?) is not "
                 "implemented");
        if (strcmp(type, "default") != 0)
            NOPE("rope_parameters.rope_type \"%s\" is not implemented (only \"default\")", type);
        if (!json_object_object_get_ex(rp, "rope_theta", &v) || !get_num(rp, "rope_theta", &inner))
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                "config: rope_parameters needs a number rope_theta");
        if (json_object_object_get_ex(o, "rope_theta", &v) && inner != *rope_theta)
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                "config: rope_theta %g and rope_parameters.rope_theta %g disagree",
                (double)*rope_theta, (double)inner);
        *rope_theta = inner;
    }
    for (int k = 0; k < 2; k++) { /* at the top and in rope_parameters */
        const char *in = k ? "rope_parameters." : "";
        float partial = 1.0f;
        if (k && !rp)
            break;
        if (!get_num(k ? rp : o, "partial_rotary_factor", &partial))
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                                      "config: %spartial_rotary_factor has the wrong type", in);
        if (partial != 1.0f)
            NOPE("%spartial_rotary_factor %g is not implemented (only 1)", in, (double)partial);
    }
    return LATTICE_OK;
#undef NOPE
#undef BADTYPE
}

lattice_status lattice__model_desc_read(json_object *o, int qwen3, lattice_model_params *p,
                                       lattice__norm_spec *norm, char *err)
{
    model_desc d = {.p = *p};
    for (const desc_row *r = desc_rows; r < desc_rows + N_ROWS; r++)
        set(r, &d, r->dflt);
    lattice_status st = LATTICE_OK;
    for (const desc_row *r = desc_rows; st == LATTICE_OK && r < desc_rows + N_ROWS; r++) {
        const char *key = qwen3 ? r->q3 : r->key;
        json_object *v;
        double x;
        if (!key)
            continue;
        if (!json_object_object_get_ex(o, key, &v)) {
            if (qwen3 ? (r->flags & NEEDS) : !(r->flags & SET_ONLY) && !r->with)
                st = lattice__set_error(err, LATTICE_ERR_FORMAT, "config: %s is missing", key);
        } else if (!value_of(r, v, &x) || !isfinite(x) || x < r->lo || x > r->hi) {
            char lo[32], hi[32];
            value_text(r, r->lo, 6, lo, sizeof lo);
            value_text(r, r->hi, 6, hi, sizeof hi);
            st = lattice__set_error(err, LATTICE_ERR_FORMAT, "config: %s is not %s %s .. %s", key,
                                    names_of(r) ? "one of" : is_real(r) ? "a number in"
                                                                       : "an integer in", lo, hi);
        } else {
            set(r, &d, x);
        }
    }
    if (st == LATTICE_OK && qwen3) { /* Qwen3's defaults that follow from other keys */
        if (!json_object_object_get_ex(o, "num_key_value_heads", NULL))
            d.p.n_kv_heads = d.p.n_heads;
        if (d.p.head_dim == 0 && d.p.n_heads > 0)
            d.p.head_dim = d.p.d_model / d.p.n_heads;
        d.p.n_active_layers = d.p.n_layers;
        st = qwen3_unsupported(o, &d.p.rope_theta, err);
    }
    *p = d.p;
    *norm = d.norm;
    return st;
}
