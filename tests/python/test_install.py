"""`meson install` and `pip install` give a package that imports and finds its library.

Run by meson as: test_install.py MESON BUILD_DIR SOURCE_DIR PREFIX. The build
is installed with --no-rebuild into a temporary DESTDIR (seconds), and each
import runs in a clean environment: no LATTICE_LIBRARY, PYTHONPATH only the
installed site directory, a working directory outside the source tree.
"""

import importlib.util
import os
import re
import shutil
import subprocess
import sys
import tempfile
import unittest

MESON, BUILD, SOURCE, PREFIX = sys.argv[1:5]
del sys.argv[1:5]
PACKAGE_SRC = os.path.join(SOURCE, "liblattice", "python")
PROBE = "import lattice; print(lattice.library_path); print(lattice.version_string)"


def clean_env(pythonpath, **extra):
    env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "PYTHONPATH": pythonpath,
           "PYTHONDONTWRITEBYTECODE": "1", "PYTHONNOUSERSITE": "1"}
    for key in ("LD_PRELOAD", "ASAN_OPTIONS"):   # a sanitized build's runtimes
        if key in os.environ:
            env[key] = os.environ[key]
    env.update(extra)
    return env


def probe(pythonpath, cwd, **extra):
    r = subprocess.run([sys.executable, "-c", PROBE], env=clean_env(pythonpath, **extra),
                       cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True)
    return r


