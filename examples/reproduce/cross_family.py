"""cross_family: the declared headline family of cross.py --family (see
cross.py): each claim's per-seed values, its p, Holm's adjustment over the
family, the seeds that would pass a claim that fails, and its report table.
Python 3's standard library only.
"""
import re

from cross_stats import (ALPHA, BYTES_PER_TOKEN, MARGIN, MAX_SEEDS, PAPER_GROW_PER_TOKEN, fmt_p,
                         holm, p_against, p_tost, pm, summary, summary_at, t90, t95)
from cross_study import Refused, cell, crossover, number, study_name

def claim_p(test, s):
    """The p of a claim's test on a summary of its per-seed values."""
    if test == "direction":
        return p_against(s, 0)
    if test == "within":
        return p_tost(s, MARGIN)
    if test == "excludes_paper":  # post ahead by the paper's effect (-delta) excluded at 95%
        return p_against(s, -MARGIN) if s["mean"] > -MARGIN else 1.0
    if test == "against_paper":  # either side of -delta at 95%: the side is the verdict's
        return p_against(s, -MARGIN)
    raise Refused("family: unknown test %r" % test)


def bytes_bound(test, s):
    """The most bytes per token at which the claim still holds at this
    interval (the margin is 0.0328 / bytes per token)."""
    if test == "excludes_paper" or (test == "against_paper" and s["mean"] > -MARGIN):
        lo = s["mean"] - s["half"]
        return PAPER_GROW_PER_TOKEN / -lo if lo < 0 else None
    if test == "within":
        h90 = s["half"] * t90(s["n"] - 1) / t95(s["n"] - 1)
        return PAPER_GROW_PER_TOKEN / max(abs(s["mean"] - h90), abs(s["mean"] + h90))
    return None


# The parts of a block-removal claim, each tested against its rule's bound.
AGAINST = {"below 0.25": 0.25, "above 0.05": 0.05, "above 0": 0.0}


def part_p(test, s):
    """The p of one part of a claim: a block-removal part against its bound,
    any other the claim's test."""
    if test in AGAINST:
        return p_against(s, AGAINST[test])
    return claim_p(test, s)


# What a claim tests: its one source key and that key's value's strings.
SOURCES = {"terms": None, "block_removal": ("study", "pre arm", "post arm"),
           "crossover": ("study", "pre arm", "post arm"), "dose": ("study", "change"),
           "verdict_row": ("study", "finding's start")}
TESTS = ("direction", "within", "excludes_paper", "against_paper")
CLAIM_KEYS = set(SOURCES) | {"claim", "test", "seeds", "beside", "source"}


