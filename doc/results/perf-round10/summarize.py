"""The figures doc/PERFORMANCE.md's round 10 derives from this folder's logs:
the estimate's error against the seed's wall time, and each run's share of
evaluations and diagnostics. Run: python3 summarize.py > summary.txt"""
import re

est = open("whole_seed_estimate.log").read()
run = open("whole_seed_run.log").read()
m = re.search(r"estimated wall time (\d+):(\d+)(?::(\d+))? for", est)
parts = [int(x) for x in m.groups() if x is not None]
est_s = parts[0] * 60 + parts[1] if len(parts) == 2 else parts[0] * 3600 + parts[1] * 60 + parts[2]
wall = float(re.search(r"wall seconds of the seed .*: ([0-9.]+)", run).group(1))
print(f"estimate {est_s} s, measured {wall} s, error {100 * (est_s - wall) / wall:+.1f}%")
for line in run.splitlines():
    p = re.search(r"profile (.*?): ([0-9.]+) s: .*evaluations ([0-9.]+)%, diagnostics at evaluations ([0-9.]+)%", line)
    if p:
        print(f"{p.group(1)}: evaluations and diagnostics {float(p.group(3)) + float(p.group(4)):.1f}%")

# bench_step_bf16.txt (bf16 through dnnl_gemm_bf16bf16f32) and
# bench_step_bf16_matmul.txt (through the matmul primitive): the step in fp32
# and bf16, alternating rounds
import os
import statistics
for name in ("bench_step_bf16.txt", "bench_step_bf16_matmul.txt"):
    if not os.path.exists(name):
        continue
    cur, steps, gemm = None, {}, {}
    for line in open(name):
        m = re.match(r"## round (\d+) gemm_precision (\w+)", line)
        if m:
            cur = m.group(2)
            continue
        m = re.match(r"(step_ms|op_gemm_\w+_ms) ([0-9.]+)", line)
        if m and cur:
            if m.group(1) == "step_ms":
                steps.setdefault(cur, []).append(float(m.group(2)))
            else:
                gemm.setdefault(cur, []).append(float(m.group(2)))
    for x in steps:
        print(f"{name} {x}: step_ms {steps[x]}, median {statistics.median(steps[x]):.1f}; "
              f"GEMMs per step (sum of op_gemm_*_ms, mean over rounds) "
              f"{sum(gemm[x]) / len(steps[x]):.1f} ms")
    r = [b / a for a, b in zip(steps["fp32"], steps["bf16"])]
    print(f"{name} bf16/fp32 by round: " + ", ".join(f"{x:.3f}" for x in r) +
          f"; median {statistics.median(r):.3f}")

# study_seed.txt: bf16's seed time over fp32's, round by round (round 1's fp32 also made the file)
for line in open("study_seed.txt"):
    m = re.match(r"round (\d+): old ([0-9.]+) s; new fp32 ([0-9.]+) s.*new bf16 ([0-9.]+) s", line)
    if m:
        print(f"study_seed round {m.group(1)}: bf16/fp32 {float(m.group(4)) / float(m.group(3)):.3f}")
