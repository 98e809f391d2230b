/* The trainer over ranks: attaching a collective, agreeing on a status,
 * each rank's share of a batch, and the sums of the gradients and losses,
 * validation's among them (lattice_trainer_evaluate); and the trainer's
 * setup, the parts every rank must share, gathered from each object's own
 * list and compared across the ranks. */
#include "trainer_impl.h"

#include "data_access.h"
#include "fields.h"
#include "model_access.h"
#include "teacher_access.h"

#include <math.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

lattice_status lattice__trainer_coll_fail(lattice_trainer *t, const char *slot, int rc)
{
    const char *why = t->coll.errmsg ? t->coll.errmsg(t->coll_user) : NULL;
    return FAIL(t, LATTICE_ERR_BACKEND, "rank %d of %d: the collective's %s failed (%d)%s%s",
                t->rank, t->n_ranks, slot, rc, why && why[0] ? ": " : "", why ? why : "");
}

lattice_status lattice__trainer_agree(lattice_trainer *t, lattice_status st)
{
    memset(t->rank_status, 0, sizeof(int64_t) * (size_t)t->n_ranks);
    t->rank_status[t->rank] = st;
    const int rc = t->coll.sum_int64(t->coll_user, t->rank_status, (size_t)t->n_ranks);
    if (rc)
        return lattice__trainer_coll_fail(t, "sum_int64", rc);
    if (st != LATTICE_OK)
        return st;
    for (int r = 0; r < t->n_ranks; r++)
        if (t->rank_status[r] != LATTICE_OK)
            return FAIL(t, (lattice_status)t->rank_status[r],
                        "rank %d failed (%s), so this rank (%d) put the call back too; rank %d's "
                        "message says why", r, lattice_status_string((lattice_status)t->rank_status[r]),
                        t->rank, r);
    return LATTICE_OK;
}

/* This rank's rows of a validation batch (the loop's share). */
static lattice_data_batch eval_share(const void *t, const lattice_data_batch *b)
{
    return lattice__trainer_share_of((const lattice_trainer *)t, b);
}

/* Validation: the one evaluation loop on this rank's rows, its sums summed
 * over the ranks. */
static lattice_status trainer_evaluate(lattice_trainer *t, double *val_ce)
{
    if (lattice__need(LATTICE__ERRBUF(t), "lattice_trainer_evaluate", 2,
                      (const void *)t, "trainer", (const void *)val_ce, "val_ce") != LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    int64_t nb = lattice_data_get_n_val_batches(t->data);
    if (nb == 0)
        return FAIL(t, LATTICE_ERR_STATE, "the data has no validation documents");
    if (t->p.eval_batches > 0 && t->p.eval_batches < nb)
        nb = t->p.eval_batches;
    /* over ranks, a last short batch may leave a rank no rows */
    double total = 0.0;
    int64_t count = 0;
    lattice_status st = lattice__model_val_sums(t->model, t->data, nb,
                                                lattice__trainer_distributed(t) ? eval_share : NULL,
                                                t, &total, &count);
    if (st != LATTICE_OK)
        FAIL(t, st, "%s", lattice_model_errmsg(t->model));
    if (lattice__trainer_distributed(t)) {
        /* token-weighted: the sums of every rank's sums */
        if ((st = lattice__trainer_agree(t, st)) != LATTICE_OK)
            return st;
        double sums[2] = {total, (double)count};
        const int rc = t->coll.sum_doubles(t->coll_user, sums, 2);
        if (rc)
            return lattice__trainer_coll_fail(t, "sum_doubles", rc);
        total = sums[0];
        count = (int64_t)sums[1];
    }
    if (st != LATTICE_OK)
        return st;
    *val_ce = count ? total / (double)count : 0.0;
    return LATTICE_OK;
}

lattice_status lattice_trainer_evaluate(lattice_trainer *t, double *val_ce)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_evaluate", trainer_evaluate(t, val_ce));
}

const char *lattice__collective_missing_slot(const lattice_trainer_collective *c)
{
    return !c->rank          ? "rank"
           : !c->n_ranks     ? "n_ranks"
           : !c->sum_floats  ? "sum_floats"
           : !c->sum_doubles ? "sum_doubles"
           : !c->sum_int64   ? "sum_int64"
           : !c->barrier     ? "barrier"
           : !c->broadcast   ? "broadcast"
                             : NULL;
}

