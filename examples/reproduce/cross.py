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
library only.
"""
import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys

# Two-sided 95% t quantiles, df 1..30 (beyond: t_quantile's expansion).
T95 = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
       2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
       2.060, 2.056, 2.052, 2.048, 2.045, 2.042]


# One-sided 95% t quantiles (a two-sided 90% interval, the equivalence test's), df 1..30.
T90 = [6.314, 2.920, 2.353, 2.132, 2.015, 1.943, 1.895, 1.860, 1.833, 1.812, 1.796, 1.782,
       1.771, 1.761, 1.753, 1.746, 1.740, 1.734, 1.729, 1.725, 1.721, 1.717, 1.714, 1.711,
       1.708, 1.706, 1.703, 1.701, 1.699, 1.697]

# The equivalence margin, EQUIVALENCE_MARGIN of examples/reproduce/rules.h
# (delta): the paper's grow effect, 0.0328 nats/token, at an assumed 4 bytes
# per token. A row inside it is "within the paper's effect", never absent.
PAPER_GROW_PER_TOKEN = 0.0328
BYTES_PER_TOKEN = 4
MARGIN = PAPER_GROW_PER_TOKEN / BYTES_PER_TOKEN
# The second margin, ABSENCE_MARGIN (delta / 2): only a row inside it is
# "equivalent", the one verdict that shows an absence.
HALF_MARGIN = MARGIN / 2
# Holm's family is tested at this level.
ALPHA = 0.05


def _beta_cf(a, b, x):
    """The continued fraction of the incomplete beta function (modified Lentz)."""
    tiny = 1e-300
    c, d = 1.0, 1 - (a + b) * x / (a + 1)
    d = 1 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 301):
        m2 = 2 * m
        for aa in (m * (b - m) * x / ((a + m2 - 1) * (a + m2)),
                   -(a + m) * (a + b + m) * x / ((a + m2) * (a + m2 + 1))):
            d = 1 + aa * d
            d = 1 / (d if abs(d) > tiny else tiny)
            c = 1 + aa / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1) < 1e-15:
            break
    return h


def t_cdf(t, df):
    """The t distribution's CDF (the regularized incomplete beta function),
    as examples/reproduce/stats.c computes it."""
    a, b, x = 0.5 * df, 0.5, df / (df + t * t)
    if x <= 0:
        tail = 0.0
    elif x >= 1:
        tail = 0.5
    else:
        front = math.exp(math.lgamma(a + b) - math.lgamma(a) - math.lgamma(b) +
                         a * math.log(x) + b * math.log(1 - x))
        ib = (front * _beta_cf(a, b, x) / a if x < (a + 1) / (a + b + 2)
              else 1 - front * _beta_cf(b, a, 1 - x) / b)
        tail = 0.5 * ib
    return 1 - tail if t > 0 else tail


def p_against(s, x):
    """Two-sided p of a summary's mean against x (a t test over its seeds):
    below 0.05 exactly when its 95% t interval excludes x. None without an
    interval."""
    if s is None or s.get("sd") is None or s["n"] < 2:
        return None
    if s["sd"] == 0:
        return 1.0 if s["mean"] == x else 0.0
    t = (s["mean"] - x) / (s["sd"] / math.sqrt(s["n"]))
    return min(1.0, 2 * t_cdf(-abs(t), s["n"] - 1))


def p_tost(s, margin):
    """The equivalence test's p at +-margin (the larger of the two one-sided
    t tests'): below 0.05 exactly when the 90% interval lies inside it."""
    if s is None or s.get("sd") is None or s["n"] < 2:
        return None
    if s["sd"] == 0:
        return 0.0 if abs(s["mean"]) < margin else 1.0
    se = s["sd"] / math.sqrt(s["n"])
    return max(1 - t_cdf((s["mean"] + margin) / se, s["n"] - 1),
               t_cdf((s["mean"] - margin) / se, s["n"] - 1))


def holm(ps):
    """Holm's step-down adjustment: the i-th smallest p times (m - i + 1),
    kept from falling, at most 1; None stays None (not in the family)."""
    order = sorted((i for i, p in enumerate(ps) if p is not None), key=lambda i: ps[i])
    m, run, adj = len(order), 0.0, [None] * len(ps)
    for k, i in enumerate(order):
        run = max(run, min(1.0, (m - k) * ps[i]))
        adj[i] = run
    return adj


def fmt_p(p):
    return "n/a" if p is None else "< 0.0001" if p < 0.0001 else "%.4f" % p


def t_quantile(z, df):
    """The t quantile at the normal's quantile z for df > 30: the first three
    terms of its expansion in 1/df (Cornish-Fisher), within 1e-3 there."""
    return (z + (z ** 3 + z) / (4 * df) +
            (5 * z ** 5 + 16 * z ** 3 + 3 * z) / (96 * df ** 2))


def t95(df):
    return T95[df - 1] if 1 <= df <= len(T95) else t_quantile(1.959964, df)


def t90(df):
    return T90[df - 1] if 1 <= df <= len(T90) else t_quantile(1.644854, df)


# The most seeds seeds_needed looks at; beyond it, it says so.
MAX_SEEDS = 1000


def seeds_needed(sd, margin):
    """The fewest seeds n (at least 2) whose 95% t interval, at this sd over
    seeds, has a half-width below margin: t95(n - 1) * sd / sqrt(n) < margin.
    A planning figure: the sd is itself estimated from the seeds run. None
    when more than MAX_SEEDS would be needed."""
    for n in range(2, MAX_SEEDS + 1):
        if t95(n - 1) * sd / math.sqrt(n) < margin:
            return n
    return None


