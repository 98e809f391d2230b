#!/usr/bin/env python3
"""Programs built against every earlier release, run on today's library (issue 38 part 2).

usage: check_old_consumers.py SOURCE_DIR LIBRARY CC...

For each release in RELEASES, in a temporary directory:
1. takes that release's public headers from git (`git show REV:include/lattice/X.h`,
   version.h from its version.h.in and meson.build) and its version script
   (liblattice/lattice.sym);
2. compiles tests/old_consumer.c against those headers with AddressSanitizer;
3. links it against a stub liblattice.so.0 built from that version script, so
   that it binds each function at the version that release's library gave it
   as default, as a program really built against that release does (linked
   against today's library it would bind today's defaults and prove nothing);
4. runs it with today's library (LIBRARY's directory first on LD_LIBRARY_PATH):
   every _init on a struct on the stack, under ASan and with a canary after
   it, then a create/destroy from each struct.
An _init that fills more bytes than the program's struct has fails it.

Skipped (77) when SOURCE_DIR has no git history with the release commits or
there is no git. Without ASan in the compiler the canaries alone decide
(said in the output).
"""
import os
import re
import shutil
import subprocess
import sys
import tempfile

# The last commit of each release (its version string in meson.build).
RELEASES = [
    ("0.1", "488c4a9"),
    ("0.2", "24dd2cc"),
    ("0.3", "28f5bdf~1"),
    ("0.4", "2c43931~1"),
]

HERE = os.path.dirname(os.path.abspath(__file__))


def git(src, *args):
    return subprocess.run(["git", "-C", src] + list(args), capture_output=True, text=True)


def extract(src, rev, release, dst):
    """The release's headers under dst/lattice, and its version script; the version string."""
    inc = os.path.join(dst, "include", "lattice")
    os.makedirs(inc)
    names = git(src, "ls-tree", "--name-only", rev, "include/lattice/").stdout.split()
    for path in names:
        base = os.path.basename(path)
        if base.endswith(".h"):
            with open(os.path.join(inc, base), "w") as f:
                f.write(git(src, "show", "%s:%s" % (rev, path)).stdout)
    meson = git(src, "show", rev + ":meson.build").stdout
    version = re.search(r"version:\s*'([0-9]+)\.([0-9]+)\.([0-9]+)'", meson)
    major, minor, patch = version.groups()
    if "%s.%s" % (major, minor) != release:
        sys.exit("%s (%s) says version %s.%s.%s, not %s" % (rev, release, major, minor, patch,
                                                            release))
    tmpl = git(src, "show", rev + ":include/lattice/version.h.in").stdout
    for key, val in (("MAJOR", major), ("MINOR", minor), ("PATCH", patch),
                     ("VERSION", "%s.%s.%s" % (major, minor, patch))):
        tmpl = tmpl.replace("@%s@" % key, val)
    with open(os.path.join(inc, "version.h"), "w") as f:
        f.write(tmpl)
    sym = os.path.join(dst, "lattice.sym")
    with open(sym, "w") as f:
        f.write(git(src, "show", rev + ":liblattice/lattice.sym").stdout)
    return sym


def check(cmd, what):
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        print("$ " + " ".join(cmd))
        print(r.stdout + r.stderr)
        sys.exit("%s failed (exit status %d)" % (what, r.returncode))
    return r


def main():
    src, library = sys.argv[1], sys.argv[2]
    cc = sys.argv[3:]
    if not shutil.which("git") or git(src, "rev-parse", "--git-dir").returncode != 0:
        print("no git history at %s: skipped" % src)
        return 77
    for release, rev in RELEASES:
        if git(src, "cat-file", "-e", rev + "^{commit}").returncode != 0:
            print("the %s release commit %s is not in this history: skipped" % (release, rev))
            return 77
    libdir = os.path.dirname(os.path.abspath(library))
    failed = []
    with tempfile.TemporaryDirectory(prefix="lattice-old-consumers-") as tmp:
        probe = os.path.join(tmp, "probe.c")
        with open(probe, "w") as f:
            f.write("int main(void) { return 0; }\n")
        asan = ["-fsanitize=address", "-fno-omit-frame-pointer"]
        if subprocess.run(cc + asan + [probe, "-o", os.path.join(tmp, "probe")],
                          capture_output=True).returncode != 0:
            print("note: the compiler has no AddressSanitizer: the canaries alone check")
            asan = []
        for release, rev in RELEASES:
            print("== %s (%s)" % (release, git(src, "rev-parse", "--short", rev).stdout.strip()),
                  flush=True)
            dst = os.path.join(tmp, release)
            sym = extract(src, rev, release, dst)
            obj = os.path.join(dst, "old_consumer.o")
            check(cc + asan + ["-g", "-O1", "-std=gnu11", "-Wno-deprecated-declarations",
                               "-I" + os.path.join(dst, "include"), "-c",
                               os.path.join(HERE, "old_consumer.c"), "-o", obj],
                  "compiling against %s's headers" % release)
            # the stub: every lattice_ function the program calls, at the
            # version the release's script gives it
            undefined = check(["nm", "-u", obj], "nm").stdout.split()
            funcs = sorted({s for s in undefined if s.startswith("lattice_")})
            stub_dir = os.path.join(dst, "stub")
            os.makedirs(stub_dir)
            stub_c = os.path.join(stub_dir, "stub.c")
            with open(stub_c, "w") as f:
                for fn in funcs:
                    f.write("void %s(void) {}\n" % fn)
            check(cc + ["-shared", "-fPIC", stub_c, "-Wl,--version-script=" + sym,
                        "-Wl,-soname,liblattice.so.0",
                        "-o", os.path.join(stub_dir, "liblattice.so")], "the stub library")
            exe = os.path.join(dst, "old_consumer")
            check(cc + asan + [obj, "-L" + stub_dir, "-llattice", "-o", exe],
                  "linking against %s's symbol versions" % release)
            binds = check(["objdump", "-T", exe], "objdump").stdout
            inits = sorted(set(re.findall(r"(\(?LATTICE_[0-9.]+\)?)\s+(lattice_\w+_init)\b",
                                          binds)), key=lambda p: p[1])
            print("binds: " + ", ".join("%s@%s" % (n, v.strip("()")) for v, n in inits))
            env = dict(os.environ)
            env["LD_LIBRARY_PATH"] = libdir + (
                ":" + env["LD_LIBRARY_PATH"] if env.get("LD_LIBRARY_PATH") else "")
            # the library's own allocations are not this test's business
            env["ASAN_OPTIONS"] = "detect_leaks=0:detect_stack_use_after_return=0"
            env.setdefault("OMP_NUM_THREADS", "1")
            r = subprocess.run([exe], capture_output=True, text=True, env=env, timeout=120)
            print(r.stdout + r.stderr, end="", flush=True)
            if r.returncode != 0:
                failed.append(release)
    if failed:
        sys.exit("programs built against %s fail on today's library" % ", ".join(failed))
    print("programs built against %s run on today's library"
          % ", ".join(r for r, _ in RELEASES))
    return 0


if __name__ == "__main__":
    sys.exit(main())
