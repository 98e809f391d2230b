#!/usr/bin/env python3
"""Migrate C, C++ or Python sources written against liblattice 0.x (0.1 to 0.4)
to 1.0's names: rewrite the names 0.3 and 1.0 changed (doc/API.md gives the
rule, doc/renames-0.3.txt the table), and name what 1.0 removed that no
rename replaces. doc/MIGRATING.md is the whole upgrade, step by step.

    python3 doc/migrate.py FILE...          rewrites the files in place

Each line that still uses a removed diagnostic whose result had no size
(lattice_diag_boundary_scale and the others below) or the removed header
<lattice/checkpoint.h> is printed as FILE:LINE: with what replaces it; those
need an edit by hand (the replacement fills a struct with a size), and the
exit status is then 3.

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


# What 1.0 removed with no one-to-one rename: name -> what to use instead.
REMOVED = {
    "lattice_diag_boundary_scale": "lattice_diag_measure_boundary_scale on "
                                   "lattice_diag_boundary_scale_result (set out[0].size)",
    "lattice_diag_block_removal": "lattice_diag_measure_block_removal on "
                                  "lattice_diag_block_removal_result (set out->size)",
    "lattice_diag_loss_response": "lattice_diag_measure_loss_response on "
                                  "lattice_diag_loss_response_result (set out->size)",
    "lattice_diag_attention_sinks": "lattice_diag_measure_attention_sinks on "
                                    "lattice_diag_attention_sinks_result (set out[0].size)",
    "lattice_diag_rms_stats": "lattice_diag_boundary_scale_result",
    "lattice_rms_stats": "lattice_diag_boundary_scale_result",
    "lattice_diag_removal": "lattice_diag_block_removal_result",
    "lattice_removal": "lattice_diag_block_removal_result",
    "lattice_diag_response": "lattice_diag_loss_response_result",
    "lattice_response": "lattice_diag_loss_response_result",
    "lattice_diag_sinks": "lattice_diag_attention_sinks_result",
    "lattice/checkpoint.h": "<lattice/trainer.h>",
}
REMOVED_RE = re.compile(r"(?<![\w/])(" + "|".join(sorted(map(re.escape, REMOVED), key=len,
                                                            reverse=True)) + r")(?![\w.])")


def by_hand(path, text):
    """FILE:LINE: lines for every use of what 1.0 removed without a rename."""
    out = []
    for number, line in enumerate(text.splitlines(), 1):
        for m in REMOVED_RE.finditer(line):
            out.append("%s:%d: %s was removed in 1.0: use %s" % (path, number, m.group(1),
                                                                 REMOVED[m.group(1)]))
    return out


def migrate(text, table, pattern):
    return pattern.sub(lambda m: table[m.group(0)], text)


def main(argv):
    if len(argv) < 2 or argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0 if len(argv) >= 2 else 2
    table = load_table(os.path.join(os.path.dirname(os.path.abspath(__file__)), "renames-0.3.txt"))
    pattern = re.compile(r"\b(" + "|".join(sorted(map(re.escape, table), key=len, reverse=True)) + r")\b")
    left = []
    for path in argv[1:]:
        with open(path, encoding="utf-8") as f:
            old = f.read()
        new = migrate(old, table, pattern)
        if new != old:
            with open(path, "w", encoding="utf-8") as f:
                f.write(new)
            print("%s: rewritten" % path)
        left += by_hand(path, new)
    for line in left:
        print(line)
    return 3 if left else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
