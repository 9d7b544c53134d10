#!/usr/bin/env bash
# libaftp's client tiers next to the CLI and a baseline CLI, in one run:
# one file sent REPEAT times by each of
#   base     BASE_AFTP send  -> BASE_AFTP recv   (the baseline, e.g. the CLI
#                                                 before the library existed)
#   cli      aftp send       -> aftp recv        (this build's CLI)
#   blocking aftp_bench_tiers --tier blocking -> aftp recv
#   uv       aftp_bench_tiers --tier uv       -> aftp recv
# interleaved (base, cli, blocking, uv, base, ...), each timed as a user
# times it: from starting the sender to its exit, disk to disk (the
# receiver has the file verified and durable under its name before the
# sender hears so). Prints every run, then per row the median seconds and
# goodput and the ratios of its median goodput to base's and to cli's.
# A benchmark prints figures; it never passes or fails on a speed.
#
# usage: bench/tiers.sh --base-aftp PATH [--build DIR] [--size MiB] [--repeat N]
#                       [--profile NAME] [--rate RATE] [--policy POLICY]
#                       [--time-cap SECONDS] [--retries N]
#   --base-aftp  the baseline aftp binary (its own `recv` receives its runs)
#   --build      this build's tree (default: build): DIR/cli/aftp, DIR/lib/libaftp.so
#                and DIR/include; aftp_bench_tiers is compiled from
#                bench/aftp_bench_tiers.c against it (public headers and
#                libaftp only)
#   --size       MiB of random data (default 1024; env SIZE too)
#   --repeat     runs per row (default 3; env REPEAT too)
#   --profile    a netem/profiles/ name (e.g. wan-150ms-1pct, the emulated
#                1 Gbit/s 150 ms 1% link): each run crosses a netem/wan.sh
#                link of its own between two namespaces instead of 127.0.0.1
#   --retries    under a profile, a run during which the link emulator was
#                overloaded is measured again up to N times (default 2),
#                then left out of the medians as INVALID
#   --rate, --policy  given to every sender (default: none, aftp send's
#                defaults)
#   --time-cap   a sender still running after this many seconds is stopped
#                and its run counts as failed (default 600)
# Environment: BENCH_DIR (default /dev/shm) holds the source and received
# files (2 x size): tmpfs measures the transfer without a disk's speed.
# Exit status: 0; 1 when a run failed or delivered a different copy; 2 for
# a usage error; under a profile 77 without network namespaces (a run left
# out as INVALID is said, and counts as neither).
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/.." && pwd)

die() { echo "tiers: $*" >&2; exit 2; }

base='' build=$root/build size=${SIZE:-1024} repeat=${REPEAT:-3} profile='' cap=600
send_opts=() inner='' run_row='' run_n='' retries=2
while [ $# -gt 0 ]; do
    case $1 in
    --base-aftp) base=$2; shift 2 ;;
    --build) build=$2; shift 2 ;;
    --size) size=$2; shift 2 ;;
    --repeat) repeat=$2; shift 2 ;;
    --profile) profile=$2; shift 2 ;;
    --rate|--policy) send_opts+=("$1" "$2"); shift 2 ;;
    --time-cap) cap=$2; shift 2 ;;
    --retries) retries=$2; shift 2 ;;
    --inner) inner=$2; shift 2 ;; # the work directory, inside netem/wan.sh
    --run) run_row=$2 run_n=$3; shift 3 ;; # with --inner: that one run
    *) die "unknown option $1 (usage: see the top of $0)" ;;
    esac
done

