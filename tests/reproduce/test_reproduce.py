"""The reproduction program as a user drives it: a typo in a preset is an
error naming its key path, paths resolve relative to the preset, and a tiny
study on a generated corpus runs end to end and writes the verdict table, the
trajectories and the per-step losses. (Every shipped preset's --check is
test_presets_check.py, in the long suite.)

usage: test_reproduce.py REPRODUCE_BINARY PRESETS_DIR
"""
import csv
import json
import math
import os
import re
import subprocess
import sys
import tempfile
import unittest

from tiny_study import (kept_file, kept_parts, kept_raw, results, stand_in_env, tiny_arms_study,
                        tiny_study, without_timings, write)

BIN = PRESETS = None


def run(*args, cwd=None, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env=env)


class Presets(unittest.TestCase):
    def test_unknown_keys_name_their_path(self):
        cases = [({"studnet": {}}, "'studnet'"),
                 ({"train": {"block_init": "copy"}}, "'train.block_init'"),
                 ({"arms": [{"name": "a", "placement": "post",
                             "phases": [{"steps": 5, "activ_layers": 3}]}]},
                  "'arms[0].phases[0].activ_layers'"),
                 ({"arms": [{"name": "a", "placment": "post", "schedule": "grow"}]},
                  "'arms[0].placment'")]
        with tempfile.TemporaryDirectory() as d:
            for extra, key in cases:
                p = {"name": "bad", "arms": ["pre-joint"]}
                p.update(extra)
                write(os.path.join(d, "p.json"), p)
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertNotEqual(r.returncode, 0)
                self.assertIn("unknown key " + key, r.stderr)

    def test_long_strings_refused(self):
        """A string longer than its field is refused with its length, never
        cut short (a shortened name or path names something else)."""
        cases = [({"name": "n" * 64}, "preset: name is 64 bytes long, at most 63"),
                 ({"data": {"train": "d/" * 600}}, "preset: data.train is 1200 bytes long"),
                 ({"arms": ["x" * 48]}, "preset: arms[0]: the arm name is 48 bytes long, at most 47"),
                 ({"arms": [{"name": "y" * 50, "schedule": "joint"}]},
                  "preset: arms[0].name is 50 bytes long, at most 47")]
        with tempfile.TemporaryDirectory() as d:
            for extra, why in cases:
                p = {"name": "long", "arms": ["pre-joint"]}
                p.update(extra)
                write(os.path.join(d, "p.json"), p)
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(why, r.stderr)
            write(os.path.join(d, "p.json"), {"name": "n" * 63, "arms": ["pre-joint"]})
            r = run("--preset", os.path.join(d, "p.json"), "--check", env=stand_in_env())
            self.assertNotIn("bytes long", r.stderr)

    def test_too_big_fails(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--preset", os.path.join(PRESETS, "paper.json"), "--out", d,
                    env=stand_in_env())
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("does not fit on this machine; nothing was run", r.stderr)

    def test_arms_subset(self):
        preset = os.path.join(PRESETS, "regime.json")
        r = run("--preset", preset, "--arms", "post-grow,pre-joint", "--check", env=stand_in_env())
        self.assertEqual(r.returncode, 0, r.stderr)
        arms = [line.split(":")[0][4:] for line in r.stdout.splitlines() if line.startswith("arm ")]
        self.assertEqual(arms, ["pre-joint", "post-grow"])  # the preset's order
        r = run("--preset", preset, "--arms", "pre-jont", "--check")
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("no arm 'pre-jont'", r.stderr)

    def test_bad_arms(self):
        cases = [([{"name": "a", "placement": "middle", "schedule": "grow"}], "placement"),
                 ([{"name": "a", "placement": "post"}], "needs a schedule"),
                 (["pre-jiont"], "unknown arm 'pre-jiont'"),
                 (["pre-joint", "pre-joint"], "listed twice"),
                 # 0.x's key: refused with the name that replaced it
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "data": "continue"}],
                  'arms[0].data is rewind_data since 1.0, the library\'s name: "rewind_data": 1 '
                  'for "replay", 0 for "continue"'),
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "rewind_data": 2}],
                  "rewind_data"),
                 # 0.4's 1 for "every block" is a layer count now: refused, not read as 1
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "block_norm": 1}],
                  "arms[0].block_norm is a layer count since 1.0, as in lattice_model_params: "
                  "0.4's 1 (every block) is the student's block_size, 3"),
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "block_rescale": 1}],
                  "arms[0].block_rescale is a layer count since 1.0"),
                 # the library's rules, asked: its bounds, then its check of the model
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "block_norm": 5000}],
                  "arms[0].block_norm = 5000 outside 0..4096"),
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "massive_offset": 4,
                    "massive_channel": 1 << 20}],
                  "arms[0].massive_channel = 1048576 outside 0..1048575"),
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "block_norm": 10}],
                  "arms[0] ('a'): block_norm 10 not in 0..n_layers (9)")]
        with tempfile.TemporaryDirectory() as d:
            for arms, msg in cases:
                write(os.path.join(d, "p.json"), {"name": "bad", "arms": arms})
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertNotEqual(r.returncode, 0, arms)
                self.assertIn(msg, r.stderr)

    def test_paths_gain_and_arms_as_data(self):
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, "p.json"), {
                "name": "x",
                "data": {"train": "corpus/train.txt", "val": "/abs/val.txt"},
                "student": {"d_model": 64, "init_gain": 1.28, "blocks": 2, "block_size": 2},
                "train": {"steps_per_phase": 10},
                "arms": ["pre-grow", "post-freeze", "post-joint-total",
                         {"name": "peri-copy", "placement": "peri", "schedule": "grow",
                          "block_init": "copy", "rewind_data": 0},
                         # the arm's train_boundary is its explicit phases' default after
                         # the first, as for a schedule preset; a phase's own key wins
                         {"name": "pre-explicit", "placement": "pre", "train_boundary": 0,
                          "phases": [{"steps": 5, "active_layers": 2},
                                     {"steps": 5, "active_layers": 4},
                                     {"steps": 5, "active_layers": 4, "train_boundary": 1}]}]})
            r = run("--preset", os.path.join(d, "p.json"), "--check")
            # printed as understood, then the missing corpus is an error
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("data.train: cannot read " + os.path.join(d, "corpus/train.txt"), r.stderr)
            out = r.stdout
            self.assertIn("train " + os.path.join(d, "corpus/train.txt"), out)
            self.assertIn("val /abs/val.txt", out)
            # std = gain / sqrt(d_model); LR in the paper's proportion (1e-4 at 0.02)
            self.assertIn("student init_std 0.16 (gain 1.28), lr 0.0008", out)
            arms = out.split("arm ")[1:]
            grow, freeze, total, peri, explicit = arms
            self.assertIn("phase 1: 10 steps, 4 active, train_from 0", grow)
            self.assertIn("rewind_data 1", grow)  # the paper's shard replay
            self.assertIn("phase 1: 10 steps, 4 active, train_from 2", freeze)
            self.assertIn("train_boundary 0", freeze)  # freeze means frozen
            self.assertNotIn("rewind_data 1", total)  # budget controls read fresh data
            self.assertIn("block_init copy", peri)
            self.assertNotIn("rewind_data 1", peri)
            self.assertEqual(re.findall(r"phase (\d): .*train_boundary (\d)", explicit),
                             [("0", "1"), ("1", "0"), ("2", "1")])

    def test_block_norm_is_a_layer_count(self):
        """An arm's block_norm and block_rescale count layers, as the library's
        fields do: 2 on a student of 2-layer blocks is every block, 1 would be
        0.4's "every block" and is refused there."""
        with tempfile.TemporaryDirectory() as d:
            for key, what in (("block_norm", "a block-entry norm"),
                              ("block_rescale", "the row-start token rescaled")):
                write(os.path.join(d, "p.json"), {
                    "name": "x", "student": {"blocks": 3, "block_size": 2},
                    "arms": [{"name": "a", "placement": "pre", "schedule": "grow", key: 2},
                             {"name": "b", "placement": "pre", "schedule": "grow", key: 3}]})
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertIn("arm a: pre-norm with %s every 2 layers" % what, r.stdout)
                self.assertIn("arm b: pre-norm with %s every 3 layers" % what, r.stdout)


