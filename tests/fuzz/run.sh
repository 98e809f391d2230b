#!/bin/sh
# Runs libFuzzer targets for a bounded time, each on a copy of its seed corpus
# (tests/fuzz/corpus/NAME for fuzz_NAME), and prints one line per target:
#   fuzz_data: ok, 812345 runs in 60 s
#   fuzz_data: FAILED (crash) after 1234 runs: reproducer OUT/fuzz_data/crash-...
# Exits non-zero when any target crashed, leaked, hit its per-input timeout or
# ran out of memory; its sanitizer report is printed above its line.
#
# usage: run.sh [-t SECONDS] [-o DIR] FUZZER...
#   -t  seconds per target (default $LATTICE_FUZZ_SECONDS, else 60)
#   -o  where each target's grown corpus, log and reproducers go (DIR/fuzz_NAME/);
#       kept, and grown further, from one run to the next. Default: a new
#       directory under ${TMPDIR:-/tmp}, removed when every target passed.
# Extra libFuzzer flags may be given in $LATTICE_FUZZ_FLAGS (e.g. -jobs=2 -workers=2).
set -eu

seeds=$(cd "$(dirname "$0")" && pwd)/corpus
seconds=${LATTICE_FUZZ_SECONDS:-60}
out=
while getopts t:o: flag; do
    case $flag in
    t) seconds=$OPTARG ;;
    o) out=$OPTARG ;;
    *) echo "usage: $0 [-t SECONDS] [-o DIR] FUZZER..." >&2; exit 2 ;;
    esac
done
shift $((OPTIND - 1))
if [ $# -eq 0 ]; then
    echo "usage: $0 [-t SECONDS] [-o DIR] FUZZER..." >&2
    exit 2
fi
scratch=
if [ -z "$out" ]; then
    out=$(mktemp -d "${TMPDIR:-/tmp}/lattice-fuzz.XXXXXX")
    scratch=$out
fi
mkdir -p "$out"
out=$(cd "$out" && pwd)

# A UBSan report is fatal in a fuzz build already (-fno-sanitize-recover);
# these make it so for builds configured by hand with -Db_sanitize as well.
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-halt_on_error=1:print_stacktrace=1}
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1}

failed=0
for fuzzer in "$@"; do
    name=$(basename "$fuzzer")
    dir=$out/$name
    corpus=$dir/corpus
    mkdir -p "$corpus"
    cp "$seeds/${name#fuzz_}"/* "$corpus/"
    # The targets write each input to a file under TMPDIR: keep those here too.
    set +e
    TMPDIR=$dir "$fuzzer" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 \
        -print_final_stats=1 -artifact_prefix="$dir/" ${LATTICE_FUZZ_FLAGS:-} \
        "$corpus" >"$dir/log" 2>&1
    status=$?
    set -e
    runs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
    if [ -z "$runs" ]; then # killed before its final stats: its last status line
        runs=$(sed -n 's/^#\([0-9][0-9]*\).*/\1/p' "$dir/log" | tail -n 1)
    fi
    runs=${runs:-0}
    reproducer=$(sed -n 's/.*Test unit written to \(.*\)$/\1/p' "$dir/log" | tail -n 1)
    if [ "$status" -eq 0 ] && [ -z "$reproducer" ]; then
        echo "$name: ok, $runs runs in $seconds s"
        continue
    fi
    failed=$((failed + 1))
    what=crash
    if grep -q 'ERROR: LeakSanitizer' "$dir/log"; then what=leak
    elif grep -q 'ERROR: libFuzzer: timeout' "$dir/log"; then what=timeout
    elif grep -q 'ERROR: libFuzzer: out-of-memory' "$dir/log"; then what=out-of-memory
    elif grep -q 'ERROR: UndefinedBehaviorSanitizer\|runtime error:' "$dir/log"; then what=undefined-behavior
    fi
    tail -n 80 "$dir/log" # the sanitizer's report
    echo "$name: FAILED ($what, exit $status) after $runs runs: reproducer ${reproducer:-none written}, log $dir/log"
done

if [ "$failed" -eq 0 ] && [ -n "$scratch" ]; then
    rm -rf "$scratch"
fi
[ "$failed" -eq 0 ]
