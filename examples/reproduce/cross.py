#!/usr/bin/python3
"""cross: what several committed studies say together (issue 26, parts 3 and 4).

  cross.py --out DIR STUDY_DIR...

Each STUDY_DIR is a study's output folder (its results.json). Writes, whole
(temporary file, fsync, rename), into DIR:

- report.md with two tables:
  * the trend with training length: for every study whose arms include a
    four-arm set (pre/post x joint/grow on one recipe), post - pre (joint and
    grow) and the interaction I, paired by seed with 95% t intervals, by the
    study's phase length;
  * dose-response: one point per seed of every grow pair (pre-X / post-X) in
    every study: x, pre-norm's row-start / regular RMS ratio where the
    appended blocks read the stream (after block 1 at the end of phase 0 and
    after block 2 at the end of phase 1, their mean); y, post-grow - pre-grow
    (val CE); z, pre-grow's last-block dCE; and the least-squares slope of y
    on x (and of z on x) with a 95% t interval;
  * the change with training length paired by seed, and the slopes with
    seeds as clusters;
  * the induced dose: in a study whose four-arm sets differ only in the
    row-start offset (massive_offset, K), per K the joint and grow gaps, I,
    and pre-grow's last-block dCE and angle; their slopes on x with seeds as
    clusters, and the change across x's range tested as the study's rules
    test an effect (below/above 0 at 95%, or equivalent: the 90% interval
    inside the margin of examples/reproduce/rules.h);
  * each study's own design contrasts and interactions (results.json's
    "from": "design" rows), in their labels;
  * seeds to decide each row: for every comparison and interaction the
    studies report, and each change with training length, its sd over seeds
    and the seeds a 95% interval narrower than the margin would need;
- cross.json with every number, and points.csv;
- trend.svg and dose.svg when gnuplot is installed (run from an argument
  vector, in DIR, on a script that names its files relative to DIR).

What a results.json holds is data, never a command: every arm name (and the
study's name) must follow the study's name rule (1 to 47 characters: letters,
digits and - _ . +, not starting with a dot), as the study itself enforces, or
the folder is refused before anything is written. The few words the gnuplot
script takes from them are single-quoted with quotes doubled (gnuplot expands
neither backticks nor macros there), and its rows are picked by number.

Nothing here trains: it reads what the studies kept. Python 3's standard
library only. Beside it: cross_stats.py (the statistics and verdict wording),
cross_study.py (reading a study's results.json) and cross_family.py (the
headline family); this file computes across the studies and writes DIR.
"""
import argparse
import json
import os
import shutil
import subprocess
import sys
import traceback

# The modules beside this file (cross_stats, cross_study, cross_family), found
# however cross.py is started or loaded.
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

# t95, t90, t_cdf, p_tost, holm and seeds_needed are cross's too: its tests read them here.
from cross_family import check_family, headline, headline_md  # noqa: E402
from cross_stats import (BYTES_PER_TOKEN, HALF_MARGIN, MARGIN, MAX_SEEDS,  # noqa: E402,F401
                         clustered_slope, dose_change, effect_verdict, fmt_p, holm, p_against,
                         p_tost, pm, seeds_needed, slope, summary, t90, t95, t_cdf, verdict_kind)
from cross_study import (NOT_LEARNED, Refused, cell, crossover,  # noqa: E402
                         dose_sets, four_arm_sets, grow_pairs, load, paired, ratio_at_phase_end,
                         preset_spp, read_json, study_name, unlearned)


def gp_str(s):
    """s as a single-quoted gnuplot string: quotes doubled, no line breaks."""
    s = "".join(c if c >= " " and c != "\x7f" else " " for c in s)
    return "'" + s.replace("'", "''") + "'"


def mean_ratio(res, r, arm):
    """pre-norm's row-start / regular RMS where the appended blocks read
    (after block 1 at phase 0's end and block 2 at phase 1's end): the values
    the run has, [] when it has neither."""
    return [v for v in (ratio_at_phase_end(res, r, 0, arm), ratio_at_phase_end(res, r, 1, arm))
            if v is not None]


