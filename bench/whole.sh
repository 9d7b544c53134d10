#!/usr/bin/env bash
# Issue 21's benchmark: whole transfers, disk to disk, timed as a user times
# them (from starting the sending command to its exit), over netem/wan.sh's
# emulated link: aftp next to GridFTP (globus-url-copy, 8 and 16 streams),
# scp, rsync over ssh and iperf3 TCP (BBR, CUBIC), with each row's physical
# limit and aftp's phases (handshake, ramp, steady state, tail, commit).
# Prints a summary table and a table per row; see bench/README.md.
#
# usage: bench/whole.sh [--profile NAME[,NAME...]]... [--size MiB] [--repeat N]
#                       [--only aftp,aftp-repeat,gridftp,scp,rsync,iperf3-bbr,iperf3-cubic]
#                       [--aftp PATH] [--time-cap SECONDS] [--retries N]
#                       [--iperf-seconds N] [--json FILE] [--install-baselines]
#   --profile   rows of these netem/profiles only (default: every row of the
#               table below); a profile outside the table is one row of 1 GiB
#   --size      every chosen row moves a file of this size instead (a quick
#               look; the goals are then not shown)
#   --repeat    runs of aftp and GridFTP per row (default 3), interleaved; the
#               tables give medians. scp and rsync run once per row, iperf3
#               once per link
#   --only      tools (default all): aftp (encrypted, its defaults, every run a
#               first contact), aftp-repeat (the same as a repeat contact: the
#               start rate remembered from an earlier transfer on the path),
#               gridftp (-p 8 and -p 16: two tools), scp, rsync, iperf3-bbr,
#               iperf3-cubic
#   --aftp      the aftp binary (default: the newest build*/cli/aftp that is
#               not a sanitizer or fuzzing build); its build's link emulator
#   --time-cap  seconds scp and rsync may run before they are stopped and
#               reported with the rate they reached (default 60); aftp and
#               GridFTP get at least the time of the file at a quarter of the
#               link rate
#   --retries   a run during which the emulator was overloaded is measured
#               again up to N times (default 2), then does not count
#   --iperf-seconds  length of each iperf3 run (default 15)
#   --json      also write one JSON object per row and tool to FILE
#   --install-baselines  install GridFTP (globus-gass-copy-progs,
#               globus-gridftp-server-progs) when missing; without it a
#               missing GridFTP is reported as not run
# Environment: AFTP_WAN_DIR holds the files and the copies (default /var/tmp:
# a disk; the run needs the files of every size chosen plus one copy);
# AFTP_BENCH_KEEP=1 keeps the work directory (every run's logs).
# Run as root on Debian 12: installs time, iperf3, openssh and rsync when
# missing (as bench/wan.sh does).
# Exit status: 0; 1 when a run failed or its copy differed; 2 usage; 77
# without network namespaces.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "bench/whole: $*" >&2; exit 2; }
log() { echo "bench/whole: $*" >&2; }

# Issue 21's table: PROFILE:MiB:GOAL, GOAL aftp's target in % of the
# loss-adjusted payload capacity ("-": the row's goal is only 1.3x GridFTP).
# sat-600ms is the 100 Mbit/s, 600 ms, 0.5% path.
table=(wan-150ms:2048:97 wan-150ms-1pct:2048:95 wan-300ms-2pct:2048:93 sat-600ms:512:92
       wan-150ms-bursty-05pct:1024:92 wan-150ms-jitter:1024:92 wan-150ms-fbloss5pct:1024:92
       wan-150ms-reorder:1024:92 wan-150ms:1024:94 wan-150ms-1pct:1024:- wan-300ms-2pct:1024:-)

profiles=() size_override='' repeat=3 only=aftp,aftp-repeat,gridftp,scp,rsync,iperf3-bbr,iperf3-cubic
aftp='' cap=60 retries=2 iperf_seconds=15 json='' install_baselines=0
while [ $# -gt 0 ]; do
    case $1 in
    --profile) IFS=, read -r -a more <<<"$2"; profiles+=("${more[@]}"); shift 2 ;;
    --size) size_override=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --aftp) aftp=$2; shift 2 ;;
    --time-cap) cap=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --iperf-seconds) iperf_seconds=$2; shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --install-baselines) install_baselines=1; shift ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
for n in "$repeat" "$cap" "$iperf_seconds" ${size_override:+"$size_override"}; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || die "--repeat, --size, --time-cap and --iperf-seconds want whole numbers, not '$n'"
done
[[ $retries =~ ^[0-9]+$ ]] || die "--retries wants a count, not '$retries'"
IFS=, read -r -a tools <<<"$only"
for t in "${tools[@]}"; do
    case $t in aftp|aftp-repeat|gridftp|scp|rsync|iperf3-bbr|iperf3-cubic) ;;
    *) die "unknown tool '$t' (aftp, aftp-repeat, gridftp, scp, rsync, iperf3-bbr, iperf3-cubic)" ;; esac
done
wants() { [[ ",$only," == *",$1,"* ]]; }

# --- the rows: per profile (one link each, in the table's order) its sizes -----
declare -A rows_of=()
order=()
add_row() { # profile MiB goal
    local p=$1 entry="$2:$3"
    [ -n "$size_override" ] && entry="$size_override:-"
    [[ -v rows_of[$p] ]] || { order+=("$p"); rows_of[$p]=''; }
    [[ " ${rows_of[$p]} " == *" ${entry%%:*}:"* ]] || rows_of[$p]="${rows_of[$p]:+${rows_of[$p]} }$entry"
}
for p in "${profiles[@]}"; do
    [ -f "$p" ] || [ -f "$root/netem/profiles/$p.conf" ] || die "no profile '$p' (see netem/profiles/)"
