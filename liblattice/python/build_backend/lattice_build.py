"""The package's build backend (PEP 517, PEP 660): a wheel of lattice/ with nothing to fetch.

pyproject.toml names it with ``backend-path``, and requires nothing, so that
``pip install liblattice/python`` works offline, in a fresh venv too: pip
installs no setuptools and no wheel into its isolated build environment, as
there is nothing to install. The package is pure Python (ctypes bindings;
the shared library is not part of it), so a wheel is a zip of lattice/ and
its metadata. The version is meson's project version, read from
``../../meson.build`` (the project's one statement of it), or from PKG-INFO
in a source distribution this backend made.
"""

import base64
import hashlib
import io
import os
import re
import tarfile
import time
import zipfile

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))  # liblattice/python
MESON_BUILD = os.path.join(HERE, "..", "..", "meson.build")
NAME = "lattice"
SUMMARY = ("Python bindings (ctypes) of liblattice: normalization placement under depth "
           "growth with distillation")
EXTRAS = {"numpy": "numpy", "progress": "tqdm"}
TAG = "py3-none-any"


def meson_version(path=MESON_BUILD):
    """The project version of meson.build, else of PKG-INFO (an sdist); SystemExit with
    where it looked when neither has it."""
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        pkg_info = os.path.join(HERE, "PKG-INFO")
        if os.path.isfile(pkg_info):
            with open(pkg_info, encoding="utf-8") as f:
                found = re.search(r"(?m)^Version: (\S+)$", f.read())
            if found:
                return found.group(1)
        raise SystemExit(f"lattice: cannot read the version from {os.path.normpath(path)} ({e}): "
                         "build the package inside a liblattice source tree") from None
    found = re.search(r"project\(\s*'lattice'.*?\bversion\s*:\s*'([0-9][^']*)'", text, re.S)
    if not found:
        raise SystemExit(f"lattice: no project version in {os.path.normpath(path)}")
    return found.group(1)


def _metadata(version):
    lines = ["Metadata-Version: 2.1", f"Name: {NAME}", f"Version: {version}",
             f"Summary: {SUMMARY}", "License: MIT", "Requires-Python: >=3.8"]
    for extra, dist in EXTRAS.items():
        lines += [f"Provides-Extra: {extra}", f'Requires-Dist: {dist}; extra == "{extra}"']
    lines.append("Description-Content-Type: text/markdown")
    with open(os.path.join(HERE, "README.md"), encoding="utf-8") as f:
        readme = f.read()
    return "\n".join(lines) + "\n\n" + readme


def _package_files():
    """(path in the wheel, path here) of lattice/*.py and py.typed; not _config.py,
    which only `meson install` writes."""
    out = []
    pkg = os.path.join(HERE, NAME)
    for name in sorted(os.listdir(pkg)):
        if (name.endswith(".py") and name != "_config.py") or name == "py.typed":
            out.append((f"{NAME}/{name}", os.path.join(pkg, name)))
    return out


def _dist_info(version):
    return f"{NAME}-{version}.dist-info"


def _dist_info_files(version):
    wheel = f"Wheel-Version: 1.0\nGenerator: lattice_build\nRoot-Is-Purelib: true\nTag: {TAG}\n"
    return {"METADATA": _metadata(version), "WHEEL": wheel, "top_level.txt": NAME + "\n"}


def _date():
    epoch = int(os.environ.get("SOURCE_DATE_EPOCH", 315532800))  # 1980: zip's first year
    return time.gmtime(max(epoch, 315532800))[:6]


def _write_wheel(wheel_directory, version, payload):
    """payload: (path in the wheel, bytes); the dist-info and RECORD are added."""
    info = _dist_info(version)
    entries = list(payload) + [(f"{info}/{k}", v.encode("utf-8"))
                               for k, v in _dist_info_files(version).items()]
    record = []
    for path, data in entries:
        digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
        record.append(f"{path},sha256={digest},{len(data)}")
    record.append(f"{info}/RECORD,,")
    entries.append((f"{info}/RECORD", ("\n".join(record) + "\n").encode("utf-8")))
    name = f"{NAME}-{version}-{TAG}.whl"
    with zipfile.ZipFile(os.path.join(wheel_directory, name), "w", zipfile.ZIP_DEFLATED) as z:
        for path, data in entries:
            entry = zipfile.ZipInfo(path, _date())
            entry.external_attr = 0o644 << 16
            entry.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(entry, data)
    return name


def _read(path):
    with open(path, "rb") as f:
        return f.read()


# ---- PEP 517 ---------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def get_requires_for_build_sdist(config_settings=None):
    return []


def get_requires_for_build_editable(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    version = meson_version()
    info = os.path.join(metadata_directory, _dist_info(version))
    os.makedirs(info, exist_ok=True)
    for name, text in _dist_info_files(version).items():
        with open(os.path.join(info, name), "w", encoding="utf-8") as f:
            f.write(text)
    return _dist_info(version)


prepare_metadata_for_build_editable = prepare_metadata_for_build_wheel


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = meson_version()
    return _write_wheel(wheel_directory, version,
                        [(arc, _read(path)) for arc, path in _package_files()])


def build_editable(wheel_directory, config_settings=None, metadata_directory=None):
    """A wheel whose lattice.pth puts this directory on sys.path (PEP 660)."""
    version = meson_version()
    return _write_wheel(wheel_directory, version,
                        [(f"{NAME}.pth", (HERE + "\n").encode("utf-8"))])


def build_sdist(sdist_directory, config_settings=None):
    """lattice-VERSION.tar.gz: the package, this backend, and PKG-INFO holding the version."""
    version = meson_version()
    root = f"{NAME}-{version}"
    files = [(arc, path) for arc, path in _package_files()]
    for name in ("pyproject.toml", "README.md"):
        files.append((name, os.path.join(HERE, name)))
    files.append(("build_backend/lattice_build.py", os.path.abspath(__file__)))
    name = f"{root}.tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        members = [(arc, _read(path)) for arc, path in files]
        members.append(("PKG-INFO", _metadata(version).encode("utf-8")))
        for arc, data in members:
            entry = tarfile.TarInfo(f"{root}/{arc}")
            entry.size, entry.mode, entry.mtime = len(data), 0o644, 315532800
            t.addfile(entry, io.BytesIO(data))
    return name
