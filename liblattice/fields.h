/* One description of a struct's fields (fields.c).
 *
 * An object whose settings travel (into the setup digest the ranks compare,
 * into a checkpoint's JSON and back) describes its public struct once, as a
 * table of its fields: name (the JSON key and the setup name), type, offset
 * and the release that added it. The digest, the JSON write and the JSON read
 * are derived from the table, so a field added to the struct and its table
 * reaches all three, and no list of names is written twice. The tables live
 * beside their objects: lattice__phase_fields in schedule.c, lattice__optim_fields
 * in optim.c; and, for the setup digest only (a checkpoint keeps these
 * parts as their setup lists), lattice__data_fields in data.c and
 * lattice__trainer_fields in trainer_collective.c. The model's architecture
 * has a table of its own, which drives its files too (model_desc.c). Where
 * a run stands is described so too, by the objects that hold it: a
 * checkpoint's state and the setup with state are walks of these tables. */
#ifndef LATTICE_FIELDS_H
#define LATTICE_FIELDS_H

#include "json.h"
#include "setup.h"

#include <stddef.h>

typedef enum lattice__ftype {
    LATTICE__F_INT = 0,  /* int; read back clamped to int's range */
    LATTICE__F_I64 = 1,  /* int64_t */
    LATTICE__F_FLAG = 2, /* int used as a flag: 0 or 1 everywhere it travels */
    LATTICE__F_ENUM = 3, /* an enum stored as int; read back -1 outside 0..INT32_MAX */
    LATTICE__F_FLOAT = 4, /* float, travelling as a double */
    LATTICE__F_U64 = 5,   /* uint64_t (a seed): its bits, a setup's UINT; in JSON its bits as
                           * an int64 */
    LATTICE__F_F64 = 6    /* double */
} lattice__ftype;

#define LATTICE__COUNT_MAX ((int64_t)1 << 50) /* a run's counters: exact as doubles */

typedef struct lattice__field {
    const char *name;
    lattice__ftype type;
    size_t offset;
    int since;      /* the minor release (0.N) whose struct gained it */
    int64_t lo, hi; /* the range a record may hold (lo > hi: any; a real: finite too) */
} lattice__field;

typedef struct lattice__fields {
    const lattice__field *f;
    int n;
} lattice__fields;

extern const lattice__fields lattice__phase_fields; /* lattice_schedule_phase (schedule.c) */
extern const lattice__fields lattice__optim_fields; /* lattice_optim_params (optim.c) */
extern const lattice__fields lattice__data_fields;  /* lattice_data_params but its paths
                                                     * (data.c) */
extern const lattice__fields lattice__trainer_fields; /* lattice_trainer_params' settings
                                                       * (trainer_collective.c) */
/* where a run stands, each over the struct its object's access header gives: */
extern const lattice__fields lattice__schedule_at_fields;   /* but the phases (schedule.c) */
extern const lattice__fields lattice__model_run_fields;     /* but the layer flags (model.c) */
extern const lattice__fields lattice__data_position_fields; /* lattice__data_run's pos, */
extern const lattice__fields lattice__data_origin_fields;   /* and its origin (data.c) */

/* Each field of obj into the setup s, named prefix + name: integers, flags and
 * enums as INT, uint64s as UINT, reals as REAL (their double's bits). */
void lattice__fields_setup(const lattice__fields *fs, const void *obj, const char *prefix,
                           lattice__setup *s);

/* Each field of obj into the JSON object o; 0 when memory ran out. */
int lattice__fields_to_json(const lattice__fields *fs, const void *obj, json_object *o);

/* Each field from the JSON object o (named what in messages: "optim",
 * "schedule.phases[2]", "" at the top level) into obj, which holds the
 * defaults for what a record may lack. A field the record's release already
 * had (since <= record_since) must be there; later ones may be absent, but
 * the fields of one release come together or not at all. Values must lie in
 * their range. Returns 1, or 0 with the reason in why ("lacks optim.lr, or it
 * is not a number"); obj may then hold some of the record's values. */
int lattice__fields_from_json(const lattice__fields *fs, json_object *o, const char *what,
                              int record_since, void *obj, char *why, size_t n);

#endif
