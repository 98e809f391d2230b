#!/usr/bin/env python3
"""The library against an earlier release's ABI (tests/abi/liblattice-X.Y.abi).

The baseline was written by abidw from the release built with debug
information (`abidw --headers-dir include/lattice --no-corpus-path
--drop-private-types`), from 1.0 built with -Dbuildtype=debugoptimized.
abidiff's exit status is a bit set: 1 error, 2 usage error, 4 an ABI change,
8 an incompatible one (a removed or changed symbol, a struct that moved or
shrank). Added symbols are left out (--no-added-syms) and an appended struct
field behind `size` is a change (4), not an incompatibility, so only 1, 2 and
8 fail. Without debug information in the library (a release build) only the
symbols are compared; the output says so. Skipped (77) without abidiff.
"""
import os
import re
import shutil
import subprocess
import sys

baseline, library, headers = sys.argv[1:4]
release = re.search(r"liblattice-([0-9.]+)\.abi$", os.path.basename(baseline)).group(1)
abidiff = shutil.which("abidiff")
if not abidiff:
    print("abidiff not found (Debian: abigail-tools): ABI check skipped")
    sys.exit(77)
r = subprocess.run([abidiff, "--no-added-syms", "--headers-dir2", headers, baseline, library],
                   capture_output=True, text=True)
print(r.stdout, r.stderr, sep="")
has_dwarf = ".debug_info" in subprocess.run(["readelf", "-S", "-W", library],
                                             capture_output=True, text=True).stdout
if not has_dwarf:
    print("note: the library has no debug information: symbols compared, types not")
if r.returncode & (1 | 2 | 8):
    sys.exit("abidiff exit status %d: the ABI of %s is broken" % (r.returncode, release))
print("compatible with %s (abidiff exit status %d)" % (release, r.returncode))
