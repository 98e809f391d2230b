"""lattice: Python bindings of liblattice through ctypes.

Every object of the C API is a class here (Backend, Norm, Model, Optim,
Distill, Data, Schedule, Teacher, Trainer, Diag; Dist, of liblattice-mpi,
for data-parallel training under mpirun) with close() and ``with``
support; every failing status raises :class:`LatticeError` with its
:class:`Status` in ``code`` (:func:`last_error` gives the reason again).
Arrays go in and out through the buffer protocol, so NumPy works but is
never needed.

The library is found through ``LATTICE_LIBRARY``, then next to this package,
then in the prefix ``meson install`` put it in, then where pkg-config's
``lattice.pc`` says (``PKG_CONFIG_PATH``), then by its SONAME through the
system's loader (``LD_LIBRARY_PATH``); see ``lattice._lib``.
``lattice.library_path`` names the file loaded; when none is found, the
ImportError lists every place tried and what to set.

Outputs (logits, hidden states, batches) are copies; the ``*_view()``
methods return zero-copy views valid until the next forward.

Integers are checked against their C types before they reach the library,
arguments and params fields alike: one the type cannot hold
(``model.tensor(2**32)``, ``Model(d_model=2**32 + 16)``, ``seed=-1``)
raises OverflowError where ctypes would silently truncate it; one the type
holds but the library refuses raises LatticeError (``Status.INVALID_ARGUMENT``),
and a buffer of the wrong size ValueError.

Threads: every object has a lock, and each call takes the locks of its object
and of everything that object borrows (a model: its backend; an optimizer, a
model teacher, a Diag: their model; a trainer: everything it binds), so
calls on one object, or on objects bound together, from several threads run
one at a time, as the C API requires; calls on unrelated objects run in
parallel (the GIL is released during each). Each call is serialised, not a
sequence of them: threads sharing a model interleave between forward,
cross_entropy and backward, so give each thread its own objects (and its own
backend) for work of its own. Callbacks run on the calling thread and may
call back into the objects of their call (the locks are re-entrant); one that
calls objects another thread is using can deadlock.

close() from another thread waits for the calls using the object to return;
close() from inside such a call (``trainer.close()`` in its ``on_step``)
raises LatticeError with ``Status.STATE``, as waiting would never end: close
it once the call has returned. A call never runs on a destroyed object.

Adding a C header: its prototypes go into ``_lib.PROTOTYPES`` (the test suite
checks that table against the headers), its structs into ``_types.py``
and its enums into ``_enums.py``, and a module named after the header holds
its classes; export them below.
"""

from ._errors import ClosedError, LatticeError, Status
from ._lib import (ERRMSG_SIZE, last_error, library_path, status_string, version_number,
                   version_string)
from ._types import (BackendInfo, BackendOps, BlockInit, DataParams, DistillParams, Group,
                     KLDirection, LRShape,
                     ModelOption, ModelParams, NormKind, NormPlacement, OptimParams, Phase, Preset, Split,
                     TrainerParams)
from .backend import Backend, Kernels, has_blis
from .data import Batch, Data, Position
from .diag import Diag, Removal, Response, RmsStats, Sinks
from .dist import Dist, DistStats
from .distill import Distill, DistillResult
from .model import Model, Tensor
from .norm import Norm
from .optim import Optim
from .progress import Progress, progress
from .schedule import Counters, Schedule
from .teacher import Teacher
from .trainer import Metrics, Trainer

__version__ = version_string

__all__ = [
    "LatticeError", "ClosedError", "Status", "status_string", "version_number",
    "version_string", "ERRMSG_SIZE", "library_path", "last_error",
    "NormPlacement", "NormKind", "Group", "KLDirection", "Split", "BlockInit", "Preset",
    "LRShape", "ModelOption", "ModelParams", "OptimParams", "DistillParams", "DataParams", "Phase",
    "TrainerParams",
    "BackendOps", "BackendInfo",
    "Backend", "Kernels", "has_blis", "Norm", "Model", "Tensor", "Optim", "Distill", "DistillResult",
    "Data", "Batch", "Position", "Schedule", "Counters", "Teacher", "Trainer", "Metrics",
    "Diag", "RmsStats", "Removal", "Response", "Sinks", "Progress", "progress",
    "Dist", "DistStats",
]
