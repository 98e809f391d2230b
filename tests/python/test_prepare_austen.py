"""examples/data/prepare_austen.py gives the corpus the study was measured on.

The hashes are those of train.txt and val.txt as written by the script's first
version (its own reader of R's lazy-load format) from Debian 12's
r-cran-janeaustenr 1.0.0-1; the Rscript version must give the same bytes.
Skipped (exit 77 under meson) when Rscript or janeaustenr is missing.
"""

import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
import unittest

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "..", "..", "examples", "data", "prepare_austen.py")

EXPECTED = {
    "train.txt": (3555873, "718df6a0ae8d3649d20f5eba66e26e402ac3d9bd200bf9541798c3d79d351346"),
    "val.txt": (466734, "6f07b75d90bb3c18bfe45c185335d66a470107e3e2dc89cec5a1810524ddd544"),
}
CHAPTERS = {"sensesensibility": 50, "prideprejudice": 61, "mansfieldpark": 48, "emma": 55,
            "northangerabbey": 31, "persuasion": 24}


def missing_requirement():
    """Why the script cannot run here, or None."""
    rscript = shutil.which("Rscript")
    if rscript is None:
        return "Rscript not found (apt-get install r-base-core r-cran-janeaustenr)"
    r = subprocess.run([rscript, "--vanilla", "-e",
                        'quit(status = !requireNamespace("janeaustenr", quietly = TRUE))'],
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    if r.returncode != 0:
        return "R package janeaustenr not installed (apt-get install r-cran-janeaustenr)"
    return None


def sha256(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


class PrepareAusten(unittest.TestCase):
    def run_script(self, *args):
        return subprocess.run([sys.executable, SCRIPT] + list(args), stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, universal_newlines=True)

    def test_missing_rscript_is_one_line(self):
        with tempfile.TemporaryDirectory() as out:
            r = self.run_script("--out", out, "--rscript", os.path.join(out, "no-Rscript"))
            self.assertEqual(r.returncode, 1)
            self.assertRegex(r.stderr, r"^prepare_austen: error: .*not found.*r-cran-janeaustenr.*\n$")
            self.assertEqual(os.listdir(out), [])

    def test_corpus_is_byte_identical(self):
        reason = missing_requirement()
        if reason:
            self.skipTest(reason)
        with tempfile.TemporaryDirectory() as tmp:
            out = os.path.join(tmp, "austen")
            r = self.run_script("--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertRegex(r.stdout, r"^prepare_austen: wrote 6 novels, 245 train / 24 val")
            for name, (size, digest) in EXPECTED.items():
                path = os.path.join(out, name)
                self.assertEqual(os.path.getsize(path), size, name)
                self.assertEqual(sha256(path), digest, name)
            with open(os.path.join(out, "manifest.json"), encoding="utf-8") as f:
                manifest = json.load(f)
            self.assertEqual({k: v["chapters"] for k, v in manifest["novels"].items()}, CHAPTERS)
            self.assertEqual(manifest["files"]["train.txt"]["sha256"], EXPECTED["train.txt"][1])
            # A second run finds the outputs current and leaves them alone.
            before = os.stat(os.path.join(out, "train.txt")).st_mtime_ns
            r = self.run_script("--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("up to date", r.stdout)
            self.assertEqual(os.stat(os.path.join(out, "train.txt")).st_mtime_ns, before)


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--skip-code":
        # meson: a run without the corpus check is reported as skipped (exit 77)
        del sys.argv[1]
        result = unittest.main(verbosity=2, exit=False).result
        sys.exit(1 if not result.wasSuccessful() else 77 if result.skipped else 0)
    unittest.main(verbosity=2)
