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

Adding a C header: its prototypes go into ``_lib.PROTOTYPES`` (the test suite
checks that table against the headers), its structs and enums into
``_types.py``, and a module named after the header holds its classes;
export them below.
"""

from ._errors import ClosedError, LatticeError, Status
from ._lib import (ERRMSG_SIZE, last_error, library_path, status_string, version_number,
                   version_string)
from ._types import (BackendInfo, BackendOps, BlockInit, DataParams, DistillParams, Group,
                     KLDirection, LRShape,
                     ModelParams, NormKind, NormPlacement, OptimParams, Phase, Preset, Split,
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
    "LRShape", "ModelParams", "OptimParams", "DistillParams", "DataParams", "Phase", "TrainerParams",
    "BackendOps", "BackendInfo",
    "Backend", "Kernels", "has_blis", "Norm", "Model", "Tensor", "Optim", "Distill", "DistillResult",
    "Data", "Batch", "Position", "Schedule", "Counters", "Teacher", "Trainer", "Metrics",
    "Diag", "RmsStats", "Removal", "Response", "Sinks", "Progress", "progress",
    "Dist", "DistStats",
]
