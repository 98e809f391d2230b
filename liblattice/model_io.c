/* Models to and from safetensors files. */
#include "model_impl.h"

#include "atomic_file.h"
#include "json.h"
#include "safetensors.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

/* The shape and placement as a JSON string (caller frees); NULL when memory runs out. */
static char *config_json(const lattice_model *m)
{
    json_object *o = json_object_new_object();
    const lattice_model_params *p = &m->p;
    int ok = o != NULL;
#define I(k, v) ok = ok && lattice__json_add(o, k, json_object_new_int64(v))
    I("vocab_size", p->vocab_size);
    I("d_model", p->d_model);
    I("n_layers", p->n_layers);
    I("n_active_layers", m->n_active);
    I("n_heads", p->n_heads);
    I("n_kv_heads", p->n_kv_heads);
    I("head_dim", p->head_dim);
    I("d_ff", p->d_ff);
    I("qk_norm", p->qk_norm);
    I("tie_embeddings", p->tie_embeddings);
    if (p->block_norm > 0) /* written only when set: files without it read as before */
        I("block_norm", p->block_norm);
    if (p->block_rescale > 0)
        I("block_rescale", p->block_rescale);
    if (p->massive_offset > 0.0f) {
        I("massive_layer", p->massive_layer);
        I("massive_channel", p->massive_channel);
    }
#undef I
#define D(k, v) ok = ok && lattice__json_add(o, k, json_object_new_double(v))
#define S(k, v) ok = ok && lattice__json_add(o, k, json_object_new_string(v))
    D("rope_theta", p->rope_theta);
    S("placement", lattice_norm_placement_name(m->norm.placement));
    S("norm", m->norm.kind == LATTICE_NORM_KIND_LAYER ? "layer" : "rms");
    D("eps", m->norm.eps);
    D("residual_scale", m->norm.residual_scale);
    if (p->massive_offset > 0.0f)
        D("massive_offset", p->massive_offset);
#undef D
#undef S
    char *s = ok ? lattice__json_dump(o) : NULL;
    json_object_put(o);
    return s;
}

static lattice_status model_save(const lattice_model *cm, const char *path)
{
    lattice_model *m = (lattice_model *)cm; /* only its error buffer is written */
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(cm), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_save: invalid argument: model is NULL");
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    st_entry *e = calloc((size_t)m->n_tensors, sizeof(*e));
    char *cfg = config_json(m);
    if (!e || !cfg) {
        free(e);
        free(cfg);
        return FAIL(m, LATTICE_ERR_OUT_OF_MEMORY, "no memory to save the model");
    }
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        e[i].name = t->name;
        e[i].dtype = ST_F32;
        e[i].ndim = t->ndim;
        e[i].shape[0] = t->rows;
        e[i].shape[1] = t->cols;
        e[i].data = t->data;
    }
    const char *meta[] = {"format", "pt", "lattice.version", LATTICE_VERSION_STRING,
                          "lattice.config", cfg, NULL};
    lattice_status st = lattice__st_write(path, e, m->n_tensors, meta, m->err);
    free(e);
    free(cfg);
    return st;
}

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

/* What keeps m from being a Hugging Face Qwen3 model (a config.json of
 * model_type "qwen3" would load as something else), or NULL. */
static const char *not_qwen3(const lattice_model *m, char *why, size_t size)
{
    const lattice_model_params *p = &m->p;
    if (m->norm.placement != LATTICE_NORM_PLACEMENT_PRE)
        snprintf(why, size, "a %s-norm model (Qwen3 is pre-norm)",
                 lattice_norm_placement_name(m->norm.placement));
    else if (m->norm.kind != LATTICE_NORM_KIND_RMS)
        snprintf(why, size, "a LayerNorm model (Qwen3's norms are RMSNorm)");
    else if (!p->qk_norm)
        snprintf(why, size, "a model without q/k norm (Qwen3 normalises queries and keys)");
    else if (m->norm.residual_scale != 1.0f)
        snprintf(why, size, "residual_scale %g (Qwen3 adds its residuals unscaled)",
                 (double)m->norm.residual_scale);
    else if (p->block_norm > 0)
        snprintf(why, size, "block_norm %d (Qwen3 has no block-entry norm)", p->block_norm);
    else if (p->block_rescale > 0)
        snprintf(why, size, "block_rescale %d (Qwen3 has no block-entry rescale)",
                 p->block_rescale);
    else if (p->massive_offset > 0.0f)
        snprintf(why, size, "massive_offset %g (Qwen3 has no induced row-start offset)",
                 (double)p->massive_offset);
    else if (m->n_active != p->n_layers)
        snprintf(why, size, "%d of %d layers active (Qwen3 runs every layer)", m->n_active,
                 p->n_layers);
    else
        return NULL;
    return why;
}