def trend_and_points(studies):
    """The trend rows (each four-arm set's paired differences) and the
    dose-response points (one per seed of every grow pair; an intervention's
    apart)."""
    trend, points, ipoints = [], [], []
    for folder, res in studies:
        name = study_name(folder, res)
        spp = preset_spp(res)
        for label, pj, qj, pg, qg in four_arm_sets(res):
            dj, dg = paired(res, pj, qj), paired(res, pg, qg)
            if not dj or not dg:
                continue
            di = [g - j for g, j in zip(dg, dj)]
            trend.append({"study": name, "recipe": label, "steps_per_phase": spp,
                          "seeds": len(dj), "joint": summary(dj), "grow": summary(dg),
                          "I": summary(di), "per_seed": {"joint": dj, "grow": dg, "I": di},
                          "did_not_learn": sorted(unlearned(res) & {pj, qj, pg, qg})})
        for pg, qg, intervention in grow_pairs(res):
            for seed, (r, q) in enumerate(zip(res["arms"][pg], res["arms"][qg]), 1):
                xs = mean_ratio(res, r, pg)
                if not xs or not r.get("block_removal"):
                    continue
                (ipoints if intervention else points).append({
                    "study": name, "pair": "%s / %s" % (pg, qg), "seed": seed,
                    "x": sum(xs) / len(xs), "y": q["val_ce"] - r["val_ce"],
                    "z": r["block_removal"][-1]["dce"]})
    return trend, points, ipoints


def induced_dose(name, res):
    """One study's induced dose: its configurations differ only in the
    offset, so x is set by hand and a slope over them is causal. Its rows per
    K, points per seed, clustered slopes and the changes across x's range;
    None with fewer than two doses."""
    dpoints, rows = [], []
    for k, pj, qj, pg, qg in dose_sets(res):
        dj, dg = paired(res, pj, qj), paired(res, pg, qg)
        if not dj or not dg:
            continue
        xs, zs, angles = [], [], []
        for seed, r in enumerate(res["arms"][pg], 1):
            v = mean_ratio(res, r, pg)
            if not v or not r.get("block_removal") or seed > len(dj):
                continue
            x = sum(v) / len(v)
            xs.append(x)
            zs.append(r["block_removal"][-1]["dce"])
            angles.append(r["block_removal"][-1].get("angle"))
            dpoints.append({"K": k, "seed": seed, "x": x, "grow": dg[seed - 1],
                            "joint": dj[seed - 1], "I": dg[seed - 1] - dj[seed - 1],
                            "z": zs[-1], "angle": angles[-1]})
        if xs:
            rows.append({"K": k, "seeds": len(xs), "x": summary(xs), "joint": summary(dj),
                         "grow": summary(dg), "I": summary([g - j for g, j in zip(dg, dj)]),
                         "z": summary(zs),
                         "angle": None if None in angles else summary(angles)})
    if len(rows) < 2:
        return None
    keys = ["I", "grow", "joint", "z"]
    if all(p["angle"] is not None for p in dpoints):
        keys.append("angle")
    fits = {key: clustered_slope(dpoints, key) for key in keys}
    return {"study": name, "rows": sorted(rows, key=lambda r: r["K"]),
            "points": dpoints, "fits": fits,
            "changes": {k: dose_change(f, MARGIN if k in ("I", "grow", "joint") else None)
                        for k, f in fits.items()}}


def induced_doses(studies):
    """Every study's induced dose (those that have one)."""
    doses = []
    for folder, res in studies:
        d = induced_dose(study_name(folder, res), res)
        if d is not None:
            doses.append(d)
    return doses


def changes_with_length(trend):
    """The change with training length, paired by seed: each recipe's longer
    phases against its shortest, and against the next shorter where that is
    not the shortest (1 -> 4 and 1 -> 8, then 4 -> 8), over the seeds both
    studies ran."""
    changes = []
    by_recipe = {}
    for t in trend:
        by_recipe.setdefault(t["recipe"], []).append(t)
    for rec, rows in sorted(by_recipe.items()):
        rows = sorted(rows, key=lambda t: t["steps_per_phase"])
        # at each length, the study given first is the one a longer one pairs with
        first = {}
        for t in rows:
            first.setdefault(t["steps_per_phase"], t)
        lengths = sorted(first)
        pairs = []
        for long_ in rows:
            i = lengths.index(long_["steps_per_phase"])
            if i > 0:
                pairs.append((first[lengths[0]], long_))
            if i > 1:
                pairs.append((first[lengths[i - 1]], long_))
        for short, long_ in pairs:
            n = min(len(short["per_seed"]["joint"]), len(long_["per_seed"]["joint"]))
            if n < 1:
                continue
            ch = {"recipe": rec, "from": short["study"], "to": long_["study"],
                  "steps_from": short["steps_per_phase"], "steps_to": long_["steps_per_phase"],
                  "seeds": n}
            for k in ("joint", "grow", "I"):
                ch[k] = summary([long_["per_seed"][k][i] - short["per_seed"][k][i]
                                 for i in range(n)])
                ch[k]["p"] = p_against(ch[k], 0)  # two-sided, not adjusted
            changes.append(ch)
    return changes


def intervention_sums(ipoints):
    """Each intervention pair's x, y and z over its seeds."""
    by_pair = {}
    for p in ipoints:
        by_pair.setdefault((p["study"], p["pair"]), []).append(p)
    return [{"study": k[0], "pair": k[1], "seeds": len(v),
             "x": summary([p["x"] for p in v]), "y": summary([p["y"] for p in v]),
             "z": summary([p["z"] for p in v])} for k, v in by_pair.items()]


