#!/usr/bin/env python3
"""liblattice as its users meet it.

usage: run_consumers.py BUILD_DIR SOURCE_DIR

In a temporary directory:
1. configures a throwaway build of SOURCE_DIR with --prefix inside it (with
   BUILD_DIR's blis and openmp choices) and installs it with `meson install`;
2. checks what it installed: lattice.hpp, the CMake package, the examples'
   sources under share/doc/lattice/examples, and a lattice.pc whose --cflags
   and (shared) --libs name no private dependency (json-c, BLIS, OpenMP);
3. builds the C consumer, the C++ consumer (lattice.hpp, as C++11 and as
   C++20) and the README's "Use from C" program against that prefix with
   nothing but `pkg-config --cflags --libs lattice` (PKG_CONFIG_PATH pointing
   at the installed lattice.pc), runs them with LD_LIBRARY_PATH, and links the
   C consumer statically with `pkg-config --static --libs lattice` and runs it
   without;
4. builds tests/consumer/cmake_user with cmake (find_package(lattice 1.0),
   lattice::lattice) against the prefix, runs its programs, and checks which
   versions find_package accepts;
5. builds tests/consumer/subproject_user with the source tree as its
   subprojects/lattice and runs it;
6. where BUILD_DIR has liblattice-mpi: checks that lattice/dist.h and
   lattice-mpi.pc were installed and that lattice.pc names nothing of MPI,
   builds tests/consumer/dist_user with `pkg-config --cflags --libs
   lattice-mpi` and runs it on 2 ranks with mpirun;
7. the CMake package's mpi component: an unknown component is refused and
   find_package(lattice) alone makes no lattice::mpi nor looks for MPI;
   where BUILD_DIR has liblattice-mpi, builds tests/consumer/cmake_mpi_user
   (find_package(lattice 1.0 REQUIRED COMPONENTS mpi), lattice::mpi) and
   runs it on 2 ranks; where it has not, checks that COMPONENTS mpi is
   refused with the reason and OPTIONAL_COMPONENTS mpi leaves
   lattice_mpi_FOUND false (that part of the test is then skipped).
Every program must print a training loss that falls.

A throwaway build, rather than installing BUILD_DIR itself, keeps the test
away from the build that `meson test` is running from (no recursive ninja),
and from that build's own flags (a sanitizer build installs a library that
plain programs cannot link).

The compilers come from CC and CXX, meson, ninja and cmake from MESON, NINJA
and CMAKE (tests/consumer/meson.build passes its own); the C++ part is
skipped when CXX is unset, the CMake part when CMAKE is unset. LATTICE_CONSUMER_JOBS sets the ninja job count (2);
LATTICE_CONSUMER_KEEP=1 keeps the temporary directory.
"""
import json
import math
import os
import re
import shlex
import shutil
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))
JOBS = os.environ.get("LATTICE_CONSUMER_JOBS", "2")
MESON = shlex.split(os.environ.get("MESON", "meson"))
NINJA = shlex.split(os.environ.get("NINJA", "ninja"))
CMAKE = shlex.split(os.environ.get("CMAKE", ""))
# What lattice.pc must keep out of a consumer's flags: the library's private
# dependencies (its headers include none of them).
PRIVATE_FLAGS = re.compile(r"json-c|blis|openmp|-fopenmp|-lgomp|-ldl|pthread", re.I)
T0 = time.monotonic()


class Failure(Exception):
    pass


def log(msg):
    print("[%5.1fs] %s" % (time.monotonic() - T0, msg), flush=True)


def run(cmd, cwd=None, env=None, shell=False):
    """Run a command; its output is returned, or shown in full when it fails."""
    shown = cmd if isinstance(cmd, str) else " ".join(shlex.quote(c) for c in cmd)
    log("$ " + shown)
    p = subprocess.run(cmd, cwd=cwd, env=env, shell=shell, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, text=True)
    if p.returncode != 0:
        sys.stdout.write(p.stdout)
        raise Failure("exit status %d: %s" % (p.returncode, shown))
    return p.stdout


