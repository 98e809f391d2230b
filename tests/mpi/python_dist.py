#!/usr/bin/env python3
"""lattice.Dist (liblattice-mpi from Python, mpi4py's communicator) on two ranks.

    python_dist.py MPIRUN [EXAMPLE]   the test: checks mpi4py, then starts
                                      itself on 2 ranks (and the example, if given)
    python_dist.py                    one rank's part (under mpirun)

The checks of tests/mpi/test_dist.c, from Python: 2 ranks of 2 rows train as
1 process of 4 rows (distillation, growth with a token-budget phase) to 1e-5
relative, bit-identically twice, with the same weights on both ranks;
attaching after creation gives the same run; a checkpoint of 2 ranks
resumes on 1 with other_ranks=True, and only so; a hand-written loop's summed
gradients are the whole batch's; the scalar sums; refusals carry their
reason, in LatticeError and lattice.last_error(), ranks set up unlike each
other among them. A failure on one rank
aborts the job (MPI_Abort) rather than leave the other waiting.
"""

import array
import importlib.util
import os
import subprocess
import sys
import tempfile
import traceback

REL_TOL = 1e-5  # as test_dist.c: the same sums in another order
VOCAB, SEQ, N_IDS = 11, 6, 600


def driver(mpirun, example=None):
    # (not imported here: mpi4py.MPI would make this process an MPI singleton)
    if importlib.util.find_spec("mpi4py") is None:
        print(f"{sys.executable} has no mpi4py (apt-get install python3-mpi4py): skipped")
        return 77
    base = [mpirun, "--oversubscribe", "-np", "2"]
    r = subprocess.run(base + [sys.executable, os.path.abspath(__file__)], timeout=180)
    if r.returncode != 0 or not example:
        return r.returncode
    # the example, on a tiny corpus for a few steps
    with tempfile.TemporaryDirectory(prefix="lattice-mpi.") as tmp:
        paths = []
        for name, text in (("train.txt", "the lattice grows one block at a time. " * 40),
                           ("val.txt", "a block at a time, the lattice grows. " * 10)):
            paths.append(os.path.join(tmp, name))
            with open(paths[-1], "w") as f:
                f.write(text)
        r = subprocess.run(base + [sys.executable, example, *paths, "--steps", "4"],
                           stdout=subprocess.PIPE, universal_newlines=True, timeout=180)
        sys.stdout.write(r.stdout)
        if r.returncode != 0:
            return r.returncode
        if r.stdout.count("validation CE") != 1:
            print("the example should print its validation CE once (rank 0)")
            return 1
    return 0


# ---- one rank ---------------------------------------------------------------------------

def ids():
    """Documents of 3..8 tokens, each starting with the boundary id 10 (tests/distworld.h)."""
    out, x = [], 12345
    mask = (1 << 64) - 1
    while len(out) < N_IDS:
        x = (x * 6364136223846793005 + 1442695040888963407) & mask
        length = 3 + (x >> 33) % 6
        out.append(10)
        for _ in range(1, length):
            if len(out) >= N_IDS:
                break
            x = (x * 6364136223846793005 + 1442695040888963407) & mask
            out.append((x >> 35) % 10)
    return array.array("i", out)


def world(lattice, batch, max_batch, teacher=True, dist=None, data_seed=3):
    """The run of tests/distworld.h: (trainer, model). dist: data-parallel from creation."""
    be = lattice.Backend("ref")
    shape = dict(vocab_size=VOCAB, d_model=8, n_layers=2, n_active_layers=2, n_heads=2,
                 n_kv_heads=1, head_dim=4, d_ff=12, max_batch=max_batch, max_seq=SEQ,
                 norm="pre", backend=be)
    model = lattice.Model(seed=42, **shape)
    tea = lattice.Teacher.from_model(lattice.Model(seed=7, **shape)) if teacher else None
    data = lattice.Data.from_memory(ids(), vocab_size=VOCAB, boundary_id=10, batch_size=batch,
                                    seq_len=SEQ, seed=data_seed, val_fraction=0.1)
    optim = lattice.Optim(model, lr=1e-2, warmup_steps=2, total_steps=20, clip_norm=1.0)
    schedule = lattice.Schedule([dict(steps=0, tokens=80, active_layers=1),
                                 dict(steps=12, active_layers=2, reset_optimizer=1,
                                      block_init="copy")])
    trainer = lattice.Trainer(model, data, optim, schedule, teacher=tea, eval_every=4,
                              dist=dist)
    return trainer, model


