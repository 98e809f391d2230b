/* The norm's private body: placement, kind, eps and residual scale, which the
 * model's passes read (model_impl.h includes it). */
#ifndef LATTICE_NORM_IMPL_H
#define LATTICE_NORM_IMPL_H

#include "internal.h"

struct lattice_norm {
    lattice_norm_placement placement;
    lattice_norm_kind kind;
    float eps;
    float residual_scale;
};

#endif
