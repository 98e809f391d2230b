/* What a run is set up with, as named values: compared between the ranks of
 * a data-parallel run when a collective is attached, and between a
 * checkpoint and the run that loads it (checkpoint.c). */
#include "setup.h"

#include "fields.h"

#include "data_impl.h"
#include "model_impl.h"
#include "optim_impl.h"
#include "schedule_impl.h"
#include "teacher_impl.h"
#include "trainer_impl.h"

#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const part_names[LATTICE__N_PARTS] = {"model", "data", "schedule", "optimizer",
                                                         "trainer"};

const char *lattice__setup_part_name(int part)
{
    return part >= 0 && part < LATTICE__N_PARTS ? part_names[part] : "setup";
}

void lattice__setup_add(lattice__setup *s, lattice__setup_kind kind, int64_t value, const char *fmt,
                        ...)
{
    if (s->failed)
        return;
    if (s->n == s->cap) {
        const int cap = s->cap ? 2 * s->cap : 32;
        lattice__setup_field *f = realloc(s->f, sizeof(*f) * (size_t)cap);
        if (!f) {
            s->failed = 1;
            return;
        }
        s->f = f;
        s->cap = cap;
    }
    lattice__setup_field *f = &s->f[s->n++];
    memset(f, 0, sizeof(*f));
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(f->name, sizeof(f->name), fmt, ap);
    va_end(ap);
    f->kind = kind;
    f->value = value;
}

void lattice__setup_free(lattice__setup *s)
{
    free(s->f);
    memset(s, 0, sizeof(*s));
}

int64_t lattice__setup_real_bits(double v)
{
    int64_t b;
    memcpy(&b, &v, sizeof(b));
    return b;
}

#define INT(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_INT, (int64_t)(v), __VA_ARGS__)
#define UINT(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_UINT, (int64_t)(uint64_t)(v), __VA_ARGS__)
#define REAL(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_REAL, lattice__setup_real_bits(v), __VA_ARGS__)
#define HASH(s, v, ...) lattice__setup_add((s), LATTICE__SETUP_HASH, (int64_t)(v), __VA_ARGS__)

/* The architecture, and with state the depth, the trainable groups and the
 * weights. max_batch and max_seq only size the arenas: a rank may hold
 * another share. The seed made the weights: said beside them, not compared
 * (weights loaded from a file make it moot). */
static void model_part(const lattice_model *m, int with_state, lattice__setup *s)
{
    const lattice_model_params *p = &m->p;
    INT(s, p->vocab_size, "vocab_size");
    INT(s, p->d_model, "d_model");
    INT(s, p->n_layers, "n_layers");
    INT(s, p->n_heads, "n_heads");
    INT(s, p->n_kv_heads, "n_kv_heads");
    INT(s, p->head_dim, "head_dim");
    INT(s, p->d_ff, "d_ff");
    REAL(s, p->rope_theta, "rope_theta");
    INT(s, p->qk_norm, "qk_norm");
    INT(s, p->block_norm, "block_norm");
    INT(s, p->block_rescale, "block_rescale");
    REAL(s, p->massive_offset, "massive_offset");
    /* where an offset goes means nothing without one: 0, so that models
     * without it compare equal whatever these say */
    INT(s, p->massive_offset > 0.0f ? p->massive_layer : 0, "massive_layer");
    INT(s, p->massive_offset > 0.0f ? p->massive_channel : 0, "massive_channel");
    INT(s, p->tie_embeddings, "tie_embeddings");
    INT(s, m->norm.placement, "placement");
    INT(s, m->norm.kind, "norm_kind");
    REAL(s, m->norm.eps, "norm_eps");
    REAL(s, m->norm.residual_scale, "residual_scale");
    if (!with_state)
        return;
    INT(s, m->n_active, "active_layers");
    INT(s, m->trainable_embedding, "trainable_embedding");
    INT(s, m->trainable_boundary, "trainable_boundary");
    INT(s, m->trainable_head, "trainable_head");
    for (int i = 0; i < p->n_layers; i++)
        INT(s, m->trainable_layer[i], "layer %d trainable", i);
    HASH(s, lattice__model_hash(m, m->params, LATTICE__HASH_START), "weights_hash");
    if (!s->failed) {
        lattice__setup_field *f = &s->f[s->n - 1];
        f->has_note = 1;
        snprintf(f->note_name, sizeof(f->note_name), "seed");
        f->note = (int64_t)p->seed;
    }
}

