#!/usr/bin/env python3
"""The tables of bench/whole.sh.

  report.py RESULTS [--json OUT]
      RESULTS: the JSON lines of every link (bench/wan/tools.sh records, with
      bench/whole/run.sh's row and run tags). Prints a summary table (a line
      per row: profile and file size), then per row every tool's medians and
      aftp's phases. With --json, one JSON object per row and tool to OUT.

A run counts when the emulator was not overloaded during it, the tool exited
0 and the copy's sha256 matched (iperf3: memory to memory, nothing to
verify). The physical limit of a row is

    bytes x 8 / (payload capacity x (1 - loss)) + 1 RTT (handshake)
                + 0.5 RTT (flight of the last byte) + 1 RTT (final confirmation)

with the payload capacity = the link's IP rate x 1408 / 1480 (aftp's block
in its IP packet, bench/wan/report.py's payload_fraction) and the loss of the
data direction (the mean, for Gilbert-Elliott).
"""
import json
import os
import statistics
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "wan"))
from report import payload_fraction  # noqa: E402

GRIDFTP = ("gridftp-p8", "gridftp-p16")
AFTP_OVER_GRIDFTP_GOAL = 1.3
PHASES = ("handshake", "ramp", "steady", "tail", "commit")  # bench/whole/phases.py
GIB = 1 << 30


def load(path):
    with open(path) as f:
        return [json.loads(line) for line in f if line.strip()]


class Row:
    """One profile and file size: its link and the limit."""

    def __init__(self, meta):
        self.meta = meta
        self.size = meta["size_bytes"]
        self.rtt_s = meta["rtt_us"] / 1e6
        self.loss = meta.get("loss", 0.0)
        frac, self.frac_note = payload_fraction("aftp", meta.get("mtu", 1500))
        self.capacity = meta["rate_bps"] * frac * (1 - self.loss)  # loss-adjusted
        self.at_capacity_s = self.size * 8 / self.capacity
        self.limit_s = self.at_capacity_s + 2.5 * self.rtt_s

    def title(self):
        m = self.meta
        extra = []
        if m.get("rev_loss", 0) != self.loss:
            extra.append("feedback-direction loss %.2f%%" % (100 * m.get("rev_loss", 0)))
        if m.get("jitter_us"):
            extra.append("jitter %.1f ms" % (m["jitter_us"] / 1e3))
        if m.get("reorder"):
            extra.append("reorder %.1f%%" % (100 * m["reorder"]))
        return "%s: %.0f Mbit/s, RTT %.0f ms, loss %.2f%%%s, %s MiB" % (
            m["profile"], m["rate_bps"] / 1e6, self.rtt_s * 1e3, 100 * self.loss,
            "".join(", " + e for e in extra), self.size >> 20)


def counts(run):
    if run.get("emu_valid") is False or run.get("error") or run.get("capped"):
        return False
    return run.get("verified") is not False


class ToolResult:
    """The runs of one tool on one row, and their medians."""

    def __init__(self, tool, runs):
        self.tool = tool
        self.runs = runs
        self.valid = [r for r in runs if counts(r)]
        self.label = runs[-1].get("label", tool)

    def median(self, key):
        values = [r[key] for r in self.valid if isinstance(r.get(key), (int, float))]
        return statistics.median(values) if values else None

    def seconds(self):
        return self.median("seconds")

    def goodput_bps(self):
        """Median goodput: file bytes over the whole command (iperf3: its own)."""
        rates = [r["bytes"] * 8 / r["seconds"] for r in self.valid if r.get("seconds")]
        return statistics.median(rates) if rates else None

    def cpu_per_gib(self):
        """Per GiB moved: a run stopped at the cap counts with what it moved."""
        runs = self.valid + [r for r in self.runs if r.get("capped") and r.get("emu_valid") is not False]
        per = [(r["cpu_snd_s"] + r["cpu_rcv_s"]) / (r["bytes"] / GIB) for r in runs
               if isinstance(r.get("cpu_snd_s"), (int, float))
               and isinstance(r.get("cpu_rcv_s"), (int, float)) and r.get("bytes")]
        return statistics.median(per) if per else None

    def capped_rate(self):
        """The rate a capped run reached (bytes at the cap over the cap)."""
        rates = [r["bytes"] * 8 / r["seconds"] for r in self.runs
                 if r.get("capped") and r.get("seconds")]
        return statistics.median(rates) if rates else None

    def why_not(self):
        reasons = []
        for r in self.runs:
            if r.get("emu_valid") is False:
                reasons.append("emulator overloaded")
            elif r.get("capped"):
                reasons.append("capped at %.0f s" % r.get("seconds", 0))
            elif r.get("error"):
                reasons.append("failed: %s" % r["error"])
            elif r.get("verified") is False:
                reasons.append("copy differs")
        return reasons


