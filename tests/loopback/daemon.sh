#!/usr/bin/env bash
# The server run as a daemon, through the real aftp binary over 127.0.0.1
# (ctest label "loopback"): `aftp serve`, its timestamped log, SIGHUP
# reloading the authorized keys. Usage: daemon.sh AFTP_BINARY CASE
# Every case runs in its own scratch directory with kernel-chosen ports.
# Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail

AFTP=$1
CASE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: python3 needed to read --json"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aftp-daemon-XXXXXX")
RECV_PID=
SLOW_PID=
cleanup() {
    [ -n "$SLOW_PID" ] && kill "$SLOW_PID" 2>/dev/null
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/dst"

# shellcheck source=tests/loopback/harness.sh
. "$HERE/harness.sh"
make_keys || fail "aftp keygen"
# A second client, "other", not authorized at first.
"$AFTP" keygen -f "$KEYS/other" -C other >/dev/null || fail "aftp keygen other"
AUTHORIZED=$KEYS/authorized_keys

# start_serve: aftp serve into dst with --json; sets RECV_PID, PORT.
start_serve() {
    : >"$WORK/recv.err" # before the start: await_port must not read the last receiver's port
    "$AFTP" serve --listen 127.0.0.1:0 --dir "$WORK/dst" "${RECV_KEYS[@]}" --json \
        >"$WORK/recv.out" 2>"$WORK/recv.err" &
    RECV_PID=$!
    await_port || fail "aftp serve did not start"
}

# stop_serve: SIGTERM; the server must exit 0.
stop_serve() {
    kill -TERM "$RECV_PID"
    wait "$RECV_PID"
    local rc=$?
    RECV_PID=
    [ "$rc" = 0 ] || fail "aftp serve exited $rc on SIGTERM"
}

# send_as KEY FILE [options...]: aftp send of FILE with client key KEY
# (send, other); sets SEND_RC; its output in send.out, send.err.
send_as() {
    local key=$1 file=$2
    shift 2
    "$AFTP" send --identity "$KEYS/$key" --peer-key "$KEYS/recv.pub" "$@" "$file" \
        "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
}

# reload N: SIGHUP, then waits (up to 10 s) for the server's N-th reload
# line, a "reloaded" notice or a warning that names the reload.
reload() {
    kill -HUP "$RECV_PID"
    for _ in $(seq 200); do
        [ "$(grep -c 'reloaded\|reload failed' "$WORK/recv.err")" -ge "$1" ] && return 0
        running "$RECV_PID" || fail "aftp serve exited on SIGHUP"
        sleep 0.05
    done
    fail "no reload line after SIGHUP"
}

running() { # pid: a child that has not exited (a zombie has)
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${state#Z}" = "$state" ]
}

make_file() { # name, size in bytes
    head -c "$2" /dev/urandom >"$WORK/$1"
}

# The value of FIELD in the --json object of TYPE whose name is NAME.
json_of() { # file, type, name, field
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == sys.argv[2] and o.get("name") == sys.argv[3]:
        print(o[sys.argv[4]]); break' "$@"
}

# The types of the --json objects in order, one a line ("notice:KIND").
json_types() {
    python3 -c 'import json, sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    print(o["type"] + (":" + o["kind"] if o["type"] == "notice" else "")
          + (":" + o["name"] if o["type"] == "done" else ""))' "$1"
}

case "$CASE" in
serve_alias)
    # aftp serve is aftp recv without --once: it serves one client after
    # another until SIGTERM, then exits 0; --once is refused.
    make_file a.bin 3000
    make_file b.bin 70000
    start_serve
    send_as send "$WORK/a.bin"
    [ "$SEND_RC" = 0 ] || fail "first send exited $SEND_RC"
    send_as send "$WORK/b.bin"
    [ "$SEND_RC" = 0 ] || fail "second send exited $SEND_RC"
    stop_serve
    cmp -s "$WORK/a.bin" "$WORK/dst/a.bin" || fail "a.bin differs"
    cmp -s "$WORK/b.bin" "$WORK/dst/b.bin" || fail "b.bin differs"
    python3 "$HERE/json_check.py" --recv "$WORK/recv.out" 0 >"$WORK/json.out" ||
        fail "--json: $(cat "$WORK/json.out")"
    [ "$(grep -c '"type":"done"' "$WORK/recv.out")" = 2 ] || fail "two done objects expected"
    "$AFTP" serve --listen 127.0.0.1:0 --dir "$WORK/dst" --once 2>"$WORK/once.err"
    rc=$?
    [ "$rc" = 2 ] || fail "aftp serve --once exited $rc, not 2"
    grep -q "aftp recv --once" "$WORK/once.err" || fail "serve --once: $(cat "$WORK/once.err")"
    "$AFTP" --help >"$WORK/help.out"
    grep -q "aftp serve --listen" "$WORK/help.out" || fail "the usage does not name aftp serve" ;;
