/* liblattice-mpi: the trainer's collective over an MPI communicator.
 * Floating-point sums have a fixed order (segments summed in rank order),
 * never the order an MPI_Allreduce happens to choose. */
#include <lattice/dist.h>

/* header-only parts (lattice__size_outside, the clock): this library links only the API */
#include "internal.h"
#include "profile.h"

#include <limits.h>
#include <stddef.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct lattice_dist {
    MPI_Comm comm;
    int rank, size;
    int *send_counts, *send_displs, *recv_counts, *recv_displs; /* [size] each */
    void *scratch; /* the segments gathered from every rank */
    size_t scratch_bytes;
    lattice_dist_stats stats;
    char err[LATTICE_ERRMSG_SIZE];
};

/* The 1.0 size of lattice_dist_stats (internal.h's floors). */
#define DIST_STATS_1_0 LATTICE__SIZE_1_0(lattice_dist_stats, other_seconds)

/* Elements per round of a sum: bounds the scratch (size * this / size
 * elements) and keeps every MPI count within an int. */
#define SUM_CHUNK ((size_t)1 << 22)

/* The message in the handle (when there is one) and in lattice_last_error(). */
__attribute__((format(printf, 3, 4)))
static lattice_status fail(lattice_dist *d, lattice_status st, const char *fmt, ...)
{
    char msg[LATTICE_ERRMSG_SIZE];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);
    if (d)
        memcpy(d->err, msg, strlen(msg) + 1);
    lattice_set_last_error(msg);
    return st;
}

static lattice_status mpi_fail(lattice_dist *d, const char *what, int rc)
{
    char text[MPI_MAX_ERROR_STRING];
    int len = 0;
    if (MPI_Error_string(rc, text, &len) != MPI_SUCCESS)
        snprintf(text, sizeof(text), "MPI error %d", rc);
    return fail(d, LATTICE_ERR_BACKEND, "rank %d of %d: %s failed: %s", d->rank, d->size, what,
                text);
}