/* The config.json of save_pretrained: Qwen3's keys, then "lattice" with the
 * settings Qwen3 has no key for. qwen3 == 0: model_type "lattice". */
static json_object *hf_config(const lattice_model *m, int qwen3)
{
    const lattice_model_params *p = &m->p;
    json_object *o = json_object_new_object(), *ours = json_object_new_object(), *arch;
    int ok = o != NULL;
#define ADD(obj, k, v) ok = ok && lattice__json_add(obj, k, v)
#define I(obj, k, v) ADD(obj, k, json_object_new_int64(v))
#define F(obj, k, v) ADD(obj, k, json_object_new_double(float_decimal(v)))
#define S(obj, k, v) ADD(obj, k, json_object_new_string(v))
    if (qwen3) {
        ADD(o, "architectures", arch = json_object_new_array());
        ok = ok && lattice__json_push(arch, json_object_new_string("Qwen3ForCausalLM"));
    }
    S(o, "model_type", qwen3 ? "qwen3" : "lattice");
    I(o, "vocab_size", p->vocab_size);
    I(o, "hidden_size", p->d_model);
    I(o, "intermediate_size", p->d_ff);
    I(o, "num_hidden_layers", p->n_layers);
    I(o, "num_attention_heads", p->n_heads);
    I(o, "num_key_value_heads", p->n_kv_heads);
    I(o, "head_dim", p->head_dim);
    S(o, "hidden_act", "silu");
    I(o, "max_position_embeddings", p->max_seq);
    F(o, "rms_norm_eps", m->norm.eps);
    F(o, "rope_theta", p->rope_theta);
    ADD(o, "tie_word_embeddings", json_object_new_boolean(p->tie_embeddings != 0));
    ADD(o, "attention_bias", json_object_new_boolean(0));
    S(o, "torch_dtype", "float32");
    ADD(o, "lattice", ours);
    S(ours, "placement", lattice_norm_placement_name(m->norm.placement));
    S(ours, "norm", m->norm.kind == LATTICE_NORM_KIND_LAYER ? "layer" : "rms");
    F(ours, "eps", m->norm.eps);
    F(ours, "residual_scale", m->norm.residual_scale);
    I(ours, "qk_norm", p->qk_norm);
    I(ours, "n_active_layers", m->n_active);
    if (p->block_norm > 0) /* only when set, as in lattice.config */
        I(ours, "block_norm", p->block_norm);
    if (p->block_rescale > 0)
        I(ours, "block_rescale", p->block_rescale);
    if (p->massive_offset > 0.0f) {
        F(ours, "massive_offset", p->massive_offset);
        I(ours, "massive_layer", p->massive_layer);
        I(ours, "massive_channel", p->massive_channel);
    }
    S(ours, "version", LATTICE_VERSION_STRING);
#undef ADD
#undef I
#undef F
#undef S
    if (!ok) {
        json_object_put(o);
        return NULL;
    }
    return o;
}

