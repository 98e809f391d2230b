/**
 * @file model_option.h
 * @brief Model options by key, as zstd sets its parameters: the keys, their
 *        setter and getter on ::lattice_model_params, their bounds, and the
 *        params' reserved slots that hold the experimental ones.
 */
#ifndef LATTICE_MODEL_OPTION_H
#define LATTICE_MODEL_OPTION_H

#include <lattice/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @addtogroup model
 * @{
 */

/**
 * @brief A model's shape, initialisation and options; its fields are in
 *        model.h.
 */
typedef struct lattice_model_params lattice_model_params;

/**
 * @brief Names a reserved slot of ::lattice_model_params: the field itself
 *        inside the library, a reserved name elsewhere. The slots hold the
 *        experimental options (::lattice_model_option), which a caller sets
 *        and reads by key; the struct's layout is the same either way.
 * @since 1.0
 */
#if defined(LATTICE_BUILDING)
#  define LATTICE_EXPERIMENTAL_FIELD(name) name
#else
#  define LATTICE_EXPERIMENTAL_FIELD(name) lattice_reserved_##name
#endif

/**
 * @brief The keys of the model options set by key
 *        (::lattice_model_params_set_option), as zstd sets its parameters.
 *
 * Each key names one value of ::lattice_model_params, with fixed bounds
 * (::lattice_model_option_bounds) that the setter enforces; what depends on
 * other fields (a layer below n_layers, a channel below d_model) is checked
 * with the rest of the params by ::lattice_model_params_check and
 * ::lattice_model_create. Keys below ::LATTICE_MODEL_OPTION_EXPERIMENTAL_FIRST
 * would be stable; there are none. Keys from it on are experimental
 * (doc/API.md, "Experimental options"): they are named only where
 * LATTICE_EXPERIMENTAL is defined before the headers are included, and a 1.x
 * release may change what one does, its bounds or its default, or retire it;
 * a retired key is refused as unknown, and its number never names another
 * option. Integer options take integral values; 0 turns each of
 * block_norm, block_rescale and massive_offset off.
 * @since 1.1
 */
typedef enum lattice_model_option {
    LATTICE_MODEL_OPTION_EXPERIMENTAL_FIRST = 1000, /**< The first experimental key. */
#if defined(LATTICE_EXPERIMENTAL) || defined(LATTICE_BUILDING)
    /** Integer, 0 .. 4096 and at most n_layers; pre-norm only. B > 0 puts a block-entry norm
        (the model's norm kind, its own trainable weight initialised to 1, in the layer's
        parameter group) on the residual stream at the entry of layers B, 2B, 3B, ...: each
        block of B layers after the first reads a unit-scale stream, and the stream goes on from
        the normalised one. An intervention on the stream's scale where appended blocks read it;
        set it to the curriculum's block size. A skipped layer skips its block-entry norm too.
        0 (the default): none. */
    LATTICE_MODEL_OPTION_BLOCK_NORM = 1000,
    /** Integer, 0 .. 4096 and at most n_layers; pre-norm only; not together with block_norm.
        B > 0 rescales, at the entry of layers B, 2B, 3B, ..., only each row's first position
        (the row-start token): its stream is multiplied by s / r0, with r0 its own RMS (with the
        norm's eps) and s the layer's running regular RMS (see the group's text), so that the row
        start enters the block at the scale the other positions have had. Causal: s is a
        statistic of earlier training steps, never of the row being computed. Before the first
        update of s the row start passes unchanged. No trainable parameters; the other
        positions pass unchanged, and the stream goes on from the rescaled one. A skipped layer
        skips its rescale too. 0 (the default): none. */
    LATTICE_MODEL_OPTION_BLOCK_RESCALE = 1001,
    /** Real, 0 .. 1e6: an induced massive activation. k > 0 adds a fixed, non-trainable offset
        to position 0 (the row-start token) of the residual stream after the first
        massive_layer layers (the stream layer massive_layer reads), on the one channel
        massive_channel: k * sqrt(d_model) * s, with s that layer's running regular RMS (see the
        group's text). Position 0's RMS there becomes about sqrt(r0^2 + k^2 s^2), so the
        row-start / regular RMS ratio where it is added is about k (for k well above 1); later
        layers may carry it on or undo it. Causal, the same under every placement; no gradient
        flows into s. Before the first update of s it adds nothing. 0 (the default): none. */
    LATTICE_MODEL_OPTION_MASSIVE_OFFSET = 1002,
    /** Integer, 1 .. 4095 and below n_layers where massive_offset is set: the offset's
        stream, after this many layers (default 1: after the first layer, where a trained
        teacher's own massive activation appears). */
    LATTICE_MODEL_OPTION_MASSIVE_LAYER = 1003,
    /** Integer, 0 .. 1048575 and below d_model where massive_offset is set: the offset's
        channel (default 0). */
    LATTICE_MODEL_OPTION_MASSIVE_CHANNEL = 1004,
#endif
} lattice_model_option;

/**
 * @brief Set one model option by key.
 * @param[in,out] params The params, filled by ::lattice_model_params_init.
 * @param key The option.
 * @param value Its value: within ::lattice_model_option_bounds, and integral
 *        for an integer option.
 * @return ::LATTICE_OK; ::LATTICE_ERR_INVALID_ARGUMENT (params NULL, a size
 *         ::lattice_model_params_init did not set, a value out of bounds,
 *         NaN or not integral); ::LATTICE_ERR_UNSUPPORTED (a key this library
 *         does not know). On failure params is unchanged and
 *         ::lattice_last_error says why.
 * @since 1.1
 */
LATTICE_API lattice_status lattice_model_params_set_option(lattice_model_params *params,
                                                           lattice_model_option key,
                                                           double value);

/**
 * @brief Read one model option by key.
 * @param params The params.
 * @param key The option.
 * @param[out] value Its value.
 * @return ::LATTICE_OK; ::LATTICE_ERR_INVALID_ARGUMENT (params or value NULL,
 *         a size ::lattice_model_params_init did not set);
 *         ::LATTICE_ERR_UNSUPPORTED (a key this library does not know).
 * @since 1.1
 */
LATTICE_API lattice_status lattice_model_params_get_option(const lattice_model_params *params,
                                                           lattice_model_option key,
                                                           double *value);

/**
 * @brief The values ::lattice_model_params_set_option accepts for a key:
 *        lo .. hi, both included.
 * @param key The option.
 * @param[out] lo The least value.
 * @param[out] hi The greatest value.
 * @return ::LATTICE_OK; ::LATTICE_ERR_INVALID_ARGUMENT (lo or hi NULL);
 *         ::LATTICE_ERR_UNSUPPORTED (a key this library does not know: lo and
 *         hi are left as they are).
 * @since 1.1
 */
LATTICE_API lattice_status lattice_model_option_bounds(lattice_model_option key, double *lo,
                                                       double *hi);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
