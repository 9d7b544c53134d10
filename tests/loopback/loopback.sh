#!/usr/bin/env bash
# Loopback tests of the real aftp binary over 127.0.0.1 (ctest label
# "loopback"). Usage: loopback.sh AFTP_BINARY CASE
# Every case runs in its own scratch directory with kernel-chosen ports, so
# cases can run in parallel. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail

AFTP=$1
CASE=$2
BLOCK=1408 # the engine's block for 1452-byte datagrams: 1452 - 16 header - 12 DATA - 16 tag
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aftp-loopback-XXXXXX")
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/dst"

fail() {
    echo "FAIL [$CASE]: $*" >&2
    for f in "$WORK"/*.out "$WORK"/*.err; do
        [ -s "$f" ] && { echo "--- $f"; cat "$f"; } >&2
    done
    exit 1
}

# start_recv [aftp recv options...]: a receiver on 127.0.0.1, port chosen by
# the kernel; sets RECV_PID and PORT.
start_recv() {
    : >"$WORK/recv.err"
    "${RECV_WRAP[@]}" "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" "$@" \
        >"$WORK/recv.out" 2>"$WORK/recv.err" &
    RECV_PID=$!
    PORT=
    for _ in $(seq 100); do
        PORT=$(sed -n 's/^aftp: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$WORK/recv.err")
        [ -n "$PORT" ] && return 0
        kill -0 "$RECV_PID" 2>/dev/null || break
        sleep 0.05
    done
    fail "receiver did not start"
}

# wait_recv: waits for the receiver; sets RECV_RC.
wait_recv() {
    wait "$RECV_PID"
    RECV_RC=$?
    RECV_PID=
}

# send FILE [options...]: runs aftp send to the receiver; sets SEND_RC.
send() {
    local file=$1
    shift
    "$AFTP" send "$@" "$file" "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
}

expect_rc() { # what, got, want
    [ "$2" -eq "$3" ] || fail "$1 exited $2, expected $3"
}

expect_text() { # file, extended regex
    grep -Eq "$2" "$1" || fail "$(basename "$1") lacks /$2/"
}

# No file under the final name and no temporary left in the destination.
expect_nothing_delivered() {
    local left
    left=$(find "$WORK/dst" -mindepth 1 -newer "$WORK/stamp" | head -n 3)
    [ -z "$left" ] || fail "destination not clean after a failure: $left"
}

make_file() { # name, size in bytes
    head -c "$2" /dev/urandom >"$WORK/$1"
}

# A full transfer of a file of `size` bytes, checked end to end.
transfer_ok() { # size, [extra send options...]
    local size=$1
    shift
    make_file src.bin "$size"
    start_recv --once
    send "$WORK/src.bin" --rate 2G "$@"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    [ "$(sha256sum <"$WORK/src.bin")" = "$(sha256sum <"$WORK/dst/src.bin")" ] ||
        fail "sha256 differs"
    expect_text "$WORK/send.out" "^sent src\.bin: $size bytes in [0-9.]+ s, [0-9.]+ Mbit/s goodput, [0-9.]+% retransmitted, xxh3-128 [0-9a-f]{32}$"
    expect_text "$WORK/recv.out" "^received src\.bin: $size bytes in "
    local d1 d2
    d1=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/send.out")
    d2=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/recv.out")
    [ "$d1" = "$d2" ] || fail "digests differ: $d1 / $d2"
    [ "$(find "$WORK/dst" -mindepth 1 | wc -l)" -eq 1 ] || fail "extra files in the destination"
}

touch "$WORK/stamp"
RECV_WRAP=(env)
case "$CASE" in
size_0) transfer_ok 0 ;;
size_1) transfer_ok 1 ;;
size_block_minus_1) transfer_ok $((BLOCK - 1)) ;;
size_block) transfer_ok $BLOCK ;;
size_block_plus_1) transfer_ok $((BLOCK + 1)) ;;
size_5mb) transfer_ok $((5 * 1000 * 1000 + 7)) ;;
size_1gib) transfer_ok $((1 << 30)) ;;
policy_fixed) transfer_ok $((5 << 20)) --policy fixed ;;
policy_high) transfer_ok $((5 << 20)) --policy high --min-rate 100M ;;
policy_low) transfer_ok $((5 << 20)) --policy low --max-rate 1500M ;;
drop_1pct)
    export AFTP_TEST_DROP=1%,11
    transfer_ok $((20 << 20))
    expect_text "$WORK/send.out" "retransmitted" ;;
drop_10pct)
    export AFTP_TEST_DROP=10%,12
    transfer_ok $((20 << 20))
    # 10% of the first transmissions are lost, so at least ~9% are repeated
    pct=$(sed -n 's/.* \([0-9.]*\)% retransmitted.*/\1/p' "$WORK/send.out")
    awk -v p="$pct" 'BEGIN { exit !(p >= 9) }' || fail "only $pct% retransmitted at 10% loss" ;;
missing_file)
    PORT=9
    send "$WORK/no-such-file"
    expect_rc "aftp send" "$SEND_RC" 3
    expect_text "$WORK/send.err" "^aftp: error: cannot send .*no-such-file: No such file or directory$" ;;
