"""The reproduction program does not trust what it reads (issue 38 part 4):
--report-only never replaces an output with less and says why it cannot
report, --estimate changes nothing on disk, and the teacher's settings hold
the corpus, the thread count and the backend (a teacher.json written before
them is read as its kept runs say it was made).

usage: test_trust.py REPRODUCE_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tiny_study import results, tiny_arms_study, write

BIN = None
OUTPUTS = ("report.md", "results.json", "curves.csv")


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600, env=env)


def snapshot(top, lock=False):
    """Every file under top with its bytes and modification time (the lock,
    which a study that ran takes, only with lock)."""
    out = {}
    for r, _, fs in os.walk(top):
        for f in fs:
            p = os.path.join(r, f)
            if f == ".lock" and not lock:
                continue
            with open(p, "rb") as fh:
                out[os.path.relpath(p, top)] = (fh.read(), os.stat(p).st_mtime_ns)
    return out


class Study(unittest.TestCase):
    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.preset = tiny_arms_study(d, ["pre-joint", "post-joint"])
        self.out = os.path.join(d, "out")
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(self.preset) as f:
            self.p = json.load(f)

    def tearDown(self):
        self.tmp.cleanup()

    def change(self, fn):
        fn(self.p)
        write(self.preset, self.p)

    def teacher_settings(self):
        with open(os.path.join(self.out, "teacher.json")) as f:
            return json.load(f)["settings"]


class ReportOnly(Study):
    def test_never_replaces_an_output_with_less(self):
        before = snapshot(self.out)
        self.change(lambda p: p["train"].update({"tau": 3.0}))
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("--report-only: the report would hold less than", r.stderr)
        self.assertIn("pre-joint (2 seeds reported; 0 of 2 kept with these settings)", r.stderr)
        self.assertIn("post-joint (2 seeds reported; 0 of 2 kept with these settings)", r.stderr)
        self.assertIn("runs/pre-joint.seed1.run: made with other settings: preset.train.tau",
                      r.stderr)
        self.assertIn("left as they were", r.stderr)
        self.assertNotIn("running it again", r.stderr)
        self.assertEqual(snapshot(self.out), before)
        # fewer seeds than the report holds is less too
        self.change(lambda p: p["train"].pop("tau"))
        r = run("--preset", self.preset, "--out", self.out, "--report-only", "--seeds", "1")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("pre-joint (2 seeds reported, 1 now)", r.stderr)
        self.assertEqual(snapshot(self.out), before)
        # the same settings: reported again, whole
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(sorted(results(self.out)["arms"]), ["post-joint", "pre-joint"])

    def test_no_report_at_all_writes_nothing(self):
        for f in OUTPUTS:
            os.unlink(os.path.join(self.out, f))
        self.change(lambda p: p["train"].update({"tau": 3.0}))
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("nothing to report, and nothing was written", r.stderr)
        for f in OUTPUTS:
            self.assertFalse(os.path.exists(os.path.join(self.out, f)), f)

    def test_other_teacher_settings_are_named(self):
        before = snapshot(self.out)
        self.change(lambda p: p["teacher"].update({"steps": 13}))
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("holds no teacher", r.stderr)
        self.assertIn("cannot report with these settings: it was trained with other settings: "
                      "teacher.steps 12 -> 13", r.stderr)
        self.assertEqual(snapshot(self.out), before)
        # a folder without a teacher still says so
        empty = os.path.join(self.tmp.name, "empty")
        os.mkdir(empty)
        r = run("--preset", self.preset, "--out", empty, "--report-only")
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("holds no teacher", r.stderr)


class Estimate(Study):
    def test_changes_nothing(self):
        new = os.path.join(self.tmp.name, "new", "dir")
        r = run("--preset", self.preset, "--out", new, "--estimate")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("estimated wall time", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "new")))
        # nor in a study's folder: no lock taken, nothing written
        os.unlink(os.path.join(self.out, ".lock"))
        before = snapshot(self.out, lock=True)
        r = run("--preset", self.preset, "--out", self.out, "--estimate")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("0 runs", r.stderr)
        self.assertEqual(snapshot(self.out, lock=True), before)


class TeacherSettings(Study):
    def run_settings(self):
        with open(os.path.join(self.out, "runs", "pre-joint.seed1.run"), "rb") as f:
            return json.load(f)["settings"]

    def test_corpus_threads_and_backend_recorded(self):
        t, rs = self.teacher_settings(), self.run_settings()
        self.assertEqual(t["corpus"], rs["corpus"])
        self.assertEqual(t["threads"], 1)
        self.assertRegex(r"\n".join(run("--preset", self.preset, "--out", self.out,
                                         "--estimate").stderr.splitlines()),
                         "backend %s " % t["backend"])

    def test_a_changed_corpus_trains_the_teacher_again(self):
        with open(os.path.join(self.tmp.name, "val.txt"), "a") as f:
            f.write("\fThe lady wrote a letter in the morning.")
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("teacher: reusing", r.stderr)
        self.assertIn("teacher: it was trained with other settings: corpus", r.stderr)
        self.assertEqual(self.teacher_settings()["corpus"], self.run_settings()["corpus"])

    def test_other_threads_train_the_teacher_again(self):
        r = run("--preset", self.preset, "--out", self.out, "--threads", "2")
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("teacher: it was trained with other settings: threads 1 -> 2", r.stderr)
        self.assertEqual(self.teacher_settings()["threads"], 2)

    def test_another_backend_trains_the_teacher_again(self):
        here = self.teacher_settings()["backend"]
        other = "ref" if here != "ref" else "blis"
        env = dict(os.environ, LATTICE_BACKEND=other)
        r = run("--preset", self.preset, "--out", self.out, env=env)
        if r.returncode != 0 and "no backend" in r.stderr:
            self.skipTest("no backend %s here" % other)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn('teacher: it was trained with other settings: backend "%s" -> "%s"'
                      % (here, other), r.stderr)
        self.assertEqual(self.teacher_settings()["backend"], other)

    def old_record(self):
        """teacher.json as written before issue 38: no corpus, threads or backend."""
        path = os.path.join(self.out, "teacher.json")
        with open(path) as f:
            rec = json.load(f)
        for k in ("corpus", "threads", "backend"):
            del rec["settings"][k]
        write(path, rec)

    def test_an_old_record_keeps_its_teacher_and_runs(self):
        self.old_record()
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("teacher: reusing", r.stderr)
        self.assertIn("4 runs kept", r.stderr)
        self.assertIn("0 to run", r.stderr)
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertEqual(r.returncode, 0, r.stderr)

    def test_an_old_record_on_a_changed_corpus_trains_again(self):
        # the kept runs made with the teacher say which corpus it was made on
        self.old_record()
        with open(os.path.join(self.tmp.name, "train.txt"), "a") as f:
            f.write("\fThe lady wrote a letter in the morning.")
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertNotIn("teacher: reusing", r.stderr)
        self.assertIn("teacher: it was trained with other settings: corpus", r.stderr)


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1], verbosity=2)
