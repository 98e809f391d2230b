"""examples/python/torch_model.py, the PyTorch module of a liblattice file, against the
library's logits: every option test_reference_forward.py covers (placement, norm kind,
q/k norm, tied head, residual scale, grouped-query heads, block_norm, block_rescale,
the induced massive activation, fewer active layers), in float32, saved by the library
and read by the module's own safetensors reader. Also: the Hugging Face config.json of
a pre-norm student (a Qwen3 one, read by its Qwen3 keys alone, gives the same logits;
other models are refused or written as model_type "lattice"), the module's names and
its file written back, and a backward through it.

Skipped (exit 77) without PyTorch: Debian's python3-torch, for /usr/bin/python3.
LATTICE_TORCH_REPORT=FILE writes each case's largest |logit difference| there."""
import json
import os
import sys
import tempfile
import unittest

try:
    import numpy as np
    import torch
except ImportError as e:
    print(f"SKIP: {e.name} is not installed (apt-get install python3-torch, for "
          "/usr/bin/python3)")
    sys.exit(77)

import lattice

HERE = os.path.dirname(os.path.abspath(__file__))
SOURCE = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(SOURCE, "examples", "python"))
sys.path.insert(0, HERE)
import torch_model as tm  # noqa: E402
import reference_forward as ref  # noqa: E402
from test_reference_forward import BASE, CASES, TOKENS, randomize  # noqa: E402

torch.set_num_threads(1)
RTOL = 1e-5  # of the largest logit, as the NumPy reference


def library_model(fields, norm_args, seed=0):
    fields = dict(BASE, **fields)
    backend = lattice.Backend(fields.pop("backend", "ref"), threads=1)
    model = lattice.Model(norm=lattice.Norm(**norm_args), backend=backend, **fields)
    randomize(model, np.random.default_rng(seed))
    return model


def library_logits(model, tokens=TOKENS):
    model.forward_inference(tokens)
    return np.array(model.logits().tolist(), dtype=np.float64)


def torch_logits(module, tokens=TOKENS):
    with torch.no_grad():
        return module(torch.tensor(tokens)).double().numpy()


def errors(got, want):
    diff = float(np.abs(got - want).max())
    return diff, diff / float(np.abs(want).max())


