#!/usr/bin/env bash
# shellcheck disable=SC2317 # the cases and phases are called by name ("case_$c", phase COMMAND...)
# The server benchmarks of issue 20: one `aftp recv --listen` process (no
# --once) serving many sessions at once, each figure next to a baseline
# measured in the same run. Prints a Markdown table per case, the goal beside
# each figure; see bench/README.md.
#
#   wan8     across netem/wan.sh's emulated link (--profile, default
#            wan-150ms: 1 Gbit/s, 150 ms RTT), server on the receiver host,
#            clients on the sender host: one push alone, then 8 pushes of
#            distinct files of the same size started together. Each session's
#            time and goodput, the aggregate goodput (all bytes / first start
#            to last exit) against the solo one (goal >= 95%), Jain's index
#            over the 8 goodputs (goal >= 0.95).
#   lo64     over 127.0.0.1: one session alone, then --sessions (64) at once
#            (files of --size/16 MiB): aggregate throughput against one
#            session; the server's RSS sampled every 50 ms (peak during the
#            sessions minus idle, per peak number of concurrent sessions),
#            its VmHWM and its threads (at the start and at most).
#   trickle  over 127.0.0.1: a real client's push alone, then while a hostile
#            peer holds a session (an authorized `aftp send --rate 16k` of a
#            huge faux:// file, started first), then while a half-open peer
#            does (an `aftp send` stopped with SIGSTOP once the server has
#            accepted its file): each time against the time alone (goal <= 1.2x).
#   pull     across the same link as wan8: a push, then a pull (`aftp get
#            HOST:PORT:PATH DEST`) of the same file, when the binary has `get`
#            (goal: goodput within 3%); else "pull: not available in this aftp".
# Every transfer is timed as a user times it: from starting the command to
# its exit, disk to disk (the server has the file verified and durable under
# its name before its client hears so); each copy is compared with cmp. A
# benchmark prints figures; it never fails on a speed.
#
# usage: bench/server.sh [--case wan8,lo64,trickle,pull] [--aftp PATH]
#                        [--size MiB] [--sessions N] [--repeat N]
#                        [--profile NAME] [--time-cap SECONDS]
#                        [--retries N] [--json FILE]
#   --case      which cases run (default all four, in that order)
#   --aftp      the aftp binary (default: the newest build*/cli/aftp that is
#               not a sanitizer or fuzzing build); its build's link emulator
#   --size      MiB of each session's file in wan8, trickle and pull (default
#               256); lo64's files are a sixteenth of it (at least 1 MiB)
#   --sessions  sessions at once in lo64 (default 64)
#   --repeat    runs of each case (default 1); the table gives each run and
#               the median
#   --profile   the netem/profiles name for wan8 and pull (default wan-150ms)
#   --time-cap  seconds any one transfer may take before it is stopped and
#               counted as failed (default 300)
#   --retries   a wan phase during which the link emulator was overloaded is
#               measured again, up to N times (default 1); still hit, it is
#               shown as invalid
#   --json      also write one JSON object per table row to FILE
# Environment: AFTP_WAN_DIR holds the files and the server's directory
# (default /dev/shm when it has room); AFTP_BENCH_KEEP=1 keeps the work
# directory (every client's and the server's output) and says where.
# Exit status: 0; 1 when a transfer failed or its copy differs (today's
# server queues sessions: expect failures until it serves them at once);
# 2 usage; 77 when only link cases were asked for and no network namespace
# can be made.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "bench/server: $*" >&2; exit 2; }
log() { echo "bench/server: $*" >&2; }

cases=wan8,lo64,trickle,pull aftp='' size_mib=256 sessions=64 repeat=1 profile=wan-150ms
cap=300 retries=1 json='' inner=''
while [ $# -gt 0 ]; do
    case $1 in
    --case) cases=$2; shift 2 ;;
    --aftp) aftp=$2; shift 2 ;;
    --size) size_mib=$2; shift 2 ;;
    --sessions) sessions=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --time-cap) cap=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --inner) inner=$2; shift 2 ;; # the work directory, inside netem/wan.sh
    -h|--help) sed -n '3,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
