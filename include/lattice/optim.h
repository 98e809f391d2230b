/**
 * @file optim.h
 * @brief AdamW with linear warmup, cosine decay and global-norm clipping.
 */
#ifndef LATTICE_OPTIM_H
#define LATTICE_OPTIM_H

#include <lattice/common.h>
#include <lattice/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup optim Optimizer
 *
 * AdamW over a model's trainable groups. The learning rate at schedule step s
 * (0-based) is lr * (s + 1) / warmup_steps during warmup. After it, with
 * n = total_steps - warmup_steps steps left, it takes the shape of lr_shape:
 * - ::LATTICE_OPTIM_LR_SHAPE_COSINE (the default):
 *   min_lr + (lr - min_lr) * (1 + cos(pi * p)) / 2 with
 *   p = (s - warmup_steps) / n clamped to [0, 1].
 * - ::LATTICE_OPTIM_LR_SHAPE_WSD (warmup, stable, decay): lr for the first
 *   n - d steps, d = round(decay_fraction * n), then a straight line from lr
 *   towards min_lr: lr - (lr - min_lr) * q with q = (s - (total_steps - d)) / d
 *   clamped to [0, 1].
 *
 * Either shape with min_lr = lr, or WSD with decay_fraction 0, holds the LR
 * constant after warmup. Steps past total_steps stay at the last shape's end.
 * Weight decay applies to matrices, not to norm weights.
 * @{
 */

/** An opaque optimizer. */
typedef struct lattice_optim lattice_optim;

/** The learning rate's shape after warmup. Append-only. @since 0.4 */
typedef enum lattice_optim_lr_shape {
    LATTICE_OPTIM_LR_SHAPE_COSINE = 0, /**< Cosine from lr to min_lr over the steps after warmup. @since 0.4 */
    LATTICE_OPTIM_LR_SHAPE_WSD = 1     /**< Held at lr, then linear to min_lr over the last decay_fraction of the steps after warmup. @since 0.4 */
} lattice_optim_lr_shape;

/** AdamW settings. Fill with ::lattice_optim_params_init. */
typedef struct lattice_optim_params {
    size_t size;        /**< sizeof(lattice_optim_params), set by the init function (or the caller); ::lattice_optim_get_params reads it as the bytes the caller has and sets it to the bytes written. */
    float lr;           /**< Peak learning rate. */
    float min_lr;       /**< Where the decay ends (cosine or WSD). */
    int64_t warmup_steps; /**< Linear warmup length (0: none). int64_t, as every step
                               count of the library. */
    int64_t total_steps;  /**< Length of warmup plus decay. */
    float beta1;        /**< First-moment decay. */
    float beta2;        /**< Second-moment decay. */
    float eps;          /**< Denominator epsilon. */
    float weight_decay; /**< Decoupled weight decay. */
    float clip_norm;    /**< Global gradient-norm limit (0: no clipping). */
    lattice_optim_lr_shape lr_shape; /**< The LR's shape after warmup (default cosine). @since 0.4 */
    float decay_fraction; /**< For ::LATTICE_OPTIM_LR_SHAPE_WSD: the share of the steps after warmup
                               over which the LR decays, in [0, 1] (default 0.2). @since 0.4 */
} lattice_optim_params;

/**
 * @brief Fill params with the paper's settings: lr 1e-4 to 1e-6, warmup 750 of
 *        50000 steps, betas (0.9, 0.95), eps 1e-8, no weight decay, clip 0.5,
 *        cosine shape (decay_fraction 0.2, used by the WSD shape only).
 * @param[out] params The struct; NULL is ignored.
 */
LATTICE_API void lattice_optim_params_init(lattice_optim_params *params);

/**
 * @brief Create an optimizer for a model's parameters (moments in one arena).
 * @param model The model; borrowed, must outlive the optimizer.
 * @param params The settings.
 * @param[out] out The new optimizer, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_INVALID_CONFIG
 *         (among others: warmup_steps above total_steps, min_lr above lr, an
 *         unknown lr_shape or a decay_fraction outside [0, 1])
 *         or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_optim_create(lattice_model *model, const lattice_optim_params *params,
                                                lattice_optim **out);

/**
 * @brief Destroy an optimizer. NULL is ignored.
 * @param optim The optimizer.
 */
LATTICE_API void lattice_optim_destroy(lattice_optim *optim);

/**
 * @brief The message of the last failed call ("" if none).
 * @param optim The optimizer; NULL gives a static message.
 * @return A string valid until the next call on the optimizer.
 */
LATTICE_API const char *lattice_optim_errmsg(const lattice_optim *optim);

/**
 * @brief Replace the settings (the moments and the schedule position are kept).
 * @param optim The optimizer.
 * @param params The settings, checked as ::lattice_optim_create checks them; a
 *        params->size below the 1.0 struct's size is refused (the core
 *        group's rule).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG.
 */
LATTICE_API lattice_status lattice_optim_set_params(lattice_optim *optim, const lattice_optim_params *params);

/**
 * @brief The settings in use.
 * @param optim The optimizer.
 * @param[in,out] out The settings.
 *        The caller sets out->size to the bytes it has (sizeof the struct it
 *        was compiled with, or ::lattice_optim_params_init); the library writes
 *        no more than that and sets out->size to the bytes it wrote. A size
 *        below the 1.0 struct's size (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_optim_get_params(const lattice_optim *optim, lattice_optim_params *out);

/**
 * @brief One update of the active layers' and other groups' trainable parameters
 *        from the gradients of the last backward.
 *
 * The global gradient norm over the trainable active groups is measured, then
 * gradients are clipped to clip_norm. A non-finite norm updates nothing. A
 * weight whose update or Adam moments would not be finite (a squared gradient
 * beyond the float range, where clip_norm is 0) keeps its value and its
 * moments, the rest are updated, and the call returns
 * ::LATTICE_ERR_NON_FINITE: no weight or moment is ever left Inf or NaN.
 * @param optim The optimizer.
 * @param[out] grad_norm The norm before clipping; may be NULL.
 * @return ::LATTICE_OK or ::LATTICE_ERR_NON_FINITE.
 */
LATTICE_API lattice_status lattice_optim_step(lattice_optim *optim, float *grad_norm);

/**
 * @brief Zero the moments and restart the learning-rate schedule at step 0.
 * @param optim The optimizer.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_optim_reset(lattice_optim *optim);

/**
 * @brief The learning rate the next step will use.
 * @param optim The optimizer; NULL gives 0.
 * @return The rate.
 */
LATTICE_API float lattice_optim_get_lr(const lattice_optim *optim);

/**
 * @brief Steps taken since creation or the last reset.
 * @param optim The optimizer; NULL gives 0.
 * @return The count.
 */
LATTICE_API int64_t lattice_optim_get_steps(const lattice_optim *optim);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
