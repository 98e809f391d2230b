#!/usr/bin/python3
"""check_results: every table the docs quote from a result file is that
file's table, verbatim, and every result file the docs name is committed.

In a doc page, a quoted table sits between two markers:

    <!-- table from: doc/results/regime/report.md, after: ## Verdict: what reproduced -->
    | finding | ... |
    ...
    <!-- end table -->

The block must equal the first markdown table after that heading in that
file. Links and images into results/ must point at files that exist.

usage: check_results.py [--update] ROOT DOC.md...   (exit 1 on any difference)

With --update, each quoted table is replaced by the file's table as it is
now (after a report was regenerated): the prose around it is for a person
to read again.
"""
import os
import re
import sys

BEGIN = re.compile(r"<!-- table from: (?P<path>[^,]+), after: (?P<head>.+?) -->")
END = "<!-- end table -->"
LINK = re.compile(r"\]\(((?:\.\./)?(?:doc/)?results/[^)\s]+)\)")


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


def check(root, doc, update=False):
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
    if replaced:
        with open(doc + ".tmp", "w") as f:
            f.write("\n".join(lines) + "\n")
        os.replace(doc + ".tmp", doc)
    return quoted, problems


def main(argv):
    update = bool(argv) and argv[0] == "--update"
    if update:
        argv = argv[1:]
    if len(argv) < 2:
        print(__doc__, file=sys.stderr)
        return 2
    root, docs = argv[0], argv[1:]
    all_problems = []
    for doc in docs:
        quoted, problems = check(root, doc, update)
        all_problems += problems
        print("check_results: %s: %d quoted table%s, %d problem%s"
              % (doc, quoted, "" if quoted == 1 else "s", len(problems),
                 "" if len(problems) == 1 else "s"))
    for p in all_problems:
        print(p, file=sys.stderr)
    return 1 if all_problems else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
