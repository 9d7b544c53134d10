#!/usr/bin/env python3
"""Self-validation of an emulated WAN profile (ctest label "netem").

Runs netem/wan.sh with this script as the command; inside, it measures the
link with ping and netem_udpblast and compares with what the profile says:
  ping  minimum RTT within 2 ms of the profile's round trip,
  rate  a UDP blast at 1.25x the link rate arrives at the link's payload
        capacity within 3%,
  loss  a blast below the link rate loses a fraction inside the 99%
        confidence interval of the setting (binomial, widened for bursty
        loss), with no duplicates or reordering the profile did not ask for.
Afterwards the emulator's own report must say it was never overloaded; a run
it reports as overloaded, or whose endpoints could not keep up (the sender
short of its rate, socket buffer drops), measured a busy machine, not the
model, and is repeated (three attempts in all).
Exit 77 (skip) when wan.sh cannot create network namespaces at all, or when
every attempt measured a busy machine (inconclusive; a failed model check
is always a failure).
"""
import argparse
import json
import math
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time

Z99 = 2.576  # two-sided 99% normal quantile
BUSY = 75    # inner exit status: the endpoints could not do their part
WAN_OVERLOADED = 3  # wan.sh: the command succeeded but the emulator was overloaded


class Busy(Exception):
    """The machine, not the link, limited a measurement."""
IP_UDP = 28
PORT = 9000


def parse_args():
    ap = argparse.ArgumentParser()
    ap.add_argument("--wan", required=True)
    ap.add_argument("--linkemu", required=True)
    ap.add_argument("--blast", required=True)
    ap.add_argument("--profile", required=True)
    ap.add_argument("--mtu")
    ap.add_argument("--userns", action="store_true")
    ap.add_argument("--checks", default="ping,rate,loss")
    ap.add_argument("--seconds", type=float, default=3.0)
    ap.add_argument("--inner", action="store_true", help=argparse.SUPPRESS)
    return ap.parse_args()


def side(name):
    return os.environ["WAN_%s_EXEC" % name].split()


def check(ok, what):
    print(("PASS " if ok else "FAIL ") + what, flush=True)
    return ok


def ping_check():
    out = subprocess.run(side("SND") + ["ping", "-n", "-c", "12", "-i", "0.05", "-W", "3",
                                        os.environ["WAN_RCV_ADDR"]],
                         capture_output=True, text=True).stdout
    times = [float(t) for t in re.findall(r"time=([0-9.]+) ms", out)]
    if len(times) < 6:
        return check(False, "ping: only %d replies\n%s" % (len(times), out))
    expected = float(os.environ["WAN_RTT_US"]) / 1000.0
    # The minimum is the path's round trip (what a transport's min-RTT filter
    # sees); a late dispatch only adds to single samples, and the emulator
    # counts those itself.
    return check(abs(min(times) - expected) <= 2.0,
                 "ping: min RTT %.3f ms (median %.3f), profile %.3f ms (tolerance 2 ms)"
                 % (min(times), statistics.median(times), expected))


def udp_errors(name):
    """RcvbufErrors + SndbufErrors of one side, from its /proc/net/snmp."""
    lines = subprocess.run(side(name) + ["cat", "/proc/net/snmp"], capture_output=True,
                           text=True).stdout.splitlines()
    head, values = [l.split() for l in lines if l.startswith("Udp:")][:2]
    row = dict(zip(head[1:], map(int, values[1:])))
    return row["RcvbufErrors"] + row["SndbufErrors"]


def queue_drops():
    """Forward-direction drop-tail queue drops so far, or 0 without a live
    emulator report (the tc netem backend)."""
    pid, stats = os.environ.get("WAN_EMU_PID"), os.environ.get("WAN_STATS")
    if not pid or not stats or os.environ.get("WAN_BACKEND") != "tun":
        return 0
    before = os.path.getmtime(stats) if os.path.exists(stats) else 0
    os.kill(int(pid), signal.SIGUSR1)
    for _ in range(50):  # the emulator rewrites the report asynchronously
        if os.path.exists(stats) and os.path.getmtime(stats) != before:
            break
        time.sleep(0.05)
    with open(stats) as f:
        return json.load(f)["fwd"]["queue_drops"]