# ---- one run of a row: sets secs (or leaves it empty when the run failed) ----
# The receiver and the sender run through $RCV and $SND (nsenter into the
# link's namespaces under a profile, nothing on loopback).
one_run() {
    local row=$1 n=$2 port=$((7400 + $2 % 100))
    local recv_bin=$aftp out=$work/runs/$row.$n
    [ "$row" = base ] && recv_bin=$base
    rm -f "$work/dst/src.bin"
    # shellcheck disable=SC2086 # $RCV is a command prefix
    timeout -k 5 "$cap" $RCV "$recv_bin" recv --listen "$ADDR:$port" --dir "$work/dst" --once \
        --identity "$work/keys/recv" --authorized-keys "$work/keys/send.pub" \
        >"$out.recv.out" 2>"$out.recv.err" &
    local recv_pid=$!
    for _ in $(seq 200); do
        grep -q "listening on" "$out.recv.err" 2>/dev/null && break
        kill -0 "$recv_pid" 2>/dev/null || break
        sleep 0.05
    done
    local -a sender
    case $row in
    base|cli) sender=("$recv_bin" send) ;;
    *) sender=("$work/aftp_bench_tiers" --tier "$row") ;;
    esac
    local t0 t1 rc=0 recv_rc=0
    t0=$(date +%s.%N)
    # shellcheck disable=SC2086
    timeout -k 5 "$cap" $SND "${sender[@]}" --identity "$work/keys/send" \
        --peer-key "$work/keys/recv.pub" "${send_opts[@]}" "$work/src.bin" "$ADDR:$port" \
        >"$out.send.out" 2>"$out.send.err" || rc=$?
    t1=$(date +%s.%N)
    wait "$recv_pid" || recv_rc=$?
    [ "$rc" -ne 0 ] || rc=$recv_rc
    secs=''
    if [ "$rc" -ne 0 ]; then
        echo "  $row run $n FAILED (exit $rc): $(tail -n 1 "$out.send.err")"
    elif ! cmp -s "$work/src.bin" "$work/dst/src.bin"; then
        echo "  $row run $n FAILED: the received copy differs"
    else
        secs=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.3f", b - a }')
        echo "  $row run $n: $secs s, $(awk -v s="$secs" -v m="$size" \
            'BEGIN { printf "%.1f", m * 8 * 1.048576 / s }') Mbit/s"
    fi
}

# Median of the numbers on stdin (one per line); empty for none.
median() {
    sort -n | awk '{ v[NR] = $1 } END { if (NR) print (NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2) }'
}

# Per row: runs, median seconds and goodput, ratios of goodput to base and cli.
report() {
    local row med base_med cli_med
    base_med=$(median <"$work/secs.base")
    cli_med=$(median <"$work/secs.cli")
    echo
    echo "| row | runs ok | median s | median Mbit/s | x base | x cli |"
    echo "|---|---|---|---|---|---|"
    for row in base cli blocking uv; do
        med=$(median <"$work/secs.$row")
        if [ -z "$med" ]; then
            echo "| $row | 0/$repeat | - | - | - | - |"
            continue
        fi
        awk -v r="$row" -v ok="$(wc -l <"$work/secs.$row")" -v n="$repeat" -v s="$med" \
            -v m="$size" -v b="$base_med" -v c="$cli_med" 'BEGIN {
                printf "| %s | %d/%d | %.3f | %.1f | %s | %s |\n", r, ok, n, s, m * 8 * 1.048576 / s,
                       b == "" ? "-" : sprintf("%.3f", b / s), c == "" ? "-" : sprintf("%.3f", c / s) }'
    done
}

# One run on loopback: its seconds appended to secs.ROW; 1 when it failed.
loopback_run() {
    one_run "$1" "$2"
    [ -n "$secs" ] || return 1
    echo "$secs" >>"$work/secs.$1"
}

# One run inside netem/wan.sh's link: its seconds in run.secs, which the
# caller keeps only when the emulator then says the link was valid.
inner_run() {
    one_run "$1" "$2"
    [ -n "$secs" ] || return 1
    echo "$secs" >"$work/run.secs"
}

# One run across the emulated link, in a link of its own (netem/wan.sh):
# the emulator judges each run, and a run during which it was overloaded
# (exit 3) is measured again, up to --retries times, then left out as
# INVALID. A link per run, not one for the whole table: over a minute and
# more of traffic, one late burst would void every figure.
link_run() {
    local attempt status
    for attempt in $(seq 0 "$retries"); do
        status=0
        rm -f "$work/run.secs"
        "$root/netem/wan.sh" "${wan[@]}" -- "$0" "${args[@]}" --run "$1" "$2" || status=$?
        [ "$status" -ne 77 ] || exit 77
        if [ "$status" -ne 3 ]; then
            [ "$status" -ne 0 ] || cat "$work/run.secs" >>"$work/secs.$1"
            return "$status"
        fi
        echo "  $1 run $2: INVALID (the link emulator was overloaded)$(
            [ "$attempt" -lt "$retries" ] && echo ", measured again")"
    done
    invalid=1
    return 0
}

