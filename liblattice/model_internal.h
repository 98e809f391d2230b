/* What the model's own source files share: model.c (create, accessors,
 * inspection), model_layout.c (params and the arenas' layout), model_pass.c
 * (forward, backward, losses), model_threads.c (the rows split),
 * model_desc.c (what a model is, as its files say it) and model_io.c (the
 * files). Other objects ask through model_access.h. */
#ifndef LATTICE_MODEL_INTERNAL_H
#define LATTICE_MODEL_INTERNAL_H

#include "model_impl.h"
#include "setup.h"

/* Time stmt under op when the model's profiling is on. */
#define PROF(op, stmt)                                                                             \
    do {                                                                                           \
        double t0_ = lattice__prof_begin(&m->prof);                                                \
        stmt;                                                                                      \
        lattice__prof_end(&m->prof, (op), t0_);                                                    \
    } while (0)

/* A public call's body: a NULL model m refused ("fn: invalid argument:
 * model is NULL"; fn a string literal), else expr inside the model's busy
 * section (handle.h). */
#define MODEL_CALL(m, fn, expr)                                                                    \
    do {                                                                                           \
        if (!(m))                                                                                  \
            return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,                                     \
                                 fn ": invalid argument: model is NULL");                          \
        LATTICE__INSIDE(m, fn, "model", expr);                                                     \
    } while (0)

/* Whether layer i is skipped (lattice_model_set_skip): the stream passes it unchanged. */
static inline int lattice__model_skipped(const lattice_model *m, int layer)
{
    return layer >= m->skip_first && layer < m->skip_first + m->skip_count;
}

/* Whether the LM head trains (the embedding's flag when the two are tied). */
static inline int lattice__model_head_trains(const lattice_model *m)
{
    return m->p.tie_embeddings ? m->trainable_embedding : m->trainable_head;
}

/* ---- params and layout (model_layout.c) ---- */

/* The most layers a model has, and the widest a model is (d_model, d_ff). */
#define LATTICE__MAX_LAYERS 4096
#define LATTICE__MAX_WIDTH (1 << 20)

/* The caller's params into dst, checked; fn names the call in a refusal of
 * the struct's size. */
lattice_status lattice__model_adopt_params(lattice_model_params *dst,
                                           const lattice_model_params *src, const char *fn,
                                           char *err);

/* Refuses a block-entry norm outside the pre-norm placement, naming fn. */
lattice_status lattice__model_check_block_norm(const lattice_model_params *p,
                                               const lattice_norm *norm, const char *fn);

/* Carve the parameter arena from base (NULL: measure only) and, when base is
 * set, register the tensors. Returns the bytes used; *n_floats (may be NULL)
 * the floats, padding excluded. */
size_t lattice__model_layout_params(lattice_model *m, char *base, size_t *n_floats);

/* Carve the activation and scratch arena from base (NULL: measure only).
 * Returns the bytes used. */
size_t lattice__model_layout_acts(lattice_model *m, char *base);

/* Draw (or set to 1 or 0) tensor t's initial values from seed. */
void lattice__model_init_tensor(lattice_model *m, const tensor_entry *t, uint64_t seed);

/* ---- the rows split (model_threads.c) ---- */

/* One pass over the batch the model holds: pass runs on the model itself (the
 * ops split, or one thread), or on one view per thread of the rows split; for
 * a backward pass the views' gradient arenas are then added into the model's. */
lattice_status lattice__model_run_pass(lattice_model *m, lattice_status (*pass)(lattice_model *),
                                       int backward);

/* Free the rows split's workspace (and zero it). */
void lattice__model_split_free(model_split *ws);

/* ---- the model's description (model_desc.c) ----
 *
 * What a model is (its params, the active count among them, and its norm's
 * settings) as each file states it; model_io.c reads and writes the files. */

struct json_object; /* json-c's */

/* lattice.config's text (caller frees); NULL when memory runs out. */
char *lattice__model_desc_config(const lattice_model *m);

/* The config.json of save_pretrained into *out: Qwen3's keys, then "lattice"
 * with the settings Qwen3 has no key for. Of model_type "qwen3" where Qwen3
 * describes m; else "lattice" where lattice_type, or refused
 * (LATTICE_ERR_UNSUPPORTED, saying what Qwen3 lacks). Errors in m. */
lattice_status lattice__model_desc_hf(lattice_model *m, int lattice_type, struct json_object **out);

/* The file's lattice.config o against m (named ours in messages: "the
 * model", or the config.json it was made from): LATTICE_ERR_FORMAT, naming
 * the first setting that differs, in m. */
lattice_status lattice__model_desc_compare(lattice_model *m, struct json_object *o,
                                           const char *ours);

/* *p's and *norm's settings from a lattice.config o, or (qwen3) a Qwen3
 * config.json: what it lists, and for the rest their defaults; p's other
 * fields are kept. A key missing, of the wrong type or out of range is
 * LATTICE_ERR_FORMAT, a Qwen3 setting this library does not implement
 * LATTICE_ERR_UNSUPPORTED (naming it in err). */
lattice_status lattice__model_desc_read(struct json_object *o, int qwen3, lattice_model_params *p,
                                       lattice__norm_spec *norm, char *err);

/* The description's part of the model's setup (lattice__model_setup). */
void lattice__model_setup_desc(const lattice_model *m, lattice__setup *s);

/* The key in lattice.config of the description's row i, and whether a load
 * compares it with the model; NULL past the last row (for its tests). */
const char *lattice__model_desc_key(int i, int *compared);

#endif
