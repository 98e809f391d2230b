#!/usr/bin/python3
"""check_results: every table the docs quote from a result file is that
file's table, verbatim; every result file the docs name is committed; and
every number the docs' prose states is found in the committed file it cites,
or in the page's own table of the paper's numbers.

usage: check_results.py [--update] [--list] ROOT DOC.md...   (exit 1 on any problem)

Quoted tables
-------------
A quoted table sits between two markers:

    <!-- table from: doc/results/regime/report.md, after: ## Verdict: what reproduced -->
    | finding | ... |
    <!-- end table -->

The block must equal the first markdown table after that heading in that
file. With --update, each quoted table is replaced by the file's table as it
is now (after a report was regenerated): the prose around it is for a person
to read again. Links and images into results/ must point at files that exist.

Numbers in prose
----------------
A marker on a line of its own names the files the text below it takes its
numbers from, until the next such marker or the next heading:

    <!-- numbers from: doc/results/regime/report.md doc/results/regime/results.json -->

Sources are paths from ROOT (inside it), separated by spaces, or the word
`paper`: the page's table of the paper's numbers, the markdown table right
after the marker line `<!-- the paper's numbers -->`, with the columns
figure | value | where in the paper (every row says where; the numbers of its
value column are the paper's).

Prose is every line that is not in a code block (fenced, or indented by 4
after a blank line), a quoted table, the paper's table, an HTML comment, an
inline code span or a link's target; hand-written tables and headings are
prose. A heading is under no marker.

A number is a run of digits, with thousands commas (1,736), a decimal part
(0.0835), an exponent (3e-3), a sign (-0.084, +0.127, U+2212 too; a dash
right after a digit or a bracket is a range, 0.25-0.28, not a sign), and a
unit mark glued to it: % (85%), x (2.8x), k (20k), s (806s); "+-" and "+/-"
read as the interval sign ±. Every number is checked, but these:

  name     glued to a letter, digit, '_' or '.' before it, or to a letter
           after it other than the unit marks (Qwen3, d64, 8cd7369, 8B);
           and the number after the word arXiv;
  version  two dots or more (0.3.21); or 0.N up to the project's version in
           ROOT/meson.build (0.1 ... 0.4 for 0.4.x; every 0.x release,
           0.1 ... 0.5, from 1.0 on), with no sign, unit, ± or range
           dash, followed by 's or after one of the words in, since, of, at,
           from, to, the, than, lattice, liblattice, release, version, or
           where a sentence or a parenthesis starts (in 0.2, 0.1's iterator,
           "(0.4 called it"): "above 0.3" is checked;
  year     four digits 1900-2099 without a comma after a month, a name
           with two capitals or more, or "et al." (ICLR 2025, Aug 2026);
  count    a one-digit integer with no sign, unit mark, time unit (s, ms,
           min, h) or ± before it: 3 seeds, phase 2, layer 1, 2 jobs x 1
           thread (80 steps, 24 chapters and 5 s are checked).

A checked number is found in a cited file when:

  - textually: the file holds the same number, read the same way, after
    normalising the minus sign, thousands commas and a leading +: 1,736 is
    1736; 1.40 is not 1.4 (its precision is part of it); 3e-3 is 0.003; %
    and k must match (85% is not 85); x and s are dropped (a CSV file's
    commas separate its fields);
  - in a JSON file, also by rounding: a value of the file, rounded (half to
    even, from the exact double) to the prose number's decimals, is the
    prose number; a percentage against 100 x the value, Nk against value /
    1000. A value whose digits past that precision are exactly 5 is a tie
    and is not accepted: if it is itself rounded, rounding it again can
    differ from rounding the exact value (-0.08347 -> -0.0835 -> -0.084).
    A number rounded from a markdown table (from report.md's -0.0835 to
    -0.084) is never found: it must be quoted as the file writes it, or
    rounded from the precise value in results.json.

A number a page computes itself (a difference, a ratio of two files'
numbers) is found only if a file holds it. With --list every number of
prose is printed with what became of it.

Absence words
-------------
A result may be called absent only where an equivalence test shows it (the
90% interval inside the margin, examples/reproduce/rules.h): a sentence of
prose that uses one of the words

    gone, does/do/did not survive, changes/change nothing, flat,
    level, level with, close/closes/closed/closing, no effect

must hold a checked number that, in the markdown files its marker cites, is
found only in table rows whose verdict is "equivalent" (a cell that starts
with that word), and in one such row at least. A number that is also in a row
with another verdict (the margin, a shared mean) proves nothing. A word in
quotes ("gone", a mention) or right after not, never or nor ("not flat") is
not a claim of absence; nor is "level" in "confidence level", "in level" or
"level of". The margin here is delta / 2 (examples/reproduce/rules.h's
ABSENCE_MARGIN): the reports call a row "equivalent" only there, and a row
inside delta "within the paper's effect", which is no absence.

Verdict words
-------------
"near no-op" (a no-op, nearly a no-op) needs a number of its sentence in a
cited table row that names a no-op and whose verdict is reproduced (a block
removal row); "decided" a number only in rows that decided (below or above
0, reproduced or not, within the margin, equivalent, holds); "not decided"
(undecided) a number only in rows that did not (inconclusive, fails Holm). A
word in bold (a list's label) or in quotes is a name, not a claim.
"""
import decimal
import json
import os
import re
import sys