static lattice_status model_save_config(const lattice_model *cm, const char *path,
                                        unsigned flags)
{
    lattice_model *m = (lattice_model *)cm; /* only its error buffer is written */
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(cm), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_save_config: invalid argument: model is NULL");
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    const unsigned known = LATTICE_MODEL_CONFIG_FLAG_LATTICE;
    if (flags & ~known)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_model_save_config: invalid argument: flags 0x%x has bits no "
                    "lattice_model_config_flag names (0x%x)", flags, flags & ~known);
    char why[LATTICE_ERRMSG_SIZE / 2];
    const int qwen3 = not_qwen3(m, why, sizeof why) == NULL;
    if (!qwen3 && !(flags & LATTICE_MODEL_CONFIG_FLAG_LATTICE))
        return FAIL(m, LATTICE_ERR_UNSUPPORTED,
                    "a Qwen3 config.json cannot describe %s: the weights' own metadata holds "
                    "the whole setup, or LATTICE_MODEL_CONFIG_FLAG_LATTICE writes model_type "
                    "\"lattice\"", why);
    json_object *o = hf_config(m, qwen3);
    char *text = o ? lattice__json_dump_pretty(o) : NULL;
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

/* The file's lattice.config o against the model (named ours in messages:
 * "the model", or the config.json it was made from): every setting
 * config_json writes but n_active_layers (where a run stands, not what the
 * model is).
 * Tensors of the same names and shapes can mean another model (a block-entry
 * rescale has no tensor of its own, a residual scale none at all), and a
 * tensor the model lacks is never read: the settings decide. A key a file
 * lacks reads as config_json's default when it writes it only when set, and
 * is not compared otherwise (a file from before the key). */
static lattice_status same_architecture(lattice_model *m, json_object *o, const char *ours)
{
    const lattice_model_params *p = &m->p;
    json_object *v;
    const struct {
        const char *key;
        int64_t model;
        int has_default;
        int64_t dflt;
    } ints[] = {
        {"vocab_size", p->vocab_size, 0, 0},       {"d_model", p->d_model, 0, 0},
        {"n_layers", p->n_layers, 0, 0},           {"n_heads", p->n_heads, 0, 0},
        {"n_kv_heads", p->n_kv_heads, 0, 0},       {"head_dim", p->head_dim, 0, 0},
        {"d_ff", p->d_ff, 0, 0},                   {"qk_norm", p->qk_norm != 0, 0, 0},
        {"tie_embeddings", p->tie_embeddings != 0, 0, 0},
        {"block_norm", p->block_norm, 1, 0},       {"block_rescale", p->block_rescale, 1, 0},
    };
    for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
        int64_t file = ints[i].dflt;
        if (json_object_object_get_ex(o, ints[i].key, &v)) {
            if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean))
                return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is not an integer", ints[i].key);
            file = json_object_get_int64(v);
            if (!strcmp(ints[i].key, "qk_norm") || !strcmp(ints[i].key, "tie_embeddings"))
                file = file != 0;
        } else if (!ints[i].has_default) {
            continue;
        }
        if (file != ints[i].model)
            return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is %lld, %s's %lld: another "
                        "model", ints[i].key, (long long)file, ours, (long long)ints[i].model);
    }
    const char *kind = m->norm.kind == LATTICE_NORM_KIND_LAYER ? "layer" : "rms";
    if (json_object_object_get_ex(o, "norm", &v) &&
        (!json_object_is_type(v, json_type_string) || strcmp(json_object_get_string(v), kind)))
        return FAIL(m, LATTICE_ERR_FORMAT, "the file's norm is %s, %s's %s: another model",
                    json_object_get_string(v), ours, kind);
    const float massive = p->massive_offset;
    const struct {
        const char *key;
        float model;
        int has_default;
        float dflt;
    } reals[] = {
        {"rope_theta", p->rope_theta, 0, 0.0f},
        {"eps", m->norm.eps, 0, 0.0f},
        {"residual_scale", m->norm.residual_scale, 0, 0.0f},
        {"massive_offset", massive, 1, 0.0f},
    };
    float file_massive = 0.0f;
    for (size_t i = 0; i < sizeof reals / sizeof reals[0]; i++) {
        float file = reals[i].dflt;
        if (json_object_object_get_ex(o, reals[i].key, &v)) {
            if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
                return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is not a number", reals[i].key);
            file = (float)json_object_get_double(v);
        } else if (!reals[i].has_default) {
            continue;
        }
        if (!strcmp(reals[i].key, "massive_offset"))
            file_massive = file;
        if (file != reals[i].model)
            return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is %.9g, %s's %.9g: another "
                        "model", reals[i].key, (double)file, ours, (double)reals[i].model);
    }
    /* where the offset goes matters only where there is one (the file writes
     * them only then) */
    if (file_massive > 0.0f) {
        const struct {
            const char *key;
            int model;
        } at[] = {{"massive_layer", p->massive_layer}, {"massive_channel", p->massive_channel}};
        for (size_t i = 0; i < 2; i++) {
            if (!json_object_object_get_ex(o, at[i].key, &v))
                continue;
            if (!json_object_is_type(v, json_type_int))
                return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is not an integer", at[i].key);
            if (json_object_get_int64(v) != at[i].model)
                return FAIL(m, LATTICE_ERR_FORMAT, "the file's %s is %lld, %s's %d: "
                            "another model", at[i].key, (long long)json_object_get_int64(v), ours,
                            at[i].model);
        }
    }
    return LATTICE_OK;
}

