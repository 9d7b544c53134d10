#!/usr/bin/env bash
# Loopback benchmark: aftp with each cipher next to scp and iperf3 (UDP and
# TCP) on this machine, one source file, in the same run. Prints a Markdown
# table (goodput, CPU seconds and CPU seconds per GiB of each side, peak RSS)
# and the ratios encrypted / unencrypted aftp and encrypted aftp / scp.
# A benchmark prints figures; it never passes or fails on a speed.
#
# Usage: bench/loopback.sh [AFTP_BINARY]
#   SIZE=2G        file size (head -c syntax: 2G, 512M...)
#   RATES="3G 5G"  aftp --rate values (the ceiling of the default policy; a
#                  fixed rate above what the receiver absorbs turns into loss)
#   CIPHERS="auto chacha aes none"  aftp --cipher values, one run each per
#                  rate (aes is skipped without AES-NI); every run makes its
#                  own key pairs with `aftp keygen`, none passes --cipher none
#                  to both sides
#   MTUS=1500      aftp --mtu values (both sides), one run each per rate and
#                  cipher: 9000 sends jumbo datagrams of 8952 bytes, as on a
#                  jumbo-frame LAN (loopback carries 64 KiB)
#   AFTP_SEND_OPTS="--policy fixed"  extra aftp send options for every run
#   FAUX=0         1: aftp sends faux:///src.bin?SIZE into --dir faux://
#                  (zeros, no file on either side): the protocol, crypto and
#                  sockets alone, without the page handling of the files
#                  (scp and iperf3 rows are unchanged)
#   REPEAT=1       runs of each aftp and scp configuration, interleaved
#                  (each run is a row; the ratios compare medians)
#   SCP=1          also scp through a private sshd on 127.0.0.1 (0: skip)
#   SECONDS_IPERF=10  duration of each iperf3 run (0: skip iperf3)
#   WARMUP=1       one unreported aftp run (--cipher none) first, and SIZE
#                  bytes of memory written and freed before every run: on a
#                  VM that backs guest memory lazily (and takes freed memory
#                  back), a receiver writing into fresh memory measures that
#                  (~3 s per GiB here), not the transfer (0: skip)
#   BENCH_DIR=/dev/shm  where the source and received files go (2 x SIZE):
#                       tmpfs compares with iperf3's memory to memory; a disk
#                       directory adds the disk (the receiver fsyncs)
# Needs: /usr/bin/time (GNU time); iperf3 + python3 for the iperf3 rows;
# sshd, ssh-keygen and scp (openssh-server, openssh-client) for scp.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
AFTP=${1:-$here/../build/cli/aftp}
SIZE=${SIZE:-2G}
RATES=${RATES:-3G 5G}
CIPHERS=${CIPHERS:-auto chacha aes none}
MTUS=${MTUS:-1500}
SCP=${SCP:-1}
REPEAT=${REPEAT:-1}
SECONDS_IPERF=${SECONDS_IPERF:-10}
[ -x /usr/bin/time ] || { echo "missing: /usr/bin/time (apt-get install time)" >&2; exit 1; }
[ -x "$AFTP" ] || { echo "no aftp binary at $AFTP" >&2; exit 1; }