BEGIN = re.compile(r"<!-- table from: (?P<path>[^,]+), after: (?P<head>.+?) -->")
END = "<!-- end table -->"
LINK = re.compile(r"\]\(((?:\.\./)?(?:doc/)?results/[^)\s]+)\)")
NUMBERS_FROM = re.compile(r"^\s*<!--\s*numbers from:(?P<sources>.*?)-->\s*$")
PAPER_TABLE = "<!-- the paper's numbers -->"
PAPER = "paper"

# a number: thousands groups, or plain digits with dotted parts (a version has
# two), then an exponent
NUMBER = re.compile(r"(?:\d{1,3}(?:,\d{3})+(?!\d)|\d+)(?:\.\d+)*(?:[eE][+\-]?\d+)?")
TIME_UNIT = re.compile(r"\s(?:s|ms|min|h)\b")
# a year follows a month, a venue written with two capitals or more, or "et al."
YEAR_BEFORE = re.compile(r"(?:\b(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*\.?"
                         r"|\b[a-z]*[A-Z][A-Za-z]*[A-Z][A-Za-z]*|\bet al\.),?\s+$")
# a release: after one of these words, or where a sentence or a parenthesis starts
RELEASE_BEFORE = re.compile(r"(?:(?:^|\s)(?:in|since|of|at|from|to|the|than|lattice|liblattice"
                            r"|release|version)\s+|(?:^|[.;:]\**\s+|\(\s*))$", re.I)
ARXIV_BEFORE = re.compile(r"arXiv[:\s]\s*$")
MINUS = "\u2212"
UNIT_MARKS = "%xks"


class Number:
    """One number as written: its text, value, precision and unit mark."""

    def __init__(self, text, sign, body, unit, interval, at):
        self.text = text          # as written, with sign and unit
        self.sign = sign          # '', '+' or '-'
        self.body = body          # digits as written (commas included)
        self.unit = unit          # '', '%', 'x', 'k' or 's'
        self.interval = interval  # a ± stands before it
        self.at = at              # offset in the text it was read from
        plain = body.replace(",", "")
        try:
            self.value = decimal.Decimal(("-" if sign == "-" else "") + plain)
        except decimal.InvalidOperation:
            self.value = None     # a version: 0.3.21

    @property
    def decimals(self):
        return max(0, -self.value.as_tuple().exponent)

    def key(self):
        """What a textual match compares: the value at its precision, and the
        unit marks that change what the number means."""
        return (self.value, self.value.as_tuple().exponent,
                self.unit if self.unit in "%k" else "")


def normalise(text):
    return text.replace(MINUS, "-").replace("+/-", "±").replace("+-", "±")


