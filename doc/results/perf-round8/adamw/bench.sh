#!/bin/sh
# AdamW's one team for all tensors and the gradient norm's 8 lanes: before (a release build of
# d17c026, the round-8 bench's build) and now, interleaved A B A B, 1 and 2 threads,
# the study's shape, each run 3 rounds of 10 steps without the sgemm replay. Outputs beside this.
cd "$(dirname "$0")/../../../.."
B=${BEFORE:-build-before/examples/bench_step}
N=${NOW:-build/examples/bench_step}
O=${OUT:-bench-out}
mkdir -p $O
for r in 1 2; do
  for t in 1 2; do
    for w in before now; do
      if [ $w = before ]; then X=$B; else X=$N; fi
      env -u OPENBLAS_CORETYPE $X --preset study --threads $t --steps 10 --rounds 3 --no-sgemm > $O/o_${w}_t${t}_r$r.txt 2>&1
    done
  done
done