class TinyStudy(unittest.TestCase):
    def test_end_to_end(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny", 60,
                {"steps_per_phase": 6, "warmup": 1, "eval_every": 3, "eval_batches": 2,
                 "final_eval_batches": 2},
                ["pre-joint", "post-joint", "pre-grow", "post-grow",
                 {"name": "post-grow-explicit", "placement": "post",
                  "phases": [{"steps": 6, "active_layers": 1},
                             {"steps": 6, "active_layers": 2, "rewind_data": 1}]}])
            out = os.environ.get("REPRODUCE_TEST_OUT") or os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("teacher go/no-go", r.stderr)
            self.assertIn("estimated wall time", r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("## Verdict: what reproduced", report)
            for row in ("joint: post ≈ pre", "grow: post < pre", "interaction I < 0",
                        "loss jump at the first append", "block removal",
                        "row-start tokens massive under pre-norm"):
                self.assertIn("| " + row, report)
            self.assertIn("| post-grow | 1 | append |", report)
            with open(os.path.join(out, "results.json")) as f:
                res = json.load(f)
            self.assertEqual(len(res["arms"]["post-grow-explicit"]), 2)
            run0 = res["arms"]["pre-grow"][0]
            self.assertGreaterEqual(len(run0["trajectory"]), 4)
            self.assertIn("rms_boundary", run0["trajectory"][0])
            self.assertEqual(run0["loss_response"][0]["kind"], "append")
            self.assertEqual(len(res["teacher_boundary_scale"]), 3)
            for layer in res["teacher_boundary_scale"]:
                self.assertTrue(0 < layer["attention_mass_pos0"] <= 1)
                self.assertIn(layer["sink_rate"], (0, 0.5, 1))  # 2 heads
                self.assertGreater(layer["top_over_median"], 1)
                self.assertGreater(layer["value_norm_ratio_pos0"], 0)
            self.assertIn("| mass on position 0 | sink heads | top / median |", report)
            self.assertIn("teacher attention mass on position 0 by layer", r.stderr)
            # the explicit arm is the grow preset written out: the same numbers
            self.assertEqual(res["arms"]["post-grow-explicit"][0]["val_ce"],
                             res["arms"]["post-grow"][0]["val_ce"])
            with open(os.path.join(out, "curves.csv")) as f:
                rows = list(csv.DictReader(f))
            grow1 = [x for x in rows if x["arm"] == "pre-grow" and x["seed"] == "1"]
            self.assertEqual([int(x["step"]) for x in grow1], list(range(1, 13)))
            self.assertTrue(all(float(x["train_loss"]) > 0 for x in grow1))
            evaluated = [int(x["step"]) for x in grow1 if x["val_ce"]]
            self.assertEqual(evaluated, [3, 6, 9, 12])
            self.assertEqual([x["active_layers"] for x in grow1[5:7]], ["1", "2"])
            self.assertTrue(all(x["rms_boundary"] for x in grow1 if x["val_ce"]))
            # the cached teacher is reused on a second run
            r2 = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r2.returncode, 0, r2.stderr)
            self.assertIn("teacher: reusing", r2.stderr)


# The backend of the tests that compare the logits file's runs with the teacher's
# forward in every step bit for bit: the file's rows are computed at other
# places in their batches than the steps', and the reference backend sums an
# element the same wherever its row falls. OpenBLAS's Haswell kernels and
# oneDNN's avx2 ones do not (a Zen 1 host: 9 and 2 of 56 rows differed when the
# rows moved by one), so the default backend's runs there are the file's own.
ROW_INVARIANT = "ref"