def check_family(family):
    """Refuse a family file whose shape is not a family's, naming the claim
    and the key, before anything is computed from it."""
    if not isinstance(family, dict) or not isinstance(family.get("claims"), list) \
            or not family["claims"]:
        raise Refused("family: the file must be an object whose \"claims\" is a non-empty list")
    extra = set(family) - {"what", "alpha", "claims"}
    if extra:
        raise Refused("family: unknown key %r (a family has what, alpha, claims)" % sorted(extra)[0])
    if "what" in family and not isinstance(family["what"], str):
        raise Refused("family: \"what\" must be a string")
    a = family.get("alpha", ALPHA)
    if type(a) not in (int, float) or not 0 < a < 1:
        raise Refused("family: \"alpha\" must be a number between 0 and 1, not %r" % (a,))
    for i, c in enumerate(family["claims"]):
        if not isinstance(c, dict) or not isinstance(c.get("claim"), str) or not c["claim"]:
            raise Refused("family: claim %d must be an object with a \"claim\" string" % (i + 1))
        name = c["claim"]
        extra = set(c) - CLAIM_KEYS
        if extra:
            raise Refused("family: claim %r: unknown key %r" % (name, sorted(extra)[0]))
        src = [k for k in SOURCES if k in c]
        if len(src) != 1:
            raise Refused("family: claim %r must have exactly one of %s" % (name, ", ".join(SOURCES)))
        if "test" in c and c["test"] not in TESTS:
            raise Refused("family: claim %r: unknown test %r (one of %s)"
                          % (name, c["test"], ", ".join(TESTS)))
        if "beside" in c and not isinstance(c["beside"], bool):
            raise Refused("family: claim %r: \"beside\" must be true or false" % name)
        if "source" in c and not isinstance(c["source"], str):
            raise Refused("family: claim %r: \"source\" must be a string" % name)
        if "seeds" in c and src[0] != "terms":
            raise Refused("family: claim %r: \"seeds\" applies to a claim of terms only" % name)
        seed_range(c)
        v = c[src[0]]
        if src[0] == "terms":
            if not isinstance(v, list) or not v or not all(
                    isinstance(t, list) and len(t) == 3 and isinstance(t[0], str)
                    and isinstance(t[1], str) and number(t[2]) for t in v):
                raise Refused("family: claim %r: \"terms\" must be a non-empty list of "
                              "[study, arm, coefficient] (two strings and a finite number)" % name)
        elif not (isinstance(v, list) and len(v) == len(SOURCES[src[0]])
                  and all(isinstance(x, str) for x in v)):
            raise Refused("family: claim %r: \"%s\" must be [%s], strings"
                          % (name, src[0], ", ".join(SOURCES[src[0]])))


def seed_range(c):
    """A claim's "seeds" range, first to last, as the seed numbers it names;
    None where it has none."""
    if "seeds" not in c:
        return None
    r = c["seeds"]
    if not (isinstance(r, list) and len(r) == 2 and all(type(x) is int for x in r)
            and 1 <= r[0] <= r[1] <= MAX_SEEDS):
        raise Refused("family: claim %r: \"seeds\" must be [first, last], whole numbers with "
                      "1 <= first <= last <= %d, not %r" % (c.get("claim"), MAX_SEEDS, r))
    return list(range(r[0], r[1] + 1))


def need_arms(by_name, st, *arms):
    """Refuse a claim naming a study not given, or an arm it does not have."""
    if st not in by_name:
        raise Refused("family: no study %s among those given (%s)" % (st, ", ".join(sorted(by_name))))
    for arm in arms:
        if arm not in by_name[st]["arms"]:
            raise Refused("family: %s has no arm %s" % (st, arm))


def terms_values(c, by_name):
    """A claim's per-seed sum of its terms' (study, arm, coefficient) finals,
    paired by seed number: over the claim's "seeds" range, or else over the
    seeds every term has, which must then be the same seeds."""
    wanted, first = seed_range(c), None
    vals = None
    for st, arm, coef in c["terms"]:
        need_arms(by_name, st, arm)
        by_seed = {r.get("seed", i + 1): r["val_ce"]
                   for i, r in enumerate(by_name[st]["arms"][arm])}
        if not by_seed:
            raise Refused("family: claim %r: %s's %s has no runs" % (c.get("claim"), st, arm))
        if wanted is None:
            if first is None:
                first = (st, arm, sorted(by_seed))
            elif sorted(by_seed) != first[2]:
                raise Refused("family: claim %r pairs %s's %s (seeds %s) with %s's %s (seeds %s); "
                              "give it a \"seeds\" range both have"
                              % (c.get("claim"), first[0], first[1], first[2], st, arm,
                                 sorted(by_seed)))
        missing = [n for n in wanted or () if n not in by_seed]
        if missing:
            raise Refused("family: claim %r: %s's %s has no seed %d (it has %s)"
                          % (c.get("claim"), st, arm, missing[0], sorted(by_seed)))
        f = [by_seed[n] for n in (wanted or first[2])]
        vals = [coef * x for x in f] if vals is None else \
            [v + coef * x for v, x in zip(vals, f)]
    return vals


