#!/bin/bash
# aftp recv's tree options through the real binary over 127.0.0.1:
# --mode-mask and --partial-max-age refuse bad values (exit 2, the value
# named); a receiver run with --no-links --mode-mask 750
# --partial-max-age 1d removes at start the resume state 3 days old,
# keeps the state 2 hours old, says so on stderr and as a --json notice
# "partial_swept", and masks a received file's mode 0777 to 0750.
# Usage: recv_tree_options.sh AFTP
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

# Bad values: usage errors that name the value.
# (a receiver that took the value would listen: timeout ends it, exit 124)
timeout 10 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK" --cipher none --mode-mask 8 \
    2>"$WORK/m.err"
[ $? = 2 ] || fail "--mode-mask 8 did not exit 2"
grep -q "mode-mask '8'" "$WORK/m.err" || fail "--mode-mask 8: $(cat "$WORK/m.err")"
timeout 10 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK" --cipher none --partial-max-age 3w \
    2>"$WORK/a.err"
[ $? = 2 ] || fail "--partial-max-age 3w did not exit 2"
grep -q "partial-max-age '3w'" "$WORK/a.err" || fail "--partial-max-age 3w: $(cat "$WORK/a.err")"

# Resume state: one 3 days old, one 2 hours old.
mkdir -p "$WORK/dst/.aftp-partial" && chmod 700 "$WORK/dst/.aftp-partial"
old=$(printf 'a%.0s' $(seq 32))
young=$(printf 'b%.0s' $(seq 32))
for f in part jrnl; do
    echo state >"$WORK/dst/.aftp-partial/$old.$f"
    touch -d '3 days ago' "$WORK/dst/.aftp-partial/$old.$f"
    echo state >"$WORK/dst/.aftp-partial/$young.$f"
    touch -d '2 hours ago' "$WORK/dst/.aftp-partial/$young.$f"
done
head -c 5000 /dev/urandom >"$WORK/src.bin"
chmod 0777 "$WORK/src.bin"

timeout 60 "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --cipher none --once --json --no-links \
    --mode-mask 750 --partial-max-age 1d >"$WORK/recv.out" 2>"$WORK/recv.err" &
RECV_PID=$!
await_port || fail "receiver did not start: $(cat "$WORK/recv.err")"
"$AFTP" send --cipher none -q "$WORK/src.bin" "127.0.0.1:$PORT" >/dev/null 2>"$WORK/send.err" ||
    fail "send: $(cat "$WORK/send.err")"
wait "$RECV_PID"
rc=$?
RECV_PID=
[ "$rc" = 0 ] || fail "recv exited $rc: $(cat "$WORK/recv.err")"

[ -e "$WORK/dst/.aftp-partial/$old.part" ] && fail "the 3-day-old state is still there"
[ -e "$WORK/dst/.aftp-partial/$young.part" ] || fail "the 2-hour-old state was removed"
grep -q "removed 1 unfinished file .*$WORK/dst/.aftp-partial" "$WORK/recv.err" ||
    fail "no sweep line: $(cat "$WORK/recv.err")"
grep -q '"type":"notice","time":"[^"]*","kind":"partial_swept"' "$WORK/recv.out" ||
    fail "no partial_swept notice: $(cat "$WORK/recv.out")"
grep -q '"outcome":"sent"' "$WORK/recv.out" || fail "no sent outcome: $(cat "$WORK/recv.out")"
mode=$(stat -c %a "$WORK/dst/src.bin")
[ "$mode" = 750 ] || fail "received mode $mode, not 750"
cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
echo "ok recv_tree_options"
