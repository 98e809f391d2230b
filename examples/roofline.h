/* The best sgemm rate a core reaches at a given list of GEMM shapes, over the
 * GEMM libraries this build can run (blis, openblas, onednn), measured in
 * one run with the libraries interleaved (bench_step's roofline line,
 * bench_gemm). Every call goes through lattice_backend_sgemm, so the rate is
 * the one the library's own GEMMs get, threads split as the library splits them. */
#ifndef LATTICE_EXAMPLE_ROOFLINE_H
#define LATTICE_EXAMPLE_ROOFLINE_H

#include <lattice/lattice.h>

#include <stddef.h>

/* One GEMM of a list, row-major as lattice_backend_sgemm takes it, repeated count times. */
typedef struct rl_gemm {
    int ta, tb, m, n, k, lda, ldb, ldc;
    float alpha, beta;
    int count;
} rl_gemm;

typedef struct rl_list {
    rl_gemm *g;
    size_t n, cap;
} rl_list;

/* Appends a call; one equal to the last (same shape, strides and scalars) counts it again.
 * Returns -1 when out of memory. */
int rl_add(rl_list *l, int ta, int tb, int m, int n, int k, int lda, int ldb, int ldc,
           float alpha, float beta);
void rl_free(rl_list *l);
/* 2 m n k summed over the list, counts included. */
double rl_flop(const rl_list *l);

enum { RL_MAX_LIBS = 3 };

/* A library's result: rounds of the whole list, interleaved with the other libraries'. */
typedef struct rl_lib {
    char name[16];          /* backend name: blis, openblas, onednn */
    char kernels[160];      /* library and kernels, as lattice_backend_get_info reports them */
    int available;          /* 0: not timed: not in this build, not loadable, or skipped (why: in kernels) */
    double gflops_median;   /* the median over rounds of the round's FLOP over its time */
    double gflops_best;     /* the best round */
} rl_lib;

typedef struct rl_result {
    rl_lib lib[RL_MAX_LIBS];
    int n_libs;
    int best;               /* index of the highest median, -1 when no library ran */
} rl_result;

/* Runs the list once untimed, then `rounds` timed rounds, each library in
 * turn within a round (blis, openblas, onednn), on `threads` threads, timed
 * in wall time or (cpu_clock) in the process's CPU time, which on a busy
 * machine leaves out a one-thread run's waits for a core. With
 * only_optimised, libraries whose kernels are not optimised for this CPU
 * (BLIS's generic ones, say) are skipped when another one is. Operands are
 * the measurement's own buffers, sized for the largest call. Returns
 * LATTICE_OK, or the first failing status (a message on stderr). */
lattice_status rl_measure(const rl_list *l, int threads, int rounds, int cpu_clock,
                          int only_optimised, rl_result *out);

/* The same with the work split as a rows-split step splits it: parts threads
 * at once, thread w running lists[w] (its block of the batch's rows) whole on
 * its own one-thread backend and operands (threads must be 1 when parts > 1);
 * a round's rate is the FLOP of every list over the time from the start to
 * the last thread's end, in wall time whatever cpu_clock says when parts > 1.
 * rl_measure is this with one part. */
lattice_status rl_measure_rows(const rl_list *lists, int parts, int threads, int rounds,
                               int cpu_clock, int only_optimised, rl_result *out);

/* The core's peak rate of fused multiply-adds on one thread, in GFLOP/s (2 per
 * lane per FMA), for the widest vectors this CPU runs (*isa: avx512, avx2,
 * else portable, plain C): the best of 1 + reps timed loops of at least 50
 * ms, of independent FMAs and nothing else. What a kernel made of FMAs
 * could reach at most; a GEMM library's rate over it is its efficiency. */
double rl_fma_peak(int reps, int cpu_clock, const char **isa);

/* The same loop on `threads` threads at once, in wall time: their FLOP over
 * the best of 1 + reps rounds' time to the last one's end. Near threads x
 * rl_fma_peak where every thread has a core of its own; near 1 x where two
 * threads share one core's FMA units (SMT siblings). 0 when a thread could
 * not start. */
double rl_fma_peak_threads(int threads, int reps, const char **isa);

#endif