def design_contrasts(studies):
    """The designs' own contrasts and interactions, in their labels, study by
    study."""
    designed = []
    for folder, res in studies:
        name = study_name(folder, res)
        for kind in ("comparisons", "interactions"):
            for c in res.get(kind, []):
                if c.get("from") == "design" and c.get("label"):  # checked in load
                    dnl = c.get("did_not_learn") or []
                    designed.append({"study": name, "kind": kind[:-1], "label": c["label"],
                                     "order": c.get("order", 2 if kind == "interactions" else 1),
                                     "n": c.get("n", 0), "mean": c.get("mean"),
                                     "half": c.get("half_width_95"), "did_not_learn": dnl,
                                     "verdict": "%s: %s" % (NOT_LEARNED, ", ".join(dnl))
                                     if dnl else c.get("verdict", "")})
    return designed


def study_rows_to_decide(name, res):
    """A study's comparisons and interactions with an sd over 2 or more seeds,
    each once, with its verdicts and the seeds it would need."""
    rows_out, seen = [], set()
    for kind in ("comparisons", "interactions"):
        for c in res.get(kind, []):  # each row checked in load (check_study)
            if c.get("label"):
                what = c["label"]
            elif kind == "comparisons":
                what = "%s - %s" % (c.get("arm"), c.get("reference"))
            else:
                a = c.get("arms") or ["?"] * 4
                what = "(%s - %s) - (%s - %s)" % (a[3], a[2], a[1], a[0])
            if what in seen or c.get("sd") is None or c.get("n", 0) < 2:
                continue
            seen.add(what)
            sm = {"mean": c.get("mean"), "half": c.get("half_width_95"), "n": c["n"],
                  "sd": c["sd"]}
            dnl = c.get("did_not_learn") or []
            rows_out.append({"study": name, "kind": kind[:-1], "contrast": what,
                             "n": c["n"], "mean": c.get("mean"),
                             "half": c.get("half_width_95"), "sd": c["sd"],
                             "verdict": NOT_LEARNED if dnl else verdict_kind(sm, MARGIN),
                             "verdict_half": "not applicable" if dnl
                             else verdict_kind(sm, HALF_MARGIN),
                             "did_not_learn": dnl,
                             "seeds_needed": seeds_needed(c["sd"], MARGIN)})
    return rows_out


# The paired differences a change with length or an induced dose reports.
GAPS = (("joint", "joint gap"), ("grow", "grow gap"), ("I", "I"))


def seeds_to_decide(studies, changes, doses):
    """What each row would need: seeds for a 95% interval narrower than the
    margin, for the studies' rows, the changes with training length and the
    changes across an induced dose."""
    to_decide = []
    for folder, res in studies:
        to_decide += study_rows_to_decide(study_name(folder, res), res)
    for ch in changes:
        for k, what in GAPS:
            sm = ch[k]
            if sm["half"] is None:
                continue
            to_decide.append({"study": "%s -> %s" % (ch["from"], ch["to"]),
                              "kind": "change with length", "contrast": what,
                              "n": sm["n"], "mean": sm["mean"], "half": sm["half"],
                              "sd": sm["sd"], "verdict": effect_verdict(sm, MARGIN),
                              "verdict_half": verdict_kind(sm, HALF_MARGIN),
                              "seeds_needed": seeds_needed(sm["sd"], MARGIN)})
    for d in doses:
        for k, what in GAPS:
            c = d["changes"].get(k)
            if c is None:
                continue
            to_decide.append({"study": d["study"], "kind": "change across the induced dose",
                              "contrast": what, "n": c["n"], "mean": c["mean"],
                              "half": c["half"], "sd": c["sd"], "verdict": c["verdict"],
                              "verdict_half": verdict_kind(c, HALF_MARGIN),
                              "seeds_needed": seeds_needed(c["sd"], MARGIN)})
    return to_decide


def crossover_verdict(res, pg, qg, last, total):
    """rules.h's rule_crossover on post - pre at the last phase's end and its
    change from phase 0's end, and its p."""
    sides = [0 if x["half"] is None else (1 if x["mean"] - x["half"] > 0 else
                                          -1 if x["mean"] + x["half"] < 0 else 0)
             for x in (last, total)]
    verdict = ("inconclusive (1 seed)" if last["half"] is None else
               "not reproduced" if max(sides) > 0 else
               "reproduced" if sides == [-1, -1] else "inconclusive")
    dnl = sorted(unlearned(res) & {pg, qg})
    if dnl:
        verdict = "%s: %s" % (NOT_LEARNED, ", ".join(dnl))
    p = (max(p_against(last, 0) or 0, p_against(total, 0) or 0)
         if verdict == "reproduced" else
         None if verdict.startswith(NOT_LEARNED) else
         min(p_against(last, 0) or 1, p_against(total, 0) or 1))
    return verdict, p