def read_numbers(text):
    """Every number in text, with its sign, unit mark and context."""
    text = normalise(text)
    found = []
    for m in NUMBER.finditer(text):
        s, e = m.start(), m.end()
        before = text[s - 1] if s else " "
        sign = ""
        if before in "+-" and (s < 2 or not (text[s - 2].isalnum() or text[s - 2] in ")]._")):
            sign = before
        after = text[e] if e < len(text) else " "
        after2 = text[e + 1] if e + 1 < len(text) else " "
        unit = ""
        if after in UNIT_MARKS and (after == "%" or not (after2.isalnum() or after2 == "_")):
            unit = after
        start = s - len(sign)
        back = text[:start].rstrip(" ")
        interval = back.endswith("±")
        found.append(Number(text[start:e + len(unit)], sign, m.group(0), unit, interval, start))
    return found, text


def excluded(num, text, minor_versions):
    """Why a number of prose is not checked, or None when it is."""
    s = num.at
    e = num.at + len(num.text)
    before = text[s - 1] if s else " "
    after = text[e] if e < len(text) else " "
    if before.isalnum() or before in "_.":
        return "name"
    if not num.unit and (after.isalpha() or after == "_"):
        return "name"
    if ARXIV_BEFORE.search(text[max(0, s - 8):s]):
        return "name"
    if num.value is None or num.body.count(".") >= 2:
        return "version"
    plain = num.body.replace(",", "")
    spaced_unit = bool(TIME_UNIT.match(text, e))
    ranged = before == "-" or (after == "-" and e + 1 < len(text) and text[e + 1].isdigit())
    if (re.fullmatch(r"0\.\d", plain) and plain in minor_versions and not num.sign
            and not num.unit and not num.interval and not ranged and not spaced_unit
            and (text.startswith("'s", e) or RELEASE_BEFORE.search(text[max(0, s - 16):s]))):
        return "version"
    if (re.fullmatch(r"\d{4}", num.body) and 1900 <= int(plain) <= 2099 and not num.sign
            and not num.unit and YEAR_BEFORE.search(text[max(0, s - 24):s])):
        return "year"
    if (re.fullmatch(r"\d", num.body) and not num.sign
            and not num.unit and not num.interval and not spaced_unit):
        return "count"
    return None


class Source:
    """The numbers one cited file holds: textual keys, and for JSON the
    numeric values that can be rounded."""

    def __init__(self, path):
        self.path = path
        self.keys = set()
        self.values = []          # (exact Decimal, shortest Decimal) of JSON numbers
        self._rounded = {}
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
        if path.endswith(".json"):
            self._walk(json.loads(text))
        elif path.endswith(".csv"):
            for line in text.splitlines():
                for field in line.split(","):
                    self._text(field)
        else:
            self._text(text)

    def _text(self, text):
        for num in read_numbers(text)[0]:
            if num.value is not None:
                self.keys.add(num.key())

    def _walk(self, node):
        if isinstance(node, dict):
            for v in node.values():
                self._walk(v)
        elif isinstance(node, list):
            for v in node:
                self._walk(v)
        elif isinstance(node, str):
            self._text(node)
        elif isinstance(node, (int, float)) and not isinstance(node, bool):
            if isinstance(node, float) and node != node:
                return
            exact = decimal.Decimal(node)
            if exact.is_finite():
                self.values.append((exact, decimal.Decimal(repr(node))))

    def rounded(self, decimals, unit):
        """The JSON values rounded to `decimals` (scaled for % and k), and
        those that were ties at that precision."""
        cache = (decimals, unit)
        if cache not in self._rounded:
            scale = {"%": decimal.Decimal(100), "k": decimal.Decimal("0.001")}.get(unit, 1)
            q = decimal.Decimal(1).scaleb(-decimals)
            ctx = decimal.Context(prec=60, rounding=decimal.ROUND_HALF_EVEN)
            hits, ties = set(), set()
            for exact, shortest in self.values:
                r = ctx.multiply(exact, scale).quantize(q, context=ctx)
                t = ctx.multiply(shortest, scale).normalize(ctx).as_tuple()
                if -t.exponent == decimals + 1 and t.digits and t.digits[-1] == 5:
                    ties.add(r)
                else:
                    hits.add(r)
            self._rounded[cache] = (hits, ties)
        return self._rounded[cache]

    def has(self, num):
        """(found, a note on a near miss)"""
        if num.key() in self.keys:
            return True, None
        if self.values:
            hits, ties = self.rounded(num.decimals, num.unit if num.unit in "%k" else "")
            if num.value in hits:
                return True, None
            if num.value in ties:
                return False, ("%s has a value that rounds to it only from a tie (its digits "
                               "past that precision are exactly 5): quote the precise value"
                               % self.path)
        # a textual number that rounds to it: the page rounded a rounded number
        want = num.key()
        more = [k[0] for k in self.keys
                if k[2] == want[2] and k[1] < want[1] and abs(k[0] - num.value) < 1
                and k[0].quantize(num.value, rounding=decimal.ROUND_HALF_EVEN) == num.value]
        if more:
            return False, ("%s writes %s: quote it as the file does (a number is not rounded "
                           "again from a rounded one)" % (self.path, min(more)))
        return False, None


