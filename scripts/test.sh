#!/usr/bin/env bash
# Build and run aftp's whole test suite:
#   1. install the build and test dependencies (Debian 12, apt-get; needs root
#      unless they are already installed),
#   2. a warnings-as-errors build and every ctest suite,
#   3. the same suites under AddressSanitizer + UndefinedBehaviorSanitizer,
#   4. a bounded libFuzzer pass over every decoder (AFTP_FUZZ_SECONDS, default 60 in total).
# Usage: scripts/test.sh   (from anywhere; build trees go to ./build/test-*)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
# shellcheck source=scripts/deps.sh
. scripts/deps.sh
aftp_install_deps

jobs=$(nproc)
fuzz_seconds=${AFTP_FUZZ_SECONDS:-60}
summary=()

run_suite() { # name, build dir, cmake args...
    local name=$1 dir=$2
    shift 2
    echo "=== [$name] configure + build"
    cmake -S . -B "$dir" -DAFTP_WERROR=ON "$@" >"$dir.configure.log" 2>&1 ||
        { cat "$dir.configure.log"; return 1; }
    cmake --build "$dir" -j "$jobs"
    echo "=== [$name] ctest"
    (cd "$dir" && ctest --output-on-failure -j "$jobs" --timeout 600) | tee "$dir.ctest.log"
    summary+=("$name: $(grep -E 'tests passed|tests failed' "$dir.ctest.log" | tail -n 1)")
}

mkdir -p build
run_suite release build/test-release -DCMAKE_BUILD_TYPE=RelWithDebInfo
run_suite asan-ubsan build/test-asan -DCMAKE_BUILD_TYPE=Debug -DAFTP_SANITIZE=ON

echo "=== [fuzz] libFuzzer build, ${fuzz_seconds}s in total"
cmake -S . -B build/test-fuzz -DCMAKE_C_COMPILER=clang -DAFTP_FUZZ=ON -DAFTP_WERROR=ON \
    -DCMAKE_BUILD_TYPE=RelWithDebInfo >build/test-fuzz.configure.log 2>&1 ||
    { cat build/test-fuzz.configure.log; exit 1; }
cmake --build build/test-fuzz -j "$jobs"
scripts/fuzz.sh build/test-fuzz "$fuzz_seconds" | tee build/test-fuzz.log
summary+=("$(tail -n 1 build/test-fuzz.log)")

echo "=== summary"
printf '%s\n' "${summary[@]}"
