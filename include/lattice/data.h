/**
 * @file data.h
 * @brief Token sources, documents, a fixed train/validation split and batching.
 */
#ifndef LATTICE_DATA_H
#define LATTICE_DATA_H

#include <lattice/common.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup data Data
 *
 * A data object holds a corpus as documents of token ids. Sources:
 * - byte-level text (::lattice_data_create_text): every byte is a token
 *   0..255; documents are separated by a separator string (default "\f", the
 *   form feed) and each document starts with the boundary token (default 256,
 *   so the vocabulary is 257);
 * - token-id files (::lattice_data_create_tokens), little-endian uint16 or
 *   uint32 from any tokenizer; an occurrence of the boundary id starts a new
 *   document (and stays its first token);
 * - a token buffer in memory (::lattice_data_create_memory), split the same way.
 *
 * The last val_fraction of the documents (at least one when the fraction is
 * positive) form the fixed validation split; the rest are training documents.
 *
 * @warning The default val_fraction is 0: **no validation split** unless you
 * set val_fraction or val_path. (A positive default would turn every
 * one-document corpus and every val_path caller into an error.) Set
 * val_fraction (e.g. 0.05) for a held-out split of a single file; with
 * split_long on, the fraction counts pieces, so a single long text file gets
 * one too.
 *
 * Long documents are cut into rows by default (split_long): a plain text
 * file without separators is one document, and without splitting only its
 * first seq_len + 1 bytes would ever be trained on. Token sources with
 * boundary_id -1 have no token to open the pieces with: set split_long to 0
 * there (otherwise create fails with ::LATTICE_ERR_INVALID_CONFIG).
 * With split_long 0, each document is one row truncated at seq_len + 1 tokens,
 * as in the paper.
 *
 * Batching: one document (or piece, see above) per row, at most seq_len + 1
 * tokens, right-padded; targets are the next tokens; the mask marks real
 * targets, so padding counts neither in the loss nor in token counts. With
 * trim on (default) a batch is only as long as its longest row. With pack on,
 * training documents are concatenated and cut into full rows instead (rows
 * then attend across document boundaries).
 *
 * Training order: a permutation of the training documents drawn from the
 * seed; the iterator continues across calls (and across phases of a
 * schedule), and wraps to a fresh permutation after each pass.
 * @{
 */

/** Settings of a data object. Fill with ::lattice_data_params_init. */
typedef struct lattice_data_params {
    size_t size;            /**< sizeof(lattice_data_params), set by the init function (or the caller); ::lattice_data_get_params reads it as the bytes the caller has and sets it to the bytes written. */
    int vocab_size;         /**< Ids must be below this (text: 257). */
    int boundary_id;        /**< Document-boundary token (text: 256); -1 for none in token files
                                 (then set split_long to 0). */
    const char *separator;  /**< Text only: the document separator ("\f"); borrowed during create. */
    int batch_size;         /**< Rows per batch (8). */
    int seq_len;            /**< Predicted positions per row at most (256). */
    int pack;               /**< Non-zero: pack training documents into full rows. */
    int trim;               /**< Non-zero (default): a batch is as long as its longest row. */
    float val_fraction;     /**< Share of documents (pieces, with split_long) held out for
                                 validation, in [0, 1). Default 0: no validation split.
                                 */
    uint64_t seed;          /**< Seed of the training order. */
    int pad_id;             /**< Id written into padding (masked out; 0). */
    const char *val_path;   /**< Text only: a separate file of validation documents (NULL: none;
                                 val_fraction must then be 0). Borrowed during create. The
                                 token loaders refuse it (::LATTICE_ERR_INVALID_CONFIG). */
    int split_long;         /**< Non-zero (the default): cut documents longer
                                 than seq_len + 1 tokens into pieces of seq_len + 1, each after
                                 the first opening with the boundary token, so that no text is
                                 lost to truncation. Needs boundary_id >= 0. */
} lattice_data_params;

/** Which split. Append-only. */
typedef enum lattice_data_split {
    LATTICE_DATA_SPLIT_TRAIN = 0, /**< Training documents. */
    LATTICE_DATA_SPLIT_VAL = 1    /**< Validation documents. */
} lattice_data_split;

/**
 * @brief One batch, owned by the data object and valid until its next batch call.
 */
typedef struct lattice_data_batch {
    const int32_t *tokens;  /**< [batch, seq] inputs. */
    const int32_t *targets; /**< [batch, seq] next tokens. */
    const uint8_t *mask;    /**< [batch, seq] 1 where the target is real. */
    int batch;              /**< Rows. */
    int seq;                /**< Positions per row. */
    int64_t n_tokens;       /**< Counted (non-padding) positions. */
} lattice_data_batch;

/** Where the training iterator stands (for checkpoints). */
typedef struct lattice_data_position {
    int64_t epoch;  /**< Completed passes over the training documents. */
    int64_t index;  /**< Next document (or packed row) within the pass. */
} lattice_data_position;

/** An opaque data object. */
typedef struct lattice_data lattice_data;

/**
 * @brief Fill params with defaults for byte-level text.
 *
 * vocab_size 257 and boundary_id 256 (the vocabulary of
 * ::lattice_model_params_init's default model), batch 8 x seq_len 256,
 * split_long on, val_fraction 0: **no validation split** until you ask for one.
 * @param[out] params The struct; NULL is ignored.
 */
LATTICE_API void lattice_data_params_init(lattice_data_params *params);

/**
 * @brief Load byte-level text from a file.
 * @param path The file.
 * @param params The settings.
 * @param[out] out The new data object, or NULL on failure.
 * @param[out] errmsg Receives a message on failure when non-NULL (at least 256 bytes).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_INVALID_CONFIG,
 *         ::LATTICE_ERR_IO (cannot read), ::LATTICE_ERR_FORMAT (empty, or no
 *         training document left after the split) or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_data_create_text(const char *path, const lattice_data_params *params,
                                                    lattice_data **out, char *errmsg);

/**
 * @brief Load a token-id file.
 * @param path The file: a flat array of little-endian ids.
 * @param bytes_per_id 2 (uint16) or 4 (uint32).
 * @param params The settings (vocab_size and boundary_id describe the tokenizer).
 * @param[out] out The new data object, or NULL on failure.
 * @param[out] errmsg Receives a message on failure when non-NULL (at least 256 bytes).
 * @return As ::lattice_data_create_text; ::LATTICE_ERR_FORMAT also for an id
 *         >= vocab_size or a size that is not a multiple of bytes_per_id.
 */
LATTICE_API lattice_status lattice_data_create_tokens(const char *path, int bytes_per_id,
                                                      const lattice_data_params *params,
                                                      lattice_data **out, char *errmsg);

/**
 * @brief Build a data object from token ids in memory (copied).
 * @param ids The ids.
 * @param n How many.
 * @param params The settings.
 * @param[out] out The new data object, or NULL on failure.
 * @param[out] errmsg Receives a message on failure when non-NULL (at least 256 bytes).
 * @return As ::lattice_data_create_tokens.
 */
LATTICE_API lattice_status lattice_data_create_memory(const int32_t *ids, int64_t n,
                                                      const lattice_data_params *params,
                                                      lattice_data **out, char *errmsg);

/**
 * @brief Destroy a data object. NULL is ignored.
 * @param data The data object.
 */
LATTICE_API void lattice_data_destroy(lattice_data *data);

/**
 * @brief The message of the last failed call ("" if none).
 * @param data The data object; NULL gives a static message.
 * @return A string valid until the next call on the object.
 */
LATTICE_API const char *lattice_data_errmsg(const lattice_data *data);

/**
 * @brief The settings in use.
 * @param data The data object.
 * @param[in,out] out The settings (separator is NULL: it is not kept).
 *        The caller sets out->size to the bytes it has (sizeof the struct it
 *        was compiled with, or ::lattice_data_params_init); the library writes
 *        no more than that and sets out->size to the bytes it wrote. A size
 *        below the 1.0 struct's size (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_data_get_params(const lattice_data *data, lattice_data_params *out);

/**
 * @brief Number of documents in a split.
 * @param data The data object; NULL gives 0.
 * @param split The split.
 * @return The count; -1 for a split that is neither ::LATTICE_DATA_SPLIT_TRAIN
 *         nor ::LATTICE_DATA_SPLIT_VAL (since 1.1; it gave the validation count).
 */
LATTICE_API int64_t lattice_data_get_n_documents(const lattice_data *data, lattice_data_split split);

/**
 * @brief Number of tokens in a split (boundary tokens included).
 * @param data The data object; NULL gives 0.
 * @param split The split.
 * @return The count; -1 for a split that is neither ::LATTICE_DATA_SPLIT_TRAIN
 *         nor ::LATTICE_DATA_SPLIT_VAL (since 1.1; it gave the validation count).
 */
LATTICE_API int64_t lattice_data_get_n_tokens(const lattice_data *data, lattice_data_split split);

/**
 * @brief The next training batch.
 * @param data The data object.
 * @param[out] batch The batch, valid until the next batch call on this object.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_data_next(lattice_data *data, lattice_data_batch *batch);

/**
 * @brief Number of batches that cover the validation split once.
 * @param data The data object; NULL gives 0.
 * @return The count (0 without validation documents).
 */
LATTICE_API int64_t lattice_data_get_n_val_batches(const lattice_data *data);

/**
 * @brief One batch of the fixed validation set (documents in file order).
 * @param data The data object.
 * @param index 0 .. n_val_batches - 1.
 * @param[out] batch The batch, valid until the next batch call on this object.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_data_get_val_batch(lattice_data *data, int64_t index, lattice_data_batch *batch);

/**
 * @brief Where the training iterator stands.
 * @param data The data object.
 * @param[out] pos The position.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_data_get_position(const lattice_data *data, lattice_data_position *pos);

/**
 * @brief Move the training iterator (e.g. from a checkpoint; {0, 0} is the start).
 * @param data The data object.
 * @param pos The position; index must lie within a pass.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_data_set_position(lattice_data *data, const lattice_data_position *pos);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