def check_losses(name, output):
    """The program trained: it printed at least two finite losses, the last below the first."""
    # the training steps' lines ("step  3 loss 2.7627"), not a caught message's words
    losses = [float(x) for x in re.findall(r"^step\s+\d+\s+loss\s+(\S+)", output, re.M)]
    if len(losses) < 2 or not all(math.isfinite(x) for x in losses):
        raise Failure("%s: expected finite losses in its output:\n%s" % (name, output))
    if not losses[-1] < losses[0]:
        raise Failure("%s: the loss did not fall (%g -> %g)" % (name, losses[0], losses[-1]))
    log("%s: loss %.4f -> %.4f" % (name, losses[0], losses[-1]))


def needed(path):
    """The DT_NEEDED entries of an ELF file (None when readelf is missing)."""
    if not shutil.which("readelf"):
        return None
    out = subprocess.run(["readelf", "-d", path], stdout=subprocess.PIPE, text=True).stdout
    return re.findall(r"\(NEEDED\)\s+Shared library: \[([^\]]+)\]", out)


def build_options(build_dir):
    """BUILD_DIR's blis and openmp choices, so the installed copy is built alike."""
    out = subprocess.run(MESON + ["introspect", "--buildoptions", build_dir],
                         stdout=subprocess.PIPE, text=True)
    if out.returncode != 0:
        return []
    opts = {o["name"]: o["value"] for o in json.loads(out.stdout)}
    return ["-D%s=%s" % (k, opts[k]) for k in ("blis", "openmp", "mpi") if k in opts]


def install(source_dir, build_dir, tmp):
    prefix = os.path.join(tmp, "prefix")
    build = os.path.join(tmp, "build-install")
    run(MESON + ["setup", build, source_dir, "--prefix=" + prefix, "-Dtests=disabled",
         "-Dexamples=false", "-Ddocs=disabled"] + build_options(build_dir))
    run(NINJA + ["-C", build, "-j", JOBS])
    run(MESON + ["install", "-C", build, "--no-rebuild", "--quiet"])
    # libdir is lib, lib64 or lib/<triplet> depending on the platform: find the .pc file.
    for root, _dirs, files in os.walk(prefix):
        if "lattice.pc" in files and os.path.basename(root) == "pkgconfig":
            return prefix, root
    raise Failure("meson install wrote no lattice.pc under " + prefix)


def readme_snippets(source_dir):
    """The C program and the build command of README.md's "Use from C" section."""
    with open(os.path.join(source_dir, "README.md"), encoding="utf-8") as f:
        text = f.read()
    section = re.search(r"^## Use from C\s*$(.*?)(?=^## |\Z)", text, re.M | re.S)
    if not section:
        raise Failure('README.md has no "## Use from C" section')
    blocks = re.findall(r"^```(\w*)\s*\n(.*?)^```\s*$", section.group(1), re.M | re.S)
    program = [body for lang, body in blocks if lang == "c"]
    command = [body for lang, body in blocks if lang in ("sh", "shell", "console", "bash")]
    if not program or not command:
        raise Failure('README.md "Use from C" needs a ```c program and a ```sh build command')
    return program[0], command[0]


def check_installed(prefix, pc_dir):
    """The headers, the CMake package and the examples' sources are installed."""
    libdir = os.path.dirname(pc_dir)
    expected = [os.path.join(prefix, "include", "lattice", "lattice.hpp"),
                os.path.join(libdir, "cmake", "lattice", "latticeConfig.cmake"),
                os.path.join(libdir, "cmake", "lattice", "latticeConfigVersion.cmake")]
    examples = os.path.join(prefix, "share", "doc", "lattice", "examples")
    expected += [os.path.join(examples, f) for f in
                 ("train_text.c", "example_util.h", "reproduce/main.c", "reproduce/study.h",
                  "reproduce/presets/quick.json", "bench/compare.py")]
    missing = [f for f in expected if not os.path.isfile(f)]
    if missing:
        raise Failure("meson install did not write " + " ".join(missing))
    log("installed: lattice.hpp, the CMake package, the examples' sources")


