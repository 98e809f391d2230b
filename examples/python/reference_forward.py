#!/usr/bin/env python3
"""A reference forward of liblattice's model in NumPy, independent of the library.

It reads a file written by ``lattice_model_save`` (``Model.save``, or the
``model.safetensors`` of ``save_pretrained``): the safetensors tensors, and
the shape and settings in its ``lattice.config`` metadata. It parses the file
itself and computes the logits in float64 from doc/MODEL.md's definitions,
with no code of the library: a check of the specification as much as of the
library (tests/python/test_reference_forward.py compares the two under every
option). Every option of the file is followed: pre, post and peri placement,
RMSNorm and LayerNorm, q/k norm on or off, tied or untied head, the post-norm
residual scale, block_norm, block_rescale, the induced massive activation
(with the stored running regular RMS), fewer active layers than layers.

    python3 examples/python/reference_forward.py MODEL.safetensors 1 2 3 4
        prints the logits of one row of tokens (last position's top 5 too)

    import reference_forward as ref
    tensors, config = ref.load("model.safetensors")
    logits = ref.forward(tensors, config, [[1, 2, 3], [4, 5, 6]])  # [batch, seq, vocab]

NumPy only; a PyTorch port is a line-for-line translation of ``forward``.
"""

import json
import struct
import sys

import numpy as np

_DTYPES = {"F32": np.float32, "F64": np.float64, "F16": np.float16}


def load(path):
    """(tensors, config): the file's tensors by name (float64 arrays) and its
    lattice.config (dict). Safetensors: an 8-byte little-endian header length,
    a JSON header, then the data."""
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n].decode("utf-8"))
    meta = header.pop("__metadata__", {}) or {}
    if "lattice.config" not in meta:
        raise ValueError(f"{path}: no lattice.config metadata (not written by lattice_model_save)")
    config = json.loads(meta["lattice.config"])
    body = raw[8 + n:]
    tensors = {}
    for name, e in header.items():
        a, b = e["data_offsets"]
        arr = np.frombuffer(body[a:b], dtype=_DTYPES[e["dtype"]]).reshape(e["shape"])
        tensors[name] = arr.astype(np.float64)
    return tensors, config


# ---- the pieces (doc/MODEL.md) ---------------------------------------------------------

def norm(x, w, b, kind, eps):
    """RMSNorm: x / sqrt(mean(x^2) + eps) * w; LayerNorm: (x - mean) / sqrt(var + eps) * w + b,
    over the last axis (var the biased variance)."""
    if kind == "layer":
        mu = x.mean(axis=-1, keepdims=True)
        xc = x - mu
        return xc / np.sqrt((xc * xc).mean(axis=-1, keepdims=True) + eps) * w + b
    return x / np.sqrt((x * x).mean(axis=-1, keepdims=True) + eps) * w


def rope(x, theta):
    """Rotate-half RoPE on [..., T, hd]: pairs (i, i + hd/2), i < hd/2, at angle t theta^(-2i/hd),
    t = 0, 1, ... from each row's first position."""
    T, hd = x.shape[-2], x.shape[-1]
    half = hd // 2
    freq = theta ** (-2.0 * np.arange(half) / hd)
    ang = np.arange(T)[:, None] * freq[None, :]  # [T, half]
    # the library's table is float32 (cos and sin computed in double, then rounded)
    c = np.cos(ang).astype(np.float32).astype(np.float64)
    s = np.sin(ang).astype(np.float32).astype(np.float64)
    a, b = x[..., :half], x[..., half:]
    return np.concatenate([a * c - b * s, b * c + a * s], axis=-1)


def silu(x):
    return x / (1.0 + np.exp(-x))


