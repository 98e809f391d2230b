#!/usr/bin/python3
"""torch_step: the PyTorch peer of liblattice's bench_step.

One training step of the same student, timed the same way: forward,
cross-entropy against the next token of a fixed random batch, backward, then
global-norm clipping and an AdamW update, over every parameter group. What is
matched, and where it comes from in liblattice:

  model      token embedding; per layer grouped-query causal attention (one
             stacked q/k/v projection, optional per-head q/k RMSNorm with one
             weight of head_dim shared by the heads, then RoPE, rotate-half
             convention, theta 1e6, frequency theta^(-2i/head_dim); query head h
             reads kv head h // (heads / kv_heads)) and a SwiGLU MLP
             (silu(gate) * up, gate and up stacked in one projection); no
             biases; RMSNorm, eps 1e-6 everywhere (model.c, kernels.c,
             attention.c)
  placement  pre:  h + F(Norm(h)), final norm before the head;
             post: Norm(h + F(h)), entry norm on the embedding, no final norm;
             peri: h + Norm(F(Norm(h))), final norm (model.c sublayer_output)
  head       untied lm_head, as bench_step (lattice_model_params_init default)
  loss       --loss distill (default): 0.7 * KL(teacher || student) + 0.3 * CE at
             tau 1, full vocabulary, against fixed teacher logits of spread ~2
             (bench_step's lattice_distill_dense with the study's defaults);
             --loss ce: plain mean cross-entropy (lattice_model_cross_entropy)
  optimizer  AdamW betas (0.9, 0.95), eps 1e-8, weight decay 0 on matrices
             only, clipping to global norm 0.5, learning rate of the lattice
             warmup + cosine schedule (lattice_optim_params_init); nothing frozen
  data       bench_step's batch: splitmix64 from seed 20240611, sequences of
             seq + 1 ids shifted by one

Weights are drawn from N(0, 0.02^2) as in liblattice, but by torch's generator,
so the losses agree in size (about ln(vocab) at the start), not in digits.

Output: "key value" lines as bench_step's (step_ms, tokens_per_s, ...), and
lines starting with '#' for people.
"""

import argparse
import ctypes
import math
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import bench_shape  # noqa: E402  (after the path it lives on)

WARMUP_STEPS = 2
TOKEN_SEED = 20240611
RMS_EPS = 1e-6
ROPE_THETA = 1e6
INIT_STD = 0.02
SEED = 1

# lattice_optim_params_init
LR, MIN_LR, WARMUP, TOTAL = 1e-4, 1e-6, 750, 50000
BETAS, ADAM_EPS, WEIGHT_DECAY, CLIP_NORM = (0.9, 0.95), 1e-8, 0.0, 0.5

MASK64 = (1 << 64) - 1


def splitmix64(state):
    """(next state, value): examples/example_util.h ex_rng_next."""
    state = (state + 0x9E3779B97F4A7C15) & MASK64
    z = state
    z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK64
    z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK64
    return state, z ^ (z >> 31)


def bench_batch(batch, seq, vocab):
    """bench_step's tokens and targets: rows of seq + 1 random ids, shifted by one."""
    state = TOKEN_SEED
    tokens, targets = [], []
    for _ in range(batch):
        state, value = splitmix64(state)
        prev = value % vocab
        row_tokens, row_targets = [], []
        for _ in range(seq):
            state, value = splitmix64(state)
            row_tokens.append(prev)
            row_targets.append(value % vocab)
            prev = value % vocab
        tokens.append(row_tokens)
        targets.append(row_targets)
    return tokens, targets


def lr_at(step):
    """The learning rate of schedule step `step` (optim.c lr_at)."""
    if step < WARMUP:
        return LR * (step + 1) / WARMUP
    progress = min(1.0, (step - WARMUP) / (TOTAL - WARMUP))
    return MIN_LR + 0.5 * (LR - MIN_LR) * (1.0 + math.cos(math.pi * progress))


