"""The reproduction program under hostile or careless use: nothing a preset or
a folder says runs a command or reaches a path outside the output folder, a
damaged or misplaced kept run is never reused, one study holds a folder at a
time, and an output that cannot be written whole is said and never replaces
a good one.

usage: test_hostile.py REPRODUCE_BINARY
"""
import fcntl
import json
import os
import shutil
import resource
import signal
import stat
import subprocess
import sys
import tempfile
import unittest

from tiny_study import results, tiny_arms_study, without_timings, write, xxh64

BIN = None


def run(*args, cwd=None, preexec_fn=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          preexec_fn=preexec_fn)


def all_files(top):
    return {os.path.relpath(os.path.join(r, f), top) for r, _, fs in os.walk(top) for f in fs}


class Injection(unittest.TestCase):
    """Part 1 of issue 25: no command and no path from data."""

    def test_preset_name_runs_nothing(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            with open(preset) as f:
                p = json.load(f)
            p["name"] = "x'; touch PWNED; echo '"
            write(preset, p)
            for extra in ([], ["--estimate"]):
                r = run("--preset", preset, *extra, cwd=d)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("the name 'x'; touch PWNED; echo '' is not allowed: a name is 1 "
                              "to 47 characters", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(d, "PWNED")))

    def test_out_folder_is_a_path_not_a_command(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            out = os.path.join(d, "q'; touch PWN2; echo '")
            r = run("--preset", preset, "--out", out, "--estimate", cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(os.path.exists(out))  # --estimate makes nothing (issue 38)
            r = run("--preset", preset, "--out", out, "--teacher-only", cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertTrue(os.path.isdir(out))
            self.assertFalse(os.path.exists(os.path.join(d, "PWN2")))

    def test_arm_names_follow_the_rule(self):
        with tempfile.TemporaryDirectory() as d:
            for bad in ("x';system 'touch GPWNED';#", "../../TRAVERSED", ".hidden", "a/b", "",
                        "a" * 48):
                preset = tiny_arms_study(d, [{"name": bad, "placement": "pre",
                                              "schedule": "joint"}])
                r = run("--preset", preset, "--out", os.path.join(d, "a", "b", "out"), cwd=d)
                self.assertEqual(r.returncode, 1, (bad, r.stderr))
                self.assertIn("arms[0]", r.stderr)
                self.assertIn("is 48 bytes long, at most 47" if len(bad) == 48 else
                              "letters, digits and - _ . +, not starting with a dot"
                              if bad else "needs a name", r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "GPWNED")))
            self.assertFalse(any("TRAVERSED" in f for f in all_files(d)))
            # the rule's edges are allowed
            preset = tiny_arms_study(d, [{"name": "a" * 47, "placement": "pre",
                                          "schedule": "joint"},
                                         {"name": "x.y+z_1", "placement": "post",
                                          "schedule": "joint"}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_plot_script_quotes_what_it_names(self):
        """gnuplot runs in the output folder from an argument vector; a quote
        in the folder's path reaches no script."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            out = os.path.join(d, "o'; system 'touch GP2'; '")
            r = run("--preset", preset, "--out", out, "--seeds", "1", cwd=d)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "GP2")))
            self.assertFalse(os.path.exists(os.path.join(out, "GP2")))
            with open(os.path.join(out, "curves.gp")) as f:
                script = f.read()
            self.assertNotIn(out, script)  # files are named relative to the folder
            self.assertIn("title 'pre-joint'", script)
            if "gnuplot not found" not in r.stderr:
                self.assertTrue(os.path.getsize(os.path.join(out, "curves_steps.svg")) > 0)
            self.assertFalse([f for f in all_files(out) if f.endswith(".tmp")])
            # the script names the plots themselves, not the temporary files drawn first
            self.assertNotIn(".tmp", script)
            self.assertIn("if (!exists(\"plot_0\")) plot_0 = 'curves_steps.png'", script)
            self.assertIn("set output plot_2", script)
            if shutil.which("gnuplot"):  # run by hand, it draws the plots again
                os.unlink(os.path.join(out, "curves_steps.svg"))
                g = subprocess.run(["gnuplot", "curves.gp"], cwd=out, capture_output=True,
                                   text=True, timeout=120)
                self.assertEqual(g.returncode, 0, g.stderr)
                self.assertTrue(os.path.getsize(os.path.join(out, "curves_steps.svg")) > 0)


class KeptRuns(unittest.TestCase):
    """Part 2: a kept run is reused only when it is whole, its own, and made
    with the same settings."""

    def setUp(self):
        self.tmp = tempfile.TemporaryDirectory()
        d = self.tmp.name
        self.preset = tiny_arms_study(d, ["pre-joint", "post-joint"])
        self.out = os.path.join(d, "out")
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.first = results(self.out)
        self.runs = os.path.join(self.out, "runs")

    def tearDown(self):
        self.tmp.cleanup()

    def rerun(self, *extra):
        r = run("--preset", self.preset, "--out", self.out, *extra)
        self.assertEqual(r.returncode, 0, r.stderr)
        return r

    def test_a_flipped_byte_is_refused_and_run_again(self):
        path = os.path.join(self.runs, "pre-joint.seed1.run")
        with open(path, "rb") as f:
            data = bytearray(f.read())
        # a digit of its final validation CE
        at = data.index(b'"final_val":') + len(b'"final_val":') + 3
        data[at] = ord("1") if data[at] != ord("1") else ord("2")
        with open(path, "wb") as f:
            f.write(data)
        r = self.rerun()
        self.assertIn("runs/pre-joint.seed1.run: damaged: its contents do not match their "
                      "checksum: running it again", r.stderr)
        self.assertIn("3 runs kept", r.stderr)
        self.assertEqual(without_timings(results(self.out)["arms"]),
                         without_timings(self.first["arms"]))

    def test_another_seeds_file_is_not_this_seed(self):
        with open(os.path.join(self.runs, "pre-joint.seed1.run"), "rb") as f:
            seed1 = f.read()
        with open(os.path.join(self.runs, "pre-joint.seed2.run"), "wb") as f:
            f.write(seed1)
        with open(os.path.join(self.runs, "post-joint.seed2.run"), "wb") as f:
            f.write(seed1)
        r = self.rerun()
        self.assertIn("runs/pre-joint.seed2.run: it holds arm 'pre-joint' seed 1, not pre-joint "
                      "seed 2", r.stderr)
        self.assertIn("runs/post-joint.seed2.run: it holds arm 'pre-joint' seed 1, not "
                      "post-joint seed 2", r.stderr)

    def test_settings_are_values_not_text(self):
        with open(self.preset) as f:
            p = json.load(f)
        p["train"].update({"tau": 1.0, "alpha": 0.7, "gamma": 0.3})
        with open(self.preset, "w") as f:
            json.dump(p, f)
        self.rerun()
        # the same values written otherwise: keys reordered (alpha and gamma swapped),
        # 1 for 1.0, 3e-3 for 0.003, another layout
        p = {k: p[k] for k in reversed(list(p))}
        p["train"] = {k: p["train"][k] for k in reversed(list(p["train"]))}
        p["train"]["tau"] = 1
        text = json.dumps(p, indent=4).replace('"lr": 0.003', '"lr": 3e-3')
        self.assertIn('"lr": 3e-3', text)
        with open(self.preset, "w") as f:
            f.write(text)
        r = self.rerun()
        self.assertIn("4 runs kept", r.stderr)
        self.assertIn("teacher: reusing", r.stderr)
        # a value changed: the keys are named
        p["train"]["tau"] = 2
        write(self.preset, p)
        r = self.rerun("--arms", "pre-joint")
        self.assertIn("runs/pre-joint.seed1.run: made with other settings: preset.train.tau 1 -> "
                      "2: running it again", r.stderr)
        self.assertIn("runs/post-joint.seed1.run: made with other settings: preset.train.tau 1 "
                      "-> 2: not used", r.stderr)

    def reseal(self, name, edit):
        """Edit a kept run's record (format 3) and give it a checksum that
        matches, as anyone can: what the report does with a run that is whole
        but not shaped as the others."""
        path = os.path.join(self.runs, name)
        with open(path) as f:
            text = f.read()
        at = text.rindex(',"xxh64":')
        obj = json.loads(text[:at] + "}")
        edit(obj["record"])
        body = json.dumps(obj, separators=(",", ":"))[:-1].encode()
        with open(path, "wb") as f:
            f.write(body + b',"xxh64":"%016x"}\n' % xxh64(body))

    def bands(self, arm_index):
        with open(os.path.join(self.out, "bands.csv")) as f:
            return [line.strip().split(",") for line in f
                    if line.startswith("%d," % arm_index)]

    def test_a_run_without_evaluations_is_left_out_of_the_means(self):
        first, other = self.bands(0), self.bands(1)
        with open(os.path.join(self.runs, "pre-joint.seed1.run")) as f:
            text = f.read()
        seed1 = json.loads(text[:text.rindex(',"xxh64":')] + "}")["record"]["points"]["val_ce"]
        self.reseal("pre-joint.seed2.run",
                    lambda r: r["points"].update({k: [] for k in r["points"]}))
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertEqual(r.returncode, 0, r.stderr)
        got = self.bands(0)
        self.assertEqual(len(got), len(first))
        for row, ce in zip(got, seed1):  # mean, min and max are seed 1's alone
            self.assertEqual(row[3:], ["%.6f" % ce] * 3)
        self.assertEqual(self.bands(1), other)  # the other arm as it was

    def test_a_run_shaped_otherwise_is_not_averaged(self):
        self.reseal("pre-joint.seed2.run",
                    lambda r: r["blocks"].update({k: v[:-1] for k, v in r["blocks"].items()}))
        why = ("pre-joint (seed 2's kept run has other phase changes, measured blocks or "
               "boundaries than seed 1's)")
        r = run("--preset", self.preset, "--out", self.out, "--report-only")
        self.assertEqual(r.returncode, 1, r.stderr)  # it would report less: refused, named
        self.assertIn("Left out: " + why + ".", r.stderr)
        r = self.rerun()  # every run is whole and kept: nothing runs, the arm is left out
        self.assertIn("4 runs kept", r.stderr)
        with open(os.path.join(self.out, "report.md")) as f:
            self.assertIn("Not reported: " + why + ".", f.read())
        self.assertEqual({row[0] for row in (line.split(",") for line in
                          open(os.path.join(self.out, "bands.csv")) if line[:1].isdigit())},
                         {"0"})  # one arm left: post-joint, now the first

    def test_a_changed_teacher_is_not_reused(self):
        path = os.path.join(self.out, "teacher.safetensors")
        with open(path, "r+b") as f:
            f.seek(-4, os.SEEK_END)
            b = f.read(1)
            f.seek(-4, os.SEEK_END)
            f.write(bytes([b[0] ^ 1]))
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("teacher.safetensors does not match the checksum", r.stderr)
        self.assertIn("--retrain-teacher", r.stderr)

    def test_fresh_reruns_only_what_it_runs(self):
        r = self.rerun("--fresh", "--estimate")
        self.assertEqual(len(os.listdir(self.runs)), 4)
        r = self.rerun("--fresh", "--arms", "pre-joint")
        self.assertIn("2 runs kept", r.stderr)
        self.assertIn("2 to run", r.stderr)
        self.assertEqual(sorted(os.listdir(self.runs)),
                         ["post-joint.seed1.run", "post-joint.seed2.run", "pre-joint.seed1.run",
                          "pre-joint.seed2.run"])

    def test_what_cannot_be_a_run_file(self):
        # a FIFO at a run path is not opened (it would hang), a folder is found before training
        os.unlink(os.path.join(self.runs, "pre-joint.seed1.run"))
        os.mkfifo(os.path.join(self.runs, "pre-joint.seed1.run"))
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("runs/pre-joint.seed1.run: it is not a regular file (nothing was run)",
                      r.stderr)
        os.unlink(os.path.join(self.runs, "pre-joint.seed1.run"))
        os.mkdir(os.path.join(self.runs, "pre-joint.seed1.run"))
        r = run("--preset", self.preset, "--out", self.out)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("(nothing was run)", r.stderr)
        self.assertNotIn("val CE", r.stderr)
        os.rmdir(os.path.join(self.runs, "pre-joint.seed1.run"))
        # a sparse file of a size no record has is not read
        with open(os.path.join(self.runs, "pre-joint.seed1.run"), "wb") as f:
            f.truncate(3 << 30)
        r = self.rerun()
        self.assertIn("runs/pre-joint.seed1.run: cannot be read: larger than any run record: "
                      "running it again", r.stderr)
        self.assertLess(os.path.getsize(os.path.join(self.runs, "pre-joint.seed1.run")), 1 << 24)

    def test_a_worker_that_fails_stops_the_others(self):
        for arm in ("pre-joint", "post-joint"):
            for seed in (1, 2):
                os.unlink(os.path.join(self.runs, "%s.seed%d.run" % (arm, seed)))
        env = dict(os.environ, LATTICE_REPRODUCE_FAIL_JOB="2")
        r = subprocess.run([BIN, "--preset", self.preset, "--out", self.out, "--jobs", "2"],
                           capture_output=True, text=True, env=env, timeout=600)
        self.assertEqual(r.returncode, 1, r.stderr)
        self.assertIn("failing on purpose", r.stderr)
        self.assertIn("stopped: a run failed (above); the runs that ended before are kept",
                      r.stderr)


class Interrupted(unittest.TestCase):
    def test_sigint_says_what_was_kept(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint", "post-joint"])
            with open(preset) as f:
                p = json.load(f)
            p["train"]["steps_per_phase"] = 20000  # long enough to be interrupted
            write(preset, p)
            out = os.path.join(d, "out")
            proc = subprocess.Popen([BIN, "--preset", preset, "--out", out, "--seeds", "1",
                                     "--progress", "0.05"], stderr=subprocess.PIPE, text=True)
            for line in proc.stderr:  # wait until a student trains
                if "pre-joint seed 1: phase" in line:
                    break
            proc.send_signal(signal.SIGINT)
            rest = proc.stderr.read()
            self.assertEqual(proc.wait(timeout=120), 130, rest)
            self.assertIn("interrupted (SIGINT): what ended is kept in %s" % out, rest)
            self.assertIn("the same command run again resumes the study", rest)
            self.assertTrue(os.path.exists(os.path.join(out, "teacher.safetensors")))


class OneStudyPerFolder(unittest.TestCase):
    """Part 3: a second study in a folder in use refuses, naming the holder."""

    def test_a_held_folder_is_refused(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            out = os.path.join(d, "out")
            os.makedirs(out)
            with open(os.path.join(out, ".lock"), "w") as lock:
                fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
                lock.write("4242\n")
                lock.flush()
                r = run("--preset", preset, "--out", out, "--estimate")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("another study (pid 4242) is using %s" % out, r.stderr)
            r = run("--preset", preset, "--out", out, "--estimate")
            self.assertEqual(r.returncode, 0, r.stderr)


def file_limit(n):
    def limit():
        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails with EFBIG
        resource.setrlimit(resource.RLIMIT_FSIZE, (n, n))
    return limit


class WholeOrNotAtAll(unittest.TestCase):
    """Part 4: an output that cannot be written is said, ends the study with a
    failure, and leaves the good file as it was."""

    def test_a_write_that_fails_leaves_the_old_file(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            before = {}
            for name in ("curves.csv", "report.md", "results.json", "bands.csv"):
                with open(os.path.join(out, name), "rb") as f:
                    before[name] = f.read()
            # every run is kept: the rerun writes only the outputs, the first past 256 bytes fails
            r = run("--preset", preset, "--out", out, "--seeds", "1",
                    preexec_fn=file_limit(256))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("cannot write %s/curves.csv: File too large (the file was left as it "
                          "was)" % out, r.stderr)
            for name, data in before.items():
                with open(os.path.join(out, name), "rb") as f:
                    self.assertEqual(f.read(), data, name)
            self.assertFalse([f for f in all_files(out) if f.endswith(".tmp")])

    @unittest.skipIf(os.geteuid() == 0, "root writes into read-only folders")
    def test_a_read_only_folder_is_found_first(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            out = os.path.join(d, "out")
            os.makedirs(out)
            os.chmod(out, stat.S_IRUSR | stat.S_IXUSR)
            try:
                r = run("--preset", preset, "--out", out, "--seeds", "1")
            finally:
                os.chmod(out, stat.S_IRWXU)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertNotIn("val CE", r.stderr)


class CheckCatchesWhatTheRunRefuses(unittest.TestCase):
    """Part 5: --check builds every object the run builds, and says the
    library's reason with the preset keys it came from."""

    def check(self, edit):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint", "post-grow"])
            with open(preset) as f:
                p = json.load(f)
            edit(p)
            write(preset, p)
            return run("--preset", preset, "--check")

    def refused(self, edit, *words):
        r = self.check(edit)
        self.assertEqual(r.returncode, 1, r.stderr)
        for w in words:
            self.assertIn(w, r.stderr)

    def test_what_the_library_refuses(self):
        def train(key, value):
            return lambda p: p["train"].update({key: value})
        self.refused(train("gamma", 1e300), "the distillation loss (train.alpha, gamma, tau)",
                     "gamma inf")
        # the temperature's range is the preset's own check, by path, before the library's
        self.refused(train("tau", 0), "train.tau must be in 0.01..100")
        self.refused(train("warmup", 1000000), "the optimizer (train.lr",
                     "warmup_steps 1000000 > total_steps 4")
        self.refused(train("warmup", 50), "warmup_steps 50 > total_steps 4")
        self.refused(train("weight_decay", 1e300), "weight_decay must be finite")
        self.refused(train("clip", 1e300), "clip_norm must be finite")
        self.refused(lambda p: p["train"].update({"lr": 0.002, "min_lr": 0.5}),
                     "min_lr 0.5 > lr 0.002")
        self.refused(train("lr", 0), "train.lr must be > 0")
        self.refused(train("eval_batches", 100000), "train.eval_batches",
                     "eval_batches 100000 exceeds the data's")
        self.refused(train("final_eval_batches", 100000), "(train.final_eval_batches)",
                     "eval_batches 100000 exceeds the data's")
        r = self.check(lambda p: None)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertIn("the preset is valid", r.stdout)

    def test_ambiguous_null_and_out_of_range(self):
        self.refused(lambda p: p["train"].update({"lr": None}),
                     "train.lr is null: give it a value, or leave the key out")
        self.refused(lambda p: p.update({"arms": [{"name": "x", "placement": "pre",
                                                   "schedule": "joint",
                                                   "phases": [{"steps": 3}]}]}),
                     "arms[0] has both a schedule and phases")
        self.refused(lambda p: p.update({"arms": [{"name": "x", "placement": "pre",
                                                   "phases": [{"tokens": 1e30}]}]}),
                     "arms[0].phases[0].tokens = 1e+30 must be a whole number")


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1], verbosity=2)
