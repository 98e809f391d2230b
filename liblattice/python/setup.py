"""The package's version, read from meson.build: the project's one statement of it.

pyproject.toml declares the version dynamic; setuptools runs this file to
learn it. Build the package from a liblattice source tree (this directory
two levels below meson.build), as `pip install liblattice/python` does.
"""

import os
import re

from setuptools import setup

MESON_BUILD = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "meson.build")


def meson_version(path=MESON_BUILD):
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise SystemExit(f"lattice: cannot read the version from {os.path.normpath(path)} ({e}): "
                         "build the package inside a liblattice source tree") from None
    found = re.search(r"project\(\s*'lattice'.*?\bversion\s*:\s*'([0-9][^']*)'", text, re.S)
    if not found:
        raise SystemExit(f"lattice: no project version in {os.path.normpath(path)}")
    return found.group(1)


setup(version=meson_version())