class Jobs(unittest.TestCase):
    def test_teacher_logits_once_per_study(self):
        """The teacher's logits computed once into teacher_logits.bin and read by
        every run give what the teacher's forward in every step gives; the file
        is reused, verified, replaced when damaged, and --teacher-logits verify
        compares it with the forward bit for bit."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny-logits", 60,
                # 6 x 80 steps, at least twice the file's 216 batches: worth making
                {"steps_per_phase": 80, "warmup": 1, "eval_every": 40, "eval_batches": 2,
                 "final_eval_batches": 2},
                ["pre-joint", "post-grow"], backend=ROW_INVARIANT)
            step, cached = os.path.join(d, "step"), os.path.join(d, "file")

            def results_of(out):
                with open(os.path.join(out, "results.json")) as f:
                    return without_timings(json.load(f))

            r = run("--preset", preset, "--out", step, "--teacher-logits", "step", "--profile")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("teacher_logits.bin", r.stderr)
            # --profile: a line per run and one for all, whose shares make the whole
            lines = [x for x in r.stderr.splitlines() if "reproduce: profile " in x]
            self.assertEqual(len(lines), 5, r.stderr)
            self.assertIn("profile of the 4 runs' time summed", lines[-1])
            for line in lines:
                shares = [float(x) for x in re.findall(r" (\d+\.\d)%", line)]
                self.assertEqual(len(shares), 7, line)
                self.assertAlmostEqual(sum(shares), 100.0, delta=0.5, msg=line)
            self.assertFalse(os.path.exists(os.path.join(step, "teacher_logits.bin")))
            want = results_of(step)
            r = run("--preset", preset, "--out", cached, "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("once for every run", r.stderr)
            # the reference backend gives a row the same bits at every place
            self.assertNotIn("not bit for bit", r.stderr)
            m = re.search(r"logits: (\d+) batches read from the file, 0 computed", r.stderr)
            self.assertTrue(m and int(m.group(1)) > 0, r.stderr)
            self.assertEqual(results_of(cached), want)
            with open(os.path.join(cached, "report.md")) as f:
                self.assertIn("came from teacher_logits.bin", f.read())
            # kept: the next study in the folder reads it without computing it
            r = run("--preset", preset, "--out", cached, "--fresh")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("once for every run", r.stderr)
            self.assertEqual(results_of(cached), want)
            # a damaged file is never read: it is computed again
            path = os.path.join(cached, "teacher_logits.bin")
            with open(path, "r+b") as f:
                f.seek(5000)
                byte = f.read(1)
                f.seek(5000)
                f.write(bytes([byte[0] ^ 0x40]))
            r = run("--preset", preset, "--out", cached, "--fresh")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("is replaced (its checksum does not match its bytes)", r.stderr)
            self.assertEqual(results_of(cached), want)
            r = run("--preset", preset, "--out", cached, "--fresh", "--teacher-logits", "verify")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(results_of(cached), want)
            # runs that take fewer steps than twice the file's batches compute their own
            short = os.path.join(d, "short")
            r = run("--preset", preset, "--out", short, "--arms", "pre-joint", "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("fewer than twice the 216 batches a file of every training row costs",
                          r.stderr)
            self.assertFalse(os.path.exists(os.path.join(short, "teacher_logits.bin")))
            r = run("--preset", preset, "--out", cached, "--teacher-logits", "sometimes")
            self.assertEqual(r.returncode, 2)
            self.assertIn("'sometimes' is not file, step or verify", r.stderr)

    def test_teacher_logits_rows_that_end_in_the_pad_byte(self):
        """A row whose text is another's with a NUL byte (the pad id) after it
        gets its own logits from the file: with the shorter row found first,
        the NUL's position (real, in the loss) was given zero logits and the
        runs trained on another teacher than --teacher-logits step's."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny-nul", 8,
                {"steps_per_phase": 40, "warmup": 1, "eval_every": 40, "eval_batches": 1,
                 "final_eval_batches": 1},
                ["pre-joint"], backend=ROW_INVARIANT)
            words = "the lady said that mr darcy was not at home but her sister".split()
            docs = []
            for i in range(24):  # each pair: "text" + "s" first, then "text" + NUL + "s"
                text = " ".join(words[(i + j) % len(words)] for j in range(3))[:12]
                docs += [text + "s", text + "\0s"]
            with open(os.path.join(d, "train.txt"), "w") as f:
                f.write("\f".join(docs))
            outs = {}
            for how in ("step", "file", "verify"):
                outs[how] = os.path.join(d, how)
                r = run("--preset", preset, "--out", outs[how], "--seeds", "1",
                        "--teacher-logits", how)
                self.assertEqual(r.returncode, 0, r.stderr)
                if how != "step":
                    self.assertIn("0 computed", r.stderr)
            want = without_timings(results(outs["step"]))
            self.assertEqual(without_timings(results(outs["file"])), want)
            self.assertEqual(without_timings(results(outs["verify"])), want)

    def test_teacher_logits_file_that_cannot_be_written(self):
        """A write of teacher_logits.bin that fails part way (here the file
        size limit, as a full disk would) stops the study saying so, and leaves
        neither the file nor its temp; the same command then makes it and the
        runs get --teacher-logits step's results."""
        import resource
        import signal

        def small_files():
            signal.signal(signal.SIGXFSZ, signal.SIG_IGN)  # a write past it fails: EFBIG
            resource.setrlimit(resource.RLIMIT_FSIZE, (512 * 1024, 512 * 1024))

        with tempfile.TemporaryDirectory() as d:
            # 60 steps, at least twice the file's 26 batches; the file about 1.6 MB,
            # the teacher 65 kB
            preset = tiny_study(
                d, "tiny-fsize", 8,
                {"steps_per_phase": 60, "warmup": 1, "eval_every": 60, "eval_batches": 1,
                 "final_eval_batches": 1},
                ["pre-joint"], backend=ROW_INVARIANT)
            out, step = os.path.join(d, "file"), os.path.join(d, "step")
            args = ("--preset", preset, "--seeds", "1")
            r = subprocess.run([BIN, *args, "--out", out], capture_output=True, text=True,
                               timeout=600, preexec_fn=small_files)
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("cannot write %s: File too large" %
                          os.path.join(out, "teacher_logits.bin"), r.stderr)
            self.assertEqual(sorted(n for n in os.listdir(out) if "logits" in n or
                                    n.endswith(".tmp")), [])
            self.assertFalse(os.path.exists(os.path.join(out, "results.json")))
            r = run(*args, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("0 computed", r.stderr)
            r = run(*args, "--out", step, "--teacher-logits", "step")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(without_timings(results(out)), without_timings(results(step)))

    def test_save_students_checked_before_any_run(self):
        """A folder in the way of a student's file stops the study before any
        run trains, naming it (it stopped after the run had trained)."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny-students", 40,
                {"steps_per_phase": 4, "warmup": 1, "eval_every": 4, "eval_batches": 1,
                 "final_eval_batches": 1},
                ["pre-joint"])
            out = os.path.join(d, "out")
            os.makedirs(os.path.join(out, "students", "pre-joint.seed2.safetensors"))
            r = run("--preset", preset, "--out", out, "--save-students")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("--save-students: cannot write", r.stderr)
            self.assertIn("students/pre-joint.seed2.safetensors: ", r.stderr)
            self.assertIn("(nothing was run)", r.stderr)
            self.assertEqual([x for x in os.listdir(os.path.join(out, "runs"))
                              if x.endswith(".run")], [])

    def test_runs_cut_short_resume_bit_for_bit(self):
        """kill -9 at random moments: each study run again in the folder takes
        up every cut run from its last checkpoint, and the study's results
        equal an uninterrupted one's bit for bit; nothing of the checkpoints
        is left once the runs are kept."""
        import random
        import signal
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny-resume", 60,
                # long enough (a checkpoint every step, each written whole) that no
                # first window sees the study through
                {"steps_per_phase": 40, "warmup": 1, "eval_every": 8, "eval_batches": 2,
                 "final_eval_batches": 2},
                ["pre-joint", "post-grow"])
            whole, cut = os.path.join(d, "whole"), os.path.join(d, "cut")
            r = run("--preset", preset, "--out", whole, "--checkpoint-every", "-1")
            self.assertEqual(r.returncode, 0, r.stderr)
            rng = random.Random(7)
            said, done = "", False
            for attempt in range(60):
                with open(os.path.join(d, "err"), "w+") as err:
                    p = subprocess.Popen([BIN, "--preset", preset, "--out", cut, "--jobs", "2",
                                          "--checkpoint-every", "0"],
                                         stdout=subprocess.DEVNULL, stderr=err)
                    try:
                        # a window that widens, so that a slow build (the sanitizers')
                        # gets through the teacher and finishes too
                        done = p.wait(timeout=rng.uniform(0.05, 0.6) * 1.12 ** attempt) == 0
                    except subprocess.TimeoutExpired:
                        p.send_signal(signal.SIGKILL)
                        p.wait()
                    err.seek(0)
                    said += err.read()
                if done:
                    break
            self.assertTrue(done, said[-2000:])
            self.assertIn("resumed at step", said)
            with open(os.path.join(whole, "results.json")) as f1, \
                    open(os.path.join(cut, "results.json")) as f2:
                self.assertEqual(without_timings(json.load(f1)), without_timings(json.load(f2)))
            left = sorted(os.listdir(os.path.join(cut, "runs")))
            self.assertEqual([x for x in left if x.endswith(".run")],
                             ["post-grow.seed1.run", "post-grow.seed2.run",
                              "pre-joint.seed1.run", "pre-joint.seed2.run"])
            # (a folder probe's temporary file cut by a kill may stay: not a checkpoint's)
            self.assertEqual([x for x in left if ".part" in x or ".ckpt" in x], [], left)
            # a kill between keeping a run and removing its checkpoint leaves the
            # checkpoint: the next study in the folder finds the run kept and removes it
            for stale in ("post-grow.seed1.step79.ckpt", "post-grow.seed1.part"):
                with open(os.path.join(cut, "runs", stale), "wb") as f:
                    f.write(b"left by a kill")
            r = run("--preset", preset, "--out", cut)
            self.assertEqual(r.returncode, 0, r.stderr)
            left = sorted(os.listdir(os.path.join(cut, "runs")))
            self.assertEqual([x for x in left if ".part" in x or ".ckpt" in x], [], left)
            r = run("--preset", preset, "--out", cut, "--checkpoint-every", "soon")
            self.assertEqual(r.returncode, 2)
            self.assertIn("'soon' is not a number of seconds", r.stderr)

    def test_side_by_side_same_numbers(self):
        """--jobs 2 hands the runs out longest first to two workers in one
        process, and writes what one run after another writes."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(
                d, "tiny-jobs", 60,
                {"steps_per_phase": 8, "warmup": 1, "eval_every": 4, "eval_batches": 2,
                 "final_eval_batches": 2},
                ["pre-joint", "post-grow",
                 {"name": "post-long", "placement": "post",
                  "phases": [{"steps": 8, "active_layers": 1},
                             {"steps": 8, "active_layers": 2},
                             {"steps": 8, "active_layers": 2, "rewind_data": 1}]}])
            one, two = os.path.join(d, "one"), os.path.join(d, "two")
            r1 = run("--preset", preset, "--out", one, "--jobs", "1")
            self.assertEqual(r1.returncode, 0, r1.stderr)
            self.assertIn("plan 1 job x 1 thread", r1.stderr)
            r2 = run("--preset", preset, "--out", two, "--jobs", "2")
            self.assertEqual(r2.returncode, 0, r2.stderr)
            self.assertIn("plan 2 jobs x 1 thread", r2.stderr)
            self.assertIn("estimated wall time", r2.stderr)
            self.assertIn("with 2 jobs x 1 thread", r2.stderr)
            with open(os.path.join(one, "results.json")) as f:
                res1 = json.load(f)
            with open(os.path.join(two, "results.json")) as f:
                res2 = json.load(f)
            self.assertEqual([len(v) for v in res2["arms"].values()], [2, 2, 2])
            self.assertEqual(without_timings(res1), without_timings(res2))
            with open(os.path.join(one, "curves.csv")) as f1, \
                    open(os.path.join(two, "curves.csv")) as f2:
                self.assertEqual(f1.read(), f2.read())
            with open(os.path.join(two, "report.md")) as f:
                self.assertIn("The runs went 2 side by side", f.read())
            done = [x for x in r2.stderr.splitlines() if " seed " in x and "val CE" in x]
            self.assertEqual(len(done), 6, r2.stderr)
            # the longest arm is handed out first, to both workers
            self.assertIn("post-long", next(x for x in done if "[1/6]" in x))
            self.assertIn("post-long", next(x for x in done if "[2/6]" in x))

    def test_block_norm_arm(self):
        """An arm with a block-entry norm runs (and differs from the same arm
        without it); post-norm refuses one."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-grow", {"name": "pre-bnorm-grow", "placement": "pre",
                                                      "schedule": "grow", "block_norm": 1}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm pre-bnorm-grow: pre-norm with a block-entry norm every 1 layers",
                          r.stdout)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            arms = results(out)["arms"]
            self.assertNotEqual(arms["pre-grow"][0]["val_ce"], arms["pre-bnorm-grow"][0]["val_ce"])
            preset = tiny_arms_study(d, [{"name": "x", "placement": "post", "schedule": "grow",
                                          "block_norm": 1}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arms[0] ('x'): lattice_model_estimate: block_norm 1 needs the pre-norm "
                          "placement", r.stderr)

    def test_matched_rows_of_another_recipe(self):
        """The interaction at matched compute gets a verdict row on a recipe
        named by its suffix (-go) when its four arms ran, and none when they
        did not."""
        def arm(name, placement, schedule):
            return {"name": name, "placement": placement, "schedule": schedule,
                    "train": {"lr": 3e-3, "lr_shape": "constant"}}
        with tempfile.TemporaryDirectory() as d:
            grow = [arm("pre-grow-go", "pre", "grow"), arm("post-grow-go", "post", "grow")]
            total = [arm("pre-joint-total-go", "pre", "joint-total"),
                     arm("post-joint-total-go", "post", "joint-total")]
            for arms, want in ((grow, False), (grow + total, True)):
                preset = tiny_arms_study(d, arms)
                out = os.path.join(d, "out-%d" % len(arms))
                r = run("--preset", preset, "--out", out)
                self.assertEqual(r.returncode, 0, r.stderr)
                with open(os.path.join(out, "report.md")) as f:
                    rows = [l for l in f.read().splitlines()
                            if l.startswith("| interaction at matched total tokens, the teacher's")]
                self.assertEqual(len(rows), 1 if want else 0, rows)
                if want:
                    res = results(out)["arms"]
                    fin = {a: [x["val_ce"] for x in res[a]] for a in res}
                    i = [(fin["post-grow-go"][k] - fin["pre-grow-go"][k]) -
                         (fin["post-joint-total-go"][k] - fin["pre-joint-total-go"][k])
                         for k in range(2)]
                    self.assertIn("| %+.4f ± " % (sum(i) / 2), rows[0])

    def test_data_separator(self):
        """data.separator makes other documents of the same text (here each
        sentence, one per row, with split_long off): the study runs on them and
        its report says so; an empty or overlong separator is refused."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            with open(preset) as f:
                p = json.load(f)
            outs = []
            for k, sep in enumerate((None, ". ")):
                if sep is not None:
                    p["data"].update({"separator": sep, "split_long": False})
                    write(preset, p)
                out = os.path.join(d, "out%d" % k)
                r = run("--preset", preset, "--out", out, "--seeds", "1")
                self.assertEqual(r.returncode, 0, r.stderr)
                outs.append(out)
            self.assertNotEqual(results(outs[0])["arms"]["pre-joint"][0]["val_ce"],
                                results(outs[1])["arms"]["pre-joint"][0]["val_ce"])
            with open(os.path.join(outs[1], "report.md")) as f:
                report = f.read()
            self.assertIn("separators of 2 bytes (data.separator)", report)
            self.assertIn("Each row is one document", report)
            for sep, why in (("", "it is 0"), ("x" * 16, "it is 16")):
                p["data"]["separator"] = sep
                write(preset, p)
                r = run("--preset", preset, "--check")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("data.separator must be 1 to 15 bytes (%s)" % why, r.stderr)

    def test_block_rescale_arm(self):
        """An arm that rescales the row-start token at each block entry runs,
        differs from the same arm without it and from the block-entry norm's;
        post-norm and both interventions at once are refused."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-grow",
                                         {"name": "pre-brescale-grow", "placement": "pre",
                                          "schedule": "grow", "block_rescale": 1},
                                         {"name": "pre-bnorm-grow", "placement": "pre",
                                          "schedule": "grow", "block_norm": 1}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm pre-brescale-grow: pre-norm with the row-start token rescaled "
                          "every 1 layers", r.stdout)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            ce = {k: v[0]["val_ce"] for k, v in results(out)["arms"].items()}
            self.assertEqual(len({ce["pre-grow"], ce["pre-brescale-grow"], ce["pre-bnorm-grow"]}),
                             3, ce)
            for arm, message in (({"name": "x", "placement": "post", "schedule": "grow",
                                   "block_rescale": 1},
                                  "arms[0] ('x'): lattice_model_estimate: block_rescale 1 needs "
                                  "the pre-norm placement"),
                                 ({"name": "x", "placement": "pre", "schedule": "grow",
                                   "block_rescale": 1, "block_norm": 1},
                                  "arms[0] ('x'): block_norm 1 and block_rescale 1 are both set")):
                r = run("--preset", tiny_arms_study(d, [arm]), "--check")
                self.assertEqual(r.returncode, 1)
                self.assertIn(message, r.stderr)

    def test_massive_offset_arm_and_saved_students(self):
        """An arm with an induced row-start offset runs under pre and post and
        differs from its plain arm; --save-students saves each run's final
        model with its settings, and only of runs that run; the offset's keys
        are checked; the backend is named in the run settings when it is not
        OpenBLAS."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-grow", "post-grow",
                                         {"name": "pre-grow-k8", "placement": "pre",
                                          "schedule": "grow", "massive_offset": 8},
                                         {"name": "post-grow-k8", "placement": "post",
                                          "schedule": "grow", "massive_offset": 8,
                                          "massive_channel": 2}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm post-grow-k8: post-norm with an induced row-start offset of 8 x "
                          "the regular RMS after layer 1 (channel 2)", r.stdout)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1", "--save-students",
                    "--arms", "pre-grow,pre-grow-k8,post-grow-k8")
            self.assertEqual(r.returncode, 0, r.stderr)
            ce = {k: v[0]["val_ce"] for k, v in results(out)["arms"].items()}
            self.assertNotEqual(ce["pre-grow"], ce["pre-grow-k8"])
            saved = sorted(os.listdir(os.path.join(out, "students")))
            self.assertEqual(saved, ["post-grow-k8.seed1.safetensors",
                                     "pre-grow-k8.seed1.safetensors",
                                     "pre-grow.seed1.safetensors"])
            with open(os.path.join(out, "students", "post-grow-k8.seed1.safetensors"), "rb") as f:
                head = f.read(65536)
            self.assertIn(b"massive_offset", head)
            self.assertIn(b"input_regular_rms", head)
            # a second call saves only what runs now: the kept runs are not saved again
            os.remove(os.path.join(out, "students", "pre-grow.seed1.safetensors"))
            r = run("--preset", preset, "--out", out, "--seeds", "1", "--save-students",
                    "--arms", "pre-grow,post-grow")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertEqual(sorted(os.listdir(os.path.join(out, "students"))),
                             ["post-grow-k8.seed1.safetensors", "post-grow.seed1.safetensors",
                              "pre-grow-k8.seed1.safetensors"])
            r = run("--preset", preset, "--out", out, "--report-only", "--save-students")
            self.assertEqual(r.returncode, 1)
            self.assertIn("--save-students saves the models of runs that run", r.stderr)
            # another backend is another run: the kept OpenBLAS runs are not reused
            env = dict(os.environ, LATTICE_BACKEND="ref")
            r = run("--preset", preset, "--out", out, "--seeds", "1", "--estimate",
                    "--arms", "pre-grow", env=env)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("for 1 run ", r.stderr)
            for arm, message in (({"name": "x", "placement": "pre", "schedule": "grow",
                                   "massive_offset": -1},
                                  "arms[0].massive_offset must be"),
                                 ({"name": "x", "placement": "pre", "schedule": "grow",
                                   "massive_channel": 3},
                                  "arms[0] sets massive_layer or massive_channel without "
                                  "massive_offset"),
                                 ({"name": "x", "placement": "pre", "schedule": "grow",
                                   "massive_offset": 4, "massive_layer": 9},
                                  "massive_layer 9 not in 1..")):
                r = run("--preset", tiny_arms_study(d, [arm]), "--check")
                self.assertEqual(r.returncode, 1, r.stdout)
                self.assertIn(message, r.stderr)

    def test_progress_lines_off_a_terminal(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(d, "tiny-progress", 40,
                                {"steps_per_phase": 400, "warmup": 1, "eval_every": 100,
                                 "eval_batches": 1, "final_eval_batches": 1}, ["pre-joint"])
            r = run("--preset", preset, "--out", os.path.join(d, "out"), "--seeds", "1",
                    "--progress", "0.001")
            self.assertEqual(r.returncode, 0, r.stderr)
            student = [x for x in r.stderr.splitlines()
                       if x.startswith("reproduce: [1/1] pre-joint seed 1: phase 1/1, step ")]
            self.assertTrue(any(", val CE " in x and "this run's ETA" in x for x in student),
                            r.stderr)
            r = run("--preset", preset, "--out", os.path.join(d, "out2"), "--seeds", "1",
                    "--progress", "0")
            self.assertNotIn("this run's ETA", r.stderr)
            for bad in ("-1", "x", "1e9"):
                r = run("--preset", preset, "--check", "--progress", bad)
                self.assertEqual(r.returncode, 2, r.stderr)
                self.assertIn("--progress", r.stderr)

    def test_preset_by_name(self):
        """--preset NAME is NAME.json of the presets folder (the source tree's for
        the build's own program); a name never leaves the folder, and a path
        (a '/', or .json) is read as before."""
        with tempfile.TemporaryDirectory() as d:
            r = run("--preset", "quick", "--check", cwd=d, env=stand_in_env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("preset quick\n", r.stdout)
            r = run("--preset", "nosuch", "--check", cwd=d)
            self.assertEqual(r.returncode, 1)
            self.assertIn("no preset named 'nosuch' in %s (there: " % PRESETS, r.stderr)
            self.assertIn(", quick, ", r.stderr)
            for bad in ("..", "a..b", ".quick", "quick\\x", "x y", ""):
                r = run("--preset", bad, "--check", cwd=d)
                self.assertEqual(r.returncode, 1, (bad, r.stderr))
                self.assertIn("--preset %s: a preset name is 1 to 47 characters" % bad, r.stderr)
            # a file in the working folder: by a path, never by a name
            write(os.path.join(d, "mine"), {"name": "mine", "arms": ["pre-joint"]})
            r = run("--preset", "mine", "--check", cwd=d)
            self.assertIn("no preset named 'mine'", r.stderr)
            r = run("--preset", "./mine", "--check", cwd=d, env=stand_in_env())
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("preset mine\n", r.stdout)

    def test_bad_jobs(self):
        for bad in ("0", "-1", "x", "257"):
            r = run("--preset", os.path.join(PRESETS, "quick.json"), "--check", "--jobs", bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
            self.assertIn("jobs", r.stderr)


class Traps(unittest.TestCase):
    """Each trap a researcher met in 0.3's reproduce, as a case."""

    def test_reruns_merge(self):
        with tempfile.TemporaryDirectory() as d:
            peri = {"name": "peri-grow-identity", "placement": "peri", "schedule": "grow",
                    "block_init": "identity"}
            preset = tiny_arms_study(d, ["pre-joint", "post-grow", peri])
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--arms", "pre-joint,post-grow")
            self.assertEqual(r.returncode, 0, r.stderr)
            first = results(out)
            self.assertEqual(sorted(first["arms"]), ["post-grow", "pre-joint"])
            # one new arm: the earlier runs are kept and reported with it
            r = run("--preset", preset, "--out", out, "--arms", "peri-grow-identity")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("4 runs kept in %s/runs/ reused; 2 to run" % out, r.stderr)
            merged = results(out)
            self.assertEqual(sorted(merged["arms"]),
                             ["peri-grow-identity", "post-grow", "pre-joint"])
            self.assertEqual(without_timings(merged["arms"]["pre-joint"]),
                             without_timings(first["arms"]["pre-joint"]))
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            for arm in ("pre-joint", "post-grow", "peri-grow-identity"):
                self.assertIn("| %s | " % arm, report)
            self.assertIn("4 of the runs were kept from earlier runs", report)
            # more seeds: only the new seed runs
            r = run("--preset", preset, "--out", out, "--seeds", "3")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("6 runs kept in %s/runs/ reused; 3 to run" % out, r.stderr)
            self.assertEqual([len(v) for v in results(out)["arms"].values()], [3, 3, 3])
            # a changed arm is named and run again; the others are kept
            with open(preset) as f:
                p = json.load(f)
            p["arms"][2]["init_gain"] = 0.9
            write(preset, p)
            r = run("--preset", preset, "--out", out, "--seeds", "3")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("runs/peri-grow-identity.seed1.run: made with other settings: "
                          "arm.resolved.init_gain", r.stderr)
            self.assertIn("arm.spec.init_gain (absent) -> 0.90000000000000002", r.stderr)
            self.assertIn("6 runs kept in %s/runs/ reused; 3 to run" % out, r.stderr)
            # an arm added in the middle of the list: every kept run still counts
            p["arms"].insert(1, "post-joint")
            write(preset, p)
            r = run("--preset", preset, "--out", out, "--seeds", "3", "--arms", "post-joint")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("9 runs kept in %s/runs/ reused; 3 to run" % out, r.stderr)
            self.assertEqual(sorted(results(out)["arms"]),
                             ["peri-grow-identity", "post-grow", "post-joint", "pre-joint"])
            # a run file copied to another seed's name is not that seed's run
            runs = os.path.join(out, "runs")
            with open(os.path.join(runs, "pre-joint.seed1.run"), "rb") as f:
                seed1 = f.read()
            with open(os.path.join(runs, "pre-joint.seed2.run"), "wb") as f:
                f.write(seed1)
            r = run("--preset", preset, "--out", out, "--seeds", "3", "--arms", "pre-joint")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("runs/pre-joint.seed2.run: it holds arm 'pre-joint' seed 1, not "
                          "pre-joint seed 2 (a file renamed?): running it again", r.stderr)
            # --fresh: nothing kept
            r = run("--preset", preset, "--out", out, "--seeds", "1", "--fresh")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("kept in", r.stderr)
            self.assertEqual([len(v) for v in results(out)["arms"].values()], [1, 1, 1, 1])

    def test_runs_of_0_3_to_1_0_are_read(self):
        """Runs kept as raw records (format 2, 0.5 to 1.0) are reused, and give
        the results.json and curves.csv their JSON did; a run kept by 0.3's
        layout (before the trajectory gained its sink figures) is reused, its
        sink figures not measured (null)."""
        sinks_bytes = 4096 * 4 * 8  # MAX_POINTS sink points of 4 doubles
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint", "post-grow"])
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            first = results(out)
            with open(os.path.join(out, "curves.csv")) as f:
                curves = f.read()
            traj = first["arms"]["pre-joint"][0]["trajectory"]
            self.assertTrue(all(0 < x["attention_mass_pos0"] <= 1 for x in traj))
            self.assertTrue(all(x["max_top_over_median"] > 1 for x in traj))
            for arm in ("pre-joint", "post-grow"):
                path = os.path.join(out, "runs", arm + ".seed1.run")
                with open(path, "rb") as f:
                    data = kept_raw(f.read())
                with open(path, "wb") as f:
                    f.write(data)
            r = run("--preset", preset, "--out", out, "--seeds", "1", "--report-only")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("2 runs kept in %s/runs/ reused; 0 to run" % out, r.stderr)
            self.assertEqual(results(out)["arms"], first["arms"])
            with open(os.path.join(out, "curves.csv")) as f:
                self.assertEqual(f.read(), curves)
            path = os.path.join(out, "runs", "pre-joint.seed1.run")
            with open(path, "rb") as f:
                head, settings, record, _ = kept_parts(f.read())
            header = head["record_header"]
            old = record[:header - sinks_bytes] + record[header:]
            with open(path, "wb") as f:
                f.write(kept_file(head["arm"], head["seed"], settings, old, header - sinks_bytes))
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("2 runs kept in %s/runs/ reused; 0 to run" % out, r.stderr)
            again = results(out)["arms"]["pre-joint"][0]
            self.assertEqual(again["val_ce"], first["arms"]["pre-joint"][0]["val_ce"])
            self.assertTrue(all(x["attention_mass_pos0"] is None for x in again["trajectory"]))
            self.assertEqual([x["val_ce"] for x in again["trajectory"]],
                             [x["val_ce"] for x in traj])
            # a record of a size no build wrote is refused and run again
            with open(path, "wb") as f:
                f.write(kept_file(head["arm"], head["seed"], settings, old, header - 8))
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("its record is damaged: a run record of", r.stderr)

    def test_paths(self):
        """A preset's own paths are taken from its folder; the default corpus
        is the project's, wherever the preset lives."""
        project_corpus = os.path.realpath(os.path.join(PRESETS, "..", "..", "data", "austen"))
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, "p.json"), {"name": "p", "arms": ["pre-joint"]})
            r = run("--preset", os.path.join(d, "p.json"), "--check", cwd="/")
            self.assertIn("train %s/train.txt\n" % project_corpus, r.stdout)
            if os.path.exists(os.path.join(project_corpus, "train.txt")):
                self.assertEqual(r.returncode, 0, r.stderr)
            else:
                self.assertEqual(r.returncode, 1)
                self.assertIn("prepare_austen.py", r.stderr)
            os.mkdir(os.path.join(d, "sub"))
            write(os.path.join(d, "sub", "q.json"),
                  {"name": "q", "data": {"train": "../t.txt", "val": "v.txt"}, "arms": ["pre-joint"]})
            r = run("--preset", os.path.join(d, "sub", "q.json"), "--check", cwd="/")
            self.assertIn("train %s/sub/../t.txt\n" % d, r.stdout)
            self.assertEqual(r.returncode, 1)
            self.assertIn("data.train: cannot read %s/sub/../t.txt" % d, r.stderr)
            self.assertIn("taken from the preset's folder", r.stderr)

    def test_check_warns_of_a_second_pass(self):
        """--check says which arms read past the end of the training text (their
        "fresh" data repeats), and not of an arm that rewinds each phase."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(d, "t", 40, {"steps_per_phase": 100, "warmup": 1, "eval_every": 4,
                                             "eval_batches": 1, "final_eval_batches": 1},
                                ["post-joint-total", "pre-grow"])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            warned = [l for l in r.stdout.splitlines() if l.startswith("warning: ")]
            self.assertEqual(len(warned), 1, warned)
            self.assertRegex(warned[0], r"^warning: arm post-joint-total reads 200 batches without "
                                        r"a rewind, 1\.\d\d passes over the training text")

    def test_shapes_checked(self):
        cases = [({"n_heads": 4, "n_kv_heads": 3}, "n_heads 4 is not divisible by n_kv_heads 3"),
                 ({"head_dim": 15}, "head_dim 15")]
        with tempfile.TemporaryDirectory() as d:
            for student, why in cases:
                write(os.path.join(d, "p.json"),
                      {"name": "p", "student": student, "arms": ["pre-joint"]})
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("the student's shape", r.stderr)
                self.assertIn(why, r.stderr)
            # a default the preset never wrote is named as what it is made of
            for student, why in (({"d_model": 60, "n_heads": 4}, "60 / 4, is odd"),
                                 ({"d_model": 30, "n_heads": 4}, "30 / 4, is not a whole number")):
                write(os.path.join(d, "p.json"),
                      {"name": "p", "student": student, "arms": ["pre-joint"]})
                r = run("--preset", os.path.join(d, "p.json"), "--check")
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("student.head_dim is not given and its default, student.d_model / "
                              "student.n_heads = " + why, r.stderr)
                self.assertNotIn("head_dim 15", r.stderr)

    def test_strict_json(self):
        """The library's strict parser reads the preset; its errors name the
        line and column, what stands there, and a key given twice."""
        rules = "(a preset is strict JSON"
        cases = [('{"name": "x",\n "arms": ["pre-joint"],\n}\n',
                  ["line 3, column 1: a trailing comma, at '}'", rules]),
                 ('{"name": "x", /* c */ "arms": ["pre-joint"]}',
                  ["line 1, column 15: a comment, at '/* c */", rules]),
                 ('{"name": "x", "seeds": 2,\n "arms": ["pre-joint"], "seeds": 3}',
                  ['line 2, column 25: the key "seeds" appears twice in one object, at \'"seeds": 3}\'']),
                 ('{"name": "x", "arms": [{"name": "a", "placement": "pre",\n  "name": "b"}]}',
                  ['line 2, column 3: the key "name" appears twice in one object']),
                 ("{\"name\": 'x', \"arms\": [\"pre-joint\"]}",
                  ["line 1, column 10: a single-quoted string, at ''x', ", rules]),
                 ("{'name': \"x\", \"arms\": [\"pre-joint\"]}",
                  ["line 1, column 2: a single-quoted key", rules]),
                 ('{"name": "x", "seeds": NaN, "arms": ["pre-joint"]}',
                  ["line 1, column 24: a bare word", "at 'NaN, ", rules]),
                 ('{"name": "x", "arms": [', ["line 1, column 24: a truncated text", rules]),
                 ('["pre-joint"]', ["line 1, column 1: no '{' where the object begins"]),
                 ('{"name": "x\\u0000y", "arms": ["pre-joint"]}', ["\\u0000 in a string"]),
                 ('{"name": "x\0y", "arms": ["pre-joint"]}',
                  ["line 1, column 12: a control character (or NUL) in a string"])]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "p.json")
            for text, whys in cases:
                with open(path, "w") as f:
                    f.write(text)
                r = run("--preset", path, "--check")
                self.assertEqual(r.returncode, 1, text)
                self.assertIn("reproduce: preset %s: " % path, r.stderr, text)
                for why in whys:
                    self.assertIn(why, r.stderr, text)
                self.assertNotIn("arm ", r.stdout, text)

    def test_phase_errors_name_their_path(self):
        with tempfile.TemporaryDirectory() as d:
            write(os.path.join(d, "p.json"), {
                "name": "p", "student": {"blocks": 1, "block_size": 2},
                "arms": ["pre-joint", {"name": "a", "placement": "post",
                                       "phases": [{"steps": 5, "active_layers": 1},
                                                  {"steps": 5, "active_layers": 5}]}]})
            r = run("--preset", os.path.join(d, "p.json"), "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arms[1].phases[1].active_layers = 5 outside 1..2", r.stderr)

    def test_probe(self):
        """Teacher recipes side by side, with a go/no-go table."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            with open(preset) as f:
                p = json.load(f)
            p["probe_every"] = 4
            p["probes"] = [{"name": "decay", "lr_shape": "wsd", "decay_fraction": 0.5,
                            "min_lr": 1e-4, "weight_decay": 0.2, "steps": 8},
                           {"name": "long-rows", "seq_len": 32, "batch_size": 2, "steps": 6}]
            write(preset, p)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--probe", "--jobs", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("probe: 2 teacher recipes, 2 at a time x 1 thread", r.stderr)
            with open(os.path.join(out, "probe.csv")) as f:
                rows = list(csv.DictReader(f))
            self.assertEqual([(x["probe"], x["step"]) for x in rows],
                             [("decay", "4"), ("decay", "8"), ("long-rows", "4"),
                              ("long-rows", "6")])
            for x in rows:
                self.assertGreater(float(x["val_ce"]), 0)
                self.assertGreater(float(x["max_ratio"]), 0)
            with open(os.path.join(out, "probe.md")) as f:
                table = f.read()
            self.assertIn("| decay | 3 layers, 4 x 16 bytes, WSD (decay to 0.0001 over the last "
                          "50%) LR", table)
            self.assertIn("| long-rows | 3 layers, 2 x 32 bytes, cosine LR", table)
            p["probes"][1]["lr_shape"] = "constant"
            p["probes"][1]["min_lr"] = 0.001
            write(preset, p)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("probes[1].min_lr with lr_shape constant", r.stderr)
            for train, why in (({"decay_fraction": 0.3}, "train.decay_fraction needs lr_shape wsd"),
                               ({"lr_shape": "wsd", "decay_fraction": 1.5},
                                "train.decay_fraction 1.5 must lie in [0, 1]"),
                               ({"lr_shape": "linear"}, "train.lr_shape = 'linear' is not one "
                                                        "of: cosine, constant, wsd")):
                with open(preset) as f:
                    p = json.load(f)
                p.pop("probes", None)
                p["train"].update(train)
                write(preset, p)
                r = run("--preset", preset, "--check")
                self.assertEqual(r.returncode, 1, train)
                self.assertIn(why, r.stderr)

    def test_require_go(self):
        """A NO-GO teacher stops the study before any student runs."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint"])
            with open(preset) as f:
                p = json.load(f)
            p["require_go"] = True
            write(preset, p)
            r = run("--preset", preset, "--out", os.path.join(d, "out"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("the teacher is NO-GO", r.stderr)
            self.assertNotIn("seed 1: val CE", r.stderr)

    def test_fresh_data_that_repeats_is_named(self):
        """An arm that reads past the end of the training text is named in
        the report with its passes; one that does not is not. The held-out
        text is named by its manifest."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_study(d, "tiny-passes", 4,
                                {"steps_per_phase": 12, "warmup": 1, "eval_every": 12,
                                 "eval_batches": 1, "final_eval_batches": 1},
                                ["pre-joint", "pre-joint-total"])
            with open(preset) as f:
                p = json.load(f)
            p["seeds"] = 1
            write(preset, p)
            write(os.path.join(d, "manifest.json"),
                  {"files": {"val.txt": {"bytes": os.path.getsize(os.path.join(d, "val.txt"))}},
                   "novels": {"a": {"title": "Kept Apart", "split": "val"},
                              "b": {"title": "Trained On", "split": "train"},
                              "c": {"title": None, "split": None}}})
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertRegex(report, r"Data: one pass over the training text is \d+ batches of "
                                     r"4 x 16 bytes")
            self.assertRegex(report, r"- `pre-joint-total`: 24 steps without a rewind, [0-9.]+ "
                                     r"passes")
            self.assertNotIn("- `pre-joint`:", report)
            # the held-out text by its path and the manifest's titles
            self.assertRegex(report, r"held-out text[^:]*: \S*/val\.txt \(Kept Apart\)\.")

    def test_compare_and_files(self):
        """A new arm compared with a reference as the preset asks; report.md
        says what lies beside it."""
        with tempfile.TemporaryDirectory() as d:
            new = {"name": "post-grow-identity", "placement": "post", "schedule": "grow",
                   "block_init": "identity",
                   "train": {"lr": 2e-3, "lr_shape": "wsd", "decay_fraction": 0.5,
                             "weight_decay": 0.1}}
            preset = tiny_arms_study(d, ["pre-grow", new, "pre-joint", "post-joint"],
                                     [["pre-grow", "post-grow-identity"]])
            with open(preset) as f:
                p = json.load(f)
            p["train"].update({"lr_shape": "wsd", "decay_fraction": 0.25})
            p["interactions"] = [["pre-joint", "post-joint", "pre-grow", "post-grow-identity"]]
            write(preset, p)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("## Comparisons the preset asks for (paired by seed)", report)
            self.assertIn("students' recipe: WSD (decay to ", report)
            self.assertIn(" over the last 25%) LR", report)
            self.assertIn("Arms whose settings differ from these (peak LRs as run):\n\n- `post-grow-identity`: "
                          "WSD (decay to 2e-05 over the last 50%) LR 0.002 after 1 warmup steps, "
                          "weight decay 0.1\n", report)
            res = results(out)
            diffs = [b["val_ce"] - a["val_ce"] for a, b in
                     zip(res["arms"]["pre-grow"], res["arms"]["post-grow-identity"])]
            self.assertIn("| post-grow-identity | pre-grow | %+.4f ± " % (sum(diffs) / 2), report)
            joint = [b["val_ce"] - a["val_ce"] for a, b in
                     zip(res["arms"]["pre-joint"], res["arms"]["post-joint"])]
            inter = sum(g - j for g, j in zip(diffs, joint)) / 2
            self.assertIn("| pre-joint | post-joint | pre-grow | post-grow-identity | %+.4f ± "
                          % inter, report)
            self.assertIn("## Files", report)
            self.assertIn("[`results.json`](results.json)", report)
            self.assertTrue("[`curves_steps.svg`](curves_steps.svg)" in report or
                            "`curves_steps.svg`: not drawn" in report, report)
            p["interactions"] = [["pre-joint", "post-joint"]]
            write(preset, p)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("interactions[0] must list 4 arms", r.stderr)
            del p["interactions"]
            new["train"] = {"decay_fraction": 0.5}
            p["arms"][1] = new
            write(preset, p)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)  # the preset's shape is wsd: replaced
            p["train"]["lr_shape"] = "cosine"
            del p["train"]["decay_fraction"]
            write(preset, p)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arms[1].train.decay_fraction needs lr_shape wsd", r.stderr)
            write(os.path.join(d, "bad.json"), {"name": "b", "arms": ["pre-grow"],
                                                "compare": [["pre-grow", "post-grow"]]})
            r = run("--preset", os.path.join(d, "bad.json"), "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("compare[0][1] must name one of the preset's arms, not post-grow",
                          r.stderr)


