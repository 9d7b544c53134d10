#!/usr/bin/env bash
# WAN integration test (ctest label "wan"): the real aftp moves a random file
# between two network namespaces over an emulated WAN (netem/wan.sh) and the
# copy must be exact: both sides exit 0, the file exists under its final
# name, nothing else (no temporary) is left beside it, and the sha256 of the
# copy equals the source's. The transfer is encrypted and authenticated with
# a key pair per side made for the run (bench/wan/aftp_pair.sh).
#
# usage: wan_transfer.sh AFTP LINKEMU PROFILE SIZE_MIB SECONDS
#   SECONDS bounds each attempt (both aftp processes are killed after it).
# A run during which the emulator reported overload (its verdict "invalid",
# netem/wan.sh exit 3) is repeated once, then fails with that message.
# Files live in memory (/dev/shm) when there is room, see bench/wan/scratch.sh;
# AFTP_WAN_DIR overrides.
# Exit: 0 pass, 1 fail, 77 skip (no network namespace can be created).
set -uo pipefail
[ $# -eq 5 ] || { echo "usage: $0 AFTP LINKEMU PROFILE SIZE_MIB SECONDS" >&2; exit 2; }
aftp=$1 linkemu=$2 profile=$3 size_mib=$4 limit=$5
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# shellcheck source=bench/wan/scratch.sh
. "$root/bench/wan/scratch.sh"
# The source and its copy: twice the size, plus room to spare.
work=$(mktemp -d "$(pick_scratch_dir $((3 * size_mib * 1048576)))/aftp-wan-test.XXXXXX")
trap 'rm -rf "$work"' EXIT
name=payload.bin

fail() {
    echo "FAIL [$profile]: $*" >&2
    for f in "$work"/run.*; do
        [ -s "$f" ] && { echo "--- $(basename "$f")"; tail -n 20 "$f"; } >&2
    done
    exit 1
}

head -c "$((size_mib * 1048576))" /dev/urandom >"$work/$name"
want=$(sha256sum <"$work/$name" | cut -d' ' -f1)

for attempt in 1 2; do
    rm -rf "$work/dst" "$work"/run.*
    mkdir "$work/dst"
    start=$(date +%s)
    rc=0
    "$root/netem/wan.sh" --profile "$profile" --linkemu "$linkemu" --stats "$work/stats.json" -- \
        "$root/bench/wan/aftp_pair.sh" "$aftp" "$work/$name" "$work/dst" auto "$limit" \
        "$work/run" 2>"$work/run.wan.err" || rc=$?
    echo "attempt $attempt: netem/wan.sh exit $rc after $(($(date +%s) - start)) s" \
         "($(tail -n 1 "$work/run.wan.err"))"
    [ "$rc" -ne 77 ] || { echo "SKIP: $(tail -n 1 "$work/run.wan.err")"; exit 77; }
    # An overloaded emulator did not reproduce the profile faithfully: the run
    # is repeated once. What this test asserts, a complete and verified
    # delivery, holds on any link, so a second overloaded run is still checked
    # (and said to be untrusted as a profile measurement).
    if [ "$rc" -eq 3 ] || ! grep -q '"valid":true}$' "$work/stats.json" 2>/dev/null; then
        if [ "$attempt" -eq 1 ]; then
            echo "the link emulator was overloaded (other load on this machine?): retrying once"
            sleep 5
            continue
        fi
        echo "NOTE: the link emulator was overloaded again; checking delivery anyway:" \
             "$(cat "$work/stats.json")"
        [ "$rc" -ne 3 ] || rc=0 # 3: the command itself succeeded
    fi
    break
done

send_rc=$(cat "$work/run.send.rc" 2>/dev/null || echo missing)
recv_rc=$(cat "$work/run.recv.rc" 2>/dev/null || echo missing)
[ "$send_rc" = 0 ] || fail "aftp send exited $send_rc (124: killed after $limit s)"
[ "$recv_rc" = 0 ] || fail "aftp recv exited $recv_rc (124: killed after $limit s)"
[ "$rc" -eq 0 ] || fail "netem/wan.sh exited $rc"
left=$(cd "$work/dst" && find . -mindepth 1 | sort)
[ "$left" = "./$name" ] || fail "the destination should hold only $name, it holds: ${left:-nothing}"
got=$(sha256sum <"$work/dst/$name" | cut -d' ' -f1)
[ "$got" = "$want" ] || fail "sha256 differs: sent $want, received $got"
# The run was protected: aftp_pair.sh made a key pair per side (run.keys/),
# and both summary lines name the cipher, the receiver's the client's key.
[ -s "$work/run.keys/send.pub" ] || fail "no per-run keys were made (aftp keygen)"
grep -Eq ', (aes-256-gcm|chacha20-poly1305)$' "$work/run.send.out" ||
    fail "the sender's summary does not name a cipher: the transfer was not protected"
grep -qF "key $(cut -d' ' -f1,2 "$work/run.keys/send.pub")" "$work/run.recv.out" ||
    fail "the receiver did not authenticate the client's key"
echo "ok: $size_mib MiB over $profile, rate $(cat "$work/run.rate") (none: the controller's own), sha256 $got"
cat "$work/run.send.out" "$work/run.recv.out"
