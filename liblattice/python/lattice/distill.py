"""Distillation losses (distill.h)."""

from __future__ import annotations

import ctypes
from ctypes import byref, c_float, c_int32
from dataclasses import dataclass
from typing import Any, Optional

from . import _buffers as B
from ._buffers import Floats, Ints, Mask, WritableBuffer
from ._handle import Handle, check
from ._lib import lib
from ._types import (DistillParams, DistillResultStruct, KLDirection, as_integer, distill_p,
                     with_fields)

__all__ = ["Distill", "DistillResult"]


@dataclass(frozen=True)
class DistillResult:
    """The loss of one batch and its parts, means over the counted positions."""

    loss: float
    kl: float
    ce: float
    n_counted: int


def _positions(student, vocab):
    """(float32 view, n, vocab) of student logits [n, vocab] (or [batch, seq, vocab])."""
    mv = B.memview(student, c_float, "student")
    total = B.count_of(mv)
    if vocab is not None:
        vocab = as_integer(vocab, "vocab")
    if vocab is None:
        if mv.ndim < 2:
            raise ValueError("student: give vocab, or a buffer shaped [..., vocab]")
        vocab = mv.shape[-1]
    if vocab < 1 or total % vocab:
        raise ValueError(f"student: {total} values are not rows of vocab {vocab}")
    return mv, total // vocab, vocab


class Distill(Handle):
    """L = alpha * tau^2 * KL + gamma * CE; keyword arguments are DistillParams fields.

    tau is taken in ``Distill.TAU_MIN`` .. ``Distill.TAU_MAX`` (0.01 .. 100, the C
    header's ``LATTICE_DISTILL_TAU_MIN`` and ``_MAX``, since 1.1).
    """

    TAU_MIN = 0.01   # LATTICE_DISTILL_TAU_MIN
    TAU_MAX = 100.0  # LATTICE_DISTILL_TAU_MAX

    _destroy = "lattice_distill_destroy"
    _errmsg = "lattice_distill_errmsg"
    _creation_params = DistillParams
    _creation_how = ("distill.params.{name} reads it; create another for another "
                     "(lattice.Distill(distill.params, {name}=...))")

    @with_fields(DistillParams)
    def __init__(self, params: Optional[DistillParams] = None, **fields: Any) -> None:
        p = DistillParams.make(params, **fields)
        out = distill_p()
        check(lib.lattice_distill_create(byref(p), byref(out)))
        self._adopt(out)

    def _describe(self):
        p = self.params
        return (f"alpha {p.alpha:g} gamma {p.gamma:g} tau {p.tau:g} "
                f"{KLDirection(p.direction).name.lower()} KL")

    @property
    def params(self) -> DistillParams:
        """The DistillParams in use: a read-only copy (the settings are fixed at creation;
        ``lattice.Distill(loss.params, tau=2.0)`` makes a loss with others)."""
        out = DistillParams()
        out.size = ctypes.sizeof(out)  # the bytes this package can take
        self._call(lib.lattice_distill_get_params, byref(out))
        return out.read_only("a Distill's settings are fixed at creation: create another "
                             "(lattice.Distill(loss.params, tau=2.0))")

    def dense(self, student: Floats, teacher: Floats, targets: Optional[Ints] = None,
              mask: Mask = None, *, vocab: Optional[int] = None,
              dlogits: Optional[WritableBuffer] = None) -> DistillResult:
        """The loss against dense teacher logits.

        student and teacher are float32 [n, vocab] (any shape ending in vocab,
        or flat with vocab given); targets int32 [n] (None only when gamma is
        0); mask uint8 [n]; dlogits, when given, a writable float32 [n, vocab]
        buffer that receives the gradient (a model's :meth:`Model.dlogits_view`;
        the read-only copy :meth:`Model.dlogits` is refused).
        """
        mv, n, vocab = _positions(student, vocab)
        s = B.as_input(mv, c_float, "student", n * vocab)
        t = B.as_input(teacher, c_float, "teacher", n * vocab)
        return self._run(lib.lattice_distill_dense, (s, t), targets, mask, n, vocab, dlogits)

    def topk(self, student: Floats, index: Ints, value: Floats, targets: Optional[Ints] = None,
             mask: Mask = None, *, k: Optional[int] = None, vocab: Optional[int] = None,
             dlogits: Optional[WritableBuffer] = None) -> DistillResult:
        """The loss against a teacher's top-k: int32 index and float32 value, [n, k] each."""
        mv, n, vocab = _positions(student, vocab)
        s = B.as_input(mv, c_float, "student", n * vocab)
        if k is None:
            if n == 0:
                raise ValueError("k must be given for a batch of no positions")
            given = B.count_of(B.memview(index, c_int32, "index", convert=True))
            if given < n or given % n:
                raise ValueError(f"index: {given} values are not k per position for {n} "
                                 "positions (give k)")
            k = given // n
        k = as_integer(k, "k")
        if not 1 <= k <= vocab:
            raise ValueError(f"k {k} must be in 1..vocab ({vocab})")
        i = B.as_input(index, c_int32, "index", n * k)
        v = B.as_input(value, c_float, "value", n * k)
        return self._run(lib.lattice_distill_topk, (s, i, v, k), targets, mask, n, vocab, dlogits)

    def _run(self, fn, head, targets, mask, n, vocab, dlogits):
        t = B.optional_input(targets, c_int32, "targets", n)
        m = B.as_mask(mask, "mask", n)
        d = None if dlogits is None else B.as_output(dlogits, c_float, "dlogits", n * vocab)
        result = DistillResultStruct()
        self._call(fn, *head, t, m, n, vocab, d, byref(result))
        return DistillResult(result.loss, result.kl, result.ce, result.n_counted)
