"""Backends (backend.h): "ref", "blis", "openblas", or GEMMs supplied from Python."""

from __future__ import annotations

import ctypes
import os
from ctypes import byref, c_float
from dataclasses import dataclass
from typing import Callable, Optional

from . import _buffers as B
from ._buffers import Floats, WritableBuffer
from ._errors import LatticeError, store_pending
from ._handle import Handle, check
from ._lib import lib
from ._types import BackendInfo, BackendOps, SetThreadsFn, SgemmFn, as_integer, backend_p

__all__ = ["Backend", "Kernels", "has_blis"]


@dataclass(frozen=True)
class Kernels:
    """Which kernels run a backend's GEMMs (lattice_backend_get_info).

    ``library`` is e.g. "BLIS 0.9.0" or "OpenBLAS 0.3.21", ``kernels`` its
    configuration ("haswell", "zen3", "SkylakeX", "Cooperlake", "reference"),
    ``optimised`` False for generic, reference or Prescott-class kernels, and
    ``reason`` why "default" chose it and how OpenBLAS's core was picked.
    """

    name: str
    library: str
    kernels: str
    optimised: bool
    reason: str


def has_blis() -> bool:
    """Whether this build of the library has the BLIS backend."""
    return bool(lib.lattice_backend_has_blis())


def _extent(rows, cols, ld):
    """Elements a row-major rows x cols matrix with leading dimension ld spans."""
    return 0 if rows == 0 or cols == 0 else (rows - 1) * ld + cols


def _gemm_extents(trans_a, trans_b, m, n, k, lda, ldb, ldc):
    a = _extent(k, m, lda) if trans_a else _extent(m, k, lda)
    b = _extent(n, k, ldb) if trans_b else _extent(k, n, ldb)
    return a, b, _extent(m, n, ldc)


def _check_name(name, what):
    if not isinstance(name, str):
        raise TypeError(f"{what}: name must be a str (\"ref\", \"blis\"...), got "
                        f"{type(name).__name__} {name!r}")


