#!/usr/bin/env python3
"""How much traffic the user-space emulator (aftp-linkemu) carries here.

Blasts UDP through the TUN backend on an unlimited 1 ms link at rising rates,
one direction alone and both directions at once, and prints what arrived, the
emulator's CPU use and its overload verdict. The highest VALID row is the
largest rate this machine can emulate faithfully at that MTU.

usage: netem/measure_emulator.py BUILD_DIR [--mtu 1500,9000] [--seconds 3]
                                 [--rates-1500 400,600,...] [--rates-9000 ...]
"""
import argparse
import json
import os
import subprocess
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
IP_UDP = 28

# Runs inside wan.sh: one sink + one paced sender per direction asked for.
INNER = r'''
set -e
blast=$1 rate=$2 secs=$3 both=$4 out=$5
size=$((WAN_MTU - 28))
run_dir() { # exec-from exec-to to-addr port tag
    rm -f "$out.$5.ready"
    $2 "$blast" sink --port $4 --seconds $((${secs%.*} + 10)) --idle-ms 1500 \
        --ready-file "$out.$5.ready" >"$out.$5.sink" &
    until [ -e "$out.$5.ready" ]; do sleep 0.01; done
    $1 "$blast" send --to $3 --port $4 --rate $rate --size $size --seconds $secs >"$out.$5.send"
    wait
}
run_dir "$WAN_SND_EXEC" "$WAN_RCV_EXEC" $WAN_RCV_ADDR 9001 fwd &
[ "$both" = 1 ] && run_dir "$WAN_RCV_EXEC" "$WAN_SND_EXEC" $WAN_SND_ADDR 9002 rev &
wait
'''


def measure(build, mtu, rate, seconds, both):
    build = os.path.abspath(build)  # the hosts run the tools from their own directory
    blast = os.path.join(build, "tests", "netem", "netem_udpblast")
    linkemu = os.path.join(build, "netem", "aftp-linkemu")
    with tempfile.TemporaryDirectory() as tmp:
        out, stats = os.path.join(tmp, "m"), os.path.join(tmp, "stats.json")
        cmd = [os.path.join(HERE, "wan.sh"), "--profile", "lan", "--linkemu", linkemu,
               "--set", "rate=0", "--set", "delay=1ms", "--mtu", str(mtu), "--stats", stats,
               "--", "bash", "-c", INNER, "inner", blast, str(int(rate)), str(seconds),
               "1" if both else "0", out]
        subprocess.run(cmd, stderr=subprocess.DEVNULL, check=False)
        report = json.load(open(stats))
        rows = []
        for d in ("fwd", "rev") if both else ("fwd",):
            sent = json.load(open("%s.%s.send" % (out, d)))
            got = json.load(open("%s.%s.sink" % (out, d)))
            rows.append((d, sent, got, report[d]))
    return report, rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("build")
    ap.add_argument("--mtu", default="1500,9000")
    ap.add_argument("--seconds", type=float, default=3)
    ap.add_argument("--rates-1500", default="400,600,800,1000,1200,1500")
    ap.add_argument("--rates-9000", default="1000,2000,3000,4000,6000")
    args = ap.parse_args()
    print("%-5s %-4s %9s %9s %9s %7s %7s %9s %6s %s" % (
        "mtu", "dirs", "offered", "sent", "recv", "lost%", "emu_cpu", "overload", "late",
        "verdict"))
    for mtu in map(int, args.mtu.split(",")):
        rates = getattr(args, "rates_%d" % mtu, None) or args.rates_1500
        for both in (False, True):
            for mbit in map(float, rates.split(",")):
                report, rows = measure(args.build, mtu, mbit * 1e6, args.seconds, both)
                for d, sent, got, emu in rows:
                    size = mtu - IP_UDP
                    recv = got["payload_rate_bps"] * (size + IP_UDP) / size
                    lost = 100.0 * (1 - got["unique"] / max(sent["sent"], 1))
                    print("%-5d %-4s %9.0f %9.1f %9.1f %7.2f %7.2f %9d %6d %s" % (
                        mtu, d if both else "one", mbit, sent["ip_rate_bps"] / 1e6,
                        recv / 1e6, lost, emu["cpu_s"] / args.seconds,
                        emu["overload_drops"], emu["late_packets"],
                        "VALID" if report["valid"] else "INVALID"), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
