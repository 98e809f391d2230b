#!/usr/bin/env python3
"""include/lattice/remove_0x_headers.py, the install script: an install over 0.4
removes 0.4's lattice/checkpoint.h (DESTDIR honoured), keeps a file of that
name that is not 0.x's, and does nothing where there is none.

    check_remove_0x_headers.py SCRIPT
"""
import os
import subprocess
import sys
import tempfile

script = sys.argv[1]
# 0.4's header, as 0.1-0.4 installed it (git show 68a88b1^:include/lattice/checkpoint.h)
OLD = """/**
 * @file checkpoint.h
 * @brief Deprecated: the checkpoint functions are declared in trainer.h.
 */
#ifndef LATTICE_CHECKPOINT_H
#define LATTICE_CHECKPOINT_H

#ifdef LATTICE_NO_DEPRECATED
#  error "lattice/checkpoint.h is deprecated: include <lattice/trainer.h>"
#endif

#include <lattice/trainer.h>

#endif
"""
failures = []


def run(includedir, destdir):
    env = dict(os.environ)
    env.pop("MESON_INSTALL_DRY_RUN", None)
    if destdir:
        env["DESTDIR"] = destdir
    else:
        env.pop("DESTDIR", None)
    return subprocess.run([sys.executable, script, includedir], env=env, capture_output=True,
                          text=True)


with tempfile.TemporaryDirectory() as tmp:
    # staged: DESTDIR/usr/local/include/lattice/checkpoint.h, 0.4's
    staged = os.path.join(tmp, "stage", "usr", "local", "include", "lattice")
    os.makedirs(staged)
    with open(os.path.join(staged, "checkpoint.h"), "w") as f:
        f.write(OLD)
    with open(os.path.join(staged, "trainer.h"), "w") as f:
        f.write("/* 1.0's */\n")
    r = run("/usr/local/include", os.path.join(tmp, "stage"))
    if r.returncode or os.path.exists(os.path.join(staged, "checkpoint.h")):
        failures.append("0.4's checkpoint.h under DESTDIR not removed: %r" % (r.stdout + r.stderr))
    elif "removed" not in r.stdout:
        failures.append("the removal is not said: %r" % r.stdout)
    if not os.path.exists(os.path.join(staged, "trainer.h")):
        failures.append("trainer.h removed too")
    # a prefix of its own, no DESTDIR: a checkpoint.h that is not 0.x's stays
    own = os.path.join(tmp, "prefix", "include", "lattice")
    os.makedirs(own)
    with open(os.path.join(own, "checkpoint.h"), "w") as f:
        f.write("/* someone else's checkpoint.h */\n")
    r = run(os.path.join(tmp, "prefix", "include"), "")
    if r.returncode or not os.path.exists(os.path.join(own, "checkpoint.h")):
        failures.append("a checkpoint.h that is not 0.x's was removed")
    elif "not the header liblattice 0.x installed" not in r.stderr:
        failures.append("keeping a foreign checkpoint.h is not said: %r" % r.stderr)
    # nothing there: nothing to do
    r = run(os.path.join(tmp, "empty", "include"), "")
    if r.returncode or r.stdout or r.stderr:
        failures.append("with no old header: %r" % (r.stdout + r.stderr))

for f in failures:
    print("FAIL:", f)
print("%d failures" % len(failures) if failures else "0.x headers: removed where 0.x's, kept otherwise")
sys.exit(1 if failures else 0)
