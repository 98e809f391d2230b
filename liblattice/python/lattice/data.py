"""Token sources, documents, the train/validation split and batching (data.h)."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_int32, c_uint8
from dataclasses import dataclass
from typing import Any, Iterator, Optional, Tuple, Union

from . import _buffers as B
from ._buffers import Ints
from ._handle import Handle, check
from ._lib import errmsg_buffer, lib
from ._types import (BatchStruct, DataParams, FilePath, PositionStruct, Split, data_p, to_enum,
                     with_fields)

__all__ = ["Data", "Batch", "Position"]


@dataclass(frozen=True)
class Position:
    """Where the training iterator stands: completed passes, next document within the pass."""

    epoch: int
    index: int


class Batch:
    """One batch: int32 tokens and targets and a uint8 mask, [batch, seq] each.

    Copies from :meth:`Data.next` and :meth:`Data.val_batch`; from their
    ``*_view()`` twins, read-only views of the data object's buffers, valid
    until its next batch call.
    """

    __slots__ = ("tokens", "targets", "mask", "batch", "seq", "n_tokens")
    tokens: memoryview
    targets: memoryview
    mask: memoryview
    batch: int
    seq: int
    n_tokens: int   # the positions that count (mask 1)

    def __init__(self, b: BatchStruct, keep: object, view: bool = False) -> None:
        shape = (b.batch, b.seq)
        self.batch, self.seq, self.n_tokens = b.batch, b.seq, b.n_tokens
        if view:
            self.tokens = B.view(b.tokens, shape, c_int32, keep, readonly=True)
            self.targets = B.view(b.targets, shape, c_int32, keep, readonly=True)
            self.mask = B.view(b.mask, shape, c_uint8, keep, readonly=True)
        else:
            self.tokens = B.copy(b.tokens, shape, c_int32)
            self.targets = B.copy(b.targets, shape, c_int32)
            self.mask = B.copy(b.mask, shape, c_uint8)

    def __repr__(self) -> str:
        return f"Batch({self.batch} x {self.seq}, n_tokens={self.n_tokens})"


class Data(Handle):
    """A corpus as documents of token ids. Create with from_text, from_tokens or from_memory;
    keyword arguments are DataParams fields over the byte-level text defaults."""

    _destroy = "lattice_data_destroy"
    _errmsg = "lattice_data_errmsg"
    _creation_params = DataParams
    _creation_how = ("data.params.{name} reads it; create another Data for another "
                     "(lattice.Data.from_memory(ids, data.params, {name}=...))")

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        raise TypeError("create Data with Data.from_text, Data.from_tokens or Data.from_memory")

    @classmethod
    def _create(cls, fn, args, params, fields):
        p = DataParams.make(params, **fields)
        out, err = data_p(), errmsg_buffer()
        check(fn(*args, byref(p), byref(out), err), err.value.decode(errors="replace"))
        self = cls.__new__(cls)
        self._adopt(out)
        return self

    @classmethod
    @with_fields(DataParams)
    def from_text(cls, path: FilePath, params: Optional[DataParams] = None,
                  **fields: Any) -> Data:
        """Byte-level text: every byte a token, documents split at the separator ("\\f")."""
        return cls._create(lib.lattice_data_create_text, (os.fsencode(path),), params, fields)

    @classmethod
    @with_fields(DataParams)
    def from_tokens(cls, path: FilePath, bytes_per_id: int, params: Optional[DataParams] = None,
                    **fields: Any) -> Data:
        """A file of little-endian uint16 (bytes_per_id 2) or uint32 (4) token ids."""
        return cls._create(lib.lattice_data_create_tokens, (os.fsencode(path), bytes_per_id),
                           params, fields)

    @classmethod
    @with_fields(DataParams)
    def from_memory(cls, ids: Ints, params: Optional[DataParams] = None,
                    **fields: Any) -> Data:
        """Token ids from an int32 buffer (copied)."""
        arr = B.as_input(ids, c_int32, "ids")
        return cls._create(lib.lattice_data_create_memory, (arr, len(arr)), params, fields)

    def _describe(self):
        p = self.params
        return (f"{self.n_documents(Split.TRAIN)} train + {self.n_documents(Split.VAL)} val "
                f"documents, batches {p.batch_size} x {p.seq_len}")

    @property
    def params(self) -> DataParams:
        """The DataParams in use (separator is None: the library does not keep it).

        A read-only copy: the settings are fixed at creation; create another
        Data for others (``Data.from_memory(ids, data.params, batch_size=8)``).
        """
        out = DataParams()
        out.size = ctypes.sizeof(out)  # the bytes this package can take
        self._call(lib.lattice_data_get_params, byref(out))
        return out.read_only("a Data's settings are fixed at creation: create another "
                             "(lattice.Data.from_memory(ids, data.params, batch_size=8))")

    def n_documents(self, split: Union[Split, str, int] = Split.TRAIN) -> int:
        """The number of documents in a split."""
        return self._get(lib.lattice_data_get_n_documents, to_enum(Split, split))

    def n_tokens(self, split: Union[Split, str, int] = Split.TRAIN) -> int:
        """The number of tokens in a split (boundary tokens included)."""
        return self._get(lib.lattice_data_get_n_tokens, to_enum(Split, split))

    def _batch(self, fn, args, view):
        b = BatchStruct()
        with self._using() as res:   # copied before another thread's call rewrites it
            self._call(fn, *args, byref(b))
            return Batch(b, res, view)

    def next(self) -> Batch:
        """The next training batch (copies)."""
        return self._batch(lib.lattice_data_next, (), False)

    def next_view(self) -> Batch:
        """The next training batch as views of the library's buffers (no copy)."""
        return self._batch(lib.lattice_data_next, (), True)

    @property
    def n_val_batches(self) -> int:
        """The number of batches that cover the validation split once."""
        return self._get(lib.lattice_data_get_n_val_batches)

    def val_batch(self, index: int) -> Batch:
        """Batch index of the fixed validation set (copies)."""
        return self._batch(lib.lattice_data_get_val_batch, (index,), False)

    def val_batch_view(self, index: int) -> Batch:
        """Batch index of the validation set as views (valid until the next batch call)."""
        return self._batch(lib.lattice_data_get_val_batch, (index,), True)

    def val_batches(self) -> Iterator[Batch]:
        """Each validation batch in turn (copies)."""
        for i in range(self.n_val_batches):
            yield self.val_batch(i)

    @property
    def position(self) -> Position:
        """Where the training iterator stands; settable (a Position or (epoch, index))."""
        out = PositionStruct()
        self._call(lib.lattice_data_get_position, byref(out))
        return Position(out.epoch, out.index)

    @position.setter
    def position(self, pos: Union[Position, Tuple[int, int]]) -> None:
        epoch, index = (pos.epoch, pos.index) if isinstance(pos, Position) else pos
        self._call(lib.lattice_data_set_position, byref(PositionStruct(epoch, index)))
