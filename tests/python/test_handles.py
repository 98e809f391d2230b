"""Handles: lifetimes, close() during a call, calls from several threads.

Run by `meson test` (tests/python/meson.build) with LATTICE_LIBRARY set to the
built library and PYTHONPATH to liblattice/python; the helpers are lattice_helpers.py.
"""

import array
import gc
import json
import unittest
import weakref

import lattice
from lattice import LatticeError, Status
from lattice_helpers import VOCAB, next_token_teacher, run_isolated, tiny_data, tiny_model


class LifetimeTest(unittest.TestCase):
    def test_closed_handles_raise(self):
        model = tiny_model()
        model.close()
        model.close()                       # twice is harmless
        self.assertTrue(model.closed)
        with self.assertRaises(lattice.ClosedError) as cm:
            model.forward(array.array("i", range(4)), 1, 4)
        self.assertIsInstance(cm.exception, LatticeError)
        self.assertIsInstance(cm.exception, ValueError)
        self.assertEqual(cm.exception.code, Status.INVALID_ARGUMENT)
        with self.assertRaises(lattice.ClosedError):
            model.active_layers
        with self.assertRaises(lattice.ClosedError):
            lattice.Optim(model)
        with self.assertRaises(lattice.ClosedError):
            lattice.Teacher.from_model(model)
        be = lattice.Backend("ref")
        be.close()
        with self.assertRaises(lattice.ClosedError):
            tiny_model(backend=be)
        with self.assertRaises(TypeError):
            lattice.Optim("not a model")
        self.assertIn("closed", repr(model))

    def test_borrowed_objects_stay_alive(self):
        def build():
            backend = lattice.Backend("ref")
            model = tiny_model(backend=backend)
            optim = lattice.Optim(model)
            backend.close()                 # the model still holds it
            return optim

        optim = build()
        gc.collect()
        model = optim.model
        model.forward(array.array("i", range(4)), 1, 4)
        model.cross_entropy(array.array("i", range(1, 5)))
        model.backward()
        optim.step()
        model.close()                       # the optimizer still holds it
        optim.step()

    def test_borrowers_work_on_with_the_lenders_handle_closed(self):
        """Every method of an object that borrows another works after the user
        closed the lender's handle: the C object lives on, and the wrapper asks
        it, not the closed handle (Trainer.step took its step, then raised
        ClosedError asking the schedule whether it had finished)."""
        model, data = tiny_model(), tiny_data()
        optim = lattice.Optim(model, total_steps=4)
        schedule = lattice.Schedule([dict(steps=2, active_layers=2)])
        trainer = lattice.Trainer(model, data, optim, schedule)
        schedule.close()
        self.assertEqual(trainer.step().step, 1)
        self.assertEqual(optim.steps, 1)
        trainer.run()
        self.assertEqual(optim.steps, 2)
        self.assertIn("closed schedule", repr(trainer))
        with self.assertRaises(lattice.ClosedError):
            trainer.schedule.finished        # the user's own handle stays closed
        other = tiny_model()
        diag = lattice.Diag(other)
        other.close()
        self.assertEqual(len(diag.boundary_scale([[1, 2, 3]])), 3)   # 2 layers: 3 boundaries
        self.assertEqual(len(diag.attention_sinks([[1, 2, 3]])), 2)
        backend = lattice.Backend("ref")
        small = tiny_model(backend=backend)
        backend.close()
        big = small.grown(3)
        self.assertEqual(big.n_layers, 3)
        big.forward([[1, 2]])
        big.backend.close()                  # the grown model's own handle: small's stays
        self.assertEqual(small.grown(4).n_layers, 4)
        # once the borrower is closed too, nothing keeps the lender's object
        lender = weakref.ref(other._res if other._res is not None else diag._model._res)
        diag.close()
        gc.collect()
        self.assertIsNone(lender())

    def test_views_keep_the_model(self):
        model = tiny_model()
        model.forward(array.array("i", range(4)), 1, 4)
        logits = model.logits_view()
        expected = logits.tolist()
        weight = model.tensor("lm_head.weight").data
        model.close()
        del model
        gc.collect()
        self.assertEqual(logits.tolist(), expected)
        self.assertEqual(len(weight.tolist()), VOCAB)

    def test_cycles_through_callbacks(self):
        # A callback that refers to the trainer makes a cycle the collector must
        # break; every finaliser order has to be safe.
        for _ in range(3):
            holder = {}

            def on_step(metrics, holder=holder):
                holder["trainer"].model

            model = tiny_model()
            trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 1),
                                      teacher=lattice.Teacher.from_callback(
                                          lambda *a: next_token_teacher(*a), VOCAB, 4, 16),
                                      on_step=on_step)
            holder["trainer"] = trainer
            trainer.run()
            del trainer, model, holder, on_step
            gc.collect()


