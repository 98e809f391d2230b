#!/usr/bin/env python3
"""A liblattice model as a PyTorch module: load a student, run it, train it further.

It reads a file written by ``lattice_model_save`` (``Model.save``, or the
``model.safetensors`` of ``save_pretrained``) with no code of the library:
the safetensors tensors, and the shape and settings in its ``lattice.config``
metadata. The module computes doc/MODEL.md's forward ("The forward, exactly")
for every option a file can hold: pre, post and peri placement, RMSNorm and
LayerNorm, q/k norm on or off, tied or untied head, grouped-query heads, the
post-norm residual scale, ``block_norm``, ``block_rescale`` and the induced
massive activation (with the stored running regular RMS), and fewer active
layers than layers. Its parameter names are the file's tensor names, so
``module.state_dict()`` saves back to the same names.
tests/python/test_torch_model.py holds its logits to the library's under each
of those options (float32, to float rounding).

    python3 examples/python/torch_model.py MODEL.safetensors 1 2 3 4
        prints the last position's top 5 logits of one row of tokens

    python3 examples/python/torch_model.py --hf-config MODEL.safetensors
        writes config.json beside the weights: a Hugging Face Qwen3 config
        when the model is one (below), with the library's own writer

    from torch_model import LatticeForCausalLM
    model = LatticeForCausalLM.from_file("student.safetensors")   # or from_pretrained(dir)
    logits = model(torch.tensor([[1, 2, 3]]))                     # [batch, seq, vocab]

A pre-norm RMSNorm student with q/k norm, no residual scale, no block-entry
option, no induced offset and every layer active is a Hugging Face Qwen3
model: ``write_hf_config`` puts its ``config.json`` beside the weights, and
transformers' ``Qwen3ForCausalLM.from_pretrained(dir)`` loads the pair as is
(the tensor names are Qwen3's). Any other model gets a ``model_type``
"lattice" config that transformers refuses by its type, and loads here
(doc/MODEL.md, "PyTorch and Hugging Face").

The numbers follow the library's float32 forward: RoPE's cos and sin are
computed in double and rounded to float32, as the library's table is. The
running regular RMS (``input_regular_rms``) is a buffer, not a parameter: the
library measures it while training, and a forward here uses it as stored.
"""

import json
import math
import os
import struct
import sys

import torch
from torch import nn

__all__ = ["LatticeForCausalLM", "load_file", "read_config", "config_from_hf",
           "write_hf_config", "QWEN3_NOT", "qwen3_obstacle"]

_DTYPES = {"F32": torch.float32, "F16": torch.float16, "BF16": torch.bfloat16,
           "F64": torch.float64}
WEIGHTS_NAME = "model.safetensors"
CONFIG_NAME = "config.json"


# ---- the file --------------------------------------------------------------------------

def _header(path):
    with open(path, "rb") as f:
        raw = f.read()
    if len(raw) < 8:
        raise ValueError(f"{path}: not a safetensors file (shorter than its header length)")
    (n,) = struct.unpack("<Q", raw[:8])
    if 8 + n > len(raw):
        raise ValueError(f"{path}: header length {n} past the end of the file")
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    return raw, n, header


def load_file(path, dtype=torch.float32):
    """(tensors, metadata): every tensor of a safetensors file by name (as dtype), and
    its ``__metadata__`` (dict of strings)."""
    raw, n, header = _header(path)
    meta = header.pop("__metadata__", None) or {}
    body = memoryview(raw)[8 + n:]
    tensors = {}
    for name, e in header.items():
        if e["dtype"] not in _DTYPES:
            raise ValueError(f"{path}: tensor {name!r} has dtype {e['dtype']} "
                             f"(a model file holds {', '.join(_DTYPES)})")
        a, b = e["data_offsets"]
        flat = torch.frombuffer(bytearray(body[a:b]), dtype=_DTYPES[e["dtype"]])
        tensors[name] = flat.reshape(e["shape"]).to(dtype)
    return tensors, meta


def read_config(path):
    """The model settings of a lattice file (its ``lattice.config`` metadata), with the
    defaults of keys written only when set."""
    _, _, header = _header(path)
    meta = header.get("__metadata__") or {}
    if "lattice.config" not in meta:
        raise ValueError(f"{path}: no lattice.config metadata (not written by "
                         "lattice_model_save): give its config.json (from_pretrained)")
    return _complete(json.loads(meta["lattice.config"]))


