/**
 * @file checkpoint.h
 * @brief Deprecated: the checkpoint functions are declared in trainer.h.
 *
 * @deprecated Include <lattice/trainer.h> (or <lattice/lattice.h>). This
 * header only includes trainer.h, so that sources written against 0.1 and 0.2,
 * which declared the checkpoint functions here, still compile; it goes in 1.0
 * with the other old names, and LATTICE_NO_DEPRECATED makes including it an
 * error now.
 */
#ifndef LATTICE_CHECKPOINT_H
#define LATTICE_CHECKPOINT_H

#ifdef LATTICE_NO_DEPRECATED
#  error "lattice/checkpoint.h is deprecated: include <lattice/trainer.h>"
#endif

#include <lattice/trainer.h>

#endif
