"""AdamW with warmup, a cosine or warmup-stable-decay LR, and clipping (optim.h)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_float
from typing import Any, Optional

from ._handle import Handle, check, require, using
from ._lib import lib
from ._types import LRShape, OptimParams, f32, optim_p, with_fields
from .model import Model

__all__ = ["Optim"]


# The paper's warmup: 750 of its 50000 steps.
_WARMUP_FRACTION = (750, 50000)


class Optim(Handle):
    """AdamW over a model's trainable groups; keyword arguments are OptimParams fields.

    The optimizer borrows the model and keeps it alive.

    Given total_steps but not warmup_steps, the warmup is the paper's share of
    the run, 1.5% (750 of 50000 steps), rounded down: ``Optim(m,
    total_steps=5)`` has no warmup, ``total_steps=2000`` warms up for 30
    steps. A warmup_steps given above total_steps is refused (LatticeError),
    as is min_lr above lr. After warmup the LR follows ``lr_shape``: "cosine"
    (the default) down to min_lr, or "wsd", held at lr and then a straight
    line to min_lr over the last ``decay_fraction`` of the steps after warmup
    (``Optim(m, lr=3e-3, lr_shape="wsd", decay_fraction=0.2, ...)``). Under a Trainer, a phase that restarts the
    optimizer runs it for the phase's steps: warmup_steps must fit in the
    shortest such phase (the Trainer refuses otherwise).
    """

    _destroy = "lattice_optim_destroy"
    _errmsg = "lattice_optim_errmsg"
    _creation_params = OptimParams
    _creation_how = "optim.set_params({name}=...) changes it (optim.params.{name} reads it)"
    _read_only_hints = {
        "lr": ("it is the rate the schedule gives the next step; optim.set_params(lr=...) "
               "sets the peak rate"),
        "params": "a read-only copy of the settings; optim.set_params(...) changes them",
        "steps": "optim.reset() restarts the count with the moments",
    }

    @with_fields(OptimParams)
    def __init__(self, model: Model, params: Optional[OptimParams] = None,
                 **fields: Any) -> None:
        require(model, Model, "model")
        total = fields.get("total_steps")
        if isinstance(total, int) and total > 0 and "warmup_steps" not in fields and params is None:
            share, of = _WARMUP_FRACTION
            fields["warmup_steps"] = total * share // of
        p = OptimParams.make(params, **fields)
        out = optim_p()
        with using(model):
            check(lib.lattice_optim_create(model._ptr, byref(p), byref(out)))
        self._adopt(out, borrows=(model,))
        self._bind(model=model)

    def _describe(self):
        p = self.params
        return f"step {self.steps}, lr {self.lr:g} ({LRShape(p.lr_shape).name.lower()} from {p.lr:g})"

    @property
    def params(self) -> OptimParams:
        """The OptimParams in use: a read-only copy (change them with :meth:`set_params`)."""
        out = OptimParams()
        out.size = ctypes.sizeof(out)  # the bytes this package can take
        self._call(lib.lattice_optim_get_params, byref(out))
        return out.read_only("change them with optim.set_params(lr=...)")

    @with_fields(OptimParams)
    def set_params(self, params: Optional[OptimParams] = None, **fields: Any) -> None:
        """Replace the settings: params (default: the current ones) with fields overridden.

        The moments and the schedule position are kept.
        """
        p = OptimParams.make(self.params if params is None else params, **fields)
        self._call(lib.lattice_optim_set_params, byref(p))

    def step(self) -> float:
        """One AdamW update from the last backward; returns the gradient norm before clipping."""
        norm = c_float()
        self._call(lib.lattice_optim_step, byref(norm))
        return norm.value

    def reset(self) -> None:
        """Zero the moments and restart the learning-rate schedule."""
        self._call(lib.lattice_optim_reset)

    @property
    def lr(self) -> float:
        """The learning rate the next step will use."""
        return f32(self._get(lib.lattice_optim_get_lr))

    @property
    def steps(self) -> int:
        """Steps taken since creation or the last :meth:`reset`."""
        return self._get(lib.lattice_optim_get_steps)
