#!/usr/bin/env bash
# Loopback tests of the real aftp binary over 127.0.0.1 (ctest label
# "loopback"). Usage: loopback.sh AFTP_BINARY CASE
# Every case runs in its own scratch directory with kernel-chosen ports, so
# cases can run in parallel. Exit 0 pass, 1 fail, 77 skip.
set -uo pipefail

AFTP=$1
CASE=$2
# The cases that turn on a test-only hook (AFTP_TEST_DROP, AFTP_TEST_RETRY)
# need a binary built with them (CMake option AFTP_TEST_HOOKS): ctest says
# whether it was in AFTP_LOOPBACK_TEST_HOOKS (1 or 0; unset: assumed built).
case $CASE in
drop_1pct | drop_10pct | retry)
    if [ "${AFTP_LOOPBACK_TEST_HOOKS-1}" != 1 ]; then
        echo "SKIP: built without AFTP_TEST_HOOKS"
        exit 77
    fi ;;
esac
# path_mtu lowers the loopback's MTU: it runs in a network namespace of
# its own (root).
if [ "$CASE" = path_mtu ] && [ -z "${AFTP_LOOPBACK_NETNS-}" ]; then
    if [ "$(id -u)" -ne 0 ] || ! unshare -n true 2>/dev/null; then
        echo "SKIP: needs root and unshare -n for a loopback of its own"
        exit 77
    fi
    AFTP_LOOPBACK_NETNS=1 exec unshare -n "$0" "$@"
fi
BLOCK=1408 # the engine's block for 1452-byte datagrams: 1452 - 16 header - 12 DATA - 16 tag
WORK=$(mktemp -d "${TMPDIR:-/tmp}/aftp-loopback-XXXXXX")
RECV_PID=
cleanup() {
    [ -n "$RECV_PID" ] && kill "$RECV_PID" 2>/dev/null
    rm -rf "$WORK"
}
trap cleanup EXIT
mkdir -p "$WORK/dst"

# Every run is protected with its own keys (harness.sh's make_keys); a
# case fails with harness.sh's fail.
. "$(dirname "$0")/harness.sh"
make_keys || { echo "FAIL [$CASE]: aftp keygen" >&2; exit 1; }

# The line of a public key file without its comment: "aftp-x25519 <base64>".
key_of() { cut -d' ' -f1,2 "$1"; }

# start_recv [aftp recv options...]: a receiver on 127.0.0.1, port chosen by
# the kernel, with RECV_KEYS, into RECV_DIR (default dst); sets RECV_PID and PORT.
start_recv() {
    : >"$WORK/recv.err"
    "${RECV_WRAP[@]}" "$AFTP" recv --listen 127.0.0.1:0 --dir "${RECV_DIR:-$WORK/dst}" \
        "${RECV_KEYS[@]}" "$@" \
        >"$WORK/recv.out" 2>"$WORK/recv.err" &
    RECV_PID=$!
    await_port || fail "receiver did not start"
}

# wait_recv: waits for the receiver; sets RECV_RC.
wait_recv() {
    wait "$RECV_PID"
    RECV_RC=$?
    RECV_PID=
}

# send FILE [options...]: runs aftp send (with SEND_KEYS) to the receiver;
# sets SEND_RC.
send() {
    local file=$1
    shift
    "$AFTP" send "${SEND_KEYS[@]}" "$@" "$file" "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
}

# send_while FILE RATE COMMAND...: a slow send of FILE (policy fixed at
# RATE) to the receiver, with COMMAND run one second into it; sets SEND_RC.
send_while() {
    local file=$1 rate=$2 pid
    shift 2
    "$AFTP" send "${SEND_KEYS[@]}" --policy fixed --rate "$rate" "$file" "127.0.0.1:$PORT" \
        >"$WORK/send.out" 2>"$WORK/send.err" &
    pid=$!
    sleep 1
    "$@"
    wait "$pid"
    SEND_RC=$?
}

# send_tty ANSWER FILE [options...]: aftp send (with SEND_KEYS) run on a
# pseudo-terminal (util-linux script), as a person at a terminal runs it,
# with ANSWER typed on it; its stdout and stderr together go to tty.out;
# sets SEND_RC.
send_tty() {
    local answer=$1 file=$2 cmd
    shift 2
    cmd=$(printf '%q ' "$AFTP" send "${SEND_KEYS[@]}" "$@" "$file" "127.0.0.1:$PORT")
    printf '%s\n' "$answer" | script -qec "$cmd" /dev/null >"$WORK/tty.out" 2>&1
    SEND_RC=$?
}

# start_liar MODE: tests/loopback/hostile_receiver.py on 127.0.0.1, its
# log in liar.log; sets LIAR (its pid) and PORT.
start_liar() {
    command -v python3 >/dev/null || { echo "SKIP: python3 needed for a hostile receiver"; exit 77; }
    python3 "$(dirname "$0")/hostile_receiver.py" "$1" "$WORK/liar.log" >"$WORK/liar.port" 2>"$WORK/liar.err" &
    LIAR=$!
    for _ in $(seq 100); do [ -s "$WORK/liar.port" ] && break; sleep 0.05; done
    PORT=$(cat "$WORK/liar.port")
    [ -n "$PORT" ] || fail "hostile receiver did not start"
}

# start_silent: a UDP socket on 127.0.0.1 that never answers; sets SILENT
# (its pid) and PORT.
start_silent() {
    command -v python3 >/dev/null || { echo "SKIP: python3 needed for a silent UDP peer"; exit 77; }
    python3 -c 'import socket,sys,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0))
print(s.getsockname()[1], flush=True); time.sleep(60)' >"$WORK/silent.port" &
    SILENT=$!
    for _ in $(seq 100); do [ -s "$WORK/silent.port" ] && break; sleep 0.05; done
    PORT=$(cat "$WORK/silent.port")
}

# send_as_stranger LOG: a client with a key of its own (src.bin, 5000
# bytes), which the receiver does not authorize: aftp send exits 8, and the
# receiver's LOG says "refused client" (waited for); sets SEND_KEYS to it.
send_as_stranger() {
    "$AFTP" keygen -f "$KEYS/stranger" -C stranger >/dev/null
    make_file src.bin 5000
    SEND_KEYS=(--identity "$KEYS/stranger" --peer-key "$KEYS/recv.pub")
    send "$WORK/src.bin"
    expect_rc "aftp send as a stranger" "$SEND_RC" 8
    for _ in $(seq 200); do
        grep -qF "refused client from 127.0.0.1:" "$1" && break
        sleep 0.05
    done
}

# check_json [--recv] FILE STATUS [ERROR_NAME]: FILE holds what aftp send
# --json (aftp recv --json) wrote on stdout, which json_check.py holds to
# the schema of cli/JSON.md for a run that exited with STATUS (and failed
# with ERROR_NAME).
check_json() {
    command -v python3 >/dev/null || { echo "SKIP: python3 needed to parse JSON"; exit 77; }
    python3 "$(dirname "$0")/json_check.py" "$@" >"$WORK/json_check.out" ||
        fail "--json: $(cat "$WORK/json_check.out")"
}

# The value of a field of the first object of a type in --json's output.
json_field() { # file, type, field
    python3 -c 'import json,sys
for line in open(sys.argv[1]):
    o = json.loads(line)
    if o["type"] == sys.argv[2]:
        print(o[sys.argv[3]]); break' "$@"
}

need_script() {
    script --version 2>/dev/null | grep -q util-linux ||
        { echo "SKIP: util-linux script needed to run aftp send on a pseudo-terminal"; exit 77; }
}

# stop_recv: ends a receiver that keeps serving (SIGTERM); sets RECV_RC.
stop_recv() {
    kill -TERM "$RECV_PID" 2>/dev/null
    wait_recv
}

# The cipher `--cipher auto` picks on this machine.
auto_cipher() {
    if grep -qw aes /proc/cpuinfo; then echo aes-256-gcm; else echo chacha20-poly1305; fi
}

data_went_out() { # the sender's progress log counts bytes sent
    awk '!/^#/ && $2 > 0 { moved = 1 } END { exit !moved }' "$WORK/progress.tsv" 2>/dev/null
}

running() { # pid: a child that has not exited (a zombie has)
    local state
    state=$(ps -o stat= -p "$1" 2>/dev/null) && [ "${state#Z}" = "$state" ]
}

expect_rc() { # what, got, want
    [ "$2" -eq "$3" ] || fail "$1 exited $2, expected $3"
}

expect_text() { # file, extended regex
    grep -Eq -e "$2" "$1" || fail "$(basename "$1") lacks /$2/"
}

expect_fixed() { # file, fixed string
    grep -qF -e "$2" "$1" || fail "$(basename "$1") lacks '$2'"
}

# No file under the final name and no temporary left in the destination.
# A sender that resumes (aftp send's default) has the receiver keep an
# unfinished file's partial copy and journal in .aftp-partial for the next
# run: resume state, not a delivery.
expect_nothing_delivered() {
    local left
    left=$(find "$WORK/dst" -mindepth 1 -newer "$WORK/stamp" -not -path "$WORK/dst/.aftp-partial" \
        -not -path "$WORK/dst/.aftp-partial/*" | head -n 3)
    [ -z "$left" ] || fail "destination not clean after a failure: $left"
}

make_file() { # name, size in bytes
    head -c "$2" /dev/urandom >"$WORK/$1"
}

