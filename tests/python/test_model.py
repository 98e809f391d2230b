"""Norms and the model: passes, parameters, growth, files and evaluation.

Forward and backward, parameter groups, growth, safetensors and a pretrained
Qwen3, and evaluation without a trainer.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import json
import math
import os
import tempfile
import unittest

import lattice
from lattice import LatticeError, Status
from lattice_helpers import VOCAB, numpy, tiny_data, tiny_model


class NormTest(unittest.TestCase):
    def test_norm(self):
        with lattice.Norm("post", "layer", 1e-5) as n:
            self.assertEqual(n.placement, lattice.NormPlacement.POST)
            self.assertEqual(n.kind, lattice.NormKind.LAYER)
            self.assertAlmostEqual(n.eps, 1e-5)
            self.assertEqual(n.residual_scale, 1.0)
            n.residual_scale = 2.0
            self.assertEqual(n.residual_scale, 2.0)
        with lattice.Norm() as n, self.assertRaises(LatticeError) as cm:
            n.residual_scale = 2.0          # pre-norm has no residual scale
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError):
            lattice.Norm("pre", "rms", -1.0)
        self.assertEqual(lattice.Norm.placement_name(lattice.NormPlacement.PERI), "peri")
        self.assertEqual(lattice.Norm.placement_from_name("post"), lattice.NormPlacement.POST)
        with self.assertRaises(LatticeError) as cm:
            lattice.Norm.placement_from_name("sideways")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND)


class ModelTest(unittest.TestCase):
    def test_bad_config(self):
        with self.assertRaises(LatticeError) as cm:
            tiny_model(n_heads=3, n_kv_heads=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("n_kv_heads", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            lattice.Model.check_params(n_active_layers=0)
        self.assertIn(cm.exception.code, (Status.INVALID_CONFIG, Status.INVALID_ARGUMENT))
        lattice.Model.check_params()   # the defaults are a valid shape

    def test_forward_and_views(self):
        model = tiny_model(norm="peri")
        self.assertEqual(model.placement, lattice.NormPlacement.PERI)
        self.assertEqual(model.params.vocab_size, VOCAB)
        self.assertGreater(model.n_params, 0)
        self.assertGreater(model.arena_bytes, 0)
        self.assertGreater(model.flops(2, 8, with_backward=True), model.flops(2, 8))
        with self.assertRaises(LatticeError) as cm:
            model.logits()
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])        # a list of rows
        logits = model.logits()
        self.assertEqual(logits.shape, (2, 4, VOCAB))
        self.assertEqual(logits.format, "f")
        self.assertTrue(logits.readonly)                    # a copy, the caller's own, read-only
        view = model.logits_view()
        self.assertTrue(view.readonly)
        self.assertEqual(view.tolist(), logits.tolist())
        self.assertTrue(all(math.isfinite(x) for x in logits.cast("B").cast("f")))
        loss, counted = model.cross_entropy(array.array("i", [2, 3, 4, 5, 6, 7, 8, 9]),
                                            mask=bytes([1, 1, 1, 0, 1, 1, 1, 0]))
        self.assertEqual(counted, 6)
        self.assertAlmostEqual(loss, math.log(VOCAB), delta=0.5)
        d = model.dlogits_view()
        self.assertFalse(d.readonly)
        self.assertEqual(d.shape, (2, 4, VOCAB))
        self.assertEqual(d[0, 3, 0], 0.0)                 # masked position: no gradient
        self.assertEqual(model.dlogits().tolist(), d.tolist())
        model.backward()
        # A copy keeps its values through the next forward; a view shows the new ones.
        model.forward([[9, 9, 9, 9], [1, 1, 1, 1]])
        self.assertNotEqual(model.logits().tolist(), logits.tolist())
        self.assertEqual(view.tolist(), model.logits().tolist())

    def test_reading_dlogits_is_no_loss(self):
        model = tiny_model()
        model.forward([[1, 2, 3, 4], [5, 6, 7, 8]])
        self.assertEqual(model.dlogits().shape, (2, 4, VOCAB))
        with self.assertRaises(lattice.LatticeError) as cm:
            model.backward()
        self.assertEqual(cm.exception.code, lattice.Status.STATE)
        self.assertIn("no loss since the last forward", str(cm.exception))
        model.cross_entropy(array.array("i", [2, 3, 4, 5, 6, 7, 8, 9]))
        self.assertEqual(model.dlogits().tolist(), model.dlogits_view().tolist())
        model.backward()

    def test_copies_are_read_only(self):
        model = tiny_model()
        tokens = [[1, 2, 3, 4], [5, 6, 7, 8]]
        targets = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
        model.forward(tokens)
        model.cross_entropy(targets)
        for copy in (model.logits(), model.dlogits(), model.hidden(1)):
            self.assertTrue(copy.readonly)
            with self.assertRaises(TypeError):
                copy[0, 0, 0] = 1.0
        # 0.2's way to distill into the model: refused, naming the view to use
        teacher = array.array("f", [0.0] * (8 * VOCAB))
        loss = lattice.Distill()
        for dl in (model.dlogits(), memoryview(model.dlogits()).cast("B").cast("f")):
            with self.assertRaises(TypeError) as cm:
                loss.dense(model.logits(), teacher, targets, dlogits=dl)
            self.assertIn("dlogits: Model.dlogits() is a read-only copy", str(cm.exception))
            self.assertIn("model.dlogits_view()", str(cm.exception))
        with self.assertRaises(TypeError) as cm:
            loss.dense(model.logits(), teacher, targets, dlogits=model.logits())
        self.assertIn("Model.logits() is a read-only copy", str(cm.exception))
        if numpy is not None:
            arr = numpy.asarray(model.dlogits())
            self.assertFalse(arr.flags.writeable)
            with self.assertRaises(TypeError) as cm:
                loss.dense(model.logits(), teacher, targets, dlogits=arr)
            self.assertIn("model.dlogits_view()", str(cm.exception))
        # the view takes the gradient, and backward reads it
        r = loss.dense(model.logits(), teacher, targets, dlogits=model.dlogits_view())
        self.assertGreater(r.loss, 0.0)
        self.assertEqual(model.dlogits().tolist(), model.dlogits_view().tolist())
        model.backward()

    def test_list_tokens_and_2d_buffers(self):
        model = tiny_model()
        model.forward([1, 2, 3, 4, 5, 6], batch=2)
        self.assertEqual(model.logits().shape, (2, 3, VOCAB))
        model.forward(array.array("i", range(6)), seq=6)
        self.assertEqual(model.logits().shape, (1, 6, VOCAB))

    def test_bad_input(self):
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", [1, 2, VOCAB + 5, 3]), 1, 4)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("vocabulary", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            model.forward(array.array("i", range(17)), 1, 17)        # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            model.forward(array.array("d", range(4)), 1, 4)           # float64, not int32
        model.forward(array.array("q", range(4)), 1, 4)               # int64: converted
        model.forward(array.array("B", range(4)), 1, 4)               # uint8: converted
        with self.assertRaisesRegex(ValueError, r"tokens: value 2147483648 is outside int32"):
            model.forward(array.array("q", [1, 2, 2**31, 3]), 1, 4)
        with self.assertRaisesRegex(ValueError, r"targets: value -2147483649 is outside int32"):
            model.cross_entropy(array.array("q", [1, 2, -2**31 - 1, 3]))
        with self.assertRaisesRegex(ValueError, r"tokens: value 4294967296 is outside int32"):
            model.forward([1, 2, 2**32, 3], 1, 4)
        with self.assertRaises(TypeError):
            model.forward("abcd", 1, 4)
        with self.assertRaisesRegex(TypeError, r"targets: a flat sequence of int32 \(the values "
                                    r"row after row\), got a sequence of sequences"):
            model.cross_entropy([[1, 2, 2, 3]])
        with self.assertRaises(ValueError):
            model.forward(array.array("i", range(5)), 1, 4)           # wrong length
        model.forward(memoryview(array.array("i", range(8)))[::2], 1, 4)   # strided: copied
        model.forward(memoryview(array.array("q", range(8)))[::2], 1, 4)   # and converted
        with self.assertRaises(ValueError):
            model.forward(array.array("i", range(4)))                 # flat without sizes
        model.forward(array.array("i", range(4)), 1, 4)
        with self.assertRaises(ValueError):
            model.cross_entropy(array.array("i", range(3)))
        with self.assertRaises(LatticeError) as cm:
            model.cross_entropy(array.array("i", [0, 1, 2, 99]))
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError):
            model.active_layers = 3
        with self.assertRaises(LatticeError) as cm:
            model.tensor("no.such.tensor")
        self.assertEqual(cm.exception.code, Status.NOT_FOUND)
        with self.assertRaises(LatticeError):
            model.tensor(10_000)

    def test_hidden_states(self):
        model = tiny_model(n_layers=3, n_active_layers=2)
        tokens = array.array("i", range(1, 9))
        model.forward(tokens, 2, 4)
        hs = [model.hidden(i) for i in range(3)]
        for i, h in enumerate(hs):
            self.assertEqual(h.shape, (2, 4, 16))
            self.assertTrue(h.readonly)                 # a read-only copy
            self.assertTrue(model.hidden_view(i).readonly)
            self.assertEqual(model.hidden_view(i).tolist(), h.tolist())
        self.assertNotEqual(hs[0].tolist(), hs[2].tolist())
        with self.assertRaises(LatticeError) as cm:
            model.hidden(3)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        # Pre-norm with zeroed output projections: the layer is the identity.
        model.zero_layer_outputs(0)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(0).tolist(), model.hidden(1).tolist())
        model.active_layers = 3
        with self.assertRaises(LatticeError) as cm:
            model.hidden(0)                 # no forward since the depth changed
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(3).shape, (2, 4, 16))
        model.set_skip(1, 1)
        model.forward(tokens, 2, 4)
        self.assertEqual(model.hidden(1).tolist(), model.hidden(2).tolist())
        model.set_skip(0, 0)

    def test_tensors(self):
        model = tiny_model()
        tensors = model.tensors
        self.assertEqual(len(tensors), model.n_tensors)
        self.assertEqual(sum(math.prod(t.shape) for t in tensors), model.n_params)
        names = [t.name for t in tensors]
        self.assertIn("lm_head.weight", names)
        self.assertIn("model.layers.1.self_attn.q_proj.weight", names)
        q = model.tensor("model.layers.1.self_attn.q_proj.weight")
        self.assertEqual((q.group, q.layer, q.ndim), (lattice.Group.LAYER, 1, 2))
        self.assertEqual(q.shape, (2 * 8, 16))
        self.assertEqual(q.data.shape, q.shape)
        head = model.tensor("lm_head.weight")
        self.assertEqual(head.group, lattice.Group.HEAD)
        # Writing through the view changes the model: a zero head gives zero logits.
        flat = head.data.cast("B").cast("f")
        for i in range(len(flat)):
            flat[i] = 0.0
        model.forward(array.array("i", range(4)), 1, 4)
        self.assertTrue(all(x == 0.0 for x in model.logits().cast("B").cast("f")))
        # Gradients appear after backward.
        model.cross_entropy(array.array("i", range(1, 5)))
        model.backward()
        self.assertTrue(any(x != 0.0 for x in head.grad.cast("B").cast("f")))

    def test_layers_and_trainable(self):
        model = tiny_model()
        a = model.tensor("model.layers.0.mlp.down_proj.weight")
        b = model.tensor("model.layers.1.mlp.down_proj.weight")
        self.assertNotEqual(a.data.tolist(), b.data.tolist())
        model.copy_layer(1, 0)
        self.assertEqual(a.data.tolist(), b.data.tolist())
        model.init_layer(1, seed=123)
        self.assertNotEqual(a.data.tolist(), b.data.tolist())
        self.assertTrue(model.is_trainable("layer", layer=1))
        model.set_trainable(lattice.Group.LAYER, False, layer=1)
        self.assertFalse(model.is_trainable(lattice.Group.LAYER, layer=1))
        model.set_trainable("embedding", False)
        self.assertFalse(model.is_trainable("embedding"))
        with self.assertRaises(LatticeError):
            model.set_trainable("layer", True, layer=9)

    def test_training_lowers_the_loss(self):
        model = tiny_model()
        optim = lattice.Optim(model, lr=1e-2, min_lr=1e-3, warmup_steps=0, total_steps=40)
        self.assertAlmostEqual(optim.params.lr, 1e-2)
        tokens = array.array("i", [(i % 16) + 1 for i in range(4 * 12)])
        targets = array.array("i", [(i % 16) % 31 + 2 for i in range(4 * 12)])
        losses = []
        for _ in range(30):
            model.forward(tokens, 4, 12)
            loss, _ = model.cross_entropy(targets)
            model.backward()
            norm = optim.step()
            self.assertTrue(math.isfinite(norm))
            losses.append(loss)
        self.assertEqual(optim.steps, 30)
        self.assertLess(losses[-1], 0.5 * losses[0])
        optim.set_params(clip_norm=0.0)
        self.assertEqual(optim.params.clip_norm, 0.0)
        self.assertAlmostEqual(optim.params.lr, 1e-2)
        optim.reset()
        self.assertEqual(optim.steps, 0)
        with self.assertRaises(LatticeError) as cm:
            lattice.Optim(model, lr=-1.0)
        self.assertIn(cm.exception.code, (Status.INVALID_CONFIG, Status.INVALID_ARGUMENT))

    @unittest.skipIf(numpy is None, "NumPy is not installed")
    def test_numpy(self):
        model = tiny_model()
        tokens = numpy.arange(8, dtype=numpy.int32).reshape(2, 4)
        model.forward(tokens)
        logits = numpy.asarray(model.logits())
        self.assertEqual(logits.shape, (2, 4, VOCAB))
        self.assertEqual(logits.dtype, numpy.float32)
        before = logits.copy()
        model.forward(tokens.astype(numpy.int64))           # NumPy's default integer type
        numpy.testing.assert_array_equal(numpy.asarray(model.logits()), before)
        model.forward(numpy.arange(8).reshape(2, 4) + 1)    # logits is a copy: unchanged
        numpy.testing.assert_array_equal(logits, before)
        self.assertFalse(logits.flags.writeable)            # a read-only copy
        self.assertFalse(numpy.array_equal(numpy.asarray(model.logits_view()), before))
        with self.assertRaisesRegex(ValueError, r"value 3000000000 is outside int32"):
            model.forward(numpy.array([[1, 3_000_000_000]]))
        with self.assertRaises(TypeError):
            model.forward(numpy.ones((2, 4)))               # float64 ids: refused
        ids = numpy.arange(200, dtype=numpy.int64) % VOCAB
        data = lattice.Data.from_memory(ids, vocab_size=VOCAB, boundary_id=0, batch_size=1,
                                        seq_len=8, val_fraction=0.0, split_long=False)
        self.assertEqual(data.n_tokens(), 200)
        model.forward(numpy.asfortranarray(tokens))         # copied in C order
        numpy.testing.assert_array_equal(numpy.asarray(model.logits()), before)


class GrowTest(unittest.TestCase):
    """Model.grown: a model of larger capacity, without copying tensors by hand."""

    def small_trained(self):
        small = tiny_model(n_layers=3, n_active_layers=2, max_batch=2)
        optim = lattice.Optim(small, lr=1e-2, warmup_steps=0, total_steps=5)
        tokens = array.array("i", [(i % 16) + 1 for i in range(2 * 8)])
        for _ in range(3):
            small.forward(tokens, 2, 8)
            small.cross_entropy(tokens)
            small.backward()
            optim.step()
        optim.close()
        small.set_trainable("layer", False, layer=1)
        return small, tokens

    def test_grown_keeps_every_tensor_and_setting(self):
        small, tokens = self.small_trained()
        big = small.grown(6, max_batch=4)
        self.assertEqual((big.n_layers, big.active_layers), (6, 2))
        self.assertEqual((big.params.max_batch, big.params.max_seq), (4, small.params.max_seq))
        self.assertEqual(big.params.seed, small.params.seed)
        self.assertEqual(big.placement, small.placement)
        self.assertFalse(big.is_trainable("layer", layer=1))
        self.assertTrue(big.is_trainable("layer", layer=5))
        for t in small.tensors:     # every tensor, bit for bit
            self.assertEqual(big.tensor(t.name).data.tobytes(), t.data.tobytes(), t.name)
        # the new layers as a model created at that capacity draws them
        fresh = lattice.Model(small.params, n_layers=6, backend="ref")
        for t in big.tensors:
            if t.layer >= 3:
                self.assertEqual(t.data.tobytes(), fresh.tensor(t.name).data.tobytes(), t.name)
        self.assertEqual(big.n_tensors, fresh.n_tensors)
        # only the old layers active: the small model's logits, bit for bit
        small.forward(tokens, 2, 8)
        big.forward(tokens, 2, 8)
        self.assertEqual(big.logits().tobytes(), small.logits().tobytes())
        big.active_layers = 6           # past the small model's capacity
        big.forward(array.array("i", [1] * 4 * 8), 4, 8)
        with self.assertRaises(LatticeError) as cm:
            small.active_layers = 4
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIs(big.backend, small.backend)
        other = small.grown(3, backend="ref")     # another backend; 3 layers: a copy
        self.assertIsNot(other.backend, small.backend)
        self.assertEqual(other.n_layers, 3)

    def test_grown_refuses_bad_arguments(self):
        small = tiny_model(n_layers=3)
        with self.assertRaises(LatticeError) as cm:
            small.grown(2)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("n_layers 2 is below the model's 3 layers", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            small.grown(6, max_seq=-1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("max_seq -1", str(cm.exception))
        with self.assertRaises(LatticeError) as cm:
            small.grown(5000)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        with self.assertRaises(TypeError) as cm:
            small.grown(6.0)
        self.assertIn("Model.grown n_layers must be an integer", str(cm.exception))
        self.assertEqual(small.n_layers, 3)


class SafetensorsTest(unittest.TestCase):
    def test_save_load_and_reopen(self):
        with tempfile.TemporaryDirectory() as tmp:
            path = os.path.join(tmp, "model.safetensors")
            a = tiny_model(seed=1, norm="post")
            a.save(path)
            b = tiny_model(seed=2, norm="post")
            name = "model.layers.0.self_attn.q_proj.weight"
            self.assertNotEqual(a.tensor(name).data.tolist(), b.tensor(name).data.tolist())
            b.load(path)
            self.assertEqual(a.tensor(name).data.tolist(), b.tensor(name).data.tolist())
            c = lattice.Model.from_file(path, backend="ref", max_batch=2, max_seq=8)
            self.assertEqual(c.placement, lattice.NormPlacement.POST)
            self.assertEqual((c.params.max_batch, c.params.max_seq), (2, 8))
            self.assertEqual(c.n_params, a.n_params)
            tokens = array.array("i", range(8))
            a.forward(tokens, 1, 8)
            c.forward(tokens, 1, 8)
            self.assertEqual(a.logits().tolist(), c.logits().tolist())
            # Errors: a missing file, a malformed one, a shape that does not fit.
            with self.assertRaises(LatticeError) as cm:
                b.load(os.path.join(tmp, "missing.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)
            junk = os.path.join(tmp, "junk.safetensors")
            with open(junk, "wb") as f:
                f.write(b"\xff" * 64)
            with self.assertRaises(LatticeError) as cm:
                b.load(junk)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_file(junk, backend="ref")
            self.assertEqual(cm.exception.code, Status.FORMAT)
            self.assertIn("junk.safetensors", str(cm.exception))
            with self.assertRaises(LatticeError) as cm:
                tiny_model(d_model=32).load(path)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            with self.assertRaises(LatticeError) as cm:
                a.save(os.path.join(tmp, "no", "such", "dir", "m.safetensors"))
            self.assertEqual(cm.exception.code, Status.IO)

    def test_estimate(self):
        model = tiny_model(norm="peri")
        n_params, arena = lattice.Model.estimate(model.params, norm="peri")
        self.assertEqual(n_params, model.n_params)
        self.assertEqual(arena, model.arena_bytes)
        with self.assertRaises(LatticeError) as cm:
            lattice.Model.estimate(n_heads=3, n_kv_heads=2)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn("n_kv_heads", str(cm.exception))


class PretrainedTest(unittest.TestCase):
    def check_round_trip(self, model, expect_type):
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        expected = model.logits().tolist()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(os.path.join(tmp, "out"))
            self.assertEqual(sorted(os.listdir(os.path.join(tmp, "out"))),
                             ["config.json", "model.safetensors"])
            with open(os.path.join(tmp, "out", "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["model_type"], expect_type)
            self.assertEqual(config["hidden_size"], model.d_model)
            self.assertEqual(config["lattice"]["placement"], model.placement.name.lower())
            again = lattice.Model.from_pretrained(os.path.join(tmp, "out"), backend="ref",
                                                  max_batch=2, max_seq=4)
            self.assertEqual(again.placement, model.placement)
            self.assertEqual(again.active_layers, model.active_layers)
            again.forward(tokens, 2, 4)
            self.assertEqual(again.logits().tolist(), expected)
            # The single-file form still reads the same weights.
            single = lattice.Model.from_file(os.path.join(tmp, "out", "model.safetensors"),
                                             backend="ref", max_batch=2, max_seq=4)
            single.forward(tokens, 2, 4)
            self.assertEqual(single.logits().tolist(), expected)
            return config, tmp, expected, tokens

    def test_qwen3_round_trip_and_config(self):
        model = tiny_model(qk_norm=1)
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        expected = model.logits().tolist()
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["architectures"], ["Qwen3ForCausalLM"])
            self.assertEqual(config["rms_norm_eps"], 1e-6)
            # Read as a Hugging Face checkpoint: config.json alone gives the shape.
            del config["lattice"]
            with open(os.path.join(tmp, "config.json"), "w") as f:
                json.dump(config, f)
            hf = lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            hf.forward(tokens, 2, 4)
            # against the logits taken before the save: saving changed nothing
            got = hf.logits().tolist()
            self.assertEqual(len(got), len(expected))
            for a, b in zip(got, expected):
                self.assertAlmostEqual(a, b, places=5)
        self.check_round_trip(tiny_model(qk_norm=1), "qwen3")

    def test_post_norm_round_trip(self):
        model = tiny_model(norm=lattice.Norm("post", residual_scale=1.5), n_layers=3,
                           n_active_layers=2)
        config, *_ = self.check_round_trip(model, "lattice")
        self.assertNotIn("architectures", config)
        self.assertEqual(config["lattice"]["residual_scale"], 1.5)

    @staticmethod
    def pre_0_5_config(model, qwen3, placement, norm, eps, scale):
        """The config.json Python's save_pretrained wrote itself before lattice_model_save_config, key for key."""
        p = model.params
        config = {"architectures": ["Qwen3ForCausalLM"]} if qwen3 else {}
        config.update({
            "model_type": "qwen3" if qwen3 else "lattice",
            "vocab_size": p.vocab_size, "hidden_size": p.d_model,
            "intermediate_size": p.d_ff, "num_hidden_layers": p.n_layers,
            "num_attention_heads": p.n_heads, "num_key_value_heads": p.n_kv_heads,
            "head_dim": p.head_dim, "hidden_act": "silu",
            "max_position_embeddings": p.max_seq, "rms_norm_eps": eps,
            "rope_theta": float(f"{p.rope_theta:.7g}"),
            "tie_word_embeddings": bool(p.tie_embeddings), "attention_bias": False,
            "torch_dtype": "float32",
            "lattice": {"placement": placement, "norm": norm, "eps": eps,
                        "residual_scale": scale, "qk_norm": p.qk_norm,
                        "n_active_layers": p.n_active_layers,
                        "version": lattice.version_string},
        })
        return config

    def test_config_is_the_one_python_wrote(self):
        """save_pretrained's config.json comes from C (lattice_model_save_config)
        through the C writer: the keys, their order, the values and the layout of
        json.dump(config, indent=2) that Python wrote before."""
        cases = [
            (dict(qk_norm=1, rope_theta=1e6), True, "pre", "rms", 1e-6, 1.0),
            (dict(qk_norm=1, tie_embeddings=1, norm=lattice.Norm("pre", eps=1e-5)), True,
             "pre", "rms", 1e-5, 1.0),
            (dict(qk_norm=0), False, "pre", "rms", 1e-6, 1.0),
            (dict(qk_norm=1, n_layers=3, n_active_layers=2), False, "pre", "rms", 1e-6, 1.0),
            (dict(norm=lattice.Norm("post", "layer", 1e-5, residual_scale=1.5)), False, "post",
             "layer", 1e-5, 1.5),
            (dict(norm="peri", rope_theta=5e5), False, "peri", "rms", 1e-6, 1.0),
        ]
        for fields, qwen3, placement, norm, eps, scale in cases:
            model = tiny_model(**fields)
            want = self.pre_0_5_config(model, qwen3, placement, norm, eps, scale)
            with self.subTest(fields=fields), tempfile.TemporaryDirectory() as tmp:
                model.save_pretrained(tmp)
                with open(os.path.join(tmp, "config.json"), encoding="utf-8") as f:
                    text = f.read()
                self.assertEqual(list(json.loads(text)), list(want))
                self.assertEqual(json.loads(text), want)
                self.assertEqual(text, json.dumps(want, indent=2) + "\n")

    def test_block_norm_is_not_qwen3(self):
        """Before the C writer a pre-norm model with a block-entry norm was written as
        model_type "qwen3": a Qwen3 loader would have dropped the norms."""
        model = tiny_model(qk_norm=1, n_layers=4, block_norm=2)
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            with open(os.path.join(tmp, "config.json")) as f:
                config = json.load(f)
            self.assertEqual(config["model_type"], "lattice")
            self.assertEqual(config["lattice"]["block_norm"], 2)
            with self.assertRaises(LatticeError) as cm:
                model.save_config(os.path.join(tmp, "qwen3.json"))
            self.assertEqual(cm.exception.code, Status.UNSUPPORTED)
            self.assertIn("block_norm 2 (Qwen3 has no block-entry norm)", str(cm.exception))
            self.assertFalse(os.path.exists(os.path.join(tmp, "qwen3.json")))
            again = lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            self.assertEqual(again.params.block_norm, 2)

    def test_save_config_qwen3(self):
        """Model.save_config: weights and config reopen through the Qwen3 path."""
        model = tiny_model(qk_norm=1)
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        with tempfile.TemporaryDirectory() as tmp:
            weights, config = os.path.join(tmp, "w.safetensors"), os.path.join(tmp, "c.json")
            model.save(weights)
            model.save_config(config)
            qwen = lattice.Model.from_file(weights, config, backend="ref", max_batch=2,
                                           max_seq=4)
            qwen.forward(tokens, 2, 4)
            self.assertEqual(bytes(qwen.logits()), bytes(model.logits()))
            with self.assertRaises(LatticeError) as cm:
                tiny_model(norm="post").save_config(config)
            self.assertEqual(cm.exception.code, Status.UNSUPPORTED)
            self.assertIn("a post-norm model (Qwen3 is pre-norm)", str(cm.exception))

    def test_missing_weights(self):
        with tempfile.TemporaryDirectory() as tmp:
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_pretrained(tmp)
            self.assertEqual(cm.exception.code, Status.NOT_FOUND)

    @staticmethod
    def drop_metadata(weights):
        """Rewrite a safetensors file without its __metadata__ (as some converters do)."""
        with open(weights, "rb") as f:
            blob = f.read()
        n = int.from_bytes(blob[:8], "little")
        header = json.loads(blob[8:8 + n])
        header.pop("__metadata__", None)
        text = json.dumps(header).encode()
        text += b" " * (-len(text) % 8)
        with open(weights, "wb") as f:
            f.write(len(text).to_bytes(8, "little") + text + blob[8 + n:])

    def test_bad_config_json(self):
        """A config.json that is not an object, or names a model_type the library
        cannot load, is refused naming the file and what is wrong (issue 38 part 5:
        5 and null raised a raw TypeError; gpt2 loaded, the config ignored)."""
        model = tiny_model(qk_norm=1)
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            path = os.path.join(tmp, "config.json")
            with open(path) as f:
                good = json.load(f)

            def refused(config, code, *words):
                with open(path, "w") as f:
                    json.dump(config, f)
                with self.subTest(config=config):
                    with self.assertRaises(LatticeError) as cm:
                        lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
                    self.assertEqual(cm.exception.code, code)
                    self.assertIn(path, str(cm.exception))
                    for w in words:
                        self.assertIn(w, str(cm.exception))

            refused(5, Status.FORMAT, "not a JSON object", "int")
            refused(None, Status.FORMAT, "not a JSON object", "null")
            refused([good], Status.FORMAT, "not a JSON object", "array")
            refused("qwen3", Status.FORMAT, "not a JSON object", "string")
            for ours in (True, False):  # with our "lattice" entry or without
                cfg = dict(good, model_type="gpt2")
                if not ours:
                    del cfg["lattice"]
                refused(cfg, Status.UNSUPPORTED, 'model_type "gpt2"', '"qwen3"', '"lattice"')
            refused(dict(good, model_type=3), Status.FORMAT, "model_type", "not a string")
            refused(dict(good, lattice=[1]), Status.FORMAT, '"lattice"', "not a JSON object")

    def test_weights_without_metadata(self):
        """Weights that lost their lattice.config metadata load through a valid Qwen3
        config.json beside them (issue 38 part 5: refused); a model_type "lattice"
        config cannot give the shape, and says so naming both files."""
        model = tiny_model(qk_norm=1)
        tokens = array.array("i", [1, 5, 9, 2, 7, 3, 3, 8])
        model.forward(tokens, 2, 4)
        with tempfile.TemporaryDirectory() as tmp:
            model.save_pretrained(tmp)
            weights, config = os.path.join(tmp, "model.safetensors"), os.path.join(tmp, "config.json")
            self.drop_metadata(weights)
            again = lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            again.forward(tokens, 2, 4)
            self.assertEqual(bytes(again.logits()), bytes(model.logits()))
            # The "lattice" entry beside Qwen3's keys must mean a Qwen3 model.
            with open(config) as f:
                good = json.load(f)
            bad = json.loads(json.dumps(good))
            bad["lattice"]["placement"] = "post"
            with open(config, "w") as f:
                json.dump(bad, f)
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            self.assertIn("lattice.placement", str(cm.exception))
            self.assertIn(weights, str(cm.exception))
        post = tiny_model(norm="post")
        with tempfile.TemporaryDirectory() as tmp:
            post.save_pretrained(tmp)
            weights = os.path.join(tmp, "model.safetensors")
            self.drop_metadata(weights)
            with self.assertRaises(LatticeError) as cm:
                lattice.Model.from_pretrained(tmp, backend="ref", max_batch=2, max_seq=4)
            self.assertEqual(cm.exception.code, Status.FORMAT)
            for w in (weights, os.path.join(tmp, "config.json"), "no lattice.config metadata",
                      'model_type "lattice"'):
                self.assertIn(w, str(cm.exception))


