#!/usr/bin/env python3
"""bench_step's own lines: rounds of steps alternating with the roofline
(roofline_ratio the median of the rounds' ratios, each within [min, max]),
the FMA peak and the fused attention's floor, and its refusals. A small
student so that the test is quick; what is checked is the arithmetic of the
lines and their presence, not any speed."""
import math
import statistics
import subprocess
import sys

BENCH = sys.argv[1]
SMALL = ["--preset", "study", "--layers", "2", "--batch", "2", "--seq", "40",
         "--threads", "1", "--steps", "1"]


def run(*extra):
    p = subprocess.run([BENCH, *SMALL, *extra], capture_output=True, text=True, timeout=240)
    return p.returncode, p.stdout, p.stderr


def lines(out):
    kv = {}
    for line in out.splitlines():
        if line.startswith("#") or not line.strip():
            continue
        key, _, value = line.partition(" ")
        kv[key] = value
    return kv


def check(cond, what):
    if not cond:
        print("FAIL:", what)
        sys.exit(1)


rc, out, err = run("--rounds", "3")
check(rc == 0, f"--rounds 3 exits 0 (rc {rc}, stderr {err!r})")
kv = lines(out)
ratios = [float(kv[f"round_{i}_roofline_ratio"]) for i in (1, 2, 3)]
check("round_4_roofline_ratio" not in kv, "three rounds, not four")
for i in (1, 2, 3):
    step, roof = float(kv[f"round_{i}_step_gflops"]), float(kv[f"round_{i}_roofline_gflops"])
    check(step > 0 and roof > 0, f"round {i}: rates > 0")
    check(abs(step / roof - ratios[i - 1]) <= 0.002 + 0.001 * ratios[i - 1],
          f"round {i}: ratio {ratios[i - 1]} = {step} / {roof}")
ratio = float(kv["roofline_ratio"])
check(abs(ratio - statistics.median(ratios)) <= 0.0011,
      f"roofline_ratio {ratio} is the median of {ratios}")
check(float(kv["roofline_ratio_min"]) == min(ratios), "roofline_ratio_min")
check(float(kv["roofline_ratio_max"]) == max(ratios), "roofline_ratio_max")
check(kv["roofline_library"] in ("blis", "openblas", "onednn"), "roofline_library named")

check(kv["fma_isa"] in ("avx512", "avx2", "portable"), "fma_isa named")
peak = float(kv["fma_peak_gflops"])
check(peak > 0 and math.isfinite(peak), "fma_peak_gflops > 0")
# 7 multiply-adds (14 FLOP) per causal score and head element, every head, row and layer
T, hd, heads, batch, layers = 40, 16, 4, 2, 2
want = 14 * T * (T + 1) / 2 * hd * heads * batch * layers / 1e9
check(abs(float(kv["attn_causal_gflop"]) - want) <= 0.00006,
      f"attn_causal_gflop {kv['attn_causal_gflop']} = {want:.4f}")
floor_ms = float(kv["attn_floor_ms"])


def quotient_range(num, num_half, den, den_half):
    """The least and greatest num / den where each is printed rounded (half a unit
    of its last digit either side)."""
    return (num - num_half) / (den + den_half), (num + num_half) / max(den - den_half, 1e-9)


# the peak is printed to 0.1 GFLOP/s and the floor to 0.001 ms: the printed floor lies
# within what the printed peak allows (wide where a busy machine makes the peak small)
lo, hi = quotient_range(want * 1e3, 0, peak, 0.05)
check(lo - 0.0006 <= floor_ms <= hi + 0.0006, f"attn_floor_ms {floor_ms} = FLOP over the peak")
share = float(kv["attn_floor_share"])
check(0 < share < 1, f"attn_floor_share {share} in (0, 1)")
step_ms, attn_ms = float(kv["step_ms"]), float(kv["op_attn_fused_ms"])
# the printed figures are rounded (step_ms to 0.1, op times to 0.01): the share within what they allow
lo = (floor_ms - 0.0005) / (floor_ms - 0.0005 + step_ms + 0.05 - (attn_ms - 0.005))
hi = (floor_ms + 0.0005) / (floor_ms + 0.0005 + step_ms - 0.05 - (attn_ms + 0.005))
check(lo - 0.0005 <= share <= hi + 0.0005,
      f"attn_floor_share {share} = floor / (floor + the step's other ops), in [{lo:.4f}, {hi:.4f}]")

