#!/usr/bin/env python3
"""The tables of bench/tree.sh, from its work directory.

usage: report.py WORK
WORK/results holds a line per run: case, tool, run, seconds, files, status
(ok, failed, capped, invalid), note, tab-separated. WORK/what.{wan,loopback}
say which trees ran, WORK/count.{wan,loopback} their file counts, and
WORK/link.PROFILE the link of each wan case ("rate_bps rtt_us loss backend").
"""
import os
import statistics
import sys

# Goals of issue 19: the Go tree over 1 Gbit/s, 150 ms in at most 2.0 s
# without loss and 2.5 s at 1% loss; 4 KiB files over loopback at 5,000 a second.
WAN_GOAL_S = {0.0: 2.0, 1.0: 2.5}
LOOPBACK_GOAL_FILES_S = 5000


def read_results(work):
    runs = []
    with open(os.path.join(work, "results")) as f:
        for line in f:
            case, tool, n, secs, files, status, note = line.rstrip("\n").split("\t")
            runs.append(dict(case=case, tool=tool, n=int(n), secs=float(secs),
                             files=int(files), status=status, note=note))
    return runs


def read_first_line(path):
    try:
        with open(path) as f:
            return f.readline().strip()
    except OSError:
        return ""


def loss_percent(fraction):
    """netem/wan.sh's WAN_FWD_LOSS (a fraction) in percent, rounded as the goals are."""
    try:
        return round(float(fraction) * 100, 2)
    except ValueError:
        return None


def wan_goal(link):
    """The goal in seconds on the issue's link, else None."""
    rate, rtt, loss = float(link[0]), float(link[1]), loss_percent(link[2])
    if rate != 1e9 or rtt != 150000 or loss not in WAN_GOAL_S:
        return None
    return WAN_GOAL_S[loss]


def tool_row(tool, runs, total_files, rsync_median, goal_s, goal_files_s):
    ok = [r for r in runs if r["status"] == "ok"]
    capped = [r for r in runs if r["status"] == "capped"]
    notes = sorted({r["note"] for r in runs if r["status"] in ("failed", "invalid")})
    if capped:
        r = capped[0]
        rate = r["files"] / r["secs"] if r["secs"] > 0 else 0
        extrapolated = total_files / rate if rate > 0 else float("inf")
        return ("| %s | capped at %.0f s | %d of %d files | %.1f | **%.0f s (extrapolated)** | %s | - |"
                % (tool, r["secs"], r["files"], total_files, rate, extrapolated,
                   "%.4f (extrapolated)" % (rsync_median / extrapolated) if rsync_median else "-"))
    invalid = [r["secs"] for r in runs if r["status"] == "invalid"]
    if invalid:
        notes.append("invalid runs took %.3f-%.3f s" % (min(invalid), max(invalid)))
    if not ok:
        return "| %s | 0/%d | - | - | - | - | %s |" % (tool, len(runs), "; ".join(notes) or "-")
    med = statistics.median(r["secs"] for r in ok)
    files_s = total_files / med
    ratio = "%.2f" % (rsync_median / med) if rsync_median else "-"
    goal = "-"
    if tool == "aftp" and goal_s is not None:
        goal = "%s: %s" % ("at most %.1f s" % goal_s, "met" if med <= goal_s else "missed")
    elif tool == "aftp" and goal_files_s is not None:
        goal = "at least %d files/s: %s" % (goal_files_s, "met" if files_s >= goal_files_s else "missed")
    runs_text = "%d/%d" % (len(ok), len(runs))
    if notes:
        runs_text += " (" + "; ".join(notes) + ")"
    spread = "%.3f-%.3f" % (min(r["secs"] for r in ok), max(r["secs"] for r in ok))
    return "| %s | %s | %.3f | %.0f | %s s | %s | %s |" % (tool, runs_text, med, files_s, spread,
                                                        ratio, goal)


def table(title, runs, total_files, goal_s=None, goal_files_s=None):
    print("### " + title)
    print()
    print("| tool | runs ok | median s | files/s | min-max | rsync s / tool s | goal |")
    print("|---|---|---|---|---|---|---|")
    tools = []
    for r in runs:
        if r["tool"] not in tools:
            tools.append(r["tool"])
    rsync_ok = [r["secs"] for r in runs if r["tool"] == "rsync" and r["status"] == "ok"]
    rsync_median = statistics.median(rsync_ok) if rsync_ok else None
    for tool in tools:
        print(tool_row(tool, [r for r in runs if r["tool"] == tool], total_files, rsync_median,
                       goal_s, goal_files_s))
    print()


def main(argv):
    if len(argv) != 2:
        sys.stderr.write(__doc__)
        return 2
    work = argv[1]
    runs = read_results(work)
    cases = []
    for r in runs:
        if r["case"] not in cases:
            cases.append(r["case"])
    for case in cases:
        mine = [r for r in runs if r["case"] == case]
        if case == "loopback":
            total = int(read_first_line(os.path.join(work, "count.loopback")) or 0)
            table("loopback 127.0.0.1: " + read_first_line(os.path.join(work, "what.loopback")),
                  mine, total, goal_files_s=LOOPBACK_GOAL_FILES_S)
            continue
        total = int(read_first_line(os.path.join(work, "count.wan")) or 0)
        link = read_first_line(os.path.join(work, "link." + case)).split()
        goal_s = None
        title = case
        if len(link) == 4:
            goal_s = wan_goal(link)
            title = "%s: %.0f Mbit/s, RTT %.0f ms, loss %g%% (%s backend)" % (
                case, float(link[0]) / 1e6, float(link[1]) / 1000, loss_percent(link[2]), link[3])
        table(title + "; " + read_first_line(os.path.join(work, "what.wan")), mine, total,
              goal_s=goal_s)
    print("seconds: from starting the sending command to its exit, disk to disk (connection set-up")
    print("included); a run counts only when the copy has every regular file, byte-exact (diff -r).")
    print("files/s = the tree's files / median seconds. rsync s / tool s: above 1, faster than rsync")
    print("over ssh in the same run. scp -r is stopped at its cap: its files/s and the time the whole")
    print("tree would take at that rate are extrapolated, not measured.")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