class TorchModel(unittest.TestCase):
    report = {}

    @classmethod
    def tearDownClass(cls):
        path = os.environ.get("LATTICE_TORCH_REPORT")
        if path:
            with open(path, "w") as f:
                json.dump(cls.report, f, indent=1)

    def test_every_option(self):
        with tempfile.TemporaryDirectory() as d:
            path = os.path.join(d, "model.safetensors")
            for name, (fields, norm_args) in CASES.items():
                with self.subTest(name), library_model(fields, norm_args) as model:
                    model.save(path)
                    want = library_logits(model)
                    module = tm.LatticeForCausalLM.from_file(path)
                    got = torch_logits(module)
                    self.assertEqual(got.shape, (2, 9, BASE["vocab_size"]))
                    diff, rel = errors(got, want)
                    self.report[name] = diff
                    self.assertLess(rel, RTOL, f"{name}: max |diff| {diff:.3g}")
                    # float64: the NumPy reference's numbers
                    tensors, config = ref.load(path)
                    exact = ref.forward(tensors, config, TOKENS)
                    _, rel64 = errors(torch_logits(module.double()), exact)
                    self.assertLess(rel64, 1e-12, name)

    def test_names_and_the_file_written_back(self):
        with tempfile.TemporaryDirectory() as d, \
                library_model(*CASES["massive-and-rescale"]) as model:
            path, back = os.path.join(d, "a.safetensors"), os.path.join(d, "b.safetensors")
            model.save(path)
            module = tm.LatticeForCausalLM.from_file(path)
            self.assertEqual(sorted(module.state_dict()), sorted(t.name for t in model.tensors))
            buffers = {n for n, _ in module.named_buffers()}
            self.assertEqual(buffers, {t.name for t in model.tensors
                                       if t.group == lattice.Group.STATISTIC})
            module.save_file(back)
            with lattice.Model.from_file(back, backend="ref") as again:
                self.assertEqual(library_logits(again).tolist(), library_logits(model).tolist())

    def test_active_layers(self):
        with tempfile.TemporaryDirectory() as d, library_model({}, dict(placement="peri")) as m:
            path = os.path.join(d, "model.safetensors")
            m.save(path)
            module = tm.LatticeForCausalLM.from_file(path)
            m.active_layers = module.n_active_layers = 1
            self.assertLess(errors(torch_logits(module), library_logits(m))[1], RTOL)

    def test_backward(self):
        with tempfile.TemporaryDirectory() as d, library_model({}, dict(placement="post")) as m:
            path = os.path.join(d, "model.safetensors")
            m.save(path)
            module = tm.LatticeForCausalLM.from_file(path)
        tokens = torch.tensor(TOKENS)
        loss = torch.nn.functional.cross_entropy(
            module(tokens[:, :-1]).reshape(-1, BASE["vocab_size"]), tokens[:, 1:].reshape(-1))
        loss.backward()
        grads = [p.grad for p in module.parameters()]
        self.assertTrue(all(g is not None for g in grads))
        self.assertGreater(float(module.model.layers[0].self_attn.q_proj.weight.grad.abs().max()),
                           0.0)

    def test_qwen3_config_beside_the_weights(self):
        # a pre-norm RMSNorm student with q/k norm: Qwen3's config.json, written by the
        # library's own writer, read by its Qwen3 keys alone, gives the library's logits
        for name in ("pre-rms", "tied", "mha", "fused-attention", "default-theta"):
            fields, norm_args = CASES[name]
            with self.subTest(name), tempfile.TemporaryDirectory() as d, \
                    library_model(fields, norm_args) as model:
                weights = os.path.join(d, "model.safetensors")
                model.save(weights)
                path = tm.write_hf_config(weights)
                self.assertEqual(path, os.path.join(d, "config.json"))
                with open(path) as f:
                    hf = json.load(f)
                self.assertEqual(hf["model_type"], "qwen3")
                self.assertEqual(hf["architectures"], ["Qwen3ForCausalLM"])
                self.assertEqual(hf["tie_word_embeddings"], bool(fields.get("tie_embeddings")))
                cfg = tm.config_from_hf({k: v for k, v in hf.items() if k != "lattice"})
                for key in ("vocab_size", "d_model", "n_layers", "n_heads", "n_kv_heads",
                            "head_dim", "d_ff", "tie_embeddings"):
                    self.assertEqual(cfg[key], tm.read_config(weights)[key], key)
                module = tm.LatticeForCausalLM.from_pretrained(d, use_metadata=False)
                want = library_logits(model)
                self.assertLess(errors(torch_logits(module), want)[1], RTOL, name)
                # Qwen3's tensor names: the file's, no other
                qwen3 = {"model.embed_tokens.weight", "model.norm.weight"}
                if not fields.get("tie_embeddings"):
                    qwen3.add("lm_head.weight")
                for i in range(BASE["n_layers"]):
                    p = f"model.layers.{i}."
                    qwen3 |= {p + "input_layernorm.weight", p + "post_attention_layernorm.weight"}
                    qwen3 |= {p + f"self_attn.{x}.weight" for x in
                              ("q_proj", "k_proj", "v_proj", "o_proj", "q_norm", "k_norm")}
                    qwen3 |= {p + f"mlp.{x}.weight" for x in ("gate_proj", "up_proj",
                                                              "down_proj")}
                self.assertEqual(set(tm.load_file(weights)[0]), qwen3)
                # and the library's own Qwen3 loader reads the pair alike
                with lattice.Model.from_file(weights, path, backend="ref") as again:
                    self.assertEqual(library_logits(again).tolist(), want.tolist())

    def test_model_md_lists_them(self):
        # doc/MODEL.md's list of what a Qwen3 config can say is the one applied here
        with open(os.path.join(SOURCE, "doc", "MODEL.md"), encoding="utf-8") as f:
            section = f.read().split("## PyTorch and Hugging Face", 1)[1].split("\n## ", 1)[0]
        listed = section.split("when it is all of:", 1)[1].lstrip().split("\n\n", 1)[0]
        for key, want, _ in tm.QWEN3_NOT:
            word = {"placement": "pre-norm", "norm": "RMSNorm"}.get(key, f"`{key}`")
            if key == "residual_scale":
                word = "residual scale 1"
            self.assertIn(word, listed, key)
        self.assertIn("every layer active", listed)

    def test_which_models_are_qwen3(self):
        # qwen3_obstacle says what the library's save_config says, model by model
        with tempfile.TemporaryDirectory() as d:
            weights = os.path.join(d, "model.safetensors")
            for name, (fields, norm_args) in CASES.items():
                with self.subTest(name), library_model(fields, norm_args) as model:
                    model.save(weights)
                    why = tm.qwen3_obstacle(tm.read_config(weights))
                    try:
                        model.save_config(os.path.join(d, "probe.json"))
                        library_says = None
                    except lattice.LatticeError as e:
                        self.assertEqual(e.code, lattice.Status.UNSUPPORTED)
                        library_says = str(e)
                    self.assertEqual(why is None, library_says is None, f"{why} / {library_says}")
                    if why is None:
                        continue
                    with self.assertRaises(ValueError) as caught:
                        tm.write_hf_config(weights)
                    self.assertIn(why.split()[0], str(caught.exception))
                    # model_type "lattice": refused by Qwen3 loaders, read here
                    path = tm.write_hf_config(weights, qwen3_only=False)
                    with open(path) as f:
                        self.assertEqual(json.load(f)["model_type"], "lattice")
                    module = tm.LatticeForCausalLM.from_pretrained(d, use_metadata=False)
                    self.assertLess(errors(torch_logits(module), library_logits(model))[1],
                                    RTOL, name)
                    os.remove(path)


if __name__ == "__main__":
    unittest.main()
