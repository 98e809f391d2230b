"""examples/python/reference_forward.py, a NumPy forward written from doc/MODEL.md,
against the library's logits: small models of every option (placement, norm
kind, q/k norm, tied head, residual scale, block_norm, block_rescale, the
induced massive activation, fewer active layers, grouped-query heads) with
random weights and a positive running regular RMS, saved and read back by the
reference's own safetensors reader. Also doc/MODEL.md's list of
lattice_model_params_init defaults against the library's. Skipped (exit 77)
without NumPy."""
import os
import re
import sys
import tempfile
import unittest

try:
    import numpy as np
except ImportError:
    print("SKIP: numpy is not installed (the reference forward needs it)")
    sys.exit(77)

import lattice

SOURCE = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, os.path.join(SOURCE, "examples", "python"))
import reference_forward as ref  # noqa: E402  (after the path it lives on)

BASE = dict(vocab_size=37, d_model=24, n_layers=3, n_active_layers=3, n_heads=4,
            n_kv_heads=2, head_dim=6, d_ff=40, max_batch=2, max_seq=9, seed=11,
            rope_theta=1e4)

# name: (model fields, Norm arguments)
CASES = {
    "pre-rms": ({}, dict(placement="pre")),
    "pre-layer": ({}, dict(placement="pre", kind="layer", eps=1e-5)),
    "post-rms": ({}, dict(placement="post")),
    "post-layer-scaled": ({}, dict(placement="post", kind="layer", residual_scale=1.7)),
    "peri-rms": ({}, dict(placement="peri")),
    "peri-layer": ({}, dict(placement="peri", kind="layer")),
    "no-qk-norm": (dict(qk_norm=0), dict(placement="pre")),
    "no-qk-norm-post": (dict(qk_norm=0), dict(placement="post")),
    "tied": (dict(tie_embeddings=1), dict(placement="pre")),
    "tied-post": (dict(tie_embeddings=1), dict(placement="post", kind="layer")),
    "mha": (dict(n_kv_heads=4), dict(placement="pre")),
    "mqa": (dict(n_kv_heads=1), dict(placement="peri")),
    "default-theta": (dict(rope_theta=1e6), dict(placement="pre")),
    # head_dim 6 takes the GEMM attention path, 8 the fused one
    "fused-attention": (dict(head_dim=8), dict(placement="pre")),
    "fused-attention-mqa-post": (dict(head_dim=8, n_kv_heads=1), dict(placement="post")),
    "default-backend": (dict(head_dim=8, backend="default"), dict(placement="peri")),
    "active-2-of-3": (dict(n_active_layers=2), dict(placement="pre")),
    "block-norm": (dict(block_norm=1), dict(placement="pre")),
    "block-norm-layer": (dict(block_norm=2), dict(placement="pre", kind="layer")),
    "block-rescale": (dict(block_rescale=1), dict(placement="pre")),
    "block-rescale-layer": (dict(block_rescale=2), dict(placement="pre", kind="layer")),
    "massive-pre": (dict(massive_offset=3.0, massive_channel=5), dict(placement="pre")),
    "massive-post": (dict(massive_offset=2.0, massive_layer=2, massive_channel=1),
                     dict(placement="post")),
    "massive-peri": (dict(massive_offset=4.0, massive_channel=23), dict(placement="peri")),
    "massive-and-rescale": (dict(massive_offset=3.0, massive_layer=1, block_rescale=1),
                            dict(placement="pre")),
    "massive-at-the-last-active": (dict(massive_offset=3.0, massive_layer=2, n_active_layers=2),
                                   dict(placement="pre")),
}

TOKENS = [[0, 5, 17, 36, 2, 2, 9, 30, 11], [12, 1, 3, 3, 28, 7, 19, 0, 4]]
RTOL = 1e-5  # of the largest logit


def randomize(model, rng):
    """Every tensor random (norm weights about 1), every statistic positive."""
    for t in model.tensors:
        a = np.asarray(t.data)
        if t.group == lattice.Group.STATISTIC:
            a[...] = rng.uniform(0.5, 2.0, size=a.shape)
        elif t.name.endswith(".bias"):
            a[...] = rng.normal(0.0, 0.2, size=a.shape)
        elif t.ndim == 1:
            a[...] = rng.uniform(0.6, 1.4, size=a.shape)
        else:
            a[...] = rng.normal(0.0, 1.0 / np.sqrt(a.shape[1]), size=a.shape)


