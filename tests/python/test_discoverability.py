"""What a Python user sees: signatures, names, reprs, progress, the README.

Signatures that list their fields, enums that print their names, reprs,
progress lines and bars, a deprecated alias, and the README's example run.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import os
import re
import subprocess
import sys
import tempfile
import unittest

import lattice
from lattice import LatticeError
from lattice_helpers import SEQ, VOCAB, next_token_teacher, tiny_data, tiny_model


class DiscoverabilityTest(unittest.TestCase):
    def test_signatures_list_the_fields(self):
        import inspect
        import pydoc
        sig = inspect.signature(lattice.Optim)
        self.assertEqual(sig.parameters["lr"].default, lattice.OptimParams.defaults().lr)
        self.assertIs(sig.parameters["lr"].annotation, float)
        self.assertIs(sig.parameters["lr"].kind, inspect.Parameter.KEYWORD_ONLY)
        self.assertIn("lr: float = 0.0001", pydoc.render_doc(lattice.Optim))
        self.assertIs(inspect.signature(lattice.Distill).parameters["direction"].annotation,
                      lattice.KLDirection)
        for fn, field in ((lattice.Model, "d_model"), (lattice.Data.from_text, "seq_len"),
                          (lattice.Schedule.add_phase, "active_layers"),
                          (lattice.Model.estimate, "n_layers")):
            self.assertIn(field, inspect.signature(fn).parameters, fn)
        with self.assertRaisesRegex(TypeError, "no field 'learning_rate'"):
            lattice.Optim(tiny_model(), learning_rate=1e-3)

    def test_enums_print_their_names(self):
        self.assertEqual(str(lattice.NormPlacement.POST), "POST")
        self.assertEqual(f"{lattice.Group.LAYER}", "LAYER")
        self.assertEqual(lattice.Split.VAL, 1)
        self.assertIn("direction=<KLDirection.FORWARD: 0>", repr(lattice.DistillParams.defaults()))

    def test_floats_read_as_set(self):
        optim = lattice.Optim(tiny_model(), lr=1e-4, weight_decay=0.1, total_steps=10)
        self.assertEqual(optim.params.lr, 1e-4)             # not 9.999999747378752e-05
        self.assertEqual(optim.params.weight_decay, 0.1)
        self.assertIn("lr=0.0001,", repr(optim.params))
        self.assertEqual(lattice.Norm(eps=1e-5).eps, 1e-5)
        self.assertEqual(lattice.OptimParams.make(lr=3e-3).lr, 3e-3)
        self.assertEqual(lattice.OptimParams.make(lr=1.0000001).lr, 1.0000001)  # float32 kept

    def run_progress(self, **kwargs):
        import io
        out = io.StringIO()
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, 6)
        with lattice.progress(schedule, file=out, **kwargs) as bar:
            lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0), schedule,
                            on_step=bar).run()
        self.assertEqual(schedule.counters.steps, 6)
        return out.getvalue()

    def test_progress_lines_without_tqdm(self):
        text = self.run_progress(use_tqdm=False, every=2)
        self.assertEqual(len(text.splitlines()), 3)
        self.assertRegex(text, r"train: step 6/6 loss \d+\.\d{4}( val_ce \d+\.\d{4})? layers 2\n$")

    class FakeBar:
        """Stands in for a tqdm bar: counts updates and closes."""

        def __init__(self):
            self.updates, self.closes = 0, 0

        def set_postfix(self, post, refresh=True):
            pass

        def update(self, n):
            self.updates += n

        def close(self):
            self.closes += 1

    def progress_with_fake_bar(self, total):
        import io
        p = lattice.progress(total, file=io.StringIO(), use_tqdm=False)
        p.bar = self.FakeBar()
        return p, p.bar

    def test_progress_closed_at_the_end_of_a_run(self):
        model = tiny_model()
        optim = lattice.Optim(model, warmup_steps=0)
        # run() returns: closed, without a `with`
        schedule = lattice.Schedule.preset("joint", 1, 2, 6)
        p, bar = self.progress_with_fake_bar(None)        # no total: only the trainer can tell
        lattice.Trainer(model, tiny_data(), optim, schedule, on_step=p).run()
        self.assertEqual((bar.updates, bar.closes, p.closed), (6, 1, True))
        # stepped by hand: closed by the step that finishes the schedule
        schedule = lattice.Schedule.preset("joint", 1, 2, 3)
        p, bar = self.progress_with_fake_bar(None)
        trainer = lattice.Trainer(model, tiny_data(), optim, schedule, on_step=p)
        trainer.step()
        trainer.step()
        self.assertEqual(bar.closes, 0)
        trainer.step()
        self.assertEqual((bar.updates, bar.closes), (3, 1))
        p.close()                                          # idempotent
        self.assertEqual(bar.closes, 1)
        # at its total, whoever calls it
        import types
        p, bar = self.progress_with_fake_bar(2)
        for step in (1, 2):
            self.assertEqual(bar.closes, 0)
            p(types.SimpleNamespace(step=step, loss=1.0, val_ce=float("nan"), active_layers=1))
        self.assertEqual((bar.updates, bar.closes), (2, 1))
        p(types.SimpleNamespace(step=3, loss=1.0, val_ce=float("nan"), active_layers=1))
        self.assertEqual(bar.updates, 2)                   # closed: shows nothing more

        # run() raises: closed too (the bar as on_eval, a failing on_step)
        def stop(m):
            raise RuntimeError("stop here")

        p, bar = self.progress_with_fake_bar(None)
        trainer = lattice.Trainer(model, tiny_data(), optim, lattice.Schedule.preset("joint", 1, 2, 6),
                                  on_step=stop, on_eval=p)
        with self.assertRaises(RuntimeError):
            trainer.run()
        self.assertEqual((bar.closes, p.closed), (1, True))

    def test_messages_not_doubled(self):
        for make in (lambda: lattice.Data.from_text("/nope.txt"),
                     lambda: lattice.Teacher.from_file("/nope.safetensors"),
                     lambda: lattice.Model.from_file("/nope.safetensors")):
            with self.assertRaises(LatticeError) as cm:
                make()
            text = str(cm.exception)
            self.assertEqual(text.count("cannot open /nope"), 1, text)

    def test_progress_drives_tqdm(self):
        try:
            import tqdm  # noqa: F401
        except ImportError:
            self.skipTest("tqdm is not installed (apt-get install python3-tqdm)")
        text = self.run_progress()
        self.assertIn("6/6", text)
        self.assertIn("loss=", text)

    def test_repr_says_what_each_object_is(self):
        model = tiny_model(n_active_layers=1, norm="post")
        data = tiny_data()
        optim = lattice.Optim(model, lr=1e-3, total_steps=10)
        schedule = lattice.Schedule.preset("grow", 2, 1, 3)
        teacher = lattice.Teacher.from_model(tiny_model())
        trainer = lattice.Trainer(model, data, optim, schedule, teacher=teacher)
        expected = [
            (model, r"<lattice\.Model post 1/2 layers d16>"),
            (model.backend, r"<lattice\.Backend ref \d+ threads?>"),
            (lattice.Norm("peri", "layer", eps=1e-5),
             r"<lattice\.Norm peri layer eps 1e-05>"),
            (lattice.Norm("post", residual_scale=2.0),
             r"<lattice\.Norm post rms eps 1e-06 residual scale 2>"),
            (optim, r"<lattice\.Optim step 0, lr [0-9.e-]+ \(cosine from 0\.001\)>"),
            (lattice.Distill(tau=2.0),
             r"<lattice\.Distill alpha 0\.7 gamma 0\.3 tau 2 forward KL>"),
            (data, r"<lattice\.Data \d+ train \+ \d+ val documents, batches 4 x 12>"),
            (schedule, r"<lattice\.Schedule 2 phases, phase 0 step 0, 6 steps in all>"),
            (lattice.Schedule(), r"<lattice\.Schedule no phases>"),
            (teacher, r"<lattice\.Teacher from model pre 2/2 layers d16>"),
            (lattice.Teacher.from_callback(next_token_teacher, VOCAB, 4, SEQ),
             r"<lattice\.Teacher from callback, vocab 32>"),
            (lattice.Diag(model), r"<lattice\.Diag of model post 1/2 layers d16>"),
            (trainer, r"<lattice\.Trainer model post 1/2 layers d16, distilled, "
                      r"schedule 2 phases, phase 0 step 0, 6 steps in all>"),
        ]
        from lattice._handle import Handle
        exported = {getattr(lattice, name) for name in lattice.__all__}
        exported = {obj for obj in exported if isinstance(obj, type) and issubclass(obj, Handle)}
        shown = {type(obj) for obj, _ in expected}
        self.assertEqual(exported - shown, {lattice.Dist})   # Dist needs MPI (tests/dist)
        for obj, pattern in expected:
            self.assertRegex(repr(obj), "^" + pattern + "$")
        trainer.run()
        self.assertRegex(repr(trainer), r"<lattice\.Trainer model post 2/2 layers d16, "
                                        r"distilled, schedule 2 phases, finished, 6 steps")
        model.close()       # the trainer still has it: it says the handle is closed
        self.assertEqual(repr(model), "<lattice.Model closed>")
        self.assertRegex(repr(trainer), r"^<lattice\.Trainer closed model, distilled, ")
        for obj, _ in expected:
            obj.close()
            self.assertEqual(repr(obj), f"<lattice.{type(obj).__name__} closed>")

    def test_repr_does_not_wait_for_another_thread(self):
        import threading
        model = tiny_model()
        held, done = threading.Event(), threading.Event()

        def hold():   # as a long call would
            with model._using():
                held.set()
                done.wait(30)

        thread = threading.Thread(target=hold)
        thread.start()
        try:
            self.assertTrue(held.wait(30))
            self.assertRegex(repr(model), r"^<lattice\.Model busy \(a call on another thread")
        finally:
            done.set()
            thread.join()
        self.assertEqual(repr(model), "<lattice.Model pre 2/2 layers d16>")

    def test_active_layers_has_one_spelling(self):
        import warnings
        model = tiny_model()
        self.assertFalse(hasattr(lattice.Model, "set_active_layers"))  # 0.4's alias, gone in 1.0
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            model.active_layers = 1            # the one spelling: no warning
        self.assertEqual(model.active_layers, 1)

    def test_readme_python_example_runs(self):
        readme = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..",
                              "README.md")
        with open(readme, encoding="utf-8") as f:
            text = f.read()
        section = text[text.index("## Use from Python"):]
        blocks = re.findall(r"^```python\n(.*?)^```", section, re.M | re.S)
        self.assertTrue(blocks, "no ```python block in README.md's Python section")
        with tempfile.TemporaryDirectory() as tmp:
            r = subprocess.run([sys.executable, "-c", blocks[0]], cwd=tmp,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               universal_newlines=True, timeout=120)
        self.assertEqual(r.returncode, 0, r.stderr)
        self.assertRegex(r.stdout, r"loss after 30 steps: \d+\.\d{3}")


if __name__ == "__main__":
    unittest.main(verbosity=2)
