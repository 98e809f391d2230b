#!/usr/bin/env python3
"""At `meson install`: remove the headers 0.x installed that 1.0 no longer has.

Installing 1.0 over 0.4 in one prefix overwrites every header 1.0 has and
leaves the others: 0.4's <lattice/checkpoint.h>, which only included
<lattice/trainer.h>, so a source still including it would go on compiling
against 1.0 there while it fails everywhere else. This script removes such a
file, but only one that is 0.x's (its include guard and its one include, as
0.1-0.4 wrote it); a file of that name with other contents is left, with a
warning. It reads no file names from anywhere but its arguments, runs no
shell, and honours DESTDIR as meson does.

    remove_0x_headers.py INCLUDEDIR      (meson.add_install_script gives prefix / includedir)
"""
import os
import sys

# name -> the lines that make it 0.x's file (all of them must be there)
OLD_HEADERS = {
    "checkpoint.h": ("#ifndef LATTICE_CHECKPOINT_H", "#include <lattice/trainer.h>"),
}


def destdir_join(destdir, path):
    """path under DESTDIR, as meson stages an install (an absolute path's root dropped)."""
    if not destdir:
        return path
    return os.path.join(destdir, os.path.relpath(path, os.path.abspath(os.sep)))


def main(argv):
    if len(argv) != 2:
        print(__doc__.strip(), file=sys.stderr)
        return 2
    includedir = destdir_join(os.environ.get("DESTDIR", ""), argv[1])
    folder = os.path.join(includedir, "lattice")
    if os.environ.get("MESON_INSTALL_DRY_RUN"):
        return 0
    for name, marks in OLD_HEADERS.items():
        path = os.path.join(folder, name)
        if not os.path.isfile(path) or os.path.islink(path):
            continue
        try:
            with open(path, encoding="utf-8", errors="replace") as f:
                text = f.read(1 << 16)
        except OSError as e:
            print(f"lattice: cannot read {path}: {e.strerror}; remove it by hand "
                  f"(1.0 has no lattice/{name})", file=sys.stderr)
            continue
        if not all(mark in text for mark in marks):
            print(f"lattice: {path} is not the header liblattice 0.x installed: left as it is "
                  f"(1.0 has no lattice/{name})", file=sys.stderr)
            continue
        try:
            os.remove(path)
        except OSError as e:
            print(f"lattice: cannot remove 0.x's {path}: {e.strerror}; remove it by hand",
                  file=sys.stderr)
            continue
        print(f"lattice: removed {path}, which 0.x installed and 1.0 has not "
              f"(include <lattice/trainer.h>)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
