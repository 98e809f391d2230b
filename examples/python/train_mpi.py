#!/usr/bin/env python3
"""Data-parallel training from Python: every rank of an mpirun job trains its
share of each batch, gradients summed over the ranks (lattice.Dist, which is
liblattice-mpi over an mpi4py communicator). The same script on N ranks
trains as one process with N times the rows per rank, to rounding.

    LATTICE_LIBRARY=build/liblattice/liblattice.so.1 PYTHONPATH=liblattice/python \\
        mpirun -np 2 python3 examples/python/train_mpi.py [TRAIN.txt VAL.txt] [--steps N]

Needs mpi4py (Debian: python3-mpi4py) and a liblattice built with MPI
(libopenmpi-dev), whose liblattice-mpi.so.1 sits beside liblattice.so.1.
As root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 and
OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1.
"""
import argparse
import os
import sys
import traceback

from mpi4py import MPI   # initialises MPI (and finalises it at exit)

import lattice

parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
parser.add_argument("train", nargs="?", default="examples/data/austen/train.txt")
parser.add_argument("val", nargs="?", default="examples/data/austen/val.txt")
parser.add_argument("--steps", type=int, default=200)
parser.add_argument("--batch", type=int, default=8, help="global batch (rows over all ranks)")
args = parser.parse_args()
comm = MPI.COMM_WORLD


def train():
    with lattice.Dist(comm) as dist:
        if args.batch % dist.size:
            raise SystemExit(f"--batch {args.batch} does not divide by {dist.size} ranks")
        backend = lattice.Backend("default", threads=1)   # LATTICE_BACKEND names another
        if dist.rank == 0:
            kernels = backend.kernels
            origin = " (from LATTICE_BACKEND)" if os.environ.get("LATTICE_BACKEND") else ""
            print(f"backend {backend.name}{origin}: {kernels.library}, {kernels.kernels} kernels, "
                  f"{dist.size} ranks x {backend.threads} threads", flush=True)
        # Every rank builds the same objects (same seeds); the model holds one rank's rows.
        model = lattice.Model(vocab_size=257, d_model=64, n_layers=3, n_active_layers=3,
                              n_heads=4, n_kv_heads=2, head_dim=16, d_ff=192,
                              max_batch=args.batch // dist.size, max_seq=64, norm="post",
                              seed=1, backend=backend)
        data = lattice.Data.from_text(args.train, val_path=args.val, batch_size=args.batch,
                                      seq_len=64, split_long=1, seed=1)
        optim = lattice.Optim(model, lr=2e-3, min_lr=2e-4, warmup_steps=args.steps // 20,
                              total_steps=args.steps, clip_norm=1.0)
        schedule = lattice.Schedule([dict(steps=args.steps, active_layers=3)])

        def report(m):   # runs on every rank; rank 0 prints
            if dist.rank == 0 and (m.step % 50 == 0 or m.phase_end):
                print(f"step {m.step:4d}  loss {m.loss:.4f}  lr {m.lr:.2e}", flush=True)

        trainer = lattice.Trainer(model, data, optim, schedule, on_step=report, dist=dist)
        trainer.run()
        val = trainer.evaluate()   # summed over the ranks' validation shares
        if dist.rank == 0:
            print(f"{dist.size} ranks x {args.batch // dist.size} rows: "
                  f"validation CE {val:.4f} after {args.steps} steps")
        trainer.close()


# One rank's failure must end the job, not leave the others waiting in a collective.
try:
    train()
except SystemExit as e:
    if e.code:
        print(e.code, file=sys.stderr, flush=True)
        comm.Abort(1)
except BaseException:
    traceback.print_exc()
    sys.stderr.flush()
    comm.Abort(1)
