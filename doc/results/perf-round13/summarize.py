"""The figures doc/PERFORMANCE.md's round 13 derives from this folder's
outputs (and round 11's seed ratios). Run here: python3 summarize.py > summary.txt"""
import re
import statistics

# The step, fp32 and bf16 alternating: medians over the rounds per op.
ops, cur = {}, None
for line in open("bench_step.txt"):
    if line.startswith("=="):
        cur = line.split()[-1]
        continue
    m = re.match(r"(step_ms|op_(\w+)_ms) ([0-9.]+)$", line.strip())
    if m:
        ops.setdefault(cur, {}).setdefault(m.group(2) or "step", []).append(float(m.group(3)))
med = {p: {k: statistics.median(v) for k, v in d.items()} for p, d in ops.items()}
for p in ("fp32", "bf16"):
    d = med[p]
    gemm = sum(v for k, v in d.items() if k.startswith("gemm"))
    print(f"step {p}: {d['step']:.1f} ms (median of {len(ops[p]['step'])}), GEMMs {gemm:.2f} ms,"
          f" the rest {d['step'] - gemm:.2f} ms: attention {d['attn_fused']:.2f}, elementwise"
          f" {d['elementwise']:.2f}, RoPE {d['rope']:.2f}, norms {d['norm']:.2f}, optimizer"
          f" {d['optim']:.2f}, other {d['other']:.2f}")
print(f"step bf16/fp32: {med['bf16']['step'] / med['fp32']['step']:.3f}")

# bench_bf16: the GEMMs' arithmetic and the rounding's share of the bf16 slot.
flop = 0.0
for line in open("bench_bf16.txt"):
    m = re.match(r"gemm \S+\s+\S\S\s+(\d+)x\s*(\d+)x\s*(\d+) beta\S+ x(\d+)", line)
    if m:
        mm, n, k, per = (int(x) for x in m.groups())
        flop += 2.0 * mm * n * k * per
    s = re.match(r"step_gemms_ms fp32 ([0-9.]+) api ([0-9.]+) matmul ([0-9.]+)", line)
    if s:
        fp32, matmul = float(s.group(1)), float(s.group(3))
    r = re.match(r"step_round_ms ([0-9.]+)", line)
    if r:
        rounding = float(r.group(1))
print(f"a step's GEMMs: {flop / 1e9:.2f} GFLOP; fp32 {fp32:.2f} ms ({flop / fp32 / 1e6:.0f} GFLOP/s);"
      f" bf16 matmul {matmul:.2f} ms, of which rounding the operands {rounding:.2f} ms"
      f" ({100 * rounding / matmul:.0f}%), the primitive {matmul - rounding:.2f} ms"
      f" ({flop / (matmul - rounding) / 1e6:.0f} GFLOP/s)")

# Issue 52's goals against round 11's seed ratios, if a seed's time scales
# with its step (the step is 92% of a seed: round 10's profile).
r11 = open("../perf-round11/study_seed.txt").read()
ratio = {p: float(re.search(p + r": median new/old, rounds 2-3 \(the logits file made\): ([0-9.]+)",
                            r11).group(1)) for p in ("fp32", "bf16")}
fp = med["fp32"]
rest = fp["step"] - sum(v for k, v in fp.items() if k.startswith("gemm"))
for p, goal in (("fp32", 0.6), ("bf16", 0.5)):
    need = goal / ratio["fp32"]
    step = need * fp["step"]
    print(f"goal {goal} ({p}): today's fp32 seed is {ratio['fp32']:.3f} of the old one, so the step must"
          f" fall to {need:.3f} of today's fp32 step, {step:.1f} ms; the ops that are not GEMMs"
          f" take {rest:.2f} ms of it in both precisions, leaving {step - rest:.1f} ms for the GEMMs"
          f" (today fp32 {fp32:.2f}, bf16 {matmul:.2f} in bench_bf16)")

# The same host class's FMA peak on one thread (round 8, fma_peak_gflops in
# every 1-thread run): the fp32 GEMMs at that peak, and what it leaves the rest.
import glob
peaks = []
for name in glob.glob("../perf-round8/full/*_t1_*.txt"):
    m = re.search(r"^fma_peak_gflops ([0-9.]+)$", open(name).read(), re.M)
    if m:
        peaks.append(float(m.group(1)))
top = max(peaks)
at_peak = flop / top / 1e6
step = 0.6 / ratio["fp32"] * fp["step"]
print(f"FMA peak, 1 thread, round 8: {min(peaks):.1f} to {top:.1f} GFLOP/s over {len(peaks)} runs; the fp32"
      f" GEMMs at {top:.1f} would take {at_peak:.1f} ms, leaving the other ops {step - at_peak:.1f} ms of"
      f" the {step:.1f} (today {rest:.2f}: {100 * (1 - (step - at_peak) / rest):.0f}% less)")
