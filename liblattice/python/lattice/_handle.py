"""Handles: Python objects that own a C object, the rules for freeing it, and the
per-object locks that serialise calls on it."""

from __future__ import annotations

import difflib
import inspect
import itertools
import threading
import warnings
from typing import Any, Dict, List, TypeVar

from ._errors import ClosedError, LatticeError, Status, raise_for
from ._lib import last_error, lib, status_string

_order = itertools.count()  # the global order in which locks are taken: creation order

# What each thread waits for (threading.get_ident() -> Resource), so that a
# wait that would never end is found: a call from a callback takes locks after
# its outer call's, out of the creation order, and two threads doing so wait
# for each other (issue 48 part 2: two trainers sharing a Distill, each
# callback reading the other's model, hung both threads).
_waiting = {}
_POLL = 0.05  # seconds between looks for a cycle while a lock is held elsewhere


def _kind(res):
    """'model' for a Resource of lattice_model_destroy, and so on."""
    name = getattr(res._destroy, "__name__", "")
    return name[len("lattice_"):-len("_destroy")].replace("_", " ") if name.endswith(
        "_destroy") else "object"


def _cycle_through(res, me):
    """The lock this thread holds that the holder of res waits for, through the
    threads it waits for (a wait that would never end), or None."""
    seen = set()
    held = res
    while held is not None and held.owner is not None and held.owner not in seen:
        if held.owner == me:
            return held
        seen.add(held.owner)
        held = _waiting.get(held.owner)
    return None


class Resource:
    """One C object and what it needs alive: the objects it borrows, callbacks.

    The C object is destroyed when the last Python reference to its Resource
    goes: the Handle's (dropped by close() or garbage collection), a borrower's
    (a model's Resource holds its backend's), a call's (:class:`Using` holds
    every Resource it locked), or a view's (arrays returned over the object's
    memory hold it). Borrowers are also counted, so that even when a reference
    cycle is collected and finalisers run in any order, a borrowed object
    outlives those that borrow it.

    Each Resource has a re-entrant lock: the C API requires calls on one
    object, and on objects that borrow the same one, to be serialised, so a
    call locks :meth:`group`: the object and everything it borrows, transitively.
    """

    __slots__ = ("ptr", "_destroy", "_borrows", "_users", "_wanted", "keep", "order", "_borrowed",
                 "_lock", "owner", "_depth", "__weakref__")

    def __init__(self, ptr, destroy, borrows=(), keep=()):
        self.ptr = ptr
        self._destroy = destroy
        self._borrows = tuple(borrows)
        self._users = 0
        self._wanted = False
        self.keep = tuple(keep)  # ctypes callbacks the C object calls
        for b in self._borrows:
            b._users += 1
        self.order = next(_order)  # later than every object it borrows
        # (not holding self: a cycle would leave freeing the object to the collector)
        self._borrowed = tuple(sorted({r for b in self._borrows for r in b.group()},
                                      key=lambda r: r.order))
        self._lock = threading.Lock()
        self.owner = None   # the thread holding the lock (threading.get_ident()), or None
        self._depth = 0

    def group(self):
        """This object and all it borrows, in lock order."""
        return self._borrowed + (self,)

    def acquire(self, wait=True):
        """Take the lock (again, on the thread that holds it); False when wait is false
        and another thread holds it. A wait that would never end (the holder waits,
        through other threads, for a lock this thread holds) raises LatticeError
        with Status.STATE instead."""
        me = threading.get_ident()
        if self.owner == me:    # only this thread sets its own id: no race
            self._depth += 1
            return True
        if not self._lock.acquire(False):
            if not wait:
                return False
            _waiting[me] = self
            try:
                while not self._lock.acquire(timeout=_POLL):
                    mine = _cycle_through(self, me)
                    # Of a cycle's threads, one waits for a lock created before one it
                    # holds (waits in creation order alone cannot close a cycle): it
                    # gives up, the others go on once it has.
                    if mine is not None and mine.order > self.order:
                        raise LatticeError(Status.STATE, (
                            f"invalid state: this thread would wait for a {_kind(self)} that "
                            "another thread's call holds while that call waits for one this "
                            "thread holds (a callback calling into an object another thread's "
                            "call uses): refused, as both would wait for ever; call it once "
                            "the outer call has returned"))
            finally:
                del _waiting[me]
        self.owner, self._depth = me, 1
        return True

    def release(self):
        self._depth -= 1
        if not self._depth:
            self.owner = None
            self._lock.release()

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


