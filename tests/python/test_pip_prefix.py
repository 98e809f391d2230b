"""pip's package finds a library that `meson install` put under a prefix of its own.

Run by meson as: test_pip_prefix.py MESON BUILD_DIR SOURCE_DIR PREFIX. The
build is installed with --no-rebuild into a temporary DESTDIR; the tree under
DESTDIR/PREFIX is the prefix P. Its lattice.pc gets `prefix=P`, as
`meson setup --prefix P` writes it (the rest of the install is the same
bytes). The package is pip-installed (offline: the index out of reach)
into a fresh venv made from /usr/bin/python3 by doc/python.md's command
(nothing installed before it: the build needs no setuptools and no wheel),
without the _config.py that only `meson install` writes,
and imported in a clean environment: PKG_CONFIG_PATH and nothing else.
"""

import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

MESON, BUILD, SOURCE, PREFIX = sys.argv[1:5]
del sys.argv[1:5]
SYSTEM_PYTHON = "/usr/bin/python3"
# pip offline: an index that no connection reaches, and no other
OFFLINE = {"PIP_INDEX_URL": "http://127.0.0.1:9/simple", "PIP_EXTRA_INDEX_URL": "",
           "PIP_FIND_LINKS": ""}
PAGE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "doc", "python.md")
SONAME = "liblattice.so.1"
PROBE = """
import lattice
m = lattice.Model(vocab_size=11, d_model=16, n_layers=1, n_active_layers=1, n_heads=2,
                  n_kv_heads=1, head_dim=8, d_ff=32, max_batch=1, max_seq=4)
m.close()
print(lattice.library_path)
"""


def run(cmd, **kw):
    return subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          universal_newlines=True, **kw)