# A full transfer of a file of `size` bytes, checked end to end; CIPHER is
# the cipher both summary lines must name (default: what auto picks).
transfer_ok() { # size, [extra send options...]
    local size=$1 cipher=${CIPHER:-$(auto_cipher)}
    shift
    make_file src.bin "$size"
    # shellcheck disable=SC2086 # RECV_OPTS: option words on purpose
    start_recv --once ${RECV_OPTS-}
    send "$WORK/src.bin" --rate 2G "$@"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    [ "$(sha256sum <"$WORK/src.bin")" = "$(sha256sum <"$WORK/dst/src.bin")" ] ||
        fail "sha256 differs"
    expect_text "$WORK/send.out" "^sent src\.bin: $size bytes in [0-9.]+ s, [0-9.]+ Mbit/s goodput, [0-9.]+% retransmitted, xxh3-128 [0-9a-f]{32}, $cipher$"
    expect_text "$WORK/recv.out" "^received src\.bin: $size bytes in .*, xxh3-128 [0-9a-f]{32}, $cipher, from 127\.0\.0\.1:[0-9]+"
    if [ "$cipher" != unencrypted ]; then
        # the receiver names the client by its key and comment
        grep -qF "key $(key_of "$KEYS/send.pub") \"sender\"" "$WORK/recv.out" ||
            fail "receiver's line does not name the client key"
    fi
    local d1 d2
    d1=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/send.out")
    d2=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/recv.out")
    [ "$d1" = "$d2" ] || fail "digests differ: $d1 / $d2"
    [ "$(find "$WORK/dst" -mindepth 1 | wc -l)" -eq 1 ] || fail "extra files in the destination"
}

# signal_receiver_mid_transfer SIGNAL: a slow send of a 32 MiB src.bin to
# a receiver (--once) that gets SIGNAL one second into it; sets SEND_RC
# and RECV_RC.
signal_receiver_mid_transfer() {
    make_file src.bin $((32 << 20))
    start_recv --once
    send_while "$WORK/src.bin" 50M kill "-$1" "$RECV_PID"
    wait_recv
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
progress_log)
    # 3 MiB at a fixed 24 Mbit/s: about a second, several quarter-second lines
    log=$WORK/progress.tsv
    transfer_ok $((3 << 20)) --policy fixed --rate 24M --progress-log "$log"
    head -n 1 "$log" | grep -q '^# seconds' || fail "progress log lacks its header"
    awk -F'\t' -v size=$((3 << 20)) '
        NR == 1 { next }
        NF != 7 { print "line " NR ": " NF " fields"; bad = 1 }
        $1 <= t || $2 < b || $2 > size { print "line " NR " goes back or past the file"; bad = 1 }
        $4 != 24000000 { print "line " NR ": pacing " $4 " bit/s"; bad = 1 }
        { t = $1; b = $2; n++ }
        END { if (n < 2) { print n " lines"; bad = 1 }; exit bad }' "$log" >"$WORK/check.out" ||
        fail "progress log: $(head -n 3 "$WORK/check.out")" ;;
progress_log_unwritable)
    make_file src.bin 1000
    start_recv --once
    send "$WORK/src.bin" --progress-log "$WORK/no/such/dir/progress.tsv"
    expect_rc "aftp send" "$SEND_RC" 3
    expect_text "$WORK/send.err" "cannot write the progress log .*no/such/dir"
    stop_recv
    expect_nothing_delivered ;;
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
    # the walk of the SRC arguments says which step failed
    expect_text "$WORK/send.err" "^aftp: error: cannot send .*no-such-file: .*No such file or directory$" ;;
directory_as_file)
    # A directory is a SRC like a file since aftp send takes trees (the
    # tree cases, tree.sh, test them): what stays refused here is a FIFO
    # named as SRC, and a directory arrives whole.
    mkdir -p "$WORK/d/sub" && make_file d/sub/f 5000
    start_recv --once
    send "$WORK/d"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    cmp -s "$WORK/d/sub/f" "$WORK/dst/d/sub/f" || fail "d/sub/f differs" ;;
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
    start_silent
    make_file src.bin 1000
    send "$WORK/src.bin" --idle-timeout 1
    kill $SILENT
    expect_rc "aftp send" "$SEND_RC" 4
    expect_text "$WORK/send.err" "^aftp: error: no answer from 127\.0\.0\.1:$PORT within 1\.0 s" ;;
digest_lie)
    # A receiver that answers FILE_DONE with FILE_RESULT(NONE, zero digest):
    # the sender must not call the file sent (spec 9.10).
    start_liar digest-lie
    make_file src.bin 100000
    send "$WORK/src.bin" --cipher none --idle-timeout 5
    wait "$LIAR"
    expect_rc "aftp send" "$SEND_RC" 6 # verification failed
    expect_text "$WORK/send.err" "^aftp: error: verification failed: src\.bin arrived at 127\.0\.0\.1:$PORT with a different digest: .*the receiver reports digest xxh3-128 0{32}, this side streamed [0-9a-f]{32}"
    ! grep -q '^sent' "$WORK/send.out" || fail "aftp send printed a 'sent' line for an unverified file"
    # The receiver is told why, both digests named.
    expect_text "$WORK/liar.log" "^close 6 file 1 not verified: the receiver reports digest xxh3-128 0{32}, this side streamed [0-9a-f]{32}$" ;;
resend_forever)
    # A receiver that lists every block missing for ever: the sender stops
    # at the repair bound (spec 9.9) instead of resending indefinitely.
    start_liar resend-forever
    make_file src.bin 100000
    send "$WORK/src.bin" --cipher none --idle-timeout 5 --policy fixed --rate 50M
    wait "$LIAR"
    expect_rc "aftp send" "$SEND_RC" 5 # refused: a limit
    expect_text "$WORK/send.err" "^aftp: error: transfer of src\.bin to 127\.0\.0\.1:$PORT failed: the receiver asked for [0-9]+ resends of file 1 after [0-9]+ of its 72 blocks were sent, beyond the bound of 8 per block sent \+ 256"
    ! grep -q '^sent' "$WORK/send.out" || fail "aftp send printed a 'sent' line"
    expect_text "$WORK/liar.log" "^close 13 the receiver asked for [0-9]+ resends"
    # What the liar got stays within the bound: 72 first transmissions,
    # at most 8 x 72 + 256 resends (and a few probes).
    data=$(sed -n 's/^data //p' "$WORK/liar.log")
    [ "$data" -le $((9 * 72 + 256 + 16)) ] || fail "the liar got $data DATA datagrams, beyond the bound" ;;
exists_refused)
    make_file src.bin 5000
    echo "precious" >"$WORK/dst/src.bin"
    touch "$WORK/stamp"
    start_recv --once
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 5
    expect_rc "aftp recv" "$RECV_RC" 5
    expect_fixed "$WORK/send.err" "aftp: error: 127.0.0.1:$PORT refused src.bin: it exists at the receiver (its operator can allow replacing it with 'aftp recv --overwrite')"
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
    expect_text "$WORK/recv.err" "not enough space to receive src\.bin: 4194304 bytes needed, [0-9]+ free"
    expect_nothing_delivered ;;