class Using:
    """``with Using(handles):`` the handles' objects locked and kept alive.

    Locks every Resource in the handles' groups (and any Resource given
    directly), in creation order so that two calls never wait for each other;
    a thread may take a lock it already holds (a callback calling back into an
    object its call uses). Raises ClosedError for a handle that is closed,
    also one closed by another thread while this waited. One whose ``_wait``
    is cleared (a repr's) does not wait: :class:`Busy` when another thread
    holds a lock.
    """

    __slots__ = ("_handles", "_resources", "_locked", "_wait")

    def __init__(self, handles):
        self._handles = [h for h in handles if h is not None]
        self._locked = ()
        self._wait = True

    def __enter__(self):
        held = [h._resource if isinstance(h, Handle) else h for h in self._handles]
        if len(held) == 1:
            locks = held[0].group()
        else:
            locks = sorted({r for res in held for r in res.group()}, key=lambda r: r.order)
        taken = []
        try:
            for r in locks:
                if not r.acquire(self._wait):
                    raise Busy()
                taken.append(r)
            for h, res in zip(self._handles, held):
                if isinstance(h, Handle) and h._res is not res:
                    raise ClosedError(f"{type(h).__name__} is closed")
        except BaseException:
            for r in reversed(taken):
                r.release()
            raise
        self._resources = held
        self._locked = taken
        return held[0] if held else None

    def __exit__(self, *exc):
        locked, self._locked = self._locked, ()
        for r in reversed(locked):
            r.release()
        self._resources = None


class Busy(Exception):
    """A lock another thread holds, met by a Using that does not wait (Handle.__repr__)."""


def using(*handles):
    """Using(handles) for a call that takes handles but belongs to none (a create)."""
    return Using(handles)


H = TypeVar("H", bound="Handle")