def summary(xs):
    """Mean and the half-width of its 95% t interval (None with one value)."""
    n = len(xs)
    m = sum(xs) / n
    if n < 2:
        return {"mean": m, "half": None, "n": n, "sd": None}
    sd = math.sqrt(sum((x - m) ** 2 for x in xs) / (n - 1))
    return {"mean": m, "half": t95(n - 1) * sd / math.sqrt(n), "n": n, "sd": sd}


def slope(xs, ys):
    """Least-squares slope of ys on xs with its 95% t interval (n - 2 df)."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    if n < 3 or sxx == 0:
        return {"slope": None, "half": None, "intercept": None, "n": n}
    b = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx
    a = my - b * mx
    resid = sum((y - a - b * x) ** 2 for x, y in zip(xs, ys))
    se = math.sqrt(resid / (n - 2) / sxx)
    return {"slope": b, "half": t95(n - 2) * se, "intercept": a, "n": n}


def clustered_slope(points, key):
    """The slope of key on x with seeds as clusters: the points of one seed
    (every configuration run with that seed: one initialisation and data
    order) give that seed's least-squares slope; the mean of the seeds'
    slopes with its 95% t interval over the seeds (seeds - 1 df), since the
    points of one seed are not independent draws. None where fewer than 2
    seeds have 2 distinct x."""
    by_seed = {}
    for p in points:
        by_seed.setdefault(p["seed"], []).append(p)
    slopes = []
    for seed in sorted(by_seed):
        pts = by_seed[seed]
        xs, ys = [p["x"] for p in pts], [p[key] for p in pts]
        mx, my = sum(xs) / len(xs), sum(ys) / len(ys)
        sxx = sum((x - mx) ** 2 for x in xs)
        if len(pts) >= 2 and sxx > 0:
            slopes.append(sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx)
    if len(slopes) < 2:
        return {"slope": None, "half": None, "seeds": len(slopes), "per_seed": slopes}
    s = summary(slopes)
    xs = [p["x"] for p in points]
    return {"slope": s["mean"], "half": s["half"], "seeds": len(slopes), "per_seed": slopes,
            "x_range": [min(xs), max(xs)]}


def pm(s, fmt="%+.4f"):
    if s is None or s.get("mean", s.get("slope")) is None:
        return "n/a"
    v = s["mean"] if "mean" in s else s["slope"]
    if s["half"] is None:
        return fmt % v + " (1 seed)"
    return (fmt % v) + " ± " + (fmt % s["half"]).lstrip("+")


NAME_RULE = "1 to 47 characters: letters, digits and - _ . +, not starting with a dot"
NAME_RE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,46}")


class Refused(Exception):
    pass


def cell(x):
    """x as one Markdown table cell: no line breaks or other control characters
    (a label cannot start a heading or a row of its own), '|' escaped."""
    text = "".join(c if c >= " " and c != "\x7f" else " " for c in str(x))
    return text.replace("|", "\\|")


def design_row(c, where):
    """A design's comparison or interaction from results.json, every field it
    is read for checked: Refused naming the field otherwise."""
    def want(key, ok, what):
        v = c.get(key)
        if not ok(v):
            raise Refused("%s.%s: %r is not %s" % (where, key, v, what))
        return v
    number = lambda v: v is None or (isinstance(v, (int, float)) and not isinstance(v, bool))
    want("label", lambda v: isinstance(v, str) and v, "a label (a string)")
    want("n", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool) and v >= 0),
         "a seed count")
    want("mean", number, "a number")
    want("half_width_95", number, "a number")
    want("sd", number, "a number")
    want("order", lambda v: v is None or (isinstance(v, int) and not isinstance(v, bool)),
         "an order (a whole number)")
    want("did_not_learn", lambda v: v is None or (isinstance(v, list) and
                                                   all(isinstance(x, str) for x in v)),
         "a list of arm names")
    want("verdict", lambda v: v is None or isinstance(v, str), "a verdict (a string)")
    return c


def name_ok(name):
    return isinstance(name, str) and NAME_RE.fullmatch(name) is not None


# A row that rests on an arm that did not learn (results.json's baseline) has no
# verdict but this one, as in report.md.
NOT_LEARNED = "not applicable (did not learn)"


def unlearned(res):
    """The study's arms that did not learn (results.json's baseline)."""
    return set((res.get("baseline") or {}).get("did_not_learn") or [])


def arms_as_run(res):
    """The arms as the study ran them: results.json's arms_as_run (a design's
    cells among them), or, from a study written before it, the preset's."""
    return res.get("arms_as_run") or res["preset"].get("arms", []) or []


def arm_spp(res, arm):
    """An arm's steps per phase: its own (results.json's arm_settings), else
    the preset's."""
    own = (res.get("arm_settings") or {}).get(arm) or {}
    return own.get("steps_per_phase") or res["preset"]["train"].get("steps_per_phase", 1000)