def crossover_rows(studies):
    """The paper's crossover, from the trajectories: post - pre at each
    phase's end, per plain grow pair."""
    cross_rows = []
    for folder, res in studies:
        name = study_name(folder, res)
        bs = res["preset"].get("student", {}).get("block_size", 3)
        for pg, qg, intervention in grow_pairs(res):
            cx = None if intervention else crossover(res, pg, qg)
            if cx is None:
                continue
            ends = [summary(d) for d in cx]
            changes_x = [summary([b - a for a, b in zip(cx[k - 1], cx[k])])
                         for k in range(1, len(cx))]
            total = summary([b - a for a, b in zip(cx[0], cx[-1])])
            verdict, p = crossover_verdict(res, pg, qg, ends[-1], total)
            cross_rows.append({"study": name, "pair": "%s / %s" % (pg, qg), "seeds": len(cx[0]),
                               "block_size": bs, "ends": ends,
                               "ahead": [sum(1 for v in d if v < 0) for d in cx],
                               "changes": changes_x, "total": total, "verdict": verdict,
                               "p": p})
    return cross_rows


def md_trend(study_dirs, trend):
    """report.md's title and the trend with training length."""
    md = ["# Across studies: the trend with training length and the dose-response", "",
          "Written by examples/reproduce/cross.py from the results.json of: " +
          ", ".join("`%s`" % os.path.normpath(s) for s in study_dirs) + ". Differences are "
          "paired by seed (post minus pre, nats/byte), ± the half-width of the 95% t interval "
          "over the seeds.", "",
          "## The trend with training length", "",
          "| study | recipe | steps per phase | seeds | joint: post - pre | grow: post - pre | "
          "I = grow - joint |", "|---|---|---|---|---|---|---|"]
    for t in sorted(trend, key=lambda t: (t["recipe"], t["steps_per_phase"])):
        md.append("| %s | %s | %d | %d | %s | %s | %s |" % (
            t["study"], t["recipe"] + ("" if not t["did_not_learn"] else " (%s: %s)" % (
                NOT_LEARNED, ", ".join(t["did_not_learn"]))), t["steps_per_phase"], t["seeds"],
            pm(t["joint"]), pm(t["grow"]), pm(t["I"])))
    return md


def md_changes(changes):
    """The change with training length, paired by seed."""
    md = []
    if changes:
        md += ["", "### The change with training length, paired by seed", "",
               "Each recipe's longer phases against its shortest, and against the next "
               "shorter where that is not the shortest: per seed, the longer "
               "study's difference minus the shorter's (seed N of both is one initialisation "
               "and one data order), over the seeds both ran; p is the two-sided t test's "
               "against 0 over those seeds, not adjusted for multiplicity.", "",
               "| recipe | from | to | seeds | joint gap | grow gap | I |",
               "|---|---|---|---|---|---|---|"]

        def with_p(sm):
            return pm(sm) + ("" if sm["p"] is None else ", p " + fmt_p(sm["p"]))
        for c in changes:
            md.append("| %s | %s (%d steps) | %s (%d steps) | %d | %s | %s | %s |" % (
                c["recipe"], c["from"], c["steps_from"], c["to"], c["steps_to"], c["seeds"],
                with_p(c["joint"]), with_p(c["grow"]), with_p(c["I"])))
    return md


def md_dose_response(points, fit_y, fit_z, cl_y, cl_z):
    """The dose-response points and the fits of y and z on x."""
    md = []
    md += ["", "## Dose-response: the row-start scale pre-norm hands an appended block", "",
           "One point per seed of every grow pair: x, pre-norm's row-start / regular RMS where "
           "the appended blocks read the stream (after block 1 at the end of phase 0 and after "
           "block 2 at the end of phase 1, their mean); y, post-grow - pre-grow (val CE); z, "
           "pre-grow's last-block dCE. The studies differ in more than x (recipe, phase "
           "length, intervention): a slope says how y moves with x across them, not that x "
           "causes it.", "",
           "| study | pair | seed | x | y | z |", "|---|---|---|---|---|---|"]
    for p in points:
        md.append("| %s | %s | %d | %.3f | %+.4f | %+.4f |" % (p["study"], p["pair"], p["seed"],
                                                               p["x"], p["y"], p["z"]))
    def cl(c):
        return pm(c) if c and c["slope"] is not None else "n/a"
    md += ["", "The fit's interval treats seeds as clusters: each seed's points (one "
           "initialisation and data order across the configurations) give that seed's slope, "
           "and the interval is the t interval of the seeds' slopes (seeds - 1 degrees of "
           "freedom); the pooled least-squares slope over every point is beside it, its "
           "interval counting the points as independent, which they are not.", "",
           "| fit | slope, seeds as clusters (95% interval) | seeds | pooled slope (points as "
           "independent) | points |", "|---|---|---|---|---|",
           "| y on x | %s | %d | %s | %d |" % (cl(cl_y), cl_y["seeds"] if cl_y else 0,
                                              pm(fit_y) if fit_y else "n/a",
                                              fit_y["n"] if fit_y else 0),
           "| z on x | %s | %d | %s | %d |" % (cl(cl_z), cl_z["seeds"] if cl_z else 0,
                                              pm(fit_z) if fit_z else "n/a",
                                              fit_z["n"] if fit_z else 0)]
    return md


