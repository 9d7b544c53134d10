#!/usr/bin/env bash
# WAN benchmark: aftp next to iperf3, scp, sftp, rsync and uftp over one
# emulated link (netem/wan.sh), each moving the same random file for real.
# Prints one Markdown table; see bench/README.md for what each column means.
#
# usage: bench/wan.sh [--profile NAME] [--size MiB] [--time-cap SECONDS]
#                     [--only aftp,aftp-fixed,aftp-faux,iperf3,scp,sftp,rsync,uftp]
#                     [--json FILE]
#                     [--aftp PATH] [--rate RATE|auto] [--iperf-seconds N]
#                     [--retries N] [--wan-opt ARG]...
#        bench/wan.sh --compete solo|tcp|aftp [--policies fair,high,low]
#                     [--seconds N] [--join N] [--tcp-cc NAME] [--profile NAME]
#                     [--aftp PATH] [--rate RATE|auto] [--retries N] [--wan-opt ARG]...
#   --profile   a netem/profiles name or file (default wan-150ms)
#   --size      file size in MiB (default 256)
#   --time-cap  slow tools are stopped after this many seconds and reported
#               as capped with the rate they reached (default 60)
#   --only      tools to run, in this order (default: all but aftp-fixed and
#               aftp-faux); aftp runs with its default (adaptive) policy,
#               aftp-fixed with --policy fixed, aftp-faux as aftp but from
#               faux:// to faux:// (no file: sizes beyond memory, no disk
#               in the figures; alone, it needs no random file either)
#   --json      also write one JSON line per tool to FILE
#   --aftp      the aftp binary (default: the newest build*/cli/aftp that is
#               not a sanitizer or fuzzing build); netem/aftp-linkemu is taken
#               from the same build directory unless --wan-opt --linkemu says
#   --rate      aftp --rate: the rate of --policy fixed, the ceiling of the
#               adaptive policies (default auto: 95% of the link in payload
#               bits for fixed, no --rate for the adaptive policies)
#   --retries   measure a tool again when the link emulator was overloaded
#               during its run, up to N times (default 1)
#   --wan-opt   passed to netem/wan.sh (e.g. --wan-opt --backend --wan-opt tun)
#   --compete   flows at once on the one bottleneck, each flow's rate per
#               second at the receiver host (bench/wan/compete.sh):
#               solo: one aftp flow per policy (ramp-up, busiest second);
#               tcp: per policy, aftp and one iperf3 TCP flow started together
#               (means over the common interval, TCP's share);
#               aftp: two aftp flows of the first policy, the second joining
#               --join seconds later (Jain's index, joiner's time to its share)
#   --policies  aftp policies for --compete (default fair,high,low; aftp: fair)
#   --seconds   length of one --compete run (default 40)
#   --join      --compete aftp: when the second flow starts (default 10)
#   --tcp-cc    the TCP flow's congestion control (default cubic)
# Environment: AFTP_BENCH_KEEP=1 keeps the work directory (logs, progress).
# AFTP_WAN_DIR holds the file and the copies (default /dev/shm
# when it has room, else $TMPDIR or /tmp: see bench/wan/scratch.sh).
# Run as root: installs the baseline tools (Debian packages) when missing.
# Exit status: 0, 1 when a tool failed or did not verify, 2 usage, 3 when the
# emulator reported overload during a row of the table (the run is INVALID),
# 77 without namespaces.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "bench/wan: $*" >&2; exit 2; }

profile=wan-150ms size_mib=256 cap=60 only=aftp,iperf3,scp,sftp,rsync,uftp json='' aftp=''
rate=auto iperf_seconds=20 retries=1 wan_opts=()
compete='' policies='' seconds=40 join=10 tcp_cc=cubic
while [ $# -gt 0 ]; do
    case $1 in
    --profile) profile=$2; shift 2 ;;
    --size) size_mib=$2; shift 2 ;;
    --time-cap) cap=$2; shift 2 ;;
    --only) only=$2; shift 2 ;;
    --json) json=$(realpath -m "$2"); shift 2 ;;
    --aftp) aftp=$2; shift 2 ;;
    --rate) rate=$2; shift 2 ;;
    --iperf-seconds) iperf_seconds=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --wan-opt) wan_opts+=("$2"); shift 2 ;;
    --compete) compete=$2; shift 2 ;;
    --policies) policies=$2; shift 2 ;;
    --seconds) seconds=$2; shift 2 ;;
    --join) join=$2; shift 2 ;;
    --tcp-cc) tcp_cc=$2; shift 2 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) die "unknown option $1 (see --help)" ;;
    esac