def block_removal_parts(res, pre, post):
    """Block removal's three parts, per seed: pre's last-block dCE over post's
    smallest, post's smallest dCE, and post's smallest angle less pre's last."""
    ratio, pmin, agap = [], [], []
    for i, (r, q) in enumerate(zip(res["arms"][pre], res["arms"][post])):
        if not r.get("block_removal") or not q.get("block_removal"):
            raise Refused("family: %s's or %s's seed %d has no block removals" % (pre, post, i + 1))
        last = r["block_removal"][-1]
        md = min(b["dce"] for b in q["block_removal"])
        if md <= 0:
            raise Refused("family: %s's seed %d has a block whose removal costs %g (not above "
                          "0): the ratio to it is not defined" % (post, i + 1, md))
        if any(b.get("angle") is None for b in q["block_removal"] + [last]):
            raise Refused("family: %s's or %s's seed %d has a block removal without an angle"
                          % (pre, post, i + 1))
        ma = min(b["angle"] for b in q["block_removal"])
        ratio.append(last["dce"] / md)
        pmin.append(md)
        agap.append(ma - last["angle"])
    return [("below 0.25", ratio), ("above 0.05", pmin), ("above 0", agap)]


def claim_parts(c, by_name, doses):
    """A claim's parts, (test, per-seed values), the p its verdict row prints
    (None unless it names one) and whether that p is a bound ("p < ...")."""
    test = c.get("test", "direction")
    if "terms" in c:
        return [(test, terms_values(c, by_name))], None, False
    if "block_removal" in c:
        st, pre, post = c["block_removal"]
        need_arms(by_name, st, pre, post)
        return block_removal_parts(by_name[st], pre, post), None, False
    if "crossover" in c:
        st, pre, post = c["crossover"]
        need_arms(by_name, st, pre, post)
        cx = crossover(by_name[st], pre, post)
        if cx is None:
            raise Refused("family: %s has no phase ends for %s / %s" % (st, pre, post))
        return [(test, [b - a for a, b in zip(cx[0], cx[-1])])], None, False
    if "dose" in c:
        st, key = c["dose"]
        ch = next((d["changes"].get(key) for d in doses if d["study"] == st), None)
        if ch is None:
            raise Refused("family: no induced dose %s in %s" % (key, st))
        return [(test, ch["per_seed"])], None, False
    if "verdict_row" in c:
        st, prefix = c["verdict_row"]
        need_arms(by_name, st)
        row = next((v for v in by_name[st].get("verdicts", [])
                    if v["finding"].startswith(prefix)), None)
        m = re.match(r"p (< )?([0-9.]+)", (row or {}).get("p", ""))
        if not m:
            raise Refused("family: %s's verdict row %r has no p" % (st, prefix))
        if not 0 <= float(m.group(2)) <= 1:
            raise Refused("family: %s's verdict row %r has p %s, not a p"
                          % (st, prefix, m.group(2)))
        return [], float(m.group(2)), "<" in m.group(0)
    raise Refused("family: a claim with nothing to test: %r" % c.get("claim"))


def paper_side(test, s):
    """For a test against the paper's effect, the side of -delta its mean
    lies on: what its verdict says where it holds."""
    if test != "against_paper" or not s:
        return None
    return ("the paper's effect excluded" if s["mean"] > -MARGIN
            else "post ahead by more than the paper's effect")


