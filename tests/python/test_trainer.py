"""The trainer: steps, runs, evaluation, callbacks, checkpoints.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import ctypes
import math
import os
import tempfile
import unittest

import lattice
from lattice import LatticeError, Status
from lattice import _lib
from lattice_helpers import SEQ, VOCAB, next_token_teacher, tiny_data, tiny_model


class TrainerTest(unittest.TestCase):
    def test_cross_entropy_training(self):
        model = tiny_model()
        data = tiny_data()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-3, warmup_steps=0)
        schedule = lattice.Schedule.preset("joint", n_blocks=1, block_size=2, steps_per_phase=25)
        trainer = lattice.Trainer(model, data, optim, schedule, eval_every=5)
        first = trainer.step()
        self.assertEqual(first.step, 1)
        self.assertEqual(first.kl, 0.0)
        self.assertTrue(math.isnan(first.val_ce))
        metrics = [trainer.step() for _ in range(24)]
        self.assertTrue(schedule.finished)
        self.assertLess(metrics[-1].loss, 0.6 * first.loss)
        self.assertTrue(math.isfinite(metrics[3].val_ce))          # step 5
        self.assertTrue(metrics[-1].phase_end)
        val = trainer.evaluate()
        self.assertAlmostEqual(val, metrics[-1].val_ce, places=4)
        self.assertEqual(metrics[-1].counters.steps, 25)
        with self.assertRaises(LatticeError) as cm:
            trainer.step()
        self.assertEqual(cm.exception.code, Status.STATE)
        self.assertIn("finished", str(cm.exception))
        # The C struct's size as the library sees it; a size that says nothing
        # is refused before the step runs.
        m = lattice._types.MetricsStruct()
        schedule.set_position(0)
        self.assertEqual(_lib.lib.lattice_trainer_step(trainer._ptr, ctypes.byref(m)),
                         Status.INVALID_ARGUMENT)
        self.assertIn("metrics->size 0", _lib.last_error())
        m.size = ctypes.sizeof(m)
        self.assertEqual(_lib.lib.lattice_trainer_step(trainer._ptr, ctypes.byref(m)), 0)
        self.assertEqual(m.size, ctypes.sizeof(m))

    def test_distill_with_a_python_teacher(self):
        calls = []

        def teacher_fn(tokens, batch, seq, vocab, logits):
            calls.append(batch * seq)
            next_token_teacher(tokens, batch, seq, vocab, logits)

        model = tiny_model()
        teacher = lattice.Teacher.from_callback(teacher_fn, VOCAB, 4, 16)
        steps = []
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, lr=1e-2, warmup_steps=0),
                                  lattice.Schedule.preset("joint", 1, 2, 20), teacher=teacher,
                                  distill=lattice.Distill(alpha=1.0, gamma=0.0),
                                  on_step=steps.append)
        trainer.run()
        self.assertEqual(len(steps), 20)
        self.assertEqual(len(calls), 20)
        self.assertGreater(steps[0].kl, 0.0)
        self.assertLess(steps[-1].kl, 0.6 * steps[0].kl)
        self.assertIsInstance(steps[-1], lattice.Metrics)
        self.assertIsInstance(steps[-1].counters, lattice.Counters)
        # After the run the student predicts what the teacher does.
        model.forward(array.array("i", [5, 6, 7, 8]), 1, 4)
        row = model.logits().tolist()[0][3]
        self.assertEqual(row.index(max(row)), 9)

    def test_grow_depth(self):
        model = tiny_model(n_layers=3, n_active_layers=1)
        schedule = lattice.Schedule.preset(lattice.Preset.GROW, n_blocks=3, block_size=1,
                                           steps_per_phase=2, block_init="identity")
        seen = []
        evals = []
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=lambda m: seen.append((m.phase, m.active_layers)),
                                  on_eval=evals.append)
        trainer.run()
        self.assertEqual(seen, [(0, 1), (0, 1), (1, 2), (1, 2), (2, 3), (2, 3)])
        self.assertEqual(model.active_layers, 3)
        self.assertEqual(len(evals), 3)                    # every phase end
        self.assertTrue(all(m.phase_end for m in evals))
        self.assertEqual(schedule.counters.steps, 6)

    def test_lr_shape_wsd(self):
        model = tiny_model()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-4, warmup_steps=2, total_steps=12,
                              lr_shape="wsd", decay_fraction=0.5)
        self.assertEqual(optim.params.lr_shape, lattice.LRShape.WSD)
        self.assertAlmostEqual(optim.params.decay_fraction, 0.5)
        rates = []
        for _ in range(14):
            rates.append(optim.lr)
            optim.step()
        want = [5e-3] + [1e-2] * 7                                   # warmup, then held
        want += [1e-2 - (1e-2 - 1e-4) * k / 5 for k in range(1, 6)]  # the last 5 of 10
        want += [1e-4]                                               # past the end
        self.assertEqual(len(want), len(rates))
        for got, w in zip(rates, want):
            self.assertAlmostEqual(got, w, delta=1e-7)
        self.assertEqual(lattice.Optim(model).params.lr_shape, lattice.LRShape.COSINE)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr_shape="wsd", decay_fraction=2.0)
        self.assertIn("decay_fraction 2 must lie in [0, 1]", str(cm.exception))
        with self.assertRaises(ValueError):
            lattice.Optim(model, lr_shape="linear")

    def test_warmup_fits_the_run(self):
        model = tiny_model()
        # total_steps alone: the paper's 1.5% warmup, not its 750 steps
        self.assertEqual(lattice.Optim(model, lr=1e-3, total_steps=5).params.warmup_steps, 0)
        self.assertEqual(lattice.Optim(model, total_steps=2000).params.warmup_steps, 30)
        self.assertEqual(lattice.Optim(model).params.warmup_steps, 750)
        self.assertEqual(lattice.Optim(model, total_steps=5, warmup_steps=5).params.warmup_steps, 5)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, total_steps=5, warmup_steps=6)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("warmup_steps 6 > total_steps 5", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr=1e-4, min_lr=1e-3)
        self.assertIn("min_lr 0.001 > lr 0.0001", str(cm.exception))
        # a phase that restarts the optimizer is its run
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=7),
                            lattice.Schedule.preset("joint", 1, 2, 6))
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("phase 0 restarts the optimizer for 6 steps, fewer than its warmup_steps 7",
                      str(cm.exception))
        # validation asked of data without a validation split
        no_val = tiny_data(val_fraction=0.0)
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, no_val, lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 6), eval_every=2)
        self.assertIn("eval_every 2 asks for validation, but the data has no validation documents",
                      str(cm.exception))

    def test_checkpoint_resume(self):
        def make():
            model = tiny_model(n_layers=2, n_active_layers=1)
            schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1, steps_per_phase=3)
            return lattice.Trainer(model, tiny_data(), lattice.Optim(model, lr=1e-2, warmup_steps=0), schedule)

        t = make()
        reference = [t.step().loss for _ in range(6)]
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "run.safetensors")
            t = make()
            for _ in range(2):
                t.step()
            t.save_checkpoint(path)
            resumed = make()
            resumed.load_checkpoint(path)
            self.assertEqual([resumed.step().loss for _ in range(4)], reference[2:])
            with self.assertRaises(LatticeError) as cm:
                resumed.load_checkpoint(os.path.join(d, "missing.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)
            # other data: refused, unless asked for (other_ranks has no 1-process
            # counterpart: tests/mpi/python_dist.py writes one over 2 ranks)
            def on_other_data():
                model = tiny_model(n_layers=2, n_active_layers=1)
                schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1,
                                                   steps_per_phase=3)
                return lattice.Trainer(model, tiny_data(seed=4),
                                       lattice.Optim(model, lr=1e-2, warmup_steps=0), schedule)
            other = on_other_data()
            schedule = other.schedule
            with self.assertRaises(LatticeError) as cm:
                other.load_checkpoint(path, other_ranks=True)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            self.assertIn("data seed 3 differs from this run's 4", str(cm.exception))
            other.load_checkpoint(path, other_data=True)
            self.assertEqual(schedule.counters.steps, 2)

    def test_file_teacher(self):
        model = tiny_model()
        teacher = lattice.Teacher.from_model(model)
        data = tiny_data()
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "logits.safetensors")
            start = data.position
            teacher.record(data, 2, path, k=3)
            data.position = start
            f = lattice.Teacher.from_file(path)
            self.assertEqual(f.topk_k, 3)
            batch = data.next()
            index, value = f.topk(batch.tokens, batch.batch, batch.seq)
            full = teacher.logits(batch.tokens, batch.batch, batch.seq).tolist()
            row = full[0][0]
            self.assertEqual(index.tolist()[0][0][0], row.index(max(row)))
            self.assertAlmostEqual(value.tolist()[0][0][0], max(row), places=5)
            with self.assertRaises(LatticeError) as cm:
                lattice.Teacher.from_file(os.path.join(d, "none"))
            self.assertEqual(cm.exception.code, Status.IO)

    def test_record_leaves_the_model_at_the_recordings_shape(self):
        """record runs the model teacher's forwards at the data's shape (4 x 12):
        a loss sized by the caller's own earlier forward (2 x 8) would read past
        its targets; the buffers are sized by the shape the model holds."""
        model = tiny_model()
        teacher = lattice.Teacher.from_model(model)
        data = tiny_data()
        tokens = array.array("i", [1, 2, 3, 4, 5, 6, 7, 8] * 2)
        model.forward(tokens, 2, 8)
        self.assertEqual(model.forward_shape, (2, 8))
        with tempfile.TemporaryDirectory() as d:
            teacher.record(data, 1, os.path.join(d, "logits.safetensors"))
        self.assertEqual(model.forward_shape, (4, SEQ))
        with self.assertRaises(ValueError) as cm:
            model.cross_entropy(tokens)                # 16 targets for 48 positions
        self.assertIn(f"expected {4 * SEQ}", str(cm.exception))
        self.assertEqual(model.logits().shape, (4, SEQ, VOCAB))
        with self.assertRaises(ValueError) as cm:
            model.logits(2, 8)
        self.assertIn(f"the last forward was 4 x {SEQ}, not 2 x 8", str(cm.exception))

    def test_the_model_shape_after_a_trainer_step(self):
        """A trainer's step runs the student's forward at the data's shape, and a
        model teacher's at the same: both models say so."""
        model, teacher_model = tiny_model(), tiny_model()
        data = tiny_data()
        model.forward(array.array("i", [1, 2, 3, 4]), 1, 4)
        trainer = lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0),
                                  lattice.Schedule.preset("joint", 1, 2, 5),
                                  teacher=lattice.Teacher.from_model(teacher_model),
                                  distill=lattice.Distill(alpha=0.5))
        trainer.step()
        self.assertEqual(model.forward_shape, (4, SEQ))
        self.assertEqual(teacher_model.forward_shape, (4, SEQ))
        self.assertEqual(len(model.logits()), 4)
        model.active_layers = 1
        with self.assertRaises(LatticeError):
            model.init_layer(99, 1)
        reason = lattice.last_error()
        self.assertIsNone(model.forward_shape)
        self.assertEqual(lattice.last_error(), reason)   # a question, not a failure
        with self.assertRaises(LatticeError) as cm:
            model.logits()
        self.assertEqual(cm.exception.code, Status.STATE)
        with self.assertRaises(LatticeError) as cm:
            model.cross_entropy(array.array("i", [1] * (4 * SEQ)))
        self.assertEqual(cm.exception.code, Status.STATE)
        self.assertIn("holds no forward's activations", str(cm.exception))

    def test_callback_stops_the_run(self):
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=lambda m: m.step >= 3)
        trainer.run()
        self.assertEqual(schedule.counters.steps, 3)

    def test_callback_exception_surfaces(self):
        def on_step(metrics):
            if metrics.step == 2:
                raise RuntimeError("stop here")

        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  on_step=on_step)
        with self.assertRaisesRegex(RuntimeError, "stop here"):
            trainer.run()
        self.assertEqual(schedule.counters.steps, 2)
        trainer.step()                                     # the trainer is still usable
        self.assertEqual(schedule.counters.steps, 3)

    def test_teacher_exception_through_the_trainer(self):
        def teacher_fn(*args):
            raise ValueError("teacher crashed")

        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 10)
        trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                                  teacher=lattice.Teacher.from_callback(teacher_fn, VOCAB, 4, 16))
        with self.assertRaises(LatticeError) as cm:
            trainer.run()
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, ValueError)
        self.assertIn("teacher", str(cm.exception))
        self.assertEqual(schedule.counters.steps, 0)

    def test_bad_binding(self):
        model = tiny_model(vocab_size=16)
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 10))
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 5, 10))   # deeper than the model
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        with self.assertRaises(TypeError):
            lattice.Trainer(model, tiny_data(), model, lattice.Schedule())


if __name__ == "__main__":
    unittest.main(verbosity=2)