def fmt(value, spec, missing="n/a"):
    return missing if value is None else format(value, spec)


def rate_cell(t):
    if t is None:
        return "not run"
    g = t.goodput_bps()
    if g is not None:
        return "%.0f" % (g / 1e6)
    c = t.capped_rate()
    return "%.0f (capped)" % (c / 1e6) if c is not None else "n/a"


def best_gridftp(tools):
    done = [tools[g] for g in GRIDFTP if g in tools and tools[g].seconds() is not None]
    return min(done, key=lambda t: t.seconds()) if done else None


def summary_table(rows, by_row):
    print("| path | file | physical limit s (% of capacity) | aftp s | aftp % of loss-adjusted "
          "capacity (goal) | aftp % of limit | aftp repeat contact s (% of capacity) "
          "| GridFTP best s (streams) | aftp / GridFTP (goal 1.3) "
          "| scp Mbit/s | rsync Mbit/s | iperf3 BBR / CUBIC Mbit/s (memory) "
          "| CPU s/GiB aftp / scp | aftp runs valid (first / repeat) |")
    print("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|")
    for key, row in rows.items():
        tools = by_row.get(key, {})
        aftp, grid = tools.get("aftp"), best_gridftp(tools)
        repeat = tools.get("aftp-repeat")
        a_s = aftp.seconds() if aftp else None
        r_s = repeat.seconds() if repeat else None
        goal = row.meta.get("goal_pct")
        a_pct = 100 * row.at_capacity_s / a_s if a_s else None
        ratio = grid.seconds() / a_s if a_s and grid else None
        iperf = " / ".join(rate_cell(tools.get(t)) for t in ("iperf3-bbr", "iperf3-cubic"))
        cpu = " / ".join(fmt(tools[t].cpu_per_gib() if t in tools else None, ".2f")
                         for t in ("aftp", "scp"))
        print("| %s | %d MiB | %.2f (%.1f%%) | %s | %s (%s) | %s | %s | %s | %s | %s | %s | %s | %s "
              "| %s |" % (
                  row.meta["profile"], row.size >> 20, row.limit_s,
                  100 * row.at_capacity_s / row.limit_s, fmt(a_s, ".2f"), fmt(a_pct, ".1f"),
                  "%s%%" % goal if goal not in (None, "-") else "-",
                  fmt(100 * row.limit_s / a_s if a_s else None, ".1f"),
                  "%s (%s)" % (fmt(r_s, ".2f"), fmt(100 * row.at_capacity_s / r_s if r_s else None,
                                                    ".1f")),
                  "%.2f (%s)" % (grid.seconds(), grid.tool.split("-p")[1]) if grid else "n/a",
                  fmt(ratio, ".2f"), rate_cell(tools.get("scp")), rate_cell(tools.get("rsync")),
                  iperf, cpu, " / ".join(valid_cell(t) for t in (aftp, repeat))))


def valid_cell(t):
    return "%d/%d" % (len(t.valid), len(t.runs)) if t else "not run"


def phase_keys(runs):
    """The phase fields of these runs (phases.py merges a phase it cannot
    tell into the next: handshake_ramp, ...), in the phases' order."""
    keys = {k for r in runs for k in r if k.startswith("phase_") and k.endswith("_s")}
    return sorted(keys, key=lambda k: PHASES.index(k[len("phase_"):].split("_")[0]))


def phases_line(row, aftp, who):
    parts = ["%s %.3f s" % (k[len("phase_"):-2].replace("_", " + "), aftp.median(k))
             for k in phase_keys(aftp.valid) if aftp.median(k) is not None]
    if not parts:
        return None
    link = aftp.median("phase_steady_link_pct")
    if link is not None:
        parts.append("the receiver host got %.1f%% of the link's full delivery during the steady"
                     " state" % link)
    middle = aftp.median("steady_bps")
    if middle is not None:
        parts.append("new bytes from 20%% to 95%% of the file at %.1f%% of loss-adjusted capacity"
                     % (100 * middle / row.capacity))
    return ("%s phases (medians of %d valid runs): %s. The limit's: %.3f s of bytes at "
            "capacity, handshake %.3f s (1 RTT), flight %.3f s (0.5 RTT), confirmation %.3f s "
            "(1 RTT)." % (who, len(aftp.valid), "; ".join(parts), row.at_capacity_s, row.rtt_s,
                          row.rtt_s / 2, row.rtt_s))


