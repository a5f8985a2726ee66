#!/usr/bin/env bash
# `dynapar bench control` (tools/dynapar/cmd_bench_control.cpp): the controller's CPU per step,
# memory and steps/s over N node processes, and the line through them. Checked here from the
# runs' own files, independently of the tool: each run trained its 12 steps over N one-device
# nodes and lost no sample; the controller process's CPU in metrics.jsonl never decreases and
# is at most the summary's; the figures are those the rows give; the fit and the
# extrapolation are numpy's least squares. Bad flags are refused (exit 2).
# bench_control.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out"
"$bin" bench control --nodes 2,3 --steps 12 --out "$out/b" --json > "$out/b.json"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
import numpy as np
out = sys.argv[1]
b = json.load(open(out + "/b.json"))
assert b == json.load(open(out + "/b/control.json")), "printed and saved figures differ"
xs, cpus = [], []
for p in b["points"]:
    d = f"{out}/b/nodes-{p['nodes']}/run"
    s = json.load(open(d + "/summary.json"))
    assert s["steps"] == 12 and s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
    devs = [g["devices"] for g in s["final_plan"]["groups"]]
    assert sorted(sum(devs, [])) == list(range(p["nodes"])) and all(len(g) == 1 for g in devs), devs
    log = open(f"{out}/b/nodes-{p['nodes']}/log.txt").read()
    assert log.count("joined with 1 device(s)") == p["nodes"], "not one device a node"
    rows = {}
    for l in open(d + "/metrics.jsonl"):
        r = json.loads(l)
        if "event" not in r: rows[r["step"]] = r
    rows = [rows[k] for k in sorted(rows)]
    cpu = [r["process_cpu_s"] for r in rows]
    assert all(a <= b for a, b in zip(cpu, cpu[1:])), cpu
    assert 0 < cpu[-1] <= s["process"]["cpu_s"], (cpu[-1], s["process"])
    kept = rows[max(2, len(rows) // 5):]
    n = len(kept) - 1
    want_cpu = (kept[-1]["process_cpu_s"] - kept[0]["process_cpu_s"]) / n
    want_step = sum(r["time_s"] for r in kept[1:]) / n
    assert p["steps_measured"] == n and abs(p["controller_cpu_per_step_s"] - want_cpu) < 1e-12, (p, want_cpu)
    assert abs(p["step_s"] - want_step) < 1e-12 and p["controller_max_rss_mb"] == s["process"]["max_rss_mb"], (p, want_step)
    xs.append(p["nodes"]); cpus.append(want_cpu)
slope, fixed = np.polyfit(xs, cpus, 1)
f = b["fit"]["cpu_per_step_s"]
assert abs(f["per_node"] - slope) < 1e-9 and abs(f["fixed"] - fixed) < 1e-9, (f, slope, fixed)
for e in b["fit"]["extrapolated"]:
    assert abs(e["controller_cpu_per_step_s"] - (fixed + slope * e["nodes"])) < 1e-9, e
print("ok:", [(p["nodes"], round(1e3 * p["controller_cpu_per_step_s"], 3)) for p in b["points"]], "ms of controller CPU a step")
PY
for bad in "--nodes 0" "--steps 5" "--policy nope"; do
  rc=0
  "$bin" bench control $bad --out "$out/bad" > "$out/bad.log" 2>&1 || rc=$?
  [ "$rc" = 2 ] || { echo "exit $rc for bench control $bad"; cat "$out/bad.log"; exit 1; }
  echo "ok: bench control $bad refused"
done
