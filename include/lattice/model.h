/**
 * @file model.h
 * @brief A Qwen3-style decoder-only transformer with a growable active depth.
 */
#ifndef LATTICE_MODEL_H
#define LATTICE_MODEL_H

#include <lattice/common.h>
#include <lattice/backend.h>
#include <lattice/data.h>
#include <lattice/norm.h>
#include <lattice/model_option.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup model Models
 *
 * Token embedding, then layers of causal self-attention (RoPE, grouped-query
 * heads, optional per-head q/k RMSNorm) and a SwiGLU MLP, then the LM head;
 * no biases. The norms sit where the model's ::lattice_norm says.
 *
 * A model has a capacity of n_layers layers of which the first
 * n_active_layers take part in forward and backward; the active count can grow
 * (or shrink) between steps. Parameters, gradients and activations live in
 * arenas allocated once at creation: once the first step has run (the
 * first pass split over a thread count allocates its views once), no
 * allocation happens in a step, except in bf16, where every GEMM allocates
 * its operands' scratch (README.md).
 *
 * A step is: ::lattice_model_forward, a loss that fills
 * ::lattice_model_get_dlogits (::lattice_model_cross_entropy, or a distillation
 * loss), ::lattice_model_backward, then an optimizer step.
 *
 * The running regular RMS. A layer whose entry has a block_rescale, or whose
 * input stream gets the massive_offset, keeps one non-trainable value s: the
 * mean RMS (with the norm's eps) of every position but each row's first
 * (padding included) of the stream it reads, averaged over training steps.
 * Each ::lattice_model_forward measures it; the next successful
 * ::lattice_optim_step takes it in (the first measurement as it is, then
 * s = 0.99 s + 0.01 measured). ::lattice_model_forward_inference, evaluation
 * and a failed step leave s as it is: at evaluation it is frozen, and no
 * output ever depends on a later position of its row. s is the 1-value
 * tensor "model.layers.N.input_regular_rms" (never trained, no gradient,
 * saved, loaded and checkpointed with the weights); 0 means not measured yet.
 * @{
 */

/** An opaque model. */
typedef struct lattice_model lattice_model;

/**
 * @brief A model's shape and initialisation. Fill with ::lattice_model_params_init.
 */
struct lattice_model_params {
    size_t size;          /**< sizeof(lattice_model_params), set by the init function (or the caller); ::lattice_model_get_params reads it as the bytes the caller has and sets it to the bytes written. */
    int vocab_size;       /**< Token ids are 0 .. vocab_size - 1. Default 257: the
                               256 bytes plus the boundary token of
                               ::lattice_data_create_text, so default model and data agree.
                               */
    int d_model;          /**< Width of the residual stream. */
    int n_layers;         /**< Capacity: layers allocated. */
    int n_active_layers;  /**< Layers active at creation, 1 .. n_layers. */
    int n_heads;          /**< Query heads. */
    int n_kv_heads;       /**< Key/value heads; must divide n_heads. */
    int head_dim;         /**< Per-head width, independent of d_model; must be even (RoPE). */
    int d_ff;             /**< SwiGLU hidden width. */
    float rope_theta;     /**< RoPE base (Qwen3: 1e6). */
    int qk_norm;          /**< Non-zero: per-head RMSNorm on queries and keys (Qwen3). */
    int tie_embeddings;   /**< Non-zero: the LM head reuses the embedding matrix. */
    int max_batch;        /**< Largest batch a forward may take (sizes the arenas). */
    int max_seq;          /**< Longest sequence a forward may take. */
    uint64_t seed;        /**< Seed of the initial weights. */
    float init_std;       /**< Std of the normal init of linear and embedding weights (0.02). */
    int LATTICE_EXPERIMENTAL_FIELD(block_norm); /**< Reserved: the slot of the option
                               ::LATTICE_MODEL_OPTION_BLOCK_NORM (::lattice_model_params_set_option).
                               @since 0.4 */
    int LATTICE_EXPERIMENTAL_FIELD(block_rescale); /**< Reserved: the slot of
                               ::LATTICE_MODEL_OPTION_BLOCK_RESCALE. @since 0.4 */
    float LATTICE_EXPERIMENTAL_FIELD(massive_offset); /**< Reserved: the slot of
                               ::LATTICE_MODEL_OPTION_MASSIVE_OFFSET. @since 1.0 */
    int LATTICE_EXPERIMENTAL_FIELD(massive_layer); /**< Reserved: the slot of
                               ::LATTICE_MODEL_OPTION_MASSIVE_LAYER. @since 1.0 */
    int LATTICE_EXPERIMENTAL_FIELD(massive_channel); /**< Reserved: the slot of
                               ::LATTICE_MODEL_OPTION_MASSIVE_CHANNEL. @since 1.0 */
};

/** Parameter groups, each with its own trainable flag. Append-only. */
typedef enum lattice_model_group {
    LATTICE_MODEL_GROUP_EMBEDDING = 0,     /**< The token embedding. */
    LATTICE_MODEL_GROUP_LAYER = 1,         /**< One layer (select it by index). */
    LATTICE_MODEL_GROUP_BOUNDARY_NORM = 2, /**< The final norm (pre, peri) or entry norm (post). */
    LATTICE_MODEL_GROUP_HEAD = 3,          /**< The LM head; when tied it is the embedding, and its flag is the embedding's. */
    LATTICE_MODEL_GROUP_STATISTIC = 4      /**< A statistic the model keeps, never trained and never trainable (a layer's running regular RMS: the group's text); its layer is the layer that reads it. @since 1.0 */
} lattice_model_group;

/**
 * @brief One parameter tensor as seen through ::lattice_model_get_tensor.
 */
typedef struct lattice_model_tensor_info {
    const char *name;    /**< Hugging Face Qwen3 name where one exists, e.g. "model.layers.0.self_attn.q_proj.weight". */
    int ndim;            /**< 1 or 2. */
    int64_t shape[2];    /**< Rows then columns (shape[1] is 1 for vectors). */
    float *data;         /**< The values, row-major; writable. */
    float *grad;         /**< The gradient written by the last backward (valid for trainable groups). */
    lattice_model_group group; /**< The group it belongs to. */
    int layer;           /**< Layer index for ::LATTICE_MODEL_GROUP_LAYER, else -1. */
} lattice_model_tensor_info;

/**
 * @brief Fill params with a small default shape (the benchmark student:
 *        9 layers, d_model 256, 4 heads of 64, d_ff 768, batch 16 x 256) over the
 *        byte vocabulary of text data: vocab 257, the 256 bytes and the boundary token
 *        (::lattice_data_params_init's defaults fit this model as they are).
 *
 * Every default: size sizeof(lattice_model_params), vocab_size 257, d_model
 * 256, n_layers 9, n_active_layers 9, n_heads 4, n_kv_heads 4 (no grouping),
 * head_dim 64, d_ff 768, rope_theta 1e6 (Qwen3's), qk_norm 1, tie_embeddings
 * 0 (an untied head), max_batch 16, max_seq 256, seed 0, init_std 0.02,
 * block_norm 0, block_rescale 0, massive_offset 0, massive_layer 1,
 * massive_channel 0. The norm is not a field: a model gets the placement,
 * kind and eps of the ::lattice_norm it is created with (doc/MODEL.md has
 * the same table).
 * @param[out] params The struct; NULL is ignored.
 */
LATTICE_API void lattice_model_params_init(lattice_model_params *params);

/**
 * @brief Check a shape without creating a model, and say what is wrong with it.
 * @param params The shape.
 * @param[out] errmsg Receives the reason on failure when non-NULL
 *             (::LATTICE_ERRMSG_SIZE bytes).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_INVALID_CONFIG:
 *         the status ::lattice_model_create would give for the params alone. What
 *         depends on the norm it is not given (block_norm and block_rescale need
 *         the pre-norm placement) is checked by ::lattice_model_create and
 *         ::lattice_model_estimate, which take the norm.
 */
LATTICE_API lattice_status lattice_model_params_check(const lattice_model_params *params,
                                                      char *errmsg);

/**
 * @brief What a model of this shape would hold, without creating it.
 * @param params The shape.
 * @param norm The placement.
 * @param[out] n_params Parameters over the whole capacity; may be NULL.
 * @param[out] arena_bytes Bytes of its arenas (as ::lattice_model_get_arena_bytes); may be NULL.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_INVALID_CONFIG or
 *         ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_model_estimate(const lattice_model_params *params,
                                                  const lattice_norm *norm, int64_t *n_params,
                                                  size_t *arena_bytes);

/**
 * @brief Create a model with freshly initialised weights.
 *
 * Linear and embedding weights are drawn from N(0, init_std^2) with the
 * library's own generator seeded by params->seed; norm weights are 1, norm
 * biases 0. Every group starts trainable.
 * @param params The shape.
 * @param norm The placement; its settings are copied.
 * @param backend The backend; borrowed, must outlive the model.
 * @param[out] out The new model, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL pointers),
 *         ::LATTICE_ERR_INVALID_CONFIG (an impossible shape), or
 *         ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_model_create(const lattice_model_params *params,
                                                const lattice_norm *norm,
                                                lattice_backend *backend,
                                                lattice_model **out);

/**
 * @brief Create a model of larger capacity from a model: every layer, tensor
 *        and setting of small, and n_layers - (small's n_layers) layers more.
 *
 * Growing the active depth past the capacity chosen at creation
 * (::lattice_model_set_active_layers stops at n_layers) goes through a new
 * model: this one. It has small's params (shape, options, seed, init_std)
 * with n_layers layers, small's norm settings (placement, kind, eps, residual
 * scale), and:
 * - every tensor of small, copied by name: the embedding, the boundary norm,
 *   the LM head and layers 0 .. small's n_layers - 1, their running regular
 *   RMS (::LATTICE_MODEL_GROUP_STATISTIC) included;
 * - small's active layer count, trainable flags and skip range;
 * - the new layers as ::lattice_model_create draws them: a model created
 *   with these params holds the same values there, since each tensor's draw
 *   depends on the seed and the tensor alone (doc/MODEL.md,
 *   "Initialisation and pairing"); they are trainable, and a block-entry
 *   norm or running regular RMS a new layer has starts as at creation (1,
 *   0). The result depends on small and the arguments alone;
 * - no gradients (zero) and no forward: the state of a created model.
 *
 * While only small's layers are active, the grown model computes small's
 * logits bit for bit (on one backend and thread count). Switch the new
 * layers on with ::lattice_model_set_active_layers, or with a schedule whose
 * phases reach them. An optimizer, teacher, trainer or checkpoint of small
 * does not carry over: create them for the grown model.
 * @param small The model to grow; held for the call, and left as it is.
 * @param n_layers The grown capacity: small's n_layers (a copy) .. 4096.
 * @param max_batch Largest batch a forward may take; 0 keeps small's.
 * @param max_seq Longest sequence a forward may take; 0 keeps small's.
 * @param backend The grown model's backend, borrowed as by
 *        ::lattice_model_create; NULL uses small's.
 * @param[out] out The new model, or NULL on failure.
 * @return ::LATTICE_OK; ::LATTICE_ERR_INVALID_ARGUMENT (small or out NULL,
 *         n_layers below small's, a negative max_batch or max_seq);
 *         ::LATTICE_ERR_INVALID_CONFIG (a capacity the params refuse, as
 *         ::lattice_model_create would); ::LATTICE_ERR_OUT_OF_MEMORY;
 *         ::LATTICE_ERR_STATE (another thread is inside a call on small). The
 *         message is in small's ::lattice_model_errmsg and in
 *         ::lattice_last_error.
 * @since 1.1
 */
LATTICE_API lattice_status lattice_model_create_grown(const lattice_model *small, int n_layers,
                                                      int max_batch, int max_seq,
                                                      lattice_backend *backend,
                                                      lattice_model **out);

/**
 * @brief Destroy a model. NULL is ignored.
 * @param model The model.
 */
LATTICE_API void lattice_model_destroy(lattice_model *model);

/**
 * @brief The message of the last failed call on this model ("" if none).
 * @param model The model; NULL gives a static message.
 * @return A string valid until the next call on the model.
 */
LATTICE_API const char *lattice_model_errmsg(const lattice_model *model);

/**
 * @brief The params the model was created with (n_active_layers is the current count).
 * @param model The model.
 * @param[in,out] out The params.
 *        The caller sets out->size to the bytes it has (sizeof the struct it
 *        was compiled with, or ::lattice_model_params_init); the library writes
 *        no more than that and sets out->size to the bytes it wrote. A size
 *        below this library's sizeof(the struct) (0 included) is refused with
 *        ::LATTICE_ERR_INVALID_ARGUMENT and nothing is written.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_get_params(const lattice_model *model,
                                                    lattice_model_params *out);

/**
 * @brief The model's normalization placement.
 * @param model The model; NULL gives ::LATTICE_NORM_PLACEMENT_PRE.
 * @return The placement.
 */
LATTICE_API lattice_norm_placement lattice_model_get_placement(const lattice_model *model);

/**
 * @brief Set how many of the first layers are active.
 *
 * Weights of all layers persist whether active or not, so growing keeps the
 * earlier weights and switches on layers that were initialised at creation.
 * After a shrink, the layers beyond n_active keep the gradients of the last
 * backward that ran them (::lattice_model_tensor_info.grad shows them), but nothing
 * reads them: optimizers measure and update only active trainable layers.
 * A layer made active by this call has its gradients zeroed: it was in no
 * backward since, and an optimizer step before the next backward must not
 * apply what an older pass left. The last forward's activations are dropped
 * (backward refuses until the next forward).
 * @param model The model.
 * @param n_active 1 .. n_layers.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_set_active_layers(lattice_model *model, int n_active);

/**
 * @brief The number of active layers.
 * @param model The model; NULL gives 0.
 * @return The count.
 */
LATTICE_API int lattice_model_get_active_layers(const lattice_model *model);

/**
 * @brief Re-draw one layer's weights (linear N(0, init_std^2), norms 1 / 0).
 *
 * The last forward's activations no longer match the weights and are dropped:
 * ::lattice_model_backward refuses until the next forward.
 * @param model The model.
 * @param layer 0 .. n_layers - 1.
 * @param seed Seed of the draw.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_init_layer(lattice_model *model, int layer, uint64_t seed);

/**
 * @brief Copy every weight of one layer onto another (stacking a block).
 *
 * Tensor by tensor, matched by role (the name after "model.layers.N.", e.g.
 * "self_attn.q_proj.weight"), since layers need not hold the same tensors
 * (block_norm, block_rescale and massive_offset give some layers tensors
 * that others lack). A weight the destination has and the source lacks (a
 * block-entry norm of block_norm) keeps its value; one only the source has
 * is not copied. A layer's running regular RMS
 * (::LATTICE_MODEL_GROUP_STATISTIC) is a statistic of the stream it reads,
 * not a weight: it is never copied. Shapes of a role agree within a model;
 * a pair that did not would be refused, naming the tensor, before anything
 * is written. The last forward's activations are dropped, as by
 * ::lattice_model_init_layer.
 * @param model The model.
 * @param dst Destination layer.
 * @param src Source layer (may equal dst: nothing changes).
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_copy_layer(lattice_model *model, int dst, int src);

/**
 * @brief Zero a layer's attention and MLP output projections (o_proj, down_proj).
 *
 * Under pre-norm (and peri-norm) the layer then computes the identity, the
 * LLaMA-Pro way of appending blocks; under post-norm the layer still
 * normalises its input. The last forward's activations are dropped, as by
 * ::lattice_model_init_layer.
 * @param model The model.
 * @param layer The layer.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_zero_layer_outputs(lattice_model *model, int layer);

/**
 * @brief Mark a parameter group trainable or frozen.
 *
 * A frozen group gets no gradient work in backward, and optimizers leave it as it is.
 * A group made trainable again has its gradients zeroed: it was left out of
 * every backward since it was frozen, and an optimizer step before the next
 * backward must not apply what an older pass left.
 * @param model The model.
 * @param group The group.
 * @param layer The layer index for ::LATTICE_MODEL_GROUP_LAYER, ignored otherwise.
 * @param trainable Non-zero for trainable.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_set_trainable(lattice_model *model, lattice_model_group group,
                                                       int layer, int trainable);

/**
 * @brief Whether a group is trainable.
 * @param model The model.
 * @param group The group.
 * @param layer The layer index for ::LATTICE_MODEL_GROUP_LAYER, ignored otherwise.
 * @param[out] trainable 1 or 0.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_get_trainable(const lattice_model *model, lattice_model_group group,
                                                       int layer, int *trainable);

/**
 * @brief Skip layers [first, first + count) in later forward passes (their
 *        input passes through unchanged); count 0 skips nothing.
 *
 * Used by diagnostics that remove a block. Backward treats skipped layers as identity.
 * A skipped layer skips its block-entry norm or rescale too; the
 * massive_offset belongs to the stream between layers, not to a layer, and
 * is added whether or not the layers around it are skipped.
 * @param model The model.
 * @param first First layer to skip.
 * @param count Number of layers; 0 clears the skip.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_set_skip(lattice_model *model, int first, int count);

/**
 * @brief Forward pass over the active layers to logits.
 * @param model The model.
 * @param tokens batch * seq token ids, row-major.
 * @param batch 1 .. max_batch.
 * @param seq 1 .. max_seq.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL, sizes beyond the
 *         capacity, token ids out of range), ::LATTICE_ERR_BACKEND or
 *         ::LATTICE_ERR_OUT_OF_MEMORY (the first pass split over a thread
 *         count, or a bf16 GEMM: ::lattice_backend_set_gemm_precision).
 */
LATTICE_API lattice_status lattice_model_forward(lattice_model *model, const int32_t *tokens,
                                                 int batch, int seq);

/**
 * @brief Logits of the last forward, [batch, seq, vocab_size] row-major.
 * @param model The model.
 * @return The logits, or NULL when no forward has run.
 */
LATTICE_API const float *lattice_model_get_logits(const lattice_model *model);

/**
 * @brief The gradient of the loss with respect to the logits, [batch, seq, vocab_size].
 *
 * A loss writes it; ::lattice_model_backward reads it, and refuses after a
 * forward until a loss has run (::lattice_model_cross_entropy, or a
 * distillation loss into this buffer): a caller given the buffer after the
 * forward counts as writing it, so ask for it after each forward.
 * @param model The model.
 * @return The buffer, or NULL when no forward has run.
 */
LATTICE_API float *lattice_model_get_dlogits(lattice_model *model);

/**
 * @brief The same gradient buffer as ::lattice_model_get_dlogits, to read.
 *
 * A getter like ::lattice_model_get_logits: it changes nothing, so reading
 * the gradient a loss wrote, or looking at the buffer before any loss ran,
 * does not count as writing it, and ::lattice_model_backward still waits
 * for a loss after a forward.
 * @param model The model.
 * @return The buffer, or NULL when no forward has run.
 * @since 1.1
 */
LATTICE_API const float *lattice_model_get_dlogits_const(const lattice_model *model);

/**
 * @brief Mean cross-entropy of the last forward's logits against targets, and its
 *        gradient written to ::lattice_model_get_dlogits.
 * @param model The model.
 * @param targets batch * seq target ids.
 * @param mask batch * seq flags, non-zero where the position counts; NULL counts all.
 * @param[out] loss Mean over counted positions (0 when none count).
 * @param[out] n_counted Number of counted positions; may be NULL.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (a target out of range),
 *         ::LATTICE_ERR_STATE (no forward yet) or ::LATTICE_ERR_NON_FINITE.
 */
LATTICE_API lattice_status lattice_model_cross_entropy(lattice_model *model, const int32_t *targets,
                                                       const uint8_t *mask, float *loss,
                                                       int64_t *n_counted);

/**
 * @brief Backward pass from ::lattice_model_get_dlogits; overwrites the gradients of
 *        the trainable groups (frozen ones are not touched).
 * @param model The model.
 * @return ::LATTICE_OK, ::LATTICE_ERR_STATE (no forward yet, the last one was
 *         ::lattice_model_forward_inference, its activations were dropped, or no
 *         loss has written the gradient of its logits), ::LATTICE_ERR_BACKEND or
 *         ::LATTICE_ERR_OUT_OF_MEMORY (as ::lattice_model_forward).
 */
LATTICE_API lattice_status lattice_model_backward(lattice_model *model);

/**
 * @brief The batch and seq of the forward whose activations the model holds
 *        (::lattice_model_get_logits, ::lattice_model_get_hidden and the
 *        losses read batch x seq positions of them).
 *
 * Every forward sets it, whichever call ran it: the caller's own, a trainer's
 * step or evaluation, a model teacher's logits or recording, a diagnostic.
 * A wrapper that sizes buffers for the last forward asks here rather than
 * remembering its own.
 * @param model The model.
 * @param[out] batch Rows.
 * @param[out] seq Positions per row.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (a NULL argument) or
 *         ::LATTICE_ERR_STATE (no activations are held: no forward yet, or a
 *         change of the active layers, a skip range, a load, a failed pass or
 *         ::lattice_model_init_layer, ::lattice_model_copy_layer or
 *         ::lattice_model_zero_layer_outputs dropped them; *batch and *seq
 *         are then 0).
 * @since 1.1
 */
LATTICE_API lattice_status lattice_model_get_forward_shape(const lattice_model *model, int *batch,
                                                           int *seq);

/**
 * @brief The residual stream at a layer boundary of the last forward,
 *        [batch, seq, d_model].
 *
 * Boundary 0 is the input of layer 0 (after the entry norm under post-norm);
 * boundary i is the output of layer i - 1; boundary n_active is the output of
 * the last active layer (before any final norm).
 * @param model The model.
 * @param boundary 0 .. n_active.
 * @param[out] out The hidden state, valid until the next forward.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or ::LATTICE_ERR_STATE.
 */
LATTICE_API lattice_status lattice_model_get_hidden(const lattice_model *model, int boundary,
                                                const float **out);

/**
 * @brief Number of parameter tensors (over the whole capacity).
 * @param model The model; NULL gives 0.
 * @return The count.
 */
LATTICE_API int lattice_model_get_n_tensors(const lattice_model *model);

/**
 * @brief Describe one parameter tensor.
 * @param model The model.
 * @param index 0 .. n_tensors - 1.
 * @param[out] out The description.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_get_tensor(const lattice_model *model, int index,
                                                lattice_model_tensor_info *out);

/**
 * @brief Find a parameter tensor by name.
 * @param model The model.
 * @param name The name, e.g. "lm_head.weight".
 * @param[out] out The description.
 * @return ::LATTICE_OK, ::LATTICE_ERR_NOT_FOUND or ::LATTICE_ERR_INVALID_ARGUMENT.
 */
LATTICE_API lattice_status lattice_model_find_tensor(const lattice_model *model, const char *name,
                                                     lattice_model_tensor_info *out);

/**
 * @brief Number of parameters over the whole capacity (tied weights counted once).
 * @param model The model; NULL gives 0.
 * @return The count.
 */
LATTICE_API int64_t lattice_model_get_n_params(const lattice_model *model);

/**
 * @brief Floating-point operations of the GEMMs of one pass over the active layers.
 *
 * Counts 2 * m * n * k for every GEMM the model runs (attention scores over
 * the full seq x seq square, as computed); backward includes the weight
 * gradients of trainable groups and the input gradients it propagates.
 * @param model The model.
 * @param batch Batch size.
 * @param seq Sequence length.
 * @param with_backward Non-zero to add the backward pass.
 * @return The FLOP count (0 for NULL, or a batch or seq below 1).
 */
LATTICE_API double lattice_model_get_flops(const lattice_model *model, int batch, int seq, int with_backward);

/**
 * @brief Bytes held by the model's arenas (parameters, gradients, activations, scratch).
 * @param model The model; NULL gives 0.
 * @return The size.
 */
LATTICE_API size_t lattice_model_get_arena_bytes(const lattice_model *model);

/**
 * @brief Save the model's parameters (the whole capacity) as safetensors (F32).
 *
 * Tensor names are listed in doc/MODEL.md; the shape and placement go into
 * the header's __metadata__ as "lattice.config" (JSON), so the file reopens
 * with ::lattice_model_create_from_file. The write is atomic: a temporary
 * file in the same directory, fsync, then rename. Saving over a symbolic link
 * replaces the file the link (or chain of links) points to and keeps the
 * link; a file replaced keeps its permission bits. Temporary files that a
 * killed save left behind ("<path>.tmp.<pid>.<n>", their process gone) are
 * removed by the next save to the same path. Checkpoints and recorded teacher
 * logits are written the same way.
 * @param model The model.
 * @param path Destination.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO or
 *         ::LATTICE_ERR_OUT_OF_MEMORY (the file is then as it was).
 */
LATTICE_API lattice_status lattice_model_save(const lattice_model *model, const char *path);

/**
 * @brief Load parameters from a safetensors file into an existing model.
 *
 * Every tensor of the model must be present with the same shape (F32, F16,
 * BF16 or F64; converted to float). Other tensors in the file are ignored.
 * A file written by ::lattice_model_save says what model it holds
 * ("lattice.config"): every setting in it must be the model's (placement,
 * norm kind, eps, residual scale, rope_theta, qk_norm, tie_embeddings,
 * block_norm, block_rescale, massive_offset and, with an offset,
 * massive_layer and massive_channel, and the shape: vocab_size, d_model,
 * n_layers, n_heads, n_kv_heads, head_dim, d_ff), or the load is
 * refused with ::LATTICE_ERR_FORMAT before any weight is read, naming the
 * setting and both values ("the file's block_rescale is 2, the model's 0").
 * The active layer count is not compared: it is where a run stands.
 * The file is treated as hostile: bounds, sizes, overlaps, dtypes and JSON
 * are checked before anything is read, and a failed load leaves a clear
 * message (the model's weights may then be partly overwritten).
 * @param model The model.
 * @param path The file.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, ::LATTICE_ERR_IO,
 *         ::LATTICE_ERR_FORMAT (a malformed file, a missing tensor, a shape that
 *         disagrees with the model) or ::LATTICE_ERR_OUT_OF_MEMORY.
 */
LATTICE_API lattice_status lattice_model_load(lattice_model *model, const char *path);

/**
 * @brief Create a model from a safetensors file and load its weights.
 *
 * The shape comes from a Hugging Face Qwen3 config.json when config_path is
 * given (hidden_size, intermediate_size, num_hidden_layers,
 * num_attention_heads, num_key_value_heads, head_dim, vocab_size, rope_theta,
 * rms_norm_eps, tie_word_embeddings; pre-norm RMSNorm with q/k norm), so real
 * Qwen3 weights load as a teacher; otherwise from the file's own
 * "lattice.config" metadata (files written by ::lattice_model_save). A file
 * that has its own "lattice.config" must agree with a config.json in every
 * setting both describe (as ::lattice_model_load compares them; a Qwen3
 * config.json describes a plain pre-norm RMSNorm model with q/k norm,
 * residual scale 1, no block_norm, block_rescale or massive_offset), or the
 * load is refused with ::LATTICE_ERR_FORMAT naming the setting and both
 * values ("the file's block_rescale is 2, the config.json's 0"). The RoPE
 * base is read from "rope_theta" or from "rope_parameters" ({"rope_theta": ...,
 * "rope_type": "default"}); both present must agree. Settings that are not
 * implemented are refused with ::LATTICE_ERR_UNSUPPORTED and the key named in
 * the message: a model_type other than "qwen3", attention_bias true,
 * rope_scaling other than null, a rope_type other than "default",
 * use_sliding_window true, layer_types other than "full_attention",
 * hidden_act other than "silu", partial_rotary_factor other than 1.
 * @param path The safetensors file.
 * @param config_path A config.json, or NULL.
 * @param backend The backend; borrowed.
 * @param max_batch Largest batch the model will take.
 * @param max_seq Longest sequence.
 * @param[out] out The new model, or NULL on failure.
 * @param[out] errmsg Receives the reason on failure when non-NULL (::LATTICE_ERRMSG_SIZE bytes).
 * @return As ::lattice_model_create and ::lattice_model_load;
 *         ::LATTICE_ERR_UNSUPPORTED for a config.json setting not implemented.
 */
LATTICE_API lattice_status lattice_model_create_from_file(const char *path, const char *config_path,
                                                          lattice_backend *backend, int max_batch,
                                                          int max_seq, lattice_model **out,
                                                          char *errmsg);

/** Options of ::lattice_model_save_config, or-ed together. Append-only. @since 0.4 */
typedef enum lattice_model_config_flag {
    LATTICE_MODEL_CONFIG_FLAG_NONE = 0,   /**< A Qwen3 config, or a refusal. @since 0.4 */
    LATTICE_MODEL_CONFIG_FLAG_LATTICE = 1 /**< A model a Qwen3 config cannot describe is
                                               written with model_type "lattice" (and no
                                               "architectures") instead of refused: Qwen3
                                               loaders, this library's included, refuse
                                               it by its model_type, and Python's
                                               Model.from_pretrained reads the weights'
                                               own metadata instead. What Python's
                                               save_pretrained writes. @since 0.4 */
} lattice_model_config_flag;

/**
 * @brief Write a Hugging Face config.json for the model, so that its weights
 *        (::lattice_model_save) load as a Qwen3 model.
 *
 * The file is Qwen3's: "architectures" ["Qwen3ForCausalLM"], model_type
 * "qwen3", vocab_size, hidden_size (d_model), intermediate_size (d_ff),
 * num_hidden_layers, num_attention_heads, num_key_value_heads, head_dim,
 * hidden_act "silu", max_position_embeddings (max_seq), rms_norm_eps,
 * rope_theta, tie_word_embeddings, attention_bias false, torch_dtype
 * "float32", then "lattice": the placement, norm kind, eps, residual scale,
 * qk_norm, n_active_layers (block_norm and block_rescale when set) and the
 * library's version, which Qwen3 loaders ignore. Floats are written as the
 * shortest decimal that reads back as the model's float (1e-06, not
 * 9.9999999747524271e-07), laid out as Python's json.dump(config, indent=2),
 * with a final newline. With the weights beside it,
 * ::lattice_model_create_from_file with both files gives the same
 * logits, bit for bit; saved as "config.json" and "model.safetensors" in one
 * directory, the pair is laid out as a Hugging Face Qwen3 checkpoint (the
 * tensor names of doc/MODEL.md).
 *
 * A Qwen3 config describes a pre-norm RMSNorm model with q/k norm, residuals
 * unscaled, no block-entry norm or rescale, and every layer active. Any other
 * model is refused with ::LATTICE_ERR_UNSUPPORTED, the message naming what a
 * Qwen3 config cannot say ("a post-norm model (Qwen3 is pre-norm)", "2 of 4
 * layers active"): a loader of Qwen3 would compute another model from its
 * weights. Such a model's own file reopens with
 * ::lattice_model_create_from_file without a config;
 * ::LATTICE_MODEL_CONFIG_FLAG_LATTICE writes it as model_type "lattice". The
 * write is atomic, as ::lattice_model_save's.
 * @param model The model.
 * @param path Destination, e.g. "dir/config.json".
 * @param flags ::lattice_model_config_flag values or-ed together (0: none).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL arguments, a bit no
 *         flag names), ::LATTICE_ERR_UNSUPPORTED (a model a Qwen3 config cannot
 *         describe, without ::LATTICE_MODEL_CONFIG_FLAG_LATTICE),
 *         ::LATTICE_ERR_IO or ::LATTICE_ERR_OUT_OF_MEMORY.
 * @since 0.4
 */
LATTICE_API lattice_status lattice_model_save_config(const lattice_model *model, const char *path,
                                                     unsigned flags);

/**
 * @brief Forward pass for inference: the logits of ::lattice_model_forward, bit for bit,
 *        with the model marked so that ::lattice_model_backward refuses.
 *
 * For evaluation and generation without an optimizer or a trainer. The
 * activations of the last forward are overwritten as by any forward; after
 * this call ::lattice_model_backward fails with ::LATTICE_ERR_STATE until a
 * ::lattice_model_forward succeeds, so an evaluation run between a training
 * forward and its backward is caught instead of giving the gradients of the
 * wrong batch. Losses (::lattice_model_cross_entropy_value, ::lattice_model_cross_entropy)
 * and ::lattice_model_get_hidden read its results as after a training forward.
 * A call that fails its argument checks changes nothing.
 * @param model The model.
 * @param tokens batch * seq token ids, row-major.
 * @param batch 1 .. max_batch.
 * @param seq 1 .. max_seq.
 * @return As ::lattice_model_forward.
 * @since 0.2
 */
LATTICE_API lattice_status lattice_model_forward_inference(lattice_model *model,
                                                           const int32_t *tokens, int batch,
                                                           int seq);

/**
 * @brief Mean cross-entropy of the last forward's logits against targets, without
 *        a gradient: ::lattice_model_get_dlogits is not written.
 *
 * The value of ::lattice_model_cross_entropy (up to float rounding in the
 * sums), in double: the one name for the loss, with a gradient or without.
 * @param model The model.
 * @param targets batch * seq target ids (only counted positions are checked).
 * @param mask batch * seq flags, non-zero where the position counts; NULL counts all.
 * @param[out] ce Mean over counted positions (0 when none count).
 * @param[out] n_counted Number of counted positions; may be NULL.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL targets or ce, a
 *         target out of range), ::LATTICE_ERR_STATE (no forward yet) or
 *         ::LATTICE_ERR_NON_FINITE.
 * @since 1.0
 */
LATTICE_API lattice_status lattice_model_cross_entropy_value(lattice_model *model,
                                                             const int32_t *targets,
                                                             const uint8_t *mask, double *ce,
                                                             int64_t *n_counted);

/**
 * @brief Validation cross-entropy of the model over a data object's validation split.
 *
 * Runs ::lattice_model_forward_inference and ::lattice_model_cross_entropy_value over
 * validation batches 0 .. max_batches - 1 (::lattice_data_get_val_batch) and
 * averages the loss over every counted (unmasked) position, so a batch
 * weighs by its counted tokens: the number, to the bit,
 * ::lattice_trainer_evaluate reports for the same batches on one rank. Needs no optimizer, schedule or trainer. The
 * model's activations are those of the last batch afterwards, and backward
 * refuses until the next ::lattice_model_forward.
 * @param model The model.
 * @param data The data; its vocabulary and batch shape must fit the model.
 * @param max_batches Batches to use; 0 for all of them.
 * @param[out] val_ce The mean cross-entropy (0 when no position counts).
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (NULL, a negative
 *         max_batches, data whose vocabulary or batch shape does not fit the
 *         model), ::LATTICE_ERR_STATE (no validation documents), or a status of
 *         a batch's forward or loss (the message names the batch).
 * @since 0.2
 */
LATTICE_API lattice_status lattice_model_evaluate(lattice_model *model, lattice_data *data,
                                                  int64_t max_batches, double *val_ce);

/** @} */


#ifdef __cplusplus
}
#endif

#endif