static lattice_status set_collective(lattice_trainer *t, const lattice_trainer_collective *ops,
                                     void *user)
{
    if (!t)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "lattice_trainer_set_collective: invalid argument: trainer is NULL");
    if (!ops) {
        lattice_data_params dp = {.size = sizeof(dp)};
        lattice_model_params mp = {.size = sizeof(mp)};
        lattice_data_get_params(t->data, &dp);
        lattice_model_get_params(t->model, &mp);
        if (dp.batch_size > mp.max_batch)
            return FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                        "lattice_trainer_set_collective: cannot detach: alone, the trainer would "
                        "need the whole batch of %d rows but the model holds %d",
                        dp.batch_size, mp.max_batch);
        free(t->rank_status);
        t->rank_status = NULL;
        memset(&t->coll, 0, sizeof(t->coll));
        t->coll_user = NULL;
        t->has_coll = 0;
        t->rank = 0;
        t->n_ranks = 1;
        return LATTICE_OK;
    }
    lattice_trainer_collective c;
    TRY(lattice__check_size(t->err, "lattice_trainer_set_collective", "ops->size",
                            "lattice_trainer_collective", ops->size,
                            LATTICE__TRAINER_COLLECTIVE_1_0));
    /* the caller's slots (common.h: a later table's further slots are never called) */
    memset(&c, 0, sizeof(c));
    memcpy(&c, ops, ops->size < sizeof(c) ? ops->size : sizeof(c));
    c.size = sizeof(c);
    const char *missing = lattice__collective_missing_slot(&c);
    if (missing)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_trainer_set_collective: invalid argument: ops->%s is NULL (every "
                    "slot up to broadcast is required)", missing);
    const int rank = c.rank(user), n = c.n_ranks(user);
    if (n < 1 || rank < 0 || rank >= n)
        return FAIL(t, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_trainer_set_collective: rank %d of %d ranks is not a rank", rank, n);
    lattice_data_params dp = {.size = sizeof(dp)};
    lattice_model_params mp = {.size = sizeof(mp)};
    lattice_data_get_params(t->data, &dp);
    lattice_model_get_params(t->model, &mp);
    /* This rank's verdict is not returned at once: every rank first compares
     * its setup with the others' (which needs every rank to take part), and
     * they all refuse together. */
    lattice_status st = LATTICE_OK;
    if (dp.batch_size % n != 0)
        st = FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                  "lattice_trainer_set_collective: the global batch of %d rows does not divide "
                  "by %d ranks (each rank trains on batch_size / ranks rows: make batch_size a "
                  "multiple of the rank count)", dp.batch_size, n);
    else if (dp.batch_size / n > mp.max_batch)
        st = FAIL(t, LATTICE_ERR_INVALID_CONFIG,
                  "lattice_trainer_set_collective: each rank's share of %d rows exceeds the "
                  "model's max_batch %d", dp.batch_size / n, mp.max_batch);
    int64_t *status = calloc((size_t)n, sizeof(int64_t));
    if (!status && st == LATTICE_OK)
        st = FAIL(t, LATTICE_ERR_OUT_OF_MEMORY, "lattice_trainer_set_collective: out of memory");
    if (n > 1)
        st = lattice__trainer_agree_setup(t, &c, user, rank, n, st);
    if (st != LATTICE_OK) {
        free(status);
        return st;
    }
    free(t->rank_status);
    t->rank_status = status;
    t->coll = c;
    t->coll_user = user;
    t->has_coll = 1;
    t->rank = rank;
    t->n_ranks = n;
    return LATTICE_OK;
}

/* Held: another thread's attach or detach during a step would change the
 * collective (and free the ranks' statuses) under it. */
lattice_status lattice_trainer_set_collective(lattice_trainer *t,
                                              const lattice_trainer_collective *ops, void *user)
{
    LATTICE__TRAINER_HELD(t, "lattice_trainer_set_collective", set_collective(t, ops, user));
}

/* Sum [data, data + n) over ranks, after weighting it (unless weight is 1). */
static int weighted_sum(const lattice_trainer_collective *ops, void *user, float *data, size_t n,
                        double weight)
{
    if (weight != 1.0)
        for (size_t j = 0; j < n; j++)
            data[j] = (float)(data[j] * weight);
    return ops->sum_floats(user, data, n);
}

