#!/usr/bin/env python3
"""The examples honour LATTICE_BACKEND and name the backend they chose first.

1.0's library reads no environment variable (doc/CHANGES.md, 1.0): a job that
pinned LATTICE_BACKEND=ref gets it only from a program that maps the
variable, as the examples and the Python package do. Each example, run with
LATTICE_BACKEND=ref, must say "backend ref (from LATTICE_BACKEND)" in its
first line of output; with LATTICE_BACKEND=nope it must fail naming the
variable, not run on another backend.

    check_example_backend.py BUILD_EXAMPLES_DIR PYTHON EXAMPLES_PYTHON_DIR

The Python example (distill_study.py) runs until its first line and is
stopped there; bench_dist is skipped where it was not built (no MPI).
"""
import os
import subprocess
import sys
import tempfile

examples, python, py_examples = sys.argv[1:4]
WANT = "backend ref (from LATTICE_BACKEND)"
failures = []


def env_with(backend):
    env = dict(os.environ, OMP_WAIT_POLICY="PASSIVE", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    env.pop("LATTICE_BACKEND", None)
    if backend:
        env["LATTICE_BACKEND"] = backend
    return env


def first_line(argv, backend):
    """The first line the program writes (stdout and stderr together), then stop it."""
    with subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                          env=env_with(backend), text=True) as p:
        try:
            line = p.stdout.readline().rstrip("\n")
        finally:
            p.kill()
        p.wait()
    return line


def run(argv, backend):
    r = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                       env=env_with(backend), text=True, timeout=300)
    return r.returncode, r.stdout


with tempfile.TemporaryDirectory() as tmp:
    corpus = os.path.join(tmp, "corpus.txt")
    with open(corpus, "w") as f:
        f.write("It is a truth universally acknowledged, that a single man. " * 200)
    tiny_step = ["--layers", "1", "--d-model", "16", "--heads", "2", "--kv-heads", "2",
                 "--head-dim", "8", "--d-ff", "32", "--vocab", "32", "--batch", "2", "--seq",
                 "8", "--threads", "1"]
    programs = {
        "train_text": [os.path.join(examples, "train_text"), "--steps", "2", "--warmup", "0",
                       "--layers", "1", "--d-model", "16", "--heads", "2", "--seq", "16",
                       "--batch", "2", "--threads", "1", "--val-fraction", "0", corpus],
        "bench_step": [os.path.join(examples, "bench_step")] + tiny_step +
                      ["--steps", "1", "--no-sgemm"],
        "bench_gemm": [os.path.join(examples, "bench_gemm"), "--rounds", "1", "--gflop", "0.0005",
                       "--batch", "1", "--seq", "8"],
        "bench_dist": [os.path.join(examples, "bench_dist"), "--preset", "study", "--steps", "1",
                       "--batch", "1"],
    }
    for name, argv in programs.items():
        if not os.path.exists(argv[0]):
            print(f"{name}: not built, skipped")
            continue
        rc, out = run(argv, "ref")
        line = out.split("\n", 1)[0]
        if rc != 0:
            failures.append(f"{name} with LATTICE_BACKEND=ref: exit {rc}: {out[-400:]}")
        elif WANT not in line:
            failures.append(f"{name}: the first line does not name {WANT!r}: {line!r}")
        else:
            print(f"{name}: {line}")
        rc, out = run(argv, "nope")
        if rc == 0 or "LATTICE_BACKEND=nope" not in out:
            failures.append(f"{name} with LATTICE_BACKEND=nope: exit {rc}, the variable not "
                            f"named: {out[-400:]!r}")

    study = os.path.join(py_examples, "distill_study.py")
    line = first_line([python, study], "ref")
    if WANT not in line:
        failures.append(f"distill_study.py: the first line does not name {WANT!r}: {line!r}")
    else:
        print(f"distill_study.py: {line}")
    rc, out = run([python, study], "nope")   # fails at once, creating the backend
    if rc == 0 or "from LATTICE_BACKEND" not in out:
        failures.append(f"distill_study.py with LATTICE_BACKEND=nope: exit {rc}: {out[-400:]!r}")

for f in failures:
    print("FAIL:", f)
sys.exit(1 if failures else 0)
