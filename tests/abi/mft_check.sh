#!/bin/sh
# The MFT example of examples/ as its README tells an embedder to use it:
# installs the build into a temporary prefix (install_prefix.sh), compiles
# mft_server.c and mft_client.c outside aftp's tree with
# `pkg-config --cflags --libs aftp` alone (warnings as errors), makes the
# keys with the installed `aftp keygen`, and over 127.0.0.1:
#   - two partners each send a file: it lands byte for byte in that
#     partner's directory only, and the audit log gets exactly one line for
#     it, naming the partner, the size, the path and the digest the client
#     was given (also checked against libxxhash's XXH3-128 when Python can
#     load it);
#   - a key the partners file does not list is refused: the client fails,
#     nothing lands, no audit line;
#   - SIGTERM stops the server, which exits 0.
# Usage: mft_check.sh BUILD_DIR EXAMPLES_DIR CC [CFLAGS]
#   CFLAGS: the build's sanitizer flags, which a program linking an
#   instrumented libaftp needs as well.
set -eu
[ $# -ge 3 ] || { echo "usage: $0 BUILD_DIR EXAMPLES_DIR CC [CFLAGS]" >&2; exit 2; }
build=$1
examples=$2
cc=$3
cflags=${4:-}

# shellcheck source=tests/abi/install_prefix.sh
. "$(dirname "$0")/install_prefix.sh"
install_prefix "$build"
server_pid=
stop_and_clean() {
    [ -z "$server_pid" ] || kill "$server_pid" 2>/dev/null || true
    install_prefix_restore
}
trap stop_and_clean EXIT

# The programs find the temporary prefix's libaftp.so at run time this way,
# so that they are built with pkg-config's flags and nothing else.
LD_LIBRARY_PATH=$(pkg-config --variable=libdir aftp)${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}
export LD_LIBRARY_PATH
cd "$work"
for program in mft_server mft_client; do
    # shellcheck disable=SC2046,SC2086 # pkg-config's output is word lists
    $cc $cflags -Wall -Wextra -Werror "$examples/$program.c" $(pkg-config --cflags --libs aftp) \
        -o "$program" || fail "$program.c did not build with pkg-config --cflags --libs aftp"
done

for name in server acme globex stranger; do
    "$prefix/bin/aftp" keygen -f "$name" -C "$name" >/dev/null
done
# The server runs in srv/ (its own directory, where a client admitted
# without a partner directory would land), the clients send from out/.
mkdir -p in/acme in/globex srv out
{
    echo "# NAME DIRECTORY KEY"
    echo "acme $work/in/acme $(cat acme.pub)"
    # The key's base64 alone, without the "aftp-x25519" word.
    echo "globex $work/in/globex $(cut -d' ' -f2 globex.pub)"
} >partners

# The files exist before the server starts: the shell opens a background
# command's redirections in the child, which may not have run when the loop
# below first reads server.out.
: >server.out
: >server.err
(cd srv && exec ../mft_server 127.0.0.1:0 ../server ../partners ../audit.log) >server.out 2>server.err &
server_pid=$!
port=
tries=0
while [ -z "$port" ]; do
    kill -0 "$server_pid" 2>/dev/null || { cat server.err; fail "mft_server exited before listening"; }
    [ $tries -lt 600 ] || { cat server.err; fail "mft_server did not say its port in 60 s"; }
    port=$(sed -n 's/^listening on port \([0-9][0-9]*\)$/\1/p' server.out)
    [ -n "$port" ] || { sleep 0.1; tries=$((tries + 1)); }
done

# xxh3_128 FILE: the file's XXH3-128 in hex (canonical, big-endian) from
# libxxhash, or nothing when Python cannot load it.
xxh3_128() {
    python3 - "$1" 2>/dev/null <<'PY' || true
import ctypes, sys
class H(ctypes.Structure):
    _fields_ = [("low64", ctypes.c_uint64), ("high64", ctypes.c_uint64)]
lib = ctypes.CDLL("libxxhash.so.0")
lib.XXH3_128bits.restype = H
lib.XXH3_128bits.argtypes = [ctypes.c_char_p, ctypes.c_size_t]
data = open(sys.argv[1], "rb").read()
h = lib.XXH3_128bits(data, len(data))
print("%016x%016x" % (h.high64, h.low64))
PY
}

# landed FILE: where the server put FILE (a base name), one path a line.
landed() {
    find in srv -name "$1"
}

# send_as PARTNER FILE: PARTNER sends out/FILE; it must land in PARTNER's
# directory alone, with one audit line that has the client's digest.
send_as() {
    partner=$1
    file=$2
    ./mft_client "$partner" server.pub "127.0.0.1:$port" "out/$file" >"$partner.out" \
        2>"$partner.err" ||
        { cat "$partner.out" "$partner.err" server.err; fail "mft_client as $partner failed"; }
    [ "$(landed "$file")" = "in/$partner/$file" ] ||
        fail "$partner's $file landed at '$(landed "$file")', not in/$partner/ alone"
    cmp "out/$file" "in/$partner/$file" || fail "in/$partner/$file is not what $partner sent"
    size=$(wc -c <"out/$file")
    digest=$(sed -n "s/^sent $file $size bytes .* xxh3=\([0-9a-f]\{32\}\)$/\1/p" \
        "$partner.out")
    [ -n "$digest" ] || { cat "$partner.out"; fail "mft_client printed no 'sent $file' line"; }
    count=$(grep -cF " partner=$partner client=127.0.0.1:" audit.log || true)
    [ "$count" = 1 ] || { cat audit.log; fail "$count audit lines for $partner, expected 1"; }
    line=$(grep -F " partner=$partner " audit.log)
    case $line in
    *" cipher=aes-256-gcm "* | *" cipher=chacha20-poly1305 "*) ;;
    *) fail "the audit line names no cipher: $line" ;;
    esac
    case $line in
    *" size=$size xxh3=$digest path=$work/in/$partner/$file") ;;
    *) fail "the audit line for $partner is not size=$size xxh3=$digest path=$work/in/$partner/$file: $line" ;;
    esac
    independent=$(xxh3_128 "out/$file")
    if [ -n "$independent" ]; then
        [ "$independent" = "$digest" ] ||
            fail "$file: libxxhash's XXH3-128 is $independent, the audit line says $digest"
    else
        echo "note: python3 cannot load libxxhash: the digest is compared between client and server only"
    fi
    echo "ok: $partner: $(tail -n 1 "$partner.out")"
}

