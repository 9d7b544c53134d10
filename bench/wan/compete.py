#!/usr/bin/env python3
"""Figures of one `bench/wan.sh --compete` run, from per-second samples of
the receiver host's per-flow counters (IP bytes that reached it: what the
bottleneck delivered to each flow, repairs included).

  compete.py --name NAME --samples FILE --emu FILE --link-bps BPS
             [--iperf FILE] -- FLOW...
  FLOW: aftp:POLICY:DELAY_S:INDEX (counter a<INDEX>) or tcp (counter t0)

Prints a Markdown section: the per-second rates, then the summary of the
run's kind (one aftp flow: ramp-up and busiest second; aftp with TCP: each
flow's mean over the common interval and TCP's share; two aftp flows:
Jain's index over the common interval and the joiner's time to 90% of its
share).
"""
import argparse
import json

SETTLE_S = 5   # seconds left out at the start (flows ramping up)


def load_samples(path):
    """[(t, {counter: bytes})] from 'EPOCH JSON' lines."""
    out = []
    with open(path) as f:
        for line in f:
            t, _, doc = line.partition(" ")
            try:
                items = json.loads(doc)["nftables"]
            except (ValueError, KeyError):
                continue
            counts = {i["counter"]["name"]: i["counter"]["bytes"] for i in items if "counter" in i}
            out.append((float(t), counts))
    return out


def per_second(samples, counter):
    """Rate (bit/s) of each interval between consecutive samples."""
    return [(b[1].get(counter, 0) - a[1].get(counter, 0)) * 8 / (b[0] - a[0])
            for a, b in zip(samples, samples[1:])]


def parse_flows(specs):
    flows = []
    for spec in specs:
        if spec == "tcp":
            flows.append({"label": "TCP", "counter": "t0", "delay": 0})
        else:
            _, policy, delay, idx = spec.split(":")
            flows.append({"label": "aftp#%s %s" % (idx, policy), "counter": "a" + idx,
                          "delay": int(delay), "policy": policy})
    return flows


def mean(xs):
    return sum(xs) / len(xs) if xs else 0.0


def jain(xs):
    sq = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * sq) if sq else 0.0


def iperf_note(path):
    try:
        j = json.load(open(path))
        sent = j["end"]["sum_sent"]
        return "iperf3: cc %s, %d retransmitted segments, %.1f Mbit/s over its own %.1f s" % (
            j["end"].get("sender_tcp_congestion", "?"), sent.get("retransmits", -1),
            j["end"]["sum_received"]["bits_per_second"] / 1e6, j["end"]["sum_received"]["seconds"])
    except (OSError, ValueError, KeyError):
        return "iperf3: no result"


def first_second_at(rates, level):
    """Seconds until the first 1 s window at `level` or more; None: never."""
    return next((i + 1 for i, x in enumerate(rates) if x >= level), None)


def summary_solo(flow, link):
    r = flow["rates"]
    busiest = max(r) if r else 0.0
    steady = r[2:]
    ramp = first_second_at(r, 0.9 * link)
    # What this machine's datapath sustains can be below the link: the ramp
    # to 90% of the flow's own steady rate (from 5 s on) says how fast the
    # controller got there.
    settled = mean(r[SETTLE_S:])
    ramp_own = first_second_at(r, 0.9 * settled)
    print("- ramp-up to 90%% of the link (%.0f Mbit/s IP): %s; to 90%% of its own mean from"
          " %d s on (%.0f Mbit/s): %s" % (0.9 * link / 1e6, "%d s" % ramp if ramp else "never",
                                          SETTLE_S, settled / 1e6,
                                          "%d s" % ramp_own if ramp_own else "never"))
    print("- busiest 1 s window: %.1f Mbit/s (%.1f%% of the link); mean from 2 s on: %.1f Mbit/s"
          " (%.1f%%)" % (busiest / 1e6, 100 * busiest / link, mean(steady) / 1e6,
                         100 * mean(steady) / link))


def summary_tcp(aftp, tcp, iperf):
    a, t = mean(aftp["rates"][SETTLE_S:]), mean(tcp["rates"][SETTLE_S:])
    total = a + t
    print("- common interval %d-%d s: %s %.1f Mbit/s, TCP %.1f Mbit/s (total %.1f)"
          % (SETTLE_S, len(tcp["rates"]), aftp["label"], a / 1e6, t / 1e6, total / 1e6))
    if total > 0:
        print("- TCP's share %.1f%%; aftp at %.2fx its fair share" % (100 * t / total, 2 * a / total))
    print("- " + iperf_note(iperf))


def summary_two(first, joiner):
    start = joiner["delay"]
    r0, r1 = first["rates"][start:], joiner["rates"][start:]
    n = min(len(r0), len(r1))
    share = (mean(r0[:n]) + mean(r1[:n])) / 2
    reach = first_second_at(r1[:n], 0.9 * share)
    print("- common interval %d-%d s: %.1f + %.1f Mbit/s, Jain's index %.3f (last %d s: %.3f)"
          % (start, start + n, mean(r0[:n]) / 1e6, mean(r1[:n]) / 1e6,
             jain([mean(r0[:n]), mean(r1[:n])]), max(n - 10, 0),
             jain([mean(r0[10:n]), mean(r1[10:n])])))
    print("- joiner at 90%% of its share (%.1f Mbit/s): %s" % (
        0.9 * share / 1e6, "after %d s" % reach if reach else "never"))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--name", required=True)
    ap.add_argument("--samples", required=True)
    ap.add_argument("--emu", required=True)
    ap.add_argument("--link-bps", type=float, required=True)
    ap.add_argument("--iperf")
    ap.add_argument("flows", nargs="+")
    args = ap.parse_args()
    samples = load_samples(args.samples)
    flows = parse_flows(args.flows)
    for f in flows:
        f["rates"] = per_second(samples, f["counter"])
    emu = dict(line.strip().split("=", 1) for line in open(args.emu) if "=" in line)
    valid = emu.get("emu_valid")

    print("### %s (link %.0f Mbit/s)%s" % (args.name, args.link_bps / 1e6,
                                          "" if valid == "true" else
                                          "  **INVALID: emulator overloaded (%s)**" % valid))
    print()
    print("| s | " + " | ".join(f["label"] + " Mbit/s" for f in flows) + " | total |")
    print("|---" * (len(flows) + 2) + "|")
    for i in range(len(flows[0]["rates"])):
        row = [f["rates"][i] for f in flows]
        print("| %d | %s | %.1f |" % (i + 1, " | ".join("%.1f" % (x / 1e6) for x in row),
                                       sum(row) / 1e6))
    print()
    tcp = [f for f in flows if f["counter"] == "t0"]
    aftp = [f for f in flows if f["counter"] != "t0"]
    if tcp:
        summary_tcp(aftp[0], tcp[0], args.iperf)
    elif len(aftp) == 2:
        summary_two(aftp[0], aftp[1])
    else:
        summary_solo(aftp[0], args.link_bps)
    print("- emulator: valid=%s, overload drops fwd %s, late packets fwd %s" % (
        valid, emu.get("emu_fwd_overload_drops"), emu.get("emu_fwd_late_packets")))
    print()


if __name__ == "__main__":
    main()
