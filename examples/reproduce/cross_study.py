"""cross_study: reading one study's results.json for cross.py (see cross.py).

Loading it, refusing names that break the study's name rule and rows of the
wrong kind, and what cross.py reads from it: the arms as run, their four-arm
sets, grow pairs and induced doses, the RMS ratio and validation CE at each
phase's end, the crossover. Python 3's standard library only.
"""
import json
import math
import os
import re
import stat

NAME_RULE = "1 to 47 characters: letters, digits and - _ . +, not starting with a dot"
NAME_RE = re.compile(r"[A-Za-z0-9_+-][A-Za-z0-9_.+-]{0,46}")


class Refused(Exception):
    pass


def cell(x):
    """x as one Markdown table cell: no line breaks or other control characters
    (a label cannot start a heading or a row of its own), '|' escaped."""
    text = "".join(c if c >= " " and c != "\x7f" else " " for c in str(x))
    return text.replace("|", "\\|")


# The largest magnitude a number read from results.json may have: a CE, an
# RMS ratio or a dCE is far below it, and sums of squares of it stay finite.
LARGEST = 1e12


def shown(v):
    """A value as a message shows it: JSON, cut at 60 characters."""
    if v is None:
        return "missing or null"
    text = json.dumps(v)
    return text if len(text) <= 60 else text[:57] + "..."


def number(v):
    """A finite number of at most LARGEST in magnitude (not a bool; a huge
    int is compared, never converted)."""
    return isinstance(v, (int, float)) and not isinstance(v, bool) and \
        (isinstance(v, int) or math.isfinite(v)) and -LARGEST <= v <= LARGEST


def count(v, least=0):
    return isinstance(v, int) and not isinstance(v, bool) and least <= v <= LARGEST


def design_row(c, where):
    """A study's comparison or interaction from results.json, every field it
    is read for checked: Refused naming the field otherwise."""
    def want(key, ok, what):
        v = c.get(key)
        if not ok(v):
            raise Refused("%s.%s: %s is not %s" % (where, key, shown(v), what))
        return v
    maybe = lambda ok: lambda v: v is None or ok(v)
    text = lambda v: isinstance(v, str)
    if not isinstance(c, dict):
        raise Refused("%s: %s is not a row (an object)" % (where, shown(c)))
    if "label" in c:
        want("label", lambda v: isinstance(v, str) and v, "a label (a string)")
    want("n", maybe(count), "a seed count")
    # where a row has an sd, its mean and half-width are read with it
    some = number if c.get("sd") is not None else maybe(number)
    want("mean", some, "a finite number")
    want("half_width_95", lambda v: some(v) and (v is None or v >= 0), "a number of 0 or more")
    want("sd", maybe(lambda v: number(v) and v >= 0), "a number of 0 or more")
    want("order", maybe(count), "an order (a whole number)")
    want("did_not_learn", maybe(lambda v: isinstance(v, list) and all(text(x) for x in v)),
         "a list of arm names")
    want("verdict", maybe(text), "a verdict (a string)")
    for key in ("arm", "reference", "from"):
        want(key, maybe(text), "a string")
    # an interaction of order k names its 2^k arms; one without a label is of order 2
    want("arms", maybe(lambda v: isinstance(v, list) and len(v) >= 2 and
                       len(v) & (len(v) - 1) == 0 and all(text(x) for x in v) and
                       ("label" in c or len(v) == 4)),
         "a list of arm names (2^order of them; 4 in a row without a label)")
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
    return own.get("steps_per_phase") or preset_spp(res)


def preset_spp(res):
    """The preset's steps per phase (reproduce's default, 300, where it gives none)."""
    return (res["preset"].get("train") or {}).get("steps_per_phase", 300)


