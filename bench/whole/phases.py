#!/usr/bin/env python3
"""Where the time of one aftp transfer goes, for bench/whole.sh.

  phases.py watch OUT SND_PID RCV_PID IFACE
      until SIGTERM, every 10 ms a line to OUT: the time (the clock of bash's
      $EPOCHREALTIME), the IP bytes the sender host has sent on IFACE and the
      IP bytes the receiver host has received on it, read from
      /proc/PID/net/dev of a process in each host's network namespace
  phases.py split PROGRESS LINK START WALL
      prints key=value fields (bench/wan/report.py record): the phases of the
      run whose sender was started at START (the same clock) and exited WALL
      seconds later, from its `aftp send --progress-log` PROGRESS and the
      samples LINK; nothing when START or WALL is not known

The phases, in seconds from the start of the command:
  handshake  to the first payload byte: the progress log's first line with
             bytes, back by its own rate (its meter counts from the receiver's
             acceptance, when data begins); without a usable log, when the
             sender host had sent 16 data packets' worth of IP bytes
  ramp       to the start of the first 100 ms in which the receiver host got
             90% of what the link delivers at full use (its IP rate x
             (1 - loss)): the first byte's flight (0.5 RTT) is in it
  steady     to the end of the last such 100 ms; phase_steady_link_pct is the
             receiver host's IP rate over it against that full use
  tail       to the last data packet's arrival at the receiver host (the end
             of the last 10 ms in which it got a datagram's worth of bytes):
             the repairs of the last blocks
  commit     to the sender's exit: the receiver's verification and flush, its
             verdict's way back, the sender's exit
A run that never reached 90% has no steady state: its ramp runs until the
last arrival. The emulated link's rate and loss come from netem/wan.sh's
WAN_FWD_RATE_BPS and WAN_FWD_LOSS. The progress log's clock starts with
aftp's process, the samples' with the command that starts it (bench/wan/
aftp_pair.sh): a few milliseconds apart, counted in the handshake.
"""
import os
import signal
import sys
import time

INTERVAL_S = 0.010
WINDOW_S = 0.100
RAMP_SHARE = 0.90
DATA_PACKET_IP_BYTES = 1480  # an aftp datagram of 1452 B in its IP packet
FIRST_DATA_IP_BYTES = 16 * DATA_PACKET_IP_BYTES  # well above the handshake's packets


class IfaceCounters:
    """An interface's byte counters in a process's network namespace: the
    file stays open, each read regenerates it (cheap at 100 reads a second)."""

    def __init__(self, pid, iface):
        self.file = open("/proc/%s/net/dev" % pid, "rb", buffering=0)
        self.key = (" %s:" % iface).encode()

    def read(self):
        """(tx_bytes, rx_bytes)"""
        self.file.seek(0)
        text = self.file.read(65536)
        at = text.find(self.key)
        if at < 0:
            return 0, 0
        fields = text[at + len(self.key):text.find(b"\n", at)].split()
        return int(fields[8]), int(fields[0])


def cmd_watch(out_path, snd_pid, rcv_pid, iface):
    running = [True]
    signal.signal(signal.SIGTERM, lambda *_: running.__setitem__(0, False))
    lines = []
    try:
        sender, receiver = IfaceCounters(snd_pid, iface), IfaceCounters(rcv_pid, iface)
        while running[0]:
            lines.append("%.4f %d %d\n" % (time.time(), sender.read()[0], receiver.read()[1]))
            time.sleep(INTERVAL_S)
    except OSError:
        pass  # a host is gone: the link was torn down
    with open(out_path, "w") as f:  # written once: no I/O while the run goes on
        f.writelines(lines)


def read_progress(path):
    """[(seconds, bytes_done, goodput_bps)] of a --progress-log."""
    rows = []
    try:
        with open(path) as f:
            for line in f:
                if line.startswith("#"):
                    continue
                cols = line.split("\t")
                if len(cols) >= 3:
                    rows.append((float(cols[0]), int(cols[1]), float(cols[2])))
    except OSError:
        pass
    return rows


def read_samples(path, start):
    """[(seconds since start, sender tx bytes, receiver rx bytes)] of a watch."""
    try:
        with open(path) as f:
            rows = [tuple(map(float, line.split())) for line in f if line.strip()]
    except (OSError, ValueError):
        return []
    return [(t - start, tx, rx) for t, tx, rx in rows if t >= start]


def last_data_arrival(samples):
    """The end of the last interval in which the receiver host got at least
    one data packet's worth of bytes, or None."""
    return next((t1 for (_, _, rx0), (t1, _, rx1) in reversed(list(zip(samples, samples[1:])))
                 if rx1 - rx0 >= DATA_PACKET_IP_BYTES), None)


def full_rate_span(samples, full_bps):
    """(start of the first, end of the last, received bytes between) of the
    windows of at least WINDOW_S in which the receiver host got full_bps."""
    first = last = None
    j = 0
    for i, (t0, _, rx0) in enumerate(samples):
        j = max(j, i + 1)
        while j < len(samples) and samples[j][0] - t0 < WINDOW_S:
            j += 1
        if j == len(samples):
            break
        t1, _, rx1 = samples[j]
        if (rx1 - rx0) * 8 / (t1 - t0) >= RAMP_SHARE * full_bps:
            first = first or (t0, rx0)
            last = (t1, rx1)
    if first is None:
        return None
    return first[0], last[0], last[1] - first[1]


def first_payload(rows, samples):
    """From the progress log; without a usable one, when the sender host had
    sent FIRST_DATA_IP_BYTES (a little late at a slow start rate)."""
    for t, done, goodput in rows:
        if done > 0:
            mark = t - done * 8 / goodput if goodput > 0 else t
            if mark > 0:
                return mark
            break
    if not samples:
        return None
    base = samples[0][1]
    return next((t for t, tx, _ in samples if tx - base >= FIRST_DATA_IP_BYTES), None)


def cmd_split(progress_path, link_path, start, wall):
    rate = float(os.environ["WAN_FWD_RATE_BPS"])
    full_bps = rate * (1 - float(os.environ.get("WAN_FWD_LOSS", "0")))
    samples = read_samples(link_path, start)
    first = first_payload(read_progress(progress_path), samples)
    arrival = last_data_arrival(samples)
    span = full_rate_span(samples, full_bps)
    # A mark that cannot be told merges two phases into one span.
    if span is None:
        spans = [("handshake", first), ("ramp", arrival), ("commit", wall)]
    else:
        spans = [("handshake", first), ("ramp", span[0]), ("steady", span[1]),
                 ("tail", arrival), ("commit", wall)]
        print("phase_steady_link_pct=%.2f" % (100 * span[2] * 8 / (span[1] - span[0]) / full_bps))
    prev, merged = 0.0, ""
    for name, mark in spans:
        merged += ("_" if merged else "") + name
        if mark is not None and mark >= prev:
            print("phase_%s_s=%.3f" % (merged, mark - prev))
            prev, merged = mark, ""


def main(argv):
    if len(argv) == 6 and argv[1] == "watch":
        cmd_watch(*argv[2:])
    elif len(argv) == 6 and argv[1] == "split":
        if argv[4] and argv[5] not in ("", "null"):
            cmd_split(argv[2], argv[3], float(argv[4]), float(argv[5]))
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    main(sys.argv)