def check_names(res, folder):
    """Refuse a results.json whose arm or study names break the name rule."""
    where = os.path.join(folder, "results.json")
    if not isinstance(res, dict) or not isinstance(res.get("arms"), dict) or \
            not isinstance(res.get("preset"), dict):
        raise Refused("%s: not a study's results (an object with 'preset' and 'arms')" % where)
    names = list(res["arms"])
    for a in list(res["preset"].get("arms", []) or []) + list(res.get("arms_as_run") or []):
        names.append(a.get("name") if isinstance(a, dict) else a)
    bad = [n for n in names if not name_ok(n)]
    if bad:
        raise Refused("%s: the arm name%s %s not allowed: a name is %s" % (
            where, "s" if len(bad) > 1 else "", ", ".join(repr(n) for n in bad), NAME_RULE))
    if "name" in res["preset"] and not name_ok(res["preset"]["name"]):
        raise Refused("%s: the study name %r is not allowed: a name is %s" % (
            where, res["preset"]["name"], NAME_RULE))


def load(folder):
    where = os.path.join(folder, "results.json")
    try:
        with open(where) as f:
            res = json.load(f)
    except (OSError, ValueError) as e:
        raise Refused("%s: %s" % (where, e))
    check_names(res, folder)
    return res


def gp_str(s):
    """s as a single-quoted gnuplot string: quotes doubled, no line breaks."""
    s = "".join(c if c >= " " and c != "\x7f" else " " for c in s)
    return "'" + s.replace("'", "''") + "'"


def arm_specs(res):
    """Each arm's placement and schedule, from the preset's arm list."""
    named = {"joint", "grow", "freeze", "single", "joint-active", "joint-total"}
    out = {}
    for a in arms_as_run(res):
        if isinstance(a, str):
            pl, rest = a.split("-", 1)
            out[a] = (pl, rest if rest in named else None, False)
        else:
            name = a["name"]
            pl = a.get("placement", name.split("-", 1)[0])
            sched = a.get("schedule")
            if sched is None and "phases" not in a and "-" in name:
                sched = name.split("-", 1)[1] if name.split("-", 1)[1] in named else None
            out[name] = (pl, sched, bool(a.get("block_norm") or a.get("block_rescale")))
    return out


def finals(res, arm):
    return [s["val_ce"] for s in res["arms"].get(arm, [])]


def paired(res, a, b):
    x, y = finals(res, a), finals(res, b)
    return [q - p for p, q in zip(x, y)] if x and len(x) == len(y) else None


def four_arm_sets(res):
    """(label, pre joint, post joint, pre grow, post grow) of every recipe the
    study has all four main arms on (the plain names, and -SUFFIX sets)."""
    arms = res["arms"]
    sets = []
    suffixes = {""} | {n[len("pre-joint"):] for n in arms if n.startswith("pre-joint-")}
    for suf in sorted(suffixes):
        names = ["pre-joint" + suf, "post-joint" + suf, "pre-grow" + suf, "post-grow" + suf]
        if all(n in arms for n in names):
            sets.append((suf.lstrip("-") or "paper's optimizer", *names))
    return sets


def ratio_at_phase_end(res, run, k, arm=None):
    """pre-norm's row-start / regular RMS after block k + 1 at the end of phase k."""
    spp = arm_spp(res, arm)
    bs = res["preset"].get("student", {}).get("block_size", 3)
    for p in run["trajectory"]:
        if p["step"] == (k + 1) * spp and p["active_layers"] == (k + 1) * bs:
            if p["rms_boundary"] is not None and p["rms_regular"]:
                return p["rms_boundary"] / p["rms_regular"]
    return None


def grow_pairs(res):
    """(pre grow arm, post grow arm, intervention) of every grow pair: pre-X and
    post-X, and each intervention's pre grow arm (block_norm or block_rescale,
    named pre-<intervention>-grow<suffix>) against post-grow<suffix>, the plain
    post-norm arm of its recipe."""
    specs = arm_specs(res)
    pairs = []
    for name, (pl, sched, intervention) in specs.items():
        if pl != "pre" or sched != "grow" or not name.startswith("pre-") or name not in res["arms"]:
            continue
        if intervention:
            at = name.find("-grow")
            partner = "post-grow" + name[at + len("-grow"):] if at >= 0 else None
        else:
            partner = "post-" + name[4:]
        if partner in res["arms"]:
            pairs.append((name, partner, intervention))
    return pairs


def arm_dose(res, name):
    """An arm's induced row-start offset (massive_offset, 0 without one) and
    the rest of its preset entry (what must match across doses)."""
    for a in arms_as_run(res):
        if isinstance(a, dict) and a.get("name") == name:
            rest = {k: v for k, v in a.items() if k not in ("name", "massive_offset")}
            return a.get("massive_offset", 0), rest
    return 0, {"name": name}


def dose_sets(res):
    """The study's four-arm sets that differ only in the induced offset: per
    set, (K, pre joint, post joint, pre grow, post grow). Empty unless at least
    two doses, every set on the same recipe and model options otherwise."""
    sets, shape = [], None
    for _label, pj, qj, pg, qg in four_arm_sets(res):
        doses = [arm_dose(res, n) for n in (pj, qj, pg, qg)]
        ks = {k for k, _ in doses}
        if len(ks) != 1:
            continue
        this = json.dumps([r for _, r in doses], sort_keys=True)
        if shape is None:
            shape = this
        elif this != shape:
            return []
        sets.append((ks.pop(), pj, qj, pg, qg))
    return sets if len({k for k, *_ in sets}) >= 2 else []