directory_as_file)
    PORT=9
    send "$WORK/dst"
    expect_rc "aftp send" "$SEND_RC" 3
    expect_text "$WORK/send.err" "^aftp: error: cannot send .*/dst: is a directory$" ;;
nobody_listening)
    # A port that was just released: the kernel answers ICMP port unreachable.
    start_recv
    kill "$RECV_PID"
    wait_recv
    make_file src.bin 1000
    send "$WORK/src.bin" --idle-timeout 20
    expect_rc "aftp send" "$SEND_RC" 4
    expect_text "$WORK/send.err" "^aftp: error: 127\.0\.0\.1:$PORT is unreachable: connection refused" ;;
silent_peer)
    command -v python3 >/dev/null || { echo "SKIP: python3 needed for a silent UDP peer"; exit 77; }
    python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0))
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$WORK/silent.port" &
    SILENT=$!
    for _ in $(seq 100); do [ -s "$WORK/silent.port" ] && break; sleep 0.05; done
    PORT=$(cat "$WORK/silent.port")
    make_file src.bin 1000
    send "$WORK/src.bin" --idle-timeout 1
    kill $SILENT
    expect_rc "aftp send" "$SEND_RC" 4
    expect_text "$WORK/send.err" "^aftp: error: no answer from 127\.0\.0\.1:$PORT within 1\.0 s" ;;
exists_refused)
    make_file src.bin 5000
    echo "precious" >"$WORK/dst/src.bin"
    touch "$WORK/stamp"
    start_recv --once
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 5
    expect_rc "aftp recv" "$RECV_RC" 5
    expect_text "$WORK/send.err" "^aftp: error: 127\.0\.0\.1:$PORT refused src\.bin: it already exists there"
    expect_text "$WORK/recv.err" "refusing to replace existing file src\.bin: use --overwrite"
    [ "$(cat "$WORK/dst/src.bin")" = precious ] || fail "existing file was changed"
    [ "$(find "$WORK/dst" -mindepth 1 | wc -l)" -eq 1 ] || fail "temporary left behind" ;;
exists_overwrite)
    echo "old" >"$WORK/dst/src.bin"
    make_file src.bin 5000
    start_recv --once --overwrite
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "file not replaced" ;;
disk_full)
    if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
        echo "SKIP: needs root and unshare -m for a private 1 MiB tmpfs"
        exit 77
    fi
    # The receiver alone runs in a mount namespace where dst is a 1 MiB tmpfs.
    RECV_WRAP=(unshare -m --propagation private sh -c
               'mount -t tmpfs -o size=1m tmpfs "$0" && exec "$@"' "$WORK/dst")
    make_file src.bin $((4 << 20))
    start_recv --once
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 5
    expect_rc "aftp recv" "$RECV_RC" 5
    expect_text "$WORK/send.err" "refused src\.bin: not enough space on the receiver"
    expect_text "$WORK/recv.err" "not enough space to receive src\.bin: 4194304 bytes needed: No space left on device"
    expect_nothing_delivered ;;
serve_two)
    # Without --once the receiver serves transfers one after another.
    make_file a.bin 3000
    make_file b.bin 70000
    start_recv
    send "$WORK/a.bin"
    expect_rc "first aftp send" "$SEND_RC" 0
    send "$WORK/b.bin"
    expect_rc "second aftp send" "$SEND_RC" 0
    kill -TERM "$RECV_PID"
    wait_recv
    cmp -s "$WORK/a.bin" "$WORK/dst/a.bin" && cmp -s "$WORK/b.bin" "$WORK/dst/b.bin" ||
        fail "files differ"
    [ "$(grep -c '^received' "$WORK/recv.out")" -eq 2 ] || fail "two summary lines expected" ;;