def md_induced(doses):
    """Each study's induced dose; notes the grow gap's linear
    prediction in its dose."""
    md = []
    for d in doses:
        md += ["", "### The induced dose: %s" % d["study"], "",
               "Its four-arm sets differ only in the row-start offset added after layer 1 "
               "(`massive_offset`, K times the regular RMS; 0 is none), so here x is set by hand "
               "and how the differences move with it is causal. Per K: x as above (pre-grow's "
               "ratio), the paired differences, and pre-grow's last-block dCE and angle, 95% "
               "intervals over the seeds.", "",
               "| K | seeds | x | joint: post - pre | grow: post - pre | I | pre-grow last dCE | "
               "pre-grow last angle |", "|---|---|---|---|---|---|---|---|"]
        for r in d["rows"]:
            md.append("| %s | %d | %s | %s | %s | %s | %s | %s |" % (
                r["K"], r["seeds"], pm(r["x"], "%.3f"), pm(r["joint"]), pm(r["grow"]),
                pm(r["I"]), pm(r["z"]), pm(r["angle"])))
        md += ["", "Slopes on x with seeds as clusters (each seed's slope over its doses, a t "
               "interval over the seeds), and the change they imply across x's range, tested "
               "as the study's rules test an effect: below or above 0 when the 95%% interval "
               "excludes 0, within the paper's effect when the 90%% interval lies inside ±%.4f "
               "nats/byte (the study's equivalence margin: the paper's grow effect per byte; "
               "smaller than the paper's effect, not absent), otherwise inconclusive; the last "
               "column reads the same interval at half the margin, ±%.4f, where only "
               "\"equivalent\" shows an absence; dCE and angle are tested against 0 only."
               % (MARGIN, HALF_MARGIN), "",
               "| on x | slope (95%%) | seeds | x range | change across it (95%%) | verdict | "
               "at ±%.4f |" % HALF_MARGIN, "|---|---|---|---|---|---|---|"]
        for key, what in (("I", "I"), ("grow", "grow gap"), ("joint", "joint gap"),
                          ("z", "pre-grow last dCE"), ("angle", "pre-grow last angle")):
            f, c = d["fits"].get(key), d["changes"].get(key)
            if c is None:
                continue
            md.append("| %s | %s | %d | %.3f to %.3f | %s | %s | %s |" % (
                what, pm(f), f["seeds"], f["x_range"][0], f["x_range"][1], pm(c), c["verdict"],
                c["verdict_half"] or "(against 0 only; 90%% CI [%+.4f, %+.4f])"
                % (c["lo90"], c["hi90"])))
        g = d["changes"].get("grow")
        if g is not None:
            d["linear_prediction"] = -MARGIN * g["span"] / (37 - 1)
            md += ["", "A story linear in x, the grow gap 0 at x = 1 and the paper's -%.4f "
                   "(post ahead by delta) at its 37x, predicts a change of %+.4f across the "
                   "range tested (%.3f to %.3f); the change measured is %s. This test, the "
                   "change across the range against the margin, was added after the dose "
                   "runs were reported: it is post hoc." % (
                       MARGIN, d["linear_prediction"], g["span"] and d["fits"]["grow"]["x_range"][0],
                       d["fits"]["grow"]["x_range"][1], pm(g))]
    return md


def md_interventions(isum):
    """The interventions, paired with their recipe's post-grow."""
    md = []
    if isum:
        md += ["", "### The interventions", "",
               "Each intervention's pre-norm grow arm against its recipe's plain post-grow "
               "arm, paired by seed. They stay out of the fit: x is measured on the stream "
               "after block 1 and block 2, before the block-entry operation, so it is not what "
               "the appended block reads (the block-entry norm hands it a unit-scale stream, "
               "the row-start rescale a row-start RMS equal to its row's mean).", "",
               "| study | pair | seeds | x | y | z |", "|---|---|---|---|---|---|"]
        for t in isum:
            md.append("| %s | %s | %d | %s | %s | %s |" % (
                t["study"], t["pair"], t["seeds"], pm(t["x"], "%.3f"), pm(t["y"]), pm(t["z"])))
    return md


