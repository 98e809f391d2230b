/* The reproduction's shared types and limits, and what every part may call.
 *
 * The preset and its arms, a run's results, the progress of a run, the study
 * (every run's results), and the limits they are sized by; and what every
 * part of the program may call: messages and this process's place in an MPI
 * job (common.c). */
#ifndef REPRODUCE_STUDY_H
#define REPRODUCE_STUDY_H

#define PROG "reproduce"

#include <lattice/lattice.h>

#include <errno.h>
#include <json-c/json.h>
#include <limits.h>
#include <math.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "../example_util.h"

#define MAX_SEEDS 32
#define MAX_JOBS 256
#define MAX_POINTS 4096

/* ---- the preset -------------------------------------------------------------- */

#define MAX_ARMS 32
#define MAX_PHASES 16
#define MAX_INTERACT 16
#define MAX_FACTORS 4
#define MAX_LEVELS 8
/* The study's byte-level vocabulary: the 256 byte values and the separator. */
#define VOCAB 257
/* The deepest model whose per-layer statistics a measurement keeps (its
 * boundaries: the embedding's output and each layer's, MAX_LAYERS + 1). */
#define MAX_LAYERS 256
/* Per run: the phase changes whose loss response is kept, and the blocks
 * whose removal and boundary scale are (a kept run's record holds these
 * many; changing one changes the record's layout). */
#define MAX_PHASE_CHANGES 8
#define MAX_BLOCKS 8

/* A preset's factorial design (design.c): factors of labelled levels, each
 * level a set of arm keys; its arms are the cells (every combination, or a
 * listed subset), named by their labels joined with '-'. The comparisons and
 * interactions it adds to the preset's come after the preset's own (from
 * compare_from and interact_from), each with its label. */
typedef struct design {
    int n_factors;
    char factor[MAX_FACTORS][32];
    int n_levels[MAX_FACTORS];
    char level[MAX_FACTORS][MAX_LEVELS][32];
    char key[MAX_FACTORS][64];                 /* a factor whose levels are values of one key */
    json_object *set[MAX_FACTORS][MAX_LEVELS]; /* what each level sets (a value with key):
                                                * parts of the preset's JSON, not owned */
    int cell[MAX_ARMS][MAX_FACTORS];           /* each arm's level of each factor */
    int n_cells;
    int compare_from, n_compare, interact_from, n_interact;
    char compare_label[MAX_ARMS][200];
    char interact_label[MAX_INTERACT][200];
} design;

/* An arm: a placement, a schedule (a preset or explicit phases), how appended
 * blocks start, what the freeze arm freezes, how the data iterator behaves at
 * phase starts, and the init gain. */
typedef struct arm {
    char name[48];
    lattice_norm_placement placement;
    double residual_scale;        /* post-norm's a (DeepNorm-style); 1 for plain */
    int schedule;                 /* a lattice_schedule_preset, or -1 for explicit phases */
    lattice_schedule_phase phases[MAX_PHASES];
    int n_phases;                 /* explicit phases */
    lattice_schedule_block_init block_init;
    int train_boundary;           /* -1: the schedule's rule; 0/1 forces it on phases after the first */
    int rewind_data;              /* 1: every phase after the first restarts at the shard's
                                   * beginning (the phases' rewind_data) */
    double init_gain;             /* <= 0: the preset's student gain */
    int block_norm;               /* B > 0: a block-entry norm every B layers (pre-norm) */
    int block_rescale;            /* B > 0: the row-start token rescaled there instead (pre-norm) */
    double massive_offset;        /* k > 0: an induced row-start offset (lattice_model_params) */
    int massive_layer, massive_channel; /* where it goes: after this many layers, on this channel */
    /* the optimizer recipe, the preset's train section unless the arm has its
     * own "train" object (then train_json is that object, hashed into its runs) */
    char train_json[512];
    double lr, min_lr, decay, weight_decay, beta2;
    int warmup, lr_given;         /* lr_given: the arm's LR is not scaled with its init gain */
    /* the rest of a run's training settings: the preset's train section's unless
     * the arm's "train" sets them (own_settings: it sets one, and the kept runs'
     * settings then hold them resolved) */
    double clip, alpha, gamma, tau;
    int kl_direction;             /* a lattice_distill_kl_direction */
    int steps_per_phase;          /* of its schedule preset, and its explicit phases' default */
    int own_settings;
    int selected;                 /* to be run (all, unless --arms names some) */
} arm;

#define MAX_PROBES 16

