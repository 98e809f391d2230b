"""cross_stats: the statistics cross.py reports with (see cross.py).

t quantiles and the t distribution's CDF, the margins of
examples/reproduce/rules.h, p values (a t test against a value, the
equivalence test's two one-sided tests), Holm's adjustment, seeds to decide,
summaries over seeds, slopes (pooled and with seeds as clusters) and the
verdict wording of rules.c's effect rule. Python 3's standard library only.
"""
import math


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

def summary_at(s, n):
    """The summary s would have with n seeds at the same mean and sd."""
    return {"mean": s["mean"], "sd": s["sd"], "n": n,
            "half": t95(n - 1) * s["sd"] / math.sqrt(n)}
