#!/usr/bin/env python3
"""Fail unless the shared library exports only lattice_* functions and data."""
import subprocess
import sys

out = subprocess.run(["nm", "-D", "--defined-only", sys.argv[1]], check=True,
                     capture_output=True, text=True).stdout
bad, good = [], 0
for line in out.splitlines():
    parts = line.split()
    if len(parts) < 3:
        continue
    kind, name = parts[1], parts[2].split("@")[0]
    if kind == "A":  # version nodes such as LATTICE_1.0
        continue
    if name.startswith("lattice_"):
        good += 1
    else:
        bad.append(name)
if bad or good == 0:
    print("unexpected exports:", " ".join(bad) or "(no lattice_ symbols at all)")
    sys.exit(1)
print(f"{good} lattice_* symbols exported, nothing else")