for n in "$size_mib" "$sessions" "$repeat" "$cap"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "--size, --sessions, --repeat and --time-cap want whole numbers, not '$n'"
done
[[ $retries =~ ^[0-9]+$ ]] || die "--retries wants a count, not '$retries'"
IFS=, read -r -a case_list <<<"$cases"
for c in "${case_list[@]}"; do
    case $c in wan8|lo64|trickle|pull) ;; *) die "unknown case '$c' (wan8, lo64, trickle, pull)" ;; esac
done
wants() { [[ ",$cases," == *",$1,"* ]]; }
WAN8_SESSIONS=8
lo_mib=$((size_mib / 16))
[ "$lo_mib" -ge 1 ] || lo_mib=1

# shellcheck source=bench/wan/lib.sh
. "$here/wan/lib.sh" # emu_snapshot, newest_optimised

elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }

# ---- results -------------------------------------------------------------------
# $work/results, tab-separated, one line per thing measured (bench/server/report.py):
#   S case run phase slot start end exit bytes ok note   a transfer (ok: 1 when
#                                                        it exited 0 and cmp agreed)
#   M case run key=value...                              the server's memory and CPU
#   V case run phase valid|invalid                       the link emulator's verdict
#   N case text                                          a note under the case's table
# A phase's lines go to $phase_rows first: a phase measured again replaces them.
row() { local IFS=$'\t'; printf '%s\n' "$*" | tr -d '\r' >>"$phase_rows"; }
note() { printf 'N\t%s\t%s\n' "$1" "$2" >>"$work/results"; log "$2"; }

# ---- the server and its clients --------------------------------------------------
# Hosts are command prefixes: snd (clients) and rcv (the server), empty on
# loopback; the server listens on $addr:$port and writes into $srv_dir.
srv_pid='' port='' srv_starts=0 srv_args=() srv_err='' srv_idle=''
keys=''

server_start() { # DIR LISTEN TAG
    srv_args=("$@") srv_dir=$1 srv_starts=$((srv_starts + 1))
    mkdir -p "$srv_dir"
    srv_err=$work/server.$3.$srv_starts.err
    : >"$srv_err" # before the child opens it: the port loop reads it at once
    "${rcv[@]}" "$aftp" recv --listen "$2" --dir "$srv_dir" --identity "$keys/server" \
        --authorized-keys "$keys/authorized_keys" >"$work/server.$3.$srv_starts.out" 2>"$srv_err" &
    srv_pid=$! # nsenter execs aftp: this is the server itself
    port=''
    for _ in $(seq 200); do
        port=$(sed -n 's/.*listening on .*:\([0-9][0-9]*\)$/\1/p' "$srv_err" | head -n 1)
        if [ -n "$port" ]; then
            srv_idle=$(awk '$1 == "VmRSS:" || $1 == "RssAnon:" { printf "%s ", $2 }' "/proc/$srv_pid/status")
            return 0
        fi
        kill -0 "$srv_pid" 2>/dev/null || break
        sleep 0.05
    done
    die "the server did not start listening: $(tail -n 2 "$srv_err")"
}

# SIGTERM, up to 5 s to exit, then SIGKILL; reaped.
stop_pid() { # PID
    kill -TERM "$1" 2>/dev/null || true
    for _ in $(seq 100); do kill -0 "$1" 2>/dev/null || break; sleep 0.05; done
    kill -KILL "$1" 2>/dev/null || true
    wait "$1" 2>/dev/null || true
}

server_stop() {
    [ -n "$srv_pid" ] || return 0
    stop_pid "$srv_pid"
    srv_pid=''
}

# A server that died during a phase is noted and started again (on a new
# port when it listens on port 0), so that the other figures still come.
server_check() { # CASE RUN PHASE
    kill -0 "$srv_pid" 2>/dev/null && return 0
    local rc=0
    wait "$srv_pid" || rc=$?
    note "$1" "run $2 $3: the server exited (status $rc) meanwhile: $(tail -n 1 "$srv_err")"
    server_start "${srv_args[@]}"
}

