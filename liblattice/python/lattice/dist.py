"""Data-parallel training over MPI (dist.h): liblattice-mpi, with mpi4py's communicators.

lattice/dist.h belongs to liblattice-mpi, a library of its own that links
MPI; its prototypes, structs and loader live here so that ``import lattice``
loads neither. The first :class:`Dist` loads it: ``LATTICE_MPI_LIBRARY``
(the file), else ``liblattice-mpi.so.<major>`` beside the liblattice that
was loaded, else by its SONAME through the system's loader.
"""

from __future__ import annotations

import array
import ctypes
import os
import sys
from ctypes import POINTER, byref, c_char_p, c_double, c_int, c_int64, c_size_t, c_void_p
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from . import _lib
from ._buffers import WritableBuffer
from ._handle import Handle, Resource, check, deprecated_call, require
from ._types import Struct, TrainerParams, model_p, trainer_p

if TYPE_CHECKING:  # they import this module
    from .model import Model
    from .trainer import Trainer

__all__ = ["Dist", "DistStats"]

dist_p = POINTER(type("lattice_dist", (ctypes.Structure,), {}))
MPI_Comm = c_void_p  # Open MPI's handle is a pointer; set from mpi4py's size at load (MPICH: int)


class DistStatsStruct(Struct):
    _fields_ = [
        ("size", c_size_t),
        ("sum_calls", c_int64),
        ("sum_bytes", c_int64),
        ("sum_seconds", c_double),
        ("other_calls", c_int64),
        ("other_seconds", c_double),
    ]


STATUS = _lib.STATUS

# Every function of lattice/dist.h, in header order; tests/python checks it against the header.
PROTOTYPES = {
    "lattice_dist_create": (STATUS, [MPI_Comm, POINTER(dist_p)]),
    "lattice_dist_destroy": (None, [dist_p]),
    "lattice_dist_errmsg": (c_char_p, [dist_p]),
    "lattice_dist_get_rank": (c_int, [dist_p]),
    "lattice_dist_get_size": (c_int, [dist_p]),
    "lattice_dist_attach": (STATUS, [dist_p, trainer_p]),
    "lattice_dist_trainer_params": (STATUS, [dist_p, POINTER(TrainerParams)]),
    "lattice_dist_detach": (STATUS, [dist_p, trainer_p]),
    "lattice_dist_allreduce_gradients": (STATUS, [dist_p, model_p, c_double]),
    "lattice_dist_sum_floats": (STATUS, [dist_p, POINTER(ctypes.c_float), c_size_t]),
    "lattice_dist_sum_doubles": (STATUS, [dist_p, POINTER(c_double), c_size_t]),
    "lattice_dist_sum_int64": (STATUS, [dist_p, POINTER(c_int64), c_size_t]),
    "lattice_dist_get_stats": (STATUS, [dist_p, POINTER(DistStatsStruct)]),
    "lattice_dist_reset_stats": (None, [dist_p]),
}

_mpi_lib = None


def _library_names():
    # liblattice.so.1 -> liblattice-mpi.so.1, liblattice.1.dylib, lattice-1.dll alike
    return [name.replace("lattice", "lattice-mpi", 1) for name in _lib._library_names(_lib.MAJOR)]


def _load_mpi_library(comm_size):
    """liblattice-mpi with PROTOTYPES applied (MPI_Comm sized as mpi4py says)."""
    global _mpi_lib
    if _mpi_lib is not None:
        return _mpi_lib
    tried = []
    path = os.environ.get("LATTICE_MPI_LIBRARY")
    candidates = [path] if path else []
    if not path:
        here = os.path.dirname(_lib.library_path)  # "" when loaded by SONAME
        candidates += [os.path.join(here, n) for n in _library_names() if here]
        candidates += _library_names()
    cdll = None
    for candidate in candidates:
        try:
            cdll = ctypes.CDLL(candidate)
            break
        except OSError as e:
            tried.append(f"{candidate}: {e}")
    if cdll is None:
        raise ImportError("liblattice-mpi not found (meson builds it where MPI is found: "
                          "apt-get install libopenmpi-dev); set LATTICE_MPI_LIBRARY to its path. "
                          "Tried:\n  " + "\n  ".join(tried))
    comm_type = {ctypes.sizeof(c_void_p): c_void_p, ctypes.sizeof(c_int): c_int}.get(comm_size)
    if comm_type is None:
        raise ImportError(f"an MPI_Comm of {comm_size} bytes: not a handle this package knows")
    prototypes = dict(PROTOTYPES)
    prototypes["lattice_dist_create"] = (STATUS, [comm_type, POINTER(dist_p)])
    _mpi_lib = _lib._Library(cdll, prototypes)
    _mpi_lib.comm_type = comm_type
    return _mpi_lib