def effect_verdict(s, margin):
    """The verdict of examples/reproduce/rules.c's effect rule on a summary
    (mean, 95% half-width, n): below or above 0 (95%), equivalent (90% inside
    +-margin) or inconclusive, with what its 95% interval allows; without a
    margin (a quantity not in nats/byte), below or above 0, or an interval
    that includes 0."""
    m, half, n = s["mean"], s["half"], s["n"]
    h90 = half * t90(n - 1) / t95(n - 1)
    if m + half < 0:
        return "below 0"
    if m - half > 0:
        return "above 0"
    if margin is None:
        return "includes 0 (tested against 0 only)"
    if m - h90 > -margin and m + h90 < margin:
        return "%s (90%% CI [%+.4f, %+.4f] inside ±%.4f)" % (
            "equivalent" if margin <= HALF_MARGIN * (1 + 1e-9) else "within the paper's effect",
            m - h90, m + h90, margin)
    if margin <= HALF_MARGIN * (1 + 1e-9):
        return "not inside ±%.4f (90%% CI [%+.4f, %+.4f])" % (margin, m - h90, m + h90)
    return ("inconclusive: allows %+.4f to %+.4f, up to %.1fx the margin"
            % (m - half, m + half, max(abs(m - half), abs(m + half)) / margin))


def verdict_kind(s, margin):
    """effect_verdict's verdict in its first words: below 0, above 0, within
    the paper's effect, equivalent (at half the margin), inconclusive, not
    inside."""
    if s.get("half") is None or s.get("n", 0) < 2:
        return "inconclusive (1 seed)"
    return effect_verdict(s, margin).split(" (")[0].split(":")[0]


def half_verdict(s):
    """effect_verdict at half the margin (rules.h's ABSENCE_MARGIN)."""
    return effect_verdict(s, HALF_MARGIN)


def dose_change(c, margin):
    """The change a clustered slope implies across its x range, with its 95%
    and 90% intervals and effect_verdict's verdict."""
    if not c or c["slope"] is None or len(c["per_seed"]) < 2:
        return None
    span = c["x_range"][1] - c["x_range"][0]
    n = len(c["per_seed"])
    s = summary([b * span for b in c["per_seed"]])
    m, half = s["mean"], s["half"]
    h90 = half * t90(n - 1) / t95(n - 1)
    return {"span": span, "mean": m, "half": half, "lo90": m - h90, "hi90": m + h90,
            "sd": s["sd"], "n": n, "verdict": effect_verdict(s, margin),
            "verdict_half": half_verdict(s) if margin is not None else None,
            "per_seed": [b * span for b in c["per_seed"]]}


def study_name(folder, res):
    return res["preset"].get("name", os.path.basename(folder.rstrip("/")))


def val_at_phase_end(res, run, k, arm=None):
    """A run's validation CE at its evaluation at the end of phase k (the
    trajectory's point at that step with the phase's layers active: the
    evaluation batches during training, not the final evaluation)."""
    spp = arm_spp(res, arm)
    bs = res["preset"].get("student", {}).get("block_size", 3)
    for p in run.get("trajectory", []):
        if p["step"] == (k + 1) * spp and p["active_layers"] == (k + 1) * bs:
            return p.get("val_ce")
    return None


def crossover(res, pre, post):
    """post - pre at each phase's end, paired by seed, from the trajectories;
    None unless every seed has every phase's end."""
    blocks = res["preset"].get("student", {}).get("blocks", 3)
    rows = []
    for k in range(blocks):
        d = []
        for r, q in zip(res["arms"].get(pre, []), res["arms"].get(post, [])):
            a, b = val_at_phase_end(res, r, k, pre), val_at_phase_end(res, q, k, post)
            if a is None or b is None:
                return None
            d.append(b - a)
        if len(d) < 1:
            return None
        rows.append(d)
    return rows if len(rows) >= 2 else None


def summary_at(s, n):
    """The summary s would have with n seeds at the same mean and sd."""
    return {"mean": s["mean"], "sd": s["sd"], "n": n,
            "half": t95(n - 1) * s["sd"] / math.sqrt(n)}


def claim_p(test, s):
    """The p of a claim's test on a summary of its per-seed values."""
    if test == "direction":
        return p_against(s, 0)
    if test == "within":
        return p_tost(s, MARGIN)
    if test == "excludes_paper":  # post ahead by the paper's effect (-delta) excluded at 95%
        return p_against(s, -MARGIN) if s["mean"] > -MARGIN else 1.0
    raise Refused("family: unknown test %r" % test)


def bytes_bound(test, s):
    """The most bytes per token at which the claim still holds at this
    interval (the margin is 0.0328 / bytes per token)."""
    if test == "excludes_paper":
        lo = s["mean"] - s["half"]
        return PAPER_GROW_PER_TOKEN / -lo if lo < 0 else None
    if test == "within":
        h90 = s["half"] * t90(s["n"] - 1) / t95(s["n"] - 1)
        return PAPER_GROW_PER_TOKEN / max(abs(s["mean"] - h90), abs(s["mean"] + h90))
    return None


