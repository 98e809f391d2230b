/**
 * @file checkpoint.h
 * @brief Checkpoints of a whole training run, and bit-exact resume.
 *
 * Since 0.3 the checkpoint functions are declared in trainer.h: they act on a
 * trainer, and a function is declared in the header of the object it acts on
 * (doc/API.md). This header stays, including trainer.h, because it is public:
 * sources written against 0.1 and 0.2 include it, and removing it would break
 * their `#include <lattice/checkpoint.h>` within one ABI-compatible series.
 */
#ifndef LATTICE_CHECKPOINT_H
#define LATTICE_CHECKPOINT_H

#include <lattice/common.h>
#include <lattice/trainer.h>

#endif
