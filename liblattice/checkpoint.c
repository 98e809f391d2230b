/* Whole-run checkpoints: the model's weights, the optimizer's moments and the
 * run's state (checkpoint_state.c) in one safetensors file; save and load. */
#include "trainer_impl.h"

#include "checkpoint_state.h"
#include "optim_access.h"
#include "safetensors.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static lattice_status write_checkpoint(lattice_trainer *t, const char *path);

static lattice_status save_checkpoint(lattice_trainer *t, const char *path)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_save_checkpoint: invalid argument: trainer is NULL");
    if (!path)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    if (!lattice__trainer_distributed(t))
        return write_checkpoint(t, path);
    /* Every rank holds the same state: rank 0 writes it, the others wait for
     * its status, which they all return. */
    int64_t status = t->rank == 0 ? write_checkpoint(t, path) : LATTICE_OK;
    const int rc = t->coll.broadcast(t->coll_user, &status, sizeof(status), 0);
    if (rc && t->rank == 0 && status != LATTICE_OK)
        return (lattice_status)status; /* its own failure says more */
    if (rc)
        return lattice__trainer_coll_fail(t, "broadcast", rc);
    if (t->rank != 0 && status != LATTICE_OK)
        return FAIL(t, (lattice_status)status, "rank 0 could not write the checkpoint %s (%s): "
                    "its message says why", path, lattice_status_string((lattice_status)status));
    return (lattice_status)status;
}

static lattice_status write_checkpoint(lattice_trainer *t, const char *path)
{
    const lattice_model *m = t->model;
    /* a load checks the depth against the phase the run applied: a state it
     * would refuse is not written (the caller changed the depth between steps) */
    lattice_schedule_phase ph;
    lattice_schedule_phase_init(&ph);
    if (t->applied_phase >= 0 &&
        lattice_schedule_get_phase(t->schedule, t->applied_phase, &ph) == LATTICE_OK &&
        lattice_model_get_active_layers(m) != ph.active_layers)
        return FAIL(t, LATTICE_ERR_STATE,
                    "the model has %d active layers, not the %d of phase %d, the one this run "
                    "applied: a checkpoint of it would not load (set the depth back, or let the "
                    "schedule change it)",
                    lattice_model_get_active_layers(m), ph.active_layers, t->applied_phase);
    const int nt = lattice_model_get_n_tensors(m);
    st_entry *e = calloc((size_t)(3 * nt + 1), sizeof(*e));
    char *names = malloc((size_t)2 * nt * 112);
    char *state = lattice__checkpoint_state_json(t);
    lattice__optim_moments mo;
    lattice__optim_get_moments(t->optim, &mo);
    if (!e || !names || !state) {
        free(e);
        free(names);
        free(state);
        return FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the checkpoint");
    }
    for (int i = 0; i < nt; i++) {
        lattice__model_tensor te;
        lattice__model_tensor_at(m, i, &te);
        for (int k = 0; k < 3; k++) {
            st_entry *x = &e[k * nt + i];
            x->dtype = ST_F32;
            x->ndim = te.ndim;
            x->shape[0] = te.rows;
            x->shape[1] = te.cols;
            if (k == 0) {
                x->name = te.name;
                x->data = te.data;
            } else {
                char *nm = names + ((size_t)(k - 1) * nt + i) * 112;
                snprintf(nm, 112, "optim.m%d.%s", k, te.name);
                x->name = nm;
                x->data = (k == 1 ? mo.m1 : mo.m2) + te.offset;
            }
        }
    }
    e[3 * nt] = (st_entry){"optim.steps", ST_I64, 1, {nt}, mo.t_tensor};
    const char *meta[] = {"format", "pt", "lattice.version", LATTICE_VERSION_STRING,
                          "lattice.checkpoint", state, NULL};
    lattice_status st = lattice__st_write(path, e, 3 * nt + 1, meta, t->err);
    free(e);
    free(names);
    free(state);
    return st;
}

/* A checkpoint as read, for comparing ranks: weights, moments, per-tensor
 * steps, and the run's state as its text (all of it, by no list of its own).
 * The buffers are laid out like the model's arena; only its tensors count
 * (its alignment padding is never written, and differs between processes). */
