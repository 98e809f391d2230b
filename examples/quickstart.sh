#!/bin/sh
# The README's first command: install the Debian packages the main job needs
# (.ci/deps-run; the tests need more: .ci/deps), build, prepare the
# corpus (Jane Austen's novels from Debian's r-cran-janeaustenr), and run the
# main job: the reproduction of the study on its quick preset.
# Arguments go to the reproduction, e.g. --preset examples/reproduce/presets/small.json
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps-run
if [ ! -f build/build.ninja ]; then
    meson setup build
fi
ninja -C build
python3 examples/data/prepare_austen.py
if [ "$#" -eq 0 ]; then
    set -- --preset examples/reproduce/presets/quick.json
fi
exec ./build/examples/reproduce "$@"
