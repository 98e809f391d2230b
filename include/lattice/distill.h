/**
 * @file distill.h
 * @brief Distillation losses: KL to a teacher's distribution plus cross-entropy.
 */
#ifndef LATTICE_DISTILL_H
#define LATTICE_DISTILL_H

#include <lattice/common.h>
#include <lattice/model.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup distill Distillation losses
 *
 * L = alpha * tau^2 * KL + gamma * CE, averaged over the counted positions
 * (mask non-zero). KL compares the teacher's distribution p = softmax(t / tau)
 * with the student's q = softmax(z / tau): forward KL(p || q) (the paper) or
 * reverse KL(q || p). CE is the student's cross-entropy at temperature 1
 * against the labels. The gradient with respect to the student's logits is
 * written alongside (for ::lattice_model_get_dlogits).
 *
 * Sparse teachers give only their top-k logits per position (indices and
 * values). The teacher distribution is then truncated to those k tokens and
 * renormalised among them: p_i = softmax over the k values / tau, and p = 0
 * elsewhere. Tokens outside the top k contribute nothing to the forward KL
 * term, while their student probability still enters through q's normaliser.
 * With k = vocab this is exactly the dense loss. Reverse KL is undefined where
 * p = 0, so it needs dense teacher logits.
 * @{
 */

/** The temperatures a loss takes: ::lattice_distill_create refuses tau outside
 *  [LATTICE_DISTILL_TAU_MIN, LATTICE_DISTILL_TAU_MAX]. Far above it the KL term
 *  of any two distributions rounds to 0 even in double (tau 1e8 gave the
 *  cross-entropy alone); far below it finite logits overflow to a NaN loss.
 *  @since 1.1 */
#define LATTICE_DISTILL_TAU_MIN 0.01f
/** The highest temperature a loss takes (see ::LATTICE_DISTILL_TAU_MIN).
 *  @since 1.1 */
#define LATTICE_DISTILL_TAU_MAX 100.0f

/** Direction of the KL term. Append-only. */
typedef enum lattice_distill_kl_direction {
    LATTICE_DISTILL_KL_FORWARD = 0, /**< KL(teacher || student), the paper's choice. */
    LATTICE_DISTILL_KL_REVERSE = 1  /**< KL(student || teacher). */
} lattice_distill_kl_direction;

/** Loss settings. Fill with ::lattice_distill_params_init. */
typedef struct lattice_distill_params {
    size_t size;                    /**< sizeof(lattice_distill_params), set by the init function (or the caller); ::lattice_distill_get_params reads it as the bytes the caller has and sets it to the bytes written. */
    float alpha;                    /**< Weight of the KL term (0.7). */
    float gamma;                    /**< Weight of the cross-entropy term (0.3). */
    float tau;                      /**< Temperature (1), in ::LATTICE_DISTILL_TAU_MIN .. ::LATTICE_DISTILL_TAU_MAX. */
    lattice_distill_kl_direction direction; /**< Forward (default) or reverse KL. */
    int n_threads;                  /**< Threads over positions in the raw-pointer calls
                                         (::lattice_distill_dense, ::lattice_distill_topk
                                         called directly), 0 .. 4096; 0 (the
                                         default) is one.
                                         A loss computed for a model
                                         (::lattice_distill_model, the trainer) runs with
                                         the thread count of the model's backend
                                         (::lattice_backend_set_threads), whatever this
                                         says: threads are a backend setting. */
} lattice_distill_params;

/** The loss of one batch and its parts, each a mean over counted positions. */
typedef struct lattice_distill_result {
    double loss;       /**< alpha * tau^2 * kl + gamma * ce. */
    double kl;         /**< The KL term before weighting. */
    double ce;         /**< Cross-entropy against the labels (0 when gamma is 0 and no labels are given). */
    int64_t n_counted; /**< Positions with mask non-zero. */
} lattice_distill_result;

/** An opaque distillation loss. */
typedef struct lattice_distill lattice_distill;

/**
 * @brief Fill params with the paper's settings: alpha 0.7, gamma 0.3, tau 1, forward KL.
 * @param[out] params The struct; NULL is ignored.
 */
LATTICE_API void lattice_distill_params_init(lattice_distill_params *params);

/**
 * @brief Create a loss.
 * @param params The settings: alpha, gamma >= 0 and finite, tau in
 *        ::LATTICE_DISTILL_TAU_MIN .. ::LATTICE_DISTILL_TAU_MAX.
 * @param[out] out The new loss, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG.
 */
LATTICE_API lattice_status lattice_distill_create(const lattice_distill_params *params,
                                                  lattice_distill **out);

/**
 * @brief Destroy a loss. NULL is ignored.
 * @param distill The loss.
 */
LATTICE_API void lattice_distill_destroy(lattice_distill *distill);

/**
 * @brief The message of the last failed call ("" if none).
 * @param distill The loss; NULL gives a static message.
 * @return A string valid until the next call on the loss.
 */
LATTICE_API const char *lattice_distill_errmsg(const lattice_distill *distill);

/**
 * @brief The settings.
 * @param distill The loss.
 * @param[in,out] out The settings.
 *        The caller sets out->size to the bytes it has (sizeof the struct it
 *        was compiled with, or ::lattice_distill_params_init); the library writes
 *        no more than that and sets out->size to the bytes it wrote. A size
 *        below the 1.0 struct's size (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_distill_get_params(const lattice_distill *distill,
                                                      lattice_distill_params *out);

/**
 * @brief The loss against dense teacher logits.
 * @param distill The loss.
 * @param student Student logits [n, vocab].
 * @param teacher Teacher logits [n, vocab].
 * @param targets Labels [n]; may be NULL only when gamma is 0.
 * @param mask [n] flags, non-zero where a position counts; NULL counts all.
 * @param n Positions (batch * seq).
 * @param vocab Vocabulary size.
 * @param[out] dlogits Gradient with respect to the student logits [n, vocab]; may be NULL,
 *        or the student buffer itself (since 1.1: the gradient replaces the logits);
 *        any other overlap with an input is refused.
 * @param[out] result The loss and its parts.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL pointers, a label
 *         out of range, dlogits overlapping an input other than as the student
 *         buffer itself), ::LATTICE_ERR_NON_FINITE (a NaN or infinite loss;
 *         dlogits is then unspecified) or ::LATTICE_ERR_OUT_OF_MEMORY (the
 *         loss's scratch, grown on the first call and for more positions or a
 *         wider vocabulary than before).
 */
LATTICE_API lattice_status lattice_distill_dense(lattice_distill *distill, const float *student,
                                                 const float *teacher, const int32_t *targets,
                                                 const uint8_t *mask, int64_t n, int vocab,
                                                 float *dlogits, lattice_distill_result *result);

/**
 * @brief The loss against a teacher's top-k logits (forward KL only; see the group text).
 * @param distill The loss.
 * @param student Student logits [n, vocab].
 * @param teacher_index Token ids of the teacher's top k [n, k], distinct per position.
 * @param teacher_value The teacher's logits of those tokens [n, k].
 * @param k Entries per position, 1 .. vocab.
 * @param targets Labels [n]; may be NULL only when gamma is 0.
 * @param mask [n] flags; NULL counts all.
 * @param n Positions.
 * @param vocab Vocabulary size.
 * @param[out] dlogits Gradient [n, vocab]; may be NULL, or the student buffer itself
 *        (as ::lattice_distill_dense).
 * @param[out] result The loss and its parts.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (also an index out of
 *         range or repeated, or dlogits overlapping an input as ::lattice_distill_dense
 *         says), ::LATTICE_ERR_UNSUPPORTED (reverse KL),
 *         ::LATTICE_ERR_NON_FINITE or ::LATTICE_ERR_OUT_OF_MEMORY (as
 *         ::lattice_distill_dense).
 */
LATTICE_API lattice_status lattice_distill_topk(lattice_distill *distill, const float *student,
                                                const int32_t *teacher_index,
                                                const float *teacher_value, int k,
                                                const int32_t *targets, const uint8_t *mask,
                                                int64_t n, int vocab, float *dlogits,
                                                lattice_distill_result *result);

/**
 * @brief The loss of a model's latest forward pass against dense teacher logits.
 *
 * ::lattice_distill_dense with the shapes taken from the student: its logits,
 * batch * seq positions and vocabulary, and its dlogits as the gradient (ready
 * for ::lattice_model_backward). The teacher's width is the caller's to state,
 * so that a teacher of another vocabulary is refused instead of read out of
 * step.
 * @param distill The loss.
 * @param student The model whose forward pass ran last.
 * @param teacher Teacher logits [batch * seq, teacher_vocab].
 * @param teacher_vocab The width of each teacher row.
 * @param targets Labels [batch * seq]; may be NULL only when gamma is 0.
 * @param mask [batch * seq] flags, non-zero where a position counts; NULL counts all.
 * @param[out] result The loss and its parts.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL pointers, a
 *         teacher_vocab other than the student's vocab_size, a label out of
 *         range), ::LATTICE_ERR_STATE (no forward pass yet),
 *         ::LATTICE_ERR_NON_FINITE or ::LATTICE_ERR_OUT_OF_MEMORY (as
 *         ::lattice_distill_dense).
 * @since 0.2
 */
LATTICE_API lattice_status lattice_distill_model(lattice_distill *distill, lattice_model *student,
                                                 const float *teacher, int teacher_vocab,
                                                 const int32_t *targets, const uint8_t *mask,
                                                 lattice_distill_result *result);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
