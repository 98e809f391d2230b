/* Normalization placements: pre, post, peri; RMS or LayerNorm; eps and the residual scale. */
#include "internal.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

struct lattice_norm {
    lattice_norm_placement placement;
    lattice_norm_kind kind;
    float eps;
    float residual_scale;
};

lattice_status lattice_norm_create(lattice_norm_placement placement, lattice_norm_kind kind,
                                   float eps, lattice_norm **out)
{
    if (!out)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_create: invalid argument: out is NULL");
    *out = NULL;
    if (placement != LATTICE_NORM_PLACEMENT_PRE && placement != LATTICE_NORM_PLACEMENT_POST &&
        placement != LATTICE_NORM_PLACEMENT_PERI)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_create: invalid argument: placement %d is none of "
            "LATTICE_NORM_PLACEMENT_PRE, _POST, _PERI", (int)placement);
    if (kind != LATTICE_NORM_KIND_RMS && kind != LATTICE_NORM_KIND_LAYER)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_create: invalid argument: kind %d is neither LATTICE_NORM_KIND_RMS "
            "nor LATTICE_NORM_KIND_LAYER", (int)kind);
    if (!(eps > 0.0f) || !isfinite(eps))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_create: invalid argument: eps %g must be finite and > 0", (double)eps);
    lattice_norm *n = calloc(1, sizeof(*n));
    if (!n)
        return lattice__fail(LATTICE_ERR_OUT_OF_MEMORY,
            "lattice_norm_create: out of memory");
    n->placement = placement;
    n->kind = kind;
    n->eps = eps;
    n->residual_scale = 1.0f;
    *out = n;
    return LATTICE_OK;
}

void lattice_norm_destroy(lattice_norm *norm) { free(norm); }

lattice_status lattice_norm_set_residual_scale(lattice_norm *norm, float scale)
{
    if (!norm)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_set_residual_scale: invalid argument: norm is NULL");
    if (!(scale > 0.0f) || !isfinite(scale))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_set_residual_scale: invalid argument: scale %g must be finite and > 0",
            (double)scale);
    if (norm->placement != LATTICE_NORM_PLACEMENT_POST && scale != 1.0f)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_norm_set_residual_scale: invalid argument: scale %g on a %s norm: only a "
            "post norm scales its residual (others take 1)", (double)scale,
            lattice_norm_placement_name(norm->placement));
    norm->residual_scale = scale;
    return LATTICE_OK;
}

lattice_norm_placement lattice_norm_get_placement(const lattice_norm *norm)
{
    return norm ? norm->placement : LATTICE_NORM_PLACEMENT_PRE;
}

lattice_norm_kind lattice_norm_get_kind(const lattice_norm *norm)
{
    return norm ? norm->kind : LATTICE_NORM_KIND_RMS;
}

float lattice_norm_get_eps(const lattice_norm *norm) { return norm ? norm->eps : 0.0f; }

float lattice_norm_get_residual_scale(const lattice_norm *norm)
{
    return norm ? norm->residual_scale : 0.0f;
}

static const char *const placement_names[] = {"pre", "post", "peri"};

const char *lattice_norm_placement_name(lattice_norm_placement placement)
{
    if ((unsigned)placement < sizeof(placement_names) / sizeof(placement_names[0]))
        return placement_names[placement];
    return "unknown";
}

lattice_status lattice_norm_placement_from_name(const char *name, lattice_norm_placement *out)
{
    if (lattice__need(NULL, "lattice_norm_placement_from_name", 2,
                      (const void *)name, "name", (const void *)out, "out") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    for (unsigned i = 0; i < sizeof(placement_names) / sizeof(placement_names[0]); i++) {
        if (strcmp(name, placement_names[i]) == 0) {
            *out = (lattice_norm_placement)i;
            return LATTICE_OK;
        }
    }
    return lattice__fail(LATTICE_ERR_NOT_FOUND,
        "lattice_norm_placement_from_name: unknown placement '%s'", name);
}
