#!/bin/sh
# The README's first command: install the Debian packages, build, and run the
# main job. Extra arguments go to the training example (e.g. --steps 1000).
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps
if [ ! -f build/build.ninja ]; then
    meson setup build
fi
ninja -C build
# Until the reproduction of the study lands, the main job is the byte-level
# training example, on a text every Debian system has.
exec ./build/examples/train_text /usr/share/common-licenses/GPL-3 "$@"