def check_public_flags(pkg):
    """Consumers see -I and -L -llattice, nothing of the private dependencies."""
    for args in (["--cflags"], ["--libs"]):
        flags = " ".join(pkg(*args))
        if PRIVATE_FLAGS.search(flags):
            raise Failure("pkg-config %s lattice leaks a private dependency: %s"
                          % (args[0], flags))
        log("pkg-config %s lattice: %s" % (args[0], flags))
    static = " ".join(pkg("--static", "--libs"))
    if "-ljson-c" not in static:
        raise Failure("pkg-config --static --libs lattice lacks -ljson-c: " + static)


def cmake_probe(tmp, config_dir, body, env, languages="NONE"):
    """Configure a CMake project of body (with lattice_DIR set); its output.
    FindMPI needs C: the mpi component's probes enable it."""
    probe = os.path.join(tmp, "cmake-probe")
    shutil.rmtree(probe, ignore_errors=True)
    os.mkdir(probe)
    with open(os.path.join(probe, "CMakeLists.txt"), "w", encoding="utf-8") as f:
        f.write("cmake_minimum_required(VERSION 3.19)\nproject(probe %s)\n" % languages + body)
    return run(CMAKE + ["-S", probe, "-B", os.path.join(probe, "build"),
                        "-Dlattice_DIR=" + config_dir], env=env)


def cmake_config_dir(prefix):
    for root, _dirs, files in os.walk(prefix):
        if "latticeConfig.cmake" in files:
            return root
    raise Failure("meson install wrote no latticeConfig.cmake under " + prefix)


def cmake_mpi_consumer(build_dir, tmp, prefix, env):
    """The CMake package's mpi component: lattice::mpi on 2 ranks where
    liblattice-mpi was built; a clear refusal where it was not."""
    config_dir = cmake_config_dir(prefix)
    report = ('message(STATUS "lattice_FOUND=${lattice_FOUND} mpi=${lattice_mpi_FOUND}")\n'
              'if(TARGET lattice::mpi)\n  message(STATUS "has lattice::mpi")\nendif()\n'
              'if(DEFINED MPI_C_FOUND)\n  message(STATUS "looked for MPI")\nendif()\n'
              'message(STATUS "why: ${lattice_NOT_FOUND_MESSAGE}")\n')
    # an unknown component is refused; without the component no MPI is looked for
    out = cmake_probe(tmp, config_dir, "find_package(lattice COMPONENTS nosuch QUIET)\n" + report,
                      env)
    if "lattice_FOUND=1" in out or "no component nosuch" not in out:
        raise Failure("find_package(lattice COMPONENTS nosuch) was not refused:\n" + out)
    out = cmake_probe(tmp, config_dir, "find_package(lattice REQUIRED)\n" + report, env)
    if "has lattice::mpi" in out or "looked for MPI" in out:
        raise Failure("find_package(lattice) without the mpi component made lattice::mpi or "
                      "looked for MPI:\n" + out)
    built = os.path.exists(os.path.join(build_dir, "liblattice", "liblattice-mpi.so"))
    if not built:
        out = cmake_probe(tmp, config_dir, "find_package(lattice COMPONENTS mpi QUIET)\n" + report,
                          env, "C")
        if "lattice_FOUND=1" in out or "built without MPI" not in out:
            raise Failure("find_package(lattice COMPONENTS mpi) without liblattice-mpi was not "
                          "refused with the reason:\n" + out)
        out = cmake_probe(tmp, config_dir,
                          "find_package(lattice REQUIRED OPTIONAL_COMPONENTS mpi)\n" + report,
                          env, "C")
        if "lattice_FOUND=1 mpi=FALSE" not in out or "has lattice::mpi" in out:
            raise Failure("OPTIONAL_COMPONENTS mpi without liblattice-mpi:\n" + out)
        log("CMake lattice::mpi: skipped (built without MPI); COMPONENTS mpi is refused with "
            "the reason")
        return
    out = cmake_probe(tmp, config_dir, "find_package(lattice REQUIRED OPTIONAL_COMPONENTS mpi)\n" +
                      report, env, "C")
    if "lattice_FOUND=1 mpi=TRUE" not in out or "has lattice::mpi" not in out:
        raise Failure("OPTIONAL_COMPONENTS mpi with liblattice-mpi installed:\n" + out)
    build = os.path.join(tmp, "build-cmake-mpi")
    run(CMAKE + ["-S", os.path.join(HERE, "cmake_mpi_user"), "-B", build,
                 "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"], env=env)
    run(CMAKE + ["--build", build, "-j", JOBS], env=env)
    exe = os.path.join(build, "dist_consumer")
    deps = needed(exe)
    if deps is not None and not (any(d.startswith("liblattice-mpi.so") for d in deps) and
                                 any(d.startswith("liblattice.so") for d in deps)):
        raise Failure("the lattice::mpi program does not link liblattice-mpi and liblattice: " +
                      " ".join(deps))
    # no LD_LIBRARY_PATH: the imported targets' locations give the run path
    if not run_ranks(exe, env, "CMake lattice::mpi (2 ranks)"):
        log("CMake lattice::mpi: built; not run (no mpirun)")
        return
    log("CMake: lattice::mpi builds and runs on 2 ranks")
    # a C++-only project: FindMPI's C component would need C enabled, and mpi.h
    # from C++ would pull in MPI's C++ bindings, which nothing links
    build = os.path.join(tmp, "build-cmake-mpi-cxx")
    run(CMAKE + ["-S", os.path.join(HERE, "cmake_mpi_cxx_user"), "-B", build,
                 "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"], env=env)
    run(CMAKE + ["--build", build, "-j", JOBS], env=env)
    mpi_env = dict(env)
    mpi_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
    out = run([shutil.which("mpirun") or shutil.which("mpiexec"), "--oversubscribe", "-np", "2",
               os.path.join(build, "dist_sum")], env=mpi_env)
    if sorted(line for line in out.splitlines() if line.startswith("rank ")) != [
            "rank 0 of 2: sum 3.0", "rank 1 of 2: sum 3.0"]:
        raise Failure("the C++-only lattice::mpi program:\n" + out)
    log("CMake: lattice::mpi from a C++-only project builds and runs on 2 ranks")