class MesonInstall(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.mkdtemp(prefix="lattice-install.")
        cls.destdir = os.path.join(cls.tmp, "dest")
        r = subprocess.run([MESON, "install", "-C", BUILD, "--no-rebuild", "--quiet",
                            "--destdir", cls.destdir], stdout=subprocess.PIPE,
                           stderr=subprocess.STDOUT, universal_newlines=True)
        if r.returncode != 0:
            raise AssertionError("meson install failed:\n" + r.stdout)
        found = [root for root, dirs, files in os.walk(cls.destdir)
                 if os.path.basename(root) == "lattice" and "_config.py" in files]
        if len(found) != 1:
            raise AssertionError(f"expected one installed package, found {found}")
        cls.package = found[0]
        cls.site = os.path.dirname(cls.package)

    @classmethod
    def tearDownClass(cls):
        shutil.rmtree(cls.tmp, ignore_errors=True)

    def test_every_file_is_installed(self):
        # the modules and py.typed (PEP 561: the package's annotations are its types)
        source = {f for f in os.listdir(os.path.join(PACKAGE_SRC, "lattice"))
                  if not f.endswith(".in") and f != "__pycache__"}
        self.assertIn("py.typed", source)
        installed = {f for f in os.listdir(self.package) if f != "__pycache__"}
        self.assertEqual(installed, source | {"_config.py"})

    def test_site_dir_is_on_the_interpreters_path(self):
        installed = self.site[len(self.destdir):]
        under_prefix = [p for p in sys.path if p.startswith(PREFIX.rstrip("/") + "/")
                        and os.path.basename(p) in ("site-packages", "dist-packages")]
        if not under_prefix:
            self.skipTest(f"{sys.executable} has no site directory under {PREFIX}")
        self.assertIn(installed, sys.path)

    def test_setup_summary_says_the_pythonpath(self):
        # The site directory this build installs to, and whether the
        # interpreter reads it, as `meson setup` printed them (issue 29).
        installed = self.site[len(self.destdir):]
        with open(os.path.join(BUILD, "meson-logs", "meson-log.txt"), encoding="utf-8") as f:
            summary = f.read().rsplit("Python package", 1)
        self.assertEqual(len(summary), 2, "no 'Python package' section in meson's summary")
        summary = summary[1]
        self.assertRegex(summary, r"package\s*: " + re.escape(os.path.join(installed, "lattice")))
        if installed in sys.path:
            self.assertRegex(summary, r"import after meson install\s*: found without PYTHONPATH")
        else:
            self.assertRegex(summary, r"import after meson install\s*: export PYTHONPATH=" + re.escape(installed))

    def test_import_finds_the_installed_library(self):
        r = probe(self.site, self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        path, version = r.stdout.split()
        self.assertTrue(path.startswith(self.destdir + os.sep), path)
        self.assertRegex(os.path.basename(path), r"^liblattice\.so\.1$")
        self.assertRegex(version, r"^\d+\.\d+\.\d+$")

    def test_recorded_absolute_libdir(self):
        # The package moved away from its prefix: only _config.LIBDIR leads to the library.
        with open(os.path.join(self.package, "_config.py")) as f:
            config = f.read()
        libdir = re.search(r"^LIBDIR = (.*)$", config, re.M).group(1)
        self.assertTrue(eval(libdir).startswith(PREFIX))      # noqa: S307 - our own literal
        staged = self.destdir + eval(libdir)                   # noqa: S307
        moved = os.path.join(self.tmp, "moved")
        shutil.copytree(self.package, os.path.join(moved, "lattice"))
        with open(os.path.join(moved, "lattice", "_config.py"), "w") as f:
            f.write(f"LIBDIR = {staged!r}\nLIBDIR_FROM_PACKAGE = None\n")
        r = probe(moved, self.tmp)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(os.path.dirname(r.stdout.split()[0]), staged)

    def test_library_variable_comes_first(self):
        r = probe(self.site, self.tmp, LATTICE_LIBRARY=os.path.join(self.tmp, "nothing.so"))
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("LATTICE_LIBRARY=", r.stderr)


class OwnPrefix(unittest.TestCase):
    """`meson setup --prefix P`: P/lib/python3.X/site-packages, which no Python reads."""

    def paths(self, prefix):
        r = subprocess.run([sys.executable, os.path.join(PACKAGE_SRC, "install_paths.py"),
                            prefix, "lib"], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           universal_newlines=True, check=True)
        return r.stdout.split("\n")

    def test_pythonpath_to_set(self):
        with tempfile.TemporaryDirectory(prefix="lattice-prefix.") as prefix:
            site, _, _, pythonpath = self.paths(prefix)[:4]
            version = "%d.%d" % sys.version_info[:2]
            self.assertEqual(site, os.path.join("lib", "python" + version, "site-packages"))
            self.assertEqual(pythonpath, os.path.join(prefix, site))
            # that line is what the import needs: without it, no module named 'lattice'
            package = os.path.join(pythonpath, "lattice")
            shutil.copytree(os.path.join(PACKAGE_SRC, "lattice"), package,
                            ignore=shutil.ignore_patterns("__pycache__", "*.in"))
            code = "import lattice; print(lattice.__file__)"
            env = clean_env("", LATTICE_LIBRARY=os.environ["LATTICE_LIBRARY"])
            del env["PYTHONPATH"]
            r = subprocess.run([sys.executable, "-c", code], env=env, cwd=prefix,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            self.assertIn("No module named 'lattice'", r.stderr)
            env["PYTHONPATH"] = pythonpath
            r = subprocess.run([sys.executable, "-c", code], env=env, cwd=prefix,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(r.stdout.startswith(package + os.sep), r.stdout)

    def test_no_pythonpath_for_a_site_on_the_path(self):
        for prefix in ("/usr/local", "/usr"):
            site, _, _, pythonpath = self.paths(prefix)[:4]
            if os.path.join(prefix, site) in sys.path:
                self.assertEqual(pythonpath, "")


class PipInstall(unittest.TestCase):
    def test_pip_install_offline(self):
        # doc/python.md's `python3 -m pip install --target DIR liblattice/python`, with the
        # package index out of reach: the build backend requires nothing (no setuptools)
        if importlib.util.find_spec("pip") is None:
            self.skipTest(f"{sys.executable} lacks pip (apt-get install python3-pip)")
        with tempfile.TemporaryDirectory(prefix="lattice-pip.") as tmp:
            # a copy (the build leaves files in the tree) laid out as the source
            # tree: the package two levels below the meson.build it reads its version from
            tree = os.path.join(tmp, "tree")
            src = os.path.join(tree, "liblattice", "python")
            shutil.copytree(PACKAGE_SRC, src, ignore=shutil.ignore_patterns(
                "__pycache__", "*.in", "meson.build"))
            shutil.copy(os.path.join(SOURCE, "meson.build"), tree)
            target = os.path.join(tmp, "site")
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet",
                                "--disable-pip-version-check", "--target", target, src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True,
                               env=dict(os.environ, PIP_NO_CACHE_DIR="1",
                                        PIP_INDEX_URL="http://127.0.0.1:9/simple"))
            self.assertEqual(r.returncode, 0, r.stdout)
            library = os.environ["LATTICE_LIBRARY"]
            r = probe(target, tmp, LATTICE_LIBRARY=library)
            self.assertEqual(r.returncode, 0, r.stderr)
            path, version = r.stdout.split()
            self.assertEqual(path, library)
            # the installed metadata carries meson's project version, typed nowhere else
            with open(os.path.join(SOURCE, "meson.build")) as f:
                meson_version = re.search(r"version: '([^']+)'", f.read()).group(1)
            self.assertEqual(version, meson_version)   # the library's, for reference
            r = subprocess.run([sys.executable, "-c",
                                "import importlib.metadata as m; print(m.version('lattice'))"],
                               env=clean_env(target), cwd=tmp, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, universal_newlines=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(r.stdout.strip(), meson_version)
            with open(os.path.join(PACKAGE_SRC, "pyproject.toml")) as f:
                self.assertNotRegex(f.read(), r'(?m)^version\s*=')
            self.assertTrue(os.path.isfile(os.path.join(target, "lattice", "model.py")))
            self.assertTrue(os.path.isfile(os.path.join(target, "lattice", "py.typed")),
                            "pip installs no py.typed: type checkers would ignore the hints")
        # out of a source tree, the build says where the version should have come from
        with tempfile.TemporaryDirectory(prefix="lattice-pip.") as tmp:
            src = os.path.join(tmp, "python")
            shutil.copytree(PACKAGE_SRC, src, ignore=shutil.ignore_patterns(
                "__pycache__", "*.in", "meson.build"))
            r = subprocess.run([sys.executable, "-m", "pip", "install", "--no-build-isolation",
                                "--no-index", "--no-deps", "--quiet", "--target",
                                os.path.join(tmp, "site"), src],
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, env=dict(os.environ, PIP_NO_CACHE_DIR="1"))
            self.assertNotEqual(r.returncode, 0)
            self.assertIn("cannot read the version from", r.stdout)


if __name__ == "__main__":
    unittest.main(verbosity=2)