disk_fills)
    # The offer fits, then another writer takes the space mid-transfer:
    # both sides fail with a clear message, the receiver does not crash
    # and removes its temporary file, the other writer's file stays.
    if [ "$(id -u)" -ne 0 ] || ! unshare -m true 2>/dev/null; then
        echo "SKIP: needs root and unshare -m for a private 48 MiB tmpfs"
        exit 77
    fi
    # The receiver runs in a mount namespace where dst is a 48 MiB tmpfs;
    # the other writer starts once the offer was accepted (its temporary
    # file exists); what is left is listed before the namespace goes.
    RECV_WRAP=(unshare -m --propagation private sh -c
               'mount -t tmpfs -o size=48m tmpfs "$0" || exit 9
                (for _ in $(seq 200); do
                     ls "$0"/.aftp-partial/*.part >/dev/null 2>&1 && break
                     sleep 0.05
                 done
                 fallocate -l 24M "$0/other") &
                "$@"; rc=$?; wait; ls -A "$0" >"$0.left"; exit $rc' "$WORK/dst")
    make_file src.bin $((32 << 20))
    start_recv --once
    # --no-resume: a resuming sender (the default) has the receiver keep
    # the partial file in .aftp-partial for its next run
    send "$WORK/src.bin" --policy fixed --rate 50M --no-resume
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 5
    expect_rc "aftp recv" "$RECV_RC" 5
    expect_text "$WORK/send.err" "ran out of space for src\.bin during the transfer"
    expect_text "$WORK/recv.err" "not enough space to receive src\.bin: 33554432 bytes needed, [0-9]* held: No space left on device"
    [ "$(cat "$WORK/dst.left")" = other ] || fail "left in dst: $(cat "$WORK/dst.left")" ;;
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
    send_while "$WORK/src.bin" 50M truncate -s $((1 << 20)) "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 3
    # (pipelined mode: the engine's words for the entry, "source file changed")
    expect_text "$WORK/send.err" "^aftp: error: .*src\.bin: source (file )?changed during transfer"
    [ "$RECV_RC" -ne 0 ] || fail "aftp recv succeeded"
    # (pipelined mode: the entry alone fails, with the sender's ABANDON's error)
    expect_text "$WORK/recv.err" "source (file )?changed during transfer"
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
cipher_aes)
    grep -qw aes /proc/cpuinfo || { echo "SKIP: no AES-NI, AES-256-GCM unavailable"; exit 77; }
    CIPHER=aes-256-gcm transfer_ok $((5 << 20)) --cipher aes ;;
cipher_chacha)
    CIPHER=chacha20-poly1305 transfer_ok $((5 << 20)) --cipher chacha ;;
cipher_none_both)
    # Both sides opted out: it works, and both lines say it was not encrypted.
    CIPHER=unencrypted RECV_OPTS="--cipher none" transfer_ok $((1 << 20)) --cipher none ;;
cipher_none_client_only)
    make_file src.bin 5000
    start_recv --once
    send "$WORK/src.bin" --cipher none --idle-timeout 5
    [ "$SEND_RC" -ne 0 ] || fail "an unprotected client was served by a protected server"
    expect_text "$WORK/send.err" "unprotected transfers are not enabled on this server"
    stop_recv
    expect_nothing_delivered ;;
cipher_none_server_only)
    make_file src.bin 5000
    start_recv --once --cipher none
    send "$WORK/src.bin" --idle-timeout 5
    [ "$SEND_RC" -ne 0 ] || fail "a protected client fell back to an unprotected server"
    expect_text "$WORK/send.err" "server runs without encryption \(--cipher none\); the client must opt in too"
    stop_recv
    expect_nothing_delivered ;;
keygen)
    # Modes, the printed line, refusal to overwrite, the default location.
    "$AFTP" keygen -f "$WORK/k1" -C "alice@example" >"$WORK/keygen.out" 2>"$WORK/keygen.err"
    expect_rc "aftp keygen" $? 0
    [ "$(stat -c %a "$WORK/k1")" = 600 ] || fail "private key mode $(stat -c %a "$WORK/k1"), expected 600"
    expect_text "$WORK/k1" "^aftp-private-key [A-Za-z0-9+/]{43}=$"
    expect_text "$WORK/k1.pub" "^aftp-x25519 [A-Za-z0-9+/]{43}= alice@example$"
    cmp -s "$WORK/keygen.out" "$WORK/k1.pub" || fail "printed line differs from k1.pub"
    cp "$WORK/k1" "$WORK/k1.before"
    "$AFTP" keygen -f "$WORK/k1" 2>"$WORK/keygen2.err" >/dev/null
    expect_rc "aftp keygen over an existing key" $? 3
    expect_text "$WORK/keygen2.err" "k1 already exists: refusing to replace a key"
    cmp -s "$WORK/k1" "$WORK/k1.before" || fail "existing private key changed"
    echo "stale" >"$WORK/k2.pub"
    "$AFTP" keygen -f "$WORK/k2" 2>"$WORK/keygen3.err" >/dev/null
    expect_rc "aftp keygen over an existing .pub" $? 3
    [ ! -e "$WORK/k2" ] || fail "private key written although its .pub existed"
    "$AFTP" keygen >/dev/null 2>&1
    expect_rc "aftp keygen (default file)" $? 0
    [ "$(stat -c %a "$HOME/.aftp")" = 700 ] || fail "$HOME/.aftp mode $(stat -c %a "$HOME/.aftp"), expected 700"
    [ "$(stat -c %a "$HOME/.aftp/id_x25519")" = 600 ] || fail "default private key not 0600"
    [ -s "$HOME/.aftp/id_x25519.pub" ] || fail "default public key missing"
    "$AFTP" keygen -C "$(printf 'two\nlines')" -f "$WORK/k3" 2>/dev/null >/dev/null
    expect_rc "aftp keygen with a control character in the comment" $? 2
    [ ! -e "$WORK/k3" ] || fail "key written with a bad comment" ;;
default_keys)
    # No key options: ~/.aftp/id_x25519 on both sides (one identity here),
    # ~/.aftp/authorized_keys and the known-hosts line of 127.0.0.1:PORT.
    "$AFTP" keygen >/dev/null || fail "aftp keygen"
    cp "$HOME/.aftp/id_x25519.pub" "$HOME/.aftp/authorized_keys"
    RECV_KEYS=() SEND_KEYS=()
    make_file src.bin 100000
    start_recv --once
    grep -qxF "aftp: server key $(key_of "$HOME/.aftp/id_x25519.pub")" "$WORK/recv.err" ||
        fail "the receiver did not print its public key line"
    echo "127.0.0.1:$PORT $(log_value "$WORK/recv.err" "server key ") from the log" \
        >"$HOME/.aftp/known_hosts"
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs" ;;
quiet_recv_no_key_line)
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" "${RECV_KEYS[@]}" -q 2>"$WORK/recv.err" &
    RECV_PID=$!
    sleep 0.5
    kill -0 "$RECV_PID" || fail "aftp recv -q exited"
    stop_recv
    [ ! -s "$WORK/recv.err" ] || fail "aftp recv -q printed: $(cat "$WORK/recv.err")" ;;
private_key_mode)
    chmod 644 "$KEYS/recv" "$KEYS/send"
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --once "${RECV_KEYS[@]}" 2>"$WORK/r.err"
    expect_rc "aftp recv with a 0644 private key" $? 8
    expect_text "$WORK/r.err" "^aftp: error: identity key: .*recv: mode 0644 lets others read the private key: run chmod 600"
    make_file src.bin 1000
    PORT=9
    send "$WORK/src.bin"
    expect_rc "aftp send with a 0644 private key" "$SEND_RC" 8
    expect_text "$WORK/send.err" "mode 0644 lets others read the private key" ;;
missing_keys)
    RECV_KEYS=()
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" 2>"$WORK/r1.err"
    expect_rc "aftp recv without an identity" $? 8
    expect_text "$WORK/r1.err" "^${STAMP}aftp: error: no identity key at .*/\.aftp/id_x25519: create one with 'aftp keygen'"
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --identity "$KEYS/recv" 2>"$WORK/r2.err"
    expect_rc "aftp recv without authorized keys" $? 8
    expect_text "$WORK/r2.err" "^${STAMP}aftp: error: authorized keys: .*authorized_keys: no such file"
    : >"$WORK/empty"
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK/dst" --identity "$KEYS/recv" \
        --authorized-keys "$WORK/empty" 2>"$WORK/r3.err"
    expect_rc "aftp recv with empty authorized keys" $? 8
    expect_text "$WORK/r3.err" "it admits nobody"
    "$AFTP" send --identity "$KEYS/nope" --peer-key "$KEYS/recv.pub" f 127.0.0.1:9 2>"$WORK/s1.err"
    expect_rc "aftp send with a missing identity" $? 8
    expect_text "$WORK/s1.err" "^aftp: error: identity key: .*nope: no such file"
    echo "aftp-x25519 notbase64" >"$WORK/bad.pub"
    "$AFTP" send --identity "$KEYS/send" --peer-key "$WORK/bad.pub" f 127.0.0.1:9 2>"$WORK/s2.err"
    expect_rc "aftp send with a malformed --peer-key" $? 8
    expect_text "$WORK/s2.err" "^aftp: error: server key \(--peer-key\): .*bad\.pub" ;;
wrong_peer_key)
    # A key the server does not hold: the server cannot open message 1 and
    # stays silent; the sender, its HELLO unanswered, asks for the server's
    # key (spec 14.9) and ends at once with both fingerprints (exit 8),
    # long before its idle timeout.
    make_file src.bin 5000
    start_recv --once
    fp=$(log_value "$WORK/recv.err" "server fingerprint ")
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/send.pub")
    send "$WORK/src.bin" --idle-timeout 20
    expect_rc "aftp send" "$SEND_RC" 8
    expect_text "$WORK/send.err" "^aftp: error: the server at 127\.0\.0\.1:$PORT answers with key ${fp//+/\\+} but SHA256:[A-Za-z0-9+/]{43} is pinned for it in $KEYS/send\.pub: the server's key changed, or this is not the server you expect \(that answer is not authenticated"
    grep -qF "$fp is pinned" "$WORK/send.err" && fail "the server's own key shown as the pinned one"
    stop_recv
    expect_nothing_delivered ;;
unauthorized_client)
    start_recv --once
    send_as_stranger "$WORK/recv.err"
    grep -qF "not authorized there (add the line '$(key_of "$KEYS/stranger.pub")' to its authorized keys)" \
        "$WORK/send.err" || fail "the sender's error does not name its key"
    # The refusal is logged with the key and does not end a --once server:
    # the authorized client is still served.
    grep -qF "its key is not authorized (add the line '$(key_of "$KEYS/stranger.pub")'" "$WORK/recv.err" ||
        fail "receiver did not log the refused key"
    expect_nothing_delivered
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/recv.pub")
    send "$WORK/src.bin"
    wait_recv
    expect_rc "authorized aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0 ;;
psk)
    "$AFTP" keygen -f "$KEYS/psk" >/dev/null
    RECV_KEYS+=(--psk-file "$KEYS/psk")
    # without the pre-shared key the server cannot open message 1: silence;
    # it answers the key request with the pinned key, so the sender names
    # the other causes at its idle timeout
    make_file src.bin 5000
    start_recv --once
    send "$WORK/src.bin" --idle-timeout 2
    expect_rc "aftp send without the psk" "$SEND_RC" 4
    expect_fixed "$WORK/send.err" "aftp: error: 127.0.0.1:$PORT answers key requests with the key pinned for it, but ignored our handshake for 2.0 s: do both sides use the same --psk-file (or none)?"
    expect_nothing_delivered
    send "$WORK/src.bin" --psk-file "$KEYS/psk"
    wait_recv
    expect_rc "aftp send with the psk" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs" ;;
retry)
    # Every HELLO without a cookie gets a RETRY: the client must answer it.
    RECV_WRAP=(env AFTP_TEST_RETRY=1)
    transfer_ok $((2 << 20))
    expect_text "$WORK/recv.err" "test RETRY shim active \(AFTP_TEST_RETRY\)" ;;