class Statistics(unittest.TestCase):
    def test_results_json_statistics_and_baseline(self):
        """results.json carries each run's seed, the comparisons and
        interactions with their intervals and verdicts as report.md prints
        them, the verdict table's rows, and the unigram baseline with the
        arms that did not learn (issue 39)."""
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, ["pre-joint", "post-joint", "pre-grow", "post-grow"],
                                     [["pre-grow", "post-grow"]])
            with open(preset) as f:
                p = json.load(f)
            p["interactions"] = [["pre-joint", "post-joint", "pre-grow", "post-grow"]]
            p["train"]["final_eval_batches"] = 0  # the whole held-out text, as the baseline below
            write(preset, p)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            res = results(out)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            for runs in res["arms"].values():
                self.assertEqual([x["seed"] for x in runs], [1, 2])
            ce = {a: [x["val_ce"] for x in runs] for a, runs in res["arms"].items()}
            t95, t90 = 12.706, 6.314  # df 1

            def check(entry, diffs):
                n = len(diffs)
                mean = sum(diffs) / n
                sd = (sum((x - mean) ** 2 for x in diffs) / (n - 1)) ** 0.5
                self.assertEqual(entry["n"], n)
                self.assertAlmostEqual(entry["mean"], mean, places=12)
                self.assertAlmostEqual(entry["sd"], sd, places=12)
                half = t95 * sd / n ** 0.5
                self.assertAlmostEqual(entry["half_width_95"], half, places=9)
                for got, want in zip(entry["ci95"], (mean - half, mean + half)):
                    self.assertAlmostEqual(got, want, places=9)
                for got, want in zip(entry["ci90"], (mean - t90 * sd / n ** 0.5,
                                                     mean + t90 * sd / n ** 0.5)):
                    self.assertAlmostEqual(got, want, places=9)
                self.assertIn(" | %d | %s |" % (n, entry["verdict"]), report)
                self.assertTrue(entry["verdict"].startswith(entry["verdict_kind"]), entry)

            cmp = [(c["from"], c["reference"], c["arm"]) for c in res["comparisons"]]
            self.assertEqual(cmp, [("table 1", "pre-joint", "post-joint"),
                                   ("table 1", "pre-grow", "post-grow"),
                                   ("preset", "pre-grow", "post-grow")])
            for c in res["comparisons"]:
                diffs = [b - a for a, b in zip(ce[c["reference"]], ce[c["arm"]])]
                if c["from"] == "preset":
                    check(c, diffs)
                else:  # Table 1's verdict cell, then the half margin's
                    self.assertIn(" | %s | " % c["verdict"], report)
            self.assertEqual([(i["from"], i["arms"]) for i in res["interactions"]],
                             [("table 1", p["interactions"][0]), ("preset", p["interactions"][0])])
            q = p["interactions"][0]
            inter = [(g1 - g0) - (j1 - j0) for j0, j1, g0, g1 in
                     zip(ce[q[0]], ce[q[1]], ce[q[2]], ce[q[3]])]
            check(res["interactions"][1], inter)
            self.assertAlmostEqual(res["interactions"][0]["mean"], sum(inter) / 2, places=12)
            # the verdict table's rows, cell for cell
            table = report.split("| finding | paper | ours | verdict | p (Holm) |\n"
                                 "|---|---|---|---|---|\n")[1]
            rows = [line[2:-2].split(" | ") for line in table.split("\n\n")[0].splitlines()]
            self.assertEqual([[v["finding"], v["paper"], v["ours"], v["verdict"], v["p"]]
                              for v in res["verdicts"]], rows)
            self.assertEqual(res["verdicts"][0]["finding"], "joint: post ≈ pre")
            # the baseline: byte frequencies of the training text on the held-out
            # text's bytes but its form feeds (each document's row-start token
            # is an input, never a target)
            b = res["baseline"]
            with open(os.path.join(d, "train.txt"), "rb") as f:
                train = f.read()
            with open(os.path.join(d, "val.txt"), "rb") as f:
                val = f.read()
            counts = [train.count(bytes([k])) + 1 for k in range(256)]
            counts[12] = 1  # the form feed separates documents: no target
            val = val.replace(b"\f", b"")
            rough = -sum(math.log(counts[c] / (sum(counts) + 1)) for c in val) / len(val)
            self.assertLess(abs(b["unigram_ce"] - rough), 1e-3, (b["unigram_ce"], rough))
            self.assertEqual(b["margin"], 0.1)
            self.assertAlmostEqual(b["threshold"], b["unigram_ce"] - 0.1, places=12)
            flagged = [a for a in res["arms"]
                       if not sum(ce[a]) / 2 < b["unigram_ce"] - b["margin"]]
            self.assertEqual(b["did_not_learn"], flagged)
            self.assertTrue(flagged)  # 4 steps from a random init learn nothing
            for a in res["arms"]:
                self.assertEqual(res["arm_summaries"][a]["did_not_learn"], a in flagged)
                self.assertAlmostEqual(res["arm_summaries"][a]["mean"], sum(ce[a]) / 2, places=12)
                self.assertEqual(", **did not learn** | 2 |" in
                                 next(x for x in report.splitlines() if x.startswith("| %s | " % a)),
                                 a in flagged)
            self.assertIn("Baseline: the unigram CE of the held-out text is **%.4f** nats/byte"
                          % b["unigram_ce"], report)
            self.assertIn("here these did not learn: `%s` (" % flagged[0], report)