def row_table(row, tools, out_rows):
    print("#### %s" % row.title())
    print()
    print("| tool | runs valid | median s | goodput Mbit/s | % of loss-adjusted capacity "
          "| % of physical limit | retransmitted % | CPU s/GiB sender + receiver | notes |")
    print("|---|---|---|---|---|---|---|---|---|")
    for t in tools.values():
        secs, goodput = t.seconds(), t.goodput_bps()
        memory = t.tool.startswith("iperf3")
        pct_cap = 100 * goodput / row.capacity if goodput else None
        pct_limit = 100 * row.limit_s / secs if secs and not memory else None
        notes = sorted(set(t.why_not()))
        if t.capped_rate() is not None:
            notes.append("rate reached when capped: %.1f Mbit/s" % (t.capped_rate() / 1e6))
        last_note = t.runs[-1].get("note")
        if last_note:
            notes.append(last_note)
        print("| %s | %d/%d | %s | %s | %s | %s | %s | %s | %s |" % (
            t.label, len(t.valid), len(t.runs), "memory" if memory else fmt(secs, ".2f"),
            fmt(goodput / 1e6 if goodput else None, ".1f"), fmt(pct_cap, ".1f"),
            fmt(pct_limit, ".1f"), fmt(t.median("retrans_pct"), ".2f"),
            fmt(t.cpu_per_gib(), ".2f"), "; ".join(notes)))
        out_rows.append(dict(row=row.meta["row"], profile=row.meta["profile"],
                             file_bytes=row.size, tool=t.tool, runs=len(t.runs),
                             valid_runs=len(t.valid), median_seconds=secs, goodput_bps=goodput,
                             pct_of_loss_adjusted_capacity=pct_cap, pct_of_limit=pct_limit,
                             limit_seconds=row.limit_s, capacity_bps=row.capacity,
                             goal_pct=row.meta.get("goal_pct"),
                             retrans_pct=t.median("retrans_pct"), cpu_s_per_gib=t.cpu_per_gib(),
                             **{k: t.median(k) for k in phase_keys(t.valid)}))
    print()
    for tool, who in (("aftp", "aftp's"), ("aftp-repeat", "aftp's as a repeat contact")):
        line = phases_line(row, tools[tool], who) if tool in tools else None
        if line:
            print(line)
            print()


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--json"):
        raise SystemExit(__doc__)
    records = load(argv[1])
    rows = {r["row"]: Row(r) for r in records if r.get("kind") == "meta"}
    by_row = {}
    for r in records:
        if r.get("kind") == "tool" and r.get("row") in rows:
            by_row.setdefault(r["row"], {}).setdefault(r["tool"], []).append(r)
    by_row = {k: {t: ToolResult(t, runs) for t, runs in v.items()} for k, v in by_row.items()}
    links = [r for r in records if r.get("kind") == "link"]
    summary_table(rows, by_row)
    print()
    print("Physical limit = bytes x 8 / (payload capacity x (1 - loss)) + 2.5 RTT (1 RTT handshake,"
          " 0.5 RTT flight, 1 RTT final confirmation); payload capacity = link rate x %s."
          " aftp / GridFTP = GridFTP's best median seconds / aftp's (above 1: aftp faster)."
          % next(iter(rows.values())).frac_note if rows else "")
    for link in links:
        print("TCP on %s: congestion control %s (kernel offers %s), %s." % (
            link["profile"], link["tcp_cc"], link.get("tcp_available"), link.get("tcp_buffers")))
    print()
    out_rows = []
    for key, row in rows.items():
        row_table(row, by_row.get(key, {}), out_rows)
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            f.writelines(json.dumps(o) + "\n" for o in out_rows)
    valid = all(len(t.valid) == len(t.runs) for tools in by_row.values() for t in tools.values())
    if not valid:
        print("Some runs did not count (see each row's notes): their medians are over the runs"
              " that did.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
