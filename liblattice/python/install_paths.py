"""Where `meson install` puts the package, and where the library is from there.

Run at configure time by the interpreter the package is installed for:
    install_paths.py PREFIX LIBDIR [PURELIBDIR]
prints four lines: the package's parent directory (relative to PREFIX when
it is under it); as Python literals, the library directory (absolute) and
the library directory relative to the installed package directory; and the
parent directory again, absolute, when this interpreter's sys.path lacks it
(the PYTHONPATH to set after installing), else an empty line.

The parent directory is the site directory of this interpreter's sys.path
under PREFIX with the shortest path (Debian's python3: /usr/local/lib/python3.X/
dist-packages for /usr/local, /usr/lib/python3/dist-packages for /usr), so the
system's Python imports the installed package without PYTHONPATH. A prefix
outside sys.path gets the interpreter's own layout under it
(P/lib/python3.11/site-packages), which no Python reads: meson's summary
prints the PYTHONPATH line for it.
"""

import os
import sys
import sysconfig


def site_dir(prefix):
    best = None
    for entry in sys.path:
        if os.path.basename(entry) not in ("site-packages", "dist-packages"):
            continue
        entry = os.path.abspath(entry)
        if os.path.commonpath([entry, prefix]) != prefix:
            continue
        rel = os.path.relpath(entry, prefix)
        if best is None or len(rel.split(os.sep)) < len(best.split(os.sep)):
            best = rel
    if best is None:
        version = "%d.%d" % sys.version_info[:2]
        purelib = sysconfig.get_path("purelib", "posix_prefix",
                                     vars={"base": prefix, "platbase": prefix})
        best = os.path.relpath(purelib, prefix) if purelib else \
            os.path.join("lib", "python" + version, "site-packages")
    return best


def main(argv):
    prefix = os.path.abspath(argv[1])
    libdir = os.path.join(prefix, argv[2])
    purelibdir = argv[3] if len(argv) > 3 and argv[3] else site_dir(prefix)
    package_dir = os.path.join(prefix, purelibdir, "lattice")
    site = os.path.normpath(os.path.join(prefix, purelibdir))
    on_path = any(os.path.abspath(entry) == site for entry in sys.path if entry)
    print(purelibdir)
    print(repr(libdir))
    print(repr(os.path.relpath(libdir, package_dir)))
    print("" if on_path else site)


if __name__ == "__main__":
    main(sys.argv)
