#!/usr/bin/env python3
"""A rank that dies mid-run leaves the last checkpoint whole.

usage: kill_test.py MPIRUN TEST_DIST DIR

Runs `TEST_DIST kill DIR` on 2 ranks, in which rank 1 kills itself (SIGKILL)
at step 6 while rank 0 saves that step's checkpoint; the job must fail. Then
`TEST_DIST resume DIR`, a new 2-rank job, must load the last checkpoint (of
step 4 or 6) and go on."""
import os
import subprocess
import sys

mpirun, exe, workdir = sys.argv[1:4]
os.makedirs(workdir, exist_ok=True)
ck = os.path.join(workdir, "kill.safetensors")
base = [mpirun, "--oversubscribe", "-np", "2", exe]
killed = subprocess.run(base + ["kill", workdir], capture_output=True, text=True, timeout=120)
if killed.returncode == 0:
    sys.exit("the job whose rank 1 was killed exited 0:\n" + killed.stdout + killed.stderr)
if not os.path.isfile(ck):
    sys.exit("no checkpoint survived the killed job:\n" + killed.stdout + killed.stderr)
print(f"killed job: exit status {killed.returncode}; files left: {sorted(os.listdir(workdir))}")
resumed = subprocess.run(base + ["resume", workdir], capture_output=True, text=True, timeout=120)
sys.stdout.write(resumed.stdout)
if resumed.returncode != 0:
    sys.exit("resuming from the last checkpoint failed:\n" + resumed.stderr)
left = sorted(f for f in os.listdir(workdir) if f != "kill.safetensors")
if left:
    sys.exit(f"the resumed run's save left files behind: {left}")