head -c 3000000 /dev/urandom >out/acme.dat
head -c 777777 /dev/urandom >"out/globex report.csv"
send_as acme acme.dat
send_as globex "globex report.csv"
[ "$(wc -l <audit.log)" = 2 ] || { cat audit.log; fail "the audit log has $(wc -l <audit.log) lines, expected 2"; }

head -c 1000 /dev/urandom >out/stranger.dat
status=0
./mft_client stranger server.pub "127.0.0.1:$port" out/stranger.dat >stranger.out 2>stranger.err ||
    status=$?
[ $status -ne 0 ] || fail "mft_client with a key the partners file does not list exited 0"
[ -s stranger.err ] || fail "the refused mft_client said nothing on stderr"
[ -z "$(landed stranger.dat)" ] || fail "a refused client's file landed at $(landed stranger.dat)"
[ "$(wc -l <audit.log)" = 2 ] || { cat audit.log; fail "a refused client got an audit line"; }
echo "ok: stranger refused: $(cat stranger.err)"

kill -TERM "$server_pid"
status=0
wait "$server_pid" || status=$?
server_pid=
[ $status -eq 0 ] || { cat server.err; fail "mft_server exited with $status on SIGTERM"; }
echo "ok: mft_server stopped on SIGTERM"
echo "audit log:"
cat audit.log