lattice_status lattice_dist_create(MPI_Comm comm, lattice_dist **out)
{
    if (!out)
        return fail(NULL, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_create: invalid argument: out is NULL");
    *out = NULL;
    int initialised = 0, finalised = 0;
    MPI_Initialized(&initialised);
    MPI_Finalized(&finalised);
    if (!initialised || finalised)
        return fail(NULL, LATTICE_ERR_STATE,
                    "lattice_dist_create: MPI is %s: call MPI_Init (or MPI_Init_thread) before "
                    "creating a lattice_dist, and destroy it before MPI_Finalize",
                    finalised ? "already finalised" : "not initialised");
    if (comm == MPI_COMM_NULL)
        return fail(NULL, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_create: invalid argument: comm is MPI_COMM_NULL");
    /* an intercommunicator's size is its local group's, and its collectives
     * pair one group with the other: each rank would sum with no one */
    int inter = 0;
    if (MPI_Comm_test_inter(comm, &inter) == MPI_SUCCESS && inter)
        return fail(NULL, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_create: invalid argument: comm is an intercommunicator; the "
                    "ranks that train together are one group (an intracommunicator)");
    lattice_dist *d = calloc(1, sizeof(*d));
    if (!d)
        return fail(NULL, LATTICE_ERR_OUT_OF_MEMORY, "lattice_dist_create: out of memory");
    d->comm = MPI_COMM_NULL;
    int rc = MPI_Comm_dup(comm, &d->comm);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_set_errhandler(d->comm, MPI_ERRORS_RETURN);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_rank(d->comm, &d->rank);
    if (rc == MPI_SUCCESS)
        rc = MPI_Comm_size(d->comm, &d->size);
    if (rc != MPI_SUCCESS) {
        lattice_status st = mpi_fail(d, "lattice_dist_create: duplicating the communicator", rc);
        if (d->comm != MPI_COMM_NULL)
            MPI_Comm_free(&d->comm);
        free(d);
        return st;
    }
    const size_t n = (size_t)d->size;
    d->send_counts = malloc(4 * n * sizeof(int));
    /* The scratch of the largest round, allocated now: a sum that ran out of
     * memory on one rank only would leave the others waiting in its
     * MPI_Alltoallv. (Pages are touched only as large rounds use them.) */
    d->scratch_bytes = (SUM_CHUNK + n - 1) / n * n * sizeof(double);
    d->scratch = malloc(d->scratch_bytes);
    if (!d->send_counts || !d->scratch) {
        free(d->send_counts);
        free(d->scratch);
        MPI_Comm_free(&d->comm);
        free(d);
        return fail(NULL, LATTICE_ERR_OUT_OF_MEMORY, "lattice_dist_create: out of memory");
    }
    d->send_displs = d->send_counts + n;
    d->recv_counts = d->send_displs + n;
    d->recv_displs = d->recv_counts + n;
    d->stats.size = sizeof(d->stats);
    *out = d;
    return LATTICE_OK;
}

void lattice_dist_destroy(lattice_dist *d)
{
    if (!d)
        return;
    int finalised = 0;
    MPI_Finalized(&finalised);
    if (!finalised)
        MPI_Comm_free(&d->comm);
    free(d->send_counts);
    free(d->scratch);
    free(d);
}

const char *lattice_dist_errmsg(const lattice_dist *d)
{
    return d ? d->err : "no lattice_dist (NULL handle)";
}

int lattice_dist_get_rank(const lattice_dist *d) { return d ? d->rank : 0; }
int lattice_dist_get_size(const lattice_dist *d) { return d ? d->size : 0; }

/* Segment s of a round of n elements: the first n % size segments hold one more. */
static size_t seg_len(const lattice_dist *d, size_t n, int s)
{
    return n / (size_t)d->size + ((size_t)s < n % (size_t)d->size);
}

static size_t seg_off(const lattice_dist *d, size_t n, int s)
{
    const size_t extra = n % (size_t)d->size;
    return (size_t)s * (n / (size_t)d->size) + ((size_t)s < extra ? (size_t)s : extra);
}

/* One round of a fixed-order sum of n (<= SUM_CHUNK) floats or doubles in place. */
static lattice_status sum_round(lattice_dist *d, void *data, size_t n, int is_double)
{
    const size_t esize = is_double ? sizeof(double) : sizeof(float);
    const MPI_Datatype type = is_double ? MPI_DOUBLE : MPI_FLOAT;
    const size_t mine = seg_len(d, n, d->rank), my_off = seg_off(d, n, d->rank);
    const size_t need = mine * (size_t)d->size * esize;
    if (need > d->scratch_bytes) /* cannot happen: n <= SUM_CHUNK */
        return fail(d, LATTICE_ERR_STATE, "rank %d: a sum round of %zu bytes exceeds the %zu-byte "
                    "scratch", d->rank, need, d->scratch_bytes);
    /* rank s receives segment s of every rank's vector, in rank order */
    for (int s = 0; s < d->size; s++) {
        d->send_counts[s] = (int)seg_len(d, n, s);
        d->send_displs[s] = (int)seg_off(d, n, s);
        d->recv_counts[s] = (int)mine;
        d->recv_displs[s] = (int)(mine * (size_t)s);
    }
    int rc = MPI_Alltoallv(data, d->send_counts, d->send_displs, type, d->scratch,
                           d->recv_counts, d->recv_displs, type, d->comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(d, "MPI_Alltoallv", rc);
    /* the contributions added in rank order 0 .. size-1, whatever MPI did */
    if (is_double) {
        const double *in = d->scratch;
        double *out = (double *)data + my_off;
        for (size_t i = 0; i < mine; i++) {
            double acc = in[i];
            for (int s = 1; s < d->size; s++)
                acc += in[(size_t)s * mine + i];
            out[i] = acc;
        }
    } else {
        const float *in = d->scratch;
        float *out = (float *)data + my_off;
        for (size_t i = 0; i < mine; i++) {
            double acc = in[i];
            for (int s = 1; s < d->size; s++)
                acc += in[(size_t)s * mine + i];
            out[i] = (float)acc;
        }
    }
    rc = MPI_Allgatherv(MPI_IN_PLACE, 0, MPI_DATATYPE_NULL, data, d->send_counts,
                        d->send_displs, type, d->comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(d, "MPI_Allgatherv", rc);
    return LATTICE_OK;
}

/* MPI may not be called after MPI_Finalize (Open MPI aborts the job): the
 * handle's collectives refuse instead. */
static lattice_status alive(lattice_dist *d, const char *what)
{
    int finalised = 0;
    MPI_Finalized(&finalised);
    return finalised ? fail(d, LATTICE_ERR_STATE,
                            "%s: MPI is already finalised: destroy the handle before MPI_Finalize",
                            what)
                     : LATTICE_OK;
}

/* Every rank must pass the same count: with fewer on one rank, the others'
 * values met its stale scratch and came back with LATTICE_OK. One small
 * collective first, so every rank refuses together. */
static lattice_status same_count(lattice_dist *d, size_t count, const char *what)
{
    int64_t span[2] = {(int64_t)count, -(int64_t)count}; /* the largest, minus the smallest */
    const int rc = MPI_Allreduce(MPI_IN_PLACE, span, 2, MPI_INT64_T, MPI_MAX, d->comm);
    if (rc != MPI_SUCCESS)
        return mpi_fail(d, "MPI_Allreduce", rc);
    if (span[0] != -span[1])
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "%s: invalid argument: the ranks pass different counts (%lld to %lld; this "
                    "rank %zu): every rank sums as many values",
                    what, (long long)-span[1], (long long)span[0], count);
    return LATTICE_OK;
}

static lattice_status fixed_sum(lattice_dist *d, void *data, size_t count, int is_double)
{
    const char *what = is_double ? "a sum of doubles over ranks" : "a sum of floats over ranks";
    TRY(alive(d, what));
    if (d->size == 1)
        return LATTICE_OK;
    TRY(same_count(d, count, what));
    const size_t esize = is_double ? sizeof(double) : sizeof(float);
    const double t0 = lattice__prof_clock(LATTICE_PROF_WALL);
    lattice_status st = LATTICE_OK;
    for (size_t done = 0; done < count && st == LATTICE_OK; done += SUM_CHUNK) {
        const size_t n = count - done < SUM_CHUNK ? count - done : SUM_CHUNK;
        st = sum_round(d, (char *)data + done * esize, n, is_double);
    }
    d->stats.sum_calls++;
    d->stats.sum_bytes += (int64_t)(count * esize);
    d->stats.sum_seconds += lattice__prof_clock(LATTICE_PROF_WALL) - t0;
    return st;
}

/* The public sums' one argument check; fn names the caller in the message. */
static lattice_status check_sum_args(lattice_dist *d, const void *values, size_t count,
                                     const char *fn)
{
    if (!d)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT, "%s: invalid argument: dist is NULL", fn);
    if (!values && count)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "%s: invalid argument: values is NULL but count is %zu", fn, count);
    return LATTICE_OK;
}

lattice_status lattice_dist_sum_floats(lattice_dist *d, float *values, size_t count)
{
    const lattice_status st = check_sum_args(d, values, count, "lattice_dist_sum_floats");
    return st != LATTICE_OK ? st : fixed_sum(d, values, count, 0);
}

lattice_status lattice_dist_sum_doubles(lattice_dist *d, double *values, size_t count)
{
    const lattice_status st = check_sum_args(d, values, count, "lattice_dist_sum_doubles");
    return st != LATTICE_OK ? st : fixed_sum(d, values, count, 1);
}

lattice_status lattice_dist_sum_int64(lattice_dist *d, int64_t *values, size_t count)
{
    lattice_status st = check_sum_args(d, values, count, "lattice_dist_sum_int64");
    if (st != LATTICE_OK)
        return st;
    TRY(alive(d, "lattice_dist_sum_int64"));
    if (d->size == 1)
        return LATTICE_OK;
    TRY(same_count(d, count, "lattice_dist_sum_int64"));
    const double t0 = lattice__prof_clock(LATTICE_PROF_WALL);
    /* integer addition is exact in any order: MPI's own reduction will do */
    for (size_t done = 0; done < count && st == LATTICE_OK; done += INT_MAX) {
        const size_t n = count - done < INT_MAX ? count - done : INT_MAX;
        const int rc = MPI_Allreduce(MPI_IN_PLACE, values + done, (int)n, MPI_INT64_T, MPI_SUM,
                                     d->comm);
        if (rc != MPI_SUCCESS)
            st = mpi_fail(d, "MPI_Allreduce", rc);
    }
    d->stats.other_calls++;
    d->stats.other_seconds += lattice__prof_clock(LATTICE_PROF_WALL) - t0;
    return st;
}

static lattice_status barrier(lattice_dist *d)
{
    TRY(alive(d, "a barrier over ranks"));
    const double t0 = lattice__prof_clock(LATTICE_PROF_WALL);
    const int rc = MPI_Barrier(d->comm);
    d->stats.other_calls++;
    d->stats.other_seconds += lattice__prof_clock(LATTICE_PROF_WALL) - t0;
    return rc == MPI_SUCCESS ? LATTICE_OK : mpi_fail(d, "MPI_Barrier", rc);
}

static lattice_status broadcast(lattice_dist *d, void *data, size_t bytes, int root)
{
    if (root < 0 || root >= d->size)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT, "broadcast: root %d is not a rank of %d", root,
                    d->size);
    TRY(alive(d, "a broadcast over ranks"));
    const double t0 = lattice__prof_clock(LATTICE_PROF_WALL);
    lattice_status st = LATTICE_OK;
    for (size_t done = 0; done < bytes && st == LATTICE_OK; done += INT_MAX) {
        const size_t n = bytes - done < INT_MAX ? bytes - done : INT_MAX;
        const int rc = MPI_Bcast((char *)data + done, (int)n, MPI_BYTE, root, d->comm);
        if (rc != MPI_SUCCESS)
            st = mpi_fail(d, "MPI_Bcast", rc);
    }
    d->stats.other_calls++;
    d->stats.other_seconds += lattice__prof_clock(LATTICE_PROF_WALL) - t0;
    return st;
}

