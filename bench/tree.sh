#!/usr/bin/env bash
# Whole directory trees, timed as a user times them: aftp next to rsync (and
# scp -r) in the same run. Prints a table per case; see bench/README.md.
#
#   wan       the Go 1.19 source tree (package golang-1.19-src, installed when
#             missing; a generated tree of its shape, bench/tree/gen.py, when
#             it cannot be had: the table says which ran) over netem/wan.sh's
#             emulated link, once per --profile: `aftp send SRC/` into
#             `aftp recv --dir D` (protected: fresh keys, bench/wan/aftp_pair.sh),
#             `rsync -a` over ssh and `scp -r` through a private sshd on the
#             receiver host (bench/wan/lib.sh). scp -r runs once, capped at
#             --scp-cap seconds: files per second and the extrapolated time.
#   loopback  --files files of 4 KiB over 127.0.0.1: aftp, rsync -a over ssh to
#             127.0.0.1, and local rsync -a (disk to disk, no network).
# Each run goes from starting the sending command to its exit (connection
# set-up included; aftp's receiver has committed every file before its sender
# hears so) and counts only when the copy has every regular file, byte-exact
# (diff -r) and no more. A benchmark prints figures; it never fails on a speed.
#
# usage: bench/tree.sh [--case wan,loopback] [--profile wan-150ms,wan-150ms-1pct]
#                      [--only aftp,rsync,scp,rsync-local] [--repeat N]
#                      [--aftp PATH] [--files N] [--scp-cap SECONDS]
#                      [--time-cap SECONDS] [--generate]
#   --case      which cases run (default both)
#   --profile   netem/profiles names for the wan case, a link each (default
#               wan-150ms,wan-150ms-1pct: 1 Gbit/s, 150 ms RTT, 0% and 1% loss)
#   --only      tools (default all): aftp, rsync (over ssh), scp (wan only),
#               rsync-local (loopback only)
#   --repeat    runs per tool (default 3; scp -r once): the table gives medians
#   --aftp      the aftp binary (default: the newest build*/cli/aftp that is
#               not a sanitizer or fuzzing build); its build's link emulator
#   --files     files in the loopback case (default 10000)
#   --scp-cap   seconds scp -r may run (default 60)
#   --time-cap  seconds any other run may take before it counts as failed
#               (default 300)
#   --generate  the wan case sends the generated Go-shaped tree even when the
#               package is there
# Environment: AFTP_WAN_DIR holds the trees and copies (default /dev/shm when
# it has room); AFTP_BENCH_KEEP=1 keeps the work directory (each run's logs).
# Run as root on Debian 12: installs rsync, openssh, GNU time and
# golang-1.19-src when missing.
# Exit status: 0; 1 when a run failed or its copy differs; 2 usage; 77 when
# the wan case was asked for alone and no network namespace can be made.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "bench/tree: $*" >&2; exit 2; }
log() { echo "bench/tree: $*" >&2; }

cases=wan,loopback profiles=wan-150ms,wan-150ms-1pct only=aftp,rsync,scp,rsync-local
repeat=3 aftp='' files=10000 scp_cap=60 cap=300 generate=0 inner=''
while [ $# -gt 0 ]; do
    case $1 in
    --case) cases=$2; shift 2 ;;
    --profile) profiles=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --aftp) aftp=$2; shift 2 ;;
    --files) files=$2; shift 2 ;;
    --scp-cap) scp_cap=$2; shift 2 ;;
    --time-cap) cap=$2; shift 2 ;;
    --generate) generate=1; shift ;;
    --inner) inner=$2; shift 2 ;; # the work directory, inside netem/wan.sh
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
for n in "$repeat" "$files" "$scp_cap" "$cap"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "--repeat, --files, --scp-cap and --time-cap want whole numbers, not '$n'"
done
IFS=, read -r -a tools <<<"$only"
for t in "${tools[@]}"; do
    case $t in aftp|rsync|scp|rsync-local) ;; *) die "unknown tool '$t' (aftp, rsync, scp, rsync-local)" ;; esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }

# shellcheck source=bench/wan/lib.sh
. "$here/wan/lib.sh"

# ---- one run -------------------------------------------------------------------
# Each run appends "case<TAB>tool<TAB>run<TAB>seconds<TAB>files<TAB>status<TAB>note"
# to $work/results; status is ok, failed, capped or invalid (the link emulator
# was overloaded meanwhile).

regular_files() { find "$1" -type f | wc -l; }

# The copy has every regular file of SRC, byte-exact, and nothing else.
same_tree() { # SRC DST
    diff -rq --no-dereference "$1" "$2" >"$run.diff" 2>&1
}

record() { # case tool n seconds files status note
    printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$work/results"
    log "$1 $2 run $3: $6, $4 s, $5 files${7:+ ($7)}"
}

elapsed_since() { awk -v a="$1" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.3f", b - a }'; }

# Times COMMAND (sets secs and rc), killed after LIMIT seconds (rc 124).
timed_run() { # LIMIT COMMAND...
    local limit=$1 t0=$EPOCHREALTIME
    shift
    rc=0
    timeout -k 5 "$limit" "$@" >"$run.out" 2>"$run.err" || rc=$?
    secs=$(elapsed_since "$t0")
}

# Judges a finished run whose copy of SRC is DST and records it.
judge() { # case tool n src dst
    local status=ok note='' got
    got=$( [ -d "$5" ] && regular_files "$5" || echo 0)
    if [ "$rc" -ne 0 ]; then
        status=failed note="exit $rc: $(tail -n 1 "$run.err")"
    elif ! same_tree "$4" "$5"; then
        status=failed note="the copy differs: $(head -n 1 "$run.diff")"
    fi
    if [ "$status" = ok ] && emu_overloaded; then
        status=invalid note="the link emulator was overloaded during this run"
    fi
    record "$1" "$2" "$3" "$secs" "$got" "$status" "$note"
    [ "$status" != failed ]
}

# The TUN emulator's own verdict on the run since emu_before (loopback: none).
emu_before() { [ -z "${WAN_BACKEND:-}" ] || emu_snapshot "$work/emu.before"; }
emu_overloaded() {
    [ -n "${WAN_BACKEND:-}" ] || return 1
    emu_snapshot "$work/emu.after"
    python3 "$here/wan/report.py" emu-delta "$work/emu.before" "$work/emu.after" |
        grep -qx 'emu_valid=false'
}

# aftp: `aftp recv --once --dir DST` on the receiver, `aftp send SRC/` on the
# sender, both through bench/wan/aftp_pair.sh (fresh keys, GNU time).
run_aftp() { # case n src dst
    rm -rf "$4" && mkdir -p "$4"
    emu_before
    rc=0
    AFTP_PAIR_PORT=$port "$here/wan/aftp_pair.sh" "$aftp" "$3/" "$4" auto "$cap" "$run" || rc=$?
    secs=$(tail -n 1 "$run.send.time" 2>/dev/null | cut -d' ' -f1)
    [ -n "$secs" ] || secs=0
    cp "$run.send.err" "$run.err" 2>/dev/null || true
    judge "$1" aftp "$2" "$3" "$4"
}

run_rsync_ssh() { # case n src dst
    rm -rf "$4" && mkdir -p "$4"
    emu_before
    timed_run "$cap" "${snd[@]}" rsync -a -e "ssh -F $ssh_dir/ssh_config" "$3/" "wanrcv:$4/"
    judge "$1" rsync "$2" "$3" "$4"
}

run_rsync_local() { # case n src dst
    rm -rf "$4" && mkdir -p "$4"
    timed_run "$cap" rsync -a "$3/" "$4/"
    judge "$1" rsync-local "$2" "$3" "$4"
}

# scp -r makes a round trip per file and more: stopped at --scp-cap, it is
# reported with the whole files it delivered per second (the one in flight
# not counted) and the time the whole tree would take at that rate.
run_scp() { # case src dst
    rm -rf "$3" && mkdir -p "$3"
    emu_before
    timed_run "$scp_cap" "${snd[@]}" scp -q -r -F "$ssh_dir/ssh_config" "$2" "wanrcv:$3/"
    if [ "$rc" -ne 124 ]; then
        judge "$1" scp 1 "$2" "$3/$(basename "$2")"
        return
    fi
    local got
    got=$(($(regular_files "$3") - 1))
    [ "$got" -ge 0 ] || got=0
    local status=capped
    emu_overloaded && status=invalid
    record "$1" scp 1 "$secs" "$got" "$status" "stopped at the cap"
}

# The tools of a case, the repeats interleaved so that drift spreads over all.
run_case() { # case src
    local c=$1 src=$2 n tool failed=0
    local ssh_ok=1
    if wants rsync || wants scp; then
        ssh_setup "$work/ssh.$c" "$ssh_addr" "$ssh_port" || ssh_ok=0
    fi
    for n in $(seq "$repeat"); do
        for tool in aftp rsync rsync-local; do
            wants "$tool" || continue
            [ "$tool" != rsync-local ] || [ "$c" = loopback ] || continue
            run=$work/runs/$c.$tool.$n
            if [ "$tool" = rsync ] && [ "$ssh_ok" = 0 ]; then
                record "$c" rsync "$n" 0 0 failed "not run: the private sshd did not start"
                failed=1
                continue
            fi
            case $tool in
            aftp) run_aftp "$c" "$n" "$src" "$work/dst.$tool" || failed=1 ;;
            rsync) run_rsync_ssh "$c" "$n" "$src" "$work/dst.$tool" || failed=1 ;;
            rsync-local) run_rsync_local "$c" "$n" "$src" "$work/dst.$tool" || failed=1 ;;
            esac
            rm -rf "$work/dst.$tool"
        done
    done
    if wants scp && [ "$c" != loopback ] && [ "$ssh_ok" = 1 ]; then
        run=$work/runs/$c.scp.1
        run_scp "$c" "$src" "$work/dst.scp" || failed=1
        rm -rf "$work/dst.scp"
    fi
    ssh_teardown
    return "$failed"
}