def run_ranks(exe, env, name):
    """Run exe on 2 ranks with mpirun (as root too) and check its losses; False without mpirun."""
    mpirun = shutil.which("mpirun") or shutil.which("mpiexec")
    if not mpirun:
        return False
    mpi_env = dict(env)
    mpi_env.update(OMPI_ALLOW_RUN_AS_ROOT="1", OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1",
                   OMPI_MCA_rmaps_base_oversubscribe="1", OMP_NUM_THREADS="1")
    check_losses(name, run([mpirun, "--oversubscribe", "-np", "2", exe], env=mpi_env))
    return True


def cmake_consumer(tmp, prefix, env):
    """The CMake project, then find_package's verdict on several requested versions."""
    build = os.path.join(tmp, "build-cmake")
    run(CMAKE + ["-S", os.path.join(HERE, "cmake_user"), "-B", build,
                 "-DCMAKE_PREFIX_PATH=" + prefix, "-DCMAKE_BUILD_TYPE=Release"], env=env)
    run(CMAKE + ["--build", build, "-j", JOBS], env=env)
    # no LD_LIBRARY_PATH: the imported target's location gives the run path
    check_losses("CMake C", run([os.path.join(build, "consumer")], env=env))
    if os.path.exists(os.path.join(build, "consumer_cpp")):
        check_losses("CMake C++", run([os.path.join(build, "consumer_cpp")], env=env))
    config_dir = cmake_config_dir(prefix)
    # SameMajorVersion (1.x keeps 1.0's ABI), never older than asked; a range
    # must stay inside the major series
    with open(os.path.join(config_dir, "latticeConfigVersion.cmake"), encoding="utf-8") as f:
        version = re.search(r'set\(PACKAGE_VERSION "([0-9.]+)"\)', f.read()).group(1)
    M, m, p = (int(x) for x in version.split("."))
    requests = [("", True), ("%d.%d" % (M, m), True), ("%s EXACT" % version, True),
                ("%d.0" % M, True), ("%d.%d" % (M, m + 1), False), ("%d.0" % (M + 1), False),
                ("%d.%d.%d" % (M, m, p + 1), False), ("%d.0...<%d.0" % (M, M + 1), True),
                ("%d.0...%d.2" % (M, M + 1), False)]
    if m > 0:
        requests += [("%d.%d" % (M, m - 1), True), ("%d.%d.0 EXACT" % (M, m - 1), False)]
    for request, found in requests:
        out = cmake_probe(tmp, config_dir, "find_package(lattice %s QUIET)\n"
                          "message(STATUS \"lattice_FOUND=${lattice_FOUND}\")\n" % request, env)
        if ("lattice_FOUND=1" in out) != found:
            raise Failure("find_package(lattice %s) %s %s:\n%s"
                          % (request, "did not find" if found else "found", version, out))
    # The rule as the docs state it: their find_package examples are found, and
    # the prose says "same major version" (0.3's mainpage said same minor).
    with open(os.path.join(config_dir, "latticeConfig.cmake"), encoding="utf-8") as f:
        config_text = f.read()
    with open(os.path.join(HERE, "..", "..", "doc", "mainpage.md"), encoding="utf-8") as f:
        mainpage = f.read()
    for name, text in (("latticeConfig.cmake", config_text), ("doc/mainpage.md", mainpage)):
        if not re.search(r"same\s+major\s+version", text) or re.search(r"same\s+minor", text):
            raise Failure("%s does not state find_package's rule (the same major version)" % name)
        for asked in re.findall(r"find_package\(lattice ([0-9.]+) REQUIRED\)", text):
            M_, m_ = (int(x) for x in asked.split(".")[:2])
            if M_ != M or m_ > m:
                raise Failure("%s's example find_package(lattice %s) would not find %s"
                              % (name, asked, version))
    log("CMake: lattice::lattice builds and runs; find_package's version rule holds")


