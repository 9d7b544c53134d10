#!/usr/bin/env python3
"""Records and the table of bench/wan.sh.

  report.py record FILE key=value...   appends one JSON line to FILE (values
                                       that parse as numbers become numbers;
                                       true/false/null are literals)
  report.py emu-delta BEFORE AFTER     prints key=value fields describing the
                                       emulator between two report snapshots
  report.py steady LOG SIZE            prints key=value fields: aftp's goodput
                                       over the middle of the file (20% to
                                       95% of SIZE bytes) from the sender's
                                       --progress-log LOG; nothing without one
  report.py table RESULTS WAN_RC [--json OUT]
                                       prints the Markdown table; with --json
                                       writes one JSON line per tool to OUT;
                                       exits 3 when the run is INVALID
"""
import json
import sys

# Both link backends count IP bytes against the rate: the TUN link carries
# bare IP packets, and the netem backend's tbf uses `stab overhead -14` to
# drop the Ethernet header. The payload capacity of a tool is therefore
# rate x (application payload per packet / IP packet size).
AFTP_DATAGRAM = 1452     # aftp's UDP payload (fits IPv6 at MTU 1500)
AFTP_BLOCK = 1408        # AFTP_WIRE_DEFAULT_BLOCK: 1452 - 16 header - 12 DATA - 16 tag
UFTP_BLOCK = 1300        # uftp's default -b
UFTP_HEADERS = 24        # uftp v4: uftp_h (16) + fileseg_h (8) in front of each block
IP_UDP = 28
TCP_IP_TIMESTAMPS = 52   # 20 IP + 20 TCP + 12 timestamp option


def payload_fraction(framing, mtu):
    """(fraction, explanation) for a tool's data packets at this MTU."""
    if framing == "aftp":
        ip = AFTP_DATAGRAM + IP_UDP
        return AFTP_BLOCK / ip, "%d B blocks / %d B IP packets" % (AFTP_BLOCK, ip)
    if framing == "tcp":
        mss = mtu - TCP_IP_TIMESTAMPS
        return mss / mtu, "%d B MSS / %d B IP packets" % (mss, mtu)
    if framing == "uftp":
        ip = UFTP_BLOCK + UFTP_HEADERS + IP_UDP
        return UFTP_BLOCK / ip, "%d B blocks / %d B IP packets" % (UFTP_BLOCK, ip)
    raise ValueError("unknown framing " + framing)


def parse_value(text):
    if text in ("true", "false", "null"):
        return json.loads(text)
    try:
        return int(text)
    except ValueError:
        pass
    try:
        return float(text)
    except ValueError:
        return text


def cmd_record(path, pairs):
    rec = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise SystemExit("report.py record: not key=value: " + pair)
        rec[key] = parse_value(value)
    with open(path, "a") as f:
        f.write(json.dumps(rec) + "\n")


def load_json(path):
    try:
        with open(path) as f:
            return json.load(f)
    except (OSError, ValueError):
        return {}


def cmd_emu_delta(before_path, after_path):
    """The emulator's verdict on one tool's run, from two SIGUSR1 snapshots,
    with the rule the emulator applies to a whole run: no overload drop and
    at most 0.1% late packets per direction."""
    before, after = load_json(before_path), load_json(after_path)
    if "fwd" not in after:
        print("emu_valid=null")
        return
    valid = True
    for d in ("fwd", "rev"):
        b, a = before.get(d, {}), after[d]
        delta = {k: a.get(k, 0) - b.get(k, 0) for k in
                 ("tx_packets", "late_packets", "overload_drops", "rx_bytes", "rx_packets", "cpu_s")}
        if delta["overload_drops"] > 0 or delta["late_packets"] > 0.001 * max(delta["tx_packets"], 1):
            valid = False
        print("emu_%s_overload_drops=%d" % (d, delta["overload_drops"]))
        print("emu_%s_late_packets=%d" % (d, delta["late_packets"]))
        print("emu_%s_ip_bytes=%d" % (d, delta["rx_bytes"]))
        print("emu_%s_packets=%d" % (d, delta["rx_packets"]))
        print("emu_%s_cpu_s=%.2f" % (d, delta["cpu_s"]))
    print("emu_valid=%s" % ("true" if valid else "false"))


# The middle of a transfer: past startup, before the tail (the last
# round trips and the verification). The whole-transfer goodput counts both.
STEADY_FROM, STEADY_TO = 0.20, 0.95


def cmd_steady(log_path, size):
    """Goodput between the first progress lines at 20% and at 95% of size."""
    try:
        with open(log_path) as f:
            rows = [line.split("\t") for line in f if not line.startswith("#")]
    except OSError:
        return
    ticks = [(float(r[0]), int(r[1])) for r in rows if len(r) >= 2]
    start = next((t for t in ticks if t[1] >= STEADY_FROM * size), None)
    end = next((t for t in ticks if t[1] >= STEADY_TO * size), None)
    if start is None or end is None or end[0] <= start[0]:
        return
    print("steady_bps=%d" % round((end[1] - start[1]) * 8 / (end[0] - start[0])))
    print("steady_span=%.2f-%.2fs" % (start[0], end[0]))


def fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def cmd_table(results_path, wan_rc, json_out):
    with open(results_path) as f:
        records = [json.loads(line) for line in f if line.strip()]
    meta = next((r for r in records if r.get("kind") == "meta"), {})
    tools = [r for r in records if r.get("kind") == "tool"]
    rate = meta.get("rate_bps", 0)
    loss = meta.get("loss", 0.0)
    mtu = meta.get("mtu", 1500)
    # netem/wan.sh's verdict covers the whole run, discarded attempts included;
    # the per-tool snapshots (TUN backend) tell whether a row shown was hit.
    flagged = [t for t in tools if t.get("emu_valid") is not True]
    invalid = wan_rc == 3 and bool(flagged)

    print("### %s: %.0f Mbit/s, RTT %.0f ms, loss %.2f%%, MTU %d (%s backend, %s), %d MiB file in %s"
          % (meta.get("profile", "?"), rate / 1e6, meta.get("rtt_us", 0) / 1e3, loss * 100, mtu,
             meta.get("backend", "?"), meta.get("mode", "?"), meta.get("size_bytes", 0) >> 20,
             meta.get("files_in", "?")))
    print()
    if invalid:
        print("**INVALID RUN: the link emulator reported overload (netem/wan.sh exit 3);"
              " do not trust these figures.**")
        print()
    elif wan_rc == 3:
        print("The link emulator was overloaded during discarded attempts only (netem/wan.sh"
              " exit 3): every row below was measured on a valid link.")
        print()
    print("| tool | goodput Mbit/s | % of payload capacity | % of loss-adjusted capacity "
          "| retransmitted % | CPU s sender | CPU s receiver | digest verified | notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    out_lines = []
    for t in tools:
        frac, frac_note = payload_fraction(t["framing"], mtu)
        capacity = rate * frac
        secs = t.get("seconds") or 0
        goodput = t["bytes"] * 8 / secs if secs > 0 else 0.0
        pct = 100 * goodput / capacity if capacity else None
        pct_loss = 100 * goodput / (capacity * (1 - loss)) if capacity else None
        notes = []
        retrans = t.get("retrans_pct")
        if retrans is None and t["framing"] == "uftp" and t.get("emu_fwd_packets") and t["bytes"]:
            # uftp prints no retransmission count: every forward packet
            # beyond one per block is a repeat (control packets are a handful).
            blocks = -(-t["bytes"] // UFTP_BLOCK)
            retrans = max(0.0, 100 * (t["emu_fwd_packets"] - blocks) / blocks)
            t["retrans_pct"] = round(retrans, 2)
            notes.append("retransmitted = link packets / blocks - 1")
        if t.get("capped"):
            notes.append("**capped** at %.0f s: %d of %d bytes moved"
                         % (secs, t["bytes"], meta.get("size_bytes", 0)))
        if t.get("error"):
            notes.append("**failed**: %s" % t["error"])
        if t.get("emu_valid") is False:
            notes.append("**emulator overloaded during this tool**")
        if t.get("attempt", 1) > 1:
            notes.append("attempt %d (earlier ones hit an overloaded emulator)" % t["attempt"])
        notes.append("capacity: %s = %.1f%%" % (frac_note, 100 * frac))
        if t.get("steady_bps") and capacity:
            notes.append("middle of the file (%d-%d%% of its bytes, %s after start): %.1f Mbit/s"
                         " = %.1f%% of loss-adjusted capacity"
                         % (100 * STEADY_FROM, 100 * STEADY_TO, t.get("steady_span"),
                            t["steady_bps"] / 1e6, 100 * t["steady_bps"] / (capacity * (1 - loss))))
        if t.get("note"):
            notes.append(t["note"])
        verified = {True: "yes", False: "no", None: "n/a (memory)"}[t.get("verified")]
        print("| %s | %.1f | %s | %s | %s | %s | %s | %s | %s |" % (
            t["label"], goodput / 1e6, fmt(pct, ".1f"), fmt(pct_loss, ".1f"),
            fmt(retrans, ".2f"), fmt(t.get("cpu_snd_s"), ".2f"),
            fmt(t.get("cpu_rcv_s"), ".2f"), verified, "; ".join(notes)))
        row = dict(t)
        row.pop("kind", None)
        row.update(profile=meta.get("profile"), backend=meta.get("backend"),
                   link_rate_bps=rate, loss=loss, mtu=mtu, rtt_us=meta.get("rtt_us"),
                   file_bytes=meta.get("size_bytes"), payload_fraction=round(frac, 5),
                   capacity_bps=round(capacity), goodput_bps=round(goodput),
                   pct_of_capacity=None if pct is None else round(pct, 2),
                   pct_of_loss_adjusted_capacity=None if pct_loss is None else round(pct_loss, 2),
                   link_valid=t.get("emu_valid") is True
                   or (t.get("emu_valid") is None and wan_rc != 3))
        out_lines.append(json.dumps(row))
    print()
    print("goodput = file bytes x 8 / wall-clock seconds of the sending command (connection set-up"
          " included); iperf3 rows: bytes the server received over its test time, memory to memory."
          " Capacity = link rate x payload fraction; loss-adjusted = capacity x (1 - loss).")
    if json_out:
        with open(json_out, "w") as f:
            f.write("".join(line + "\n" for line in out_lines))
    return 3 if invalid else 0


def main(argv):
    if len(argv) >= 3 and argv[1] == "record":
        cmd_record(argv[2], argv[3:])
    elif len(argv) == 4 and argv[1] == "steady":
        cmd_steady(argv[2], int(argv[3]))
    elif len(argv) == 4 and argv[1] == "emu-delta":
        cmd_emu_delta(argv[2], argv[3])
    elif len(argv) in (4, 6) and argv[1] == "table":
        json_out = argv[5] if len(argv) == 6 and argv[4] == "--json" else None
        return cmd_table(argv[2], int(argv[3]), json_out)
    else:
        raise SystemExit(__doc__)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
