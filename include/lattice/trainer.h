/**
 * @file trainer.h
 * @brief The trainer: binds model, teacher, loss, data, optimizer and schedule.
 */
#ifndef LATTICE_TRAINER_H
#define LATTICE_TRAINER_H

#include <lattice/common.h>
#include <lattice/data.h>
#include <lattice/distill.h>
#include <lattice/model.h>
#include <lattice/optim.h>
#include <lattice/schedule.h>
#include <lattice/teacher.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup trainer Trainer
 *
 * One step: the next training batch; the teacher's logits for it (once);
 * the student's forward over its active layers; the loss (distillation, or
 * cross-entropy without a teacher) and its gradient; backward; the optimizer
 * update; then the schedule records the step. At the start of each phase the
 * trainer sets the active depth, freezes the layers below the phase's
 * train_from (and unfreezes the others), freezes the LM head and the boundary
 * norm when the phase's train_boundary is 0 (and makes them trainable again at
 * the start of a later phase that trains them; otherwise their flags stay as
 * the caller set them), initialises newly active layers as the phase says,
 * puts the data iterator back where it stood at the run's first step when the
 * phase's rewind_data is set, and, when the phase asks, resets the optimizer
 * and restarts its learning-rate schedule with the phase's step count as its
 * length. The position rewound to is part of a checkpoint.
 *
 * Validation cross-entropy (mean over all counted positions of the data's
 * fixed validation set) is measured every eval_every steps and at the end of
 * every phase.
 *
 * A non-finite loss or gradient norm stops the step with
 * ::LATTICE_ERR_NON_FINITE before any weight changes: the model is as it was
 * before the step, and the schedule does not advance.
 *
 * The trainer borrows every object it binds; they must outlive it and must
 * not be used by anyone else while it runs.
 * @{
 */

/** What one step (and, when measured, validation) gave. */
typedef struct lattice_trainer_metrics {
    size_t size;                 /**< The bytes that hold fields: set by the caller of ::lattice_trainer_step to sizeof(lattice_trainer_metrics), then by the library to the bytes written; in a callback, the library's sizeof. */
    int64_t step;                /**< Steps taken, this one included. */
    int phase;                   /**< Phase of this step. */
    int active_layers;           /**< Active depth of this step. */
    double loss;                 /**< Training loss of the step. */
    double kl;                   /**< Its KL part (0 without a teacher). */
    double ce;                   /**< Its cross-entropy part. */
    double val_ce;               /**< Validation cross-entropy, NaN when not measured at this step. */
    double lr;                   /**< Learning rate used. */
    double grad_norm;            /**< Gradient norm before clipping. */
    int phase_end;               /**< Non-zero when this step ended its phase. */
    lattice_schedule_counters counters;   /**< Counters after the step. */
    double seconds;              /**< Wall time of the step (teacher included). */
} lattice_trainer_metrics;

/**
 * Called after every step. Return non-zero to stop the run. The library owns
 * the struct it passes: its size says which fields exist (the library's
 * sizeof(lattice_trainer_metrics)); a caller compiled against an older header reads
 * only the fields it knows, one compiled against a newer header must check
 * size before reading a field appended later.
 */
typedef int (*lattice_trainer_metrics_fn)(void *user, const lattice_trainer_metrics *metrics);

/** Trainer settings. Fill with ::lattice_trainer_params_init. */
typedef struct lattice_trainer_params {
    size_t size;               /**< sizeof(lattice_trainer_params). */
    int64_t eval_every;        /**< Validation every this many steps (0: only at phase ends). */
    int64_t eval_batches;      /**< Validation batches to use (0: all of them; more than the data has is refused). Used by ::lattice_trainer_evaluate too. */
    uint64_t seed;             /**< A seed for the trainer's own stochastic choices, of which
                                    it makes none yet: no number depends on it. It is part of
                                    the trainer's settings all the same: recorded in
                                    checkpoints, and compared across ranks by
                                    ::lattice_trainer_set_collective, so that a run's setup
                                    says what it would use. */
    lattice_trainer_metrics_fn on_step;/**< Called after every step (progress, logging); may be NULL. */
    lattice_trainer_metrics_fn on_eval;/**< Called after each step that measured validation; may be NULL. */
    void *user;                /**< Passed to the callbacks. */
    const struct lattice_trainer_collective *collective; /**< Run data-parallel from the start (see ::lattice_trainer_set_collective); NULL: alone. The model then needs max_batch only for each rank's share of the batch. @since 0.3 */
    void *collective_user;     /**< Passed to the collective's slots. @since 0.3 */
} lattice_trainer_params;

/** An opaque trainer. */
typedef struct lattice_trainer lattice_trainer;

/**
 * @brief Fill params with defaults (validation at phase ends, all batches, no callbacks).
 * @param[out] params The struct; NULL is ignored.
 */
LATTICE_API void lattice_trainer_params_init(lattice_trainer_params *params);

/**
 * @brief Bind the objects of a run.
 * @param model The student.
 * @param teacher The teacher, or NULL to train on cross-entropy alone.
 * @param distill The loss (required with a teacher, ignored without).
 * @param data The data.
 * @param optim The optimizer of the student.
 * @param schedule The schedule (its depth must fit the student's capacity).
 * @param params The settings; NULL for defaults. With params->collective
 *        the trainer is created as ::lattice_trainer_set_collective would
 *        leave it, and the batch is checked per rank.
 * @param[out] out The new trainer, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG
 *         (vocabularies or batch shapes that do not fit, an empty schedule,
 *         or settings that would train or measure other than asked: a
 *         phase that restarts the optimizer for fewer steps than its
 *         warmup_steps, eval_every above 0 over data without validation
 *         documents, eval_batches above the data's validation batches; since
 *         1.1 a top-k teacher file with reverse KL, which needs dense logits),
 *         ::LATTICE_ERR_OUT_OF_MEMORY, or with params->collective
 *         ::LATTICE_ERR_BACKEND (the ranks' agreement on the setup failed).
 */
LATTICE_API lattice_status lattice_trainer_create(lattice_model *model, lattice_teacher *teacher,
                                                  lattice_distill *distill, lattice_data *data,
                                                  lattice_optim *optim, lattice_schedule *schedule,
                                                  const lattice_trainer_params *params,
                                                  lattice_trainer **out);

/**
 * @brief Destroy a trainer (not what it binds). NULL is ignored.
 * @param trainer The trainer.
 */
LATTICE_API void lattice_trainer_destroy(lattice_trainer *trainer);

/**
 * @brief The message of the last failed call ("" if none).
 * @param trainer The trainer; NULL gives a static message.
 * @return A string valid until the next call on the trainer.
 */
LATTICE_API const char *lattice_trainer_errmsg(const lattice_trainer *trainer);

/**
 * @brief One training step.
 * @param trainer The trainer.
 * @param[in,out] metrics What the step gave; may be NULL. The caller sets
 *        metrics->size to sizeof(lattice_trainer_metrics) as it was compiled; the
 *        library writes no more than that and sets size to the bytes it
 *        wrote. A size below the 1.0 struct's size (0 included) is refused
 *        with ::LATTICE_ERR_INVALID_ARGUMENT before the step runs.
 * @return ::LATTICE_OK, ::LATTICE_ERR_STATE (the schedule has finished, or
 *         the phase has a token budget and a whole pass over the training
 *         data has counted no token, so the budget could never fill; or the
 *         schedule's counters cannot count the step (::lattice_schedule_record's
 *         bounds): the step is not taken), ::LATTICE_ERR_NON_FINITE (a loss or gradient
 *         that is not finite: nothing changed; or an optimizer update that
 *         would make some weights non-finite: those kept their values, the
 *         others and the optimizer's moments and step were updated as
 *         ::lattice_optim_step says, and the step is not counted: the next
 *         reads the same batch), or the status of the object that failed.
 */
LATTICE_API lattice_status lattice_trainer_step(lattice_trainer *trainer, lattice_trainer_metrics *metrics);

/**
 * @brief Steps until the schedule finishes or a callback asks to stop.
 * @param trainer The trainer.
 * @return ::LATTICE_OK, the first failing step's status, or over ranks
 *         ::LATTICE_ERR_BACKEND (the ranks' agreement to stop failed).
 */
LATTICE_API lattice_status lattice_trainer_run(lattice_trainer *trainer);

/**
 * @brief Validation cross-entropy of the student as it is now, over the active layers.
 *
 * The loop of ::lattice_model_evaluate over the trainer's eval_batches (each
 * rank over its rows of every batch, the sums then added over the ranks): on
 * one rank the two give the same bits for the same batches.
 * @param trainer The trainer.
 * @param[out] val_ce Mean over counted positions.
 * @return ::LATTICE_OK, ::LATTICE_ERR_STATE (no validation documents) or a model status.
 */
LATTICE_API lattice_status lattice_trainer_evaluate(lattice_trainer *trainer, double *val_ce);

/**
 * @brief The collective operations a trainer needs to run data-parallel.
 *
 * A companion library fills one of these for its transport (liblattice-mpi
 * does for MPI, see lattice/dist.h) so that the core library never depends
 * on one; a test can fill it with an in-process fake. Every slot is
 * required unless it says otherwise, and is called on the thread that
 * called the trainer; a slot returns 0 on success and anything else on
 * failure, which the trainer reports as ::LATTICE_ERR_BACKEND. Sums must be
 * deterministic: the same inputs give bit-identical results on every rank
 * and in every run with the same number of ranks (a fixed order of
 * additions, never one a transport may choose). Slots are only ever
 * appended; size says which a caller has.
 * @since 0.3
 */
typedef struct lattice_trainer_collective {
    size_t size;                                   /**< sizeof(lattice_trainer_collective) as the caller was compiled. @since 0.3 */
    int (*rank)(void *user);                       /**< This rank, 0 .. n_ranks - 1. @since 0.3 */
    int (*n_ranks)(void *user);                    /**< The number of ranks (at least 1). @since 0.3 */
    int (*sum_floats)(void *user, float *data, size_t count);     /**< Replace data on every rank by the element-wise sum over ranks. @since 0.3 */
    int (*sum_doubles)(void *user, double *data, size_t count);   /**< The same for doubles. @since 0.3 */
    int (*sum_int64)(void *user, int64_t *data, size_t count);    /**< The same for 64-bit integers. @since 0.3 */
    int (*barrier)(void *user);                    /**< Return once every rank has called it. @since 0.3 */
    int (*broadcast)(void *user, void *data, size_t bytes, int root); /**< Copy root's bytes to every rank. @since 0.3 */
    const char *(*errmsg)(void *user);             /**< Optional (may be NULL): why the last failing slot failed, quoted in the trainer's message. @since 0.3 */
} lattice_trainer_collective;

/**
 * @brief Run a trainer data-parallel over the ranks of a collective, or alone again.
 *
 * With N ranks, every rank's trainer binds objects configured identically
 * (the same data file and seed, the same model seed, schedule and
 * optimizer), so that every rank draws the same global batch of B rows;
 * rank r trains on rows [r B/N, (r+1) B/N), and B must divide by N. On its
 * share each rank runs the teacher, the student's forward, the loss and
 * backward; the gradients are then weighted by the rank's share of the
 * batch's counted tokens and summed over ranks, before clipping and the
 * optimizer step, so that they are the gradient of the global mean loss,
 * and the reported loss, KL and cross-entropy are the global ones. The
 * schedule counts the global batch's tokens, so every rank ends a phase at
 * the same step. Validation splits each batch's rows the same way and sums
 * token-weighted. A failure on any rank fails the step on every rank, which
 * then all put it back as a failing step does alone. Checkpoints are
 * written once by rank 0 and loaded by every rank (see
 * ::lattice_trainer_save_checkpoint). From then on, ::lattice_trainer_step,
 * ::lattice_trainer_run, ::lattice_trainer_evaluate and the checkpoint calls
 * are collective: every rank must make the same calls in the same order.
 * With one rank the trainer computes exactly as without a collective.
 *
 * Attaching is collective too: every rank compares a digest of its setup
 * with rank 0's, in parts: the model (its architecture, active depth,
 * trainable groups and weights), the data (its settings, its corpus's
 * identity and its position), the schedule (every phase and the
 * position), the optimizer (its settings, step and moments) and the trainer
 * (eval_every, eval_batches, seed, the teacher and the distillation loss).
 * A rank that differs is refused on every rank, with
 * ::LATTICE_ERR_INVALID_CONFIG and a message naming the first field that
 * differs and the ranks ("rank 1's data batch_size 8 differs from rank 0's
 * 4"); a refusal of this rank's own (a batch that does not divide) is
 * likewise returned by every rank. Nothing is attached then, on any rank.
 * The model's max_batch and max_seq are not compared (they only size its
 * buffers), nor its seed once its weights agree.
 *
 * The model needs max_batch >= B/N rows. ::lattice_trainer_create checks the
 * whole batch against max_batch unless its params name the collective
 * already (lattice_trainer_params::collective), so that a model sized for
 * one rank's share can be bound; detaching such a trainer is refused.
 * @param trainer The trainer.
 * @param ops The operations, copied (up to ops->size); NULL detaches, and the
 *        trainer runs alone again.
 * @param user Passed to every slot; must outlive the attachment.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (a missing slot, a size
 *         below the 1.0 struct's size, a rank outside 0 .. n_ranks - 1: returned at once, on
 *         this rank only), ::LATTICE_ERR_INVALID_CONFIG (a batch that does
 *         not divide by the number of ranks, a share larger than the model's
 *         max_batch, a setup that differs between ranks, or a detach
 *         that would leave the model a batch larger than it holds),
 *         ::LATTICE_ERR_OUT_OF_MEMORY, ::LATTICE_ERR_STATE (another thread is
 *         inside a call on the trainer: nothing changed) or ::LATTICE_ERR_BACKEND
 *         (a slot failed while the ranks compared their setups).
 * @since 0.3
 */
LATTICE_API lattice_status lattice_trainer_set_collective(lattice_trainer *trainer,
                                                          const lattice_trainer_collective *ops,
                                                          void *user);

/**
 * @brief Weight a model's gradients and sum them over the ranks of a collective.
 *
 * For a hand-written loop: after each rank's backward, call this on every
 * rank with weight = (this rank's counted tokens) / (all ranks' counted
 * tokens) to get the gradient of the global mean loss on every rank (the
 * trainer does exactly this). Only the gradients the optimizer reads are
 * touched: trainable groups of the active layers, in the model's tensor
 * order.
 * @param ops The collective (as for ::lattice_trainer_set_collective).
 * @param user Its user pointer.
 * @param model The model, after backward.
 * @param weight Multiplies this rank's gradients before the sum.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_STATE
 *         (another thread is inside a call on the model, a trainer's step
 *         among them: nothing summed) or ::LATTICE_ERR_BACKEND (a slot failed:
 *         the gradients are then unspecified).
 * @since 0.3
 */
LATTICE_API lattice_status lattice_trainer_collective_reduce_gradients(
    const lattice_trainer_collective *ops, void *user, lattice_model *model, double weight);

/** @} */

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
 * The metadata also records the data's settings and the identity of its
 * corpus (token and document counts, the training split, a digest of the
 * token ids), every phase of the schedule, and the model's setup
 * ("model.setup": the shape, placement, norm kind and eps, residual scale,
 * rope_theta, qk_norm, tie_embeddings, block_norm, block_rescale,
 * massive_offset and, with an offset, where it goes), so that a checkpoint
 * resumes only the run it was written by (see
 * ::lattice_trainer_load_checkpoint). A load compares the setup field by
 * field ("the checkpoint's model block_rescale 2 differs from this run's
 * 0"); a checkpoint without "model.setup" (written before 1.0) is refused,
 * naming it: its tensors' shapes say nothing of a residual scale or a
 * block_rescale.
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
 *
 * A model whose active depth the caller changed since the run's last phase
 * start (::lattice_model_set_active_layers between steps) is not saved: a
 * load checks the depth against that phase and would refuse the file.
 * @param trainer The trainer (with everything it binds).
 * @param path Destination.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_STATE (the
 *         depth above), ::LATTICE_ERR_IO, ::LATTICE_ERR_OUT_OF_MEMORY, or over
 *         ranks ::LATTICE_ERR_BACKEND (the ranks' collective failed).
 */
LATTICE_API lattice_status lattice_trainer_save_checkpoint(lattice_trainer *trainer, const char *path);

/**
 * @brief Restore the state of a run into a trainer bound to objects of the same shapes.
 *
 * The file is checked before anything changes: a malformed file, or one
 * written by another setup, leaves the run as it was, and the message names
 * the part and the values that differ ("the checkpoint is of a model with a
 * capacity of 8 layers ... and this run's model has 6", "the checkpoint's
 * schedule phase 0 steps 17 differs from this run's 20"). Refused with
 * ::LATTICE_ERR_FORMAT: another model (its setup, capacity, tensor
 * shapes), another schedule (every phase is compared), and other data:
 * another corpus (its token or document counts, its training split or its
 * token ids), another data seed or other data settings (batch_size,
 * seq_len, ...); a run state that its schedule's position cannot leave (the
 * applied phase after the current one, or before it but at a phase's first
 * step; active layers other than the applied phase's); and a state that
 * lacks a part the run needs, named (model.setup, schedule.phases, data:
 * every checkpoint written before 1.0). Enum values are named as the API
 * spells them ("placement pre"). To resume on other data on purpose, see
 * ::lattice_trainer_load_checkpoint_flags.
 * @param trainer The trainer.
 * @param path The checkpoint.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO,
 *         ::LATTICE_ERR_FORMAT, ::LATTICE_ERR_OUT_OF_MEMORY, or
 *         ::LATTICE_ERR_INVALID_CONFIG for a checkpoint written over another
 *         number of ranks (::LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS of
 *         ::lattice_trainer_load_checkpoint_flags resumes it); over ranks
 *         also ::LATTICE_ERR_BACKEND (the ranks' collective failed).
 */
LATTICE_API lattice_status lattice_trainer_load_checkpoint(lattice_trainer *trainer, const char *path);

/** Options of ::lattice_trainer_load_checkpoint_flags, or-ed together. Append-only. @since 0.4 */
typedef enum lattice_trainer_load_flag {
    LATTICE_TRAINER_LOAD_FLAG_NONE = 0,      /**< As ::lattice_trainer_load_checkpoint. @since 0.4 */
    LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA = 1, /**< Resume on data other than the checkpoint's
                                                  (another corpus, data seed or data settings)
                                                  on purpose. Where the checkpoint's data
                                                  position means the same documents (the same
                                                  corpus, training split, seed and packing:
                                                  another batch_size, for instance) it is
                                                  restored; otherwise the data's iterator stays
                                                  where it stands, and phases that rewind the
                                                  data go back there. @since 0.4 */
    LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS = 2 /**< Resume a checkpoint written over another
                                                   number of ranks (2 ranks on 1, 1 on 4, ...).
                                                   Data-parallel ranks hold one state, so all
                                                   of it is restored: weights, optimizer
                                                   moments and steps, the schedule's position
                                                   and counters, the trainable groups, and the
                                                   data's position and origin, which count
                                                   global batches: every rank of the new count
                                                   draws the same next batch as before and
                                                   takes its share of the rows (the batch must
                                                   divide by the new count, as for any run).
                                                   Not kept: bit-exactness. Gradients, losses
                                                   and validation sum each rank's share, so the
                                                   run goes on as the original rank count would
                                                   have to float rounding only (doc/DISTRIBUTED.md);
                                                   it is bit-exact again for every later resume
                                                   on the new count. @since 0.4 */
} lattice_trainer_load_flag;

/**
 * @brief ::lattice_trainer_load_checkpoint with options.
 * @param trainer The trainer.
 * @param path The checkpoint.
 * @param flags ::lattice_trainer_load_flag values or-ed together (0: none).
 * @return As ::lattice_trainer_load_checkpoint; ::LATTICE_ERR_INVALID_ARGUMENT
 *         also for a bit no ::lattice_trainer_load_flag names.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_trainer_load_checkpoint_flags(lattice_trainer *trainer,
                                                                 const char *path, unsigned flags);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