busy_server)
    # A second send of the same client (its key) arrives during a transfer
    # of another file: it is served at once, alongside the first (only a
    # file another session writes waits, aftp_filelock.h); nothing crashes.
    make_file a.bin $((16 << 20))
    make_file b.bin 70000
    start_recv
    "$AFTP" send "${SEND_KEYS[@]}" --policy fixed --rate 40M "$WORK/a.bin" "127.0.0.1:$PORT" \
        >"$WORK/a.out" 2>"$WORK/a.err" &
    A_PID=$!
    sleep 0.5
    send "$WORK/b.bin"
    wait "$A_PID"
    A_RC=$?
    stop_recv
    expect_rc "first aftp send" "$A_RC" 0
    expect_rc "second aftp send" "$SEND_RC" 0
    cmp -s "$WORK/a.bin" "$WORK/dst/a.bin" && cmp -s "$WORK/b.bin" "$WORK/dst/b.bin" ||
        fail "files differ"
    [ "$(grep -c '^received' "$WORK/recv.out")" -eq 2 ] || fail "two summary lines expected"
    # b was served while a still ran, not after it
    [ "$(sed -n 's/^received \([ab]\)\.bin.*/\1/p' "$WORK/recv.out" | tr -d '\n')" = ba ] ||
        fail "b.bin was not served alongside a.bin" ;;
unknown_host)
    # No --peer-key and nothing in the known hosts: refused before any
    # datagram, with the way to pin the key.
    : >"$WORK/known_hosts"
    SEND_KEYS=(--identity "$KEYS/send" --known-hosts "$WORK/known_hosts")
    make_file src.bin 1000
    PORT=7777
    send "$WORK/src.bin"
    expect_rc "aftp send to an unknown host" "$SEND_RC" 8
    expect_text "$WORK/send.err" "the key of 127\.0\.0\.1:7777 is unknown"
    expect_text "$WORK/send.err" "'aftp recv' prints its key when it starts"
    expect_text "$WORK/send.err" "--peer-key FILE"
    expect_text "$WORK/send.err" "'127\.0\.0\.1:7777 aftp-x25519 <base64>'"
    expect_text "$WORK/send.err" "or run 'aftp send' from a terminal: it then shows the server's key and asks whether to trust it" ;;
tofu_accept)
    # An unknown server and a person at a terminal: the server's key is
    # fetched and shown with its fingerprint; "yes" pins it in the default
    # known hosts (created: ~/.aftp 0700, the file 0600) and the transfer
    # runs with it; the next send uses the pinned key without a question.
    need_script
    SEND_KEYS=(--identity "$KEYS/send")
    make_file src.bin 200000
    start_recv
    fp=$(log_value "$WORK/recv.err" "server fingerprint ")
    [ -n "$fp" ] || fail "the receiver did not print its fingerprint"
    if command -v python3 >/dev/null; then # the fingerprint, computed independently
        want=$(python3 -c 'import base64, hashlib, sys
k = base64.b64decode(sys.argv[1])
print("SHA256:" + base64.b64encode(hashlib.sha256(k).digest()).decode().rstrip("="))' \
            "$(key_of "$KEYS/recv.pub" | cut -d' ' -f2)")
        [ "$fp" = "$want" ] || fail "fingerprint $fp, expected $want"
    fi
    [ ! -e "$HOME/.aftp" ] || fail "$HOME/.aftp exists before the test"
    send_tty yes "$WORK/src.bin"
    expect_rc "aftp send answered yes" "$SEND_RC" 0
    expect_fixed "$WORK/tty.out" "The server 127.0.0.1:$PORT is not known. Its key is $(key_of "$KEYS/recv.pub") (fingerprint: $fp). Trust it and remember it in $HOME/.aftp/known_hosts? (yes/no) "
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    [ "$(cat "$HOME/.aftp/known_hosts")" = "127.0.0.1:$PORT $(key_of "$KEYS/recv.pub")" ] ||
        fail "known_hosts holds '$(cat "$HOME/.aftp/known_hosts")'"
    [ "$(stat -c %a "$HOME/.aftp")" = 700 ] || fail "$HOME/.aftp mode $(stat -c %a "$HOME/.aftp")"
    [ "$(stat -c %a "$HOME/.aftp/known_hosts")" = 600 ] ||
        fail "known_hosts mode $(stat -c %a "$HOME/.aftp/known_hosts")"
    # Pinned now: no question (a "no" typed would refuse), the file is unchanged.
    cp "$HOME/.aftp/known_hosts" "$WORK/known_hosts.before"
    make_file b.bin 5000
    send_tty no "$WORK/b.bin"
    expect_rc "second aftp send" "$SEND_RC" 0
    grep -q "is not known" "$WORK/tty.out" && fail "asked again for a pinned key"
    cmp -s "$WORK/b.bin" "$WORK/dst/b.bin" || fail "second file differs"
    cmp -s "$HOME/.aftp/known_hosts" "$WORK/known_hosts.before" || fail "known_hosts changed"
    stop_recv ;;
tofu_reject)
    # Anything but exactly "yes" refuses the key: exit 8, nothing sent,
    # nothing written (the default file not even created, a given one
    # left byte for byte as it was).
    need_script
    SEND_KEYS=(--identity "$KEYS/send")
    make_file src.bin 5000
    start_recv --once
    send_tty no "$WORK/src.bin"
    expect_rc "aftp send answered no" "$SEND_RC" 8
    expect_fixed "$WORK/tty.out" "The server 127.0.0.1:$PORT is not known. Its key is $(key_of "$KEYS/recv.pub")"
    expect_text "$WORK/tty.out" "aftp: error: host key not accepted"
    [ ! -e "$HOME/.aftp/known_hosts" ] || fail "known_hosts written after 'no'"
    printf '# mine\n127.0.0.1:1 %s' "$(key_of "$KEYS/send.pub")" >"$WORK/known_hosts"
    cp "$WORK/known_hosts" "$WORK/known_hosts.before"
    for answer in YES y "yes please" ""; do
        send_tty "$answer" "$WORK/src.bin" --known-hosts "$WORK/known_hosts"
        expect_rc "aftp send answered '$answer'" "$SEND_RC" 8
        expect_text "$WORK/tty.out" "host key not accepted"
    done
    cmp -s "$WORK/known_hosts" "$WORK/known_hosts.before" || fail "known_hosts changed"
    stop_recv
    expect_nothing_delivered ;;
tofu_append)
    # A known-hosts file that lists other hosts, its last line without a
    # newline: "yes" adds the server's line as a line of its own.
    need_script
    printf '# mine\n127.0.0.1:1 %s' "$(key_of "$KEYS/send.pub")" >"$WORK/known_hosts"
    SEND_KEYS=(--identity "$KEYS/send" --known-hosts "$WORK/known_hosts")
    make_file src.bin 5000
    start_recv --once
    send_tty yes "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send answered yes" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    printf '# mine\n127.0.0.1:1 %s\n127.0.0.1:%s %s\n' "$(key_of "$KEYS/send.pub")" "$PORT" \
        "$(key_of "$KEYS/recv.pub")" | cmp -s - "$WORK/known_hosts" ||
        fail "known_hosts is now: $(cat "$WORK/known_hosts")" ;;
tofu_no_answer)
    # Nobody answers the key request: the usual "no answer" error, nothing
    # pinned. (A port just released: ICMP says unreachable at once.)
    need_script
    SEND_KEYS=(--identity "$KEYS/send")
    start_recv
    kill "$RECV_PID"
    wait_recv
    make_file src.bin 1000
    send_tty yes "$WORK/src.bin"
    expect_rc "aftp send to nobody" "$SEND_RC" 4
    expect_text "$WORK/tty.out" "127\.0\.0\.1:$PORT is unreachable: connection refused"
    [ ! -e "$HOME/.aftp/known_hosts" ] || fail "known_hosts written"
    # A silent peer: four requests a second apart, then "no answer".
    command -v python3 >/dev/null || { echo "SKIP: python3 needed for a silent UDP peer"; exit 77; }
    python3 -c 'import socket,time
s=socket.socket(socket.AF_INET,socket.SOCK_DGRAM); s.bind(("127.0.0.1",0))
print(s.getsockname()[1], flush=True); s.settimeout(3); n=0
try:
    while True: s.recv(2048); n+=1
except socket.timeout: print(n, flush=True)' >"$WORK/silent.out" &
    SILENT=$!
    for _ in $(seq 100); do [ -s "$WORK/silent.out" ] && break; sleep 0.05; done
    PORT=$(head -n 1 "$WORK/silent.out")
    send_tty yes "$WORK/src.bin"
    expect_rc "aftp send to a silent peer" "$SEND_RC" 4
    expect_text "$WORK/tty.out" "no answer from 127\.0\.0\.1:$PORT within 4\.0 s when asking for its key"
    wait "$SILENT"
    [ "$(sed -n 2p "$WORK/silent.out")" = 4 ] ||
        fail "the silent peer got $(sed -n 2p "$WORK/silent.out") requests, expected 4"
    [ ! -e "$HOME/.aftp/known_hosts" ] || fail "known_hosts written" ;;
known_hosts)
    # The known-hosts line of HOST:PORT pins the server's key.
    make_file src.bin 200000
    start_recv --once
    { echo "# pinned keys"
      echo "127.0.0.1:1 $(key_of "$KEYS/send.pub") another host"
      echo "127.0.0.1:$PORT $(key_of "$KEYS/recv.pub") test receiver"; } >"$WORK/known_hosts"
    SEND_KEYS=(--identity "$KEYS/send" --known-hosts "$WORK/known_hosts")
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    # known hosts that cannot be read are a key problem (exit 8), named once
    SEND_KEYS=(--identity "$KEYS/send" --known-hosts "$WORK/dst")
    send "$WORK/src.bin"
    expect_rc "aftp send with a directory for known hosts" "$SEND_RC" 8
    expect_text "$WORK/send.err" "^aftp: error: known hosts: $WORK/dst: not a regular file" ;;
