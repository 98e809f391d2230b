/* Misuse detection shared by the handles (issue 38): a call on a handle that
 * another thread is inside, and the destroy of a handle that another still
 * borrows. Neither is allowed (doc/API.md, "Handles and threads"); both used
 * to end in silently wrong numbers, a use-after-free or a hang. */
#ifndef LATTICE_HANDLE_H
#define LATTICE_HANDLE_H

#include "internal.h"

#include <stdatomic.h>
#include <stdint.h>

/* The calls in flight on a handle that many others use at once (a backend:
 * its models' calls and its own GEMMs), and whether a change to it is under
 * way, in one word. A change (the backend's setters) is refused while any
 * call is in flight, and calls are refused while a change runs: a change
 * never lands inside a call (a bf16 cache freed under its GEMMs, a trainer
 * step's forward and backward on two attention kernels). A model's
 * outermost call holds its backend: one more compare-and-swap loop on entry
 * and a subtraction on exit. */
typedef struct lattice_hold {
    _Atomic uint32_t state; /* LATTICE__CHANGING | calls in flight */
} lattice_hold;

#define LATTICE__CHANGING 0x80000000u

/* A call (fn) on a handle that uses the held one (what names it: "backend")
 * starts, or is refused while a change runs. Every LATTICE_OK is paired with
 * one lattice__hold_leave. */
lattice_status lattice__hold_enter(lattice_hold *h, const char *fn, const char *what);
void lattice__hold_leave(lattice_hold *h);

/* A change (fn) to the held handle starts, or is refused while a call is in
 * flight; every LATTICE_OK is paired with one lattice__hold_changed. */
lattice_status lattice__hold_change(lattice_hold *h, const char *fn, const char *what);
void lattice__hold_changed(lattice_hold *h);

/* Which thread is inside a call on a handle, as sqlite's misuse check does
 * for a connection: one compare-and-swap on entry, one store on exit, per
 * call (never per op). The owner's own nested calls go through, so that a
 * trainer's step may call the model and a callback of the step may evaluate
 * or save on its trainer. Another thread's call is refused with
 * LATTICE_ERR_STATE, its message in lattice_last_error() only: the handle's
 * own message belongs to the thread inside it. */
typedef struct lattice_busy {
    _Atomic uintptr_t owner;     /* lattice__thread_token() of the thread inside, 0: none */
    int depth;                   /* its nested calls; only the owner touches it */
    _Atomic(const char *) call;  /* its outermost call, for the refusal's message */
    lattice_hold *hold;          /* held too while a thread is inside (a model: its backend's) */
    char *err;                   /* the handle's own message (LATTICE_ERRMSG_MAX), NULL: none;
                                  * a refusal by hold, made while this thread is inside, is
                                  * written there too */
} lattice_busy;

/* Enter call fn on the handle (what names it: "model"); LATTICE_OK or the
 * refusal. Every LATTICE_OK is paired with one lattice__busy_leave. */
lattice_status lattice__busy_enter(lattice_busy *b, const char *fn, const char *what);
void lattice__busy_leave(lattice_busy *b);

/* Return expr (a call's body, a lattice_status) run inside the busy section
 * of handle h (a pointer to a struct with a lattice_busy busy; const or not),
 * or the refusal. A NULL h runs expr alone, which refuses the NULL handle. */
#define LATTICE__INSIDE(h, fn, what, expr)                                                         \
    LATTICE__INSIDE_BUSY((h) ? (lattice_busy *)&(h)->busy : NULL, fn, what, expr)

/* The same, given the handle's busy word (NULL: no handle), for an object
 * whose body another file does not see (lattice__model_busy). */
#define LATTICE__INSIDE_BUSY(busy, fn, what, expr)                                                 \
    do {                                                                                           \
        lattice_busy *busy_ = (busy);                                                              \
        if (!busy_)                                                                                \
            return (expr);                                                                         \
        lattice_status inside_st_ = lattice__busy_enter(busy_, (fn), (what));                      \
        if (inside_st_ != LATTICE_OK)                                                              \
            return inside_st_;                                                                     \
        inside_st_ = (expr);                                                                       \
        lattice__busy_leave(busy_);                                                                \
        return inside_st_;                                                                         \
    } while (0)

/* The borrowers of a handle and whether its destroy was asked, in one word
 * so that a destroy and the last borrower's release, on two threads, agree on
 * which of them frees it. A handle that is borrowed (a model by its teacher,
 * optimizer, diag and trainer; a teacher, distill loss, data, optimizer and
 * schedule by their trainer) is not freed by its destroy: the destroy is
 * deferred, and the last borrower's destroy completes it. */
typedef struct lattice_borrow {
    _Atomic uint32_t state; /* LATTICE__DOOMED | number of borrowers */
} lattice_borrow;

#define LATTICE__DOOMED 0x80000000u

/* Add a borrower. LATTICE_ERR_STATE (message naming fn and what) when the
 * handle's destroy was already asked: it must not be bound again. */
lattice_status lattice__borrow(lattice_borrow *b, const char *fn, const char *what);

/* Whether a destroy asked by the caller (fn) frees the handle now: 0 when it
 * is borrowed, the destroy then deferred and said in lattice_last_error(). */
int lattice__destroy_now(lattice_borrow *b, const char *fn, const char *what);

/* Drop a borrower; non-zero when it was the last one of a handle whose
 * destroy was asked: the caller frees it. */
int lattice__unborrow(lattice_borrow *b);

/* The destroy, borrow and unborrow of handle type T (a struct with a
 * lattice_borrow borrow) called NAME: lattice_NAME_destroy (deferred while
 * borrowed), lattice__NAME_borrow and lattice__NAME_unborrow (the last
 * borrower of a destroyed handle frees it with free_fn); what names it in
 * messages ("distill loss"). */
#define LATTICE__BORROWABLE(T, NAME, what, free_fn)                                                \
    void lattice_##NAME##_destroy(T *h)                                                            \
    {                                                                                              \
        if (h && lattice__destroy_now(&h->borrow, "lattice_" #NAME "_destroy", what))              \
            free_fn(h);                                                                            \
    }                                                                                              \
    lattice_status lattice__##NAME##_borrow(T *h, const char *fn)                                  \
    {                                                                                              \
        return lattice__borrow(&h->borrow, fn, what);                                              \
    }                                                                                              \
    void lattice__##NAME##_unborrow(T *h)                                                          \
    {                                                                                              \
        if (h && lattice__unborrow(&h->borrow))                                                    \
            free_fn(h);                                                                            \
    }

#endif
