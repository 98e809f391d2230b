"""Handles: Python objects that own a C object, and the rules for freeing it."""

import ctypes

from ._errors import ClosedError, raise_for
from ._lib import last_error, lib, status_string


class Resource:
    """One C object and what it needs alive: the objects it borrows, callbacks.

    The C object is destroyed when the last Python reference to its Resource
    goes: the Handle's (dropped by close() or garbage collection), a borrower's
    (a model's Resource holds its backend's), or a view's (arrays returned over
    the object's memory hold it). Borrowers are also counted, so that even when
    a reference cycle is collected and finalisers run in any order, a borrowed
    object outlives those that borrow it.
    """

    __slots__ = ("ptr", "_destroy", "_borrows", "_users", "_wanted", "keep", "__weakref__")

    def __init__(self, ptr, destroy, borrows=(), keep=()):
        self.ptr = ptr
        self._destroy = destroy
        self._borrows = tuple(borrows)
        self._users = 0
        self._wanted = False
        self.keep = tuple(keep)  # ctypes callbacks the C object calls
        for b in self._borrows:
            b._users += 1

    def _free_if_unused(self):
        if self._wanted and self._users == 0 and self.ptr is not None:
            ptr, self.ptr = self.ptr, None
            self._destroy(ptr)
            borrows, self._borrows = self._borrows, ()
            self.keep = ()
            for b in borrows:
                b._users -= 1
                b._free_if_unused()

    def __del__(self):
        self._wanted = True
        self._free_if_unused()


class Handle:
    """Base of the object classes: close(), ``with``, and checked calls.

    close() releases this handle; the C object goes as soon as nothing still
    needs it (an object that borrows it, or an array returned over its memory).
    Closing twice does nothing; any other call on a closed handle raises
    :class:`ClosedError`.
    """

    _destroy = None  # name of the C destroy function
    _errmsg = None   # name of the C errmsg function, where the object has one
    _res = None

    def _adopt(self, ptr, borrows=(), keep=()):
        self._res = Resource(ptr, getattr(lib, self._destroy),
                             [h._resource for h in borrows if h is not None], keep)

    @property
    def _resource(self):
        res = self._res
        if res is None:
            raise ClosedError(f"{type(self).__name__} is closed")
        return res

    @property
    def _ptr(self):
        return self._resource.ptr

    @property
    def closed(self):
        return self._res is None

    def close(self):
        self._res = None

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __repr__(self):
        state = "closed" if self.closed else f"at {ctypes.addressof(self._ptr.contents):#x}"
        return f"<lattice.{type(self).__name__} {state}>"

    def _message(self, ptr):
        return getattr(lib, self._errmsg)(ptr).decode(errors="replace") if self._errmsg else ""

    def _call(self, fn, *args):
        """Call fn(handle, *args); raise LatticeError with the handle's message on failure."""
        ptr = self._ptr
        # The message buffer keeps the last failure's text, and not every
        # failing path rewrites it: a message that changed during this call is
        # about it; an unchanged one may be (the same failure again) or may be
        # left from an earlier call, and is given as such.
        before = self._message(ptr) if self._errmsg else ""
        status = fn(ptr, *args)
        if status == 0:
            raise_for(status, "")
            return
        text = status_string(status)
        # from 0.2 every failure records its reason for this thread, fresh
        reason = last_error()
        if reason:
            raise_for(status, text, reason)
            return
        after = self._message(ptr) if self._errmsg else ""
        if after and after == before:
            text, after = f"{text} (last message: {after})", ""
        raise_for(status, text, after)


def check(status, detail=""):
    """Raise for the status of a call without a handle (create functions).

    The library's reason (lattice_last_error) comes first, then detail, the
    caller's account of what it asked for, unless the reason says it already
    (a create's message buffer holds the reason itself).
    """
    if not status:
        raise_for(status, "")
        return
    reason = last_error()
    if detail and detail in reason:
        detail = ""
    raise_for(status, status_string(status), "; ".join(s for s in (reason, detail) if s))


def require(obj, cls, name, optional=False):
    """obj if it is an open cls (or None when optional), else a clear error."""
    if obj is None and optional:
        return None
    if not isinstance(obj, cls):
        raise TypeError(f"{name} must be a lattice.{cls.__name__}, got {type(obj).__name__}")
    obj._resource  # raises ClosedError for a closed handle
    return obj
    return obj