/* The data's settings and the corpus's identity; with state, where the
 * iterator stands and where the run began. Names are the checkpoint's keys. */
static void data_part(lattice_trainer *t, int with_state, lattice__setup *s)
{
    lattice_data_params dp;
    lattice_data_params_init(&dp);
    lattice_data_get_params(t->data, &dp);
    INT(s, dp.vocab_size, "vocab_size");
    INT(s, dp.boundary_id, "boundary_id");
    INT(s, dp.batch_size, "batch_size");
    INT(s, dp.seq_len, "seq_len");
    INT(s, dp.pack, "pack");
    INT(s, dp.trim != 0, "trim");
    REAL(s, dp.val_fraction, "val_fraction");
    UINT(s, dp.seed, "seed");
    INT(s, dp.pad_id, "pad_id");
    INT(s, dp.split_long != 0, "split_long");
    const int64_t docs = lattice_data_get_n_documents(t->data, LATTICE_DATA_SPLIT_TRAIN);
    INT(s, lattice_data_get_n_tokens(t->data, LATTICE_DATA_SPLIT_TRAIN) +
               lattice_data_get_n_tokens(t->data, LATTICE_DATA_SPLIT_VAL),
        "corpus_tokens");
    INT(s, docs + lattice_data_get_n_documents(t->data, LATTICE_DATA_SPLIT_VAL), "corpus_documents");
    INT(s, docs, "train_documents");
    HASH(s, lattice__data_corpus_hash(t->data), "corpus_hash");
    if (!with_state)
        return;
    lattice_data_position pos;
    lattice_data_get_position(t->data, &pos);
    INT(s, pos.epoch, "position_epoch");
    INT(s, pos.index, "position_index");
    INT(s, t->have_origin, "has_origin");
    if (t->have_origin) {
        INT(s, t->data_origin.epoch, "origin_epoch");
        INT(s, t->data_origin.index, "origin_index");
    }
}

void lattice__setup_phases(const lattice_schedule_phase *ph, int n, lattice__setup *s)
{
    INT(s, n, "n_phases");
    for (int i = 0; i < n; i++) {
        char prefix[32];
        snprintf(prefix, sizeof prefix, "phase %d ", i);
        lattice__fields_setup(&lattice__phase_fields, &ph[i], prefix, s);
    }
}

static void schedule_part(const lattice_schedule *sc, int with_state, lattice__setup *s)
{
    lattice__setup_phases(sc->phases, sc->n_phases, s);
    if (!with_state)
        return;
    INT(s, sc->phase, "phase");
    INT(s, sc->step_in_phase, "step_in_phase");
    INT(s, sc->nonpad_in_phase, "nonpad_in_phase");
    INT(s, sc->counters.steps, "steps");
    INT(s, sc->counters.tokens, "tokens");
    INT(s, sc->counters.nonpad_tokens, "nonpad_tokens");
    INT(s, sc->counters.active_layer_tokens, "active_layer_tokens");
}

static void optim_part(const lattice_optim *o, const lattice_model *m, int with_state,
                       lattice__setup *s)
{
    lattice__fields_setup(&lattice__optim_fields, &o->p, "", s);
    if (!with_state)
        return;
    INT(s, o->step, "step");
    uint64_t h = lattice__model_hash(m, o->m1, LATTICE__HASH_START);
    h = lattice__model_hash(m, o->m2, h);
    h = lattice__hash(h, o->t_tensor, sizeof(int64_t) * (size_t)m->n_tensors);
    HASH(s, h, "moments_hash");
}

