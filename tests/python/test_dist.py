"""lattice.Dist's parts that need no MPI: the guard that aborts the job on an
exception no one catches (since 0.4), with a stand-in communicator.

The guard over 2 real ranks under mpirun is tests/mpi/python_raise.py.
Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python.
"""

import contextlib
import io
import sys
import unittest

import lattice
from lattice import dist


class FakeComm:
    """What the guard asks of an mpi4py communicator."""

    def __init__(self, size=2, rank=1):
        self.size, self.rank, self.aborted = size, rank, []

    def Get_size(self):   # noqa: N802 - mpi4py's names
        return self.size

    def Get_rank(self):   # noqa: N802
        return self.rank

    def Abort(self, code):   # noqa: N802
        self.aborted.append(code)


class GuardTest(unittest.TestCase):
    def setUp(self):
        self.hook, self.guarded = sys.excepthook, dist._guarded
        dist._guarded = None
        self.seen = []
        sys.excepthook = lambda *exc: self.seen.append(exc[0])   # the hook it chains to

    def tearDown(self):
        sys.excepthook, dist._guarded = self.hook, self.guarded
        if hasattr(sys, "ps1") and getattr(self, "set_ps1", False):
            del sys.ps1

    def raise_to_the_top(self):
        """What the interpreter does with an exception no one caught."""
        try:
            raise RuntimeError("uncaught")
        except RuntimeError:
            err = io.StringIO()
            with contextlib.redirect_stderr(err):
                sys.excepthook(*sys.exc_info())
            return err.getvalue()

    def test_aborts_after_the_traceback(self):
        comm = FakeComm(size=2, rank=1)
        self.assertTrue(dist._guard(comm))
        said = self.raise_to_the_top()
        self.assertEqual(self.seen, [RuntimeError])   # the previous hook printed it first
        self.assertEqual(comm.aborted, [1])
        self.assertIn("lattice.Dist: rank 1 raised an exception no one caught", said)
        self.assertIn("abort_on_exception=False", said)

    def test_once_a_process(self):
        first, second = FakeComm(), FakeComm()
        self.assertTrue(dist._guard(first))
        self.assertFalse(dist._guard(second))
        self.raise_to_the_top()
        self.assertEqual((first.aborted, second.aborted), ([1], []))

    def test_not_alone_nor_at_a_prompt(self):
        alone = FakeComm(size=1, rank=0)
        self.assertFalse(dist._guard(alone))
        if not hasattr(sys, "ps1"):
            sys.ps1, self.set_ps1 = ">>> ", True
        prompt = FakeComm()
        self.assertFalse(dist._guard(prompt))
        self.raise_to_the_top()
        self.assertEqual((alone.aborted, prompt.aborted), ([], []))
        self.assertEqual(self.seen, [RuntimeError])

    def test_documented(self):
        import inspect
        sig = inspect.signature(lattice.Dist)
        self.assertIs(sig.parameters["abort_on_exception"].default, True)
        self.assertIn("comm.Abort(1)", lattice.Dist.__doc__)


if __name__ == "__main__":
    unittest.main(verbosity=2)
