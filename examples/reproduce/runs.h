/* One arm x seed run: data, models, optimizer, the trainer's callbacks, the diagnostics. */
#ifndef REPRODUCE_RUNS_H
#define REPRODUCE_RUNS_H

#include "study.h"

/* Per-token RMS statistics after every active layer on a fixed batch. */
lattice_status boundary_stats(lattice_diag *dg, lattice_model *m, const int32_t *tokens,
                              const uint8_t *mask, int batch, int seq, kept_scale *out,
                              int out_len);

/* Attention sinks and massive activations at every active layer (threshold SINK_THRESHOLD). */
lattice_status attention_sinks(lattice_diag *dg, const int32_t *tokens, int batch, int seq,
                               lattice_diag_attention_sinks_result *out, int out_len);

/* The trainer's callbacks: per-step losses and progress, and the evaluations
 * with their boundary statistics, into the progress's run_result. */
int on_step(void *user, const lattice_trainer_metrics *m);

int on_eval(void *user, const lattice_trainer_metrics *m);

/* The preset's corpus, its order seeded. */
lattice_data *open_data(const preset *p, uint64_t seed);
/* ... with other rows (the teacher's). */
lattice_data *open_data_rows(const preset *p, uint64_t seed, int batch, int seq_len);

/* The student's (or the teacher's, by layers) model parameters. */
lattice_model_params model_shape(const preset *p, int layers, double init_std, uint64_t seed);
/* ... for at most batch x seq_len rows (no intervention: new_model_rows adds the arm's). */
lattice_model_params model_shape_rows(const preset *p, int layers, double init_std, uint64_t seed,
                                      int batch, int seq_len);

/* A norm of this placement (RMSNorm, eps 1e-6) and residual scale. */
lattice_norm *new_norm(lattice_norm_placement pl, double residual_scale);
/* Set the arm's interventions, the library's model options, in mp (by key). */
void arm_options(lattice_model_params *mp, const arm *a);

/* A model of the preset's shape with this placement, depth and init. */
lattice_model *new_model(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                         double residual_scale, int layers, double init_std, uint64_t seed);
/* ... for at most batch x seq_len rows, with the arm's interventions (kind, or NULL for none). */
lattice_model *new_model_rows(const preset *p, lattice_backend *be, lattice_norm_placement pl,
                              double residual_scale, int layers, double init_std, uint64_t seed,
                              int batch, int seq_len, const arm *kind);

/* AdamW with linear warmup, then cosine decay to min_lr (constant when
 * min_lr = lr), or with decay >= 0 warmup-stable-decay spending that share of
 * the steps after warmup on a linear decay to min_lr; decoupled weight decay
 * on matrices; beta2 < 0: the library's. */
lattice_optim *new_optim(lattice_model *m, double lr, double min_lr, int warmup, int total,
                         double clip, double weight_decay, double beta2, double decay);

/* The LR shape in words ("cosine", "constant", "WSD (decay over the last 20%)"). */
const char *lr_shape_words(double lr, double min_lr, double decay, char *buf, size_t n);

/* Steps after a phase change over which the loss response is measured. */
int64_t response_window(const preset *p);
/* ... for phases of this many steps (an arm's own phase length). */
int64_t response_window_steps(int64_t steps_per_phase);

/* An arm's student init std: its own gain over sqrt(d_model), else the preset's. */
double arm_std(const preset *p, const arm *a);

/* Job j (seed j / n_arms of arm j % n_arms): run it, print its line, return its results. */
run_result *run_job(const preset *p, lattice_backend *be, lattice_model *teacher, int job,
                    int run_index, progress *pr);

void free_run(run_result *r);

/* --check: every object the study builds (the teacher's and every arm's
 * model, data, optimizer, loss, schedule and trainers) built on the real
 * shapes and data, without a step; dies with the library's reason and the
 * preset keys it came from. */
void check_study(const preset *p);

/* --profile: the shares of the time of every run this process ran, summed, on stderr. */
void say_profile_sum(void);

#endif