def _mpi4py_world():
    try:
        from mpi4py import MPI
    except ImportError as e:
        raise ImportError("lattice.Dist() without a communicator takes mpi4py's COMM_WORLD: "
                          f"{sys.executable} has no mpi4py ({e}); Debian's python3-mpi4py "
                          "is /usr/bin/python3's (mpirun -np 2 /usr/bin/python3 ...), or "
                          "install mpi4py for this Python") from e
    return MPI.COMM_WORLD


_guarded = None  # the communicator the abort guard aborts; one guard a process


def _interactive():
    """Whether exceptions reach sys.excepthook at a prompt (python -i, the REPL) rather
    than end the program."""
    return bool(sys.flags.interactive) or hasattr(sys, "ps1")


def _abort(comm, rank):
    """End the whole job: flush what was printed, say why, Abort(1) the communicator."""
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except Exception:   # noqa: B902 - a closed stream must not stop the abort
            pass
    mpi = sys.modules.get("mpi4py.MPI")
    if mpi is not None and mpi.Is_finalized():
        return   # MPI is gone: nothing waits on this rank's collectives any more
    try:
        sys.stderr.write(f"lattice.Dist: rank {rank} raised an exception no one caught: "
                         "aborting the job (Abort(1)) so that the other ranks do not wait "
                         "for it; lattice.Dist(comm, abort_on_exception=False) leaves it "
                         "to the script\n")
        sys.stderr.flush()
    except Exception:   # noqa: B902
        pass
    try:
        comm.Abort(1)
    except Exception:   # noqa: B902 - a freed communicator: the world ends the job too
        if mpi is not None:
            mpi.COMM_WORLD.Abort(1)


def _guard(comm):
    """Install the abort guard for comm: sys.excepthook prints the traceback as before
    (the hook it replaces), then aborts comm. Once a process, on more than one rank,
    outside an interactive prompt. Returns whether this call installed it."""
    global _guarded
    if _guarded is not None or _interactive() or comm.Get_size() < 2:
        return False
    previous, rank = sys.excepthook, comm.Get_rank()

    def abort_on_exception(kind, value, tb):
        try:
            previous(kind, value, tb)
        finally:
            _abort(comm, rank)

    sys.excepthook = abort_on_exception
    _guarded = comm
    return True


@dataclass(frozen=True)
class DistStats:
    """What a Dist's collective calls cost since its creation or reset_stats()."""

    sum_calls: int
    sum_bytes: int
    sum_seconds: float
    other_calls: int
    other_seconds: float

    def __call__(self) -> DistStats:
        """``dist.stats()``, the spelling before 1.1, still works (DeprecationWarning):
        ``dist.stats`` is the attribute."""
        deprecated_call("dist.stats()", "dist.stats")
        return self


# struct format -> (C function, ctype) of the in-place sums
_SUMS = {"f": ("lattice_dist_sum_floats", ctypes.c_float),
         "d": ("lattice_dist_sum_doubles", c_double)}
for _code in "qQlL":
    if array.array(_code).itemsize == 8:
        _SUMS[_code] = ("lattice_dist_sum_int64", c_int64)


