"""The trainer: model, teacher, loss, data, optimizer and schedule bound together (trainer.h)."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_double
from dataclasses import dataclass
from typing import Callable, Optional

from ._errors import store_pending
from ._handle import Handle, Using, check, require, using
from ._lib import lib
from ._types import FilePath, MetricsFn, MetricsStruct, TrainerParams, trainer_p
from .data import Data
from .dist import Dist
from .distill import Distill
from .model import Model
from .optim import Optim
from .progress import Progress
from .schedule import Counters, Schedule
from .teacher import Teacher

__all__ = ["Trainer", "Metrics"]


@dataclass(frozen=True)
class Metrics:
    """What one step gave (lattice_trainer_metrics). val_ce is NaN when not measured at this step."""

    step: int
    phase: int
    active_layers: int
    loss: float
    kl: float
    ce: float
    val_ce: float
    lr: float
    grad_norm: float
    phase_end: bool
    counters: Counters
    seconds: float

    @classmethod
    def _from(cls, m):
        return cls(m.step, m.phase, m.active_layers, m.loss, m.kl, m.ce, m.val_ce, m.lr,
                   m.grad_norm, bool(m.phase_end), Counters._from(m.counters), m.seconds)


# What on_step and on_eval are called with; a true result stops the run.
MetricsCallback = Callable[[Metrics], Optional[bool]]


def _trampoline(callbacks, name):
    """A C metrics callback around callbacks[name], looked up at every call (so that
    ``trainer.on_step = fn`` takes effect at the next step; None: nothing runs). A true
    result stops the run; so does an exception, which the trainer method that was
    running re-raises once the C call returns."""

    def callback(user, metrics):
        fn = callbacks[name]
        if fn is None:
            return 0
        try:
            return 1 if fn(Metrics._from(metrics.contents)) else 0
        except BaseException as e:  # noqa: B902 - C cannot unwind Python exceptions
            store_pending(e)
            return 1

    return MetricsFn(callback)


def _callable_or_none(name, fn):
    if fn is not None and not callable(fn):
        raise TypeError(f"{name} must be callable or None, got {type(fn).__name__}")
    return fn


def _callback_property(name, doc):
    def get(self) -> Optional[MetricsCallback]:
        return self._callbacks[name]

    def set(self, fn: Optional[MetricsCallback]) -> None:
        self._resource  # raises ClosedError for a closed trainer
        self._callbacks[name] = _callable_or_none(name, fn)
        # progress bars to close when the run ends (Progress.close)
        self._progress = [f for f in self._callbacks.values() if isinstance(f, Progress)]

    return property(get, set, doc=doc)


class Trainer(Handle):
    """Binds a run's objects; it borrows each and keeps it alive.

    Without a teacher the student trains on cross-entropy alone; with one it
    is distilled through ``distill`` (default: the paper's settings).
    ``on_step(metrics)`` runs after every step and ``on_eval(metrics)`` after
    each step that measured validation; either stops :meth:`run` by returning
    a true value or by raising (the exception is re-raised by the call).
    Both are also attributes: ``trainer.on_step = fn`` (or None) replaces the
    callback from the next step on, also from inside a callback.
    Callbacks (these and a callback teacher's) run inside the step, on the
    thread that called: they must not change the objects the trainer is
    driving (reading them, ``optim.lr``, is safe), and closing one of them
    (the trainer too) raises LatticeError with ``Status.STATE``.

    With ``dist`` (a :class:`lattice.Dist`, under mpirun) the trainer is
    data-parallel over its ranks from the start: each rank builds the same
    objects and trains on its share of every batch (``model`` needs
    ``max_batch`` for ``batch_size / dist.size`` rows).
    """

    _destroy = "lattice_trainer_destroy"
    _errmsg = "lattice_trainer_errmsg"
    _dist = None  # the Resource of a Dist attached after creation (Dist.attach)
    _creation_params = TrainerParams
    _creation_how = "create another trainer for another (lattice.Trainer(..., {name}=...))"

    def __init__(self, model: Model, data: Data, optim: Optim, schedule: Schedule, *,
                 teacher: Optional[Teacher] = None, distill: Optional[Distill] = None,
                 eval_every: int = 0, eval_batches: int = 0, seed: int = 0,
                 on_step: Optional[MetricsCallback] = None,
                 on_eval: Optional[MetricsCallback] = None,
                 dist: Optional[Dist] = None) -> None:
        require(model, Model, "model")
        require(data, Data, "data")
        require(optim, Optim, "optim")
        require(schedule, Schedule, "schedule")
        require(teacher, Teacher, "teacher", optional=True)
        require(distill, Distill, "distill", optional=True)
        require(dist, Dist, "dist", optional=True)
        if teacher is not None and distill is None:
            distill = Distill()
        p = TrainerParams.make(eval_every=eval_every, eval_batches=eval_batches, seed=seed)
        # The C trainer takes its callbacks at creation only: both trampolines are
        # always there, and look up the Python callback at each call.
        callbacks = {"on_step": _callable_or_none("on_step", on_step),
                     "on_eval": _callable_or_none("on_eval", on_eval)}
        keep = []
        for name in callbacks:
            keep.append(_trampoline(callbacks, name))
            setattr(p, name, keep[-1])
        if teacher is None:
            distill = None  # the library ignores the loss without a teacher
        if dist is not None:
            dist._trainer_params(p)
        out = trainer_p()
        with using(model, teacher, distill, data, optim, schedule, dist):
            check(lib.lattice_trainer_create(
                model._ptr, None if teacher is None else teacher._ptr,
                None if distill is None else distill._ptr, data._ptr, optim._ptr, schedule._ptr,
                byref(p), byref(out)))
        self._adopt(out, borrows=(model, teacher, distill, data, optim, schedule, dist),
                    keep=keep)
        self._callbacks = callbacks
        # progress bars to close when the run ends (Progress.close)
        self._progress = [fn for fn in (on_step, on_eval) if isinstance(fn, Progress)]
        self._settings = (p.eval_every, p.eval_batches, p.seed)
        self._bind(model=model, teacher=teacher, distill=distill, data=data, optim=optim,
                   schedule=schedule)
        self._lend(_schedule=schedule)  # the user may close theirs; its object lives on

    @property
    def eval_every(self) -> int:
        """Steps between validation measurements (0: never); fixed at creation, read-only."""
        return self._settings[0]

    @property
    def eval_batches(self) -> int:
        """Validation batches per measurement (0: all of them); fixed at creation, read-only."""
        return self._settings[1]

    @property
    def seed(self) -> int:
        """The trainer's seed; fixed at creation, read-only."""
        return self._settings[2]

    on_step = _callback_property(
        "on_step", "Called with the Metrics after every step (None: nothing); settable.")
    on_eval = _callback_property(
        "on_eval", "Called with the Metrics after each step that measured validation "
        "(None: nothing); settable.")

    def _describe(self):
        return (f"{self._describe_other(self.model)}"
                f"{', distilled' if self.teacher is not None else ''}, "
                f"{self._describe_other(self.schedule)}")

    def _using(self, *others):
        # a Dist attached after creation (Dist.attach) is used by every step
        return Using((self,) + others + ((self._dist,) if self._dist is not None else ()))

    def _run(self, fn, *args):
        self._call(fn, *args)

    def step(self) -> Metrics:
        """One training step; returns its Metrics."""
        m = MetricsStruct()
        m.size = ctypes.sizeof(m)  # the bytes this package can take
        self._run(lib.lattice_trainer_step, byref(m))
        if self._schedule.finished:
            self._close_progress()
        return Metrics._from(m)

    def run(self) -> None:
        """Steps until the schedule finishes or a callback stops the run.

        On a schedule that has finished already it raises, as :meth:`step`
        does (LatticeError, ``Status.STATE``, "the schedule has finished"):
        a run that would take no step is refused, not silent. A run that a
        callback stopped goes on where it stopped. A :class:`lattice.Progress`
        given as a callback is closed when this returns or raises.
        """
        try:
            with self._using():
                if self._schedule.finished:
                    # the library's own refusal, the one step() gives
                    self._call(lib.lattice_trainer_step, None)
                self._run(lib.lattice_trainer_run)
        finally:
            self._close_progress()

    def _close_progress(self):
        for bar in self._progress:
            bar.close()

    def evaluate(self) -> float:
        """Validation cross-entropy of the student as it is now.

        Over the first ``eval_batches`` validation batches, the Trainer's
        setting (0, the default: all of them), as the evaluations during
        :meth:`run`. For another count, ``model.evaluate(data, max_batches)``
        measures the same way without a trainer.
        """
        out = c_double()
        self._run(lib.lattice_trainer_evaluate, byref(out))
        return out.value

    def save_checkpoint(self, path: FilePath) -> None:
        """Save model, optimizer, schedule and data position (atomically) to path."""
        self._call(lib.lattice_trainer_save_checkpoint, os.fsencode(path))

    def load_checkpoint(self, path: FilePath, *, other_data: bool = False,
                        other_ranks: bool = False) -> None:
        """Restore a run saved by :meth:`save_checkpoint` into this trainer's objects.

        Resuming gives bit-identical losses to a run that never stopped. A
        checkpoint of other data, or of a run over another number of ranks,
        is refused (LatticeError naming what differs) unless asked for:
        ``other_data=True`` resumes on other data on purpose
        (LATTICE_TRAINER_LOAD_FLAG_OTHER_DATA); ``other_ranks=True`` resumes
        a checkpoint of N ranks on this trainer's count, e.g. 2 ranks' on 1
        (LATTICE_TRAINER_LOAD_FLAG_OTHER_RANKS, since 0.4): the whole state
        loads, and the run goes on as the original count would have, to float
        rounding rather than bit for bit (doc/DISTRIBUTED.md).
        """
        flags = (1 if other_data else 0) | (2 if other_ranks else 0)
        if flags:
            self._run(lib.lattice_trainer_load_checkpoint_flags, os.fsencode(path), flags)
        else:
            self._run(lib.lattice_trainer_load_checkpoint, os.fsencode(path))
