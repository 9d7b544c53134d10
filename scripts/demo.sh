#!/usr/bin/env bash
# aftp's main job on its default settings: build, then push a generated file
# from `aftp send` to `aftp recv` across an emulated 1 Gbit/s, 150 ms, 1% loss
# WAN (two network namespaces, netem/), and the same file with scp over the
# same link, and print both rates and the verified digests (bench/wan.sh).
# Without network namespaces, the transfer runs between two local endpoints
# over loopback instead.
#   AFTP_DEMO_SIZE_MB  size of the generated file (default 256)
#   AFTP_DEMO_PROFILE  a netem/profiles/ name (default wan-150ms-1pct)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/deps.sh
aftp_install_deps

size_mb=${AFTP_DEMO_SIZE_MB:-256}
profile=${AFTP_DEMO_PROFILE:-wan-150ms-1pct}
build=build/demo
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAFTP_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
aftp=$build/cli/aftp

rc=0
bench/wan.sh --aftp "$aftp" --profile "$profile" --only aftp,scp --size "$size_mb" || rc=$?
[ "$rc" -eq 77 ] || exit "$rc"

echo "demo: no network namespaces here; running over loopback instead"
work=$(mktemp -d)
recv_pid=
cleanup() { [ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/in" "$work/out"
head -c "$((size_mb * 1024 * 1024))" /dev/urandom >"$work/in/demo.bin"
# A key pair per side; the receiver admits the sender's key, the sender pins
# the key the receiver prints when it starts (a known-hosts line).
mkdir -m 700 "$work/keys"
"$aftp" keygen -f "$work/keys/recv" -C demo-receiver >/dev/null
"$aftp" keygen -f "$work/keys/send" -C demo-sender >/dev/null
"$aftp" recv --listen 127.0.0.1:0 --dir "$work/out" --once --identity "$work/keys/recv" \
    --authorized-keys "$work/keys/send.pub" 2>"$work/recv.err" &
recv_pid=$!
port=
for _ in $(seq 100); do
    port=$(sed -n 's/^aftp: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/recv.err")
    [ -n "$port" ] && break
    sleep 0.05
done
[ -n "$port" ] || { cat "$work/recv.err" >&2; exit 1; }
echo "127.0.0.1:$port $(sed -n 's/^aftp: server key //p' "$work/recv.err")" >"$work/keys/known_hosts"
"$aftp" send --identity "$work/keys/send" --known-hosts "$work/keys/known_hosts" \
    "$work/in/demo.bin" "127.0.0.1:$port"
wait "$recv_pid"
recv_pid=
cmp -s "$work/in/demo.bin" "$work/out/demo.bin" || { echo "demo: received file differs" >&2; exit 1; }
echo "demo: received file matches the source (sha256 $(sha256sum <"$work/out/demo.bin" | cut -d' ' -f1))"
