"""Arrays in and out through the buffer protocol (NumPy welcome, never needed).

In: any buffer whose items are of the C type (array.array('i'), 'f' or 'B',
bytes and bytearray for uint8, NumPy arrays, memoryviews), or a flat list or
tuple of numbers, which is converted. Token ids, targets and indices (int32
in C) may be of any integer type, NumPy's default int64 included: they are
converted once, and a value outside int32 is a ValueError. A buffer that is
not C-contiguous (a slice ``tok[:2, :10]``, a transpose) is copied in C
order, as a conversion is. Masks hold 0 and 1 only (:func:`as_mask`).
Buffers the library writes (outputs) must be C-contiguous and writable: a
copy would take what the library wrote, and the caller would never see it.

Out: copies by default (:func:`copy`), memoryviews the caller owns; a
model's logits, dlogits and hidden states come as read-only copies, so that
a copy passed where the library writes (``dlogits=``) is refused instead of
taking a result that would be lost. The
``*_view()`` methods return memoryviews over the library's memory instead
(:func:`view`): no copy, and they keep the C object alive, but not its
contents: what they show is valid only until the next call that rewrites it.
"""

from __future__ import annotations

import array
import ctypes
import operator
import sys
from math import prod
from typing import TYPE_CHECKING, Any, Optional, Sequence, Union

# ---- the types in the public signatures ------------------------------------------------
# Buffer: any object with the buffer protocol (bytes, bytearray, array.array, memoryview,
# a NumPy array); type checkers take typeshed's names for it (collections.abc.Buffer
# from Python 3.12), run time has no such type before 3.12.
if TYPE_CHECKING:
    from _typeshed import ReadableBuffer as Buffer
    from _typeshed import WriteableBuffer as WritableBuffer
else:
    Buffer = WritableBuffer = Any

Ints = Union[Buffer, Sequence[int]]        # int32 values: targets, ids, indices (any integer type)
Floats = Union[Buffer, Sequence[float]]    # float32 (float64 where said) values
Tokens = Union[Buffer, Sequence[int], Sequence[Sequence[int]]]  # int32 [batch, seq]: 2-D, flat, rows
Mask = Optional[Ints]                      # uint8 flags, 0 or 1; None: every position counts

# C type -> (name, accepted struct formats, itemsize, memoryview format)
_KINDS = {
    ctypes.c_int32: ("int32", frozenset("il"), 4, "i"),
    ctypes.c_float: ("float32", frozenset("f"), 4, "f"),
    ctypes.c_uint8: ("uint8", frozenset("Bb?c"), 1, "B"),
    ctypes.c_double: ("float64", frozenset("d"), 8, "d"),
}

_NATIVE_PREFIXES = "@=" + ("<" if sys.byteorder == "little" else ">!")
_INTEGER_FORMATS = frozenset("bBhHiIlLqQnN")
INT32_MIN, INT32_MAX = -2**31, 2**31 - 1


def _format(fmt):
    if fmt and fmt[0] in _NATIVE_PREFIXES:
        fmt = fmt[1:]
    return fmt


def _int32_from(mv, obj, name):
    """An int32 memoryview of mv's shape holding mv's integers, range-checked."""
    if mv.nbytes == 0:
        return memoryview(array.array("i")).cast("B").cast("i", mv.shape)
    if hasattr(obj, "astype") and hasattr(obj, "min"):   # NumPy: convert in C
        lo, hi = int(obj.min()), int(obj.max())
        if lo < INT32_MIN or hi > INT32_MAX:
            bad = lo if lo < INT32_MIN else hi
            raise ValueError(f"{name}: value {bad} is outside int32 "
                             f"[{INT32_MIN}, {INT32_MAX}]")
        return memoryview(obj.astype("int32", order="C"))
    flat = mv.cast("B").cast(_format(mv.format))
    try:
        out = array.array("i", flat)
    except OverflowError:
        bad = next(v for v in flat if not INT32_MIN <= v <= INT32_MAX)
        raise ValueError(f"{name}: value {bad} is outside int32 "
                         f"[{INT32_MIN}, {INT32_MAX}]") from None
    return memoryview(out).cast("B").cast("i", mv.shape)


def _c_order(mv):
    """A C-contiguous copy of a strided memoryview, of its format and shape."""
    fmt = _format(mv.format)
    flat = memoryview(bytearray(mv.tobytes())).cast("B")
    if mv.nbytes == 0:
        return flat.cast(fmt)
    return flat.cast(fmt, mv.shape)