/* The file's lattice.config, where it has one, must describe m in every
 * setting, whether m was made by the caller, from the file itself or from a
 * config.json given beside it (named ours in messages): weights of a
 * block_rescale model loaded under a plain Qwen3 config.json gave other
 * logits without a word. */
static lattice_status load_open(lattice_model *m, const st_file *sf, const char *ours)
{
    /* Placements share some tensor names with different meanings (pre's
     * post_attention_layernorm sits before the MLP, peri's after attention):
     * a file that says what it is must match. */
    const char *cfg = lattice__st_meta(sf, "lattice.config");
    json_object *o = NULL, *v;
    lattice_status st =
        cfg ? lattice__json_parse(cfg, strlen(cfg), 0, "lattice.config", &o, m->err) : LATTICE_OK;
    if (st != LATTICE_OK)
        return st;
    const char *pl = o && json_object_object_get_ex(o, "placement", &v) ? json_object_get_string(v)
                                                                        : NULL;
    if (pl && strcmp(pl, lattice_norm_placement_name(m->norm.placement)) != 0)
        st = FAIL(m, LATTICE_ERR_FORMAT, "the file's placement is %s, %s's %s: the file "
                  "holds a %s-norm model", pl, ours, lattice_norm_placement_name(m->norm.placement),
                  pl);
    if (st == LATTICE_OK && o)
        st = same_architecture(m, o, ours);
    json_object_put(o);
    if (st != LATTICE_OK)
        return st;
    for (int i = 0; i < m->n_tensors; i++) {
        const tensor_entry *t = &m->tensors[i];
        const st_tensor *f = lattice__st_find(sf, t->name);
        if (!f)
            return FAIL(m, LATTICE_ERR_FORMAT, "tensor '%s' is missing from the file", t->name);
        int64_t want[2] = {t->rows, t->cols};
        int ok = f->ndim == t->ndim;
        for (int d = 0; ok && d < t->ndim; d++)
            ok = f->shape[d] == want[d];
        if (!ok)
            return FAIL(m, LATTICE_ERR_FORMAT,
                        "tensor '%s' has shape [%lld%s%lld] in the model but not in the file",
                        t->name, (long long)t->rows, t->ndim == 2 ? ", " : "",
                        t->ndim == 2 ? (long long)t->cols : 0LL);
        lattice_status st = lattice__st_read_f32(sf, f, t->data, t->rows * t->cols, m->err);
        if (st != LATTICE_OK)
            return st;
    }
    return LATTICE_OK;
}

