#!/bin/sh
# One seed of a study, run by two builds of the reproduction, interleaved
# (A B A B ...), and the ratio of their wall times.
#
#   sh examples/bench/study_seed.sh OLD_REPRODUCE NEW_REPRODUCE [ROUNDS] [FRACTION] [PRECISION]
#
# The study is regime-4x-seeds (its 4 GO arms, seed 1, 2 jobs x 1 thread, its
# backend) with every phase cut to FRACTION of the preset's (default 0.05: a
# twentieth of a seed; 1 is the whole seed), its evaluation interval kept (so
# a cut seed evaluates at its phase ends, about as often per step as a whole
# one: cutting the interval too would keep every evaluation and multiply
# their share of the time by 1/FRACTION), and
# its committed teacher copied into each run's folder, so that no teacher is
# trained. Each build runs in a fresh folder each round. The new build's
# first round also computes the teacher's logits file (its time is printed
# apart); later rounds link that file into their folder, as the later seeds of
# a study find it. Needs the Austen corpus (python3 examples/data/prepare_austen.py).
# PRECISION (fp32, the default, or bf16) is the new build's preset's
# "gemm_precision" only (the old build runs the preset as committed, fp32): with
# bf16 the ratio is bf16's wall time over fp32's, and each round prints the two
# builds' val CE side by side (they differ by bf16's rounding).
# Prints each round's seconds and ratio new/old, then the median ratio of the
# rounds after the first (the steady state: the file made), and of all rounds.
set -eu
[ $# -ge 2 ] || { sed -n '2,21p' "$0"; exit 2; }
old=$(realpath "$1")
new=$(realpath "$2")
rounds=${3:-3}
fraction=${4:-0.05}
precision=${5:-fp32}
case $precision in fp32 | bf16) ;; *) echo "PRECISION: '$precision' is not fp32 or bf16"; exit 2 ;; esac
here=$(cd "$(dirname "$0")/../.." && pwd)
src=$here/doc/results/regime-4x-seeds
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
python3 - "$here/examples/reproduce/presets/regime-4x-seeds.json" "$work" "$fraction" "$precision" <<'EOF'
import json, sys
p = json.load(open(sys.argv[1]))
f = float(sys.argv[3])
p["name"] = "study-seed-bench"
p["train"]["steps_per_phase"] = max(1, round(p["train"]["steps_per_phase"] * f))
p["seeds"] = 1
json.dump(p, open(sys.argv[2] + "/seed.json", "w"), indent=1)
if sys.argv[4] != "fp32":  # the new build's only: the old one may not know the key
    p["gemm_precision"] = sys.argv[4]
json.dump(p, open(sys.argv[2] + "/seed-new.json", "w"), indent=1)
EOF
now() { date +%s.%N; }
one() { # binary, folder, log, preset: the wall seconds of one seed
    mkdir -p "$2"
    cp "$src/teacher.safetensors" "$src/teacher.json" "$2/"
    t0=$(now)
    "$1" --preset "$4" --out "$2" --jobs 2 --threads 1 --progress 0 >"$3" 2>&1 ||
        { echo "failed: $1 (log $3):"; tail -5 "$3"; exit 1; }
    t1=$(now)
    python3 -c "print(f'{$t1 - $t0:.1f}')"
}
grep -m1 "model name" /proc/cpuinfo | sed 's/^.*: /# cpu: /'
echo "# regime-4x-seeds, seed 1, phases x $fraction (evaluation interval as the preset's), 2 jobs x 1 thread; rounds: $rounds; the new build's GEMMs in $precision"
cd "$here"
# both builds read this checkout's corpus, wherever each was built
LATTICE_REPRODUCE_DATA=$here/examples/data/austen
export LATTICE_REPRODUCE_DATA
ratios=""
r=1
while [ "$r" -le "$rounds" ]; do
    a=$(one "$old" "$work/old$r" "$work/old$r.log" "$work/seed.json")
    mkdir -p "$work/new$r"
    [ "$r" -gt 1 ] && ln "$work/new1/teacher_logits.bin" "$work/new$r/teacher_logits.bin"
    b=$(one "$new" "$work/new$r" "$work/new$r.log" "$work/seed-new.json")
    ratio=$(python3 -c "print(f'{$b / $a:.3f}')")
    same=$(python3 - "$work/old$r/results.json" "$work/new$r/results.json" <<'EOF2'
import json, sys
def ce(path):
    with open(path) as f:
        arms = json.load(f)["arms"]
    return {a: [r["val_ce"] for r in runs] for a, runs in arms.items()}
a, b = ce(sys.argv[1]), ce(sys.argv[2])
print("val CE of every run identical" if a == b else f"val CE differs: old {a}, new {b}")
EOF2
)
    echo "round $r: old ${a} s, new ${b} s, new/old $ratio; $same"
    [ "$r" -eq 1 ] && sed -n 's/^.*\(backend [a-z]* ([^)]*)\).*$/# old: \1/p' "$work/old1.log" | head -n 1 &&
        sed -n 's/^.*\(backend [a-z]* ([^)]*)\).*$/# new: \1/p' "$work/new1.log" | head -n 1 &&
        sed -n "s/^.*the teacher's logits: \(.*positions in\)/# the new build's first round made the logits file: \1/p" "$work/new1.log"
    ratios="$ratios $ratio"
    r=$((r + 1))
done
python3 - $ratios <<'EOF'
import statistics, sys
r = [float(x) for x in sys.argv[1:]]
if len(r) > 1:
    print(f"median new/old, rounds 2-{len(r)} (the logits file made): {statistics.median(r[1:]):.3f}")
print(f"median new/old, all {len(r)} rounds: {statistics.median(r):.3f}")
EOF
