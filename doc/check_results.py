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
import os
import re
import sys

# prose_numbers.py, beside this file, however check_results.py is started or loaded.
HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

from prose_numbers import (BEGIN, END, LINK, PAPER, blocks, check_numbers,  # noqa: E402
                           excluded, first_table_after, normalise, project_minor_versions,
                           read_numbers, table_cells)


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
        try:
            quoted, checked, problems = check(root, doc, update, lines)
        except OSError as e:
            print("check_results: %s: %s" % (doc, e.strerror or e), file=sys.stderr)
            return 2
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
