/* Whole-run checkpoints: model, optimizer, schedule, data position. */
#include "safetensors.h"
#include "study_impl.h"

#include <json-c/json.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAIL(t, st, ...) lattice__set_error((t)->err, (st), __VA_ARGS__)

static json_object *i64(int64_t v) { return json_object_new_int64(v); }
static json_object *dbl(double v) { return json_object_new_double(v); }

/* The run's state as a JSON string (caller frees); NULL when memory runs out. */
static char *state_json(const lattice_trainer *t)
{
    const lattice_model *m = t->model;
    const lattice_optim *o = t->optim;
    const lattice_schedule *s = t->schedule;
    lattice_data_position pos;
    lattice_data_get_position(t->data, &pos);
    json_object *j = json_object_new_object(), *op = json_object_new_object(),
                *sc = json_object_new_object(), *md = json_object_new_object(),
                *layers = json_object_new_array();
    /* the containers join j first, so that one put of j frees whatever was built */
    int ok = lattice__json_add(md, "trainable_layers", layers);
    ok = lattice__json_add(j, "optim", op) && ok;
    ok = lattice__json_add(j, "schedule", sc) && ok;
    ok = lattice__json_add(j, "model", md) && ok;
#define ADD(obj, k, v) ok = ok && lattice__json_add(obj, k, v)
    ADD(op, "step", i64(o->step));
    ADD(op, "lr", dbl(o->p.lr));
    ADD(op, "min_lr", dbl(o->p.min_lr));
    ADD(op, "warmup_steps", i64(o->p.warmup_steps));
    ADD(op, "total_steps", i64(o->p.total_steps));
    ADD(op, "beta1", dbl(o->p.beta1));
    ADD(op, "beta2", dbl(o->p.beta2));
    ADD(op, "eps", dbl(o->p.eps));
    ADD(op, "weight_decay", dbl(o->p.weight_decay));
    ADD(op, "clip_norm", dbl(o->p.clip_norm));
    ADD(op, "lr_shape", i64(o->p.lr_shape));
    ADD(op, "decay_fraction", dbl(o->p.decay_fraction));
    ADD(sc, "n_phases", i64(s->n_phases));
    ADD(sc, "phase", i64(s->phase));
    ADD(sc, "step_in_phase", i64(s->step_in_phase));
    ADD(sc, "nonpad_in_phase", i64(s->nonpad_in_phase));
    ADD(sc, "steps", i64(s->counters.steps));
    ADD(sc, "tokens", i64(s->counters.tokens));
    ADD(sc, "nonpad_tokens", i64(s->counters.nonpad_tokens));
    ADD(sc, "active_layer_tokens", i64(s->counters.active_layer_tokens));
    ADD(sc, "flops", dbl(s->counters.flops));
    ADD(md, "n_active", i64(m->n_active));
    ADD(md, "trainable_embedding", i64(m->trainable_embedding));
    ADD(md, "trainable_boundary", i64(m->trainable_boundary));
    ADD(md, "trainable_head", i64(m->trainable_head));
    for (int i = 0; ok && i < m->p.n_layers; i++)
        ok = lattice__json_push(layers, i64(m->trainable_layer[i]));
    ADD(j, "data_epoch", i64(pos.epoch));
    ADD(j, "data_index", i64(pos.index));
    ADD(j, "applied_phase", i64(t->applied_phase));
    if (t->have_origin) { /* since 0.2: where rewinding phases send the data back to */
        ADD(j, "data_origin_epoch", i64(t->data_origin.epoch));
        ADD(j, "data_origin_index", i64(t->data_origin.index));
    }
    if (t->has_coll) /* since 0.3: the rank count, which fixes each rank's share and sums */
        ADD(j, "ranks", i64(t->n_ranks));
#undef ADD
    char *out = ok ? lattice__json_dump(j) : NULL;
    json_object_put(j);
    return out;
}

static lattice_status write_checkpoint(lattice_trainer *t, const char *path);

