/**
 * @file norm.h
 * @brief Normalization placement: where the norms sit in each layer, and of what kind.
 */
#ifndef LATTICE_NORM_H
#define LATTICE_NORM_H

#include <lattice/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup norm Normalization placement
 *
 * A placement describes one layer with sublayers F (attention, then MLP):
 * - ::LATTICE_NORM_PLACEMENT_PRE:  h' = h + F(Norm(h)); a final norm before the LM head.
 * - ::LATTICE_NORM_PLACEMENT_POST: h' = Norm(a * h + F(h)); an entry norm on the embedding,
 *   no final norm. a is the residual scale (1 for plain post-norm; DeepNorm-style
 *   scaled post-norm uses a > 1).
 * - ::LATTICE_NORM_PLACEMENT_PERI: h' = h + Norm_out(F(Norm_in(h))) (sandwich); a final norm.
 *
 * Pre and post have the same parameter count: two norms per layer plus one
 * boundary norm (final for pre, entry for post). Peri has four per layer.
 * @{
 */

/** Where the norms sit. Append-only. */
typedef enum lattice_norm_placement {
    LATTICE_NORM_PLACEMENT_PRE = 0,  /**< Norm before each sublayer, final norm before the head. */
    LATTICE_NORM_PLACEMENT_POST = 1, /**< Norm after each residual sum, entry norm on the embedding. */
    LATTICE_NORM_PLACEMENT_PERI = 2  /**< Norm before and after each sublayer, final norm. */
} lattice_norm_placement;

/** Which normalization. Append-only. */
typedef enum lattice_norm_kind {
    LATTICE_NORM_KIND_RMS = 0,  /**< RMSNorm: x / sqrt(mean(x^2) + eps) * w. */
    LATTICE_NORM_KIND_LAYER = 1 /**< LayerNorm: (x - mean) / sqrt(var + eps) * w + b. */
} lattice_norm_kind;

/** An opaque normalization placement. */
typedef struct lattice_norm lattice_norm;

/**
 * @brief Create a placement.
 * @param placement Pre, post or peri.
 * @param kind RMSNorm or LayerNorm.
 * @param eps Added to the variance; must be positive and finite (Qwen3: 1e-6).
 * @param[out] out The new placement, or NULL on failure.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_norm_create(lattice_norm_placement placement,
                                               lattice_norm_kind kind, float eps,
                                               lattice_norm **out);

/**
 * @brief Destroy a placement. NULL is ignored. Models copy what they need, so a
 *        placement may be destroyed once the models using it are created.
 * @param norm The placement.
 */
LATTICE_API void lattice_norm_destroy(lattice_norm *norm);

/**
 * @brief Set the residual scale a of post-norm (DeepNorm-style); default 1.
 * @param norm The placement.
 * @param scale Positive and finite.
 * @return ::LATTICE_OK, or ::LATTICE_ERR_INVALID_ARGUMENT (also when the
 *         placement is not post-norm and scale is not 1).
 */
LATTICE_API lattice_status lattice_norm_set_residual_scale(lattice_norm *norm, float scale);

/**
 * @brief The placement.
 * @param norm The placement handle; NULL gives ::LATTICE_NORM_PLACEMENT_PRE.
 * @return The placement.
 */
LATTICE_API lattice_norm_placement lattice_norm_get_placement(const lattice_norm *norm);

/**
 * @brief The norm kind.
 * @param norm The placement handle; NULL gives ::LATTICE_NORM_KIND_RMS.
 * @return The kind.
 */
LATTICE_API lattice_norm_kind lattice_norm_get_kind(const lattice_norm *norm);

/**
 * @brief The epsilon.
 * @param norm The placement handle; NULL gives 0.
 * @return eps.
 */
LATTICE_API float lattice_norm_get_eps(const lattice_norm *norm);

/**
 * @brief The residual scale (1 unless set).
 * @param norm The placement handle; NULL gives 0.
 * @return The scale.
 */
LATTICE_API float lattice_norm_get_residual_scale(const lattice_norm *norm);

/**
 * @brief A short name: "pre", "post" or "peri".
 * @param placement The placement.
 * @return A static string ("unknown" for other values).
 */
LATTICE_API const char *lattice_norm_placement_name(lattice_norm_placement placement);

/**
 * @brief Parse "pre", "post" or "peri".
 * @param name The name.
 * @param[out] out The placement.
 * @return ::LATTICE_OK or ::LATTICE_ERR_NOT_FOUND.
 */
LATTICE_API lattice_status lattice_norm_placement_from_name(const char *name,
                                                            lattice_norm_placement *out);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