# ---- inside netem/wan.sh: the wan case over this link --------------------------
if [ -n "$inner" ]; then
    work=$inner
    read -r -a snd <<<"$WAN_SND_EXEC"
    read -r -a rcv <<<"$WAN_RCV_EXEC"
    ssh_addr=$WAN_RCV_ADDR ssh_port=22 port=7400
    trap ssh_teardown EXIT
    echo "$WAN_FWD_RATE_BPS $WAN_RTT_US $WAN_FWD_LOSS $WAN_BACKEND" >"$work/link.$WAN_PROFILE"
    run_case "$WAN_PROFILE" "$work/src.tree"
    exit $?
fi

# ---- set-up --------------------------------------------------------------------
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
packages=(time python3 diffutils findutils)
wants rsync || wants rsync-local && packages+=(rsync)
wants rsync || wants scp && packages+=(openssh-client openssh-server)
aftp_install_deps "${packages[@]}" || log "could not install every tool; what is missing fails its runs"
go_src=/usr/share/go-1.19/src
if [[ ",$cases," == *,wan,* ]] && [ "$generate" = 0 ] && [ ! -d "$go_src" ]; then
    aftp_install_deps golang-1.19-src || log "golang-1.19-src cannot be installed: a tree of its shape is generated"
fi

if wants aftp; then
    [ -n "$aftp" ] || aftp=$(newest_optimised cli/aftp)
    if [ -z "$aftp" ] || [ ! -x "$aftp" ]; then die "no aftp binary: build it or pass --aftp PATH"; fi
    aftp=$(realpath "$aftp")