def _complete(cfg):
    cfg = dict(cfg)
    cfg.setdefault("n_active_layers", cfg["n_layers"])
    for key, value in (("eps", 1e-6), ("residual_scale", 1.0), ("block_norm", 0),
                       ("block_rescale", 0), ("massive_offset", 0.0), ("massive_layer", 1),
                       ("massive_channel", 0), ("norm", "rms"), ("placement", "pre"),
                       ("qk_norm", 1), ("tie_embeddings", 0), ("rope_theta", 1e6)):
        cfg.setdefault(key, value)
    return cfg


def config_from_hf(hf):
    """Model settings from a Hugging Face config.json (a dict).

    ``model_type`` "qwen3" is read from Qwen3's own keys only, as transformers
    reads it (pre-norm RMSNorm, q/k norm, every layer active; the "lattice"
    entry is ignored); ``model_type`` "lattice" (``save_pretrained`` of a model
    Qwen3 cannot describe) from its "lattice" entry over the same keys.
    """
    kind = hf.get("model_type")
    if kind not in ("qwen3", "lattice"):
        raise ValueError(f"model_type {kind!r}: only \"qwen3\" and \"lattice\" configs load here")
    cfg = {"vocab_size": hf["vocab_size"], "d_model": hf["hidden_size"],
           "d_ff": hf["intermediate_size"], "n_layers": hf["num_hidden_layers"],
           "n_heads": hf["num_attention_heads"],
           "n_kv_heads": hf.get("num_key_value_heads", hf["num_attention_heads"]),
           "head_dim": hf.get("head_dim", hf["hidden_size"] // hf["num_attention_heads"]),
           "rope_theta": hf.get("rope_theta", 10000.0), "eps": hf.get("rms_norm_eps", 1e-6),
           "tie_embeddings": int(bool(hf.get("tie_word_embeddings", False))),
           "placement": "pre", "norm": "rms", "qk_norm": 1}
    if kind == "qwen3":
        if hf.get("attention_bias"):
            raise ValueError("attention_bias true: liblattice's linear layers have no bias")
        if hf.get("rope_scaling"):
            raise ValueError("rope_scaling is set: liblattice's RoPE is unscaled")
        return _complete(cfg)
    ours = dict(hf.get("lattice") or {})
    ours.pop("version", None)
    cfg.update(ours)
    return _complete(cfg)


# What keeps a model from being a Hugging Face Qwen3 model, as liblattice's
# save_config refuses it (setting, the value Qwen3 means, why).
QWEN3_NOT = (
    ("placement", "pre", "Qwen3 is pre-norm"),
    ("norm", "rms", "Qwen3's norms are RMSNorm"),
    ("qk_norm", 1, "Qwen3 normalises queries and keys"),
    ("residual_scale", 1.0, "Qwen3 adds its residuals unscaled"),
    ("block_norm", 0, "Qwen3 has no block-entry norm"),
    ("block_rescale", 0, "Qwen3 has no block-entry rescale"),
    ("massive_offset", 0.0, "Qwen3 has no induced row-start offset"),
)


def qwen3_obstacle(cfg):
    """Why a model of these settings is not a Qwen3 model, or None when it is one."""
    cfg = _complete(cfg)
    for key, want, why in QWEN3_NOT:
        if cfg[key] != want:
            return f"{key} {cfg[key]!r} ({why})"
    if cfg["n_active_layers"] != cfg["n_layers"]:
        return (f"{cfg['n_active_layers']} of {cfg['n_layers']} layers active "
                "(Qwen3 runs every layer)")
    return None


def write_hf_config(weights, path=None, *, max_seq=None, qwen3_only=True):
    """Write the Hugging Face config.json of a lattice weights file; returns its path.

    Beside the weights by default. The library writes it (liblattice's
    ``Model.save_config``, one writer for every route), so the ``lattice``
    Python package must import. A Qwen3 model gets ``model_type`` "qwen3",
    which transformers' Qwen3 loads with the weights as they are; any other
    raises ValueError naming what Qwen3 cannot say, unless ``qwen3_only`` is
    false: it then gets ``model_type`` "lattice" (from_pretrained here reads
    it; transformers does not). ``max_seq`` sets ``max_position_embeddings``
    (default: the library's 256).
    """
    import lattice  # the library's writer: lattice_model_save_config

    weights = os.fspath(weights)
    cfg = read_config(weights)
    why = qwen3_obstacle(cfg)
    if why is not None and qwen3_only:
        raise ValueError(f"{weights}: a Qwen3 config.json cannot describe {why}; "
                         "qwen3_only=False writes model_type \"lattice\"")
    if path is None:
        path = os.path.join(os.path.dirname(os.path.abspath(weights)), CONFIG_NAME)
    kw = {} if max_seq is None else {"max_seq": max_seq}
    with lattice.Model.from_file(weights, backend="ref", max_batch=1, **kw) as model:
        model.save_config(path, qwen3_only=qwen3_only)
    return path


# ---- the pieces (doc/MODEL.md) ---------------------------------------------------------

class Norm(nn.Module):
    """RMSNorm (x / sqrt(mean(x^2) + eps) * w) or LayerNorm (biased variance, + b) over
    the last axis."""

    def __init__(self, dim, kind, eps):
        super().__init__()
        self.kind, self.eps = kind, eps
        self.weight = nn.Parameter(torch.ones(dim))
        if kind == "layer":
            self.bias = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        if self.kind == "layer":
            xc = x - x.mean(dim=-1, keepdim=True)
            return xc / torch.sqrt((xc * xc).mean(dim=-1, keepdim=True) + self.eps) \
                * self.weight + self.bias
        return x / torch.sqrt((x * x).mean(dim=-1, keepdim=True) + self.eps) * self.weight


def _linear(n_in, n_out):
    return nn.Linear(n_in, n_out, bias=False)


def rope_table(T, hd, theta, dtype, device=None):
    """(cos, sin) [T, hd/2] at angle t theta^(-2i/hd): computed in double, rounded to
    float32 as the library's table is."""
    half = hd // 2
    freq = theta ** (-2.0 * torch.arange(half, dtype=torch.float64) / hd)
    ang = torch.arange(T, dtype=torch.float64)[:, None] * freq[None, :]
    return (torch.cos(ang).float().to(dtype=dtype, device=device),
            torch.sin(ang).float().to(dtype=dtype, device=device))


def rope(x, cos, sin):
    """Rotate-half RoPE on [..., T, hd]: channel i pairs with i + hd/2."""
    half = x.shape[-1] // 2
    a, b = x[..., :half], x[..., half:]
    return torch.cat([a * cos - b * sin, b * cos + a * sin], dim=-1)


class Attention(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, H, KV, hd = cfg["d_model"], cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
        self.H, self.KV, self.hd, self.theta = H, KV, hd, float(cfg["rope_theta"])
        self.q_proj, self.k_proj = _linear(D, H * hd), _linear(D, KV * hd)
        self.v_proj, self.o_proj = _linear(D, KV * hd), _linear(H * hd, D)
        self.qk_norm = bool(cfg["qk_norm"])
        if self.qk_norm:  # always RMSNorm, one weight of head_dim shared by the heads
            self.q_norm = Norm(hd, "rms", cfg["eps"])
            self.k_norm = Norm(hd, "rms", cfg["eps"])

    def forward(self, x):
        B, T, _ = x.shape
        H, KV, hd = self.H, self.KV, self.hd
        q = self.q_proj(x).view(B, T, H, hd).transpose(1, 2)
        k = self.k_proj(x).view(B, T, KV, hd).transpose(1, 2)
        v = self.v_proj(x).view(B, T, KV, hd).transpose(1, 2)
        if self.qk_norm:  # before RoPE
            q, k = self.q_norm(q), self.k_norm(k)
        cos, sin = rope_table(T, hd, self.theta, x.dtype, x.device)
        q, k = rope(q, cos, sin), rope(k, cos, sin)
        # query head h reads kv head h // (H / KV) (Hugging Face's repeat_kv)
        k = k.repeat_interleave(H // KV, dim=1)
        v = v.repeat_interleave(H // KV, dim=1)
        s = q @ k.transpose(-1, -2) / math.sqrt(hd)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        p = torch.softmax(s.masked_fill(~causal, float("-inf")), dim=-1)
        return self.o_proj((p @ v).transpose(1, 2).reshape(B, T, H * hd))


class MLP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        D, F = cfg["d_model"], cfg["d_ff"]
        self.gate_proj, self.up_proj, self.down_proj = _linear(D, F), _linear(D, F), _linear(F, D)

    def forward(self, x):
        return self.down_proj(nn.functional.silu(self.gate_proj(x)) * self.up_proj(x))


# the per-layer norms by placement (doc/MODEL.md, "Tensor names")
_LAYER_NORMS = {
    "pre": ("input_layernorm", "post_attention_layernorm"),
    "post": ("post_attention_layernorm", "post_feedforward_layernorm"),
    "peri": ("input_layernorm", "post_attention_layernorm", "pre_feedforward_layernorm",
             "post_feedforward_layernorm"),
}


class Layer(nn.Module):
    def __init__(self, cfg, index):
        super().__init__()
        D, kind, eps = cfg["d_model"], cfg["norm"], cfg["eps"]
        self.placement, self.a = cfg["placement"], float(cfg["residual_scale"])
        self.self_attn, self.mlp = Attention(cfg), MLP(cfg)
        for name in _LAYER_NORMS[self.placement]:
            setattr(self, name, Norm(D, kind, eps))
        if cfg["block_norm"] > 0 and index > 0 and index % cfg["block_norm"] == 0:
            self.block_entry_norm = Norm(D, kind, eps)
        if cfg["block_rescale"] > 0 and index > 0 and index % cfg["block_rescale"] == 0:
            self.rescale = True
        else:
            self.rescale = False
        offset_here = cfg["massive_offset"] > 0 and index == cfg["massive_layer"] \
            and index < cfg["n_layers"]
        if self.rescale or offset_here:
            self.register_buffer("input_regular_rms", torch.zeros(1))

    def entry(self, h, eps):
        """The block-entry option of this layer (block_norm, block_rescale), if any."""
        if hasattr(self, "block_entry_norm"):
            return self.block_entry_norm(h)
        if self.rescale:
            s = float(self.input_regular_rms[0])
            if s > 0:  # position 0 of each row to the layer's running regular RMS
                h0 = h[:, :1, :]
                rms = torch.sqrt((h0 * h0).mean(dim=-1, keepdim=True) + eps)
                h = torch.cat([h0 * (s / rms), h[:, 1:, :]], dim=1)
        return h

    def forward(self, h):
        if self.placement == "pre":
            h = h + self.self_attn(self.input_layernorm(h))
            return h + self.mlp(self.post_attention_layernorm(h))
        if self.placement == "post":
            h = self.post_attention_layernorm(self.a * h + self.self_attn(h))
            return self.post_feedforward_layernorm(self.a * h + self.mlp(h))
        h = h + self.post_attention_layernorm(self.self_attn(self.input_layernorm(h)))
        return h + self.post_feedforward_layernorm(self.mlp(self.pre_feedforward_layernorm(h)))


class Decoder(nn.Module):
    """``model.*`` of the file: the embedding, the layers, the boundary norm."""

    def __init__(self, cfg):
        super().__init__()
        D = cfg["d_model"]
        self.embed_tokens = nn.Embedding(cfg["vocab_size"], D)
        self.layers = nn.ModuleList(Layer(cfg, i) for i in range(cfg["n_layers"]))
        if cfg["placement"] == "post":
            self.entry_norm = Norm(D, cfg["norm"], cfg["eps"])
        else:
            self.norm = Norm(D, cfg["norm"], cfg["eps"])


class LatticeForCausalLM(nn.Module):
    """A liblattice model (settings as in a file's ``lattice.config``) in PyTorch.

    ``forward(input_ids)`` maps int64 token ids [batch, seq] (or [seq]) to
    logits [batch, seq, vocab], over the first ``n_active_layers`` layers
    (settable: the others are capacity for growth). The parameter and buffer
    names are the file's tensor names; ``save_file(path)`` writes them back
    with the file's metadata, for ``lattice.Model.from_file``.
    """

    def __init__(self, config):
        super().__init__()
        cfg = _complete(config)
        if cfg["placement"] not in _LAYER_NORMS:
            raise ValueError(f"unknown placement {cfg['placement']!r}")
        if cfg["norm"] not in ("rms", "layer"):
            raise ValueError(f"unknown norm {cfg['norm']!r}")
        if cfg["n_heads"] % cfg["n_kv_heads"]:
            raise ValueError(f"n_heads {cfg['n_heads']} is not a multiple of n_kv_heads "
                             f"{cfg['n_kv_heads']}")
        self.config = cfg
        self.n_active_layers = cfg["n_active_layers"]
        self.model = Decoder(cfg)
        if not cfg["tie_embeddings"]:
            self.lm_head = _linear(cfg["d_model"], cfg["vocab_size"])

    @classmethod
    def from_file(cls, path, config=None, dtype=torch.float32):
        """The model of a lattice weights file (its settings from its metadata, or from a
        config.json dict or path given as config)."""
        if config is None:
            cfg = read_config(path)
        else:
            if not isinstance(config, dict):
                with open(config, encoding="utf-8") as f:
                    config = json.load(f)
            cfg = config_from_hf(config) if "model_type" in config else _complete(config)
        model = cls(cfg)
        tensors, _ = load_file(path, torch.float32)
        model.load_tensors(tensors)
        return model.to(dtype)

    @classmethod
    def from_pretrained(cls, directory, dtype=torch.float32, use_metadata=True):
        """A directory of ``model.safetensors`` and ``config.json``: the settings from the
        weights' metadata when they have it (``use_metadata``), else from the config."""
        weights = os.path.join(os.fspath(directory), WEIGHTS_NAME)
        if use_metadata:
            try:
                return cls.from_file(weights, dtype=dtype)
            except ValueError as e:
                if "no lattice.config" not in str(e):
                    raise
        return cls.from_file(weights, os.path.join(os.fspath(directory), CONFIG_NAME), dtype)

    def load_tensors(self, tensors):
        """Copy a file's tensors in by name: every one the model has, nothing else."""
        own = self.state_dict()
        missing = sorted(set(own) - set(tensors))
        extra = sorted(set(tensors) - set(own))
        if missing or extra:
            raise ValueError(f"the tensors do not match the settings: missing {missing[:4]}"
                             f"{'...' if len(missing) > 4 else ''}, unexpected {extra[:4]}"
                             f"{'...' if len(extra) > 4 else ''}")
        for name, t in tensors.items():
            if tuple(t.shape) != tuple(own[name].shape):
                raise ValueError(f"{name!r} has shape {list(t.shape)} in the file and "
                                 f"{list(own[name].shape)} in the model")
        self.load_state_dict(tensors, strict=True)

    def save_file(self, path):
        """Write the tensors as float32 safetensors with ``lattice.config`` metadata."""
        meta = {"format": "pt", "lattice.config": json.dumps(
            dict(self.config, n_active_layers=self.n_active_layers))}
        header, chunks, offset = {"__metadata__": meta}, [], 0
        for name, t in self.state_dict().items():
            data = t.detach().to(torch.float32).contiguous().cpu().numpy().tobytes()
            header[name] = {"dtype": "F32", "shape": list(t.shape),
                            "data_offsets": [offset, offset + len(data)]}
            chunks.append(data)
            offset += len(data)
        text = json.dumps(header, separators=(",", ":")).encode()
        text += b" " * (-len(text) % 8)
        with open(path, "wb") as f:
            f.write(struct.pack("<Q", len(text)) + text + b"".join(chunks))

    def forward(self, input_ids):
        cfg, m = self.config, self.model
        if input_ids.dim() == 1:
            input_ids = input_ids[None, :]
        eps, D = cfg["eps"], cfg["d_model"]
        n_active = int(self.n_active_layers)
        if not 1 <= n_active <= cfg["n_layers"]:
            raise ValueError(f"n_active_layers {n_active} outside 1..{cfg['n_layers']}")
        h = m.embed_tokens(input_ids)
        if cfg["placement"] == "post":
            h = m.entry_norm(h)
        k, at = cfg["massive_offset"], cfg["massive_layer"]
        for i in range(n_active):
            layer = m.layers[i]
            h = layer(layer.entry(h, eps))
            if k > 0 and i + 1 == at and at < cfg["n_layers"]:
                s = float(m.layers[at].input_regular_rms[0])
                if s > 0:  # position 0, one channel: + k sqrt(D) s
                    bump = torch.zeros_like(h[:, :1, :])
                    bump[..., cfg["massive_channel"]] = k * math.sqrt(D) * s
                    h = torch.cat([h[:, :1, :] + bump, h[:, 1:, :]], dim=1)
        if cfg["placement"] != "post":
            h = m.norm(h)
        head = m.embed_tokens.weight if cfg["tie_embeddings"] else self.lm_head.weight
        return h @ head.t()


def main(argv):
    if len(argv) == 3 and argv[1] == "--hf-config":
        print(write_hf_config(argv[2], qwen3_only=False))
        return 0
    if len(argv) < 3:
        print("usage: torch_model.py MODEL.safetensors TOKEN [TOKEN ...]\n"
              "       torch_model.py --hf-config MODEL.safetensors", file=sys.stderr)
        return 2
    model = LatticeForCausalLM.from_file(argv[1])
    with torch.no_grad():
        logits = model(torch.tensor([[int(x) for x in argv[2:]]]))[0]
    top = torch.topk(logits[-1], min(5, logits.shape[-1]))
    print("last position, top 5:", ", ".join(
        f"{int(j)} ({float(v):.4f})" for v, j in zip(top.values, top.indices)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