def blast(blaster, rate_bps, size, seconds):
    """Sends for `seconds` at `rate_bps` (IP bytes); returns (sender, sink) reports."""
    with tempfile.TemporaryDirectory() as tmp:
        ready = os.path.join(tmp, "ready")
        sink = subprocess.Popen(side("RCV") + [blaster, "sink", "--port", str(PORT),
                                               "--seconds", str(seconds + 10),
                                               "--idle-ms", "1500", "--ready-file", ready],
                                stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 10
        while not os.path.exists(ready) and time.monotonic() < deadline:
            time.sleep(0.01)
        sent = subprocess.run(side("SND") + [blaster, "send", "--to", os.environ["WAN_RCV_ADDR"],
                                             "--port", str(PORT), "--rate", str(int(rate_bps)),
                                             "--size", str(size), "--seconds", str(seconds)],
                              capture_output=True, text=True, check=True).stdout
        got, _ = sink.communicate(timeout=seconds + 20)
    return json.loads(sent), json.loads(got)


def rate_check(blaster, seconds):
    rate = int(os.environ["WAN_FWD_RATE_BPS"])
    size = int(os.environ["WAN_MTU"]) - IP_UDP
    sent, got = blast(blaster, 1.25 * rate, size, seconds)
    if sent["ip_rate_bps"] < 1.1 * rate:
        raise Busy("rate: the sender reached only %.1f Mbit/s, not above the link's %.1f"
                   % (sent["ip_rate_bps"] / 1e6, rate / 1e6))
    capacity = rate * size / (size + IP_UDP)
    ratio = got["payload_rate_bps"] / capacity
    return check(abs(ratio - 1) <= 0.03,
                 "rate: sent %.1f Mbit/s (IP), received payload %.1f Mbit/s, capacity %.1f "
                 "Mbit/s: %.2f%% off (tolerance 3%%)"
                 % (sent["ip_rate_bps"] / 1e6, got["payload_rate_bps"] / 1e6, capacity / 1e6,
                    100 * (ratio - 1)))


def loss_check(blaster, seconds):
    # Below the link rate, so the bottleneck queue never drops: what is lost
    # is the loss model's. Capped so the endpoints keep up on a small machine.
    rate = min(0.5 * int(os.environ["WAN_FWD_RATE_BPS"]), 200e6)
    size = int(os.environ["WAN_MTU"]) - IP_UDP
    errors_before = udp_errors("RCV") + udp_errors("SND")
    queue_before = queue_drops()
    sent, got = blast(blaster, rate, size, seconds)
    host_drops = udp_errors("RCV") + udp_errors("SND") - errors_before
    stalled = queue_drops() - queue_before
    n = sent["sent"]
    p = float(os.environ["WAN_FWD_LOSS"])
    vf = float(os.environ["WAN_FWD_LOSS_VARIANCE_FACTOR"])
    measured = 1 - got["unique"] / n
    half = Z99 * math.sqrt(vf * p * (1 - p) / n)
    if stalled:
        # Below the link rate the queue only overflows when the emulator
        # stalled and then took a backlog in at once: a starved run.
        raise Busy("loss: the bottleneck queue dropped %d packets below the link rate "
                   "(emulator stalled)" % stalled)
    if host_drops or sent["send_errors"]:
        raise Busy("loss: the endpoints dropped packets themselves (%d socket buffer drops, "
                   "%d send errors)" % (host_drops, sent["send_errors"]))
    ok = check(abs(measured - p) <= half,
                "loss: %d sent, %d received: %.4f%%, setting %.4f%%, 99%% interval +-%.4f%%"
                % (n, got["unique"], 100 * measured, 100 * p, 100 * half))
    if float(os.environ["WAN_FWD_DUPLICATE"]) == 0:
        ok &= check(got["duplicates"] == 0, "loss: %d duplicates" % got["duplicates"])
    if float(os.environ["WAN_FWD_REORDER"]) == 0:
        ok &= check(got["reordered"] == 0, "loss: %d reordered" % got["reordered"])
    return ok


def inner(args):
    print("inside: backend=%s mode=%s profile=%s mtu=%s" % (
        os.environ["WAN_BACKEND"], os.environ["WAN_MODE"], os.environ["WAN_PROFILE"],
        os.environ["WAN_MTU"]), flush=True)
    ok = True
    if args.userns:
        ok &= check(os.environ["WAN_MODE"] == "userns", "ran through unshare -rn")
    checks = args.checks.split(",")
    try:
        if "ping" in checks:
            ok &= ping_check()
        if "rate" in checks:
            ok &= rate_check(args.blast, args.seconds)
        if "loss" in checks:
            ok &= loss_check(args.blast, args.seconds)
    except Busy as e:
        print("BUSY %s" % e, flush=True)
        return BUSY
    return 0 if ok else 1


def run_once(args):
    """One wan.sh run with this script inside: (exit status, emulator report)."""
    with tempfile.TemporaryDirectory() as tmp:
        stats = os.path.join(tmp, "stats.json")
        cmd = [args.wan, "--profile", args.profile, "--linkemu", args.linkemu, "--stats", stats]
        if args.mtu:
            cmd += ["--mtu", args.mtu]
        if args.userns:
            cmd.append("--userns")
        cmd += ["--", sys.executable, os.path.abspath(__file__), "--inner"] + sys.argv[1:]
        rc = subprocess.run(cmd).returncode
        report = json.load(open(stats)) if os.path.exists(stats) else {}
    return rc, report


def outer(args):
    # A run the emulator reports as overloaded, or whose endpoints could not
    # keep up, measured a busy machine rather than the model: it is repeated.
    for attempt in (1, 2, 3):
        rc, report = run_once(args)
        if rc == 77:
            print("SKIP: network namespaces cannot be created here")
            return 77
        print("emulator report: %s" % json.dumps(report))
        if (report.get("valid") is True and rc != BUSY) or attempt == 3:
            break
        print("machine too busy: measurements untrusted, running again", flush=True)
    if rc in (WAN_OVERLOADED, BUSY):
        # Every attempt passed its checks or could not measure, but the
        # machine never let the emulator keep its timing: inconclusive, not
        # a failure of the model. A model check that fails is a failure.
        print("SKIP: machine too busy in %d attempts: emulator timing untrusted, "
              "profile not validated" % attempt)
        return 77
    ok = check(report.get("valid") is True, "emulator: no overload (valid report)")
    ok &= check(rc == 0, "wan.sh exit status %d" % rc)
    return 0 if ok else 1


def main():
    args = parse_args()
    return inner(args) if args.inner else outer(args)


if __name__ == "__main__":
    sys.exit(main())