def memview(obj, ctype, name, convert=False, output=False):
    """A memoryview of obj after checking its item type and layout.

    With convert, an int32 input of another integer type is converted (a copy).
    A buffer that is not C-contiguous is copied in C order, unless output
    says the library writes into it (then it is refused: the caller would
    never see what the library wrote into a copy).
    """
    kind, formats, itemsize, code = _KINDS[ctype]
    if isinstance(obj, (list, tuple, range)):
        try:
            obj = array.array(code, obj)
        except OverflowError as e:
            if ctype is ctypes.c_int32:
                bad = next(v for v in obj if not INT32_MIN <= v <= INT32_MAX)
                raise ValueError(f"{name}: value {bad} is outside int32 "
                                 f"[{INT32_MIN}, {INT32_MAX}]") from None
            raise TypeError(f"{name}: cannot convert the sequence to {kind}: {e}") from None
        except TypeError as e:
            if any(isinstance(v, (list, tuple, range)) for v in obj):
                raise TypeError(f"{name}: a flat sequence of {kind} (the values row after "
                                f"row), got a sequence of sequences") from None
            raise TypeError(f"{name}: cannot convert the sequence to {kind}: {e}") from None
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{name}: expected a buffer of {kind} (e.g. array.array({code!r}), "
                        f"a NumPy {kind} array), got {type(obj).__name__}") from None
    fmt = _format(mv.format)
    to_int32 = convert and ctype is ctypes.c_int32 and fmt in _INTEGER_FORMATS and (
        fmt not in formats or mv.itemsize != itemsize)
    if not to_int32 and (fmt not in formats or mv.itemsize != itemsize):
        raise TypeError(f"{name}: expected {kind} items, got format {mv.format!r} "
                        f"of {mv.itemsize} bytes")
    if not mv.c_contiguous:
        if output:
            raise ValueError(f"{name}: the buffer must be C-contiguous, as the library "
                             "writes into it and what it wrote into a copy would be lost "
                             "(pass a contiguous buffer, e.g. numpy.ascontiguousarray(x), "
                             "and read the result from it)")
        if to_int32 and hasattr(obj, "astype"):
            return _int32_from(mv, obj, name)   # NumPy converts and copies at once
        mv = obj = _c_order(mv)
    if to_int32:
        return _int32_from(mv, obj, name)
    return mv


def count_of(mv):
    return mv.nbytes // mv.itemsize


def as_input(obj, ctype, name, count=None, at_least=False):
    """A ctypes array over obj's memory (a copy when obj is read-only or of another integer
    type) for a const pointer."""
    mv = memview(obj, ctype, name, convert=True)
    n = count_of(mv)
    if count is not None and (n < count if at_least else n != count):
        kind = _KINDS[ctype][0]
        need = f"at least {count}" if at_least else f"{count}"
        raise ValueError(f"{name}: expected {need} {kind} values, got {n}")
    flat = mv.cast("B")
    if mv.readonly:
        return (ctype * n).from_buffer_copy(flat)
    return (ctype * n).from_buffer(flat)


class _ModelCopy(bytearray):
    """The storage of a read-only copy of a model's buffer (:func:`copy` with ``what``):
    what it copies, and what to pass instead where the library writes."""


def _copy_of(obj):
    """The _ModelCopy under obj (a copy, a memoryview or NumPy array over one), or None."""
    for _ in range(4):
        if isinstance(obj, _ModelCopy):
            return obj
        obj = obj.obj if isinstance(obj, memoryview) else getattr(obj, "base", None)
        if obj is None:
            return None
    return None


def as_output(obj, ctype, name, count, at_least=False):
    """A ctypes array over obj's memory, which the library writes."""
    mv = memview(obj, ctype, name, output=True)
    if mv.readonly:
        origin = _copy_of(obj)
        if origin is not None:
            raise TypeError(f"{name}: {origin.what} is a read-only copy (since 0.4), and what "
                            f"the library wrote into it would be lost: pass {origin.instead}")
        raise TypeError(f"{name}: the buffer is read-only")
    return as_input(mv, ctype, name, count, at_least)


def optional_input(obj, ctype, name, count):
    return None if obj is None else as_input(obj, ctype, name, count)


def as_mask(obj, name, count):
    """as_input for a uint8 mask of count flags, each 0 or 1; None for no mask.

    The library counts every non-zero value as 1: a 2 is a mistake (a class
    id, a weight) that would pass unnoticed, so it is refused.
    """
    if obj is None:
        return None
    arr = as_input(obj, ctypes.c_uint8, name, count)
    flat = bytes(arr)
    if flat.translate(None, b"\x00\x01"):
        at = next(i for i, v in enumerate(flat) if v > 1)
        value, where = flat[at], f"position {at}"
        if not isinstance(obj, (list, tuple, range)):
            mv = memoryview(obj)
            if _format(mv.format) == "b" and value > 127:
                value -= 256                    # int8: the value as the caller wrote it
            if mv.ndim > 1:
                index, rest = [], at
                for size in reversed(mv.shape):
                    index.append(rest % size)
                    rest //= size
                where += f" (index {tuple(reversed(index))})"
        raise ValueError(f"{name}: value {value} at {where}; a mask holds 0 (the position "
                         "does not count) or 1 (it counts)")
    return arr


def _address(address):
    """An int address from an int, a c_void_p value or a ctypes pointer; 0 for NULL."""
    if isinstance(address, ctypes._Pointer):
        address = ctypes.cast(address, ctypes.c_void_p).value
    return address or 0


