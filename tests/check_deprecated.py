#!/usr/bin/env python3
"""The 0.2 names of compat_0_2.c, compiled three ways: silenced, they compile;
with -Werror=deprecated-declarations, compilation fails on a warning that names
the replacement; with LATTICE_NO_DEPRECATED, on an old name being undeclared
and on the deprecated header <lattice/checkpoint.h>.

    check_deprecated.py SOURCE -- COMPILER [ARGS...]
"""
import subprocess
import sys

sep = sys.argv.index("--")
source, compiler = sys.argv[1], sys.argv[sep + 1:]
base = compiler + ["-fsyntax-only", "-D_GNU_SOURCE", source]


def compile_with(*extra):
    r = subprocess.run(base + list(extra), capture_output=True, text=True)
    return r.returncode, r.stderr


code, err = compile_with("-Wno-deprecated-declarations")
if code != 0:
    sys.exit("the 0.2 names do not compile:\n" + err)
code, err = compile_with("-Werror=deprecated-declarations")
if code == 0 or "is deprecated: use lattice_" not in err:
    sys.exit("using a 0.2 name raised no deprecation warning naming its replacement:\n" + err)
code, err2 = compile_with("-Wno-deprecated-declarations", "-DLATTICE_NO_DEPRECATED")
if code == 0 or "lattice_model_placement" not in err2:
    sys.exit("LATTICE_NO_DEPRECATED left the 0.2 names declared:\n" + err2)
if "checkpoint.h is deprecated: include <lattice/trainer.h>" not in err2:
    sys.exit("LATTICE_NO_DEPRECATED let <lattice/checkpoint.h> be included:\n" + err2)
print("0.2 names: compile when silenced; warn (%d warnings); hidden by LATTICE_NO_DEPRECATED"
      % err.count("is deprecated: use lattice_"))