# The last release of the 0.x series: 1.0 followed it.
LAST_0X_MINOR = 5


def project_minor_versions(root):
    """0.1 ... 0.N for the project's version 0.N.x in meson.build; from 1.0 on,
    every 0.x release (0.1 ... 0.5)."""
    try:
        with open(os.path.join(root, "meson.build")) as f:
            m = re.search(r"version:\s*'(\d+)\.(\d+)", f.read())
    except OSError:
        m = None
    if not m:
        return set()
    last = int(m.group(2)) if m.group(1) == "0" else LAST_0X_MINOR
    return {"0.%d" % n for n in range(1, last + 1)}


def first_table_after(text, heading):
    lines = text.splitlines()
    try:
        at = next(i for i, line in enumerate(lines) if line.strip() == heading)
    except StopIteration:
        return None
    table = []
    for line in lines[at + 1:]:
        if line.startswith("|"):
            table.append(line)
        elif table:
            break
        elif line.startswith("#"):
            return None
    return table


def table_cells(line):
    return [c.strip() for c in line.strip().strip("|").split("|")]


def strip_inline(line):
    """A prose line without its code spans, HTML comments and link targets,
    each replaced by spaces so that offsets stay."""
    blank = lambda m: " " * len(m.group(0))
    line = re.sub(r"`[^`]*`", blank, line)
    line = re.sub(r"<!--.*?-->", blank, line)
    line = re.sub(r"\]\([^)]*\)", lambda m: "]" + " " * (len(m.group(0)) - 1), line)
    line = re.sub(r"<https?://[^>]*>", blank, line)
    return line


def prose(lines):
    """(line number, kind, text) for each line of a page: kind is 'prose',
    'heading', 'marker' (text: its sources), 'paper' (a row of the paper's
    table), 'paper-marker' or None (not prose)."""
    fence = None
    quoted = comment = code = False
    paper = None          # None, 'wait' (its marker seen) or 'in' (in its table)
    prev_blank = True
    for n, line in enumerate(lines, 1):
        s = line.strip()
        kind = "prose"
        code_line = False
        if fence:
            fence = None if s.startswith(fence) else fence
            kind = None
        elif comment:
            comment = "-->" not in line
            kind = None
        elif quoted:
            quoted = s != END
            kind = None
        else:
            if paper == "in" and not s.startswith("|"):
                paper = None
            if paper == "wait" and s and not s.startswith("|"):
                paper = None
            if paper:
                if s:
                    paper = "in"
                kind = "paper" if s else None
            elif s.startswith("```") or s.startswith("~~~"):
                fence = s[:3]
                kind = None
            elif BEGIN.search(line):
                quoted = True
                kind = None
            elif NUMBERS_FROM.match(line):
                kind = "marker"
                line = NUMBERS_FROM.match(line).group("sources")
            elif s == PAPER_TABLE:
                paper = "wait"
                kind = "paper-marker"
            elif s.startswith("<!--"):
                comment = "-->" not in s
                kind = None
            elif (line.startswith("    ") or line.startswith("\t")) and (prev_blank or code):
                code_line = True
                kind = None
            elif s.startswith("#"):
                kind = "heading"
        if s:
            code = code_line
        prev_blank = not s
        yield n, kind, line


