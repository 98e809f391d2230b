"""Diagnostics: boundary RMS, block removal, loss response, attention sinks.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import unittest

import lattice
from lattice import LatticeError, Status
from lattice_helpers import tiny_model


class DiagTest(unittest.TestCase):
    def test_boundary_scale(self):
        model = tiny_model(n_layers=3, n_active_layers=2)
        diag = lattice.Diag(model)
        stats = diag.boundary_scale(array.array("i", range(1, 13)), batch=3, seq=4)
        self.assertEqual(len(stats), 3)                       # boundaries 0..2
        for boundary in stats:
            regular, first, every = boundary
            self.assertEqual((regular.count, first.count, every.count), (9, 3, 12))
            self.assertGreater(every.mean, 0.0)
            self.assertGreaterEqual(every.max, every.mean)
        self.assertEqual(model.hidden(2).shape, (3, 4, 16))   # the forward is the model's
        mine = diag.boundary_scale([[1, 2, 3, 4]], classes=bytes([0, 0, 0, 0]), n_classes=1)
        self.assertEqual(mine[0][0].count, 4)
        with self.assertRaises(LatticeError) as cm:
            diag.boundary_scale([[1, 2, 3, 4]], classes=bytes([0, 0, 5, 0]), n_classes=1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("class", str(cm.exception))

    def test_attention_sinks(self):
        """Queries and keys zeroed: uniform causal attention, so the mass on
        position 0 at query t is 1 / (t + 1), by hand."""
        model = tiny_model(n_layers=2)
        for tensor in model.tensors:
            if "q_proj" in tensor.name or "k_proj" in tensor.name:
                raw = tensor.data.cast("B")
                raw[:] = bytes(len(raw))
        diag = lattice.Diag(model)
        tokens = array.array("i", range(1, 13))
        sinks = diag.attention_sinks(tokens, batch=2, seq=6, threshold=0.3)
        mass = sum(1.0 / (t + 1) for t in range(1, 6)) / 5
        self.assertEqual(len(sinks), 2)
        for s in sinks:
            self.assertAlmostEqual(s.mass0, mass, places=6)
            self.assertEqual(len(s.head_mass), 2)
            for h in s.head_mass:
                self.assertAlmostEqual(h, mass, places=6)
            self.assertEqual(s.sink_rate, 0.0 if mass <= 0.3 else 1.0)
            self.assertGreater(s.top_ratio, 1.0)
            self.assertTrue(0 <= s.top_token < 12 and 0 <= s.top_dim < 16)
            self.assertGreater(s.value_norm0, 0.0)
        flat = [abs(x) for x in model.hidden(1).cast("B").cast("f")]  # layer 0's output
        self.assertEqual(flat.index(max(flat)), sinks[0].top_token * 16 + sinks[0].top_dim)
        ranked = sorted(flat)
        median = (ranked[len(ranked) // 2 - 1] + ranked[len(ranked) // 2]) / 2
        self.assertAlmostEqual(sinks[0].top_ratio, max(flat) / median, places=4)
        with self.assertRaises(LatticeError) as cm:
            diag.attention_sinks(tokens[:4], batch=4, seq=1)
        self.assertIn("at least 2 positions", str(cm.exception))

    def test_block_removal(self):
        model = tiny_model()
        model.zero_layer_outputs(1)                           # layer 1 is the identity
        diag = lattice.Diag(model)
        tokens = array.array("i", range(1, 9))
        targets = array.array("i", range(2, 10))
        r = diag.block_removal(tokens, targets, first=1, count=1, batch=2, seq=4)
        self.assertAlmostEqual(r.dce, 0.0, places=5)
        self.assertAlmostEqual(r.angle, 0.0, places=3)
        r = diag.block_removal(tokens, targets, 0, 1, batch=2, seq=4)
        self.assertNotAlmostEqual(r.dce, 0.0, places=5)
        self.assertAlmostEqual(r.dce, r.ce_removed - r.ce_full)
        with self.assertRaises(LatticeError) as cm:
            diag.block_removal(tokens, targets, 1, 5, batch=2, seq=4)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        model.close()
        diag.block_removal(tokens, targets, 1, 1, batch=2, seq=4)   # the diag keeps the model

    def test_loss_response(self):
        r = lattice.Diag.loss_response([1, 1, 1, 1, 3, 2, 1, 1], append_step=4, window=2,
                                       horizon=4)
        self.assertEqual(r, lattice.Response(baseline=1.0, jump=2.0, area=3.0, recovery=4))
        r = lattice.Diag.loss_response(array.array("d", [1, 1, 5, 5]), 2, 2, 2)
        self.assertEqual(r.recovery, -1)
        with self.assertRaises(LatticeError) as cm:
            lattice.Diag.loss_response([1.0, 2.0], 5, 1, 1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            lattice.Diag.loss_response(array.array("f", [1, 2, 3]), 1, 1, 1)


if __name__ == "__main__":
    unittest.main(verbosity=2)
