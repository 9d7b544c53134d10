#!/usr/bin/env bash
# Loopback tests of `aftp send SRC... HOST:PORT` with directory trees: the
# real aftp binary over 127.0.0.1 (ctest label "loopback"), pipelined mode
# against `aftp recv`. Usage: tree.sh AFTP_BINARY CASE
# Every case runs in its own scratch directory with kernel-chosen ports.
# Exit 0 pass, 1 fail, 77 skip. Trees are compared by tree_compare.py:
# bytes, modification time (ns) and permission bits of every entry.
set -uo pipefail

AFTP=$1
CASE=$2
HERE=$(cd "$(dirname "$0")" && pwd)
command -v python3 >/dev/null || { echo "SKIP: python3 needed to compare trees"; exit 77; }
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aftp-tree-XXXXXX")
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/src" "$WORK/dst"

. "$HERE/harness.sh"
make_keys || fail "aftp keygen"

# start_recv [aftp recv options...]: a receiver into dst serving until
# stopped; sets RECV_PID and PORT.
start_recv() {
    : >"$WORK/recv.err" # before the start: await_port must not read the last receiver's port
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" "${RECV_KEYS[@]}" "$@" \
        >"$WORK/recv.out" 2>"$WORK/recv.err" &
    RECV_PID=$!
    await_port || fail "receiver did not start"
}

stop_recv() {
    kill -TERM "$RECV_PID" 2>/dev/null
    wait "$RECV_PID"
    RECV_PID=
}

# send [options...] SRC...: aftp send of the SRCs to the receiver, its
# output in send.out / send.err; sets SEND_RC.
send() {
    "$AFTP" send "${SEND_KEYS[@]}" "$@" "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
}

expect_rc() { # what, got, want
    [ "$2" -eq "$3" ] || fail "$1 exited $2, expected $3"
}

expect_fixed() { # file, fixed string
    grep -qF -e "$2" "$1" || fail "$(basename "$1") lacks '$2'"
}

# same_tree SRC DST [EXCLUDED...]: every entry of SRC is in DST, byte-exact,
# same mtime and permission bits, and DST holds nothing else (but
# .aftp-partial and the EXCLUDED relative paths, which must be absent).
same_tree() {
    python3 "$HERE/tree_compare.py" "$@" >"$WORK/compare.out" 2>&1 ||
        fail "trees differ: $(cat "$WORK/compare.out")"
}

summary_field() { # field of --json's summary object in send.out
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == "summary":
        print(o[sys.argv[2]])' "$WORK/send.out" "$1"
}

file_results() { # "result path" per --json file object in send.out, sorted
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == "file":
        print(o["result"], o["path"])' "$WORK/send.out" | sort
}

mkfile() { # path beneath src, size, mode
    mkdir -p "$(dirname "$WORK/src/$1")"
    head -c "$2" /dev/urandom >"$WORK/src/$1"
    chmod "$3" "$WORK/src/$1"
}

case $CASE in
nested_empty)
    # Nested and empty directories, names with spaces and in unicode,
    # various modes and times: the tree arrives whole, metadata kept.
    mkfile "top/a b/c d/deep file" 5000 0640
    mkfile "top/ünï cödé/日本語.txt" 1234 0600
    mkfile "top/big" $((3 << 20)) 0755
    mkdir -p "$WORK/src/top/empty" "$WORK/src/top/x/y/z"
    chmod 0750 "$WORK/src/top/x"
    touch -d '2001-02-03 04:05:06.123456789' "$WORK/src/top/a b/c d/deep file"
    touch -d '2011-02-03 04:05:06' "$WORK/src/top/x/y"
    start_recv
    send "$WORK/src/top"
    stop_recv
    expect_rc "aftp send" "$SEND_RC" 0
    same_tree "$WORK/src" "$WORK/dst"
    expect_fixed "$WORK/send.out" "transfer: 3 files (3 sent, 0 resumed, 0 skipped), 0 failed, 8 directories"
    # quiet about directories: one line per file and the transfer's
    [ "$(wc -l <"$WORK/send.out")" -eq 4 ] || fail "expected 4 lines on stdout" ;;
