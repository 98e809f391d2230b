/* The model's private body: the model's own files' alone (model_internal.h
 * and model_io.c); other objects ask through model_access.h. */
#ifndef LATTICE_MODEL_IMPL_H
#define LATTICE_MODEL_IMPL_H

#include "handle.h"
#include "internal.h"
#include "profile.h"

/* Norm slots of a layer: which exist depends on the placement.
 * pre: IN1, IN2. post: OUT1, OUT2 (on the residual sums). peri: all four. */
enum { SLOT_IN1 = 0, SLOT_OUT1 = 1, SLOT_IN2 = 2, SLOT_OUT2 = 3, N_SLOTS = 4 };

/* The norm a model was created with, as its passes read it: a copy of the
 * lattice_norm's settings (norm.c), taken through its getters. */
typedef struct lattice__norm_spec {
    lattice_norm_placement placement;
    lattice_norm_kind kind;
    float eps;
    float residual_scale;
} lattice__norm_spec;

typedef struct norm_params {
    float *w, *b; /* b only for LayerNorm */
} norm_params;

typedef struct layer_params {
    float *wqkv;  /* [(H + 2 KV) * hd, D]: q_proj, k_proj, v_proj stacked */
    float *wo;    /* [D, H * hd] */
    float *qn, *kn; /* [hd] each when qk_norm */
    float *wgu;   /* [2F, D]: gate_proj then up_proj */
    float *wd;    /* [D, F] */
    norm_params norm[N_SLOTS];
    norm_params bnorm; /* the block-entry norm (block_norm): w NULL on other layers */
    float *ref_rms;    /* the running regular RMS of the stream the layer reads (1 value, a
                          LATTICE_MODEL_GROUP_STATISTIC tensor), NULL unless lattice__model_has_ref */
} layer_params;

typedef struct norm_stats {
    float *mean, *rstd; /* [N] */
} norm_stats;

typedef struct layer_acts {
    float *a1, *raw, *q, *k, *v, *rstd_q, *rstd_k, *p, *att, *y1, *r1, *mid;
    float *a2, *gu, *y2, *r2; /* no s: the backward makes it again from gu */
    norm_stats st[N_SLOTS];
    float *bn;      /* the block-entry norm's (or rescale's) output, the layer's input (block-entry layers) */
    norm_stats bst; /* its statistics */
} layer_acts;

/* The one list of a layer's row-indexed activation buffers (model_layout.c):
 * where each sits in layer_acts, its floats per row, and when a layer has it;
 * and the one list of the model's own (lattice__model_act_buffers: where each
 * sits in struct lattice_model). The arena's layout
 * (lattice__model_layout_acts) and the rows split's views (model_threads.c)
 * both walk them, in this order. */
typedef enum act_width {
    ACT_D,     /* d_model */
    ACT_W,     /* (n_heads + 2 n_kv_heads) head_dim: the fused q, k, v projection */
    ACT_Q,     /* n_heads head_dim */
    ACT_KV,    /* n_kv_heads head_dim */
    ACT_H,     /* n_heads */
    ACT_KVH,   /* n_kv_heads */
    ACT_PROBS, /* n_heads x seq: a row's attention probabilities */
    ACT_GU,    /* 2 d_ff: SwiGLU's gate and up */
    ACT_F,     /* d_ff */
    ACT_ONE,   /* 1: a norm's statistic */
    ACT_V      /* vocab_size: logits */
} act_width;

typedef enum act_when {
    ACT_ALWAYS,
    ACT_NOT_POST,    /* pre and peri: the sublayers' normalised inputs */
    ACT_PERI,        /* the sublayers' normalised outputs */
    ACT_POST,        /* the residual sums before the norm */
    ACT_QK_NORM,     /* the q/k norms' statistics */
    ACT_BLOCK_INPUT, /* the layer's own input: a block-entry norm's or rescale's output */
    ACT_BLOCK_ENTRY, /* the block-entry norm's statistics */
    ACT_LAYER_NORM,  /* a LayerNorm's means (the statistics of an RMSNorm have none) */
    ACT_SLOT         /* a norm slot's statistic, where the placement has the slot */
} act_when;

typedef struct act_buffer {
    size_t offset; /* of its float pointer in layer_acts (or in struct lattice_model) */
    act_width width;
    act_when when, also; /* both must hold (also ACT_ALWAYS: only when) */
    int slot;            /* ACT_SLOT's slot */
} act_buffer;

extern const act_buffer lattice__act_buffers[];
extern const int lattice__n_act_buffers;
extern const act_buffer lattice__model_act_buffers[]; /* the model's, not a layer's */
extern const int lattice__n_model_act_buffers;