def md_designs(designed):
    """The designs' own contrasts and interactions."""
    md = []
    if designed:
        md += ["", "## The designs' contrasts", "",
               "Each study's own design (its preset's factors and levels), as its report gives "
               "them: a comparison is a level against its factor's reference, an interaction "
               "how one factor's effect changes with another's.", "",
               "| study | kind | contrast | seeds | mean ± 95% half-width | verdict |",
               "|---|---|---|---|---|---|"]
        for c in designed:
            mh = "n/a" if c["mean"] is None else (
                "%+.4f" % c["mean"] + ("" if c["half"] is None else " ± %.4f" % c["half"]))
            md.append("| %s | %s | %s | %d | %s | %s |" % (
                cell(c["study"]), c["kind"], cell(c["label"]), c["n"] or 0, mh,
                cell(c["verdict"])))
    return md


def md_crossover(cross_rows):
    """The crossover table: post - pre at each phase's end."""
    md = []
    if cross_rows:
        phases = max(len(r["ends"]) for r in cross_rows)
        md += ["", "## The crossover: post - pre at each phase's end, paired by seed", "",
               "The paper: \"the ranking crosses over during the curriculum: post-norm takes "
               "the lead once blocks are appended\" (single block post - pre +0.0044, grow "
               "-0.0328 nats/token). Per grow pair, post-grow - pre-grow at the evaluation that "
               "ends each phase (from results.json's trajectories: the evaluation batches "
               "during training, a fixed prefix of the held-out text, so the last phase's "
               "value is not the final evaluation's over all of it), with the seeds on which "
               "post-norm is ahead; the change across each append; and the study's rule "
               "(examples/reproduce/rules.h, rule_crossover): reproduced when post - pre at "
               "the last phase's end and its change from phase 0's end are both below 0, not "
               "reproduced when either is above 0.", "",
               "| study | pair | seeds | " + " | ".join("after phase %d" % k for k in range(phases))
               + " | " + " | ".join("across append %d" % k for k in range(1, phases)) +
               " | phase 0's end to the last | verdict | p |",
               "|" + "---|" * (3 + 2 * phases - 1 + 3)]
        for r in cross_rows:
            cells = ["%s (post ahead on %d)" % (pm(e), a) for e, a in zip(r["ends"], r["ahead"])]
            cells += [""] * (phases - len(r["ends"]))
            ch = [pm(c) for c in r["changes"]] + [""] * (phases - 1 - len(r["changes"]))
            md.append("| %s | %s | %d | %s | %s | %s | %s | %s |" % (
                r["study"], r["pair"], r["seeds"], " | ".join(cells), " | ".join(ch),
                pm(r["total"]), r["verdict"], fmt_p(r["p"])))
    return md


def md_seeds(to_decide):
    """Seeds to decide each row."""
    md = []
    if to_decide:
        md += [
            "", "## Seeds to decide each row", "",
            "Every comparison and interaction the studies report, each change with "
            "training length and each change across an induced dose: its seeds, mean ± 95%% half-width, the sd over seeds, its "
            "verdict, and how many seeds would give, at that sd, a 95%% interval whose "
            "half-width is below the study's margin, %.4f nats/byte (the paper's grow effect "
            "per byte). The count is for precision, not power: with it, an effect of the "
            "margin's size has its interval exclude 0 about half the time and one of twice "
            "that size nearly always, while a true effect of 0 passes the equivalence test "
            "only about a quarter of the time (80%% power for that takes about 2.2 times the "
            "count). The sd is estimated from the seeds run, so with 3 seeds the count is a "
            "rough plan, not a promise. A study's rows give its verdict's kind; its report "
            "gives what an inconclusive one allows. The verdict at half the margin, ±%.4f, is "
            "beside it: only \"equivalent\" there shows an absence." % (MARGIN, HALF_MARGIN),
            "", "| study | kind | contrast | seeds | mean ± 95%% half-width | sd | verdict | at "
            "±%.4f | seeds for a half-width below the margin |" % HALF_MARGIN,
            "|---|---|---|---|---|---|---|---|---|"]
        for r in to_decide:
            need = ("more than %d" % MAX_SEEDS if r["seeds_needed"] is None
                    else "%d" % r["seeds_needed"])
            md.append("| %s | %s | %s | %d | %+.4f ± %.4f | %.4f | %s | %s | %s |" % (
                cell(r["study"]), r["kind"], cell(r["contrast"]), r["n"], r["mean"],
                r["half"], r["sd"], cell(r["verdict"]), cell(r["verdict_half"]), need))
    return md


