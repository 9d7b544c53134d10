#!/usr/bin/env bash
# One aftp transfer across the emulated WAN: `aftp recv --once` on the
# receiver host, `aftp send` on the sender host. Run it inside netem/wan.sh
# (it needs $WAN_SND_EXEC, $WAN_RCV_EXEC and $WAN_RCV_ADDR). Shared by
# bench/wan.sh and tests/wan/.
#
# usage: aftp_pair.sh AFTP FILE DIR RATE SECONDS PREFIX [SEND OPTION...]
#   FILE is sent to the receiver, which writes it into DIR; RATE is aftp's
#   --rate (the rate of policy fixed, the ceiling of the adaptive ones), or
#   "auto": with --policy fixed 95% of the link's rate in UDP payload bits,
#   with an adaptive policy no --rate at all (a ceiling below the link would
#   hide what the controller reaches); SEND OPTIONs go to `aftp send` (e.g.
#   --policy fixed); both sides are killed after SECONDS.
# Writes PREFIX.rate (the rate used), PREFIX.recv.{out,err,rc} and
# PREFIX.send.{out,err,rc}, PREFIX.send.start (when the sender was started,
# as $EPOCHREALTIME); with GNU time installed also
# PREFIX.{recv,send}.time ("elapsed user system", last line), and when AFTP
# has `aftp send --progress-log`, PREFIX.progress (a line per quarter second).
# When AFTP has `aftp keygen`, each pair gets fresh keys in PREFIX.keys/
# (receiver and sender identities, each trusting the other's public key).
# Environment: AFTP_PAIR_PORT, the receiver's UDP port (default 7400; pairs
# that run at once need different ones); AFTP_PAIR_STATE=DIR, keys and
# path memory kept in DIR.keys/ and DIR.cache/ for the pairs that name the
# same DIR (the first a first contact, the next ones repeat contacts).
# Exit status: 0 when both sides exited 0, 1 otherwise.
set -uo pipefail
[ $# -ge 6 ] || { echo "usage: $0 AFTP FILE DIR RATE SECONDS PREFIX [SEND OPTION...]" >&2; exit 2; }
aftp=$1 file=$2 dir=$3 rate=$4 limit=$5 out=$6
shift 6
# The receiver host is private to this run: a fixed port cannot collide.
port=${AFTP_PAIR_PORT:-7400}

# The link counts IP bytes; aftp's --rate counts UDP payload bytes, 1452 per
# 1480-byte IP packet.
rate_opt=()
if [ "$rate" = auto ] && [[ " $* " != *" --policy fixed "* ]]; then
    rate=none
elif [ "$rate" = auto ]; then
    rate=$(awk -v r="$WAN_FWD_RATE_BPS" 'BEGIN { printf "%dM", r * 0.95 * 1452 / 1480 / 1e6 }')
fi
[ "$rate" = none ] || rate_opt=(--rate "$rate")
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

# Each pair starts as a first contact: aftp send's path memory (its
# remembered start rates) and the keys are the pair's own, never the
# user's. With AFTP_PAIR_STATE=DIR, pairs that name the same DIR share
# their keys and path memory there: the first is a first contact, the
# next ones are repeat contacts with the same server, as an MFT product's
# are all day.
state=${AFTP_PAIR_STATE:-}
export XDG_CACHE_HOME=${state:-$out}.cache

# Keys for the two sides when this aftp protects its sessions, none otherwise:
# sets RECV_KEYS and SEND_KEYS (option words).
RECV_KEYS=() SEND_KEYS=()
if "$aftp" keygen --help >/dev/null 2>&1; then
    keys=${state:-$out}.keys
    [ -n "$state" ] && [ -f "$keys/send.pub" ] || {
        rm -rf "$keys" && mkdir -m 700 "$keys" &&
            "$aftp" keygen -f "$keys/recv" >/dev/null 2>&1 &&
            "$aftp" keygen -f "$keys/send" >/dev/null 2>&1
    } || { echo "aftp_pair: aftp keygen failed" >&2; exit 1; }
    RECV_KEYS=(--identity "$keys/recv" --authorized-keys "$keys/send.pub")
    SEND_KEYS=(--identity "$keys/send" --peer-key "$keys/recv.pub")
fi

# Every aftp invocation of the benchmarks and WAN tests: SIDE (recv|send),
# the host prefix, then aftp's arguments after the subcommand; keys added here.
aftp_side() {
    local side=$1 exec=$2
    shift 2
    local -a keys=("${RECV_KEYS[@]}")
    [ "$side" = send ] && keys=("${SEND_KEYS[@]}")
    # shellcheck disable=SC2086 # $exec is a command prefix, split on purpose
    timed "$side" timeout -k 5 "$limit" $exec "$aftp" "$side" "${keys[@]}" "$@"
}

aftp_side recv "$WAN_RCV_EXEC" --listen "$WAN_RCV_ADDR:$port" --dir "$dir" --once \
    >"$out.recv.out" 2>"$out.recv.err" &
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

progress_opt=()
# The whole help text first: grep -q would close the pipe early, and under
# pipefail aftp's SIGPIPE would fail the test now and then.
[[ $("$aftp" --help 2>&1) == *--progress-log* ]] && progress_opt=(--progress-log "$out.progress")
echo "$EPOCHREALTIME" >"$out.send.start" # the clock of bench/whole's link samples
aftp_side send "$WAN_SND_EXEC" "${rate_opt[@]}" "${progress_opt[@]}" "$@" "$file" "$WAN_RCV_ADDR:$port" \
    >"$out.send.out" 2>"$out.send.err"
send_rc=$?
wait "$recv_pid"
recv_rc=$?
echo "$send_rc" >"$out.send.rc"
echo "$recv_rc" >"$out.recv.rc"
[ "$send_rc" -eq 0 ] && [ "$recv_rc" -eq 0 ]
