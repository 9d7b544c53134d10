#!/usr/bin/env bash
# shellcheck disable=SC2317 # functions reached only through "setup_$backend" and traps
# Runs a command with an emulated WAN between two private network namespaces
# (sender side 198.18.0.1, receiver side 198.18.0.2), then tears it all down.
#
# usage: netem/wan.sh [--profile NAME|FILE] [--backend auto|netem|tun] [--seed N]
#                     [--mtu 1500|9000] [--set KEY=VALUE]... [--stats FILE]
#                     [--linkemu PATH] [--userns] [--emu-opt ARG]...
#                     -- COMMAND [ARG...]
#        netem/wan.sh --probe      prints "MODE BACKEND" (e.g. "root tun") and exits
#
# COMMAND runs in a namespace of its own with, among others (see README.md):
#   $WAN_SND_EXEC cmd...   runs cmd on the sender side   (nsenter into it)
#   $WAN_RCV_EXEC cmd...   runs cmd on the receiver side
#   WAN_SND_ADDR, WAN_RCV_ADDR, WAN_IFACE, WAN_BACKEND, WAN_MODE, WAN_STATS,
#   WAN_EMU_PID (tun backend: kill -USR1 it to refresh $WAN_STATS), and the
#   profile as WAN_PROFILE, WAN_MTU, WAN_RTT_US, WAN_FWD_RATE_BPS, WAN_FWD_LOSS...
# Exit status: COMMAND's; 3 when COMMAND succeeded but the emulator reported
# overload (the run is INVALID); 77 when no network namespace can be made.
set -euo pipefail

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
SND_ADDR=198.18.0.1
RCV_ADDR=198.18.0.2
IFACE=wan0

die() { echo "wan: $*" >&2; exit 2; }

profile=lan backend=auto seed=1 stats_out='' linkemu=${AFTP_LINKEMU:-} force_userns=0 probe=0
emu_opts=() overrides=()
while [ $# -gt 0 ]; do
    case $1 in
    --profile) profile=$2; shift 2 ;;
    --backend) backend=$2; shift 2 ;;
    --seed) seed=$2; shift 2 ;;
    --mtu) overrides+=("mtu=$2"); shift 2 ;;
    --set) overrides+=("$2"); shift 2 ;;
    --stats) stats_out=$2; shift 2 ;;
    --linkemu) linkemu=$2; shift 2 ;;
    --userns) force_userns=1; shift ;;
    --emu-opt) emu_opts+=("$2"); shift 2 ;;
    --probe) probe=1; shift ;;
    --) shift; break ;;
    *) die "unknown option $1 (usage: see the top of $0)" ;;
    esac
done
[ $# -gt 0 ] || [ "$probe" = 1 ] || die "no command given (usage: wan.sh [options] -- COMMAND...)"
case $backend in auto|netem|tun) ;; *) die "--backend must be auto, netem or tun" ;; esac

# --- privileges: real root, or root inside a user namespace ------------------
if [ -z "${WAN_IN_USERNS:-}" ]; then
    if [ "$force_userns" = 0 ] && unshare -n true 2>/dev/null; then
        mode=root
    elif unshare -rn true 2>/dev/null; then
        # Re-run inside a user + network namespace: we own every namespace we
        # create from there, and the script itself sees no host network.
        args=(--profile "$profile" --backend "$backend" --seed "$seed")
        for o in "${overrides[@]}"; do args+=(--set "$o"); done
        [ -n "$stats_out" ] && args+=(--stats "$(realpath -m "$stats_out")")
        [ -n "$linkemu" ] && args+=(--linkemu "$(realpath -m "$linkemu")")
        for o in "${emu_opts[@]}"; do args+=(--emu-opt "$o"); done
        [ "$probe" = 1 ] && args+=(--probe)
        [ -f "$profile" ] && args[1]=$(realpath "$profile")
        WAN_IN_USERNS=1 exec unshare -rn -- "$BASH" "$0" "${args[@]}" -- "$@"
    else
        echo "wan: SKIP: cannot create network namespaces (need root, or unprivileged" \
             "user namespaces for 'unshare -rn')" >&2
        exit 77
    fi