def blocks(lines):
    """(first line number, kind, text) for each block of prose (its lines
    joined by newlines, code spans and link targets blanked), heading and
    marker, in order."""
    block, first = [], None
    for n, kind, line in prose(lines):
        if kind == "prose" and line.strip():
            if not block:
                first = n
            block.append(strip_inline(line))
            continue
        if block:
            yield first, "prose", "\n".join(block)
            block = []
        if kind == "heading":
            yield n, kind, strip_inline(line)
        elif kind == "marker":
            yield n, kind, line
    if block:
        yield first, "prose", "\n".join(block)


def check_numbers(root, doc, lines, minor_versions, listing=None):
    """Problems with the numbers of a page's prose, and how many it checked."""
    problems = []
    sources = {}
    paper_keys = set()
    paper_rows = 0
    # the paper's table first: prose anywhere on the page may cite it
    header = None
    paper_marker = None
    for n, kind, line in prose(lines):
        if kind == "paper-marker":
            if paper_marker:
                problems.append("%s:%d: a second table of the paper's numbers (the first is at "
                                "line %d)" % (doc, n, paper_marker))
            paper_marker = n
        if kind != "paper":
            header = None
            continue
        cells = table_cells(line)
        if header is None:
            header = cells
            if len(cells) < 3:
                problems.append("%s:%d: the paper's table needs the columns figure | value | "
                                "where in the paper" % (doc, n))
            continue
        if all(re.fullmatch(r":?-+:?", c) for c in cells):
            continue
        paper_rows += 1
        if len(cells) < 3 or not cells[2]:
            problems.append("%s:%d: a row of the paper's table that does not say where in the "
                            "paper it is from" % (doc, n))
        if len(cells) >= 2:
            for num in read_numbers(strip_inline(cells[1]))[0]:
                if num.value is not None:
                    paper_keys.add(num.key())
    if paper_marker and not paper_rows:
        problems.append("%s:%d: no table after '%s'" % (doc, paper_marker, PAPER_TABLE))

    def source(path):
        """The cited file's numbers, or a string that says why there are none."""
        if path not in sources:
            full = os.path.join(root, path)
            if os.path.isabs(path) or os.path.normpath(path).split(os.sep)[0] == "..":
                sources[path] = "is outside the repository"
            elif not os.path.isfile(full):
                sources[path] = "is not in the repository"
            else:
                try:
                    sources[path] = Source(full)
                except (OSError, ValueError) as e:
                    sources[path] = "cannot be read (%s)" % e
        return sources[path]

    checked = 0
    scope = None          # (marker line, [paths], names the paper)
    for first, kind, block in blocks(lines):
        if kind == "marker":
            names = [x for x in re.split(r"[\s,]+", block.strip()) if x]
            paths = [x for x in names if x != PAPER]
            if not names:
                problems.append("%s:%d: a 'numbers from:' marker that names no file"
                                % (doc, first))
            for p in paths:
                if isinstance(source(p), str):
                    problems.append("%s:%d: cites %s, which %s" % (doc, first, p, source(p)))
            if PAPER in names and not paper_rows:
                problems.append("%s:%d: cites the paper, but the page has no table after '%s'"
                                % (doc, first, PAPER_TABLE))
            scope = (first, paths, PAPER in names)
            continue
        if kind == "heading":
            scope = None
        nums, text = read_numbers(block)
        for num in nums:
            n = first + text.count("\n", 0, num.at)
            why = excluded(num, text, minor_versions)
            if why:
                if listing is not None:
                    listing.append("%s:%d: %s: not checked (%s)" % (doc, n, num.text, why))
                continue
            checked += 1
            if scope is None:
                problems.append("%s:%d: %s: no 'numbers from:' marker above it%s"
                                % (doc, n, num.text,
                                   " (a heading cites nothing)" if kind == "heading" else ""))
                if listing is not None:
                    listing.append("%s:%d: %s: uncited" % (doc, n, num.text))
                continue
            where, notes = None, []
            if scope[2] and num.key() in paper_keys:
                where = PAPER
            for p in scope[1]:
                if where:
                    break
                src = source(p)
                if isinstance(src, str):
                    continue
                ok, note = src.has(num)
                if ok:
                    where = p
                elif note:
                    notes.append(note)
            if listing is not None:
                listing.append("%s:%d: %s: %s" % (doc, n, num.text,
                                                  "found in " + where if where else "NOT FOUND"))
            if not where:
                cited = " ".join(scope[1] + ([PAPER] if scope[2] else []))
                problems.append("%s:%d: %s is in none of the files cited at line %d (%s)%s"
                                % (doc, n, num.text, scope[0], cited,
                                   "".join(";\n  " + x for x in notes)))
    return checked, problems


