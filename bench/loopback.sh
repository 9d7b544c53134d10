#!/usr/bin/env bash
# Loopback benchmark: aftp next to iperf3 (UDP and TCP) on this machine, in
# the same run. Prints a Markdown table: goodput, CPU seconds and peak RSS
# of each side.
#
# Usage: bench/loopback.sh [AFTP_BINARY]
#   SIZE=2G        file size (head -c syntax: 2G, 512M...)
#   RATES="3G 5G"  aftp --rate values, one aftp run each (a fixed rate above
#                  what the receiver absorbs turns into loss and repairs)
#   AFTP_SEND_OPTS="--policy fixed"  extra aftp send options for every run
#   SECONDS_IPERF=10  duration of each iperf3 run
#   BENCH_DIR=/dev/shm  where the source and received files go (2 x SIZE):
#                       tmpfs compares with iperf3's memory to memory; a disk
#                       directory adds the disk (the receiver fsyncs)
# Needs: iperf3, /usr/bin/time (GNU time), python3 (JSON of iperf3).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
AFTP=${1:-$here/../build/cli/aftp}
SIZE=${SIZE:-2G}
RATES=${RATES:-3G 5G}
SECONDS_IPERF=${SECONDS_IPERF:-10}
for tool in iperf3 /usr/bin/time python3; do
    command -v "$tool" >/dev/null || { echo "missing: $tool (scripts/deps.sh installs it)" >&2; exit 1; }
done
[ -x "$AFTP" ] || { echo "no aftp binary at $AFTP" >&2; exit 1; }

work=$(mktemp -d "${BENCH_DIR:-/dev/shm}/aftp-bench-XXXXXX")
fstype=$(stat -f -c %T "$work")
trap 'rm -rf "$work"' EXIT
mkdir -p "$work/dst"

# field FILE NAME: a number from GNU time -v output
field() { sed -n "s/^[[:space:]]*$2: //p" "$1"; }
cpu_s() { awk -v u="$(field "$1" 'User time (seconds)')" -v s="$(field "$1" 'System time (seconds)')" 'BEGIN{printf "%.2f", u+s}'; }
rss_mib() { awk -v k="$(field "$1" 'Maximum resident set size (kbytes)')" 'BEGIN{printf "%.1f", k/1024}'; }
rows=()

echo "# source: $SIZE of random bytes in $work" >&2
head -c "$SIZE" /dev/urandom >"$work/src.bin"
bytes=$(stat -c %s "$work/src.bin")

# ---- aftp ----
aftp_run() { # rate
    local rate=$1
    /usr/bin/time -v -o "$work/recv.time" "$AFTP" recv --listen 127.0.0.1:0 --dir "$work/dst" \
        --once >"$work/recv.out" 2>"$work/recv.err" &
    local rpid=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/recv.err" && break; sleep 0.05; done
    local port
    port=$(sed -n 's/^aftp: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/recv.err")
    /usr/bin/time -v -o "$work/send.time" "$AFTP" send --rate "$rate" ${AFTP_SEND_OPTS-} "$work/src.bin" \
        "127.0.0.1:$port" >"$work/send.out" 2>"$work/send.err" || { cat "$work/send.err" >&2; exit 1; }
    wait "$rpid"
    cmp "$work/src.bin" "$work/dst/src.bin" >&2
    local goodput retx secs
    goodput=$(sed -n 's/.* \([0-9.]*\) Mbit\/s goodput.*/\1/p' "$work/send.out")
    retx=$(sed -n 's/.* \([0-9.]*\)% retransmitted.*/\1/p' "$work/send.out")
    secs=$(sed -n 's/.* bytes in \([0-9.]*\) s,.*/\1/p' "$work/send.out")
    rows+=("| aftp --rate $rate ${AFTP_SEND_OPTS-}($fstype to $fstype) | $goodput | $(cpu_s "$work/send.time") | $(cpu_s "$work/recv.time") | $(rss_mib "$work/send.time") | $(rss_mib "$work/recv.time") | $bytes bytes in $secs s, $retx% retransmitted |")
    rm -f "$work/dst/src.bin"
}
for rate in $RATES; do aftp_run "$rate"; done

# ---- iperf3 (memory to memory) ----
iperf_run() { # label, client options...
    local label=$1
    shift
    local iport=$((20000 + RANDOM % 20000))
    /usr/bin/time -v -o "$work/is.time" iperf3 -s -1 -B 127.0.0.1 -p "$iport" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    /usr/bin/time -v -o "$work/ic.time" iperf3 -c 127.0.0.1 -p "$iport" -t "$SECONDS_IPERF" -J "$@" \
        >"$work/iperf.json"
    wait "$spid" || true
    local summary
    summary=$(python3 - "$work/iperf.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
end = j["end"]
bps = end["sum_received"]["bits_per_second"]  # what arrived
if j["start"]["test_start"]["protocol"] == "UDP":
    note = "sent %.1f Mbit/s, %.2f%% lost" % (end["sum"]["bits_per_second"] / 1e6,
                                             end["sum"]["lost_percent"])
else:
    note = "%d retransmits" % end["sum_sent"].get("retransmits", 0)
print("%.1f|%s" % (bps / 1e6, note))
PY
)
    rows+=("| $label | ${summary%%|*} | $(cpu_s "$work/ic.time") | $(cpu_s "$work/is.time") | $(rss_mib "$work/ic.time") | $(rss_mib "$work/is.time") | ${summary#*|} |")
}
iperf_run "iperf3 UDP -b 0 -l 1452 (memory)" -u -b 0 -l 1452
iperf_run "iperf3 TCP (memory)"

echo
echo "Loopback, $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%d)"
echo
echo "| run | goodput Mbit/s | sender CPU s | receiver CPU s | sender peak RSS MiB | receiver peak RSS MiB | notes |"
echo "|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
