/* The teacher: trained or loaded from the cache in the output folder, and its go/no-go. */
#ifndef REPRODUCE_TEACHER_H
#define REPRODUCE_TEACHER_H

#include "study.h"

/* A teacher to train (the preset's recipe, on its own rows): the model, its
 * data, optimizer and schedule. */
void teacher_parts(const preset *p, lattice_backend *be, lattice_model **t, lattice_data **d,
                   lattice_optim **o, lattice_schedule **s);

/* The teacher, from the output folder's cache when its settings match and
 * the file its checksum, else trained and saved (with teacher.json); its
 * file's XXH64 as hex into hex (17 bytes). A cached file that does not
 * match its checksum ends the study (restore it, or --retrain-teacher). */
lattice_model *get_teacher(const preset *p, lattice_backend *be, const char *dir, int retrain,
                           char *hex);

/* 1 with the file's checksum in hex when DIR holds a teacher made with the
 * preset's settings whose file matches the checksum teacher.json records;
 * 0 with why when it holds none, or one made with other settings (why names
 * the keys). Dies when the file does not match its checksum, or teacher.json
 * is from 0.4 or before (--rekey) or damaged. */
int cached_teacher(const preset *p, const char *dir, char *hex, char *why, size_t why_size);

/* What a cached teacher must have been made with (a new object). */
json_object *teacher_want(const preset *p);

/* Write DIR/teacher.json whole: the settings and the file's checksum. */
void write_teacher_meta(const preset *p, const char *dir, const char *hex);

/* Whether the teacher's boundary tokens are massive, the paper's precondition: printed and kept in g. */
void teacher_gonogo(const preset *p, lattice_model *teacher, gonogo *g);

/* The go/no-go figures of model m on the first validation batch of d, silently. */
void measure_gonogo(lattice_model *m, lattice_data *d, gonogo *g);

/* The other ranks' teacher: the file rank 0 wrote, checked against its checksum. */
lattice_model *load_teacher(const preset *p, lattice_backend *be, const char *dir,
                            uint64_t want_sum);

#endif
