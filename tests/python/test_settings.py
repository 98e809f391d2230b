"""Settings that once did nothing without a word (issue 29 part 2).

Callbacks set after construction, params as read-only copies, mask values,
strided inputs, gradients overwritten by backward, preset budgets.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import ctypes
import os
import tempfile
import unittest

import lattice
from lattice_helpers import VOCAB, numpy, tiny_data, tiny_model


class SilentSettingsTest(unittest.TestCase):
    """Settings that used to do nothing without a word (issue 29 part 2)."""

    def trainer(self, steps=4, **kwargs):
        model = tiny_model()
        schedule = lattice.Schedule.preset("joint", 1, 2, steps)
        return lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                               schedule, **kwargs)

    def test_callbacks_set_after_construction(self):
        trainer = self.trainer(steps=4, eval_every=2)
        self.assertIsNone(trainer.on_step)
        steps, evals, later = [], [], []
        trainer.on_step = lambda m: steps.append(m.step)
        trainer.on_eval = evals.append
        trainer.step()
        trainer.step()
        self.assertEqual(steps, [1, 2])
        self.assertEqual([m.step for m in evals], [2])

        def switch(m):                   # replaced from inside a callback: the next step sees it
            trainer.on_step = later.append

        trainer.on_step = switch
        trainer.step()
        trainer.on_eval = None
        trainer.run()
        self.assertEqual([m.step for m in later], [4])
        self.assertEqual(len(evals), 1)
        self.assertEqual(trainer.on_step, later.append)
        with self.assertRaisesRegex(TypeError, "on_step must be callable or None, got int"):
            trainer.on_step = 3
        # a callback given at construction is the attribute's value, and can be removed
        seen = []
        trainer = self.trainer(steps=3, on_step=seen.append)
        self.assertEqual(trainer.on_step, seen.append)
        trainer.step()
        trainer.on_step = None
        trainer.run()
        self.assertEqual(len(seen), 1)
        trainer.close()
        with self.assertRaises(lattice.ClosedError):
            trainer.on_step = print

    def test_defaults_from_a_later_library(self):
        """A later 1.x library's _init fills a larger struct (ctypes binds the newest
        version): defaults() gives it room, keeps the fields this package knows and
        says so in size; it wrote past the Python struct."""
        from unittest import mock

        from lattice import _lib, _types
        real = _lib.lib.lattice_model_params_init
        size = ctypes.sizeof(_types.ModelParams)

        def grown_init(p):   # a 1.x release whose struct is 24 bytes longer
            real(p)
            ctypes.memset(ctypes.addressof(p.contents) + size, 0xAB, 24)
            ctypes.c_size_t.from_address(ctypes.addressof(p.contents)).value = size + 24

        with mock.patch.object(_lib.lib, "lattice_model_params_init", grown_init):
            params = _types.ModelParams.defaults()
        self.assertEqual(params.size, size)
        self.assertEqual(bytes(params), bytes(_types.ModelParams.defaults()))
        model = lattice.Model(params, vocab_size=VOCAB, d_model=16, n_layers=1, n_active_layers=1,
                              n_heads=2, n_kv_heads=1, head_dim=8, d_ff=32, max_batch=1, max_seq=4,
                              backend="ref")
        self.assertEqual(model.n_layers, 1)

    def test_params_are_read_only_copies(self):
        model = tiny_model()
        with self.assertRaises(AttributeError) as cm:
            model.params.d_model = 99
        self.assertIn("ModelParams.d_model cannot be set: this is a read-only copy",
                      str(cm.exception))
        self.assertIn("lattice.Model(model.params, d_model=64)", str(cm.exception))
        self.assertIn("model.active_layers = n", str(cm.exception))
        self.assertEqual(model.params.d_model, 16)
        with self.assertRaises(AttributeError):
            model.params.update(n_layers=3)
        # the copy is still a ModelParams: equal to one, and the base of another model
        self.assertEqual(model.params, lattice.ModelParams.make(model.params))
        wider = lattice.Model(model.params, d_model=32, backend="ref")
        self.assertEqual(wider.params.d_model, 32)
        changed = lattice.ModelParams.make(model.params, d_model=24)
        changed.d_ff = 48                                   # a made copy is the caller's
        self.assertEqual((changed.d_model, changed.d_ff), (24, 48))
        optim, data, loss = lattice.Optim(model), tiny_data(), lattice.Distill()
        schedule = lattice.Schedule.preset("grow", 2, 1, 3)
        for settings, field, how in ((optim.params, "lr", "optim.set_params(lr=...)"),
                                     (data.params, "batch_size", "lattice.Data.from_memory"),
                                     (loss.params, "tau", "lattice.Distill(loss.params"),
                                     (schedule.phase(0), "steps", "lattice.Schedule(")):
            with self.subTest(type(settings).__name__):
                with self.assertRaises(AttributeError) as cm:
                    setattr(settings, field, 2)
                self.assertIn("read-only copy", str(cm.exception))
                self.assertIn(how, str(cm.exception))
        optim.set_params(lr=2e-3)
        self.assertEqual(optim.params.lr, 2e-3)
        self.assertEqual(lattice.Schedule([schedule.phase(0)]).phase(0).steps, 3)

    def test_mask_values_other_than_0_and_1(self):
        model = tiny_model()
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        _, counted = model.cross_entropy(targets, mask=bytes([1, 0, 1, 1, 1, 1, 1, 1]))
        self.assertEqual(counted, 7)
        for call in (model.cross_entropy, model.cross_entropy_value):
            with self.assertRaisesRegex(ValueError, r"^mask: value 2 at position 5; a mask "
                                        r"holds 0 \(the position does not count\) or 1"):
                call(targets, mask=bytes([1, 1, 1, 1, 1, 2, 1, 1]))
        with self.assertRaisesRegex(ValueError, r"mask: value 255 at position 0"):
            model.cross_entropy_value(targets, mask=[255, 1, 1, 1, 1, 1, 1, 1])
        with self.assertRaisesRegex(ValueError, r"mask: value -1 at position 7"):
            model.cross_entropy_value(targets, mask=array.array("b", [1] * 7 + [-1]))
        loss = lattice.Distill()
        s = array.array("f", [0.5] * (2 * VOCAB))
        with self.assertRaisesRegex(ValueError, r"mask: value 3 at position 1"):
            loss.dense(s, s, array.array("i", [1, 2]), mask=bytes([1, 3]), vocab=VOCAB)
        diag = lattice.Diag(model)
        with self.assertRaisesRegex(ValueError, r"mask: value 2 at position 0"):
            diag.block_removal([[1, 2, 3, 4], [5, 6, 7, 8]], targets, 0, 1,
                               mask=bytes([2, 1, 1, 1, 1, 1, 1, 1]))
        if numpy is not None:
            mask = numpy.ones((2, 4), dtype=numpy.uint8)
            mask[1, 2] = 2
            with self.assertRaisesRegex(ValueError, r"value 2 at position 6 \(index \(1, 2\)\)"):
                model.cross_entropy_value(targets, mask=mask)
            self.assertEqual(model.cross_entropy_value(targets, mask=mask == 1)[1], 7)   # bool masks

    def test_strided_inputs_are_copied(self):
        model = tiny_model()
        rows = [[1, 2, 3, 4], [5, 6, 7, 8]]
        model.forward(rows)
        expected = model.logits().tolist()
        interleaved = array.array("i", [t for row in rows for x in row for t in (x, 0)])
        model.forward(memoryview(interleaved)[::2], batch=2, seq=4)   # a strided 1-D view
        self.assertEqual(model.logits().tolist(), expected)
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        ce = model.cross_entropy_value(targets)
        spread = array.array("i", [t for x in targets for t in (x, -1)])
        self.assertEqual(model.cross_entropy_value(memoryview(spread)[::2]), ce)
        mask = bytes([1, 0] * 8)
        self.assertEqual(model.cross_entropy_value(targets, mask=memoryview(mask)[::2]), ce)
        # outputs: a copy would take what the library writes, so they are refused, saying why
        loss = lattice.Distill()
        grad = array.array("f", [0.0] * (2 * 8 * VOCAB))
        with self.assertRaisesRegex(ValueError, r"dlogits: the buffer must be C-contiguous, "
                                    r"as the library writes into it and what it wrote into "
                                    r"a copy would be lost"):
            loss.dense(model.logits(), model.logits(), targets,
                       dlogits=memoryview(grad)[::2])
        if numpy is None:
            return
        tok = (numpy.arange(4 * 24, dtype=numpy.int32) % (VOCAB - 1) + 1).reshape(4, 24)
        model.forward(numpy.ascontiguousarray(tok[:2, :10]))
        expected = model.logits().tolist()
        model.forward(tok[:2, :10])                              # the slice
        self.assertEqual(model.logits().tolist(), expected)
        model.forward(tok.astype(numpy.int64)[:2, :10])          # strided and converted
        self.assertEqual(model.logits().tolist(), expected)
        model.forward(numpy.asfortranarray(tok[:2, :10]))
        self.assertEqual(model.logits().tolist(), expected)
        wide = numpy.zeros((8, 2 * VOCAB), dtype=numpy.float32)
        with self.assertRaisesRegex(ValueError, "what it wrote into a copy would be lost"):
            loss.dense(numpy.asarray(model.logits()).reshape(-1, VOCAB)[:8],
                       numpy.asarray(model.logits()).reshape(-1, VOCAB)[:8],
                       numpy.arange(8, dtype=numpy.int32), dlogits=wide[:, :VOCAB])

    def test_backward_overwrites_the_gradients(self):
        doc = lattice.Model.backward.__doc__
        self.assertIn("overwrites the gradients", doc)
        self.assertIn("a second ``backward()``", doc)
        model = tiny_model()
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])
        model.cross_entropy(array.array("i", [2, 3, 4, 5, 6, 7, 8, 9]))
        model.backward()
        tensor = model.tensor(0)
        once = tensor.grad.tolist()
        self.assertTrue(any(any(row) for row in once))
        model.backward()                                 # the same gradient again, not twice it
        self.assertEqual(tensor.grad.tolist(), once)

    def test_preset_budgets_are_named(self):
        totals = {name: lattice.Schedule.preset(name, 3, 2, 30).total_steps
                  for name in ("joint", "grow", "joint_matched_active", "joint_matched_total")}
        self.assertEqual(totals, {"joint": 30, "grow": 90, "joint_matched_active": 60,
                                  "joint_matched_total": 90})
        doc = lattice.Schedule.preset.__doc__
        for text in ('``preset("joint", 3, 2, 30)`` is one phase of', "(90 steps",
                     '"joint_matched_active"', '"joint_matched_total"', "active-layer tokens",
                     "total tokens"):
            self.assertIn(text, doc)
        self.assertIn("budget-matched", lattice.Schedule.__doc__)


class CallerInputTest(unittest.TestCase):
    """What a caller passes that the package once took silently, or refused with the
    wrong error (a review of its less-travelled calls)."""

    def test_sizes_are_whole_and_agree_with_a_2d_input(self):
        model = tiny_model()
        with self.assertRaises(TypeError) as cm:   # ran 2 x 1 over 2 of the 4 tokens
            model.forward([1, 2, 3, 4], batch=2.5, seq=1.6)
        self.assertIn("batch must be an integer", str(cm.exception))
        with self.assertRaises(TypeError):
            model.forward([1, 2, 3, 4], batch=True, seq=4)
        tokens = memoryview(array.array("i", range(1, 9))).cast("B").cast("i", (2, 4))
        with self.assertRaises(ValueError) as cm:  # was reshaped to 4 x 2
            model.forward(tokens, batch=4, seq=2)
        self.assertIn("a [2, 4] input given batch 4", str(cm.exception))
        with self.assertRaises(ValueError):
            model.forward([[1, 2], [3, 4]], batch=1, seq=4)
        model.forward(tokens, batch=2)             # sizes that agree are taken
        self.assertEqual(model.forward_shape, (2, 4))
        model.forward([1, 2, 3, 4], batch=2)
        self.assertEqual(model.forward_shape, (2, 2))
        for call in (lambda: model.flops(0, 4), lambda: model.flops(2, -1)):
            with self.assertRaises(ValueError):   # the C getter gives 0 for them
                call()
        self.assertGreater(model.flops(2, 4), 0.0)

    def test_no_nul_in_paths_and_names(self):
        model = tiny_model()
        with tempfile.TemporaryDirectory() as d:
            for call in (lambda: model.save(os.path.join(d, "a.safetensors\0.bak")),
                         lambda: model.save_config(os.path.join(d, "c.json\0x"),
                                                   qwen3_only=False),
                         lambda: lattice.Data.from_text(os.path.join(d, "t\0.txt"))):
                with self.assertRaises(ValueError) as cm:
                    call()
                self.assertIn("embedded null byte", str(cm.exception))
            self.assertEqual(os.listdir(d), [])   # "a.safetensors" was written
        with self.assertRaises(ValueError):
            model.tensor("model.embed_tokens.weight\0junk")
        with self.assertRaises(ValueError):
            lattice.Backend("ref\0junk")
        with self.assertRaises(ValueError):
            lattice.DataParams.make(val_path="v\0.txt")
        for name in (None, b"ref"):
            with self.assertRaises(TypeError) as cm:
                lattice.Backend(name)
            self.assertIn("name must be a str", str(cm.exception))

    def test_pretrained_folders_as_bytes_and_deep_configs(self):
        model = tiny_model()
        with tempfile.TemporaryDirectory() as d:
            where = os.fsencode(os.path.join(d, "m"))
            model.save_pretrained(where)
            self.assertEqual(lattice.Model.from_pretrained(where, backend="ref").n_layers, 2)
            deep = os.path.join(d, "deep")
            model.save_pretrained(deep)
            with open(os.path.join(deep, "config.json"), "w") as f:
                f.write("[" * 100000 + "]" * 100000)
            with self.assertRaises(lattice.LatticeError) as cm:
                lattice.Model.from_pretrained(deep)
            self.assertEqual(cm.exception.code, lattice.Status.FORMAT)

    def test_distill_in_place_and_k(self):
        loss = lattice.Distill()
        rows, vocab = 3, 5
        student = array.array("f", [0.1 * ((7 * i) % 11) for i in range(rows * vocab)])
        teacher = array.array("f", [0.2 * ((5 * i) % 7) for i in range(rows * vocab)])
        targets = array.array("i", [1, 4, 2])
        apart = array.array("f", [0.0] * (rows * vocab))
        r = loss.dense(student, teacher, targets, vocab=vocab, dlogits=apart)
        work = array.array("f", student)
        same = loss.dense(work, teacher, targets, vocab=vocab, dlogits=work)
        self.assertEqual((same.loss, same.kl, same.ce), (r.loss, r.kl, r.ce))
        self.assertEqual(work.tolist(), apart.tolist())   # the gradient, in place
        with self.assertRaises(lattice.LatticeError) as cm:
            loss.dense(student, teacher, targets, vocab=vocab, dlogits=teacher)
        self.assertIn("overlaps the teacher", str(cm.exception))
        with self.assertRaises(TypeError):
            loss.dense(student, teacher, targets, vocab=2.5)
        index = array.array("i", [0, 1, 2, 3, 4, 0])
        value = array.array("f", [1.0] * 6)
        for k, needle in ((-1, "k -1 must be in 1..vocab"), (6, "k 6 must be in 1..vocab")):
            with self.assertRaises(ValueError) as cm:
                loss.topk(student, index, value, targets, vocab=vocab, k=k)
            self.assertIn(needle, str(cm.exception))
        with self.assertRaises(ValueError) as cm:
            loss.topk(student, index[:2], value[:2], targets, vocab=vocab)
        self.assertIn("not k per position", str(cm.exception))
        self.assertGreater(loss.topk(student, index, value, targets, vocab=vocab).loss, 0.0)

    def test_sgemm_sizes_and_aliasing(self):
        be = lattice.Backend("ref")
        x = array.array("f", [1, 2, 3, 4])
        c = array.array("f", [0] * 4)
        with self.assertRaises(TypeError):
            be.sgemm(x, x, c, 2, 2, 2, lda="2")
        with self.assertRaises(TypeError):
            be.sgemm(x, x, c, 2.0, 2, 2)
        with self.assertRaises(lattice.LatticeError) as cm:   # gave [7, 22, 33, 742]
            be.sgemm(x, x, x, 2, 2, 2)
        self.assertIn("C overlaps A", str(cm.exception))
        be.sgemm(x, x, c, 2, 2, 2)
        self.assertEqual(c.tolist(), [7.0, 10.0, 15.0, 22.0])

    def test_handles_are_not_copied(self):
        import copy
        import pickle
        model = tiny_model()
        for call in (copy.copy, copy.deepcopy, pickle.dumps):
            with self.assertRaises(TypeError) as cm:   # deepcopy made a second owner
                call(model)
            self.assertIn("cannot be copied or pickled", str(cm.exception))
        model.forward([[1, 2]])

    def test_diag_sizes_and_teacher_record(self):
        diag = lattice.Diag(tiny_model())
        for n_classes in (-1, 0):   # were IndexError and ValueError from the package
            with self.assertRaises(lattice.LatticeError) as cm:
                diag.boundary_scale([[1, 2, 3]], n_classes=n_classes)
            self.assertIn("n_classes", str(cm.exception))
        with self.assertRaises(TypeError):
            diag.boundary_scale([[1, 2, 3]], n_classes=2.5)
        with self.assertRaises(TypeError):
            diag.attention_sinks([[1, 2, 3]], threshold="0.3")
        teacher = lattice.Teacher.from_model(tiny_model())
        with self.assertRaises(TypeError) as cm:
            teacher.record(None, 1, "unused.safetensors")
        self.assertIn("data must be a lattice.Data", str(cm.exception))
        with self.assertRaises(ValueError):
            teacher.flops(-1, 3)
        with self.assertRaises(lattice.LatticeError) as cm:   # said "must be positive"
            lattice.Data.from_memory(array.array("i", [0, 1, 2, 3] * 8), vocab_size=VOCAB,
                                     boundary_id=0, batch_size=1, seq_len=1 << 25)
        self.assertIn("must be in 1..1048576 and 1..16777216", str(cm.exception))


if __name__ == "__main__":
    unittest.main(verbosity=2)
