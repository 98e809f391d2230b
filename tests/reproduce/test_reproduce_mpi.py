"""The study spread over MPI ranks: a tiny study run once as a single process
and once under `mpirun -np 2` gives the same numbers in results.json (timings
aside) and the same curves.csv; the stop-early flags run on rank 0 alone; an
error on a rank other than 0, or options there that would stop it before it
asks for runs, ends the whole job with a non-zero status and its message,
without hanging.

usage: test_reproduce_mpi.py REPRODUCE_BINARY MPIRUN_OR_EMPTY mpi|nompi
Exits 77 (skipped) when reproduce was built without MPI or mpirun is missing.
"""
import csv
import json
import os
import signal
import subprocess
import sys
import tempfile
import unittest

from tiny_study import tiny_study, without_timings

BIN = MPIRUN = None
TIMEOUT = 120  # a hang fails the test instead of stalling the suite


def tiny_study_over_ranks(d):
    """Three arms of different lengths (the longest is handed out first), two seeds."""
    return tiny_study(
        d, "tiny-mpi", 80,
        {"steps_per_phase": 40, "warmup": 2, "eval_every": 10, "eval_batches": 2,
         "final_eval_batches": 2},
        ["pre-joint", "post-grow",
         {"name": "post-long", "placement": "post",
          "phases": [{"steps": 40, "active_layers": 1},
                     {"steps": 40, "active_layers": 2},
                     {"steps": 40, "active_layers": 2, "rewind_data": 1}]}])


def run(args, ranks=0, env_extra=None, rank1_args=None, timeout=TIMEOUT):
    """reproduce alone (ranks 0) or under mpirun; a hang is killed and fails the test.
    With rank1_args, two ranks with different arguments (mpirun's MPMD form):
    rank 0 gets args, rank 1 args and rank1_args."""
    cmd = [BIN, *args]
    if rank1_args is not None:
        cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", "1", *cmd,
               ":", "-np", "1", BIN, *args, *rank1_args]
    elif ranks:
        cmd = [MPIRUN, "--oversubscribe", "--bind-to", "none", "-np", str(ranks), *cmd]
    env = dict(os.environ, **(env_extra or {}))
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                         start_new_session=True)
    try:
        out, err = p.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.communicate()
        raise AssertionError("hung: %s did not end within %d s" % (" ".join(cmd), timeout))
    return subprocess.CompletedProcess(cmd, p.returncode, out, err)