/* A teacher recipe to probe (--probe): the preset's teacher with these
 * fields replaced. */
typedef struct probe {
    char name[48];
    int layers, steps, warmup, seq_len, batch;
    double init_std, lr, min_lr, weight_decay, beta2, decay; /* decay: as preset's t_decay */
} probe;

typedef struct preset {
    char name[64], train[1024], val[1024];
    char backend[32]; /* the backend every run uses, as the library names it (study_backend) */
    char gemm_precision[8]; /* "gemm_precision": the students' GEMMs, "fp32" or "bf16" */
    char students[1100]; /* --save-students: DIR/students, where each run that runs saves its
                          * final model; "" for none */
    int seq_len, batch, split_long;
    char separator[16]; /* between documents in the text files ("\f", the form feed) */
    int t_layers, t_steps, t_warmup;
    double t_lr, t_init_std;
    int d_model, heads, kv_heads, head_dim, d_ff, blocks, block_size, qk_norm;
    double rope_theta, init_gain, init_std;
    int steps_per_phase, warmup, eval_every, eval_batches, final_eval_batches;
    double lr, min_lr, clip, alpha, gamma, tau;
    int kl_direction; /* train.kl_direction: a lattice_distill_kl_direction */
    int seeds, threads;
    /* recipes beyond lr, min_lr and warmup: the teacher's (t_) and the students' */
    double t_min_lr, t_weight_decay, t_beta2, weight_decay, beta2; /* beta2 < 0: the library's */
    double t_decay, decay; /* lr_shape wsd: its decay_fraction; < 0: cosine (constant: min_lr = lr) */
    int t_seq_len, t_batch; /* the teacher's rows (default the students') */
    arm arms[MAX_ARMS];
    int n_arms;
    probe probes[MAX_PROBES];
    int n_probes, probe_every; /* --probe: the go/no-go table every probe_every steps */
    int require_go;            /* no student runs after a NO-GO teacher */
    /* paired comparisons the preset asks for: compare[k][1] - compare[k][0] */
    char compare[MAX_ARMS][2][48];
    int n_compare;
    /* interactions the preset asks for: [pre joint, post joint, pre grow, post grow] */
    char interact[MAX_INTERACT][4][48];
    int n_interact;
    design design; /* n_factors 0: the preset has no design block */
    json_object *json; /* the whole preset, its design expanded into arms, compare and
                        * interactions (what the runs' settings read) */
    json_object *written; /* the preset as written (before its design's expansion): recorded
                           * with the results, so that --preset results.json reruns it */
} preset;
/* ---- results ------------------------------------------------------------------ */

typedef struct point {
    int64_t step, active_layer_tokens;
    int phase, active;
    double val_ce;
    /* the residual stream after the last active layer, on the fixed batch:
     * RMS std and kurtosis over all tokens, mean RMS of boundary and regular tokens */
    double rms_std, rms_kurt, rms_boundary, rms_regular;
} point;

/* Attention sinks and massive activations at an evaluation, over the active
 * layers (lattice_diag_measure_attention_sinks on the fixed batch): the mean mass on
 * position 0, the largest share of sink heads, the largest top/median
 * |activation|, the smallest value-norm ratio of position 0. NaN: not measured. */
typedef struct sink_point {
    double mass0, sink_rate, top_ratio, value_norm0;
} sink_point;

/* The kept-run record (store.c) holds these by value, so their layout is the
 * record format's, not the library's: the fields, in the order, of 0.4's diag
 * structs, which wrote the committed runs. runs.c fills them from
 * lattice_diag_measure_*'s sized results. */
typedef struct kept_scale {
    int64_t count;
    double mean, std, kurtosis, max;
} kept_scale;
typedef struct kept_removal {
    double ce_full, ce_removed, dce, angle;
} kept_removal;
typedef struct kept_response {
    double baseline, jump, area;
    int64_t recovery;
} kept_response;

typedef struct run_result {
    double final_val;
    point pts[MAX_POINTS];
    int n_pts;
    double *losses; /* per step */
    int *step_phase, *step_active; /* per step */
    int64_t *step_alt;             /* per step: active-layer tokens so far */
    int64_t n_steps, append_steps[MAX_PHASE_CHANGES];
    int n_appends, is_append[MAX_PHASE_CHANGES]; /* a phase change that adds layers (else a restart) */
    kept_response resp[MAX_PHASE_CHANGES];
    double area2[MAX_PHASE_CHANGES], area10[MAX_PHASE_CHANGES]; /* excess loss per step over 2% and 10% of a phase */
    kept_removal removal[MAX_BLOCKS];
    int n_blocks_measured;
    kept_scale rms[MAX_BLOCKS][3]; /* per block boundary: regular, boundary, all */
    int n_boundaries;
    double seconds, tokens_per_s;
    /* added in 0.4, last: a record written before (without it) is still read */
    sink_point sinks[MAX_POINTS]; /* one per pts entry */
} run_result;

