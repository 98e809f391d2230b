/* What another object may ask of the teacher, as functions over its opaque
 * handle (teacher.c): what the trainer and its setup ask of it that
 * is not API. */
#ifndef LATTICE_TEACHER_ACCESS_H
#define LATTICE_TEACHER_ACCESS_H

#include "internal.h"

/* Whether the teacher answers from a recorded file (teacher.c): it looks
 * batches up by their tokens, whole. */
int lattice__teacher_is_file(const lattice_teacher *t);

/* What a teacher is (0 none, 1 a model, 2 a callback, 3 a recorded file) and
 * a digest of what it answers from: the model's weights, the file's batches
 * (teacher.c). */
uint64_t lattice__teacher_identity(const lattice_teacher *t, int *kind);

/* The trainer borrows it (handle.h): add a borrower (refused once its destroy
 * was asked), drop one (freeing it when its destroy waits for that). */
lattice_status lattice__teacher_borrow(lattice_teacher *t, const char *fn);
void lattice__teacher_unborrow(lattice_teacher *t);

/* Hold the teacher and its model (if it has one) for call fn, as a trainer's
 * step does while it reads the teacher's answer; every LATTICE_OK is paired
 * with one lattice__teacher_leave. */
lattice_status lattice__teacher_enter(lattice_teacher *t, const char *fn);
void lattice__teacher_leave(lattice_teacher *t);

#endif