def headline(family, studies, doses):
    """The declared headline family: each claim's per-seed values from the
    studies' results.json, its p, Holm's adjustment over the family, and for a
    claim that fails it the seeds that would pass it at the mean and sd seen."""
    by_name = {study_name(f, r): r for f, r in studies}
    rows = []
    for c in family["claims"]:
        test = c.get("test", "direction")
        parts = []  # (test, per-seed values)
        p_given = None
        if "terms" in c:
            vals = None
            for st, arm, coef in c["terms"]:
                if st not in by_name or arm not in by_name[st]["arms"]:
                    raise Refused("family: %s has no arm %s" % (st, arm))
                f = finals(by_name[st], arm)
                if "seeds" in c:  # a range of seed numbers, first to last
                    f = f[c["seeds"][0] - 1:c["seeds"][1]]
                vals = [coef * x for x in f] if vals is None else \
                    [v + coef * x for v, x in zip(vals, f)]
            parts.append((test, vals))
        elif "block_removal" in c:
            st, pre, post = c["block_removal"]
            res = by_name[st]
            ratio, pmin, agap = [], [], []
            for r, q in zip(res["arms"][pre], res["arms"][post]):
                last = r["block_removal"][-1]
                md = min(b["dce"] for b in q["block_removal"])
                ma = min(b["angle"] for b in q["block_removal"])
                ratio.append(last["dce"] / md)
                pmin.append(md)
                agap.append(ma - last["angle"])
            parts += [("below 0.25", ratio), ("above 0.05", pmin), ("above 0", agap)]
        elif "crossover" in c:
            st, pre, post = c["crossover"]
            cx = crossover(by_name[st], pre, post)
            if cx is None:
                raise Refused("family: %s has no phase ends for %s / %s" % (st, pre, post))
            parts.append((test, [b - a for a, b in zip(cx[0], cx[-1])]))
        elif "dose" in c:
            st, key = c["dose"]
            ch = next((d["changes"].get(key) for d in doses if d["study"] == st), None)
            if ch is None:
                raise Refused("family: no induced dose %s in %s" % (key, st))
            parts.append((test, ch["per_seed"]))
        elif "verdict_row" in c:
            st, prefix = c["verdict_row"]
            row = next((v for v in by_name[st].get("verdicts", [])
                        if v["finding"].startswith(prefix)), None)
            m = re.match(r"p (< )?([0-9.]+)", (row or {}).get("p", ""))
            if not m:
                raise Refused("family: %s's verdict row %r has no p" % (st, prefix))
            p_given = float(m.group(2))
        else:
            raise Refused("family: a claim with nothing to test: %r" % c.get("claim"))
        sums, ps = [], []
        for t, vals in parts:
            sm = summary(vals)
            sums.append((t, sm))
            if t in ("below 0.25", "above 0.05", "above 0"):
                x = {"below 0.25": 0.25, "above 0.05": 0.05, "above 0": 0.0}[t]
                ps.append(p_against(sm, x))
            else:
                ps.append(claim_p(t, sm))
        p = p_given if p_given is not None else max(ps)
        first = sums[0][1] if sums else None
        label = ("block removal: ratio below 0.25, smallest post dCE above 0.05, angle gap "
                 "above 0" if "block_removal" in c else
                 "verdict row (%s's report.md)" % c["verdict_row"][0] if "verdict_row" in c else
                 "within (dose change)" if "dose" in c else
                 "direction (phase-end change)" if "crossover" in c else test)
        rows.append({"claim": c["claim"], "test": label, "source": c.get("source", ""), "p": p,
                     "p_is_bound": p_given is not None and "<" in (m.group(0) if p_given is not None else ""),
                     "n": first["n"] if first else None,
                     "mean": first["mean"] if first else None,
                     "half": first["half"] if first else None,
                     "sd": first["sd"] if first else None,
                     "parts": [{"test": t, "n": sm["n"], "mean": sm["mean"], "sd": sm["sd"],
                                "half": sm["half"]} for t, sm in sums],
                     "bytes_per_token_bound": bytes_bound(test, first) if first and "terms" in c
                     else None})
    beside = [r for r, c in zip(rows, family["claims"]) if c.get("beside")]
    rows = [r for r, c in zip(rows, family["claims"]) if not c.get("beside")]
    for r in beside:
        r["beside"] = True
    adj = holm([r["p"] for r in rows])
    order = sorted(range(len(rows)), key=lambda i: rows[i]["p"])
    m = len(rows)
    for rank, i in enumerate(order):
        r = rows[i]
        r["holm"] = adj[i]
        r["holds"] = adj[i] < family.get("alpha", ALPHA)
        r["seeds_to_pass"] = None
        if not r["holds"] and r["parts"]:
            level = family.get("alpha", ALPHA) / (m - rank)
            need = 0
            for part in r["parts"]:
                if part["sd"] is None:
                    need = None
                    break
                t = part["test"]
                n_ok = None
                for n in range(2, MAX_SEEDS + 1):
                    sm = summary_at(part, n)
                    if t in ("below 0.25", "above 0.05", "above 0"):
                        pp = p_against(sm, {"below 0.25": 0.25, "above 0.05": 0.05,
                                            "above 0": 0.0}[t])
                    else:
                        pp = claim_p(t, sm)
                    if pp < level:
                        n_ok = n
                        break
                if n_ok is None:
                    need = None
                    break
                need = max(need, n_ok)
            r["seeds_to_pass"] = need
            r["level"] = level
    return rows + beside


