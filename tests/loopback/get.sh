#!/usr/bin/env bash
# Loopback tests of `aftp get HOST:PORT:PATH... DEST` (a pull, spec 9.15):
# the real aftp binary over 127.0.0.1 (ctest label "loopback") against
# `aftp recv`, whose directory is what its clients may pull.
# Usage: get.sh AFTP_BINARY CASE. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail

AFTP=$1
CASE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: python3 needed to compare trees"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aftp-get-XXXXXX")
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/srv" "$WORK/dst"

. "$HERE/harness.sh"
make_keys || fail "aftp keygen"

start_recv() {
    : >"$WORK/recv.err" # before the start: await_port must not read the last receiver's port
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/srv" "${RECV_KEYS[@]}" \
        >"$WORK/recv.out" 2>"$WORK/recv.err" &
    RECV_PID=$!
    await_port || fail "server did not start"
}

stop_recv() {
    kill -TERM "$RECV_PID" 2>/dev/null
    wait "$RECV_PID"
    RECV_PID=
}

# get DEST REMOTE_PATH...: aftp get from the server; sets GET_RC.
get() {
    local dest=$1 remotes=()
    shift
    for p in "$@"; do remotes+=("127.0.0.1:$PORT:$p"); done
    "$AFTP" get "${SEND_KEYS[@]}" "${remotes[@]}" "$dest" >"$WORK/get.out" 2>"$WORK/get.err"
    GET_RC=$?
}

expect_fixed() { # file, fixed string
    grep -qF -e "$2" "$1" || fail "$(basename "$1") lacks '$2'"
}

mkfile() { # path beneath srv, size, mode
    mkdir -p "$(dirname "$WORK/srv/$1")"
    head -c "$2" /dev/urandom >"$WORK/srv/$1"
    chmod "$3" "$WORK/srv/$1"
}

case $CASE in
tree)
    # A tree, metadata kept, compared whole (a FIFO in it skipped and the
    # server's log saying so); a second get skips it all.
    mkfile "top/a b/deep file" 5000 0640
    mkfile "top/big" $((3 << 20)) 0755
    mkdir -p "$WORK/srv/top/empty"
    mkfifo "$WORK/srv/top/fifo"
    touch -d '2001-02-03 04:05:06.123456789' "$WORK/srv/top/a b/deep file"
    start_recv
    get "$WORK/dst" top
    [ "$GET_RC" -eq 0 ] || fail "aftp get exited $GET_RC"
    cp "$WORK/get.out" "$WORK/first.out"
    # again: every file is there, identical: skipped (sync), nothing sent
    get "$WORK/dst" top
    stop_recv
    [ "$GET_RC" -eq 0 ] || fail "the second aftp get exited $GET_RC"
    expect_fixed "$WORK/get.out" "transfer: 2 files (0 sent, 0 resumed, 2 skipped), 0 failed"
    mv "$WORK/first.out" "$WORK/get.out"
    python3 "$HERE/tree_compare.py" "$WORK/srv" "$WORK/dst" top/fifo >"$WORK/compare.out" 2>&1 ||
        fail "trees differ: $(cat "$WORK/compare.out")"
    expect_fixed "$WORK/get.out" "transfer: 2 files (2 sent, 0 resumed, 0 skipped), 0 failed"
    expect_fixed "$WORK/get.out" "received top/big: 3145728 bytes"
    # a FIFO inside is skipped, the server's operator told which
    grep -qE "aftp: warning: a client's pull skipped top/fifo beneath its root" "$WORK/recv.err" ||
        fail "the server did not say it skipped top/fifo"
    # the server's line for each file a client pulled says it sent it, to whom
    expect_fixed "$WORK/recv.out" "sent top/big: 3145728 bytes" ;;
hostile)
    # '..' and a link out of the root refused by the server, each named;
    # the served path arrives; nothing outside the root is read.
    echo secret >"$WORK/secret"
    ln -s ../secret "$WORK/srv/out"
    mkfile "ok.bin" 1000 0644
    start_recv
    get "$WORK/dst" ../secret out ok.bin
    stop_recv
    [ "$GET_RC" -eq 5 ] || fail "aftp get of hostile paths exited $GET_RC, expected 5 (refused)"
    expect_fixed "$WORK/get.err" "the server refused ../secret: not a plain path beneath this key's root"
    expect_fixed "$WORK/get.err" "failed out: the server refused out: not a plain path beneath this key's root there (absolute, '..', '.', an empty component, a backslash or a control character), or a symbolic link on it"
    cmp -s "$WORK/srv/ok.bin" "$WORK/dst/ok.bin" || fail "ok.bin did not arrive"
    [ ! -e "$WORK/dst/secret" ] && [ ! -e "$WORK/dst/out" ] || fail "a refused path arrived" ;;
