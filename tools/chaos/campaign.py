#!/usr/bin/python3
"""The campaign table of docs/RELIABILITY.md ("Chaos campaign") from `dynapar chaos` outputs.

    tools/chaos/campaign.py [--commit C] [--write DOC] [LABEL=]OUT_DIR[,OUT_DIR...] ...

Each argument is one row (named LABEL, else by its folders); a comma joins the parts of a
campaign run in several goes. Reads
OUT_DIR/chaos.json (each run's verdict, difference, faults injected, losses, recoveries,
restart), OUT_DIR/seed-*/job.yaml (the kills the draw planned: at a hard moment, two in one
step) and OUT_DIR/seed-*/log.txt (where each kill landed, in every process of the run: a
restarted run's out/metrics.jsonl holds only the resumed process's records; a kill counts at
its moment only if it landed there). Prints the table, headed by the commit it ran at; with --write, also puts
it into DOC between the lines `<!-- campaign table -->` and `<!-- end of campaign table -->`
(tools/chaos/run_campaign.sh does both).
"""
import argparse
import collections
import json
import re
import sys
from pathlib import Path


def planned_kills(job_text):
    """(step, moment or None) of each planned kill in a job file's `faults: at:` list."""
    kills, entry = [], None
    for line in job_text.splitlines():
        if m := re.match(r"\s*- step: (\d+)", line):
            if entry and entry.get("kind") == "kill":
                kills.append((entry["step"], entry.get("moment")))
            entry = {"step": int(m.group(1))}
        elif entry is not None and (m := re.match(r"\s+(kind|moment): (\w+)", line)):
            entry[m.group(1)] = m.group(2)
        elif entry is not None and re.match(r"\S", line):  # the list ended
            if entry.get("kind") == "kill":
                kills.append((entry["step"], entry.get("moment")))
            entry = None
    if entry and entry.get("kind") == "kill":
        kills.append((entry["step"], entry.get("moment")))
    return kills


MOMENTS = ("replan", "migration", "sum", "checkpoint", "shard", "early", "evaluation", "placement", "joining")


def landed_kills(log_text):
    """The moment of each kill the run's log says landed ("fault injected (plan): device 3
    killed 972 us into the sum")."""
    return re.findall(r"fault injected \(\w+\): device \d+ killed \d+ us into (?:the|its) (\w+)", log_text)


def row(arg):
    label, _, where = arg.rpartition("=")
    dirs = where.split(",")
    runs, planned, landed, two = [], collections.Counter(), collections.Counter(), 0
    for d in dirs:
        for r in json.loads((Path(d) / "chaos.json").read_text())["runs"]:
            runs.append(r)
            seed = Path(d) / f"seed-{r['seed']}"
            kills = planned_kills((seed / "job.yaml").read_text())
            planned.update(m for _, m in kills if m)
            log = seed / "log.txt"
            landed.update(landed_kills(log.read_text(errors="replace")) if log.exists() else [])
            two += any(c >= 2 for c in collections.Counter(s for s, _ in kills).values())
    seeds = sorted(r["seed"] for r in runs)
    ok = sum(r["verdict"] == "ok" for r in runs)
    failed = [r["seed"] for r in runs if r["verdict"] != "ok"]
    return (f"| {label or ', '.join(dirs)} | {seeds[0]}-{seeds[-1]} | {ok}/{len(runs)}, diff <= {max(r['reference_max_rel_diff'] for r in runs):.2g} "
            f"| {sum(r['faults_injected'] for r in runs)} "
            f"| {' / '.join(str(landed[m]) for m in MOMENTS)} | {sum(planned[m] - min(planned[m], landed[m]) for m in MOMENTS)} | {two} "
            f"| {sum(r['devices_lost'] for r in runs)} | {sum(r['recoveries'] for r in runs)} | {sum(bool(r['restarted']) for r in runs)} "
            f"| {max(r['max_recovery_s'] for r in runs):.2f} | {', '.join(map(str, failed)) or 'none'} "
            f"| {sum(r['samples_lost'] for r in runs)} / {sum(r['samples_duplicated'] for r in runs)} |")


def table(args, commit):
    lines = [f"**At {commit}:** the table as `tools/chaos/campaign.py` wrote it from the campaigns' outputs.", "",
             f"| campaign | seeds | runs ended as one device | faults injected | kills landed at a hard moment ({' / '.join(MOMENTS)}) "
             "| planned there, not landed | runs with two kills in a step | devices lost | recoveries | restarts | max recovery (s) | failed "
             "| samples lost / applied twice |",
             "| --- | --- | ---: | ---: | --- | ---: | ---: | ---: | ---: | ---: | ---: | --- | ---: |"]
    return "\n".join(lines + [row(a) for a in args]) + "\n"


def write_into(doc, text):
    begin, end = "<!-- campaign table -->", "<!-- end of campaign table -->"
    d = Path(doc).read_text()
    if begin not in d or end not in d:
        sys.exit(f"{doc}: no '{begin}' ... '{end}' lines to write the table between")
    head, rest = d.split(begin, 1)
    Path(doc).write_text(head + begin + "\n" + text + end + rest.split(end, 1)[1])


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--commit", default="an unstated commit", help="the commit the campaign's binary was built from")
    ap.add_argument("--write", help="a markdown file to write the table into (between its campaign table lines)")
    ap.add_argument("campaigns", nargs="+", help="[LABEL=]OUT_DIR[,OUT_DIR...] per row")
    a = ap.parse_args()
    t = table(a.campaigns, a.commit)
    print(t, end="")
    if a.write:
        write_into(a.write, t)