fi
# The link emulator of aftp's build (an emulator built with ASan is an
# overloaded one), else the newest optimised one.
linkemu=${aftp:+$(dirname "$(dirname "$aftp")")/netem/aftp-linkemu}
[ -n "$linkemu" ] && [ -x "$linkemu" ] || linkemu=$(newest_optimised netem/aftp-linkemu)

# shellcheck source=bench/wan/scratch.sh
. "$here/wan/scratch.sh"
work=$(mktemp -d "$(pick_scratch_dir $((600 * 1048576)))/aftp-tree-bench.XXXXXX")
if [ "${AFTP_BENCH_KEEP:-0}" = 1 ]; then
    trap 'ssh_teardown; echo "bench/tree: kept $work" >&2' EXIT
else
    trap 'ssh_teardown; rm -rf "$work"' EXIT
fi
mkdir -p "$work/runs"
: >"$work/results"
t_start=$EPOCHREALTIME
status=0

echo "$(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ), trees in $(stat -f -c %T "$work");" \
     "command: bench/tree.sh --case $cases --profile $profiles --only $only --repeat $repeat" \
     "--files $files --scp-cap $scp_cap${aftp:+ (aftp: $aftp, $("$aftp" --version 2>/dev/null | head -n 1))}"

if [[ ",$cases," == *,wan,* ]]; then
    if [ "$generate" = 0 ] && [ -d "$go_src" ]; then
        cp -r "$go_src" "$work/src.tree"
        tree_what="Go 1.19 source tree ($go_src, golang-1.19-src $(dpkg-query -W -f='${Version}' golang-1.19-src 2>/dev/null))"
    else
        python3 "$here/tree/gen.py" go-shape "$work/src.tree"
        tree_what="generated tree of the Go 1.19 source tree's shape (bench/tree/gen.py)"
    fi
    echo "wan tree: $tree_what: $(regular_files "$work/src.tree") files," \
         "$(find "$work/src.tree" -type d | wc -l) directories, $(du -sb "$work/src.tree" | cut -f1) bytes" \
         >"$work/what.wan"
    regular_files "$work/src.tree" >"$work/count.wan"
    IFS=, read -r -a profile_list <<<"$profiles"
    for p in "${profile_list[@]}"; do
        wan=(--profile "$p")
        [ -z "$linkemu" ] || wan+=(--linkemu "$linkemu")
        rc=0
        "$root/netem/wan.sh" "${wan[@]}" -- "$0" --inner "$work" --repeat "$repeat" --only "$only" \
            --scp-cap "$scp_cap" --time-cap "$cap" --aftp "${aftp:-none}" || rc=$?
        case $rc in
        0|3) ;; # 3: the emulator was overloaded; the runs it hit say invalid
        77) log "SKIP: no network namespaces here: the wan case did not run"
            [[ ",$cases," == *,loopback,* ]] || exit 77 ;;
        *) log "the wan case over $p failed: netem/wan.sh exit $rc"; status=1 ;;
        esac
    done
    rm -rf "$work/src.tree"
fi

if [[ ",$cases," == *,loopback,* ]]; then
    python3 "$here/tree/gen.py" small "$work/src.small" "$files" 4096
    echo "loopback tree: $files files of 4 KiB in $(( (files + 99) / 100 )) directories" >"$work/what.loopback"
    echo "$files" >"$work/count.loopback"
    snd=() rcv=() ssh_addr=127.0.0.1 port=$((20000 + RANDOM % 20000))
    ssh_port=$((port + 1))
    WAN_RCV_ADDR=127.0.0.1 WAN_SND_EXEC='' WAN_RCV_EXEC='' WAN_FWD_RATE_BPS=1000000000
    export WAN_RCV_ADDR WAN_SND_EXEC WAN_RCV_EXEC WAN_FWD_RATE_BPS
    run_case loopback "$work/src.small" || status=1
fi

echo
python3 "$here/tree/report.py" "$work"
echo
echo "bench/tree.sh ran $(elapsed_since "$t_start") s"
grep -qP '\tfailed\t' "$work/results" && status=1
exit "$status"
