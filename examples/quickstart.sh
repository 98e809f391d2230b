#!/bin/sh
# The README's first command: install the Debian packages the main job needs
# (.ci/deps-run; the tests need more: .ci/deps), build, prepare the
# corpus (Jane Austen's novels from Debian's r-cran-janeaustenr), and run the
# main job: the reproduction of the study on its quick preset, which must end
# with every arm learned.
# Arguments go to the reproduction, e.g. --preset examples/reproduce/presets/small.json
set -eu
cd "$(dirname "$0")/.."
sh .ci/deps-run
if [ ! -f build/build.ninja ]; then
    meson setup build
fi
ninja -C build
python3 examples/data/prepare_austen.py
if [ "$#" -gt 0 ]; then
    exec ./build/examples/reproduce "$@"
fi
# The quick preset (about 2 minutes on 2 cores), then the check that its
# result can be read: every arm learned (an arm within 0.1 nats/byte of the
# unigram CE makes every row resting on it "not applicable (did not learn)").
# Its runs read about a tenth of the training rows, so the teacher runs in
# their steps rather than once over every row into a file beforehand.
./build/examples/reproduce --preset examples/reproduce/presets/quick.json
python3 - results/quick/results.json <<'EOF'
import json, sys
with open(sys.argv[1]) as f:
    flagged = json.load(f)["baseline"]["did_not_learn"]
if flagged:
    sys.exit("quickstart: these arms of the quick preset did not learn: %s" % ", ".join(flagged))
EOF