static lattice_status model_load(lattice_model *m, const char *path)
{
    if (!m)
        return lattice__set_error(LATTICE__ERRBUF(m), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_model_load: invalid argument: model is NULL");
    if (!path)
        return FAIL(m, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    st_file sf;
    lattice_status st = lattice__st_open(&sf, path, m->err);
    if (st != LATTICE_OK)
        return st;
    st = load_open(m, &sf, "the model");
    lattice__st_close(&sf);
    m->batch = m->seq = 0;
    return st;
}

/* Integer and number fields of a JSON config, with presence and range checks. */
static int get_int(json_object *o, const char *key, int *out, int required)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return !required;
    if (!json_object_is_type(v, json_type_int) && !json_object_is_type(v, json_type_boolean))
        return 0;
    int64_t x = json_object_get_int64(v);
    if (x < -1 || x > (1 << 30))
        return 0;
    *out = (int)x;
    return 1;
}

static int get_num(json_object *o, const char *key, float *out)
{
    json_object *v;
    if (!json_object_object_get_ex(o, key, &v))
        return 1;
    if (!json_object_is_type(v, json_type_double) && !json_object_is_type(v, json_type_int))
        return 0;
    double x = json_object_get_double(v);
    if (!isfinite(x))
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
 * read: "rope_theta" and (transformers >= 4.5x) "rope_parameters":
 * {"rope_theta": ..., "rope_type": "default"}. */
static lattice_status qwen3_unsupported(json_object *o, float *rope_theta, char *err)
{
#define NOPE(...) return lattice__set_error(err, LATTICE_ERR_UNSUPPORTED, "config: " __VA_ARGS__)
#define BADTYPE(key) \
    return lattice__set_error(err, LATTICE_ERR_FORMAT, "config: %s has the wrong type", key)
    json_object *v;
    const char *s;
    if (json_object_object_get_ex(o, "model_type", &v)) {
        if (!(s = get_str(o, "model_type")))
            BADTYPE("model_type");
        if (strcmp(s, "qwen3") != 0)
            NOPE("model_type \"%s\" is not implemented (only \"qwen3\")", s);
    }
    if (json_object_object_get_ex(o, "attention_bias", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_boolean))
            BADTYPE("attention_bias");
        if (json_object_get_boolean(v))
            NOPE("attention_bias true is not implemented (no q/k/v/o biases)");
    }
    if (json_object_object_get_ex(o, "use_sliding_window", &v) &&
        !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_boolean))
            BADTYPE("use_sliding_window");
        if (json_object_get_boolean(v))
            NOPE("use_sliding_window true is not implemented (full causal attention only)");
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
    if (json_object_object_get_ex(o, "hidden_act", &v)) {
        if (!(s = get_str(o, "hidden_act")))
            BADTYPE("hidden_act");
        if (strcmp(s, "silu") != 0)
            NOPE("hidden_act \"%s\" is not implemented (only \"silu\")", s);
    }
    if (json_object_object_get_ex(o, "rope_scaling", &v) && !json_object_is_type(v, json_type_null)) {
        if (!json_object_is_type(v, json_type_object))
            BADTYPE("rope_scaling");
        const char *type = get_str(v, "rope_type") ? get_str(v, "rope_type") : get_str(v, "type");
        NOPE("rope_scaling (\"%s\") is not implemented", type ? type : "?");
    }
    float theta = *rope_theta;
    int have_theta = json_object_object_get_ex(o, "rope_theta", &v);
    if (have_theta && !get_num(o, "rope_theta", &theta))
        BADTYPE("rope_theta");
    if (json_object_object_get_ex(o, "rope_parameters", &v) && !json_object_is_type(v, json_type_null)) {
        json_object *x;
        float inner = 0.0f, partial = 1.0f;
        if (!json_object_is_type(v, json_type_object))
            BADTYPE("rope_parameters");
        const char *type = get_str(v, "rope_type");
        if (!type)
            NOPE("rope_parameters without a rope_type string (per-layer-type RoPE?) is not "
                 "implemented");
        if (strcmp(type, "default") != 0)
            NOPE("rope_parameters.rope_type \"%s\" is not implemented (only \"default\")", type);
        if (!json_object_object_get_ex(v, "rope_theta", &x) || !get_num(v, "rope_theta", &inner))
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                "config: rope_parameters needs a number rope_theta");
        if (!get_num(v, "partial_rotary_factor", &partial))
            BADTYPE("rope_parameters.partial_rotary_factor");
        if (partial != 1.0f)
            NOPE("rope_parameters.partial_rotary_factor %g is not implemented (only 1)",
                 (double)partial);
        if (have_theta && inner != theta)
            return lattice__set_error(err, LATTICE_ERR_FORMAT,
                "config: rope_theta %g and rope_parameters.rope_theta %g "
                                      "disagree", (double)theta, (double)inner);
        theta = inner;
    }
    float partial = 1.0f;
    if (!get_num(o, "partial_rotary_factor", &partial))
        BADTYPE("partial_rotary_factor");
    if (partial != 1.0f)
        NOPE("partial_rotary_factor %g is not implemented (only 1)", (double)partial);
    *rope_theta = theta;
    return LATTICE_OK;