known_hosts_changed)
    # The pinned key and the one given disagree, or the known hosts list two
    # keys for the host: a loud refusal, nothing sent.
    make_file src.bin 1000
    start_recv --once
    echo "127.0.0.1:$PORT $(key_of "$KEYS/send.pub")" >"$WORK/known_hosts"
    send "$WORK/src.bin" --known-hosts "$WORK/known_hosts"
    expect_rc "aftp send, --peer-key against a different pinned key" "$SEND_RC" 8
    expect_text "$WORK/send.err" "^aftp: error: WARNING: .*key of 127\.0\.0\.1:$PORT has CHANGED"
    echo "127.0.0.1:$PORT $(key_of "$KEYS/recv.pub")" >>"$WORK/known_hosts"
    SEND_KEYS=(--identity "$KEYS/send" --known-hosts "$WORK/known_hosts")
    send "$WORK/src.bin"
    expect_rc "aftp send, two keys pinned for the host" "$SEND_RC" 8
    expect_text "$WORK/send.err" "^aftp: error: WARNING: .*list different keys for 127\.0\.0\.1:$PORT: the server's key may have CHANGED"
    stop_recv
    expect_nothing_delivered ;;
mtu_jumbo)
    # A jumbo-frame path: the receiver takes what the sender's --mtu asks
    # (the sizes themselves are checked in sim_test_transfer); one held to
    # --mtu 1500 gets 1452-byte datagrams, and the sender says so.
    transfer_ok $((5 << 20)) --mtu 9000
    grep -q "datagrams" "$WORK/send.err" && fail "a notice about datagram sizes without a cap"
    rm -f "$WORK/dst/src.bin"
    RECV_OPTS="--mtu 1500" transfer_ok $((5 << 20)) --mtu 9000
    expect_fixed "$WORK/send.err" "the receiver took datagrams of at most 1452 bytes, not 8952 (--mtu 9000): give it --mtu 9000 too" ;;
path_mtu)
    # A route that carries smaller packets than the datagrams (a tunnel):
    # the sender sizes its datagrams to it and says so. A path MTU that
    # falls mid-transfer (as an ICMP "fragmentation needed" makes it) ends
    # the transfer at once, with the reason on both sides, instead of
    # fragmenting or going silent until the idle timeout.
    { ip link set lo up && ip link set lo mtu 1400; } || fail "cannot set up the private loopback"
    transfer_ok $((5 << 20)) --mtu 9000
    expect_fixed "$WORK/send.err" "the route to the peer carries IP packets of at most 1400 bytes: datagrams of 1372 bytes, not 8952"
    grep -q "the receiver took" "$WORK/send.err" && fail "the receiver blamed for the route's limit"
    rm -f "$WORK/dst/src.bin"
    make_file src.bin $((16 << 20))
    start_recv --once
    send_while "$WORK/src.bin" 40M ip link set lo mtu 1300
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 4
    expect_fixed "$WORK/send.err" "failed: the path MTU fell to 1300 bytes: datagrams of 1372 bytes no longer fit (--mtu)"
    expect_fixed "$WORK/recv.err" "the path MTU fell to 1300 bytes"
    expect_nothing_delivered ;;
faux)
    # A faux source's bytes are those of a real file of zeros: same digest.
    head -c $((20 << 20)) /dev/zero >"$WORK/zeros"
    start_recv --once
    send "$WORK/zeros"
    wait_recv
    expect_rc "aftp send of a real file of zeros" "$SEND_RC" 0
    real=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/send.out")
    rm "$WORK/dst/zeros"
    touch "$WORK/stamp"
    RECV_DIR=faux:// start_recv --once
    send "faux:///zeros?20M"
    wait_recv
    expect_rc "aftp send faux:///zeros?20M" "$SEND_RC" 0
    expect_rc "aftp recv --dir faux://" "$RECV_RC" 0
    expect_text "$WORK/send.out" "^sent zeros: 20971520 bytes in .*, $real, $(auto_cipher)$"
    expect_text "$WORK/recv.out" "^received zeros: 20971520 bytes in .*, $real, $(auto_cipher), "
    [ -z "$(find "$WORK" -newer "$WORK/stamp" -name '*zeros*')" ] || fail "faux:// wrote a file" ;;
faux_500g)
    # 500 GiB is 381 million blocks of 1408 bytes, beyond the 2^28 blocks a
    # map of one bit per block once allowed: the receiver's map is bounded
    # by its window, not the file, so the offer is accepted. Once data has
    # gone out (the sender's progress log counts bytes sent, which only
    # follow an accepted offer) the sender is cancelled with SIGINT.
    RECV_DIR=faux:// start_recv --once
    "$AFTP" send "${SEND_KEYS[@]}" --policy fixed --rate 200M --progress-log "$WORK/progress.tsv" \
        'faux:///big?500G' "127.0.0.1:$PORT" >"$WORK/send.out" 2>"$WORK/send.err" &
    pid=$!
    for _ in $(seq 300); do
        data_went_out && break
        running "$pid" || break
        sleep 0.1
    done
    kill -INT "$pid" 2>/dev/null
    wait "$pid"
    SEND_RC=$?
    wait_recv
    ! grep -qi limit "$WORK/send.err" "$WORK/recv.err" || fail "a limit refused the 500 GiB offer"
    data_went_out || fail "no data of the 500 GiB file went out"
    expect_fixed "$WORK/send.err" "transfer of big to 127.0.0.1:$PORT cancelled here"
    expect_fixed "$WORK/recv.err" "failed: the sender cancelled the transfer" ;;
faux_takes_only_zeros)
    make_file src.bin $((1 << 20))
    RECV_DIR=faux:// start_recv --once
    send "$WORK/src.bin"
    wait_recv
    [ "$RECV_RC" -ne 0 ] || fail "aftp recv --dir faux:// took real data"
    expect_fixed "$WORK/recv.err" "a faux:// destination takes only a faux:// source: src.bin: it has bytes other than zeros"
    # the sender's own file is fine: refused by the receiver (5), with its reason
    expect_rc "aftp send of real data into faux://" "$SEND_RC" 5
    expect_fixed "$WORK/send.err" "aftp: error: transfer of src.bin to 127.0.0.1:$PORT failed: the receiver could not write it (its storage failed; its own log says why)" ;;
# ---- sending side: what the sender refuses to send, and what it says ----
source_fifo)
    # A FIFO nobody writes to is refused at once (it used to hang in open()).
    mkfifo "$WORK/fifo"
    PORT=9
    timeout 20 "$AFTP" send "${SEND_KEYS[@]}" "$WORK/fifo" "127.0.0.1:$PORT" 2>"$WORK/send.err"
    expect_rc "aftp send of a FIFO" $? 3
    # (worded by the walk of the SRC arguments, which skips FIFOs in a tree)
    expect_text "$WORK/send.err" "^aftp: error: cannot send .*/fifo: a FIFO \(named pipe\); aftp sends regular files" ;;
source_pseudo_fs)
    # Kernel files whose size is not their content (proc says 0 bytes,
    # sysfs 4096): refused, nothing delivered, instead of an "empty" file
    # verified and committed.
    [ -r /proc/self/status ] || { echo "SKIP: no proc mounted here"; exit 77; }
    start_recv --once
    send /proc/self/status
    expect_rc "aftp send /proc/self/status" "$SEND_RC" 3
    expect_text "$WORK/send.err" "^aftp: error: cannot send /proc/self/status: it is on proc, a kernel file system whose files have no true size"
    for f in /sys/kernel/mm/transparent_hugepage/enabled /sys/kernel/uevent_seqnum /sys/power/state; do
        [ -r "$f" ] || continue
        send "$f"
        expect_rc "aftp send $f" "$SEND_RC" 3
        expect_text "$WORK/send.err" "^aftp: error: cannot send $f: it is on sysfs, a kernel file system"
        break
    done
    # a genuinely empty regular file still goes
    : >"$WORK/empty"
    send "$WORK/empty"
    expect_rc "aftp send of an empty file" "$SEND_RC" 0
    wait_recv
    expect_rc "aftp recv" "$RECV_RC" 0
    [ -f "$WORK/dst/empty" ] && [ ! -s "$WORK/dst/empty" ] || fail "the empty file did not arrive"
    [ "$(find "$WORK/dst" -mindepth 1 | wc -l)" -eq 1 ] || fail "more than the empty file delivered" ;;
interrupt_before_network)
    # A signal while a step before the network blocks (the progress log is
    # a FIFO without a reader): a cancel, exit 7, not a local file error.
    # SIGTERM, which the CLI treats as Ctrl-C: a background job of a script
    # starts with SIGINT ignored.
    mkfifo "$WORK/log.fifo"
    make_file src.bin 1000
    PORT=9
    "$AFTP" send "${SEND_KEYS[@]}" --progress-log "$WORK/log.fifo" "$WORK/src.bin" "127.0.0.1:$PORT" \
        2>"$WORK/send.err" &
    pid=$!
    for _ in $(seq 100); do # until it waits in open() for a reader
        [ "$(cat "/proc/$pid/wchan" 2>/dev/null)" = wait_for_partner ] && break
        sleep 0.05
    done
    kill -TERM "$pid"
    wait "$pid"
    expect_rc "aftp send interrupted before the network" $? 7
    expect_text "$WORK/send.err" "^aftp: error: interrupted before the transfer started$" ;;
