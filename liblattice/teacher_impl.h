/* The teacher's private side: what the trainer and its setup ask of it that
 * is not API. */
#ifndef LATTICE_TEACHER_IMPL_H
#define LATTICE_TEACHER_IMPL_H

#include "internal.h"

/* Whether the teacher answers from a recorded file (teacher.c): it looks
 * batches up by their tokens, whole. */
int lattice__teacher_is_file(const lattice_teacher *t);

/* What a teacher is (0 none, 1 a model, 2 a callback, 3 a recorded file) and
 * a digest of what it answers from: the model's weights, the file's batches
 * (teacher.c). */
uint64_t lattice__teacher_identity(const lattice_teacher *t, int *kind);

#endif