def check_names(res, folder):
    """Refuse a results.json whose arm or study names break the name rule."""
    where = os.path.join(folder, "results.json")
    if not isinstance(res, dict) or not isinstance(res.get("arms"), dict) or \
            not isinstance(res.get("preset"), dict):
        raise Refused("%s: not a study's results (an object with 'preset' and 'arms')" % where)
    for d, k in ((res["preset"], "arms"), (res, "arms_as_run")):
        if d.get(k) is not None and not isinstance(d[k], list):
            raise Refused("%s: %s%s is not a list of arms" % (where, "preset." if d is not res
                                                             else "", k))
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
    if "name" not in res["preset"] and not name_ok(study_name(folder, res)):
        raise Refused("%s: the preset has no name, and the folder's, %r, is not allowed as "
                      "one: a name is %s" % (where, study_name(folder, res), NAME_RULE))


# The largest JSON file read (results.json of the largest committed study is
# a few MB).
MAX_JSON_BYTES = 256 << 20


def read_json(where):
    """A JSON file's value: a regular file of at most MAX_JSON_BYTES (never a
    device or a pipe, which could be read forever); Refused naming it."""
    try:
        st = os.stat(where)
        if not stat.S_ISREG(st.st_mode):
            raise Refused("%s: not a regular file" % where)
        if st.st_size > MAX_JSON_BYTES:
            raise Refused("%s: %d bytes, more than the %d read" % (where, st.st_size,
                                                                   MAX_JSON_BYTES))
        with open(where) as f:
            return json.load(f)
    except RecursionError:
        raise Refused("%s: nested too deeply to read" % where) from None
    except (OSError, ValueError) as e:
        raise Refused("%s: %s" % (where, e)) from None


def load(folder):
    where = os.path.join(folder, "results.json")
    res = read_json(where)
    check_names(res, folder)
    check_study(res, where)
    return res


def check_arm_entry(a, where):
    """An entry of the preset's arms or arms_as_run: a name PLACEMENT-..., or
    an object whose keys cross.py reads are of their kind."""
    if isinstance(a, str):
        if "-" not in a:
            raise Refused("%s: the arm %s has no placement (a name is PLACEMENT-REST, or an "
                          "object)" % (where, a))
        return
    if not isinstance(a, dict) or not isinstance(a.get("name"), str):
        raise Refused("%s: %s is not an arm (a name, or an object with a name)"
                      % (where, shown(a)))
    name = a["name"]
    if not isinstance(a.get("from", ""), str):
        raise Refused("%s: arm %s's from is not an arm's name" % (where, name))
    if not isinstance(a.get("placement", ""), str):
        raise Refused("%s: arm %s's placement is not a string" % (where, name))
    if not (a.get("schedule") is None or isinstance(a["schedule"], str)):
        raise Refused("%s: arm %s's schedule is not a string" % (where, name))
    if not (number(a.get("massive_offset", 0)) and a.get("massive_offset", 0) >= 0):
        raise Refused("%s: arm %s's massive_offset is not a number of 0 or more" % (where, name))
    if "placement" not in a and "-" not in a.get("from", name):
        raise Refused("%s: the arm %s has no placement (a name is PLACEMENT-REST, or give "
                      "\"placement\" or \"from\")" % (where, name))