static uint64_t state_hash(const lattice_model *m, const float *params, const float *m1,
                           const float *m2, const int64_t *steps, const char *state)
{
    uint64_t h = lattice__model_hash(m, params, LATTICE__HASH_START);
    h = lattice__model_hash(m, m1, h);
    h = lattice__model_hash(m, m2, h);
    h = lattice__hash(h, steps, sizeof(int64_t) * (size_t)lattice_model_get_n_tensors(m));
    return lattice__hash(h, state, strlen(state));
}

lattice_status lattice_trainer_load_checkpoint(lattice_trainer *t, const char *path)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_load_checkpoint: invalid argument: trainer is NULL");
    return lattice_trainer_load_checkpoint_flags(t, path, 0);
}

/* A checkpoint's arrays as read, before they are applied: a bad file must
 * leave the run untouched. Laid out like the model's arena. */
typedef struct loaded {
    int nt;
    float *params, *m1, *m2;
    int64_t *steps;
} loaded;

static void loaded_free(loaded *ld)
{
    free(ld->params);
    free(ld->m1);
    free(ld->m2);
    free(ld->steps);
}

/* "'name' has shape [..] in the checkpoint and [..] in this run's model" */
static lattice_status shape_mismatch(lattice_trainer *t, const char *name, const st_tensor *ft,
                                     const lattice__model_tensor *te)
{
    char have[64] = "[", want[64];
    for (int d = 0; d < ft->ndim && d < 4; d++)
        snprintf(have + strlen(have), sizeof have - strlen(have), "%s%lld", d ? ", " : "",
                 (long long)ft->shape[d]);
    snprintf(have + strlen(have), sizeof have - strlen(have), "%s]", ft->ndim > 4 ? ", ..." : "");
    if (te->ndim == 2)
        snprintf(want, sizeof want, "[%lld, %lld]", (long long)te->rows, (long long)te->cols);
    else
        snprintf(want, sizeof want, "[%lld]", (long long)te->rows);
    return FAIL(t, LATTICE_ERR_FORMAT,
                "'%s' has shape %s in the checkpoint and %s in this run's model: another model",
                name, have, want);
}

/* One of a tensor's three arrays (k: 0 its weights, 1 and 2 its moments) into dst. */
static lattice_status read_array(lattice_trainer *t, st_file *sf, const lattice__model_tensor *te,
                                 int k, float *dst)
{
    char name[128];
    if (k == 0)
        snprintf(name, sizeof name, "%s", te->name);
    else
        snprintf(name, sizeof name, "optim.m%d.%s", k, te->name);
    const st_tensor *ft = lattice__st_find(sf, name);
    if (!ft)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint lacks '%s'", name);
    if (ft->ndim != te->ndim || ft->shape[0] != te->rows ||
        (te->ndim == 2 && ft->shape[1] != te->cols))
        return shape_mismatch(t, name, ft, te);
    const int64_t count = te->rows * te->cols;
    lattice_status st = lattice__st_read_f32(sf, ft, dst, count, t->err);
    if (st != LATTICE_OK)
        return st;
    /* the setters' rule: weights and moments finite, second moments >= 0 */
    for (int64_t j = 0; j < count; j++)
        if (!isfinite(dst[j]) || (k == 2 && dst[j] < 0.0f))
            return FAIL(t, LATTICE_ERR_FORMAT, "'%s'[%lld] = %g is out of range", name,
                        (long long)j, (double)dst[j]);
    return LATTICE_OK;
}

