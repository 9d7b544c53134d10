#!/usr/bin/env bash
# Bounded libFuzzer pass over every fuzz target of a build.
#   scripts/fuzz.sh BUILD_DIR SECONDS
# BUILD_DIR is a tree configured with -DCMAKE_C_COMPILER=clang -DAFTP_FUZZ=ON
# and built. Every executable BUILD_DIR/tests/fuzz/fuzz_<name> runs on a
# temporary copy of tests/fuzz/corpus/<name>/ (the repository is never
# written), up to AFTP_FUZZ_JOBS targets at a time (default: the number of
# cores), so the whole pass takes about SECONDS of wall-clock time and every
# target gets the same share of it.
# A crash, leak, timeout or out-of-memory fails the pass; the reproducer is
# kept under BUILD_DIR/fuzz-artifacts/<name>/ and its path printed (replay it
# with BUILD_DIR/tests/fuzz/replay_<name> FILE, in any build).
# AFTP_FUZZ_KEEP_CORPUS=DIR keeps each grown corpus as DIR/<name>/ (to
# minimise with -merge=1 before checking new inputs in; see tests/fuzz/README.md).
# The last line is always: fuzz: <executions> executions, <targets> targets, <crashes> crashes
set -euo pipefail

usage() {
    echo "usage: $0 BUILD_DIR SECONDS" >&2
    exit 2
}
if [ $# -ne 2 ] || ! [[ $2 =~ ^[0-9]+$ ]] || [ "$2" -eq 0 ]; then
    usage
fi
root=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "$1" && pwd)
seconds=$2
jobs=${AFTP_FUZZ_JOBS:-$(nproc)}

mapfile -t targets < <(find "$build/tests/fuzz" -maxdepth 1 -type f -name 'fuzz_*' -perm -u+x |
    sort)
if [ ${#targets[@]} -eq 0 ]; then
    echo "no fuzz_* executables in $build/tests/fuzz" \
        "(configure with -DCMAKE_C_COMPILER=clang -DAFTP_FUZZ=ON)" >&2
    echo "fuzz: 0 executions, 0 targets, 0 crashes"
    exit 1
fi
[ "$jobs" -ge 1 ] || jobs=1
[ "$jobs" -le ${#targets[@]} ] || jobs=${#targets[@]}
rounds=$(((${#targets[@]} + jobs - 1) / jobs))
share=$((seconds / rounds))
[ "$share" -ge 1 ] || share=1

work=$(mktemp -d "${TMPDIR:-/tmp}/aftp-fuzz.XXXXXX")
trap 'rm -rf "$work"' EXIT

# Runs one target on a copy of its corpus; its log goes to $work/<name>.log.
run_target() {
    local exe=$1 name
    name=$(basename "$exe")
    name=${name#fuzz_}
    local corpus=$work/corpus-$name artifacts=$build/fuzz-artifacts/$name
    mkdir -p "$corpus" "$artifacts"
    if [ -d "$root/tests/fuzz/corpus/$name" ]; then
        cp -R "$root/tests/fuzz/corpus/$name/." "$corpus/"
    fi
    local rc=0
    "$exe" -max_total_time="$share" -timeout=25 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/" "$corpus" >"$work/$name.log" 2>&1 || rc=$?
    echo "$rc" >"$work/$name.rc"
    if [ -n "${AFTP_FUZZ_KEEP_CORPUS:-}" ]; then
        mkdir -p "$AFTP_FUZZ_KEEP_CORPUS/$name"
        cp -R "$corpus/." "$AFTP_FUZZ_KEEP_CORPUS/$name/"
    fi
}

echo "fuzz: ${#targets[@]} targets, ${share}s each, $jobs at a time"
running=0
for exe in "${targets[@]}"; do
    if [ "$running" -ge "$jobs" ]; then
        wait -n || true
        running=$((running - 1))
    fi
    run_target "$exe" &
    running=$((running + 1))
done
wait || true

total=0
crashes=0
for exe in "${targets[@]}"; do
    name=$(basename "$exe")
    name=${name#fuzz_}
    log=$work/$name.log
    execs=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$log" | tail -n 1)
    total=$((total + ${execs:-0}))
    # libFuzzer exits non-zero and says "Test unit written to <file>" on
    # every finding (crash, property abort, leak, timeout, out-of-memory).
    rc=$(cat "$work/$name.rc" 2>/dev/null || echo missing)
    if [ "$rc" != 0 ] || grep -q 'Test unit written to' "$log"; then
        crashes=$((crashes + 1))
        echo "=== fuzz_$name FAILED; end of its log:"
        tail -n 60 "$log"
        grep -o 'Test unit written to .*' "$log" |
            sed 's/^Test unit written to /reproducer: /' || true
    else
        corpus=$(grep -o 'corp: [0-9]*/[0-9a-zA-Z]*' "$log" | tail -n 1)
        echo "fuzz_$name: ${execs} executions, $corpus"
    fi
done

echo "fuzz: $total executions, ${#targets[@]} targets, $crashes crashes"
[ "$crashes" -eq 0 ]
