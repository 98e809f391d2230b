/* What another object may ask of a model, as functions over the opaque
 * handle (model.c): its borrow and busy words, its params, backend and
 * profile, its tensors as an arena walk, digests of its weights, its depth
 * and trainable flags as a checkpoint keeps them, the last forward's logits
 * and attention, the one evaluation loop, and a student's ends taken from a
 * teacher. The model's body (model_impl.h) is the model's own files' alone. */
#ifndef LATTICE_MODEL_ACCESS_H
#define LATTICE_MODEL_ACCESS_H

#include "handle.h"
#include "profile.h"

#include <stddef.h>

/* The model's busy word (handle.h), for LATTICE__INSIDE_BUSY; NULL for NULL. */
lattice_busy *lattice__model_busy(lattice_model *m);

/* Borrow the model for another object's lifetime (handle.h's lattice__borrow,
 * fn naming the caller), and give it back: the last giver frees a model whose
 * destroy was asked. */
lattice_status lattice__model_borrow(lattice_model *m, const char *fn);
void lattice__model_unborrow(lattice_model *m);

/* The model's params (its own copy: read only). */
const lattice_model_params *lattice__model_params(const lattice_model *m);

/* The model's backend (its thread count, its kernels), and the profile its
 * calls and the optimizer's step time themselves into. */
const struct lattice_backend *lattice__model_backend(const lattice_model *m);
lattice_prof *lattice__model_prof(lattice_model *m);

/* One tensor of the parameter arena, as the optimizer and checkpoints walk
 * them (tensor i of lattice_model_get_n_tensors, in the arena's order). */
typedef struct lattice__model_tensor {
    const char *name; /* the tensor's (Qwen3) name */
    float *data;      /* its weights */
    float *grad;      /* its gradient (the same place in the gradient arena) */
    size_t offset;    /* floats from the arena's start: where it sits in any
                         buffer laid out like the arena (a moment, a copy) */
    int64_t rows, cols;
    int ndim;
    int updatable;    /* trainable and, for a layer, active: an optimizer updates it */
} lattice__model_tensor;
void lattice__model_tensor_at(const lattice_model *m, int i, lattice__model_tensor *out);

/* Floats in the parameter arena (= the gradient arena): the size of a buffer
 * laid out like it, alignment padding included. */
size_t lattice__model_arena_floats(const lattice_model *m);

/* A digest (lattice__hash, from h) of the tensors' values in arena, a buffer
 * laid out like the parameter arena (the parameters, a moment, a copy):
 * tensor by tensor, so that the arena's alignment padding, never written,
 * does not count. */
uint64_t lattice__model_hash(const lattice_model *m, const float *arena, uint64_t h);

/* Take the last forward's running-statistic measurements into the running
 * values (an optimizer step; model_pass.c). */
void lattice__model_commit_refs(lattice_model *m);

/* What a checkpoint keeps of a model besides its tensors: the active depth
 * and the trainable flags as set (the head's own flag even when the head is
 * tied, layer flags for every layer); listed once, but the layer flags, for
 * checkpoints and setups in lattice__model_run_fields (fields.h). */
typedef struct lattice__model_run {
    int n_active;
    int trainable_embedding, trainable_boundary, trainable_head;
    const int *trainable_layer; /* n_layers flags (get: the model's own, read only) */
} lattice__model_run;
lattice__model_run lattice__model_get_run(const lattice_model *m);
/* Set them, as a checkpoint's commit: the caller has checked them (n_active in
 * 1..n_layers, n_layers layer flags); the stored activations no longer match. */
void lattice__model_set_run(lattice_model *m, const lattice__model_run *r);

/* Whether layer i is skipped (lattice_model_set_skip). */
int lattice__model_skips(const lattice_model *m, int layer);

/* Layer i's attention in the last forward, laid out as attention.h says: its
 * probabilities (what the pass kept), queries, keys and values.
 * LATTICE_ERR_STATE (nothing set) before the first forward or for a layer
 * that is not active or was skipped. */
typedef struct lattice__model_attention {
    const float *p, *q, *k, *v;
} lattice__model_attention;
lattice_status lattice__model_layer_attention(const lattice_model *m, int layer,
                                              lattice__model_attention *out);

/* The one evaluation loop: the sums of nats and counted positions over the
 * first nb validation batches, each cut by share(ctx, batch) when share is
 * given (model_pass.c; lattice_model_evaluate and lattice_trainer_evaluate). */
lattice_status lattice__model_val_sums(lattice_model *m, lattice_data *data, int64_t nb,
                                       lattice_data_batch (*share)(const void *ctx,
                                                                   const lattice_data_batch *b),
                                       const void *ctx, double *total, int64_t *count);

/* h extended by the model's weights and active depth: what it computes. */
uint64_t lattice__model_identity(const lattice_model *m, uint64_t h);

/* Copy a pre- or peri-norm teacher's embedding, LM head and final norm into a
 * student of the same vocabulary, width and norm kind, and freeze the
 * student's embedding. LATTICE_ERR_INVALID_CONFIG with the reason in why
 * (n bytes) when they do not fit; nothing is copied then. */
lattice_status lattice__model_take_ends(lattice_model *student, const lattice_model *teacher,
                                        char *why, size_t n);

/* The last forward's rows (batch x seq), vocab_size, logits and their
 * gradient, and the threads of the model's backend; LATTICE_ERR_STATE (and
 * nothing set) before the first forward. */
typedef struct lattice__model_pass {
    int64_t rows;
    int vocab;
    int threads;
    float *logits, *dlogits;
} lattice__model_pass;
lattice_status lattice__model_last_pass(lattice_model *m, lattice__model_pass *out);
/* A loss over the last pass returned st: where it ran (OK, or NON_FINITE:
 * it wrote the dlogits, or began to), lattice_model_backward may run; a
 * refused one wrote nothing. Returns st. Atomic: lattice_model_get_dlogits
 * marks from outside the model's busy section. */
lattice_status lattice__model_loss_written(lattice_model *m, lattice_status st);

#endif