class Designs(unittest.TestCase):
    """A preset's design block: factors with labelled levels become arms, each
    factor's comparisons and each pair's interactions, labelled in the
    report and results.json with the user's words; the paper's rows and
    numbers appear only where the paper's arms are."""

    def design_study(self, d, design, arms=None):
        preset = tiny_arms_study(d, arms or [])
        with open(preset) as f:
            p = json.load(f)
        if not arms:
            del p["arms"]
        p["design"] = design
        write(preset, p)
        return preset

    FACTORS = [{"name": "placement", "key": "placement", "levels": ["pre", "post", "peri"]},
               {"name": "init", "levels": [{"label": "random", "set": {"block_init": "random"}},
                                          {"label": "copy", "set": {"block_init": "copy"}}]}]

    def test_a_design_runs_and_reports_in_its_own_words(self):
        with tempfile.TemporaryDirectory() as d:
            preset = self.design_study(d, {"base": {"schedule": "grow"}, "factors": self.FACTORS})
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            names = [line.split(":")[0][4:] for line in r.stdout.splitlines()
                     if line.startswith("arm ")]
            self.assertEqual(names, ["pre-random", "pre-copy", "post-random", "post-copy",
                                     "peri-random", "peri-copy"])
            self.assertIn("phase 1: 4 steps, 2 active, train_from 0, reset 1, block_init copy",
                          r.stdout)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "2")
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("Factors: placement (pre, the reference, post, peri); init (random, "
                          "the reference, copy)", report)
            self.assertIn("| placement: peri - pre | init copy | peri-copy | pre-copy |", report)
            self.assertIn("| init: copy - random | placement post | post-copy | post-random |",
                          report)
            self.assertIn("| placement (post - pre) x init (copy - random) | pre-random | "
                          "post-random | pre-copy | post-copy |", report)
            # no row of the paper's main arms, and its number nowhere beside the design's
            self.assertNotIn("| not run |", report)
            self.assertNotIn("-0.0332", report.split("## The design")[1].split("## Loss")[0])
            self.assertNotIn("## Table 1 analogue", report)
            self.assertNotIn("## Controls", report)
            self.assertNotIn("With one seed there is no interval", report)
            # the grow pairs pre-X / post-X keep the paper's mechanism rows
            self.assertIn("| loss jump at the first append, pre-random / post-random", report)
            res = results(out)
            labels = [c.get("label") for c in res["comparisons"] if c["from"] == "design"]
            self.assertEqual(len(labels), 7)
            self.assertIn("placement: post - pre | init random", labels)
            inter = [c for c in res["interactions"] if c["from"] == "design"]
            self.assertEqual([c["label"] for c in inter],
                             ["placement (post - pre) x init (copy - random)",
                              "placement (peri - pre) x init (copy - random)"])
            # the design itself is not part of a run's settings: adding a level keeps the runs
            factors = json.loads(json.dumps(self.FACTORS))
            factors[1]["levels"].append({"label": "identity", "set": {"block_init": "identity"}})
            preset = self.design_study(d, {"base": {"schedule": "grow"}, "factors": factors})
            r = run("--preset", preset, "--out", out, "--seeds", "2", "--estimate")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("for 6 runs ", r.stderr)

    def test_a_listed_subset_and_a_sweep(self):
        """design.arms lists the cells; a factor's levels may be values of any arm key
        (train.lr here): the labels become names."""
        with tempfile.TemporaryDirectory() as d:
            preset = self.design_study(d, {
                "base": {"schedule": "joint"},
                "factors": [self.FACTORS[0], {"name": "lr", "key": "train.lr",
                                              "levels": [0.001, 0.003]}],
                "arms": [["pre", "0.001"], ["post", "0.001"], ["pre", "0.003"]]})
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            names = [line.split(":")[0][4:] for line in r.stdout.splitlines()
                     if line.startswith("arm ")]
            self.assertEqual(names, ["pre-0.001", "post-0.001", "pre-0.003"])
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out, "--seeds", "1")
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| lr: 0.003 - 0.001 | placement pre | pre-0.003 | pre-0.001 |", report)
            self.assertNotIn("The design's interactions", report)  # post-0.003 is not a cell
            self.assertIn("With one seed there is no interval", report)

    def test_design_errors_name_their_place(self):
        cases = [({"factors": [{"name": "placement", "levls": ["pre"]}]},
                  "unknown key 'design.factors[0].levls'"),
                 ({"factors": [{"name": "placement", "key": "placement", "levels": ["pre"]}]},
                  "design.factors[0].levels must be a list of 2 to 8 levels"),
                 ({"factors": [{"name": "p", "key": "placement", "levels": ["pre", "pre"]}]},
                  "the label 'pre' is given twice"),
                 ({"factors": [{"name": "p", "key": "placement", "levels": ["pre", "a b"]}]},
                  "the label 'a b' is not allowed"),
                 ({"factors": [{"name": "p", "levels": ["pre", "post"]}]},
                  "or the factor needs a key"),
                 ({"factors": [self.FACTORS[0]], "arms": [["pre"], ["mid"]]},
                  "design.arms[1][0] must be a level of placement"),
                 ({"factors": [self.FACTORS[0]], "base": {"placement": "pre"}},
                  "sets 'placement' twice"),
                 ({"factors": [{"name": "p", "key": "placement", "levels": ["pre", "post"]}],
                   "base": {"schedule": "grow", "shedule": 1}},
                  "unknown key 'design.base.shedule'"),
                 # issue 48 part 6: an empty key crashed --check (exit 139, no message)
                 ({"factors": [{"name": "p", "key": "", "levels": ["pre", "post"]}]},
                  "design.factors[0].key must be an arm key"),
                 ({"factors": [{"name": "lr", "key": "train..lr", "levels": [0.001, 0.003]}]},
                  "design.factors[0].key must be an arm key"),
                 ({"factors": [{"name": "i", "levels": [
                     {"label": "a", "set": {"": "copy"}},
                     {"label": "b", "set": {"block_init": "copy"}}]}]},
                  "the key '' is not an arm key"),
                 # levels by value: 0.001 and 1e-3 made two identical arms
                 ({"base": {"schedule": "joint"},
                   "factors": [{"name": "lr", "key": "train.lr", "levels": [0.001, 1e-3]}]},
                  "design.factors[0].levels[1]: the label '0.001' is given twice"),
                 ({"base": {"schedule": "joint"}, "factors": [{"name": "lr", "levels": [
                     {"label": "a", "set": {"train.lr": 0.002}},
                     {"label": "b", "set": {"train": {"lr": 2e-3}}}]}]},
                  "design.factors[0].levels[1] ('b') sets what levels[0] ('a') sets"),
                 # a label longer than a label holds was cut at 199 bytes without a word
                 ({"base": {"schedule": "grow"}, "factors": [
                     {"name": "a" * 31, "levels": [
                         {"label": "x" * 20, "set": {"block_init": "random"}},
                         {"label": "y" * 20, "set": {"block_init": "copy"}}]},
                     {"name": "b" * 31, "levels": [
                         {"label": "prenorm", "set": {"placement": "pre"}},
                         {"label": "postnrm", "set": {"placement": "post"}}]},
                     {"name": "c" * 31, "levels": [
                         {"label": "lrsmall", "set": {"train": {"lr": 0.001}}},
                         {"label": "lrlarge", "set": {"train": {"lr": 0.003}}}]},
                     {"name": "d" * 31, "levels": [
                         {"label": "wdzero0", "set": {"train": {"weight_decay": 0}}},
                         {"label": "wdsmall", "set": {"train": {"weight_decay": 0.01}}}]}]},
                  "label '" + "a" * 31 + ": " + "y" * 20 + " - " + "x" * 20 + " | " + "b" * 31
                  + " prenorm, " + "c" * 31 + " lrsmall, " + "d" * 31 + " wdzero0' is 200 bytes, "
                  "more than the 199 a label holds")]
        with tempfile.TemporaryDirectory() as d:
            for design, message in cases:
                r = run("--preset", self.design_study(d, design), "--check")
                self.assertEqual(r.returncode, 1, (design, r.stdout))
                self.assertIn(message, r.stderr)
            # a design's arm may not take a listed arm's name
            r = run("--preset", self.design_study(
                d, {"base": {"schedule": "grow"}, "factors": [
                    {"name": "p", "key": "placement", "levels": ["pre", "post"]},
                    {"name": "s", "key": "block_init", "levels": ["random", "copy"]}]},
                arms=[{"name": "pre-random", "from": "pre-grow"}]), "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arm 'pre-random' is listed twice", r.stderr)

    def test_an_arm_may_start_from_a_named_arm(self):
        with tempfile.TemporaryDirectory() as d:
            preset = tiny_arms_study(d, [{"name": "post-grow-copy", "from": "post-grow",
                                          "block_init": "copy"}])
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm post-grow-copy: post-norm", r.stdout)
            self.assertIn("block_init copy", r.stdout)
            r = run("--preset", tiny_arms_study(d, [{"name": "x", "block_init": "copy"}]),
                    "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arms[0] needs a placement (pre, post or peri), or \"from\"", r.stderr)
            r = run("--preset", tiny_arms_study(d, [{"name": "x", "from": "mid-grow"}]),
                    "--check")
            self.assertEqual(r.returncode, 1)
            self.assertIn("arms[0].from = 'mid-grow' is not a named arm", r.stderr)

if __name__ == "__main__":
    BIN, PRESETS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1] + sys.argv[3:], verbosity=2)
