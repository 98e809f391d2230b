"""examples/reproduce/cross.py on made-up studies whose answers are known: the
trend rows pair by seed, and the dose-response slope is the line the points
lie on.

usage: test_cross.py CROSS_PY
"""
import json
import shutil
import os
import subprocess
import sys
import tempfile
import unittest

CROSS = None



def run_record(val, ratio, dce, steps=10):
    # the trajectory points where the appended blocks read: ends of phases 0 and 1
    traj = [{"step": steps, "active_layers": 1, "rms_boundary": ratio, "rms_regular": 1.0},
            {"step": 2 * steps, "active_layers": 2, "rms_boundary": ratio, "rms_regular": 1.0}]
    return {"val_ce": val, "trajectory": traj, "block_removal": [{"dce": 1.0}, {"dce": dce}]}


def study(d, name, steps, runs, extra_arms=()):
    os.makedirs(d)
    res = {"preset": {"name": name, "train": {"steps_per_phase": steps},
                      "student": {"block_size": 1},
                      "arms": ["pre-joint", "post-joint", "pre-grow", "post-grow"] +
                      list(extra_arms)},
           "arms": runs}
    with open(os.path.join(d, "results.json"), "w") as f:
        json.dump(res, f)


def load_cross():
    import importlib.util
    spec = importlib.util.spec_from_file_location("cross", CROSS)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