class PipFromPrefix(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        if not os.path.exists(SYSTEM_PYTHON):
            raise unittest.SkipTest(f"no {SYSTEM_PYTHON}")
        cls.tmp = tempfile.mkdtemp(prefix="lattice-prefix.")
        destdir = os.path.join(cls.tmp, "dest")
        r = run([MESON, "install", "-C", BUILD, "--no-rebuild", "--quiet", "--destdir", destdir])
        if r.returncode != 0:
            raise AssertionError("meson install failed:\n" + r.stdout)
        cls.prefix = destdir + os.path.abspath(PREFIX)
        pcs = [os.path.join(root, "lattice.pc") for root, _, files in os.walk(cls.prefix)
               if "lattice.pc" in files]
        if len(pcs) != 1:
            raise AssertionError(f"expected one lattice.pc under {cls.prefix}, found {pcs}")
        cls.pc_dir = os.path.dirname(pcs[0])
        with open(pcs[0]) as f:
            pc = f.read()
        with open(pcs[0], "w") as f:
            f.write(re.sub(r"(?m)^prefix=.*$", lambda _: "prefix=" + cls.prefix, pc, count=1))
        cls.libdir = os.path.dirname(cls.pc_dir)
        cls.library = os.path.join(cls.libdir, SONAME)
        if not os.path.exists(cls.library):
            raise AssertionError(f"{cls.library} not installed beside {pcs[0]}")

        # the package, laid out as in the source tree (the build backend reads ../../meson.build)
        tree = os.path.join(cls.tmp, "tree")
        src = os.path.join(tree, "liblattice", "python")
        shutil.copytree(os.path.join(SOURCE, "liblattice", "python"), src,
                        ignore=shutil.ignore_patterns("__pycache__", "*.in", "meson.build"))
        shutil.copy(os.path.join(SOURCE, "meson.build"), tree)
        venv = os.path.join(cls.tmp, "venv")
        r = run([SYSTEM_PYTHON, "-m", "venv", venv])
        if r.returncode != 0:
            shutil.rmtree(cls.tmp, ignore_errors=True)
            raise unittest.SkipTest(f"{SYSTEM_PYTHON} -m venv failed (apt-get install "
                                    f"python3-venv):\n{r.stdout}")
        cls.python = os.path.join(venv, "bin", "python")
        # doc/python.md's command, offline: the package index out of reach, nothing
        # installed into the venv first (the package's build backend requires nothing)
        r = run([cls.python, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                 src], env=dict(os.environ, PIP_NO_CACHE_DIR="1", **OFFLINE))
        if r.returncode != 0:
            raise AssertionError("pip install failed:\n" + r.stdout)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def probe(self, path=None, **env):
        """Import and use the package with env only (and a sanitized build's runtimes)."""
        clean = {"PATH": path or os.environ.get("PATH", "/usr/bin:/bin"),
                 "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
        for key in ("LD_PRELOAD", "ASAN_OPTIONS"):
            if key in os.environ:
                clean[key] = os.environ[key]
        clean.update(env)
        return subprocess.run([self.python, "-c", PROBE], env=clean, cwd=self.tmp,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                              universal_newlines=True)

    def test_the_commands_are_the_docs(self):
        with open(PAGE, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("/usr/bin/python3 -m venv ~/lattice-venv\n", page)
        self.assertIn("~/lattice-venv/bin/python -m pip install liblattice/python\n", page)
        self.assertNotIn("--no-build-isolation", page)  # not needed, so not said

    def test_package_has_no_recorded_prefix(self):
        r = subprocess.run([self.python, "-c", "import importlib.util as u; "
                            "print(u.find_spec('lattice._config'))"],
                           env={"PATH": "/usr/bin:/bin", "LATTICE_LIBRARY": self.library,
                                **{k: v for k, v in os.environ.items() if k == "LD_PRELOAD"}},
                           cwd=self.tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True)
        self.assertEqual(r.stdout.strip(), "None", r.stderr)

    def test_found_through_pkg_config(self):
        r = self.probe(PKG_CONFIG_PATH=self.pc_dir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), self.library)

    def test_found_through_the_libdir_variable(self):
        # lattice.pc away from the library: only its libdir leads there
        elsewhere = os.path.join(self.tmp, "pc-elsewhere")
        os.makedirs(elsewhere, exist_ok=True)
        shutil.copy(os.path.join(self.pc_dir, "lattice.pc"), elsewhere)
        r = self.probe(PKG_CONFIG_PATH=elsewhere)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), self.library)

    def test_found_through_a_staged_pc_file(self):
        # a prefix moved as a whole: lattice.pc names the old prefix, the
        # library sits in the directory above the .pc file's
        moved = os.path.join(self.tmp, "moved")
        shutil.copytree(self.libdir, moved, symlinks=True)
        pc = os.path.join(moved, os.path.basename(self.pc_dir), "lattice.pc")
        with open(pc) as f:
            text = f.read()
        with open(pc, "w") as f:
            f.write(re.sub(r"(?m)^prefix=.*$", "prefix=/nonexistent/prefix", text, count=1))
        r = self.probe(PKG_CONFIG_PATH=os.path.dirname(pc))
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), os.path.join(moved, SONAME))

    def test_found_through_the_loaders_path(self):
        # no pkg-config on PATH at all: LD_LIBRARY_PATH, as the loader reads it
        empty = os.path.join(self.tmp, "empty-bin")
        os.makedirs(empty, exist_ok=True)
        r = self.probe(path=empty, LD_LIBRARY_PATH=self.libdir)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.strip(), SONAME)

    def not_found(self, **kw):
        r = self.probe(**kw)
        if r.returncode == 0:
            self.skipTest(f"this machine has a liblattice of its own: {r.stdout.strip()}")
        self.assertIn("ImportError: liblattice not found", r.stderr)
        return r.stderr

    def test_not_found_says_what_to_set(self):
        empty = os.path.join(self.tmp, "no-pc")
        os.makedirs(empty, exist_ok=True)
        message = self.not_found(PKG_CONFIG_PATH=empty)
        for what in ("LATTICE_LIBRARY=/path/to/" + SONAME,
                     "PKG_CONFIG_PATH=<prefix>/lib",
                     "LD_LIBRARY_PATH=<prefix>/lib",
                     "pkg-config --variable=libdir lattice",
                     f"{SONAME} (the loader's search"):
            self.assertIn(what, message)

    def test_not_found_without_pkg_config(self):
        empty = os.path.join(self.tmp, "empty-bin")
        os.makedirs(empty, exist_ok=True)
        message = self.not_found(path=empty)
        self.assertIn("pkg-config: not found on PATH", message)


if __name__ == "__main__":
    unittest.main(verbosity=2)
