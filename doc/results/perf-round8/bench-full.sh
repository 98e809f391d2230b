#!/bin/sh
# Round 8 of issue 27's figures, the full one, on Intel Xeon family 6 model 207 (Emerald Rapids;
# AVX-512 with BF16 and FP16, no AMX in its CPU flags), where BLIS 0.9 runs its 'haswell'
# kernels and the default rule picks oneDNN. Quiet machine, nothing else running.
# OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE are unset in these commands only. Outputs in full/.
# 1) the GEMM libraries at the study step's GEMM shapes, interleaved, 1 and 2 threads, 5 rounds;
# 2) bench_step on oneDNN and OpenBLAS interleaved (A B A B), the study's shape and 4 x 512,
#    1 and 2 threads, 2 rounds, each run 3 rounds of 10 steps alternating with the roofline
#    (split over the threads as the step split them);
# 3) the regime's wall time for its 4 main arms x 3 seeds from reproduce --estimate, as the
#    science runs run (OpenBLAS, the environment kept) and with LATTICE_BACKEND=default, A B A B;
# 4) PyTorch against liblattice (default backend), both presets, 1 and 2 threads, 3 rounds.
cd "$(dirname "$0")/../../.."
N=${NOW:-build/examples}
O=${OUT:-bench-out}
mkdir -p $O
uptime > $O/load-start.txt
grep -m1 'model name' /proc/cpuinfo > $O/cpu.txt
grep -m1 -E '^model[[:space:]]' /proc/cpuinfo >> $O/cpu.txt
for t in 1 2; do
  env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $N/bench_gemm --preset study --threads $t --rounds 5 > $O/gemm_study_t$t.txt 2>&1
done
for round in 1 2; do
  for shape in "study" "study --batch 4 --seq 512"; do
    for t in 1 2; do
      tag=$(echo "$shape" | tr -d ' -')_t${t}_r${round}
      for be in onednn openblas; do
        env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $N/bench_step --backend $be --preset $shape --threads $t --steps 10 --rounds 3 > $O/${tag}_$be.txt 2>&1
      done
    done
  done
done
uptime > $O/load-mid.txt
mkdir -p $O/est && cp doc/results/regime/teacher.* $O/est/
for round in 1 2; do
  $N/reproduce --preset examples/reproduce/presets/regime.json --out $O/est --arms pre-joint,post-joint,pre-grow,post-grow --seeds 3 --estimate > $O/estimate_r${round}.txt 2>&1
  LATTICE_BACKEND=default $N/reproduce --preset examples/reproduce/presets/regime.json --out $O/est --arms pre-joint,post-joint,pre-grow,post-grow --seeds 3 --estimate > $O/estimate_default_r${round}.txt 2>&1
done
rm -r $O/est
for preset in study d256; do
  for t in 1 2; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE /usr/bin/python3 examples/bench/compare.py --lattice $N/bench_step --preset $preset --threads $t --rounds 3 > $O/compare_${preset}_t$t.txt 2>&1
  done
done
uptime > $O/load-end.txt
