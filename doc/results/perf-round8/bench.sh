#!/bin/sh
# Round 8 of issue 27's figures (a short one): a second host class, Intel Xeon family 6 model 207
# (Emerald Rapids; AVX-512 with BF16 and FP16, no AMX in its CPU flags), where BLIS 0.9 runs its
# 'haswell' kernels and the default rule picks oneDNN. Run right after the test suite finished
# (load average 1.99 at the start, nothing else running). OPENBLAS_CORETYPE and OPENBLAS_L2_SIZE
# are unset in these commands only. Outputs beside this script.
# 1) the GEMM libraries at the study step's GEMM shapes, interleaved, 5 rounds;
# 2) bench_step at the study's shape on oneDNN and on OpenBLAS, 1 then 2 threads, each run
#    3 rounds of 10 steps alternating with the roofline (one run each: no second round).
cd "$(dirname "$0")/../../.."
N=${NOW:-build/examples}
O=${OUT:-bench-out}
mkdir -p $O
uptime > $O/load-start.txt
grep -m1 'model name' /proc/cpuinfo > $O/cpu.txt
grep -m1 -E '^model[[:space:]]' /proc/cpuinfo >> $O/cpu.txt
env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $N/bench_gemm --preset study --threads 1 --rounds 5 > $O/gemm_study_t1.txt 2>&1
for t in 1 2; do
  for be in onednn openblas; do
    env -u OPENBLAS_CORETYPE -u OPENBLAS_L2_SIZE $N/bench_step --backend $be --preset study --threads $t --steps 10 --rounds 3 > $O/study_t${t}_$be.txt 2>&1
  done
done
uptime > $O/load-end.txt
