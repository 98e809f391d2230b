/**
 * @file diag.h
 * @brief The paper's diagnostics: boundary scale, block removal, loss response at appends.
 */
#ifndef LATTICE_DIAG_H
#define LATTICE_DIAG_H

#include <lattice/common.h>
#include <lattice/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup diag Diagnostics
 *
 * - Boundary scale: the per-token RMS of the residual stream,
 *   sqrt(mean_j h[t, j]^2), at every layer boundary (see
 *   ::lattice_model_get_hidden), summarised over tokens by mean, standard
 *   deviation, Pearson kurtosis (E[(x - mean)^4] / var^2; 3 for a normal
 *   distribution) and maximum, per token class. The default classes are
 *   0 = regular tokens and 1 = document-boundary tokens, the latter being
 *   position 0 of each row (one document per row, as the paper's batches);
 *   callers can pass their own classes.
 * - Block removal: on a fixed batch, the change of cross-entropy when a range
 *   of layers is skipped (dCE = CE without it - CE with it), and the mean over
 *   counted tokens of the angular distance arccos(cos(h_in, h_out)) / pi
 *   between the range's input and output streams in the full model.
 * - Loss response at an append (::lattice_diag_measure_loss_response), from a
 *   training-loss series.
 * - Attention sinks and massive activations (::lattice_diag_measure_attention_sinks):
 *   attention mass on position 0 per layer and head, the share of sink heads,
 *   position 0's value norm, and the largest |activation| over the median.
 * @{
 */

/** An opaque diagnostics context (scratch sized for one model). */
typedef struct lattice_diag lattice_diag;

/**
 * @brief Create diagnostics for a model.
 * @param model The model; borrowed.
 * @param[out] out The new context, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_diag_create(lattice_model *model, lattice_diag **out);

/**
 * @brief Destroy a context. NULL is ignored.
 * @param diag The context.
 */
LATTICE_API void lattice_diag_destroy(lattice_diag *diag);

/**
 * @brief The message of the last failed call ("" if none).
 * @param diag The context; NULL gives a static message.
 * @return A string valid until the next call on the context.
 */
LATTICE_API const char *lattice_diag_errmsg(const lattice_diag *diag);

/** Per-token RMS of the residual stream at one boundary, summarised over one
 * class of tokens (::lattice_diag_measure_boundary_scale). @since 0.4 */
typedef struct lattice_diag_boundary_scale_result {
    size_t size;     /**< The bytes that hold fields. The caller sets the array's first entry's
                          to sizeof(lattice_diag_boundary_scale_result), the array's stride; the
                          library sets every entry's to the bytes it wrote. */
    int64_t count;   /**< Tokens summarised. */
    double mean;     /**< Mean RMS. */
    double std;      /**< Standard deviation (population). */
    double kurtosis; /**< Pearson kurtosis (0 when std is 0 or count < 2). */
    double max;      /**< Largest RMS. */
} lattice_diag_boundary_scale_result;

/** What removing a block does (::lattice_diag_measure_block_removal). @since 0.4 */
typedef struct lattice_diag_block_removal_result {
    size_t size;       /**< Set by the caller to sizeof(lattice_diag_block_removal_result), then
                            by the library to the bytes written. */
    double ce_full;    /**< Cross-entropy of the full model. */
    double ce_removed; /**< Cross-entropy with the block skipped. */
    double dce;        /**< ce_removed - ce_full. */
    double angle;      /**< Mean arccos(cos(h_in, h_out)) / pi, in [0, 1]. */
} lattice_diag_block_removal_result;

/** The loss response to an append (::lattice_diag_measure_loss_response). @since 0.4 */
typedef struct lattice_diag_loss_response_result {
    size_t size;      /**< Set by the caller to sizeof(lattice_diag_loss_response_result), then
                           by the library to the bytes written. */
    double baseline;  /**< Mean loss over the window steps before the append. */
    double jump;      /**< Loss at the first step after the append minus the baseline. */
    double area;      /**< Sum over the horizon of max(0, loss - baseline). */
    int64_t recovery; /**< Steps until the trailing mean over window steps is back at or
                           below the baseline; -1 if it never is within the series. */
} lattice_diag_loss_response_result;

/** Attention sinks and massive activations at one layer
 * (::lattice_diag_measure_attention_sinks). @since 0.4 */
typedef struct lattice_diag_attention_sinks_result {
    size_t size;        /**< The bytes that hold fields. The caller sets the array's first
                             entry's to sizeof(lattice_diag_attention_sinks_result), the array's
                             stride; the library sets every entry's to the bytes it wrote. */
    double mass0;       /**< Attention mass on position 0: the mean over heads, rows and query
                             positions 1..seq-1 of the softmax weight on key 0. */
    double sink_rate;   /**< Share of the heads whose mean mass on position 0 is above the
                             threshold (Gu et al. 2025's sink rate). */
    double top_ratio;   /**< The layer's output stream: its largest |activation| over the
                             median |activation| (Sun et al. 2024's massive activations). */
    int64_t top_token;  /**< Where the largest sits: row x seq + position. */
    int top_dim;        /**< ... and its dimension. */
    double value_norm0; /**< Position 0's value-vector norm over the mean norm at positions
                             1..seq-1 (mean over rows and kv heads); a sink that does nothing has
                             a small value (Bondarenko et al. 2023). */
} lattice_diag_attention_sinks_result;

/**
 * @brief Per-token RMS statistics at every boundary of a forward over a batch.
 *
 * Runs a forward pass over the active layers. out[b * (n_classes + 1) + c]
 * holds boundary b's statistics for class c, and c = n_classes those of all
 * counted tokens, for b = 0 .. active layers.
 * @param diag The context.
 * @param tokens [batch, seq] ids.
 * @param mask [batch, seq] flags of the tokens to count; NULL counts all.
 * @param batch Rows.
 * @param seq Positions.
 * @param classes [batch, seq] class of each token, each < n_classes; NULL
 *        for the default (1 at position 0 of each row, else 0; n_classes must be 2).
 * @param n_classes Number of classes (>= 1).
 * @param[in,out] out (active layers + 1) * (n_classes + 1) entries; set out[0].size
 *        to sizeof(lattice_diag_boundary_scale_result) first.
 * @param out_len Entries available in out.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (out[0].size below
 *         the 1.0 struct's size or not a multiple of its alignment included),
 *         (since 1.1) ::LATTICE_ERR_NON_FINITE (a stream that is not finite:
 *         NaN weights, say) or a model status.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_diag_measure_boundary_scale(
    lattice_diag *diag, const int32_t *tokens, const uint8_t *mask, int batch, int seq,
    const uint8_t *classes, int n_classes, lattice_diag_boundary_scale_result *out, int out_len);

/**
 * @brief Skip layers [first, first + count) on a fixed batch and measure dCE and the angle.
 *
 * Leaves the model without a skip.
 * @param diag The context.
 * @param tokens [batch, seq] ids.
 * @param targets [batch, seq] next tokens.
 * @param mask [batch, seq] flags; NULL counts all.
 * @param batch Rows.
 * @param seq Positions.
 * @param first First layer of the block.
 * @param count Layers in the block (first + count <= active layers).
 * @param[in,out] out The result; set out->size to sizeof(lattice_diag_block_removal_result)
 *        first.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or a model status.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_diag_measure_block_removal(
    lattice_diag *diag, const int32_t *tokens, const int32_t *targets, const uint8_t *mask,
    int batch, int seq, int first, int count, lattice_diag_block_removal_result *out);

/**
 * @brief The loss response to an append, from a series of training losses.
 * @param losses Loss of each step (index = step).
 * @param n Steps in the series.
 * @param append_step Index of the first step after the append (window <= append_step < n).
 * @param window Steps of the baseline and of the trailing mean (>= 1).
 * @param horizon Steps after the append summed into the area (clipped to the series).
 * @param[in,out] out The response; set out->size to sizeof(lattice_diag_loss_response_result)
 *        first.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or (since 1.1)
 *         ::LATTICE_ERR_NON_FINITE: a loss it reads (the baseline's window, the
 *         area's horizon, the steps to recovery) is NaN or infinite, or the
 *         finite losses' sums pass the double range.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_diag_measure_loss_response(
    const double *losses, int64_t n, int64_t append_step, int64_t window, int64_t horizon,
    lattice_diag_loss_response_result *out);

/**
 * @brief Attention sinks and massive activations at every active layer, on a fixed batch.
 *
 * Runs an inference forward, then per active layer: the attention mass the
 * queries at positions 1..seq-1 put on position 0, per head (head_mass) and
 * summarised (mass0, sink_rate); position 0's value norm against the other
 * positions'; and the largest |activation| of the layer's output stream
 * against the median. A skipped layer computes nothing: its figures are NaN
 * and its top_token and top_dim -1. Padding is not masked: pass rows without
 * padding.
 * @param diag The context.
 * @param tokens batch x seq token ids.
 * @param batch Rows.
 * @param seq Positions (at least 2).
 * @param threshold A head is a sink when its mean mass on position 0 is above this ([0, 1]).
 * @param[in,out] out One entry per active layer; set out[0].size to
 *        sizeof(lattice_diag_attention_sinks_result) first.
 * @param out_len Entries of out (at least the active layers).
 * @param[out] head_mass Active layers x heads mean masses on position 0, layer-major; may be NULL.
 * @param head_mass_len Entries of head_mass.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, (since 1.1)
 *         ::LATTICE_ERR_NON_FINITE (a layer's output that is not finite) or a
 *         model status.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_diag_measure_attention_sinks(
    lattice_diag *diag, const int32_t *tokens, int batch, int seq, double threshold,
    lattice_diag_attention_sinks_result *out, int out_len, double *head_mass, int head_mass_len);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
