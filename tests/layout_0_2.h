/* The params structs 0.3 changed, as 0.1 and 0.2 laid them out: what a
 * program built against the old headers passes. Written out here, apart from
 * the library's own private copy, so the tests check against an independent
 * statement of the old ABI. */
#ifndef LATTICE_LAYOUT_0_2_H
#define LATTICE_LAYOUT_0_2_H

#include <lattice/lattice.h>
#include <stddef.h>
#include <stdint.h>

/* lattice_optim_params: int step counts (int64_t since 0.3) */
struct optim_params_0_2 {
    size_t size;
    float lr, min_lr;
    int warmup_steps, total_steps;
    float beta1, beta2, eps, weight_decay, clip_norm;
};

/* lattice_optim_params as 0.3 laid it out: 0.4 appended lr_shape and
 * decay_fraction where 0.3 had 4 bytes of padding */
struct optim_params_0_3 {
    size_t size;
    float lr, min_lr;
    int64_t warmup_steps, total_steps;
    float beta1, beta2, eps, weight_decay, clip_norm;
};

/* lattice_schedule_phase: 0.2 appended rewind_data and train_boundary */
enum { PHASE_SIZE_0_1 = offsetof(lattice_schedule_phase, rewind_data) };

/* lattice_trainer_params: before 0.3's collective fields */
struct trainer_params_0_2 {
    size_t size;
    int64_t eval_every, eval_batches;
    uint64_t seed;
    lattice_trainer_metrics_fn on_step, on_eval;
    void *user;
};

#endif
