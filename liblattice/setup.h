/* What a run is set up with (setup.c).
 * The settings and state that every rank of a data-parallel run must share,
 * and that a checkpoint must share with the run that loads it, as named
 * values in parts (model, data, schedule, optimizer, trainer). Two lists of a
 * part have the same names up to their first difference: a count (of layers,
 * of phases) comes before the fields it multiplies. */
#ifndef LATTICE_SETUP_H
#define LATTICE_SETUP_H

#include "internal.h"

typedef enum lattice__setup_kind {
    LATTICE__SETUP_INT = 0,  /* a signed integer */
    LATTICE__SETUP_UINT = 1, /* an unsigned one (a seed), its bits */
    LATTICE__SETUP_REAL = 2, /* a double, its bits */
    LATTICE__SETUP_HASH = 3  /* a digest of something large (weights, a corpus) */
} lattice__setup_kind;

/* Fixed-size and plain, so that ranks can send them as bytes. A note (a
 * model's seed beside its weights' digest) is said in messages, never
 * compared. */
typedef struct lattice__setup_field {
    char name[40];
    int32_t kind;
    int32_t has_note;
    int64_t value;
    char note_name[16];
    int64_t note;
} lattice__setup_field;

typedef struct lattice__setup {
    lattice__setup_field *f;
    int n, cap;
    int failed; /* out of memory: the list is incomplete */
} lattice__setup;

enum {
    LATTICE__PART_MODEL,
    LATTICE__PART_DATA,
    LATTICE__PART_SCHEDULE,
    LATTICE__PART_OPTIM,
    LATTICE__PART_TRAINER,
    LATTICE__N_PARTS
};

/* The part's name in messages ("model", "data", ...). */
const char *lattice__setup_part_name(int part);

/* A REAL field's value: the double's bits. */
int64_t lattice__setup_real_bits(double v);

/* Append one field (name printf-style); a failed allocation marks s->failed. */
void lattice__setup_add(lattice__setup *s, lattice__setup_kind kind, int64_t value,
                        const char *fmt, ...) __attribute__((format(printf, 4, 5)));

/* One field of each kind, value then name (printf-style). */
#define SETUP_INT(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_INT, (int64_t)(v), __VA_ARGS__)
#define SETUP_UINT(s, v, ...) \
    lattice__setup_add((s), LATTICE__SETUP_UINT, (int64_t)(uint64_t)(v), __VA_ARGS__)
#define SETUP_REAL(s, v, ...) \
    lattice__setup_add((s), LATTICE__SETUP_REAL, lattice__setup_real_bits(v), __VA_ARGS__)
#define SETUP_HASH(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_HASH, (int64_t)(v), __VA_ARGS__)

/* Each object's part, listed behind its own .c; with state, also where it
 * stands. */
void lattice__model_setup(const lattice_model *m, int with_state, lattice__setup *s); /* model.c */
void lattice__data_setup(lattice_data *d, lattice__setup *s); /* data.c; its state: the trainer's */
void lattice__schedule_setup(const lattice_schedule *sc, int with_state,
                             lattice__setup *s); /* schedule.c */
void lattice__optim_setup(const lattice_optim *o, const lattice_model *m, int with_state,
                          lattice__setup *s); /* optim.c */

/* A list's digest: its names, kinds and values (never notes). */
uint64_t lattice__setup_digest(const lattice__setup *s);

/* One part of a trainer's setup (trainer_collective.c); with state, also
 * where the run stands (data and schedule positions, weights, moments,
 * trainable flags). Returns 0 when memory ran out. */
int lattice__setup_of(lattice_trainer *t, int part, int with_state, lattice__setup *out);

/* The schedule part of a list of phases (without a position; schedule.c). */
void lattice__setup_phases(const lattice_schedule_phase *phases, int n, lattice__setup *out);

void lattice__setup_free(lattice__setup *s);

/* The index of the first compared field where a and b differ, -1 if none. */
int lattice__setup_first_difference(const lattice__setup *a, const lattice__setup *b);

/* A field's value as text ("4", "0.001", "0x9f0c... (seed 42)"). */
void lattice__setup_value(const lattice__setup_field *f, char *buf, size_t n);

/* "the checkpoint's data seed 3 differs from this run's 4": part's field
 * where have and want first differ (i from lattice__setup_first_difference),
 * as "<a>'s <part> <name> <have> differs from <b>'s <want>" into buf. */
void lattice__setup_describe(char *buf, size_t n, const char *a, const char *b, int part,
                             const lattice__setup *have, const lattice__setup *want, int i);

/* At attach: every rank's setup against rank 0's (trainer_collective.c), over the
 * collective c of n ranks that the trainer is not yet attached to. local is
 * this rank's own verdict on the attachment (its message in t->err). Every
 * rank gets the same answer: LATTICE_OK, or the refusal (a setup that differs
 * names the first field and the ranks). */
lattice_status lattice__trainer_agree_setup(lattice_trainer *t, const lattice_trainer_collective *c,
                                            void *user, int rank, int n, lattice_status local);

/* The first of a collective's required slots (rank up to broadcast) that is
 * NULL, by name, or NULL when every one is set. c is a whole 1.0 table. */
const char *lattice__collective_missing_slot(const lattice_trainer_collective *c);

#endif
