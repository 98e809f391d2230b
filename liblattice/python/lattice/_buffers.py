"""Arrays in and out through the buffer protocol (NumPy welcome, never needed).

In: any C-contiguous buffer whose items are of the C type (array.array('i'),
'f' or 'B', bytes and bytearray for uint8, NumPy arrays, memoryviews), or a
flat list or tuple of numbers, which is converted. Out: memoryviews over the
library's memory; they keep the C object alive but not its contents: what an
array shows is valid until the next call that rewrites it.
"""

import array
import ctypes
import sys
from math import prod

# C type -> (name, accepted struct formats, itemsize, memoryview format)
_KINDS = {
    ctypes.c_int32: ("int32", frozenset("il"), 4, "i"),
    ctypes.c_float: ("float32", frozenset("f"), 4, "f"),
    ctypes.c_uint8: ("uint8", frozenset("Bb?c"), 1, "B"),
    ctypes.c_double: ("float64", frozenset("d"), 8, "d"),
}

_NATIVE_PREFIXES = "@=" + ("<" if sys.byteorder == "little" else ">!")


def _format(fmt):
    if fmt and fmt[0] in _NATIVE_PREFIXES:
        fmt = fmt[1:]
    return fmt


def memview(obj, ctype, name):
    """A memoryview of obj after checking its item type and layout."""
    kind, formats, itemsize, code = _KINDS[ctype]
    if isinstance(obj, (list, tuple, range)):
        try:
            obj = array.array(code, obj)
        except (TypeError, OverflowError) as e:
            raise TypeError(f"{name}: cannot convert the sequence to {kind}: {e}") from None
    try:
        mv = memoryview(obj)
    except TypeError:
        raise TypeError(f"{name}: expected a buffer of {kind} (e.g. array.array({code!r}), "
                        f"a NumPy {kind} array), got {type(obj).__name__}") from None
    if _format(mv.format) not in formats or mv.itemsize != itemsize:
        raise TypeError(f"{name}: expected {kind} items, got format {mv.format!r} "
                        f"of {mv.itemsize} bytes")
    if not mv.c_contiguous:
        raise ValueError(f"{name}: the buffer must be C-contiguous")
    return mv


def count_of(mv):
    return mv.nbytes // mv.itemsize


def as_input(obj, ctype, name, count=None, at_least=False):
    """A ctypes array over obj's memory (a copy when obj is read-only) for a const pointer."""
    mv = memview(obj, ctype, name)
    n = count_of(mv)
    if count is not None and (n < count if at_least else n != count):
        kind = _KINDS[ctype][0]
        need = f"at least {count}" if at_least else f"{count}"
        raise ValueError(f"{name}: expected {need} {kind} values, got {n}")
    flat = mv.cast("B")
    if mv.readonly:
        return (ctype * n).from_buffer_copy(flat)
    return (ctype * n).from_buffer(flat)


def as_output(obj, ctype, name, count, at_least=False):
    """A ctypes array over obj's memory, which the library writes."""
    mv = memview(obj, ctype, name)
    if mv.readonly:
        raise TypeError(f"{name}: the buffer is read-only")
    return as_input(mv, ctype, name, count, at_least)


def optional_input(obj, ctype, name, count):
    return None if obj is None else as_input(obj, ctype, name, count)


def view(address, shape, ctype, keep=None, readonly=False):
    """A memoryview of shape over C memory at address; keep stays alive with it."""
    if not address:
        return None
    if isinstance(address, ctypes._Pointer):
        address = ctypes.cast(address, ctypes.c_void_p).value
        if not address:
            return None
    shape = tuple(int(s) for s in shape)
    arr = (ctype * prod(shape)).from_address(address)
    arr._lattice_keep = keep
    mv = memoryview(arr).cast("B").cast(_KINDS[ctype][3], shape)
    return mv.toreadonly() if readonly else mv


def release(*views):
    """Release views handed to a callback, so that none outlives the memory it shows.

    A view something else still exports (a NumPy array made over it) cannot be
    released; that one is the caller's to drop.
    """
    for v in views:
        if v is not None:
            try:
                v.release()
            except BufferError:
                pass


def batch_seq(tokens, batch, seq, name="tokens"):
    """(ctypes int32 array, batch, seq) from a [batch, seq] buffer, a list of rows, or a
    flat buffer with sizes."""
    if isinstance(tokens, (list, tuple)) and tokens and isinstance(tokens[0], (list, tuple)):
        rows = {len(row) for row in tokens}
        if len(rows) != 1:
            raise ValueError(f"{name}: rows of different lengths")
        if batch is None and seq is None:
            batch, seq = len(tokens), rows.pop()
        tokens = [t for row in tokens for t in row]
    mv = memview(tokens, ctypes.c_int32, name)
    n = count_of(mv)
    if batch is None and seq is None:
        if mv.ndim != 2:
            raise ValueError(f"{name}: give batch and seq, or a 2-D [batch, seq] buffer")
        batch, seq = mv.shape
    elif batch is None:
        batch = n // seq if seq and n % seq == 0 else -1
    elif seq is None:
        seq = n // batch if batch and n % batch == 0 else -1
    if batch < 1 or seq < 1 or batch * seq != n:
        raise ValueError(f"{name}: {n} values do not form batch {batch} x seq {seq}")
    return as_input(mv, ctypes.c_int32, name, n), int(batch), int(seq)
