# shellcheck shell=bash
# Shared by the loopback test scripts (sourced, not run): a case's
# failure, the keys of a protected run, the wait for a receiver's port and
# the time its log lines begin with. The script that sources it sets AFTP
# (the binary), WORK (its scratch directory) and CASE (the case's name).

# No case reads or writes the user's caches: aftp send's path memory
# (its remembered start rates) lives in WORK.
export XDG_CACHE_HOME="$WORK/cache"

# fail MESSAGE...: the case CASE (else the script) fails: MESSAGE, then
# what its programs wrote (WORK/*.out, WORK/*.err, 4000 bytes of each),
# on stderr.
fail() {
    echo "FAIL [${CASE:-$(basename "$0" .sh)}]: $*" >&2
    for f in "$WORK"/*.out "$WORK"/*.err; do
        [ -s "$f" ] && { echo "--- $f"; head -c 4000 "$f"; } >&2
    done
    exit 1
}

# make_keys: one key pair per side made by `aftp keygen` in WORK/keys, the
# sender's public key authorized, the receiver's pinned; sets KEYS,
# RECV_KEYS and SEND_KEYS. HOME points into WORK so that no case reads the
# user's ~/.aftp. Returns non-zero when keygen fails.
make_keys() {
    export HOME="$WORK/home"
    mkdir -p "$HOME"
    KEYS="$WORK/keys"
    mkdir -m 700 "$KEYS"
    "$AFTP" keygen -f "$KEYS/recv" -C receiver >/dev/null &&
        "$AFTP" keygen -f "$KEYS/send" -C sender >/dev/null || return 1
    cp "$KEYS/send.pub" "$KEYS/authorized_keys"
    # shellcheck disable=SC2034 # used by the scripts that source this
    RECV_KEYS=(--identity "$KEYS/recv" --authorized-keys "$KEYS/authorized_keys")
    # shellcheck disable=SC2034
    SEND_KEYS=(--identity "$KEYS/send" --peer-key "$KEYS/recv.pub")
}

# The time a server's log line begins with (aftp recv without --once,
# aftp serve): ISO 8601, UTC, milliseconds, and a blank. An extended
# regex; its lines are matched with "^${STAMP}aftp: ...".
STAMP='[0-9]{4}-[0-1][0-9]-[0-3][0-9]T[0-2][0-9]:[0-5][0-9]:[0-6][0-9]\.[0-9]{3}Z '

# log_value FILE TEXT: what follows "aftp: TEXT" on a line of FILE, a
# receiver's log with or without the time (e.g. log_value recv.err
# "server fingerprint ").
log_value() {
    sed -En "s/^(${STAMP})?aftp: $2//p" "$1"
}

# await_port: waits (up to 5 s) for the receiver RECV_PID to log in
# WORK/recv.err the port the kernel chose on 127.0.0.1; sets PORT.
# Returns non-zero when it exits or stays silent.
await_port() {
    PORT=
    for _ in $(seq 100); do
        PORT=$(log_value "$WORK/recv.err" 'listening on 127\.0\.0\.1:' | grep -E '^[0-9]+$')
        [ -n "$PORT" ] && return 0
        kill -0 "$RECV_PID" 2>/dev/null || return 1
        sleep 0.05
    done
    return 1
}
