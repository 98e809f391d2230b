#!/usr/bin/env python3
"""bench_bf16's own lines: a line per GEMM shape with the three slots' times
and the rounding of the operands alone, then the step's sums. One quick
round; what is checked is the lines' presence and arithmetic (the step's
sums are the per-shape times weighted by calls a step, the rounding is part
of the matmul slot's time, the bf16 results near fp32's), not any speed.
Skipped (77) where this CPU cannot run bf16 GEMMs."""
import re
import subprocess
import sys

BENCH = sys.argv[1]


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


p = subprocess.run([BENCH, "--preset", "study", "--rounds", "3", "--ms", "1"],
                   capture_output=True, text=True, timeout=100)
if p.returncode != 0 and "cannot run here" in p.stderr:
    print("SKIP:", p.stderr.strip())
    sys.exit(77)
check(p.returncode == 0, f"exits 0 (rc {p.returncode}, stderr {p.stderr!r})")

shape = re.compile(r"gemm (\S+)\s+([NT])([NT])\s+(\d+)x\s*(\d+)x\s*(\d+) beta\S+ x(\d+)\s+"
                   r"fp32\s+([0-9.]+) us\s+api\s+([0-9.]+) us\s+matmul\s+([0-9.]+) us\s+"
                   r"round\s+([0-9.]+) us\s+.*diff api (\S+) matmul (\S+)$")
rows = [m for m in map(shape.match, p.stdout.splitlines()) if m]
check(len(rows) == 15, f"15 GEMM shapes (the step's), got {len(rows)}:\n{p.stdout}")
sums = [0.0, 0.0, 0.0, 0.0]
for m in rows:
    calls = int(m.group(7))
    fp32, api, matmul, rnd = (float(m.group(i)) for i in (8, 9, 10, 11))
    check(min(fp32, api, matmul, rnd) > 0, f"{m.group(1)}: every time above 0")
    check(float(m.group(12)) < 1e-2 and float(m.group(13)) < 1e-2,
          f"{m.group(1)}: bf16 within 1e-2 of fp32 (relative), got {m.group(12)} {m.group(13)}")
    for i, t in enumerate((fp32, api, matmul, rnd)):
        sums[i] += t * calls / 1000.0

step = re.search(r"^step_gemms_ms fp32 ([0-9.]+) api ([0-9.]+) matmul ([0-9.]+)", p.stdout, re.M)
rnd = re.search(r"^step_round_ms ([0-9.]+)  \(of matmul's ([0-9.]+)", p.stdout, re.M)
check(step and rnd, f"the step's lines:\n{p.stdout}")
for i, name in enumerate(("fp32", "api", "matmul")):
    got = float(step.group(i + 1))
    check(abs(got - sums[i]) <= 0.01 * sums[i] + 0.02,
          f"step {name} {got} ms is the calls' sum {sums[i]:.3f}")
check(abs(float(rnd.group(1)) - sums[3]) <= 0.01 * sums[3] + 0.02,
      f"step_round_ms {rnd.group(1)} is the calls' sum {sums[3]:.3f}")
check(rnd.group(2) == step.group(3), "step_round_ms names the matmul slot's sum")
print("ok")