/* ---- progress ------------------------------------------------------------------ */

/* --profile: where a run's time went, in seconds. steps holds the teacher's
 * logits (each step's time, as the trainer measures it, excludes its
 * evaluation); train is the trainer's whole run, wall the run's whole. */
typedef struct run_profile {
    double wall, train, steps, teacher, callbacks, diagnostics, final;
} run_profile;

typedef struct progress {
    const char *arm;
    int seed, run_index, n_runs, n_phases, tty;
    int64_t steps_done_before, steps_total_all, run_steps;
    double start, nonpad_tokens;
    run_result *res;
    int64_t last_print;
    double last_line; /* when the last plain progress line was written (ex_now) */
    double run_start; /* when this run started */
    /* boundary statistics at every evaluation */
    lattice_diag *diag;
    lattice_model *model;
    const int32_t *diag_tokens;
    const uint8_t *diag_mask;
    int diag_batch, diag_seq;
    /* rank 0 of several: hands out runs and takes in results between its own steps */
    struct dispatch *dispatch;
    /* --profile: where this run's time went (seconds) */
    run_profile prof;
    /* the study whose runs leave checkpoints and take them up (resume.h: one
     * process, an output folder), NULL for none; take_up: a run takes up its
     * earlier state (not --fresh) */
    const struct study *resume;
    int take_up;
    /* the study's teacher logits file (logits_cache.h), NULL for none (the
     * teacher's forward in every step); logits_verify: --teacher-logits verify */
    const struct logits_cache *logits;
    int logits_verify;
    /* --checkpoint-every S: a running run leaves its checkpoint every S seconds
     * (resume.h); negative: never. --profile: each run's time split into its
     * parts, and the study's sum. */
    double checkpoint_every;
    int profile;
} progress;
/* The paper's mechanism rests on pre-norm residual streams growing massive
 * activations on document-boundary tokens. Measure them in the teacher. */
typedef struct gonogo {
    int n;                      /* boundaries measured (layers + 1) */
    double ratio[MAX_LAYERS + 1], kurt[MAX_LAYERS + 1], boundary[MAX_LAYERS + 1],
        regular[MAX_LAYERS + 1];
    double max_ratio, max_kurt;
    int max_layer; /* where max_ratio sits (1: after the first layer) */
    /* per layer (index 1 = the first): attention sinks and massive activations
     * (lattice_diag_measure_attention_sinks, sink threshold SINK_THRESHOLD) */
    double mass0[MAX_LAYERS + 1], sink_rate[MAX_LAYERS + 1], top_ratio[MAX_LAYERS + 1],
        value_norm0[MAX_LAYERS + 1];
    int64_t top_token[MAX_LAYERS + 1];
    int top_dim[MAX_LAYERS + 1];
    double max_top_ratio, max_sink_rate;
} gonogo;

/* A head whose mean attention mass on position 0 is above this is a sink (Gu et al. use 0.3). */
#define SINK_THRESHOLD 0.3
typedef struct summary {
    double mean, sd, half; /* half-width of the 95% interval of the mean */
    int n;
} summary;
/* ---- output ------------------------------------------------------------------------ */

typedef struct study {
    const preset *p;
    run_result *res[MAX_ARMS][MAX_SEEDS]; /* [arm][seed] */
    gonogo teacher;
    int seeds_done; /* complete seeds (every arm ran) */
    /* the runs to do now (job = seed index * n_arms + arm), seeds outermost */
    int todo[MAX_ARMS * MAX_SEEDS];
    int n_todo;
    const char *dir;                /* output folder: runs are kept in DIR/runs/ (NULL: not kept) */
    char *settings[MAX_ARMS];       /* run_settings of each arm (canonical JSON, malloc'd) */
    char teacher_hex[17];           /* the teacher file's XXH64 */
    char corpus_hex[17];            /* the corpus's XXH64 */
    double unigram; /* the unigram baseline's CE (unigram_ce): set by session_write on the
                     * study it reports, which what writes the report reads */
} study;

/* ---- messages and ranks (common.c) ------------------------------------------------ */

