"""No silent no-op, no raw error (issue 50 part 3), and one rule for attribute vs call.

- Every attribute of every object either takes effect or is read-only and says so:
  a setting fixed at creation (model.seed, trainer.eval_every), a read-only property,
  an object bound at creation, a name the class does not have; the settable ones
  read back what they were set to and act.
- Trainer.run() on a finished schedule raises as step() does.
- A value of the wrong type names the field or argument.
- Attribute or call: what takes no argument and does nothing else is an attribute
  (doc/python.md, "Attribute or call"); the spellings from before (model.tensors(),
  dist.stats()) still work with a DeprecationWarning.
"""
import inspect
import os
import sys
import unittest
import warnings

import lattice
from lattice import LatticeError, Status
from lattice_helpers import next_token_teacher, tiny_data, tiny_model

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "doc", "python.md")
sys.path.insert(0, os.path.join(HERE, "..", "..", "liblattice", "python"))
import make_doc  # noqa: E402


def objects():
    """One open object of each class, by name (kept alive together)."""
    backend = lattice.Backend("ref", threads=1)
    model = tiny_model(backend=backend)
    teacher_model = tiny_model(seed=9)
    data = tiny_data()
    optim = lattice.Optim(model, lr=1e-3, total_steps=4)
    schedule = lattice.Schedule.preset("joint", 1, 2, 2)
    distill = lattice.Distill()
    teacher = lattice.Teacher.from_model(teacher_model)
    trainer = lattice.Trainer(model, data, optim, schedule, teacher=teacher, distill=distill,
                              eval_every=2, eval_batches=1, seed=5)
    return {"Backend": backend, "Norm": lattice.Norm("post", residual_scale=1.5),
            "Model": model, "Optim": optim, "Distill": distill, "Data": data,
            "Schedule": schedule, "Teacher": teacher, "Trainer": trainer,
            "Diag": lattice.Diag(model),
            "CallbackTeacher": lattice.Teacher.from_callback(next_token_teacher, 32, 4, 16)}


def properties(cls):
    out = {}
    for klass in reversed(cls.__mro__):
        for name, value in vars(klass).items():
            if isinstance(value, property) and not name.startswith("_"):
                out[name] = value
    return out


