#!/usr/bin/env bash
# aftp's main job on its default setting: build, then push a generated file
# from `aftp send` to `aftp recv` between two local endpoints and verify it.
#   AFTP_DEMO_SIZE_MB  size of the generated file (default 512)
#   AFTP_DEMO_RATE     sending rate (default 1G)
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"
. scripts/deps.sh
aftp_install_deps

size_mb=${AFTP_DEMO_SIZE_MB:-512}
rate=${AFTP_DEMO_RATE:-1G}
build=build/demo
cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAFTP_TESTS=OFF >/dev/null
cmake --build "$build" -j "$(nproc)" >/dev/null
aftp=$build/cli/aftp

work=$(mktemp -d)
recv_pid=
cleanup() { [ -n "$recv_pid" ] && kill "$recv_pid" 2>/dev/null; rm -rf "$work"; }
trap cleanup EXIT
mkdir "$work/in" "$work/out"
echo "generating a ${size_mb} MiB random file"
head -c "$((size_mb * 1024 * 1024))" /dev/urandom >"$work/in/demo.bin"

port=$(python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
"$aftp" recv --listen "127.0.0.1:$port" --dir "$work/out" --once &
recv_pid=$!
sleep 0.2
"$aftp" send --rate "$rate" "$work/in/demo.bin" "127.0.0.1:$port"
wait "$recv_pid"
recv_pid=
src=$(sha256sum <"$work/in/demo.bin" | cut -d' ' -f1)
dst=$(sha256sum <"$work/out/demo.bin" | cut -d' ' -f1)
[ "$src" = "$dst" ] || { echo "demo: sha256 differs: $src vs $dst" >&2; exit 1; }
echo "demo: received file matches the source (sha256 $src)"