class CloseDuringCallTest(unittest.TestCase):
    """close() while a call on the object runs: it waits, or (inside the call) raises."""

    def test_close_inside_a_callback_raises(self):
        out = run_isolated(self, """
            def build(on_step):
                model = tiny_model()
                schedule = lattice.Schedule.preset("joint", 1, 2, 6)
                trainer = lattice.Trainer(model, tiny_data(),
                                          lattice.Optim(model, warmup_steps=0), schedule,
                                          on_step=on_step)
                return trainer, model, schedule

            seen = []
            def on_step(m):
                # calls back into the objects the run uses: the locks are re-entrant
                seen.append((m.step, trainer.model.active_layers, trainer.schedule.position))
                other = lattice.Backend("ref")
                other.close()                      # not used by this call: closes
                if m.step == 2:
                    trainer.close()                # was: a segfault
            trainer, model, schedule = build(on_step)
            try:
                trainer.run()
                print("run returned")
            except LatticeError as e:
                print("run raised", e.code.name, e)
            print("closed", trainer.closed, "steps", schedule.counters.steps, len(seen))
            trainer.step()                         # still usable
            trainer.close()
            print("closed after the call", trainer.closed)

            def close_model(m):
                model.close()                      # the trainer's model: in use too
            trainer, model, schedule = build(close_model)
            try:
                trainer.run()
            except LatticeError as e:
                print("model close raised", e.code.name)
            print("model closed", model.closed)
        """)
        self.assertIn("run raised STATE invalid state: Trainer.close() inside a call that uses "
                      "it", out)
        self.assertIn("closed False steps 2 2", out)
        self.assertIn("closed after the call True", out)
        self.assertIn("model close raised STATE", out)
        self.assertIn("model closed False", out)

    def test_close_from_another_thread_waits(self):
        out = run_isolated(self, """
            steps = []
            started, closing = threading.Event(), threading.Event()
            def on_step(m):
                steps.append(m.step)
                if m.step == 1:
                    started.set()
                    closing.wait(10)
                    time.sleep(0.05)               # close() is under way meanwhile
            model = tiny_model()
            trainer = lattice.Trainer(model, tiny_data(), lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 20),
                                      on_step=on_step)
            del model
            when = {}
            def closer():
                started.wait(10)
                closing.set()
                trainer.close()                    # was: the trainer freed mid-run
                when["closed"] = len(steps)
            thread = threading.Thread(target=closer)
            thread.start()
            trainer.run()
            thread.join(30)
            print("steps", len(steps), "when closed", when.get("closed"), trainer.closed)
            try:
                trainer.step()
            except lattice.ClosedError as e:
                print("then:", e)
        """)
        self.assertIn("steps 20 when closed 20 True", out)
        self.assertIn("then: Trainer is closed", out)


