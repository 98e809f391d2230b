"""The reproduction program as a user drives it: every shipped preset
validates, a typo in a preset is an error naming its key path, paths resolve
relative to the preset, and a tiny study on a generated corpus runs end to end
and writes the verdict table, the trajectories and the per-step losses.

usage: test_reproduce.py REPRODUCE_BINARY PRESETS_DIR
"""
import csv
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tiny_study import tiny_study

BIN = PRESETS = None


def run(*args, cwd=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd, timeout=600)


def write(path, obj):
    with open(path, "w") as f:
        json.dump(obj, f)


class Presets(unittest.TestCase):
    def test_shipped_presets_validate(self):
        names = sorted(n for n in os.listdir(PRESETS) if n.endswith(".json"))
        self.assertIn("regime.json", names)
        for name in names:
            r = run("--preset", os.path.join(PRESETS, name), "--check")
            self.assertEqual(r.returncode, 0, name + ": " + r.stderr)
            self.assertIn("arm ", r.stdout)

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

    def test_arms_subset(self):
        preset = os.path.join(PRESETS, "regime.json")
        r = run("--preset", preset, "--arms", "post-grow,pre-joint", "--check")
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
                 ([{"name": "a", "placement": "pre", "schedule": "grow", "data": "again"}],
                  "arms[0].data")]
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
                          "block_init": "copy", "data": "continue"}]})
            r = run("--preset", os.path.join(d, "p.json"), "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = r.stdout
            self.assertIn("train " + os.path.join(d, "corpus/train.txt"), out)
            self.assertIn("val /abs/val.txt", out)
            # std = gain / sqrt(d_model); LR in the paper's proportion (1e-4 at 0.02)
            self.assertIn("student init_std 0.16 (gain 1.28), lr 0.0008", out)
            arms = out.split("arm ")[1:]
            grow, freeze, total, peri = arms
            self.assertIn("phase 1: 10 steps, 4 active, train_from 0", grow)
            self.assertIn("rewind_data 1", grow)  # the paper's shard replay
            self.assertIn("phase 1: 10 steps, 4 active, train_from 2", freeze)
            self.assertIn("train_boundary 0", freeze)  # freeze means frozen
            self.assertNotIn("rewind_data 1", total)  # budget controls read fresh data
            self.assertIn("block_init copy", peri)
            self.assertNotIn("rewind_data 1", peri)


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
                        "boundary tokens grow massive"):
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


TIMING_KEYS = ("wall_seconds", "seconds", "tokens_per_s")  # differ between any two runs


def without_timings(o):
    if isinstance(o, dict):
        return {k: without_timings(v) for k, v in o.items() if k not in TIMING_KEYS}
    if isinstance(o, list):
        return [without_timings(x) for x in o]
    return o


class Jobs(unittest.TestCase):
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

    def test_bad_jobs(self):
        for bad in ("0", "-1", "x", "257"):
            r = run("--preset", os.path.join(PRESETS, "quick.json"), "--check", "--jobs", bad)
            self.assertEqual(r.returncode, 2, (bad, r.stderr))
            self.assertIn("jobs", r.stderr)


if __name__ == "__main__":
    BIN, PRESETS = sys.argv[1], sys.argv[2]
    unittest.main(argv=sys.argv[:1], verbosity=2)
