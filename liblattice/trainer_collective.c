/* The trainer over ranks: attaching a collective, agreeing on a status,
 * each rank's share of a batch, and the sums of the gradients and losses. */
#include "trainer_impl.h"

#include "setup.h"

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

lattice_status lattice_trainer_set_collective(lattice_trainer *t,
                                              const lattice_trainer_collective *ops, void *user)
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
    if (ops->size < sizeof(c))
        return lattice__size_refused(t->err, "lattice_trainer_set_collective", "ops->size",
                                     "lattice_trainer_collective", ops->size, sizeof(c));
    /* ours, or a newer caller's (the slots past ours are not read) */
    memcpy(&c, ops, sizeof(c));
    c.size = sizeof(c);
    const char *missing = !c.rank          ? "rank"
                          : !c.n_ranks     ? "n_ranks"
                          : !c.sum_floats  ? "sum_floats"
                          : !c.sum_doubles ? "sum_doubles"
                          : !c.sum_int64   ? "sum_int64"
                          : !c.barrier     ? "barrier"
                          : !c.broadcast   ? "broadcast"
                                           : NULL;
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

lattice_status lattice_trainer_collective_reduce_gradients(const lattice_trainer_collective *ops,
                                                           void *user, lattice_model *model,
                                                           double weight)
{
    static const char fn[] = "lattice_trainer_collective_reduce_gradients";
    if (lattice__need(NULL, fn, 2, (const void *)ops, "ops", (const void *)model, "model") !=
        LATTICE_OK)
        return LATTICE_ERR_INVALID_ARGUMENT;
    if (ops->size < sizeof(*ops))
        return lattice__size_refused(NULL, fn, "ops->size", "lattice_trainer_collective", ops->size,
                                     sizeof(*ops));
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