source_rewritten)
    # Written to in place mid-transfer (same size, new modification time):
    # the message says what changed, not two equal sizes.
    make_file src.bin $((32 << 20))
    start_recv --once
    send_while "$WORK/src.bin" 50M dd if=/dev/zero of="$WORK/src.bin" bs=4096 count=1 conv=notrunc status=none
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 3
    expect_fixed "$WORK/send.err" "aftp: error: src.bin: source changed during transfer (written to while being sent: its modification time changed, its size did not)"
    expect_nothing_delivered ;;
receiver_gone)
    # The receiver's process dies mid-transfer: ICMP port unreachable after
    # the handshake says it went away, not that it never listened.
    signal_receiver_mid_transfer KILL
    expect_rc "aftp send" "$SEND_RC" 4
    expect_fixed "$WORK/send.err" "aftp: error: the receiver at 127.0.0.1:$PORT stopped answering mid-transfer (connection refused: its process is gone)"
    grep -q "is unreachable" "$WORK/send.err" && fail "told that the receiver never listened"
    # (a killed receiver leaves its temporary file; nothing is under the final name)
    [ ! -e "$WORK/dst/src.bin" ] || fail "src.bin delivered" ;;
receiver_cancels)
    # Each side says that the other cancelled (exit 7 both ways), not just
    # "transfer cancelled".
    signal_receiver_mid_transfer TERM
    expect_rc "aftp send" "$SEND_RC" 7
    expect_fixed "$WORK/send.err" "aftp: error: the receiver at 127.0.0.1:$PORT cancelled the transfer of src.bin"
    expect_nothing_delivered
    start_recv
    "$AFTP" send "${SEND_KEYS[@]}" --policy fixed --rate 50M "$WORK/src.bin" "127.0.0.1:$PORT" \
        >"$WORK/send.out" 2>"$WORK/send.err" &
    pid=$!
    sleep 1
    kill -TERM "$pid"
    wait "$pid"
    expect_rc "aftp send cancelled here" $? 7
    expect_fixed "$WORK/send.err" "aftp: error: transfer of src.bin to 127.0.0.1:$PORT cancelled here"
    for _ in $(seq 100); do grep -q "cancelled" "$WORK/recv.err" && break; sleep 0.05; done
    stop_recv
    expect_text "$WORK/recv.err" "failed: the sender cancelled the transfer$"
    expect_nothing_delivered ;;
server_drains)
    # SIGTERM to a server (no --once) drains it: the transfer under way
    # completes, then the server exits 0, having said so.
    make_file src.bin $((32 << 20))
    start_recv
    send_while "$WORK/src.bin" 50M kill -TERM "$RECV_PID"
    wait_recv
    expect_rc "aftp send to a draining server" "$SEND_RC" 0
    expect_rc "aftp recv drained" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "the drained transfer's copy differs"
    expect_text "$WORK/recv.err" "draining: no new sessions" ;;
refusal_messages)
    # FILE_REPLY carries only a code: each one is said for what it means,
    # LIMIT (from a receiver that refuses every offer so) with what was
    # offered.
    start_recv
    printf 'x' >"$WORK/$(printf 'a\tb')"
    # A name with a control character is refused by the sender's walk
    # before it is offered (the receiver would refuse it: spec 14.4), a
    # local error since aftp send walks its SRC arguments.
    send "$WORK/$(printf 'a\tb')"
    expect_rc "aftp send of a name with a tab" "$SEND_RC" 3
    expect_fixed "$WORK/send.err" "a\x09b"
    expect_fixed "$WORK/send.err" "control character"
    send 'faux:///big?1T'
    expect_rc "aftp send of 1 TiB to a smaller disk" "$SEND_RC" 5
    expect_fixed "$WORK/send.err" "aftp: error: 127.0.0.1:$PORT refused big: not enough space on the receiver"
    stop_recv
    expect_nothing_delivered
    start_liar refuse-limit
    send 'faux:///big?1T' --cipher none --idle-timeout 5
    wait "$LIAR"
    expect_rc "aftp send refused with LIMIT" "$SEND_RC" 5
    expect_text "$WORK/send.err" "^aftp: error: 127\.0\.0\.1:$PORT refused big: the offer exceeds a limit of the receiver \(offered 1099511627776 bytes in 780903145 blocks of 1408 bytes, datagrams of 1452 bytes\)$" ;;
usage)
    "$AFTP" send 'faux:///x?1Q' 127.0.0.1:1 2>"$WORK/u12.err"
    expect_rc "bad faux size" $? 2
    expect_text "$WORK/u12.err" "^aftp: error: bad faux source 'faux:///x\?1Q': SIZE must be"
    "$AFTP" send 'faux:///a/b?1' 127.0.0.1:1 2>"$WORK/u13.err"
    expect_rc "faux name with a slash" $? 2
    "$AFTP" recv --listen 127.0.0.1:0 --dir faux:///x 2>"$WORK/u14.err"
    expect_rc "faux destination with a path" $? 2
    "$AFTP" send --rate 12X f 127.0.0.1:1 2>"$WORK/u1.err"
    expect_rc "bad rate" $? 2
    expect_text "$WORK/u1.err" "^aftp: error: bad rate '12X'"
    "$AFTP" send f 127.0.0.1:99999 2>"$WORK/u2.err"
    expect_rc "bad port" $? 2
    expect_text "$WORK/u2.err" "^aftp: error: bad address '127\.0\.0\.1:99999'"
    "$AFTP" send --mtu 1000 f 127.0.0.1:1 2>"$WORK/u10.err"
    expect_rc "MTU too small" $? 2
    expect_text "$WORK/u10.err" "^aftp: error: bad MTU '1000' \(bytes of an IP packet on the path, 1248 to 9216"
    "$AFTP" recv --listen 127.0.0.1:0 --dir "$WORK" --mtu 9217 2>"$WORK/u11.err"
    expect_rc "MTU too large" $? 2
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
    expect_text "$WORK/u5.err" "^${STAMP}aftp: error: cannot use destination directory"
    "$AFTP" send --cipher rot13 f 127.0.0.1:1 2>"$WORK/u9.err"
    expect_rc "bad cipher" $? 2
    expect_text "$WORK/u9.err" "^aftp: error: bad cipher 'rot13' \(auto, aes, chacha or none\)"
    "$AFTP" keygen extra 2>"$WORK/u10.err"
    expect_rc "keygen with an argument" $? 2
    "$AFTP" keygen --help >"$WORK/kh.out"
    expect_rc "keygen --help" $? 0
    expect_text "$WORK/kh.out" "^usage: aftp keygen"
    "$AFTP" frobnicate 2>"$WORK/u6.err"
    expect_rc "unknown command" $? 2
    "$AFTP" --help >"$WORK/help.out"
    expect_rc "--help" $? 0
    expect_text "$WORK/help.out" "^usage: aftp send"
    "$AFTP" --version >"$WORK/version.out"
    expect_rc "--version" $? 0
    expect_text "$WORK/version.out" "^aftp [0-9]+\.[0-9]+\.[0-9]+" ;;
# ---- aftp send --json: every line an object of cli/JSON.md's schema ----
json_ok)
    # 3 MiB at a fixed 24 Mbit/s: about a second, several progress objects
    make_file src.bin $((3 << 20))
    start_recv --once
    send "$WORK/src.bin" --json --policy fixed --rate 24M
    expect_rc "aftp send --json" "$SEND_RC" 0 # (before waiting for a receiver left waiting)
    wait_recv
    expect_rc "aftp recv" "$RECV_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    check_json "$WORK/send.out" 0
    [ "$(grep -c '"type":"progress"' "$WORK/send.out")" -ge 2 ] || fail "fewer than 2 progress objects"
    ! grep -q '^sent ' "$WORK/send.out" || fail "the human summary line is on stdout with --json"
    digest=$(json_field "$WORK/send.out" done digest)
    expect_text "$WORK/recv.out" "xxh3-128 $digest, $(auto_cipher),"
    [ "$(json_field "$WORK/send.out" done cipher)" = "$(auto_cipher)" ] || fail "done names another cipher" ;;
json_usage)
    "$AFTP" send --json --rate 12X f 127.0.0.1:1 >"$WORK/send.out" 2>"$WORK/send.err"
    expect_rc "aftp send --json --rate 12X" $? 2
    check_json "$WORK/send.out" 2 AFTP_ERR_INVALID_ARGUMENT
    expect_text "$WORK/send.out" '"message":"bad rate .12X.'
    expect_text "$WORK/send.err" "^aftp: error: bad rate '12X'" ;;
json_local_file)
    PORT=9
    send "$WORK/no-such-file" --json
    expect_rc "aftp send --json" "$SEND_RC" 3
    check_json "$WORK/send.out" 3 AFTP_ERR_NOT_FOUND
    expect_text "$WORK/send.out" '"message":"cannot send .*no-such-file: .*No such file or directory"'
    # the walk of the SRC arguments says which step failed
    expect_text "$WORK/send.err" "^aftp: error: cannot send .*no-such-file: .*No such file or directory$" ;;
json_refused)
    make_file src.bin 5000
    echo "precious" >"$WORK/dst/src.bin"
    start_recv --once
    send "$WORK/src.bin" --json
    expect_rc "aftp send --json" "$SEND_RC" 5
    wait_recv
    check_json "$WORK/send.out" 5 AFTP_ERR_FILE_EXISTS
    expect_fixed "$WORK/send.out" "refused src.bin: it exists at the receiver" ;;