lattice_status lattice_trainer_save_checkpoint(lattice_trainer *t, const char *path)
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
    const int nt = m->n_tensors;
    st_entry *e = calloc((size_t)(3 * nt + 1), sizeof(*e));
    char *names = malloc((size_t)2 * nt * 112);
    char *state = state_json(t);
    if (!e || !names || !state) {
        free(e);
        free(names);
        free(state);
        return FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "no memory for the checkpoint");
    }
    for (int i = 0; i < nt; i++) {
        const tensor_entry *te = &m->tensors[i];
        const size_t off = (size_t)(te->data - m->params);
        for (int k = 0; k < 3; k++) {
            st_entry *x = &e[k * nt + i];
            x->dtype = ST_F32;
            x->ndim = te->ndim;
            x->shape[0] = te->rows;
            x->shape[1] = te->cols;
            if (k == 0) {
                x->name = te->name;
                x->data = te->data;
            } else {
                char *nm = names + ((size_t)(k - 1) * nt + i) * 112;
                snprintf(nm, 112, "optim.m%d.%s", k, te->name);
                x->name = nm;
                x->data = (k == 1 ? t->optim->m1 : t->optim->m2) + off;
            }
        }
    }
    e[3 * nt] = (st_entry){"optim.steps", ST_I64, 1, {nt}, t->optim->t_tensor};
    const char *meta[] = {"format", "pt", "lattice.version", LATTICE_VERSION_STRING,
                          "lattice.checkpoint", state, NULL};
    lattice_status st = lattice__st_write(path, e, 3 * nt + 1, meta, t->err);
    free(e);
    free(names);
    free(state);
    return st;
}

static int get64(json_object *o, const char *key, int64_t *v)
{
    json_object *x;
    if (!o || !json_object_object_get_ex(o, key, &x) || !json_object_is_type(x, json_type_int))
        return 0;
    *v = json_object_get_int64(x);
    return 1;
}

static int getd(json_object *o, const char *key, double *v)
{
    json_object *x;
    if (!o || !json_object_object_get_ex(o, key, &x) ||
        !(json_object_is_type(x, json_type_double) || json_object_is_type(x, json_type_int)))
        return 0;
    *v = json_object_get_double(x);
    return 1;
}

/* Everything the checkpoint restores, parsed and checked before any change. */
typedef struct restored {
    lattice_optim_params op;
    int64_t optim_step;
    int64_t phase, step_in_phase, nonpad_in_phase;
    lattice_schedule_counters counters;
    lattice_data_position pos;
    int have_origin;
    lattice_data_position origin;
    int64_t applied_phase, n_active, tr_emb, tr_bnd, tr_head;
    int64_t *tr_layers;
} restored;