else
    mode=userns
fi

# --- teardown: whatever happens from here on, leave nothing behind ------------
holders=() emu_pid='' cmd_pid=''

cleanup() {
    trap - EXIT INT TERM HUP
    if [ -n "$cmd_pid" ]; then kill -TERM "$cmd_pid" 2>/dev/null || true; fi
    if [ -n "$emu_pid" ]; then
        kill -TERM "$emu_pid" 2>/dev/null || true
        wait "$emu_pid" 2>/dev/null || true
    fi
    for pid in "${holders[@]}"; do kill -KILL "$pid" 2>/dev/null || true; done
    for pid in "${holders[@]}"; do wait "$pid" 2>/dev/null || true; done
    [ -z "${workdir:-}" ] || rm -rf "$workdir"
}
trap cleanup EXIT
trap 'cleanup; exit 130' INT
trap 'cleanup; exit 143' TERM
trap 'cleanup; exit 129' HUP

# --- the profile and the emulator binary --------------------------------------
profile_file=$profile
[ -f "$profile_file" ] || profile_file=$here/profiles/$profile.conf
[ -f "$profile_file" ] || die "no profile '$profile' (see $here/profiles/)"
workdir=$(mktemp -d "${TMPDIR:-/tmp}/aftp-wan.XXXXXX")
if [ ${#overrides[@]} -gt 0 ]; then # the last setting in a profile wins
    derived=$workdir/$(basename "$profile_file")
    { cat "$profile_file"; echo; printf '%s\n' "${overrides[@]}"; } >"$derived"
    profile_file=$derived
fi
# The newest emulator of a build without sanitizers or fuzzing: an
# instrumented emulator is too slow and makes every run look overloaded.
if [ -z "$linkemu" ]; then
    for candidate in $(ls -t "$here"/../build*/netem/aftp-linkemu 2>/dev/null); do
        grep -Eq '^AFTP_(SANITIZE|FUZZ):BOOL=ON' "${candidate%/netem/aftp-linkemu}/CMakeCache.txt" \
            2>/dev/null && continue
        linkemu=$candidate
        break
    done
fi
[ -n "$linkemu" ] && [ -x "$linkemu" ] ||
    die "aftp-linkemu not found: build it (cmake --build BUILD --target aftp-linkemu) or pass --linkemu"
describe=$("$linkemu" --profile "$profile_file" --describe) || die "bad profile $profile_file"
eval "$describe" # WAN_PROFILE, WAN_MTU, WAN_RTT_US, WAN_FWD_*, WAN_REV_*

# --- namespaces held by processes (no bind mounts: works in a user namespace) -
# Starts a process in a new network namespace and waits until it is really
# there: entering it earlier would configure our own namespace instead.
new_host() {
    setpriv --pdeathsig KILL -- unshare -n -- sleep infinity &
    local pid=$! self tries=0
    holders+=("$pid")
    self=$(readlink /proc/self/ns/net)
    until [ "$(readlink "/proc/$pid/ns/net" 2>/dev/null)" != "$self" ] &&
          [ "$(cat "/proc/$pid/comm" 2>/dev/null)" = sleep ]; do
        tries=$((tries + 1))
        [ "$tries" -lt 500 ] || die "namespace holder $pid did not start"
        sleep 0.01
    done
    new_host_pid=$pid
}

in_ns() { # pid, command...
    local pid=$1
    shift
    nsenter --target "$pid" --net -- "$@"
}

netem_available() { # probe in a scratch namespace: never assume the kernel has netem
    new_host
    local pid=$new_host_pid
    in_ns "$pid" ip link add name probe0 type veth peer name probe1 2>/dev/null &&
        in_ns "$pid" tc qdisc add dev probe0 root netem delay 1ms 2>/dev/null
}

if [ "$backend" = auto ]; then
    if netem_available; then backend=netem; else backend=tun; fi
elif [ "$backend" = netem ] && ! netem_available; then
    die "backend netem: this kernel has no netem qdisc (sch_netem); use --backend tun"
fi
if [ "$probe" = 1 ]; then
    echo "$mode $backend"
    exit 0
fi
if [ "$backend" = tun ] && ! { [ -r /dev/net/tun ] && [ -w /dev/net/tun ]; }; then
    die "backend tun needs read/write access to /dev/net/tun ($(stat -c %A /dev/net/tun 2>/dev/null ||
        echo missing) here): run as root, or give it Debian's usual mode 0666"
