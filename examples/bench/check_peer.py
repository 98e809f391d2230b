#!/usr/bin/python3
"""check_peer: is torch_step.py's step the same computation as liblattice's?

For each placement and with and without q/k norm, a small liblattice model (the
reference backend, through the ctypes package) and torch_step's model with the
same weights copied in run one step on bench_step's kind of batch; the logits,
the loss, every gradient and the weights after one AdamW update must agree to
float32 rounding. Needs torch and numpy, and a built liblattice:

    /usr/bin/python3 examples/bench/check_peer.py [--library build/liblattice/liblattice.so.1]

Exit status 0 when every case agrees, 1 otherwise.
"""

import argparse
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

SHAPE = dict(layers=2, d_model=32, heads=4, kv_heads=2, head_dim=8, d_ff=48, vocab=40,
             batch=2, seq=12)
TOLERANCE = 2e-4  # of the largest magnitude of the compared quantity


def torch_targets(model, placement):
    """lattice tensor name -> (torch parameter, first row, end row)."""
    slots = {"pre": {"input_layernorm": "in1", "post_attention_layernorm": "in2"},
             "post": {"post_attention_layernorm": "out1", "post_feedforward_layernorm": "out2"},
             "peri": {"input_layernorm": "in1", "post_attention_layernorm": "out1",
                      "pre_feedforward_layernorm": "in2", "post_feedforward_layernorm": "out2"}}
    H, KV, hd, ff = SHAPE["heads"], SHAPE["kv_heads"], SHAPE["head_dim"], SHAPE["d_ff"]
    boundary = "model.entry_norm.weight" if placement == "post" else "model.norm.weight"
    out = {"model.embed_tokens.weight": (model.embed.weight, 0, SHAPE["vocab"]),
           boundary: (model.boundary_norm.weight, 0, SHAPE["d_model"]),
           "lm_head.weight": (model.head.weight, 0, SHAPE["vocab"])}
    for i, block in enumerate(model.blocks):
        pfx = "model.layers.%d." % i
        out[pfx + "self_attn.q_proj.weight"] = (block.qkv.weight, 0, H * hd)
        out[pfx + "self_attn.k_proj.weight"] = (block.qkv.weight, H * hd, (H + KV) * hd)
        out[pfx + "self_attn.v_proj.weight"] = (block.qkv.weight, (H + KV) * hd, (H + 2 * KV) * hd)
        out[pfx + "self_attn.o_proj.weight"] = (block.o.weight, 0, SHAPE["d_model"])
        if block.q_norm is not None:
            out[pfx + "self_attn.q_norm.weight"] = (block.q_norm.weight, 0, hd)
            out[pfx + "self_attn.k_norm.weight"] = (block.k_norm.weight, 0, hd)
        out[pfx + "mlp.gate_proj.weight"] = (block.gate_up.weight, 0, ff)
        out[pfx + "mlp.up_proj.weight"] = (block.gate_up.weight, ff, 2 * ff)
        out[pfx + "mlp.down_proj.weight"] = (block.down.weight, 0, SHAPE["d_model"])
        for hf_name, attr in slots[placement].items():
            out[pfx + hf_name + ".weight"] = (getattr(block, attr).weight, 0, SHAPE["d_model"])
    return out


def worst(a, b, np):
    """Largest difference relative to the largest magnitude of b."""
    scale = max(float(np.abs(b).max()), 1e-30)
    return float(np.abs(a - b).max()) / scale


