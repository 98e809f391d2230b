#!/usr/bin/env python3
"""An exception on one rank ends the job (lattice.Dist's abort guard, since 0.4).

    python_raise.py MPIRUN [--no-guard]   the test: checks mpi4py, then starts itself
                                          on 2 ranks and waits at most 60 s
    python_raise.py --rank [--no-guard]   one rank's part (under mpirun)

Rank 1 raises an exception no one catches while rank 0 waits in a barrier:
without the guard rank 0 would wait there for ever and mpirun with it. The
job must end within the timeout, with a non-zero status, the traceback of
rank 1's exception and the guard's line saying why it aborted.
--no-guard runs the same with Dist(abort_on_exception=False), to see the
hang by hand (it is not part of the suite: a hung job holds the cores).
"""

import importlib.util
import os
import signal
import subprocess
import sys

TIMEOUT = 60
MESSAGE = "rank 1 fails on purpose"


def driver(mpirun, guard=True):
    # (not imported here: mpi4py.MPI would make this process an MPI singleton)
    if importlib.util.find_spec("mpi4py") is None:
        print(f"{sys.executable} has no mpi4py (apt-get install python3-mpi4py): skipped")
        return 77
    cmd = [mpirun, "--oversubscribe", "-np", "2", sys.executable, os.path.abspath(__file__),
           "--rank"] + ([] if guard else ["--no-guard"])
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           universal_newlines=True, start_new_session=True)
    try:
        out, _ = job.communicate(timeout=TIMEOUT)
    except subprocess.TimeoutExpired:
        # mpirun forwards SIGTERM to its ranks; then everything of the session goes
        os.killpg(job.pid, signal.SIGTERM)
        try:
            out, _ = job.communicate(timeout=10)
        except subprocess.TimeoutExpired:
            os.killpg(job.pid, signal.SIGKILL)
            out, _ = job.communicate()
        print(out)
        print(f"FAIL: the job still ran after {TIMEOUT} s: rank 0 waited for the rank "
              "that raised")
        return 1
    print(out)
    if job.returncode == 0:
        print("FAIL: the job whose rank 1 raised exited 0")
        return 1
    for want in (MESSAGE, "lattice.Dist: rank 1 raised an exception no one caught"):
        if want not in out:
            print(f"FAIL: the job's output lacks {want!r}")
            return 1
    if "rank 0 went on" in out:
        print("FAIL: rank 0 passed a barrier rank 1 never reached")
        return 1
    print(f"the job ended with status {job.returncode}, as it should")
    return 0


def rank_main(guard=True):
    from mpi4py import MPI
    import lattice
    comm = MPI.COMM_WORLD
    with lattice.Dist(comm, abort_on_exception=guard) as d:
        if d.rank == 1:
            raise RuntimeError(MESSAGE)
        comm.Barrier()   # rank 1 never comes
        print("rank 0 went on", flush=True)


if __name__ == "__main__":
    guard = "--no-guard" not in sys.argv
    if len(sys.argv) > 1 and sys.argv[1] == "--rank":
        rank_main(guard)
    elif len(sys.argv) > 1:
        sys.exit(driver(sys.argv[1], guard))
    else:
        sys.exit(__doc__)