def dist_consumer(build_dir, tmp, prefix, pc_dir, env, shared_env, cc):
    """liblattice-mpi through its own pkg-config file, on 2 ranks."""
    if not os.path.exists(os.path.join(build_dir, "liblattice", "liblattice-mpi.so")):
        log("liblattice-mpi: skipped (built without MPI)")
        return
    if not os.path.isfile(os.path.join(pc_dir, "lattice-mpi.pc")):
        raise Failure("meson install wrote no lattice-mpi.pc")
    if not os.path.isfile(os.path.join(prefix, "include", "lattice", "dist.h")):
        raise Failure("meson install wrote no lattice/dist.h")
    core = run(["pkg-config", "--cflags", "--libs", "lattice"], env=env)
    if "mpi" in core.lower():
        raise Failure("pkg-config lattice names MPI: " + core)
    flags = shlex.split(run(["pkg-config", "--cflags", "--libs", "lattice-mpi"], env=env))
    log("pkg-config --cflags --libs lattice-mpi: " + " ".join(flags))
    exe = os.path.join(tmp, "dist_consumer")
    run(cc + [os.path.join(HERE, "dist_user", "dist_consumer.c"), "-o", exe] + flags, env=env)
    if not run_ranks(exe, shared_env, "liblattice-mpi (2 ranks)"):
        log("liblattice-mpi: built; not run (no mpirun)")


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    build_dir, source_dir = (os.path.abspath(a) for a in sys.argv[1:])
    cc = shlex.split(os.environ.get("CC", "cc"))
    cxx = shlex.split(os.environ.get("CXX", ""))
    tmp = tempfile.mkdtemp(prefix="lattice-consumer-")
    try:
        prefix, pc_dir = install(source_dir, build_dir, tmp)
        env = dict(os.environ)
        env["PKG_CONFIG_PATH"] = os.pathsep.join(
            p for p in (pc_dir, os.environ.get("PKG_CONFIG_PATH")) if p)
        pkg = lambda *args: shlex.split(run(["pkg-config"] + list(args) + ["lattice"], env=env))
        libdir = run(["pkg-config", "--variable=libdir", "lattice"], env=env).strip()
        if not os.path.realpath(libdir).startswith(os.path.realpath(prefix)):
            raise Failure("pkg-config found a lattice.pc outside the prefix: libdir " + libdir)
        check_installed(prefix, pc_dir)
        check_public_flags(pkg)
        flags = pkg("--cflags", "--libs")
        shared_env = dict(env)
        shared_env["LD_LIBRARY_PATH"] = os.pathsep.join(
            p for p in (libdir, os.environ.get("LD_LIBRARY_PATH")) if p)
        c_source = os.path.join(HERE, "subproject_user", "consumer.c")

        # C, shared.
        exe = os.path.join(tmp, "consumer_c")
        run(cc + [c_source, "-o", exe] + flags, env=env)
        deps = needed(exe)
        if deps is not None and not any(d.startswith("liblattice.so") for d in deps):
            raise Failure("consumer_c does not link liblattice.so: " + " ".join(deps))
        check_losses("C (shared)", run([exe], env=shared_env))

        # C++ through lattice.hpp, shared: C++11 (lattice's own span) and C++20 (std::span).
        if cxx:
            for std in ("c++11", "c++20"):
                exe = os.path.join(tmp, "consumer_" + std.replace("+", "p"))
                run(cxx + ["-std=" + std, "-pedantic", "-Wall", "-Wextra", "-Werror",
                           os.path.join(HERE, "consumer.cpp"), "-o", exe] + flags, env=env)
                out = run([exe], env=shared_env)
                if out.count("caught: lattice: ") != 3:
                    raise Failure("C++ (%s): the provoked errors were not caught:\n%s" % (std, out))
                check_losses("C++ (%s, shared)" % std, out)
        else:
            log("C++: skipped (no C++ compiler)")

        # C, static: liblattice.a with the dependencies pkg-config --static lists
        # (the system libraries stay shared; liblattice.so sits beside the .a,
        # so -Bstatic picks the archive).
        static_libs = []
        for arg in pkg("--static", "--libs"):
            static_libs += ["-Wl,-Bstatic", arg, "-Wl,-Bdynamic"] if arg == "-llattice" else [arg]
        exe = os.path.join(tmp, "consumer_static")
        run(cc + [c_source, "-o", exe] + pkg("--cflags") + static_libs, env=env)
        deps = needed(exe)
        if deps is not None and any(d.startswith("liblattice") for d in deps):
            raise Failure("consumer_static still needs " + " ".join(deps))
        check_losses("C (static)", run([exe], env=env))

        # README.md's program, built with README.md's command (cc is the configured compiler).
        program, command = readme_snippets(source_dir)
        readme_dir = os.path.join(tmp, "readme")
        os.mkdir(readme_dir)
        with open(os.path.join(readme_dir, "prog.c"), "w", encoding="utf-8") as f:
            f.write(program)
        readme_env = dict(env)
        readme_env["LATTICE_CC"] = " ".join(shlex.quote(c) for c in cc)
        run('cc() { eval "command $LATTICE_CC" \'"$@"\'; }\nset -e\n' + command, cwd=readme_dir,
            env=readme_env, shell=True)
        check_losses("README.md", run([os.path.join(readme_dir, "prog")], env=shared_env))

        dist_consumer(build_dir, tmp, prefix, pc_dir, env, shared_env, cc)

        if CMAKE:
            cmake_consumer(tmp, prefix, env)
            cmake_mpi_consumer(build_dir, tmp, prefix, env)
        else:
            log("CMake: skipped (no cmake)")

        # A meson project with liblattice as a subproject.
        user = os.path.join(tmp, "subproject_user")
        shutil.copytree(os.path.join(HERE, "subproject_user"), user)
        os.mkdir(os.path.join(user, "subprojects"))
        os.symlink(source_dir, os.path.join(user, "subprojects", "lattice"))
        user_build = os.path.join(tmp, "build-subproject")
        run(MESON + ["setup", user_build, user, "--force-fallback-for=lattice"] +
            ["-Dlattice:" + o[2:] for o in build_options(build_dir)])
        run(NINJA + ["-C", user_build, "-j", JOBS])
        check_losses("meson subproject", run([os.path.join(user_build, "consumer")]))
    except Failure as e:
        print("FAIL: %s" % e)
        return 1
    finally:
        if os.environ.get("LATTICE_CONSUMER_KEEP") == "1":
            log("kept " + tmp)
        else:
            shutil.rmtree(tmp, ignore_errors=True)
    log("all consumers built and ran")
    return 0


if __name__ == "__main__":
    sys.exit(main())
