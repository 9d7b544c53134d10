#!/bin/bash
# aftp recv --rate (the server's total rate cap) through the real binary
# over 127.0.0.1: a bad value is a usage error that names it (exit 2); a
# receiver run with --rate 20M says its cap on stderr, and a sender whose
# own rate is 1 Gbit/s is served under it: its --json summary carries the
# cap, 20000000 bit/s, and the file arrives whole.
# Usage: recv_rate.sh AFTP
set -u
AFTP=$1
WORK=$(mktemp -d)
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
. "$(dirname "$0")/harness.sh" # fail, await_port

# (a receiver that took the value would listen: timeout ends it, exit 124)
timeout 10 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK" --cipher none --rate fast \
    2>"$WORK/r.err"
[ $? = 2 ] || fail "--rate fast did not exit 2"
grep -q "rate 'fast'" "$WORK/r.err" || fail "--rate fast: $(cat "$WORK/r.err")"

mkdir "$WORK/dst"
head -c 3000000 /dev/urandom >"$WORK/src.bin"
timeout 60 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --cipher none --once --rate 20M \
    >/dev/null 2>"$WORK/recv.err" &
RECV_PID=$!
await_port || fail "receiver did not start: $(cat "$WORK/recv.err")"
"$AFTP" send --cipher none --json --rate 1G "$WORK/src.bin" "127.0.0.1:$PORT" \
    >"$WORK/send.out" 2>"$WORK/send.err" || fail "send: $(cat "$WORK/send.err")"
wait "$RECV_PID"
rc=$?
RECV_PID=
[ "$rc" = 0 ] || fail "recv exited $rc: $(cat "$WORK/recv.err")"
cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "the copy differs"
grep -q "total rate cap 20000000 bit/s" "$WORK/recv.err" ||
    fail "no total cap line: $(cat "$WORK/recv.err")"
grep -q '"rate_cap_bps":20000000' "$WORK/send.out" ||
    fail "the send was not capped at 20000000 bit/s: $(cat "$WORK/send.out")"
exit 0
