"""Write doc/python.md, the Python API reference, from the package's signatures and docstrings.

    LATTICE_LIBRARY=build/liblattice/liblattice.so.1 PYTHONPATH=liblattice/python \
        python3 liblattice/python/make_doc.py doc/python.md

Markdown of this package's own definitions: a heading per class and function,
its signature, its docstring. Inherited members are documented once, on the
base that defines them (Handle, Params), and Python's own (object, Exception)
not at all. Signatures are formatted here, from the annotations as written
(the modules use ``from __future__ import annotations``), not by pydoc or
inspect's str(): the page is the same on every Python 3, and tests/python
checks that the committed page is what this script writes now.

:func:`public_definitions` is what the page documents; the tests hold every
one of them to a docstring and annotations.
"""

import dataclasses
import enum
import inspect
import re
import sys
from typing import TypeVar

import lattice
from lattice import _handle, _types

HEADER = """# Python API reference

Generated from the signatures and docstrings of the `lattice` package by
`liblattice/python/make_doc.py`; do not edit by hand. Defaults shown are
those of the C library's `_init` functions.

Install: `meson install` (with the library), or pip, which fetches
nothing (since 1.1 the package builds with a backend of its own,
`liblattice/python/build_backend/lattice_build.py`, that requires nothing:
no setuptools, no wheel), so offline too. Into a venv:

    /usr/bin/python3 -m venv ~/lattice-venv
    ~/lattice-venv/bin/python -m pip install liblattice/python

or into a directory of your own, for `PYTHONPATH` (Debian's system Python is
externally managed: `--target DIR`, or `--break-system-packages`):

    /usr/bin/python3 -m pip install --target DIR liblattice/python

(`tests/python/test_pip_prefix.py` and `test_install.py` run these commands
with the package index out of reach.) Install from the source tree:
`liblattice/python` takes its version from the project's `meson.build`, two
folders up, so a copy of that folder alone does not build. The package finds the library through
`LATTICE_LIBRARY`, next to itself, the prefix `meson install` recorded,
pkg-config's `lattice.pc` (`PKG_CONFIG_PATH`), then the SONAME
`liblattice.so.1` through the system's loader (`LD_LIBRARY_PATH`).

After `meson setup --prefix P` with a prefix of your own (not `/usr` or
`/usr/local`), `meson install` puts the package in
`P/lib/python3.X/site-packages` (X: the minor version of `/usr/bin/python3`),
which no Python reads: without
`export PYTHONPATH=P/lib/python3.X/site-packages` the import fails with
`ModuleNotFoundError: No module named 'lattice'`. The summary of
`meson setup` prints the line to use ("Python package", "import").

Which Python: NumPy and mpi4py from Debian's packages (`python3-numpy`,
`python3-mpi4py`) belong to `/usr/bin/python3`. Where another `python3`
comes first on PATH (pyenv, conda), run `/usr/bin/python3`
(`mpirun -np 2 /usr/bin/python3 train.py`), or install NumPy and mpi4py
into that Python; `python3 -c "import numpy, mpi4py"` says whether the
`python3` on PATH has them.

Over MPI, an exception that no one catches on one rank ends the whole job
(since 0.4): the first `Dist` installs a `sys.excepthook` that prints the
traceback as before, then calls the communicator's `Abort(1)`, so that
`mpirun` exits with a non-zero status instead of leaving the other ranks
waiting in their next collective for ever. `Dist(comm,
abort_on_exception=False)` turns it off; it is not installed over one rank
or at an interactive prompt. `sys.exit()` on one rank is not an exception
to it: call `comm.Abort(status)` there instead.

Settings that are easy to get wrong: `Model.params` (like `Optim.params`,
`Data.params`, `Distill.params` and `Schedule.phase()`) is a read-only copy:
setting a field raises AttributeError saying how to change it.
Every attribute of an object either takes effect or is read-only and says
so (since 1.1): the settable ones are those marked `settable` below
(`model.active_layers`, `backend.threads`, `norm.residual_scale`,
`data.position`, `trainer.on_step`, `on_eval`); setting anything else
raises AttributeError naming it and the way that works. A setting given at
creation is fixed (`model.seed = 7`: "Model.seed cannot be set: it is fixed
when the model is created ... lattice.Model(model.params, seed=7)";
`trainer.eval_every`, `eval_batches` and `seed` read back the trainer's and
cannot be set), as are read-only attributes (`model.n_params`), the objects
an object is bound to (`trainer.model`) and names the class does not have
(`model.activelayers = 2`, with the name it may mean); an optimizer's
settings change through `optim.set_params(lr=...)`. A subclass of your own
may add attributes of its own. A value of the wrong type names the field
or argument: `Model(d_model=64.0)` raises "ModelParams.d_model must be an
integer, got float 64.0", `Optim(m, lr='1e-3')` "OptimParams.lr must be a
number (int or float), got str '1e-3'". `Trainer.run()` on a finished
schedule raises as `step()` does (`Status.STATE`, "the schedule has
finished"). A mask holds
0 and 1 only. `Model.backward()` overwrites the gradients: a second one
replaces the first's, nothing accumulates. Schedule presets spend different
compute (`preset("joint", 3, 2, 30)` runs 30 steps, `"grow"` 90): the
budget-matched arms are `"joint_matched_active"` and `"joint_matched_total"`
(`Schedule.preset`).

Attribute or call, one rule (since 1.1): what is read with no argument
and does nothing else is an attribute, a value the object holds now (a
setting, a count, a state, or a snapshot or list of them): `model.n_params`,
`model.tensors`, `schedule.counters`, `schedule.phases`, `dist.stats`,
`optim.lr`, and the module's constants `lattice.version_string`,
`version_number`, `library_path`. Everything else is a call: what takes an
argument, an optional one included (`data.n_documents()` and
`data.n_tokens()` take the split, `data.n_documents("val")`;
`model.flops(batch, seq)`, `model.logits()` the shape, `schedule.phase(i)`);
what acts (a pass, a step, the next batch, a file, a reset: `data.next()`,
`trainer.evaluate()`, `data.val_batches()`, which reads each batch);
constructors and conversions (`ModelParams.defaults()`, `to_dict()`); and
the module's functions (`lattice.last_error()`, `has_blis()`). Two spellings
from before 1.1 broke the rule and still work, with a DeprecationWarning,
until 2.0: `model.tensors()` (now `model.tensors`) and `dist.stats()` (now
`dist.stats`). tests/python/test_attributes.py holds every public name to
the rule.

Inputs of another integer type, or not C-contiguous (`tok[:2, :10]`, a
transpose), are copied; buffers the library writes into (`dlogits=`,
`Dist.sum`, `Backend.sgemm`'s `c`) must be C-contiguous and writable, as
what it wrote into a copy would be lost.

Outputs are copies: `Model.logits()`, `dlogits()`, `hidden()` (read-only
since 0.4: passed as an output buffer, one is refused, naming
`dlogits_view()`), `Teacher.logits()`/`topk()`, `Data.next()`/`val_batch()`. Their `*_view()`
twins return zero-copy memoryviews of the library's buffers, valid only
until the next forward (or batch) overwrites them.

Types in the signatures (the package is typed: it installs `py.typed`):

- `Buffer`: any object with the buffer protocol (`bytes`, `bytearray`,
  `array.array`, `memoryview`, a NumPy array); `WritableBuffer` one the
  library may write into. Type checkers see typeshed's `ReadableBuffer` and
  `WriteableBuffer` (`collections.abc.Buffer` from Python 3.12).
- `Tokens`: int32 token ids `[batch, seq]`: a 2-D buffer, a flat one with
  `batch` and `seq` given, or a list of rows. `Ints`: int32 values (a buffer
  of any integer type, or a sequence of ints); `Floats`: float32 values
  (float64 for `Diag.loss_response`). `Mask`: uint8 flags 0 or 1, or None
  for every position.
- `FilePath`: a path as `open()` takes it (`str`, `bytes`, `os.PathLike`).
- `MetricsCallback`: `Callable[[Metrics], Optional[bool]]`, a true result
  stops the run.
"""