/* Every tensor's weights and moments into scratch buffers the size of the arena. */
static lattice_status read_arrays(lattice_trainer *t, st_file *sf, loaded *ld)
{
    const lattice_model *m = t->model;
    const size_t arena = lattice__model_arena_floats(m);
    ld->params = malloc(sizeof(float) * arena);
    ld->m1 = malloc(sizeof(float) * arena);
    ld->m2 = malloc(sizeof(float) * arena);
    ld->steps = malloc(sizeof(int64_t) * (size_t)ld->nt);
    if (!ld->params || !ld->m1 || !ld->m2 || !ld->steps)
        return FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "no memory to restore the checkpoint");
    for (int i = 0; i < ld->nt; i++) {
        lattice__model_tensor te;
        lattice__model_tensor_at(m, i, &te);
        for (int k = 0; k < 3; k++) {
            float *dst = (k == 0 ? ld->params : k == 1 ? ld->m1 : ld->m2) + te.offset;
            const lattice_status st = read_array(t, sf, &te, k, dst);
            if (st != LATTICE_OK)
                return st;
        }
    }
    return LATTICE_OK;
}

/* Adam's first moment is an average of the gradients whose squares the second
 * averages. By Cauchy-Schwarz over any gradient history,
 *   |m1| <= (1 - b1) / sqrt((1 - b2) (1 - b1^2 / b2)) * sqrt(m2)
 * where b1^2 < b2: a first moment far beyond that came from no run, and its
 * update m1 / (sqrt(m2) + eps) would overflow the weights. Where b2 <= b1^2
 * (beta2 0, say) no bound holds: a row unused for a while keeps m1 and loses
 * m2, and its own run's checkpoint must load. */
static lattice_status check_moments(lattice_trainer *t, const loaded *ld, float b1, float b2,
                                    float eps)
{
    if (!((double)b1 * b1 < (double)b2))
        return LATTICE_OK;
    const double bound =
        (1.0 - b1) / sqrt((1.0 - b2) * (1.0 - (double)b1 * b1 / b2));
    /* the slack covers float rounding of the running averages many times over */
    const float k = (float)(1e6 * (bound > 1.0 ? bound : 1.0));
    for (int i = 0; i < ld->nt; i++) {
        lattice__model_tensor te;
        lattice__model_tensor_at(t->model, i, &te);
        const size_t off = te.offset, n = (size_t)(te.rows * te.cols);
        for (size_t j = off; j < off + n; j++)
            if (fabsf(ld->m1[j]) > k * (sqrtf(ld->m2[j]) + eps))
                return FAIL(t, LATTICE_ERR_FORMAT,
                            "'%s': optimizer moments (%g, %g) no gradient history can produce",
                            te.name, (double)ld->m1[j], (double)ld->m2[j]);
    }
    return LATTICE_OK;
}

/* The per-tensor step counts; a tensor is updated at most once per optimizer step. */
static lattice_status read_steps(lattice_trainer *t, st_file *sf, loaded *ld, int64_t optim_step)
{
    const st_tensor *ft = lattice__st_find(sf, "optim.steps");
    if (!ft)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint lacks 'optim.steps'");
    lattice_status st = lattice__st_read_raw(sf, ft, ST_I64, ld->steps, ld->nt, t->err);
    if (st != LATTICE_OK)
        return st;
    if (ft->ndim != 1)
        return FAIL(t, LATTICE_ERR_FORMAT, "'optim.steps' must be one-dimensional");
    for (int i = 0; i < ld->nt; i++)
        if (ld->steps[i] < 0 || ld->steps[i] > optim_step)
            return FAIL(t, LATTICE_ERR_FORMAT, "'optim.steps'[%d] = %lld outside 0..%lld", i,
                        (long long)ld->steps[i], (long long)optim_step);
    return LATTICE_OK;
}

/* Every rank loads, or none does; and only the same state: a stale copy of the
 * file on one machine's disk would make its rank diverge. st is this rank's own
 * status so far. */
static lattice_status agree_across_ranks(lattice_trainer *t, const char *path, lattice_status st,
                                         const loaded *ld, const char *state)
{
    st = lattice__trainer_agree(t, st);
    if (st != LATTICE_OK)
        return st;
    uint64_t h[2] = {state_hash(t->model, ld->params, ld->m1, ld->m2, ld->steps, state), 0};
    h[1] = h[0];
    const int rc = t->coll.broadcast(t->coll_user, &h[1], sizeof(h[1]), 0);
    if (rc)
        st = lattice__trainer_coll_fail(t, "broadcast", rc);
    else if (h[0] != h[1])
        st = FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                  "rank %d read another checkpoint from %s than rank 0 did (a stale copy on "
                  "this machine?): every rank must load the same file", t->rank, path);
    return lattice__trainer_agree(t, st);
}