static lattice_status parse_state(lattice_trainer *t, const char *js, restored *r)
{
    json_object *j = NULL, *op, *sc, *md, *layers;
    if (!js)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint has no lattice.checkpoint state");
    lattice_status pst = lattice__json_parse(js, strlen(js), 0, "the checkpoint's state", &j, t->err);
    if (pst != LATTICE_OK)
        return pst;
    int64_t n_phases = -1, ws = 0, ts = 0;
    double d[8];
    int ok = j && json_object_is_type(j, json_type_object) &&
             json_object_object_get_ex(j, "optim", &op) &&
             json_object_object_get_ex(j, "schedule", &sc) &&
             json_object_object_get_ex(j, "model", &md) && get64(op, "step", &r->optim_step) &&
             getd(op, "lr", &d[0]) && getd(op, "min_lr", &d[1]) && get64(op, "warmup_steps", &ws) &&
             get64(op, "total_steps", &ts) && getd(op, "beta1", &d[2]) &&
             getd(op, "beta2", &d[3]) && getd(op, "eps", &d[4]) &&
             getd(op, "weight_decay", &d[5]) && getd(op, "clip_norm", &d[6]) &&
             get64(sc, "n_phases", &n_phases) && get64(sc, "phase", &r->phase) &&
             get64(sc, "step_in_phase", &r->step_in_phase) &&
             get64(sc, "nonpad_in_phase", &r->nonpad_in_phase) &&
             get64(sc, "steps", &r->counters.steps) && get64(sc, "tokens", &r->counters.tokens) &&
             get64(sc, "nonpad_tokens", &r->counters.nonpad_tokens) &&
             get64(sc, "active_layer_tokens", &r->counters.active_layer_tokens) &&
             getd(sc, "flops", &r->counters.flops) && get64(md, "n_active", &r->n_active) &&
             get64(md, "trainable_embedding", &r->tr_emb) &&
             get64(md, "trainable_boundary", &r->tr_bnd) &&
             get64(md, "trainable_head", &r->tr_head) &&
             json_object_object_get_ex(md, "trainable_layers", &layers) &&
             json_object_is_type(layers, json_type_array) &&
             get64(j, "data_epoch", &r->pos.epoch) && get64(j, "data_index", &r->pos.index) &&
             get64(j, "applied_phase", &r->applied_phase);
    if (ok) {
        /* A 0.1 checkpoint has no origin: its runs all began at the data's start. */
        int64_t oe, oi;
        const int has_e = get64(j, "data_origin_epoch", &oe);
        const int has_i = get64(j, "data_origin_index", &oi);
        if (has_e != has_i) {
            ok = 0;
        } else if (has_e) {
            r->have_origin = 1;
            r->origin = (lattice_data_position){oe, oi};
        } else if (r->applied_phase >= 0) {
            r->have_origin = 1;
            r->origin = (lattice_data_position){0, 0};
        }
    }
    /* since 0.3, written by runs with a collective; none means one rank */
    int64_t ranks = 1;
    if (ok && json_object_object_get_ex(j, "ranks", NULL))
        ok = get64(j, "ranks", &ranks) && ranks >= 1 && ranks <= INT32_MAX;
    const lattice_model *m = t->model;
    const lattice_schedule *s = t->schedule;
    /* Counters stay far from overflow (and exact as doubles): a run adds to them. */
    const int64_t big = (int64_t)1 << 50;
    const lattice_schedule_counters *c = &r->counters;
    if (ok && (r->optim_step < 0 || r->optim_step > big || r->step_in_phase < 0 ||
               r->step_in_phase > big || r->nonpad_in_phase < 0 || r->nonpad_in_phase > big ||
               c->steps < 0 || c->steps > big || c->tokens < 0 || c->tokens > big ||
               c->nonpad_tokens < 0 || c->nonpad_tokens > c->tokens ||
               c->active_layer_tokens < 0 || c->active_layer_tokens > big ||
               !(c->flops >= 0.0) || !isfinite(c->flops) || r->pos.epoch > big ||
               (r->have_origin && r->origin.epoch > big)))
        ok = 0;
    /* the position inside a phase must be one the schedule can reach */
    if (ok && r->phase >= 0 && r->phase <= n_phases && n_phases == s->n_phases) {
        if (r->phase == s->n_phases)
            ok = r->step_in_phase == 0 && r->nonpad_in_phase == 0;
        else if (s->phases[r->phase].steps)
            ok = r->step_in_phase < s->phases[r->phase].steps;
        else
            ok = r->nonpad_in_phase < s->phases[r->phase].tokens;
    }
    if (ok && ((int)json_object_array_length(layers) != m->p.n_layers ||
               n_phases != t->schedule->n_phases || r->phase < 0 || r->phase > n_phases ||
               r->applied_phase < -1 || r->applied_phase >= n_phases || r->n_active < 1 ||
               r->n_active > m->p.n_layers || ws < 0 || ts < 1 || ws > big || ts > big))
        ok = 0;
    if (ok) {
        r->tr_layers = calloc((size_t)m->p.n_layers, sizeof(int64_t));
        for (int i = 0; r->tr_layers && i < m->p.n_layers; i++) {
            json_object *x = json_object_array_get_idx(layers, i);
            ok &= json_object_is_type(x, json_type_int);
            r->tr_layers[i] = json_object_get_int64(x);
        }
        ok &= r->tr_layers != NULL;
        lattice_optim_params_init(&r->op);
        r->op.lr = (float)d[0];
        r->op.min_lr = (float)d[1];
        r->op.warmup_steps = ws;
        r->op.total_steps = ts;
        r->op.beta1 = (float)d[2];
        r->op.beta2 = (float)d[3];
        r->op.eps = (float)d[4];
        r->op.weight_decay = (float)d[5];
        r->op.clip_norm = (float)d[6];
        /* since 0.4, both or neither; a 0.3 checkpoint has neither: cosine */
        int64_t shape = LATTICE_OPTIM_LR_SHAPE_COSINE;
        d[7] = r->op.decay_fraction;
        const int has_shape = json_object_object_get_ex(op, "lr_shape", NULL);
        ok &= has_shape == json_object_object_get_ex(op, "decay_fraction", NULL);
        if (has_shape)
            ok &= get64(op, "lr_shape", &shape) && shape >= 0 && shape <= INT32_MAX &&
                  getd(op, "decay_fraction", &d[7]);
        r->op.lr_shape = (lattice_optim_lr_shape)shape;
        r->op.decay_fraction = (float)d[7];
    }
    json_object_put(j);
    if (!ok)
        return FAIL(t, LATTICE_ERR_FORMAT,
                    "the checkpoint's state is missing, malformed, out of range, or from another "
                    "schedule or model");
    if (ranks != t->n_ranks)
        return FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                    "the checkpoint was written by a run over %lld rank%s and this run has %d: "
                    "resume it with %lld (each rank's share of a batch, and so every sum, depends "
                    "on the rank count)", (long long)ranks, ranks == 1 ? "" : "s", t->n_ranks,
                    (long long)ranks);
    /* the optimizer settings pass the setter's own checks: set them, then put back */
    const lattice_optim_params was = t->optim->p;
    lattice_status st = lattice_optim_set_params(t->optim, &r->op);
    t->optim->p = was;
    if (st != LATTICE_OK)
        return FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint's optimizer settings: %s",
                    lattice_optim_errmsg(t->optim));
    return LATTICE_OK;
}