fi

new_host; snd=$new_host_pid
new_host; rcv=$new_host_pid
for pid in "$snd" "$rcv"; do in_ns "$pid" ip link set lo up; done

setup_tun() {
    rm -f "$workdir/ready"
    "$linkemu" --profile "$profile_file" --snd-netns "/proc/$snd/ns/net" \
        --rcv-netns "/proc/$rcv/ns/net" --ifname "$IFACE" --seed "$seed" \
        --stats "$workdir/stats.json" --ready-file "$workdir/ready" "${emu_opts[@]}" &
    emu_pid=$!
    local tries=0
    until [ -e "$workdir/ready" ]; do
        kill -0 "$emu_pid" 2>/dev/null || { emu_pid=; die "aftp-linkemu failed to start"; }
        tries=$((tries + 1))
        [ "$tries" -lt 1000 ] || die "aftp-linkemu did not become ready"
        sleep 0.01
    done
    local pid local_addr peer_addr
    for pid in "$snd" "$rcv"; do
        if [ "$pid" = "$snd" ]; then local_addr=$SND_ADDR peer_addr=$RCV_ADDR
        else local_addr=$RCV_ADDR peer_addr=$SND_ADDR; fi
        # No qdisc on the TUN: the emulator's queue is the only queue, and a
        # packet the device cannot hand over is counted as overload. The
        # emulator reads up to 1024 packets at once: keep txqueuelen below.
        no_ipv6 "$pid"
        in_ns "$pid" ip link set dev "$IFACE" mtu "$WAN_MTU" txqueuelen 1000
        in_ns "$pid" tc qdisc replace dev "$IFACE" root noqueue 2>/dev/null || true
        in_ns "$pid" ip addr add "$local_addr/32" peer "$peer_addr/32" dev "$IFACE"
    done
    for pid in "$snd" "$rcv"; do in_ns "$pid" ip link set dev "$IFACE" up; done
}

# IPv4 only: no IPv6 autoconfiguration chatter crossing the emulated link.
no_ipv6() { in_ns "$1" sysctl -qw "net.ipv6.conf.$IFACE.disable_ipv6=1" 2>/dev/null || true; }

mac_of() { in_ns "$1" ip -br link show dev "$IFACE" | awk '{print $3}'; }