class Dist(Handle):
    """The ranks of an MPI communicator training as one (lattice_dist, liblattice-mpi).

    ``Dist(comm)`` wraps a duplicate of an mpi4py communicator (default:
    ``mpi4py.MPI.COMM_WORLD``; importing mpi4py initialises MPI). Pass it to
    :class:`lattice.Trainer` as ``dist=`` on every rank, each rank building
    the same objects: each then trains on its share of every global batch
    (``batch_size / size`` rows, so the model needs ``max_batch`` for one
    share only), with gradients, losses, validation and counters summed over
    the ranks in a fixed order. N ranks of b rows train as one process of
    N*b rows, equal to rounding; two runs on N ranks are bit-identical.

    Start the script with ``mpirun -np N /usr/bin/python3 train.py``: the
    Python that has mpi4py (Debian's python3-mpi4py is /usr/bin/python3's;
    another python3 first on PATH, pyenv's or conda's, fails with "No module
    named 'mpi4py'"; ``python3 -c "import numpy, mpi4py"`` checks). Every call that
    communicates is collective: all ranks make it, in the same order. Close
    the Dist (``with``) before MPI finalises, which mpi4py does at exit.
    Needs liblattice-mpi (built with MPI) and mpi4py.

    An exception that no one catches ends the job (since 0.4): the first
    Dist of a process over more than one rank installs a ``sys.excepthook``
    that prints the traceback as before, then calls ``comm.Abort(1)``, so
    that ``mpirun`` ends every rank with a non-zero status instead of
    leaving the others waiting in their next collective. Not installed at an
    interactive prompt (``python -i``, the REPL), where every exception
    reaches the hook. ``abort_on_exception=False`` leaves the hook alone (a
    script that aborts for itself). A ``sys.exit()`` is no exception to the
    hook: call ``comm.Abort(status)`` before exiting on one rank only, and an
    exception in a thread other than the main one does not end the program
    (``threading.excepthook``).
    """

    _destroy = "lattice_dist_destroy"
    _errmsg = "lattice_dist_errmsg"

    def __init__(self, comm: Any = None, *, abort_on_exception: bool = True) -> None:
        if comm is None:
            comm = _mpi4py_world()
        try:
            from mpi4py import MPI
            handle, size = MPI._handleof(comm), MPI._sizeof(comm)
        except (ImportError, AttributeError, TypeError):
            raise TypeError(f"comm must be an mpi4py communicator, got {type(comm).__name__}") \
                from None
        self._lib = _load_mpi_library(size)
        out = dist_p()
        check(self._lib.lattice_dist_create(self._lib.comm_type(handle), byref(out)))
        self._adopt(out)
        self._bind(comm=comm)
        if abort_on_exception:
            _guard(comm)

    def _adopt(self, ptr, borrows=(), keep=()):  # destroyed by liblattice-mpi, not liblattice
        self._res = Resource(ptr, self._lib.lattice_dist_destroy,
                             [h._resource for h in borrows if h is not None], keep)

    def _message(self, ptr):
        return self._lib.lattice_dist_errmsg(ptr).decode(errors="replace")

    def _describe(self):
        return f"rank {self.rank} of {self.size}"

    @property
    def rank(self) -> int:
        """This process's rank in the communicator."""
        return self._get(self._lib.lattice_dist_get_rank)

    @property
    def size(self) -> int:
        """The number of ranks."""
        return self._get(self._lib.lattice_dist_get_size)

    def _trainer_params(self, params):
        """Name this Dist as the collective of TrainerParams (lattice_dist_trainer_params)."""
        self._call(self._lib.lattice_dist_trainer_params, byref(params))

    def attach(self, trainer: Trainer) -> None:
        """Make an existing Trainer data-parallel (its model then needs max_batch for the
        whole batch; ``Trainer(..., dist=)`` needs it for one rank's share)."""
        from .trainer import Trainer
        require(trainer, Trainer, "trainer")
        self._call(self._lib.lattice_dist_attach, trainer._ptr, using=(trainer,))
        trainer._dist = self._resource  # the handle must outlive the attachment

    def detach(self, trainer: Trainer) -> None:
        """Let the Trainer run alone again."""
        from .trainer import Trainer
        require(trainer, Trainer, "trainer")
        self._call(self._lib.lattice_dist_detach, trainer._ptr, using=(trainer,))
        trainer._dist = None

    def allreduce_gradients(self, model: Model, weight: float) -> None:
        """For a loop of one's own: every rank's model gradients times weight, summed.

        Call on every rank after backward(), with weight = this rank's
        counted tokens / all ranks' (sum the counts with :meth:`sum`): every
        rank then holds the gradient of the global mean loss.
        """
        from .model import Model
        require(model, Model, "model")
        self._call(self._lib.lattice_dist_allreduce_gradients, model._ptr, float(weight),
                   using=(model,))

    def sum(self, values: WritableBuffer) -> WritableBuffer:
        """Replace values on every rank by their sum over the ranks; returns values.

        values: a writable buffer of float32, float64 or int64 (array.array
        'f', 'd' or 'q', a NumPy array). Floating-point sums run in a fixed
        rank order in double precision; integer sums are exact.
        """
        try:
            mv = memoryview(values)
        except TypeError:
            raise TypeError("values must be a buffer of float32, float64 or int64 "
                            f"(e.g. array.array('d')), got {type(values).__name__}") from None
        code = mv.format.lstrip("@=<")
        if code not in _SUMS or mv.itemsize != ctypes.sizeof(_SUMS[code][1]):
            raise TypeError(f"values: expected float32, float64 or int64 items, got format "
                            f"{mv.format!r} of {mv.itemsize} bytes")
        if mv.readonly:
            raise TypeError("values must be writable: the sum replaces them")
        if not mv.c_contiguous:
            raise ValueError("values must be C-contiguous: the sums replace them in place, "
                             "and sums written into a copy would be lost (pass a contiguous "
                             "buffer, e.g. numpy.ascontiguousarray(x), and read them from it)")
        name, ctype = _SUMS[code]
        n = mv.nbytes // mv.itemsize
        buf = (ctype * n).from_buffer(mv.cast("B")) if n else None
        self._call(getattr(self._lib, name), buf, n)
        return values

    @property
    def stats(self) -> DistStats:
        """What this handle's collective calls have cost (a DistStats snapshot).

        An attribute since 1.1 (``dist.stats.sum_calls``); the call
        ``dist.stats()`` still works, deprecated (DeprecationWarning).
        """
        s = DistStatsStruct(size=ctypes.sizeof(DistStatsStruct))
        self._call(self._lib.lattice_dist_get_stats, byref(s))
        return DistStats(s.sum_calls, s.sum_bytes, s.sum_seconds, s.other_calls, s.other_seconds)

    def reset_stats(self) -> None:
        """Set the statistics back to zero."""
        self._get(self._lib.lattice_dist_reset_stats)