def headline_md(family, rows):
    md = ["", "## The headline family, corrected for multiplicity (Holm)", "",
          family.get("what", "The claims declared in the family file.") + " Each claim's p is "
          "that of the test its verdict reads, computed here from the studies' results.json: "
          "a direction, the two-sided t test against 0 over the paired seeds; *within*, the "
          "two one-sided t tests at ±%.4f nats/byte (delta: the paper's grow effect, %.4f "
          "nats per Qwen3 token, at an assumed %d bytes per token); *excludes the paper's "
          "effect*, the two-sided t test against -%.4f (post-grow ahead by delta); block "
          "removal, the largest p of its rule's three intervals; a verdict row, the p its "
          "study's report.md prints. Holm's step-down adjustment over the %d claims: a claim "
          "holds for the family when its Holm p is below %.2f; one that fails is not decided, "
          "and the last column gives the seeds that would pass it at its place in Holm's "
          "order, at the mean and sd seen, were every claim before it in that order to pass "
          "(a plan, not a promise; the step-down stops at the first claim that fails, so a "
          "claim after it fails with it). For a claim that reads the "
          "margin, the most bytes per token at which its interval still holds."
          % (MARGIN, PAPER_GROW_PER_TOKEN, BYTES_PER_TOKEN, MARGIN, len(rows),
             family.get("alpha", ALPHA)), "",
          "| claim | test | seeds | mean ± 95% half-width | p | Holm p | verdict | holds up to "
          "(bytes per token) | seeds to pass Holm |", "|---|---|---|---|---|---|---|---|---|"]
    family_rows, beside = [r for r in rows if not r.get("beside")], \
        [r for r in rows if r.get("beside")]
    for r in family_rows + beside:
        if r is (beside[0] if beside else None):
            md += ["", "Beside the family, not in it (the same tests, no Holm adjustment):", "",
                   "| claim | test | seeds | mean ± 95% half-width | p |", "|---|---|---|---|---|"]
        if r.get("beside"):
            md.append("| %s | %s | %s | %s | %s |" % (r["claim"], r["test"], r["n"], pm(r),
                                                     fmt_p(r["p"])))
            continue
        mh = "n/a" if r["mean"] is None else pm(r)
        bound = "" if r["bytes_per_token_bound"] is None else "%.2f" % r["bytes_per_token_bound"]
        if r["holds"]:
            need = ""
        elif r["seeds_to_pass"] is None:
            need = "n/a" if not r["parts"] else "none at the mean seen"
        else:
            need = "%d" % r["seeds_to_pass"]
        md.append("| %s | %s | %s | %s | %s%s | %s | %s | %s | %s |" % (
            cell(r["claim"]), r["test"], "" if r["n"] is None else r["n"], mh,
            "< " if r["p_is_bound"] else "", fmt_p(r["p"]).lstrip("< ") if r["p_is_bound"]
            else fmt_p(r["p"]), fmt_p(r["holm"]),
            "holds" if r["holds"] else "fails Holm: not decided", bound, need))
    return md


def write_whole(path, text):
    tmp = "%s.%d.tmp" % (path, os.getpid())
    with open(tmp, "w") as f:
        f.write(text)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)


