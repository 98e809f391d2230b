"""Every shipped preset passes --check, which builds every object of its
study (teacher, students of every arm, data, optimizers, schedules) on a
stand-in corpus without training: the long suite's share of the reproduction
tests (meson test --suite long; .ci/run runs it).

usage: test_presets_check.py REPRODUCE_BINARY PRESETS_DIR
"""
import os
import subprocess
import sys
import unittest

from tiny_study import stand_in_env

BIN = PRESETS = None


class ShippedPresets(unittest.TestCase):
    def test_shipped_presets_validate(self):
        names = sorted(n for n in os.listdir(PRESETS) if n.endswith(".json"))
        self.assertIn("regime.json", names)
        env = stand_in_env()
        for name in names:
            with self.subTest(preset=name):
                r = subprocess.run([BIN, "--preset", os.path.join(PRESETS, name), "--check"],
                                   capture_output=True, text=True, timeout=600, env=env)
                self.assertEqual(r.returncode, 0, name + ": " + r.stderr)
                self.assertIn("arm ", r.stdout)


if __name__ == "__main__":
    BIN, PRESETS = os.path.abspath(sys.argv[1]), os.path.abspath(sys.argv[2])
    unittest.main(argv=sys.argv[:1], verbosity=2)