def check_study(res, where):
    """Refuse a results.json whose fields cross.py reads are not of their
    kind (a validation CE that is not a finite number, a trajectory that is
    not a list of points, runs not listed seed 1 first, ...), naming the
    field, before anything is computed from it. A field that may be left
    out may not be null where it is given."""
    def want(ok, v, field, what):
        if not ok(v):
            raise Refused("%s: %s is %s, not %s" % (where, field, shown(v), what))
    obj = lambda v: isinstance(v, dict)
    maybe = lambda ok: lambda v: v is None or ok(v)

    def given(d, key, ok, field, what):  # may be left out; not null where given
        if key in d:
            want(ok, d[key], field, what)
    pre = res["preset"]
    given(pre, "train", obj, "preset.train", "an object")
    given(pre.get("train") or {}, "steps_per_phase", lambda v: count(v, 1),
          "preset.train.steps_per_phase", "a whole number of at least 1")
    given(pre, "student", obj, "preset.student", "an object")
    for k in ("block_size", "blocks"):
        given(pre.get("student") or {}, k, lambda v: count(v, 1), "preset.student." + k,
              "a whole number of at least 1")
    for d, k, field in ((pre, "arms", "preset.arms"), (res, "arms_as_run", "arms_as_run")):
        for i, a in enumerate(d.get(k) or []):
            check_arm_entry(a, "%s: %s[%d]" % (where, field, i))
    given(res, "arm_settings", lambda v: obj(v) and all(
        obj(a) and maybe(lambda n: count(n, 1))(a.get("steps_per_phase")) for a in v.values()),
        "arm_settings",
        "an object of arms' settings (steps_per_phase a whole number of at least 1)")
    given(res, "baseline", lambda v: obj(v) and maybe(lambda d: isinstance(d, list) and all(
        isinstance(x, str) for x in d))(v.get("did_not_learn")),
        "baseline", "an object whose did_not_learn lists arm names")
    given(res, "verdicts", lambda v: isinstance(v, list) and all(
        obj(x) and isinstance(x.get("finding"), str) and isinstance(x.get("p", ""), str)
        for x in v),
        "verdicts", "a list of rows, each with a finding and any p a string")
    for kind in ("comparisons", "interactions"):
        given(res, kind, lambda v: isinstance(v, list), kind, "a list of rows")
        for i, c in enumerate(res.get(kind) or []):
            design_row(c, "%s: %s[%d]" % (where, kind, i))
    point = lambda p: obj(p) and count(p.get("step")) and count(p.get("active_layers")) and \
        maybe(number)(p.get("val_ce")) and all(
            maybe(lambda v: number(v) and v >= 0)(p.get(k))
            for k in ("rms_boundary", "rms_regular"))
    removal = lambda b: obj(b) and number(b.get("dce")) and maybe(number)(b.get("angle"))
    for arm, runs in res["arms"].items():
        want(lambda v: isinstance(v, list), runs, "arms.%s" % arm, "a list of runs")
        for i, r in enumerate(runs):
            at = "arms.%s[%d]" % (arm, i)
            want(obj, r, at, "a run (an object)")
            want(number, r.get("val_ce"), at + ".val_ce", "a finite number (null is a run whose "
                 "final CE was not finite: it diverged, and cross.py reads no study with one)")
            given(r, "seed", lambda v: count(v) and v == i + 1, at + ".seed",
                  "%d (an arm's runs are listed by seed, seed 1 first)" % (i + 1))
            want(lambda v: isinstance(v, list), r.get("trajectory"), at + ".trajectory",
                 "a list of points")
            want(lambda v: isinstance(v, list), r.get("block_removal"), at + ".block_removal",
                 "a list of blocks' removals")
            given(r, "trajectory", lambda v: isinstance(v, list) and all(point(p) for p in v),
                  at + ".trajectory", "a list of points (step and active_layers whole numbers; "
                  "val_ce a finite number or null; rms_boundary and rms_regular numbers of 0 "
                  "or more, or null)")
            given(r, "block_removal", lambda v: isinstance(v, list) and all(removal(b) for b in v),
                  at + ".block_removal", "a list of blocks' removals (dce a finite number, angle "
                  "a finite number or null)")


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
            base = a.get("from", name)  # the named arm it starts from, as reproduce reads it
            pl = a.get("placement", base.split("-", 1)[0])
            sched = a.get("schedule")
            if sched is None and "phases" not in a and "-" in base:
                sched = base.split("-", 1)[1] if base.split("-", 1)[1] in named else None
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
    for p in run.get("trajectory", []):
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

def study_name(folder, res):
    return res["preset"].get("name", os.path.basename(os.path.abspath(folder)))


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