done
[[ $size_mib =~ ^[1-9][0-9]*$ ]] || die "--size wants a whole number of MiB"
[[ $cap =~ ^[1-9][0-9]*$ ]] || die "--time-cap wants whole seconds"
[[ $iperf_seconds =~ ^[1-9][0-9]*$ ]] || die "--iperf-seconds wants whole seconds"
[[ $retries =~ ^[0-9]+$ ]] || die "--retries wants a count"
[[ $seconds =~ ^[1-9][0-9]*$ ]] || die "--seconds wants whole seconds"
[[ $join =~ ^[0-9]+$ ]] || die "--join wants whole seconds"
if [ "$compete" = aftp ] && [ "$join" -ge "$seconds" ]; then die "--join must be below --seconds"; fi
case $compete in
'') ;;
solo|tcp|aftp) only=aftp
    [ -n "$policies" ] || { [ "$compete" = aftp ] && policies=fair || policies=fair,high,low; } ;;
*) die "--compete wants solo, tcp or aftp" ;;
esac

# --- tools: what each one needs (Debian packages), installed when missing ------
IFS=, read -r -a tools <<<"$only"
packages=(time python3 iproute2 procps coreutils findutils)
[ -z "$compete" ] || packages+=(nftables iperf3)
for tool in "${tools[@]}"; do
    case $tool in
    aftp|aftp-fixed|aftp-faux) ;;
    iperf3) packages+=(iperf3) ;;
    scp|sftp) packages+=(openssh-client openssh-server) ;;
    rsync) packages+=(openssh-client openssh-server rsync) ;;
    uftp) packages+=(uftp) ;;
    *) die "unknown tool '$tool' (aftp, aftp-fixed, aftp-faux, iperf3, scp, sftp, rsync, uftp)" ;;
    esac
done
# shellcheck source=scripts/deps.sh
. "$root/scripts/deps.sh"
# The benchmark starts its own sshd and uftpd inside the receiver namespace;
# the packages are only needed for their binaries (see bench/README.md about
# the host's own sshd that Debian's openssh-server package enables).
aftp_install_deps "${packages[@]}" ||
    echo "bench/wan: could not install every baseline; missing tools are reported as not run" >&2

# shellcheck source=bench/wan/lib.sh
. "$here/wan/lib.sh" # newest_optimised

if [[ " ${tools[*]} " == *" aftp"[\ -]* ]]; then
    [ -n "$aftp" ] || aftp=$(newest_optimised cli/aftp)
    if [ -z "$aftp" ] || [ ! -x "$aftp" ]; then
        die "no aftp binary: build it (cmake --build BUILD) or pass --aftp PATH"
    fi
    aftp=$(realpath "$aftp")
fi

# The link emulator: from aftp's build directory, else the newest optimised one.
linkemu=''
if [[ " ${wan_opts[*]} " != *" --linkemu "* ]]; then
    linkemu=${aftp:+$(dirname "$(dirname "$aftp")")/netem/aftp-linkemu}
    [ -n "$linkemu" ] && [ -x "$linkemu" ] || linkemu=$(newest_optimised netem/aftp-linkemu)
    [ -z "$linkemu" ] || wan_opts+=(--linkemu "$linkemu")
fi

# The work directory (samples, logs, progress of every run) goes at exit,
# unless AFTP_BENCH_KEEP=1 asks to keep it for a closer look.
keep_or_remove_work() {
    if [ "${AFTP_BENCH_KEEP:-0}" = 1 ]; then
        trap 'echo "bench/wan: kept $work" >&2' EXIT
    else
        trap 'rm -rf "$work"' EXIT
    fi
}
# shellcheck source=bench/wan/scratch.sh
. "$here/wan/scratch.sh"