# Dunder methods that are part of what a class offers its users.
PUBLIC_DUNDERS = ("__init__", "__call__", "__len__")


# ---- what is public -------------------------------------------------------------------

def _own(cls):
    """cls's own members worth a reference entry, in definition order: (name, raw value)."""
    out = []
    for name, value in vars(cls).items():
        if name.startswith("_") and name not in PUBLIC_DUNDERS:
            continue
        if isinstance(value, (staticmethod, classmethod, property)) or inspect.isfunction(value):
            if name == "__init__" and dataclasses.is_dataclass(cls):
                continue  # generated from the fields
            out.append((name, value))
    return out


def _bases():
    """The package's base classes whose members the exported classes inherit."""
    return [_handle.Handle, _types.Struct, _types.Params]


def public_definitions():
    """(qualified name, object) of every definition the page documents: the names in
    lattice.__all__, their own methods and properties, and those of the package's
    base classes (Handle, Struct, Params). Methods are plain functions (the function
    under a staticmethod or classmethod), properties property objects."""
    out = []

    def add_members(cls):
        for name, value in _own(cls):
            if isinstance(value, (staticmethod, classmethod)):
                value = value.__func__
            out.append((f"{cls.__name__}.{name}", value))

    for cls in _bases():
        out.append((cls.__name__, cls))
        add_members(cls)
    for name in lattice.__all__:
        obj = getattr(lattice, name)
        if inspect.isclass(obj):
            out.append((name, obj))
            add_members(obj)
        elif inspect.isfunction(obj):
            out.append((name, obj))
    return out


