#!/usr/bin/env python3
"""doc/CHANGES.md states the library's symbol versions as they are.

- Every symbol liblattice.so.1 exports carries a version node of 1.x
  (nm -D --with-symbol-versions), and each node it has is named in
  CHANGES.md's section of that release (LATTICE_1.1 in "## 1.1 ...").
- No release 0.5 shipped: CHANGES.md names no `LATTICE_0.5` version and
  no "## 0.5" section.
- The 1.0 notes open with what an upgrade from 0.4 must know first: the
  library ignores LATTICE_BACKEND, and doc/MIGRATING.md.

    check_changes_versions.py CHANGES.md LIBRARY
"""
import re
import subprocess
import sys

changes_path, library = sys.argv[1:3]
with open(changes_path, encoding="utf-8") as f:
    changes = f.read()
failures = []

out = subprocess.run(["nm", "-D", "--defined-only", "--with-symbol-versions", library],
                     check=True, capture_output=True, text=True).stdout
nodes = {}
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3 or parts[1] == "A":
        continue
    m = re.match(r"(\w+)@@?(\S+)$", parts[2])
    if not m:
        failures.append("%s has no symbol version" % parts[2])
        continue
    nodes.setdefault(m.group(2), []).append(m.group(1))
sections = dict(re.findall(r"^## (\d+\.\d+)[^\n]*\n(.*?)(?=^## |\Z)", changes, re.M | re.S))
for node, names in sorted(nodes.items()):
    m = re.match(r"LATTICE_(1)\.(\d+)$", node)
    if not m:
        failures.append("%d symbols carry %s, not a 1.x version (%s...)" % (len(names), node,
                                                                        names[0]))
        continue
    release = "%s.%s" % m.groups()
    if release != "1.0" and node not in sections.get(release, ""):
        failures.append("CHANGES.md's %s section does not name %s (%s)" % (release, node,
                                                                           ", ".join(names)))
if "LATTICE_0.5" in changes:
    failures.append("CHANGES.md names LATTICE_0.5, a version no release had")
if "## 0.5" in changes:
    failures.append("CHANGES.md has a 0.5 section: no 0.5 was released")
opening = sections.get("1.0", "").split("\n### ", 1)[0]
for must in ("LATTICE_BACKEND", "ignored", "MIGRATING.md"):
    if must not in opening:
        failures.append("the 1.0 notes' opening does not say %r" % must)

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures) if failures else
      "symbol versions %s, each in CHANGES.md" % ", ".join(sorted(nodes)))
sys.exit(1 if failures else 0)