/* The trainer's table: slots return the status (0 is LATTICE_OK). */
static int op_rank(void *user) { return ((lattice_dist *)user)->rank; }
static int op_n_ranks(void *user) { return ((lattice_dist *)user)->size; }
static int op_sum_floats(void *user, float *data, size_t count)
{
    return (int)fixed_sum(user, data, count, 0);
}
static int op_sum_doubles(void *user, double *data, size_t count)
{
    return (int)fixed_sum(user, data, count, 1);
}
static int op_sum_int64(void *user, int64_t *data, size_t count)
{
    return (int)lattice_dist_sum_int64(user, data, count);
}
static int op_barrier(void *user) { return (int)barrier(user); }
static int op_broadcast(void *user, void *data, size_t bytes, int root)
{
    return (int)broadcast(user, data, bytes, root);
}
static const char *op_errmsg(void *user) { return ((lattice_dist *)user)->err; }

static const lattice_trainer_collective dist_ops = {
    .size = sizeof(lattice_trainer_collective),
    .rank = op_rank,
    .n_ranks = op_n_ranks,
    .sum_floats = op_sum_floats,
    .sum_doubles = op_sum_doubles,
    .sum_int64 = op_sum_int64,
    .barrier = op_barrier,
    .broadcast = op_broadcast,
    .errmsg = op_errmsg,
};

