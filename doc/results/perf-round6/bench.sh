#!/bin/sh
# issue 27's figures, on a quiet machine. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE unset here only.
# 1) bench_step interleaved A B C: before (3bf52d7, before issue 27; default = openblas),
#    now on openblas, now on default (= onednn here); study shape and 4 x 512; 1 and 2 threads; 2 rounds.
# 2) PyTorch against liblattice now (default backend), both presets, 1 and 2 threads, 3 rounds each.
cd "$(dirname "$0")/../../.."
# BEFORE: a release build of 3bf52d7; NOW: a release build of this tree; OUT: where the figures go
O=${OUT:-bench-out}
mkdir -p $O
uptime > $O/load-start.txt
for round in 1 2; do
  for shape in "study" "study --batch 4 --seq 512"; do
    for t in 1 2; do
      tag=$(echo "$shape" | tr -d ' -')_t${t}_r${round}
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ${BEFORE:-build-before}/examples/bench_step --preset $shape --threads $t --steps 10 > $O/${tag}_before.txt 2>&1
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ${NOW:-build}/examples/bench_step --preset $shape --threads $t --steps 10 --backend openblas > $O/${tag}_openblas.txt 2>&1
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE ${NOW:-build}/examples/bench_step --preset $shape --threads $t --steps 10 --backend default > $O/${tag}_default.txt 2>&1
    done
  done
done
uptime > $O/load-mid.txt
for preset in study d256; do
  for t in 1 2; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 examples/bench/compare.py --lattice ${NOW:-build}/examples/bench_step --preset $preset --threads $t --rounds 3 > $O/compare_${preset}_t$t.txt 2>&1
  done
done
uptime > $O/load-end.txt
