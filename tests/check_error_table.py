#!/usr/bin/env python3
"""Fails when a public function that returns lattice_status has no row in
test_errors.c's table of failures (an EXPECT naming it), or in one of the
other tables named after it (tests/mpi/test_dist.c for lattice/dist.h)."""
import pathlib
import re
import sys

include = pathlib.Path(sys.argv[1])
table = ''.join(pathlib.Path(p).read_text() for p in sys.argv[2:])
declared = set()
for header in sorted(include.glob('*.h')):
    text = re.sub(r'\s+', ' ', header.read_text())
    declared |= set(re.findall(r'LATTICE_API lattice_status (lattice_\w+)\(', text))
covered = set(re.findall(r'EXPECT\((lattice_\w+),', table))
missing = sorted(declared - covered)
if not declared:
    sys.exit('no status-returning functions found under %s' % include)
if missing:
    sys.exit('no failure row in ' + ', '.join(sys.argv[2:]) + ' for: ' + ', '.join(missing))
print('%d functions, each with a failure row' % len(declared))