# ---- signatures -----------------------------------------------------------------------

def annotation(a, module=None):
    """An annotation as the source wrote it (a string, thanks to __future__), or the
    name of a class given at run time (the fields with_fields adds). A type variable of
    module (``P``, bound to a base class) reads as what it stands for: ``Self``."""
    if isinstance(a, str):
        if module is not None:
            a = re.sub(r"\b[A-Z]\b", lambda m: "Self" if isinstance(
                module.get(m.group(0)), TypeVar) else m.group(0), a)
        return a
    if isinstance(a, type):
        return a.__qualname__
    return re.sub(r"\btyping\.", "", repr(a))


def default(value):
    """A default value as it reads in code (enum members by name, no addresses)."""
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    return re.sub(r" at 0x[0-9a-f]+", "", repr(value))


def signature(name, fn, drop_first=False, returns=True):
    """name(params) -> result for a function, wrapped one parameter a line when long."""
    params = list(inspect.signature(fn).parameters.values())
    if drop_first:
        params = params[1:]
    parts, star_done = [], False
    for i, p in enumerate(params):
        if p.kind is p.KEYWORD_ONLY and not star_done:
            parts.append("*")
            star_done = True
        text = p.name
        if p.kind is p.VAR_POSITIONAL:
            text, star_done = "*" + p.name, True
        elif p.kind is p.VAR_KEYWORD:
            text = "**" + p.name
        if p.annotation is not p.empty:
            text += ": " + annotation(p.annotation, fn.__globals__)
        if p.default is not p.empty:
            text += (" = " if p.annotation is not p.empty else "=") + default(p.default)
        parts.append(text)
        if p.kind is p.POSITIONAL_ONLY and (i + 1 == len(params)
                                            or params[i + 1].kind is not p.POSITIONAL_ONLY):
            parts.append("/")
    ret = ""
    ann = inspect.signature(fn).return_annotation
    if returns and ann is not inspect.Signature.empty:
        ret = " -> " + annotation(ann, fn.__globals__)
    one_line = f"{name}({', '.join(parts)}){ret}"
    if len(one_line) <= 88:
        return one_line
    return f"{name}(\n" + "".join(f"    {p},\n" for p in parts) + f"){ret}"


