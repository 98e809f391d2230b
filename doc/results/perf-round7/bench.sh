#!/bin/sh
# Round 7 of issue 27's figures, on a quiet machine. OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# are unset in these commands only.
# 1) bench_step interleaved A B A B: before (a release build of ccdd4ab: bench_step with
#    --rounds and the FMA lines, the kernels before the AVX-512 clones) and now (this tree);
#    the study's shape and 4 x 512; 1 and 2 threads; 2 rounds, each run 3 rounds of 10 steps
#    alternating with the roofline (roofline_ratio: the median of the 3).
# 2) the regime's wall time for its 4 main arms x 3 seeds, from reproduce --estimate (which times
#    one full-depth step at 1 thread, as the science runs run: OpenBLAS, the environment kept),
#    before (a release build of ed5b75c, the build of the science runs) and now, A B A B;
#    then now with LATTICE_BACKEND=default.
# 3) PyTorch against liblattice now (default backend), both presets, 1 and 2 threads, 3 rounds.
cd "$(dirname "$0")/../../.."
B=${BEFORE:-build-before/examples/bench_step}
N=${NOW:-build/examples/bench_step}
O=${OUT:-bench-out}
mkdir -p $O
uptime > $O/load-start.txt
for round in 1 2; do
  for shape in "study" "study --batch 4 --seq 512"; do
    for t in 1 2; do
      tag=$(echo "$shape" | tr -d ' -')_t${t}_r${round}
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $B --preset $shape --threads $t --steps 10 --rounds 3 > $O/${tag}_before.txt 2>&1
      env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $N --preset $shape --threads $t --steps 10 --rounds 3 > $O/${tag}_now.txt 2>&1
    done
  done
done
uptime > $O/load-mid.txt
mkdir -p $O/est && cp doc/results/regime/teacher.* $O/est/
for round in 1 2; do
  for which in before now; do
    if [ $which = before ]; then R=${BEFORE_REPRODUCE:-build-before/examples/reproduce}; else R=${NOW_REPRODUCE:-build/examples/reproduce}; fi
    $R --preset examples/reproduce/presets/regime.json --out $O/est --arms pre-joint,post-joint,pre-grow,post-grow --seeds 3 --estimate > $O/estimate_${which}_r${round}.txt 2>&1
  done
done
# the same estimate of this tree with LATTICE_BACKEND=default (oneDNN on this CPU class; reproduce
# otherwise pins OpenBLAS, the backend the kept runs were made on)
for round in 1 2; do
  LATTICE_BACKEND=default ${NOW_REPRODUCE:-build/examples/reproduce} --preset examples/reproduce/presets/regime.json --out $O/est --arms pre-joint,post-joint,pre-grow,post-grow --seeds 3 --estimate > $O/estimate_now_default_r${round}.txt 2>&1
done
rm -r $O/est
for preset in study d256; do
  for t in 1 2; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 examples/bench/compare.py --lattice $N --preset $preset --threads $t --rounds 3 > $O/compare_${preset}_t$t.txt 2>&1
  done
done
uptime > $O/load-end.txt