def check_case(placement, qk_norm, lattice, torch, np, torch_step):
    shape = dict(SHAPE, qk_norm=qk_norm)
    lat = lattice.Model(vocab_size=shape["vocab"], d_model=shape["d_model"],
                        n_layers=shape["layers"], n_active_layers=shape["layers"],
                        n_heads=shape["heads"], n_kv_heads=shape["kv_heads"],
                        head_dim=shape["head_dim"], d_ff=shape["d_ff"], qk_norm=qk_norm,
                        max_batch=shape["batch"], max_seq=shape["seq"], seed=1,
                        norm=placement, backend="ref")
    peer = torch_step.build_model(torch, shape, placement)
    targets = torch_targets(peer, placement)
    tensors = lat.tensors()
    problems = []
    names = {t.name for t in tensors}
    if names != set(targets):
        problems.append("tensor names differ: lattice only %s, torch only %s"
                        % (sorted(names - set(targets)), sorted(set(targets) - names)))
        return {}, problems
    n_torch = sum(p.numel() for p in peer.parameters())
    if lat.n_params != n_torch:
        problems.append("parameters: lattice %d, torch %d" % (lat.n_params, n_torch))
    with torch.no_grad():
        for t in tensors:
            dest, lo, hi = targets[t.name]
            dest[lo:hi].copy_(torch.from_numpy(np.array(t.data, dtype=np.float32)))

    token_rows, target_rows = torch_step.bench_batch(shape["batch"], shape["seq"], shape["vocab"])
    tokens = np.array(token_rows, dtype=np.int32)
    target_ids = np.array(target_rows, dtype=np.int32)
    lat.forward(tokens)
    lat_logits = np.array(lat.logits(), dtype=np.float32)
    lat_loss, _ = lat.cross_entropy(target_ids)
    lat.backward()
    before = {t.name: np.array(t.data, dtype=np.float32) for t in tensors}
    lat_grads = {t.name: np.array(t.grad, dtype=np.float32) for t in tensors}
    optim = lattice.Optim(lat)
    optim.step()
    lat_delta = {t.name: np.array(t.data, dtype=np.float32) - before[t.name] for t in tensors}

    logits = peer(torch.from_numpy(tokens).long())
    loss = torch.nn.functional.cross_entropy(logits.view(-1, shape["vocab"]),
                                             torch.from_numpy(target_ids).long().view(-1))
    loss.backward()
    peer_grads = {name: dest.grad[lo:hi].numpy().copy() for name, (dest, lo, hi) in targets.items()}
    peer_optim = torch_step.make_optimizer(torch, peer)
    torch_step.optimizer_step(torch, peer_optim, list(peer.parameters()), 0)

    figures = {"logits": worst(lat_logits, logits.detach().numpy(), np),
               "loss": abs(lat_loss - loss.item()) / abs(loss.item()), "grad": 0.0, "update": 0.0}
    if figures["logits"] > TOLERANCE:
        problems.append("logits differ by %.2e" % figures["logits"])
    if figures["loss"] > TOLERANCE:
        problems.append("loss: lattice %.6f, torch %.6f" % (lat_loss, loss.item()))
    lr = torch_step.lr_at(0)
    for t in tensors:
        dest, lo, hi = targets[t.name]
        err = worst(lat_grads[t.name], peer_grads[t.name], np)
        figures["grad"] = max(figures["grad"], err)
        if err > TOLERANCE:
            problems.append("%s: gradients differ by %.2e" % (t.name, err))
        # The first AdamW update is about lr * sign(g); compare it in units of lr.
        delta = dest.detach()[lo:hi].numpy() - before[t.name]
        off = float(np.abs(delta - lat_delta[t.name]).max()) / lr
        figures["update"] = max(figures["update"], off)
        if off > 0.05:
            problems.append("%s: updates differ by %.3f lr" % (t.name, off))
    figures["params"] = n_torch
    lat.close()
    return figures, problems


def main(argv):
    parser = argparse.ArgumentParser(prog="check_peer", description=__doc__.split("\n\n")[0])
    parser.add_argument("--library", default=os.path.join(ROOT, "build", "liblattice",
                                                          "liblattice.so.1"),
                        help="liblattice to load (default %(default)s)")
    args = parser.parse_args(argv)
    os.environ["LATTICE_LIBRARY"] = args.library
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    sys.path.insert(0, os.path.join(ROOT, "liblattice", "python"))
    try:
        import numpy as np
        import torch
        import lattice
        import torch_step
    except ImportError as err:
        print("check_peer: %s" % err, file=sys.stderr)
        return 1
    torch.set_num_threads(1)
    failed = 0
    for placement in ("pre", "post", "peri"):
        for qk_norm in (0, 1):
            figures, problems = check_case(placement, qk_norm, lattice, torch, np, torch_step)
            print("%-4s qk-norm %d: %s" % (placement, qk_norm,
                                           "same" if not problems else "DIFFERENT"), end="")
            if figures:
                print(" (%d parameters; largest differences: logits %.1e, loss %.1e, "
                      "gradients %.1e of their scale, first update %.3f lr)"
                      % (figures["params"], figures["logits"], figures["loss"],
                         figures["grad"], figures["update"]), end="")
            print()
            for line in problems:
                print("    " + line)
            failed += bool(problems)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