# ---- docstrings as Markdown -------------------------------------------------------------

_ROLE = re.compile(r":(?:class|meth|func|attr|mod|data|exc):`~?([^`]+)`")
_LITERAL = re.compile(r"``(.+?)``", re.S)


def _escape(text):
    """Markdown's special characters in plain text, as themselves."""
    text = text.replace("\\", "\\\\").replace("*", "\\*").replace("<", "\\<")
    # intraword underscores never emphasise (n_layers); at a word's edge they may (__cause__)
    return re.sub(r"(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", r"\\_", text)


def _code(text):
    return f"`` {text} ``" if "`" in text else f"`{text}`"


class Links:
    """Headings on the page, for links from :class: and :meth: references."""

    def __init__(self, names):
        self.names = set(names)

    def ref(self, target, context):
        target = target[len("lattice."):] if target.startswith("lattice.") else target
        bare = target.rstrip("()")
        for candidate in (f"{context}.{bare}" if context else None, bare):
            if candidate in self.names:
                # no link: Doxygen, which builds this page into the API docs, resolves
                # a "#heading" link only to a label of its own, and GitHub shows a
                # Doxygen label as text; the name is one search away on either
                return _code(target)
        return _code(target)


def anchor(heading):
    """GitHub's anchor of a heading: lower case, punctuation but - and _ dropped."""
    return re.sub(r"[^\w\- ]", "", heading.lower()).replace(" ", "-")


def _inline(line, links, context):
    """A line of docstring text in Markdown: ``literals`` and :role:`refs` as code."""
    out, pos = [], 0
    pattern = re.compile(_ROLE.pattern + "|" + _LITERAL.pattern, re.S)
    for m in pattern.finditer(line):
        out.append(_escape(line[pos:m.start()]))
        out.append(links.ref(m.group(1), context) if m.group(1) else _code(m.group(2)))
        pos = m.end()
    out.append(_escape(line[pos:]))
    return "".join(out)


_BLOCK_START = re.compile(r"^(#|>|[-+=] |\d+[.)] |[-=]+$)")


def markdown(doc, links, context=None):
    """A docstring in Markdown: paragraphs and "- " lists as written, a ``::`` block or
    an indented one as a code block."""
    if not doc:
        return ""
    lines = inspect.cleandoc(doc).splitlines()
    out, i, in_list = [], 0, False
    while i < len(lines):
        line = lines[i]
        if not line.strip():
            out.append("")
            in_list = False
            i += 1
            continue
        if line.startswith(" ") and not in_list:   # a literal block
            block = []
            while i < len(lines) and (lines[i].startswith(" ") or not lines[i].strip()):
                block.append(lines[i])
                i += 1
            while block and not block[-1].strip():
                block.pop()
            indent = min(len(b) - len(b.lstrip()) for b in block if b.strip())
            if out and out[-1]:
                out.append("")
            out += ["```python"] + [b[indent:] for b in block] + ["```", ""]
            continue
        if line.startswith("- ") and (not out or not out[-1] or in_list):
            in_list = True
            item = [line[2:]]
            i += 1
            while i < len(lines) and lines[i].startswith("  ") and lines[i].strip():
                item.append(lines[i].strip())
                i += 1
            text = _inline("\n".join(item), links, context).split("\n")
            out += ["- " + text[0]] + ["  " + t for t in text[1:]]
            continue
        para = []
        while (i < len(lines) and lines[i].strip() and not lines[i].startswith(" ")
               and not (para and lines[i].startswith("- "))):
            para.append(lines[i])
            i += 1
        for text in _inline("\n".join(para), links, context).split("\n"):
            if _BLOCK_START.match(text):  # would start a heading, a quote or a list
                text = "\\" + text
            out.append(text)
    text = "\n".join(out)
    text = re.sub(r"(\S)::$", r"\1:", text, flags=re.M)
    return re.sub(r"\n{3,}", "\n\n", text).strip() + "\n"


