"""Backends: the reference and BLAS ones, threads, a backend of callbacks.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import ctypes
import os
import unittest

import lattice
from lattice import LatticeError, Status
from lattice import _lib
from lattice_helpers import tiny_model


class BackendTest(unittest.TestCase):
    def test_builtin(self):
        with lattice.Backend("ref", threads=2) as be:
            self.assertEqual(be.name, "ref")
            self.assertEqual(be.threads, 2)
            with self.assertRaises(LatticeError) as cm:
                be.threads = 0
            self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn(lattice.has_blis(), (True, False))
        with self.assertRaises(LatticeError) as cm:
            lattice.Backend("no-such-backend")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND)
        if not lattice.has_blis():
            with self.assertRaises(LatticeError) as cm:
                lattice.Backend("blis")
            self.assertEqual(cm.exception.code, Status.UNSUPPORTED)

    def test_errors_say_why(self):
        # a failure without a handle: the library's reason, not only the status
        with self.assertRaises(LatticeError) as cm:
            lattice.Backend("no-such-backend")
        self.assertIn("no backend named 'no-such-backend'", str(cm.exception))
        self.assertIn("no-such-backend", _lib.last_error())
        with self.assertRaises(LatticeError) as cm:
            lattice.Schedule.preset("grow", n_blocks=0)
        self.assertIn("n_blocks 0", str(cm.exception))
        # a failure on a handle whose message the call did not set before 0.2
        with lattice.Backend("ref") as be, self.assertRaises(LatticeError) as cm:
            be.threads = 0
        self.assertIn("lattice_backend_set_threads", str(cm.exception))

    def test_kernels(self):
        names = ["ref", "blis", "openblas", "onednn"]
        for name in names:
            try:
                be = lattice.Backend(name)
            except LatticeError as e:
                self.assertEqual(e.code, Status.UNSUPPORTED)  # not built, or not loadable
                continue
            with self.subTest(name=name), be:
                k = be.kernels
                self.assertEqual(k.name, name)
                self.assertTrue(k.library and k.kernels)
                if name == "ref":
                    self.assertEqual((k.kernels, k.optimised), ("reference", False))
                elif name == "blis":
                    self.assertTrue(k.library.startswith("BLIS "))
                    self.assertEqual(k.optimised, k.kernels != "generic")
                elif name == "onednn":
                    self.assertTrue(k.library.startswith("oneDNN "))
                    self.assertTrue(k.kernels.startswith(("avx2", "avx512")) or not k.optimised)
                else:
                    self.assertTrue(k.library.startswith("OpenBLAS "))
                    self.assertEqual(k.optimised, k.kernels.lower() not in ("prescott", "unknown"))
        saved = {k: os.environ.get(k) for k in ("LATTICE_BACKEND", "LATTICE_PARALLEL",
                                                 "LATTICE_ATTN_ISA")}
        try:
            # the package maps the environment (the library reads none of it)
            os.environ["LATTICE_BACKEND"] = "ref"
            with lattice.Backend() as be:
                self.assertEqual(be.kernels.name, "ref")
            with lattice.Backend(environment=False) as be:
                self.assertIn(be.kernels.name, names)  # the library's own choice
            # an unknown name from the environment names the variable (issue 38 part 5)
            os.environ["LATTICE_BACKEND"] = "nope"
            with self.assertRaises(LatticeError) as cm:
                lattice.Backend()
            self.assertEqual(cm.exception.code, Status.NOT_FOUND)
            self.assertIn("backend 'nope' (from LATTICE_BACKEND, in the environment)",
                          str(cm.exception))
            del os.environ["LATTICE_BACKEND"]
            os.environ["LATTICE_PARALLEL"] = "rows"
            os.environ["LATTICE_ATTN_ISA"] = "portable"
            with lattice.Backend("ref") as be:
                self.assertEqual(be.parallel, "rows")
                self.assertEqual(be.attention_kernel, "portable")
                be.parallel = "ops"
                be.attention_kernel = "auto"
                self.assertEqual(be.parallel, "ops")
                self.assertIn(be.attention_kernel, ("portable", "avx2", "avx512"))
            os.environ["LATTICE_ATTN_ISA"] = "avx9"
            with self.assertRaises(LatticeError) as cm:
                lattice.Backend("ref")
            self.assertIn("LATTICE_ATTN_ISA='avx9' (in the environment)", str(cm.exception))
            os.environ["LATTICE_PARALLEL"] = "sideways"
            with self.assertRaises(ValueError):
                lattice.Backend("ref")
        finally:
            for k, v in saved.items():
                if v is None:
                    os.environ.pop(k, None)
                else:
                    os.environ[k] = v
        with lattice.Backend() as be:
            self.assertIn(be.kernels.name, names)
            self.assertTrue(be.kernels.reason)
        # the struct as Python lays it out is the struct the library fills
        info = lattice.BackendInfo()
        info.size = ctypes.sizeof(info)
        with lattice.Backend("ref") as be:
            self.assertEqual(_lib.lib.lattice_backend_get_info(be._ptr, ctypes.byref(info)), 0)
            self.assertEqual(info.size, ctypes.sizeof(info))
            info.size = 4
            self.assertEqual(_lib.lib.lattice_backend_get_info(be._ptr, ctypes.byref(info)),
                             Status.INVALID_ARGUMENT)
        # a size above the object's would let the library read or write past it
        for struct in (info, lattice.ModelParams.defaults()):
            with self.assertRaises(ValueError) as cm:
                struct.size = ctypes.sizeof(struct) + 8
            self.assertIn("past it", str(cm.exception))

    def test_gemm_precision(self):
        """fp32 by default; bf16 only on onednn where the CPU has it, refused elsewhere
        saying why; where it runs, a GEMM's operands are rounded to bf16."""
        with lattice.Backend("ref") as be:
            self.assertEqual(be.gemm_precision, "fp32")
            with self.assertRaises(LatticeError) as cm:
                be.gemm_precision = "bf16"
            self.assertEqual(cm.exception.code, Status.UNSUPPORTED)
            self.assertIn('run on the built-in "onednn" backend only', str(cm.exception))
            self.assertEqual(be.gemm_precision, "fp32")
            with self.assertRaises(LatticeError) as cm:
                be.gemm_precision = "fp16"
            self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
            self.assertIn("'fp16' names no GEMM precision (fp32 or bf16)", str(cm.exception))
            be.gemm_precision = "fp32"
        try:
            be = lattice.Backend("onednn", threads=2)
        except LatticeError as e:
            self.assertEqual(e.code, Status.UNSUPPORTED)
            self.skipTest("no oneDNN backend here")
        with be:
            try:
                be.gemm_precision = "bf16"
            except LatticeError as e:  # tests/test_gemm_bf16.c fails where the CPU has it
                self.assertEqual(e.code, Status.UNSUPPORTED)
                self.skipTest("bf16 cannot run here: " + str(e))
            self.assertEqual(be.gemm_precision, "bf16")
            # 1 + 2^-12 keeps its low bit in fp32 and loses it in bf16
            a, b = array.array("f", [1 + 2 ** -12] * 4), array.array("f", [1.0] * 4)
            c = array.array("f", [0.0])
            be.sgemm(a, b, c, 1, 1, 4)
            self.assertEqual(c[0], 4.0)
            be.gemm_precision = "fp32"
            be.sgemm(a, b, c, 1, 1, 4)
            self.assertEqual(c[0], 4 * (1 + 2 ** -12))

    def test_sgemm(self):
        a = array.array("f", [1, 2, 3, 4, 5, 6])        # 2 x 3
        b = array.array("f", [1, 0, 0, 1, 1, 1])        # 3 x 2
        c = array.array("f", [0] * 4)
        with lattice.Backend("ref") as be:
            be.sgemm(a, b, c, 2, 2, 3)
            self.assertEqual(list(c), [4, 5, 10, 11])
            be.sgemm(a, a, c, 2, 2, 3, trans_b=True, alpha=0.5, beta=1.0)   # + A A^T / 2
            self.assertEqual(list(c), [4 + 7, 5 + 16, 10 + 16, 11 + 38.5])
            with self.assertRaises(ValueError):
                be.sgemm(a, b, array.array("f", [0] * 3), 2, 2, 3)
            with self.assertRaises(TypeError):
                be.sgemm(a, b, bytes(16), 2, 2, 3)                        # wrong type, read-only
            # a leading dimension given below 1 is refused, never replaced by 1
            one = array.array("f", [2.0])
            for ld in ("lda", "ldb", "ldc"):
                with self.assertRaises(ValueError) as cm:
                    be.sgemm(one, one, c, 1, 1, 1, **{ld: -5})
                self.assertIn("%s -5 must be at least 1" % ld, str(cm.exception))
            be.sgemm(one, one, c, 1, 1, 1, lda=1, ldb=1, ldc=1)
            self.assertEqual(c[0], 4.0)

    def test_custom_backend_matches_ref(self):
        ref = lattice.Backend("ref")
        calls = []

        def sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            calls.append((m, n, k))
            ref.sgemm(a, b, c, m, n, k, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta,
                      lda=lda, ldb=ldb, ldc=ldc)

        threads = []
        custom = lattice.Backend.custom("python", sgemm, set_threads=threads.append)
        self.assertEqual(custom.name, "python")
        custom.threads = 3
        self.assertEqual(threads, [3])
        tokens = array.array("i", range(8))
        m_ref, m_custom = tiny_model(backend=ref), tiny_model(backend=custom)
        m_ref.forward(tokens, 1, 8)
        m_custom.forward(tokens, 1, 8)
        self.assertTrue(calls)
        for x, y in zip(m_ref.logits().tolist()[0], m_custom.logits().tolist()[0]):
            for u, v in zip(x, y):
                self.assertAlmostEqual(u, v, places=5)

    def test_what_a_custom_gemm_keeps_cannot_reach_the_library(self):
        """Slices of the GEMM's views outlive the call: they show copies, so writes
        through them afterwards never reach the model's activations."""
        ref = lattice.Backend("ref")
        kept = []

        def sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            ref.sgemm(a, b, c, m, n, k, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta,
                      lda=lda, ldb=ldb, ldc=ldc)
            kept.append(c[:])

        model = tiny_model(backend=lattice.Backend.custom("python", sgemm))
        model.forward(array.array("i", range(8)), 1, 8)
        view = model.logits_view()
        want = view.tolist()
        self.assertIn(want[0][0], [c.tolist()[:len(want[0][0])] for c in kept])
        for c in kept:
            c[0] = 1e30
        self.assertEqual(view.tolist(), want)

    def test_custom_gemm_writes_only_its_block(self):
        """C's rows are ldc apart: what sgemm writes between them is not copied
        back, and a C view that sgemm releases is copied back all the same."""
        ref = lattice.Backend("ref")

        def sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
            ref.sgemm(a, b, c, m, n, k, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta,
                      lda=lda, ldb=ldb, ldc=ldc)
            for r in range(m - 1):
                for j in range(n, ldc):
                    c[r * ldc + j] = 7.0
            c.release()

        a = array.array("f", [1, 2, 3, 4, 5, 6])        # 2 x 3
        b = array.array("f", [1, 0, 0, 1, 1, 1])        # 3 x 2
        c = array.array("f", [-1.0] * 6)                # 2 x 2, rows 3 apart
        with lattice.Backend.custom("python", sgemm) as be:
            be.sgemm(a, b, c, 2, 2, 3, ldc=3)
        self.assertEqual(list(c), [4, 5, -1, 10, 11, -1])

    def test_custom_backend_exception(self):
        def sgemm(*args):
            raise ZeroDivisionError("no GEMM today")

        model = tiny_model(backend=lattice.Backend.custom("broken", sgemm))
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", range(8)), 1, 8)
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, ZeroDivisionError)


if __name__ == "__main__":
    unittest.main(verbosity=2)