done
for spec in "${table[@]}"; do
    IFS=: read -r p mib goal <<<"$spec"
    [ ${#profiles[@]} -eq 0 ] || [[ " ${profiles[*]} " == *" $p "* ]] || continue
    add_row "$p" "$mib" "$goal"
done
for p in "${profiles[@]}"; do [[ -v rows_of[$p] ]] || add_row "$p" 1024 -; done

# --- tools and binaries ---------------------------------------------------------
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
packages=(time python3 iproute2 procps coreutils util-linux)
wants iperf3-bbr || wants iperf3-cubic && packages+=(iperf3)
wants scp || wants rsync && packages+=(openssh-client openssh-server)
wants rsync && packages+=(rsync)
# GridFTP is a baseline, not a dependency of aftp: only when asked for.
wants gridftp && [ "$install_baselines" = 1 ] &&
    packages+=(globus-gass-copy-progs globus-gridftp-server-progs)
aftp_install_deps "${packages[@]}" || log "could not install every tool; what is missing is reported as not run"
if wants gridftp && ! command -v globus-url-copy >/dev/null; then
    log "GridFTP is not installed: its rows say not run (--install-baselines installs it)"
fi

# shellcheck source=bench/wan/lib.sh
. "$here/wan/lib.sh" # newest_optimised
if wants aftp || wants aftp-repeat; then
    [ -n "$aftp" ] || aftp=$(newest_optimised cli/aftp)
    if [ -z "$aftp" ] || [ ! -x "$aftp" ]; then
        die "no aftp binary: build it (cmake --build BUILD) or pass --aftp PATH"
    fi
    aftp=$(realpath "$aftp")
fi
linkemu=${aftp:+$(dirname "$(dirname "$aftp")")/netem/aftp-linkemu}
[ -n "$linkemu" ] && [ -x "$linkemu" ] || linkemu=$(newest_optimised netem/aftp-linkemu)

# --- the files, on a disk -------------------------------------------------------
sizes=()
for p in "${order[@]}"; do
    for entry in ${rows_of[$p]}; do
        [[ " ${sizes[*]} " == *" ${entry%%:*} "* ]] || sizes+=("${entry%%:*}")
    done
done
need=0 largest=0
for mib in "${sizes[@]}"; do
    need=$((need + mib))
    [ "$mib" -le "$largest" ] || largest=$mib
done
need=$(((need + largest) * 1048576 + 256 * 1048576))
base=${AFTP_WAN_DIR:-/var/tmp}
[ "$(($(stat -f -c '%a * %S' "$base")))" -gt "$need" ] ||
    die "$base has not the $((need >> 20)) MiB these rows need (the files and one copy): free some or set AFTP_WAN_DIR"
work=$(mktemp -d "$base/aftp-whole.XXXXXX")
if [ "${AFTP_BENCH_KEEP:-0}" = 1 ]; then
    trap 'log "kept $work"' EXIT
else
    trap 'rm -rf "$work"' EXIT
fi
for mib in "${sizes[@]}"; do
    log "writing a $mib MiB random file in $work ($(stat -f -c %T "$work"))"
    head -c "$((mib * 1048576))" /dev/urandom >"$work/src-${mib}M.bin"
    sha256sum <"$work/src-${mib}M.bin" | cut -d' ' -f1 >"$work/src-${mib}M.bin.sha256"
done
sync

# --- one link per profile -------------------------------------------------------
results=$work/results.jsonl
: >"$results"
t_start=$EPOCHREALTIME
for p in "${order[@]}"; do
    wan=(--profile "$p")
    [ -z "$linkemu" ] || wan+=(--linkemu "$linkemu")
    rc=0
    BENCH_WORK=$work BENCH_ROWS=${rows_of[$p]} BENCH_TOOLS=$only BENCH_REPEAT=$repeat \
    BENCH_CAP=$cap BENCH_AFTP=$aftp BENCH_RATE=auto BENCH_IPERF_SECONDS=$iperf_seconds \
    BENCH_RETRIES=$retries BENCH_RESULTS=$results BENCH_PHASES=$here/whole/phases.py \
        "$root/netem/wan.sh" "${wan[@]}" -- "$here/whole/run.sh" || rc=$?
    case $rc in
    0|3) ;; # 3: the emulator was overloaded at some point; the runs it hit do not count
    77) log "SKIP: no network namespaces here"; exit 77 ;;
    *) log "the link of $p failed: netem/wan.sh exit $rc" ;;
    esac
done

echo "$(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); files in $work ($(stat -f -c %T "$work"));" \
     "command: bench/whole.sh --profile $(IFS=,; echo "${order[*]}") ${size_override:+--size $size_override }--repeat $repeat" \
     "--only $only${aftp:+ (aftp: ${aftp#"$root"/}, emulator: ${linkemu#"$root"/})}"
echo
python3 "$here/whole/report.py" "$results" ${json:+--json "$json"}
echo "bench/whole.sh ran $(awk -v a="$t_start" -v b="$EPOCHREALTIME" 'BEGIN { printf "%.0f", b - a }') s"
# A run that failed or delivered a wrong copy (not one that was capped, voided
# by an overloaded emulator or not run for want of its tool) fails the benchmark.
python3 - "$results" <<'PY'
import json, sys
def failed(r):
    if r.get("kind") != "tool" or r.get("capped") or r.get("error", "").startswith("not run"):
        return False
    return bool(r.get("error")) or r.get("verified") is False
bad = sorted({"%s %s" % (r["row"], r["tool"]) for r in map(json.loads, open(sys.argv[1])) if failed(r)})
if bad:
    print("bench/whole: failed, not delivered or not verified: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
