/* Small helpers the example programs share: a clock, a generator for test
 * data, option parsing and durations. Include after defining PROG (the
 * program's name, used in messages). */
#ifndef LATTICE_EXAMPLE_UTIL_H
#define LATTICE_EXAMPLE_UTIL_H

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>

/* Monotonic wall-clock seconds. */
static inline double ex_now(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* splitmix64: the next value of a deterministic stream. */
static inline uint64_t ex_rng_next(uint64_t *state)
{
    uint64_t z = (*state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
}

/* An integer option in lo..hi; prints why and returns -1 otherwise. */
static inline int ex_parse_int(const char *name, const char *s, long lo, long hi, int *out)
{
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || end == s || *end || v < lo || v > hi) {
        fprintf(stderr, PROG ": --%s: '%s' is not an integer in %ld..%ld\n", name, s, lo, hi);
        return -1;
    }
    *out = (int)v;
    return 0;
}

/* A duration as h:mm:ss or m:ss ("?" when unknown). */
static inline void ex_format_duration(char *buf, size_t size, double s)
{
    if (!(s >= 0) || s >= 1e9) {
        snprintf(buf, size, "?");
        return;
    }
    long t = (long)(s + 0.5);
    if (t >= 3600)
        snprintf(buf, size, "%ld:%02ld:%02ld", t / 3600, t / 60 % 60, t % 60);
    else
        snprintf(buf, size, "%ld:%02ld", t / 60, t % 60);
}

/* libgomp reads OMP_WAIT_POLICY once, when it is loaded, and by default its
 * idle threads spin: on a shared or oversubscribed machine (two 2-thread runs
 * on 2 cores) they burn the cores the other runs need, and a step can be 5x
 * slower. So when the user has set neither OMP_WAIT_POLICY nor
 * GOMP_SPINCOUNT, run again with OMP_WAIT_POLICY=PASSIVE; if that exec
 * fails, go on as we are. Call first thing in main. */
static inline void ex_prefer_passive_openmp(char **argv)
{
    if (getenv("OMP_WAIT_POLICY") || getenv("GOMP_SPINCOUNT"))
        return;
    if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0)
        return;
    execv("/proc/self/exe", argv);
    unsetenv("OMP_WAIT_POLICY");
}

#endif