class OverRanks(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.tmp = tempfile.TemporaryDirectory()
        cls.preset = tiny_study_over_ranks(cls.tmp.name)

    @classmethod
    def tearDownClass(cls):
        cls.tmp.cleanup()

    def test_same_numbers_as_one_process(self):
        one, two = os.path.join(self.tmp.name, "one"), os.path.join(self.tmp.name, "two")
        r1 = run(["--preset", self.preset, "--out", one])
        self.assertEqual(r1.returncode, 0, r1.stderr)
        self.assertNotIn("[rank", r1.stderr)  # one process: messages as ever
        r2 = run(["--preset", self.preset, "--out", two], ranks=2)
        self.assertEqual(r2.returncode, 0, r2.stderr)
        with open(os.path.join(one, "results.json")) as f:
            res1 = json.load(f)
        with open(os.path.join(two, "results.json")) as f:
            res2 = json.load(f)
        self.assertEqual(sorted(res2["arms"]), ["post-grow", "post-long", "pre-joint"])
        self.assertEqual([len(v) for v in res2["arms"].values()], [2, 2, 2])
        self.assertEqual(without_timings(res1), without_timings(res2))
        with open(os.path.join(one, "curves.csv")) as f1, open(os.path.join(two, "curves.csv")) as f2:
            rows = f2.read()
            self.assertEqual(f1.read(), rows)
        self.assertEqual(len(list(csv.DictReader(rows.splitlines()))), 2 * (40 + 80 + 120))  # joint, grow, the explicit arm
        with open(os.path.join(two, "report.md")) as f:
            report = f.read()
        self.assertIn("## Verdict: what reproduced", report)
        self.assertIn("spread over 2 MPI ranks", report)
        # rank 0 alone trains the teacher; every run is done once, by some rank,
        # the longest arm first; every message names its rank
        lines = r2.stderr.splitlines()
        self.assertEqual(sum("teacher: 3 layers" in x for x in lines), 1)
        done = [x for x in lines if " seed " in x and "val CE" in x]
        self.assertEqual(len(done), 6, r2.stderr)
        self.assertTrue(all(x.startswith(("reproduce[rank 0]: [", "reproduce[rank 1]: ["))
                            for x in done), done)
        self.assertTrue(any(x.startswith("reproduce[rank 1]") for x in done),
                        "rank 1 ran nothing:\n" + r2.stderr)
        first = next(x for x in done if "[1/6]" in x)
        self.assertIn("post-long seed 1", first)
        own = [x for x in lines if x.startswith("reproduce") and not x.startswith("reproduce[rank")]
        self.assertEqual(own, [])

    def test_check_and_estimate_on_rank0_only(self):
        r = run(["--preset", self.preset, "--check"], ranks=2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stdout.count("arm post-long:"), 1, r.stdout)
        r = run(["--preset", self.preset, "--estimate", "--out",
                 os.path.join(self.tmp.name, "est")], ranks=2)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertEqual(r.stderr.count("estimated wall time"), 1, r.stderr)
        self.assertIn("reproduce[rank 0]: estimated wall time", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(self.tmp.name, "est", "teacher.safetensors")))

    def test_bad_input_ends_every_rank(self):
        r = run(["--preset", self.preset, "--threads", "0"], ranks=2)
        self.assertNotEqual(r.returncode, 0)
        self.assertEqual(r.stderr.count("--threads: '0' is not an integer"), 1, r.stderr)
        bad = os.path.join(self.tmp.name, "bad.json")
        with open(bad, "w") as f:
            json.dump({"name": "bad", "studnet": {}, "arms": ["pre-joint"]}, f)
        r = run(["--preset", bad], ranks=2)
        self.assertNotEqual(r.returncode, 0)
        self.assertIn("reproduce[rank 0]: preset: unknown key 'studnet'", r.stderr)

    def test_rank1_that_stops_ends_the_job(self):
        # rank 1 reads its options only after rank 0 has let it through, and rank
        # 0 then waits for it to ask for runs: an option error there, or a flag
        # that would stop it (even with status 0), must end the job, not hang it
        out = os.path.join(self.tmp.name, "rank1-stops")
        args = ["--preset", self.preset, "--out", out]
        r = run(args, rank1_args=["--threads", "0"], timeout=60)
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("--threads: '0' is not an integer", r.stderr)
        self.assertIn("reproduce[rank 1]: rank 1 stopped (status 2) before asking rank 0 for runs",
                      r.stderr)
        for flag in ("--check", "--estimate", "--teacher-only"):
            r = run(args, rank1_args=[flag], timeout=60)
            self.assertNotEqual(r.returncode, 0, r.stderr)
            self.assertIn("reproduce[rank 1]: rank 1 was given %s, but rank 0 was not" % flag,
                          r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "results.json")))

    def test_failure_on_rank1_ends_the_job(self):
        out = os.path.join(self.tmp.name, "fail")
        r = run(["--preset", self.preset, "--out", out], ranks=2,
                env_extra={"LATTICE_REPRODUCE_FAIL_RANK": "1"})
        self.assertNotEqual(r.returncode, 0, r.stderr)
        self.assertIn("reproduce[rank 1]: failing on purpose", r.stderr)
        self.assertFalse(os.path.exists(os.path.join(out, "results.json")))


if __name__ == "__main__":
    BIN, MPIRUN, FLAVOUR = sys.argv[1], sys.argv[2], sys.argv[3]
    if FLAVOUR != "mpi":
        print("SKIP: reproduce was built without MPI (the mpi feature is disabled or no MPI found)")
        sys.exit(77)
    if not MPIRUN:
        print("SKIP: no mpirun or mpiexec found (install openmpi-bin)")
        sys.exit(77)
    unittest.main(argv=sys.argv[:1], verbosity=2)
