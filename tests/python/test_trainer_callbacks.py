"""A trainer callback that calls back into the trainer (doc/API.md, "Callbacks"):
a checkpoint saved from on_step while run() goes on is the state after that
step, and a run resumed from it gives bit-identical losses; evaluate() from a
callback measures the model the step left and changes nothing of the run."""
import os
import tempfile
import unittest

import lattice
from lattice_helpers import tiny_data, tiny_model


def make(**callbacks):
    model = tiny_model(n_layers=2, n_active_layers=1)
    schedule = lattice.Schedule.preset("grow", n_blocks=2, block_size=1, steps_per_phase=3)
    return lattice.Trainer(model, tiny_data(), lattice.Optim(model, lr=1e-2, warmup_steps=0),
                           schedule, eval_every=2, **callbacks)


class CallbackReentry(unittest.TestCase):
    def test_checkpoint_from_on_step(self):
        plain = []
        make(on_step=lambda m: plain.append(m.loss)).run()
        self.assertEqual(len(plain), 6)
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "step2.safetensors")
            losses, trainer = [], None

            def on_step(m):
                losses.append(m.loss)
                if m.step == 2:
                    trainer.save_checkpoint(path)

            trainer = make(on_step=on_step)
            trainer.run()
            # saving from the callback changed nothing of the run
            self.assertEqual(losses, plain)
            resumed = make()
            resumed.load_checkpoint(path)
            self.assertEqual(resumed.schedule.counters.steps, 2)
            rest = []
            resumed.on_step = lambda m: rest.append(m.loss)
            resumed.run()
            self.assertEqual(rest, plain[2:])  # bit for bit

    def test_evaluate_from_a_callback(self):
        plain_val = []
        make(on_eval=lambda m: plain_val.append(m.val_ce)).run()
        losses, seen, trainer = [], [], None

        def on_eval(m):
            seen.append((trainer.evaluate(), m.val_ce))

        trainer = make(on_eval=on_eval, on_step=lambda m: losses.append(m.loss))
        trainer.run()
        self.assertEqual([v for _, v in seen], plain_val)
        for again, measured in seen:  # the same validation, measured twice
            self.assertEqual(again, measured)
        plain = []
        make(on_step=lambda m: plain.append(m.loss)).run()
        self.assertEqual(losses, plain)


if __name__ == "__main__":
    unittest.main()