def _doc(obj):
    """The object's own docstring (none inherited from a base or generated)."""
    if inspect.isclass(obj):
        return vars(obj).get("__doc__")
    return obj.__doc__


# ---- sections -------------------------------------------------------------------------

# C types of struct fields: what the C header says (size_t only for the size field,
# as uint64_t and size_t are one ctypes type on 64-bit systems)
_C_NAMES = [(_types.c_uint64, "uint64"), (_types.c_int64, "int64"), (_types.c_int, "int32"),
            (_types.c_uint, "uint32"), (_types.c_float, "float32"), (_types.c_double, "float64"),
            (_types.c_char_p, "char *"), (_types.c_void_p, "void *")]


def _callback_name(ctype):
    """The name in _types of a ctypes callback type, else None."""
    return next((attr for attr, value in vars(_types).items()
                 if value is ctype and attr.endswith("Fn")), None)


def _c_type(name, ctype):
    if name == "size":
        return "size_t"
    for t, text in _C_NAMES:
        if ctype is t:
            return text
    if _callback_name(ctype):
        return "C callback"
    if issubclass(ctype, _types.ctypes.Array):
        return f"char[{ctype._length_}]"
    return ctype.__name__


def _py_type(cls, name, ctype):
    if name in cls._enums:
        return cls._enums[name].__name__
    if ctype in (_types.c_float, _types.c_double):
        return "float"
    if ctype is _types.c_char_p:
        return "Optional[bytes]"
    if issubclass(ctype, _types.ctypes.Array):
        return "bytes"
    if ctype in _types.INT_RANGES:
        return "int"
    if ctype is _types.c_void_p:
        return "Optional[int]"
    return _callback_name(ctype) or "Any"


def render_struct(cls, links):
    defaults = cls.defaults() if issubclass(cls, _types.Params) else None
    settable = ({p.name for p in cls.keyword_parameters()}
                if defaults is not None else set())
    lines = [f"class {cls.__name__}({cls.__base__.__name__})"]
    for name, (_, ctype, *_) in zip(cls.field_names(), cls._fields_):
        text = f"    {name}: {_py_type(cls, name, ctype)}"
        if name in settable:
            value = getattr(defaults, name)
            if name in cls._enums:
                value = _types.to_enum(cls._enums[name], value)
            text += f" = {default(value)}"
        lines.append(f"{text}  # {_c_type(name, ctype)}")
    return "```python\n" + "\n".join(lines) + "\n```\n\n" + markdown(_doc(cls), links)


def render_enum(cls, links):
    lines = [f"class {cls.__name__}({cls.__base__.__name__})"]
    lines += [f"    {m.name} = {m.value}" for m in cls]
    return "```python\n" + "\n".join(lines) + "\n```\n\n" + markdown(_doc(cls), links)


def render_dataclass(cls, links):
    frozen = cls.__dataclass_params__.frozen
    lines = ["@dataclass(frozen=True)" if frozen else "@dataclass", f"class {cls.__name__}"]
    for f in dataclasses.fields(cls):
        text = f"    {f.name}: {annotation(f.type)}"
        if f.default is not dataclasses.MISSING:
            text += f" = {default(f.default)}"
        lines.append(text)
    return "```python\n" + "\n".join(lines) + "\n```\n\n" + markdown(_doc(cls), links)


def _class_line(cls):
    bases = [b.__name__ for b in cls.__bases__ if b is not object]
    return f"class {cls.__name__}" + (f"({', '.join(bases)})" if bases else "")


