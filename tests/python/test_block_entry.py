"""The block-entry interventions from Python: ModelParams.block_norm,
block_rescale and the induced massive activation (massive_offset) reach the
library by key, act on the stream, and are refused where the library refuses
them; the bounds the library gives are the ones its setter enforces."""
import ctypes
import math
import unittest

import lattice
from lattice._lib import lib


def tiny(**fields):
    base = dict(vocab_size=16, d_model=8, n_layers=2, n_active_layers=2, n_heads=2,
                n_kv_heads=1, head_dim=4, d_ff=16, max_batch=2, max_seq=6, seed=3,
                init_std=0.3)
    base.update(fields)
    return lattice.Model(norm="pre", backend="ref", **base)


class BlockEntry(unittest.TestCase):
    tokens = [[1, 2, 3, 4, 5, 6], [6, 5, 4, 3, 2, 1]]

    def forward_hidden(self, model, boundary):
        model.forward(self.tokens)
        return model.hidden(boundary).tolist()  # [row][position][d_model]

    def test_fields_reach_the_model(self):
        for key in ("block_norm", "block_rescale"):
            with tiny(**{key: 1}) as m:
                self.assertEqual(getattr(m.params, key), 1)
                other = "block_rescale" if key == "block_norm" else "block_norm"
                self.assertEqual(getattr(m.params, other), 0)

    def test_the_rescale_acts_at_the_block_entry(self):
        with tiny() as plain, tiny(block_rescale=1) as rescaled:
            # the same weights (same seed; the rescale adds one statistic, its
            # running regular RMS, 0 until a step measures it): the stream layer
            # 1 receives is the same, and what it hands on too while the
            # statistic is 0; set as after training, each row start changes
            stat = rescaled.tensor("model.layers.1.input_regular_rms")
            self.assertEqual(stat.group, lattice.Group.STATISTIC)
            self.assertEqual(self.forward_hidden(plain, 1), self.forward_hidden(rescaled, 1))
            self.assertEqual(self.forward_hidden(plain, 2), self.forward_hidden(rescaled, 2))
            stat.data[0] = 2.0
            a, b = self.forward_hidden(plain, 2), self.forward_hidden(rescaled, 2)
        for row in range(2):
            self.assertNotEqual(a[row][0], b[row][0])

    def test_the_massive_offset_acts_on_one_channel(self):
        with tiny() as plain, tiny(massive_offset=4.0, massive_channel=5) as induced:
            self.assertEqual(induced.params.massive_offset, 4.0)
            induced.tensor("model.layers.1.input_regular_rms").data[0] = 0.5
            a, b = self.forward_hidden(plain, 1), self.forward_hidden(induced, 1)
        add = 4.0 * 8 ** 0.5 * 0.5
        for row in range(2):
            for t in range(6):
                for d in range(8):
                    want = a[row][t][d] + (add if t == 0 and d == 5 else 0.0)
                    self.assertAlmostEqual(b[row][t][d], want, places=5)

    def test_refused(self):
        with self.assertRaisesRegex(lattice.LatticeError, "block_rescale 1 needs the pre-norm"):
            lattice.Model(norm="post", backend="ref", vocab_size=16, d_model=8, n_layers=2,
                          n_active_layers=2, n_heads=2, n_kv_heads=1, head_dim=4, d_ff=16,
                          max_batch=2, max_seq=6, block_rescale=1)
        with self.assertRaisesRegex(lattice.LatticeError, "both set"):
            tiny(block_norm=1, block_rescale=1)
        with self.assertRaisesRegex(lattice.LatticeError, "massive_channel 8 not in 0..7"):
            tiny(massive_offset=4.0, massive_channel=8)


class OptionKeys(unittest.TestCase):
    def test_each_option_round_trips_within_its_bounds(self):
        for option in lattice.ModelOption:
            name = option.name.lower()
            lo, hi = lattice.ModelParams.option_bounds(option)
            self.assertEqual((lo, hi), lattice.ModelParams.option_bounds(name))
            integer = isinstance(lo, int)
            p = lattice.ModelParams.defaults()
            for value in (lo, hi, (lo + hi) // 2 if integer else 2.5):
                with self.subTest(name, value=value):
                    setattr(p, name, value)
                    self.assertEqual(getattr(p, name), value)
                    self.assertEqual(p.to_dict()[name], value)
            past = (lo - 1, hi + 1) if integer else (math.nextafter(lo, -math.inf),
                                                    math.nextafter(hi, math.inf))
            for value in past:
                with self.subTest(name, value=value):
                    with self.assertRaisesRegex(lattice.LatticeError, f"{name} .* not in ") as cm:
                        lattice.ModelParams.make(**{name: value})
                    self.assertEqual(cm.exception.code, lattice.Status.INVALID_ARGUMENT)
            self.assertEqual(getattr(p, name), (lo + hi) // 2 if integer else 2.5)

    def test_refused_by_key(self):
        with self.assertRaises(ValueError):
            lattice.ModelParams.option_bounds("no_such_option")
        lo, hi = ctypes.c_double(), ctypes.c_double()
        self.assertEqual(lib.lattice_model_option_bounds(7, ctypes.byref(lo), ctypes.byref(hi)),
                         lattice.Status.UNSUPPORTED)
        self.assertIn("no model option has the key 7", lattice.last_error())
        with self.assertRaises(TypeError):  # an integer option takes integers
            lattice.ModelParams.make(block_norm=2.5)
        with self.assertRaisesRegex(TypeError, "no field 'lattice_reserved_block_norm'"):
            lattice.ModelParams.make(lattice_reserved_block_norm=2)  # the slot is reserved


if __name__ == "__main__":
    unittest.main()
