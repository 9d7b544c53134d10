#!/usr/bin/env python3
"""The tables of bench/server.sh, from its work directory.

usage: report.py WORK [--json OUT]

WORK/results holds tab-separated lines (see bench/server.sh):
  S case run phase slot start end exit bytes ok note   a transfer
  M case run key=value...                              the server's memory, CPU
  V case run phase valid|invalid|n/a                   the link emulator's verdict
  N case text                                          a note under the case
WORK/meta holds "key<TAB>value" lines (command, aftp, host, sizes) and
WORK/link the link of the emulated cases ("profile rate_bps rtt_us loss
backend"). Prints a Markdown table per case, the goal beside each figure;
with --json, writes one JSON object per table row to OUT.
"""
import json
import os
import statistics
import sys

# Issue 20's goals.
WAN8_AGGREGATE_GOAL = 0.95   # aggregate goodput of 8 at once / one alone
JAIN_GOAL = 0.95             # Jain's fairness index over the 8 sessions' goodputs
TRICKLE_GOAL = 1.2           # real client's time beside a hostile peer / alone
PULL_GOAL = 0.03             # pull's goodput within 3% of push's

CASES = ("wan8", "lo64", "trickle", "pull")


class Results:
    def __init__(self, work):
        self.sessions, self.memory, self.verdicts, self.notes = [], {}, {}, {}
        with open(os.path.join(work, "results")) as f:
            for line in f:
                cols = line.rstrip("\n").split("\t")
                kind = cols[0]
                if kind == "S":
                    case, run, phase, slot, start, end, rc, size, ok, why = cols[1:11]
                    secs = float(end) - float(start)
                    self.sessions.append(dict(
                        case=case, run=int(run), phase=phase, slot=int(slot), start=float(start),
                        end=float(end), seconds=secs, exit=int(rc), bytes=int(size), ok=ok == "1",
                        note=why, goodput=int(size) * 8 / secs / 1e6 if ok == "1" and secs > 0 else 0.0))
                elif kind == "M":
                    self.memory[(cols[1], int(cols[2]))] = dict(
                        (k, float(v)) for k, v in (w.split("=", 1) for w in cols[3:]))
                elif kind == "V":
                    self.verdicts[(cols[1], int(cols[2]), cols[3])] = cols[4]
                elif kind == "N":
                    self.notes.setdefault(cols[1], []).append(cols[2])

    def of(self, case, run, phase):
        return sorted((s for s in self.sessions if (s["case"], s["run"], s["phase"]) == (case, run, phase)),
                      key=lambda s: s["slot"])

    def runs(self, case):
        return sorted({s["run"] for s in self.sessions if s["case"] == case})

    def verdict(self, case, run, phases):
        """The emulator's word on a run's phases, or None on loopback."""
        words = ["%s %s" % (p, self.verdicts[(case, run, p)]) for p in phases
                 if self.verdicts.get((case, run, p), "n/a") != "n/a"]
        return ", ".join(words) or None


def jain(xs):
    """Jain's fairness index: (sum x)^2 / (n sum x^2); 1 when all are equal."""
    squares = sum(x * x for x in xs)
    return sum(xs) ** 2 / (len(xs) * squares) if xs and squares > 0 else None


def one(sessions):
    """The single session of a solo phase, or None."""
    return sessions[0] if len(sessions) == 1 else None


def failed(s):
    return "failed after %.1f s (exit %d)" % (s["seconds"], s["exit"])


def secs_of(s):
    if s is None:
        return None
    return round(s["seconds"], 3) if s["ok"] else failed(s)


def mbps_of(s):
    return round(s["goodput"], 1) if s is not None and s["ok"] else None


def ratio(a, b, digits=3):
    return round(a / b, digits) if isinstance(a, (int, float)) and isinstance(b, (int, float)) and b else None


def aggregate(sessions):
    """(delivered, seconds from first start to last exit, Mbit/s of the bytes delivered)."""
    if not sessions:
        return 0, None, None
    span = max(s["end"] for s in sessions) - min(s["start"] for s in sessions)
    delivered = [s for s in sessions if s["ok"]]
    total = sum(s["bytes"] for s in delivered)
    return len(delivered), round(span, 3), (round(total * 8 / span / 1e6, 1) if span > 0 else None)


def spread(sessions):
    """Fastest / median / slowest session seconds, delivered or not."""
    if not sessions:
        return None
    t = sorted(s["seconds"] for s in sessions)
    return "%.2f / %.2f / %.2f" % (t[0], statistics.median(t), t[-1])


