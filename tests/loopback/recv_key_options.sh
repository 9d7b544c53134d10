#!/bin/bash
# aftp recv --authorized-keys with per-key options (spec Appendix B.4),
# the real binary over 127.0.0.1:
# - a file with an unknown option is refused at start, FILE:LINE named;
# - key "part" (root="part",rate=20M) lands beneath DIR/part only, under
#   the cap (the sender's --json says rate_cap_bps);
# - key "reader" (read-only) is refused a push (exit 5, refused), and its
#   sender says this key may only pull;
# - key "far" (from="198.18.0.0/15") is refused from 127.0.0.1 as not
#   authorized, and the server's stderr says which from= and where the
#   client came from.
# Usage: recv_key_options.sh AFTP
set -u
AFTP=$1
WORK=$(mktemp -d)
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
fail() {
    echo "FAIL [recv_key_options]: $*" >&2
    exit 1
}
. "$(dirname "$0")/harness.sh"

make_keys || fail "keygen failed"
for k in part reader far; do
    "$AFTP" keygen -f "$KEYS/$k" -C "$k" >/dev/null || fail "keygen $k"
done
mkdir -p "$WORK/dst/part"
head -c 300000 /dev/urandom >"$WORK/src.bin"

# A typo refuses the whole file, naming its line.
{
    cat "$KEYS/send.pub"
    printf 'rot="/srv" %s\n' "$(cat "$KEYS/part.pub")"
} >"$KEYS/typo_keys"
timeout 10 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --identity "$KEYS/recv" \
    --authorized-keys "$KEYS/typo_keys" 2>"$WORK/typo.err"
rc=$?
[ "$rc" != 0 ] && [ "$rc" != 124 ] || fail "a file with a typo was accepted (exit $rc)"
grep -q "typo_keys:2: unknown option 'rot'" "$WORK/typo.err" ||
    fail "typo: $(cat "$WORK/typo.err")"

{
    printf 'root="part",rate=20M %s\n' "$(cat "$KEYS/part.pub")"
    printf 'read-only %s\n' "$(cat "$KEYS/reader.pub")"
    printf 'from="198.18.0.0/15" %s\n' "$(cat "$KEYS/far.pub")"
} >"$KEYS/authorized_keys"
"$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --identity "$KEYS/recv" \
    --authorized-keys "$KEYS/authorized_keys" >"$WORK/recv.out" 2>"$WORK/recv.err" &
RECV_PID=$!
await_port || fail "receiver did not start: $(cat "$WORK/recv.err")"
to="127.0.0.1:$PORT"
send_as() { # KEY OUT ERR: pushes src.bin as KEY
    "$AFTP" send --json --identity "$KEYS/$1" --peer-key "$KEYS/recv.pub" -t 5 \
        "$WORK/src.bin" "$to" >"$2" 2>"$3"
}

send_as part "$WORK/part.out" "$WORK/part.err" || fail "part: $(cat "$WORK/part.err")"
cmp -s "$WORK/src.bin" "$WORK/dst/part/src.bin" || fail "part's file is not beneath DIR/part"
[ -e "$WORK/dst/src.bin" ] && fail "part's file landed in DIR"
grep -q '"rate_cap_bps":20000000' "$WORK/part.out" ||
    fail "part: no rate cap in $(cat "$WORK/part.out")"

send_as reader "$WORK/reader.out" "$WORK/reader.err"
rc=$?
[ "$rc" = 5 ] || fail "reader: exit $rc, not 5 (refused): $(cat "$WORK/reader.err")"
grep -q "this client key may only pull from this server" "$WORK/reader.err" ||
    fail "reader: $(cat "$WORK/reader.err")"
[ -e "$WORK/dst/src.bin" ] && fail "reader's file landed"

send_as far "$WORK/far.out" "$WORK/far.err"
rc=$?
[ "$rc" = 8 ] || fail "far: exit $rc, not 8: $(cat "$WORK/far.err")"
grep -q "not authorized" "$WORK/far.err" || fail "far: $(cat "$WORK/far.err")"

kill -INT "$RECV_PID"
wait "$RECV_PID"
RECV_PID=
grep -q "its key may only pull (read-only in $KEYS/authorized_keys:2)" "$WORK/recv.err" ||
    fail "no read-only refusal in the server's log: $(cat "$WORK/recv.err")"
grep -q "is limited to from=\"198.18.0.0/15\" ($KEYS/authorized_keys:3); client came from 127.0.0.1:" \
    "$WORK/recv.err" || fail "no from= refusal in the server's log: $(cat "$WORK/recv.err")"
echo "ok recv_key_options"