# Sessions the server holds now: its connected UDP sockets on its port (one
# per session; the listener is not connected), counted on the server's host.
server_sessions() {
    "${rcv[@]}" cat /proc/net/udp /proc/net/udp6 2>/dev/null |
        awk -v p=":$(printf '%04X' "$port")" '$2 ~ p"$" && $4 == "01" { n++ } END { print n + 0 }'
}

# Waits until the server holds no session (a half-open one ends only at its
# idle timeout), so that a phase starts on an idle server.
wait_idle() {
    local i
    for i in $(seq 1200); do
        [ "$(server_sessions)" = 0 ] && return 0
        [ "$i" != 20 ] || log "waiting for the server's sessions to end ..."
        sleep 0.1
    done
    log "the server still holds $(server_sessions) sessions after 120 s: going on"
}

# Every session is a first contact: an aftp with path memory would start
# a push at the rate an earlier push to this server measured (and the 8
# of wan8 would each jump to it at once), which a pull cannot.
client_keys() { # SLOT: sets kw, the option words of client SLOT's key pair
    kw=(--identity "$keys/client$1" --peer-key "$keys/server.pub")
    [[ $("$aftp" --help 2>&1) != *--no-path-memory* ]] || kw+=(--no-path-memory)
}

# push SLOT FILE OUT [send option...]: one whole push from the sender host,
# timed from the command's start to its exit: writes OUT.time "start end exit".
# It is stopped (exit 124) after push_cap seconds (default --time-cap).
push() {
    local slot=$1 file=$2 out=$3 rc=0
    shift 3
    local -a kw
    client_keys "$slot"
    local t0=$EPOCHREALTIME
    timeout -k 5 "${push_cap:-$cap}" "${snd[@]}" "$aftp" send "${kw[@]}" "$@" "$file" "$addr:$port" \
        >"$out.out" 2>"$out.err" || rc=$?
    echo "$t0 $EPOCHREALTIME $rc" >"$out.time"
}

# The copy (on the server, or the one pulled) is compared with the source,
# recorded, then both go.
judge() { # CASE RUN PHASE SLOT SRC COPY OUT
    local start end rc ok=0 why=''
    read -r start end rc <"$7.time"
    if [ "$rc" != 0 ]; then
        why="exit $rc after $(elapsed_between "$start" "$end") s: $(tail -n 1 "$7.err" | tr '\t' ' ')"
    elif ! cmp -s "$5" "$6"; then
        why="the copy differs from the source or is missing"
    else
        ok=1
    fi
    row S "$1" "$2" "$3" "$4" "$start" "$end" "$rc" "$(stat -c %s "$5")" "$ok" "$why"
    [ "$ok" = 1 ] || log "$1 run $2 $3 session $4: $why"
    rm -f "$5" "$6"
}
elapsed_between() { awk -v a="$1" -v b="$2" 'BEGIN { printf "%.1f", b - a }'; }

# N pushes started together, distinct files (names unique to this phase and
# attempt, hard links to the case's sources: the server never has them
# already, not even in part from a failed attempt).
together() { # CASE RUN PHASE N SOURCE-PREFIX
    local tag=$1-$2-$3-$attempt n=$4 i pids=()
    for i in $(seq "$n"); do
        ln -f "$5$i.bin" "$work/send/$tag-$i.bin"
    done
    for i in $(seq "$n"); do
        push "$i" "$work/send/$tag-$i.bin" "$work/runs/$tag-$i" &
        pids+=($!)
    done
    wait "${pids[@]}"
    for i in $(seq "$n"); do
        judge "$1" "$2" "$3" "$i" "$work/send/$tag-$i.bin" "$srv_dir/$tag-$i.bin" "$work/runs/$tag-$i"
    done
}

# A phase on the emulated link is measured again while the emulator was
# overloaded during it (up to --retries times); loopback phases once.
phase() { # CASE RUN PHASE COMMAND...: COMMAND writes the phase's rows (and sees $attempt)
    local c=$1 r=$2 ph=$3 attempt verdict
    shift 3
    for ((attempt = 0; ; attempt++)); do
        wait_idle
        phase_rows=$work/phase.rows
        : >"$phase_rows"
        [ -z "${WAN_BACKEND:-}" ] || emu_snapshot "$work/emu.before"
        "$@"
        server_check "$c" "$r" "$ph"
        verdict=$(emu_verdict)
        [ "$verdict" = invalid ] && [ "$attempt" -lt "$retries" ] &&
            { log "$c run $r $ph: the link emulator was overloaded meanwhile: measuring again"; continue; }
        row V "$c" "$r" "$ph" "$verdict"
        cat "$phase_rows" >>"$work/results"
        return 0
    done
}

