#!/bin/sh
# One seed of a study, run by two builds of the reproduction, interleaved
# (A B A B ...), and the ratio of their wall times.
#
#   sh examples/bench/study_seed.sh OLD_REPRODUCE NEW_REPRODUCE [ROUNDS] [FRACTION] [PRECISIONS]
#
# The study is regime-4x-seeds (its 4 GO arms, seed 1, 2 jobs x 1 thread, its
# backend) with every phase cut to FRACTION of the preset's (default 0.1; 1 is
# the whole seed; below about 0.063 the cut seed runs too few steps for the
# teacher's logits file to be made, and the new build computes the logits in
# its steps), its evaluation interval kept (so a cut seed evaluates at its
# phase ends, about as often per step as a whole one: cutting the interval too
# would keep every evaluation and multiply their share of the time by
# 1/FRACTION), and its committed teacher copied into each run's folder, so that
# no teacher is trained. Each build runs in a fresh folder each round. The new
# build's first run also computes the teacher's logits file (its time is
# printed apart); later runs link that file into their folder, as the later
# seeds of a study find it. Needs the Austen corpus (python3
# examples/data/prepare_austen.py).
# PRECISIONS is a comma-separated list of the new build's preset's
# "gemm_precision" (fp32, the default, or bf16; e.g. fp32,bf16): each round
# runs the old build (the preset as committed, fp32), then the new build once
# per precision, in that order, and prints each one's ratio to the old build's
# wall time and whether its runs' val CEs equal the old build's (bf16's differ
# by its rounding: they are printed side by side).
# Prints each round's seconds and ratios, then per precision the median ratio
# of the rounds after the first (the steady state: the file made), and of all
# rounds.
set -eu
[ $# -ge 2 ] || { sed -n '2,28p' "$0"; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
rounds=${3:-3}
fraction=${4:-0.1}
precisions=$(echo "${5:-fp32}" | tr ',' ' ')
for x in $precisions; do
    case $x in fp32 | bf16) ;; *) echo "PRECISIONS: '$x' is not fp32 or bf16"; exit 2 ;; esac
done
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$here/doc/results/regime-4x-seeds
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
# shellcheck disable=SC2086
python3 - "$here/examples/reproduce/presets/regime-4x-seeds.json" "$work" "$fraction" $precisions <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
f = float(sys.argv[3])
p["name"] = "study-seed-bench"
p["train"]["steps_per_phase"] = max(1, round(p["train"]["steps_per_phase"] * f))
p["seeds"] = 1
json.dump(p, open(sys.argv[2] + "/seed.json", "w"), indent=1)
for x in sys.argv[4:]:
    q = dict(p)
    if x != "fp32":  # the new build's only: the old one may not know the key
        q["gemm_precision"] = x
    json.dump(q, open(sys.argv[2] + f"/seed-{x}.json", "w"), indent=1)
PY
now() { date +%s.%N; }
one() { # binary, folder, log, preset: the wall seconds of one seed
    mkdir -p "$2"
    cp "$src/teacher.safetensors" "$src/teacher.json" "$2/"
    t0=$(now)
    "$1" --preset "$4" --out "$2" --jobs 2 --threads 1 --progress 0 >"$3" 2>&1 ||
        { echo "failed: $1 (log $3):" >&2; tail -5 "$3" >&2; exit 1; }
    t1=$(now)
    python3 -c "print(f'{$t1 - $t0:.1f}')"
}
valce() { # old results.json, new results.json: equal, or both side by side
    python3 - "$1" "$2" <<'PY'
import json, sys
def ce(path):
    with open(path) as f:
        arms = json.load(f)["arms"]
    return {a: [r["val_ce"] for r in runs] for a, runs in arms.items()}
a, b = ce(sys.argv[1]), ce(sys.argv[2])
print("val CE of every run identical" if a == b else
      "val CE old/new: " + ", ".join(f"{k} {a[k][0]:.4f}/{b[k][0]:.4f}" for k in a))
PY
}
grep -m1 "model name" /proc/cpuinfo | sed 's/^.*: /# cpu: /'
echo "# regime-4x-seeds, seed 1, phases x $fraction (evaluation interval as the preset's), 2 jobs x 1 thread; rounds: $rounds; the new build's GEMMs in: $precisions"
cd "$here"
# both builds read this checkout's corpus, wherever each was built
LATTICE_REPRODUCE_DATA=$here/examples/data/austen
export LATTICE_REPRODUCE_DATA
made=""
: >"$work/ratios"
r=1
while [ "$r" -le "$rounds" ]; do
    a=$(one "$old" "$work/old$r" "$work/old$r.log" "$work/seed.json")
    line="round $r: old $a s"
    for x in $precisions; do
        run=$work/new$r-$x
        mkdir -p "$run"
        [ -n "$made" ] && ln "$made" "$run/teacher_logits.bin"
        b=$(one "$new" "$run" "$run.log" "$work/seed-$x.json")
        if [ -z "$made" ] && [ -f "$run/teacher_logits.bin" ]; then
            made=$run/teacher_logits.bin
            sed -n "s/^.*the teacher's logits: \(.*positions in\)/# the new build's first run made the logits file: \1/p" "$run.log"
        fi
        ratio=$(python3 -c "print(f'{$b / $a:.3f}')")
        echo "$x $ratio" >>"$work/ratios"
        line="$line; new $x $b s, new/old $ratio, $(valce "$work/old$r/results.json" "$run/results.json")"
    done
    echo "$line"
    if [ "$r" -eq 1 ]; then
        sed -n 's/^.*\(backend [a-z]* ([^)]*)\).*$/# old: \1/p' "$work/old1.log" | head -n 1
        for x in $precisions; do
            sed -n "s/^.*\(backend [a-z]* ([^)]*)\).*\$/# new $x: \1/p" "$work/new1-$x.log" | head -n 1
        done
    fi
    [ -n "$made" ] || echo "# no logits file made (FRACTION too small): the new build computed the logits in its steps"
    r=$((r + 1))
done
python3 - "$work/ratios" <<'PY'
import statistics, sys
by = {}
for line in open(sys.argv[1]):
    x, v = line.split()
    by.setdefault(x, []).append(float(v))
for x, r in by.items():
    if len(r) > 1:
        print(f"{x}: median new/old, rounds 2-{len(r)} (the logits file made): {statistics.median(r[1:]):.3f}")
    print(f"{x}: median new/old, all {len(r)} rounds: {statistics.median(r):.3f}")
PY
