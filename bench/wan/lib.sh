# shellcheck shell=bash
# shellcheck disable=SC2154 # rcv, snd and root are the caller's (see each function)
# Sourced by bench/wan/tools.sh, bench/wan/compete.sh (inside netem/wan.sh's
# command namespace) and bench/tree.sh: what they need to talk to the
# emulator, the hosts (their TCP settings) and a private sshd.

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

# TCP's buffers may grow to 64 MiB in the two private hosts (per network
# namespace: the host's own settings are untouched): with the 4 MiB default
# one TCP flow is window-limited to ~220 Mbit/s at 150 ms.
tcp_buffers() {
    "${snd[@]}" sysctl -qw net.ipv4.tcp_wmem="4096 16384 67108864"
    "${rcv[@]}" sysctl -qw net.ipv4.tcp_rmem="4096 131072 67108864"
}

tcp_buffers_note() { # what autotuning may grow to, as the hosts say now
    echo "autotuning up to tcp_wmem $("${snd[@]}" cat /proc/sys/net/ipv4/tcp_wmem | awk '{print $3}') B" \
         "(sender), tcp_rmem $("${rcv[@]}" cat /proc/sys/net/ipv4/tcp_rmem | awk '{print $3}') B (receiver)"
}

# --- a private sshd for scp, sftp and rsync ---------------------------------------
# ssh_setup DIR ADDR PORT: starts an sshd of its own on the receiver host
# ("${rcv[@]}", the caller's command prefix; empty on loopback) listening on
# ADDR:PORT only: its own host key and config in DIR, key-only login with a
# generated client key, the host key pinned. Clients on the sender host
# ("${snd[@]}") reach it as `ssh -F $ssh_dir/ssh_config wanrcv`. Sets ssh_dir
# and sshd_pid; ssh_teardown stops it.
ssh_dir='' sshd_pid=''
ssh_setup() {
    ssh_dir=$1
    local addr=$2 port=$3
    mkdir -m 700 "$ssh_dir"
    ssh-keygen -q -t ed25519 -N '' -C aftp-bench-host -f "$ssh_dir/host_key"
    ssh-keygen -q -t ed25519 -N '' -C aftp-bench-client -f "$ssh_dir/client_key"
    cp "$ssh_dir/client_key.pub" "$ssh_dir/authorized_keys"
    local known=$addr
    [ "$port" = 22 ] || known="[$addr]:$port"
    echo "$known $(cut -d' ' -f1,2 "$ssh_dir/host_key.pub")" >"$ssh_dir/known_hosts"
    cat >"$ssh_dir/sshd_config" <<EOC
ListenAddress $addr:$port
HostKey $ssh_dir/host_key
PidFile none
AuthorizedKeysFile $ssh_dir/authorized_keys
AuthenticationMethods publickey
PubkeyAuthentication yes
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
Subsystem sftp internal-sftp
LogLevel INFO
EOC
    cat >"$ssh_dir/ssh_config" <<EOC
Host wanrcv
    HostName $addr
    Port $port
    User $(id -un)
    IdentityFile $ssh_dir/client_key
    IdentitiesOnly yes
    UserKnownHostsFile $ssh_dir/known_hosts
    GlobalKnownHostsFile /dev/null
    StrictHostKeyChecking yes
    BatchMode yes
    Compression no
    LogLevel ERROR
EOC
    [ "$(id -u)" -ne 0 ] || mkdir -p /run/sshd # sshd's privilege separation directory
    "${rcv[@]}" /usr/sbin/sshd -D -f "$ssh_dir/sshd_config" -E "$ssh_dir/sshd.log" &
    sshd_pid=$!
    wait_listening t "$port" "${rcv[@]}" ||
        { echo "bench: sshd did not start: $(cat "$ssh_dir/sshd.log")" >&2; return 1; }
    "${snd[@]}" ssh -F "$ssh_dir/ssh_config" wanrcv true ||
        { echo "bench: ssh login to the private sshd failed: $(tail -n 3 "$ssh_dir/sshd.log")" >&2; return 1; }
}

# shellcheck disable=SC2317 # reached through the callers' EXIT traps
ssh_teardown() {
    [ -n "$sshd_pid" ] || return 0
    kill -TERM "$sshd_pid" 2>/dev/null
    wait "$sshd_pid" 2>/dev/null
    sshd_pid=''
}

# The newest build*/PATH or build*/*/PATH (e.g. build/dev/cli/aftp) among
# the build directories that are neither
# sanitizer nor fuzzing builds (those are many times slower: a slow link
# emulator is an overloaded one, a slow aftp skews its figures).
newest_optimised() { # PATH inside a build directory, e.g. cli/aftp
    local bin dir best='' best_time=0 t
    for bin in "$root"/build*/"$1" "$root"/build*/*/"$1"; do # $root: the caller's source tree
        [ -x "$bin" ] || continue
        dir=${bin%/"$1"}
        grep -Eq '^AFTP_(SANITIZE|FUZZ):BOOL=ON' "$dir/CMakeCache.txt" 2>/dev/null && continue
        t=$(stat -c %Y "$bin")
        [ "$t" -le "$best_time" ] || { best=$bin best_time=$t; }
    done
    echo "$best"
}