class Backend(Handle):
    """A compute backend; models borrow it (the model keeps it alive).

    ``Backend("ref")``, ``Backend("blis")``, ``Backend()`` for the build's
    default; ``threads`` sets the thread count of GEMMs and kernels.

    The library reads no environment variable; this package maps three, as the
    C examples do: ``LATTICE_BACKEND`` names the backend ``Backend()`` (and
    ``Backend("default")``) makes, ``LATTICE_PARALLEL`` (auto, ops, rows) sets
    ``parallel`` and ``LATTICE_ATTN_ISA`` (auto, portable, avx2, avx512)
    ``attention_kernel``; ``environment=False`` leaves them out.
    """

    PARALLEL_MODES = ("auto", "ops", "rows")

    _destroy = "lattice_backend_destroy"

    def _describe(self):
        threads = self.threads
        return f"{self.name} {threads} thread{'' if threads == 1 else 's'}"

    def __init__(self, name: str = "default", threads: Optional[int] = None, *,
                 environment: bool = True) -> None:
        _check_name(name, "Backend")
        what = f"backend {name!r}"
        env = os.environ if environment else {}
        if name == "default" and env.get("LATTICE_BACKEND"):
            name = env["LATTICE_BACKEND"]
            what = f"backend {name!r} (from LATTICE_BACKEND, in the environment)"
        out = backend_p()
        check(lib.lattice_backend_create(name.encode(), byref(out)), what)
        self._adopt(out)
        if env.get("LATTICE_PARALLEL"):
            if env["LATTICE_PARALLEL"] not in self.PARALLEL_MODES:
                raise ValueError(f"LATTICE_PARALLEL={env['LATTICE_PARALLEL']!r} (in the "
                                 f"environment) is not one of {', '.join(self.PARALLEL_MODES)}")
            self.parallel = env["LATTICE_PARALLEL"]
        if env.get("LATTICE_ATTN_ISA"):
            try:
                self.attention_kernel = env["LATTICE_ATTN_ISA"]
            except LatticeError as e:
                raise LatticeError(e.code, f"LATTICE_ATTN_ISA={env['LATTICE_ATTN_ISA']!r} (in "
                                   f"the environment): {e.message}") from None
        if threads is not None:
            self.threads = threads

    @classmethod
    def custom(cls, name: str,
               sgemm: Callable[[int, int, int, int, int, float, memoryview, int, memoryview,
                                int, float, memoryview, int], None],
               set_threads: Optional[Callable[[int], None]] = None) -> Backend:
        """A backend whose GEMMs run in Python.

        ``sgemm(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc)``
        gets a and b as read-only flat float32 memoryviews and c as a writable
        one (valid only during the call), and computes
        C = alpha * op(A) * op(B) + beta * C in row-major order. The views
        show copies of the library's memory: C's m rows of n values are copied
        back when sgemm returns (not what lies between rows ldc apart), and a
        slice kept after the call never reaches the library's memory. An exception
        it raises fails the library call with BACKEND and is chained to the
        LatticeError. ``set_threads(n)`` is told the thread count.
        """
        if not callable(sgemm) or (set_threads is not None and not callable(set_threads)):
            raise TypeError("sgemm and set_threads must be callable")

        def sgemm_cb(user, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            va = vb = vc = None
            try:
                na, nb, nc = _gemm_extents(ta, tb, m, n, k, lda, ldb, ldc)
                # copies: what sgemm keeps of them cannot reach the library's memory
                va = B.lent(a, na, c_float, readonly=True)
                vb = B.lent(b, nb, c_float, readonly=True)
                vc = B.lent(c, nc, c_float)
                out = vc.obj
                sgemm(ta, tb, m, n, k, alpha, va, lda, vb, ldb, beta, vc, ldc)
                B.give_back(out, c_float, c, m, n, ldc)
                return 0
            except BaseException as e:  # noqa: B902 - C cannot unwind Python exceptions
                store_pending(e)
                return 1
            finally:
                B.release(va, vb, vc)

        def threads_cb(user, n):
            try:
                set_threads(n)
            except BaseException as e:  # noqa: B902
                store_pending(e)

        ops = BackendOps.defaults()
        keep = [SgemmFn(sgemm_cb)]
        ops.sgemm = keep[0]
        if set_threads is not None:
            keep.append(SetThreadsFn(threads_cb))
            ops.set_threads = keep[1]
        self = cls.__new__(cls)
        out = backend_p()
        _check_name(name, "Backend.custom")
        check(lib.lattice_backend_create_custom(name.encode(), byref(ops), byref(out)))
        self._adopt(out, keep=keep)
        return self

    @property
    def name(self) -> str:
        """The backend's name ("ref", "blis", "openblas", a custom one's)."""
        return self._get(lib.lattice_backend_get_name).decode()

    @property
    def kernels(self) -> Kernels:
        """A :class:`Kernels`: the library and kernel configuration this backend runs."""
        info = BackendInfo()
        info.size = ctypes.sizeof(BackendInfo)
        self._call(lib.lattice_backend_get_info, byref(info))
        text = lambda raw: raw.decode(errors="replace")  # noqa: E731
        return Kernels(text(info.name), text(info.library), text(info.kernels),
                       bool(info.optimised), text(info.reason))

    @property
    def threads(self) -> int:
        """The thread count of GEMMs and kernels; settable."""
        return self._get(lib.lattice_backend_get_threads)

    @threads.setter
    def threads(self, n_threads: int) -> None:
        self._call(lib.lattice_backend_set_threads, as_integer(n_threads, "Backend.threads"))

    @property
    def parallel(self) -> str:
        """How models use the threads: "auto" (by shape), "ops" or "rows"; settable."""
        return self.PARALLEL_MODES[self._get(lib.lattice_backend_get_parallel)]

    @parallel.setter
    def parallel(self, mode: str) -> None:
        if mode not in self.PARALLEL_MODES:
            raise ValueError(f"parallel must be one of {', '.join(self.PARALLEL_MODES)}")
        self._call(lib.lattice_backend_set_parallel, self.PARALLEL_MODES.index(mode))

    @property
    def attention_kernel(self) -> str:
        """The fused attention kernels that run: "portable", "avx2" or "avx512";
        set "auto" (the CPU's best) or one of those."""
        return self._get(lib.lattice_backend_get_attention_kernel).decode()

    @attention_kernel.setter
    def attention_kernel(self, name: str) -> None:
        self._call(lib.lattice_backend_set_attention_kernel, str(name).encode())

    @property
    def gemm_precision(self) -> str:
        """The precision of the GEMMs: "fp32" (the default) or "bf16"; settable.

        bf16 rounds every GEMM's operands to bf16 and sums in fp32 (the
        optimizer, the fused attention and everything else stay fp32): only
        on the "onednn" backend on a CPU with AVX512-BF16 or AMX; elsewhere
        setting it raises :class:`LatticeError` (``Status.UNSUPPORTED``)
        saying why (lattice_backend_set_gemm_precision). Never the default.
        """
        return self._get(lib.lattice_backend_get_gemm_precision).decode()

    @gemm_precision.setter
    def gemm_precision(self, name: str) -> None:
        self._call(lib.lattice_backend_set_gemm_precision, str(name).encode())

    def sgemm(self, a: Floats, b: Floats, c: WritableBuffer, m: int, n: int, k: int, *,
              trans_a: bool = False, trans_b: bool = False, alpha: float = 1.0,
              beta: float = 0.0, lda: Optional[int] = None, ldb: Optional[int] = None,
              ldc: Optional[int] = None) -> None:
        """C = alpha * op(A) @ op(B) + beta * C through this backend, row-major, in place on c.

        a, b, c are float32 buffers; op(X) transposes X when trans_x is true.
        The leading dimensions default to the stored matrices' widths.
        """
        trans_a, trans_b = int(bool(trans_a)), int(bool(trans_b))
        m, n, k = (as_integer(v, f"sgemm {name}") for v, name in ((m, "m"), (n, "n"), (k, "k")))
        lda, ldb, ldc = (None if v is None else as_integer(v, f"sgemm {name}")
                         for v, name in ((lda, "lda"), (ldb, "ldb"), (ldc, "ldc")))
        for name, given in (("lda", lda), ("ldb", ldb), ("ldc", ldc)):
            if given is not None and given < 1:  # given: never replaced, only refused
                raise ValueError("%s %d must be at least 1" % (name, given))
        lda = max(m if trans_a else k, 1) if lda is None else lda
        ldb = max(k if trans_b else n, 1) if ldb is None else ldb
        ldc = max(n, 1) if ldc is None else ldc
        na, nb, nc = _gemm_extents(trans_a, trans_b, m, n, k, lda, ldb, ldc)
        pa = B.as_input(a, c_float, "a", na, at_least=True)
        pb = B.as_input(b, c_float, "b", nb, at_least=True)
        pc = B.as_output(c, c_float, "c", nc, at_least=True)
        self._call(lib.lattice_backend_sgemm, trans_a, trans_b, m, n, k, alpha, pa, lda, pb, ldb,
                   beta, pc, ldc)
