#!/usr/bin/env python3
"""Fails when a public function that returns lattice_status has no row in
test_errors.c's table of failures (an EXPECT naming it)."""
import pathlib
import re
import sys

include, table = pathlib.Path(sys.argv[1]), pathlib.Path(sys.argv[2]).read_text()
declared = set()
for header in sorted(include.glob('*.h')):
    text = re.sub(r'\s+', ' ', header.read_text())
    declared |= set(re.findall(r'LATTICE_API lattice_status (lattice_\w+)\(', text))
covered = set(re.findall(r'EXPECT\((lattice_\w+),', table))
missing = sorted(declared - covered)
if not declared:
    sys.exit('no status-returning functions found under %s' % include)
if missing:
    sys.exit('no failure row in test_errors.c for: ' + ', '.join(missing))
print('%d functions, each with a failure row' % len(declared))