rc, out, err = run()
check(rc == 0, "one round exits 0")
kv = lines(out)
check("roofline_ratio" in kv and "round_1_roofline_ratio" not in kv,
      "one round: roofline_ratio, no round lines")

def about_roofline(out):
    got = [l for l in out.splitlines() if l.startswith("# roofline:")]
    check(len(got) == 1, "one '# roofline:' line")
    return got[0]


# 2 threads on 2 sequences: the rows split, and the roofline split as the step
# was (each thread its sequence's GEMMs, one-thread calls, both at once), over
# the same GEMM FLOP as the 1-thread roofline; the FMA loop on both threads.
one_about = about_roofline(out)
p2 = subprocess.run([BENCH, *SMALL[:-4], "--threads", "2", "--steps", "1"],
                    capture_output=True, text=True, timeout=240)
rc, out2, err = p2.returncode, p2.stdout, p2.stderr
check(rc == 0, f"--threads 2 exits 0 (rc {rc}, stderr {err!r})")
kv2 = lines(out2)
check(kv2["parallel"] == "rows" and kv2["parallel_rows_threads"] == "2", "2 threads: rows split")
about2 = about_roofline(out2)
check("split as the step's rows: 2 threads at once" in about2,
      f"2 threads: the roofline says it is split as the step's rows ({about2!r})")
check("1 thread(s) sharing each call" in one_about, f"1 thread: the roofline says so ({one_about!r})")
gflop = lambda a: a.split("GEMMs (")[1].split(" GFLOP")[0]
calls = lambda a: int(a.split("the step's ")[1].split(" ")[0])
check(gflop(about2) == gflop(one_about), "the rows-split roofline times the step's whole GEMM FLOP")
check(calls(about2) == 2 * calls(one_about), "each of the 2 threads runs every GEMM on its rows")
all_peak, one_peak = float(kv2["fma_peak_all_threads_gflops"]), float(kv2["fma_peak_gflops"])
check(all_peak > 0 and one_peak > 0, "FMA peaks > 0")
# the peaks are printed to 0.1 GFLOP/s and the scaling to 0.01: the printed ratio
# lies within what the printed peaks allow (wide where a busy machine makes them small)
lo, hi = quotient_range(all_peak, 0.05, one_peak, 0.05)
check(lo - 0.005 <= float(kv2["fma_peak_scaling"]) <= hi + 0.005,
      "fma_peak_scaling = all threads' peak over one's")
check("fma_peak_all_threads_gflops" not in kv, "1 thread: no all-threads FMA line")
# thread 0's waits for the other and the team's own cost are parts of what no op covers
wait, fork, other = (float(kv2[k]) for k in ("rows_wait_ms", "rows_fork_ms", "op_other_ms"))
check(wait >= 0 and fork >= 0, f"rows_wait_ms {wait}, rows_fork_ms {fork} >= 0")
check(wait + fork <= other + 0.02, f"rows_wait_ms + rows_fork_ms {wait + fork} within op_other_ms {other}")
check("rows_wait_ms" not in kv, "1 thread: no rows_wait_ms")

for bad in ("0", "21", "x"):
    rc, out, err = run("--rounds", bad)
    check(rc == 2 and "rounds" in err, f"--rounds {bad} refused with exit 2 and a message")

print("ok: rounds", ratios, "median", ratio, "fma peak", peak, "attention floor share", share)