work=$(mktemp -d "${BENCH_DIR:-/dev/shm}/aftp-bench-XXXXXX")
fstype=$(stat -f -c %T "$work")
sshd_pid=
cleanup() {
    [ -n "$sshd_pid" ] && kill "$sshd_pid" 2>/dev/null
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/dst"

# field FILE NAME: a number from GNU time -v output
field() { sed -n "s/^[[:space:]]*$2: //p" "$1"; }
cpu_s() { awk -v u="$(field "$1" 'User time (seconds)')" -v s="$(field "$1" 'System time (seconds)')" 'BEGIN{printf "%.2f", u+s}'; }
wall_s() { field "$1" 'Elapsed (wall clock) time (h:mm:ss or m:ss)' | awk -F: '{ s = 0; for (i = 1; i <= NF; i++) s = s * 60 + $i; printf "%.3f", s }'; }
rss_mib() { awk -v k="$(field "$1" 'Maximum resident set size (kbytes)')" 'BEGIN{printf "%.1f", k/1024}'; }
per_gib() { awk -v c="$1" -v b="${2:-$bytes}" 'BEGIN{printf "%.2f", c / (b / 1073741824)}'; } # CPU [BYTES]
rows=()
declare -A goodput_of # label -> Mbit/s of each of its runs, for the ratios

# row LABEL GOODPUT SND_CPU RCV_CPU SND_RSS RCV_RSS NOTES
row() {
    goodput_of[$1]+="$2 "
    rows+=("| $1 | $2 | $3 | $4 | $(per_gib "$3") | $(per_gib "$4") | $5 | $6 | $7 |")
}

echo "# source: $SIZE of random bytes in $work" >&2
head -c "$SIZE" /dev/urandom >"$work/src.bin"
bytes=$(stat -c %s "$work/src.bin")

# ---- aftp, one key pair per side for the whole run ----
keys=$work/keys
mkdir -m 700 "$keys"
"$AFTP" keygen -f "$keys/recv" -C bench-receiver >/dev/null
"$AFTP" keygen -f "$keys/send" -C bench-sender >/dev/null

aftp_label() { # rate cipher mtu
    echo "aftp${FAUX_LABEL} --cipher $2 --rate $1 --mtu $3${AFTP_SEND_OPTS:+ $AFTP_SEND_OPTS}"
}
# What aftp sends, and where to.
FAUX_LABEL='' aftp_src=$work/src.bin aftp_dst=$work/dst aftp_where="$fstype to $fstype"
if [ "${FAUX:-0}" = 1 ]; then
    FAUX_LABEL=' faux://' aftp_src="faux:///src.bin?$bytes" aftp_dst=faux:// aftp_where="no files"
fi

# Memory the next run's receiver will write into, touched and freed just
# before (WARMUP): the guest reuses it instead of faulting in fresh pages.
warm_memory() {
    [ "${WARMUP:-1}" = 0 ] && return 0
    head -c "$SIZE" /dev/zero >"$work/warm"
    rm -f "$work/warm"
}

cipher_available() { # aftp --cipher value
    [ "$1" != aes ] || grep -qw aes /proc/cpuinfo
}

aftp_run() { # rate cipher mtu
    local rate=$1 cipher=$2 mtu=$3
    local -a recv_sec=(--identity "$keys/recv" --authorized-keys "$keys/send.pub")
    local -a send_sec=(--identity "$keys/send" --peer-key "$keys/recv.pub")
    if [ "$cipher" = none ]; then
        recv_sec=(--cipher none) send_sec=(--cipher none)
    else
        send_sec+=(--cipher "$cipher")
    fi
    warm_memory
    /usr/bin/time -v -o "$work/recv.time" "$AFTP" recv --listen 127.0.0.1:0 --dir "$aftp_dst" \
        --once --mtu "$mtu" "${recv_sec[@]}" >"$work/recv.out" 2>"$work/recv.err" &
    local rpid=$!
    for _ in $(seq 100); do grep -q "listening on" "$work/recv.err" && break; sleep 0.05; done
    local port
    port=$(sed -n 's/^aftp: listening on 127\.0\.0\.1:\([0-9]*\)$/\1/p' "$work/recv.err")
    # shellcheck disable=SC2086 # AFTP_SEND_OPTS: option words on purpose
    /usr/bin/time -v -o "$work/send.time" "$AFTP" send "${send_sec[@]}" --rate "$rate" \
        --mtu "$mtu" \
        ${AFTP_SEND_OPTS-} "$aftp_src" "127.0.0.1:$port" >"$work/send.out" 2>"$work/send.err" ||
        { cat "$work/send.err" >&2; exit 1; }
    wait "$rpid" || { cat "$work/recv.err" >&2; exit 1; }
    [ "$aftp_dst" = faux:// ] || cmp "$work/src.bin" "$work/dst/src.bin" >&2
    local goodput own retx secs used wall
    wall=$(wall_s "$work/send.time")
    goodput=$(awk -v b="$bytes" -v s="$wall" 'BEGIN{printf "%.1f", b * 8 / s / 1e6}')
    own=$(sed -n 's/.* \([0-9.]*\) Mbit\/s goodput.*/\1/p' "$work/send.out")
    retx=$(sed -n 's/.* \([0-9.]*\)% retransmitted.*/\1/p' "$work/send.out")
    secs=$(sed -n 's/.* bytes in \([0-9.]*\) s,.*/\1/p' "$work/send.out")
    used=$(sed -n 's/.*, xxh3-128 [0-9a-f]*, \([a-z0-9-]*\)$/\1/p' "$work/send.out")
    row "$(aftp_label "$rate" "$cipher" "$mtu")" "$goodput" \
        "$(cpu_s "$work/send.time")" "$(cpu_s "$work/recv.time")" \
        "$(rss_mib "$work/send.time")" "$(rss_mib "$work/recv.time")" \
        "$used; $aftp_where; ${wall} s wall clock; aftp's own figure $own Mbit/s in $secs s from the handshake; $retx% retransmitted"
    rm -f "$work/dst/src.bin"
}
if [ "${WARMUP:-1}" != 0 ]; then
    aftp_run "${RATES%% *}" none "${MTUS%% *}"
    unset 'rows[-1]' "goodput_of[$(aftp_label "${RATES%% *}" none "${MTUS%% *}")]"
fi
for ((run = 1; run <= REPEAT; run++)); do
    for rate in $RATES; do
        for mtu in $MTUS; do
            for cipher in $CIPHERS; do
                if cipher_available "$cipher"; then
                    aftp_run "$rate" "$cipher" "$mtu"
                elif [ "$run" = 1 ]; then
                    rows+=("| $(aftp_label "$rate" "$cipher" "$mtu") | skipped: no AES-NI on this CPU | | | | | | | |")
                fi
            done
        done
    done
done

# ---- scp through a private sshd on 127.0.0.1 (its own host key, key-only login) ----
scp_skip=
# shellcheck source=bench/wan/lib.sh
. "$here/wan/lib.sh" # ssh_setup: the private sshd that bench/wan.sh uses too
loopback_ssh_setup() {
    for tool in /usr/sbin/sshd ssh-keygen scp; do
        command -v "$tool" >/dev/null || { scp_skip="$tool not installed (openssh-server/client)"; return 1; }
    done
    snd=() rcv=() # both ends on this host
    ssh_setup "$work/ssh" 127.0.0.1 $((30000 + RANDOM % 20000)) 2>>"$work/ssh.err" && return 0
    scp_skip="the private sshd did not accept a login: $(tail -n 1 "$work/ssh.err" 2>/dev/null)"
    return 1
}

# Seconds of CPU that sshd's reaped children used (the per-connection
# processes): cutime + cstime of /proc/PID/stat.
children_cpu() {
    awk -v hz="$(getconf CLK_TCK)" '{ printf "%.2f", ($16 + $17) / hz }' "/proc/$1/stat"
}

scp_run() { # label, scp options...
    local label=$1
    shift
    local before after
    warm_memory
    before=$(children_cpu "$sshd_pid")
    /usr/bin/time -v -o "$work/scp.time" scp -F "$work/ssh/ssh_config" -q "$@" "$work/src.bin" \
        "wanrcv:$work/dst/src.bin"
    for _ in $(seq 100); do # the session's process is counted once sshd reaped it
        [ -z "$(pgrep -P "$sshd_pid")" ] && break
        sleep 0.05
    done
    after=$(children_cpu "$sshd_pid")
    cmp "$work/src.bin" "$work/dst/src.bin" >&2
    local goodput
    goodput=$(awk -v b="$bytes" -v s="$(wall_s "$work/scp.time")" 'BEGIN{printf "%.1f", b * 8 / s / 1e6}')
    row "$label" "$goodput" "$(cpu_s "$work/scp.time")" \
        "$(awk -v a="$before" -v b="$after" 'BEGIN{printf "%.2f", b - a}')" \
        "$(rss_mib "$work/scp.time")" "n/a" \
        "OpenSSH $(ssh -V 2>&1 | sed -n 's/^OpenSSH_\([^ ,]*\).*/\1/p'), $fstype to $fstype; wall clock of scp incl. SSH set-up; receiver = the sshd session"
    rm -f "$work/dst/src.bin"
}
scp_labels=()
if [ "$SCP" = 1 ]; then
    if loopback_ssh_setup; then
        scp_labels=("scp (OpenSSH default cipher)")
        grep -qw aes /proc/cpuinfo && scp_labels+=("scp -c aes256-gcm@openssh.com")
        for ((run = 1; run <= REPEAT; run++)); do
            scp_run "${scp_labels[0]}"
            [ "${#scp_labels[@]}" -lt 2 ] || scp_run "${scp_labels[1]}" -c aes256-gcm@openssh.com
        done
    else
        rows+=("| scp: skipped ($scp_skip) | | | | | | | | |")
    fi
fi

# ---- iperf3 (memory to memory) ----
iperf_run() { # label, client options...
    local label=$1
    shift
    local iport=$((20000 + RANDOM % 10000))
    /usr/bin/time -v -o "$work/is.time" iperf3 -s -1 -B 127.0.0.1 -p "$iport" >/dev/null 2>&1 &
    local spid=$!
    sleep 0.5
    /usr/bin/time -v -o "$work/ic.time" iperf3 -c 127.0.0.1 -p "$iport" -t "$SECONDS_IPERF" -J "$@" \
        >"$work/iperf.json"
    wait "$spid" || true
    local summary
    summary=$(python3 - "$work/iperf.json" <<'PY'
import json, sys
j = json.load(open(sys.argv[1]))
end = j["end"]
bps = end["sum_received"]["bits_per_second"]  # what arrived
if j["start"]["test_start"]["protocol"] == "UDP":
    note = "sent %.1f Mbit/s, %.2f%% lost" % (end["sum"]["bits_per_second"] / 1e6,
                                             end["sum"]["lost_percent"])
else:
    note = "%d retransmits" % end["sum_sent"].get("retransmits", 0)
print("%.1f|%s" % (bps / 1e6, note))
PY
)
    # CPU per GiB: iperf3 moved goodput x seconds, not the file
    local moved cs cr
    moved=$(awk -v g="${summary%%|*}" -v t="$SECONDS_IPERF" 'BEGIN{print g * 1e6 / 8 * t}')
    cs=$(cpu_s "$work/ic.time") cr=$(cpu_s "$work/is.time")
    rows+=("| $label | ${summary%%|*} | $cs | $cr | $(per_gib "$cs" "$moved") | $(per_gib "$cr" "$moved") | $(rss_mib "$work/ic.time") | $(rss_mib "$work/is.time") | ${summary#*|}; memory to memory |")
}
if [ "$SECONDS_IPERF" != 0 ] && command -v iperf3 >/dev/null && command -v python3 >/dev/null; then
    iperf_run "iperf3 UDP -b 0 -l 1452" -u -b 0 -l 1452
    iperf_run "iperf3 TCP"
else
    rows+=("| iperf3: skipped (SECONDS_IPERF=0, or iperf3/python3 missing) | | | | | | | | |")
fi

median() { # numbers...
    printf '%s\n' "$@" | sort -g | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

best() { # numbers...
    printf '%s\n' "$@" | sort -g | tail -n 1
}

# The ratio of medians, and with REPEAT > 1 of the best runs too: the
# noise of a shared VM only ever slows a run down (a stolen core, memory
# the host took back), so the best run shows what the software does.
ratio() { # numerator label, denominator label
    local a b ba bb
    # shellcheck disable=SC2086 # the lists split into their numbers on purpose
    a=$(median ${goodput_of[$1]:-}) b=$(median ${goodput_of[$2]:-})
    [ -n "$a" ] && [ -n "$b" ] || return 0
    # shellcheck disable=SC2086
    ba=$(best ${goodput_of[$1]}) bb=$(best ${goodput_of[$2]})
    awk -v a="$a" -v b="$b" -v ba="$ba" -v bb="$bb" -v r="$REPEAT" -v n="$1" -v d="$2" 'BEGIN{
        printf "- %s / %s: %.2f (%.0f%%)", n, d, a / b, 100 * a / b
        if (r > 1) printf "; best runs %.2f", ba / bb
        printf "\n" }'
}

echo
echo "Loopback, $(nproc) cores, $(uname -r), $(date -u +%Y-%m-%d), $bytes-byte file"
echo
echo "| run | goodput Mbit/s | sender CPU s | receiver CPU s | sender CPU s/GiB | receiver CPU s/GiB | sender peak RSS MiB | receiver peak RSS MiB | notes |"
echo "|---|---|---|---|---|---|---|---|---|"
printf '%s\n' "${rows[@]}"
echo
echo "Goodput ratios, wall clock of the sending command$([ "$REPEAT" = 1 ] || echo ", medians of $REPEAT runs") (targets: encrypted >= 0.70 x unencrypted, >= 3 x scp):"
for rate in $RATES; do
    for mtu in $MTUS; do
        none=$(aftp_label "$rate" none "$mtu")
        for cipher in $CIPHERS; do
            [ "$cipher" = none ] && continue
            enc=$(aftp_label "$rate" "$cipher" "$mtu")
            ratio "$enc" "$none"
            for scp_label in "${scp_labels[@]}"; do ratio "$enc" "$scp_label"; done
        done
    done
done
