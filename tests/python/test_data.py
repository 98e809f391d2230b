"""Data and schedules: corpora, batches, the validation split, phases, presets.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import os
import tempfile
import unittest

import lattice
from lattice import LatticeError, Status
from lattice_helpers import SEQ, tiny_data, tiny_model


class DataTest(unittest.TestCase):
    def test_memory(self):
        data = tiny_data()
        self.assertEqual(data.n_documents() + data.n_documents("val"), 40)
        self.assertEqual(data.n_tokens(lattice.Split.TRAIN) + data.n_tokens(lattice.Split.VAL),
                         40 * (SEQ + 1))
        self.assertEqual(data.params.batch_size, 4)
        self.assertIsNone(data.params.separator)
        batch = data.next()
        self.assertEqual(batch.tokens.shape, (batch.batch, batch.seq))
        self.assertFalse(batch.tokens.readonly)                 # copies
        self.assertTrue(data.val_batch_view(0).tokens.readonly)  # views
        self.assertEqual(batch.batch, 4)
        self.assertLessEqual(batch.seq, SEQ)
        self.assertEqual(batch.n_tokens, sum(batch.mask.cast("B")))
        row = batch.tokens.tolist()[0]
        self.assertEqual(row[0], 0)                             # documents start at the boundary
        self.assertEqual(batch.targets.tolist()[0][:-1], row[1:])
        self.assertGreater(data.n_val_batches, 0)
        self.assertEqual(len(list(data.val_batches())), data.n_val_batches)
        self.assertEqual(data.position, lattice.Position(0, 4))   # four documents taken
        data.position = (0, 0)
        self.assertEqual(data.next().tokens.tolist()[0], row)   # the same order again
        with self.assertRaises(LatticeError):
            data.val_batch(data.n_val_batches)
        with self.assertRaises(LatticeError):
            data.position = lattice.Position(0, 10_000)

    def test_files(self):
        with tempfile.TemporaryDirectory() as tmp:
            text = os.path.join(tmp, "corpus.txt")
            with open(text, "w") as f:
                f.write("one document\fanother one\fa third\fand a fourth")
            data = lattice.Data.from_text(text, batch_size=2, seq_len=8, val_fraction=0.25,
                                          split_long=False)
            self.assertEqual(data.n_documents(), 3)
            self.assertEqual(data.n_documents("val"), 1)
            val = os.path.join(tmp, "val.txt")
            with open(val, "w") as f:
                f.write("held out\fand this")
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=8,
                                          split_long=False)
            self.assertEqual((data.n_documents(), data.n_documents("val")), (4, 2))
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=8)
            self.assertGreater(data.n_documents(), 4)           # split_long is the default
            data = lattice.Data.from_text(text, val_path=val, batch_size=2, seq_len=4,
                                          split_long=True)
            self.assertGreater(data.n_documents(), 4)           # long documents were cut
            self.assertGreater(data.n_documents("val"), 2)
            tokens = os.path.join(tmp, "ids.u16")
            with open(tokens, "wb") as f:
                f.write(array.array("H", [0, 5, 6, 7, 0, 8, 9, 0, 3, 4]).tobytes())
            data = lattice.Data.from_tokens(tokens, 2, vocab_size=10, boundary_id=0,
                                            batch_size=2, seq_len=4)
            self.assertEqual(data.n_documents(), 3)
            with self.assertRaises(LatticeError) as cm:
                lattice.Data.from_text(os.path.join(tmp, "missing.txt"))
            self.assertEqual(cm.exception.code, Status.IO)
            self.assertIn("missing.txt", str(cm.exception))
            with self.assertRaises(LatticeError) as cm:
                lattice.Data.from_tokens(tokens, 2, vocab_size=5, boundary_id=0)
            self.assertEqual(cm.exception.code, Status.FORMAT)
        with self.assertRaises(LatticeError) as cm:
            lattice.Data.from_memory(array.array("i", [0, 1, 2]), batch_size=0)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        with self.assertRaises(TypeError):
            lattice.Data()


class ScheduleTest(unittest.TestCase):
    def test_presets(self):
        grow = lattice.Schedule.preset("grow", n_blocks=3, block_size=3, steps_per_phase=10)
        self.assertEqual([p.active_layers for p in grow.phases], [3, 6, 9])
        freeze = lattice.Schedule.preset(lattice.Preset.FREEZE, 3, 3, 10)
        self.assertEqual([p.train_from for p in freeze.phases], [0, 3, 6])
        self.assertEqual(len(grow), 3)
        self.assertEqual(grow.max_layers, 9)
        self.assertEqual(grow.total_steps, 30)
        with self.assertRaises(LatticeError) as cm:
            lattice.Schedule.preset("grow", 0, 3, 10)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)

    def test_preset_phases_without_a_schedule(self):
        for name in ("joint", "grow", "freeze", "single_block", "joint_matched_active",
                     "joint_matched_total"):
            phases = lattice.Schedule.preset_phases(name, 3, 2, 7, block_init="copy")
            held = lattice.Schedule.preset(name, 3, 2, 7, block_init="copy").phases
            self.assertEqual([bytes(p) for p in phases], [bytes(p) for p in held], name)
        edited = [lattice.Phase.make(p, rewind_data=1)
                  for p in lattice.Schedule.preset_phases("grow", 2, 1, 4)]
        self.assertEqual([p.rewind_data for p in lattice.Schedule(edited).phases], [1, 1])
        with self.assertRaises(LatticeError) as cm:
            lattice.Schedule.preset_phases("grow", 0, 3, 10)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)

    def test_phase_fields_of_0_2(self):
        grow = lattice.Schedule.preset("grow", 3, 3, 10)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 0, 0])   # reads on
        self.assertEqual([p.train_boundary for p in grow.phases], [1, 1, 1])
        grow.set_rewind_data(True)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 1, 1])
        grow.set_rewind_data(False)
        self.assertEqual([p.rewind_data for p in grow.phases], [0, 0, 0])
        replay = lattice.Schedule.preset("grow", 3, 3, 10, rewind_data=True)
        self.assertEqual([p.rewind_data for p in replay.phases], [0, 1, 1])
        freeze = lattice.Schedule.preset("freeze", 3, 3, 10)
        self.assertEqual([p.train_boundary for p in freeze.phases], [1, 0, 0])
        s = lattice.Schedule([dict(steps=2, rewind_data=1, train_boundary=0)])
        self.assertEqual((s.phase(0).rewind_data, s.phase(0).train_boundary), (1, 0))
        self.assertEqual(lattice.Phase.defaults().train_boundary, 1)

    def test_rewind_replays_the_first_phase(self):
        def batches(rewind):
            model = tiny_model(n_layers=2, n_active_layers=1)
            data = tiny_data()
            schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1,
                                               steps_per_phase=3, rewind_data=rewind)
            trainer = lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0), schedule)
            seen = []
            for _ in range(6):
                trainer.step()
                seen.append(data.position)
            return seen

        on, off = batches(True), batches(False)
        self.assertEqual(on[3:], on[:3])          # phase 1 reads phase 0's batches again
        self.assertEqual(off[:3], on[:3])
        self.assertNotEqual(off[3:], off[:3])     # the default reads on
        self.assertGreater(off[5].index, off[2].index)

    def test_record_and_position(self):
        s = lattice.Schedule([dict(steps=2, active_layers=1), lattice.Phase.make(steps=1)])
        self.assertEqual(s.position, (0, 0))
        self.assertFalse(s.record(10, 8, 1.0))
        self.assertTrue(s.record(10, 8, 1.0))
        self.assertEqual(s.position, (1, 0))
        self.assertTrue(s.record(10, 6))
        self.assertTrue(s.finished)
        self.assertEqual(s.counters, lattice.Counters(3, 30, 22, 22, 2.0))
        with self.assertRaises(LatticeError) as cm:
            s.record(1, 1)
        self.assertEqual(cm.exception.code, Status.STATE)
        s.set_position(1, 0, lattice.Counters(steps=2))
        self.assertEqual(s.position, (1, 0))
        self.assertEqual(s.counters.steps, 2)
        s.set_position(0)
        self.assertEqual(s.counters, lattice.Counters())
        with self.assertRaises(LatticeError) as cm:
            s.add_phase(steps=5, active_layers=2, train_from=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertTrue(str(cm.exception).startswith("invalid configuration"))


if __name__ == "__main__":
    unittest.main(verbosity=2)