def weights(model):
    return b"".join(bytes(t.data) for t in model.tensors())


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def scalar_sums(lattice, d):
    r = d.rank
    n = d.sum(array.array("q", [r + 1, 1 << 40]))
    check(list(n) == [3, 1 << 41], f"int64 sums {list(n)}")
    x = d.sum(array.array("d", [r + 0.25, 1e16 if r else 1.0, -r]))
    check(list(x) == [1.5, 1.0 + 1e16, -1.0], f"double sums {list(x)}")
    check(len(d.sum(array.array("d"))) == 0, "empty sum")
    a = [0.1 * i + 1e-3 for i in range(37)]
    b = [1.0 / (i + 3) for i in range(37)]
    f = d.sum(array.array("f", a if r == 0 else b))
    want = array.array("f", [float(array.array("f", [p])[0]) + float(array.array("f", [q])[0])
                             for p, q in zip(a, b)])
    check(f.tobytes() == want.tobytes(), "float sums differ from the rank-ordered sum")
    stats = d.stats()
    check(stats.sum_calls >= 3 and stats.sum_bytes > 0 and stats.other_calls >= 1,
          f"stats {stats}")
    d.reset_stats()
    check(d.stats().sum_calls == 0, "reset_stats")


def equivalence(lattice, d, comm):
    alone, model = world(lattice, 4, 4)
    ref = [alone.step() for _ in range(10)]
    two, model2 = world(lattice, 4, 2, dist=d)   # max_batch: one rank's share
    got = [two.step() for _ in range(10)]
    val_two = two.evaluate()
    for i, (a, b) in enumerate(zip(ref, got)):
        check(a.counters == b.counters, f"step {i}: the counters are not the global ones: "
              f"{a.counters} vs {b.counters}")
        check(abs(a.loss - b.loss) <= REL_TOL * abs(a.loss),
              f"step {i}: loss {a.loss:.9g} alone, {b.loss:.9g} over 2 ranks")
    mine = weights(model2)
    check(comm.bcast(mine, root=0) == mine, "the ranks' weights differ")
    again, model3 = world(lattice, 4, 2, dist=d)
    for _ in range(10):
        again.step()
    check(weights(model3) == mine, "two runs over 2 ranks differ")
    # attached after creation (a model holding the whole batch): the same run
    attached, model4 = world(lattice, 4, 4)
    d.attach(attached)
    for _ in range(10):
        attached.step()
    check(attached.evaluate() == val_two, "validation attached vs from creation")
    d.detach(attached)
    val_alone = attached.evaluate()   # alone again: no collective call
    check(abs(val_alone - val_two) <= REL_TOL * val_two, f"validation alone {val_alone:.9g} "
          f"vs {val_two:.9g}")
    check(weights(model4) == mine, "attaching after creation changed the run")


def checkpoint_other_ranks(lattice, d, comm):
    """A checkpoint written over 2 ranks resumes on 1 with other_ranks=True (since 0.4),
    and is refused without it."""
    tmp = comm.bcast(tempfile.mkdtemp(prefix="lattice-ranks.") if comm.Get_rank() == 0 else None,
                     root=0)
    path = os.path.join(tmp, "two.safetensors")
    two, model = world(lattice, 4, 2, dist=d)
    for _ in range(4):
        two.step()
    two.save_checkpoint(path)   # rank 0 writes, both return once it has
    saved = weights(model)
    alone, model1 = world(lattice, 4, 4)   # no dist: one rank
    try:
        alone.load_checkpoint(path)
    except lattice.LatticeError as e:
        check(e.code == lattice.Status.INVALID_CONFIG, f"status {e.code}")
        check("over 2 ranks and this run has 1" in str(e), f"message: {e}")
    else:
        raise AssertionError("a checkpoint of 2 ranks loaded on 1 without other_ranks")
    alone.load_checkpoint(path, other_ranks=True)
    check(weights(model1) == saved, "2 ranks' checkpoint on 1: the weights differ")
    check(alone.schedule.counters == two.schedule.counters, "2 ranks' checkpoint on 1: counters")
    comm.Barrier()
    if comm.Get_rank() == 0:
        os.remove(path)
        os.rmdir(tmp)