class NoSilentNoOp(unittest.TestCase):
    def setUp(self):
        self.o = objects()

    def refused(self, obj, name, value, *words):
        with self.assertRaises(AttributeError) as cm:
            setattr(obj, name, value)
        message = str(cm.exception)
        self.assertIn(f"{type(obj).__name__}.{name}" if "has no attribute" not in message
                      else repr(name), message)
        for w in words:
            self.assertIn(w, message)
        return message

    def test_the_issues_two(self):
        trainer, model = self.o["Trainer"], self.o["Model"]
        self.refused(trainer, "eval_every", 5, "fixed when the trainer is created",
                     "lattice.Trainer(..., eval_every=...)")
        self.assertEqual(trainer.eval_every, 2)   # read back: the trainer's own
        self.assertEqual((trainer.eval_batches, trainer.seed), (1, 5))
        self.refused(trainer, "seed", 1)
        self.refused(model, "seed", 7, "fixed when the model is created",
                     "lattice.Model(model.params, seed=7)", "model.init_layer(layer, seed)")
        self.assertFalse(hasattr(model, "seed"))
        self.assertEqual(model.params.seed, 7)

    def test_every_read_only_property_says_so(self):
        checked = 0
        for name, obj in self.o.items():
            for prop, p in properties(type(obj)).items():
                if p.fset is not None or prop == "closed":
                    continue
                with self.subTest(f"{name}.{prop}"):
                    self.refused(obj, prop, getattr(obj, prop))
                    checked += 1
        self.assertGreater(checked, 30)
        self.refused(self.o["Model"], "closed", True)

    def test_settings_fixed_at_creation(self):
        for name, obj in self.o.items():
            params = type(obj)._creation_params
            if params is None:
                continue
            for field in params.field_names():
                if field in ("size", "on_step", "on_eval") or isinstance(
                        inspect.getattr_static(type(obj), field, None), property) and \
                        inspect.getattr_static(type(obj), field).fset is not None:
                    continue
                with self.subTest(f"{name}.{field}"):
                    self.refused(obj, field, 1, "cannot be set")
        self.refused(self.o["Model"], "n_active_layers", 1, "model.active_layers")
        self.refused(self.o["Optim"], "weight_decay", 0.0, "optim.set_params(weight_decay=...)")
        self.refused(self.o["Optim"], "lr", 0.1, "optim.set_params(lr=...)")

    def test_bound_objects_methods_and_unknown_names(self):
        trainer, model = self.o["Trainer"], self.o["Model"]
        for name in ("model", "teacher", "distill", "data", "optim", "schedule"):
            self.refused(trainer, name, None, "bound to it at creation")
        self.refused(model, "backend", None, "bound to it at creation")
        self.refused(self.o["Diag"], "model", None)
        self.refused(self.o["CallbackTeacher"], "fn", print)
        self.refused(model, "forward", print, "a method")
        self.refused(model, "activelayers", 2, "did you mean 'active_layers'?")
        self.refused(trainer, "evalevery", 5, "did you mean 'eval_every'?")
        tensor = model.tensors[0]
        with self.assertRaises(AttributeError) as cm:
            tensor.name = "x"
        self.assertIn("Tensor.name is read-only", str(cm.exception))

        class Mine(lattice.Norm):   # a subclass of one's own may add names of its own
            pass
        mine = Mine("pre")
        mine.label = "mine"
        self.assertEqual(mine.label, "mine")
        with self.assertRaises(AttributeError):
            mine.eps = 1e-5

    def test_settable_ones_take_effect(self):
        model, backend, data = self.o["Model"], self.o["Backend"], self.o["Data"]
        model.active_layers = 1
        self.assertEqual(model.params.n_active_layers, 1)
        backend.threads = 2
        self.assertEqual(backend.threads, 2)
        backend.gemm_precision = "fp32"
        self.assertEqual(backend.gemm_precision, "fp32")
        norm = self.o["Norm"]
        norm.residual_scale = 2.5
        self.assertEqual(norm.residual_scale, 2.5)
        data.next()
        at = data.position
        data.next()
        data.position = at
        self.assertEqual(data.position, at)
        seen = []
        self.o["Trainer"].on_step = lambda m: seen.append(m.step)
        self.o["Trainer"].step()
        self.assertEqual(seen, [1])
        for name, obj in self.o.items():
            for prop, p in properties(type(obj)).items():
                if p.fset is not None:  # each settable property is one of those above
                    self.assertIn(prop, ("active_layers", "threads", "parallel",
                                         "attention_kernel", "gemm_precision", "residual_scale",
                                         "position", "on_step", "on_eval"), f"{name}.{prop}")


class RunAndStepAgree(unittest.TestCase):
    def test_finished_schedule(self):
        model, data = tiny_model(), tiny_data()
        trainer = lattice.Trainer(model, data, lattice.Optim(model, total_steps=2),
                                  lattice.Schedule.preset("joint", 1, 2, 2))
        trainer.run()
        self.assertTrue(trainer.schedule.finished)
        with self.assertRaises(LatticeError) as by_step:
            trainer.step()
        with self.assertRaises(LatticeError) as by_run:
            trainer.run()
        self.assertEqual(by_run.exception.code, Status.STATE)
        self.assertEqual(str(by_run.exception), str(by_step.exception))
        self.assertIn("the schedule has finished", str(by_run.exception))
        # stopped by a callback, run() goes on where it stopped
        model, data = tiny_model(), tiny_data()
        trainer = lattice.Trainer(model, data, lattice.Optim(model, total_steps=4),
                                  lattice.Schedule.preset("joint", 1, 2, 4),
                                  on_step=lambda m: m.step == 1)
        trainer.run()
        self.assertEqual(trainer.schedule.counters.steps, 1)
        trainer.on_step = None
        trainer.run()
        self.assertEqual(trainer.schedule.counters.steps, 4)