# ---- the runs, interleaved (base, cli, blocking, uv, base, ...) ----
runs() {
    local failed=0
    mkdir -p "$work/runs" "$work/dst"
    for row in base cli blocking uv; do : >"$work/secs.$row"; done
    for n in $(seq "$repeat"); do
        for row in base cli blocking uv; do
            "$1" "$row" "$n" || failed=1
        done
    done
    report
    return $failed
}

if [ -n "$inner" ]; then # inside netem/wan.sh's link: one run
    work=$inner aftp=$build/cli/aftp
    RCV=$WAN_RCV_EXEC SND=$WAN_SND_EXEC ADDR=$WAN_RCV_ADDR
    [ -n "$run_row" ] || die "--inner needs --run ROW N"
    inner_run "$run_row" "$run_n"
    exit $?
fi

# ---- set-up ----
[ -n "$base" ] || die "--base-aftp PATH is needed: the baseline CLI to compare with"
[ -x "$base" ] || die "--base-aftp $base: not an executable"
base=$(realpath "$base")
[ -d "$build" ] || die "--build $build: not a directory"
build=$(cd "$build" && pwd)
aftp=$build/cli/aftp
[ -x "$aftp" ] || die "no aftp at $aftp (--build DIR: a built tree)"
[ -e "$build/lib/libaftp.so" ] || die "no libaftp.so in $build/lib"
[[ "$size" =~ ^[1-9][0-9]*$ ]] || die "--size: MiB, a whole number"
[[ "$repeat" =~ ^[1-9][0-9]*$ ]] || die "--repeat: a whole number"
command -v pkg-config >/dev/null || die "pkg-config is needed (libuv's flags)"

work=$(mktemp -d "${BENCH_DIR:-/dev/shm}/aftp-tiers-XXXXXX")
trap 'rm -rf "$work"' EXIT
# Public headers and libaftp only: the program sees nothing internal.
# shellcheck disable=SC2046 # pkg-config's output is a word list
cc -O2 -std=c99 -Wall -Wextra -Werror -I"$root/include" -I"$build/include" \
    -o "$work/aftp_bench_tiers" "$here/aftp_bench_tiers.c" \
    -L"$build/lib" -laftp $(pkg-config --cflags --libs libuv) -Wl,-rpath,"$build/lib"
mkdir -m 700 "$work/keys"
for who in recv send; do
    "$aftp" keygen -f "$work/keys/$who" >/dev/null 2>&1 || die "$aftp keygen failed"
done
head -c "$((size << 20))" /dev/urandom >"$work/src.bin"

echo "tiers: $size MiB x $repeat, ${profile:-loopback 127.0.0.1}, in $(stat -f -c %T "$work")" \
     "$work; base $base ($("$base" --version 2>/dev/null | head -n 1)); this build $aftp" \
     "($("$aftp" --version | head -n 1)); sender options: ${send_opts[*]:-none}"
if [ -n "$profile" ]; then
    args=(--build "$build" --size "$size" --repeat "$repeat" --base-aftp "$base"
          --time-cap "$cap" --inner "$work" "${send_opts[@]}")
    # The link's emulator from the same build (netem/wan.sh otherwise looks
    # for build*/netem/aftp-linkemu).
    wan=(--profile "$profile")
    [ -x "$build/netem/aftp-linkemu" ] && wan+=(--linkemu "$build/netem/aftp-linkemu")
    invalid=0 status=0
    runs link_run || status=$?
    [ "$invalid" -eq 0 ] ||
        echo "tiers: some runs were INVALID after $retries retries (left out of the medians)"
    exit "$status"
else
    RCV='' SND='' ADDR=127.0.0.1
    runs loopback_run
fi