# sender -- s0 [router: bridge; netem+tbf on each egress port] r0 -- receiver.
# The shaping sits in a router, not on the hosts: a qdisc on the sending host
# would push back on its sockets instead of dropping like a real bottleneck.
setup_netem() {
    new_host; local rtr=$new_host_pid pid port dir
    in_ns "$snd" ip link add name "$IFACE" type veth peer name s0 netns "$rtr"
    in_ns "$rcv" ip link add name "$IFACE" type veth peer name r0 netns "$rtr"
    in_ns "$rtr" ip link add name br0 type bridge forward_delay 0
    for port in s0 r0; do
        in_ns "$rtr" ip link set dev "$port" mtu "$WAN_MTU" master br0 up
    done
    in_ns "$rtr" ip link set dev br0 mtu "$WAN_MTU" up
    # Port egress shapes the direction that leaves through it; stab makes
    # the rate count IP bytes as the TUN emulator does (no Ethernet header).
    for port in r0:fwd s0:rev; do
        dir=${port#*:} port=${port%:*}
        # shellcheck disable=SC2046 # the emulator prints whitespace-separated tc options
        in_ns "$rtr" tc qdisc add dev "$port" root handle 1: stab overhead -14 \
            netem $("$linkemu" --profile "$profile_file" --netem-args "$dir")
        local tbf
        tbf=$("$linkemu" --profile "$profile_file" --tbf-args "$dir")
        # shellcheck disable=SC2086
        [ -z "$tbf" ] || in_ns "$rtr" tc qdisc add dev "$port" parent 1:1 handle 10: tbf $tbf
    done
    for pid in "$snd" "$rcv"; do
        no_ipv6 "$pid"
        # One wire packet per skb, so loss and reordering hit packets, not
        # GSO super-packets.
        in_ns "$pid" ip link set dev "$IFACE" mtu "$WAN_MTU" gso_max_segs 1 up
    done
    in_ns "$snd" ip addr add "$SND_ADDR/24" dev "$IFACE"
    in_ns "$rcv" ip addr add "$RCV_ADDR/24" dev "$IFACE"
    # Static neighbours: ARP through a lossy link would add its own stalls.
    in_ns "$snd" ip neigh replace "$RCV_ADDR" lladdr "$(mac_of "$rcv")" dev "$IFACE" nud permanent
    in_ns "$rcv" ip neigh replace "$SND_ADDR" lladdr "$(mac_of "$snd")" dev "$IFACE" nud permanent
    netem_router=$rtr
}

netem_stats() {
    local fwd rev
    fwd=$(in_ns "$netem_router" tc -s -j qdisc show dev r0)
    rev=$(in_ns "$netem_router" tc -s -j qdisc show dev s0)
    printf '{"backend":"netem","profile":"%s","fwd":%s,"rev":%s,"valid":true}\n' \
        "$WAN_PROFILE" "$fwd" "$rev" >"$workdir/stats.json"
}

"setup_$backend"

export WAN_BACKEND=$backend WAN_MODE=$mode WAN_IFACE=$IFACE
export WAN_SND_ADDR=$SND_ADDR WAN_RCV_ADDR=$RCV_ADDR WAN_SND_PID=$snd WAN_RCV_PID=$rcv
export WAN_SND_EXEC="nsenter --target $snd --net --" WAN_RCV_EXEC="nsenter --target $rcv --net --"
export WAN_STATS=$workdir/stats.json WAN_EMU_PID=$emu_pid WAN_PROFILE_FILE=$profile_file
# shellcheck disable=SC2046 # export every WAN_* variable the profile described
export $(printf '%s\n' "$describe" | cut -d= -f1)

# COMMAND itself gets an empty network namespace (in userns mode the script
# already has one): traffic sent without $WAN_*_EXEC goes nowhere, never to
# the host's network.
isolate=()
[ "$mode" = userns ] || isolate=(unshare -n --)
rc=0
"${isolate[@]}" "$@" &
cmd_pid=$!
wait "$cmd_pid" || rc=$?
cmd_pid=

if [ "$backend" = tun ]; then
    kill -TERM "$emu_pid" 2>/dev/null || true
    wait "$emu_pid" 2>/dev/null || true
    emu_pid=
else
    netem_stats
fi
report=$(cat "$workdir/stats.json" 2>/dev/null || echo '{"valid":false,"error":"no report"}')
[ -n "$stats_out" ] && printf '%s\n' "$report" >"$stats_out"
if printf '%s' "$report" | grep -q '"valid":true}$'; then
    echo "wan: $backend/$WAN_PROFILE ($mode): emulator VALID" >&2
else
    echo "wan: $backend/$WAN_PROFILE ($mode): emulator INVALID (overloaded): $report" >&2
    [ "$rc" -ne 0 ] || rc=3
fi
exit "$rc"
