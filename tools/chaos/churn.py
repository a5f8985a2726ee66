#!/usr/bin/python3
"""Churn figures of `dynapar chaos` campaigns (docs/RELIABILITY.md, "Churn"), side by side.

    tools/chaos/churn.py OUT_DIR [OUT_DIR ...]

Reads each run's log.txt (timestamps), out/metrics.jsonl (steps, faults, recoveries) and
job.yaml (batch, leave events) under OUT_DIR/seed-*/, and prints one markdown table: for each
campaign and fault kind, how many there were, the time from the fault to the first step after
it (detection, then recovery and re-plan), the steps and samples redone, the node-loss
deadline that detected it (over nodes), joins to the joiner's first step, and the useful-work
utilisation of the runs (the time of the steps that count over the training's wall time),
apart for runs that a crash, hang or partition struck and runs none did. A fault answered by
a retry (every device answered the probes: nothing lost) counts as well as one that cost a
device.
"""
import json
import re
import statistics
import sys
from datetime import datetime
from pathlib import Path

STAMP = re.compile(r"^\[(\d\d:\d\d:\d\d\.\d+)\]")
INJECTED = re.compile(r"step (\d+): fault injected \(\w+\): device (\d+) (killed|hung|cut off)\b.*?(\d+) us into (?:the|its) (\w+)")
GOING_ON = re.compile(r"(devices? lost) \(([^)]*)\), going on at step (\d+)")
RECOVERED = re.compile(r"step (\d+): recovered in ([\d.]+) s")
# A failed attempt with every device answering (a hang or a pause shorter than the step
# deadline plus the probes): no device is lost, the step re-runs (or counts, if it applied).
RETRIED = re.compile(r"step (\d+): .*: every device answers; (the step re-runs|the step had applied)")
SILENT = re.compile(r"lost \(no message for ([\d.]+) s(?:, ([\d.]+) s allowed)?\)")
NODE_JOINED = re.compile(r"\[remote\] \[info\] node '([^']+)' joined with")
PLAN_JOINED = re.compile(r"step (\d+): new plan .*?\): (.*?); (?:old plan|new plan \d)")
RESUMING = re.compile(r"resuming from .* at step (\d+)")
PROGRESS = re.compile(r"step (\d+)/(\d+) ")


def seconds(line):
    m = STAMP.match(line)
    if not m:
        return None
    t = datetime.strptime(m.group(1), "%H:%M:%S.%f")
    return t.hour * 3600 + t.minute * 60 + t.second + t.microsecond / 1e6


