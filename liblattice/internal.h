/* Private helpers shared by the library's objects. Not installed. */
#ifndef LATTICE_INTERNAL_H
#define LATTICE_INTERNAL_H

#include <lattice/lattice.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>

#define LATTICE_ERRMSG_MAX LATTICE_ERRMSG_SIZE

/* printf-style message into a handle's error buffer (when buf is non-NULL)
 * and into the calling thread's lattice_last_error(); returns status so that
 * callers can write `return set_error(buf, st, "...")`. */
lattice_status lattice__set_error(char *buf, lattice_status status, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

/* The same for a failure with no handle to hold the message: only
 * lattice_last_error() receives it. */
lattice_status lattice__fail(lattice_status status, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* ---- structs a caller passes with their size: include/lattice/common.h's
 * rule. A size is measured against the 1.0 struct's size, the floor: below
 * it, the struct of a program built against a release before 1.0, or a size
 * never set; above LATTICE__SIZE_MAX of it (no 1.x struct grows to twice its
 * 1.0 size), a size never set (stack garbage: an array's stride from it
 * would write past the caller's array). */
#define LATTICE__SIZE_MAX(floor) (2 * (floor))

/* The size of 1.0's struct type, whose last 1.0 field is last: that field's
 * end rounded up to the struct's alignment, sizeof the struct as 1.0 laid it
 * out whatever later releases append (common.c checks them on LP64). */
#define LATTICE__SIZE_1_0(type, last)                                                             \
    ((offsetof(type, last) + sizeof(((type *)0)->last) + _Alignof(type) - 1) / _Alignof(type) *  \
     _Alignof(type))
#define LATTICE__MODEL_PARAMS_1_0                                                                 \
    LATTICE__SIZE_1_0(lattice_model_params, LATTICE_EXPERIMENTAL_FIELD(massive_channel))
#define LATTICE__DATA_PARAMS_1_0 LATTICE__SIZE_1_0(lattice_data_params, split_long)
#define LATTICE__OPTIM_PARAMS_1_0 LATTICE__SIZE_1_0(lattice_optim_params, decay_fraction)
#define LATTICE__DISTILL_PARAMS_1_0 LATTICE__SIZE_1_0(lattice_distill_params, n_threads)
#define LATTICE__SCHEDULE_PHASE_1_0 LATTICE__SIZE_1_0(lattice_schedule_phase, train_boundary)
#define LATTICE__TRAINER_PARAMS_1_0 LATTICE__SIZE_1_0(lattice_trainer_params, collective_user)
#define LATTICE__TRAINER_COLLECTIVE_1_0 LATTICE__SIZE_1_0(lattice_trainer_collective, errmsg)
#define LATTICE__TRAINER_METRICS_1_0 LATTICE__SIZE_1_0(lattice_trainer_metrics, seconds)

/* Whether theirs lies outside [floor, LATTICE__SIZE_MAX(floor)]: 0 inside;
 * outside, 1 with the refusal in msg (n bytes), type naming the struct
 * (NULL: "the struct"). Header-only, so that liblattice-mpi (dist.c), which
 * links only the API, applies the same rule. */
static inline int lattice__size_outside(char *msg, size_t n, const char *fn, const char *field,
                                        const char *type, size_t theirs, size_t floor)
{
    type = type ? type : "the struct";
    if (theirs < floor)
        snprintf(msg, n,
                 "%s: invalid argument: %s %zu is below %zu, the size of %s in 1.0: the struct "
                 "of a program built against a release before 1.0 (rebuild it), or a size never "
                 "set", fn, field, theirs, floor, type);
    else if (theirs > LATTICE__SIZE_MAX(floor))
        snprintf(msg, n,
                 "%s: invalid argument: %s %zu is above %zu, twice the size of %s in 1.0 (no 1.x "
                 "struct grows to twice its 1.0 size): a size never set",
                 fn, field, theirs, LATTICE__SIZE_MAX(floor), type);
    else
        return 0;
    return 1;
}

/* lattice__size_outside's refusal as LATTICE_ERR_INVALID_ARGUMENT, its
 * message in errbuf (may be NULL) and lattice_last_error(). */
lattice_status lattice__check_size(char *errbuf, const char *fn, const char *field,
                                   const char *type, size_t theirs, size_t floor);

/* A struct the library reads (params, a phase): its type's name, the
 * argument's ("params"), sizeof it here, its 1.0 size, and whether one all 0
 * past its size is valid (its _init sets no field). For lattice__copy_in. */
typedef struct lattice__sized {
    const char *type, *arg;
    size_t ours, floor;
    int blank_valid;
} lattice__sized;
#define LATTICE__SIZED(type, arg, floor, blank_valid)                                             \
    (&(const lattice__sized){#type, arg, sizeof(type), floor, blank_valid})

/* Take the caller's struct src into dst (ours bytes, holding the defaults:
 * fields past the caller's size keep them), the one rule for a struct the
 * library reads. Refused with LATTICE_ERR_INVALID_ARGUMENT and a message in
 * errbuf and lattice_last_error(), dst untouched: src NULL; a size of 0 or
 * outside lattice__check_size's bounds; every byte past the size zero (a
 * struct set to {0} and given only its size: not initialised) unless
 * blank_valid; a byte past ours that is not zero (a field of a later release
 * set: a setting this library cannot honour). Otherwise min(size, ours)
 * bytes are copied and dst's size becomes ours. */
lattice_status lattice__copy_in(char *errbuf, const char *fn, const lattice__sized *s, void *dst,
                                const void *src);

/* Whether n elements of elem bytes each can exist in memory (n * elem fits
 * in ptrdiff_t): a caller's count beyond it is refused, not multiplied. */
int lattice__count_fits(int64_t n, size_t elem);

/* Copy the library's struct src (ours bytes, starting with its size) into
 * the caller's dst, whose size says how many bytes the caller has: min(that,
 * ours) are written and dst's size becomes the bytes written. A size outside
 * lattice__check_size's bounds (floor: the 1.0 struct's size) is refused and
 * nothing is written. */
lattice_status lattice__copy_out(char *errbuf, const char *fn, void *dst, const void *src,
                                 size_t ours, size_t floor);

/* lattice__copy_out's refusal alone (lattice__check_size of "out->size"), for
 * a call that must refuse a size before it does any work. */
lattice_status lattice__check_out_size(char *errbuf, const char *fn, const void *dst,
                                       size_t floor);

/* Argument checks that say which argument is wrong, in words. The first of
 * the n (pointer, name) pairs that is NULL is refused with "fn: invalid
 * argument: name is NULL" in buf (may be NULL) and lattice_last_error();
 * LATTICE_OK when none is. Pointers are passed as const void *. */
lattice_status lattice__need(char *buf, const char *fn, int n, ...);

/* Fail a call on handle h: its message (printf-style) into h->err and
 * lattice_last_error(); evaluates to st, for `return FAIL(h, st, "...")`. */
#define FAIL(h, st, ...) lattice__set_error((h)->err, (st), __VA_ARGS__)

/* Return a failing status from the calling function. */
#define TRY(expr)                                                                                  \
    do {                                                                                           \
        lattice_status st_ = (expr);                                                               \
        if (st_ != LATTICE_OK)                                                                     \
            return st_;                                                                            \
    } while (0)

/* A handle's message buffer, or NULL for a NULL handle (const handles too:
 * their message is not part of their logical state). */
#define LATTICE__ERRBUF(h) ((h) ? (char *)(h)->err : NULL)

/* FNV-1a over n bytes, continuing from h (start from LATTICE__HASH_START):
 * the digests that tell whether two runs hold the same weights, corpus or
 * settings (checkpoints, ranks). Not a defence against a forger. */
#define LATTICE__HASH_START 0xcbf29ce484222325ULL
uint64_t lattice__hash(uint64_t h, const void *p, size_t n);

/* An arena is one allocation carved into aligned pieces. Carving runs twice:
 * once with base == NULL to measure, once for real. */
typedef struct lattice_arena {
    char *base;
    size_t used;   /* bytes, alignment padding included */
    size_t floats; /* floats handed out, padding excluded */
} lattice_arena;

float *lattice__arena_floats(lattice_arena *arena, size_t count);
void *lattice__arena_bytes(lattice_arena *arena, size_t bytes);

/* Deterministic generator (splitmix64 seeding xoshiro256**), used for weights. */
typedef struct lattice_rng {
    uint64_t s[4];
} lattice_rng;

void lattice__rng_seed(lattice_rng *rng, uint64_t seed);
uint64_t lattice__rng_next(lattice_rng *rng);
double lattice__rng_uniform(lattice_rng *rng); /* in [0, 1) */
double lattice__rng_normal(lattice_rng *rng);

#endif
