/* Private per-op timing of a model's step, for bench_step and performance
 * work. Off by default; when off it costs one predictable branch per op.
 * Reached through the static library only (nothing here is exported). */
#ifndef LATTICE_PROFILE_H
#define LATTICE_PROFILE_H

#include <time.h>

/* Op categories of one training step; append-only is not needed (private). */
typedef enum lattice_op {
    LATTICE_OP_EMBED,       /* embedding gather and its gradient scatter */
    LATTICE_OP_GEMM_QKV,    /* q/k/v projection, forward and backward */
    LATTICE_OP_GEMM_O,      /* attention output projection */
    LATTICE_OP_GEMM_MLP,    /* gate/up and down projections */
    LATTICE_OP_GEMM_HEAD,   /* LM head */
    LATTICE_OP_ATTN_SCORE,  /* Q K^T and its gradients (dQ, dK) */
    LATTICE_OP_ATTN_VALUE,  /* P V and its gradients (dP, dV) */
    LATTICE_OP_SOFTMAX,     /* causal softmax and its backward */
    LATTICE_OP_ATTN_FUSED,  /* the fused attention core: scores, softmax, values, and back */
    LATTICE_OP_NORM,        /* RMS/LayerNorm forward and backward */
    LATTICE_OP_ROPE,        /* q/k norm, RoPE and the head-major relayout */
    LATTICE_OP_ELEMWISE,    /* SwiGLU, residual joins, scaling */
    LATTICE_OP_LOSS,        /* cross-entropy and dlogits */
    LATTICE_OP_OPTIM,       /* gradient norm and AdamW */
    LATTICE_OP_GRAD_SUM,    /* summing the threads' gradients after a rows-split backward */
    LATTICE_OP_COUNT
} lattice_op;

typedef struct lattice_prof {
    int on; /* 0 off, LATTICE_PROF_WALL or LATTICE_PROF_CPU */
    double secs[LATTICE_OP_COUNT];
    long calls[LATTICE_OP_COUNT];
    /* Threads the last pass split the batch's sequences over (each running
     * whole layers on its rows); 1 when each op was split instead. With a
     * rows split the op times are thread 0's. */
    int rows_threads;
    /* Of the rows-split passes while on, in the profile's clock: thread 0's
     * waits for the team's last thread to finish its rows (the threads'
     * imbalance, a slower core's), and the time the team took beyond its
     * slowest thread's pass (waking and joining it). Not in secs[]. */
    double rows_wait_secs, rows_fork_secs;
} lattice_prof;

/* Wall-clock time, or the process's CPU time (all threads summed: on a
 * shared, busy machine it measures one-thread runs without the waits). */
enum { LATTICE_PROF_WALL = 1, LATTICE_PROF_CPU = 2 };

static inline double lattice__prof_clock(int kind)
{
    struct timespec ts;
    clock_gettime(kind == LATTICE_PROF_CPU ? CLOCK_PROCESS_CPUTIME_ID : CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

/* t0 = lattice__prof_begin(p); ...; lattice__prof_end(p, op, t0); p may be NULL. */
static inline double lattice__prof_begin(const lattice_prof *p)
{
    return p && p->on ? lattice__prof_clock(p->on) : 0.0;
}

static inline void lattice__prof_end(lattice_prof *p, lattice_op op, double t0)
{
    if (p && p->on) {
        p->secs[op] += lattice__prof_clock(p->on) - t0;
        p->calls[op]++;
    }
}

/* Short name of an op ("gemm_qkv", ...). */
const char *lattice__op_name(lattice_op op);

struct lattice_model;
/* Switch a model's profiling on (LATTICE_PROF_WALL or _CPU) or off (0); either
 * way the counters restart at 0. */
void lattice__model_profile(struct lattice_model *m, int on);
/* The model's counters (seconds and calls per op since the last switch). */
const lattice_prof *lattice__model_profile_get(const struct lattice_model *m);

#endif