class Table:
    """Rows of figures, one column per run, a median when there are several runs, the goal."""

    def __init__(self, case, title, runs):
        self.case, self.title, self.runs, self.rows = case, title, runs, []

    def add(self, figure, values, goal=""):
        self.rows.append((figure, values, goal))

    def median(self, values):
        nums = [v for v in values if isinstance(v, (int, float)) and not isinstance(v, bool)]
        return round(statistics.median(nums), 3) if nums and len(nums) == len(values) else None

    def markdown(self, notes):
        many = len(self.runs) > 1
        head = ["figure"] + ["run %d" % r for r in self.runs] + (["median"] if many else []) + ["goal"]
        lines = ["### " + self.title, "", "| " + " | ".join(head) + " |",
                 "|" + "---|" * len(head)]
        for figure, values, goal in self.rows:
            cells = [figure] + [cell(v) for v in values]
            if many:
                cells.append(cell(self.median(values)))
            lines.append("| " + " | ".join(cells + [goal]) + " |")
        lines += [""] + ["%s" % n for n in notes]
        return "\n".join(lines)

    def json_rows(self):
        for figure, values, goal in self.rows:
            yield dict(case=self.case, figure=figure, runs=values, median=self.median(values), goal=goal or None)


def cell(v):
    if v is None:
        return "n/a"
    if isinstance(v, float):
        return "%g" % v if abs(v) < 10 else "%.1f" % v
    return str(v)


def link_title(work):
    try:
        with open(os.path.join(work, "link")) as f:
            name, rate, rtt, loss, backend = f.read().split()
    except (OSError, ValueError):
        return "the emulated link"
    return "%s (%g Mbit/s, RTT %g ms, loss %g%%, %s backend)" % (
        name, float(rate) / 1e6, float(rtt) / 1e3, float(loss) * 100, backend)


def session_rows(res, case, phase):
    """Per-session Markdown lines and JSON objects of a multi-session phase."""
    lines = ["| run | session | s | goodput Mbit/s | outcome |", "|---|---|---|---|---|"]
    objs = []
    for run in res.runs(case):
        for s in res.of(case, run, phase):
            lines.append("| %d | %d | %.3f | %s | %s |" % (
                run, s["slot"], s["seconds"], cell(mbps_of(s)), "delivered" if s["ok"] else s["note"]))
            objs.append(dict(case=case, run=run, phase=phase, session=s["slot"], seconds=round(s["seconds"], 3),
                             goodput_mbps=mbps_of(s), ok=s["ok"], note=s["note"] or None))
    return lines, objs


def add_alone_and_together(t, res, what, n, aggregate_goal):
    """The rows shared by wan8 and lo64: the phase "solo" (one WHAT alone), the
    phase "together" (N at once) and their aggregate against the one alone.
    Returns the sessions of each run's N at once."""
    solo = [one(res.of(t.case, r, "solo")) for r in t.runs]
    many = [res.of(t.case, r, "together") for r in t.runs]
    agg = [aggregate(m) for m in many]
    t.add("one %s alone: s" % what, [secs_of(s) for s in solo])
    t.add("one %s alone: goodput Mbit/s" % what, [mbps_of(s) for s in solo])
    t.add("%d at once: sessions delivered byte-exact" % n, ["%d/%d" % (a[0], len(m)) for a, m in zip(agg, many)],
          "%d/%d" % (n, n))
    t.add("%d at once: first start to last exit, s" % n, [a[1] for a in agg])
    t.add("%d at once: aggregate goodput Mbit/s (bytes delivered / that span)" % n, [a[2] for a in agg])
    t.add("aggregate / alone", [ratio(a[2], mbps_of(s)) for a, s in zip(agg, solo)], aggregate_goal)
    return many


def table_wan8(res, meta, work):
    runs = res.runs("wan8")
    n = int(meta.get("wan8_sessions", 8))
    t = Table("wan8", "wan8: %d pushes of %s MiB at once across %s" % (n, meta.get("size_mib"), link_title(work)),
              runs)
    many = add_alone_and_together(t, res, "push", n, ">= %.2f" % WAN8_AGGREGATE_GOAL)
    t.add("Jain's index over the %d goodputs (a failed session counts 0)" % n,
          [round(j, 3) if (j := jain([s["goodput"] for s in m])) is not None else None for m in many],
          ">= %.2f" % JAIN_GOAL)
    t.add("%d at once: fastest / median / slowest session s" % n, [spread(m) for m in many])
    t.add("link emulator", [res.verdict("wan8", r, ("solo", "together")) for r in runs], "valid")
    lines, objs = session_rows(res, "wan8", "together")
    return t, ["Each session of the %d at once:" % n, ""] + lines + [""], objs


