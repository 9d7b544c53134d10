# shellcheck shell=bash
# Sourced by bench/wan/run.sh and bench/wan/compete.sh (inside netem/wan.sh's
# command namespace): what both need to talk to the emulator and the hosts.

# A fresh copy of the TUN emulator's report (SIGUSR1 makes it rewrite the file
# by rename), or {} with the netem backend, which has no overload to report.
emu_snapshot() { # FILE
    if [ "$WAN_BACKEND" != tun ] || [ -z "${WAN_EMU_PID:-}" ]; then
        echo '{}' >"$1"
        return
    fi
    local ino
    ino=$(stat -c %i "$WAN_STATS" 2>/dev/null || echo none)
    kill -USR1 "$WAN_EMU_PID" 2>/dev/null || { echo '{}' >"$1"; return; }
    for _ in $(seq 250); do
        [ "$(stat -c %i "$WAN_STATS" 2>/dev/null || echo none)" != "$ino" ] && break
        sleep 0.02
    done
    cp "$WAN_STATS" "$1" 2>/dev/null || echo '{}' >"$1"
}

wait_listening() { # PROTO PORT PREFIX...: polls ss on a host until the port listens
    local proto=$1 port=$2
    shift 2
    for _ in $(seq 100); do
        "$@" ss -Hln"$proto" "sport = :$port" 2>/dev/null | grep -q . && return 0
        sleep 0.05
    done
    return 1
}
