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