class Cross(unittest.TestCase):
    def cross_over(self, d, res):
        """Write res as study d/s's results.json, run cross.py on it alone into
        d/out, and return d/out."""
        with open(os.path.join(d, "s", "results.json"), "w") as f:
            json.dump(res, f)
        out = os.path.join(d, "out")
        r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s")],
                           capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        return out

    def cross_with_family(self, d, family):
        """Run cross.py --family on study d/s into d/out, with family written
        to d/family.json; return d/out and its cross.json."""
        with open(os.path.join(d, "family.json"), "w") as f:
            json.dump(family, f)
        out = os.path.join(d, "out")
        r = subprocess.run([sys.executable, CROSS, "--family", os.path.join(d, "family.json"),
                            "--out", out, os.path.join(d, "s")], capture_output=True, text=True)
        self.assertEqual(r.returncode, 0, r.stderr)
        with open(os.path.join(out, "cross.json")) as f:
            return out, json.load(f)

    def plain_study(self, d):
        """Study d/s: the 4 main arms, 2 seeds of one record; its results.json."""
        runs = {a: [run_record(2.0, 1, 0) for _ in range(2)]
                for a in ("pre-joint", "post-joint", "pre-grow", "post-grow")}
        study(os.path.join(d, "s"), "s", 10, runs)
        with open(os.path.join(d, "s", "results.json")) as f:
            return json.load(f)

    def test_known_answers(self):
        with tempfile.TemporaryDirectory() as d:
            # y = post-grow - pre-grow = 0.5 * x - 0.5 exactly, for x = 1, 2, 3
            for k, steps in enumerate((10, 20)):
                runs = {"pre-joint": [run_record(2.0, 1, 0) for _ in range(3)],
                        "post-joint": [run_record(2.1 + 0.01 * i, 1, 0) for i in range(3)],
                        "pre-grow": [run_record(2.0, x, 0.1 * x, steps) for x in (1, 2, 3)],
                        "post-grow": [run_record(2.0 + 0.5 * x - 0.5, 1, 0) for x in (1, 2, 3)],
                        # an intervention far off the line: paired with post-grow, kept out
                        # of the fit
                        "pre-bnorm-grow": [run_record(1.0, 9, 0.2, steps) for _ in range(3)]}
                bnorm = {"name": "pre-bnorm-grow", "placement": "pre", "schedule": "grow",
                         "block_norm": 1}
                study(os.path.join(d, "s%d" % k), "s%d" % k, steps, runs, [bnorm])
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s0"),
                                os.path.join(d, "s1")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                res = json.load(f)
            self.assertEqual([t["steps_per_phase"] for t in res["trend"]], [10, 20])
            joint = res["trend"][0]["joint"]
            self.assertAlmostEqual(joint["mean"], 0.11)
            self.assertEqual(joint["n"], 3)
            self.assertAlmostEqual(res["trend"][0]["I"]["mean"], 0.5 - 0.11)
            self.assertEqual(len(res["points"]), 6)
            self.assertAlmostEqual(res["fit_y_on_x"]["slope"], 0.5)
            self.assertAlmostEqual(res["fit_y_on_x"]["half"], 0.0, places=9)
            self.assertAlmostEqual(res["fit_z_on_x"]["slope"], 0.1)
            self.assertEqual(len(res["intervention_points"]), 6)
            iv = res["interventions"][0]
            self.assertEqual((iv["pair"], iv["seeds"]), ("pre-bnorm-grow / post-grow", 3))
            # post-grow - pre-bnorm-grow per seed: 2.0 + 0.5 x - 0.5 - 1.0, x = 1, 2, 3
            self.assertAlmostEqual(iv["y"]["mean"], 1.5)
            self.assertAlmostEqual(iv["x"]["mean"], 9.0)
            if shutil.which("gnuplot"):
                with open(os.path.join(out, "trend.csv")) as f:
                    rows = f.read().splitlines()
                self.assertEqual(len(rows), 3)
                self.assertTrue(rows[1].startswith("paper's optimizer,10,0.110000,"))
            with open(os.path.join(out, "report.md")) as f:
                # each seed has one x in both studies: no slope within a seed
                self.assertIn("| y on x | n/a | 0 | +0.5000 ± 0.0000 | 6 |", f.read())
            self.assertIsNone(res["fit_y_on_x_seeds_as_clusters"]["slope"])
            self.assertFalse([n for n in os.listdir(out) if n.endswith(".tmp")])


    def test_seeds_as_clusters_and_the_change_paired_by_seed(self):
        """Seed i's points lie on y = c_i + b_i x with b = 0.4, 0.5, 0.6: the
        clustered slope is their mean with a t interval over 3 seeds (2 df),
        not over the 6 points; the change from the shorter phases to the
        longer is paired by seed."""
        with tempfile.TemporaryDirectory() as d:
            b = (0.4, 0.5, 0.6)
            for k, steps in enumerate((10, 20)):
                xs = [1.0 + k + 0.5 * i for i in range(3)]  # seed i's x differs by study
                runs = {"pre-joint": [run_record(2.0, 1, 0) for _ in range(3)],
                        "post-joint": [run_record(2.1 + 0.01 * i + 0.1 * k, 1, 0)
                                       for i in range(3)],
                        "pre-grow": [run_record(2.0, xs[i], 0.1, steps) for i in range(3)],
                        "post-grow": [run_record(2.0 + 0.1 * i + b[i] * xs[i], 1, 0)
                                      for i in range(3)]}
                study(os.path.join(d, "s%d" % k), "s%d" % k, steps, runs)
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s0"),
                                os.path.join(d, "s1")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                res = json.load(f)
            cl = res["fit_y_on_x_seeds_as_clusters"]
            self.assertEqual(cl["seeds"], 3)
            for got, want in zip(cl["per_seed"], b):
                self.assertAlmostEqual(got, want)
            self.assertAlmostEqual(cl["slope"], 0.5)
            self.assertAlmostEqual(cl["half"], 4.303 * 0.1 / 3 ** 0.5)
            ch = res["change_with_training_length"]
            self.assertEqual(len(ch), 1)
            self.assertEqual((ch[0]["from"], ch[0]["to"], ch[0]["seeds"]), ("s0", "s1", 3))
            # joint gap: +0.1 more at the longer phases, the same for every seed
            self.assertAlmostEqual(ch[0]["joint"]["mean"], 0.1)
            self.assertAlmostEqual(ch[0]["joint"]["half"], 0.0, places=9)
            # grow gap moves by b_i (x_i one more): I by b_i - 0.1
            self.assertAlmostEqual(ch[0]["grow"]["mean"], 0.5)
            self.assertAlmostEqual(ch[0]["I"]["mean"], 0.4)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            # p: t = 0.5 / (0.1 / sqrt 3) = 8.66 on 2 df, two-sided 0.0131; sd 0: below any
            self.assertIn("| paper's optimizer | s0 (10 steps) | s1 (20 steps) | 3 | +0.1000 ± "
                          "0.0000, p < 0.0001 | +0.5000 ± 0.2484, p 0.0131 | +0.4000 ± 0.2484, "
                          "p 0.0202 |", report)
            self.assertAlmostEqual(ch[0]["grow"]["p"], 0.013072, places=5)
            self.assertIn("| y on x | +0.5000 ± 0.2484 | 3 |", report)
            # the changes are rows of the seeds-to-decide table too: the joint gap's
            # change is the same on every seed (sd 0), the grow gap's spreads by 0.1
            chg = {r["contrast"]: r for r in res["seeds_to_decide"]
                   if r["kind"] == "change with length"}
            self.assertEqual(chg["joint gap"]["seeds_needed"], 2)
            self.assertEqual(chg["joint gap"]["verdict"], "above 0")
            self.assertAlmostEqual(chg["grow gap"]["sd"], 0.1)
            # at sd 0.1: n with t(n - 1) 0.1 / sqrt(n) just below 0.0082, about 574
            n = chg["grow gap"]["seeds_needed"]
            sys.path.insert(0, os.path.dirname(CROSS))
            import cross
            self.assertLess(cross.t95(n - 1) * 0.1 / n ** 0.5, 0.0328 / 4)
            self.assertGreater(cross.t95(n - 2) * 0.1 / (n - 1) ** 0.5, 0.0328 / 4)
            self.assertTrue(560 < n < 590, n)

    def test_change_against_the_shortest_and_the_next_shorter(self):
        """Three lengths of one recipe (10, 20 and 40 steps): the 20 and the 40
        pair with the 10, and the 40 with the 20 as well; a second study at 10
        steps given later pairs with nothing. Seed i's grow gap is g_i at 10,
        2 g_i at 20, 5 g_i at 40, so each change is known."""
        with tempfile.TemporaryDirectory() as d:
            g = (0.01, 0.02, 0.04)
            names = []
            for k, (steps, m) in enumerate(((10, 1), (20, 2), (40, 5), (10, 9))):
                runs = {"pre-joint": [run_record(2.0, 1, 0) for _ in range(3)],
                        "post-joint": [run_record(2.0, 1, 0) for _ in range(3)],
                        "pre-grow": [run_record(2.0, 1, 0.1, steps) for _ in range(3)],
                        "post-grow": [run_record(2.0 + m * gi, 1, 0) for gi in g]}
                names.append("s%d" % k)
                study(os.path.join(d, names[-1]), names[-1], steps, runs)
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out] +
                               [os.path.join(d, n) for n in names],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                res = json.load(f)
            ch = {(c["from"], c["to"]): c for c in res["change_with_training_length"]}
            self.assertEqual(sorted(ch), [("s0", "s1"), ("s0", "s2"), ("s1", "s2")])
            for key, m in ((("s0", "s1"), 1), (("s0", "s2"), 4), (("s1", "s2"), 3)):
                self.assertEqual(ch[key]["seeds"], 3)
                self.assertAlmostEqual(ch[key]["grow"]["mean"], m * sum(g) / 3)
                self.assertAlmostEqual(ch[key]["I"]["mean"], m * sum(g) / 3)
                self.assertAlmostEqual(ch[key]["joint"]["mean"], 0.0)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| paper's optimizer | s1 (20 steps) | s2 (40 steps) | 3 | +0.0000 ± "
                          "0.0000, p 1.0000 | +0.0700 ± ", report)
            rows = [r for r in res["seeds_to_decide"] if r["kind"] == "change with length"]
            self.assertEqual(len(rows), 9)
            self.assertIn("s1 -> s2", {r["study"] for r in rows})

    def test_induced_dose(self):
        """Four-arm sets that differ only in massive_offset (K = 0, 4, 16) form
        the induced dose: per seed, I = -0.049 + b_i x with b = -0.004, -0.005,
        -0.006 and the grow gap flat at 0.001 (x = 1, 2, 4 at the three
        doses); the slopes are clustered by seed, the change across x's range
        is tested against the margin, and a set whose recipe differs too
        turns the dose off."""
        b = (-0.004, -0.005, -0.006)
        xs = {0: 1.0, 4: 2.0, 16: 4.0}

        def make(d, other_lr=False):
            runs, arms = {}, []
            for k, x in xs.items():
                suf = "" if k == 0 else "-k%d" % k
                runs["pre-joint" + suf] = [run_record(2.0, 1, 0) for _ in range(3)]
                runs["post-joint" + suf] = [run_record(2.05 - b[i] * x, 1, 0) for i in range(3)]
                runs["pre-grow" + suf] = [run_record(2.0, x, 0.01 * x, 10) for _ in range(3)]
                runs["post-grow" + suf] = [run_record(2.001, 1, 0) for _ in range(3)]
                for n in ("pre-joint", "post-joint", "pre-grow", "post-grow"):
                    arm = {"name": n + suf, "placement": n.split("-")[0],
                           "schedule": n.split("-")[1]}
                    if k:
                        arm["massive_offset"] = k
                    if other_lr and k == 16:
                        arm["train"] = {"lr": 0.1}
                    arms.append(arm)
            study(d, "dose", 10, runs)
            with open(os.path.join(d, "results.json")) as f:
                res = json.load(f)
            res["preset"]["arms"] = arms
            with open(os.path.join(d, "results.json"), "w") as f:
                json.dump(res, f)

        with tempfile.TemporaryDirectory() as d:
            make(os.path.join(d, "s"))
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                res = json.load(f)
            self.assertEqual(len(res["induced_dose"]), 1)
            dose = res["induced_dose"][0]
            self.assertEqual([row["K"] for row in dose["rows"]], [0, 4, 16])
            self.assertAlmostEqual(dose["rows"][2]["I"]["mean"], 0.001 - 0.05 - 0.005 * 4)
            fi = dose["fits"]["I"]
            for got, want in zip(fi["per_seed"], b):
                self.assertAlmostEqual(got, want)
            self.assertAlmostEqual(fi["slope"], -0.005)
            self.assertAlmostEqual(fi["half"], 4.303 * 0.001 / 3 ** 0.5)
            ch = dose["changes"]["I"]
            self.assertAlmostEqual(ch["span"], 3.0)
            self.assertAlmostEqual(ch["mean"], -0.015)
            self.assertAlmostEqual(ch["hi90"], -0.015 + 2.920 * 0.003 / 3 ** 0.5)
            self.assertTrue(ch["verdict"].startswith("below 0"), ch["verdict"])
            g = dose["changes"]["grow"]
            self.assertAlmostEqual(g["mean"], 0.0)
            # inside the margin (delta) is "within the paper's effect"; only inside half of
            # it is a row "equivalent", the one word that shows an absence
            self.assertTrue(g["verdict"].startswith("within the paper's effect"), g["verdict"])
            self.assertTrue(g["verdict_half"].startswith("equivalent"), g["verdict_half"])
            self.assertEqual(dose["changes"]["z"]["verdict"][:7], "above 0")
            self.assertNotIn("angle", dose["fits"])  # these records have no angle
            # the change in I across the dose, -0.012 -0.015 -0.018 by seed (sd 0.003):
            # 3 seeds give 4.303 * 0.003 / sqrt(3) = 0.0075, below the margin; 2 do not
            dc = {r["contrast"]: r for r in res["seeds_to_decide"]
                  if r["kind"] == "change across the induced dose"}
            self.assertEqual(sorted(dc), ["I", "grow gap", "joint gap"])
            self.assertAlmostEqual(dc["I"]["sd"], 0.003)
            self.assertEqual(dc["I"]["seeds_needed"], 3)
            with open(os.path.join(out, "report.md")) as f:
                self.assertIn("| 16 | 3 | 4.000 ± 0.000 |", f.read())
        with tempfile.TemporaryDirectory() as d:
            make(os.path.join(d, "s"), other_lr=True)
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s")],
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                self.assertEqual(json.load(f)["induced_dose"], [])

    def test_design_contrasts_in_their_labels(self):
        with tempfile.TemporaryDirectory() as d:
            res = self.plain_study(d)
            res["comparisons"] = [{"from": "design", "label": "init: copy - random | place pre",
                                   "n": 2, "mean": -0.0123, "half_width_95": 0.0456,
                                   "verdict": "inconclusive"},
                                  {"from": "preset", "n": 2, "mean": 1.0}]
            res["interactions"] = [{"from": "design", "label": "place (post - pre) x init "
                                    "(copy - random)", "n": 2, "mean": 0.5,
                                    "half_width_95": None, "verdict": "above 0"}]
            out = self.cross_over(d, res)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| s | comparison | init: copy - random \\| place pre | 2 | -0.0123 ± "
                          "0.0456 | inconclusive |", report)
            self.assertIn("| s | interaction | place (post - pre) x init (copy - random) | 2 | "
                          "+0.5000 | above 0 |", report)
            self.assertEqual(report.count("| s | comparison |"), 1)  # the preset's own stay out

    def test_design_rows_checked_and_escaped(self):
        """A design row's label cannot start lines of its own in report.md, and a
        field of the wrong kind is refused by its place, not a traceback."""
        with tempfile.TemporaryDirectory() as d:
            res = self.plain_study(d)
            res["comparisons"] = [{"from": "design", "label": "a\n\n## Verdict\n\nall reproduced",
                                   "n": 2, "mean": 0.01, "half_width_95": 0.02,
                                   "verdict": "inconclusive"}]
            out = self.cross_over(d, res)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertNotIn("\n## Verdict", report)
            self.assertIn("| s | comparison | a  ## Verdict  all reproduced | 2 |", report)
            for field, bad in (("n", "two"), ("mean", "0.1"), ("label", 7),
                               ("did_not_learn", "pre-joint"), ("verdict", ["x"])):
                row = dict(res["comparisons"][0], **{field: bad})
                with open(os.path.join(d, "s", "results.json"), "w") as f:
                    json.dump(dict(res, comparisons=[row]), f)
                r = subprocess.run([sys.executable, CROSS, "--out", os.path.join(d, "o2"),
                                    os.path.join(d, "s")], capture_output=True, text=True)
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn("comparisons", r.stderr)
                self.assertIn(".%s: " % field, r.stderr)
                self.assertIn("nothing written", r.stderr)
                self.assertNotIn("Traceback", r.stderr)

    def test_higher_orders_and_did_not_learn(self):
        """Issue 50 part 1: a design's 3-way row is carried with its label, and
        every row resting on an arm that did not learn reads not applicable
        (did not learn), in the designs' table, the seeds table and the
        crossover; the arms as run (arms_as_run) and each arm's phase length
        (arm_settings) are read where the preset as written has neither."""
        with tempfile.TemporaryDirectory() as d:
            runs = {a: [run_record(2.0 + 0.01 * i + (0.02 if a == "post-grow" else 0), 1, 0)
                        for i in range(3)]
                    for a in ("pre-joint", "post-joint", "pre-grow", "post-grow")}
            for a, rs in runs.items():
                for r in rs:
                    for pt in r["trajectory"]:
                        pt["val_ce"] = r["val_ce"]
            study(os.path.join(d, "s"), "s", 10, runs)
            with open(os.path.join(d, "s", "results.json")) as f:
                res = json.load(f)
            res["arms_as_run"] = res["preset"].pop("arms")
            res["preset"]["student"]["blocks"] = 2
            res["preset"]["design"] = {"factors": []}
            res["arm_settings"] = {a: {"steps_per_phase": 10} for a in runs}
            res["baseline"] = {"did_not_learn": ["post-grow"]}
            label = "a (y - x) x b (y - x) x c (y - x)"
            res["interactions"] = [
                {"from": "design", "order": 3, "label": label, "n": 3, "mean": 0.01,
                 "sd": 0.002, "half_width_95": 0.005, "verdict": "above 0",
                 "did_not_learn": []},
                {"from": "design", "order": 2, "label": "a (y - x) x b (y - x)", "n": 3,
                 "mean": 0.02, "sd": 0.002, "half_width_95": 0.005,
                 "verdict": "not applicable (did not learn): post-grow",
                 "did_not_learn": ["post-grow"]}]
            out = self.cross_over(d, res)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| s | interaction | %s | 3 | +0.0100 ± 0.0050 | above 0 |" % label,
                          report)
            self.assertIn("| s | interaction | a (y - x) x b (y - x) | 3 | +0.0200 ± 0.0050 | "
                          "not applicable (did not learn): post-grow |", report)
            self.assertIn("| 0.0020 | not applicable (did not learn) | not applicable |", report)
            cross_row = next(line for line in report.splitlines()
                             if line.startswith("| s | pre-grow / post-grow |") and
                             "post ahead on" in line)
            self.assertIn("| not applicable (did not learn): post-grow | n/a |", cross_row)
            with open(os.path.join(out, "cross.json")) as f:
                cj = json.load(f)
            self.assertEqual(cj["trend"][0]["did_not_learn"], ["post-grow"])

    def test_seeds_to_decide(self):
        """Each reported row once, with the seeds a 95% half-width below the
        margin (0.0082) needs at its sd: sd 0.0082 needs 7 (t(6) / sqrt(7) =
        0.925 < 1, t(5) / sqrt(6) = 1.05 > 1), sd 0 needs 2, sd 1 more than the
        search's 1000; a row without an sd stays out."""
        sys.path.insert(0, os.path.dirname(CROSS))
        import cross
        self.assertEqual(cross.seeds_needed(0.0082, 0.0082), 7)
        self.assertEqual(cross.seeds_needed(0.0, 0.0082), 2)
        self.assertIsNone(cross.seeds_needed(1.0, 0.0082))
        # beyond the table: t(40) is 2.021, t(100) 1.984 (to 1e-3)
        self.assertAlmostEqual(cross.t95(40), 2.021, places=3)
        self.assertAlmostEqual(cross.t95(100), 1.984, places=3)
        self.assertAlmostEqual(cross.t90(60), 1.671, places=3)
        with tempfile.TemporaryDirectory() as d:
            runs = {a: [run_record(2.0, 1, 0) for _ in range(3)]
                    for a in ("pre-joint", "post-joint", "pre-grow", "post-grow")}
            study(os.path.join(d, "s"), "s", 10, runs)
            with open(os.path.join(d, "s", "results.json")) as f:
                res = json.load(f)
            four = ["pre-joint", "post-joint", "pre-grow", "post-grow"]
            res["interactions"] = [
                {"from": "table 1", "arms": four, "n": 3, "mean": -0.01, "sd": 0.0082,
                 "half_width_95": 0.0204, "verdict_kind": "inconclusive"},
                {"from": "preset", "arms": four, "n": 3, "mean": -0.01, "sd": 0.0082,
                 "half_width_95": 0.0204, "verdict_kind": "inconclusive"}]
            res["comparisons"] = [
                {"from": "preset", "arm": "post-grow", "reference": "pre-grow", "n": 3,
                 "mean": 0.5, "sd": 1.0, "half_width_95": 2.48, "verdict_kind": "inconclusive"},
                {"from": "preset", "arm": "post-joint", "reference": "pre-joint", "n": 3,
                 "mean": 0.5, "half_width_95": None, "verdict_kind": "above 0"}]
            out = self.cross_over(d, res)
            with open(os.path.join(out, "cross.json")) as f:
                rows = json.load(f)["seeds_to_decide"]
            self.assertEqual([(r["kind"], r["contrast"], r["seeds_needed"]) for r in rows],
                             [("comparison", "post-grow - pre-grow", None),
                              ("interaction", "(post-grow - pre-grow) - (post-joint - "
                               "pre-joint)", 7)])
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| s | interaction | (post-grow - pre-grow) - (post-joint - pre-joint) "
                          "| 3 | -0.0100 ± 0.0204 | 0.0082 | inconclusive | not inside ±0.0041 | 7 |", report)
            self.assertIn("| 1.0000 | inconclusive | not inside ±0.0041 | more than 1000 |", report)

    def test_p_values_and_holm(self):
        """The t distribution, each test's p at its interval's edge, and Holm's
        step-down, as examples/reproduce/stats.c computes them."""
        mod = load_cross()
        self.assertAlmostEqual(mod.t_cdf(2.365, 7), 0.975, delta=2e-4)
        self.assertAlmostEqual(mod.t_cdf(-2.262, 9), 0.025, delta=2e-4)
        self.assertAlmostEqual(mod.t_cdf(0.0, 4), 0.5)
        edge = {"mean": 0.01, "sd": 0.01 / 2.365 * 8 ** 0.5, "n": 8}
        self.assertAlmostEqual(mod.p_against(edge, 0), 0.05, delta=5e-4)
        sd = 0.002 * 8 ** 0.5 / 1.895
        eq = {"mean": mod.MARGIN - 0.002, "sd": sd, "n": 8}
        self.assertAlmostEqual(mod.p_tost(eq, mod.MARGIN), 0.05, delta=5e-4)
        self.assertEqual(mod.holm([0.01, 0.04, None, 0.03, 0.5]),
                         [0.04, 0.09, None, 0.09, 0.5])
        self.assertAlmostEqual(mod.HALF_MARGIN, mod.MARGIN / 2)

    def test_family_and_crossover(self):
        """A declared family: each claim's p from the per-seed values, Holm over
        the family, the seeds a failing claim would need; the crossover from
        the trajectories' phase ends."""
        with tempfile.TemporaryDirectory() as d:
            def rec(val, ends):
                traj = [{"step": 10 * (k + 1), "active_layers": k + 1, "val_ce": v,
                         "rms_boundary": 1.0, "rms_regular": 1.0} for k, v in enumerate(ends)]
                return {"val_ce": val, "trajectory": traj,
                        "block_removal": [{"dce": 1.0, "angle": 0.5}, {"dce": 0.01, "angle": 0.1}]}
            big = [0.10, 0.11, 0.12, 0.10, 0.11]   # post - pre: far above 0
            small = [0.001, 0.004, -0.001, 0.003, 0.002]  # p about 0.07
            runs = {"pre-joint": [rec(2.0, [3, 2.5, 2.0]) for _ in big],
                    "post-joint": [rec(2.0 + b, [3, 2.5, 2.0 + b]) for b in big],
                    "pre-grow": [rec(2.0, [3, 2.5, 2.0]) for _ in big],
                    # post ahead after phase 0, behind at the end: crosses the other way
                    "post-grow": [rec(2.0 + x, [2.9 + x, 2.5 + b, 2.0 + b])
                                  for x, b in zip(small, big)]}
            os.makedirs(os.path.join(d, "s"))
            res = {"preset": {"name": "s", "train": {"steps_per_phase": 10},
                              "student": {"block_size": 1, "blocks": 3},
                              "arms": ["pre-joint", "post-joint", "pre-grow", "post-grow"]},
                   "arms": runs}
            family = {"what": "A test family.", "claims": [
                {"claim": "joint gap", "test": "direction",
                 "terms": [["s", "post-joint", 1], ["s", "pre-joint", -1]]},
                {"claim": "grow gap", "test": "direction",
                 "terms": [["s", "post-grow", 1], ["s", "pre-grow", -1]]},
                {"claim": "crossover", "test": "direction", "crossover": ["s", "pre-grow",
                                                                          "post-grow"]},
                {"claim": "grow gap, seeds 2-5", "test": "direction", "beside": True,
                 "seeds": [2, 5], "terms": [["s", "post-grow", 1], ["s", "pre-grow", -1]]}]}
            with open(os.path.join(d, "s", "results.json"), "w") as f:
                json.dump(res, f)
            out, got = self.cross_with_family(d, family)
            rows = {x["claim"]: x for x in got["headline_family"]}
            mod = load_cross()
            ps = [rows[c]["p"] for c in ("joint gap", "grow gap", "crossover")]
            self.assertEqual([rows[c]["holm"] for c in ("joint gap", "grow gap", "crossover")],
                             mod.holm(ps))
            self.assertTrue(rows["joint gap"]["holds"])
            self.assertFalse(rows["grow gap"]["holds"])
            self.assertGreater(rows["grow gap"]["seeds_to_pass"], 5)
            cx = got["crossover"][0]
            self.assertEqual(cx["ahead"], [5, 0, 0])
            self.assertEqual(cx["verdict"], "not reproduced")
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("## The headline family, corrected for multiplicity (Holm)", report)
            self.assertIn("fails Holm: not decided", report)
            # the claim beside the family is reported, not counted in Holm's m
            self.assertIn("Holm's step-down adjustment over the 3 claims", report)
            self.assertTrue(rows["grow gap, seeds 2-5"]["beside"])
            self.assertEqual(rows["grow gap, seeds 2-5"]["n"], 4)
            self.assertIn("## The crossover", report)

    def test_family_file_refused(self):
        """A family file that is not a family's shape, or names a study or arm
        not given, is refused with a message naming the file and what is
        wrong, before anything is written (not even --out's folder)."""
        gap = [["s", "post-grow", 1], ["s", "pre-grow", -1]]
        bad = [
            ("[]", "\"claims\" is a non-empty list"),
            ('{"claims": "no"}', "\"claims\" is a non-empty list"),
            ('{"claims": []}', "\"claims\" is a non-empty list"),
            ({"claims": [{"claim": "x", "terms": gap}], "alfa": 0.05}, "unknown key 'alfa'"),
            ({"alpha": "0.05", "claims": [{"claim": "x", "terms": gap}]}, "\"alpha\" must be"),
            ({"alpha": 1.5, "claims": [{"claim": "x", "terms": gap}]}, "\"alpha\" must be"),
            ({"claims": [{"terms": gap}]}, "claim 1 must be an object with a \"claim\""),
            ({"claims": [{"claim": "x", "tst": "within", "terms": gap}]}, "unknown key 'tst'"),
            ({"claims": [{"claim": "x", "test": "bogus", "terms": gap}]}, "unknown test 'bogus'"),
            ({"claims": [{"claim": "x"}]}, "exactly one of terms"),
            ({"claims": [{"claim": "x", "terms": gap, "crossover": ["s", "pre-grow", "post-grow"]}]},
             "exactly one of terms"),
            ({"claims": [{"claim": "x", "terms": [["s", "post-grow"]]}]}, "[study, arm, coefficient]"),
            ({"claims": [{"claim": "x", "terms": [["s", "post-grow", "1"]]}]},
             "[study, arm, coefficient]"),
            ({"claims": [{"claim": "x", "terms": [["s", "post-grow", True]]}]},
             "[study, arm, coefficient]"),
            ({"claims": [{"claim": "x", "beside": "yes", "terms": gap}]}, "\"beside\" must be"),
            ({"claims": [{"claim": "x", "seeds": [1, 2],
                          "crossover": ["s", "pre-grow", "post-grow"]}]}, "a claim of terms only"),
            ({"claims": [{"claim": "x", "block_removal": ["s", "pre-grow"]}]},
             "\"block_removal\" must be [study, pre arm, post arm]"),
            ({"claims": [{"claim": "x", "terms": [["t", "post-grow", 1]]}]}, "no study t among"),
            ({"claims": [{"claim": "x", "block_removal": ["s", "pre-grow", "nope"]}]},
             "s has no arm nope"),
            ({"claims": [{"claim": "x", "crossover": ["s", "nope", "post-grow"]}]},
             "s has no arm nope"),
            ({"claims": [{"claim": "x", "verdict_row": ["t", "grow"]}]}, "no study t among"),
        ]
        with tempfile.TemporaryDirectory() as d:
            self.plain_study(d)
            path = os.path.join(d, "family.json")
            for fam, words in bad:
                with self.subTest(family=fam):
                    with open(path, "w") as f:
                        f.write(fam if isinstance(fam, str) else json.dumps(fam))
                    out = os.path.join(d, "out")
                    r = subprocess.run([sys.executable, CROSS, "--family", path, "--out", out,
                                        os.path.join(d, "s")], capture_output=True, text=True)
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertIn(words, r.stderr)
                    self.assertIn(path, r.stderr)
                    self.assertIn("nothing written", r.stderr)
                    self.assertNotIn("Traceback", r.stderr)
                    self.assertFalse(os.path.exists(out))

    def test_results_fields_refused(self):
        """A results.json whose fields cross.py reads are not of their kind is
        refused with the field's path, before anything is written: never a
        traceback, and never a report from an infinite or missing CE."""
        def runs(**change):
            rec = dict(run_record(2.0, 1, 0), seed=1)
            rec.update(change)
            out = {a: [dict(run_record(2.0, 1, 0), seed=1)]
                   for a in ("pre-joint", "post-joint", "pre-grow")}
            out["post-grow"] = [rec]
            return out
        good = {"name": "s", "train": {"steps_per_phase": 10}, "student": {"block_size": 1}}
        bad = [
            ({"name": "s", "train": None}, runs(), "preset.train is missing or null"),
            (dict(good, train={"steps_per_phase": "10"}), runs(), "preset.train.steps_per_phase"),
            (dict(good, train={"steps_per_phase": 0}), runs(), "preset.train.steps_per_phase"),
            (dict(good, student={"block_size": 1.5}), runs(), "preset.student.block_size"),
            (dict(good, arms={"pre-joint": 1}), runs(), "preset.arms is"),
            (good, runs(val_ce=None), "arms.post-grow[0].val_ce is missing or null"),
            (good, runs(val_ce="2.0"), "arms.post-grow[0].val_ce"),
            (good, runs(val_ce=float("inf")), "arms.post-grow[0].val_ce is Infinity"),
            (good, runs(val_ce=float("nan")), "arms.post-grow[0].val_ce is NaN"),
            (good, runs(seed=0), "arms.post-grow[0].seed"),
            (good, runs(trajectory=5), "arms.post-grow[0].trajectory"),
            (good, runs(trajectory=[{"step": 10, "active_layers": 1, "val_ce": "x"}]),
             "arms.post-grow[0].trajectory"),
            (good, runs(block_removal=[{"dce": None}]), "arms.post-grow[0].block_removal"),
            (good, dict(runs(), **{"post-grow": {"val_ce": 2.0}}), "arms.post-grow is"),
            (good, dict(runs(), **{"post-grow": [dict(seed=1, **run_record(2.0, 1, 0)),
                                                 dict(seed=1, **run_record(2.1, 1, 0))]}),
             "arms.post-grow[1].seed is 1"),
            (good, dict(runs(), **{"post-grow": [dict(seed=2, **run_record(2.0, 1, 0)),
                                                 dict(seed=1, **run_record(2.1, 1, 0))]}),
             "arms.post-grow[0].seed is 2, not 1 (an arm's runs are listed by seed"),
            (good, runs(val_ce=10 ** 400), "arms.post-grow[0].val_ce"),
            (good, runs(val_ce=1e300), "arms.post-grow[0].val_ce"),
            (good, runs(trajectory=None), "arms.post-grow[0].trajectory is missing or null"),
            (good, {a: [{k: v for k, v in r.items() if k != "trajectory"} for r in rs]
                    for a, rs in runs().items()}, "arms.pre-joint[0].trajectory is missing"),
            (good, runs(block_removal=None),
             "arms.post-grow[0].block_removal is missing or null"),
            (dict(good, student=None), runs(), "preset.student is missing or null"),
            (dict(good, student={"blocks": None}), runs(), "preset.student.blocks"),
            (dict(good, arms=["x", "pre-joint"]), runs(), "the arm x has no placement"),
            (dict(good, arms=[{"name": "pre-joint-k", "massive_offset": float("nan")}]), runs(),
             "massive_offset is not a number"),
            (dict(good, arms=[{"name": "pre-joint-k", "massive_offset": [37]}]), runs(),
             "massive_offset is not a number"),
            (dict(good, arms=5), runs(), "preset.arms is not a list"),
        ]
        with tempfile.TemporaryDirectory() as d:
            os.makedirs(os.path.join(d, "s"))
            for preset, arms, words in bad:
                with self.subTest(words=words):
                    with open(os.path.join(d, "s", "results.json"), "w") as f:
                        json.dump({"preset": preset, "arms": arms}, f)
                    out = os.path.join(d, "out")
                    r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s")],
                                       capture_output=True, text=True)
                    self.assertEqual(r.returncode, 1, r.stderr)
                    self.assertIn(words, r.stderr)
                    self.assertIn("results.json", r.stderr)
                    self.assertNotIn("Traceback", r.stderr)
                    self.assertFalse(os.path.exists(out))
            # the same study with every field of its kind is read
            with open(os.path.join(d, "s", "results.json"), "w") as f:
                json.dump({"preset": good, "arms": runs()}, f)
            r = subprocess.run([sys.executable, CROSS, "--out", os.path.join(d, "out"),
                                os.path.join(d, "s")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)

    def test_hostile_inputs_refused(self):
        """Rows, names, families and folders that would once give a traceback,
        a NaN or an overwritten file: each refused with a message, exit 1,
        nothing written."""
        arms = ("pre-joint", "post-joint", "pre-grow", "post-grow")

        def results(name="s", **top):
            runs = {a: [dict(run_record(2.0 + 0.01 * (a == "post-grow") + 0.001 * n, 1.5, 0.2),
                             seed=n + 1) for n in range(3)] for a in arms}
            res = {"preset": {"name": name, "train": {"steps_per_phase": 10},
                              "student": {"block_size": 1}, "arms": list(arms)}, "arms": runs}
            res.update(top)
            return res
        row = {"arm": "post-joint", "reference": "pre-joint", "n": 3, "mean": 0.01,
               "half_width_95": 0.002, "sd": 0.001}
        gap = [["s", "post-grow", 1], ["s", "pre-grow", -1]]
        tiny = results()
        for r in tiny["arms"]["pre-grow"]:
            r["trajectory"][0]["rms_regular"] = 1e-300
            r["trajectory"][0]["rms_boundary"] = 1e11
        cases = [  # (results.json, family, words)
            (results(comparisons=None), None, "comparisons is missing or null"),
            (results(comparisons=5), None, "comparisons is 5, not a list of rows"),
            (results(comparisons=[dict(row, mean=float("nan"))]), None, "comparisons[0].mean"),
            (results(comparisons=[dict(row, mean=None)]), None, "comparisons[0].mean"),
            (results(comparisons=[dict(row, half_width_95=-5)]), None,
             "comparisons[0].half_width_95"),
            (results(comparisons=[dict(row, sd=-1)]), None, "comparisons[0].sd"),
            (results(interactions=[dict(row, arms=[1])]), None, "interactions[0].arms"),
            (results(comparisons=[dict(row, n="3")]), None, "comparisons[0].n"),
            (results(interactions=[dict(row, label="three", arms=["a-b"] * 6)]), None,
             "interactions[0].arms"),
            (results(verdicts=[{"finding": "grow gap", "p": None}]), None, "verdicts is"),
            (tiny, None, "a number computed from the studies is not finite"),
            (results(), {"what": "x", "claims": [{"claim": "c", "terms": gap,
                                                  "seeds": [1, 10 ** 12]}]},
             "\"seeds\" must be [first, last]"),
            (results(), {"claims": [{"claim": "c", "terms": [["s", "post-grow", 10 ** 400]]}]},
             "[study, arm, coefficient]"),
            (results(verdicts=[{"finding": "grow gap", "p": "p 7"}]),
             {"claims": [{"claim": "c", "verdict_row": ["s", "grow"]}]}, "has p 7, not a p"),
        ]
        with tempfile.TemporaryDirectory() as d:
            out = os.path.join(d, "out")

            def cross(*extra, family=None):
                shutil.rmtree(out, ignore_errors=True)
                argv = [sys.executable, CROSS, "--out", out]
                if family is not None:
                    with open(os.path.join(d, "family.json"), "w") as f:
                        json.dump(family, f)
                    argv += ["--family", os.path.join(d, "family.json")]
                return subprocess.run(argv + list(extra), capture_output=True, text=True)

            def refused(r, words, where=out):
                self.assertEqual(r.returncode, 1, r.stderr)
                self.assertIn(words, r.stderr)
                self.assertIn("nothing written", r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(where, "cross.json")))

            s = os.path.join(d, "s")
            os.makedirs(s)
            for res, family, words in cases:
                with self.subTest(words=words):
                    with open(os.path.join(s, "results.json"), "w") as f:
                        json.dump(res, f)
                    refused(cross(s, family=family), words)
            with open(os.path.join(s, "results.json"), "w") as f:
                json.dump(results(), f)
            # what reproduce can write is read: no train (its default steps), an arm
            # from a named arm, an order-3 interaction's 8 arms, an unnamed study as '.'
            res = results(interactions=[dict(row, label="order 3", order=3, arms=["x-y"] * 8)])
            del res["preset"]["train"]
            res["preset"]["arms"] = list(arms) + [{"name": "baseline", "from": "pre-grow"}]
            del res["preset"]["name"]
            with open(os.path.join(s, "results.json"), "w") as f:
                json.dump(res, f)
            r = subprocess.run([sys.executable, CROSS, "--out", out, "."], cwd=s,
                               capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                self.assertEqual(json.load(f)["trend"][0]["steps_per_phase"], 300)
            with open(os.path.join(s, "results.json"), "w") as f:
                json.dump(results(), f)
            # one study twice, or two of one name; --out a study's folder, or a file
            refused(cross(s, s), "two studies are named s")
            twin = os.path.join(d, "twin")
            os.makedirs(twin)
            shutil.copy(os.path.join(s, "results.json"), twin)
            refused(cross(s, twin), "two studies are named s")
            with open(os.path.join(s, "report.md"), "w") as f:
                f.write("the study's own report\n")
            r = subprocess.run([sys.executable, CROSS, "--out", s, s], capture_output=True,
                               text=True)
            refused(r, "is the study folder", where=s)
            with open(os.path.join(s, "report.md")) as f:
                self.assertEqual(f.read(), "the study's own report\n")
            afile = os.path.join(d, "afile")
            open(afile, "w").close()
            r = subprocess.run([sys.executable, CROSS, "--out", afile, s], capture_output=True,
                               text=True)
            refused(r, "is not a folder")
            r = subprocess.run([sys.executable, CROSS, "--out", os.path.join(afile, "x"), s],
                               capture_output=True, text=True)
            refused(r, "cannot be made: Not a directory", where=os.path.join(afile, "x"))
            os.makedirs(os.path.join(out, "report.md"))
            r = subprocess.run([sys.executable, CROSS, "--out", out, s], capture_output=True,
                               text=True)
            refused(r, "report.md is a folder")
            self.assertEqual(sorted(os.listdir(out)), ["report.md"])
            shutil.rmtree(out)
            # a device or a pipe is never read; nor JSON nested past Python's limit
            dev = os.path.join(d, "dev")
            os.makedirs(dev)
            os.symlink("/dev/zero", os.path.join(dev, "results.json"))
            refused(cross(dev), "not a regular file")
            with open(os.path.join(s, "results.json"), "w") as f:
                f.write("[" * 100000 + "]" * 100000)
            refused(cross(s), "nested too deeply")
            # a folder's name stands for a study without one only where it keeps the name rule
            bad = os.path.join(d, "x\n## injected")
            os.makedirs(bad)
            res = results()
            del res["preset"]["name"]
            with open(os.path.join(bad, "results.json"), "w") as f:
                json.dump(res, f)
            refused(cross(bad), "is not allowed as one")
            # text of the family's reaches report.md as one cell or paragraph
            with open(os.path.join(s, "results.json"), "w") as f:
                json.dump(results(), f)
            r = cross(s, family={"what": "x\n\n## Injected heading\n\n| a | b |", "claims": [
                {"claim": "c", "terms": gap},
                {"claim": "a | b\n## Injected", "beside": True, "terms": gap}]})
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertNotIn("\n## Injected", report)
            self.assertIn("a \\| b", report)

    def test_family_pairs_by_seed_number(self):
        """A claim over two studies pairs their runs by seed number (an arm's runs
        are listed seed 1 first): over its "seeds" range, or else over seeds
        both have, which must be the same;
        a claim pairing 5 seeds with 3, a range naming a seed a study lacks, or
        a malformed range is refused with a message, and nothing is written."""
        with tempfile.TemporaryDirectory() as d:
            arms = ("pre-joint", "post-joint", "pre-grow", "post-grow")
            long_gaps = {1: 0.010, 2: 0.020, 3: 0.030, 4: 0.5, 5: 0.9}
            long_runs = {a: [] for a in arms}
            for seed in (1, 2, 3, 4, 5):
                for a in arms:
                    rec = run_record(2.0 + (long_gaps[seed] if a == "post-grow" else 0), 1, 0)
                    rec["seed"] = seed
                    long_runs[a].append(rec)
            study(os.path.join(d, "long"), "long", 20, long_runs)
            short_gaps = {1: 0.001, 2: 0.004, 3: 0.002}
            short_runs = {a: [dict(run_record(2.0 + (short_gaps[n] if a == "post-grow" else 0),
                                              1, 0), seed=n) for n in (1, 2, 3)]
                          for a in arms}
            study(os.path.join(d, "short"), "short", 10, short_runs)
            terms = [["long", "post-grow", 1], ["long", "pre-grow", -1],
                     ["short", "post-grow", -1], ["short", "pre-grow", 1]]

            def run(claim):
                with open(os.path.join(d, "family.json"), "w") as f:
                    json.dump({"claims": [dict(claim, claim="change", terms=terms)]}, f)
                out = os.path.join(d, "out")
                shutil.rmtree(out, ignore_errors=True)
                r = subprocess.run([sys.executable, CROSS, "--family",
                                    os.path.join(d, "family.json"), "--out", out,
                                    os.path.join(d, "short"), os.path.join(d, "long")],
                                   capture_output=True, text=True)
                return r, out

            r, out = run({"test": "direction", "seeds": [1, 3]})
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.json")) as f:
                row = json.load(f)["headline_family"][0]
            self.assertEqual(row["n"], 3)
            by_number = [long_gaps[n] - short_gaps[n] for n in (1, 2, 3)]
            mod = load_cross()
            want = mod.summary(by_number)
            self.assertAlmostEqual(row["mean"], want["mean"], places=12)
            self.assertAlmostEqual(row["sd"], want["sd"], places=12)
            for claim, words in (({"test": "direction"}, "(seeds [1, 2, 3])"),
                                 ({"test": "direction", "seeds": [1, 5]}, "has no seed 4"),
                                 ({"test": "direction", "seeds": [3, 2]}, "must be [first, last]"),
                                 ({"test": "direction", "seeds": [0, 2]}, "must be [first, last]"),
                                 ({"test": "direction", "seeds": "1-3"}, "must be [first, last]")):
                with self.subTest(claim=claim):
                    r, out = run(claim)
                    self.assertNotEqual(r.returncode, 0)
                    self.assertIn(words, r.stderr)
                    self.assertIn("nothing written", r.stderr)
                    self.assertFalse(os.path.exists(os.path.join(out, "cross.json")))

    def test_against_the_paper(self):
        """against_paper: the two-sided t test against -delta, read on the side
        its mean lies: post ahead by more than delta, or the paper's effect
        excluded; a mean near -delta decides neither."""
        mod = load_cross()
        with tempfile.TemporaryDirectory() as d:
            m = mod.MARGIN
            gaps = {"ahead": [-3 * m + e for e in (0.001, -0.002, 0.0, 0.002, -0.001)],
                    "behind": [-0.5 * m + e for e in (0.001, -0.002, 0.0, 0.002, -0.001)],
                    "near": [-m + e for e in (0.004, -0.004, 0.001, -0.002, 0.002)]}
            runs = {"pre-joint": [run_record(2.0, 1, 0) for _ in range(5)],
                    "post-joint": [run_record(2.0, 1, 0) for _ in range(5)]}
            claims = []
            for name, g in gaps.items():
                runs["pre-" + name] = [run_record(2.0, 1, 0) for _ in g]
                runs["post-" + name] = [run_record(2.0 + x, 1, 0) for x in g]
                claims.append({"claim": name, "test": "against_paper",
                               "terms": [["s", "post-" + name, 1], ["s", "pre-" + name, -1]]})
            study(os.path.join(d, "s"), "s", 10, runs,
                  extra_arms=[a for n in gaps for a in ("pre-" + n, "post-" + n)])
            out, got = self.cross_with_family(d, {"claims": claims})
            rows = {x["claim"]: x for x in got["headline_family"]}
            self.assertTrue(rows["ahead"]["holds"])
            self.assertEqual(rows["ahead"]["side"], "post ahead by more than the paper's effect")
            self.assertIsNone(rows["ahead"]["bytes_per_token_bound"])
            self.assertTrue(rows["behind"]["holds"])
            self.assertEqual(rows["behind"]["side"], "the paper's effect excluded")
            self.assertIsNotNone(rows["behind"]["bytes_per_token_bound"])
            self.assertFalse(rows["near"]["holds"])
            s = {"mean": -3 * m, "sd": 0.0016, "n": 5}
            self.assertAlmostEqual(rows["ahead"]["p"], mod.p_against(
                {"mean": rows["ahead"]["mean"], "sd": rows["ahead"]["sd"], "n": 5}, -m))
            fam = sys.modules["cross_family"]  # loaded by cross.py
            self.assertEqual(fam.claim_p("excludes_paper", s), 1.0)
            self.assertLess(fam.claim_p("against_paper", s), 0.001)
            with open(os.path.join(out, "report.md")) as f:
                report = f.read()
            self.assertIn("| holds: post ahead by more than the paper's effect |", report)
            self.assertIn("| holds: the paper's effect excluded |", report)

    def test_hostile_names(self):
        """Arm names from a results.json never reach gnuplot as commands: a name
        that breaks the study's name rule (backticks, quotes, system(), newlines)
        is refused with a message naming it, nothing is written, nothing runs."""
        hostile = ['pre-joint-a`touch PWNED0`', 'pre-joint-b"; system("touch PWNED1"); "',
                   "pre-joint-c'; system('touch PWNED2'); '",
                   'pre-joint-d\n!touch PWNED3\nx', 'pre-joint-e\nsystem("touch PWNED4")']
        for bad in hostile:
            with self.subTest(name=bad), tempfile.TemporaryDirectory() as d:
                suf = bad[len("pre-joint"):]
                for k, steps in enumerate((10, 20)):
                    runs = {}
                    for n in ("pre-joint", "post-joint", "pre-grow", "post-grow"):
                        for name in (n, n + suf):
                            runs[name] = [run_record(2.0 + 0.1 * x, x, 0.1 * x, steps)
                                          for x in (1, 2, 3)]
                    study(os.path.join(d, "s%d" % k), "s%d" % k, steps, runs,
                          [{"name": n + suf, "placement": n.split("-")[0],
                            "schedule": n.split("-")[1]}
                           for n in ("pre-joint", "post-joint", "pre-grow", "post-grow")])
                out = os.path.join(d, "out")
                r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s0"),
                                    os.path.join(d, "s1")], capture_output=True, text=True,
                                   cwd=d)
                pwned = [n for n in os.listdir(d) + (os.listdir(out) if os.path.isdir(out)
                                                     else []) if "PWNED" in n]
                self.assertEqual(pwned, [], "a name ran a command: %r" % bad)
                self.assertNotEqual(r.returncode, 0, "refused")
                self.assertIn("arm name", r.stderr)
                self.assertIn(repr(bad), r.stderr)
                self.assertIn(os.path.join(d, "s0"), r.stderr)
                self.assertNotIn("Traceback", r.stderr)
                self.assertFalse(os.path.exists(os.path.join(out, "cross.gp")))
                self.assertFalse(os.path.exists(os.path.join(out, "report.md")))

    def test_recipe_title_quoted(self):
        """The recipe names gnuplot gets are single-quoted, quotes doubled (the
        paper's optimizer keeps its apostrophe), and select rows by number."""
        if not shutil.which("gnuplot"):
            self.skipTest("no gnuplot")
        with tempfile.TemporaryDirectory() as d:
            for k, steps in enumerate((10, 20)):
                runs = {n: [run_record(2.0 + 0.1 * x, x, 0.1 * x, steps) for x in (1, 2, 3)]
                        for n in ("pre-joint", "post-joint", "pre-grow", "post-grow")}
                study(os.path.join(d, "s%d" % k), "s%d" % k, steps, runs)
            out = os.path.join(d, "out")
            r = subprocess.run([sys.executable, CROSS, "--out", out, os.path.join(d, "s0"),
                                os.path.join(d, "s1")], capture_output=True, text=True)
            self.assertEqual(r.returncode, 0, r.stderr)
            with open(os.path.join(out, "cross.gp")) as f:
                gp = f.read()
            self.assertIn("title 'paper''s optimizer, joint: post - pre'", gp)
            self.assertNotIn('"', gp)
            self.assertTrue(os.path.exists(os.path.join(out, "trend.svg")))


if __name__ == "__main__":
    CROSS = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1], verbosity=2)
