"""What the Python tests share (tests/python/test_*.py): the tiny objects they
train, a fresh interpreter for scenarios that once crashed one, and ctypes'
integer ranges. Not a test itself."""

import array
import ctypes
import os
import signal
import subprocess
import sys
import textwrap

import lattice

try:
    import numpy
except ImportError:
    numpy = None

VOCAB = 32
SEQ = 12


def tiny_model(**overrides):
    fields = dict(vocab_size=VOCAB, d_model=16, n_layers=2, n_active_layers=2, n_heads=2,
                  n_kv_heads=1, head_dim=8, d_ff=32, max_batch=4, max_seq=16, seed=7)
    fields.update(overrides)
    backend = fields.pop("backend", "ref")
    return lattice.Model(backend=backend, **fields)


def counting_corpus(n_docs=40, length=SEQ):
    """Documents that start with boundary 0 and then count up: easy to learn."""
    ids = array.array("i")
    for d in range(n_docs):
        ids.append(0)
        ids.extend((d + i) % (VOCAB - 1) + 1 for i in range(length))
    return ids


def tiny_data(**overrides):
    fields = dict(vocab_size=VOCAB, boundary_id=0, batch_size=4, seq_len=SEQ,
                  val_fraction=0.2, seed=3)
    fields.update(overrides)
    return lattice.Data.from_memory(counting_corpus(), **fields)


HERE = os.path.dirname(os.path.abspath(__file__))


def run_isolated(test, code, timeout=60):
    """Run code in a fresh interpreter, with this file's helpers, and return its stdout.

    For scenarios that crashed the interpreter: a crash (or a hang) fails the
    test instead of killing the test runner.
    """
    prelude = ("import array, sys, threading, time\n"
               f"sys.path.insert(0, {HERE!r})\n"
               "import lattice\n"
               "from lattice import LatticeError, Status\n"
               "from lattice_helpers import SEQ, VOCAB, counting_corpus, tiny_data, tiny_model\n")
    r = subprocess.run([sys.executable, "-X", "faulthandler", "-c",
                        prelude + textwrap.dedent(code)],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       universal_newlines=True, timeout=timeout)
    how = (f"killed by {signal.Signals(-r.returncode).name}" if r.returncode < 0
           else f"exit status {r.returncode}")
    test.assertEqual(r.returncode, 0, f"the child process ended with {how}:\n{r.stderr}")
    return r.stdout


# ctypes' integer types (c_int32 is c_int, c_uint64 c_size_t, and so on)
C_INTEGERS = (ctypes.c_int8, ctypes.c_uint8, ctypes.c_int16, ctypes.c_uint16, ctypes.c_int,
              ctypes.c_uint, ctypes.c_long, ctypes.c_ulong, ctypes.c_longlong,
              ctypes.c_ulonglong)


def c_range(ctype):
    """(min, max) of a ctypes integer type."""
    bits = 8 * ctypes.sizeof(ctype)
    if ctype(-1).value < 0:
        return -2**(bits - 1), 2**(bits - 1) - 1
    return 0, 2**bits - 1


def next_token_teacher(tokens, batch, seq, vocab, logits):
    """A callback teacher that is confident the count goes on."""
    for i, t in enumerate(tokens):
        row = i * vocab
        for v in range(vocab):
            logits[row + v] = 0.0
        logits[row + t % (vocab - 1) + 1] = 4.0