def parse_args(argv):
    parser = argparse.ArgumentParser(
        prog="torch_step",
        description="Time a training step of the benchmark student in PyTorch "
                    "(the peer of liblattice's bench_step).")
    bench_shape.add_shape_arguments(parser)
    parser.add_argument("--placement", choices=bench_shape.PLACEMENTS, default="pre",
                        help="normalization placement (default %(default)s)")
    parser.add_argument("--threads", type=int, default=2, metavar="N",
                        help="threads (default %(default)s)")
    parser.add_argument("--steps", type=int, default=10, metavar="N",
                        help="timed steps, after %d warmup steps (default %%(default)s)"
                        % WARMUP_STEPS)
    parser.add_argument("--loss", choices=("distill", "ce"), default="distill",
                        help="distill: 0.7 KL + 0.3 CE against fixed teacher logits, as the "
                             "study trains (default); ce: cross-entropy only")
    args = parser.parse_args(argv)
    if not 1 <= args.threads <= 4096:
        parser.error("--threads must be in 1..4096")
    if not 1 <= args.steps <= 1000000:
        parser.error("--steps must be in 1..1000000")
    try:
        args.shape = bench_shape.resolve_shape(args)
    except ValueError as err:
        parser.error(str(err))
    return args


def build_model(torch, shape, placement):
    nn = torch.nn
    F = torch.nn.functional

    class RMSNorm(nn.Module):
        def __init__(self, width):
            super().__init__()
            self.weight = nn.Parameter(torch.ones(width))

        def forward(self, x):
            return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + RMS_EPS) * self.weight

    class Block(nn.Module):
        def __init__(self):
            super().__init__()
            D, H, KV, hd, ff = (shape["d_model"], shape["heads"], shape["kv_heads"],
                                shape["head_dim"], shape["d_ff"])
            self.H, self.KV, self.hd, self.ff = H, KV, hd, ff
            self.qkv = nn.Linear(D, (H + 2 * KV) * hd, bias=False)
            self.o = nn.Linear(H * hd, D, bias=False)
            self.gate_up = nn.Linear(D, 2 * ff, bias=False)
            self.down = nn.Linear(ff, D, bias=False)
            self.q_norm = RMSNorm(hd) if shape["qk_norm"] else None
            self.k_norm = RMSNorm(hd) if shape["qk_norm"] else None
            self.in1 = RMSNorm(D) if placement in ("pre", "peri") else None
            self.in2 = RMSNorm(D) if placement in ("pre", "peri") else None
            self.out1 = RMSNorm(D) if placement in ("post", "peri") else None
            self.out2 = RMSNorm(D) if placement in ("post", "peri") else None

        def attention(self, x, cos, sin, mask):
            B, T, _ = x.shape
            H, KV, hd = self.H, self.KV, self.hd
            q, k, v = self.qkv(x).split([H * hd, KV * hd, KV * hd], dim=-1)
            q = q.view(B, T, H, hd).transpose(1, 2)
            k = k.view(B, T, KV, hd).transpose(1, 2)
            v = v.view(B, T, KV, hd).transpose(1, 2)
            if self.q_norm is not None:
                q = self.q_norm(q)
                k = self.k_norm(k)
            q = rope(q, cos, sin)
            k = rope(k, cos, sin)
            if KV != H:  # each kv head serves H / KV consecutive query heads
                k = k[:, :, None].expand(B, KV, H // KV, T, hd).reshape(B, H, T, hd)
                v = v[:, :, None].expand(B, KV, H // KV, T, hd).reshape(B, H, T, hd)
            scores = torch.matmul(q, k.transpose(-2, -1)) * (1.0 / math.sqrt(hd))
            probs = torch.softmax(scores.masked_fill(mask, float("-inf")), dim=-1)
            out = torch.matmul(probs, v).transpose(1, 2).reshape(B, T, H * hd)
            return self.o(out)

        def mlp(self, x):
            gate, up = self.gate_up(x).split([self.ff, self.ff], dim=-1)
            return self.down(F.silu(gate) * up)

        def forward(self, h, cos, sin, mask):
            if placement == "pre":
                h = h + self.attention(self.in1(h), cos, sin, mask)
                return h + self.mlp(self.in2(h))
            if placement == "post":
                h = self.out1(h + self.attention(h, cos, sin, mask))
                return self.out2(h + self.mlp(h))
            h = h + self.out1(self.attention(self.in1(h), cos, sin, mask))
            return h + self.out2(self.mlp(self.in2(h)))

    def rope(x, cos, sin):
        half = x.shape[-1] // 2
        a, b = x[..., :half], x[..., half:]
        return torch.cat((a * cos - b * sin, b * cos + a * sin), dim=-1)

    class Student(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Embedding(shape["vocab"], shape["d_model"])
            self.boundary_norm = RMSNorm(shape["d_model"])  # entry (post) or final norm
            self.blocks = nn.ModuleList(Block() for _ in range(shape["layers"]))
            self.head = nn.Linear(shape["d_model"], shape["vocab"], bias=False)
            # RoPE table as lattice__rope_table: angles in double, stored as float.
            T, hd = shape["seq"], shape["head_dim"]
            pos = torch.arange(T, dtype=torch.float64)[:, None]
            freq = ROPE_THETA ** (-2.0 * torch.arange(hd // 2, dtype=torch.float64) / hd)
            self.register_buffer("cos", torch.cos(pos * freq).float(), persistent=False)
            self.register_buffer("sin", torch.sin(pos * freq).float(), persistent=False)
            self.register_buffer("mask", torch.ones(T, T, dtype=torch.bool).triu(1),
                                 persistent=False)
            for module in self.modules():
                if isinstance(module, (nn.Linear, nn.Embedding)):
                    nn.init.normal_(module.weight, 0.0, INIT_STD)

        def forward(self, tokens):
            T = tokens.shape[1]
            cos, sin, mask = self.cos[:T], self.sin[:T], self.mask[:T, :T]
            h = self.embed(tokens)
            if placement == "post":
                h = self.boundary_norm(h)
            for block in self.blocks:
                h = block(h, cos, sin, mask)
            if placement != "post":
                h = self.boundary_norm(h)
            return self.head(h)

    return Student()


def make_optimizer(torch, model):
    """AdamW with lattice's settings; decay (0 by default) on matrices only."""
    matrices = [p for p in model.parameters() if p.dim() == 2]
    vectors = [p for p in model.parameters() if p.dim() != 2]
    return torch.optim.AdamW([{"params": matrices, "weight_decay": WEIGHT_DECAY},
                              {"params": vectors, "weight_decay": 0.0}],
                             lr=lr_at(0), betas=BETAS, eps=ADAM_EPS)


def optimizer_step(torch, optim, params, step):
    """lattice_optim_step: clip to the global norm, then update at the
    schedule's rate. A non-finite norm updates nothing; returns False then."""
    norm = torch.nn.utils.clip_grad_norm_(params, CLIP_NORM)
    if not torch.isfinite(norm):
        return False
    for group in optim.param_groups:
        group["lr"] = lr_at(step)
    optim.step()
    return True


def blas_info(torch):
    """The BLAS library torch's process has loaded, with OpenBLAS's own
    configuration when it is OpenBLAS, and oneDNN's version."""
    libs = []
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if len(line.split()) >= 6 else ""
                name = os.path.basename(path).lower()
                if any(tag in name for tag in ("blas", "blis", "mkl")) and path not in libs:
                    libs.append(path)
    except OSError:
        pass
    parts = []
    for path in libs:
        if "openblas" not in os.path.basename(path).lower():
            continue
        try:
            lib = ctypes.CDLL(path)
            lib.openblas_get_config.restype = ctypes.c_char_p
            lib.openblas_get_corename.restype = ctypes.c_char_p
            parallel = {0: "sequential", 1: "pthreads", 2: "OpenMP"}.get(
                lib.openblas_get_parallel(), "?")
            parts.append("%s, core %s, %s, %d threads" % (
                lib.openblas_get_config().decode().strip(),
                lib.openblas_get_corename().decode(), parallel,
                lib.openblas_get_num_threads()))
        except (OSError, AttributeError):
            continue
        break
    if not parts:
        parts.append("BLAS libraries: %s" % (", ".join(libs) if libs else "none found"))
    if torch.backends.mkldnn.is_available():
        parts.append("oneDNN %s" % ".".join(str(v) for v in torch._C._get_mkldnn_version())
                     if hasattr(torch._C, "_get_mkldnn_version") else "oneDNN available")
    parts.append("ATen %s" % ("OpenMP" if torch.backends.openmp.is_available() else "native"))
    return "; ".join(parts)


def main(argv):
    args = parse_args(argv)
    shape = args.shape
    # Before torch (and its BLAS) is loaded: both read these once, at load time.
    os.environ["OMP_NUM_THREADS"] = str(args.threads)
    os.environ["OPENBLAS_NUM_THREADS"] = str(args.threads)
    try:
        import torch
    except ImportError as err:
        print("torch_step: PyTorch is not importable (%s); on Debian: apt install "
              "python3-torch, and run with /usr/bin/python3" % err, file=sys.stderr)
        return 3
    torch.set_num_threads(args.threads)
    torch.manual_seed(SEED)

    model = build_model(torch, shape, args.placement)
    n_params = sum(p.numel() for p in model.parameters())
    optim = make_optimizer(torch, model)
    token_rows, target_rows = bench_batch(shape["batch"], shape["seq"], shape["vocab"])
    tokens = torch.tensor(token_rows, dtype=torch.long)
    targets = torch.tensor(target_rows, dtype=torch.long).view(-1)
    n_pos = shape["batch"] * shape["seq"]
    # fixed teacher logits, about N(0, 2^2) like bench_step's; their log-softmax once
    teacher_logp = torch.log_softmax(2.0 * torch.randn(n_pos, shape["vocab"]), dim=-1)
    params = list(model.parameters())

    torch.matmul(torch.ones(64, 64), torch.ones(64, 64))  # load the BLAS before asking about it
    print("# torch %s, %d threads, %s" % (torch.__version__, torch.get_num_threads(),
                                          blas_info(torch)))
    print(bench_shape.model_line(shape, n_params))
    print("# %s-norm, qk-norm %d, untied head, %s loss, AdamW (0.9, 0.95) "
          "clip %.1f, every group trainable"
          % (args.placement, shape["qk_norm"],
             "distillation (0.7 KL + 0.3 CE, fixed teacher logits)" if args.loss == "distill"
             else "cross-entropy", CLIP_NORM))
    print("# %d warmup steps, %d timed steps" % (WARMUP_STEPS, args.steps))
    sys.stdout.flush()

    t_fwd = t_bwd = t_opt = 0.0
    loss_first = loss_last = float("nan")
    for step in range(WARMUP_STEPS + args.steps):
        t0 = time.perf_counter()
        logits = model(tokens)
        flat = logits.view(-1, shape["vocab"])
        if args.loss == "distill":
            logq = torch.log_softmax(flat, dim=-1)
            kl = torch.nn.functional.kl_div(logq, teacher_logp, log_target=True,
                                            reduction="sum") / n_pos
            loss = 0.7 * kl + 0.3 * torch.nn.functional.nll_loss(logq, targets)
        else:
            loss = torch.nn.functional.cross_entropy(flat, targets)
        t1 = time.perf_counter()
        optim.zero_grad(set_to_none=True)
        loss.backward()
        t2 = time.perf_counter()
        if not optimizer_step(torch, optim, params, step):
            print("torch_step: gradient norm is not finite at step %d" % step, file=sys.stderr)
            return 1
        t3 = time.perf_counter()
        value = loss.item()
        if step == 0:
            loss_first = value
        loss_last = value
        if step >= WARMUP_STEPS:
            t_fwd += t1 - t0
            t_bwd += t2 - t1
            t_opt += t3 - t2

    steps = args.steps
    step_s = (t_fwd + t_bwd + t_opt) / steps
    print("loss_first %.4f" % loss_first)
    print("loss_last %.4f" % loss_last)
    print("step_ms %.1f" % (1e3 * step_s))
    print("forward_ms %.1f" % (1e3 * t_fwd / steps))
    print("backward_ms %.1f" % (1e3 * t_bwd / steps))
    print("optim_ms %.1f" % (1e3 * t_opt / steps))
    print("tokens_per_s %.0f" % (shape["batch"] * shape["seq"] / step_s))
    print("n_params %d" % n_params)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
