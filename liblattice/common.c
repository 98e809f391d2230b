/* What every object shares (internal.h): statuses and messages, versions,
 * struct copies across sizes, digests, arenas and the weights' generator. */
#include "internal.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

const char *lattice_status_string(lattice_status status)
{
    switch (status) {
    case LATTICE_OK: return "ok";
    case LATTICE_ERR_INVALID_ARGUMENT: return "invalid argument";
    case LATTICE_ERR_INVALID_CONFIG: return "invalid configuration";
    case LATTICE_ERR_OUT_OF_MEMORY: return "out of memory";
    case LATTICE_ERR_UNSUPPORTED: return "unsupported";
    case LATTICE_ERR_NOT_FOUND: return "not found";
    case LATTICE_ERR_BACKEND: return "backend failure";
    case LATTICE_ERR_NON_FINITE: return "non-finite value";
    case LATTICE_ERR_IO: return "i/o error";
    case LATTICE_ERR_FORMAT: return "malformed data";
    case LATTICE_ERR_STATE: return "invalid state";
    }
    return "unknown status";
}

unsigned lattice_version_number(void) { return LATTICE_VERSION_NUMBER; }
const char *lattice_version_string(void) { return LATTICE_VERSION_STRING; }

/* The reason for the calling thread's latest failure. */
static _Thread_local char last_error[LATTICE_ERRMSG_MAX];

const char *lattice_last_error(void) { return last_error; }

void lattice_set_last_error(const char *message)
{
    char msg[LATTICE_ERRMSG_MAX];
    /* message may be last_error itself */
    snprintf(msg, sizeof(msg), "%s", message ? message : "");
    memcpy(last_error, msg, strlen(msg) + 1);
}

/* Formatted once into a local buffer: an argument may be last_error itself or
 * the handle's own message, and vsnprintf must not read what it writes. */
static lattice_status record(char *buf, lattice_status status, const char *fmt, va_list ap)
{
    char msg[LATTICE_ERRMSG_MAX];
    vsnprintf(msg, sizeof(msg), fmt, ap);
    const size_t len = strlen(msg) + 1;
    memcpy(last_error, msg, len);
    if (buf)
        memcpy(buf, msg, len);
    return status;
}

lattice_status lattice__set_error(char *buf, lattice_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(buf, status, fmt, ap);
    va_end(ap);
    return status;
}

lattice_status lattice__fail(lattice_status status, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    record(NULL, status, fmt, ap);
    va_end(ap);
    return status;
}

lattice_status lattice__need(char *buf, const char *fn, int n, ...)
{
    va_list ap;
    va_start(ap, n);
    const char *missing = NULL;
    for (int i = 0; i < n && !missing; i++) {
        const void *p = va_arg(ap, const void *);
        const char *name = va_arg(ap, const char *);
        if (!p)
            missing = name;
    }
    va_end(ap);
    if (!missing)
        return LATTICE_OK;
    return lattice__set_error(buf, LATTICE_ERR_INVALID_ARGUMENT, "%s: invalid argument: %s is NULL",
                              fn, missing);
}

lattice_status lattice__check_size(char *errbuf, const char *fn, const char *field,
                                   const char *type, size_t theirs, size_t floor)
{
    char msg[LATTICE_ERRMSG_MAX];
    if (!lattice__size_outside(msg, sizeof msg, fn, field, type, theirs, floor))
        return LATTICE_OK;
    return lattice__set_error(errbuf, LATTICE_ERR_INVALID_ARGUMENT, "%s", msg);
}

/* The floors are the sizes of 1.0's structs, as its ABI (tests/abi) has them. */
#if UINTPTR_MAX == UINT64_MAX
_Static_assert(LATTICE__MODEL_PARAMS_1_0 == 96 && LATTICE__DATA_PARAMS_1_0 == 80 &&
                   LATTICE__OPTIM_PARAMS_1_0 == 64 && LATTICE__DISTILL_PARAMS_1_0 == 32 &&
                   LATTICE__SCHEDULE_PHASE_1_0 == 48 && LATTICE__TRAINER_PARAMS_1_0 == 72 &&
                   LATTICE__TRAINER_COLLECTIVE_1_0 == 72 && LATTICE__TRAINER_METRICS_1_0 == 128,
               "a 1.0 floor differs from 1.0's struct size (tests/abi/liblattice-1.0.abi)");