# valid, invalid (the TUN emulator dropped or delayed packets for overload
# since emu.before: the figures are the machine's, not the protocol's) or
# n/a (loopback, or the netem backend, which has no such report).
emu_verdict() {
    [ -n "${WAN_BACKEND:-}" ] || { echo n/a; return; }
    [ "$WAN_BACKEND" = tun ] || { echo n/a; return; }
    emu_snapshot "$work/emu.after"
    if python3 "$here/wan/report.py" emu-delta "$work/emu.before" "$work/emu.after" |
        grep -qx 'emu_valid=false'; then echo invalid; else echo valid; fi
}

# ---- the cases -----------------------------------------------------------------
case_wan8() { # RUN
    phase wan8 "$1" solo together wan8 "$1" solo 1 "$work/src/wan."
    phase wan8 "$1" together together wan8 "$1" together "$WAN8_SESSIONS" "$work/src/wan."
}

# The server's memory and CPU over N sessions started together
# (bench/server/sample.py samples /proc every 50 ms), and its idle memory:
# as it started listening (once it has served, its allocator keeps memory).
lo64_together() { # RUN
    local r=$1 samples=$work/runs/lo64-$1-$attempt.samples
    "${rcv[@]}" python3 "$here/server/sample.py" "$srv_pid" "$port" "$samples" &
    local sampler=$!
    for _ in $(seq 100); do [ -s "$samples.ready" ] && break; sleep 0.05; done
    together lo64 "$r" together "$sessions" "$work/src/lo."
    kill -TERM "$sampler" 2>/dev/null || true
    wait "$sampler" || true
    local -a m idle
    read -r -a m <"$samples" || m=(sampler_failed=1)
    read -r -a idle <<<"$srv_idle"
    row M lo64 "$r" "${m[@]}" "idle_kb=${idle[0]}" "idle_anon_kb=${idle[1]}"
}

case_lo64() { # RUN
    phase lo64 "$1" solo together lo64 "$1" solo 1 "$work/src/lo."
    phase lo64 "$1" together lo64_together "$1"
}

# A hostile peer: an authorized `aftp send` (client key 2) of a large faux://
# file (zeros, no file on the client; 256 MiB: days at 16 kbit/s, and room for
# it on the server), in the background; returns once the server has accepted
# its file (JSON "file_start"), i.e. holds a session for it.
hostile_pid=''
hostile_start() { # NAME OUT [send option...]
    local name=$1 out=$2
    shift 2
    local -a kw
    client_keys 2
    "${snd[@]}" "$aftp" send "${kw[@]}" --json "$@" "faux:///$name?256M" "$addr:$port" \
        >"$out.out" 2>"$out.err" &
    hostile_pid=$!
    for _ in $(seq 600); do
        grep -q '"type":"file_start"' "$out.out" 2>/dev/null && return 0
        kill -0 "$hostile_pid" 2>/dev/null || break
        sleep 0.05
    done
    return 1
}

# Once measured, the peer is woken and told to stop (aftp send cancels its
# session on SIGTERM: the server need not wait for its idle timeout), then killed.
hostile_stop() {
    [ -n "$hostile_pid" ] || return 0
    kill -CONT "$hostile_pid" 2>/dev/null || true
    stop_pid "$hostile_pid"
    hostile_pid=''
}

# The real client beside a hostile peer is stopped at HOSTILE_CAP_S (or
# --time-cap when lower): a queued client may wait for as long as the peer lasts.
HOSTILE_CAP_S=60
trickle_with() { # RUN PHASE: the real client's push while a hostile peer holds a session
    local r=$1 ph=$2 out=$work/runs/trickle-$1-$2-$attempt.hostile
    local push_cap=$((cap < HOSTILE_CAP_S ? cap : HOSTILE_CAP_S))
    if hostile_start "$ph-$r-$attempt.bin" "$out" --rate 16k; then
        [ "$ph" = trickling ] || kill -STOP "$hostile_pid"
    else
        note trickle "run $r: the $ph peer never held a session, so its figure is of an idle server: $(tail -n 1 "$out.err")"
    fi
    together trickle "$r" "$ph" 1 "$work/src/wan."
    hostile_stop
}

