/* The teacher: trained or loaded from the cache in the output folder, and its go/no-go. */
#ifndef REPRODUCE_TEACHER_H
#define REPRODUCE_TEACHER_H

#include "study.h"

/* A teacher in training: the preset's teacher recipe on its own rows. */
typedef struct teacher_trainer {
    lattice_model *model;
    lattice_data *data;
    lattice_optim *optim;
    lattice_schedule *schedule;
    lattice_trainer *trainer;
} teacher_trainer;

/* The teacher's model, data, optimizer and schedule (teacher.*), bound in a
 * trainer that evaluates train.eval_batches validation batches: at the
 * library's eval_every when evaluate is 1, only at the phase's end when 0;
 * its steps and evaluations reported to pr (on_step, on_eval) when pr is
 * not NULL. what names the trainer in the message when it is refused. */
void teacher_trainer_open(const preset *p, lattice_backend *be, int evaluate, progress *pr,
                          const char *what, teacher_trainer *tt);

/* Everything teacher_trainer_open made but the model, which is returned. */
lattice_model *teacher_trainer_close(teacher_trainer *tt);

/* The teacher, from the output folder's cache when its settings match and
 * the file its checksum, else trained and saved (with teacher.json); its
 * file's XXH64 as hex into hex (17 bytes). A cached file that does not
 * match its checksum ends the study (restore it, or --retrain-teacher). */
lattice_model *get_teacher(const preset *p, lattice_backend *be, const char *dir, int retrain,
                           const char *corpus_hex, char *hex);

/* 1 with the file's checksum in hex when DIR holds a teacher made with the
 * preset's settings, on the corpus (corpus_hex, as corpus_checksum gives it),
 * the preset's threads and the backend named, whose file matches the
 * checksum teacher.json records (a record written before issue 38 lacks the
 * corpus, threads and backend: see fill_old_record in teacher.c);
 * 0 with why when it holds none, or one made with other settings (why names
 * the keys). Dies when the file does not match its checksum, or teacher.json
 * is from 0.4 or before (--rekey) or damaged. */
int cached_teacher(const preset *p, const char *dir, const char *corpus_hex, const char *backend,
                   char *hex, char *why, size_t why_size);

/* What a cached teacher must have been made with from the preset (a new
 * object; 0.4's teacher.json held exactly this, which --rekey compares). */
json_object *teacher_want(const preset *p);

/* ... and what it was made on: teacher_want with the corpus's checksum, the
 * preset's threads and the backend's name (a new object). */
json_object *teacher_record_want(const preset *p, const char *corpus_hex, const char *backend);

/* Write DIR/teacher.json whole: teacher_want's settings and the file's
 * checksum (--rekey's record of a 0.4 teacher, whose corpus, threads and
 * backend are not known). */
void write_teacher_meta(const preset *p, const char *dir, const char *hex);

/* Write DIR/teacher.json whole: teacher_record_want's settings and the
 * file's checksum (a teacher trained now). */
void write_teacher_record(const preset *p, const char *dir, const char *hex,
                          const char *corpus_hex, const char *backend);

/* Whether the teacher's boundary tokens are massive, the paper's precondition: printed and kept in g. */
void teacher_gonogo(const preset *p, lattice_model *teacher, gonogo *g);

/* The go/no-go figures of model m on the first validation batch of d, silently. */
void measure_gonogo(lattice_model *m, lattice_data *d, gonogo *g);

/* The other ranks' teacher: the file rank 0 wrote, checked against its checksum. */
lattice_model *load_teacher(const preset *p, lattice_backend *be, const char *dir,
                            uint64_t want_sum);

#endif
