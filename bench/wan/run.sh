#!/usr/bin/env bash
# The inside of bench/wan.sh: runs in netem/wan.sh's command namespace and
# measures each requested tool, one after the other, over the same emulated
# link, appending one JSON record per tool to $BENCH_RESULTS.
#
# Environment (set by bench/wan.sh): BENCH_WORK (scratch dir), BENCH_SRC (the
# file), BENCH_SRC_SHA (its sha256), BENCH_SIZE (its size; aftp-faux's size
# when that runs alone and the file is empty), BENCH_TOOLS (comma list), BENCH_CAP
# (seconds), BENCH_AFTP (binary), BENCH_RATE (aftp --rate or "auto"),
# BENCH_IPERF_SECONDS, BENCH_RETRIES, BENCH_RESULTS; and netem/wan.sh's WAN_*
# variables.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$BENCH_WORK src=$BENCH_SRC cap=$BENCH_CAP
size=$BENCH_SIZE
# shellcheck source=bench/wan/tools.sh
. "$here/tools.sh"
trap tools_teardown EXIT

record kind=meta profile="$WAN_PROFILE" backend="$WAN_BACKEND" mode="$WAN_MODE" \
    rate_bps="$WAN_FWD_RATE_BPS" loss="$WAN_FWD_LOSS" mtu="$WAN_MTU" rtt_us="$WAN_RTT_US" \
    size_bytes="$size" files_in="$(dirname "$work") ($(stat -f -c %T "$work"))"

IFS=, read -r -a tools <<<"$BENCH_TOOLS"
for tool in "${tools[@]}"; do
    measure_tool "$tool"
done
exit 0
