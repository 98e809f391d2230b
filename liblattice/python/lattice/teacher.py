"""Teachers: a lattice model, or a Python callable that fills logits (teacher.h)."""

from __future__ import annotations

import os
from ctypes import byref, c_float, c_int32, c_void_p
from typing import Any, Callable, Optional, Tuple

from . import _buffers as B
from ._buffers import Tokens
from ._errors import store_pending
from ._handle import Handle, check, require, using
from ._lib import errmsg_buffer, lib
from ._types import FilePath, TeacherFn, as_size, teacher_p
from .data import Data
from .model import Model

__all__ = ["Teacher"]


def _trampoline(fn):
    """A C teacher callback around fn; what fn raises is kept for the caller."""

    def callback(user, tokens, batch, seq, vocab, logits):
        tv = lv = None
        try:
            n = batch * seq
            # copies: what fn keeps of them cannot reach the library's buffers
            tv = B.lent(tokens, n, c_int32, readonly=True)
            lv = B.lent(logits, n * vocab, c_float)
            out = lv.obj
            fn(tv, batch, seq, vocab, lv)
            B.give_back(out, c_float, logits)
            return 0
        except BaseException as e:  # noqa: B902 - C cannot unwind Python exceptions
            store_pending(e)
            return 1
        finally:
            B.release(tv, lv)

    return TeacherFn(callback)


class Teacher(Handle):
    """Where the distillation targets come from. Create with from_model or from_callback."""

    _destroy = "lattice_teacher_destroy"
    _errmsg = "lattice_teacher_errmsg"

    def _describe(self):
        if self.model is not None:
            return f"from {self._describe_other(self.model)}"
        if getattr(self, "fn", None) is not None:
            return f"from callback, vocab {self.vocab_size}"
        k = self.topk_k
        vocab = self.vocab_size
        return f"from file, top-{k} of vocab {vocab}" if k else f"from file, vocab {vocab}"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create a Teacher with Teacher.from_model or Teacher.from_callback")

    @classmethod
    def from_model(cls, model: Model) -> Teacher:
        """A teacher running all active layers of model (borrowed and kept alive)."""
        require(model, Model, "model")
        out = teacher_p()
        with using(model):
            check(lib.lattice_teacher_create_model(model._ptr, byref(out)))
        self = cls.__new__(cls)
        self._adopt(out, borrows=(model,))
        self._bind(model=model)
        return self

    @classmethod
    def from_file(cls, path: FilePath) -> Teacher:
        """A teacher reading precomputed logits (dense or top-k) from a safetensors file."""
        out, err = teacher_p(), errmsg_buffer()
        check(lib.lattice_teacher_create_file(os.fsencode(path), byref(out), err),
              err.value.decode(errors="replace"))
        self = cls.__new__(cls)
        self._adopt(out)
        self._bind(model=None)
        return self

    @property
    def topk_k(self) -> int:
        """k of a top-k file teacher, 0 for dense teachers."""
        return self._get(lib.lattice_teacher_get_k)

    def _topk(self, tokens, batch, seq, out, *args):
        """(out(index address, ...), out(value address, ...)), under the lock of the call."""
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        idx, val = c_void_p(), c_void_p()
        with self._using():
            self._call(lib.lattice_teacher_topk, arr, batch, seq, byref(idx), byref(val))
            shape = (batch, seq, self.topk_k)
            return out(idx.value, shape, c_int32, *args), out(val.value, shape, c_float, *args)

    def topk(self, tokens: Tokens, batch: Optional[int] = None,
             seq: Optional[int] = None) -> Tuple[memoryview, memoryview]:
        """(index, value): copies, int32 and float32 [batch, seq, k], from a top-k file teacher."""
        return self._topk(tokens, batch, seq, B.copy)

    def topk_view(self, tokens: Tokens, batch: Optional[int] = None,
                  seq: Optional[int] = None) -> Tuple[memoryview, memoryview]:
        """(index, value) as zero-copy read-only views, valid until the next call."""
        return self._topk(tokens, batch, seq, B.view, self._res, True)

    def record(self, data: Data, n_batches: int, path: FilePath, k: int = 0) -> None:
        """Write this teacher's logits (top-k when k > 0) for the next n_batches of data."""
        require(data, Data, "data")
        self._call(lib.lattice_teacher_record, data._ptr, n_batches, k, os.fsencode(path),
                   using=(data,))

    @classmethod
    def from_callback(cls, fn: Callable[[memoryview, int, int, int, memoryview], None],
                      vocab_size: int, max_batch: int, max_seq: int) -> Teacher:
        """A teacher that calls ``fn(tokens, batch, seq, vocab, logits)``.

        tokens is a read-only int32 memoryview [batch * seq]; fn fills logits, a
        writable float32 memoryview [batch * seq * vocab] (row-major [batch, seq,
        vocab]). Both are valid only during the call: they show copies of the
        library's buffers (fn's logits are copied back when it returns), so a
        slice or NumPy array of them kept after the call never reaches the
        library's memory. An exception fn raises
        fails the library call with BACKEND; the LatticeError raised from it has
        the exception as its __cause__.
        """
        if not callable(fn):
            raise TypeError(f"fn must be callable, got {type(fn).__name__}")
        callback = _trampoline(fn)
        out = teacher_p()
        check(lib.lattice_teacher_create_callback(callback, None, vocab_size, max_batch, max_seq,
                                                  byref(out)),
              f"vocab {vocab_size}, batch {max_batch} x {max_seq}")
        self = cls.__new__(cls)
        self._adopt(out, keep=(callback,))
        self._bind(model=None, fn=fn)
        return self

    @property
    def vocab_size(self) -> int:
        """The teacher's vocabulary size."""
        return self._get(lib.lattice_teacher_get_vocab_size)

    def _logits(self, tokens, batch, seq, out, *args):
        """out(address, shape, float32, *args) for the logits, under the lock of the call
        (a model teacher's lock covers its model)."""
        arr, batch, seq = B.batch_seq(tokens, batch, seq)
        address = c_void_p()
        with self._using():
            self._call(lib.lattice_teacher_logits, arr, batch, seq, byref(address))
            return out(address.value, (batch, seq, self.vocab_size), c_float, *args)

    def logits(self, tokens: Tokens, batch: Optional[int] = None,
               seq: Optional[int] = None) -> memoryview:
        """A copy of the teacher's logits for tokens: float32 [batch, seq, vocab]."""
        return self._logits(tokens, batch, seq, B.copy)

    def logits_view(self, tokens: Tokens, batch: Optional[int] = None,
                    seq: Optional[int] = None) -> memoryview:
        """Zero-copy read-only view of the teacher's logits for tokens.

        Valid until the next call on the teacher (for a model teacher, the next
        forward of its model).
        """
        # The teacher's resource holds its model's: the view keeps both alive.
        return self._logits(tokens, batch, seq, B.view, self._res, True)

    def flops(self, batch: int, seq: int) -> float:
        """FLOPs of one teacher forward (0 for a callback teacher: unknown)."""
        return self._get(lib.lattice_teacher_get_flops, as_size(batch, "Teacher.flops batch"),
                         as_size(seq, "Teacher.flops seq"))

    def init_student(self, student: Model) -> None:
        """Copy embedding (frozen), LM head and final norm from a model teacher into student."""
        require(student, Model, "student")
        self._call(lib.lattice_teacher_init_student, student._ptr, using=(student,))
