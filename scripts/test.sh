#!/usr/bin/env bash
# Build and run aftp's whole test suite:
#   1. install the build and test dependencies (Debian 12, apt-get; needs root
#      unless they are already installed),
#   2. a warnings-as-errors build and every ctest suite,
#   3. the same suites under AddressSanitizer + UndefinedBehaviorSanitizer,
#   4. a bounded libFuzzer pass over every decoder (AFTP_FUZZ_SECONDS, default 60 in total).
# Every stage runs even when an earlier one failed, so one run tells all that
# is wrong; the summary at the end gives each stage's outcome (or says that
# none ran, when the dependencies could not be installed) and the exit status
# is 0 only when every stage passed.
# Usage: scripts/test.sh   (from anywhere; build trees go to ./build/test-*)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

jobs=$(nproc)
fuzz_seconds=${AFTP_FUZZ_SECONDS:-60}
stages=(release asan-ubsan fuzz)

configure() { # build dir, cmake args...
    local dir=$1
    shift
    cmake -S . -B "$dir" -DAFTP_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; return 1; }
}

run_suite() { # name, build dir, cmake args...
    local name=$1 dir=$2
    shift 2
    echo "=== [$name] configure + build"
    configure "$dir" "$@"
    cmake --build "$dir" -j "$jobs"
    echo "=== [$name] ctest"
    (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600) | tee "$dir.ctest.log"
}

stage_release() {
    run_suite release build/test-release -DCMAKE_BUILD_TYPE=RelWithDebInfo -DAFTP_TEST_HOOKS=ON
}
stage_asan-ubsan() {
    run_suite asan-ubsan build/test-asan -DCMAKE_BUILD_TYPE=Debug -DAFTP_SANITIZE=ON -DAFTP_TEST_HOOKS=ON
}
stage_fuzz() {
    echo "=== [fuzz] libFuzzer build, ${fuzz_seconds}s in total"
    configure build/test-fuzz -DCMAKE_C_COMPILER=clang -DAFTP_FUZZ=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo
    cmake --build build/test-fuzz -j "$jobs"
    scripts/fuzz.sh build/test-fuzz "$fuzz_seconds" | tee build/test-fuzz.log
}

# The figures a stage left behind: ctest's count, or the fuzz pass's last
# line; nothing when it failed before them (never a failure itself: the
# summary must always be printed).
stage_figures() { # name
    local log pattern
    case $1 in
    release) log=build/test-release.ctest.log pattern='tests passed|tests failed' ;;
    asan-ubsan) log=build/test-asan.ctest.log pattern='tests passed|tests failed' ;;
    fuzz) log=build/test-fuzz.log pattern='^fuzz:' ;;
    esac
    grep -hE "$pattern" "$log" 2>/dev/null | tail -n 1 || true
}

summary=()
failed=0
print_summary() {
    echo "=== summary"
    printf '%s\n' "${summary[@]}"
}

# shellcheck source=scripts/deps.sh
. scripts/deps.sh
if ! aftp_install_deps; then
    for name in "${stages[@]}"; do summary+=("$name: not run (dependencies missing)"); done
    print_summary
    exit 1
fi

mkdir -p build
rm -f build/test-release.ctest.log build/test-asan.ctest.log build/test-fuzz.log
for name in "${stages[@]}"; do
    # Not "if (stage)": errexit is ignored inside a tested command.
    set +e
    (set -euo pipefail; "stage_$name")
    rc=$?
    set -e
    if [ "$rc" -eq 0 ]; then
        summary+=("$name: passed: $(stage_figures "$name")")
    else
        summary+=("$name: FAILED (exit $rc): $(stage_figures "$name")")
        failed=1
    fi
done
print_summary
exit "$failed"