case_trickle() { # RUN
    phase trickle "$1" alone together trickle "$1" alone 1 "$work/src/wan."
    phase trickle "$1" trickling trickle_with "$1" trickling
    phase trickle "$1" half-open trickle_with "$1" half-open
}

has_get() { [[ $("$aftp" --help 2>&1) == *"aftp get"* ]]; } # not | grep -q: see bench/wan/aftp_pair.sh

# A push of a file, then a pull of the server's copy (client key 1 both
# ways); each judged against the source through hard links, which judge removes.
push_then_pull() { # RUN
    local name=pull-$1-$attempt.bin out=$work/runs/pull-$1-$attempt dest=$work/pulled
    local src=$work/src/wan.1.bin
    ln -f "$src" "$work/send/$name"
    push 1 "$work/send/$name" "$out.push"
    [ ! -f "$srv_dir/$name" ] || ln -f "$srv_dir/$name" "$work/pushed.$name" # the server keeps its copy
    judge pull "$1" push 1 "$work/send/$name" "$work/pushed.$name" "$out.push"
    rm -rf "$dest" && mkdir -p "$dest"
    local -a kw
    client_keys 1
    local t0=$EPOCHREALTIME rc=0
    timeout -k 5 "$cap" "${snd[@]}" "$aftp" get "${kw[@]}" "$addr:$port:$name" "$dest/" \
        >"$out.pull.out" 2>"$out.pull.err" || rc=$?
    echo "$t0 $EPOCHREALTIME $rc" >"$out.pull.time"
    ln -f "$src" "$work/send/$name"
    judge pull "$1" pull 1 "$work/send/$name" "$dest/$name" "$out.pull"
    rm -f "$srv_dir/$name"
}

case_pull() { # RUN (only when the binary has `get`)
    phase pull "$1" push-pull push_then_pull "$1"
}

run_cases() { # CASE...: every run of each, on the server started for them
    local r c
    for c in "$@"; do
        for r in $(seq "$repeat"); do
            log "$c, run $r of $repeat ..."
            "case_$c" "$r"
        done
    done
}

make_keys() { # CLIENTS: fresh key pairs for the server and each client slot
    keys=$work/keys
    mkdir -m 700 "$keys"
    "$aftp" keygen -f "$keys/server" -C bench-server >/dev/null 2>&1 || die "aftp keygen failed"
    local i
    for i in $(seq "$1"); do
        "$aftp" keygen -f "$keys/client$i" -C "bench-client-$i" >/dev/null 2>&1 || die "aftp keygen failed"
        cat "$keys/client$i.pub" >>"$keys/authorized_keys"
    done
}

# ---- inside netem/wan.sh: the link cases ------------------------------------------
if [ -n "$inner" ]; then
    work=$inner keys=$work/keys
    [ "$aftp" != none ] || aftp=''
    read -r -a snd <<<"$WAN_SND_EXEC"
    read -r -a rcv <<<"$WAN_RCV_EXEC"
    addr=$WAN_RCV_ADDR
    trap 'hostile_stop; server_stop' EXIT
    echo "$WAN_PROFILE $WAN_FWD_RATE_BPS $WAN_RTT_US $WAN_FWD_LOSS $WAN_BACKEND" >"$work/link"
    server_start "$work/srv.wan" "$addr:7400" wan
    link_cases=()
    wants wan8 && link_cases+=(wan8)
    wants pull && has_get && link_cases+=(pull)
    run_cases "${link_cases[@]}"
    exit 0
fi

# ---- set-up --------------------------------------------------------------------
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
aftp_install_deps python3 iproute2 procps coreutils diffutils ||
    log "could not install every tool the benchmark uses"