/* FNV-1a over bytes, continuing from h. */
static uint64_t fnv1a(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++)
        h = (h ^ b[i]) * 0x100000001b3ULL;
    return h;
}

/* A checkpoint's state as read, for comparing ranks: weights, moments,
 * per-tensor steps, optimizer step, schedule position and data position. */
static uint64_t state_hash(const float *params, const float *m1, const float *m2, int64_t n,
                           const int64_t *steps, int nt, const restored *r)
{
    uint64_t h = 0xcbf29ce484222325ULL;
    h = fnv1a(h, params, sizeof(float) * (size_t)n);
    h = fnv1a(h, m1, sizeof(float) * (size_t)n);
    h = fnv1a(h, m2, sizeof(float) * (size_t)n);
    h = fnv1a(h, steps, sizeof(int64_t) * (size_t)nt);
    const int64_t pos[5] = {r->optim_step, r->phase, r->step_in_phase, r->pos.epoch, r->pos.index};
    return fnv1a(h, pos, sizeof(pos));
}

lattice_status lattice_trainer_load_checkpoint(lattice_trainer *t, const char *path)
{
    if (!t)
        return lattice__set_error(LATTICE__ERRBUF(t), LATTICE_ERR_INVALID_ARGUMENT,
            "lattice_trainer_load_checkpoint: invalid argument: trainer is NULL");
    if (!path)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT, "path is NULL");
    lattice_model *m = t->model;
    lattice_optim *o = t->optim;
    st_file sf;
    lattice_status st = lattice__st_open(&sf, path, t->err);
    if (st != LATTICE_OK)
        return lattice__trainer_distributed(t) ? lattice__trainer_agree(t, st) : st;
    restored r;
    memset(&r, 0, sizeof(r));
    st = parse_state(t, lattice__st_meta(&sf, "lattice.checkpoint"), &r);
    /* Read into scratch first: a bad file must leave the run untouched. */
    const int nt = m->n_tensors;
    float *params = NULL, *m1 = NULL, *m2 = NULL;
    int64_t *steps = NULL;
    if (st == LATTICE_OK) {
        params = malloc(sizeof(float) * m->n_params);
        m1 = malloc(sizeof(float) * m->n_params);
        m2 = malloc(sizeof(float) * m->n_params);
        steps = malloc(sizeof(int64_t) * (size_t)nt);
        if (!params || !m1 || !m2 || !steps)
            st = FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "no memory to restore the checkpoint");
    }
    for (int i = 0; st == LATTICE_OK && i < nt; i++) {
        const tensor_entry *te = &m->tensors[i];
        const size_t off = (size_t)(te->data - m->params);
        const int64_t count = te->rows * te->cols;
        for (int k = 0; st == LATTICE_OK && k < 3; k++) {
            char name[128];
            if (k == 0)
                snprintf(name, sizeof name, "%s", te->name);
            else
                snprintf(name, sizeof name, "optim.m%d.%s", k, te->name);
            const st_tensor *ft = lattice__st_find(&sf, name);
            float *dst = (k == 0 ? params : k == 1 ? m1 : m2) + off;
            if (!ft) {
                st = FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint lacks '%s'", name);
                break;
            }
            if (ft->ndim != te->ndim || ft->shape[0] != te->rows ||
                (te->ndim == 2 && ft->shape[1] != te->cols)) {
                st = FAIL(t, LATTICE_ERR_FORMAT, "'%s' has another shape in the checkpoint", name);
                break;
            }
            if ((st = lattice__st_read_f32(&sf, ft, dst, count, t->err)) != LATTICE_OK)
                break;
            /* the setters' rule: weights and moments finite, second moments >= 0 */
            for (int64_t j = 0; j < count; j++)
                if (!isfinite(dst[j]) || (k == 2 && dst[j] < 0.0f)) {
                    st = FAIL(t, LATTICE_ERR_FORMAT, "'%s'[%lld] = %g is out of range", name,
                              (long long)j, (double)dst[j]);
                    break;
                }
        }
    }
    /* Adam's first moment is an average of the gradients whose squares the second
     * averages: one far beyond the other's root came from no run, and its update
     * m1 / (sqrt(m2) + eps) would overflow the weights */
    for (int i = 0; st == LATTICE_OK && i < nt; i++) {
        const tensor_entry *te = &m->tensors[i];
        const size_t off = (size_t)(te->data - m->params), n = (size_t)(te->rows * te->cols);
        for (size_t j = off; st == LATTICE_OK && j < off + n; j++)
            if (fabsf(m1[j]) > 1e6f * (sqrtf(m2[j]) + r.op.eps))
                st = FAIL(t, LATTICE_ERR_FORMAT,
                          "'%s': optimizer moments (%g, %g) no gradient history can produce",
                          te->name, (double)m1[j], (double)m2[j]);
    }
    if (st == LATTICE_OK) {
        const st_tensor *ft = lattice__st_find(&sf, "optim.steps");
        st = ft ? lattice__st_read_raw(&sf, ft, ST_I64, steps, nt, t->err)
                : FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint lacks 'optim.steps'");
        if (st == LATTICE_OK && ft->ndim != 1)
            st = FAIL(t, LATTICE_ERR_FORMAT, "'optim.steps' must be one-dimensional");
        /* a tensor is updated at most once per optimizer step */
        for (int i = 0; st == LATTICE_OK && i < nt; i++)
            if (steps[i] < 0 || steps[i] > r.optim_step)
                st = FAIL(t, LATTICE_ERR_FORMAT, "'optim.steps'[%d] = %lld outside 0..%lld", i,
                          (long long)steps[i], (long long)r.optim_step);
    }
    lattice_data_position was;
    lattice_data_get_position(t->data, &was);
    /* set_position is the only check of a position there is; trying the origin
     * first leaves the iterator where it was if either does not fit */
    if (st == LATTICE_OK && r.have_origin &&
        lattice_data_set_position(t->data, &r.origin) != LATTICE_OK)
        st = FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint's data origin does not fit this data");
    if (st == LATTICE_OK && lattice_data_set_position(t->data, &r.pos) != LATTICE_OK) {
        lattice_data_set_position(t->data, &was);
        st = FAIL(t, LATTICE_ERR_FORMAT, "the checkpoint's data position does not fit this data");
    }
    if (lattice__trainer_distributed(t)) {
        /* every rank loads, or none does; and only the same state: a stale
         * copy of the file on one machine's disk would make its rank diverge */
        const lattice_status own = st;
        st = lattice__trainer_agree(t, st);
        if (st == LATTICE_OK) {
            uint64_t h[2] = {state_hash(params, m1, m2, m->n_params, steps, nt, &r), 0};
            h[1] = h[0];
            const int rc = t->coll.broadcast(t->coll_user, &h[1], sizeof(h[1]), 0);
            if (rc)
                st = lattice__trainer_coll_fail(t, "broadcast", rc);
            else if (h[0] != h[1])
                st = FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                          "rank %d read another checkpoint from %s than rank 0 did (a stale "
                          "copy on this machine?): every rank must load the same file",
                          t->rank, path);
            st = lattice__trainer_agree(t, st);
        }
        if (own == LATTICE_OK && st != LATTICE_OK)
            lattice_data_set_position(t->data, &was);
    }
    if (st == LATTICE_OK) {
        /* commit: nothing below can fail */
        for (int i = 0; i < nt; i++) {
            const tensor_entry *te = &m->tensors[i];
            const size_t off = (size_t)(te->data - m->params);
            const size_t bytes = sizeof(float) * (size_t)(te->rows * te->cols);
            memcpy(te->data, params + off, bytes);
            memcpy(o->m1 + off, m1 + off, bytes);
            memcpy(o->m2 + off, m2 + off, bytes);
        }
        memcpy(o->t_tensor, steps, sizeof(int64_t) * (size_t)nt);
        o->p = r.op;
        o->step = r.optim_step;
        lattice_schedule *s = t->schedule;
        s->phase = (int)r.phase;
        s->step_in_phase = r.step_in_phase;
        s->nonpad_in_phase = r.nonpad_in_phase;
        s->counters = r.counters;
        m->n_active = (int)r.n_active;
        m->trainable_embedding = r.tr_emb != 0;
        m->trainable_boundary = r.tr_bnd != 0;
        m->trainable_head = r.tr_head != 0;
        for (int i = 0; i < m->p.n_layers; i++)
            m->trainable_layer[i] = r.tr_layers[i] != 0;
        m->batch = m->seq = 0;
        t->applied_phase = (int)r.applied_phase;
        t->have_origin = r.have_origin;
        t->data_origin = r.origin;
    }
    free(params);
    free(m1);
    free(m2);
    free(steps);
    free(r.tr_layers);
    lattice__st_close(&sf);
    return st;
}