def claim_row(c, parts, p_given, p_is_bound):
    """A claim's row: its parts' summaries and p (the largest part's, or the
    one its verdict row prints), and its label."""
    test = c.get("test", "direction")
    sums, ps = [], []
    for t, vals in parts:
        sm = summary(vals)
        sums.append((t, sm))
        ps.append(part_p(t, sm))
    p = p_given if p_given is not None else max(ps)
    first = sums[0][1] if sums else None
    label = ("block removal: ratio below 0.25, smallest post dCE above 0.05, angle gap "
             "above 0" if "block_removal" in c else
             "verdict row (%s's report.md)" % c["verdict_row"][0] if "verdict_row" in c else
             "within (dose change)" if "dose" in c else
             "direction (phase-end change)" if "crossover" in c else test)
    return {"claim": c["claim"], "test": label, "source": c.get("source", ""), "p": p,
            "p_is_bound": p_is_bound,
            "n": first["n"] if first else None,
            "mean": first["mean"] if first else None,
            "half": first["half"] if first else None,
            "sd": first["sd"] if first else None,
            "side": paper_side(test, first),
            "parts": [{"test": t, "n": sm["n"], "mean": sm["mean"], "sd": sm["sd"],
                       "half": sm["half"]} for t, sm in sums],
            "bytes_per_token_bound": bytes_bound(test, first) if first and "terms" in c
            else None}


def seeds_to_pass(parts, level):
    """The fewest seeds (up to MAX_SEEDS) at which every part, at the mean and
    sd seen, has its p below level; None where one never does."""
    need = 0
    for part in parts:
        if part["sd"] is None:
            return None
        n_ok = next((n for n in range(2, MAX_SEEDS + 1)
                     if part_p(part["test"], summary_at(part, n)) < level), None)
        if n_ok is None:
            return None
        need = max(need, n_ok)
    return need


def holm_rows(family, rows):
    """Holm's step-down over the family's rows (the claims beside it, marked,
    after them): each row's Holm p, whether it holds, and for one that fails
    the seeds that would pass it at its place in Holm's order."""
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
            r["seeds_to_pass"] = seeds_to_pass(r["parts"], level)
            r["level"] = level
    return rows + beside


def headline(family, studies, doses):
    """The declared headline family: each claim's per-seed values from the
    studies' results.json, its p, Holm's adjustment over the family, and for a
    claim that fails it the seeds that would pass it at the mean and sd seen."""
    by_name = {study_name(f, r): r for f, r in studies}
    rows = [claim_row(c, *claim_parts(c, by_name, doses)) for c in family["claims"]]
    return holm_rows(family, rows)


def headline_md(family, rows):
    md = ["", "## The headline family, corrected for multiplicity (Holm)", "",
          cell(family.get("what", "The claims declared in the family file.")) +
          " Each claim's p is "
          "that of the test its verdict reads, computed here from the studies' results.json: "
          "a direction, the two-sided t test against 0 over the paired seeds; *within*, the "
          "two one-sided t tests at ±%.4f nats/byte (delta: the paper's grow effect, %.4f "
          "nats per Qwen3 token, at an assumed %d bytes per token); *excludes the paper's "
          "effect*, the two-sided t test against -%.4f (post-grow ahead by delta), and *against "
          "the paper*, the same test read on either side of it (post ahead by more than "
          "delta where the mean lies below -delta, the paper's effect excluded where above); block "
          "removal, the largest p of its rule's three intervals; a verdict row, the p its "
          "study's report.md prints. Holm's step-down adjustment over the %d claims: a claim "
          "holds for the family when its Holm p is below %.2f; one that fails is not decided, "
          "and the last column gives the seeds that would pass it at its place in Holm's "
          "order, at the mean and sd seen, were every claim before it in that order to pass "
          "(a plan, not a promise; the step-down stops at the first claim that fails, so a "
          "claim after it fails with it). For a claim that reads the "
          "margin, the most bytes per token at which its interval still holds."
          % (MARGIN, PAPER_GROW_PER_TOKEN, BYTES_PER_TOKEN, MARGIN,
             sum(1 for r in rows if not r.get("beside")),
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
            md.append("| %s | %s | %s | %s | %s |" % (cell(r["claim"]), r["test"], r["n"], pm(r),
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
            ("holds" + (": %s" % r["side"] if r.get("side") else "")) if r["holds"]
            else "fails Holm: not decided", bound, need))
    return md
