"""Issue 50 part 1: a design can vary any setting an arm's run uses (the
loss's alpha, gamma, tau and KL direction, the clip, the phase length, the
recipe, the rewind), refusals name the path as the user wrote it, every
interaction order the design allows is reported (the 3-way as the difference
of 2-way interactions across the last factor's levels, paired by seed) in
report.md and results.json, the header lists every setting and each arm's
where they differ, a row that rests on an arm that did not learn reads "not
applicable (did not learn)", results.json's preset reruns the study, and a
numeric level reads as its value.

usage: test_any_setting.py REPRODUCE_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tiny_study import results, tiny_study, write

BIN = None


CROSS = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "examples",
                     "reproduce", "cross.py")


def cross_reads(test, out):
    """examples/reproduce/cross.py reads the study reproduce wrote in out."""
    r = subprocess.run([sys.executable, CROSS, "--out", os.path.join(out, "cross"), out],
                       capture_output=True, text=True, timeout=120)
    test.assertEqual(r.returncode, 0, r.stderr)


def run(*args, cwd=None, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, cwd=cwd, timeout=600,
                          env=env)


LOSS = {"name": "loss", "levels": [{"label": "kd", "set": {"train": {"alpha": 0.7}}},
                                   {"label": "ce", "set": {"train": {"alpha": 0, "gamma": 1}}}]}
THREE = {"factors": [{"name": "placement", "key": "placement", "levels": ["pre", "post"]},
                     {"name": "schedule", "key": "schedule", "levels": ["joint", "grow"]},
                     LOSS]}


def study(d, design, train=None, arms=None, seeds=2):
    """A tiny study (a 2-block student, 4 x 16 rows) of the design."""
    preset = tiny_study(d, "any-setting", 40,
                        train or {"steps_per_phase": 4, "warmup": 1, "eval_every": 4,
                                  "eval_batches": 1, "final_eval_batches": 1},
                        arms or [])
    with open(preset) as f:
        p = json.load(f)
    if not arms:
        del p["arms"]
    p["design"] = design
    p["seeds"] = seeds
    write(preset, p)
    return preset


class AnySetting(unittest.TestCase):
    def test_three_factors_loss_and_every_order(self):
        """placement x schedule x loss as one design: the 3-way row is the
        difference of the placement x schedule interactions across the loss's
        levels, paired by seed, in report.md and results.json; the header
        states the loss; results.json's preset reruns the study."""
        with tempfile.TemporaryDirectory() as d:
            preset = study(d, THREE)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            res = results(out)
            # the header: every setting, and the arms whose loss differs
            self.assertIn("with alpha 0.7, gamma 0.3, tau 1, forward KL(teacher || student)",
                          report)
            self.assertIn("- `pre-joint-ce`: ", report)
            self.assertIn("loss alpha 0, gamma 1 (cross-entropy only)", report)
            self.assertNotIn("- `pre-joint-kd`: cosine LR 0.003 after 1 warmup steps, weight "
                             "decay 0; loss", report)
            # each arm's settings as run
            self.assertEqual(res["arm_settings"]["post-grow-ce"]["alpha"], 0)
            self.assertEqual(res["arm_settings"]["post-grow-ce"]["gamma"], 1)
            self.assertEqual(res["arm_settings"]["post-grow-kd"]["alpha"], 0.7)
            # the 3-way row
            label = "placement (post - pre) x schedule (grow - joint) x loss (ce - kd)"
            self.assertIn("### The design's interactions of order 3 and more", report)
            row = next(line for line in report.splitlines() if line.startswith("| " + label))
            three = [i for i in res["interactions"] if i.get("order") == 3]
            self.assertEqual(len(three), 1)
            t = three[0]
            self.assertEqual(t["label"], label)
            self.assertEqual(t["from"], "design")
            ce = {a: [x["val_ce"] for x in runs] for a, runs in res["arms"].items()}

            def i2(loss):  # placement x schedule at one level of the loss, per seed
                return [(g1 - g0) - (j1 - j0) for j0, j1, g0, g1 in zip(
                    ce["pre-joint-" + loss], ce["post-joint-" + loss], ce["pre-grow-" + loss],
                    ce["post-grow-" + loss])]
            per_seed = [c - k for c, k in zip(i2("ce"), i2("kd"))]
            self.assertAlmostEqual(t["mean"], sum(per_seed) / 2, places=12)
            self.assertEqual(t["n"], 2)
            self.assertEqual(sorted(t["arms"]), sorted(ce))
            self.assertEqual(sum(t["signs"]), 0)
            for arm, sign in zip(t["arms"], t["signs"]):
                self.assertEqual(sign, -1 if arm.count("pre") + arm.count("joint") +
                                 arm.count("kd") in (1, 3) else 1, arm)
            self.assertIn("%+.4f ± " % t["mean"], row)
            self.assertIn("| 2 | %s |" % t["verdict"], row)
            # the 2-way rows at each level of the third factor are there too
            two = [i["label"] for i in res["interactions"] if i.get("order") == 2]
            self.assertIn("placement (post - pre) x schedule (grow - joint) | loss ce", two)
            self.assertIn("placement (post - pre) x schedule (grow - joint) | loss kd", two)
            # results.json's preset is the preset as written: it reruns the study
            self.assertIn("design", res["preset"])
            self.assertNotIn("arms", res["preset"])
            self.assertEqual(len(res["arms_as_run"]), 8)
            r = run("--preset", os.path.join(out, "results.json"), "--out", out,
                    "--report-only")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("not used", r.stderr)
            self.assertNotIn("made with other settings", r.stderr)
            cross_reads(self, out)  # its order-3 row (8 arms) among them

    def test_did_not_learn_is_carried_to_every_row(self):
        """4 steps from a random init learn nothing: every comparison and
        interaction, of every order, reads not applicable, never not
        reproduced, and names the arms; no p, and none in the Holm family."""
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")
            preset = study(d, THREE, arms=["pre-joint", "post-joint"])
            with open(preset) as f:
                p = json.load(f)
            p["compare"] = [["pre-joint", "post-joint"]]
            write(preset, p)
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            res = results(out)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertTrue(res["baseline"]["did_not_learn"])
            for kind in ("comparisons", "interactions"):
                for c in res[kind]:
                    self.assertTrue(c["did_not_learn"], c)
                    self.assertTrue(c["verdict"].startswith("not applicable (did not learn)"), c)
                    self.assertEqual(c["verdict_kind"], "not applicable")
                    self.assertIsNone(c["p"])
            joint = next(v for v in res["verdicts"] if v["finding"] == "joint: post ≈ pre")
            self.assertEqual(joint["verdict"],
                             "not applicable (did not learn): pre-joint, post-joint")
            self.assertEqual(joint["p"], "n/a")
            self.assertNotIn("| not reproduced", report)
            self.assertIn("| 2 | not applicable (did not learn): pre-joint, post-joint | not "
                          "applicable | n/a |", report)
            cross_reads(self, out)

    def test_every_training_setting_is_an_arms_own(self):
        """clip, tau, the KL's direction, the phase length and the rewind per
        arm (and so per level); the runs keyed by them, the others kept."""
        with tempfile.TemporaryDirectory() as d:
            design = {"base": {"schedule": "grow"}, "factors": [
                {"name": "placement", "key": "placement", "levels": ["pre", "post"]},
                {"name": "recipe", "levels": [
                    {"label": "base", "set": {"train": {"warmup": 1}}},
                    {"label": "other", "set": {"rewind_data": 0, "train": {
                        "clip": 1.0, "tau": 2, "kl_direction": "reverse",
                        "steps_per_phase": 6, "weight_decay": 0.1, "warmup": 2,
                        "lr": 0.002}}}]}]}
            preset = study(d, design, seeds=1)
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm post-other: post-norm", r.stdout)
            at = r.stdout.index("arm post-other")
            self.assertIn("phase 1: 6 steps, 2 active, train_from 0, reset 1, block_init random, "
                          "rewind_data 0", r.stdout[at:])
            at = r.stdout.index("arm post-base")
            self.assertIn("phase 1: 4 steps", r.stdout[at:])
            out = os.path.join(d, "out")
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("- `post-other`: cosine LR 0.002 after 2 warmup steps, weight decay "
                          "0.1; 6 steps per phase; gradient clip 1; tau 2; reverse KL(student || "
                          "teacher)\n", report)
            self.assertIn("Data rewound to the shard's start at every phase: `pre-base`, "
                          "`post-base`; read on at phase starts (no rewind): `pre-other`, "
                          "`post-other`.", report)
            res = results(out)
            s = res["arm_settings"]["post-other"]
            self.assertEqual((s["clip"], s["tau"], s["kl_direction"], s["steps_per_phase"],
                              s["rewind_data"]), (1.0, 2, "reverse", 6, False))
            # a level changed: its arms run again, the other level's are kept
            design["factors"][1]["levels"][1]["set"]["train"]["tau"] = 3
            with open(preset) as f:
                p = json.load(f)
            write(preset, dict(p, design=design))
            r = run("--preset", preset, "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("made with other settings", r.stderr)
            self.assertIn("tau 2 -> 3", r.stderr)
            self.assertIn("2 runs kept in", r.stderr)

    def test_refusals_name_the_path_as_written(self):
        cases = [
            # a level's set: the path under design, not arms[N]
            ({"factors": [{"name": "p", "key": "placement", "levels": ["pre", "post"]},
                          {"name": "loss", "levels": [
                              {"label": "kd", "set": {"schedule": "grow"}},
                              {"label": "ce", "set": {"schedule": "grow",
                                                      "train": {"alpah": 0}}}]}]},
             "unknown key 'design.factors[1].levels[1].set.train.alpah'"),
            ({"base": {"schedule": "grow", "shedule": 1},
              "factors": [{"name": "p", "key": "placement", "levels": ["pre", "post"]}]},
             "unknown key 'design.base.shedule'"),
            # a factor of one key's values: the level, and its key
            ({"base": {"schedule": "grow", "placement": "pre"},
              "factors": [{"name": "tau", "key": "train.tau", "levels": [1, 0]}]},
             "preset: design.factors[0].levels[1] (its key train.tau, in the design's arm 0) "
             "must be in 0.01..100"),
            ({"base": {"schedule": "grow", "placement": "pre"},
              "factors": [{"name": "kl", "key": "train.kl_direction",
                           "levels": ["forward", "sideways"]}]},
             "design.factors[0].levels[1] (its key train.kl_direction, in the design's arm "
             "sideways) = 'sideways' is not one of: forward, reverse"),
            ({"base": {"schedule": "grow"},
              "factors": [{"name": "a", "levels": [
                  {"label": "x", "set": {"placement": "pre", "train": {"alpha": 0.5}}},
                  {"label": "y", "set": {"placement": "pre", "train": {"alpha": -1}}}]}]},
             "preset: design.factors[0].levels[1].set.train.alpha must be finite and >= 0"),
        ]
        with tempfile.TemporaryDirectory() as d:
            for design, message in cases:
                r = run("--preset", study(d, design), "--check")
                self.assertEqual(r.returncode, 1, (design, r.stdout))
                self.assertIn(message, r.stderr)
                self.assertNotIn("arms[", r.stderr)

    def test_numeric_levels_read_as_their_value(self):
        with tempfile.TemporaryDirectory() as d:
            preset = study(d, {"base": {"schedule": "joint", "placement": "pre"},
                               "factors": [{"name": "lr", "key": "train.lr",
                                            "levels": [0.001, 0.003]}]})
            r = run("--preset", preset, "--check")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("arm 0.001: pre-norm", r.stdout)
            self.assertIn("arm 0.003: pre-norm", r.stdout)
            self.assertNotIn("0p00", r.stdout)


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)