json_network)
    # Nobody listens (refused), then nobody answers (silence): both exit 4.
    start_recv
    kill "$RECV_PID"
    wait_recv
    make_file src.bin 1000
    send "$WORK/src.bin" --json --idle-timeout 20
    expect_rc "aftp send --json to nobody" "$SEND_RC" 4
    check_json "$WORK/send.out" 4 AFTP_ERR_NETWORK
    expect_fixed "$WORK/send.out" "is unreachable: connection refused"
    start_silent
    send "$WORK/src.bin" --json --idle-timeout 1
    kill "$SILENT"
    expect_rc "aftp send --json to a silent peer" "$SEND_RC" 4
    check_json "$WORK/send.out" 4 AFTP_ERR_IDLE_TIMEOUT ;;
json_auth)
    # The server holds another key than the pinned one.
    make_file src.bin 5000
    start_recv --once
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/send.pub")
    send "$WORK/src.bin" --json --idle-timeout 20
    expect_rc "aftp send --json" "$SEND_RC" 8
    check_json "$WORK/send.out" 8 AFTP_ERR_AUTH
    stop_recv
    # A key file that is not there: before the library, the class's code.
    "$AFTP" send --json --identity "$KEYS/nope" --peer-key "$KEYS/recv.pub" f 127.0.0.1:9 \
        >"$WORK/send2.out" 2>"$WORK/send2.err"
    expect_rc "aftp send --json without an identity" $? 8
    check_json "$WORK/send2.out" 8 AFTP_ERR_AUTH
    expect_text "$WORK/send2.out" '"message":"identity key: .*nope: no such file' ;;
json_cancelled)
    make_file src.bin $((32 << 20))
    start_recv
    "$AFTP" send "${SEND_KEYS[@]}" --json --policy fixed --rate 50M "$WORK/src.bin" "127.0.0.1:$PORT" \
        >"$WORK/send.out" 2>"$WORK/send.err" &
    pid=$!
    for _ in $(seq 100); do grep -q '"type":"progress"' "$WORK/send.out" && break; sleep 0.05; done
    kill -TERM "$pid"
    wait "$pid"
    expect_rc "aftp send --json cancelled" $? 7
    stop_recv
    check_json "$WORK/send.out" 7 AFTP_ERR_CANCELLED
    expect_fixed "$WORK/send.out" "transfer of src.bin to 127.0.0.1:$PORT cancelled here"
    expect_fixed "$WORK/send.out" '"type":"progress"' ;;
json_digest_lie)
    start_liar digest-lie
    make_file src.bin 100000
    send "$WORK/src.bin" --json --cipher none --idle-timeout 5
    wait "$LIAR"
    expect_rc "aftp send --json" "$SEND_RC" 6
    check_json "$WORK/send.out" 6 AFTP_ERR_DIGEST_MISMATCH
    ! grep -q '"type":"done"' "$WORK/send.out" || fail "a done object for an unverified file" ;;
# ---- aftp recv --json: every line an object of cli/JSON.md's schema ----
json_recv_ok)
    # 3 MiB at 24 Mbit/s: several progress objects, then the receipt
    make_file src.bin $((3 << 20))
    start_recv --once --json
    send "$WORK/src.bin" --policy fixed --rate 24M
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 0
    expect_rc "aftp recv --json" "$RECV_RC" 0
    check_json --recv "$WORK/recv.out" 0
    [ "$(grep -c '"type":"progress"' "$WORK/recv.out")" -ge 2 ] || fail "fewer than 2 progress objects"
    ! grep -q '^received ' "$WORK/recv.out" || fail "the human summary line is on stdout with --json"
    digest=$(grep -o 'xxh3-128 [0-9a-f]*' "$WORK/send.out" | cut -d' ' -f2)
    [ "$(json_field "$WORK/recv.out" done digest)" = "$digest" ] || fail "done has another digest than the sender's"
    [ "$(json_field "$WORK/recv.out" done client_key)" = "$(key_of "$KEYS/send.pub")" ] || fail "done names another client key"
    [ "$(json_field "$WORK/recv.out" done client_comment)" = sender ] || fail "done lacks the client's comment"
    [ "$(json_field "$WORK/recv.out" done cipher)" = "$(auto_cipher)" ] || fail "done names another cipher"
    [ "$(json_field "$WORK/recv.out" start server_key)" = "$(key_of "$KEYS/recv.pub")" ] || fail "start names another server key"
    [ "$(json_field "$WORK/recv.out" start listen)" = "127.0.0.1:$PORT" ] || fail "start names another address"
    expect_text "$WORK/recv.out" '"fingerprint":"SHA256:[A-Za-z0-9+/]{43}"' ;;
json_recv_usage)
    "$AFTP" recv --json --dir "$WORK/dst" >"$WORK/recv.out" 2>"$WORK/recv.err"
    expect_rc "aftp recv --json without --listen" $? 2
    check_json --recv "$WORK/recv.out" 2 AFTP_ERR_INVALID_ARGUMENT
    expect_text "$WORK/recv.out" '"message":"recv needs --listen' ;;
json_recv_refused)
    # An offer the receiver refuses in a one-file session (a faux:// source
    # is sent so; a name with a control character, used before, is now
    # refused by the sender's walk and never offered): the session fails
    # with its code, and --once ends the run with it.
    start_recv --once --json
    send 'faux:///big?1T'
    wait_recv
    expect_rc "aftp send of 1 TiB to a smaller disk" "$SEND_RC" 5
    expect_rc "aftp recv --json --once" "$RECV_RC" 5
    check_json --recv "$WORK/recv.out" 5 AFTP_ERR_NO_SPACE
    [ "$(json_field "$WORK/recv.out" session_error name)" = AFTP_ERR_NO_SPACE ] ||
        fail "no session_error for the refused offer"
    expect_nothing_delivered ;;
json_recv_unauthorized)
    # A client whose key is not authorized: said as it happens, and the
    # server goes on serving until SIGTERM ends it (exit 0).
    start_recv --json
    send_as_stranger "$WORK/recv.out"
    stop_recv
    expect_rc "aftp recv --json stopped" "$RECV_RC" 0
    check_json --recv "$WORK/recv.out" 0
    grep -F "refused client from 127.0.0.1:" "$WORK/recv.out" | grep -qF "$(key_of "$KEYS/stranger.pub")" ||
        fail "no object names the refused key"
    expect_nothing_delivered ;;
json_recv_busy_port)
    start_recv
    "$AFTP" recv --json --listen "127.0.0.1:$PORT" --dir "$WORK/dst" "${RECV_KEYS[@]}" \
        >"$WORK/second.out" 2>"$WORK/second.err"
    expect_rc "a second aftp recv --json on the port" $? 4
    check_json --recv "$WORK/second.out" 4 AFTP_ERR_NETWORK
    ! grep -q '"type":"start"' "$WORK/second.out" || fail "a start object of a server that never listened"
    expect_fixed "$WORK/second.out" "address in use"
    stop_recv ;;
# ---- the serving receiver: its clients, its port, its destination ----
serve_outlives_clients)
    # A receiver serving without --once outlives a client that cancels
    # (SIGINT), one that is killed (SIGKILL) and one whose file fails
    # verification (the receiver's temporary file is overwritten under it,
    # as a failing disk or another writer would), serving the next client
    # byte-exact each time; SIGTERM then ends it with status 0.
    make_file big.bin $((16 << 20))
    make_file ok.bin 70000
    start_recv --idle-timeout 5
    slow_send() { # runs a slow send of big.bin in the background: SLOW_PID
        "$AFTP" send "${SEND_KEYS[@]}" --policy fixed --rate 20M "$WORK/big.bin" \
            "127.0.0.1:$PORT" >"$WORK/slow.out" 2>"$WORK/slow.err" &
        SLOW_PID=$!
    }
    next_client_served() { # what: ok.bin goes through, byte-exact
        send "$WORK/ok.bin"
        expect_rc "aftp send after a client that $1" "$SEND_RC" 0
        cmp -s "$WORK/ok.bin" "$WORK/dst/ok.bin" || fail "ok.bin differs after a client that $1"
        rm "$WORK/dst/ok.bin"
    }
    slow_send
    sleep 1
    kill -INT "$SLOW_PID"
    wait "$SLOW_PID"
    expect_rc "aftp send interrupted" $? 7
    next_client_served "cancelled"
    slow_send
    sleep 1
    kill -KILL "$SLOW_PID"
    wait "$SLOW_PID"
    next_client_served "was killed"
    slow_send
    for _ in $(seq 100); do
        tmp=$(find "$WORK/dst/.aftp-partial" -name '*.part' 2>/dev/null | head -n 1)
        [ -n "$tmp" ] && break
        sleep 0.05
    done
    [ -n "$tmp" ] || fail "no temporary file for big.bin"
    # The first 64 KiB arrived within 0.3 s at 20 Mbit/s; the receiver
    # reads them back once it holds 8 MiB (aftp_engine.h), seconds later.
    sleep 0.3
    dd if=/dev/urandom of="$tmp" bs=64k count=1 conv=notrunc status=none
    wait "$SLOW_PID"
    expect_rc "aftp send of a file that fails verification" $? 6
    [ ! -e "$WORK/dst/big.bin" ] || fail "a file that failed verification was delivered"
    next_client_served "failed verification"
    stop_recv
    expect_rc "aftp recv stopped by SIGTERM" "$RECV_RC" 0
    expect_text "$WORK/recv.err" "transfer from 127\.0\.0\.1:[0-9]+ .*failed: .*digest" ;;
serve_sigint)
    # The operator's Ctrl-C stops a serving receiver with status 0 too; with
    # --once the status is the transfer's: 7 when stopped before it ended.
    start_recv
    kill -INT "$RECV_PID"
    wait_recv
    expect_rc "aftp recv stopped by SIGINT" "$RECV_RC" 0
    start_recv --once
    kill -TERM "$RECV_PID"
    wait_recv
    expect_rc "aftp recv --once stopped before any transfer" "$RECV_RC" 7 ;;
