#!/usr/bin/env bash
# The inside of `bench/wan.sh --compete MODE`: flows that share the emulated
# bottleneck at the same time, between the same two hosts on different
# ports, with each flow's IP bytes counted per second as they reach the
# receiver host (nftables counters on its input hook, one per port).
#   solo  one aftp flow per policy: its ramp-up and busiest seconds
#   tcp   per policy, one aftp flow and one iperf3 TCP flow started together
#   aftp  two aftp flows of the first policy, the second joining later
# Per run, the samples go to $BENCH_WORK/NAME.samples and compete.py prints
# the per-second rates and the summary.
#
# Environment (set by bench/wan.sh): BENCH_WORK, BENCH_AFTP, BENCH_RATE,
# BENCH_COMPETE, BENCH_POLICIES (comma list), BENCH_SECONDS (length of a
# run), BENCH_JOIN (seconds before the second aftp flow starts), BENCH_TCP_CC
# (iperf3 -C), BENCH_RETRIES; and netem/wan.sh's WAN_* variables.
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
work=$BENCH_WORK seconds=$BENCH_SECONDS join=$BENCH_JOIN
read -r -a rcv <<<"$WAN_RCV_EXEC"
read -r -a snd <<<"$WAN_SND_EXEC"
# shellcheck source=bench/wan/lib.sh
. "$here/lib.sh"

log() { echo "bench: $*" >&2; }
AFTP_PORTS=(7400 7401) TCP_PORT=5201

# --- per-flow counters on the receiver host -----------------------------------
counters_setup() {
    "${rcv[@]}" nft delete table ip aftpbench 2>/dev/null
    "${rcv[@]}" nft add table ip aftpbench &&
        "${rcv[@]}" nft "add chain ip aftpbench in { type filter hook input priority 0; policy accept; }" ||
        return 1
    local name port
    for name in a0 a1 t0; do "${rcv[@]}" nft add counter ip aftpbench "$name" || return 1; done
    for i in 0 1; do
        port=${AFTP_PORTS[$i]}
        "${rcv[@]}" nft add rule ip aftpbench in udp dport "$port" counter name "a$i" || return 1
    done
    "${rcv[@]}" nft add rule ip aftpbench in tcp dport "$TCP_PORT" counter name t0
}

# Samples the counters every second for SECONDS (+1 s to close the last
# second) into FILE: "EPOCH_SECONDS JSON" lines.
sample() { # FILE
    local start=$EPOCHREALTIME i at
    for ((i = 0; i <= seconds + 1; i++)); do
        at=$(awk -v s="$start" -v i="$i" -v n="$EPOCHREALTIME" 'BEGIN { d = s + i - n; print (d > 0 ? d : 0) }')
        sleep "$at"
        echo "$EPOCHREALTIME $("${rcv[@]}" nft -j list counters table ip aftpbench)"
    done >"$1"
}