/* The gradients the optimizer reads, summed over ranks: tensors whose
 * gradients lie end to end go in one call. Returns the failing slot's code. */
static int reduce_gradients(const lattice_trainer_collective *ops, void *user,
                            lattice_model *model, double weight)
{
    const int active = lattice_model_get_active_layers(model);
    float *run = NULL;
    size_t run_n = 0;
    for (int i = 0; i < lattice_model_get_n_tensors(model); i++) {
        lattice_model_tensor_info ti;
        int on = 0;
        lattice_model_get_tensor(model, i, &ti);
        if (ti.group != LATTICE_MODEL_GROUP_LAYER || ti.layer < active)
            lattice_model_get_trainable(model, ti.group, ti.layer, &on);
        if (!on)
            continue;
        const size_t n = (size_t)(ti.shape[0] * ti.shape[1]);
        if (run && run + run_n == ti.grad) {
            run_n += n;
            continue;
        }
        int rc = run ? weighted_sum(ops, user, run, run_n, weight) : 0;
        if (rc)
            return rc;
        run = ti.grad;
        run_n = n;
    }
    return run ? weighted_sum(ops, user, run, run_n, weight) : 0;
}

static lattice_status collective_reduce_gradients(const lattice_trainer_collective *ops,
                                                  void *user, lattice_model *model, double weight)
{
    static const char fn[] = "lattice_trainer_collective_reduce_gradients";
    if (lattice__need(NULL, fn, 2, (const void *)ops, "ops", (const void *)model, "model") !=
        LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    TRY(lattice__check_size(NULL, fn, "ops->size", "lattice_trainer_collective", ops->size,
                            LATTICE__TRAINER_COLLECTIVE_1_0));
    if (!ops->sum_floats)
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: ops->sum_floats is NULL", fn);
    if (!isfinite(weight))
        return lattice__fail(LATTICE_ERR_INVALID_ARGUMENT,
                             "%s: invalid argument: weight %g is not finite", fn, weight);
    const int rc = reduce_gradients(ops, user, model, weight);
    if (rc) {
        const char *why = ops->errmsg ? ops->errmsg(user) : NULL;
        return lattice__fail(LATTICE_ERR_BACKEND,
                             "lattice_trainer_collective_reduce_gradients: the collective's "
                             "sum_floats failed (%d)%s%s", rc, why && why[0] ? ": " : "",
                             why ? why : "");
    }
    return LATTICE_OK;
}

/* Inside the model: a trainer's step on another thread (or a call the step
 * makes back) would have its gradients summed and scaled under it. */
lattice_status lattice_trainer_collective_reduce_gradients(const lattice_trainer_collective *ops,
                                                           void *user, lattice_model *model,
                                                           double weight)
{
    LATTICE__INSIDE_BUSY(model ? lattice__model_busy(model) : NULL,
                         "lattice_trainer_collective_reduce_gradients", "model",
                         collective_reduce_gradients(ops, user, model, weight));
}

/* Rows [first, first + rows) of a batch as a batch of its own. */
static lattice_data_batch rows_of(const lattice_data_batch *b, int first, int rows)
{
    lattice_data_batch s = *b;
    const size_t off = (size_t)first * (size_t)b->seq;
    s.tokens = b->tokens + off;
    s.targets = b->targets + off;
    s.mask = b->mask + off;
    s.batch = rows;
    s.n_tokens = 0;
    for (size_t i = 0; i < (size_t)rows * (size_t)b->seq; i++)
        s.n_tokens += s.mask[i];
    return s;
}

/* This rank's rows of a batch: [r B/N, (r+1) B/N), which for training
 * batches (B divides by N) are B/N rows each. */
lattice_data_batch lattice__trainer_share_of(const lattice_trainer *t, const lattice_data_batch *b)
{
    if (!lattice__trainer_distributed(t))
        return *b;
    const int first = (int)((int64_t)b->batch * t->rank / t->n_ranks);
    const int last = (int)((int64_t)b->batch * (t->rank + 1) / t->n_ranks);
    return rows_of(b, first, last - first);
}

/* Over ranks: the gradients and losses of the global batch, each rank's
 * weighted by its share of the counted tokens. */
lattice_status lattice__trainer_reduce_step(lattice_trainer *t, const lattice_data_batch *b,
                                            int64_t n_local, lattice_trainer_metrics *m)
{
    const double w = b->n_tokens ? (double)n_local / (double)b->n_tokens : 0.0;
    int rc = reduce_gradients(&t->coll, t->coll_user, t->model, w);
    if (rc)
        return lattice__trainer_coll_fail(t, "sum_floats", rc);
    double sums[3] = {m->loss * (double)n_local, m->kl * (double)n_local,
                      m->ce * (double)n_local};
    if ((rc = t->coll.sum_doubles(t->coll_user, sums, 3)) != 0)
        return lattice__trainer_coll_fail(t, "sum_doubles", rc);
    const double inv = b->n_tokens ? 1.0 / (double)b->n_tokens : 0.0;
    m->loss = sums[0] * inv;
    m->kl = sums[1] * inv;
    m->ce = sums[2] * inv;
    return LATTICE_OK;
}

/* The trainer's own settings, in the order a setup lists them. Not here: the
 * callbacks and their user pointer (a rank's own), and the collective (being
 * agreed on). */
#define TRAINER_FIELD(f, type) {#f, type, offsetof(lattice_trainer_params, f), 1, 1, 0}
static const lattice__field trainer_fields[] = {
    TRAINER_FIELD(eval_every, LATTICE__F_I64),
    TRAINER_FIELD(eval_batches, LATTICE__F_I64),
    TRAINER_FIELD(seed, LATTICE__F_U64),
};
#undef TRAINER_FIELD
const lattice__fields lattice__trainer_fields = {
    trainer_fields, (int)(sizeof trainer_fields / sizeof trainer_fields[0])};

/* Settings whose difference would make one rank call the collective where
 * another does not (validation), and the teacher and loss. */
static void trainer_part(const lattice_trainer *t, int with_state, lattice__setup *s)
{
    lattice__fields_setup(&lattice__trainer_fields, &t->p, "", s);
    int kind;
    const uint64_t h = lattice__teacher_identity(t->teacher, &kind);
    SETUP_INT(s, kind, "teacher_kind"); /* 0 none, 1 a model, 2 a callback, 3 a file */
    if (t->teacher) {
        SETUP_INT(s, lattice_teacher_get_k(t->teacher), "teacher_k");
        SETUP_INT(s, lattice_teacher_get_vocab_size(t->teacher), "teacher_vocab_size");
        SETUP_HASH(s, h, "teacher_hash");
        lattice_distill_params kp;
        lattice_distill_params_init(&kp);
        lattice_distill_get_params(t->distill, &kp);
        SETUP_REAL(s, kp.alpha, "distill alpha");
        SETUP_REAL(s, kp.gamma, "distill gamma");
        SETUP_REAL(s, kp.tau, "distill tau");
        SETUP_INT(s, kp.direction, "distill direction");
    }
    if (with_state)
        SETUP_INT(s, t->applied_phase, "applied_phase");
}

int lattice__setup_of(lattice_trainer *t, int part, int with_state, lattice__setup *out)
{
    memset(out, 0, sizeof(*out));
    switch (part) {
    case LATTICE__PART_MODEL: lattice__model_setup(t->model, with_state, out); break;
    case LATTICE__PART_DATA:
        lattice__data_setup(t->data, out);
        if (with_state) { /* where the run stands in it, and where it began, are the trainer's */
            lattice__data_run run = {.have_origin = t->have_origin, .origin = t->data_origin};
            lattice_data_get_position(t->data, &run.pos);
            lattice__fields_setup(&lattice__data_position_fields, &run, "", out);
            SETUP_INT(out, run.have_origin, "has_origin");
            if (run.have_origin)
                lattice__fields_setup(&lattice__data_origin_fields, &run, "", out);
        }
        break;
    case LATTICE__PART_SCHEDULE: lattice__schedule_setup(t->schedule, with_state, out); break;
    case LATTICE__PART_OPTIM: lattice__optim_setup(t->optim, t->model, with_state, out); break;
    default: trainer_part(t, with_state, out); break;
    }
    return !out->failed;
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
        mine[p] = root[p] = lattice__setup_digest(&parts[p]);
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
