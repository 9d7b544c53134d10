#!/usr/bin/env python3
"""The server's memory, sessions and CPU while bench/server.sh's lo64 case runs.

usage: sample.py PID PORT OUT

Every 50 ms until SIGTERM: VmRSS and RssAnon of /proc/PID/status (RssAnon
leaves out the pages of the files the server maps), and the sessions the
server holds: its connected UDP sockets on PORT (one per session; the
listener is not connected), from /proc/net/udp and udp6 of the network
namespace this runs in (the server's). OUT + ".ready" appears once the first
sample is taken, and the caller starts its clients then. At SIGTERM, one
line of key=value words goes to OUT: start_kb, peak_kb (VmRSS at the first
sample and at its highest), start_anon_kb, peak_anon_kb (the same of
RssAnon), peak_sessions, hwm_kb (VmHWM: the process's high-water mark since
it started), start_threads, peak_threads (Threads: its datapath workers,
event loop and group-commit threads), cpu_s (the server's user + system
seconds over the sampling), samples.
"""
import os
import signal
import sys
import time

INTERVAL_S = 0.05
TCP_ESTABLISHED = "01"  # the state /proc/net/udp shows for a connected socket


def status_kb(pid):
    """{"VmRSS": kB, "VmHWM": kB, "RssAnon": kB, "Threads": count} of the process."""
    out = {}
    with open("/proc/%d/status" % pid) as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "Threads"):
                out[key] = int(value.split()[0])
    return out


def cpu_seconds(pid):
    with open("/proc/%d/stat" % pid) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def connected_sockets(port):
    suffix = ":%04X" % port
    n = 0
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    cols = line.split()
                    if cols[1].endswith(suffix) and cols[3] == TCP_ESTABLISHED:
                        n += 1
        except OSError:
            pass
    return n


def main(argv):
    if len(argv) != 4:
        raise SystemExit(__doc__)
    pid, port, out = int(argv[1]), int(argv[2]), argv[3]
    stop = []
    signal.signal(signal.SIGTERM, lambda *_: stop.append(1))
    first = status_kb(pid)
    start, start_anon, start_threads = first["VmRSS"], first["RssAnon"], first["Threads"]
    cpu0 = cpu_seconds(pid)
    peak, peak_anon, peak_sessions, samples, hwm, cpu1 = start, start_anon, 0, 1, first["VmHWM"], cpu0
    peak_threads = start_threads
    with open(out + ".ready", "w") as f:
        f.write("%d\n" % start)
    while not stop:
        time.sleep(INTERVAL_S)
        try:
            kb = status_kb(pid)
            cpu1 = cpu_seconds(pid)
        except OSError:  # the server is gone: report what was seen
            break
        peak = max(peak, kb["VmRSS"])
        peak_anon = max(peak_anon, kb["RssAnon"])
        peak_threads = max(peak_threads, kb["Threads"])
        hwm = kb["VmHWM"]
        peak_sessions = max(peak_sessions, connected_sockets(port))
        samples += 1
    with open(out, "w") as f:
        f.write("start_kb=%d peak_kb=%d start_anon_kb=%d peak_anon_kb=%d peak_sessions=%d hwm_kb=%d "
                "start_threads=%d peak_threads=%d cpu_s=%.2f samples=%d\n"
                % (start, peak, start_anon, peak_anon, peak_sessions, hwm, start_threads, peak_threads,
                   cpu1 - cpu0, samples))


if __name__ == "__main__":
    main(sys.argv)