def library_and_reference(fields, norm_args, directory, seed=0):
    fields = dict(BASE, **fields)
    backend = lattice.Backend(fields.pop("backend", "ref"), threads=1)
    with lattice.Model(norm=lattice.Norm(**norm_args), backend=backend, **fields) as model:
        randomize(model, np.random.default_rng(seed))
        path = os.path.join(directory, "model.safetensors")
        model.save(path)
        model.forward_inference(TOKENS)
        got = np.array(model.logits().tolist(), dtype=np.float64)
    tensors, config = ref.load(path)
    return got, ref.forward(tensors, config, TOKENS), tensors, config


def rel_error(a, b):
    return float(np.abs(a - b).max() / np.abs(b).max())


class ReferenceForward(unittest.TestCase):
    def test_every_option(self):
        with tempfile.TemporaryDirectory() as d:
            for name, (fields, norm_args) in CASES.items():
                with self.subTest(name):
                    got, want, _, _ = library_and_reference(fields, norm_args, d)
                    self.assertEqual(got.shape, (2, 9, BASE["vocab_size"]))
                    self.assertGreater(np.abs(want).max(), 1.0)  # logits of some size
                    err = rel_error(got, want)
                    self.assertLess(err, RTOL, f"{name}: relative error {err:.3g}")

    def test_the_options_act(self):
        # each option changes the logits (so matching them tests something)
        with tempfile.TemporaryDirectory() as d:
            plain, _, _, _ = library_and_reference({}, dict(placement="pre"), d)
            for name in ("block-norm", "block-rescale", "massive-pre", "no-qk-norm", "tied"):
                fields, norm_args = CASES[name]
                got, _, _, _ = library_and_reference(fields, norm_args, d)
                self.assertGreater(rel_error(got, plain), 1e-3, name)

    def test_misreadings_are_caught(self):
        # the two misreadings of issue 39: the other query-to-kv head mapping, q/k norm
        # after RoPE; each gives logits far outside the tolerance
        with tempfile.TemporaryDirectory() as d:
            got, want, tensors, config = library_and_reference({}, dict(placement="pre"), d)
        self.assertLess(rel_error(got, want), RTOL)
        kv, rope, norm = ref.kv_for_queries, ref.rope, ref.norm
        try:  # query head h reading kv head h % n_kv_heads
            ref.kv_for_queries = lambda x, h: np.tile(x, (1, h // x.shape[1], 1, 1))
            self.assertGreater(rel_error(got, ref.forward(tensors, config, TOKENS)), 1e-2)
        finally:
            ref.kv_for_queries = kv
        try:  # RoPE first, then the norm
            ref.rope = lambda x, theta: x
            ref.norm = lambda x, w, b, kind, eps: (norm(rope(x, config["rope_theta"]), w, b,
                                                        kind, eps)
                                                   if x.ndim == 4 else norm(x, w, b, kind, eps))
            self.assertGreater(rel_error(got, ref.forward(tensors, config, TOKENS)), 1e-2)
        finally:
            ref.rope, ref.norm = rope, norm
        self.assertLess(rel_error(got, ref.forward(tensors, config, TOKENS)), RTOL)

    def test_params_defaults_in_model_md(self):
        # doc/MODEL.md lists every default of lattice_model_params_init
        with open(os.path.join(SOURCE, "doc", "MODEL.md"), encoding="utf-8") as f:
            text = f.read()
        section = text.split("## Defaults", 1)[1].split("\n## ", 1)[0]
        listed = dict(re.findall(r"^\| `(\w+)` \| `([^`]+)` \|", section, re.M))
        defaults = lattice.ModelParams.defaults()
        names = [n for n in lattice.ModelParams.field_names() if n != "size"]
        self.assertEqual(sorted(listed), sorted(names))
        for n in names:
            # as float32, the fields' type (init_std 0.02)
            self.assertEqual(np.float32(listed[n]), np.float32(getattr(defaults, n)), n)

    def test_params_defaults_in_the_header(self):
        # model.h lists every default of lattice_model_params_init beside its declaration
        with open(os.path.join(SOURCE, "include", "lattice", "model.h"), encoding="utf-8") as f:
            text = f.read()
        block = text.split(" * Every default: ", 1)[1].split(". The norm is not a field", 1)[0]
        block = re.sub(r"\s*\n\s*\*\s*", " ", block)
        listed = dict(re.findall(r"(\w+) ([-0-9.e]+)", block))
        defaults = lattice.ModelParams.defaults()
        names = [n for n in lattice.ModelParams.field_names() if n != "size"]
        self.assertEqual(sorted(listed), sorted(names))
        for n in names:
            self.assertEqual(np.float32(listed[n]), np.float32(getattr(defaults, n)), n)


if __name__ == "__main__":
    unittest.main()
