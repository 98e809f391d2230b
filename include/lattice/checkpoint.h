/**
 * @file checkpoint.h
 * @brief Checkpoints of a whole training run, and bit-exact resume.
 *
 * Since 0.3 the checkpoint functions are declared in trainer.h, with the other
 * functions on a trainer (doc/API.md); this header includes it, for sources
 * written against 0.1 and 0.2.
 */
#ifndef LATTICE_CHECKPOINT_H
#define LATTICE_CHECKPOINT_H

#include <lattice/common.h>
#include <lattice/trainer.h>

#endif
