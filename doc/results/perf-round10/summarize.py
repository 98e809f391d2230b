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