log_stamps)
    # Every line of a server's log begins with the UTC time to the ms; a
    # --once receiver's lines (a command's, read as they come) do not.
    make_file a.bin 3000
    start_serve
    send_as other "$WORK/a.bin" # refused: an error line in the log
    [ "$SEND_RC" = 8 ] || fail "the unauthorized send exited $SEND_RC, not 8"
    send_as send "$WORK/a.bin"
    [ "$SEND_RC" = 0 ] || fail "send exited $SEND_RC"
    stop_serve
    grep -q "refused client" "$WORK/recv.err" || fail "no refusal in the log"
    bad=$(grep -Ev "^${STAMP}aftp: " "$WORK/recv.err")
    [ -z "$bad" ] || fail "log lines without the time: $bad"
    # the time is UTC: the date of a line is today's or yesterday's in UTC
    day=$(sed -En "s/^([0-9-]{10})T.*/\1/p" "$WORK/recv.err" | head -n 1)
    [ "$day" = "$(date -u +%F)" ] || [ "$day" = "$(date -u -d yesterday +%F)" ] ||
        fail "log date $day is not today's in UTC ($(date -u +%F))"
    : >"$WORK/recv.err"
    "$AFTP" recv --once --listen 127.0.0.1:0 --dir "$WORK/dst" "${RECV_KEYS[@]}" \
        >/dev/null 2>"$WORK/recv.err" &
    RECV_PID=$!
    await_port || fail "aftp recv --once did not start"
    grep -q "^aftp: listening on" "$WORK/recv.err" || fail "a --once receiver's line has the time"
    kill -TERM "$RECV_PID"
    wait "$RECV_PID"
    RECV_PID= ;;
