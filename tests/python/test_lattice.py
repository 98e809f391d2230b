"""Tests of the lattice Python package (ctypes bindings of liblattice).

Run by `meson test` with LATTICE_LIBRARY set to the built library and
PYTHONPATH to liblattice/python; LATTICE_INCLUDE_DIR names the public headers
for the coverage test.
"""

import array
import ctypes
import gc
import json
import math
import os
import re
import signal
import subprocess
import sys
import tempfile
import textwrap
import unittest

import lattice
from lattice import LatticeError, Status
from lattice import _lib

try:
    import numpy
except ImportError:
    numpy = None

VOCAB = 32
SEQ = 12


def tiny_model(**overrides):
    fields = dict(vocab_size=VOCAB, d_model=16, n_layers=2, n_active_layers=2, n_heads=2,
                  n_kv_heads=1, head_dim=8, d_ff=32, max_batch=4, max_seq=16, seed=7)
    fields.update(overrides)
    backend = fields.pop("backend", "ref")
    return lattice.Model(backend=backend, **fields)


def counting_corpus(n_docs=40, length=SEQ):
    """Documents that start with boundary 0 and then count up: easy to learn."""
    ids = array.array("i")
    for d in range(n_docs):
        ids.append(0)
        ids.extend((d + i) % (VOCAB - 1) + 1 for i in range(length))
    return ids


def tiny_data(**overrides):
    fields = dict(vocab_size=VOCAB, boundary_id=0, batch_size=4, seq_len=SEQ,
                  val_fraction=0.2, seed=3)
    fields.update(overrides)
    return lattice.Data.from_memory(counting_corpus(), **fields)


HERE = os.path.dirname(os.path.abspath(__file__))


def run_isolated(test, code, timeout=60):
    """Run code in a fresh interpreter, with this file's helpers, and return its stdout.

    For scenarios that crashed the interpreter: a crash (or a hang) fails the
    test instead of killing the test runner.
    """
    prelude = ("import array, sys, threading, time\n"
               f"sys.path.insert(0, {HERE!r})\n"
               "import lattice\n"
               "from lattice import LatticeError, Status\n"
               "from test_lattice import SEQ, VOCAB, counting_corpus, tiny_data, tiny_model\n")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c",
                        prelude + textwrap.dedent(code)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    how = (f"killed by {signal.Signals(-r.returncode).name}" if r.returncode < 0
           else f"exit status {r.returncode}")
    test.assertEqual(r.returncode, 0, f"the child process ended with {how}:\n{r.stderr}")
    return r.stdout


# ctypes' integer types (c_int32 is c_int, c_uint64 c_size_t, and so on)
C_INTEGERS = (ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_int,
              ctypes.c_uint, ctypes.c_long, ctypes.c_ulong, ctypes.c_longlong,
              ctypes.c_ulonglong)