trailing_slash)
    # rsync's rule: "d" arrives as d/..., "d/" puts d's contents beneath
    # the destination.
    mkfile "d/f" 100 0644
    mkfile "d/sub/g" 200 0644
    start_recv
    send "$WORK/src/d"
    expect_rc "aftp send d" "$SEND_RC" 0
    [ -f "$WORK/dst/d/f" ] && [ -f "$WORK/dst/d/sub/g" ] || fail "d did not arrive as d/..."
    rm -rf "$WORK/dst/d"
    send "$WORK/src/d/"
    stop_recv
    expect_rc "aftp send d/" "$SEND_RC" 0
    [ -f "$WORK/dst/f" ] && [ -f "$WORK/dst/sub/g" ] && [ ! -e "$WORK/dst/d" ] ||
        fail "d/ did not put d's contents beneath the destination"
    cmp -s "$WORK/src/d/sub/g" "$WORK/dst/sub/g" || fail "sub/g differs" ;;
many_files)
    # 10,000 files of 4 KiB in one send; the same command again sends no
    # file data and reports each file skipped.
    python3 -c 'import os,sys
root = sys.argv[1]
for d in range(100):
    os.makedirs(f"{root}/many/d{d:02}")
    for i in range(100):
        with open(f"{root}/many/d{d:02}/f{i:02}", "wb") as f:
            f.write(os.urandom(4096))' "$WORK/src"
    start_recv
    start=$(date +%s.%N)
    send --json "$WORK/src/many"
    end=$(date +%s.%N)
    expect_rc "aftp send" "$SEND_RC" 0
    [ "$(summary_field sent)" -eq 10000 ] || fail "$(summary_field sent) files sent, not 10000"
    python3 -c "import sys; s = $end - $start; print(f'10000 files of 4 KiB: {s:.2f} s, {10000 / s:.0f} files/s')"
    send --json "$WORK/src/many"
    stop_recv
    expect_rc "second aftp send" "$SEND_RC" 0
    [ "$(summary_field skipped)" -eq 10000 ] || fail "$(summary_field skipped) files skipped, not 10000"
    [ "$(summary_field bytes_sent)" -eq 0 ] || fail "$(summary_field bytes_sent) bytes sent again"
    [ "$(file_results | grep -c '^skipped ')" -eq 10000 ] || fail "not 10000 skipped file objects"
    same_tree "$WORK/src" "$WORK/dst" ;;
newline_name)
    # A name with a newline is skipped with a notice naming it; the rest
    # arrives.
    mkfile "t/ok" 10 0644
    mkfile $'t/bad\nname' 10 0644
    start_recv
    send "$WORK/src/t"
    stop_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_fixed "$WORK/send.err" 'skipped'
    expect_fixed "$WORK/send.err" 't/bad\x0aname'
    same_tree "$WORK/src" "$WORK/dst" $'t/bad\nname' ;;