ABSENCE = re.compile(r"\b(?:gone|(?:does|do|did) not survive|changes? nothing|flat|level with"
                     r"|level|close[sd]?|closing|no effect)\b", re.I)
# "level" that is not a claim of parity: a confidence level, a level of something
NOT_PARITY_LEVEL = re.compile(r"(?:confidence|significance|\bin|%)\s+level\b|\blevel\s+of\b|-level\b",
                              re.I)
NEGATED = re.compile(r"\b(?:not|never|nor)\s+$", re.I)
QUOTED = re.compile(r"\"[^\"\n]*\"|\u201c[^\u201d]*\u201d")
SENTENCE_END = re.compile(r"(?<=[.!?;])\s+(?=[^a-z0-9])|\n\s*\n|\n(?=\s*[-*] )")
VERDICT_EQUIVALENT = "equivalent"


def table_rows(path):
    """(line, cells) of every table row of a markdown file; none for a file
    that is not markdown or cannot be read."""
    if not path.endswith(".md"):
        return
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    except OSError:
        return
    for line in text.splitlines():
        if line.startswith("|"):
            yield line, table_cells(line)


def table_verdicts(path):
    """{number key: set of (is the row equivalent)} over a markdown file's
    table rows; {} for a file that is not markdown or cannot be read."""
    keys = {}
    for line, cells in table_rows(path):
        equivalent = any(c.lower().startswith(VERDICT_EQUIVALENT) for c in cells)
        for num in read_numbers(line)[0]:
            if num.value is not None:
                keys.setdefault(num.key(), set()).add(equivalent)
    return keys


def absence_claims(text):
    """(offset, word) of each absence word of a block of prose that claims an
    absence: not quoted, not negated."""
    quoted = [m.span() for m in QUOTED.finditer(text)]
    for m in ABSENCE.finditer(text):
        if any(a <= m.start() < b for a, b in quoted):
            continue
        if NEGATED.search(text[max(0, m.start() - 8):m.start()]):
            continue
        if m.group(0).lower() == "level" and any(
                a <= m.start() < b for a, b in (x.span() for x in NOT_PARITY_LEVEL.finditer(text))):
            continue
        yield m.start(), m.group(0)


# Words that say what a row decided: "near no-op" needs a block-removal row
# (one that names a no-op) whose verdict is reproduced; "decided" a row that
# decided (not inconclusive, not failing Holm); "not decided" a row that did
# not. A word in bold (a list's label: **Not decided.**) or in quotes is a
# name, not a claim.
NO_OP = re.compile(r"\b(?:near(?:ly)? (?:a )?no-op|(?:a|an) no-op)\b", re.I)
DECIDED = re.compile(r"\b(?:(?:not|un)\s*decided|decided|decides?)\b", re.I)
BOLD = re.compile(r"\*\*[^*]*\*\*")
UNDECIDED_CELL = re.compile(r"^(?:inconclusive|fails holm|not decided|not inside)", re.I)
DECIDED_CELL = re.compile(r"^(?:below 0|above 0|reproduced|not reproduced|equivalent|within the "
                          r"paper's effect|holds)", re.I)