def view(address, shape, ctype, keep=None, readonly=False):
    """A memoryview of shape over C memory at address; keep stays alive with it."""
    address = _address(address)
    if not address:
        return None
    shape = tuple(int(s) for s in shape)
    arr = (ctype * prod(shape)).from_address(address)
    arr._lattice_keep = keep
    mv = memoryview(arr).cast("B").cast(_KINDS[ctype][3], shape)
    return mv.toreadonly() if readonly else mv


def copy(address, shape, ctype, what=None, instead=None):
    """A memoryview of shape holding a copy of the C memory at address: writable, or,
    given what (say "Model.dlogits()") and instead (what to pass where the library
    writes), read-only."""
    address = _address(address)
    if not address:
        return None
    shape = tuple(int(s) for s in shape)
    nbytes = prod(shape) * ctypes.sizeof(ctype)
    buf = bytearray(nbytes) if what is None else _ModelCopy(nbytes)
    if nbytes:
        ctypes.memmove((ctypes.c_char * nbytes).from_buffer(buf), address, nbytes)
    mv = memoryview(buf).cast(_KINDS[ctype][3], shape)
    if what is None:
        return mv
    buf.what, buf.instead = what, instead
    return mv.toreadonly()


def lent(address, n, ctype, readonly=False):
    """A flat memoryview of n values for a callback, over a Python-owned copy of the
    C memory at address (none read for n = 0).

    A slice of it, or a NumPy array made over it, that the callback keeps shows
    this copy after the call, never the library's memory, which the library
    reuses or frees. :func:`give_back` copies a writable one's values back from its
    ``obj``.
    """
    nbytes = int(n) * ctypes.sizeof(ctype)
    buf = bytearray(nbytes)
    if nbytes:
        ctypes.memmove((ctypes.c_char * nbytes).from_buffer(buf), _address(address), nbytes)
    mv = memoryview(buf).cast(_KINDS[ctype][3])
    return mv.toreadonly() if readonly else mv


def give_back(buf, ctype, address, rows=1, width=None, stride=None):
    """Copy the values of a writable :func:`lent` view, whose bytes are buf (its
    ``obj``, taken before the callback ran: the callback may release the view),
    to the C memory at address: all of them, or rows rows of width values each
    stride values apart (a matrix's columns 0 .. width - 1, and nothing of
    what lies between its rows)."""
    size = ctypes.sizeof(ctype)
    width = len(buf) // size if width is None else width
    stride = width if stride is None else stride
    if not (rows and width):
        return
    src = (ctypes.c_char * len(buf)).from_buffer(buf)
    dst = _address(address)
    if stride == width:
        ctypes.memmove(dst, src, rows * width * size)
        return
    base = ctypes.addressof(src)
    for r in range(rows):
        ctypes.memmove(dst + r * stride * size, base + r * stride * size, width * size)


def release(*views):
    """Release the views handed to a callback: a view the callback kept raises on use.

    A view something else still exports (a NumPy array made over it) cannot be
    released; it shows a :func:`lent` copy, not the library's memory.
    """
    for v in views:
        if v is not None:
            try:
                v.release()
            except BufferError:
                pass


def _size(value, what):
    """batch or seq as an int, or TypeError: a float would pass the product check
    and be truncated (batch 2.5 x seq 1.6 over 4 tokens ran 2 x 1)."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be an integer, got bool {value!r}")
    try:
        return operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be an integer, got {type(value).__name__} "
                        f"{value!r}") from None


def batch_seq(tokens, batch, seq, name="tokens"):
    """(ctypes int32 array, batch, seq) from a [batch, seq] buffer, a list of rows, or a
    flat buffer with sizes. A 2-D input's shape is its batch and seq: sizes
    given with it must agree."""
    batch, seq = (None if v is None else _size(v, what) for v, what in ((batch, "batch"),
                                                                        (seq, "seq")))
    shape = None
    if isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], (list, tuple)):
        rows = {len(row) for row in tokens}
        if len(rows) != 1:
            raise ValueError(f"{name}: rows of different lengths")
        shape = (len(tokens), rows.pop())
        tokens = [t for row in tokens for t in row]
    mv = memview(tokens, ctypes.c_int32, name, convert=True)
    n = count_of(mv)
    if mv.ndim == 2:
        shape = tuple(mv.shape)
    if shape is not None:
        if (batch is not None and batch != shape[0]) or (seq is not None and seq != shape[1]):
            raise ValueError(f"{name}: a [{shape[0]}, {shape[1]}] input given batch {batch} and "
                             f"seq {seq}: leave them out, or give a flat buffer")
        batch, seq = shape
    elif batch is None and seq is None:
        raise ValueError(f"{name}: give batch and seq, or a 2-D [batch, seq] buffer")
    elif batch is None:
        batch = n // seq if seq and n % seq == 0 else -1
    elif seq is None:
        seq = n // batch if batch and n % batch == 0 else -1
    if batch < 1 or seq < 1 or batch * seq != n:
        raise ValueError(f"{name}: {n} values do not form batch {batch} x seq {seq}")
    return as_input(mv, ctypes.c_int32, name, n), int(batch), int(seq)