lattice_status lattice_dist_attach(lattice_dist *d, lattice_trainer *t)
{
    if (!d || !t)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT, "lattice_dist_attach: invalid argument: %s is NULL",
                    !d ? "dist" : "trainer");
    const lattice_status st = lattice_trainer_set_collective(t, &dist_ops, d);
    if (st != LATTICE_OK)
        return fail(d, st, "%s", lattice_trainer_errmsg(t));
    return LATTICE_OK;
}

lattice_status lattice_dist_trainer_params(lattice_dist *d, lattice_trainer_params *params)
{
    if (!d || !params)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_trainer_params: invalid argument: %s is NULL",
                    !d ? "dist" : "params");
    char msg[LATTICE_ERRMSG_SIZE];
    if (lattice__size_outside(msg, sizeof msg, "lattice_dist_trainer_params", "params->size",
                              "lattice_trainer_params", params->size,
                              LATTICE__TRAINER_PARAMS_1_0))
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT, "%s (lattice_trainer_params_init sets it)",
                    msg);
    params->collective = &dist_ops;
    params->collective_user = d;
    return LATTICE_OK;
}

lattice_status lattice_dist_detach(lattice_dist *d, lattice_trainer *t)
{
    if (!d || !t)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT, "lattice_dist_detach: invalid argument: %s is NULL",
                    !d ? "dist" : "trainer");
    const lattice_status st = lattice_trainer_set_collective(t, NULL, NULL);
    if (st != LATTICE_OK)
        return fail(d, st, "%s", lattice_trainer_errmsg(t));
    return LATTICE_OK;
}

lattice_status lattice_dist_allreduce_gradients(lattice_dist *d, lattice_model *model, double weight)
{
    if (!d || !model)
        return fail(d, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_allreduce_gradients: invalid argument: %s is NULL",
                    !d ? "dist" : "model");
    const lattice_status st =
        lattice_trainer_collective_reduce_gradients(&dist_ops, d, model, weight);
    if (st != LATTICE_OK)
        return fail(d, st, "%s", lattice_last_error());
    return LATTICE_OK;
}

lattice_status lattice_dist_get_stats(const lattice_dist *d, lattice_dist_stats *stats)
{
    if (!d || !stats)
        return fail((lattice_dist *)d, LATTICE_ERR_INVALID_ARGUMENT,
                    "lattice_dist_get_stats: invalid argument: %s is NULL", !d ? "dist" : "stats");
    char msg[LATTICE_ERRMSG_SIZE];
    if (lattice__size_outside(msg, sizeof msg, "lattice_dist_get_stats", "stats->size",
                              "lattice_dist_stats", stats->size, DIST_STATS_1_0))
        return fail((lattice_dist *)d, LATTICE_ERR_INVALID_ARGUMENT, "%s", msg);
    const size_t n = stats->size < sizeof(d->stats) ? stats->size : sizeof(d->stats);
    memcpy(stats, &d->stats, n);
    stats->size = n;
    return LATTICE_OK;
}

void lattice_dist_reset_stats(lattice_dist *d)
{
    if (!d)
        return;
    memset(&d->stats, 0, sizeof(d->stats));
    d->stats.size = sizeof(d->stats);
}
