"""The experimental model fields (doc/API.md, "Experimental options") are
named only by a source that defines LATTICE_EXPERIMENTAL: without it a source
that names one does not compile, with it it does, and lattice_model_params
has the same size and the same offsets either way.

usage: check_experimental.py INCLUDE_DIR GENERATED_INCLUDE_DIR CC...
"""
import os
import subprocess
import sys
import tempfile

FIELDS = ("block_norm", "block_rescale", "massive_offset", "massive_layer", "massive_channel")

NAMES = """#include <lattice/lattice.h>
int f(const lattice_model_params *p) { return p->%s != 0; }
"""

LAYOUT = """#include <stddef.h>
#include <stdio.h>
#include <lattice/lattice.h>
#ifdef LATTICE_EXPERIMENTAL
#  define F(x) x
#else
#  define F(x) lattice_reserved_##x
#endif
int main(void)
{
    printf("%%zu", sizeof(lattice_model_params));
%s
    printf("\\n");
    return 0;
}
"""


def main(inc, gen_inc, cc):
    failed = []
    base = cc + ["-std=c99", "-I", inc, "-I", gen_inc]
    with tempfile.TemporaryDirectory() as d:
        for field in FIELDS:
            src = os.path.join(d, "names.c")
            with open(src, "w") as f:
                f.write(NAMES % field)
            plain = subprocess.run(base + ["-fsyntax-only", src], capture_output=True, text=True)
            if plain.returncode == 0 or field not in plain.stderr:
                failed.append("%s: named without LATTICE_EXPERIMENTAL and it compiled" % field)
            opted = subprocess.run(base + ["-DLATTICE_EXPERIMENTAL", "-fsyntax-only", src],
                                   capture_output=True, text=True)
            if opted.returncode != 0:
                failed.append("%s: does not compile with LATTICE_EXPERIMENTAL:\n%s"
                              % (field, opted.stderr))
        src, exe = os.path.join(d, "layout.c"), os.path.join(d, "layout")
        with open(src, "w") as f:
            f.write(LAYOUT % "\n".join('    printf(" %%zu", offsetof(lattice_model_params, F(%s)));'
                                       % x for x in FIELDS))
        outs = []
        for flags in ([], ["-DLATTICE_EXPERIMENTAL"]):
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
          "experimental fields: named only with LATTICE_EXPERIMENTAL, one layout (%s)" % outs[0])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3:]))
