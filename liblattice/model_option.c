/* The model options set by key (model.h's lattice_model_option): one row
 * each, with the slot of lattice_model_params that holds it and the bounds
 * the setter enforces. What depends on other fields is model_layout.c's
 * check of the whole params. */
#include "model_internal.h"

#include <math.h>
#include <stddef.h>

typedef struct option_row {
    lattice_model_option key;
    const char *name;
    size_t offset; /* in lattice_model_params */
    int integer;   /* an int slot (else a float) */
    double lo, hi;
    const char *what;
} option_row;

#define AT(f) offsetof(lattice_model_params, f)
static const option_row option_rows[] = {
    {LATTICE_MODEL_OPTION_BLOCK_NORM, "block_norm", AT(block_norm), 1, 0, LATTICE__MAX_LAYERS,
     "the layers per block whose entry is normalised, or 0 for none"},
    {LATTICE_MODEL_OPTION_BLOCK_RESCALE, "block_rescale", AT(block_rescale), 1, 0,
     LATTICE__MAX_LAYERS, "the layers per block whose entry rescales the row-start token, or 0 "
                          "for none"},
    {LATTICE_MODEL_OPTION_MASSIVE_OFFSET, "massive_offset", AT(massive_offset), 0, 0, 1e6,
     "the induced row-start offset as a multiple of the stream's regular RMS, or 0 for none"},
    {LATTICE_MODEL_OPTION_MASSIVE_LAYER, "massive_layer", AT(massive_layer), 1, 1,
     LATTICE__MAX_LAYERS - 1, "the offset goes on the stream after this many layers"},
    {LATTICE_MODEL_OPTION_MASSIVE_CHANNEL, "massive_channel", AT(massive_channel), 1, 0,
     LATTICE__MAX_WIDTH - 1, "the offset's channel"},
};
#undef AT
#define N_OPTIONS ((int)(sizeof option_rows / sizeof option_rows[0]))

/* key's row, or NULL with the refusal in lattice_last_error(). */
static const option_row *row_of(const char *fn, lattice_model_option key)
{
    for (int i = 0; i < N_OPTIONS; i++)
        if (option_rows[i].key == key)
            return &option_rows[i];
    lattice__fail(LATTICE_ERR_UNSUPPORTED,
                  "%s: no model option has the key %d in liblattice %s (the experimental keys "
                  "are %d and above, and a release may retire one)", fn, (int)key,
                  LATTICE_VERSION_STRING, (int)LATTICE_MODEL_OPTION_EXPERIMENTAL_FIRST);
    return NULL;
}

/* Whether value is one r takes: LATTICE_OK, or the refusal. */
static lattice_status refuse(const char *fn, const option_row *r, double value)
{
    if (!(value >= r->lo && value <= r->hi))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: %s %.9g not in %.9g..%.9g: %s", fn, r->name,
                             value, r->lo, r->hi, r->what);
    if (r->integer && value != floor(value))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: %s %.9g is not an integer: %s", fn, r->name,
                             value, r->what);
    return LATTICE_OK;
}

/* key's row into *r, after the checks every keyed call on params makes. */
static lattice_status slot_of(const char *fn, const lattice_model_params *params,
                              lattice_model_option key, const void *value, const option_row **r)
{
    TRY(lattice__need(NULL, fn, 2, (const void *)params, "params", value, "value"));
    TRY(lattice__check_size(NULL, fn, "params->size", "lattice_model_params", params->size,
                            LATTICE__MODEL_PARAMS_1_0));
    *r = row_of(fn, key);
    return *r ? LATTICE_OK : LATTICE_ERR_UNSUPPORTED;
}

lattice_status lattice_model_params_set_option(lattice_model_params *params,
                                               lattice_model_option key, double value)
{
    static const char fn[] = "lattice_model_params_set_option";
    const option_row *r;
    TRY(slot_of(fn, params, key, &value, &r));
    TRY(refuse(fn, r, value));
    char *at = (char *)params + r->offset;
    if (r->integer)
        *(int *)at = (int)value;
    else
        *(float *)at = (float)value;
    return LATTICE_OK;
}

lattice_status lattice_model_params_get_option(const lattice_model_params *params,
                                               lattice_model_option key, double *value)
{
    const option_row *r;
    TRY(slot_of("lattice_model_params_get_option", params, key, value, &r));
    const char *at = (const char *)params + r->offset;
    *value = r->integer ? *(const int *)at : *(const float *)at;
    return LATTICE_OK;
}

lattice_status lattice_model_option_bounds(lattice_model_option key, double *lo, double *hi)
{
    static const char fn[] = "lattice_model_option_bounds";
    TRY(lattice__need(NULL, fn, 2, (const void *)lo, "lo", (const void *)hi, "hi"));
    const option_row *r = row_of(fn, key);
    if (!r)
        return LATTICE_ERR_UNSUPPORTED;
    *lo = r->lo;
    *hi = r->hi;
    return LATTICE_OK;
}
