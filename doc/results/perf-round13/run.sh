#!/bin/sh
# Round 13 (doc/PERFORMANCE.md): where the bf16 step's time goes. Run from the
# repository's root with a release build in ./build, on a quiet machine:
#   sh doc/results/perf-round13/run.sh OUTDIR
# bench_bf16: every GEMM of the study's step in fp32, through oneDNN's bf16 gemm
# API and through the matmul primitive (the bf16 precision's slot), and the
# rounding of the operands alone; then the whole step, fp32 and bf16
# alternating, 3 rounds.
set -eu
out=$1
B=./build/examples
mkdir -p "$out"
{ date -u +%FT%TZ; uptime; lscpu | grep -E 'Model name|CPU family|^Model:'; } > "$out/cpu.txt"
$B/bench_bf16 --preset study --rounds 15 > "$out/bench_bf16.txt" 2>&1
for r in 1 2 3; do
  for p in fp32 bf16; do
    echo "== round $r $p" >> "$out/bench_step.txt"
    $B/bench_step --preset study --backend onednn --threads 1 --steps 20 --no-sgemm --gemm-precision $p >> "$out/bench_step.txt" 2>&1
  done
done
date -u +%FT%TZ >> "$out/cpu.txt"