def table_lo64(res, meta, work):
    runs = res.runs("lo64")
    n = int(meta.get("sessions", 64))
    t = Table("lo64", "lo64: one session, then %d at once over 127.0.0.1, %s MiB each" % (n, meta.get("lo_mib")),
              runs)
    many = add_alone_and_together(t, res, "session", n, "(figure)")
    t.add("%d at once: fastest / median / slowest session s" % n, [spread(m) for m in many])
    mem = [res.memory.get(("lo64", r), {}) for r in runs]

    def mib(key):
        return [round(m[key] / 1024, 1) if key in m else None for m in mem]

    peak_sessions = [int(m["peak_sessions"]) if "peak_sessions" in m else None for m in mem]
    t.add("server: most sessions at once (connected sockets, every 50 ms)", peak_sessions, "%d" % n)
    t.add("server RSS idle (as it started listening), MiB", mib("idle_kb"))
    t.add("server RSS as the %d started (after the sessions before), MiB" % n, mib("start_kb"))
    t.add("server RSS peak during the %d, MiB" % n, mib("peak_kb"))
    def per_session(idle, peak):
        return [round((m[peak] - m[idle]) / m["peak_sessions"], 1) if m.get("peak_sessions") and peak in m else None
                for m in mem]

    t.add("server memory per session, KiB ((peak - idle) / most sessions at once)",
          per_session("idle_kb", "peak_kb"), "(figure)")
    t.add("  the same of RssAnon (without the pages of mapped files), KiB",
          per_session("idle_anon_kb", "peak_anon_kb"), "(figure)")
    t.add("server VmHWM (its lifetime peak), MiB", mib("hwm_kb"))
    t.add("server threads as the %d started / at most during them" % n,
          ["%d / %d" % (m["start_threads"], m["peak_threads"]) if "peak_threads" in m else None for m in mem])
    t.add("server CPU s (user + system) during the %d" % n,
          [m.get("cpu_s") for m in mem])
    return t, [], []


def table_trickle(res, meta, work):
    runs = res.runs("trickle")
    t = Table("trickle", "trickle: a real client's push of %s MiB over 127.0.0.1, alone and beside a hostile peer"
              % meta.get("size_mib"), runs)
    alone = [one(res.of("trickle", r, "alone")) for r in runs]
    t.add("alone: s", [secs_of(s) for s in alone])
    t.add("alone: goodput Mbit/s", [mbps_of(s) for s in alone])
    for phase, what in (("trickling", "while an authorized peer trickles (aftp send --rate 16k, started first)"),
                        ("half-open", "while a half-open peer holds a session (aftp send stopped by SIGSTOP "
                                      "after the server accepted its file)")):
        with_peer = [one(res.of("trickle", r, phase)) for r in runs]
        t.add(what + ": s", [secs_of(s) for s in with_peer])
        t.add("  that / alone",
              [ratio(secs_of(w), secs_of(a), 2) for w, a in zip(with_peer, alone)], "<= %.1f" % TRICKLE_GOAL)
    return t, [], []


def table_pull(res, meta, work):
    runs = res.runs("pull")
    t = Table("pull", "pull: push and pull of the same %s MiB file across %s" % (meta.get("size_mib"),
                                                                             link_title(work)), runs)
    push = [one(res.of("pull", r, "push")) for r in runs]
    pull = [one(res.of("pull", r, "pull")) for r in runs]
    t.add("push: s", [secs_of(s) for s in push])
    t.add("push: goodput Mbit/s", [mbps_of(s) for s in push])
    t.add("pull: s", [secs_of(s) for s in pull])
    t.add("pull: goodput Mbit/s", [mbps_of(s) for s in pull])
    t.add("pull / push goodput", [ratio(mbps_of(b), mbps_of(a)) for a, b in zip(push, pull)],
          "%.2f to %.2f" % (1 - PULL_GOAL, 1 + PULL_GOAL))
    t.add("link emulator", [res.verdict("pull", r, ("push-pull",)) for r in runs], "valid")
    return t, [], []


def main(argv):
    if len(argv) not in (2, 4) or (len(argv) == 4 and argv[2] != "--json"):
        raise SystemExit(__doc__)
    work = argv[1]
    res = Results(work)
    meta = {}
    with open(os.path.join(work, "meta")) as f:
        for line in f:
            k, _, v = line.rstrip("\n").partition("\t")
            meta[k] = v
    print("%s; aftp: %s" % (meta.get("host"), meta.get("aftp")))
    print("command: " + meta.get("command", "?"))
    objs = []
    for case in CASES:
        notes = res.notes.get(case, [])
        if not res.runs(case):
            if notes:
                print("\n### %s\n\n%s" % (case, "\n".join(notes)))
            continue
        table, extra, session_objs = globals()["table_" + case](res, meta, work)
        print()
        print(table.markdown(notes))
        if extra:
            print("\n".join(extra))
        objs += list(table.json_rows()) + session_objs
    if len(argv) == 4:
        with open(argv[3], "w") as f:
            for o in objs:
                f.write(json.dumps(o) + "\n")


if __name__ == "__main__":
    main(sys.argv)