def dose_gp(fit_y):
    """The gnuplot lines that plot dose.svg: the points and the pooled fit."""
    lines = ["set terminal svg size 800,500", "set datafile separator ','",
             "set key off", "set grid", "set output 'dose.svg'",
             "set xlabel 'pre-norm row-start / regular RMS where appended blocks read'",
             "set ylabel 'post-grow - pre-grow (nats/byte)'",
             "plot 'points.csv' every ::1 using 4:5 with points pt 7 ps 0.8"]
    if fit_y and fit_y["slope"] is not None:
        lines[-1] += ", %r + %r * x with lines lw 2" % (fit_y["intercept"], fit_y["slope"])
    lines.append("unset output")
    return lines


def trend_gp(files, trend):
    """Where the trend has more than one phase length: trend.csv, put in
    files, and the gnuplot lines that plot trend.svg from it; [] otherwise."""
    rows = sorted(trend, key=lambda t: (t["recipe"], t["steps_per_phase"]))
    if len({t["steps_per_phase"] for t in rows}) <= 1:
        return []
    tcsv = ["recipe,steps_per_phase,joint,joint_half,grow,grow_half,I,I_half"]
    for t in rows:
        tcsv.append("%s,%d,%s" % (t["recipe"].replace(",", " "), t["steps_per_phase"],
                                  ",".join("%.6f,%.6f" % (t[k]["mean"],
                                                          t[k]["half"] or 0.0)
                                           for k in ("joint", "grow", "I"))))
    files["trend.csv"] = "\n".join(tcsv) + "\n"
    plots = []
    first = 1  # the rows of one recipe follow each other (sorted), after the header
    for rec in sorted({t["recipe"] for t in rows}):
        n = sum(1 for t in rows if t["recipe"] == rec)
        for col, what in ((3, "joint: post - pre"), (5, "grow: post - pre"), (7, "I")):
            plots.append("'trend.csv' every ::%d::%d using 2:%d:%d with yerrorlines "
                         "title %s" % (first, first + n - 1, col, col + 1,
                                       gp_str("%s, %s" % (rec, what))))
        first += n
    return ["set output 'trend.svg'", "set key outside", "set logscale x 2",
            "set xlabel 'steps per phase (log scale)'",
            "set ylabel 'nats/byte, with 95% intervals'",
            "plot 0 with lines lc 'black' notitle, " + ", ".join(plots),
            "unset output"]


def plot(points, trend, fit_y, md):
    """With gnuplot installed and dose-response points: the files it plots
    from, {name: text} (cross.gp, and trend.csv where the trend has phase
    lengths to plot against), and the plots' lines in md; {} otherwise."""
    if not (shutil.which("gnuplot") and points):
        return {}
    lines = dose_gp(fit_y)
    files = {}
    trend_lines = trend_gp(files, trend)
    lines += trend_lines
    files["cross.gp"] = "\n".join(lines) + "\n"
    md += ["", "![y against x, with the fit](dose.svg)"]
    if trend_lines:
        md.insert(md.index("## Dose-response: the row-start scale pre-norm hands an "
                           "appended block"),
                  "![post - pre and I against steps per phase](trend.svg)\n")
    return files


def parse_args(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", help="a JSON file declaring the headline family: its claims, "
                    "each Holm-adjusted over all of them")
    ap.add_argument("studies", nargs="+")
    return ap.parse_args(argv)


def read_inputs(args):
    """The studies and the family: each read and checked, two studies never of
    one name, and --out none of the studies' folders; Refused otherwise."""
    studies = [(folder, load(folder)) for folder in args.studies]
    names = {}
    for folder, res in studies:
        name = study_name(folder, res)
        if name in names:
            raise Refused("two studies are named %s (%s and %s): a study is given once"
                          % (name, names[name], folder))
        names[name] = folder
    out = os.path.realpath(args.out)
    for folder in args.studies:
        if os.path.realpath(folder) == out:
            raise Refused("--out %s is the study folder %s: its report.md would be replaced"
                          % (args.out, folder))
    if os.path.exists(args.out) and not os.path.isdir(args.out):
        raise Refused("--out %s is not a folder" % args.out)
    family = None
    if args.family:
        family = read_json(args.family)
        try:
            check_family(family)
        except Refused as e:
            raise Refused("%s: %s" % (args.family, e)) from None
    return studies, family


