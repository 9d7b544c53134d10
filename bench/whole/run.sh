#!/usr/bin/env bash
# The inside of bench/whole.sh for one profile: runs in netem/wan.sh's
# command namespace and measures every row of that profile (a file size
# each) with each tool, --repeat times, interleaved (run 1 of every row and
# tool, then run 2, ...) so that a machine's drift spreads over all of them.
# One JSON record per run goes to $BENCH_RESULTS (bench/wan/tools.sh).
#
# Environment (set by bench/whole.sh): BENCH_WORK (scratch dir, holding
# src-<MiB>M.bin and its .sha256 per size), BENCH_ROWS (space-separated
# MiB:GOAL, GOAL the row's target in % of the loss-adjusted payload capacity
# or "-"), BENCH_TOOLS (comma list), BENCH_REPEAT, BENCH_CAP, BENCH_AFTP,
# BENCH_RATE, BENCH_IPERF_SECONDS, BENCH_RETRIES, BENCH_RESULTS,
# BENCH_PHASES (bench/whole/phases.py); and netem/wan.sh's WAN_* variables.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$BENCH_WORK cap=$BENCH_CAP src='' size=0
# shellcheck source=bench/wan/tools.sh
. "$here/../wan/tools.sh"
trap tools_teardown EXIT

# Every TCP tool on this link: BBR when the kernel has it (the strongest
# choice for GridFTP's streams), else CUBIC; autotuning up to 64 MiB
# (tcp_buffers). Both are per network namespace: the host is untouched.
tcp_cc=cubic
grep -qw bbr /proc/sys/net/ipv4/tcp_available_congestion_control && tcp_cc=bbr
for host in snd rcv; do
    declare -n prefix=$host
    "${prefix[@]}" sysctl -qw net.ipv4.tcp_congestion_control="$tcp_cc"
done
unset -n prefix
tcp_buffers
record kind=link profile="$WAN_PROFILE" tcp_cc="$tcp_cc" \
    tcp_available="$(tr ' ' , </proc/sys/net/ipv4/tcp_available_congestion_control)" \
    tcp_buffers="$(tcp_buffers_note)"

read -r -a rows <<<"$BENCH_ROWS"
for row in "${rows[@]}"; do
    mib=${row%%:*}
    record kind=meta row="$WAN_PROFILE/$mib" profile="$WAN_PROFILE" backend="$WAN_BACKEND" \
        rate_bps="$WAN_FWD_RATE_BPS" loss="$WAN_FWD_LOSS" rev_loss="$WAN_REV_LOSS" \
        jitter_us="$WAN_FWD_JITTER_US" reorder="$WAN_FWD_REORDER" mtu="$WAN_MTU" \
        rtt_us="$WAN_RTT_US" size_bytes=$((mib * 1048576)) goal_pct="${row#*:}" \
        files_in="$(dirname "$work") ($(stat -f -c %T "$work"))"
done

# GridFTP is two tools, 8 and 16 streams, each measured (and retried) alone.
IFS=, read -r -a tools <<<"${BENCH_TOOLS//gridftp/gridftp-p8,gridftp-p16}"
for ((run = 1; run <= BENCH_REPEAT; run++)); do
    for ((i = 0; i < ${#rows[@]}; i++)); do
        mib=${rows[$i]%%:*}
        src=$work/src-${mib}M.bin size=$((mib * 1048576))
        BENCH_SRC_SHA=$(cat "$src.sha256")
        BENCH_TAGS=(row="$WAN_PROFILE/$mib" run="$run")
        for tool in "${tools[@]}"; do
            case $tool in
            aftp|aftp-repeat|gridftp-p*) ;;
            # Memory to memory: once per link, with its first row.
            iperf3-*) [ "$i$run" = 01 ] || continue ;;
            # Far below aftp and capped by SSH's window: once per row.
            *) [ "$run" -eq 1 ] || continue ;;
            esac
            measure_tool "$tool"
            sync # the copy's writeback does not spill into the next run
        done
    done
done
exit 0
