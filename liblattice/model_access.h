/* What another object may ask of a model, as functions over the opaque
 * handle (model.c): its borrow and busy words, its params, a digest of its
 * weights, the last forward's logits, and a student's ends taken from a
 * teacher. The model's body (model_impl.h) stays the model's own files' and
 * the users not yet moved here. */
#ifndef LATTICE_MODEL_ACCESS_H
#define LATTICE_MODEL_ACCESS_H

#include "handle.h"

/* The model's busy word (handle.h), for LATTICE__INSIDE_BUSY; NULL for NULL. */
lattice_busy *lattice__model_busy(lattice_model *m);

/* Borrow the model for another object's lifetime (handle.h's lattice__borrow,
 * fn naming the caller), and give it back: the last giver frees a model whose
 * destroy was asked. */
lattice_status lattice__model_borrow(lattice_model *m, const char *fn);
void lattice__model_unborrow(lattice_model *m);

/* The model's params (its own copy: read only). */
const lattice_model_params *lattice__model_params(const lattice_model *m);

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

#endif
