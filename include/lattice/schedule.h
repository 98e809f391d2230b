/**
 * @file schedule.h
 * @brief Depth schedules: phases of training with a growing (or fixed) active depth.
 */
#ifndef LATTICE_SCHEDULE_H
#define LATTICE_SCHEDULE_H

#include <lattice/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup schedule Growth schedules
 *
 * A schedule is a list of phases. Each phase has a budget (steps, or
 * non-padding tokens), the number of active layers, the first layer that
 * trains (layers below it are frozen: the freeze control), whether the
 * optimizer state is reset and the learning-rate schedule restarts with warmup
 * at the phase start, how layers switched on at its start are initialised,
 * whether the data iterator goes back to where the run began (so that every
 * phase reads the same shard), and whether the LM head and the boundary norm
 * train.
 *
 * The schedule also keeps the run's position (phase, step within it) and its
 * counters; a trainer drives it with ::lattice_schedule_record.
 *
 * Presets cover every arm of the paper, with n_blocks blocks of block_size
 * layers and steps_per_phase steps per phase (paper: 3 x 3 layers, 50000):
 * - ::LATTICE_SCHEDULE_PRESET_JOINT: one phase, all layers.
 * - ::LATTICE_SCHEDULE_PRESET_GROW: phase i has (i + 1) blocks active, all trained,
 *   with the LM head and the boundary norm.
 * - ::LATTICE_SCHEDULE_PRESET_FREEZE: as grow, but after the first phase only the
 *   newest block trains, as the paper's freeze control: phase 0 trains block 0,
 *   the LM head and the boundary norm; each later phase i trains block i alone
 *   (train_from = i * block_size, train_boundary = 0), so every earlier block,
 *   the LM head and the boundary norm stay fixed and the new block's input does
 *   not move (for post-norm the boundary norm is the entry norm, below every
 *   block). The embedding is left as the caller set it (the paper freezes it).
 *
 * No preset rewinds the data (rewind_data = 0: the iterator reads on into new
 * text at each phase); the paper's grow arm replays one shard per phase, which
 * ::lattice_schedule_set_rewind_data turns on for any preset.
 * - ::LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK: phase 0 of grow alone.
 * - ::LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE: all layers, as many steps as give
 *   grow's active-layer tokens (steps_per_phase * (n_blocks + 1) / 2, in
 *   phases of steps_per_phase with the LR restarting at each: 2 phases for 3
 *   blocks).
 * - ::LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL: all layers, n_blocks phases: grow's
 *   total tokens, LR restarting at the same boundaries.
 *
 * A schedule's active layers stay within the model's capacity, the n_layers
 * it was created with (a trainer refuses a deeper phase). To grow past it,
 * ::lattice_model_create_grown makes a model of larger capacity that holds
 * every tensor and setting of the smaller one and draws the new layers as
 * ::lattice_model_create would; a schedule over it then switches them on.
 * @{
 */

/** How layers switched on at a phase start are initialised. Append-only. */
typedef enum lattice_schedule_block_init {
    LATTICE_SCHEDULE_BLOCK_INIT_RANDOM = 0,   /**< Keep the random weights drawn at model creation (the paper). */
    LATTICE_SCHEDULE_BLOCK_INIT_IDENTITY = 1, /**< Zero the attention and MLP output projections (LLaMA-Pro style). */
    LATTICE_SCHEDULE_BLOCK_INIT_COPY = 2      /**< Copy the block below (stacking): a phase that grows the active layers from P to Q makes each new layer i a copy of layer i - (Q - P) (of layer i mod P when Q - P > P), as ::lattice_model_copy_layer copies. */
} lattice_schedule_block_init;

/**
 * @brief One phase. Fill with ::lattice_schedule_phase_init.
 *
 * The struct grows at its end; size says which version the caller was built
 * against. A size below the 1.0 struct's size is refused (the core group's
 * rule).
 */
typedef struct lattice_schedule_phase {
    size_t size;                   /**< sizeof(lattice_schedule_phase), set by the init function. */
    int64_t steps;                 /**< Step budget; 0 to use the token budget. */
    int64_t tokens;                /**< Non-padding token budget, used when steps is 0. */
    int active_layers;             /**< Layers active during the phase. */
    int train_from;                /**< First layer that trains; layers below are frozen (0: all). */
    int reset_optimizer;           /**< Non-zero: reset moments and restart the LR at the phase start,
                                        its schedule (the optimizer's total_steps) run over the phase:
                                        its steps, or for a token budget the steps the budget takes
                                        without padding, ceil(tokens / (batch_size x seq_len)). */
    lattice_schedule_block_init block_init; /**< Initialisation of layers switched on at the phase start. */
    int rewind_data;               /**< Non-zero: at the phase start the trainer puts the data iterator
                                        back where it stood when the run began (the shard's beginning:
                                        the same batches in the same order as the first phase); 0
                                        (default): the iterator continues. @since 0.2 */
    int train_boundary;            /**< Non-zero (default): the LM head and the boundary norm train
                                        during the phase; 0 freezes both (a head tied to the embedding
                                        is left as the caller set the embedding). @since 0.2 */
} lattice_schedule_phase;

/** Presets: every arm of the paper. Append-only. */
typedef enum lattice_schedule_preset {
    LATTICE_SCHEDULE_PRESET_JOINT = 0,                /**< All layers, one phase. */
    LATTICE_SCHEDULE_PRESET_GROW = 1,                 /**< Append a block per phase; all active layers train. */
    LATTICE_SCHEDULE_PRESET_FREEZE = 2,               /**< Append a block per phase; only the new block trains. */
    LATTICE_SCHEDULE_PRESET_SINGLE_BLOCK = 3,         /**< The first block alone, one phase. */
    LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_ACTIVE = 4, /**< All layers, matched to grow on active-layer tokens. */
    LATTICE_SCHEDULE_PRESET_JOINT_MATCHED_TOTAL = 5   /**< All layers, matched to grow on total tokens. */
} lattice_schedule_preset;

/** Counters of a run. */
typedef struct lattice_schedule_counters {
    int64_t steps;               /**< Steps taken. */
    int64_t tokens;              /**< Positions processed, padding included. */
    int64_t nonpad_tokens;       /**< Non-padding positions. */
    int64_t active_layer_tokens; /**< Sum over steps of non-padding tokens x active layers. */
    double flops;                /**< FLOPs reported by the trainer (student forward and backward). */
} lattice_schedule_counters;

/** An opaque schedule. */
typedef struct lattice_schedule lattice_schedule;

/**
 * @brief Fill a phase with defaults: 1000 steps, 1 active layer, all train (head and
 *        boundary norm too), reset on, data continues.
 * @param[out] phase The struct; NULL is ignored.
 */
LATTICE_API void lattice_schedule_phase_init(lattice_schedule_phase *phase);

/**
 * @brief Create an empty schedule (add phases with ::lattice_schedule_add_phase).
 * @param[out] out The new schedule, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_schedule_create(lattice_schedule **out);

/**
 * @brief Create a schedule from a preset.
 * @param preset The arm.
 * @param n_blocks Blocks of the full model (paper: 3).
 * @param block_size Layers per block (paper: 3).
 * @param steps_per_phase Steps of each phase (paper: 50000), 1 ..
 *        2^50 / (n_blocks + 1).
 * @param block_init Initialisation of appended blocks.
 * @param[out] out The new schedule, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG.
 */
LATTICE_API lattice_status lattice_schedule_create_preset(lattice_schedule_preset preset, int n_blocks,
                                                          int block_size, int64_t steps_per_phase,
                                                          lattice_schedule_block_init block_init,
                                                          lattice_schedule **out);

/**
 * @brief The phases of a preset, without a schedule: phase for phase what
 *        ::lattice_schedule_create_preset's schedule holds, for a caller that
 *        edits them (a data rule, a boundary freeze) before it builds its own
 *        schedule with ::lattice_schedule_add_phase.
 * @param preset The arm.
 * @param n_blocks Blocks of the full model.
 * @param block_size Layers per block.
 * @param steps_per_phase Steps of each phase.
 * @param block_init Initialisation of appended blocks.
 * @param[out] phases Room for capacity phases, each written whole (its size is
 *        sizeof(lattice_schedule_phase)); NULL with capacity 0 asks for the
 *        count alone.
 * @param capacity The phases that fit in phases.
 * @param[out] n_phases The preset's number of phases, also when capacity is too
 *        small (0 on any other failure).
 * @return ::LATTICE_OK; ::LATTICE_ERR_INVALID_ARGUMENT for a NULL n_phases, an
 *         unknown preset, phases NULL with a capacity, or a capacity below the
 *         count (nothing is written); ::LATTICE_ERR_INVALID_CONFIG for a shape
 *         ::lattice_schedule_create_preset refuses.
 * @since 1.0
 */
LATTICE_API lattice_status lattice_schedule_get_preset_phases(lattice_schedule_preset preset,
                                                              int n_blocks, int block_size,
                                                              int64_t steps_per_phase,
                                                              lattice_schedule_block_init block_init,
                                                              lattice_schedule_phase *phases,
                                                              int capacity, int *n_phases);

/**
 * @brief Destroy a schedule. NULL is ignored.
 * @param schedule The schedule.
 */
LATTICE_API void lattice_schedule_destroy(lattice_schedule *schedule);

/**
 * @brief The message of the last failed call ("" if none).
 * @param schedule The schedule; NULL gives a static message.
 * @return A string valid until the next call on the schedule.
 */
LATTICE_API const char *lattice_schedule_errmsg(const lattice_schedule *schedule);

/**
 * @brief Append a phase.
 * @param schedule The schedule.
 * @param phase The phase (copied): a positive budget, active_layers >= 1,
 *        0 <= train_from < active_layers; the schedule's step budgets add up to
 *        at most 2^50, and a token budget is at most 2^50 (the counts a
 *        checkpoint keeps).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_INVALID_CONFIG or
 *         ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_schedule_add_phase(lattice_schedule *schedule, const lattice_schedule_phase *phase);

/**
 * @brief Number of phases.
 * @param schedule The schedule; NULL gives 0.
 * @return The count.
 */
LATTICE_API int lattice_schedule_get_n_phases(const lattice_schedule *schedule);

/**
 * @brief One phase.
 * @param schedule The schedule.
 * @param index 0 .. n_phases - 1.
 * @param[in,out] phase The phase. The caller sets phase->size to the bytes it
 *        has (sizeof the struct it was compiled with, or
 *        ::lattice_schedule_phase_init); the library writes no more than that
 *        and sets phase->size to the bytes it wrote. A size below the 1.0
 *        struct's size (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_schedule_get_phase(const lattice_schedule *schedule, int index,
                                                  lattice_schedule_phase *phase);

/**
 * @brief Replay the shard: set rewind_data on every phase after the first.
 *
 * With it on, each phase starts from the data position the run began at, so
 * every phase trains on the same batches in the same order (the paper's grow
 * arm sees the joint arm's tokens once per phase); off, the iterator reads on.
 * @param schedule The schedule.
 * @param on Non-zero to rewind, 0 to continue (the default).
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.2
 */
LATTICE_API lattice_status lattice_schedule_set_rewind_data(lattice_schedule *schedule, int on);

/**
 * @brief The largest active depth over the phases.
 * @param schedule The schedule; NULL gives 0.
 * @return The depth.
 */
LATTICE_API int lattice_schedule_get_max_layers(const lattice_schedule *schedule);

/**
 * @brief Total steps when every phase has a step budget, else -1.
 * @param schedule The schedule; NULL gives 0.
 * @return The total.
 */
LATTICE_API int64_t lattice_schedule_get_total_steps(const lattice_schedule *schedule);

/**
 * @brief The current phase and the step within it.
 * @param schedule The schedule.
 * @param[out] phase Current phase index (n_phases once finished).
 * @param[out] step_in_phase Steps taken in it; may be NULL.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_schedule_get_position(const lattice_schedule *schedule, int *phase,
                                                     int64_t *step_in_phase);

/**
 * @brief Whether every phase is complete.
 * @param schedule The schedule; NULL gives 1.
 * @return 1 or 0.
 */
LATTICE_API int lattice_schedule_is_finished(const lattice_schedule *schedule);

/**
 * @brief Record one step of the current phase; moves to the next phase when its budget is spent.
 * @param schedule The schedule.
 * @param tokens Positions of the step's batch (padding included).
 * @param nonpad_tokens Non-padding positions.
 * @param flops FLOPs of the step: finite and >= 0.
 * @param[out] phase_ended Set to 1 if the step ended its phase, else 0; may be NULL.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (counts below 0, more
 *         non-padding tokens than tokens, flops not finite or below 0, or a step
 *         that would carry a counter past what a checkpoint keeps, 2^50 steps,
 *         tokens or active-layer tokens: nothing is counted; the FLOPs counter,
 *         an estimate, stops at INT64_MAX) or ::LATTICE_ERR_STATE (already
 *         finished).
 */
LATTICE_API lattice_status lattice_schedule_record(lattice_schedule *schedule, int64_t tokens,
                                                   int64_t nonpad_tokens, double flops,
                                                   int *phase_ended);

/**
 * @brief The counters.
 * @param schedule The schedule.
 * @param[out] out The counters.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_schedule_get_counters(const lattice_schedule *schedule,
                                                     lattice_schedule_counters *out);

/**
 * @brief Restore a position and counters (from a checkpoint); {0, 0} and zero counters restart.
 * @param schedule The schedule.
 * @param phase Phase index, 0 .. n_phases.
 * @param step_in_phase Steps taken in it.
 * @param counters The counters, each in 0 .. 2^50 (flops 0 .. INT64_MAX), the
 *        non-padding tokens no more than the tokens; NULL zeroes them.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_schedule_set_position(lattice_schedule *schedule, int phase,
                                                         int64_t step_in_phase,
                                                         const lattice_schedule_counters *counters);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
