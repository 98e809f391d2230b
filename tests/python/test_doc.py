"""doc/python.md is what liblattice/python/make_doc.py writes, on any Python 3; every
definition it documents has a docstring and annotations.

Run by meson with LATTICE_LIBRARY set to the built library and PYTHONPATH to
liblattice/python. The page is checked in this interpreter, and in every other
Python 3.8+ it finds (``python3`` on PATH, the ``python3.N`` on PATH that are
interpreters rather than wrapper scripts, and those listed in
LATTICE_TEST_PYTHONS, separated by ``os.pathsep``): the page must not depend
on which one made it.
"""

import inspect
import os
import shutil
import subprocess
import sys
import typing
import unittest

import lattice
import make_doc   # liblattice/python/make_doc.py, on PYTHONPATH with the package

HERE = os.path.dirname(os.path.abspath(__file__))
PAGE = os.path.join(HERE, "..", "..", "doc", "python.md")
STALE = "doc/python.md is stale: run liblattice/python/make_doc.py doc/python.md"


def committed_page():
    with open(PAGE, encoding="utf-8") as f:
        return f.read()


def _is_script(path):
    try:
        with open(path, "rb") as f:
            return f.read(2) == b"#!"
    except OSError:
        return True


def other_pythons():
    """(path, version) of the other Pythons 3.8+ here, one per version."""
    listed = [p for p in os.environ.get("LATTICE_TEST_PYTHONS", "").split(os.pathsep) if p]
    paths = [shutil.which(name) for name in listed + ["python3"]]
    for minor in range(8, 30):
        # interpreters themselves, not scripts: pyenv's shims of python3.N take a
        # second each to start, mostly to say that version is not selected
        path = shutil.which(f"python3.{minor}")
        if path and not _is_script(path):
            paths.append(path)
    probe = "import sys; print(sys.version.split()[0]); print(sys.version_info >= (3, 8))"
    running = []
    for path in dict.fromkeys(p for p in paths if p):
        try:
            running.append((path, subprocess.Popen(
                [path, "-c", probe], stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                universal_newlines=True)))
        except OSError:
            continue
    seen = {sys.version.split()[0]}
    found = []
    for path, proc in running:
        try:
            out, _ = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.communicate()
            continue
        lines = out.split()
        # a pyenv shim of a version not selected fails; an older Python says False
        if proc.returncode != 0 or len(lines) != 2 or lines[1] != "True" or lines[0] in seen:
            continue
        seen.add(lines[0])
        found.append((path, lines[0]))
    return found


class PageTest(unittest.TestCase):
    def test_page_is_up_to_date(self):
        self.assertEqual(make_doc.page(), committed_page(), STALE)

    def test_page_is_the_same_on_other_pythons(self):
        pythons = other_pythons()
        if not pythons:
            self.skipTest("no other Python 3.8+ on PATH (LATTICE_TEST_PYTHONS lists more)")
        script = os.path.abspath(make_doc.__file__)
        committed = committed_page()
        for path, version in pythons:
            with self.subTest(python=version):
                r = subprocess.run([path, script], stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, universal_newlines=True,
                                   timeout=120, env=dict(os.environ, PYTHONNOUSERSITE="1"))
                self.assertEqual(r.returncode, 0, f"{path} ({version}): {r.stderr}")
                self.assertEqual(r.stdout, committed, f"{path} (Python {version}): {STALE}")

    def test_no_inherited_boilerplate(self):
        page = committed_page()
        for text in ("__weakref__", "Methods inherited from", "Data descriptors",
                     "builtins.", " at 0x", "Method resolution order"):
            self.assertFalse(text in page, f"{text!r} on the page")
        # Handle's members once, on Handle
        self.assertEqual(page.count("### Handle.close\n"), 1)
        self.assertNotIn("### Model.close\n", page)

    def test_markdown_of_a_docstring(self):
        links = make_doc.Links(["Model", "Model.backward"])
        text = make_doc.markdown('''A line with ``code`` and :meth:`backward`,
            :class:`lattice.Model` and ``a
            literal`` over two lines; a __dunder__, 2 * 3 and <angles>.

            - an item
              continued
            - another

            Example::

                Model(d_model=32)
            ''', links, "Model")
        # references are code, not links: Doxygen refuses a "#heading" link it has no label for
        self.assertEqual(text, "A line with `code` and `backward`,\n"
                               "`Model` and `a\nliteral` over two lines; a "
                               "\\_\\_dunder\\_\\_, 2 \\* 3 and \\<angles>.\n\n"
                               "- an item\n  continued\n- another\n\n"
                               "Example:\n\n```python\nModel(d_model=32)\n```\n")


def functions():
    """(name, function, whether its first parameter is self or cls) of every public
    function and property accessor."""
    definitions = make_doc.public_definitions()
    classes = {name: obj for name, obj in definitions if inspect.isclass(obj)}
    for name, obj in definitions:
        if isinstance(obj, property):
            for accessor in (obj.fget, obj.fset):
                if accessor is not None:
                    yield name, accessor, True
        elif inspect.isfunction(obj):
            owner, _, member = name.rpartition(".")
            bound = bool(owner) and not isinstance(
                inspect.getattr_static(classes[owner], member), staticmethod)
            yield name, obj, bound


class SurfaceTest(unittest.TestCase):
    def test_public_definitions_cover_the_exports(self):
        names = {name for name, _ in make_doc.public_definitions()}
        for name in lattice.__all__:
            obj = getattr(lattice, name)
            if inspect.isclass(obj) or inspect.isfunction(obj):
                self.assertIn(name, names)
        for name in ("Model.forward", "Model.active_layers", "Handle.close", "Params.make",
                     "Schedule.__len__", "Progress.__call__"):
            self.assertIn(name, names)

    def test_every_public_definition_has_a_docstring(self):
        missing = [name for name, obj in make_doc.public_definitions()
                   if not name.endswith(".__init__")   # the class's docstring covers it
                   and not (make_doc._doc(obj) or "").strip()]
        self.assertEqual(missing, [], "public definitions without a docstring")

    def test_every_public_function_is_annotated(self):
        missing = []
        for name, fn, bound in functions():
            sig = inspect.signature(fn)
            params = list(sig.parameters.values())[1 if bound else 0:]
            missing += [f"{name}: {p.name}" for p in params if p.annotation is p.empty]
            if sig.return_annotation is sig.empty:
                missing.append(f"{name}: return")
        self.assertEqual(missing, [], "public functions without annotations")

    def test_annotations_resolve(self):
        # the names annotations use exist (a module imports what it annotates with,
        # or under TYPE_CHECKING a class the package exports)
        for name, fn, _ in functions():
            with self.subTest(name):
                typing.get_type_hints(fn, localns=dict(vars(lattice)))

    def test_marked_typed(self):
        package = os.path.dirname(lattice.__file__)
        self.assertTrue(os.path.isfile(os.path.join(package, "py.typed")))


if __name__ == "__main__":
    unittest.main(verbosity=2)