/* The commit: a checked checkpoint into the run; nothing here can fail. */
static void apply_checkpoint(lattice_trainer *t, const checkpoint_state *r, const loaded *ld)
{
    lattice__optim_moments mo;
    lattice__optim_get_moments(t->optim, &mo);
    for (int i = 0; i < ld->nt; i++) {
        lattice__model_tensor te;
        lattice__model_tensor_at(t->model, i, &te);
        const size_t off = te.offset, bytes = sizeof(float) * (size_t)(te.rows * te.cols);
        memcpy(te.data, ld->params + off, bytes);
        memcpy(mo.m1 + off, ld->m1 + off, bytes);
        memcpy(mo.m2 + off, ld->m2 + off, bytes);
    }
    memcpy(mo.t_tensor, ld->steps, sizeof(int64_t) * (size_t)ld->nt);
    lattice__optim_restore(t->optim, &r->op, r->optim_step);
    lattice__schedule_restore(t->schedule, &r->at);
    lattice__model_set_run(t->model, &r->run);
    if (!r->keep_data_position) /* it fits (checkpoint_state.c) */
        lattice_data_set_position(t->data, &r->data.pos);
    t->applied_phase = r->applied_phase;
    t->have_origin = r->data.have_origin;
    t->data_origin = r->data.origin;
}

static lattice_status check_arguments(lattice_trainer *t, const char *path, unsigned flags)
{
    if (!path)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    const unsigned known =
        LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA | LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS;
    if (flags & ~known)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_trainer_load_checkpoint_flags: invalid argument: flags 0x%x has bits "
                    "no lattice_trainer_load_flag names (0x%x)", flags, flags & ~known);
    return LATTICE_OK;
}

/* Open, read the state and the arrays into scratch, check them, agree across
 * ranks, then apply. */
static lattice_status load_checkpoint_flags(lattice_trainer *t, const char *path, unsigned flags)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_load_checkpoint_flags: invalid argument: trainer is NULL");
    lattice_status st = check_arguments(t, path, flags);
    if (st != LATTICE_OK)
        return st;
    st_file sf;
    st = lattice__st_open(&sf, path, t->err);
    if (st != LATTICE_OK)
        return lattice__trainer_distributed(t) ? lattice__trainer_agree(t, st) : st;
    checkpoint_state r;
    memset(&r, 0, sizeof(r));
    const char *state = lattice__st_meta(&sf, "lattice.checkpoint");
    st = lattice__checkpoint_parse_state(t, state, flags, &r);
    loaded ld = {.nt = lattice_model_get_n_tensors(t->model)};
    if (st == LATTICE_OK)
        st = read_arrays(t, &sf, &ld);
    if (st == LATTICE_OK)
        st = check_moments(t, &ld, r.op.beta1, r.op.beta2, r.op.eps);
    if (st == LATTICE_OK)
        st = read_steps(t, &sf, &ld, r.optim_step);
    if (r.keep_data_position) /* other data, on purpose: the iterator reads on from where it
                               * stands, where rewinding phases will also go back to */
        lattice_data_get_position(t->data, &r.data.origin);
    if (lattice__trainer_distributed(t))
        st = agree_across_ranks(t, path, st, &ld, state);
    if (st == LATTICE_OK)
        apply_checkpoint(t, &r, &ld);
    loaded_free(&ld);
    free(r.layers);
    lattice__st_close(&sf);
    return st;
}

/* ---- the public calls, each holding what the trainer binds (handle.h) ---- */

lattice_status lattice_trainer_save_checkpoint(lattice_trainer *t, const char *path)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_save_checkpoint", save_checkpoint(t, path));
}

lattice_status lattice_trainer_load_checkpoint_flags(lattice_trainer *t, const char *path,
                                                     unsigned flags)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_load_checkpoint_flags",
                          load_checkpoint_flags(t, path, flags));
}
