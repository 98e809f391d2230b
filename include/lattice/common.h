/**
 * @file common.h
 * @brief Status codes, version queries and the export macro shared by every object.
 */
#ifndef LATTICE_COMMON_H
#define LATTICE_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <lattice/version.h>

/**
 * @def LATTICE_API
 * @ingroup core
 * @brief Marks the functions the library exports: default visibility with GCC
 *        and Clang (the library hides everything else), dllexport/dllimport on
 *        Windows, where LATTICE_STATIC selects the static library.
 */
#if defined(_WIN32) && !defined(LATTICE_STATIC)
#  ifdef LATTICE_BUILDING
#    define LATTICE_API __declspec(dllexport)
#  else
#    define LATTICE_API __declspec(dllimport)
#  endif
#elif defined(__GNUC__)
#  define LATTICE_API __attribute__((visibility("default")))
#else
#  define LATTICE_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

/**
 * @defgroup core Core: status codes and versions
 *
 * Every function returns a ::lattice_status or a value that cannot fail.
 *
 * Thread safety: the library has no global state that needs a lock. Calls on
 * different handles may run concurrently on different threads, as long as the
 * handles share nothing they borrow: a model borrows its backend; an
 * optimizer, a model teacher and a diagnostics context borrow their model; a
 * trainer borrows everything it binds. So two threads that each train a model
 * each need their own backend, and everything above it. Calls on one handle,
 * or on handles that borrow the same one, must be serialised by the caller.
 * Functions that take no handle (::lattice_status_string, the version
 * queries, the `_init` functions of params structs, ::lattice_norm_placement_name,
 * ::lattice_diag_measure_loss_response, ::lattice_backend_has_blis) may be called from
 * any thread at any time. Callbacks (a callback teacher, the trainer's
 * ::lattice_trainer_metrics_fn, a custom backend's slots) run on the thread that made
 * the call, one at a time for a given handle; the library's own parallelism
 * (OpenMP, BLIS) stays inside each call.
 *
 * Structs that begin with `size_t size` (params, phases, results, the
 * operation tables) grow only at their end. The caller sets size to sizeof
 * the struct as it was compiled (the `_init` functions do). A size below the
 * 1.0 struct's size, as from a program built against a release before 1.0,
 * is refused with ::LATTICE_ERR_INVALID_ARGUMENT and a message naming both
 * sizes, and so is one above twice it (a size never set: no 1.x struct grows
 * that far); nothing is read or written then. Any size between is a program
 * built against 1.0 or a later header:
 * - where the library reads a struct (params, a phase), fields past the
 *   caller's size keep their defaults, and the bytes past this library's
 *   struct must be 0: a field of a later release that is set is a setting
 *   this library cannot honour, refused with ::LATTICE_ERR_INVALID_ARGUMENT
 *   rather than ignored. One whose `_init` sets fields but that is all 0
 *   past its size was never filled by it: refused as not initialised;
 * - an operation table's slots past this library's are never called;
 * - where the library fills a struct (results, the `_get_params` calls) it
 *   writes no more than the caller's size or its own, and sets size to the
 *   bytes written.
 * @{
 */

/** Size of the message buffers that create functions fill on failure. */
#define LATTICE_ERRMSG_SIZE 256

/** Result of a call. Values are pinned and never change meaning. */
typedef enum lattice_status {
    LATTICE_OK = 0,                  /**< Success. */
    LATTICE_ERR_INVALID_ARGUMENT = 1,/**< A NULL handle or pointer, or an argument out of range. */
    LATTICE_ERR_INVALID_CONFIG = 2,  /**< A configuration that cannot describe a valid object. */
    LATTICE_ERR_OUT_OF_MEMORY = 3,   /**< An allocation failed. */
    LATTICE_ERR_UNSUPPORTED = 4,     /**< The backend or build lacks the requested feature. */
    LATTICE_ERR_NOT_FOUND = 5,       /**< A named backend or item does not exist. */
    LATTICE_ERR_BACKEND = 6,         /**< A backend operation reported failure. */
    LATTICE_ERR_NON_FINITE = 7,      /**< A loss or gradient was NaN or infinite. */
    LATTICE_ERR_IO = 8,              /**< A file could not be read or written. */
    LATTICE_ERR_FORMAT = 9,          /**< A file's contents are malformed. */
    LATTICE_ERR_STATE = 10           /**< The call is not valid in the object's current state. */
} lattice_status;

/**
 * @brief A short, static English description of a status.
 * @param status Any value; unknown values give "unknown status".
 * @return A string that lives for the whole program.
 */
LATTICE_API const char *lattice_status_string(lattice_status status);

/**
 * @brief The library's version as MAJOR * 10000 + MINOR * 100 + PATCH.
 *
 * Compare with ::LATTICE_VERSION_NUMBER to check that header and library agree;
 * the same major version means a compatible ABI.
 * @return The run-time version number.
 */
LATTICE_API unsigned lattice_version_number(void);

/**
 * @brief The library's version as "MAJOR.MINOR.PATCH".
 * @return A static string.
 */
LATTICE_API const char *lattice_version_string(void);

/**
 * @brief Why the calling thread's latest failing call failed.
 *
 * Every call that returns a status other than ::LATTICE_OK records a
 * message here, with or without a handle; where the call has a handle with a message of its own
 * (::lattice_model_errmsg and the like) both hold the same text. The message
 * is per thread, so concurrent failures on different threads do not mix.
 *
 * Successful calls do not clear it: it is meaningful only right after a call
 * that failed, and after a success it may still describe an earlier failure.
 * @return A string owned by the library, valid on this thread until its next
 *         failing call; empty if no call on this thread has failed.
 * @since 0.2
 */
LATTICE_API const char *lattice_last_error(void);

/**
 * @brief Record a failure's reason as the calling thread's ::lattice_last_error().
 *
 * For libraries built on liblattice (liblattice-mpi) whose failures must
 * read the same way as the core library's; applications have no need of it.
 * @param message The reason; NULL records an empty message. Longer messages
 *        are cut to ::LATTICE_ERRMSG_SIZE - 1 bytes.
 * @since 0.3
 */
LATTICE_API void lattice_set_last_error(const char *message);

/** @} */

#ifdef __cplusplus
}
#endif

#endif
