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
 * Long documents are cut into rows by default (split_long, since 0.2): a
 * plain text file without separators is one document, and without splitting
 * only its first seq_len + 1 bytes would ever be trained on. Token sources
 * with boundary_id -1 have no token to open the pieces with: set split_long
 * to 0 there (otherwise create fails with ::LATTICE_ERR_INVALID_CONFIG).
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

/** Settings of a data object. Fill with ::lattice_data_params_init. @since 0.1 */
typedef struct lattice_data_params {
    size_t size;            /**< sizeof(lattice_data_params), set by the init function (or the caller); ::lattice_data_get_params reads it as the bytes the caller has and sets it to the bytes written. @since 0.1 */
    int vocab_size;         /**< Ids must be below this (text: 257). @since 0.1 */
    int boundary_id;        /**< Document-boundary token (text: 256); -1 for none in token files
                                 (then set split_long to 0). @since 0.1 */
    const char *separator;  /**< Text only: the document separator ("\f"); borrowed during create. @since 0.1 */
    int batch_size;         /**< Rows per batch (8). @since 0.1 */
    int seq_len;            /**< Predicted positions per row at most (256). @since 0.1 */
    int pack;               /**< Non-zero: pack training documents into full rows. @since 0.1 */
    int trim;               /**< Non-zero (default): a batch is as long as its longest row. @since 0.1 */
    float val_fraction;     /**< Share of documents (pieces, with split_long) held out for
                                 validation, in [0, 1). Default 0: no validation split.
                                 @since 0.1 */
    uint64_t seed;          /**< Seed of the training order. @since 0.1 */
    int pad_id;             /**< Id written into padding (masked out; 0). @since 0.1 */
    const char *val_path;   /**< Text only: a separate file of validation documents (NULL: none;
                                 val_fraction must then be 0). Borrowed during create. @since 0.1 */
    int split_long;         /**< Non-zero (default since 0.2; 0 before): cut documents longer
                                 than seq_len + 1 tokens into pieces of seq_len + 1, each after
                                 the first opening with the boundary token, so that no text is
                                 lost to truncation. Needs boundary_id >= 0. @since 0.1 */
} lattice_data_params;

/** Which split. Append-only. @since 0.1 */
typedef enum lattice_data_split {
    LATTICE_DATA_SPLIT_TRAIN = 0, /**< Training documents. @since 0.1 */
    LATTICE_DATA_SPLIT_VAL = 1    /**< Validation documents. @since 0.1 */
} lattice_data_split;

/**
 * @brief One batch, owned by the data object and valid until its next batch call.
 * @since 0.1
 */
typedef struct lattice_data_batch {
    const int32_t *tokens;  /**< [batch, seq] inputs. @since 0.1 */
    const int32_t *targets; /**< [batch, seq] next tokens. @since 0.1 */
    const uint8_t *mask;    /**< [batch, seq] 1 where the target is real. @since 0.1 */
    int batch;              /**< Rows. @since 0.1 */
    int seq;                /**< Positions per row. @since 0.1 */
    int64_t n_tokens;       /**< Counted (non-padding) positions. @since 0.1 */
} lattice_data_batch;

/** Where the training iterator stands (for checkpoints). @since 0.1 */
typedef struct lattice_data_position {
    int64_t epoch;  /**< Completed passes over the training documents. @since 0.1 */
    int64_t index;  /**< Next document (or packed row) within the pass. @since 0.1 */
} lattice_data_position;

/** An opaque data object. @since 0.1 */
typedef struct lattice_data lattice_data;

/**
 * @brief Fill params with defaults for byte-level text.
 *
 * vocab_size 257 and boundary_id 256 (the vocabulary of
 * ::lattice_model_params_init's default model), batch 8 x seq_len 256,
 * split_long on, val_fraction 0: **no validation split** until you ask for one.
 * @param[out] params The struct; NULL is ignored.
 * @since 0.1
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
 * @since 0.1
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
 * @since 0.1
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
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_create_memory(const int32_t *ids, int64_t n,
                                                      const lattice_data_params *params,
                                                      lattice_data **out, char *errmsg);

/**
 * @brief Destroy a data object. NULL is ignored.
 * @param data The data object.
 * @since 0.1
 */
LATTICE_API void lattice_data_destroy(lattice_data *data);

/**
 * @brief The message of the last failed call ("" if none).
 * @param data The data object; NULL gives a static message.
 * @return A string valid until the next call on the object.
 * @since 0.1
 */
LATTICE_API const char *lattice_data_errmsg(const lattice_data *data);

/**
 * @brief The settings in use.
 * @param data The data object.
 * @param[in,out] out The settings (separator is NULL: it is not kept).
 *        The caller sets out->size to the bytes it has (sizeof the struct it
 *        was compiled with, or ::lattice_data_params_init); the library writes
 *        no more than that and sets out->size to the bytes it wrote. A size
 *        below the struct's 0.1 size (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written (since 0.2;
 *        0.1 ignored the caller's size).
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_get_params(const lattice_data *data, lattice_data_params *out);

/**
 * @brief Number of documents in a split.
 * @param data The data object; NULL gives 0.
 * @param split The split.
 * @return The count.
 * @since 0.1
 */
LATTICE_API int64_t lattice_data_get_n_documents(const lattice_data *data, lattice_data_split split);

/**
 * @brief Number of tokens in a split (boundary tokens included).
 * @param data The data object; NULL gives 0.
 * @param split The split.
 * @return The count.
 * @since 0.1
 */
LATTICE_API int64_t lattice_data_get_n_tokens(const lattice_data *data, lattice_data_split split);

/**
 * @brief The next training batch.
 * @param data The data object.
 * @param[out] batch The batch, valid until the next batch call on this object.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_next(lattice_data *data, lattice_data_batch *batch);

/**
 * @brief Number of batches that cover the validation split once.
 * @param data The data object; NULL gives 0.
 * @return The count (0 without validation documents).
 * @since 0.1
 */
LATTICE_API int64_t lattice_data_get_n_val_batches(const lattice_data *data);

/**
 * @brief One batch of the fixed validation set (documents in file order).
 * @param data The data object.
 * @param index 0 .. n_val_batches - 1.
 * @param[out] batch The batch, valid until the next batch call on this object.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_get_val_batch(lattice_data *data, int64_t index, lattice_data_batch *batch);

/**
 * @brief Where the training iterator stands.
 * @param data The data object.
 * @param[out] pos The position.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_get_position(const lattice_data *data, lattice_data_position *pos);

/**
 * @brief Move the training iterator (e.g. from a checkpoint; {0, 0} is the start).
 * @param data The data object.
 * @param pos The position; index must lie within a pass.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.1
 */
LATTICE_API lattice_status lattice_data_set_position(lattice_data *data, const lattice_data_position *pos);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
