/* What another object may ask of a model, as functions over the opaque
 * handle (model.c): its busy word, and the last forward's logits. The model's
 * body (model_impl.h) stays the model's and its old users'. */
#ifndef LATTICE_MODEL_ACCESS_H
#define LATTICE_MODEL_ACCESS_H

#include "handle.h"

/* The model's busy word (handle.h), for LATTICE__INSIDE_BUSY; NULL for NULL. */
lattice_busy *lattice__model_busy(lattice_model *m);

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
