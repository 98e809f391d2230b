/**
 * @file checkpoint.h
 * @brief Checkpoints of a whole training run, and bit-exact resume.
 */
#ifndef LATTICE_CHECKPOINT_H
#define LATTICE_CHECKPOINT_H

#include <lattice/common.h>
#include <lattice/trainer.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup checkpoint Checkpoints
 *
 * A checkpoint is one safetensors file holding the student's parameters (the
 * model's own tensor names), the optimizer's moments ("optim.m1.<name>",
 * "optim.m2.<name>") and per-tensor step counts ("optim.steps"), and in its
 * metadata ("lattice.checkpoint", JSON) the optimizer's settings and schedule
 * position, the growth schedule's phase, step and counters, the data
 * iterator's position, and the model's active depth and trainable groups.
 * Data order is a function of the data seed and the pass number, so the
 * position is all the random state there is.
 *
 * A run stopped at any step and resumed from its checkpoint, with objects
 * created as for the original run, gives bit-identical losses to one that
 * never stopped. Writes are atomic: a temporary file in the same directory,
 * fsync, rename; a crash mid-write leaves the previous checkpoint intact, and
 * the next save removes the crashed one's temporary file. A save through a
 * symbolic link replaces the link's target and keeps its permission bits.
 * @{
 */

/**
 * @brief Save the state of a run.
 * @param trainer The trainer (with everything it binds).
 * @param path Destination.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO or
 *         ::LATTICE_ERR_OUT_OF_MEMORY.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_trainer_save_checkpoint(lattice_trainer *trainer, const char *path);

/**
 * @brief Restore the state of a run into a trainer bound to objects of the same shapes.
 *
 * The file is checked before anything changes: a malformed file or one of
 * another model shape or schedule leaves the run as it was.
 * @param trainer The trainer.
 * @param path The checkpoint.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO or
 *         ::LATTICE_ERR_FORMAT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_trainer_load_checkpoint(lattice_trainer *trainer, const char *path);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