def row_kinds(path):
    """{number key: set of the kinds of rows it is in} over a markdown file's
    table rows: 'no-op' (a row that names a no-op and says reproduced),
    'decided', 'undecided' (a verdict cell that is inconclusive or fails
    Holm), 'other'."""
    keys = {}
    for line, cells in table_rows(path):
        kinds = set()
        undecided = any(UNDECIDED_CELL.match(c) or "fails Holm" in c for c in cells)
        decided = not undecided and any(DECIDED_CELL.match(c) for c in cells)
        kinds.add("undecided" if undecided else "decided" if decided else "other")
        if "no-op" in line and not undecided and any(
                c.lower().startswith("reproduced") or c.lower() == "holds" for c in cells):
            kinds.add("no-op")
        for num in read_numbers(line)[0]:
            if num.value is not None:
                keys.setdefault(num.key(), set()).update(kinds)
    return keys


def verdict_word_claims(text):
    """(offset, word, the row kind it needs) of each verdict word of a
    sentence that claims something: not quoted, not in bold."""
    skip = [m.span() for m in QUOTED.finditer(text)] + [m.span() for m in BOLD.finditer(text)]
    for rx, kind in ((NO_OP, "no-op"), (DECIDED, None)):
        for m in rx.finditer(text):
            if any(a <= m.start() < b for a, b in skip):
                continue
            if kind is None:
                kind = ("undecided" if re.match(r"(?:not|un)", m.group(0), re.I)
                        else "decided")
                if kind == "decided" and NEGATED.search(text[max(0, m.start() - 8):m.start()]):
                    kind = "undecided"
                yield m.start(), m.group(0), kind
                kind = None
            else:
                yield m.start(), m.group(0), kind


def cited_claims(root, lines, find_claims, read_rows):
    """(first line, block, offset, sentence, claims, rows) for every sentence of
    a page's prose in which find_claims finds claims: rows maps each number's
    key to the union of what read_rows gives for it over the files the
    sentence's marker cites (files outside root give nothing)."""
    cache = {}
    scope = None
    for first, kind, block in blocks(lines):
        if kind == "marker":
            scope = [x for x in re.split(r"[\s,]+", block.strip()) if x and x != PAPER]
            continue
        if kind == "heading":
            scope = None
        for at, sentence in sentences(normalise(block)):
            claims = list(find_claims(sentence))
            if not claims:
                continue
            rows = {}
            for path in scope or []:
                if path not in cache:
                    full = os.path.join(root, path)
                    inside = not (os.path.isabs(path) or
                                  os.path.normpath(path).split(os.sep)[0] == "..")
                    cache[path] = read_rows(full) if inside else {}
                for key, k in cache[path].items():
                    rows.setdefault(key, set()).update(k)
            yield first, block, at, sentence, claims, rows


def check_verdict_words(root, doc, lines, minor_versions):
    """Problems with the verdict words of a page's prose: "near no-op",
    "decided" and "not decided" need a number of their sentence in a cited
    row whose verdict says so, and in no row that says otherwise."""
    problems = []
    for first, block, at, sentence, claims, rows in cited_claims(root, lines, verdict_word_claims,
                                                                  row_kinds):
        nums, text = read_numbers(sentence)
        keys = [rows.get(num.key(), set()) for num in nums
                if not excluded(num, text, minor_versions)]
        for off, word, need in claims:
            if need == "no-op":
                ok = any("no-op" in k for k in keys)
            elif need == "decided":
                ok = any(k and "undecided" not in k and "decided" in k for k in keys)
            else:
                ok = any(k and "undecided" in k and "decided" not in k for k in keys)
            if not ok:
                n = first + block.count("\n", 0, at + off)
                problems.append(
                    "%s:%d: \"%s\" needs a number of its sentence in a cited row whose "
                    "verdict %s (and in no row that says otherwise)"
                    % (doc, n, word, {"no-op": "is a reproduced block removal (a no-op)",
                                      "decided": "decided it (below or above 0, "
                                                 "reproduced, within the margin, holds)",
                                      "undecided": "left it undecided (inconclusive, fails "
                                                   "Holm)"}[need]))
    return problems