def render_member(cls, name, value, links):
    qual = f"{cls.__name__}.{name}"
    if isinstance(value, property):
        kind = "settable property" if value.fset is not None else "read-only property"
        ann = inspect.signature(value.fget).return_annotation
        typed = "" if ann is inspect.Signature.empty else ": " + annotation(ann)
        code = f"{qual}{typed}  # {kind}"
    elif isinstance(value, staticmethod):
        code = "@staticmethod\n" + signature(qual, value.__func__)
    elif isinstance(value, classmethod):
        code = "@classmethod\n" + signature(qual, value.__func__, drop_first=True)
    else:
        code = signature(qual, value, drop_first=True)
    if isinstance(value, (staticmethod, classmethod)):
        value = value.__func__   # before 3.10 their __doc__ is the builtin's
    return (f"### {_escape(qual)}\n\n```python\n{code}\n```\n\n"
            + markdown(_doc(value), links, cls.__name__))


def render_class(cls, links):
    if issubclass(cls, enum.Enum):
        body = render_enum(cls, links)
    elif issubclass(cls, _types.Struct) and "_fields_" in vars(cls):
        body = render_struct(cls, links)
    elif dataclasses.is_dataclass(cls):
        body = render_dataclass(cls, links)
    else:
        code = _class_line(cls)
        init = vars(cls).get("__init__")
        if init is not None:
            params = list(inspect.signature(init).parameters.values())[1:]
            if [p.kind for p in params] != [inspect.Parameter.VAR_POSITIONAL,
                                            inspect.Parameter.VAR_KEYWORD]:
                code += "\n" + signature(cls.__name__, init, drop_first=True, returns=False)
        fields = vars(cls).get("__annotations__", {})
        code += "".join(f"\n    {k}: {annotation(v)}" for k, v in fields.items())
        body = f"```python\n{code}\n```\n\n" + markdown(_doc(cls), links, cls.__name__)
    members = [render_member(cls, name, value, links) for name, value in _own(cls)
               if name != "__init__" and not issubclass(cls, enum.Enum)]
    return "\n".join([f"## {cls.__name__}\n\n" + body] + members)


def render_function(name, fn, links):
    return f"## {name}\n\n```python\n{signature(name, fn)}\n```\n\n" + markdown(_doc(fn), links)


# The module's values (a value has no docstring of its own).
VALUES = {
    "version_number": "The loaded library's `lattice_version_number()`: "
                      "major * 10000 + minor * 100 + patch.",
    "version_string": "The loaded library's version, \"1.1.0\" (also `lattice.__version__`).",
    "ERRMSG_SIZE": "`LATTICE_ERRMSG_SIZE`, the bytes of an error message buffer.",
    "library_path": "The file of the library loaded (the SONAME itself where the system's "
                    "loader found it).",
}


def render_value(name, value):
    return (f"## {name}\n\n```python\n{name}: {type(value).__name__}\n```\n\n"
            + VALUES[name] + "\n")


def page():
    """The page, as doc/python.md holds it."""
    links = Links(n for n, _ in public_definitions())
    parts = [HEADER, "## Module lattice\n\n" + markdown(lattice.__doc__, links)]
    for cls in _bases():  # documented for what they give, but not names of the package
        head, rest = render_class(cls, links).split("\n\n", 1)
        parts.append(f"{head}\n\nA base class, not exported (`{cls.__module__}.{cls.__name__}`: "
                     f"`lattice.{cls.__name__}` does not exist); the classes below that derive "
                     f"from it have what follows.\n\n{rest}")
    for name in lattice.__all__:
        obj = getattr(lattice, name)
        if inspect.isclass(obj):
            parts.append(render_class(obj, links))
        elif inspect.isfunction(obj):
            parts.append(render_function(name, obj, links))
        else:
            parts.append(render_value(name, obj))
    return "\n".join(parts)


def main(argv):
    text = page()
    if len(argv) > 1:
        with open(argv[1], "w", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stdout.write(text)


if __name__ == "__main__":
    main(sys.argv)
