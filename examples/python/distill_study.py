#!/usr/bin/env python3
"""The reproduction's core loop, from Python: train a teacher, distil it into
9-layer students under pre/post-norm x joint/grow, print validation CE per
phase and the interaction. A toy scale; examples/reproduce is the full study.

    LATTICE_LIBRARY=build/liblattice/liblattice.so PYTHONPATH=liblattice/python \\
        python3 examples/python/distill_study.py [TRAIN.txt VAL.txt]
"""
import os
import sys
import lattice

train, val = sys.argv[1:3] if len(sys.argv) > 2 else (
    "examples/data/austen/train.txt", "examples/data/austen/val.txt")
SHAPE = dict(vocab_size=257, d_model=64, n_heads=4, n_kv_heads=2, head_dim=16, d_ff=192,
             max_batch=8, max_seq=64, rope_theta=10000.0)
backend = lattice.Backend("default", threads=2)   # LATTICE_BACKEND names another
kernels = backend.kernels
print(f"backend {backend.name}{' (from LATTICE_BACKEND)' if os.environ.get('LATTICE_BACKEND') else ''}"
      f": {kernels.library}, {kernels.kernels} kernels, {backend.threads} threads", flush=True)

def data(seed):
    return lattice.Data.from_text(train, val_path=val, batch_size=8, seq_len=64,
                                  split_long=1, seed=seed)

def train_model(model, schedule, seed, teacher=None, on_eval=None):
    optim = lattice.Optim(model, lr=2e-3, min_lr=2e-4, warmup_steps=5, clip_norm=0.5)
    distill = lattice.Distill(alpha=0.7, gamma=0.3, tau=1.0) if teacher else None
    trainer = lattice.Trainer(model, data(seed), optim, schedule, teacher=teacher,
                              distill=distill, eval_batches=16, on_eval=on_eval)
    trainer.run()
    return trainer.evaluate()

# A 6-layer pre-norm teacher trained on cross-entropy.
teacher_model = lattice.Model(n_layers=6, n_active_layers=6, seed=1000, backend=backend, **SHAPE)
print(f"teacher val CE {train_model(teacher_model, lattice.Schedule.preset('joint', 6, 1, 200), 1):.4f}")
teacher = lattice.Teacher.from_model(teacher_model)

results = {}
for placement in ("pre", "post"):
    for regime in ("joint", "grow"):
        student = lattice.Model(n_layers=9, n_active_layers=9, seed=100, norm=placement,
                                backend=backend, **SHAPE)   # same seed: paired weights
        teacher.init_student(student)   # embedding (frozen), head, boundary norm
        phases = []
        results[placement, regime] = train_model(
            student, lattice.Schedule.preset(regime, 3, 3, 40), 7, teacher,
            on_eval=lambda m: m.phase_end and phases.append(f"{m.active_layers}L {m.val_ce:.4f}"))
        print(f"{placement:4s} {regime:5s} val CE per phase: {', '.join(phases)}")

d_joint = results["post", "joint"] - results["pre", "joint"]
d_grow = results["post", "grow"] - results["pre", "grow"]
print(f"post - pre: joint {d_joint:+.4f}, grow {d_grow:+.4f}; interaction {d_grow - d_joint:+.4f}"
      " (paper: +0.0004, -0.0328, -0.0332)")