class Handle:
    """Base of the object classes: close(), ``with``, and checked, serialised calls.

    close() releases this handle; the C object goes as soon as nothing still
    needs it (an object that borrows it, or an array returned over its memory).
    Closing twice does nothing; any other call on a closed handle raises
    :class:`ClosedError`. A call from another thread makes close() wait for
    it; a close() from inside a call that uses the object (one of its
    callbacks) raises LatticeError with Status.STATE instead, as waiting would
    never end.

    ``repr()`` says what the object is (``<lattice.Model post 4/9 layers
    d64>``), ``<lattice.Model closed>`` once closed, and ``busy`` instead of
    waiting while a call on another thread uses it.
    """

    _destroy = None  # name of the C destroy function
    _errmsg = None   # name of the C errmsg function, where the object has one
    _res = None
    # The settings struct the object is created from (a Params class), and how to get
    # other settings ("{name}" the field): its fields are fixed at creation unless a
    # settable property says otherwise.
    _creation_params = None
    _creation_how = "create another"
    _read_only_hints: Dict[str, str] = {}  # a read-only attribute -> how to change it

    def _bind(self, **attrs):
        """Set public attributes at creation (the objects it is bound to); read-only after."""
        for name, value in attrs.items():
            object.__setattr__(self, name, value)

    def __setattr__(self, name: str, value: Any) -> None:
        """Set a settable property; anything else raises AttributeError saying why.

        A setting fixed at creation (``model.seed``, ``trainer.eval_every``), a
        read-only property (``model.n_params``), an object bound at creation
        (``trainer.model``) or a name the class does not have would be accepted
        and read back by Python while the library never sees it: a silent
        no-op, refused instead. A subclass of your own may add names of its own.
        """
        if name.startswith("_"):
            object.__setattr__(self, name, value)
            return
        cls = type(self)
        attr = inspect.getattr_static(cls, name, None)
        if isinstance(attr, property) and attr.fset is not None:
            object.__setattr__(self, name, value)  # the property's setter runs
            return
        why = self._not_settable(name, attr)
        if why is None:  # a subclass's own attribute
            object.__setattr__(self, name, value)
            return
        raise AttributeError(why)

    def _not_settable(self, name, attr):
        """Why name cannot be set (None: a name of a subclass outside the package)."""
        cls = type(self)
        what = f"{cls.__name__}.{name}"
        fields = ()
        if self._creation_params is not None:
            fields = [n for n in self._creation_params.field_names() if n != "size"]
        hint = self._hint(name)
        if name in fields:
            if hint and hint.startswith("!"):  # a hint that replaces the sentence
                return f"{what} cannot be set: {hint[1:]}"
            how = hint or self._creation_how.format(name=name)
            return (f"{what} cannot be set: it is fixed when the {cls.__name__.lower()} is "
                    f"created, and setting it would change nothing; {how}")
        if isinstance(attr, property):
            return (f"{what} is read-only" + (f": {hint}" if hint else
                    ": it reports what the object is or holds, and setting it would change "
                    "nothing"))
        if name in self.__dict__:
            return (f"{what} is read-only: the {cls.__name__.lower()} is bound to it at "
                    f"creation, and setting it would change nothing; create another "
                    f"{cls.__name__} for another")
        if attr is not None:
            return (f"{what} cannot be set: it is part of the class (a method), and replacing "
                    "it would change nothing the library does")
        if not cls.__module__.startswith("lattice."):
            return None
        names = [n for n in dir(cls) if not n.startswith("_")] + list(fields)
        close = difflib.get_close_matches(name, names, n=1)
        return (f"lattice.{cls.__name__} has no attribute {name!r} to set"
                + (f" (did you mean {close[0]!r}?)" if close else "")
                + ": setting a name the library does not read would change nothing; keep "
                "values of your own beside the object")

    @classmethod
    def _hint(cls, name):
        for klass in cls.__mro__:
            hints = klass.__dict__.get("_read_only_hints")
            if hints and name in hints:
                return hints[name]
        return None

    def _adopt(self, ptr, borrows=(), keep=()):
        self._res = Resource(ptr, getattr(lib, self._destroy),
                             [h._resource for h in borrows if h is not None], keep)

    def __reduce_ex__(self, protocol: Any) -> Any:
        """Refused: copy, deepcopy and pickle would give a second owner of one C object
        (or an object with none)."""
        raise TypeError(f"a lattice.{type(self).__name__} cannot be copied or pickled: it "
                        "owns an object of the C library; save it to a file (Model.save, "
                        "Trainer.save_checkpoint) and create another from that")

    def _alias(self: H) -> H:
        """Another handle on this one's object (what _lend keeps)."""
        twin = object.__new__(type(self))
        twin.__dict__.update(self.__dict__)
        twin._res = self._resource
        return twin

    def _lend(self, **handles: "Handle") -> None:
        """Keep a private handle on each object this one borrows, as the attribute
        named (``_lend(_model=model)``): the user's close() of their handle leaves it
        open, as the borrowed C object lives on (a Trainer whose schedule's handle
        was closed still asks whether the schedule has finished). This object's
        close() drops them, so that nothing keeps the borrowed objects after both."""
        for name, handle in handles.items():
            object.__setattr__(self, name, handle._alias())
        object.__setattr__(self, "_lent", tuple(handles))

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
    def closed(self) -> bool:
        """Whether close() was called (any other call then raises ClosedError)."""
        return self._res is None

    def close(self) -> None:
        """Release the object; waits for calls on other threads that use it, and raises
        LatticeError (Status.STATE) inside one (from its callbacks). Twice is harmless."""
        res = self._res
        if res is None:
            return
        if res.owner == threading.get_ident():
            raise LatticeError(Status.STATE, f"invalid state: {type(self).__name__}.close() "
                               "inside a call that uses it (from one of its callbacks); close "
                               "it once the call has returned")
        res.acquire()           # waits for a call on another thread
        try:
            if self._res is res:
                self._res = None
                for name in getattr(self, "_lent", ()):
                    object.__setattr__(self, name, None)
        finally:
            res.release()

    def _using(self, *others):
        """Using(self and others): for a method whose Python side must see the object
        as its C call leaves it (shapes, addresses read after the call)."""
        return Using((self,) + others)

    def __enter__(self: H) -> H:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()

    def _describe(self):
        """What repr() shows after the class name (called with the object's locks held)."""
        return ""

    @staticmethod
    def _describe_other(handle):
        """_describe() of an object this one borrows, for this one's repr (the caller holds
        its lock); says so when the user closed that handle."""
        kind = type(handle).__name__.lower()
        try:
            with handle._using():
                return f"{kind} {handle._describe()}"
        except ClosedError:
            return f"closed {kind}"

    def __repr__(self) -> str:
        name = f"lattice.{type(self).__name__}"
        try:
            # a repr must not wait for another thread's call (a training run) to end
            using = self._using()   # the locks its calls take (a Trainer's: its Dist's too)
            using._wait = False
            with using:
                detail = self._describe()
        except ClosedError:
            detail = "closed"
        except Busy:
            detail = "busy (a call on another thread is using it)"
        except LatticeError as e:  # a repr does not raise: a library lacking a getter
            detail = f"({e})"
        return f"<{name} {detail}>" if detail else f"<{name}>"

    def _message(self, ptr):
        return getattr(lib, self._errmsg)(ptr).decode(errors="replace") if self._errmsg else ""

    def _get(self, fn, *args, using=()):
        """fn(handle, *args) for a function that cannot fail: its value.

        Under the locks of the handle and of the handles in using (:class:`Using`).
        """
        with self._using(*using) as res:
            return fn(res.ptr, *args)

    def _call(self, fn, *args, using=()):
        """Call fn(handle, *args); raise LatticeError with the handle's message on failure.

        Under the locks of the handle and of the handles in using (those args
        point to), which stay alive until it returns.
        """
        with self._using(*using) as res:
            ptr = res.ptr
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
            # every failure records its reason for this thread, fresh
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


def deprecated_call(old: str, new: str) -> None:
    """Warn that ``old`` (a call) is spelled ``new`` (an attribute) since 1.1."""
    warnings.warn(f"{old} is deprecated since 1.1: it is the attribute {new} (no argument, no "
                  "action: an attribute, doc/python.md \"Attribute or call\"); the call "
                  "still works and will go in 2.0", DeprecationWarning, stacklevel=3)


class AttributeList(list):
    """A list attribute that was a method before 1.1 (``model.tensors``): calling it, the
    old spelling, still works and returns a copy, with a DeprecationWarning."""

    __slots__ = ("_old", "_new")

    def __call__(self) -> List[Any]:
        deprecated_call(self._old, self._new)
        return list(self)


def attribute_list(items, old: str, new: str) -> AttributeList:
    out = AttributeList(items)
    out._old, out._new = old, new
    return out
