#!/usr/bin/python3
"""compare: liblattice's bench_step against its PyTorch peer, interleaved in one run.

Each round runs bench_step, then torch_step.py, each as its own process with
the same shape, placement and thread count (A B A B ...), so that both sides
see the same machine state; the figure that counts is the median of the
per-round ratios lattice/torch. Standard library only.

Exit status: 0, 1 when a side fails, 2 for a bad command line, 3 when torch is
not importable, 4 when the two models differ in shape or parameter count.
"""

import argparse
import os
import re
import statistics
import subprocess
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_shape  # noqa: E402  (after the path it lives on)

TORCH_STEP = os.path.join(HERE, "torch_step.py")
ROOT = os.path.dirname(os.path.dirname(HERE))
DEFAULT_LATTICE = os.path.join("build", "examples", "bench_step")

EXIT_FAIL, EXIT_USAGE, EXIT_NO_TORCH, EXIT_MISMATCH = 1, 2, 3, 4


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="compare",
        description="Run liblattice's bench_step and the PyTorch peer interleaved "
                    "(A B A B ...) and compare their tokens/s.")
    parser.add_argument("--lattice", default=DEFAULT_LATTICE, metavar="PATH",
                        help="bench_step binary (default %(default)s, from the repository root)")
    parser.add_argument("--loss", choices=("distill", "ce"), default="distill",
                        help="the step's loss on both sides (default %(default)s)")
    parser.add_argument("--backend", default="default",
                        help="bench_step's backend (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, metavar="N",
                        help="threads for both sides (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=5, metavar="R",
                        help="rounds of one run of each side (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10, metavar="N",
                        help="timed steps per run, after 2 warmup steps (default %(default)s)")
    parser.add_argument("--placement", choices=bench_shape.PLACEMENTS, default="pre",
                        help="normalization placement (default %(default)s)")
    bench_shape.add_shape_arguments(parser)
    parser.add_argument("--torch-env", action="append", default=[], metavar="KEY=VAL",
                        help="environment for the torch side only (repeatable), "
                             "e.g. OPENBLAS_CORETYPE=SkylakeX; by default OPENBLAS_CORETYPE "
                             "is set to the best core for this CPU (as liblattice chooses it)")
    parser.add_argument("--python", default=sys.executable, metavar="PATH",
                        help="interpreter for the torch side (default %(default)s)")
    args = parser.parse_args(argv)
    for name in ("threads", "rounds", "steps"):
        if getattr(args, name) < 1:
            parser.error("--%s must be positive" % name)
    try:
        args.shape = bench_shape.resolve_shape(args)
    except ValueError as err:
        parser.error(str(err))
    args.torch_env_pairs = {}
    for item in args.torch_env:
        key, sep, value = item.partition("=")
        if not sep or not key:
            parser.error("--torch-env wants KEY=VAL, not '%s'" % item)
        args.torch_env_pairs[key] = value
    return args


def cpu_description():
    """Vendor, family, model, stepping and name of the first CPU in /proc/cpuinfo."""
    fields = {}
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if not line.strip():
                    break  # the first processor's block is enough
                key, _, value = line.partition(":")
                fields[key.strip()] = value.strip()
    except OSError as err:
        return "unknown (%s)" % err
    return "%s family %s model %s stepping %s, %s; %d logical CPUs" % (
        fields.get("vendor_id", "?"), fields.get("cpu family", "?"), fields.get("model", "?"),
        fields.get("stepping", "?"), fields.get("model name", "?"), os.cpu_count() or 0)


def cpu_flags():
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        pass
    return set()


# OpenBLAS cores without AVX2 kernels: what DYNAMIC_ARCH falls back to on a CPU
# it does not recognise (0.3.21 on family 6 model 207 picks Prescott).
OLD_OPENBLAS_CORES = ("Prescott", "Nehalem", "Core2", "Penryn", "Dunnington", "Atom",
                      "Katmai", "Coppermine", "Northwood", "Banias", "Sandybridge")


def blas_fallback_warning(comments):
    """A warning when the torch side's OpenBLAS runs kernels older than the CPU."""
    for line in comments:
        found = re.search(r"core (\w+)", line)
        if found and found.group(1) in OLD_OPENBLAS_CORES and "avx2" in cpu_flags():
            return ("# WARNING: the torch side's OpenBLAS runs its %s kernels on a CPU with "
                    "AVX2%s: it did not recognise the CPU. Its GEMMs are slower than they "
                    "could be; for a fair figure also run with --torch-env "
                    "OPENBLAS_CORETYPE=SkylakeX (or Cooperlake, Haswell); by default this script sets it."
                    % (found.group(1), "/AVX-512" if "avx512f" in cpu_flags() else ""))
    return None


