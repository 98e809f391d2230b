"""The teacher (a model, a callback, recorded logits) and the distillation loss.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import math
import unittest

import lattice
from lattice import LatticeError, Status
from lattice_helpers import VOCAB, next_token_teacher, tiny_model


class TeacherTest(unittest.TestCase):
    def test_callback_teacher(self):
        seen = []

        def fn(tokens, batch, seq, vocab, logits):
            seen.append((list(tokens), batch, seq, vocab, len(logits), logits.readonly,
                         tokens.readonly))
            next_token_teacher(tokens, batch, seq, vocab, logits)

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 2, 8)
        self.assertEqual(teacher.vocab_size, VOCAB)
        self.assertEqual(teacher.flops(2, 8), 0.0)
        out = teacher.logits(array.array("i", [3, 4, 5, 6]), 2, 2)
        self.assertEqual(seen, [([3, 4, 5, 6], 2, 2, VOCAB, 4 * VOCAB, False, True)])
        self.assertEqual(out.shape, (2, 2, VOCAB))
        self.assertEqual(out[0, 0, 4], 4.0)
        view = teacher.logits_view(array.array("i", [3, 4, 5, 6]), 2, 2)
        self.assertTrue(view.readonly)
        teacher.logits(array.array("i", [7, 8, 9, 10]), 2, 2)
        self.assertEqual(out[0, 0, 4], 4.0)          # the copy keeps the first call's values
        self.assertEqual(view[0, 0, 4], 0.0)         # the view shows the second call's
        self.assertEqual(view[0, 0, 8], 4.0)
        seen.clear()
        with self.assertRaises(LatticeError) as cm:
            teacher.logits(array.array("i", range(9)), 1, 9)       # beyond max_seq
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(TypeError):
            lattice.Teacher.from_callback(42, VOCAB, 2, 8)

    def test_callback_views_do_not_outlive_the_call(self):
        kept = []

        def fn(tokens, batch, seq, vocab, logits):
            next_token_teacher(tokens, batch, seq, vocab, logits)
            kept.append(logits)

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 1, 4)
        teacher.logits(array.array("i", range(4)), 1, 4)
        with self.assertRaises(ValueError):
            kept[0][0]                                              # released

    def test_what_a_callback_keeps_cannot_reach_the_library(self):
        """A slice of the callback's views outlives their release: it shows a copy,
        so a write through it after the call never reaches the teacher's buffer."""
        kept = []

        def fn(tokens, batch, seq, vocab, logits):
            next_token_teacher(tokens, batch, seq, vocab, logits)
            kept.append((tokens[0:2], logits[0:vocab]))

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 1, 4)
        view = teacher.logits_view(array.array("i", range(4)), 1, 4)
        want = view.tolist()
        self.assertEqual(kept[0][0].tolist(), [0, 1])
        self.assertEqual(kept[0][1].tolist(), want[0][0])       # the values fn wrote
        kept[0][1][0] = 1e30
        self.assertEqual(view.tolist(), want)

    def test_callback_exception(self):
        def fn(*args):
            raise KeyError("teacher is out")

        teacher = lattice.Teacher.from_callback(fn, VOCAB, 2, 8)
        with self.assertRaises(LatticeError) as cm:
            teacher.logits(array.array("i", range(4)), 1, 4)
        self.assertEqual(cm.exception.code, Status.BACKEND)
        self.assertIsInstance(cm.exception.__cause__, KeyError)
        self.assertIn("callback", str(cm.exception))
        # The next call is clean again.
        ok = lattice.Teacher.from_callback(next_token_teacher, VOCAB, 2, 8)
        ok.logits(array.array("i", range(4)), 1, 4)

    def test_non_finite_logits(self):
        def fn(tokens, batch, seq, vocab, logits):
            logits[0] = float("nan")

        with self.assertRaises(LatticeError) as cm:
            lattice.Teacher.from_callback(fn, VOCAB, 1, 4).logits(array.array("i", [1]), 1, 1)
        self.assertEqual(cm.exception.code, Status.NON_FINITE)

    def test_model_teacher(self):
        big = tiny_model(seed=1)
        student = tiny_model(seed=2, n_layers=1, n_active_layers=1)
        teacher = lattice.Teacher.from_model(big)
        self.assertGreater(teacher.flops(1, 4), 0.0)
        out = teacher.logits(array.array("i", range(4)), 1, 4)
        big.forward(array.array("i", range(4)), 1, 4)
        self.assertEqual(out.tolist(), big.logits().tolist())
        teacher.init_student(student)
        self.assertEqual(student.tensor("lm_head.weight").data.tolist(),
                         big.tensor("lm_head.weight").data.tolist())
        self.assertFalse(student.is_trainable("embedding"))
        callback = lattice.Teacher.from_callback(next_token_teacher, VOCAB, 1, 4)
        with self.assertRaises(LatticeError) as cm:
            callback.init_student(student)
        self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)