class TypesNameTheField(unittest.TestCase):
    def check(self, fn, *words):
        with self.assertRaises(TypeError) as cm:
            fn()
        for w in words:
            self.assertIn(w, str(cm.exception))

    def test_fields_and_arguments(self):
        model = tiny_model()
        self.check(lambda: lattice.Model(d_model=64.0), "ModelParams.d_model must be an integer",
                   "float 64.0")
        self.check(lambda: lattice.Optim(model, lr="1e-3"),
                   "OptimParams.lr must be a number", "str '1e-3'")
        self.check(lambda: lattice.Distill(alpha="1"), "DistillParams.alpha")
        self.check(lambda: tiny_data(batch_size=2.0), "DataParams.batch_size")
        self.check(lambda: lattice.Trainer(model, tiny_data(), lattice.Optim(model),
                                           lattice.Schedule.preset("joint", 1, 2, 2),
                                           eval_every=2.5), "TrainerParams.eval_every")
        self.check(lambda: lattice.Norm(eps="1e-5"), "Norm(eps=...) must be a number")
        self.check(lambda: lattice.Backend("ref", threads=1.5), "Backend.threads")
        self.check(lambda: setattr(model, "active_layers", 1.5), "Model.active_layers")
        self.check(lambda: model.init_layer(1, 2.5),
                   "lattice_model_init_layer: argument 3 must be an integer", "float 2.5")
        # what the types hold still goes through
        lattice.Model(lattice.ModelParams.make(tiny_model().params), d_model=16)
        lattice.Optim(model, lr=1)


# Calls with no argument at all: each acts (or is Python's own protocol)
ACTIONS = {"Handle.close", "Model.backward", "Optim.step", "Optim.reset", "Data.next",
           "Data.next_view", "Data.val_batches", "Schedule.__len__", "Trainer.step",
           "Trainer.run", "Trainer.evaluate", "Progress.close", "Dist.reset_stats",
           "Struct.to_dict", "DistStats.__call__"}


class AttributeOrCall(unittest.TestCase):
    def test_the_rule(self):
        classes = {n for n, obj in make_doc.public_definitions() if inspect.isclass(obj)}
        for qname, obj in make_doc.public_definitions():
            if not inspect.isfunction(obj) or "." not in qname:
                continue   # module functions: calls by the rule
            cls_name, name = qname.split(".", 1)
            if cls_name not in classes:
                continue
            raw = inspect.getattr_static(getattr(lattice, cls_name, None) or getattr(
                sys.modules["lattice._types"], cls_name, None) or getattr(
                sys.modules["lattice._handle"], cls_name), name)
            if isinstance(raw, (classmethod, staticmethod)):
                continue   # constructors and class-level reads
            params = [p for p in inspect.signature(obj).parameters.values()
                      if p.name != "self"]
            if not params:
                self.assertIn(qname, ACTIONS, f"{qname}() takes no argument and is not an "
                              "action: by the rule it is an attribute")

    def test_old_spellings_still_work(self):
        model = tiny_model()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            old = model.tensors()
        self.assertEqual([t.name for t in old], [t.name for t in model.tensors])
        self.assertEqual(caught[0].category, DeprecationWarning)
        self.assertIn("model.tensors() is deprecated", str(caught[0].message))
        stats = lattice.DistStats(1, 2, 0.5, 3, 0.25)
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            self.assertIs(stats(), stats)
        self.assertIn("dist.stats() is deprecated", str(caught[0].message))
        self.assertIsInstance(inspect.getattr_static(lattice.Dist, "stats"), property)

    def test_documented(self):
        with open(PAGE, encoding="utf-8") as f:
            page = f.read()
        self.assertIn("Attribute or call, one rule", page)
        for words in ("`model.tensors()` (now `model.tensors`)", "`dist.stats()` (now",
                      "`data.n_documents()`", "model.flops(batch, seq)", "`model.n_params`"):
            self.assertIn(words, page)


if __name__ == "__main__":
    unittest.main()
