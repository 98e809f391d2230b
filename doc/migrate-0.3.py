#!/usr/bin/env python3
"""Rewrite C, C++ or Python sources written against liblattice 0.1/0.2 to the
0.3 names (doc/API.md gives the rule, doc/renames-0.3.txt the table).

    python3 doc/migrate-0.3.py FILE...      rewrites the files in place

Every old name is replaced in one pass, by whole words, so the result does not
depend on the table's order. Run it once: two 0.3 names (the types
lattice_schedule_phase and lattice_schedule_counters) were function names in
0.2, and a second pass would rename them again.
"""
import os
import re
import sys


def load_table(path):
    table = {}
    with open(path, encoding="utf-8") as f:
        for line in f:
            line = line.split("#", 1)[0].split()
            if not line:
                continue
            if len(line) != 2:
                raise SystemExit("%s: expected 'old new', got %r" % (path, " ".join(line)))
            table[line[0]] = line[1]
    return table


def migrate(text, table, pattern):
    return pattern.sub(lambda m: table[m.group(0)], text)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    table = load_table(os.path.join(os.path.dirname(os.path.abspath(__file__)), "renames-0.3.txt"))
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, table), key=len, reverse=True)) + r")\b")
    for path in argv[1:]:
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = migrate(old, table, pattern)
        if new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print("%s: rewritten" % path)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