busy_port)
    # A second receiver on a port another one holds fails at once and says
    # why; the first one keeps serving.
    start_recv
    for addr in 127.0.0.1 0.0.0.0; do
        timeout 10 "$AFTP" recv --listen "$addr:$PORT" --dir "$WORK/dst" "${RECV_KEYS[@]}" \
            >/dev/null 2>"$WORK/second.err"
        expect_rc "a second aftp recv on $addr:$PORT" $? 4
        expect_text "$WORK/second.err" "^${STAMP}aftp: error: cannot listen on ${addr//./\\.}:$PORT: address in use \(another program holds this port, perhaps another 'aftp recv'"
        # the port is found busy first: the key lines of a server that
        # never ran would mislead
        ! grep -q "server key\|server fingerprint" "$WORK/second.err" ||
            fail "a receiver that could not listen printed its key"
    done
    make_file src.bin 70000
    send "$WORK/src.bin"
    expect_rc "aftp send to the first receiver" "$SEND_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    stop_recv ;;
dest_unusable)
    # A destination that does not exist, is not a directory, or where no
    # file can be created: refused when the receiver starts (status 3),
    # before it listens.
    recv_into() { # DIR [wrapper...]: a receiver that must not start
        local dir=$1
        shift
        "$@" timeout 10 "$AFTP" recv --listen 127.0.0.1:0 --dir "$dir" "${RECV_KEYS[@]}" \
            >/dev/null 2>"$WORK/r.err"
        RECV_RC=$?
        grep -q "listening" "$WORK/r.err" && fail "aftp recv into $dir started listening"
    }
    recv_into "$WORK/nope"
    expect_rc "aftp recv into a missing directory" "$RECV_RC" 3
    expect_text "$WORK/r.err" "^${STAMP}aftp: error: cannot use destination directory .*/nope: No such file or directory \(--dir must name an existing directory\)$"
    : >"$WORK/afile"
    recv_into "$WORK/afile"
    expect_rc "aftp recv into a file" "$RECV_RC" 3
    expect_text "$WORK/r.err" "^${STAMP}aftp: error: cannot use destination directory .*/afile: Not a directory"
    # Unwritable: permission bits do not stop root, a read-only mount does.
    if [ "$(id -u)" -ne 0 ]; then
        chmod 555 "$WORK/dst"
        recv_into "$WORK/dst" env
        chmod 755 "$WORK/dst"
        want="Permission denied"
    elif unshare -m true 2>/dev/null; then
        recv_into "$WORK/dst" unshare -m --propagation private sh -c \
            'mount -t tmpfs -o ro tmpfs "$0" && exec "$@"' "$WORK/dst"
        want="Read-only file system"
    else
        echo "SKIP: root without unshare -m cannot make a read-only destination"
        exit 77
    fi
    expect_rc "aftp recv into an unwritable directory" "$RECV_RC" 3
    expect_text "$WORK/r.err" "^${STAMP}aftp: error: cannot use destination directory .*/dst: cannot create a file in it: $want$" ;;
overwrite_directory)
    # A directory at the final name is never replaced, --overwrite or not:
    # the sender is refused with PATH_REJECTED (not "needs --overwrite"),
    # the receiver says what is in the way, the directory is untouched.
    mkdir "$WORK/dst/src.bin"
    echo keep >"$WORK/dst/src.bin/inside"
    make_file src.bin 5000
    touch "$WORK/stamp"
    start_recv --once --overwrite
    send "$WORK/src.bin"
    wait_recv
    expect_rc "aftp send" "$SEND_RC" 5
    expect_rc "aftp recv" "$RECV_RC" 5
    grep -q -e "--overwrite" "$WORK/send.err" && fail "the sender was told to use --overwrite"
    expect_text "$WORK/recv.err" "cannot store src\.bin: a directory is there, and only files are replaced"
    [ "$(cat "$WORK/dst/src.bin/inside")" = keep ] || fail "the directory was changed"
    [ -z "$(find "$WORK/dst" -name '.src.bin.aftp-*')" ] || fail "temporary left behind" ;;
dropped_hellos_logged)
    # Handshakes the server answers with silence (spec 14.2.5) are
    # explained in its log, at most 6 lines a minute: a client that pinned
    # another server key, one whose pre-shared key differs (named by its
    # key). The server then serves a right client.
    "$AFTP" keygen -f "$KEYS/psk" >/dev/null && "$AFTP" keygen -f "$KEYS/psk2" >/dev/null
    RECV_KEYS+=(--psk-file "$KEYS/psk")
    start_recv
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/send.pub" --psk-file "$KEYS/psk")
    make_file src.bin 5000
    send "$WORK/src.bin" --idle-timeout 2
    expect_rc "aftp send with a wrong server key" "$SEND_RC" 8 # its key request finds another key
    expect_text "$WORK/recv.err" "^${STAMP}aftp: error: a client at 127\.0\.0\.1:[0-9]+ sent a handshake this server cannot open \(it may have pinned another server key\)$"
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/recv.pub" --psk-file "$KEYS/psk2")
    send "$WORK/src.bin" --idle-timeout 2
    expect_rc "aftp send with another psk" "$SEND_RC" 4
    expect_fixed "$WORK/recv.err" "key $(key_of "$KEYS/send.pub") \"sender\": the rest of its handshake does not open with this server's pre-shared key (--psk-file differs)"
    # one line per attempt (not per resent HELLO), 6 attempts a minute
    [ "$(grep -c "handshake" "$WORK/recv.err")" -eq 2 ] || fail "not one line per attempt"
    for _ in 1 2 3 4 5; do
        send "$WORK/src.bin" --idle-timeout 1
    done
    lines=$(grep -c "handshake" "$WORK/recv.err")
    [ "$lines" -eq 6 ] || fail "$lines lines about 7 dropped handshakes within a minute, 6 expected"
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/recv.pub" --psk-file "$KEYS/psk")
    send "$WORK/src.bin"
    expect_rc "aftp send with the right keys" "$SEND_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    stop_recv
    expect_rc "aftp recv" "$RECV_RC" 0 ;;
replayed_hello_logged)
    # A recorded HELLO played again from another address: the server
    # refuses its timestamp in silence (spec 14.2.4), logs it with the
    # client's key and the reason, and serves the next client.
    command -v python3 >/dev/null || { echo "SKIP: python3 needed to record and replay a HELLO"; exit 77; }
    start_recv
    # A relay between client and server that keeps the client's first
    # datagram (its HELLO).
    python3 - "$PORT" "$WORK/hello.bin" >"$WORK/relay.port" <<'PY' &
import select, socket, sys, time
server = ("127.0.0.1", int(sys.argv[1]))
c = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); c.bind(("127.0.0.1", 0))
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0))
print(c.getsockname()[1], flush=True)
client = None
end = time.time() + 60
while time.time() < end:
    for sock in select.select([c, s], [], [], 0.5)[0]:
        data, src = sock.recvfrom(65536)
        if sock is c:
            if client is None:
                open(sys.argv[2], "wb").write(data)
            client = src
            s.sendto(data, server)
        elif client is not None:
            c.sendto(data, client)
PY
    RELAY=$!
    for _ in $(seq 100); do [ -s "$WORK/relay.port" ] && break; sleep 0.05; done
    make_file src.bin 5000
    "$AFTP" send "${SEND_KEYS[@]}" "$WORK/src.bin" "127.0.0.1:$(cat "$WORK/relay.port")" \
        >"$WORK/send.out" 2>"$WORK/send.err"
    SEND_RC=$?
    kill "$RELAY"
    expect_rc "aftp send through the relay" "$SEND_RC" 0
    [ -s "$WORK/hello.bin" ] || fail "the relay recorded no HELLO"
    replay() { # N: plays the HELLO again (from a port of its own), waits for the N-th log line
        python3 -c 'import socket, sys
s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
s.sendto(open(sys.argv[2], "rb").read(), ("127.0.0.1", int(sys.argv[1])))' "$PORT" "$WORK/hello.bin"
        for _ in $(seq 100); do
            [ "$(grep -c "replayed" "$WORK/recv.err")" -ge "$1" ] && break
            sleep 0.05
        done
    }
    replay 1
    expect_fixed "$WORK/recv.err" "key $(key_of "$KEYS/send.pub") \"sender\": its handshake repeats one already used: a replayed HELLO"
    expect_text "$WORK/recv.err" "^${STAMP}aftp: error: ignored a handshake from 127\.0\.0\.1:[0-9]+ key "
    # SIGHUP reloads the authorized keys, not the timestamps already used:
    # the same HELLO is still a replay.
    kill -HUP "$RECV_PID"
    for _ in $(seq 100); do grep -q "reloaded" "$WORK/recv.err" && break; sleep 0.05; done
    expect_text "$WORK/recv.err" "^${STAMP}aftp: reloaded 1 key from "
    replay 2
    [ "$(grep -c "its handshake repeats one already used: a replayed HELLO" "$WORK/recv.err")" = 2 ] ||
        fail "the HELLO replayed after the reload was not refused as a replay"
    rm "$WORK/dst/src.bin"
    send "$WORK/src.bin"
    expect_rc "aftp send after the replay" "$SEND_RC" 0
    cmp -s "$WORK/src.bin" "$WORK/dst/src.bin" || fail "received file differs"
    stop_recv
    expect_rc "aftp recv" "$RECV_RC" 0 ;;
*)
    echo "unknown case $CASE" >&2
    exit 2 ;;
esac
echo "PASS [$CASE]"
