#!/usr/bin/env bash
# One aftp transfer across the emulated WAN: `aftp recv --once` on the
# receiver host, `aftp send` on the sender host. Run it inside netem/wan.sh
# (it needs $WAN_SND_EXEC, $WAN_RCV_EXEC and $WAN_RCV_ADDR). Shared by
# bench/wan.sh and tests/wan/.
#
# usage: aftp_pair.sh AFTP FILE DIR RATE SECONDS PREFIX [SEND OPTION...]
#   FILE is sent to the receiver, which writes it into DIR; RATE is aftp's
#   --rate (the rate of policy fixed, the ceiling of the adaptive ones), or
#   "auto": 95% of the link's rate in UDP payload bits; SEND OPTIONs go to
#   `aftp send` (e.g. --policy fixed); both sides are killed after SECONDS.
# Writes PREFIX.rate (the rate used), PREFIX.recv.{out,err,rc} and
# PREFIX.send.{out,err,rc}; with GNU time installed also
# PREFIX.{recv,send}.time ("elapsed user system", last line).
# Exit status: 0 when both sides exited 0, 1 otherwise.
set -uo pipefail
[ $# -ge 6 ] || { echo "usage: $0 AFTP FILE DIR RATE SECONDS PREFIX [SEND OPTION...]" >&2; exit 2; }
aftp=$1 file=$2 dir=$3 rate=$4 limit=$5 out=$6
shift 6
port=7400 # the receiver host is private to this run: a fixed port cannot collide

# The link counts IP bytes; aftp's --rate counts UDP payload bytes, 1452 per
# 1480-byte IP packet.
if [ "$rate" = auto ]; then
    rate=$(awk -v r="$WAN_FWD_RATE_BPS" 'BEGIN { printf "%dM", r * 0.95 * 1452 / 1480 / 1e6 }')
fi
echo "$rate" >"$out.rate"

# side, command...: runs the command under GNU time when it is installed
# (the tests must not depend on it; the benchmark wants CPU seconds).
timed() {
    local side=$1
    shift
    if [ -x /usr/bin/time ]; then
        /usr/bin/time -f '%e %U %S' -o "$out.$side.time" "$@"
    else
        "$@"
    fi
}

# shellcheck disable=SC2086 # $WAN_*_EXEC are command prefixes, split on purpose
timed recv timeout -k 5 "$limit" $WAN_RCV_EXEC "$aftp" recv --listen "$WAN_RCV_ADDR:$port" \
    --dir "$dir" --once >"$out.recv.out" 2>"$out.recv.err" &
recv_pid=$!
listening=0
for _ in $(seq 200); do
    grep -q "listening on" "$out.recv.err" 2>/dev/null && { listening=1; break; }
    kill -0 "$recv_pid" 2>/dev/null || break
    sleep 0.05
done
if [ "$listening" = 0 ]; then
    echo "aftp_pair: the receiver did not start listening" >&2
    kill "$recv_pid" 2>/dev/null
    wait "$recv_pid"
    echo $? >"$out.recv.rc"
    echo 125 >"$out.send.rc"
    exit 1
fi

# shellcheck disable=SC2086
timed send timeout -k 5 "$limit" $WAN_SND_EXEC "$aftp" send --rate "$rate" "$@" "$file" \
    "$WAN_RCV_ADDR:$port" >"$out.send.out" 2>"$out.send.err"
send_rc=$?
wait "$recv_pid"
recv_rc=$?
echo "$send_rc" >"$out.send.rc"
echo "$recv_rc" >"$out.recv.rc"
[ "$send_rc" -eq 0 ] && [ "$recv_rc" -eq 0 ]