def sentences(text):
    """(offset, sentence) of a block of prose."""
    at = 0
    for m in SENTENCE_END.finditer(text):
        yield at, text[at:m.start()]
        at = m.end()
    yield at, text[at:]


def check_absence(root, doc, lines, minor_versions):
    """Problems with the absence words of a page's prose (module docstring)."""
    problems = []
    for first, block, at, sentence, claims, rows in cited_claims(root, lines, absence_claims,
                                                                  table_verdicts):
        n = first + block.count("\n", 0, at + claims[0][0])
        words = ", ".join('"%s"' % w for _, w in claims)
        nums, text = read_numbers(sentence)
        shown = [num.text for num in nums
                 if not excluded(num, text, minor_versions) and rows.get(num.key()) == {True}]
        if not shown:
            problems.append("%s:%d: %s claims an absence, but no number of its sentence is "
                            "in a row the cited report calls %s (only an equivalence test "
                            "shows an absence: say what the interval allows)"
                            % (doc, n, words, VERDICT_EQUIVALENT))
    return problems


def check(root, doc, update=False, listing=None):
    problems = []
    with open(doc) as f:
        lines = f.read().splitlines()
    replaced = False
    i = 0
    quoted = 0
    while i < len(lines):
        m = BEGIN.search(lines[i])
        if not m:
            i += 1
            continue
        j = i + 1
        while j < len(lines) and lines[j].strip() != END:
            j += 1
        if j == len(lines):
            problems.append("%s:%d: no '%s' after the marker" % (doc, i + 1, END))
            break
        block = [line for line in lines[i + 1:j] if line.strip()]
        src = os.path.join(root, m.group("path").strip())
        if not os.path.isfile(src):
            problems.append("%s:%d: %s is not in the repository" % (doc, i + 1, src))
        else:
            with open(src) as f:
                table = first_table_after(f.read(), m.group("head").strip())
            if table is None:
                problems.append("%s:%d: %s has no table after '%s'"
                                % (doc, i + 1, src, m.group("head")))
            elif table != block and update:
                lines[i + 1:j] = table
                j = i + 1 + len(table)
                replaced = True
            elif table != block:
                diff = next((k for k, (a, b) in enumerate(zip(table, block)) if a != b),
                            min(len(table), len(block)))
                problems.append("%s:%d: the quoted table differs from %s at its row %d:\n"
                                "  file: %s\n  doc:  %s"
                                % (doc, i + 1 + diff + 1, src, diff + 1,
                                   table[diff] if diff < len(table) else "(no row)",
                                   block[diff] if diff < len(block) else "(no row)"))
        quoted += 1
        i = j + 1
    for n, line in enumerate(lines, 1):
        for target in LINK.findall(line):
            path = os.path.normpath(os.path.join(os.path.dirname(doc), target))
            if not os.path.exists(path):
                problems.append("%s:%d: links %s, which is not in the repository"
                                % (doc, n, target))
    checked, number_problems = check_numbers(root, doc, lines, project_minor_versions(root),
                                             listing)
    problems += number_problems
    problems += check_absence(root, doc, lines, project_minor_versions(root))
    problems += check_verdict_words(root, doc, lines, project_minor_versions(root))
    if replaced:
        with open(doc + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
            f.flush()
            os.fsync(f.fileno())
        os.replace(doc + ".tmp", doc)
    return quoted, checked, problems


def main(argv):
    update = listing = False
    while argv and argv[0] in ("--update", "--list"):
        update = update or argv[0] == "--update"
        listing = listing or argv[0] == "--list"
        argv = argv[1:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, docs = argv[0], argv[1:]
    all_problems = []
    for doc in docs:
        lines = [] if listing else None
        quoted, checked, problems = check(root, doc, update, lines)
        all_problems += problems
        for line in lines or []:
            print(line)
        print("check_results: %s: %d quoted table%s, %d number%s of prose checked, %d problem%s"
              % (doc, quoted, "" if quoted == 1 else "s", checked, "" if checked == 1 else "s",
                 len(problems), "" if len(problems) == 1 else "s"))
    for p in all_problems:
        print(p, file=sys.stderr)
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