class DistillTest(unittest.TestCase):
    def logits(self, n, seed):
        return array.array("f", [math.sin(seed * 7.1 + i * 0.37) * 3 for i in range(n * VOCAB)])

    def test_dense(self):
        with lattice.Distill() as loss:
            self.assertAlmostEqual(loss.params.alpha, 0.7)
            self.assertAlmostEqual(loss.params.gamma, 0.3)
            s = self.logits(6, 1)
            targets = array.array("i", [1, 2, 3, 4, 5, 6])
            same = loss.dense(s, s, targets, vocab=VOCAB)
            self.assertAlmostEqual(same.kl, 0.0, places=5)
            self.assertEqual(same.n_counted, 6)
            t = self.logits(6, 2)
            grad = array.array("f", [0.0] * (6 * VOCAB))
            r = loss.dense(memoryview(s).cast("B").cast("f", (6, VOCAB)), t, targets,
                           mask=bytearray([1, 1, 1, 1, 0, 0]), dlogits=grad)
            self.assertGreater(r.kl, 0.0)
            self.assertEqual(r.n_counted, 4)
            self.assertAlmostEqual(r.loss, 0.7 * r.kl + 0.3 * r.ce, places=5)
            self.assertTrue(any(g != 0.0 for g in grad))
            with self.assertRaises(LatticeError) as cm:
                loss.dense(s, t, array.array("i", [1, 2, 3, 4, 5, VOCAB]), vocab=VOCAB)
            self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
            with self.assertRaises(ValueError):
                loss.dense(s, t, targets)               # flat logits without vocab
            with self.assertRaises(TypeError):
                loss.dense(s, t, targets, vocab=VOCAB, dlogits=bytes(6 * VOCAB * 4))

    def test_topk_with_k_vocab_is_dense(self):
        loss = lattice.Distill(alpha=1.0, gamma=0.0)
        s, t = self.logits(3, 3), self.logits(3, 4)
        index = array.array("i", list(range(VOCAB)) * 3)
        dense = loss.dense(s, t, vocab=VOCAB)
        topk = loss.topk(s, index, t, vocab=VOCAB, k=VOCAB)
        self.assertAlmostEqual(dense.loss, topk.loss, places=4)
        with self.assertRaises(ValueError) as cm:  # k cannot be found from no positions
            loss.topk(array.array("f"), array.array("i"), array.array("f"), vocab=VOCAB)
        self.assertIn("k must be given", str(cm.exception))
        reverse = lattice.Distill(direction=lattice.KLDirection.REVERSE, gamma=0.0)
        with self.assertRaises(LatticeError) as cm:
            reverse.topk(s, index, t, vocab=VOCAB, k=VOCAB)
        self.assertEqual(cm.exception.code, Status.UNSUPPORTED)
        for tau in (0.0, 0.0099, 100.01, float("nan")):
            with self.assertRaises(LatticeError) as cm:
                lattice.Distill(tau=tau)
            self.assertEqual(cm.exception.code, Status.INVALID_CONFIG)
            self.assertIn("tau in 0.01..100", str(cm.exception))
        for tau in (lattice.Distill.TAU_MIN, lattice.Distill.TAU_MAX):  # the range's ends
            self.assertEqual(lattice.Distill(tau=tau).params.tau, tau)  # float32, shown shortest


if __name__ == "__main__":
    unittest.main(verbosity=2)
