"""The preset's "gemm_precision": a bf16 study runs its students' GEMMs in
bf16 while its teacher (training, logits file, forward) stays fp32, is keyed
apart from fp32 both ways (an fp32 preset, with the key or without it, keeps
its kept runs' key), and is refused, saying why, where bf16 cannot run.
Where this CPU cannot run bf16 the study tests are skipped, saying so; on a
CPU whose flags show AVX512-BF16 or AMX they must run.

usage: test_gemm_precision.py REPRODUCE_BINARY
"""
import json
import os
import subprocess
import sys
import tempfile
import unittest

from tiny_study import results, tiny_study, write

BIN = None


def run(*args, env=None):
    return subprocess.run([BIN, *args], capture_output=True, text=True, timeout=600,
                          env=dict(os.environ, **(env or {})))


def cpu_has_bf16():
    """AVX512-BF16 or AMX in /proc/cpuinfo's flags, oneDNN uncapped."""
    try:
        with open("/proc/cpuinfo") as f:
            flags = next((line for line in f if line.startswith("flags")), "").split()
    except OSError:
        return False
    return (("avx512_bf16" in flags or "amx_bf16" in flags)
            and not os.environ.get("DNNL_MAX_CPU_ISA"))


def study(d, precision=None, backend="onednn"):
    """A tiny study of two arms, one seed, on the backend; the key only when given."""
    path = tiny_study(d, "tiny-precision", 40,
                      {"steps_per_phase": 4, "warmup": 1, "eval_every": 4, "eval_batches": 1,
                       "final_eval_batches": 1},
                      ["pre-joint", "post-grow"])
    with open(path) as f:
        p = json.load(f)
    p["seeds"], p["backend"] = 1, backend
    if precision is not None:
        p["gemm_precision"] = precision
    write(path, p)
    return path


def val_ces(out):
    return {arm: [r["val_ce"] for r in runs] for arm, runs in results(out)["arms"].items()}


def settings(out, arm):
    with open(os.path.join(out, "runs", arm + ".seed1.run"), "rb") as f:
        return json.load(f)["settings"]


def read(path):
    with open(path, "rb") as f:
        return f.read()


class Refusals(unittest.TestCase):
    def test_unknown_and_unsupported(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--preset", study(d, "fp16"), "--check")
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("gemm_precision = 'fp16' is not one of: fp32, bf16", r.stderr)
            # bf16 on another backend: refused before anything runs, saying why
            r = run("--preset", study(d, "bf16", backend="ref"), "--out", os.path.join(d, "o"))
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("preset: gemm_precision bf16 cannot run on the ref backend here", r.stderr)
            self.assertIn('run on the built-in "onednn" backend only', r.stderr)
            self.assertFalse(os.path.exists(os.path.join(d, "o", "teacher.safetensors")))
            # and where oneDNN cannot reach bf16's instructions
            r = run("--preset", study(d, "bf16"), "--check", env={"DNNL_MAX_CPU_ISA": "AVX2"})
            self.assertEqual(r.returncode, 1, r.stderr)
            self.assertIn("preset: gemm_precision bf16 cannot run on the onednn backend here",
                          r.stderr)


class Bf16Study(unittest.TestCase):
    def setUp(self):
        with tempfile.TemporaryDirectory() as d:
            r = run("--preset", study(d, "bf16"), "--check")
        if r.returncode != 0:
            self.assertFalse(cpu_has_bf16(), "bf16 refused on a CPU that has it: " + r.stderr)
            self.skipTest("bf16 cannot run here: " + r.stderr.strip().splitlines()[-1])

    def test_keyed_apart_teacher_fp32(self):
        with tempfile.TemporaryDirectory() as d:
            out, half = os.path.join(d, "out"), os.path.join(d, "half")
            # fp32 without the key, then with it: the same key, every run reused
            r = run("--preset", study(d), "--out", out, "--teacher-logits", "verify")
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("GEMMs in", r.stderr)
            fp32 = val_ces(out)
            self.assertNotIn("gemm_precision", settings(out, "pre-joint"))
            kept = read(os.path.join(out, "runs", "pre-joint.seed1.run"))
            r = run("--preset", study(d, "fp32"), "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertNotIn("running it again", r.stderr)
            self.assertEqual(read(os.path.join(out, "runs", "pre-joint.seed1.run")), kept)
            # bf16 in a fresh folder: its own teacher and logits file, fp32's bit for bit
            r = run("--preset", study(d, "bf16"), "--out", half, "--teacher-logits", "verify")
            self.assertEqual(r.returncode, 0, r.stderr)
            for name in ("teacher.safetensors", "teacher_logits.bin"):
                self.assertEqual(read(os.path.join(half, name)), read(os.path.join(out, name)),
                                 name + " differs: the teacher's GEMMs did not stay fp32")
            self.assertEqual(settings(half, "pre-joint")["gemm_precision"], "bf16")
            self.assertIn("), the students' GEMMs in bf16 (the teacher's in fp32), 1 thread",
                          r.stderr)
            with open(os.path.join(half, "report.md")) as f:
                text = f.read()
            self.assertIn("the students' GEMMs in bf16 (the teacher's in fp32) with 1 thread", text)
            # the setup says it too, so a report regenerated from the kept runs keeps it
            self.assertIn("backend onednn, the students' GEMMs in bf16 (the teacher's in fp32), 1 "
                          "thread per run", text)
            bf16 = val_ces(half)
            for arm in fp32:
                self.assertNotEqual(bf16[arm], fp32[arm], arm)
                self.assertAlmostEqual(bf16[arm][0], fp32[arm][0], delta=0.05, msg=arm)
            # bf16 in fp32's folder: the fp32 runs are not reused, and the reverse
            r = run("--preset", study(d, "bf16"), "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("runs/pre-joint.seed1.run: made with other settings: gemm_precision",
                          r.stderr)
            self.assertIn("teacher: reusing", r.stderr)
            self.assertEqual(val_ces(out), bf16)
            r = run("--preset", study(d), "--out", out)
            self.assertEqual(r.returncode, 0, r.stderr)
            self.assertIn("runs/post-grow.seed1.run: made with other settings: gemm_precision",
                          r.stderr)
            self.assertEqual(val_ces(out), fp32)


if __name__ == "__main__":
    BIN = os.path.abspath(sys.argv[1])
    unittest.main(argv=sys.argv[:1] + sys.argv[2:], verbosity=2)
