#!/usr/bin/env python3
"""The library's sources as a newcomer meets them (issue 28): every liblattice
.c and .h file opens with a comment saying what it is, and the error macros
FAIL and TRY are defined once, in internal.h.

    check_sources.py LIBLATTICE_DIR
"""
import os
import re
import sys

src = sys.argv[1]
# attention.c keeps its own TRY, token for token internal.h's (an identical
# redefinition, so no warning), until the kernel work that owns it drops it.
KNOWN_COPIES = {("attention.c", "TRY")}

failures = []
names = sorted(n for n in os.listdir(src) if n.endswith((".c", ".h")))
for name in names:
    with open(os.path.join(src, name), encoding="utf-8") as f:
        text = f.read()
    first = text.split("\n", 1)[0]
    if not re.match(r"/\*\*? ?\S", first) or first.strip() in ("/*", "/**"):
        failures.append("%s: does not open with a comment saying what it is: %r" % (name, first))
    for macro in ("FAIL", "TRY"):
        if name != "internal.h" and (name, macro) not in KNOWN_COPIES and \
                re.search(r"^\s*#\s*define\s+%s\b" % macro, text, re.M):
            failures.append("%s: defines %s, which internal.h defines for every file" % (name, macro))
if len(names) < 20:
    failures.append("only %d sources in %s: the wrong folder?" % (len(names), src))
for f in failures:
    print(f)
if failures:
    sys.exit(1)
print("%d sources open with what they are; FAIL and TRY come from internal.h" % len(names))