/* The floats per row of a width, with seq the sequence length rows come in. */
size_t lattice__act_width(const lattice_model *m, act_width w, size_t seq);
/* Whether layer i has the buffer (a model's buffer: any i). */
int lattice__act_present(const lattice_model *m, int i, const act_buffer *b);

typedef enum init_kind { INIT_NORMAL, INIT_ONES, INIT_ZEROS } init_kind;

typedef struct tensor_entry {
    char name[96];
    float *data;
    int64_t rows, cols;
    int ndim;
    lattice_model_group group;
    int layer;
    init_kind init;
    uint32_t key; /* seeds this tensor's draw independently of the others */
} tensor_entry;

/* Views for the rows split of a pass (model_threads.c): one per thread, each
 * a copy of the model whose activation pointers start at its first sequence. */
typedef struct model_split {
    int n;            /* threads the workspace serves (0: none built yet) */
    size_t bytes;     /* what it allocated, counted by lattice_model_get_arena_bytes */
    float *grads;     /* n - 1 gradient arenas (thread 0 uses the model's own) */
    float *red;       /* n - 1 reduction scratches of red_floats each */
    size_t red_floats;
    struct lattice_model *views;
    float **hs;       /* n x (L + 1) */
    layer_acts *acts; /* n x L */
    struct lattice_backend *be; /* n single-thread copies of the model's backend */
    lattice_status *status;     /* each view's pass */
    double *busy;               /* each thread's time on its views, when profiling */
} model_split;

struct lattice_model {
    lattice_model_params p;
    lattice__norm_spec norm;
    lattice_backend *be;
    char err[LATTICE_ERRMSG_MAX];

    int n_active;
    int skip_first, skip_count;
    int trainable_embedding, trainable_boundary, trainable_head;
    int *trainable_layer;

    /* arenas */
    float *params, *grads;
    size_t n_params; /* floats in the params arena (= grads arena) */
    char *acts_base;
    size_t acts_bytes;

    /* parameters */
    float *wte, *whead; /* whead == wte when tied */
    norm_params bnorm;
    layer_params *layers;
    tensor_entry *tensors;
    int n_tensors;

    /* activations of the last forward */
    int batch, seq; /* 0 before the first forward */
    int inference;  /* the last forward kept nothing for backward: backward refuses */
    int has_loss;   /* dlogits written since the last forward (a loss, or a caller given
                     * lattice_model_get_dlogits): backward refuses until then */
    int32_t *tokens;
    float *emb;    /* embedding output (post: before the entry norm) */
    norm_stats bst;
    float **hs;    /* [L + 1] boundary streams */
    layer_acts *acts;
    float *final_out, *logits, *dlogits;
    float *rope;
    double *ref_pending; /* [L]: each ref_rms layer's measurement by the last forward (NaN: none) */

    /* backward scratch */
    float *d_a, *d_b, *d_in, *d_tmp, *d_raw, *dq, *dk, *dv, *dp, *d_att, *d_gu, *d_s, *red;
    double *rowloss;
    const float **ptr_a, **ptr_b;
    float **ptr_c;

    lattice_prof prof; /* per-op timing, off unless lattice__model_profile turns it on */
    model_split split;

    lattice_busy busy;     /* the thread inside a call that reads or writes the model */
    lattice_borrow borrow; /* its teacher, optimizer, diag and trainer (handle.h) */
};

#include "model_access.h" /* lattice__model_unborrow, and what other objects ask */

/* Whether layer i opens a block whose entry is normalised (block_norm). */
static inline int lattice__block_entry(const lattice_model *m, int i)
{
    return m->p.block_norm > 0 && i > 0 && i % m->p.block_norm == 0;
}

/* Whether layer i opens a block whose row-start token is rescaled (block_rescale). */
static inline int lattice__block_rescaled(const lattice_model *m, int i)
{
    return m->p.block_rescale > 0 && i > 0 && i % m->p.block_rescale == 0;
}

/* Whether the stream entering layer i gets the induced row-start offset (massive_offset). */
static inline int lattice__massive_at(const lattice_model *m, int i)
{
    return m->p.massive_offset > 0.0f && i == m->p.massive_layer;
}

/* Whether layer i keeps a running regular RMS of the stream it reads. */
static inline int lattice__model_has_ref(const lattice_model *m, int i)
{
    return lattice__block_rescaled(m, i) || lattice__massive_at(m, i);
}

/* Measure each running regular RMS from the last forward's streams (model_pass.c). */
void lattice__model_measure_refs(lattice_model *m);

/* Gradient of a parameter pointer (same offset in the gradient arena). */
static inline float *lattice__grad_of(const lattice_model *m, const float *param)
{
    return m->grads + (param - m->params);
}

/* Whether tensor t's group is trainable and (for layers) active. */
int lattice__tensor_updatable(const lattice_model *m, const tensor_entry *t);

#endif