def best_openblas_core():
    """The OpenBLAS core this CPU's features support, chosen as liblattice's
    OpenBLAS backend chooses it, so the torch side runs kernels as good as ours."""
    flags = cpu_flags()
    if {"avx512f", "avx512bw", "avx512vl", "avx512dq"} <= flags:
        return "Cooperlake" if "avx512_bf16" in flags or "amx_tile" in flags else "SkylakeX"
    if {"avx2", "fma"} <= flags:
        return "Haswell"
    return None


def load_average():
    try:
        return " ".join("%.2f" % v for v in os.getloadavg())
    except OSError:
        return "?"


def lattice_options(path):
    """The long options bench_step's --help lists."""
    try:
        done = subprocess.run([path, "--help"], capture_output=True, text=True, timeout=60)
    except OSError as err:
        sys.exit("compare: cannot run bench_step '%s': %s\n(build it: meson setup build && "
                 "ninja -C build)" % (path, err.strerror))
    return set(re.findall(r"(--[a-z][a-z0-9-]*)", done.stdout + done.stderr))


def lattice_shape_argv(shape, supported):
    """Shape options for bench_step. One that this bench_step lacks is left out
    when the wanted value is its built-in one; otherwise the run cannot compare."""
    builtin = bench_shape.PRESETS["d256"]
    missing = [(option, key) for option, key in bench_shape.SHAPE_OPTIONS
               if option not in supported]
    wrong = ["%s %d (it runs %d)" % (option, shape[key], builtin[key])
             for option, key in missing if shape[key] != builtin[key]]
    if wrong:
        sys.exit("compare: this bench_step has no %s; it cannot run %s.\n"
                 "Use a bench_step with the shape options, or the d256 shape."
                 % (", ".join(o for o, _ in missing), ", ".join(wrong)))
    return bench_shape.shape_argv(shape, only=supported), [o for o, _ in missing]


def check_torch(python, env):
    done = subprocess.run([python, "-c", "import torch; print(torch.__version__)"],
                          capture_output=True, text=True, env=env)
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["no message"])[-1]
        print("compare: PyTorch is not importable by %s (%s).\n"
              "The comparison needs it on the torch side only: on Debian, apt install "
              "python3-torch and run with /usr/bin/python3." % (python, last), file=sys.stderr)
        sys.exit(EXIT_NO_TORCH)


def run_side(name, argv, env):
    """Run one side; (comment lines, {key: value})."""
    try:
        done = subprocess.run(argv, capture_output=True, text=True, env=env)
    except OSError as err:
        print("compare: %s: cannot run %s: %s" % (name, argv[0], err.strerror), file=sys.stderr)
        sys.exit(EXIT_FAIL)
    if done.returncode != 0:
        print("compare: %s failed (exit %d): %s\n%s" % (name, done.returncode, " ".join(argv),
                                                        done.stderr.strip()), file=sys.stderr)
        sys.exit(EXIT_FAIL)
    comments, values = [], {}
    for line in done.stdout.splitlines():
        if line.startswith("#"):
            comments.append(line)
            continue
        parts = line.split()
        if len(parts) == 2:
            try:
                values[parts[0]] = float(parts[1])
            except ValueError:
                pass
    if "tokens_per_s" not in values:
        print("compare: %s printed no tokens_per_s line:\n%s" % (name, done.stdout),
              file=sys.stderr)
        sys.exit(EXIT_FAIL)
    return comments, values


def model_of(comments):
    for line in comments:
        parsed = bench_shape.parse_model_line(line)
        if parsed:
            return parsed
    return None


def check_same_model(shape, lattice_comments, torch_comments, torch_values, lattice_values):
    """Problems that make the two runs incomparable, as lines of text."""
    problems = []
    lat, tor = model_of(lattice_comments), model_of(torch_comments)
    if lat is None or tor is None:
        return ["a side printed no '# model:' line: the shapes cannot be checked"]
    wanted = {k: v for k, v in shape.items() if k != "qk_norm"}
    for side, (got, _) in (("lattice", lat), ("torch", tor)):
        diff = ["%s %d (wanted %d)" % (k, got[k], wanted[k]) for k in wanted if got[k] != wanted[k]]
        if diff:
            problems.append("%s ran another shape: %s" % (side, ", ".join(diff)))
    if lat[1] != tor[1]:
        problems.append("parameter counts differ: lattice %.2fM, torch %.2fM" % (lat[1], tor[1]))
    if "n_params" in lattice_values and "n_params" in torch_values \
            and lattice_values["n_params"] != torch_values["n_params"]:
        problems.append("parameter counts differ: lattice %d, torch %d"
                        % (lattice_values["n_params"], torch_values["n_params"]))
    return problems


