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

/* The rule for a struct that begins with its size (size_t size): one whose
 * size is below ours, sizeof the struct in this library, is refused with
 * LATTICE_ERR_INVALID_ARGUMENT and a message that names both sizes: it comes
 * from a program built against a release before 1.0, whose layouts this
 * library does not read or write (it must be rebuilt), or its size was never
 * set. field names the size in the message ("params->size"), type the
 * struct (NULL: "the struct"). In 1.0 "ours" is sizeof the struct; when a
 * 1.x release appends fields, the floor stays the 1.0 struct's size (a
 * program built against 1.0 keeps working: the fields past its size take
 * their defaults), and the message's words change with it. */
lattice_status lattice__size_refused(char *errbuf, const char *fn, const char *field,
                                     const char *type, size_t theirs, size_t ours);

/* The whole rule for a caller's struct size, both bounds: below ours is
 * refused by lattice__size_refused; above LATTICE__SIZE_MAX(ours) too, as a
 * size never set (stack garbage: an array's stride from it would write past
 * the caller's array). No 1.x struct grows to twice its 1.0 size, so a
 * program built against a later 1.x header stays within the bound. */
#define LATTICE__SIZE_MAX(ours) (2 * (ours))
lattice_status lattice__check_size(char *errbuf, const char *fn, const char *field,
                                   const char *type, size_t theirs, size_t ours);

/* Whether n elements of elem bytes each can exist in memory (n * elem fits
 * in ptrdiff_t): a caller's count beyond it is refused, not multiplied. */
int lattice__count_fits(int64_t n, size_t elem);

/* Copy the library's versioned struct src (ours bytes, starting with its
 * size_t size) into the caller's dst, whose size field says how many bytes
 * the caller has: min(that, ours) are written and dst->size becomes the bytes
 * written. A size outside lattice__check_size's bounds (min_size: sizeof the
 * struct) is refused and nothing is written. */
lattice_status lattice__copy_out(char *errbuf, const char *fn, void *dst, const void *src,
                                 size_t ours, size_t min_size);
/* Non-zero when every byte of a caller's params struct after its size field,
 * up to size bytes, is zero: a struct set to {0} and given only its size,
 * which no _init leaves and (where the caller says so) no valid settings are. */
int lattice__params_blank(const void *params, size_t size);

/* lattice__copy_out's refusal alone (lattice__check_size of "out->size"), for
 * a call that must refuse a size before it does any work. */
lattice_status lattice__check_out_size(char *errbuf, const char *fn, const void *dst,
                                       size_t min_size);

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