/* Settings whose difference would make one rank call the collective where
 * another does not (validation), and the teacher and loss. */
static void trainer_part(const lattice_trainer *t, int with_state, lattice__setup *s)
{
    INT(s, t->p.eval_every, "eval_every");
    INT(s, t->p.eval_batches, "eval_batches");
    UINT(s, t->p.seed, "seed");
    int kind;
    const uint64_t h = lattice__teacher_identity(t->teacher, &kind);
    INT(s, kind, "teacher_kind"); /* 0 none, 1 a model, 2 a callback, 3 a file */
    if (t->teacher) {
        INT(s, lattice_teacher_get_k(t->teacher), "teacher_k");
        INT(s, lattice_teacher_get_vocab_size(t->teacher), "teacher_vocab_size");
        HASH(s, h, "teacher_hash");
        lattice_distill_params kp;
        lattice_distill_params_init(&kp);
        lattice_distill_get_params(t->distill, &kp);
        REAL(s, kp.alpha, "distill alpha");
        REAL(s, kp.gamma, "distill gamma");
        REAL(s, kp.tau, "distill tau");
        INT(s, kp.direction, "distill direction");
    }
    if (with_state)
        INT(s, t->applied_phase, "applied_phase");
}

int lattice__setup_of(lattice_trainer *t, int part, int with_state, lattice__setup *out)
{
    memset(out, 0, sizeof(*out));
    switch (part) {
    case LATTICE__PART_MODEL: model_part(t->model, with_state, out); break;
    case LATTICE__PART_DATA: data_part(t, with_state, out); break;
    case LATTICE__PART_SCHEDULE: schedule_part(t->schedule, with_state, out); break;
    case LATTICE__PART_OPTIM: optim_part(t->optim, t->model, with_state, out); break;
    default: trainer_part(t, with_state, out); break;
    }
    return !out->failed;
}

static int same_field(const lattice__setup_field *a, const lattice__setup_field *b)
{
    return a->kind == b->kind && a->value == b->value && !strcmp(a->name, b->name);
}

int lattice__setup_first_difference(const lattice__setup *a, const lattice__setup *b)
{
    const int n = a->n < b->n ? a->n : b->n;
    for (int i = 0; i < n; i++)
        if (!same_field(&a->f[i], &b->f[i]))
            return i;
    return a->n == b->n ? -1 : n;
}

/* Names, kinds and values (never notes): equal digests, equal lists. */
static uint64_t digest(const lattice__setup *s)
{
    uint64_t h = LATTICE__HASH_START;
    for (int i = 0; i < s->n; i++) {
        const lattice__setup_field *f = &s->f[i];
        h = lattice__hash(h, f->name, strlen(f->name) + 1);
        h = lattice__hash(h, &f->kind, sizeof(f->kind));
        h = lattice__hash(h, &f->value, sizeof(f->value));
    }
    return lattice__hash(h, &s->n, sizeof(s->n));
}

void lattice__setup_value(const lattice__setup_field *f, char *buf, size_t n)
{
    double d;
    switch (f->kind) {
    case LATTICE__SETUP_UINT:
        snprintf(buf, n, "%" PRIu64, (uint64_t)f->value);
        break;
    case LATTICE__SETUP_REAL:
        memcpy(&d, &f->value, sizeof(d));
        snprintf(buf, n, "%.9g", d);
        break;
    case LATTICE__SETUP_HASH:
        if (f->has_note)
            snprintf(buf, n, "0x%016" PRIx64 " (%s %" PRIu64 ")", (uint64_t)f->value, f->note_name,
                     (uint64_t)f->note);
        else
            snprintf(buf, n, "0x%016" PRIx64, (uint64_t)f->value);
        break;
    default:
        snprintf(buf, n, "%" PRId64, f->value);
        break;
    }
}