# --- competing flows: their own runs and report ----------------------------------
if [ -n "$compete" ]; then
    # Up to two sources and their copies, each a run at 1 Gbit/s.
    work=$(mktemp -d "$(pick_scratch_dir $((4 * (seconds + 5) * 125000000)))/aftp-wan-compete.XXXXXX")
    keep_or_remove_work
    echo "$(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ); command: bench/wan.sh" \
         "--compete $compete --policies $policies --seconds $seconds --join $join" \
         "--tcp-cc $tcp_cc --profile $profile (aftp: ${aftp#"$root"/}," \
         "emulator: ${linkemu#"$root"/})"
    echo
    rc=0
    BENCH_WORK=$work BENCH_AFTP=$aftp BENCH_RATE=$rate BENCH_COMPETE=$compete \
    BENCH_POLICIES=$policies BENCH_SECONDS=$seconds BENCH_JOIN=$join BENCH_TCP_CC=$tcp_cc \
    BENCH_RETRIES=$retries "$root/netem/wan.sh" --profile "$profile" "${wan_opts[@]}" -- \
        "$here/wan/compete.sh" || rc=$?
    [ "$rc" -ne 77 ] || { echo "bench/wan: SKIP: no network namespaces here" >&2; exit 77; }
    exit "$rc"
fi

# --- the file, the run, the table ----------------------------------------------
# aftp-faux alone moves no file: no space needed, none written.
file_mib=$size_mib
[ "$only" != aftp-faux ] || file_mib=0
work=$(mktemp -d "$(pick_scratch_dir $((3 * file_mib * 1048576)))/aftp-wan-bench.XXXXXX")
keep_or_remove_work
echo "bench/wan: writing a ${file_mib} MiB random file in $work" >&2
head -c "$((file_mib * 1048576))" /dev/urandom >"$work/bench.bin"
sha=$(sha256sum <"$work/bench.bin" | cut -d' ' -f1)

wan_rc=0
BENCH_WORK=$work BENCH_SRC=$work/bench.bin BENCH_SRC_SHA=$sha BENCH_SIZE=$((size_mib * 1048576)) \
BENCH_TOOLS=$only \
BENCH_CAP=$cap BENCH_AFTP=$aftp BENCH_RATE=$rate BENCH_IPERF_SECONDS=$iperf_seconds \
BENCH_RETRIES=$retries BENCH_RESULTS=$work/results.jsonl \
    "$root/netem/wan.sh" --profile "$profile" "${wan_opts[@]}" -- "$here/wan/run.sh" || wan_rc=$?
case $wan_rc in
0|3) ;;
77) echo "bench/wan: SKIP: no network namespaces here" >&2; exit 77 ;;
*) [ -s "$work/results.jsonl" ] || die "netem/wan.sh failed (exit $wan_rc)" ;;
esac

echo
echo "$(nproc) cores, $(uname -r), $(date -u +%Y-%m-%dT%H:%MZ);" \
     "command: bench/wan.sh --profile $profile --size $size_mib --time-cap $cap --only $only" \
     "${aftp:+(aftp: ${aftp#"$root"/})}" "${linkemu:+(emulator: ${linkemu#"$root"/})}"
echo
table_rc=0
python3 "$here/wan/report.py" table "$work/results.jsonl" "$wan_rc" ${json:+--json "$json"} ||
    table_rc=$?
[ "$table_rc" -eq 0 ] || exit "$table_rc" # 3: INVALID
# Every tool that was not capped must have ended well with a verified copy.
python3 - "$work/results.jsonl" <<'PY'
import json, sys
bad = [r["tool"] for r in map(json.loads, open(sys.argv[1]))
       if r.get("kind") == "tool" and not r.get("capped")
       and (r.get("error") or r.get("verified") is False)]
if bad:
    print("bench/wan: failed, not delivered or not verified: " + ", ".join(bad), file=sys.stderr)
    sys.exit(1)
PY