def hand_written_loop(lattice, d):
    be = lattice.Backend("ref")
    shape = dict(vocab_size=VOCAB, d_model=8, n_layers=2, n_active_layers=2, n_heads=2,
                 n_kv_heads=1, head_dim=4, d_ff=12, max_batch=4, max_seq=SEQ, seed=42, backend=be)
    data = lattice.Data.from_memory(ids(), vocab_size=VOCAB, boundary_id=10, batch_size=4,
                                    seq_len=SEQ, seed=3, val_fraction=0.1)
    one, mine = lattice.Model(**shape), lattice.Model(**shape)
    b = data.next()
    one.forward(b.tokens, b.batch, b.seq)
    one.cross_entropy(b.targets, b.mask)
    one.backward()
    rows = b.batch // d.size
    lo, hi = d.rank * rows * b.seq, (d.rank + 1) * rows * b.seq
    tokens, targets, mask = (memoryview(x).cast("B").cast(memoryview(x).format)[lo:hi]
                             for x in (b.tokens, b.targets, b.mask))
    n_local = sum(mask)
    n = d.sum(array.array("q", [n_local]))
    check(n[0] == b.n_tokens, f"counted tokens {n[0]} vs {b.n_tokens}")
    mine.forward(tokens, rows, b.seq)
    mine.cross_entropy(targets, mask)
    mine.backward()
    d.allreduce_gradients(mine, n_local / n[0])
    for a, g in zip(one.tensors(), mine.tensors()):
        ga, gg = a.grad.cast("B").cast("f"), g.grad.cast("B").cast("f")
        mx = max(abs(v) for v in ga)
        for j, (u, v) in enumerate(zip(ga, gg)):
            check(abs(u - v) <= 1e-5 * mx + 1e-9, f"{a.name}[{j}]: {u} vs {v}")


def refusals(lattice, d):
    try:
        world(lattice, 3, 3, teacher=False, dist=d)
    except lattice.LatticeError as e:
        check("does not divide by 2 ranks" in str(e), f"message: {e}")
        check("does not divide by 2 ranks" in lattice.last_error(),
              f"last_error: {lattice.last_error()!r}")
    else:
        raise AssertionError("a batch of 3 over 2 ranks was taken")
    # ranks set up differently: refused on both, naming the field (0.3 trained them)
    for odd, says in ((dict(batch=8, max_batch=4), "rank 1's data batch_size 8 differs from "
                       "rank 0's 4"),
                      (dict(data_seed=4), "rank 1's data seed 4 differs from rank 0's 3")):
        args = dict(batch=4, max_batch=2)
        if d.rank == 1:
            args.update(odd)
        try:
            world(lattice, dist=d, **args)
        except lattice.LatticeError as e:
            check(e.code == lattice.Status.INVALID_CONFIG, f"status {e.code}")
            check(says in str(e), f"message: {e}")
        else:
            raise AssertionError(f"rank {d.rank}: ranks set up unlike each other were taken")
    for bad, kind in ((array.array("i", [1]), TypeError), (bytes(8), TypeError),
                      ([1.0], TypeError)):
        try:
            d.sum(bad)
        except kind:
            pass
        else:
            raise AssertionError(f"sum({bad!r}) was taken")
    try:
        lattice.Dist("MPI_COMM_WORLD")
    except TypeError as e:
        check("mpi4py communicator" in str(e), str(e))
    else:
        raise AssertionError("a string was taken as a communicator")


def rank_main():
    from mpi4py import MPI
    comm = MPI.COMM_WORLD
    try:
        import lattice
        check(comm.Get_size() == 2, f"run on 2 ranks, not {comm.Get_size()}")
        with lattice.Dist() as d:
            check((d.rank, d.size) == (comm.Get_rank(), 2), f"rank {d.rank} of {d.size}")
            scalar_sums(lattice, d)
            equivalence(lattice, d, comm)
            checkpoint_other_ranks(lattice, d, comm)
            hand_written_loop(lattice, d)
            refusals(lattice, d)
        sub = comm.Split(0, comm.Get_rank())   # any communicator, not only the world
        with lattice.Dist(sub) as d:
            check(d.size == 2, "a split communicator")
        sub.Free()
        comm.Barrier()
    except BaseException:  # noqa: B902 - the other rank must not wait for this one
        sys.stderr.write(f"rank {comm.Get_rank()}: " + traceback.format_exc())
        sys.stderr.flush()
        comm.Abort(1)
    if comm.Get_rank() == 0:
        print("python over MPI: every check passed on 2 ranks")


if __name__ == "__main__":
    if len(sys.argv) > 1:
        sys.exit(driver(*sys.argv[1:3]))
    rank_main()