void lattice__setup_describe(char *buf, size_t n, const char *a, const char *b, int part,
                             const lattice__setup *have, const lattice__setup *want, int i)
{
    const char *pn = lattice__setup_part_name(part);
    char hv[96], wv[96];
    if (i < have->n && i < want->n) {
        lattice__setup_value(&have->f[i], hv, sizeof hv);
        lattice__setup_value(&want->f[i], wv, sizeof wv);
        if (strcmp(have->f[i].name, want->f[i].name))
            snprintf(buf, n, "%s's %s has %s %s where %s's has %s %s", a, pn, have->f[i].name, hv,
                     b, want->f[i].name, wv);
        else
            snprintf(buf, n, "%s's %s %s %s differs from %s's %s", a, pn, have->f[i].name, hv, b,
                     wv);
    } else {
        snprintf(buf, n, "%s's %s settings (%d values) differ from %s's (%d values)", a, pn,
                 have->n, b, want->n);
    }
}

/* ---- ranks ------------------------------------------------------------------ */

static lattice_status slot_failed(lattice_trainer *t, const lattice_trainer_collective *c,
                                  void *user, int rank, int n, const char *slot, int rc)
{
    const char *why = c->errmsg ? c->errmsg(user) : NULL;
    return lattice__set_error(t->err, LATTICE_ERR_BACKEND,
                              "lattice_trainer_set_collective: rank %d of %d: comparing the ranks' "
                              "setups, the collective's %s failed (%d)%s%s",
                              rank, n, slot, rc, why && why[0] ? ": " : "", why ? why : "");
}

/* Fields sent per broadcast while looking for the first difference: a fixed
 * buffer, so that no rank can fail to take part for want of memory. */
#define CHUNK 32

