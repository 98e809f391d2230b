"""The reproduction as `meson install` leaves it: lattice-reproduce in bindir,
its presets in datadir/lattice/presets, and `--preset NAME` finding them from
the installed program alone, wherever the install is moved.

usage: test_installed.py BUILD_DIR MESON SOURCE_PRESETS_DIR

Installs BUILD_DIR's install tag `reproduce` (the program and its presets,
nothing else) with `meson install --no-rebuild --destdir` into a temporary
folder (copying built files only: no ninja runs inside the build that
`meson test` runs from), then runs the installed copy from another folder
with the corpus given by LATTICE_REPRODUCE_DATA (a generated stand-in).
"""
import filecmp
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

from tiny_study import stand_in_env, write

BUILD = MESON = SOURCE_PRESETS = None
STAGE = None  # the temporary folder the install went to
BIN = PRESETS = None


def run(binary, *args, cwd, env=None):
    return subprocess.run([binary, *args], capture_output=True, text=True, cwd=cwd, timeout=300,
                          env=env)


def find(root, rel):
    """The one path under root that ends with rel."""
    hits = [os.path.join(r, f) for r, _d, files in os.walk(root) for f in files
            if os.path.join(r, f).endswith(os.sep + rel)]
    if len(hits) != 1:
        raise AssertionError("%d files end with %s under %s: %s" % (len(hits), rel, root, hits))
    return hits[0]


def setUpModule():
    global STAGE, BIN, PRESETS
    STAGE = tempfile.mkdtemp(prefix="lattice-reproduce-install-")
    r = subprocess.run(MESON + ["install", "-C", BUILD, "--no-rebuild", "--quiet", "--tags",
                                "reproduce", "--destdir", os.path.join(STAGE, "dest")],
                       capture_output=True, text=True)
    if r.returncode != 0:
        raise AssertionError("meson install failed:\n" + r.stdout + r.stderr)
    BIN = find(STAGE, os.path.join("bin", "lattice-reproduce"))
    # as the program names it: with symbolic links resolved
    PRESETS = os.path.realpath(os.path.dirname(
        find(STAGE, os.path.join("lattice", "presets", "quick.json"))))
    BIN = os.path.realpath(BIN)


def tearDownModule():
    shutil.rmtree(STAGE, ignore_errors=True)


class Installed(unittest.TestCase):
    def test_installed_files(self):
        """The program, and every shipped preset with its README, nothing of the rest."""
        self.assertTrue(os.access(BIN, os.X_OK), BIN)
        prefix = os.path.dirname(os.path.dirname(BIN))
        self.assertEqual(os.path.dirname(os.path.dirname(PRESETS)), os.path.join(prefix, "share"))
        shipped = sorted(f for f in os.listdir(SOURCE_PRESETS) if not f.startswith("."))
        self.assertEqual(sorted(os.listdir(PRESETS)), shipped)
        self.assertIn("README.md", shipped)
        _same, differ, errors = filecmp.cmpfiles(SOURCE_PRESETS, PRESETS, shipped, shallow=False)
        self.assertEqual(differ + errors, [])
        # the install tag holds the reproduction alone
        self.assertFalse([f for _r, _d, files in os.walk(STAGE) for f in files
                          if f.startswith("liblattice") or f.endswith(".h")])

    def test_preset_by_name(self):
        """--check and --estimate of `--preset quick` from the installed copy,
        run from a folder far from the source tree, with the corpus from
        LATTICE_REPRODUCE_DATA."""
        env = stand_in_env()
        with tempfile.TemporaryDirectory() as cwd:
            r = run(BIN, "--preset", "quick", "--check", cwd=cwd, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("preset quick\n", r.stdout)
            self.assertIn("train %s\n" % os.path.join(env["LATTICE_REPRODUCE_DATA"], "train.txt"),
                          r.stdout)
            self.assertIn("the preset is valid", r.stdout)
            r = run(BIN, "--preset", "quick", "--estimate", cwd=cwd, env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("estimated wall time", r.stderr)
            # a path still names a file
            r = run(BIN, "--preset", os.path.join(PRESETS, "small.json"), "--check", cwd=cwd,
                    env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("preset small\n", r.stdout)

    def test_installed_presets_not_the_sources(self):
        """A preset that only the installed folder holds is found by the
        installed program, and not by the build's own (which reads the
        source tree's)."""
        preset = os.path.join(PRESETS, "only-installed.json")
        write(preset, {"name": "only-installed", "arms": ["pre-joint"]})
        try:
            with tempfile.TemporaryDirectory() as cwd:
                r = run(BIN, "--preset", "only-installed", "--check", cwd=cwd, env=stand_in_env())
                self.assertEqual(r.returncode, 0, r.stderr)
                self.assertIn("preset only-installed\n", r.stdout)
                r = run(os.path.join(BUILD, "examples", "reproduce"), "--preset", "only-installed",
                        "--check", cwd=cwd)
                self.assertEqual(r.returncode, 1)
                self.assertIn("no preset named 'only-installed' in %s" % SOURCE_PRESETS, r.stderr)
                r = run(BIN, "--preset", "nosuch", "--check", cwd=cwd)
                self.assertEqual(r.returncode, 1)
                self.assertIn("no preset named 'nosuch' in %s (there: " % PRESETS, r.stderr)
                self.assertIn("only-installed, paper, ", r.stderr)
        finally:
            os.unlink(preset)

    def test_names_stay_in_the_folder(self):
        """A name with '..' or a leading dot is refused, never looked up: a
        file beside the presets folder is not reachable by a name."""
        outside = os.path.join(os.path.dirname(PRESETS), "outside.json")
        write(outside, {"name": "outside", "arms": ["pre-joint"]})
        try:
            with tempfile.TemporaryDirectory() as cwd:
                for bad in ("..", "..outside", "a..b", ".outside"):
                    r = run(BIN, "--preset", bad, "--check", cwd=cwd)
                    self.assertEqual(r.returncode, 1, (bad, r.stderr))
                    self.assertIn("--preset %s: a preset name is " % bad, r.stderr)
                    self.assertNotIn("preset outside", r.stdout)
                r = run(BIN, "--preset", "outside", "--check", cwd=cwd)
                self.assertEqual(r.returncode, 1)
                self.assertIn("no preset named 'outside'", r.stderr)
        finally:
            os.unlink(outside)

    def test_moved_install(self):
        """The presets are found relative to the program: a copy of the whole
        install moved elsewhere finds its own."""
        prefix = os.path.dirname(os.path.dirname(BIN))
        with tempfile.TemporaryDirectory() as moved:
            copy = os.path.join(moved, "elsewhere")
            shutil.copytree(prefix, copy, symlinks=True)
            mine = os.path.join(copy, os.path.relpath(PRESETS, prefix), "quick.json")
            write(mine, {"name": "moved-quick", "arms": ["pre-joint"]})
            binary = os.path.join(copy, os.path.relpath(BIN, prefix))
            r = run(binary, "--preset", "quick", "--check", cwd=moved, env=stand_in_env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("preset moved-quick\n", r.stdout)


if __name__ == "__main__":
    BUILD, SOURCE_PRESETS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[3])
    MESON = [sys.argv[2]]
    if not os.path.exists(os.path.join(BUILD, "examples", "lattice-reproduce")):
        print("SKIP: the build has no lattice-reproduce (-Dexamples=false)")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
