"""The ctypes layer: versions, statuses, structs, prototypes, integer ranges.

Version, statuses and errors, the structs and the prototype table against the
public headers, and every integer checked against its C type before a call.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; LATTICE_INCLUDE_DIR names the
public headers for the coverage test. The helpers are lattice_helpers.py.
"""

import ctypes
import os
import re
import subprocess
import sys
import unittest

import lattice
from lattice import LatticeError, Status
from lattice import _lib
from lattice_helpers import C_INTEGERS, c_range, numpy, run_isolated, tiny_data, tiny_model


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
        env = dict(os.environ, LATTICE_LIBRARY="/nonexistent/liblattice.so.1")
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
                    # size: at most the object's own bytes (the library reads or
                    # writes that many from its address)
                    top = ctypes.sizeof(s) if name == "size" else hi
                    setattr(s, name, top)
                    self.assertEqual(getattr(s, name), top)
                    checked += 1
        self.assertGreater(checked, 50)

    def test_every_integer_argument_is_checked(self):
        # Each integer argument of every prototype out of range, with every handle
        # NULL: the call must be refused before it reaches C (in a child process,
        # where a call that did reach C cannot take the test runner with it).
        out = run_isolated(self, """
            import ctypes
            from lattice import _lib
            from lattice_helpers import C_INTEGERS, c_range
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


if __name__ == "__main__":
    unittest.main(verbosity=2)