def compute(args, studies, family):
    """Everything cross.py writes, {name: text}, computed before anything is
    written."""
    trend, points, ipoints = trend_and_points(studies)
    doses = induced_doses(studies)
    fit_y = slope([p["x"] for p in points], [p["y"] for p in points]) if points else None
    fit_z = slope([p["x"] for p in points], [p["z"] for p in points]) if points else None
    cl_y = clustered_slope(points, "y") if points else None
    cl_z = clustered_slope(points, "z") if points else None
    changes = changes_with_length(trend)
    isum = intervention_sums(ipoints)
    md = (md_trend(args.studies, trend) + md_changes(changes) +
          md_dose_response(points, fit_y, fit_z, cl_y, cl_z) + md_induced(doses))
    designed = design_contrasts(studies)
    md += md_interventions(isum) + md_designs(designed)
    to_decide = seeds_to_decide(studies, changes, doses)
    cross_rows = crossover_rows(studies)
    md += md_crossover(cross_rows)
    family_rows = []
    if family is not None:
        try:
            family_rows = headline(family, studies, doses)
        except Refused as e:
            raise Refused("%s: %s" % (args.family, e)) from None
        at = md.index("## The trend with training length")
        md[at:at] = headline_md(family, family_rows)[1:] + [""]
    seeds_md = md_seeds(to_decide)
    out = {"trend": trend, "points": points, "fit_y_on_x": fit_y, "fit_z_on_x": fit_z,
           "design_contrasts": designed, "seeds_to_decide": to_decide,
           "fit_y_on_x_seeds_as_clusters": cl_y, "fit_z_on_x_seeds_as_clusters": cl_z,
           "change_with_training_length": changes,
           "interventions": isum, "intervention_points": ipoints, "induced_dose": doses,
           "crossover": cross_rows, "headline_family": family_rows,
           "margins": {"equivalence": MARGIN, "absence": HALF_MARGIN,
                       "bytes_per_token": BYTES_PER_TOKEN},
           "studies": [os.path.normpath(s) for s in args.studies]}
    try:
        files = {"cross.json": json.dumps(out, indent=2, allow_nan=False) + "\n"}
    except ValueError:
        raise Refused("a number computed from the studies is not finite (a value in a "
                      "results.json out of its range: an RMS near 0, a dCE near 0, ...)") from None
    csv = ["study,pair,seed,x,y,z"] + ["%s,%s,%d,%.6f,%.6f,%.6f" % (
        p["study"], p["pair"], p["seed"], p["x"], p["y"], p["z"]) for p in points]
    files["points.csv"] = "\n".join(csv) + "\n"
    files.update(plot(points, trend, fit_y, md))
    files["report.md"] = "\n".join(md + seeds_md) + "\n"
    return files, len(trend), len(points)


def write_all(out_dir, files):
    """Every file whole: each written to a temp file and synced, then all
    renamed into place once all are written (a failed write renames none,
    and removes an --out folder it made)."""
    made = not os.path.exists(out_dir)
    try:
        os.makedirs(out_dir, exist_ok=True)
    except OSError as e:
        raise Refused("--out %s cannot be made: %s" % (out_dir, e.strerror)) from None
    try:
        write_files(out_dir, files)
    except (Refused, OSError):
        if made and not os.listdir(out_dir):
            os.rmdir(out_dir)
        raise


def write_files(out_dir, files):
    """write_all's files into out_dir, which exists."""
    for name in files:
        if os.path.isdir(os.path.join(out_dir, name)):
            raise Refused("%s is a folder: cross.py writes a file there"
                          % os.path.join(out_dir, name))
    tmps = []
    try:
        for name, text in files.items():
            tmp = os.path.join(out_dir, "%s.%d.tmp" % (name, os.getpid()))
            tmps.append(tmp)
            with open(tmp, "w") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
        for tmp, name in zip(tmps, files):
            os.replace(tmp, os.path.join(out_dir, name))
    finally:
        for tmp in tmps:
            if os.path.exists(tmp):
                os.unlink(tmp)


def run(argv):
    args = parse_args(argv)
    try:
        studies, family = read_inputs(args)
        try:
            files, n_trend, n_points = compute(args, studies, family)
        except (ArithmeticError, LookupError, TypeError, ValueError, RecursionError) as e:
            # a shape no check above foresaw: said in one line, with where it
            # tripped (a check is missing there), never a traceback
            at = traceback.extract_tb(e.__traceback__)[-1]
            raise Refused("the studies could not be read together (%s at %s:%d: %s)"
                          % (type(e).__name__, os.path.basename(at.filename), at.lineno,
                             e)) from None
        write_all(args.out, files)
    except (Refused, OSError) as e:
        print("cross: %s; nothing written" % e, file=sys.stderr)
        return 1
    if "cross.gp" in files:
        subprocess.run(["gnuplot", "cross.gp"], cwd=args.out, check=False,
                       stderr=subprocess.DEVNULL)
    print("cross: %d trend rows, %d dose-response points -> %s" % (n_trend, n_points, args.out))
    return 0


def main(argv):
    return run(argv)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
