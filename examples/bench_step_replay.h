/*
 * bench_step's second half (bench_step_replay.c): the step's GEMMs replayed
 * through lattice_backend_sgemm (the sgemm_* lines), the roofline measured at
 * the step's own projection and head GEMMs (the roofline_* lines) and the
 * core's FMA peak with the floor it puts under the fused attention (fma_* and
 * attn_* lines). bench_step.c builds the model, times the steps and calls
 * these.
 */
#ifndef LATTICE_BENCH_STEP_REPLAY_H
#define LATTICE_BENCH_STEP_REPLAY_H

#include <lattice/lattice.h>

#include <stddef.h>

#include "roofline.h"

/* The most rounds --rounds takes (A B A B: steps, then the roofline). */
#define MAX_ROUNDS 20

struct ex_shape;

enum { CAT_PROJ = 1, CAT_ATTN = 2, CAT_ALL = CAT_PROJ | CAT_ATTN };

/* Buffers standing in for the model's weights, activations and gradients. One
 * per role, shared by the layers: the shapes and strides are the step's own. */
typedef struct replay {
    lattice_backend *be;
    int B, T, D, H, KV, hd, F, V, L;
    int beta_res; /* 1: o_proj and down_proj accumulate into the residual (pre, post) */
    int cats;     /* categories to run */
    rl_list *record; /* when set, the calls are listed here instead of run */
    double secs[3], flops[3];
    float *x, *dy, *d_in, *wqkv, *wo, *wgu, *wd, *whead, *gwqkv, *gwo, *gwgu, *gwd, *gwhead;
    float *raw, *d_raw, *q, *k, *v, *dq, *dk, *dv, *p, *dp, *att, *d_att, *out, *gu, *d_gu, *s,
        *d_s, *logits, *dlogits;
} replay;

/* r's shape from sh and placement on backend be, its buffers allocated: 0, or
 * -1 when memory ran out (replay_free frees what was allocated). */
int replay_setup(replay *r, lattice_backend *be, const struct ex_shape *sh,
                 lattice_norm_placement placement);
void replay_free(replay *r);
lattice_status replay_time(replay *r, int cats, int rounds);
lattice_status roofline_measure(replay *r, int threads, int parts, int cpu_clock,
                                rl_result *res, char *about, size_t about_size);
void roofline_lines(const rl_result *res, int n, const double *step_gflops, const char *about);
void fma_lines(const struct ex_shape *sh, int threads, int cpu_clock, double step_ms,
               double attn_ms);

#endif
