"""The paper's diagnostics (diag.h): boundary scale, block removal, loss response,
attention sinks and massive activations."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_double, c_int32, c_uint8
from dataclasses import dataclass
from typing import List, Optional, Tuple

from . import _buffers as B
from ._buffers import Floats, Ints, Mask, Tokens
from ._handle import Handle, check, require, using
from ._lib import lib
from ._types import (AttentionSinksResultStruct, BlockRemovalResultStruct,
                     BoundaryScaleResultStruct, LossResponseResultStruct, as_integer, as_number,
                     diag_p)
from .model import Model

__all__ = ["Diag", "RmsStats", "Removal", "Response", "Sinks"]


@dataclass(frozen=True)
class RmsStats:
    """Per-token RMS of the residual stream summarised over a set of tokens."""

    count: int
    mean: float
    std: float
    kurtosis: float
    max: float


@dataclass(frozen=True)
class Removal:
    """What skipping a block does: cross-entropies, their difference, the stream's angle."""

    ce_full: float
    ce_removed: float
    dce: float
    angle: float


@dataclass(frozen=True)
class Response:
    """The loss response to an append; recovery is -1 when the loss never came back."""

    baseline: float
    jump: float
    area: float
    recovery: int


@dataclass(frozen=True)
class Sinks:
    """Attention sinks and massive activations at one layer
    (lattice_diag_attention_sinks_result):
    mass0, the mean attention mass queries 1..seq-1 put on position 0; sink_rate,
    the share of heads whose mass is above the threshold; head_mass, each head's
    mass; top_ratio, the layer output's largest |activation| over the median, at
    (top_token, top_dim); value_norm0, position 0's value norm over the others'.
    A skipped layer's figures are NaN (and its top position -1)."""

    mass0: float
    sink_rate: float
    head_mass: Tuple[float, ...]
    top_ratio: float
    top_token: int
    top_dim: int
    value_norm0: float


class Diag(Handle):
    """Diagnostics of one model (borrowed and kept alive); their forwards overwrite its
    activations, as a forward of the model would."""

    _destroy = "lattice_diag_destroy"
    _errmsg = "lattice_diag_errmsg"

    def __init__(self, model: Model) -> None:
        require(model, Model, "model")
        out = diag_p()
        with using(model):
            check(lib.lattice_diag_create(model._ptr, byref(out)))
        self._adopt(out, borrows=(model,))
        self._bind(model=model)
        self._lend(_model=model)  # the user may close theirs; the diag keeps its object

    def _describe(self):
        return f"of {self._describe_other(self.model)}"

    def boundary_scale(self, tokens: Tokens, mask: Mask = None, batch: Optional[int] = None,
                       seq: Optional[int] = None, *, classes: Optional[Ints] = None,
                       n_classes: int = 2) -> List[List[RmsStats]]:
        """RMS statistics at every boundary of a forward over tokens.

        Returns ``stats[boundary][c]`` for boundary 0 .. active layers, where c
        is a token class (default: 1 at position 0 of each row, else 0) and
        the last entry (c = n_classes) covers every counted token.
        """
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        m = B.as_mask(mask, "mask", batch * seq)
        c = B.optional_input(classes, c_uint8, "classes", batch * seq)
        n_classes = as_integer(n_classes, "n_classes")
        per = min(max(n_classes, 0), 255) + 1   # the library refuses others, by name
        with self._using():   # the model's too: its depth and shape are this call's
            boundaries = self._model.active_layers + 1
            out = (BoundaryScaleResultStruct * (boundaries * per))()
            out[0].size = ctypes.sizeof(BoundaryScaleResultStruct)   # the array's stride
            self._call(lib.lattice_diag_measure_boundary_scale, arr, m, batch, seq, c, n_classes,
                       out, len(out))
        stats = [RmsStats(s.count, s.mean, s.std, s.kurtosis, s.max) for s in out]
        return [stats[b * per:(b + 1) * per] for b in range(boundaries)]

    def block_removal(self, tokens: Tokens, targets: Ints, first: int, count: int,
                      mask: Mask = None, batch: Optional[int] = None,
                      seq: Optional[int] = None) -> Removal:
        """dCE and angle of skipping layers [first, first + count) on a fixed batch."""
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        t = B.as_input(targets, c_int32, "targets", batch * seq)
        m = B.as_mask(mask, "mask", batch * seq)
        out = BlockRemovalResultStruct(size=ctypes.sizeof(BlockRemovalResultStruct))
        self._call(lib.lattice_diag_measure_block_removal, arr, t, m, batch, seq, first,
                   count, byref(out))
        return Removal(out.ce_full, out.ce_removed, out.dce, out.angle)

    def attention_sinks(self, tokens: Tokens, batch: Optional[int] = None,
                        seq: Optional[int] = None, *, threshold: float = 0.3) -> List[Sinks]:
        """One Sinks per active layer, from a forward over tokens (no padding: rows
        are not masked). threshold: a head whose mean mass on position 0 is above
        it counts as a sink (Gu et al. use 0.3)."""
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        with self._using():
            heads = self._model.params.n_heads
            layers = self._model.active_layers
            out = (AttentionSinksResultStruct * layers)()
            out[0].size = ctypes.sizeof(AttentionSinksResultStruct)   # the array's stride
            mass = (c_double * (layers * heads))()
            self._call(lib.lattice_diag_measure_attention_sinks, arr, batch, seq,
                       as_number(threshold, "threshold"), out, layers, mass, len(mass))
        return [Sinks(s.mass0, s.sink_rate, tuple(mass[i * heads:(i + 1) * heads]), s.top_ratio,
                      s.top_token, s.top_dim, s.value_norm0) for i, s in enumerate(out)]

    @staticmethod
    def loss_response(losses: Floats, append_step: int, window: int, horizon: int) -> Response:
        """The response to an append from a series of losses (float64 buffer or sequence)."""
        arr = B.as_input(losses, c_double, "losses")
        out = LossResponseResultStruct(size=ctypes.sizeof(LossResponseResultStruct))
        check(lib.lattice_diag_measure_loss_response(arr, len(arr), append_step, window,
                                                     horizon, byref(out)),
              f"append_step {append_step}, window {window}, horizon {horizon} "
              f"over {len(arr)} losses")
        return Response(out.baseline, out.jump, out.area, out.recovery)