[ -n "$aftp" ] || aftp=$(newest_optimised cli/aftp)
if [ -z "$aftp" ] || [ ! -x "$aftp" ]; then die "no aftp binary: build it or pass --aftp PATH"; fi
aftp=$(realpath "$aftp")
"$aftp" keygen --help >/dev/null 2>&1 || die "$aftp has no 'keygen': the server benchmarks need keys"
linkemu=$(dirname "$(dirname "$aftp")")/netem/aftp-linkemu
[ -x "$linkemu" ] || linkemu=$(newest_optimised netem/aftp-linkemu)

# The sources: wan8's 8 of --size (trickle and pull send the first), lo64's
# --sessions of its size; each phase sends hard links with names of its own.
n_wan=0 n_lo=0
{ wants trickle || { wants pull && has_get; }; } && n_wan=1
wants wan8 && n_wan=$WAN8_SESSIONS
wants lo64 && n_lo=$sessions
need=$((2 * (n_wan * size_mib + n_lo * lo_mib)))
# shellcheck source=bench/wan/scratch.sh
. "$here/wan/scratch.sh"
work=$(mktemp -d "$(pick_scratch_dir $(((need + 64) * 1048576)))/aftp-server-bench.XXXXXX")
if [ "${AFTP_BENCH_KEEP:-0}" = 1 ]; then
    trap 'hostile_stop; server_stop; echo "bench/server: kept $work" >&2' EXIT
else
    trap 'hostile_stop; server_stop; rm -rf "$work"' EXIT
fi
mkdir -p "$work/src" "$work/send" "$work/runs"
: >"$work/results"
t_start=$EPOCHREALTIME

log "writing random files in $work: $n_wan of $size_mib MiB, $n_lo of $lo_mib MiB"
for i in $(seq "$n_wan"); do head -c "$((size_mib * 1048576))" /dev/urandom >"$work/src/wan.$i.bin"; done
for i in $(seq "$n_lo"); do head -c "$((lo_mib * 1048576))" /dev/urandom >"$work/src/lo.$i.bin"; done
clients=$((n_wan > n_lo ? n_wan : n_lo))
wants trickle && [ "$clients" -lt 2 ] && clients=2 # the hostile peer has a key of its own
make_keys "$clients"

cat >"$work/meta" <<EOF
command	bench/server.sh --case $cases --size $size_mib --sessions $sessions --repeat $repeat --profile $profile --time-cap $cap
aftp	$aftp ($("$aftp" --version 2>/dev/null | head -n 1))
host	$(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), files in $(stat -f -c %T "$work")
size_mib	$size_mib
lo_mib	$lo_mib
sessions	$sessions
wan8_sessions	$WAN8_SESSIONS
EOF

status=0
if wants wan8 || { wants pull && has_get; }; then
    wan=(--profile "$profile")
    [ -z "$linkemu" ] || wan+=(--linkemu "$linkemu")
    rc=0
    "$root/netem/wan.sh" "${wan[@]}" -- "$0" --inner "$work" --case "$cases" --aftp "$aftp" \
        --size "$size_mib" --sessions "$sessions" --repeat "$repeat" --time-cap "$cap" \
        --retries "$retries" || rc=$?
    case $rc in
    0|3) ;; # 3: the emulator was overloaded at some point; the phases it hit say so
    77) log "SKIP: no network namespaces here: the link cases did not run"
        wants lo64 || wants trickle || exit 77 ;;
    *) log "the link cases failed: netem/wan.sh exit $rc"; status=1 ;;
    esac
fi
if wants pull && ! has_get; then
    note pull "pull: not available in this aftp"
fi

if wants lo64 || wants trickle; then
    snd=() rcv=() addr=127.0.0.1
    server_start "$work/srv.lo" 127.0.0.1:0 lo
    lo_cases=()
    wants lo64 && lo_cases+=(lo64)
    wants trickle && lo_cases+=(trickle)
    run_cases "${lo_cases[@]}"
    server_stop
fi

echo
python3 "$here/server/report.py" "$work" ${json:+--json "$json"}
echo
echo "bench/server.sh ran $(elapsed_since "$t_start") s"
grep -qP '^S\t(?:[^\t]*\t){8}0\t' "$work/results" && status=1
exit "$status"