# --- the flows ------------------------------------------------------------------
# Each aftp flow sends a faux:// source (zeros, no file) to a faux://
# destination (keeps nothing): a run of any length needs no space, and
# neither side spends CPU on fresh file pages, which on two cores the link
# emulator needs. An aftp without faux:// (an older binary measured for
# comparison) gets a real source long enough for the whole run, allocated up
# front (a sparse file's holes would be allocated page by page as the sender
# reads them, on tmpfs); then runs are as long as the scratch space allows.
# (%.0f: mawk's %d stops at 2^31 - 1, which ended a 1 Gbit/s flow after about 20 s.)
source_bytes() { # SECONDS
    awk -v r="$WAN_FWD_RATE_BPS" -v s="$1" 'BEGIN { printf "%.0f", r * (s + 5) / 8 }'
}
FAUX=0
[[ $("$BENCH_AFTP" --help 2>&1) == *faux://* ]] && FAUX=1 # not | grep -q: see aftp_pair.sh

start_aftp() { # INDEX POLICY DELAY: runs in the background
    local i=$1 policy=$2 delay=$3 src dst
    local bytes
    bytes=$(source_bytes $((seconds - delay)))
    if [ "$FAUX" = 1 ]; then
        src="faux:///flow$i?$bytes" dst=faux://
    else
        src=$work/flow$i.bin dst=$work/dst.$i
        rm -rf "$dst" && mkdir -p "$dst"
        fallocate -l "$bytes" "$src"
    fi
    (
        sleep "$delay"
        AFTP_PAIR_PORT=${AFTP_PORTS[$i]} "$here/aftp_pair.sh" "$BENCH_AFTP" "$src" \
            "$dst" "$BENCH_RATE" $((seconds - delay + 2)) "$work/aftp$i" --policy "$policy"
    ) &
}

start_tcp() { # runs iperf3 server and client in the background
    "${rcv[@]}" iperf3 -s -1 -B "$WAN_RCV_ADDR" -p "$TCP_PORT" >"$work/iperf3.srv.out" 2>&1 &
    wait_listening t "$TCP_PORT" "${rcv[@]}" || log "iperf3 server did not start"
    "${snd[@]}" iperf3 -c "$WAN_RCV_ADDR" -p "$TCP_PORT" -t "$seconds" -C "$BENCH_TCP_CC" -J \
        >"$work/iperf3.out" 2>&1 &
}

# One run: counters reset, flows started, sampled, stopped; the report.
run_once() { # NAME FLOWS... (aftp:POLICY:DELAY or tcp)
    local name=$1 flow
    shift
    counters_setup || { log "nftables counters could not be set up"; return 1; }
    emu_snapshot "$work/emu.before"
    for flow in "$@"; do
        case $flow in
        tcp) start_tcp ;;
        aftp:*) IFS=: read -r _ policy delay idx <<<"$flow"; start_aftp "$idx" "$policy" "$delay" ;;
        esac
    done
    sample "$work/$name.samples"
    wait
    emu_snapshot "$work/emu.after"
    python3 "$here/report.py" emu-delta "$work/emu.before" "$work/emu.after" >"$work/$name.emu"
    rm -rf "$work"/dst.* "$work"/flow*.bin
    python3 "$here/compete.py" --name "$name" --samples "$work/$name.samples" \
        --emu "$work/$name.emu" --link-bps "$WAN_FWD_RATE_BPS" --iperf "$work/iperf3.out" \
        -- "$@" >"$work/$name.md"
}

# Runs NAME again (up to BENCH_RETRIES times) while the emulator says it was
# overloaded (the figures of an overloaded link mean nothing); prints the
# report of the last attempt (marked INVALID when it was hit too).
run_valid() { # NAME FLOWS...
    local attempt rc
    for ((attempt = 1; ; attempt++)); do
        log "$1 (attempt $attempt) over $WAN_PROFILE ..."
        run_once "$@"
        rc=$?
        if ! grep -q '^emu_valid=false' "$work/$1.emu"; then
            cat "$work/$1.md"
            return "$rc"
        fi
        if [ "$attempt" -gt "$BENCH_RETRIES" ]; then
            cat "$work/$1.md"
            return 3
        fi
        log "$1: the emulator was overloaded meanwhile: measuring again"
    done
}

IFS=, read -r -a policies <<<"$BENCH_POLICIES"
status=0
case $BENCH_COMPETE in
solo)
    for p in "${policies[@]}"; do run_valid "solo-$p" "aftp:$p:0:0" || status=$?; done ;;
tcp)
    tcp_buffers # one TCP flow window-limited would say nothing about sharing
    for p in "${policies[@]}"; do
        run_valid "$p-vs-tcp" "aftp:$p:0:0" tcp || status=$?
    done ;;
aftp)
    run_valid "${policies[0]}-x2" "aftp:${policies[0]}:0:0" "aftp:${policies[0]}:$join:1" ||
        status=$? ;;
esac
exit "$status"
