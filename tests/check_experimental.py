"""The experimental model options (doc/API.md, "Experimental options") go by
key: a source names their keys (LATTICE_MODEL_OPTION_BLOCK_NORM, ...) only
where it defines LATTICE_EXPERIMENTAL, and names their slots in
lattice_model_params under no define (they are reserved: only the library
reads them); the struct has the same size and offsets either way.

usage: check_experimental.py INCLUDE_DIR GENERATED_INCLUDE_DIR CC...
"""
import os
import subprocess
import sys
import tempfile

OPTIONS = ("block_norm", "block_rescale", "massive_offset", "massive_layer", "massive_channel")

SLOT = """#include <lattice/lattice.h>
int f(const lattice_model_params *p) { return p->%s != 0; }
"""

KEY = """#include <lattice/lattice.h>
int f(void) { return (int)LATTICE_MODEL_OPTION_%s; }
"""

LAYOUT = """#include <stddef.h>
#include <stdio.h>
#include <lattice/lattice.h>
int main(void)
{
    printf("%%zu", sizeof(lattice_model_params));
%s
    printf("\\n");
    return 0;
}
"""


def compiles(base, flags, d, text):
    src = os.path.join(d, "probe.c")
    with open(src, "w") as f:
        f.write(text)
    return subprocess.run(base + flags + ["-fsyntax-only", src], capture_output=True, text=True)


def main(inc, gen_inc, cc):
    failed = []
    base = cc + ["-std=c99", "-I", inc, "-I", gen_inc]
    optin = ["-DLATTICE_EXPERIMENTAL"]
    with tempfile.TemporaryDirectory() as d:
        for name in OPTIONS:
            for flags in ([], optin):
                slot = compiles(base, flags, d, SLOT % name)
                if slot.returncode == 0 or name not in slot.stderr:
                    failed.append("%s: the slot is named %s and it compiled"
                                  % (name, " ".join(flags) or "without a define"))
            key = "LATTICE_MODEL_OPTION_" + name.upper()
            plain = compiles(base, [], d, KEY % name.upper())
            if plain.returncode == 0 or key not in plain.stderr:
                failed.append("%s: named without LATTICE_EXPERIMENTAL and it compiled" % key)
            opted = compiles(base, optin, d, KEY % name.upper())
            if opted.returncode != 0:
                failed.append("%s: does not compile with LATTICE_EXPERIMENTAL:\n%s"
                              % (key, opted.stderr))
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write(LAYOUT % "\n".join(
                '    printf(" %%zu", offsetof(lattice_model_params, lattice_reserved_%s));' % x
                for x in OPTIONS))
        outs = []
        for flags in ([], optin):
            c = subprocess.run(base + flags + [src, "-o", exe], capture_output=True, text=True)
            if c.returncode != 0:
                failed.append("the layout program does not compile (%s):\n%s" % (flags, c.stderr))
                break
            outs.append(subprocess.run([exe], capture_output=True, text=True,
                                       check=True).stdout.strip())
        if len(outs) == 2 and outs[0] != outs[1]:
            failed.append("the layout differs: size and offsets %s without, %s with" % tuple(outs))
    for f in failed:
        print(f)
    print("%d checks failed" % len(failed) if failed else
          "experimental options: keys only with LATTICE_EXPERIMENTAL, slots reserved, one "
          "layout (%s)" % outs[0])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