def run_figures(run):
    """One run's faults (each with its recovery), joins and utilisation."""
    lines = [l for l in (run / "log.txt").read_text(errors="replace").splitlines() if STAMP.match(l)]
    job = (run / "job.yaml").read_text()
    batch = int(re.search(r"^batch: (\d+)", job, re.M).group(1))
    faults, recoveries = [], []
    pending = None
    start_step, first_progress, t_last, t_resumed = 0, None, None, None
    for line in lines:
        t = seconds(line)
        if (m := RESUMING.search(line)):
            start_step, first_progress, t_resumed = int(m.group(1)), None, t
        if (m := PROGRESS.search(line)):
            if first_progress is None:
                first_progress = (t, int(m.group(1)))
            t_last = t
        if (m := INJECTED.search(line)):
            kind = {"killed": "crash", "hung": "hang", "cut off": "partition"}[m.group(3)]
            faults.append({"kind": kind, "step": int(m.group(1)), "at": t + int(m.group(4)) / 1e6, "moment": m.group(5)})
        elif (m := GOING_ON.search(line)):
            s = SILENT.search(line)
            pending = {"at": t, "how": m.group(2), "next": int(m.group(3)), "silent": float(s.group(1)) if s else None,
                       "allowed": float(s.group(2)) if s and s.group(2) else (2.0 if s else None)}
        elif (m := RECOVERED.search(line)) and pending:
            pending["resumed"] = t
            recoveries.append(pending)
            pending = None
        elif m := RETRIED.search(line):
            recoveries.append({"at": t, "resumed": t, "how": m.group(2), "next": int(m.group(1)), "silent": None, "allowed": None,
                               "retry": True})
    # Each recovery answers the earliest fault before it that no earlier recovery answered;
    # faults that struck while the same failure was being handled share its recovery.
    events, unattributed = [], 0
    for r in recoveries:
        mine = [f for f in faults if f["at"] <= r["at"] and not f.get("answered")]
        if not mine:
            # Two faults in one step can be found one after the other (two recoveries, the first
            # answering both): a fault just before this loss explains it too.
            # A retry loses nobody (after a recovery over Gloo, the next attempt can meet a
            # communicator the lost peer broke, and is retried).
            window = max(1.0, (r["allowed"] or 0) + 1.0)
            if not r.get("retry") and not any(0 <= r["at"] - f["at"] <= window for f in faults):
                unattributed += 1  # a loss nobody injected: a healthy node taken for lost
            continue
        for f in mine:
            f["answered"] = True
        f = mine[0]
        failed_at = max(x["step"] for x in mine)
        undone = failed_at - r["next"] if "rolled back" in r["how"] else 0
        abandoned = 0 if "had applied" in r["how"] else 1
        if r.get("retry"):  # no device lost: a stalled one answered the probes
            undone, abandoned = 0, 0 if "had applied" in r["how"] else 1
        events.append({"kind": f["kind"], "moment": f["moment"], "to_next_s": r["resumed"] - f["at"],
                       "detect_s": r["at"] - f["at"], "steps": undone + abandoned, "samples": (undone + abandoned) * batch,
                       "allowed": r["allowed"], "faults": len(mine), "retry": bool(r.get("retry"))})
    # A node's devices take part from the first plan after it joined (restarted nodes only:
    # the first nodes start the run).
    joins = []
    waiting = {}
    started = first_progress[0] if first_progress else None
    for line in lines:
        t = seconds(line)
        if (m := NODE_JOINED.search(line)) and started is not None and t > started and (t_resumed is None or t > t_resumed):
            waiting[m.group(1)] = t
        elif (m := PLAN_JOINED.search(line)) and waiting and "joined" in m.group(2):
            for node, since in waiting.items():
                joins.append(t - since)
            waiting = {}
    # Useful work: the last record of every step of this (the last) process, over its
    # training's time: from the start of its first step (the first progress line less the
    # steps up to it) to its last progress line.
    final, before_first = {}, 0.0
    for l in (run / "out" / "metrics.jsonl").read_text().splitlines():
        r = json.loads(l)
        if "event" in r or r["step"] < start_step:
            continue
        final[r["step"]] = r["time_s"]
    wall = useful = None
    if first_progress and t_last:
        before_first = sum(v for k, v in final.items() if k < first_progress[1])
        wall = t_last - (first_progress[0] - before_first)
        useful = sum(final.values())
    leaves = len(re.findall(r"kind: leave", job))
    # Whether a crash, hang or partition struck this run (slow-downs and leaves do not count).
    return events, joins, (useful, wall), leaves, unattributed, bool(faults)


def fmt(values, digits=2):
    if not values:
        return "-"
    if len(values) == 1:
        return f"{values[0]:.{digits}f}"
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def main(dirs):
    print("| campaign | fault | count | fault to next step (s) | of which detection (s) | node-loss deadline (s) |"
          " steps redone | samples redone |")
    print("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
    summary = []
    for d in map(Path, dirs):
        runs = sorted(p for p in d.glob("seed-*") if (p / "out" / "metrics.jsonl").exists() and (p / "log.txt").exists())
        events, joins, util, leaves, fault_free, false_losses = [], [], [], 0, [], 0
        for run in runs:
            e, j, u, lv, fl, struck = run_figures(run)
            events += e
            joins += j
            leaves += lv
            false_losses += fl
            if u[0] is not None and u[1]:
                (util if struck else fault_free).append(u[0] / u[1])
        for kind in ["crash", "hang", "partition"]:
            k = [x for x in events if x["kind"] == kind]
            if not k:
                continue
            allowed = [x["allowed"] for x in k if x["allowed"] is not None]
            retried = sum(x["retry"] for x in k)
            print(f"| {d.name} | {kind} | {len(k)} ({retried} retried) | {fmt([x['to_next_s'] for x in k])} | {fmt([x['detect_s'] for x in k])} |"
                  f" {fmt(allowed)} | {sum(x['steps'] for x in k)} ({sum(x['steps'] for x in k) / len(k):.2f} each) |"
                  f" {sum(x['samples'] for x in k)} |")
        print(f"| {d.name} | graceful leave | {leaves} | no failed step | - | - | 0 | 0 |")
        summary.append((d.name, len(runs), joins, util, fault_free, false_losses))
    print()
    print("| campaign | runs | restarted node to its first step (s) | useful-work utilisation: runs a crash, hang or partition struck |"
          " runs none struck | healthy nodes taken for lost |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name, n, joins, util, free, fl in summary:
        print(f"| {name} | {n} | {fmt(joins)} | {fmt(util)} | {fmt(free)} | {fl} |")


if __name__ == "__main__":
    if len(sys.argv) < 2:
        sys.exit("usage: churn.py CAMPAIGN_OUT_DIR [...]")
    main(sys.argv[1:])
