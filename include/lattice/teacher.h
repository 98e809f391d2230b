/**
 * @file teacher.h
 * @brief Teachers: where the logits a student is distilled towards come from.
 */
#ifndef LATTICE_TEACHER_H
#define LATTICE_TEACHER_H

#include <lattice/common.h>
#include <lattice/data.h>
#include <lattice/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup teacher Teachers
 *
 * A teacher gives dense logits [batch, seq, vocab] for a batch of tokens. Its
 * sources: a lattice model (any depth or width; only its vocabulary must match
 * the student's), or a user callback that fills a logits buffer, which is how
 * Python or any other framework hands logits in.
 * @{
 */

/**
 * @brief A callback teacher: fill logits [batch, seq, vocab] for tokens [batch, seq].
 * @return 0 on success; anything else fails the call with ::LATTICE_ERR_BACKEND.
 */
typedef int (*lattice_teacher_fn)(void *user, const int32_t *tokens, int batch, int seq, int vocab,
                                  float *logits);

/** An opaque teacher. */
typedef struct lattice_teacher lattice_teacher;

/**
 * @brief A teacher backed by a lattice model, run over all its active layers.
 * @param model The model; borrowed, must outlive the teacher.
 * @param[out] out The new teacher, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_teacher_create_model(lattice_model *model, lattice_teacher **out);

/**
 * @brief A teacher backed by a callback.
 * @param fn The callback.
 * @param user Passed back to fn.
 * @param vocab_size Logits per position.
 * @param max_batch Largest batch it will be asked for.
 * @param max_seq Longest sequence it will be asked for.
 * @param[out] out The new teacher, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_teacher_create_callback(lattice_teacher_fn fn, void *user,
                                                           int vocab_size, int max_batch,
                                                           int max_seq, lattice_teacher **out);

/**
 * @brief Destroy a teacher. NULL is ignored.
 * @param teacher The teacher.
 */
LATTICE_API void lattice_teacher_destroy(lattice_teacher *teacher);

/**
 * @brief The message of the last failed call ("" if none).
 * @param teacher The teacher; NULL gives a static message.
 * @return A string valid until the next call on the teacher.
 */
LATTICE_API const char *lattice_teacher_errmsg(const lattice_teacher *teacher);

/**
 * @brief The teacher's vocabulary size.
 * @param teacher The teacher; NULL gives 0.
 * @return The size.
 */
LATTICE_API int lattice_teacher_get_vocab_size(const lattice_teacher *teacher);

/**
 * @brief Logits for a batch.
 * @param teacher The teacher.
 * @param tokens [batch, seq] ids.
 * @param batch Rows.
 * @param seq Positions.
 * @param[out] logits [batch, seq, vocab], valid until the next call on the teacher
 *             (or, for a model teacher, the next forward of its model).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_BACKEND
 *         (the callback failed), ::LATTICE_ERR_NON_FINITE (non-finite logits),
 *         ::LATTICE_ERR_NOT_FOUND (a file teacher: no stored batch matches),
 *         ::LATTICE_ERR_UNSUPPORTED (a top-k file teacher: use
 *         ::lattice_teacher_topk), ::LATTICE_ERR_IO (a file teacher's read),
 *         or a model teacher's forward's status (::lattice_model_forward).
 */
LATTICE_API lattice_status lattice_teacher_logits(lattice_teacher *teacher, const int32_t *tokens,
                                                  int batch, int seq, const float **logits);

/**
 * @brief FLOPs of one teacher forward over a batch (0 for callbacks: unknown).
 * @param teacher The teacher; NULL gives 0.
 * @param batch Rows.
 * @param seq Positions.
 * @return The count (0 for NULL, a batch or seq below 1, or a teacher that is
 *         not a model).
 */
LATTICE_API double lattice_teacher_get_flops(const lattice_teacher *teacher, int batch, int seq);

/**
 * @brief Initialise a student from a model teacher, as the paper: copy the
 *        embedding (and freeze it), copy the LM head (it trains), and set the
 *        student's boundary norm (final norm under pre/peri, entry norm under
 *        post) from the teacher's final norm. The student's layers keep their
 *        random initialisation.
 *
 * Needs a model teacher of the student's vocabulary and width, with a final
 * norm (pre or peri placement) of the same norm kind.
 * @param teacher The teacher.
 * @param student The student.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG
 *         (a callback teacher, or shapes that do not match).
 */
LATTICE_API lattice_status lattice_teacher_init_student(lattice_teacher *teacher, lattice_model *student);

/**
 * @brief A teacher that reads precomputed logits from a safetensors file
 *        (for teachers run elsewhere once; the layout is in doc/FILES.md).
 *
 * The file holds "tokens" (I32 [n, batch, seq]) and either dense "logits"
 * (F32, F16 or BF16 [n, batch, seq, vocab]) or sparse "topk_index" (I32) and
 * "topk_value" (F32, F16 or BF16), both [n, batch, seq, k], with the
 * vocabulary size in the metadata key "vocab_size". A request is answered by
 * the stored batch whose tokens match (rows and positions of the request;
 * causal logits do not depend on later positions), searched from the one
 * after the last match. The file is treated as hostile.
 * @param path The file.
 * @param[out] out The new teacher, or NULL on failure.
 * @param[out] errmsg Receives the reason on failure when non-NULL (::LATTICE_ERRMSG_SIZE bytes).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO,
 *         ::LATTICE_ERR_FORMAT or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_teacher_create_file(const char *path, lattice_teacher **out,
                                                       char *errmsg);

/**
 * @brief Whether the teacher gives top-k logits only (a top-k file); such a
 *        teacher answers ::lattice_teacher_topk, not ::lattice_teacher_logits.
 * @param teacher The teacher; NULL gives 0.
 * @return k, or 0 for a dense teacher.
 */
LATTICE_API int lattice_teacher_get_k(const lattice_teacher *teacher);

/**
 * @brief Top-k logits for a batch, from a top-k file teacher.
 * @param teacher The teacher.
 * @param tokens [batch, seq] ids.
 * @param batch Rows.
 * @param seq Positions.
 * @param[out] index [batch, seq, k] token ids, valid until the next call on the teacher.
 * @param[out] value [batch, seq, k] logits, valid until the next call on the teacher.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_UNSUPPORTED
 *         (a dense teacher), ::LATTICE_ERR_NOT_FOUND (no stored batch matches),
 *         ::LATTICE_ERR_IO, ::LATTICE_ERR_FORMAT (a stored index outside the
 *         vocabulary, or, since 1.1, one a position names twice) or
 *         ::LATTICE_ERR_NON_FINITE.
 */
LATTICE_API lattice_status lattice_teacher_topk(lattice_teacher *teacher, const int32_t *tokens,
                                                int batch, int seq, const int32_t **index,
                                                const float **value);

/**
 * @brief Record a teacher's logits for the next n training batches of a data
 *        object into a file that ::lattice_teacher_create_file reads.
 *
 * Advances the data iterator by n batches (restore it with
 * ::lattice_data_set_position to replay the same batches). With k > 0 only
 * each position's k largest logits are kept.
 * @param teacher A dense teacher.
 * @param data The data.
 * @param n_batches Batches to record (>= 1).
 * @param k 0 for dense logits, else 1 .. vocab.
 * @param path Destination (written atomically).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO,
 *         ::LATTICE_ERR_OUT_OF_MEMORY, ::LATTICE_ERR_UNSUPPORTED (a top-k
 *         teacher) or the teacher's status.
 */
LATTICE_API lattice_status lattice_teacher_record(lattice_teacher *teacher, lattice_data *data,
                                                  int64_t n_batches, int k, const char *path);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
