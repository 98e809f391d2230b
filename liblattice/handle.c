/* Misuse detection shared by the handles (handle.h). */
#include "handle.h"

#include <stdio.h>

/* A value unique to each live thread: the address of its own variable. */
static uintptr_t thread_token(void)
{
    static _Thread_local char token;
    return (uintptr_t)&token;
}

lattice_status lattice__busy_enter(lattice_busy *b, const char *fn, const char *what)
{
    const uintptr_t self = thread_token();
    uintptr_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&b->owner, &expected, self, memory_order_acquire,
                                                memory_order_relaxed)) {
        if (b->hold) {
            const lattice_status st = lattice__hold_enter(b->hold, fn, "backend");
            if (st != LATTICE_OK) {
                /* this thread is inside: the handle's message is its own to write */
                if (b->err)
                    snprintf(b->err, LATTICE_ERRMSG_MAX, "%s", lattice_last_error());
                atomic_store_explicit(&b->owner, 0, memory_order_release);
                return st;
            }
        }
        b->depth = 1;
        atomic_store_explicit(&b->call, fn, memory_order_relaxed);
        return LATTICE_OK;
    }
    if (expected == self) { /* this thread's own nested call */
        b->depth++;
        return LATTICE_OK;
    }
    const char *inside = atomic_load_explicit(&b->call, memory_order_relaxed);
    return lattice__fail(LATTICE_ERR_STATE,
                         "%s: another thread is inside %s on this %s: calls on one %s (and on "
                         "the handles that borrow it) must not run at the same time; nothing "
                         "was done (doc/API.md, Handles and threads)",
                         fn, inside ? inside : "a call", what, what);
}

void lattice__busy_leave(lattice_busy *b)
{
    if (--b->depth > 0)
        return;
    if (b->hold)
        lattice__hold_leave(b->hold);
    atomic_store_explicit(&b->call, NULL, memory_order_relaxed);
    atomic_store_explicit(&b->owner, 0, memory_order_release);
}

/* One more in a count whose top bit (flag) refuses: 0 where it is set. */
static int count_one_more(_Atomic uint32_t *state, uint32_t flag)
{
    uint32_t v = atomic_load_explicit(state, memory_order_relaxed);
    do {
        if (v & flag)
            return 0;
    } while (!atomic_compare_exchange_weak_explicit(state, &v, v + 1, memory_order_acq_rel,
                                                    memory_order_relaxed));
    return 1;
}

lattice_status lattice__hold_enter(lattice_hold *h, const char *fn, const char *what)
{
    if (!count_one_more(&h->state, LATTICE__CHANGING))
        return lattice__fail(LATTICE_ERR_STATE,
                             "%s: another thread is changing this %s's settings: a %s must not "
                             "be changed while it is in use; nothing was done (doc/API.md, "
                             "Handles and threads)", fn, what, what);
    return LATTICE_OK;
}

void lattice__hold_leave(lattice_hold *h)
{
    atomic_fetch_sub_explicit(&h->state, 1, memory_order_release);
}

lattice_status lattice__hold_change(lattice_hold *h, const char *fn, const char *what)
{
    uint32_t expected = 0;
    if (atomic_compare_exchange_strong_explicit(&h->state, &expected, LATTICE__CHANGING,
                                                memory_order_acquire, memory_order_relaxed))
        return LATTICE_OK;
    if (expected & LATTICE__CHANGING)
        return lattice__fail(LATTICE_ERR_STATE,
                             "%s: another thread is changing this %s's settings; nothing was "
                             "done (doc/API.md, Handles and threads)", fn, what);
    return lattice__fail(LATTICE_ERR_STATE,
                         "%s: this %s is in use (%u call%s in flight: a model's pass, loss or "
                         "evaluation, or a GEMM): its settings change only between them; nothing "
                         "was done (doc/API.md, Handles and threads)",
                         fn, what, expected, expected == 1 ? "" : "s");
}

void lattice__hold_changed(lattice_hold *h)
{
    atomic_store_explicit(&h->state, 0, memory_order_release);
}

lattice_status lattice__borrow(lattice_borrow *b, const char *fn, const char *what)
{
    if (!count_one_more(&b->state, LATTICE__DOOMED))
        return lattice__fail(LATTICE_ERR_STATE,
                             "%s: the %s was destroyed (its destroy waits for its last "
                             "borrower): it cannot be bound again", fn, what);
    return LATTICE_OK;
}

int lattice__destroy_now(lattice_borrow *b, const char *fn, const char *what)
{
    const uint32_t v = atomic_fetch_or_explicit(&b->state, LATTICE__DOOMED, memory_order_acq_rel);
    if (v & LATTICE__DOOMED) { /* a second destroy of a deferred one: the first will free it */
        lattice__fail(LATTICE_ERR_STATE, "%s: the %s's destroy was already asked", fn, what);
        return 0;
    }
    const uint32_t n = v & ~LATTICE__DOOMED;
    if (n == 0)
        return 1;
    lattice__fail(LATTICE_ERR_STATE,
                  "%s: the %s is still borrowed by %u other handle%s (a trainer, teacher, "
                  "optimizer or diag bound to it): it stays usable by them and is freed when "
                  "the last of them is destroyed", fn, what, (unsigned)n, n == 1 ? "" : "s");
    return 0;
}

int lattice__unborrow(lattice_borrow *b)
{
    const uint32_t v = atomic_fetch_sub_explicit(&b->state, 1, memory_order_acq_rel);
    return v == (LATTICE__DOOMED | 1u);
}
