#!/usr/bin/env bash
# shellcheck disable=SC2016,SC2034 # check() evaluates its condition text later
# netem/wan.sh leaves nothing behind: after a normal exit, a failing command
# and a SIGTERM, the namespace holders and the emulator are gone and the
# calling namespace has no 198.18/15 address. Also checks the backend choice:
# --backend netem fails clearly where the kernel lacks sch_netem.
# usage: netem_teardown.sh WAN_SH LINKEMU
set -uo pipefail
wan=$1 linkemu=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
failures=0

check() { # condition text, message
    if eval "$1"; then echo "PASS $2"; else echo "FAIL $2"; failures=$((failures + 1)); fi
}

probe=$("$wan" --linkemu "$linkemu" --probe)
rc=$?
if [ $rc -eq 77 ]; then
    echo "SKIP: network namespaces cannot be created here"
    exit 77
fi
echo "probe: $probe"
mode=${probe% *} backend=${probe#* }

# The detection must agree with an independent try of the netem qdisc.
if unshare -n sh -c 'ip link add name t0 type veth peer name t1 &&
                     tc qdisc add dev t0 root netem delay 1ms' 2>/dev/null; then
    check '[ "$backend" = netem ]' "auto picks netem where the kernel has it"
else
    check '[ "$backend" = tun ]' "auto picks tun where the kernel has no netem"
    "$wan" --linkemu "$linkemu" --backend netem -- true 2>"$tmp/err"
    rc=$?
    check '[ $rc -eq 2 ] && grep -q sch_netem "$tmp/err"' \
        "--backend netem refuses clearly without sch_netem (exit $rc)"
fi

# Writes the pids that hold the run's resources, then runs "$@".
record='echo "$WAN_SND_PID $WAN_RCV_PID $WAN_EMU_PID" >"$0"; exec "$@"'

all_gone() { # file with pids
    local pid
    for pid in $(cat "$1"); do
        if kill -0 "$pid" 2>/dev/null; then return 1; fi
    done
    return 0
}

host_addrs() { ip -4 -o addr show 2>/dev/null | grep -c ' 198\.1[89]\.' || true; }
before=$(host_addrs)

"$wan" --linkemu "$linkemu" -- bash -c "$record" "$tmp/ok" true
rc=$?
check '[ $rc -eq 0 ] && [ -s "$tmp/ok" ] && all_gone "$tmp/ok"' "normal exit: rc $rc, all gone"

"$wan" --linkemu "$linkemu" -- bash -c "$record" "$tmp/fail" sh -c 'exit 5'
rc=$?
check '[ $rc -eq 5 ] && all_gone "$tmp/fail"' "failing command: its status ($rc) kept, all gone"

"$wan" --linkemu "$linkemu" -- bash -c "$record" "$tmp/term" sleep 60 &
wan_pid=$!
for _ in $(seq 200); do [ -s "$tmp/term" ] && break; sleep 0.05; done
kill -TERM "$wan_pid"
start=$(date +%s)
wait "$wan_pid"
rc=$?
check '[ $rc -eq 143 ] && [ $(($(date +%s) - start)) -le 5 ] && all_gone "$tmp/term"' \
    "SIGTERM: exits promptly (rc $rc), all gone"

check '[ "$(host_addrs)" = "$before" ]' "no 198.18/15 address leaked into the calling namespace"
echo "mode: $mode"
[ $failures -eq 0 ]
