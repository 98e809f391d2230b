"""doc/migrate.py on a source written against 0.2: the renamed names are
rewritten (and the result compiles against 1.0's headers), every use of what
1.0 removed without a rename is named with its line and replacement, and the
exit status says hand edits are left (3) or not (0).

usage: check_migrate.py MIGRATE_PY INCLUDE_DIR GENERATED_INCLUDE_DIR CC...
"""
import os
import subprocess
import sys
import tempfile

OLD_RENAMES = """#include <lattice/lattice.h>

int threads_and_tokens(lattice_backend *b, lattice_data *d)
{
    lattice_batch batch;
    (void)batch;
    return lattice_backend_threads(b) + (int)lattice_data_n_tokens(d, LATTICE_DATA_SPLIT_TRAIN);
}

int value(lattice_model *m, const int32_t *targets, double *ce)
{
    return (int)lattice_model_loss(m, targets, 0, ce, 0);
}
"""

OLD_REMOVED = """#include <lattice/lattice.h>
#include <lattice/checkpoint.h>

int removal(lattice_diag *d, const int32_t *t, const int32_t *y, const uint8_t *m)
{
    struct lattice_diag_removal r;
    return (int)lattice_diag_block_removal(d, t, y, m, 1, 4, 0, 1, &r);
}
"""


def run(script, path):
    return subprocess.run([sys.executable, script, path], capture_output=True, text=True)


def main(script, inc, gen_inc, cc):
    failed = []
    with tempfile.TemporaryDirectory() as d:
        a = os.path.join(d, "renames.c")
        with open(a, "w") as f:
            f.write(OLD_RENAMES)
        r = run(script, a)
        with open(a) as f:
            new = f.read()
        if r.returncode != 0:
            failed.append("renames only: exit %d, want 0\n%s%s" % (r.returncode, r.stdout,
                                                                  r.stderr))
        for want in ("lattice_data_batch batch", "lattice_backend_get_threads(b)",
                     "lattice_data_get_n_tokens(d,",
                     "(int)lattice_model_cross_entropy_value(m, targets,"):
            if want not in new:
                failed.append("renames only: %r not in the rewritten source:\n%s" % (want, new))
        c = subprocess.run(cc + ["-std=c99", "-fsyntax-only", "-Werror", "-I", inc, "-I", gen_inc,
                                 a], capture_output=True, text=True)
        if c.returncode != 0:
            failed.append("the rewritten source does not compile against 1.0's headers:\n" +
                          c.stderr)
        if run(script, a).stdout:
            failed.append("a second run over a 1.0 source printed something")
        b = os.path.join(d, "removed.c")
        with open(b, "w") as f:
            f.write(OLD_REMOVED)
        r = run(script, b)
        if r.returncode != 3:
            failed.append("removed names: exit %d, want 3\n%s%s" % (r.returncode, r.stdout,
                                                                   r.stderr))
        for want in (b + ":2: lattice/checkpoint.h was removed in 1.0: use <lattice/trainer.h>",
                     b + ":6: lattice_diag_removal was removed in 1.0: use "
                         "lattice_diag_block_removal_result",
                     b + ":7: lattice_diag_block_removal was removed in 1.0: use "
                         "lattice_diag_measure_block_removal"):
            if want not in r.stdout:
                failed.append("removed names: %r not said:\n%s" % (want, r.stdout))
    for f in failed:
        print(f)
    print("%d checks failed" % len(failed) if failed else "migrate.py: renames rewritten and "
          "compiling, removed names named")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]))
