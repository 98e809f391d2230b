"""Status codes, the exception they become, and exceptions raised inside callbacks."""

from __future__ import annotations

import enum
import threading
from typing import Optional, Union

__all__ = ["Status", "LatticeError", "ClosedError"]


class Status(enum.IntEnum):
    """lattice_status: pinned values that never change meaning."""

    OK = 0
    INVALID_ARGUMENT = 1
    INVALID_CONFIG = 2
    OUT_OF_MEMORY = 3
    UNSUPPORTED = 4
    NOT_FOUND = 5
    BACKEND = 6
    NON_FINITE = 7
    IO = 8
    FORMAT = 9
    STATE = 10


def as_status(code):
    """A Status where the value is known; a plain int for a code newer than this package."""
    try:
        return Status(code)
    except ValueError:
        return int(code)


class LatticeError(Exception):
    """A call into liblattice failed.

    ``code`` is the :class:`Status`; ``message`` the status string followed by
    the handle's own message where it gave one. An exception raised by a Python
    callback during the call is chained as ``__cause__``.
    """

    code: Union[Status, int]
    message: str

    def __init__(self, code: Union[Status, int], message: Optional[str] = None) -> None:
        code = as_status(code)
        if message is None:
            message = getattr(code, "name", str(code))
        super().__init__(code, message)
        self.code = code
        self.message = message

    def __str__(self) -> str:
        return self.message


class ClosedError(LatticeError, ValueError):
    """A method was called on a closed handle (the Python face of a NULL handle)."""

    def __init__(self, message: str) -> None:
        super().__init__(Status.INVALID_ARGUMENT, message)


# A callback cannot raise through C: it stores what it raised here and returns
# failure; the wrapper of the C call that ran it raises it afterwards. The
# library runs callbacks on the thread that made the call, so a thread-local
# slot keeps concurrent calls on different handles apart.
_pending = threading.local()


def store_pending(exc):
    """Remember the first exception a callback raised during the current call."""
    if getattr(_pending, "exc", None) is None:
        _pending.exc = exc


def take_pending():
    exc = getattr(_pending, "exc", None)
    _pending.exc = None
    return exc


def raise_for(status, status_text, detail=""):
    """Raise for a non-OK status, or re-raise a callback's exception after an OK one."""
    pending = take_pending()
    if status == 0:
        if pending is not None:
            raise pending
        return
    message = status_text + (": " + detail if detail else "")
    err = LatticeError(status, message)
    if pending is None:
        raise err
    if not isinstance(pending, Exception):  # KeyboardInterrupt, SystemExit: keep their meaning
        raise pending
    raise err from pending