#endif

static size_t size_of(const void *s)
{
    size_t n;
    memcpy(&n, s, sizeof n);
    return n;
}

lattice_status lattice__copy_in(char *errbuf, const char *fn, const lattice__sized *s, void *dst,
                                const void *src)
{
    if (!src)
        return lattice__set_error(errbuf, LATTICE_ERR_INVALID_ARGUMENT,
                                  "%s: invalid argument: %s is NULL", fn, s->arg);
    const size_t theirs = size_of(src);
    if (theirs == 0)
        return lattice__set_error(errbuf, LATTICE_ERR_INVALID_ARGUMENT,
                                  "%s: invalid argument: %s->size is 0: call %s_init first", fn,
                                  s->arg, s->type);
    char field[32];
    snprintf(field, sizeof field, "%s->size", s->arg);
    TRY(lattice__check_size(errbuf, fn, field, s->type, theirs, s->floor));
    const unsigned char *b = src;
    const size_t n = theirs < s->ours ? theirs : s->ours;
    size_t i = sizeof(size_t);
    while (i < n && !b[i])
        i++;
    if (i == n && !s->blank_valid)
        return lattice__set_error(errbuf, LATTICE_ERR_INVALID_ARGUMENT,
                                  "%s: invalid argument: every field of %s past its size is 0: "
                                  "not initialised: call %s_init", fn, s->arg, s->type);
    for (i = n; i < theirs; i++)
        if (b[i])
            return lattice__set_error(
                errbuf, LATTICE_ERR_INVALID_ARGUMENT,
                "%s: invalid argument: %s->size %zu is above %zu, this library's sizeof(%s), and "
                "its byte %zu is not 0: a field of a later release is set, which this library "
                "cannot honour (run the program with a library as new as its header, or leave "
                "the field at 0)", fn, s->arg, theirs, s->ours, s->type, i);
    memcpy(dst, src, n);
    memcpy(dst, &s->ours, sizeof(size_t));
    return LATTICE_OK;
}

lattice_status lattice__check_out_size(char *errbuf, const char *fn, const void *dst, size_t floor)
{
    return lattice__check_size(errbuf, fn, "out->size", NULL, size_of(dst), floor);
}

int lattice__count_fits(int64_t n, size_t elem)
{
    return n >= 0 && (uint64_t)n <= (uint64_t)PTRDIFF_MAX / elem;
}

lattice_status lattice__copy_out(char *errbuf, const char *fn, void *dst, const void *src,
                                 size_t ours, size_t floor)
{
    TRY(lattice__check_out_size(errbuf, fn, dst, floor));
    const size_t theirs = size_of(dst);
    const size_t n = theirs < ours ? theirs : ours;
    memcpy(dst, src, n);
    memcpy(dst, &n, sizeof(n));
    return LATTICE_OK;
}

uint64_t lattice__hash(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

#define ARENA_ALIGN 64

void *lattice__arena_bytes(lattice_arena *arena, size_t bytes)
{
    size_t offset = (arena->used + ARENA_ALIGN - 1) / ARENA_ALIGN * ARENA_ALIGN;
    arena->used = offset + bytes;
    return arena->base ? arena->base + offset : NULL;
}

float *lattice__arena_floats(lattice_arena *arena, size_t count)
{
    arena->floats += count;
    return lattice__arena_bytes(arena, count * sizeof(float));
}

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

void lattice__rng_seed(lattice_rng *rng, uint64_t seed)
{
    for (int i = 0; i < 4; i++)
        rng->s[i] = splitmix64(&seed);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

uint64_t lattice__rng_next(lattice_rng *rng)
{
    uint64_t *s = rng->s;
    uint64_t result = rotl(s[1] * 5, 7) * 9;
    uint64_t t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return result;
}

double lattice__rng_uniform(lattice_rng *rng)
{
    return (double)(lattice__rng_next(rng) >> 11) * 0x1.0p-53;
}

double lattice__rng_normal(lattice_rng *rng)
{
    /* Box-Muller; one value per call keeps the stream position simple. */
    double u1 = lattice__rng_uniform(rng);
    double u2 = lattice__rng_uniform(rng);
    if (u1 < 1e-300)
        u1 = 1e-300;
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}