def shout(problems):
    bar = "!" * 72
    text = "\n".join([bar, "WARNING: THE TWO SIDES DO NOT RUN THE SAME MODEL"] +
                     ["  " + p for p in problems] + [bar])
    print(text, file=sys.stderr)
    print("\n".join("# " + line for line in text.splitlines()))


def main(argv):
    args = parse_args(argv)
    shape = args.shape
    lattice = args.lattice if os.path.isabs(args.lattice) else os.path.join(ROOT, args.lattice)
    if not os.access(lattice, os.X_OK):
        sys.exit("compare: no bench_step at %s (build it: meson setup build && ninja -C build, "
                 "or pass --lattice PATH)" % lattice)

    common = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMP_NUM_THREADS=str(args.threads))
    lattice_env = dict(common)
    # Fair by default: unless told otherwise, the torch side's OpenBLAS runs the
    # best kernels for this CPU (Debian's 0.3.21 falls back to SSE3 kernels on
    # CPUs newer than itself).
    if "OPENBLAS_CORETYPE" not in args.torch_env_pairs and "OPENBLAS_CORETYPE" not in os.environ:
        core = best_openblas_core()
        if core:
            args.torch_env_pairs["OPENBLAS_CORETYPE"] = core
    torch_env = dict(common, **args.torch_env_pairs)
    check_torch(args.python, torch_env)

    shape_argv, left_out = lattice_shape_argv(shape, lattice_options(lattice))
    lattice_argv = [lattice, "--backend", args.backend, "--threads", str(args.threads),
                    "--steps", str(args.steps), "--placement", args.placement,
                    "--loss", args.loss, "--no-sgemm"] + shape_argv
    torch_argv = [args.python, TORCH_STEP, "--threads", str(args.threads),
                  "--steps", str(args.steps), "--placement", args.placement,
                  "--loss", args.loss] + \
        bench_shape.shape_argv(shape)

    print("# compare: liblattice bench_step vs PyTorch peer, interleaved, %d rounds" % args.rounds)
    print("# cpu: %s" % cpu_description())
    print("# threads %d, steps %d, %s-norm, qk-norm %d, OMP_WAIT_POLICY=PASSIVE%s"
          % (args.threads, args.steps, args.placement, shape["qk_norm"],
             "".join(", torch %s=%s" % kv for kv in args.torch_env_pairs.items())))
    if left_out:
        print("# this bench_step has no %s: it runs its built-in values, which match"
              % " ".join(left_out))
    print("# load average at start: %s" % load_average())
    print("# lattice: %s" % " ".join(lattice_argv))
    print("# torch:   %s" % " ".join(torch_argv))
    sys.stdout.flush()

    seen = {"lattice": [], "torch": []}
    rounds = []
    problems = None
    for r in range(1, args.rounds + 1):
        results = {}
        for side, side_argv, env in (("lattice", lattice_argv, lattice_env),
                                     ("torch", torch_argv, torch_env)):
            comments, values = run_side(side, side_argv, env)
            new = [c for c in comments if c not in seen[side]]
            for line in new:  # each side's header, and any line that changes later
                print("[%s] %s" % (side, line))
            seen[side] += new
            results[side] = (comments, values)
        if problems is None:
            warning = blas_fallback_warning(results["torch"][0])
            if warning:
                print(warning)
            problems = check_same_model(shape, results["lattice"][0], results["torch"][0],
                                        results["torch"][1], results["lattice"][1])
            if problems:
                shout(problems)
        lat, tor = results["lattice"][1], results["torch"][1]
        ratio = lat["tokens_per_s"] / tor["tokens_per_s"]
        rounds.append((lat["tokens_per_s"], tor["tokens_per_s"], ratio))
        print("round %d: lattice %.0f tok/s (step %.1f ms, loss %.4f)  torch %.0f tok/s "
              "(step %.1f ms, loss %.4f)  ratio %.3f"
              % (r, lat["tokens_per_s"], lat.get("step_ms", float("nan")),
                 lat.get("loss_first", float("nan")), tor["tokens_per_s"],
                 tor.get("step_ms", float("nan")), tor.get("loss_first", float("nan")), ratio))
        sys.stdout.flush()

    print("# load average at end: %s" % load_average())
    print("# tokens/s over %d rounds: min median max" % args.rounds)
    for i, side in enumerate(("lattice", "torch")):
        column = [row[i] for row in rounds]
        print("%s_tokens_per_s %.0f %.0f %.0f"
              % (side, min(column), statistics.median(column), max(column)))
    ratios = [row[2] for row in rounds]
    print("# lattice/torch, the median of the per-round ratios (min %.3f, max %.3f)"
          % (min(ratios), max(ratios)))
    print("ratio_median %.3f" % statistics.median(ratios))
    if problems:
        shout(problems)
        return EXIT_MISMATCH
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