def c_range(ctype):
    """(min, max) of a ctypes integer type."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        return -2**(bits - 1), 2**(bits - 1) - 1
    return 0, 2**bits - 1


def next_token_teacher(tokens, batch, seq, vocab, logits):
    """A callback teacher that is confident the count goes on."""
    for i, t in enumerate(tokens):
        row = i * vocab
        for v in range(vocab):
            logits[row + v] = 0.0
        logits[row + t % (vocab - 1) + 1] = 4.0


class Core(unittest.TestCase):
    def test_version(self):
        self.assertEqual(lattice.__version__, lattice.version_string)
        self.assertRegex(lattice.__version__, r"^\d+\.\d+\.\d+$")
        self.assertEqual(lattice.version_number // 10000, _lib.MAJOR)

    def test_status_values_are_pinned(self):
        expected = dict(OK=0, INVALID_ARGUMENT=1, INVALID_CONFIG=2, OUT_OF_MEMORY=3,
                        UNSUPPORTED=4, NOT_FOUND=5, BACKEND=6, NON_FINITE=7, IO=8, FORMAT=9,
                        STATE=10)
        self.assertEqual({s.name: s.value for s in Status}, expected)
        self.assertEqual(lattice.status_string(Status.NOT_FOUND), "not found")
        self.assertEqual(lattice.status_string(99), "unknown status")

    def test_error_carries_code(self):
        err = LatticeError(Status.IO, "i/o error: x")
        self.assertEqual(err.code, Status.IO)
        self.assertEqual(str(err), "i/o error: x")
        self.assertEqual(LatticeError(42).code, 42)

    def test_structs_match_the_library(self):
        # Each _init function writes sizeof(the C struct) into size.
        for cls in (lattice.ModelParams, lattice.OptimParams, lattice.DistillParams,
                    lattice.DataParams, lattice.Phase, lattice.TrainerParams,
                    lattice.BackendOps):
            with self.subTest(cls=cls.__name__):
                self.assertEqual(cls.defaults().size, ctypes.sizeof(cls))

    def test_params_keywords(self):
        p = lattice.ModelParams.make(vocab_size=99)
        self.assertEqual(p.vocab_size, 99)
        self.assertEqual(p.d_model, lattice.ModelParams.defaults().d_model)
        with self.assertRaisesRegex(TypeError, "no field 'vocab'"):
            lattice.ModelParams.make(vocab=3)
        self.assertEqual(lattice.DistillParams.make(direction="reverse").direction,
                         lattice.KLDirection.REVERSE)
        with self.assertRaises(ValueError):
            lattice.Phase.make(block_init="sideways")

    def test_last_error(self):
        with self.assertRaises(LatticeError) as cm:
            lattice.Backend("no-such-backend")
        self.assertIn("no-such-backend", lattice.last_error())
        self.assertIn(lattice.last_error(), str(cm.exception))
        self.assertIs(lattice.last_error, _lib.last_error)

    def test_loader(self):
        env = dict(os.environ, LATTICE_LIBRARY="/nonexistent/liblattice.so.0")
        r = subprocess.run([sys.executable, "-c", "import lattice"], env=env,
                           capture_output=True, text=True)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("ImportError", r.stderr)
        self.assertIn("LATTICE_LIBRARY", r.stderr)
        # Without LATTICE_LIBRARY: found by SONAME through the loader path.
        lib_path = os.environ.get("LATTICE_LIBRARY")
        if lib_path:
            env = dict(os.environ)
            del env["LATTICE_LIBRARY"]
            env["LD_LIBRARY_PATH"] = os.path.dirname(os.path.abspath(lib_path))
            r = subprocess.run([sys.executable, "-c", "import lattice; print(lattice.__version__)"],
                               env=env, capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), lattice.__version__)


class Coverage(unittest.TestCase):
    """The prototype table against the public headers: every function, every parameter."""

    def header_functions(self, mpi=False):
        """name -> (parameter count, header) of the core headers, or of dist.h with mpi."""
        include = os.environ.get("LATTICE_INCLUDE_DIR")
        if not include:
            self.skipTest("LATTICE_INCLUDE_DIR not set")
        found = {}
        for name in sorted(os.listdir(include)):
            if not name.endswith(".h") or (name == "dist.h") != mpi:  # dist.h: liblattice-mpi's
                continue
            with open(os.path.join(include, name)) as f:
                text = re.sub(r"/\*.*?\*/", "", f.read(), flags=re.S)
            # the 0.2 names kept for old sources: the package uses the new ones
            text = re.sub(r"#ifndef LATTICE_NO_DEPRECATED.*?#endif", "", text, flags=re.S)
            for m in re.finditer(r"LATTICE_API\b[^;{]*?\b(lattice_\w+)\s*\(([^;]*?)\)\s*;", text,
                                 flags=re.S):
                params = m.group(2).strip()
                depth, count = 0, 0 if params in ("", "void") else 1
                for ch in params:
                    depth += ch == "("
                    depth -= ch == ")"
                    count += ch == "," and depth == 0
                found[m.group(1)] = (count, name)
        self.assertTrue(found, "no LATTICE_API functions found in " + include)
        return found

    def test_every_function_has_a_prototype(self):
        found = self.header_functions()
        missing = sorted(f"{fn} ({hdr})" for fn, (_, hdr) in found.items()
                         if fn not in _lib.PROTOTYPES and fn not in _lib.NOT_WRAPPED)
        self.assertEqual(missing, [], "functions of the headers not wrapped in "
                         "liblattice/python/lattice/_lib.py PROTOTYPES")
        stale = sorted((set(_lib.PROTOTYPES) | set(_lib.NOT_WRAPPED)) - set(found))
        self.assertEqual(stale, [], "prototypes of functions no header declares")

    def test_argument_counts(self):
        for fn, (count, hdr) in self.header_functions().items():
            if fn in _lib.PROTOTYPES:
                with self.subTest(fn=fn):
                    self.assertEqual(len(_lib.PROTOTYPES[fn][1]), count, hdr)

    def test_library_has_every_prototype(self):
        self.assertEqual(_lib.lib.missing, [])

    def test_dist_table_is_dist_h(self):
        # liblattice-mpi's own table (lattice/dist.py), read from its header alone
        found = self.header_functions(mpi=True)
        self.assertEqual(list(lattice.dist.PROTOTYPES), list(found), "dist.h, in header order")
        for fn, (count, hdr) in found.items():
            self.assertEqual(len(lattice.dist.PROTOTYPES[fn][1]), count, fn)


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
        names = ["ref", "blis", "openblas"]
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
                else:
                    self.assertTrue(k.library.startswith("OpenBLAS "))
                    self.assertEqual(k.optimised, k.kernels.lower() not in ("prescott", "unknown"))
        old = os.environ.get("LATTICE_BACKEND")
        try:
            os.environ["LATTICE_BACKEND"] = "ref"
            with lattice.Backend() as be:
                self.assertEqual(be.kernels.name, "ref")
                self.assertEqual(be.kernels.reason, "LATTICE_BACKEND=ref")
        finally:
            if old is None:
                del os.environ["LATTICE_BACKEND"]
            else:
                os.environ["LATTICE_BACKEND"] = old
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

    def test_custom_backend_exception(self):
        def sgemm(*args):
            raise ZeroDivisionError("no GEMM today")

        model = tiny_model(backend=lattice.Backend.custom("broken", sgemm))
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", range(8)), 1, 8)
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, ZeroDivisionError)


class NormTest(unittest.TestCase):
    def test_norm(self):
        with lattice.Norm("post", "layer", 1e-5) as n:
            self.assertEqual(n.placement, lattice.NormPlacement.POST)
            self.assertEqual(n.kind, lattice.NormKind.LAYER)
            self.assertAlmostEqual(n.eps, 1e-5)
            self.assertEqual(n.residual_scale, 1.0)
            n.residual_scale = 2.0
            self.assertEqual(n.residual_scale, 2.0)
        with lattice.Norm() as n, self.assertRaises(LatticeError) as cm:
            n.residual_scale = 2.0          # pre-norm has no residual scale
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError):
            lattice.Norm("pre", "rms", -1.0)
        self.assertEqual(lattice.Norm.placement_name(lattice.NormPlacement.PERI), "peri")
        self.assertEqual(lattice.Norm.placement_from_name("post"), lattice.NormPlacement.POST)
        with self.assertRaises(LatticeError) as cm:
            lattice.Norm.placement_from_name("sideways")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND)


class ModelTest(unittest.TestCase):
    def test_bad_config(self):
        with self.assertRaises(LatticeError) as cm:
            tiny_model(n_heads=3, n_kv_heads=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("n_kv_heads", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            lattice.Model.check_params(n_active_layers=0)
        self.assertIn(cm.exception.code, (Status.INVALID_CONFIG, Status.INVALID_ARGUMENT))
        lattice.Model.check_params()   # the defaults are a valid shape

    def test_forward_and_views(self):
        model = tiny_model(norm="peri")
        self.assertEqual(model.placement, lattice.NormPlacement.PERI)
        self.assertEqual(model.params.vocab_size, VOCAB)
        self.assertGreater(model.n_params, 0)
        self.assertGreater(model.arena_bytes, 0)
        self.assertGreater(model.flops(2, 8, with_backward=True), model.flops(2, 8))
        with self.assertRaises(LatticeError) as cm:
            model.logits()
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])        # a list of rows
        logits = model.logits()
        self.assertEqual(logits.shape, (2, 4, VOCAB))
        self.assertEqual(logits.format, "f")
        self.assertTrue(logits.readonly)                    # a copy, the caller's own, read-only
        view = model.logits_view()
        self.assertTrue(view.readonly)
        self.assertEqual(view.tolist(), logits.tolist())
        self.assertTrue(all(math.isfinite(x) for x in logits.cast("B").cast("f")))
        loss, counted = model.cross_entropy(array.array("i", [2, 3, 4, 5, 6, 7, 8, 9]),
                                            mask=bytes([1, 1, 1, 0, 1, 1, 1, 0]))
        self.assertEqual(counted, 6)
        self.assertAlmostEqual(loss, math.log(VOCAB), delta=0.5)
        d = model.dlogits_view()
        self.assertFalse(d.readonly)
        self.assertEqual(d.shape, (2, 4, VOCAB))
        self.assertEqual(d[0, 3, 0], 0.0)                 # masked position: no gradient
        self.assertEqual(model.dlogits().tolist(), d.tolist())
        model.backward()
        # A copy keeps its values through the next forward; a view shows the new ones.
        model.forward([[9, 9, 9, 9], [1, 1, 1, 1]])
        self.assertNotEqual(model.logits().tolist(), logits.tolist())
        self.assertEqual(view.tolist(), model.logits().tolist())

    def test_copies_are_read_only(self):
        model = tiny_model()
        tokens = [[1, 2, 3, 4], [5, 6, 7, 8]]
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        model.forward(tokens)
        model.cross_entropy(targets)
        for copy in (model.logits(), model.dlogits(), model.hidden(1)):
            self.assertTrue(copy.readonly)
            with self.assertRaises(TypeError):
                copy[0, 0, 0] = 1.0
        # 0.2's way to distill into the model: refused, naming the view to use
        teacher = array.array("f", [0.0] * (8 * VOCAB))
        loss = lattice.Distill()
        for dl in (model.dlogits(), memoryview(model.dlogits()).cast("B").cast("f")):
            with self.assertRaises(TypeError) as cm:
                loss.dense(model.logits(), teacher, targets, dlogits=dl)
            self.assertIn("dlogits: Model.dlogits() is a read-only copy", str(cm.exception))
            self.assertIn("model.dlogits_view()", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            loss.dense(model.logits(), teacher, targets, dlogits=model.logits())
        self.assertIn("Model.logits() is a read-only copy", str(cm.exception))
        if numpy is not None:
            arr = numpy.asarray(model.dlogits())
            self.assertFalse(arr.flags.writeable)
            with self.assertRaises(TypeError) as cm:
                loss.dense(model.logits(), teacher, targets, dlogits=arr)
            self.assertIn("model.dlogits_view()", str(cm.exception))
        # the view takes the gradient, and backward reads it
        r = loss.dense(model.logits(), teacher, targets, dlogits=model.dlogits_view())
        self.assertGreater(r.loss, 0.0)
        self.assertEqual(model.dlogits().tolist(), model.dlogits_view().tolist())
        model.backward()

    def test_list_tokens_and_2d_buffers(self):
        model = tiny_model()
        model.forward([1, 2, 3, 4, 5, 6], batch=2)
        self.assertEqual(model.logits().shape, (2, 3, VOCAB))
        model.forward(array.array("i", range(6)), seq=6)
        self.assertEqual(model.logits().shape, (1, 6, VOCAB))

    def test_bad_input(self):
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", [1, 2, VOCAB + 5, 3]), 1, 4)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("vocabulary", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", range(17)), 1, 17)        # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            model.forward(array.array("d", range(4)), 1, 4)           # float64, not int32
        model.forward(array.array("q", range(4)), 1, 4)               # int64: converted
        model.forward(array.array("B", range(4)), 1, 4)               # uint8: converted
        with self.assertRaisesRegex(ValueError, r"tokens: value 2147483648 is outside int32"):
            model.forward(array.array("q", [1, 2, 2**31, 3]), 1, 4)
        with self.assertRaisesRegex(ValueError, r"targets: value -2147483649 is outside int32"):
            model.cross_entropy(array.array("q", [1, 2, -2**31 - 1, 3]))
        with self.assertRaisesRegex(ValueError, r"tokens: value 4294967296 is outside int32"):
            model.forward([1, 2, 2**32, 3], 1, 4)
        with self.assertRaises(TypeError):
            model.forward("abcd", 1, 4)
        with self.assertRaises(ValueError):
            model.forward(array.array("i", range(5)), 1, 4)           # wrong length
        model.forward(memoryview(array.array("i", range(8)))[::2], 1, 4)   # strided: copied
        model.forward(memoryview(array.array("q", range(8)))[::2], 1, 4)   # and converted
        with self.assertRaises(ValueError):
            model.forward(array.array("i", range(4)))                 # flat without sizes
        model.forward(array.array("i", range(4)), 1, 4)
        with self.assertRaises(ValueError):
            model.cross_entropy(array.array("i", range(3)))
        with self.assertRaises(LatticeError) as cm:
            model.cross_entropy(array.array("i", [0, 1, 2, 99]))
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError):
            model.active_layers = 3
        with self.assertRaises(LatticeError) as cm:
            model.tensor("no.such.tensor")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND)
        with self.assertRaises(LatticeError):
            model.tensor(10_000)

    def test_hidden_states(self):
        model = tiny_model(n_layers=3, n_active_layers=2)
        tokens = array.array("i", range(1, 9))
        model.forward(tokens, 2, 4)
        hs = [model.hidden(i) for i in range(3)]
        for i, h in enumerate(hs):
            self.assertEqual(h.shape, (2, 4, 16))
            self.assertTrue(h.readonly)                 # a read-only copy
            self.assertTrue(model.hidden_view(i).readonly)
            self.assertEqual(model.hidden_view(i).tolist(), h.tolist())
        self.assertNotEqual(hs[0].tolist(), hs[2].tolist())
        with self.assertRaises(LatticeError) as cm:
            model.hidden(3)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        # Pre-norm with zeroed output projections: the layer is the identity.
        model.zero_layer_outputs(0)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(0).tolist(), model.hidden(1).tolist())
        model.active_layers = 3
        with self.assertRaises(LatticeError) as cm:
            model.hidden(0)                 # no forward since the depth changed
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(3).shape, (2, 4, 16))
        model.set_skip(1, 1)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(1).tolist(), model.hidden(2).tolist())
        model.set_skip(0, 0)

    def test_tensors(self):
        model = tiny_model()
        tensors = model.tensors()
        self.assertEqual(len(tensors), model.n_tensors)
        self.assertEqual(sum(math.prod(t.shape) for t in tensors), model.n_params)
        names = [t.name for t in tensors]
        self.assertIn("lm_head.weight", names)
        self.assertIn("model.layers.1.self_attn.q_proj.weight", names)
        q = model.tensor("model.layers.1.self_attn.q_proj.weight")
        self.assertEqual((q.group, q.layer, q.ndim), (lattice.Group.LAYER, 1, 2))
        self.assertEqual(q.shape, (2 * 8, 16))
        self.assertEqual(q.data.shape, q.shape)
        head = model.tensor("lm_head.weight")
        self.assertEqual(head.group, lattice.Group.HEAD)
        # Writing through the view changes the model: a zero head gives zero logits.
        flat = head.data.cast("B").cast("f")
        for i in range(len(flat)):
            flat[i] = 0.0
        model.forward(array.array("i", range(4)), 1, 4)
        self.assertTrue(all(x == 0.0 for x in model.logits().cast("B").cast("f")))
        # Gradients appear after backward.
        model.cross_entropy(array.array("i", range(1, 5)))
        model.backward()
        self.assertTrue(any(x != 0.0 for x in head.grad.cast("B").cast("f")))

    def test_layers_and_trainable(self):
        model = tiny_model()
        a = model.tensor("model.layers.0.mlp.down_proj.weight")
        b = model.tensor("model.layers.1.mlp.down_proj.weight")
        self.assertNotEqual(a.data.tolist(), b.data.tolist())
        model.copy_layer(1, 0)
        self.assertEqual(a.data.tolist(), b.data.tolist())
        model.init_layer(1, seed=123)
        self.assertNotEqual(a.data.tolist(), b.data.tolist())
        self.assertTrue(model.is_trainable("layer", layer=1))
        model.set_trainable(lattice.Group.LAYER, False, layer=1)
        self.assertFalse(model.is_trainable(lattice.Group.LAYER, layer=1))
        model.set_trainable("embedding", False)
        self.assertFalse(model.is_trainable("embedding"))
        with self.assertRaises(LatticeError):
            model.set_trainable("layer", True, layer=9)

    def test_training_lowers_the_loss(self):
        model = tiny_model()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-3, warmup_steps=0, total_steps=40)
        self.assertAlmostEqual(optim.params.lr, 1e-2)
        tokens = array.array("i", [(i % 16) + 1 for i in range(4 * 12)])
        targets = array.array("i", [(i % 16) % 31 + 2 for i in range(4 * 12)])
        losses = []
        for _ in range(30):
            model.forward(tokens, 4, 12)
            loss, _ = model.cross_entropy(targets)
            model.backward()
            norm = optim.step()
            self.assertTrue(math.isfinite(norm))
            losses.append(loss)
        self.assertEqual(optim.steps, 30)
        self.assertLess(losses[-1], 0.5 * losses[0])
        optim.set_params(clip_norm=0.0)
        self.assertEqual(optim.params.clip_norm, 0.0)
        self.assertAlmostEqual(optim.params.lr, 1e-2)
        optim.reset()
        self.assertEqual(optim.steps, 0)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr=-1.0)
        self.assertIn(cm.exception.code, (Status.INVALID_CONFIG, Status.INVALID_ARGUMENT))

    @unittest.skipIf(numpy is None, "NumPy is not installed")
    def test_numpy(self):
        model = tiny_model()
        tokens = numpy.arange(8, dtype=numpy.int32).reshape(2, 4)
        model.forward(tokens)
        logits = numpy.asarray(model.logits())
        self.assertEqual(logits.shape, (2, 4, VOCAB))
        self.assertEqual(logits.dtype, numpy.float32)
        before = logits.copy()
        model.forward(tokens.astype(numpy.int64))           # NumPy's default integer type
        numpy.testing.assert_array_equal(numpy.asarray(model.logits()), before)
        model.forward(numpy.arange(8).reshape(2, 4) + 1)    # logits is a copy: unchanged
        numpy.testing.assert_array_equal(logits, before)
        self.assertFalse(logits.flags.writeable)            # a read-only copy
        self.assertFalse(numpy.array_equal(numpy.asarray(model.logits_view()), before))
        with self.assertRaisesRegex(ValueError, r"value 3000000000 is outside int32"):
            model.forward(numpy.array([[1, 3_000_000_000]]))
        with self.assertRaises(TypeError):
            model.forward(numpy.ones((2, 4)))               # float64 ids: refused
        ids = numpy.arange(200, dtype=numpy.int64) % VOCAB
        data = lattice.Data.from_memory(ids, vocab_size=VOCAB, boundary_id=0, batch_size=1,
                                        seq_len=8, val_fraction=0.0, split_long=False)
        self.assertEqual(data.n_tokens(), 200)
        model.forward(numpy.asfortranarray(tokens))         # copied in C order
        numpy.testing.assert_array_equal(numpy.asarray(model.logits()), before)


class SafetensorsTest(unittest.TestCase):
    def test_save_load_and_reopen(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.safetensors")
            a = tiny_model(seed=1, norm="post")
            a.save(path)
            b = tiny_model(seed=2, norm="post")
            name = "model.layers.0.self_attn.q_proj.weight"
            self.assertNotEqual(a.tensor(name).data.tolist(), b.tensor(name).data.tolist())
            b.load(path)
            self.assertEqual(a.tensor(name).data.tolist(), b.tensor(name).data.tolist())
            c = lattice.Model.from_file(path, backend="ref", max_batch=2, max_seq=8)
            self.assertEqual(c.placement, lattice.NormPlacement.POST)
            self.assertEqual((c.params.max_batch, c.params.max_seq), (2, 8))
            self.assertEqual(c.n_params, a.n_params)
            tokens = array.array("i", range(8))
            a.forward(tokens, 1, 8)
            c.forward(tokens, 1, 8)
            self.assertEqual(a.logits().tolist(), c.logits().tolist())
            # Errors: a missing file, a malformed one, a shape that does not fit.
            with self.assertRaises(LatticeError) as cm:
                b.load(os.path.join(tmp, "missing.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)
            junk = os.path.join(tmp, "junk.safetensors")
            with open(junk, "wb") as f:
                f.write(b"\xff" * 64)
            with self.assertRaises(LatticeError) as cm:
                b.load(junk)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_file(junk, backend="ref")
            self.assertEqual(cm.exception.code, Status.FORMAT)
            self.assertIn("junk.safetensors", str(cm.exception))
            with self.assertRaises(LatticeError) as cm:
                tiny_model(d_model=32).load(path)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            with self.assertRaises(LatticeError) as cm:
                a.save(os.path.join(tmp, "no", "such", "dir", "m.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)

    def test_estimate(self):
        model = tiny_model(norm="peri")
        n_params, arena = lattice.Model.estimate(model.params, norm="peri")
        self.assertEqual(n_params, model.n_params)
        self.assertEqual(arena, model.arena_bytes)
        with self.assertRaises(LatticeError) as cm:
            lattice.Model.estimate(n_heads=3, n_kv_heads=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("n_kv_heads", str(cm.exception))


class PretrainedTest(unittest.TestCase):
    def check_round_trip(self, model, expect_type):
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        expected = model.logits().tolist()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(os.path.join(tmp, "out"))
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "out"))),
                             ["config.json", "model.safetensors"])
            with open(os.path.join(tmp, "out", "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["model_type"], expect_type)
            self.assertEqual(config["hidden_size"], model.d_model)
            self.assertEqual(config["lattice"]["placement"], model.placement.name.lower())
            again = lattice.Model.from_pretrained(os.path.join(tmp, "out"), backend="ref",
                                                  max_batch=2, max_seq=4)
            self.assertEqual(again.placement, model.placement)
            self.assertEqual(again.active_layers, model.active_layers)
            again.forward(tokens, 2, 4)
            self.assertEqual(again.logits().tolist(), expected)
            # The single-file form still reads the same weights.
            single = lattice.Model.from_file(os.path.join(tmp, "out", "model.safetensors"),
                                             backend="ref", max_batch=2, max_seq=4)
            single.forward(tokens, 2, 4)
            self.assertEqual(single.logits().tolist(), expected)
            return config, tmp, expected, tokens

    def test_qwen3_round_trip_and_config(self):
        model = tiny_model(qk_norm=1)
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        expected = model.logits().tolist()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["architectures"], ["Qwen3ForCausalLM"])
            self.assertEqual(config["rms_norm_eps"], 1e-6)
            # Read as a Hugging Face checkpoint: config.json alone gives the shape.
            del config["lattice"]
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(config, f)
            hf = lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            hf.forward(tokens, 2, 4)
            for a, b in zip(hf.logits().cast("B").cast("f"), model.logits().cast("B").cast("f")):
                self.assertAlmostEqual(a, b, places=5)
        self.check_round_trip(tiny_model(qk_norm=1), "qwen3")

    def test_post_norm_round_trip(self):
        model = tiny_model(norm=lattice.Norm("post", residual_scale=1.5), n_layers=3,
                           n_active_layers=2)
        config, *_ = self.check_round_trip(model, "lattice")
        self.assertNotIn("architectures", config)
        self.assertEqual(config["lattice"]["residual_scale"], 1.5)

    def test_missing_weights(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_pretrained(tmp)
            self.assertEqual(cm.exception.code, Status.NOT_FOUND)


class DiscoverabilityTest(unittest.TestCase):
    def test_signatures_list_the_fields(self):
        import inspect
        import pydoc
        sig = inspect.signature(lattice.Optim)
        self.assertEqual(sig.parameters["lr"].default, lattice.OptimParams.defaults().lr)
        self.assertIs(sig.parameters["lr"].annotation, float)
        self.assertIs(sig.parameters["lr"].kind, inspect.Parameter.KEYWORD_ONLY)
        self.assertIn("lr: float = 0.0001", pydoc.render_doc(lattice.Optim))
        self.assertIs(inspect.signature(lattice.Distill).parameters["direction"].annotation,
                      lattice.KLDirection)
        for fn, field in ((lattice.Model, "d_model"), (lattice.Data.from_text, "seq_len"),
                          (lattice.Schedule.add_phase, "active_layers"),
                          (lattice.Model.estimate, "n_layers")):
            self.assertIn(field, inspect.signature(fn).parameters, fn)
        with self.assertRaisesRegex(TypeError, "no field 'learning_rate'"):
            lattice.Optim(tiny_model(), learning_rate=1e-3)

    def test_enums_print_their_names(self):
        self.assertEqual(str(lattice.NormPlacement.POST), "POST")
        self.assertEqual(f"{lattice.Group.LAYER}", "LAYER")
        self.assertEqual(lattice.Split.VAL, 1)
        self.assertIn("direction=<KLDirection.FORWARD: 0>", repr(lattice.DistillParams.defaults()))

    def test_floats_read_as_set(self):
        optim = lattice.Optim(tiny_model(), lr=1e-4, weight_decay=0.1, total_steps=10)
        self.assertEqual(optim.params.lr, 1e-4)             # not 9.999999747378752e-05
        self.assertEqual(optim.params.weight_decay, 0.1)
        self.assertIn("lr=0.0001,", repr(optim.params))
        self.assertEqual(lattice.Norm(eps=1e-5).eps, 1e-5)
        self.assertEqual(lattice.OptimParams.make(lr=3e-3).lr, 3e-3)
        self.assertEqual(lattice.OptimParams.make(lr=1.0000001).lr, 1.0000001)  # float32 kept

    def run_progress(self, **kwargs):
        import io
        out = io.StringIO()
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 6)
        with lattice.progress(schedule, file=out, **kwargs) as bar:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                            on_step=bar).run()
        self.assertEqual(schedule.counters.steps, 6)
        return out.getvalue()

    def test_progress_lines_without_tqdm(self):
        text = self.run_progress(use_tqdm=False, every=2)
        self.assertEqual(len(text.splitlines()), 3)
        self.assertRegex(text, r"train: step 6/6 loss \d+\.\d{4}( val_ce \d+\.\d{4})? layers 2\n$")

    class FakeBar:
        """Stands in for a tqdm bar: counts updates and closes."""

        def __init__(self):
            self.updates, self.closes = 0, 0

        def set_postfix(self, post, refresh=True):
            pass

        def update(self, n):
            self.updates += n

        def close(self):
            self.closes += 1

    def progress_with_fake_bar(self, total):
        import io
        p = lattice.progress(total, file=io.StringIO(), use_tqdm=False)
        p.bar = self.FakeBar()
        return p, p.bar

    def test_progress_closed_at_the_end_of_a_run(self):
        model = tiny_model()
        optim = lattice.Optim(model, warmup_steps=0)
        # run() returns: closed, without a `with`
        schedule = lattice.Schedule.preset("joint", 1, 2, 6)
        p, bar = self.progress_with_fake_bar(None)        # no total: only the trainer can tell
        lattice.Trainer(model, tiny_data(), optim, schedule, on_step=p).run()
        self.assertEqual((bar.updates, bar.closes, p.closed), (6, 1, True))
        # stepped by hand: closed by the step that finishes the schedule
        schedule = lattice.Schedule.preset("joint", 1, 2, 3)
        p, bar = self.progress_with_fake_bar(None)
        trainer = lattice.Trainer(model, tiny_data(), optim, schedule, on_step=p)
        trainer.step()
        trainer.step()
        self.assertEqual(bar.closes, 0)
        trainer.step()
        self.assertEqual((bar.updates, bar.closes), (3, 1))
        p.close()                                          # idempotent
        self.assertEqual(bar.closes, 1)
        # at its total, whoever calls it
        import types
        p, bar = self.progress_with_fake_bar(2)
        for step in (1, 2):
            self.assertEqual(bar.closes, 0)
            p(types.SimpleNamespace(step=step, loss=1.0, val_ce=float("nan"), active_layers=1))
        self.assertEqual((bar.updates, bar.closes), (2, 1))
        p(types.SimpleNamespace(step=3, loss=1.0, val_ce=float("nan"), active_layers=1))
        self.assertEqual(bar.updates, 2)                   # closed: shows nothing more

        # run() raises: closed too (the bar as on_eval, a failing on_step)
        def stop(m):
            raise RuntimeError("stop here")

        p, bar = self.progress_with_fake_bar(None)
        trainer = lattice.Trainer(model, tiny_data(), optim, lattice.Schedule.preset("joint", 1, 2, 6),
                                  on_step=stop, on_eval=p)
        with self.assertRaises(RuntimeError):
            trainer.run()
        self.assertEqual((bar.closes, p.closed), (1, True))

    def test_messages_not_doubled(self):
        for make in (lambda: lattice.Data.from_text("/nope.txt"),
                     lambda: lattice.Teacher.from_file("/nope.safetensors"),
                     lambda: lattice.Model.from_file("/nope.safetensors")):
            with self.assertRaises(LatticeError) as cm:
                make()
            text = str(cm.exception)
            self.assertEqual(text.count("cannot open /nope"), 1, text)

    def test_progress_drives_tqdm(self):
        try:
            import tqdm  # noqa: F401
        except ImportError:
            self.skipTest("tqdm is not installed (apt-get install python3-tqdm)")
        text = self.run_progress()
        self.assertIn("6/6", text)
        self.assertIn("loss=", text)

    def test_repr_says_what_each_object_is(self):
        model = tiny_model(n_active_layers=1, norm="post")
        data = tiny_data()
        optim = lattice.Optim(model, lr=1e-3, total_steps=10)
        schedule = lattice.Schedule.preset("grow", 2, 1, 3)
        teacher = lattice.Teacher.from_model(tiny_model())
        trainer = lattice.Trainer(model, data, optim, schedule, teacher=teacher)
        expected = [
            (model, r"<lattice\.Model post 1/2 layers d16>"),
            (model.backend, r"<lattice\.Backend ref \d+ threads?>"),
            (lattice.Norm("peri", "layer", eps=1e-5),
             r"<lattice\.Norm peri layer eps 1e-05>"),
            (lattice.Norm("post", residual_scale=2.0),
             r"<lattice\.Norm post rms eps 1e-06 residual scale 2>"),
            (optim, r"<lattice\.Optim step 0, lr [0-9.e-]+ \(cosine from 0\.001\)>"),
            (lattice.Distill(tau=2.0),
             r"<lattice\.Distill alpha 0\.7 gamma 0\.3 tau 2 forward KL>"),
            (data, r"<lattice\.Data \d+ train \+ \d+ val documents, batches 4 x 12>"),
            (schedule, r"<lattice\.Schedule 2 phases, phase 0 step 0, 6 steps in all>"),
            (lattice.Schedule(), r"<lattice\.Schedule no phases>"),
            (teacher, r"<lattice\.Teacher from model pre 2/2 layers d16>"),
            (lattice.Teacher.from_callback(next_token_teacher, VOCAB, 4, SEQ),
             r"<lattice\.Teacher from callback, vocab 32>"),
            (lattice.Diag(model), r"<lattice\.Diag of model post 1/2 layers d16>"),
            (trainer, r"<lattice\.Trainer model post 1/2 layers d16, distilled, "
                      r"schedule 2 phases, phase 0 step 0, 6 steps in all>"),
        ]
        from lattice._handle import Handle
        exported = {getattr(lattice, name) for name in lattice.__all__}
        exported = {obj for obj in exported if isinstance(obj, type) and issubclass(obj, Handle)}
        shown = {type(obj) for obj, _ in expected}
        self.assertEqual(exported - shown, {lattice.Dist})   # Dist needs MPI (tests/dist)
        for obj, pattern in expected:
            self.assertRegex(repr(obj), "^" + pattern + "$")
        trainer.run()
        self.assertRegex(repr(trainer), r"<lattice\.Trainer model post 2/2 layers d16, "
                                        r"distilled, schedule 2 phases, finished, 6 steps")
        model.close()       # the trainer still has it: it says the handle is closed
        self.assertEqual(repr(model), "<lattice.Model closed>")
        self.assertRegex(repr(trainer), r"^<lattice\.Trainer closed model, distilled, ")
        for obj, _ in expected:
            obj.close()
            self.assertEqual(repr(obj), f"<lattice.{type(obj).__name__} closed>")

    def test_repr_does_not_wait_for_another_thread(self):
        import threading
        model = tiny_model()
        held, done = threading.Event(), threading.Event()

        def hold():   # as a long call would
            with model._using():
                held.set()
                done.wait(30)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            self.assertTrue(held.wait(30))
            self.assertRegex(repr(model), r"^<lattice\.Model busy \(a call on another thread")
        finally:
            done.set()
            thread.join()
        self.assertEqual(repr(model), "<lattice.Model pre 2/2 layers d16>")

    def test_set_active_layers_is_a_deprecated_alias(self):
        import warnings
        model = tiny_model()
        with self.assertWarnsRegex(DeprecationWarning, "model.active_layers = n") as cm:
            model.set_active_layers(1)
        self.assertEqual(cm.filename, __file__)   # the warning points at the caller
        self.assertEqual(model.active_layers, 1)
        self.assertIn("Deprecated", lattice.Model.set_active_layers.__doc__)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.active_layers = 2            # the one spelling: no warning
        self.assertEqual(model.active_layers, 2)

    def test_readme_python_example_runs(self):
        readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "README.md")
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("## Use from Python"):]
        blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
        self.assertTrue(blocks, "no ```python block in README.md's Python section")
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"loss after 30 steps: \d+\.\d{3}")


class DiagTest(unittest.TestCase):
    def test_boundary_scale(self):
        model = tiny_model(n_layers=3, n_active_layers=2)
        diag = lattice.Diag(model)
        stats = diag.boundary_scale(array.array("i", range(1, 13)), batch=3, seq=4)
        self.assertEqual(len(stats), 3)                       # boundaries 0..2
        for boundary in stats:
            regular, first, every = boundary
            self.assertEqual((regular.count, first.count, every.count), (9, 3, 12))
            self.assertGreater(every.mean, 0.0)
            self.assertGreaterEqual(every.max, every.mean)
        self.assertEqual(model.hidden(2).shape, (3, 4, 16))   # the forward is the model's
        mine = diag.boundary_scale([[1, 2, 3, 4]], classes=bytes([0, 0, 0, 0]), n_classes=1)
        self.assertEqual(mine[0][0].count, 4)
        with self.assertRaises(LatticeError) as cm:
            diag.boundary_scale([[1, 2, 3, 4]], classes=bytes([0, 0, 5, 0]), n_classes=1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("class", str(cm.exception))

    def test_attention_sinks(self):
        """Queries and keys zeroed: uniform causal attention, so the mass on
        position 0 at query t is 1 / (t + 1), by hand."""
        model = tiny_model(n_layers=2)
        for tensor in model.tensors():
            if "q_proj" in tensor.name or "k_proj" in tensor.name:
                raw = tensor.data.cast("B")
                raw[:] = bytes(len(raw))
        diag = lattice.Diag(model)
        tokens = array.array("i", range(1, 13))
        sinks = diag.attention_sinks(tokens, batch=2, seq=6, threshold=0.3)
        mass = sum(1.0 / (t + 1) for t in range(1, 6)) / 5
        self.assertEqual(len(sinks), 2)
        for s in sinks:
            self.assertAlmostEqual(s.mass0, mass, places=6)
            self.assertEqual(len(s.head_mass), 2)
            for h in s.head_mass:
                self.assertAlmostEqual(h, mass, places=6)
            self.assertEqual(s.sink_rate, 0.0 if mass <= 0.3 else 1.0)
            self.assertGreater(s.top_ratio, 1.0)
            self.assertTrue(0 <= s.top_token < 12 and 0 <= s.top_dim < 16)
            self.assertGreater(s.value_norm0, 0.0)
        flat = [abs(x) for x in model.hidden(1).cast("B").cast("f")]  # layer 0's output
        self.assertEqual(flat.index(max(flat)), sinks[0].top_token * 16 + sinks[0].top_dim)
        ranked = sorted(flat)
        median = (ranked[len(ranked) // 2 - 1] + ranked[len(ranked) // 2]) / 2
        self.assertAlmostEqual(sinks[0].top_ratio, max(flat) / median, places=4)
        with self.assertRaises(LatticeError) as cm:
            diag.attention_sinks(tokens[:4], batch=4, seq=1)
        self.assertIn("at least 2 positions", str(cm.exception))

    def test_block_removal(self):
        model = tiny_model()
        model.zero_layer_outputs(1)                           # layer 1 is the identity
        diag = lattice.Diag(model)
        tokens = array.array("i", range(1, 9))
        targets = array.array("i", range(2, 10))
        r = diag.block_removal(tokens, targets, first=1, count=1, batch=2, seq=4)
        self.assertAlmostEqual(r.dce, 0.0, places=5)
        self.assertAlmostEqual(r.angle, 0.0, places=3)
        r = diag.block_removal(tokens, targets, 0, 1, batch=2, seq=4)
        self.assertNotAlmostEqual(r.dce, 0.0, places=5)
        self.assertAlmostEqual(r.dce, r.ce_removed - r.ce_full)
        with self.assertRaises(LatticeError) as cm:
            diag.block_removal(tokens, targets, 1, 5, batch=2, seq=4)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        model.close()
        diag.block_removal(tokens, targets, 1, 1, batch=2, seq=4)   # the diag keeps the model

    def test_loss_response(self):
        r = lattice.Diag.loss_response([1, 1, 1, 1, 3, 2, 1, 1], append_step=4, window=2,
                                       horizon=4)
        self.assertEqual(r, lattice.Response(baseline=1.0, jump=2.0, area=3.0, recovery=4))
        r = lattice.Diag.loss_response(array.array("d", [1, 1, 5, 5]), 2, 2, 2)
        self.assertEqual(r.recovery, -1)
        with self.assertRaises(LatticeError) as cm:
            lattice.Diag.loss_response([1.0, 2.0], 5, 1, 1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            lattice.Diag.loss_response(array.array("f", [1, 2, 3]), 1, 1, 1)


class LifetimeTest(unittest.TestCase):
    def test_closed_handles_raise(self):
        model = tiny_model()
        model.close()
        model.close()                       # twice is harmless
        self.assertTrue(model.closed)
        with self.assertRaises(lattice.ClosedError) as cm:
            model.forward(array.array("i", range(4)), 1, 4)
        self.assertIsInstance(cm.exception, LatticeError)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(lattice.ClosedError):
            model.active_layers
        with self.assertRaises(lattice.ClosedError):
            lattice.Optim(model)
        with self.assertRaises(lattice.ClosedError):
            lattice.Teacher.from_model(model)
        be = lattice.Backend("ref")
        be.close()
        with self.assertRaises(lattice.ClosedError):
            tiny_model(backend=be)
        with self.assertRaises(TypeError):
            lattice.Optim("not a model")
        self.assertIn("closed", repr(model))

    def test_borrowed_objects_stay_alive(self):
        def build():
            backend = lattice.Backend("ref")
            model = tiny_model(backend=backend)
            optim = lattice.Optim(model)
            backend.close()                 # the model still holds it
            return optim

        optim = build()
        gc.collect()
        model = optim.model
        model.forward(array.array("i", range(4)), 1, 4)
        model.cross_entropy(array.array("i", range(1, 5)))
        model.backward()
        optim.step()
        model.close()                       # the optimizer still holds it
        optim.step()

    def test_views_keep_the_model(self):
        model = tiny_model()
        model.forward(array.array("i", range(4)), 1, 4)
        logits = model.logits_view()
        expected = logits.tolist()
        weight = model.tensor("lm_head.weight").data
        model.close()
        del model
        gc.collect()
        self.assertEqual(logits.tolist(), expected)
        self.assertEqual(len(weight.tolist()), VOCAB)

    def test_cycles_through_callbacks(self):
        # A callback that refers to the trainer makes a cycle the collector must
        # break; every finaliser order has to be safe.
        for _ in range(3):
            holder = {}

            def on_step(metrics, holder=holder):
                holder["trainer"].model

            model = tiny_model()
            trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 1),
                                      teacher=lattice.Teacher.from_callback(
                                          lambda *a: next_token_teacher(*a), VOCAB, 4, 16),
                                      on_step=on_step)
            holder["trainer"] = trainer
            trainer.run()
            del trainer, model, holder, on_step
            gc.collect()


class DistillTest(unittest.TestCase):
    def logits(self, n, seed):
        return array.array("f", [math.sin(seed * 7.1 + i * 0.37) * 3 for i in range(n * VOCAB)])

    def test_dense(self):
        with lattice.Distill() as loss:
            self.assertAlmostEqual(loss.params.alpha, 0.7)
            self.assertAlmostEqual(loss.params.gamma, 0.3)
            s = self.logits(6, 1)
            targets = array.array("i", [1, 2, 3, 4, 5, 6])
            same = loss.dense(s, s, targets, vocab=VOCAB)
            self.assertAlmostEqual(same.kl, 0.0, places=5)
            self.assertEqual(same.n_counted, 6)
            t = self.logits(6, 2)
            grad = array.array("f", [0.0] * (6 * VOCAB))
            r = loss.dense(memoryview(s).cast("B").cast("f", (6, VOCAB)), t, targets,
                           mask=bytearray([1, 1, 1, 1, 0, 0]), dlogits=grad)
            self.assertGreater(r.kl, 0.0)
            self.assertEqual(r.n_counted, 4)
            self.assertAlmostEqual(r.loss, 0.7 * r.kl + 0.3 * r.ce, places=5)
            self.assertTrue(any(g != 0.0 for g in grad))
            with self.assertRaises(LatticeError) as cm:
                loss.dense(s, t, array.array("i", [1, 2, 3, 4, 5, VOCAB]), vocab=VOCAB)
            self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
            with self.assertRaises(ValueError):
                loss.dense(s, t, targets)               # flat logits without vocab
            with self.assertRaises(TypeError):
                loss.dense(s, t, targets, vocab=VOCAB, dlogits=bytes(6 * VOCAB * 4))

    def test_topk_with_k_vocab_is_dense(self):
        loss = lattice.Distill(alpha=1.0, gamma=0.0)
        s, t = self.logits(3, 3), self.logits(3, 4)
        index = array.array("i", list(range(VOCAB)) * 3)
        dense = loss.dense(s, t, vocab=VOCAB)
        topk = loss.topk(s, index, t, vocab=VOCAB, k=VOCAB)
        self.assertAlmostEqual(dense.loss, topk.loss, places=4)
        reverse = lattice.Distill(direction=lattice.KLDirection.REVERSE, gamma=0.0)
        with self.assertRaises(LatticeError) as cm:
            reverse.topk(s, index, t, vocab=VOCAB, k=VOCAB)
        self.assertEqual(cm.exception.code, Status.UNSUPPORTED)
        with self.assertRaises(LatticeError) as cm:
            lattice.Distill(tau=0.0)
        self.assertIn(cm.exception.code, (Status.INVALID_CONFIG, Status.INVALID_ARGUMENT))


class DataTest(unittest.TestCase):
    def test_memory(self):
        data = tiny_data()
        self.assertEqual(data.n_documents() + data.n_documents("val"), 40)
        self.assertEqual(data.n_tokens(lattice.Split.TRAIN) + data.n_tokens(lattice.Split.VAL),
                         40 * (SEQ + 1))
        self.assertEqual(data.params.batch_size, 4)
        self.assertIsNone(data.params.separator)
        batch = data.next()
        self.assertEqual(batch.tokens.shape, (batch.batch, batch.seq))
        self.assertFalse(batch.tokens.readonly)                 # copies
        self.assertTrue(data.val_batch_view(0).tokens.readonly)  # views
        self.assertEqual(batch.batch, 4)
        self.assertLessEqual(batch.seq, SEQ)
        self.assertEqual(batch.n_tokens, sum(batch.mask.cast("B")))
        row = batch.tokens.tolist()[0]
        self.assertEqual(row[0], 0)                             # documents start at the boundary
        self.assertEqual(batch.targets.tolist()[0][:-1], row[1:])
        self.assertGreater(data.n_val_batches, 0)
        self.assertEqual(len(list(data.val_batches())), data.n_val_batches)
        self.assertEqual(data.position, lattice.Position(0, 4))   # four documents taken
        data.position = (0, 0)
        self.assertEqual(data.next().tokens.tolist()[0], row)   # the same order again
        with self.assertRaises(LatticeError):
            data.val_batch(data.n_val_batches)
        with self.assertRaises(LatticeError):
            data.position = lattice.Position(0, 10_000)

    def test_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "corpus.txt")
            with open(text, "w") as f:
                f.write("one document\fanother one\fa third\fand a fourth")
            data = lattice.Data.from_text(text, batch_size=2, seq_len=8, val_fraction=0.25,
                                          split_long=False)
            self.assertEqual(data.n_documents(), 3)
            self.assertEqual(data.n_documents("val"), 1)
            val = os.path.join(tmp, "val.txt")
            with open(val, "w") as f:
                f.write("held out\fand this")
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=8,
                                          split_long=False)
            self.assertEqual((data.n_documents(), data.n_documents("val")), (4, 2))
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=8)
            self.assertGreater(data.n_documents(), 4)           # split_long is the default
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=4,
                                          split_long=True)
            self.assertGreater(data.n_documents(), 4)           # long documents were cut
            self.assertGreater(data.n_documents("val"), 2)
            tokens = os.path.join(tmp, "ids.u16")
            with open(tokens, "wb") as f:
                f.write(array.array("H", [0, 5, 6, 7, 0, 8, 9, 0, 3, 4]).tobytes())
            data = lattice.Data.from_tokens(tokens, 2, vocab_size=10, boundary_id=0,
                                            batch_size=2, seq_len=4)
            self.assertEqual(data.n_documents(), 3)
            with self.assertRaises(LatticeError) as cm:
                lattice.Data.from_text(os.path.join(tmp, "missing.txt"))
            self.assertEqual(cm.exception.code, Status.IO)
            self.assertIn("missing.txt", str(cm.exception))
            with self.assertRaises(LatticeError) as cm:
                lattice.Data.from_tokens(tokens, 2, vocab_size=5, boundary_id=0)
            self.assertEqual(cm.exception.code, Status.FORMAT)
        with self.assertRaises(LatticeError) as cm:
            lattice.Data.from_memory(array.array("i", [0, 1, 2]), batch_size=0)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        with self.assertRaises(TypeError):
            lattice.Data()


class ScheduleTest(unittest.TestCase):
    def test_presets(self):
        grow = lattice.Schedule.preset("grow", n_blocks=3, block_size=3, steps_per_phase=10)
        self.assertEqual([p.active_layers for p in grow.phases], [3, 6, 9])
        freeze = lattice.Schedule.preset(lattice.Preset.FREEZE, 3, 3, 10)
        self.assertEqual([p.train_from for p in freeze.phases], [0, 3, 6])
        self.assertEqual(len(grow), 3)
        self.assertEqual(grow.max_layers, 9)
        self.assertEqual(grow.total_steps, 30)
        with self.assertRaises(LatticeError) as cm:
            lattice.Schedule.preset("grow", 0, 3, 10)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)

    def test_phase_fields_of_0_2(self):
        grow = lattice.Schedule.preset("grow", 3, 3, 10)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 0, 0])   # reads on
        self.assertEqual([p.train_boundary for p in grow.phases], [1, 1, 1])
        grow.set_rewind_data(True)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 1, 1])
        grow.set_rewind_data(False)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 0, 0])
        replay = lattice.Schedule.preset("grow", 3, 3, 10, rewind_data=True)
        self.assertEqual([p.rewind_data for p in replay.phases], [0, 1, 1])
        freeze = lattice.Schedule.preset("freeze", 3, 3, 10)
        self.assertEqual([p.train_boundary for p in freeze.phases], [1, 0, 0])
        s = lattice.Schedule([dict(steps=2, rewind_data=1, train_boundary=0)])
        self.assertEqual((s.phase(0).rewind_data, s.phase(0).train_boundary), (1, 0))
        self.assertEqual(lattice.Phase.defaults().train_boundary, 1)

    def test_rewind_replays_the_first_phase(self):
        def batches(rewind):
            model = tiny_model(n_layers=2, n_active_layers=1)
            data = tiny_data()
            schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1,
                                               steps_per_phase=3, rewind_data=rewind)
            trainer = lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0), schedule)
            seen = []
            for _ in range(6):
                trainer.step()
                seen.append(data.position)
            return seen

        on, off = batches(True), batches(False)
        self.assertEqual(on[3:], on[:3])          # phase 1 reads phase 0's batches again
        self.assertEqual(off[:3], on[:3])
        self.assertNotEqual(off[3:], off[:3])     # the default reads on
        self.assertGreater(off[5].index, off[2].index)

    def test_record_and_position(self):
        s = lattice.Schedule([dict(steps=2, active_layers=1), lattice.Phase.make(steps=1)])
        self.assertEqual(s.position, (0, 0))
        self.assertFalse(s.record(10, 8, 1.0))
        self.assertTrue(s.record(10, 8, 1.0))
        self.assertEqual(s.position, (1, 0))
        self.assertTrue(s.record(10, 6))
        self.assertTrue(s.finished)
        self.assertEqual(s.counters, lattice.Counters(3, 30, 22, 22, 2.0))
        with self.assertRaises(LatticeError) as cm:
            s.record(1, 1)
        self.assertEqual(cm.exception.code, Status.STATE)
        s.set_position(1, 0, lattice.Counters(steps=2))
        self.assertEqual(s.position, (1, 0))
        self.assertEqual(s.counters.steps, 2)
        s.set_position(0)
        self.assertEqual(s.counters, lattice.Counters())
        with self.assertRaises(LatticeError) as cm:
            s.add_phase(steps=5, active_layers=2, train_from=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertTrue(str(cm.exception).startswith("invalid configuration"))


class TeacherTest(unittest.TestCase):
    def test_callback_teacher(self):
        seen = []

        def fn(tokens, batch, seq, vocab, logits):
            seen.append((list(tokens), batch, seq, vocab, len(logits), logits.readonly,
                         tokens.readonly))
            next_token_teacher(tokens, batch, seq, vocab, logits)

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 2, 8)
        self.assertEqual(teacher.vocab_size, VOCAB)
        self.assertEqual(teacher.flops(2, 8), 0.0)
        out = teacher.logits(array.array("i", [3, 4, 5, 6]), 2, 2)
        self.assertEqual(seen, [([3, 4, 5, 6], 2, 2, VOCAB, 4 * VOCAB, False, True)])
        self.assertEqual(out.shape, (2, 2, VOCAB))
        self.assertEqual(out[0, 0, 4], 4.0)
        view = teacher.logits_view(array.array("i", [3, 4, 5, 6]), 2, 2)
        self.assertTrue(view.readonly)
        teacher.logits(array.array("i", [7, 8, 9, 10]), 2, 2)
        self.assertEqual(out[0, 0, 4], 4.0)          # the copy keeps the first call's values
        self.assertEqual(view[0, 0, 4], 0.0)         # the view shows the second call's
        self.assertEqual(view[0, 0, 8], 4.0)
        seen.clear()
        with self.assertRaises(LatticeError) as cm:
            teacher.logits(array.array("i", range(9)), 1, 9)       # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            lattice.Teacher.from_callback(42, VOCAB, 2, 8)

    def test_callback_views_do_not_outlive_the_call(self):
        kept = []

        def fn(tokens, batch, seq, vocab, logits):
            next_token_teacher(tokens, batch, seq, vocab, logits)
            kept.append(logits)

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 1, 4)
        teacher.logits(array.array("i", range(4)), 1, 4)
        with self.assertRaises(ValueError):
            kept[0][0]                                              # released

    def test_callback_exception(self):
        def fn(*args):
            raise KeyError("teacher is out")

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 2, 8)
        with self.assertRaises(LatticeError) as cm:
            teacher.logits(array.array("i", range(4)), 1, 4)
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, KeyError)
        self.assertIn("callback", str(cm.exception))
        # The next call is clean again.
        ok = lattice.Teacher.from_callback(next_token_teacher, VOCAB, 2, 8)
        ok.logits(array.array("i", range(4)), 1, 4)

    def test_non_finite_logits(self):
        def fn(tokens, batch, seq, vocab, logits):
            logits[0] = float("nan")

        with self.assertRaises(LatticeError) as cm:
            lattice.Teacher.from_callback(fn, VOCAB, 1, 4).logits(array.array("i", [1]), 1, 1)
        self.assertEqual(cm.exception.code, Status.NON_FINITE)

    def test_model_teacher(self):
        big = tiny_model(seed=1)
        student = tiny_model(seed=2, n_layers=1, n_active_layers=1)
        teacher = lattice.Teacher.from_model(big)
        self.assertGreater(teacher.flops(1, 4), 0.0)
        out = teacher.logits(array.array("i", range(4)), 1, 4)
        big.forward(array.array("i", range(4)), 1, 4)
        self.assertEqual(out.tolist(), big.logits().tolist())
        teacher.init_student(student)
        self.assertEqual(student.tensor("lm_head.weight").data.tolist(),
                         big.tensor("lm_head.weight").data.tolist())
        self.assertFalse(student.is_trainable("embedding"))
        callback = lattice.Teacher.from_callback(next_token_teacher, VOCAB, 1, 4)
        with self.assertRaises(LatticeError) as cm:
            callback.init_student(student)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)


class TrainerTest(unittest.TestCase):
    def test_cross_entropy_training(self):
        model = tiny_model()
        data = tiny_data()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-3, warmup_steps=0)
        schedule = lattice.Schedule.preset("joint", n_blocks=1, block_size=2, steps_per_phase=25)
        trainer = lattice.Trainer(model, data, optim, schedule, eval_every=5)
        first = trainer.step()
        self.assertEqual(first.step, 1)
        self.assertEqual(first.kl, 0.0)
        self.assertTrue(math.isnan(first.val_ce))
        metrics = [trainer.step() for _ in range(24)]
        self.assertTrue(schedule.finished)
        self.assertLess(metrics[-1].loss, 0.6 * first.loss)
        self.assertTrue(math.isfinite(metrics[3].val_ce))          # step 5
        self.assertTrue(metrics[-1].phase_end)
        val = trainer.evaluate()
        self.assertAlmostEqual(val, metrics[-1].val_ce, places=4)
        self.assertEqual(metrics[-1].counters.steps, 25)
        with self.assertRaises(LatticeError) as cm:
            trainer.step()
        self.assertEqual(cm.exception.code, Status.STATE)
        self.assertIn("finished", str(cm.exception))
        # The C struct's size as the library sees it; a size that says nothing
        # is refused before the step runs.
        m = lattice._types.MetricsStruct()
        schedule.set_position(0)
        self.assertEqual(_lib.lib.lattice_trainer_step(trainer._ptr, ctypes.byref(m)),
                         Status.INVALID_ARGUMENT)
        self.assertIn("metrics->size 0", _lib.last_error())
        m.size = ctypes.sizeof(m)
        self.assertEqual(_lib.lib.lattice_trainer_step(trainer._ptr, ctypes.byref(m)), 0)
        self.assertEqual(m.size, ctypes.sizeof(m))

    def test_distill_with_a_python_teacher(self):
        calls = []

        def teacher_fn(tokens, batch, seq, vocab, logits):
            calls.append(batch * seq)
            next_token_teacher(tokens, batch, seq, vocab, logits)

        model = tiny_model()
        teacher = lattice.Teacher.from_callback(teacher_fn, VOCAB, 4, 16)
        steps = []
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, lr=1e-2, warmup_steps=0),
                                  lattice.Schedule.preset("joint", 1, 2, 20), teacher=teacher,
                                  distill=lattice.Distill(alpha=1.0, gamma=0.0),
                                  on_step=steps.append)
        trainer.run()
        self.assertEqual(len(steps), 20)
        self.assertEqual(len(calls), 20)
        self.assertGreater(steps[0].kl, 0.0)
        self.assertLess(steps[-1].kl, 0.6 * steps[0].kl)
        self.assertIsInstance(steps[-1], lattice.Metrics)
        self.assertIsInstance(steps[-1].counters, lattice.Counters)
        # After the run the student predicts what the teacher does.
        model.forward(array.array("i", [5, 6, 7, 8]), 1, 4)
        row = model.logits().tolist()[0][3]
        self.assertEqual(row.index(max(row)), 9)

    def test_grow_depth(self):
        model = tiny_model(n_layers=3, n_active_layers=1)
        schedule = lattice.Schedule.preset(lattice.Preset.GROW, n_blocks=3, block_size=1,
                                           steps_per_phase=2, block_init="identity")
        seen = []
        evals = []
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=lambda m: seen.append((m.phase, m.active_layers)),
                                  on_eval=evals.append)
        trainer.run()
        self.assertEqual(seen, [(0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3)])
        self.assertEqual(model.active_layers, 3)
        self.assertEqual(len(evals), 3)                    # every phase end
        self.assertTrue(all(m.phase_end for m in evals))
        self.assertEqual(schedule.counters.steps, 6)

    def test_lr_shape_wsd(self):
        model = tiny_model()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-4, warmup_steps=2, total_steps=12,
                              lr_shape="wsd", decay_fraction=0.5)
        self.assertEqual(optim.params.lr_shape, lattice.LRShape.WSD)
        self.assertAlmostEqual(optim.params.decay_fraction, 0.5)
        rates = []
        for _ in range(14):
            rates.append(optim.lr)
            optim.step()
        want = [5e-3] + [1e-2] * 7                                   # warmup, then held
        want += [1e-2 - (1e-2 - 1e-4) * k / 5 for k in range(1, 6)]  # the last 5 of 10
        want += [1e-4]                                               # past the end
        self.assertEqual(len(want), len(rates))
        for got, w in zip(rates, want):
            self.assertAlmostEqual(got, w, delta=1e-7)
        self.assertEqual(lattice.Optim(model).params.lr_shape, lattice.LRShape.COSINE)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr_shape="wsd", decay_fraction=2.0)
        self.assertIn("decay_fraction 2 must lie in [0, 1]", str(cm.exception))
        with self.assertRaises(ValueError):
            lattice.Optim(model, lr_shape="linear")
        # under a 0.3 library the new fields would be ignored: refused
        from lattice import _lib
        real = _lib.version_number
        try:
            _lib.version_number = 300
            lattice.OptimParams.make(lr=1e-3)
            with self.assertRaises(TypeError) as cm:
                lattice.OptimParams.make(lr_shape="wsd")
            self.assertIn("OptimParams.lr_shape is newer than the loaded liblattice",
                          str(cm.exception))
        finally:
            _lib.version_number = real

    def test_warmup_fits_the_run(self):
        model = tiny_model()
        # total_steps alone: the paper's 1.5% warmup, not its 750 steps
        self.assertEqual(lattice.Optim(model, lr=1e-3, total_steps=5).params.warmup_steps, 0)
        self.assertEqual(lattice.Optim(model, total_steps=2000).params.warmup_steps, 30)
        self.assertEqual(lattice.Optim(model).params.warmup_steps, 750)
        self.assertEqual(lattice.Optim(model, total_steps=5, warmup_steps=5).params.warmup_steps, 5)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, total_steps=5, warmup_steps=6)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("warmup_steps 6 > total_steps 5", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr=1e-4, min_lr=1e-3)
        self.assertIn("min_lr 0.001 > lr 0.0001", str(cm.exception))
        # a phase that restarts the optimizer is its run
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=7),
                            lattice.Schedule.preset("joint", 1, 2, 6))
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("phase 0 restarts the optimizer for 6 steps, fewer than its warmup_steps 7",
                      str(cm.exception))
        # validation asked of data without a validation split
        no_val = tiny_data(val_fraction=0.0)
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, no_val, lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 6), eval_every=2)
        self.assertIn("eval_every 2 asks for validation, but the data has no validation documents",
                      str(cm.exception))

    def test_checkpoint_resume(self):
        def make():
            model = tiny_model(n_layers=2, n_active_layers=1)
            schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1, steps_per_phase=3)
            return lattice.Trainer(model, tiny_data(), lattice.Optim(model, lr=1e-2, warmup_steps=0), schedule)

        t = make()
        reference = [t.step().loss for _ in range(6)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.safetensors")
            t = make()
            for _ in range(2):
                t.step()
            t.save_checkpoint(path)
            resumed = make()
            resumed.load_checkpoint(path)
            self.assertEqual([resumed.step().loss for _ in range(4)], reference[2:])
            with self.assertRaises(LatticeError) as cm:
                resumed.load_checkpoint(os.path.join(d, "missing.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)

    def test_file_teacher(self):
        model = tiny_model()
        teacher = lattice.Teacher.from_model(model)
        data = tiny_data()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "logits.safetensors")
            start = data.position
            teacher.record(data, 2, path, k=3)
            data.position = start
            f = lattice.Teacher.from_file(path)
            self.assertEqual(f.topk_k, 3)
            batch = data.next()
            index, value = f.topk(batch.tokens, batch.batch, batch.seq)
            full = teacher.logits(batch.tokens, batch.batch, batch.seq).tolist()
            row = full[0][0]
            self.assertEqual(index.tolist()[0][0][0], row.index(max(row)))
            self.assertAlmostEqual(value.tolist()[0][0][0], max(row), places=5)
            with self.assertRaises(LatticeError) as cm:
                lattice.Teacher.from_file(os.path.join(d, "none"))
            self.assertEqual(cm.exception.code, Status.IO)

    def test_callback_stops_the_run(self):
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=lambda m: m.step >= 3)
        trainer.run()
        self.assertEqual(schedule.counters.steps, 3)

    def test_callback_exception_surfaces(self):
        def on_step(metrics):
            if metrics.step == 2:
                raise RuntimeError("stop here")

        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=on_step)
        with self.assertRaisesRegex(RuntimeError, "stop here"):
            trainer.run()
        self.assertEqual(schedule.counters.steps, 2)
        trainer.step()                                     # the trainer is still usable
        self.assertEqual(schedule.counters.steps, 3)

    def test_teacher_exception_through_the_trainer(self):
        def teacher_fn(*args):
            raise ValueError("teacher crashed")

        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  teacher=lattice.Teacher.from_callback(teacher_fn, VOCAB, 4, 16))
        with self.assertRaises(LatticeError) as cm:
            trainer.run()
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        self.assertIn("teacher", str(cm.exception))
        self.assertEqual(schedule.counters.steps, 0)

    def test_bad_binding(self):
        model = tiny_model(vocab_size=16)
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 10))
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 5, 10))   # deeper than the model
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        with self.assertRaises(TypeError):
            lattice.Trainer(model, tiny_data(), model, lattice.Schedule())


class InferenceTest(unittest.TestCase):
    """Evaluation without a trainer: forward_inference, loss and evaluate (since 0.2)."""

    TOKENS = [[1, 2, 3, 4], [5, 6, 7, 8]]
    TARGETS = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
    MASK = bytes([1, 1, 1, 0, 1, 1, 1, 0])

    def test_forward_inference(self):
        model = tiny_model(norm="post")
        model.forward(self.TOKENS)
        want = model.logits().tolist()
        model.forward([[9, 9, 9, 9], [1, 1, 1, 1]])
        model.forward_inference(self.TOKENS)
        self.assertEqual(model.logits().tolist(), want)     # bit for bit
        model.cross_entropy(self.TARGETS)
        with self.assertRaises(LatticeError) as cm:
            model.backward()
        self.assertEqual(cm.exception.code, Status.STATE)
        self.assertIn("inference forward", str(cm.exception))
        model.forward(self.TOKENS)
        model.cross_entropy(self.TARGETS)
        model.backward()
        with self.assertRaises(LatticeError) as cm:
            model.forward_inference([[1] * 17])              # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)

    def test_loss(self):
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            model.loss(self.TARGETS)
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward_inference(self.TOKENS)
        loss, counted = model.cross_entropy(self.TARGETS, mask=self.MASK)
        d = model.dlogits_view()
        before = model.dlogits().tolist()
        ce, n = model.loss(self.TARGETS, mask=self.MASK)
        self.assertEqual(n, counted)
        self.assertEqual(n, 6)
        self.assertAlmostEqual(ce, loss, delta=1e-6 * abs(ce))
        self.assertEqual(d.tolist(), before)                 # no gradient written
        ce_all, n_all = model.loss(self.TARGETS)
        self.assertEqual(n_all, 8)
        self.assertNotEqual(ce_all, ce)
        with self.assertRaises(LatticeError) as cm:
            model.loss(array.array("i", [VOCAB] * 8))
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises((ValueError, TypeError)):
            model.loss(array.array("i", [1, 2, 3]))          # wrong size

    def test_evaluate(self):
        model = tiny_model()
        data = tiny_data()
        nb = data.n_val_batches
        self.assertGreaterEqual(nb, 2)
        with self.assertRaises(LatticeError) as cm:       # more than the set has
            lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 6), eval_batches=nb + 3)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn(f"eval_batches {nb + 3} exceeds the data's {nb} validation batches",
                      str(cm.exception))
        for max_batches in (0, 1, nb):
            trainer = lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 6),
                                      eval_batches=max_batches)
            want = trainer.evaluate()
            got = model.evaluate(data, max_batches=max_batches)
            self.assertAlmostEqual(got, want, delta=1e-6 * want)
            trainer.close()
        # by hand: the first batch alone
        b = data.val_batch(0)
        model.forward_inference(b.tokens, b.batch, b.seq)
        ce, n = model.loss(b.targets, b.mask)
        self.assertAlmostEqual(model.evaluate(data, 1), ce, delta=1e-12 * ce)
        with self.assertRaises(LatticeError) as cm:
            model.backward()                                   # evaluate ran inference forwards
        self.assertEqual(cm.exception.code, Status.STATE)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(data, max_batches=-1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(tiny_data(val_fraction=0.0))
        self.assertEqual(cm.exception.code, Status.STATE)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(tiny_data(batch_size=5))            # wider than max_batch 4
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("max_batch", str(cm.exception))
        with self.assertRaises(TypeError):
            model.evaluate(model)


class IntegerRangeTest(unittest.TestCase):
    """Integers are checked against their C type before a call: ctypes alone truncates."""

    def test_arguments_out_of_range_raise(self):
        model = tiny_model()
        embedding = model.tensor(0).data.tolist()
        layer0 = model.tensor("model.layers.0.self_attn.q_proj.weight").data.tolist()
        with self.assertRaisesRegex(OverflowError, "4294967296 does not fit the C type int32"):
            model.init_layer(2**32, 12345)                 # was: layer 0 re-initialised
        self.assertEqual(model.tensor("model.layers.0.self_attn.q_proj.weight").data.tolist(),
                         layer0)
        with self.assertRaises(OverflowError):
            model.active_layers = 2**32 + 1                # was: 1 active layer
        self.assertEqual(model.active_layers, 2)
        with self.assertRaises(OverflowError):
            model.tensor(2**32)                            # was: the embedding
        with self.assertRaises(OverflowError):
            model.tensor(-2**31 - 1)
        with self.assertRaises(OverflowError):
            model.init_layer(0, -1)                        # seed: uint64
        with self.assertRaises(OverflowError):
            model.init_layer(0, 2**64)
        with self.assertRaises(OverflowError):
            model.flops(2**31, 1)
        self.assertEqual(model.tensor(0).data.tolist(), embedding)
        model.init_layer(0, 2**64 - 1)                     # the whole range is taken
        model.active_layers = True                         # bool and IntEnum are ints
        self.assertEqual(model.active_layers, 1)
        if numpy is not None:
            model.active_layers = numpy.int64(2)
            self.assertEqual(model.active_layers, 2)
        # in range but invalid: the library's own check
        with self.assertRaises(LatticeError) as cm:
            model.tensor(-1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError) as cm:
            model.active_layers = 3
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        data = tiny_data()
        with self.assertRaises(OverflowError):
            data.val_batch(2**63)
        with self.assertRaises(OverflowError):
            lattice.Schedule.preset("joint", 1, 2, 2**63)

    def test_params_fields_out_of_range_raise(self):
        with self.assertRaisesRegex(OverflowError, r"ModelParams\.d_model: 4294967312"):
            tiny_model(d_model=2**32 + 16)                 # was: a model of d_model 16
        with self.assertRaises(OverflowError):
            lattice.Model.check_params(d_model=2**32 + 16)
        with self.assertRaises(OverflowError):
            tiny_model(seed=-1)
        p = lattice.ModelParams.defaults()
        with self.assertRaises(OverflowError):
            p.n_layers = 2**31
        self.assertEqual(p.n_layers, lattice.ModelParams.defaults().n_layers)
        model = tiny_model()
        with self.assertRaises(OverflowError):
            lattice.Optim(model, total_steps=2**63)
        with self.assertRaises(OverflowError):
            lattice.Schedule().add_phase(steps=2**63)
        with self.assertRaises(OverflowError):
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 2), eval_every=2**63)
        with self.assertRaises(OverflowError):
            tiny_data(batch_size=2**32 + 4)
        with self.assertRaises(OverflowError):
            tiny_data().position = (2**63, 0)

    def test_every_integer_field_is_checked(self):
        structs = [c for c in vars(lattice._types).values() if isinstance(c, type)
                   and issubclass(c, lattice._types.Struct) and "_fields_" in vars(c)]
        structs.append(lattice.dist.DistStatsStruct)
        checked = 0
        for cls in structs:
            for name, ctype, *_ in cls._fields_:
                if ctype not in C_INTEGERS:
                    continue
                lo, hi = c_range(ctype)
                with self.subTest(field=f"{cls.__name__}.{name}"):
                    s = cls()
                    for bad in (lo - 1, hi + 1):
                        with self.assertRaises(OverflowError):
                            setattr(s, name, bad)
                    setattr(s, name, hi)
                    self.assertEqual(getattr(s, name), hi)
                    checked += 1
        self.assertGreater(checked, 50)

    def test_every_integer_argument_is_checked(self):
        # Each integer argument of every prototype out of range, with every handle
        # NULL: the call must be refused before it reaches C (in a child process,
        # where a call that did reach C cannot take the test runner with it).
        out = run_isolated(self, """
            import ctypes
            from lattice import _lib
            from test_lattice import C_INTEGERS, c_range
            refused = 0
            for name, (restype, argtypes) in _lib.PROTOTYPES.items():
                for i, ctype in enumerate(argtypes):
                    if ctype not in C_INTEGERS:
                        continue
                    lo, hi = c_range(ctype)
                    for bad in (lo - 1, hi + 1):
                        args = [0 if t in C_INTEGERS or t in (ctypes.c_float, ctypes.c_double)
                                else None for t in argtypes]
                        args[i] = bad
                        try:
                            getattr(_lib.lib, name)(*args)
                        except OverflowError as e:
                            assert name in str(e) and f"argument {i + 1}" in str(e), e
                            refused += 1
                        else:
                            raise AssertionError(f"{name} took argument {i + 1} = {bad}")
            print(refused)
        """)
        self.assertGreater(int(out), 150)

    def test_sgemm_out_of_range_does_not_reach_c(self):
        # m wrapped to 4000000 rows of a 4-float c: a segfault, before
        out = run_isolated(self, """
            be = lattice.Backend("ref")
            a, b, c = (array.array("f", [1.0] * 4) for _ in range(3))
            try:
                be.sgemm(a, b, c, -(2**32) + 4000000, 1, 1)
            except OverflowError as e:
                print("refused:", e)
            be.sgemm(a, b, c, 2, 2, 2)
            print(c.tolist())
        """)
        self.assertIn("refused: lattice_backend_sgemm: argument 4: -4290967296", out)
        self.assertIn("[2.0, 2.0, 2.0, 2.0]", out)


class CloseDuringCallTest(unittest.TestCase):
    """close() while a call on the object runs: it waits, or (inside the call) raises."""

    def test_close_inside_a_callback_raises(self):
        out = run_isolated(self, """
            def build(on_step):
                model = tiny_model()
                schedule = lattice.Schedule.preset("joint", 1, 2, 6)
                trainer = lattice.Trainer(model, tiny_data(),
                                          lattice.Optim(model, warmup_steps=0), schedule,
                                          on_step=on_step)
                return trainer, model, schedule

            seen = []
            def on_step(m):
                # calls back into the objects the run uses: the locks are re-entrant
                seen.append((m.step, trainer.model.active_layers, trainer.schedule.position))
                other = lattice.Backend("ref")
                other.close()                      # not used by this call: closes
                if m.step == 2:
                    trainer.close()                # was: a segfault
            trainer, model, schedule = build(on_step)
            try:
                trainer.run()
                print("run returned")
            except LatticeError as e:
                print("run raised", e.code.name, e)
            print("closed", trainer.closed, "steps", schedule.counters.steps, len(seen))
            trainer.step()                         # still usable
            trainer.close()
            print("closed after the call", trainer.closed)

            def close_model(m):
                model.close()                      # the trainer's model: in use too
            trainer, model, schedule = build(close_model)
            try:
                trainer.run()
            except LatticeError as e:
                print("model close raised", e.code.name)
            print("model closed", model.closed)
        """)
        self.assertIn("run raised STATE invalid state: Trainer.close() inside a call that uses "
                      "it", out)
        self.assertIn("closed False steps 2 2", out)
        self.assertIn("closed after the call True", out)
        self.assertIn("model close raised STATE", out)
        self.assertIn("model closed False", out)

    def test_close_from_another_thread_waits(self):
        out = run_isolated(self, """
            steps = []
            started, closing = threading.Event(), threading.Event()
            def on_step(m):
                steps.append(m.step)
                if m.step == 1:
                    started.set()
                    closing.wait(10)
                    time.sleep(0.05)               # close() is under way meanwhile
            model = tiny_model()
            trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 20),
                                      on_step=on_step)
            del model
            when = {}
            def closer():
                started.wait(10)
                closing.set()
                trainer.close()                    # was: the trainer freed mid-run
                when["closed"] = len(steps)
            thread = threading.Thread(target=closer)
            thread.start()
            trainer.run()
            thread.join(30)
            print("steps", len(steps), "when closed", when.get("closed"), trainer.closed)
            try:
                trainer.step()
            except lattice.ClosedError as e:
                print("then:", e)
        """)
        self.assertIn("steps 20 when closed 20 True", out)
        self.assertIn("then: Trainer is closed", out)


class ThreadsTest(unittest.TestCase):
    """Calls on one object, or on objects bound together, from several threads."""

    def test_threads_sharing_a_model_are_serialised(self):
        # A backend whose GEMMs count the calls inside the model at once: the
        # C API allows one; four threads on one model had many (and crashed).
        out = run_isolated(self, """
            import json
            guard = threading.Lock()
            state = {"inside": 0, "overlaps": 0, "gemms": 0}
            ref = lattice.Backend("ref")

            def sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
                with guard:
                    state["inside"] += 1
                    state["gemms"] += 1
                    state["overlaps"] += state["inside"] > 1
                time.sleep(0.0001)                 # another thread may enter meanwhile
                ref.sgemm(a, b, c, m, n, k, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta,
                          lda=lda, ldb=ldb, ldc=ldc)
                with guard:
                    state["inside"] -= 1

            model = tiny_model(backend=lattice.Backend.custom("probe", sgemm))
            ids = counting_corpus(4, SEQ)
            tokens = ids[:2 * SEQ]
            targets = ids[1:2 * SEQ + 1]
            model.forward(tokens, 2, SEQ)
            want, _ = model.cross_entropy(targets)
            losses, errors = [], []

            def steps():
                try:
                    for _ in range(3):
                        model.forward(tokens, 2, SEQ)
                        losses.append(model.cross_entropy(targets)[0])
                        model.backward()
                except Exception as e:
                    errors.append(repr(e))

            threads = [threading.Thread(target=steps) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            alone = dict(state, losses=len(losses), wrong=sum(l != want for l in losses),
                         errors=errors)

            # a trainer and the threads that use its model
            trainer = lattice.Trainer(model, tiny_data(batch_size=2),
                                      lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 4))
            def infer():
                try:
                    for _ in range(3):
                        model.forward_inference(tokens, 2, SEQ)
                        model.logits()
                except Exception as e:
                    errors.append(repr(e))
            threads = [threading.Thread(target=trainer.run)] + [
                threading.Thread(target=infer) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            print(json.dumps({"alone": alone, "with_trainer": dict(state, errors=errors),
                              "steps": trainer.schedule.counters.steps}))
        """)
        result = json.loads(out)
        alone, trained = result["alone"], result["with_trainer"]
        self.assertEqual(alone["errors"], [])
        self.assertEqual(alone["overlaps"], 0, f"{alone['overlaps']} of {alone['gemms']} GEMMs "
                         "ran while another call was inside the model")
        self.assertEqual((alone["losses"], alone["wrong"]), (12, 0))
        self.assertEqual(trained["errors"], [])
        self.assertEqual(trained["overlaps"], 0)
        self.assertEqual(result["steps"], 4)


class SilentSettingsTest(unittest.TestCase):
    """Settings that used to do nothing without a word (issue 29 part 2)."""

    def trainer(self, steps=4, **kwargs):
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, steps)
        return lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                               schedule, **kwargs)

    def test_callbacks_set_after_construction(self):
        trainer = self.trainer(steps=4, eval_every=2)
        self.assertIsNone(trainer.on_step)
        steps, evals, later = [], [], []
        trainer.on_step = lambda m: steps.append(m.step)
        trainer.on_eval = evals.append
        trainer.step()
        trainer.step()
        self.assertEqual(steps, [1, 2])
        self.assertEqual([m.step for m in evals], [2])

        def switch(m):                   # replaced from inside a callback: the next step sees it
            trainer.on_step = later.append

        trainer.on_step = switch
        trainer.step()
        trainer.on_eval = None
        trainer.run()
        self.assertEqual([m.step for m in later], [4])
        self.assertEqual(len(evals), 1)
        self.assertEqual(trainer.on_step, later.append)
        with self.assertRaisesRegex(TypeError, "on_step must be callable or None, got int"):
            trainer.on_step = 3
        # a callback given at construction is the attribute's value, and can be removed
        seen = []
        trainer = self.trainer(steps=3, on_step=seen.append)
        self.assertEqual(trainer.on_step, seen.append)
        trainer.step()
        trainer.on_step = None
        trainer.run()
        self.assertEqual(len(seen), 1)
        trainer.close()
        with self.assertRaises(lattice.ClosedError):
            trainer.on_step = print

    def test_params_are_read_only_copies(self):
        model = tiny_model()
        with self.assertRaises(AttributeError) as cm:
            model.params.d_model = 99
        self.assertIn("ModelParams.d_model cannot be set: this is a read-only copy",
                      str(cm.exception))
        self.assertIn("lattice.Model(model.params, d_model=64)", str(cm.exception))
        self.assertIn("model.active_layers = n", str(cm.exception))
        self.assertEqual(model.params.d_model, 16)
        with self.assertRaises(AttributeError):
            model.params.update(n_layers=3)
        # the copy is still a ModelParams: equal to one, and the base of another model
        self.assertEqual(model.params, lattice.ModelParams.make(model.params))
        wider = lattice.Model(model.params, d_model=32, backend="ref")
        self.assertEqual(wider.params.d_model, 32)
        changed = lattice.ModelParams.make(model.params, d_model=24)
        changed.d_ff = 48                                   # a made copy is the caller's
        self.assertEqual((changed.d_model, changed.d_ff), (24, 48))
        optim, data, loss = lattice.Optim(model), tiny_data(), lattice.Distill()
        schedule = lattice.Schedule.preset("grow", 2, 1, 3)
        for settings, field, how in ((optim.params, "lr", "optim.set_params(lr=...)"),
                                     (data.params, "batch_size", "lattice.Data.from_memory"),
                                     (loss.params, "tau", "lattice.Distill(loss.params"),
                                     (schedule.phase(0), "steps", "lattice.Schedule(")):
            with self.subTest(type(settings).__name__):
                with self.assertRaises(AttributeError) as cm:
                    setattr(settings, field, 2)
                self.assertIn("read-only copy", str(cm.exception))
                self.assertIn(how, str(cm.exception))
        optim.set_params(lr=2e-3)
        self.assertEqual(optim.params.lr, 2e-3)
        self.assertEqual(lattice.Schedule([schedule.phase(0)]).phase(0).steps, 3)

    def test_mask_values_other_than_0_and_1(self):
        model = tiny_model()
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        _, counted = model.cross_entropy(targets, mask=bytes([1, 0, 1, 1, 1, 1, 1, 1]))
        self.assertEqual(counted, 7)
        for call in (model.cross_entropy, model.loss):
            with self.assertRaisesRegex(ValueError, r"^mask: value 2 at position 5; a mask "
                                        r"holds 0 \(the position does not count\) or 1"):
                call(targets, mask=bytes([1, 1, 1, 1, 1, 2, 1, 1]))
        with self.assertRaisesRegex(ValueError, r"mask: value 255 at position 0"):
            model.loss(targets, mask=[255, 1, 1, 1, 1, 1, 1, 1])
        with self.assertRaisesRegex(ValueError, r"mask: value -1 at position 7"):
            model.loss(targets, mask=array.array("b", [1] * 7 + [-1]))
        loss = lattice.Distill()
        s = array.array("f", [0.5] * (2 * VOCAB))
        with self.assertRaisesRegex(ValueError, r"mask: value 3 at position 1"):
            loss.dense(s, s, array.array("i", [1, 2]), mask=bytes([1, 3]), vocab=VOCAB)
        diag = lattice.Diag(model)
        with self.assertRaisesRegex(ValueError, r"mask: value 2 at position 0"):
            diag.block_removal([[1, 2, 3, 4], [5, 6, 7, 8]], targets, 0, 1,
                               mask=bytes([2, 1, 1, 1, 1, 1, 1, 1]))
        if numpy is not None:
            mask = numpy.ones((2, 4), dtype=numpy.uint8)
            mask[1, 2] = 2
            with self.assertRaisesRegex(ValueError, r"value 2 at position 6 \(index \(1, 2\)\)"):
                model.loss(targets, mask=mask)
            self.assertEqual(model.loss(targets, mask=mask == 1)[1], 7)   # bool masks

    def test_strided_inputs_are_copied(self):
        model = tiny_model()
        rows = [[1, 2, 3, 4], [5, 6, 7, 8]]
        model.forward(rows)
        expected = model.logits().tolist()
        interleaved = array.array("i", [t for row in rows for x in row for t in (x, 0)])
        model.forward(memoryview(interleaved)[::2], batch=2, seq=4)   # a strided 1-D view
        self.assertEqual(model.logits().tolist(), expected)
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        ce = model.loss(targets)
        spread = array.array("i", [t for x in targets for t in (x, -1)])
        self.assertEqual(model.loss(memoryview(spread)[::2]), ce)
        mask = bytes([1, 0] * 8)
        self.assertEqual(model.loss(targets, mask=memoryview(mask)[::2]), ce)
        # outputs: a copy would take what the library writes, so they are refused, saying why
        loss = lattice.Distill()
        grad = array.array("f", [0.0] * (2 * 8 * VOCAB))
        with self.assertRaisesRegex(ValueError, r"dlogits: the buffer must be C-contiguous, "
                                    r"as the library writes into it and what it wrote into "
                                    r"a copy would be lost"):
            loss.dense(model.logits(), model.logits(), targets,
                       dlogits=memoryview(grad)[::2])
        if numpy is None:
            return
        tok = (numpy.arange(4 * 24, dtype=numpy.int32) % (VOCAB - 1) + 1).reshape(4, 24)
        model.forward(numpy.ascontiguousarray(tok[:2, :10]))
        expected = model.logits().tolist()
        model.forward(tok[:2, :10])                              # the issue's slice
        self.assertEqual(model.logits().tolist(), expected)
        model.forward(tok.astype(numpy.int64)[:2, :10])          # strided and converted
        self.assertEqual(model.logits().tolist(), expected)
        model.forward(numpy.asfortranarray(tok[:2, :10]))
        self.assertEqual(model.logits().tolist(), expected)
        wide = numpy.zeros((8, 2 * VOCAB), dtype=numpy.float32)
        with self.assertRaisesRegex(ValueError, "what it wrote into a copy would be lost"):
            loss.dense(numpy.asarray(model.logits()).reshape(-1, VOCAB)[:8],
                       numpy.asarray(model.logits()).reshape(-1, VOCAB)[:8],
                       numpy.arange(8, dtype=numpy.int32), dlogits=wide[:, :VOCAB])

    def test_backward_overwrites_the_gradients(self):
        doc = lattice.Model.backward.__doc__
        self.assertIn("overwrites the gradients", doc)
        self.assertIn("a second ``backward()``", doc)
        model = tiny_model()
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])
        model.cross_entropy(array.array("i", [2, 3, 4, 5, 6, 7, 8, 9]))
        model.backward()
        tensor = model.tensor(0)
        once = tensor.grad.tolist()
        self.assertTrue(any(any(row) for row in once))
        model.backward()                                 # the same gradient again, not twice it
        self.assertEqual(tensor.grad.tolist(), once)

    def test_preset_budgets_are_named(self):
        totals = {name: lattice.Schedule.preset(name, 3, 2, 30).total_steps
                  for name in ("joint", "grow", "joint_matched_active", "joint_matched_total")}
        self.assertEqual(totals, {"joint": 30, "grow": 90, "joint_matched_active": 60,
                                  "joint_matched_total": 90})
        doc = lattice.Schedule.preset.__doc__
        for text in ('``preset("joint", 3, 2, 30)`` is one phase of', "(90 steps",
                     '"joint_matched_active"', '"joint_matched_total"', "active-layer tokens",
                     "total tokens"):
            self.assertIn(text, doc)
        self.assertIn("budget-matched", lattice.Schedule.__doc__)


if __name__ == "__main__":
    unittest.main(verbosity=2)
