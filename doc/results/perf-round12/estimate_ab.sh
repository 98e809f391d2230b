#!/bin/sh
# --estimate of two builds' reproduce, alternated, on an idle host, for regime-8x-seeds seed 1 (4
# runs) and dose-37x-go seed 1 (8 runs), each in a scratch folder holding only the study's teacher
# and a link to its logits file. As run for perf-round12 (estimate_ab.txt): OLD the build of b52bf4f
# (the study's fixed build), NEW a build of 76474e3 (the estimator timing the median of 5 steps
# after one not timed; reverted since), RUNS the folder holding both studies' run folders and
# preset copies (regime-8x-seeds/, dose-37x-go/, regime-8x-seeds.json, dose-37x-go.json).
#   sh estimate_ab.sh OLD_REPRODUCE NEW_REPRODUCE RUNS DATA_DIR
set -u
OLD=$1
NEW=$2
RUNS=$3
export LATTICE_REPRODUCE_DATA=$4
mkdir -p $RUNS/est-ab
cd $RUNS/est-ab
for s in regime-8x-seeds dose-37x-go; do
  rm -rf $s; mkdir -p $s
  cp $RUNS/$s/teacher.json $RUNS/$s/teacher.safetensors $s/
  ln -s $RUNS/$s/teacher_logits.bin $s/teacher_logits.bin
done
lscpu | grep -E 'Model name|CPU family|^Model:'
for r in 1 2 3; do
  for s in regime-8x-seeds dose-37x-go; do
    for b in old new; do
      eval exe=\$$(echo $b | tr a-z A-Z)
      rm -rf $s/runs $s/.lock
      line=$($exe --preset $RUNS/$s.json --out $RUNS/est-ab/$s --seeds 1 --jobs 2 --estimate 2>&1 | grep "estimated wall time")
      echo "round $r $s $b: $line"
    done
  done
done