lattice_status lattice__trainer_agree_setup(lattice_trainer *t, const lattice_trainer_collective *c,
                                            void *user, int rank, int n, lattice_status local)
{
    lattice__setup parts[LATTICE__N_PARTS];
    uint64_t mine[LATTICE__N_PARTS], root[LATTICE__N_PARTS];
    int built = 1;
    for (int p = 0; p < LATTICE__N_PARTS; p++) {
        built &= lattice__setup_of(t, p, 1, &parts[p]);
        mine[p] = root[p] = digest(&parts[p]);
    }
    if (!built && local == LATTICE_OK)
        local = lattice__set_error(t->err, LATTICE_ERR_OUT_OF_MEMORY,
                                   "lattice_trainer_set_collective: no memory to compare this "
                                   "rank's setup with the others'");
    lattice_status st = LATTICE_OK;
    /* every rank learns rank 0's digests, then every rank's verdict: its own
     * status and the first part where it differs from rank 0 */
    int64_t rows_small[2 * 8], *rows = n <= 8 ? rows_small : calloc((size_t)n * 2, sizeof(int64_t));
    int rc;
    if (!rows) {
        st = lattice__set_error(t->err, LATTICE_ERR_OUT_OF_MEMORY,
                                "lattice_trainer_set_collective: out of memory");
        goto done;
    }
    memset(rows, 0, sizeof(int64_t) * 2 * (size_t)n);
    if ((rc = c->broadcast(user, root, sizeof(root), 0)) != 0) {
        st = slot_failed(t, c, user, rank, n, "broadcast", rc);
        goto done;
    }
    int bad = -1;
    for (int p = 0; p < LATTICE__N_PARTS && bad < 0; p++)
        if (mine[p] != root[p])
            bad = p;
    rows[2 * rank] = local;
    rows[2 * rank + 1] = bad + 1;
    if ((rc = c->sum_int64(user, rows, 2 * (size_t)n)) != 0) {
        st = slot_failed(t, c, user, rank, n, "sum_int64", rc);
        goto done;
    }
    int first = -1, others = 0;
    for (int r = 1; r < n; r++)
        if (rows[2 * r + 1] != 0) {
            if (first < 0)
                first = r;
            else
                others++;
        }
    if (first < 0) {
        /* the same setup everywhere: a refusal of this rank's own stands (with
         * its message), else the first refusing rank's */
        st = local;
        for (int r = 0; r < n && st == LATTICE_OK; r++)
            if (rows[2 * r] != LATTICE_OK)
                st = lattice__set_error(t->err, (lattice_status)rows[2 * r],
                                        "lattice_trainer_set_collective: rank %d refused the "
                                        "collective (%s), so this rank (%d) did too; rank %d's "
                                        "message says why", r,
                                        lattice_status_string((lattice_status)rows[2 * r]), rank, r);
        goto done;
    }
    /* Rank 0's and the first differing rank's fields of the part, in chunks
     * sent to every rank, up to the first difference: every rank then says
     * the same. */
    const int part = (int)rows[2 * first + 1] - 1;
    const lattice__setup *own = &parts[part];
    int64_t counts[2] = {rank == 0 ? own->n : 0, rank == first ? own->n : 0};
    if ((rc = c->broadcast(user, &counts[0], sizeof(int64_t), 0)) != 0 ||
        (rc = c->broadcast(user, &counts[1], sizeof(int64_t), first)) != 0) {
        st = slot_failed(t, c, user, rank, n, "broadcast", rc);
        goto done;
    }
    lattice__setup_field fa[CHUNK], fb[CHUNK];
    lattice__setup a = {fa, 0, CHUNK, 0}, b = {fb, 0, CHUNK, 0};
    int at = -1;
    for (int64_t k = 0; at < 0 && (k < counts[0] || k < counts[1]); k += CHUNK) {
        a.n = (int)(counts[0] - k < 0 ? 0 : counts[0] - k < CHUNK ? counts[0] - k : CHUNK);
        b.n = (int)(counts[1] - k < 0 ? 0 : counts[1] - k < CHUNK ? counts[1] - k : CHUNK);
        memset(fa, 0, sizeof(fa));
        memset(fb, 0, sizeof(fb));
        if (rank == 0)
            memcpy(fa, own->f + k, sizeof(*fa) * (size_t)a.n);
        if (rank == first)
            memcpy(fb, own->f + k, sizeof(*fb) * (size_t)b.n);
        if ((a.n && (rc = c->broadcast(user, fa, sizeof(*fa) * (size_t)a.n, 0)) != 0) ||
            (b.n && (rc = c->broadcast(user, fb, sizeof(*fb) * (size_t)b.n, first)) != 0)) {
            st = slot_failed(t, c, user, rank, n, "broadcast", rc);
            goto done;
        }
        for (int i = 0; i < a.n; i++)
            fa[i].name[sizeof(fa->name) - 1] = fa[i].note_name[sizeof(fa->note_name) - 1] = 0;
        for (int i = 0; i < b.n; i++)
            fb[i].name[sizeof(fb->name) - 1] = fb[i].note_name[sizeof(fb->note_name) - 1] = 0;
        at = lattice__setup_first_difference(&b, &a);
    }
    char what[LATTICE_ERRMSG_SIZE], first_name[16];
    snprintf(first_name, sizeof first_name, "rank %d", first);
    if (at >= 0 && at < a.n && at < b.n)
        lattice__setup_describe(what, sizeof what, first_name, "rank 0", part, &b, &a, at);
    else if (at >= 0)
        snprintf(what, sizeof what, "rank %d's %s settings have %lld values and rank 0's %lld",
                 first, lattice__setup_part_name(part), (long long)counts[1], (long long)counts[0]);
    else /* the fields agree but the digests did not: an incomplete list */
        snprintf(what, sizeof what, "rank %d's %s settings differ from rank 0's", first,
                 lattice__setup_part_name(part));
    char more[64] = "";
    if (others)
        snprintf(more, sizeof more, " (and %d more rank%s differ%s)", others, others == 1 ? "" : "s",
                 others == 1 ? "s" : "");
    st = lattice__set_error(t->err, LATTICE_ERR_INVALID_CONFIG,
                            "lattice_trainer_set_collective: %s%s; refused on every rank (the "
                            "ranks must bind identically set-up objects)", what, more);
done:
    if (rows != rows_small)
        free(rows);
    for (int p = 0; p < LATTICE__N_PARTS; p++)
        lattice__setup_free(&parts[p]);
    return st;
}