def kv_for_queries(x, n_heads):
    """[B, KV, T, hd] to [B, H, T, hd]: query head h reads kv head h // (H / KV), so that
    heads 0 .. H/KV - 1 share kv head 0 (as Hugging Face's repeat_kv)."""
    return np.repeat(x, n_heads // x.shape[1], axis=1)


def attention(a, t, i, cfg):
    """The attention sublayer's output projection of its input a [B, T, D] (layer i)."""
    B, T, _ = a.shape
    H, KV, hd = cfg["n_heads"], cfg["n_kv_heads"], cfg["head_dim"]
    p = f"model.layers.{i}.self_attn."
    q = (a @ t[p + "q_proj.weight"].T).reshape(B, T, H, hd).transpose(0, 2, 1, 3)
    k = (a @ t[p + "k_proj.weight"].T).reshape(B, T, KV, hd).transpose(0, 2, 1, 3)
    v = (a @ t[p + "v_proj.weight"].T).reshape(B, T, KV, hd).transpose(0, 2, 1, 3)
    if cfg["qk_norm"]:  # per head, one weight of head_dim shared by the heads, before RoPE
        q = norm(q, t[p + "q_norm.weight"], None, "rms", cfg["eps"])
        k = norm(k, t[p + "k_norm.weight"], None, "rms", cfg["eps"])
    q, k = rope(q, cfg["rope_theta"]), rope(k, cfg["rope_theta"])
    k, v = kv_for_queries(k, H), kv_for_queries(v, H)
    s = q @ k.transpose(0, 1, 3, 2) / np.sqrt(hd)  # [B, H, T, T]
    s = np.where(np.tril(np.ones((T, T), dtype=bool)), s, -np.inf)
    s = np.exp(s - s.max(axis=-1, keepdims=True))
    pr = s / s.sum(axis=-1, keepdims=True)
    o = (pr @ v).transpose(0, 2, 1, 3).reshape(B, T, H * hd)  # heads side by side
    return o @ t[p + "o_proj.weight"].T


def mlp(a, t, i):
    p = f"model.layers.{i}.mlp."
    g, u = a @ t[p + "gate_proj.weight"].T, a @ t[p + "up_proj.weight"].T
    return (silu(g) * u) @ t[p + "down_proj.weight"].T



def norm_fn(t, name, cfg):
    w, b = t[name + ".weight"], t.get(name + ".bias")
    return lambda x: norm(x, w, b, cfg["norm"], cfg["eps"])


def row_rms(x, eps):
    return np.sqrt((x * x).mean(axis=-1) + eps)


def forward(tensors, config, tokens):
    """Logits [batch, seq, vocab] (float64) of tokens [batch, seq] (ints)."""
    t, cfg = tensors, dict(config)
    cfg.setdefault("eps", 1e-6)
    cfg.setdefault("residual_scale", 1.0)
    tok = np.asarray(tokens, dtype=np.int64)
    if tok.ndim == 1:
        tok = tok[None, :]
    n_layers = cfg["n_layers"]
    n_active = cfg.get("n_active_layers", n_layers)
    pl, eps = cfg["placement"], cfg["eps"]
    a_res = cfg["residual_scale"]
    block_norm = cfg.get("block_norm", 0)
    block_rescale = cfg.get("block_rescale", 0)
    massive = cfg.get("massive_offset", 0.0)
    massive_layer = cfg.get("massive_layer", 1)
    massive_channel = cfg.get("massive_channel", 0)
    D = cfg["d_model"]

    h = t["model.embed_tokens.weight"][tok]  # [B, T, D]
    if pl == "post":
        h = norm_fn(t, "model.entry_norm", cfg)(h)
    for i in range(n_active):
        L = f"model.layers.{i}."
        if block_norm > 0 and i > 0 and i % block_norm == 0:
            h = norm_fn(t, L + "block_entry_norm", cfg)(h)
        elif block_rescale > 0 and i > 0 and i % block_rescale == 0:
            s = float(t[L + "input_regular_rms"][0])
            if s > 0:  # position 0 of each row to the layer's running regular RMS
                h = h.copy()
                h[:, 0, :] *= (s / row_rms(h[:, 0, :], eps))[:, None]
        if pl == "pre":
            h = h + attention(norm_fn(t, L + "input_layernorm", cfg)(h), t, i, cfg)
            h = h + mlp(norm_fn(t, L + "post_attention_layernorm", cfg)(h), t, i)
        elif pl == "post":
            h = norm_fn(t, L + "post_attention_layernorm", cfg)(a_res * h + attention(h, t, i, cfg))
            h = norm_fn(t, L + "post_feedforward_layernorm", cfg)(a_res * h + mlp(h, t, i))
        elif pl == "peri":
            y = attention(norm_fn(t, L + "input_layernorm", cfg)(h), t, i, cfg)
            h = h + norm_fn(t, L + "post_attention_layernorm", cfg)(y)
            y = mlp(norm_fn(t, L + "pre_feedforward_layernorm", cfg)(h), t, i)
            h = h + norm_fn(t, L + "post_feedforward_layernorm", cfg)(y)
        else:
            raise ValueError(f"unknown placement {pl!r}")
        if massive > 0 and i + 1 == massive_layer and i + 1 < n_layers:
            s = float(t[f"model.layers.{i + 1}.input_regular_rms"][0])
            if s > 0:  # position 0, one channel: + k sqrt(D) s
                h = h.copy()
                h[:, 0, massive_channel] += massive * np.sqrt(D) * s
    if pl != "post":
        h = norm_fn(t, "model.norm", cfg)(h)
    head = t.get("lm_head.weight")
    if head is None or cfg.get("tie_embeddings"):
        head = t["model.embed_tokens.weight"]
    return h @ head.T


def main(argv):
    if len(argv) < 3:
        print("usage: reference_forward.py MODEL.safetensors TOKEN [TOKEN ...]", file=sys.stderr)
        return 2
    tensors, config = load(argv[1])
    logits = forward(tensors, config, [[int(x) for x in argv[2:]]])[0]
    np.set_printoptions(precision=5, suppress=True, linewidth=120)
    for pos, row in enumerate(logits):
        print(f"position {pos}: {row}")
    top = np.argsort(-logits[-1])[:5]
    print("last position, top 5:", ", ".join(f"{j} ({logits[-1][j]:.4f})" for j in top))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