links)
    # Links inside the tree, one pointing out of it: skipped with a notice
    # each by default, never followed; with --links, recreated as links
    # with their targets literal (the receiver's default), still never
    # followed; a receiver with --no-links refuses each by name.
    mkfile "t/f" 10 0644
    mkfile "outside" 10 0644
    ln -s f "$WORK/src/t/in"
    ln -s ../outside "$WORK/src/t/out"
    start_recv
    send "$WORK/src/t"
    expect_rc "aftp send" "$SEND_RC" 0
    expect_fixed "$WORK/send.err" "skipped $WORK/src/t/in: a symbolic link (to f)"
    expect_fixed "$WORK/send.err" "skipped $WORK/src/t/out: a symbolic link (to ../outside)"
    same_tree "$WORK/src/t" "$WORK/dst/t" in out
    send --links --json "$WORK/src/t"
    stop_recv
    expect_rc "aftp send --links" "$SEND_RC" 0
    [ "$(readlink "$WORK/dst/t/in")" = f ] || fail "t/in is not the literal link"
    [ "$(readlink "$WORK/dst/t/out")" = ../outside ] || fail "t/out is not the literal link"
    [ ! -e "$WORK/dst/outside" ] || fail "a link was followed"
    rm -r "$WORK/dst/t"
    start_recv --no-links
    send --links --json "$WORK/src/t"
    stop_recv
    expect_rc "aftp send --links to a receiver with --no-links" "$SEND_RC" 5
    [ "$(file_results | grep -c '^failed t/\(in\|out\)$')" -eq 2 ] ||
        fail "the links were not refused by name: $(file_results)"
    [ ! -L "$WORK/dst/t/in" ] && [ ! -L "$WORK/dst/t/out" ] || fail "a refused link was made"
    same_tree "$WORK/src/t" "$WORK/dst/t" in out ;;
fifo)
    # A FIFO inside a tree is skipped with a notice (never opened: no hang).
    mkfile "t/f" 10 0644
    mkfifo "$WORK/src/t/pipe"
    start_recv
    timeout 60 "$AFTP" send "${SEND_KEYS[@]}" "$WORK/src/t" "127.0.0.1:$PORT" \
        >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
    stop_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_fixed "$WORK/send.err" "skipped $WORK/src/t/pipe: "
    expect_fixed "$WORK/send.err" "FIFO"
    same_tree "$WORK/src" "$WORK/dst" t/pipe ;;
checksum)
    # A file changed in place with its size and mtime kept: skipped by the
    # default comparison, found different by --checksum (and replaced
    # where the receiver allows overwriting).
    mkfile "t/f" 3000 0644
    mkfile "t/g" 3000 0644
    start_recv --overwrite
    send "$WORK/src/t"
    expect_rc "first aftp send" "$SEND_RC" 0
    cp -p "$WORK/src/t/f" "$WORK/keep"
    head -c 3000 /dev/urandom >"$WORK/src/t/f"
    touch -r "$WORK/keep" "$WORK/src/t/f"
    send --json "$WORK/src/t"
    expect_rc "aftp send (size and mtime)" "$SEND_RC" 0
    [ "$(summary_field skipped)" -eq 2 ] || fail "size and mtime did not skip both files"
    cmp -s "$WORK/keep" "$WORK/dst/t/f" || fail "the default comparison replaced t/f"
    send --checksum --json "$WORK/src/t"
    stop_recv
    expect_rc "aftp send --checksum" "$SEND_RC" 0
    [ "$(summary_field skipped)" -eq 1 ] && [ "$(summary_field sent)" -eq 1 ] ||
        fail "--checksum: $(file_results | tr '\n' ' ')"
    same_tree "$WORK/src" "$WORK/dst" ;;
ignore_times)
    # --ignore-times sends every file: one already there is refused
    # (FILE_EXISTS, exit 5) by a receiver that does not allow overwriting,
    # and the refusal of one file does not stop the others.
    mkfile "t/f" 3000 0644
    start_recv
    send "$WORK/src/t"
    expect_rc "first aftp send" "$SEND_RC" 0
    mkfile "t/new" 100 0644
    send --ignore-times --json "$WORK/src/t"
    stop_recv
    expect_rc "aftp send --ignore-times" "$SEND_RC" 5
    [ "$(file_results | grep -c '^failed t/f$')" -eq 1 ] || fail "t/f was not refused"
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == "file" and o["path"] == "t/f" and o["error_name"] != "AFTP_ERR_FILE_EXISTS":
        sys.exit("t/f: " + o["error_name"])' "$WORK/send.out" || fail "not FILE_EXISTS"
    cmp -s "$WORK/src/t/new" "$WORK/dst/t/new" || fail "t/new did not arrive" ;;
*)
    echo "unknown case $CASE" >&2
    exit 2 ;;
esac
exit 0
