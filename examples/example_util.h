/* Small helpers the example programs share: a clock, a median, a generator for test
 * data, option parsing, durations and the benchmarks' student shapes. Include after defining PROG (the
 * program's name, used in messages). */
#ifndef LATTICE_EXAMPLE_UTIL_H
#define LATTICE_EXAMPLE_UTIL_H

#include <lattice/lattice.h>

#include <errno.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static inline int ex_cmp_double(const void *a, const void *b)
{
    const double x = *(const double *)a, y = *(const double *)b;
    return (x > y) - (x < y);
}

/* The median of v[0..n-1], n >= 1; sorts v in place. */
static inline double ex_median(double *v, int n)
{
    qsort(v, (size_t)n, sizeof *v, ex_cmp_double);
    return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

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

/* A student's shape and the batch it trains on (bench_step, bench_dist). */
typedef struct ex_shape {
    int layers, d_model, heads, kv_heads, head_dim, d_ff, vocab, batch, seq, qk_norm;
} ex_shape;

/* The benchmark student, and the study's student (doc/REPRODUCTION.md). */
static const ex_shape EX_PRESET_D256 = {9, 256, 4, 4, 64, 768, 256, 16, 256, 1};
static const ex_shape EX_PRESET_STUDY = {9, 64, 4, 2, 16, 192, 257, 16, 128, 1};

/* --preset NAME (d256 or study); prints why and returns -1 otherwise. */
static inline int ex_parse_preset(const char *s, ex_shape *out)
{
    if (strcmp(s, "d256") == 0)
        *out = EX_PRESET_D256;
    else if (strcmp(s, "study") == 0)
        *out = EX_PRESET_STUDY;
    else {
        fprintf(stderr, PROG ": --preset: '%s' is not d256 or study\n", s);
        return -1;
    }
    return 0;
}

/* Model parameters (from lattice_model_params_init) for a student of this
 * shape, all its layers active, sized for its batch. */
static inline void ex_shape_model_params(const ex_shape *sh, lattice_model_params *mp)
{
    lattice_model_params_init(mp);
    mp->vocab_size = sh->vocab;
    mp->d_model = sh->d_model;
    mp->n_layers = mp->n_active_layers = sh->layers;
    mp->n_heads = sh->heads;
    mp->n_kv_heads = sh->kv_heads;
    mp->head_dim = sh->head_dim;
    mp->d_ff = sh->d_ff;
    mp->qk_norm = sh->qk_norm;
    mp->max_batch = sh->batch;
    mp->max_seq = sh->seq;
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

/* The examples' environment, which the library never reads: LATTICE_BACKEND
 * names the backend where the program asks for "default"; LATTICE_PARALLEL
 * (auto, ops, rows) and LATTICE_ATTN_ISA (auto, portable, avx2, avx512) set
 * the backend's options. Applied to a backend made by name; 0, or -1 after
 * saying on stderr what is wrong, naming the variable. */
static inline int ex_backend_env_name(const char **name)
{
    const char *env = getenv("LATTICE_BACKEND");
    if (strcmp(*name, "default") == 0 && env && *env)
        *name = env;
    return 0;
}

static inline int ex_backend_env_options(lattice_backend *be)
{
    const char *par = getenv("LATTICE_PARALLEL");
    if (par && *par) {
        const lattice_backend_parallel mode = strcmp(par, "ops") == 0    ? LATTICE_BACKEND_PARALLEL_OPS
                                              : strcmp(par, "rows") == 0 ? LATTICE_BACKEND_PARALLEL_ROWS
                                              : strcmp(par, "auto") == 0 ? LATTICE_BACKEND_PARALLEL_AUTO
                                                                         : (lattice_backend_parallel)-1;
        if ((int)mode < 0) {
            fprintf(stderr, "LATTICE_PARALLEL=%s (in the environment) is not auto, ops or rows\n",
                    par);
            return -1;
        }
        lattice_backend_set_parallel(be, mode);
    }
    const char *isa = getenv("LATTICE_ATTN_ISA");
    if (isa && *isa && lattice_backend_set_attention_kernel(be, isa) != LATTICE_OK) {
        fprintf(stderr, "LATTICE_ATTN_ISA=%s (in the environment): %s\n", isa,
                lattice_last_error());
        return -1;
    }
    return 0;
}

/* Where the backend a program asked for by name came from, for the line that
 * names it (each example's first): " (from LATTICE_BACKEND)" where the
 * environment named it, else "". The library itself reads no variable: a
 * program that wants LATTICE_BACKEND honoured maps it, as these do. */
static inline const char *ex_backend_origin(const char *asked)
{
    const char *name = asked;
    ex_backend_env_name(&name);
    return name != asked ? " (from LATTICE_BACKEND)" : "";
}

/* lattice_backend_create with the examples' environment: the status; on an
 * error the message (lattice_last_error, or the variable's) is said. */
static inline lattice_status ex_backend_create(const char *name, lattice_backend **out)
{
    const char *asked = name;
    ex_backend_env_name(&name);
    lattice_status st = lattice_backend_create(name, out);
    if (st != LATTICE_OK) {
        if (name != asked)
            fprintf(stderr, "LATTICE_BACKEND=%s (in the environment): %s\n", name,
                    lattice_last_error());
        return st;
    }
    if (ex_backend_env_options(*out) != 0) {
        lattice_backend_destroy(*out);
        *out = NULL;
        return LATTICE_ERR_INVALID_CONFIG;
    }
    return LATTICE_OK;
}

#endif