class InferenceTest(unittest.TestCase):
    """Evaluation without a trainer: forward_inference, loss and evaluate (since 0.2)."""

    TOKENS = [[1, 2, 3, 4], [5, 6, 7, 8]]
    TARGETS = array.array("i", [2, 3, 4, 5, 6, 7, 8, 9])
    MASK = bytes([1, 1, 1, 0, 1, 1, 1, 0])

    def test_forward_inference(self):
        model = tiny_model(norm="post")
        model.forward(self.TOKENS)
        want = model.logits().tolist()
        model.forward([[9, 9, 9, 9], [1, 1, 1, 1]])
        model.forward_inference(self.TOKENS)
        self.assertEqual(model.logits().tolist(), want)     # bit for bit
        model.cross_entropy(self.TARGETS)
        with self.assertRaises(LatticeError) as cm:
            model.backward()
        self.assertEqual(cm.exception.code, Status.STATE)
        self.assertIn("inference forward", str(cm.exception))
        model.forward(self.TOKENS)
        model.cross_entropy(self.TARGETS)
        model.backward()
        with self.assertRaises(LatticeError) as cm:
            model.forward_inference([[1] * 17])              # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)

    def test_loss(self):
        model = tiny_model()
        with self.assertRaises(LatticeError) as cm:
            model.cross_entropy_value(self.TARGETS)
        self.assertEqual(cm.exception.code, Status.STATE)
        model.forward_inference(self.TOKENS)
        loss, counted = model.cross_entropy(self.TARGETS, mask=self.MASK)
        d = model.dlogits_view()
        before = model.dlogits().tolist()
        ce, n = model.cross_entropy_value(self.TARGETS, mask=self.MASK)
        self.assertEqual(n, counted)
        self.assertEqual(n, 6)
        self.assertAlmostEqual(ce, loss, delta=1e-6 * abs(ce))
        self.assertEqual(d.tolist(), before)                 # no gradient written
        ce_all, n_all = model.cross_entropy_value(self.TARGETS)
        self.assertEqual(n_all, 8)
        self.assertNotEqual(ce_all, ce)
        with self.assertRaises(LatticeError) as cm:
            model.cross_entropy_value(array.array("i", [VOCAB] * 8))
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises((ValueError, TypeError)):
            model.cross_entropy_value(array.array("i", [1, 2, 3]))          # wrong size

    def test_evaluate(self):
        model = tiny_model()
        data = tiny_data()
        nb = data.n_val_batches
        self.assertGreaterEqual(nb, 2)
        with self.assertRaises(LatticeError) as cm:       # more than the set has
            lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0),
                            lattice.Schedule.preset("joint", 1, 2, 6), eval_batches=nb + 3)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
        self.assertIn(f"eval_batches {nb + 3} exceeds the data's {nb} validation batches",
                      str(cm.exception))
        for max_batches in (0, 1, nb):
            trainer = lattice.Trainer(model, data, lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 6),
                                      eval_batches=max_batches)
            want = trainer.evaluate()
            got = model.evaluate(data, max_batches=max_batches)
            self.assertAlmostEqual(got, want, delta=1e-6 * want)
            trainer.close()
        # by hand: the first batch alone
        b = data.val_batch(0)
        model.forward_inference(b.tokens, b.batch, b.seq)
        ce, n = model.cross_entropy_value(b.targets, b.mask)
        self.assertAlmostEqual(model.evaluate(data, 1), ce, delta=1e-12 * ce)
        with self.assertRaises(LatticeError) as cm:
            model.backward()                                   # evaluate ran inference forwards
        self.assertEqual(cm.exception.code, Status.STATE)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(data, max_batches=-1)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(tiny_data(val_fraction=0.0))
        self.assertEqual(cm.exception.code, Status.STATE)
        with self.assertRaises(LatticeError) as cm:
            model.evaluate(tiny_data(batch_size=5))            # wider than max_batch 4
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        self.assertIn("max_batch", str(cm.exception))
        with self.assertRaises(TypeError):
            model.evaluate(model)


if __name__ == "__main__":
    unittest.main(verbosity=2)