json_index)
    # --json: each entry's index and source are the requested path it came
    # from (a refused path's too), its own result; the objects as JSON.md
    # says (json_check.py); the exit status of a refused path.
    mkfile "f1" 10 0644
    mkfile "top/a" 5000 0644
    mkfile "top/sub/b" 3000 0644
    start_recv
    "$AFTP" get --json "${SEND_KEYS[@]}" "127.0.0.1:$PORT:nope" "127.0.0.1:$PORT:f1" \
        "127.0.0.1:$PORT:top/" "127.0.0.1:$PORT:top" "$WORK/dst" >"$WORK/get.json" 2>"$WORK/get.err"
    GET_RC=$?
    stop_recv
    [ "$GET_RC" -eq 5 ] || fail "aftp get with a missing path exited $GET_RC, expected 5"
    python3 "$HERE/json_check.py" "$WORK/get.json" 5 AFTP_ERR_NOT_FOUND >"$WORK/check.out" 2>&1 ||
        fail "json: $(cat "$WORK/check.out")"
    python3 - "$WORK/get.json" >"$WORK/index.out" 2>&1 <<'PY' || fail "indexes: $(cat "$WORK/index.out")"
import json, sys
got = {}
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == "file":
        got[o["path"]] = (o["index"], o["source"], o["result"])
want = {"nope": (0, "nope", "failed"), "f1": (1, "f1", "sent"),
        "a": (2, "top/", "sent"), "sub": (2, "top/", "sent"), "sub/b": (2, "top/", "sent"),
        "top": (3, "top", "sent"), "top/a": (3, "top", "sent"),
        "top/sub": (3, "top", "sent"), "top/sub/b": (3, "top", "sent")}
if got != want:
    sys.exit("entries %s, expected %s" % (sorted(got.items()), sorted(want.items())))
PY
    expect_fixed "$WORK/get.err" "the server refused nope: nothing of that name beneath this key's root" ;;
overwrite)
    # A local file that differs is refused, naming it and --overwrite (exit
    # 5), an identical one skipped; --overwrite replaces it, verified.
    mkfile "f1" 1000 0644
    mkfile "same" 2000 0644
    start_recv
    get "$WORK/dst" same
    [ "$GET_RC" -eq 0 ] || fail "aftp get of same exited $GET_RC"
    echo "a local version" >"$WORK/dst/f1"
    get "$WORK/dst" f1 same
    [ "$GET_RC" -eq 5 ] || fail "aftp get over a differing file exited $GET_RC, expected 5"
    expect_fixed "$WORK/get.err" "f1 is already here and differs from the server's"
    expect_fixed "$WORK/get.err" "(--overwrite replaces it)"
    expect_fixed "$WORK/get.out" "skipped same: identical here already (2000 bytes)"
    expect_fixed "$WORK/get.out" "transfer: 1 files (0 sent, 0 resumed, 1 skipped), 1 failed (1 of them already here and different: --overwrite replaces them),"
    [ "$(cat "$WORK/dst/f1")" = "a local version" ] || fail "f1 was replaced without --overwrite"
    "$AFTP" get --overwrite "${SEND_KEYS[@]}" "127.0.0.1:$PORT:f1" "127.0.0.1:$PORT:same" \
        "$WORK/dst" >"$WORK/get.out" 2>"$WORK/get.err"
    GET_RC=$?
    stop_recv
    [ "$GET_RC" -eq 0 ] || fail "aftp get --overwrite exited $GET_RC"
    cmp -s "$WORK/srv/f1" "$WORK/dst/f1" || fail "--overwrite did not replace f1"
    expect_fixed "$WORK/get.out" "transfer: 2 files (1 sent, 0 resumed, 1 skipped), 0 failed" ;;
dest_file)
    # DEST names a file: refused before any datagram, saying so.
    mkfile "ok.bin" 1000 0644
    touch "$WORK/a-file"
    start_recv
    get "$WORK/a-file" ok.bin
    [ "$GET_RC" -eq 3 ] || fail "aftp get into a file exited $GET_RC, expected 3"
    expect_fixed "$WORK/get.err" "is not a directory"
    # DEST missing: the same, saying to create it
    get "$WORK/missing" ok.bin
    stop_recv
    [ "$GET_RC" -eq 3 ] || fail "aftp get into a missing directory exited $GET_RC, expected 3"
    expect_fixed "$WORK/get.err" "missing does not exist: a get stores what it fetches beneath an existing directory (create it first)" ;;
progress)
    # A get reports its progress as a send does (--json progress objects,
    # --progress-log lines): 4 MiB at 20 Mbit/s take at least 1.6 s, the
    # progress comes every quarter second.
    mkfile "big" $((4 << 20)) 0644
    start_recv
    "$AFTP" get --json --progress-log "$WORK/progress.log" --max-rate 20M "${SEND_KEYS[@]}" \
        "127.0.0.1:$PORT:big" "$WORK/dst" >"$WORK/get.json" 2>"$WORK/get.err"
    GET_RC=$?
    stop_recv
    [ "$GET_RC" -eq 0 ] || fail "aftp get exited $GET_RC"
    python3 "$HERE/json_check.py" "$WORK/get.json" 0 >"$WORK/check.out" 2>&1 ||
        fail "json: $(cat "$WORK/check.out")"
    grep -q '"type":"progress".*"name":"big","size":4194304' "$WORK/get.json" ||
        fail "no progress object for big"
    [ "$(grep -vc '^#' "$WORK/progress.log")" -ge 1 ] || fail "no line in the progress log" ;;
*)
    echo "unknown case $CASE" >&2
    exit 2 ;;
esac
exit 0
