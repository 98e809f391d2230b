"""Write doc/python.md, the Python API reference, from the package's docstrings (pydoc).

    LATTICE_LIBRARY=build/liblattice/liblattice.so.0 PYTHONPATH=liblattice/python \
        /usr/bin/python3 liblattice/python/make_doc.py doc/python.md

tests/python checks that the committed page is what this script writes now
(with the Python version the page names: pydoc's layout varies even between micro versions).
"""

import inspect
import pydoc
import re
import sys

import lattice

HEADER = """# Python API reference

Generated from the docstrings of the `lattice` package by
`liblattice/python/make_doc.py` (pydoc, Python {version}); do not edit by hand.
Defaults shown are those of the C library's `_init` functions.

Install: `meson install` (with the library), or
`/usr/bin/python3 -m pip install --no-build-isolation liblattice/python`
(add `--target DIR`, a venv or `--break-system-packages` on Debian, whose
system Python is externally managed). The package finds the library through
`LATTICE_LIBRARY`, next to itself, the prefix `meson install` recorded,
pkg-config's `lattice.pc` (`PKG_CONFIG_PATH`), then the SONAME
`liblattice.so.0` through the system's loader (`LD_LIBRARY_PATH`).

After `meson setup --prefix P` with a prefix of your own (not `/usr` or
`/usr/local`), `meson install` puts the package in
`P/lib/python3.11/site-packages` (the Python version of `/usr/bin/python3`),
which no Python reads: without
`export PYTHONPATH=P/lib/python3.11/site-packages` the import fails with
`ModuleNotFoundError: No module named 'lattice'`. The summary of
`meson setup` prints the line to use ("Python package", "import").

Which Python: NumPy and mpi4py from Debian's packages (`python3-numpy`,
`python3-mpi4py`) belong to `/usr/bin/python3`. Where another `python3`
comes first on PATH (pyenv, conda), run `/usr/bin/python3`
(`mpirun -np 2 /usr/bin/python3 train.py`), or install NumPy and mpi4py
into that Python; `python3 -c "import numpy, mpi4py"` says whether the
`python3` on PATH has them.

Settings that are easy to get wrong: `Model.params` (like `Optim.params`,
`Data.params`, `Distill.params` and `Schedule.phase()`) is a read-only copy:
setting a field raises AttributeError saying how to change it.
`Trainer.on_step` and `on_eval` can be set after construction. A mask holds
0 and 1 only. `Model.backward()` overwrites the gradients: a second one
replaces the first's, nothing accumulates. Schedule presets spend different
compute (`preset("joint", 3, 2, 30)` runs 30 steps, `"grow"` 90): the
budget-matched arms are `"joint_matched_active"` and `"joint_matched_total"`
(`Schedule.preset`).

Inputs of another integer type, or not C-contiguous (`tok[:2, :10]`, a
transpose), are copied; buffers the library writes into (`dlogits=`,
`Dist.sum`, `Kernels.sgemm`'s `c`) must be C-contiguous and writable, as
what it wrote into a copy would be lost.

Outputs are copies: `Model.logits()`, `dlogits()`, `hidden()` (read-only
since 0.4: passed as an output buffer, one is refused, naming
`dlogits_view()`), `Teacher.logits()`/`topk()`, `Data.next()`/`val_batch()`. Their `*_view()`
twins return zero-copy memoryviews of the library's buffers, valid only
until the next forward (or batch) overwrites them.
"""


def render_enum(cls):
    lines = [f"class {cls.__name__}(IntEnum): {len(cls)} members, printed by name"]
    lines += [f"    {m.name} = {m.value}" for m in cls]
    return "\n".join(lines) + "\n"


def render_struct(cls):
    lines = [f"class {cls.__name__}: the C struct's fields"]
    doc = cls.__dict__.get("__doc__")
    if doc:
        lines += ["    " + line for line in inspect.cleandoc(doc).splitlines()]
    defaults = cls.defaults() if hasattr(cls, "keyword_parameters") else None
    for name, ctype, *_ in cls._fields_:
        kind = cls._enums[name].__name__ if name in cls._enums else ctype.__name__
        default = ""
        if defaults is not None and name != "size" and name in {
                p.name for p in cls.keyword_parameters()}:
            default = f" = {getattr(defaults, name)!r}"
        lines.append(f"    {name}: {kind}{default}")
    if defaults is not None:
        lines.append(f"    {cls.__name__}.defaults(), {cls.__name__}.make(base=None, **fields),"
                     " .update(**fields), .to_dict()")
    return "\n".join(lines) + "\n"


def render(obj):
    from lattice import _types
    if inspect.isclass(obj) and issubclass(obj, _types.Enum):
        return render_enum(obj)
    if inspect.isclass(obj) and issubclass(obj, _types.Struct):
        return render_struct(obj)
    text = pydoc.plaintext.document(obj)
    # object addresses and the interpreter's own paths are not part of the API
    text = re.sub(r" at 0x[0-9a-f]+", "", text)
    return text.rstrip() + "\n"


def page():
    version = "%d.%d.%d" % sys.version_info[:3]
    parts = [HEADER.format(version=version)]
    parts.append("## Module lattice\n\n```text\n" + inspect.cleandoc(lattice.__doc__) + "\n```\n")
    for name in lattice.__all__:
        obj = getattr(lattice, name)
        if not (inspect.isclass(obj) or inspect.isfunction(obj)):
            continue
        parts.append(f"## {name}\n\n```text\n{render(obj)}```\n")
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
