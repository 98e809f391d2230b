"""prose_numbers: the numbers of a page's prose for doc/check_results.py (its
docstring says the rules): reading them, which are not checked, the numbers a
cited file holds, the page's prose and blocks, and check_numbers, which finds
each checked number in the files its marker cites or in the page's table of
the paper's numbers. Python 3's standard library only.
"""
import decimal
import json
import os
import re

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


def paper_table(doc, lines):
    """The page's table of the paper's numbers: the keys of its value
    column's numbers, its rows and the problems with it (prose anywhere on
    the page may cite it)."""
    problems = []
    paper_keys = set()
    paper_rows = 0
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
    return paper_keys, paper_rows, problems


def cited_source(root, path, sources):
    """The cited file's numbers, or a string that says why there are none;
    each file read once (sources caches them by path)."""
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


def marker_scope(doc, first, block, source, paper_rows, problems):
    """A 'numbers from:' marker's scope, (marker line, [paths], names the
    paper), with the problems of what it cites added to problems."""
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
    return (first, paths, PAPER in names)


def find_number(num, scope, paper_keys, source):
    """Where in its scope a number of prose is found (the paper, a cited
    file's path, or None), and the notes on near misses."""
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
    return where, notes


def check_numbers(root, doc, lines, minor_versions, listing=None):
    """Problems with the numbers of a page's prose, and how many it checked."""
    sources = {}
    paper_keys, paper_rows, problems = paper_table(doc, lines)

    def source(path):
        return cited_source(root, path, sources)

    checked = 0
    scope = None          # (marker line, [paths], names the paper)
    for first, kind, block in blocks(lines):
        if kind == "marker":
            scope = marker_scope(doc, first, block, source, paper_rows, problems)
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
            where, notes = find_number(num, scope, paper_keys, source)
            if listing is not None:
                listing.append("%s:%d: %s: %s" % (doc, n, num.text,
                                                  "found in " + where if where else "NOT FOUND"))
            if not where:
                cited = " ".join(scope[1] + ([PAPER] if scope[2] else []))
                problems.append("%s:%d: %s is in none of the files cited at line %d (%s)%s"
                                % (doc, n, num.text, scope[0], cited,
                                   "".join(";\n  " + x for x in notes)))
    return checked, problems
