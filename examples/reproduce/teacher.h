/* The teacher: trained or loaded from the cache in the output folder, and its go/no-go. */
#ifndef REPRODUCE_TEACHER_H
#define REPRODUCE_TEACHER_H

#include "study.h"

/* A teacher to train (the preset's recipe, on its own rows): the model, its
 * data, optimizer and schedule. */
void teacher_parts(const preset *p, lattice_backend *be, lattice_model **t, lattice_data **d,
                   lattice_optim **o, lattice_schedule **s);

/* The teacher, from the output folder's cache when its settings match, else trained and saved. */
lattice_model *get_teacher(const preset *p, lattice_backend *be, const char *dir, int retrain);

/* Whether the teacher's boundary tokens are massive, the paper's precondition: printed and kept in g. */
void teacher_gonogo(const preset *p, lattice_model *teacher, gonogo *g);

/* The go/no-go figures of model m on the first validation batch of d, silently. */
void measure_gonogo(lattice_model *m, lattice_data *d, gonogo *g);

/* The other ranks' teacher: the file rank 0 wrote, checked against its checksum. */
lattice_model *load_teacher(const preset *p, lattice_backend *be, const char *dir,
                            uint64_t want_sum);

#endif
