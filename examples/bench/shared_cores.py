#!/usr/bin/python3
"""shared_cores: two training programs on the same cores, for every backend.

For each backend, bench_step runs alone, then twice at once (both started
together), with the same shape, steps and threads. It prints each run's
tokens/s and, for the pair, each one's tokens/s as a fraction of its time
alone. Rounds alternate alone and paired runs (A B A B ...); the figures are
medians over rounds.

Two programs that share the cores must each get a fair part of them: a
backend whose threads spin without bound while a thread they wait for cannot
run makes the pair crawl or stall. --check turns this into a hang detector
(the test suite runs it): every paired run must finish within FACTOR times
its time alone (plus a few seconds of slack), or the script fails. It is not
a speed test: FACTOR is generous.

--cpus runs every process under `taskset -c LIST` (e.g. --cpus 0: one core
for two programs of two threads each).

Standard library only. Exit status: 0; 1 when a run fails or a pair does not
finish in time (--check); 2 for a bad command line.
"""

import argparse
import os
import re
import shutil
import statistics
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_shape  # noqa: E402  (after the path it lives on)

DEFAULT_LATTICE = os.path.join("build", "examples", "bench_step")
BACKENDS = ("ref", "blis", "openblas", "onednn", "default")


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="shared_cores",
        description="Run bench_step alone and two at once, for every backend, and report "
                    "each paired run's tokens/s as a fraction of alone.")
    parser.add_argument("--lattice", default=DEFAULT_LATTICE, metavar="PATH",
                        help="bench_step binary (default %(default)s)")
    parser.add_argument("--backends", default=",".join(BACKENDS), metavar="LIST",
                        help="comma-separated backends (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, metavar="N",
                        help="threads per program (default %(default)s)")
    parser.add_argument("--steps", type=int, default=30, metavar="N",
                        help="timed steps per run, after 2 warmup steps (default %(default)s)")
    parser.add_argument("--rounds", type=int, default=3, metavar="R",
                        help="rounds of (alone, pair) per backend (default %(default)s)")
    parser.add_argument("--cpus", metavar="LIST",
                        help="run every process under taskset -c LIST")
    parser.add_argument("--check", type=float, metavar="FACTOR",
                        help="fail when a paired run takes more than FACTOR x its time alone "
                             "(+ --slack seconds); a hang detector, not a speed test")
    parser.add_argument("--slack", type=float, default=10.0, metavar="S",
                        help="seconds added to the --check bound (default %(default)s)")
    bench_shape.add_shape_arguments(parser)
    args = parser.parse_args(argv)
    for name in ("threads", "steps", "rounds"):
        if getattr(args, name) < 1:
            parser.error("--%s must be positive" % name)
    if args.check is not None and args.check < 1:
        parser.error("--check must be at least 1")
    args.backend_list = [b for b in args.backends.split(",") if b]
    for b in args.backend_list:
        if b not in BACKENDS:
            parser.error("unknown backend '%s' (one of %s)" % (b, ", ".join(BACKENDS)))
    try:
        args.shape = bench_shape.resolve_shape(args)
    except ValueError as err:
        parser.error(str(err))
    if args.cpus and not shutil.which("taskset"):
        parser.error("--cpus needs taskset (util-linux)")
    return args


def command(args, backend):
    argv = [args.lattice, "--backend", backend, "--threads", str(args.threads),
            "--steps", str(args.steps), "--no-sgemm", "--no-profile"]
    argv += bench_shape.shape_argv(args.shape)
    if args.cpus:
        argv = ["taskset", "-c", args.cpus] + argv
    return argv


def parse_output(text):
    values, comments = {}, []
    for line in text.splitlines():
        if line.startswith("#"):
            comments.append(line)
            continue
        m = re.match(r"^(\S+) (\S+)$", line)
        if m:
            values[m.group(1)] = m.group(2)
    return values, comments


class Run:
    """One bench_step process: started now, waited for with a deadline."""

    def __init__(self, argv):
        self.start = time.monotonic()
        self.proc = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                     text=True)

    def wait(self, deadline):
        """(seconds, values, comments, error); error is None when it ran."""
        try:
            left = None if deadline is None else max(0.1, deadline - time.monotonic())
            out, err = self.proc.communicate(timeout=left)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.communicate()
            return time.monotonic() - self.start, {}, [], "did not finish in time"
        secs = time.monotonic() - self.start
        if self.proc.returncode != 0:
            return secs, {}, [], "exit status %d: %s" % (self.proc.returncode,
                                                          err.strip()[-300:])
        values, comments = parse_output(out)
        if "tokens_per_s" not in values:
            return secs, values, comments, "no tokens_per_s line"
        return secs, values, comments, None


def run_alone(args, backend):
    return Run(command(args, backend)).wait(None)


def run_pair(args, backend, alone_secs):
    deadline = None
    if args.check is not None:
        deadline = time.monotonic() + args.check * alone_secs + args.slack
    runs = [Run(command(args, backend)), Run(command(args, backend))]
    return [r.wait(deadline) for r in runs]


def kernels_of(comments):
    for line in comments:
        if line.startswith("# kernels:"):
            return line[len("# kernels:"):].strip()
    return "?"


def main(argv):
    args = parse_args(argv)
    if not os.access(args.lattice, os.X_OK):
        print("shared_cores: %s is not an executable (build first)" % args.lattice,
              file=sys.stderr)
        return 1
    print("# shared_cores: %d threads per program, %d steps, %s%s"
          % (args.threads, args.steps, " ".join(bench_shape.shape_argv(args.shape)),
             ", taskset -c " + args.cpus if args.cpus else ""))
    print("# %-9s %12s %12s %12s %9s %9s" % ("backend", "alone tok/s", "pair A tok/s",
                                              "pair B tok/s", "A/alone", "B/alone"))
    failures = []
    for backend in args.backend_list:
        alone, pair_a, pair_b, kernels = [], [], [], "?"
        for _ in range(args.rounds):
            secs, values, comments, error = run_alone(args, backend)
            if error:
                if "not available" in error:
                    print("# %-9s skipped: not available in this build" % backend)
                    break
                failures.append("%s alone: %s" % (backend, error))
                break
            kernels = kernels_of(comments)
            alone.append(float(values["tokens_per_s"]))
            results = run_pair(args, backend, secs)
            errors = [r[3] for r in results if r[3]]
            if errors:
                failures.append("%s pair (alone %.1f s; pair %.1f s, %.1f s): %s"
                                % (backend, secs, results[0][0], results[1][0],
                                   "; ".join(errors)))
                break
            pair_a.append(float(results[0][1]["tokens_per_s"]))
            pair_b.append(float(results[1][1]["tokens_per_s"]))
        if not alone or not pair_a:
            continue
        med = statistics.median(alone)
        a, b = statistics.median(pair_a), statistics.median(pair_b)
        print("%-11s %12.0f %12.0f %12.0f %9.2f %9.2f" % (backend, med, a, b, a / med, b / med))
        print("#   kernels: %s" % kernels)
    for f in failures:
        print("shared_cores: FAIL %s" % f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