reload_keys)
    # SIGHUP reads the authorized keys again: a key added is admitted and
    # a key removed refused, from the next session on; the session under
    # way when the keys change (a slow transfer by the removed key) goes
    # on and is delivered, its receipt naming its client as it was.
    make_file slow.bin $((16 << 20))
    make_file a.bin 3000
    start_serve
    send_as other "$WORK/a.bin"
    [ "$SEND_RC" = 8 ] || fail "other, not yet authorized, exited $SEND_RC, not 8"
    "$AFTP" send --identity "$KEYS/send" --peer-key "$KEYS/recv.pub" --policy fixed \
        --rate 40M "$WORK/slow.bin" "127.0.0.1:$PORT" >"$WORK/slow.out" 2>"$WORK/slow.err" &
    SLOW_PID=$!
    for _ in $(seq 200); do
        grep -q '"type":"progress"' "$WORK/recv.out" && break
        sleep 0.05
    done
    grep -q '"type":"progress"' "$WORK/recv.out" || fail "the slow transfer did not start"
    cp "$KEYS/other.pub" "$AUTHORIZED" # sender out, other in
    reload 1
    wait "$SLOW_PID"
    SLOW_RC=$?
    SLOW_PID=
    [ "$SLOW_RC" = 0 ] || fail "the transfer under way exited $SLOW_RC: $(cat "$WORK/slow.err")"
    cmp -s "$WORK/slow.bin" "$WORK/dst/slow.bin" || fail "slow.bin differs"
    grep -Eq "^${STAMP}aftp: reloaded 1 key from $AUTHORIZED$" "$WORK/recv.err" ||
        fail "no 'reloaded 1 key from $AUTHORIZED' line"
    # the reload came while slow.bin was under way, not after it
    order=$(json_types "$WORK/recv.out" | grep -E '^notice:reloaded$|^done:slow.bin$' | tr '\n' ' ')
    [ "$order" = "notice:reloaded done:slow.bin " ] || fail "reload and slow.bin in the order: $order"
    [ "$(json_of "$WORK/recv.out" "done" slow.bin client_comment)" = sender ] ||
        fail "slow.bin's receipt does not name its client 'sender'"
    send_as other "$WORK/a.bin"
    [ "$SEND_RC" = 0 ] || fail "other, added, exited $SEND_RC: $(cat "$WORK/send.err")"
    cmp -s "$WORK/a.bin" "$WORK/dst/a.bin" || fail "a.bin differs"
    [ "$(json_of "$WORK/recv.out" "done" a.bin client_comment)" = other ] ||
        fail "a.bin's receipt does not name its client 'other'"
    rm "$WORK/dst/a.bin"
    send_as send "$WORK/a.bin"
    [ "$SEND_RC" = 8 ] || fail "sender, removed, exited $SEND_RC, not 8"
    [ -e "$WORK/dst/a.bin" ] && fail "the removed key delivered a.bin"
    refusal="its key is not authorized (add the line '$(cut -d' ' -f1,2 "$KEYS/send.pub")' to $AUTHORIZED"
    for _ in $(seq 200); do # the server logs it as the session ends
        grep -qF "$refusal" "$WORK/recv.err" && break
        sleep 0.05
    done
    grep -qF "$refusal" "$WORK/recv.err" || fail "the refusal of the removed key is not logged"
    stop_serve ;;
reload_broken)
    # A file that fails to load on SIGHUP (a malformed line, no key at
    # all, no file) keeps the keys in force, and the log says why.
    make_file a.bin 3000
    start_serve
    printf 'aftp-x25519 not-base64 typo\n' >"$AUTHORIZED"
    reload 1
    grep -Eq "^${STAMP}aftp: warning: reload failed, keeping the 1 key loaded before: authorized keys: $AUTHORIZED:1: .*\(fix the file and reload again\)$" \
        "$WORK/recv.err" || fail "no warning for a malformed file"
    printf '# nobody\n' >"$AUTHORIZED"
    reload 2
    grep -q "reload failed, keeping the 1 key loaded before: authorized keys: no key in the file: it admits nobody" \
        "$WORK/recv.err" || fail "no warning for a file without keys"
    rm "$AUTHORIZED"
    reload 3
    [ "$(grep -c "reload failed, keeping the 1 key loaded before: authorized keys: .*$AUTHORIZED" \
        "$WORK/recv.err")" -ge 2 ] || fail "no warning naming the missing file"
    grep -q '"type":"notice","time":"[^"]*","kind":"warning","message":"reload failed' \
        "$WORK/recv.out" || fail "no --json warning notice for the failed reload"
    send_as send "$WORK/a.bin"
    [ "$SEND_RC" = 0 ] || fail "the key kept exited $SEND_RC: $(cat "$WORK/send.err")"
    cmp -s "$WORK/a.bin" "$WORK/dst/a.bin" || fail "a.bin differs"
    grep -q "reloaded" "$WORK/recv.err" && fail "a failed reload said reloaded"
    stop_serve ;;
*)
    echo "unknown case $CASE" >&2
    exit 2 ;;
esac
echo "PASS [$CASE]"