/* The process: what the messages, the MPI teardown and the test hooks read.
 * Set up once before any run starts (main.c's options, jobs.c's MPI start),
 * read-only afterwards; the flags a signal handler and the --jobs workers
 * set are below, apart, since they change while runs go. What a study's runs
 * read of the study (its kept runs' folder and settings, whether they take up
 * checkpoints) is passed to them (study, progress); these stay global because
 * say() and die() read them, and those are called from everywhere, the
 * library's callbacks included, with no context to pass. */
typedef struct process {
    /* this process's place in an MPI job: rank 0 of 1 when started without a
     * launcher (or built without MPI) */
    int rank, n_ranks;
    /* the name messages start with: the program's, and its rank when there
     * are several */
    char who[48];
    /* LATTICE_REPRODUCE_FAIL_RANK=R (a test hook, honoured only with several
     * ranks): rank R fails at the second training step of its first run (or,
     * when it gets no run at all, when it is told so), so that the tests can
     * watch one rank's error end the whole job */
    int fail_here;
    /* MPI_Init was called; and a rank other than 0 that rank 0 has let
     * through its gate: rank 0 now waits for it to ask for runs, so it may not
     * end quietly until it has been told that none are left */
    int mpi_on, owes_rank0;
    /* --progress S: a plain progress line every S seconds per run when stderr
     * is not a terminal, or several runs go side by side (0: none) */
    double progress_every;
    /* the output folder, for the messages that say what was kept */
    const char *study_dir;
} process;
extern process proc;

/* A --jobs worker thread (die ends the worker, not the process) and the
 * flag a failed worker sets for the others (common.c). Global for die(),
 * which sets the flag from the worker that fails: in_worker per thread, the
 * flag atomic. */
extern _Thread_local int in_worker;
extern atomic_int workers_stop;

/* SIGINT and SIGTERM stop the study at the next step, saying what was kept
 * and how to resume (exit status 130; a --jobs worker stops, and the main
 * thread says it once they all have). Global and volatile sig_atomic_t: what
 * a signal handler may set. */
extern volatile sig_atomic_t interrupted;
void catch_interrupts(void);
void stop_if_interrupted(const char *dir);
__attribute__((noreturn)) void say_interrupted(const char *dir);

/* A message on stderr, prefixed with who. */
__attribute__((format(printf, 1, 2))) void say(const char *fmt, ...);
/* The message, then the end of the whole job (MPI_Abort with several ranks). */
__attribute__((format(printf, 1, 2), noreturn)) void die(const char *fmt, ...);
/* die with what failed and why, unless st is LATTICE_OK. */
void check(lattice_status st, const char *what, const char *detail);

/* The study's backend, on threads threads: LATTICE_BACKEND's when it is set,
 * else OpenBLAS where it loads, else the library's "default". Pinned rather
 * than "default" (which picks oneDNN on some CPUs in 0.4): GEMM libraries
 * round differently, and every committed kept run came from OpenBLAS, so a
 * study resumed on another host keeps one library unless told otherwise. */
lattice_backend *study_backend(const preset *p, int threads);
/* Resolve p->backend: LATTICE_BACKEND when set, else the preset's "backend"
 * (given in want, "" for none), else OpenBLAS (the study's kept runs through
 * 0.4), else the library's default; as the library names what it made. */
void study_backend_resolve(preset *p, const char *want);
/* p->gemm_precision (the preset's "gemm_precision", the students' GEMMs: fp32
 * or bf16) must run on p->backend here: refused at once, saying why, rather
 * than at the first run. */
void study_gemm_check(const preset *p);
/* Where the preset's gemm_precision is not fp32: a backend like be (its name,
 * threads and options) whose GEMMs run in it, for a student's model, so that
 * the teacher (its training, its logits file, its forward) stays fp32 on be;
 * the caller destroys it. NULL for fp32: the student runs on be itself. */
lattice_backend *study_student_backend(const preset *p, lattice_backend *be);
/* For the log's backend line and the report: "" for fp32, else where the GEMMs
 * run in the preset's precision (", the students' GEMMs in bf16"). */
const char *study_gemm_words(const preset *p);

/* FNV-1a checksums: the ranks check that they run rank 0's study. */
#define FNV_START 1469598103934665603ULL
uint64_t fnv(uint64_t h, const void *data, size_t n);
/* A file's bytes folded into *h; -1 (errno set) when it cannot be read. */
int fnv_file(const char *path, uint64_t *h);

#endif