source_truncated)
    # The source shrinks while a slow transfer reads it: the sender fails
    # with a clear message (no SIGBUS), the receiver keeps nothing.
    make_file src.bin $((32 << 20))
    start_recv --once
    "$AFTP" send --policy fixed --rate 50M "$WORK/src.bin" "127.0.0.1:$PORT" \
        >"$WORK/send.out" 2>"$WORK/send.err" &
    SEND_PID=$!
    sleep 1
    truncate -s $((1 << 20)) "$WORK/src.bin"
    wait "$SEND_PID"
    SEND_RC=$?
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 3
    expect_text "$WORK/send.err" "^aftp: error: .*src\.bin: source changed during transfer"
    [ "$RECV_RC" -ne 0 ] || fail "aftp recv succeeded"
    expect_text "$WORK/recv.err" "source changed during transfer"
    expect_nothing_delivered ;;
version_neg)
    # Spec 12.2: a datagram of >= 1200 bytes in an unknown version gets
    # VERSION_NEG [1] with conn_id and pn echoed; a shorter one gets nothing.
    command -v python3 >/dev/null || { echo "SKIP: python3 needed to craft datagrams"; exit 77; }
    start_recv --once
    python3 - "$PORT" >"$WORK/vneg.out" 2>&1 <<'PY' || fail "VERSION_NEG exchange"
import socket, struct, sys
peer = ("127.0.0.1", int(sys.argv[1]))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
head = struct.pack(">BBHIQ", 7, 1, 0, 0xABCD0001, 0x12A)
s.settimeout(0.5)
s.sendto(head + bytes(1199 - len(head)), peer)
try:
    sys.exit("a 1199-byte datagram was answered: %s" % s.recv(2048).hex())
except socket.timeout:
    pass
s.settimeout(5)
s.sendto(head + bytes(1200 - len(head)), peer)
reply = s.recv(2048)
want = struct.pack(">BBHIQBB", 0, 0, 0, 0xABCD0001, 0x12A, 1, 1)
if reply != want:
    sys.exit("reply %s, expected %s" % (reply.hex(), want.hex()))
PY
    # No state was kept: the receiver still serves a real client.
    make_file src.bin 3000
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs" ;;
usage)
    "$AFTP" send --rate 12X f 127.0.0.1:1 2>"$WORK/u1.err"
    expect_rc "bad rate" $? 2
    expect_text "$WORK/u1.err" "^aftp: error: bad rate '12X'"
    "$AFTP" send f 127.0.0.1:99999 2>"$WORK/u2.err"
    expect_rc "bad port" $? 2
    expect_text "$WORK/u2.err" "^aftp: error: bad address '127\.0\.0\.1:99999'"
    "$AFTP" send --policy greedy f 127.0.0.1:1 2>"$WORK/u7.err"
    expect_rc "bad policy" $? 2
    expect_text "$WORK/u7.err" "^aftp: error: bad policy 'greedy'"
    "$AFTP" send --min-rate 2G --max-rate 1G f 127.0.0.1:1 2>"$WORK/u8.err"
    expect_rc "min above max" $? 2
    expect_text "$WORK/u8.err" "^aftp: error: --min-rate is above --max-rate"
    "$AFTP" send f 2>"$WORK/u3.err"
    expect_rc "missing address" $? 2
    "$AFTP" recv --dir "$WORK" 2>"$WORK/u4.err"
    expect_rc "recv without --listen" $? 2
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/nope" 2>"$WORK/u5.err"
    expect_rc "recv into a missing directory" $? 3
    expect_text "$WORK/u5.err" "^aftp: error: cannot use destination directory"
    "$AFTP" frobnicate 2>"$WORK/u6.err"
    expect_rc "unknown command" $? 2
    "$AFTP" --help >"$WORK/help.out"
    expect_rc "--help" $? 0
    expect_text "$WORK/help.out" "^usage: aftp send"
    "$AFTP" --version >"$WORK/version.out"
    expect_rc "--version" $? 0
    expect_text "$WORK/version.out" "^aftp [0-9]+\.[0-9]+\.[0-9]+" ;;
*)
    echo "unknown case $CASE" >&2
    exit 2 ;;
esac
echo "PASS [$CASE]"