class ThreadsTest(unittest.TestCase):
    """Calls on one object, or on objects bound together, from several threads."""

    def test_threads_sharing_a_model_are_serialised(self):
        # A backend whose GEMMs count the calls inside the model at once: the
        # C API allows one; four threads on one model had many (and crashed).
        out = run_isolated(self, """
            import json
            guard = threading.Lock()
            state = {"inside": 0, "overlaps": 0, "gemms": 0}
            ref = lattice.Backend("ref")

            def sgemm(ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc):
                with guard:
                    state["inside"] += 1
                    state["gemms"] += 1
                    state["overlaps"] += state["inside"] > 1
                time.sleep(0.0001)                 # another thread may enter meanwhile
                ref.sgemm(a, b, c, m, n, k, trans_a=ta, trans_b=tb, alpha=alpha, beta=beta,
                          lda=lda, ldb=ldb, ldc=ldc)
                with guard:
                    state["inside"] -= 1

            model = tiny_model(backend=lattice.Backend.custom("probe", sgemm))
            ids = counting_corpus(4, SEQ)
            tokens = ids[:2 * SEQ]
            targets = ids[1:2 * SEQ + 1]
            model.forward(tokens, 2, SEQ)
            want, _ = model.cross_entropy(targets)
            losses, errors = [], []

            refused = []

            def steps():
                try:
                    for _ in range(3):
                        model.forward(tokens, 2, SEQ)
                        losses.append(model.cross_entropy(targets)[0])
                        try:
                            model.backward()
                        except lattice.LatticeError as e:
                            # another thread's forward came between this
                            # thread's loss and its backward: each call is
                            # whole, a step of three is not, and backward
                            # refuses a forward no loss followed
                            if e.code != lattice.Status.STATE or "no loss since" not in str(e):
                                raise
                            refused.append(1)
                except Exception as e:
                    errors.append(repr(e))

            threads = [threading.Thread(target=steps) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            alone = dict(state, losses=len(losses), wrong=sum(l != want for l in losses),
                         errors=errors)

            # a trainer and the threads that use its model
            trainer = lattice.Trainer(model, tiny_data(batch_size=2),
                                      lattice.Optim(model, warmup_steps=0),
                                      lattice.Schedule.preset("joint", 1, 2, 4))
            def infer():
                try:
                    for _ in range(3):
                        model.forward_inference(tokens, 2, SEQ)
                        model.logits()
                except Exception as e:
                    errors.append(repr(e))
            threads = [threading.Thread(target=trainer.run)] + [
                threading.Thread(target=infer) for _ in range(2)]
            for t in threads:
                t.start()
            for t in threads:
                t.join(60)
            print(json.dumps({"alone": alone, "with_trainer": dict(state, errors=errors),
                              "steps": trainer.schedule.counters.steps}))
        """)
        result = json.loads(out)
        alone, trained = result["alone"], result["with_trainer"]
        self.assertEqual(alone["errors"], [])
        self.assertEqual(alone["overlaps"], 0, f"{alone['overlaps']} of {alone['gemms']} GEMMs "
                         "ran while another call was inside the model")
        self.assertEqual((alone["losses"], alone["wrong"]), (12, 0))
        self.assertEqual(trained["errors"], [])
        self.assertEqual(trained["overlaps"], 0)
        self.assertEqual(result["steps"], 4)


    def test_callbacks_across_trainers_never_hang(self):
        # Two trainers share one Distill; each one's on_step reads the other's
        # model. Trainer 2's call holds its model and waits for the Distill,
        # which trainer 1's call holds while its callback waits for model 2:
        # both threads hung (issue 48 part 2). The callback's call is refused
        # instead, trainer 1's run raises it, and trainer 2's run goes on.
        out = run_isolated(self, """
            import json
            m1, m2 = tiny_model(seed=1), tiny_model(seed=2)   # created before the Distill
            distill = lattice.Distill()
            inside = threading.Event()
            results = {}

            def trainer_for(model, other, name):
                def on_step(metrics):
                    if name == "one" and not inside.is_set():
                        inside.set()
                        time.sleep(0.3)        # trainer 2 takes its model, waits for the Distill
                    other.active_layers        # a call on the other trainer's model
                return lattice.Trainer(model, tiny_data(batch_size=2),
                                       lattice.Optim(model, warmup_steps=0),
                                       lattice.Schedule.preset("joint", 1, 2, 3),
                                       teacher=lattice.Teacher.from_model(tiny_model(seed=9)),
                                       distill=distill, on_step=on_step)

            t1, t2 = trainer_for(m1, m2, "one"), trainer_for(m2, m1, "two")

            def run(name, trainer):
                try:
                    trainer.run()
                    results[name] = "ok"
                except LatticeError as e:
                    results[name] = f"{e.code.name}: {e}"

            a = threading.Thread(target=run, args=("one", t1), daemon=True)
            b = threading.Thread(target=run, args=("two", t2), daemon=True)
            a.start()
            inside.wait(10)
            b.start()
            a.join(20)
            b.join(20)
            print(json.dumps({"alive": [t.is_alive() for t in (a, b)], "results": results}))
        """, timeout=90)
        result = json.loads(out)
        self.assertEqual(result["alive"], [False, False], result)
        self.assertEqual(result["results"]["two"], "ok", result)
        self.assertIn("STATE", result["results"]["one"])
        self.assertIn("that another thread's call holds while that call waits for one this "
                      "thread holds", result["results"]["one"])


if __name__ == "__main__":
    unittest.main(verbosity=2)