#undef NOPE
#undef BADTYPE
}

/* Fill params and placement from a Qwen3 config.json or our own metadata. */
static lattice_status parse_config(json_object *o, int qwen, lattice_model_params *p,
                                   lattice_norm_placement *pl, lattice_norm_kind *kind, float *eps,
                                   float *scale, char *err)
{
#define BADCFG(what) return lattice__set_error(err, LATTICE_ERR_FORMAT, "config: %s", what)
    *pl = LATTICE_NORM_PLACEMENT_PRE;
    *kind = LATTICE_NORM_KIND_RMS;
    *eps = 1e-6f;
    *scale = 1.0f;
    if (qwen) {
        p->head_dim = 0;
        p->qk_norm = 1;
        p->tie_embeddings = 0;
        if (!get_int(o, "hidden_size", &p->d_model, 1) ||
            !get_int(o, "intermediate_size", &p->d_ff, 1) ||
            !get_int(o, "num_hidden_layers", &p->n_layers, 1) ||
            !get_int(o, "num_attention_heads", &p->n_heads, 1) ||
            !get_int(o, "vocab_size", &p->vocab_size, 1))
            BADCFG("needs integer hidden_size, intermediate_size, num_hidden_layers, "
                   "num_attention_heads and vocab_size");
        p->n_kv_heads = p->n_heads;
        if (!get_int(o, "num_key_value_heads", &p->n_kv_heads, 0) ||
            !get_int(o, "head_dim", &p->head_dim, 0) ||
            !get_int(o, "tie_word_embeddings", &p->tie_embeddings, 0) ||
            !get_num(o, "rms_norm_eps", eps))
            BADCFG("a field has the wrong type");
        lattice_status st = qwen3_unsupported(o, &p->rope_theta, err);
        if (st != LATTICE_OK)
            return st;
        if (p->head_dim == 0 && p->n_heads > 0)
            p->head_dim = p->d_model / p->n_heads;
        p->n_active_layers = p->n_layers;
        return LATTICE_OK;
    }
    if (!get_int(o, "vocab_size", &p->vocab_size, 1) || !get_int(o, "d_model", &p->d_model, 1) ||
        !get_int(o, "n_layers", &p->n_layers, 1) ||
        !get_int(o, "n_active_layers", &p->n_active_layers, 1) ||
        !get_int(o, "n_heads", &p->n_heads, 1) || !get_int(o, "n_kv_heads", &p->n_kv_heads, 1) ||
        !get_int(o, "head_dim", &p->head_dim, 1) || !get_int(o, "d_ff", &p->d_ff, 1) ||
        !get_int(o, "qk_norm", &p->qk_norm, 1) ||
        !get_int(o, "tie_embeddings", &p->tie_embeddings, 1) ||
        !get_num(o, "rope_theta", &p->rope_theta) || !get_num(o, "eps", eps) ||
        !get_num(o, "residual_scale", scale))
        BADCFG("lattice.config lacks a field or has one of the wrong type");
    p->block_norm = 0;
    if (!get_int(o, "block_norm", &p->block_norm, 0))
        BADCFG("lattice.config's block_norm is not an integer");
    p->block_rescale = 0;
    if (!get_int(o, "block_rescale", &p->block_rescale, 0))
        BADCFG("lattice.config's block_rescale is not an integer");
    p->massive_offset = 0.0f;
    p->massive_layer = 1;
    p->massive_channel = 0;
    if (!get_num(o, "massive_offset", &p->massive_offset) ||
        !get_int(o, "massive_layer", &p->massive_layer, 0) ||
        !get_int(o, "massive_channel", &p->massive_channel, 0))
        BADCFG("lattice.config's massive_offset, massive_layer or massive_channel is not a number");
    const char *pn = get_str(o, "placement"), *kn = get_str(o, "norm");
    if (!pn || lattice_norm_placement_from_name(pn, pl) != LATTICE_OK)
        BADCFG("unknown placement");
    if (!kn || (strcmp(kn, "rms") && strcmp(kn, "layer")))
        BADCFG("unknown norm kind");
    *kind = strcmp(kn, "layer") == 0 ? LATTICE_NORM_KIND_LAYER : LATTICE_NORM_KIND_RMS;
    return LATTICE_OK;
#undef BADCFG
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
        const st_tensor *f = lattice__st_find(sf, ti.name);
        if (!f) {
            st = lattice__set_error(err, LATTICE_ERR_FORMAT,
                                    "%s: tensor '%s' is missing from the file", path, ti.name);
            break;
        }
        int ok = f->ndim == ti.ndim;
        for (int d = 0; ok && d < ti.ndim; d++)
            ok = f->shape[d] == want[d];
        if (!ok) {
            char got[96] = "";
            for (int d = 0, n = 0; d < f->ndim && n < (int)sizeof got; d++)
                n += snprintf(got + n, sizeof got - (size_t)n, "%s%lld", d ? ", " : "",
                              (long long)f->shape[d]);
            st = lattice__set_error(err, LATTICE_ERR_FORMAT,
                                    "%s: tensor '%s' has shape [%s] in the file, the config needs "
                                    "[%lld%s%lld]", path, ti.name, got, (long long)want[0],
                                    ti.ndim == 2 ? ", " : "", ti.ndim == 2 ? (long long)want[1] : 0LL);
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
    lattice_model_params_init(&p);
    lattice_norm_placement pl;
    lattice_norm_kind kind;
    float eps, scale;
    lattice_norm *norm = NULL;
    lattice_model *m = NULL;
    st = read_config(&sf, path, config_path, &cfg, err);
    if (st == LATTICE_OK)
        st = parse_config(cfg, config_path != NULL, &p, &pl, &kind, &eps, &scale, err);
    if (st == LATTICE_OK) {
        p.max_batch = max_batch;
        p.max_seq = max_seq;
        st = lattice_model_params_check(&p, err);
    }
    /* settings the file holds are the file's fault (FORMAT); memory is not */
    if (st == LATTICE_OK && (st = lattice_norm_create(pl, kind, eps, &norm)) != LATTICE_OK)
        st = st == LATTICE_ERR_OUT_OF_MEMORY
                 ? lattice__set_error(err, st, "no memory for the norm")
                 : lattice__set_error(err, LATTICE_ERR_FORMAT, "config: bad norm settings (eps %g)",
                                      (double)eps);
    if (st == LATTICE_OK && scale != 1.0f && (st = lattice_norm_set_residual_scale(norm, scale)))
        st = lattice__set_error(err, LATTICE_ERR_FORMAT, "config: bad residual scale");
    if (st == LATTICE_OK)
        st = check_file_tensors(&sf, path, &p, norm, backend, err);
    if (st == LATTICE_OK && (st = lattice_model_create(&p, norm, backend, &m)) != LATTICE_OK)
        lattice__set_error(err, st, "cannot create the model: %s", lattice_status_string(st));
    if (st == LATTICE_OK &&
        (st = load_open(m, &sf, config_path ? "the config.json" : "the model")) != LATTICE_OK)
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

/* ---- the public calls, each inside the model's busy section (handle.h) ---- */

lattice_status lattice_model_save(const lattice_model *cm, const char *path)
{
    LATTICE__INSIDE(cm, "lattice_model_save", "model",
                    model_save(cm, path));
}

lattice_status lattice_model_save_config(const lattice_model *cm, const char *path, unsigned flags)
{
    LATTICE__INSIDE(cm, "lattice_model_save_config", "model",
                    model_save_config(cm, path, flags));
}

lattice_status lattice_model_load(lattice_model *m, const char *path)
{
    LATTICE__INSIDE(m, "lattice_model_load", "model",
                    model_load(m, path));
}