def run(argv):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--family", help="a JSON file declaring the headline family: its claims, "
                    "each Holm-adjusted over all of them")
    ap.add_argument("studies", nargs="+")
    args = ap.parse_args(argv)
    try:
        studies = [(folder, load(folder)) for folder in args.studies]
        family = None
        if args.family:
            with open(args.family) as f:
                family = json.load(f)
    except (Refused, OSError, ValueError) as e:
        print("cross: %s; nothing written" % e, file=sys.stderr)
        return 1
    os.makedirs(args.out, exist_ok=True)
    trend, points, ipoints = [], [], []
    for folder, res in studies:
        name = res["preset"].get("name", os.path.basename(folder.rstrip("/")))
        spp = res["preset"]["train"].get("steps_per_phase")
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
                xs = [v for v in (ratio_at_phase_end(res, r, 0, pg), ratio_at_phase_end(res, r, 1, pg))
                      if v is not None]
                if not xs or not r["block_removal"]:
                    continue
                (ipoints if intervention else points).append({
                    "study": name, "pair": "%s / %s" % (pg, qg), "seed": seed,
                    "x": sum(xs) / len(xs), "y": q["val_ce"] - r["val_ce"],
                    "z": r["block_removal"][-1]["dce"]})
    # the induced dose, within one study: the configurations differ only in
    # the offset, so x is set by hand and a slope over them is causal
    doses = []
    for folder, res in studies:
        name = res["preset"].get("name", os.path.basename(folder.rstrip("/")))
        dpoints, rows = [], []
        for k, pj, qj, pg, qg in dose_sets(res):
            dj, dg = paired(res, pj, qj), paired(res, pg, qg)
            if not dj or not dg:
                continue
            xs, zs, angles = [], [], []
            for seed, r in enumerate(res["arms"][pg], 1):
                v = [t for t in (ratio_at_phase_end(res, r, 0, pg), ratio_at_phase_end(res, r, 1, pg))
                     if t is not None]
                if not v or not r["block_removal"] or seed > len(dj):
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
        if len(rows) >= 2:
            keys = ["I", "grow", "joint", "z"]
            if all(p["angle"] is not None for p in dpoints):
                keys.append("angle")
            fits = {key: clustered_slope(dpoints, key) for key in keys}
            doses.append({"study": name, "rows": sorted(rows, key=lambda r: r["K"]),
                          "points": dpoints, "fits": fits,
                          "changes": {k: dose_change(f, MARGIN if k in ("I", "grow", "joint") else None)
                                      for k, f in fits.items()}})
    fit_y = slope([p["x"] for p in points], [p["y"] for p in points]) if points else None
    fit_z = slope([p["x"] for p in points], [p["z"] for p in points]) if points else None
    cl_y = clustered_slope(points, "y") if points else None
    cl_z = clustered_slope(points, "z") if points else None
    # the change with training length, paired by seed: each recipe's longest
    # phases against its shortest, where both studies ran the same seeds
    changes = []
    by_recipe = {}
    for t in trend:
        by_recipe.setdefault(t["recipe"], []).append(t)
    for rec, rows in sorted(by_recipe.items()):
        rows = sorted(rows, key=lambda t: t["steps_per_phase"])
        short = rows[0]
        for long_ in rows[1:]:
            if long_["steps_per_phase"] == short["steps_per_phase"]:
                continue
            n = min(len(short["per_seed"]["joint"]), len(long_["per_seed"]["joint"]))
            if n < 1:
                continue
            ch = {"recipe": rec, "from": short["study"], "to": long_["study"],
                  "steps_from": short["steps_per_phase"], "steps_to": long_["steps_per_phase"],
                  "seeds": n}
            for k in ("joint", "grow", "I"):
                ch[k] = summary([long_["per_seed"][k][i] - short["per_seed"][k][i]
                                 for i in range(n)])
            changes.append(ch)
    by_pair = {}
    for p in ipoints:
        by_pair.setdefault((p["study"], p["pair"]), []).append(p)
    isum = [{"study": k[0], "pair": k[1], "seeds": len(v),
             "x": summary([p["x"] for p in v]), "y": summary([p["y"] for p in v]),
             "z": summary([p["z"] for p in v])} for k, v in by_pair.items()]

    md = ["# Across studies: the trend with training length and the dose-response", "",
          "Written by examples/reproduce/cross.py from the results.json of: " +
          ", ".join("`%s`" % os.path.normpath(s) for s in args.studies) + ". Differences are "
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
    if changes:
        md += ["", "### The change with training length, paired by seed", "",
               "Each recipe's longer phases against its shortest: per seed, the longer "
               "study's difference minus the shorter's (seed N of both is one initialisation "
               "and one data order), over the seeds both ran.", "",
               "| recipe | from | to | seeds | joint gap | grow gap | I |",
               "|---|---|---|---|---|---|---|"]
        for c in changes:
            md.append("| %s | %s (%d steps) | %s (%d steps) | %d | %s | %s | %s |" % (
                c["recipe"], c["from"], c["steps_from"], c["to"], c["steps_to"], c["seeds"],
                pm(c["joint"]), pm(c["grow"]), pm(c["I"])))
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
    # the designs' own contrasts and interactions, in their labels, study by study
    designed = []
    for folder, res in studies:
        name = res["preset"].get("name", os.path.basename(folder.rstrip("/")))
        for kind in ("comparisons", "interactions"):
            for c in res.get(kind, []):
                if c.get("from") == "design" and c.get("label"):
                    design_row(c, "%s: %s" % (name, kind))
                    dnl = c.get("did_not_learn") or []
                    designed.append({"study": name, "kind": kind[:-1], "label": c["label"],
                                     "order": c.get("order", 2 if kind == "interactions" else 1),
                                     "n": c.get("n", 0), "mean": c.get("mean"),
                                     "half": c.get("half_width_95"), "did_not_learn": dnl,
                                     "verdict": "%s: %s" % (NOT_LEARNED, ", ".join(dnl))
                                     if dnl else c.get("verdict", "")})
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
    # what each row would need: seeds for a 95% interval narrower than the margin
    to_decide = []
    for folder, res in studies:
        name = res["preset"].get("name", os.path.basename(folder.rstrip("/")))
        seen = set()
        for kind in ("comparisons", "interactions"):
            rows = res.get(kind, [])
            if not isinstance(rows, list) or not all(isinstance(c, dict) for c in rows):
                raise Refused("%s: %s is not a list of rows" % (name, kind))
            for i, c in enumerate(rows):
                if "label" in c:
                    design_row(c, "%s: %s[%d]" % (name, kind, i))
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
                to_decide.append({"study": name, "kind": kind[:-1], "contrast": what,
                                  "n": c["n"], "mean": c.get("mean"),
                                  "half": c.get("half_width_95"), "sd": c["sd"],
                                  "verdict": NOT_LEARNED if dnl else verdict_kind(sm, MARGIN),
                                  "verdict_half": "not applicable" if dnl
                                  else verdict_kind(sm, HALF_MARGIN),
                                  "did_not_learn": dnl,
                                  "seeds_needed": seeds_needed(c["sd"], MARGIN)})
    for ch in changes:
        for k, what in (("joint", "joint gap"), ("grow", "grow gap"), ("I", "I")):
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
        for k, what in (("joint", "joint gap"), ("grow", "grow gap"), ("I", "I")):
            c = d["changes"].get(k)
            if c is None:
                continue
            to_decide.append({"study": d["study"], "kind": "change across the induced dose",
                              "contrast": what, "n": c["n"], "mean": c["mean"],
                              "half": c["half"], "sd": c["sd"], "verdict": c["verdict"],
                              "verdict_half": verdict_kind(c, HALF_MARGIN),
                              "seeds_needed": seeds_needed(c["sd"], MARGIN)})
    # the paper's crossover, from the trajectories: post - pre at each phase's end
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
            last = ends[-1]
            sides = [0 if x["half"] is None else (1 if x["mean"] - x["half"] > 0 else
                                                  -1 if x["mean"] + x["half"] < 0 else 0)
                     for x in (last, total)]
            verdict = ("inconclusive (1 seed)" if last["half"] is None else
                       "not reproduced" if max(sides) > 0 else
                       "reproduced" if sides == [-1, -1] else "inconclusive")
            dnl = sorted(unlearned(res) & {pg, qg})
            if dnl:
                verdict = "%s: %s" % (NOT_LEARNED, ", ".join(dnl))
            cross_rows.append({"study": name, "pair": "%s / %s" % (pg, qg), "seeds": len(cx[0]),
                               "block_size": bs, "ends": ends,
                               "ahead": [sum(1 for v in d if v < 0) for d in cx],
                               "changes": changes_x, "total": total, "verdict": verdict,
                               "p": max(p_against(last, 0) or 0, p_against(total, 0) or 0)
                               if verdict == "reproduced" else
                               None if verdict.startswith(NOT_LEARNED) else
                               min(p_against(last, 0) or 1, p_against(total, 0) or 1)})
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
    family_rows = []
    if family is not None:
        try:
            family_rows = headline(family, studies, doses)
        except (Refused, KeyError, TypeError, ValueError) as e:
            print("cross: %s: %s; nothing written" % (args.family, e), file=sys.stderr)
            return 1
        at = md.index("## The trend with training length")
        md[at:at] = headline_md(family, family_rows)[1:] + [""]
    md_seeds = []
    if to_decide:
        md_seeds += [
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
            md_seeds.append("| %s | %s | %s | %d | %+.4f ± %.4f | %.4f | %s | %s | %s |" % (
                cell(r["study"]), r["kind"], cell(r["contrast"]), r["n"], r["mean"],
                r["half"], r["sd"], cell(r["verdict"]), cell(r["verdict_half"]), need))
    out = {"trend": trend, "points": points, "fit_y_on_x": fit_y, "fit_z_on_x": fit_z,
           "design_contrasts": designed, "seeds_to_decide": to_decide,
           "fit_y_on_x_seeds_as_clusters": cl_y, "fit_z_on_x_seeds_as_clusters": cl_z,
           "change_with_training_length": changes,
           "interventions": isum, "intervention_points": ipoints, "induced_dose": doses,
           "crossover": cross_rows, "headline_family": family_rows,
           "margins": {"equivalence": MARGIN, "absence": HALF_MARGIN,
                       "bytes_per_token": BYTES_PER_TOKEN},
           "studies": [os.path.normpath(s) for s in args.studies]}
    csv = ["study,pair,seed,x,y,z"] + ["%s,%s,%d,%.6f,%.6f,%.6f" % (
        p["study"], p["pair"], p["seed"], p["x"], p["y"], p["z"]) for p in points]
    write_whole(os.path.join(args.out, "points.csv"), "\n".join(csv) + "\n")
    write_whole(os.path.join(args.out, "cross.json"), json.dumps(out, indent=2) + "\n")
    md_trend_plot = False
    if shutil.which("gnuplot") and points:
        lines = ["set terminal svg size 800,500", "set datafile separator ','",
                 "set key off", "set grid", "set output 'dose.svg'",
                 "set xlabel 'pre-norm row-start / regular RMS where appended blocks read'",
                 "set ylabel 'post-grow - pre-grow (nats/byte)'",
                 "plot 'points.csv' every ::1 using 4:5 with points pt 7 ps 0.8"]
        if fit_y and fit_y["slope"] is not None:
            lines[-1] += ", %r + %r * x with lines lw 2" % (fit_y["intercept"], fit_y["slope"])
        lines.append("unset output")
        rows = sorted(trend, key=lambda t: (t["recipe"], t["steps_per_phase"]))
        if len({t["steps_per_phase"] for t in rows}) > 1:
            tcsv = ["recipe,steps_per_phase,joint,joint_half,grow,grow_half,I,I_half"]
            for t in rows:
                tcsv.append("%s,%d,%s" % (t["recipe"].replace(",", " "), t["steps_per_phase"],
                                          ",".join("%.6f,%.6f" % (t[k]["mean"],
                                                                  t[k]["half"] or 0.0)
                                                   for k in ("joint", "grow", "I"))))
            write_whole(os.path.join(args.out, "trend.csv"), "\n".join(tcsv) + "\n")
            plots = []
            first = 1  # the rows of one recipe follow each other (sorted), after the header
            for rec in sorted({t["recipe"] for t in rows}):
                n = sum(1 for t in rows if t["recipe"] == rec)
                for col, what in ((3, "joint: post - pre"), (5, "grow: post - pre"), (7, "I")):
                    plots.append("'trend.csv' every ::%d::%d using 2:%d:%d with yerrorlines "
                                 "title %s" % (first, first + n - 1, col, col + 1,
                                               gp_str("%s, %s" % (rec, what))))
                first += n
            lines += ["set output 'trend.svg'", "set key outside", "set logscale x 2",
                      "set xlabel 'steps per phase (log scale)'",
                      "set ylabel 'nats/byte, with 95% intervals'",
                      "plot 0 with lines lc 'black' notitle, " + ", ".join(plots),
                      "unset output"]
            md_trend_plot = True
        write_whole(os.path.join(args.out, "cross.gp"), "\n".join(lines) + "\n")
        subprocess.run(["gnuplot", "cross.gp"], cwd=args.out, check=False,
                       stderr=subprocess.DEVNULL)
        md += ["", "![y against x, with the fit](dose.svg)"]
        if md_trend_plot:
            md.insert(md.index("## Dose-response: the row-start scale pre-norm hands an "
                               "appended block"),
                      "![post - pre and I against steps per phase](trend.svg)\n")
    write_whole(os.path.join(args.out, "report.md"), "\n".join(md + md_seeds) + "\n")
    print("cross: %d trend rows, %d dose-response points -> %s" % (len(trend), len(points),
                                                                   args.out))
    return 0


def main(argv):
    try:
        return run(argv)
    except Refused as e:  # a study's results.json with a field of the wrong kind
        print("cross: %s; nothing written" % e, file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
