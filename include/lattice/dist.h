/**
 * @file dist.h
 * @brief Data-parallel training over MPI (liblattice-mpi, lattice-mpi.pc).
 *
 * The only public header that includes mpi.h. It is installed with
 * liblattice-mpi, which is built when MPI is found; lattice.h does not
 * include it, so programs that do not use MPI never see it. Link with
 * `pkg-config --cflags --libs lattice-mpi`.
 */
#ifndef LATTICE_DIST_H
#define LATTICE_DIST_H

/* From C++, Open MPI's and MPICH's mpi.h would pull in their deprecated C++
 * bindings, which live in a library (libmpi_cxx) that liblattice-mpi's
 * pkg-config and CMake files do not link: this header uses the C API only. */
#if defined(__cplusplus) && !defined(OMPI_SKIP_MPICXX)
#define OMPI_SKIP_MPICXX 1
#endif
#if defined(__cplusplus) && !defined(MPICH_SKIP_MPICXX)
#define MPICH_SKIP_MPICXX 1
#endif
#include <mpi.h>

#include <lattice/lattice.h>

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup dist Data-parallel training (MPI)
 *
 * A ::lattice_dist wraps a duplicate of an MPI communicator and implements
 * the trainer's ::lattice_trainer_collective over it. Attach it to a trainer
 * (::lattice_dist_attach) and every rank trains on its share of each global
 * batch, with gradients, losses, validation and counters summed over ranks;
 * see ::lattice_trainer_set_collective for what happens when. For a loop of
 * your own, ::lattice_dist_allreduce_gradients and the scalar sums do the
 * same pieces by hand.
 *
 * Sums of floating-point values have a fixed order: each rank owns a
 * contiguous segment of the vector, gathers that segment from every rank,
 * adds the contributions in rank order 0, 1, ..., N-1 (in double precision),
 * and the summed segments are then gathered by every rank. Two runs with the
 * same number of ranks are therefore bit-identical, whichever algorithms the
 * MPI library picks; runs with different rank counts agree to rounding.
 * Integer sums are exact and use MPI_Allreduce.
 *
 * MPI errors on the handle's communicator return rather than abort
 * (MPI_ERRORS_RETURN), and become ::LATTICE_ERR_BACKEND with MPI's own
 * message. A rank that dies is another matter: Open MPI's mpirun then ends
 * the whole job. Checkpoints are written atomically by rank 0, so the last
 * one written stays whole (see ::lattice_trainer_save_checkpoint).
 *
 * A handle is used by one thread at a time; every call on it that
 * communicates is collective over its communicator.
 * @{
 */

/** An MPI communicator in the trainer's terms. @since 0.3 */
typedef struct lattice_dist lattice_dist;

/** What a handle's collective calls cost, for benchmarks. @since 0.3 */
typedef struct lattice_dist_stats {
    size_t size;             /**< Set by the caller to sizeof(lattice_dist_stats); on return, the bytes filled. @since 0.3 */
    int64_t sum_calls;       /**< Sums of floats or doubles made (gradients, losses, validation). @since 0.3 */
    int64_t sum_bytes;       /**< Bytes those sums covered (on this rank). @since 0.3 */
    double sum_seconds;      /**< Wall time spent in them. @since 0.3 */
    int64_t other_calls;     /**< Integer sums, barriers and broadcasts made. @since 0.3 */
    double other_seconds;    /**< Wall time spent in them. @since 0.3 */
} lattice_dist_stats;

/**
 * @brief Create a handle over a duplicate of comm.
 *
 * MPI must be initialised (MPI_Init or MPI_Init_thread) and not finalised;
 * the call is collective over comm (MPI_Comm_dup). Destroy the handle before
 * MPI_Finalize.
 * @param comm The communicator of the ranks that train together (often
 *        MPI_COMM_WORLD).
 * @param[out] out The new handle, or NULL on failure.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (out NULL, comm
 *         MPI_COMM_NULL or an intercommunicator), ::LATTICE_ERR_STATE (MPI not initialised, or
 *         already finalised), ::LATTICE_ERR_BACKEND (an MPI call failed) or
 *         ::LATTICE_ERR_OUT_OF_MEMORY.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_create(MPI_Comm comm, lattice_dist **out);

/**
 * @brief Free the handle and its communicator (collective). NULL is ignored.
 * @param dist The handle.
 * @since 0.3
 */
LATTICE_API void lattice_dist_destroy(lattice_dist *dist);

/**
 * @brief The message of the last failed call on the handle ("" if none).
 * @param dist The handle; NULL gives a static message.
 * @return A string valid until the next call on the handle.
 * @since 0.3
 */
LATTICE_API const char *lattice_dist_errmsg(const lattice_dist *dist);

/**
 * @brief This process's rank in the handle's communicator.
 * @param dist The handle; NULL gives 0.
 * @return The rank.
 * @since 0.3
 */
LATTICE_API int lattice_dist_get_rank(const lattice_dist *dist);

/**
 * @brief The number of ranks.
 * @param dist The handle; NULL gives 0.
 * @return The rank count.
 * @since 0.3
 */
LATTICE_API int lattice_dist_get_size(const lattice_dist *dist);

/**
 * @brief Make a trainer data-parallel over the handle's ranks.
 *
 * ::lattice_trainer_set_collective with this handle's operations: call it on
 * every rank, each with a trainer bound to identically configured objects
 * (the ranks check that they are: the call is collective).
 * The handle must outlive the attachment.
 * @param dist The handle.
 * @param trainer The trainer.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT, or
 *         ::LATTICE_ERR_INVALID_CONFIG (the data's batch_size does not divide
 *         by the rank count, a share exceeds the model's max_batch, or a
 *         rank's model, data, schedule, optimizer or trainer settings
 *         differ from rank 0's, refused on every rank with the first
 *         differing field named); the reason is in both handles' messages.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_attach(lattice_dist *dist, lattice_trainer *trainer);

/**
 * @brief Name the handle as the collective of trainer params, for ::lattice_trainer_create.
 *
 * The same as attaching after creation, except that the trainer's batch is
 * then checked against the model per rank: a model needs max_batch rows for
 * one rank's share only (batch_size / ranks), not for the whole batch.
 * @param dist The handle (must outlive the trainer).
 * @param[in,out] params Filled by ::lattice_trainer_params_init (a size
 *        below the 1.0 struct's size is refused); its collective fields are
 *        set.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_trainer_params(lattice_dist *dist,
                                                       lattice_trainer_params *params);

/**
 * @brief Let a trainer run alone again (::lattice_trainer_set_collective with NULL).
 * @param dist The handle it was attached to.
 * @param trainer The trainer.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT or
 *         ::LATTICE_ERR_INVALID_CONFIG (its model holds only this rank's share
 *         of the batch: alone it could not train; the reason in the handle's
 *         message too).
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_detach(lattice_dist *dist, lattice_trainer *trainer);

/**
 * @brief For a hand-written loop: weight a model's gradients and sum them over ranks.
 *
 * Call on every rank after its backward. With weight = this rank's counted
 * tokens / all ranks' counted tokens (sum the counts with
 * ::lattice_dist_sum_int64), every rank ends with the gradient of the
 * global mean loss, ready for ::lattice_optim_step. Only the gradients the
 * optimizer reads (trainable groups, active layers) are summed.
 * @param dist The handle.
 * @param model The model, after backward.
 * @param weight Multiplies this rank's gradients before the sum.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (also on every rank when
 *         the ranks' models sum different counts), ::LATTICE_ERR_STATE (after
 *         MPI_Finalize, or another thread inside a call on the model: nothing
 *         summed) or ::LATTICE_ERR_BACKEND.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_allreduce_gradients(lattice_dist *dist, lattice_model *model,
                                                            double weight);

/**
 * @brief Replace values on every rank by their sum over ranks (fixed order).
 * @param dist The handle.
 * @param[in,out] values count floats.
 * @param count How many (0 is allowed); the same on every rank.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (values NULL with a
 *         count, or, on every rank, counts that differ between ranks: nothing
 *         summed), ::LATTICE_ERR_STATE (after MPI_Finalize) or
 *         ::LATTICE_ERR_BACKEND.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_sum_floats(lattice_dist *dist, float *values, size_t count);

/**
 * @brief The same for doubles (loss sums, for instance).
 * @param dist The handle.
 * @param[in,out] values count doubles.
 * @param count How many (0 is allowed); the same on every rank.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (values NULL with a
 *         count, or, on every rank, counts that differ between ranks: nothing
 *         summed), ::LATTICE_ERR_STATE (after MPI_Finalize) or
 *         ::LATTICE_ERR_BACKEND.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_sum_doubles(lattice_dist *dist, double *values, size_t count);

/**
 * @brief The same for 64-bit integers (token counts, for instance).
 * @param dist The handle.
 * @param[in,out] values count integers.
 * @param count How many (0 is allowed); the same on every rank.
 * @return ::LATTICE_OK, ::LATTICE_ERR_INVALID_ARGUMENT (values NULL with a
 *         count, or, on every rank, counts that differ between ranks: nothing
 *         summed), ::LATTICE_ERR_STATE (after MPI_Finalize) or
 *         ::LATTICE_ERR_BACKEND.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_sum_int64(lattice_dist *dist, int64_t *values, size_t count);

/**
 * @brief What the handle's collective calls have cost since creation or the last reset.
 * @param dist The handle.
 * @param[in,out] stats size set by the caller to sizeof(lattice_dist_stats)
 *        (a size below the 1.0 struct's is refused); on return, the bytes
 *        filled.
 * @return ::LATTICE_OK or ::LATTICE_ERR_INVALID_ARGUMENT.
 * @since 0.3
 */
LATTICE_API lattice_status lattice_dist_get_stats(const lattice_dist *dist, lattice_dist_stats *stats);

/**
 * @brief Set the handle's statistics back to zero. NULL is ignored.
 * @param dist The handle.
 * @since 0.3
 */
LATTICE_API void lattice_dist_reset_stats(lattice_dist *dist);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
