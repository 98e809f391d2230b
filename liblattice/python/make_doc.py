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
