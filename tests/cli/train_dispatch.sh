#!/usr/bin/env bash
# Within-step dispatch end to end: `dynapar train examples/jobs/bursty.yaml --verify` (four
# devices, an exact job) runs steps whose devices compute other parts of the
# batch than the plan's shares, and still equals the single-device run exactly, every sample
# once. The plan in force at each step is read from plans.jsonl, what each device ran from
# metrics.jsonl. With a fourth argument N: the same through `dynapar launch --local N`, the
# probes' progress and their rests on the wire to node processes.
set -euo pipefail
if [ $# -ge 4 ]; then
  "$1" launch --local "$4" "$2" --verify --steps 24 --out "$3" > /dev/null
else
  "$1" train "$2" --verify --steps 24 --out "$3" > /dev/null
fi
/usr/bin/python3 - "$3" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
plans = [json.loads(l) for l in open(d + "/plans.jsonl")]
steps = [r for r in map(json.loads, open(d + "/metrics.jsonl")) if "stages" in r and r["stages"]]
assert steps, "no step records"
moved = 0
for r in steps:
    plan = [p for p in plans if p["step"] <= r["step"]][-1]["plan"]
    by_device = {st["device"]: st["samples"] for st in r["stages"]}
    # The planner may pipeline a group over two devices; each of its stages reports the
    # group's samples, so a group counts once, by its first stage.
    share, ran = {}, {}
    for g in plan["groups"]:
        first = g["devices"][0]
        assert all(by_device[d] == by_device[first] for d in g["devices"]), (r["step"], g, by_device)
        share[first], ran[first] = g["share"], by_device[first]
    assert sum(ran.values()) == 256, (r["step"], ran)
    assert all(v % 8 == 0 for v in ran.values()), ran  # whole micro-batches of 8 (256 = 32 of them)
    moved += any(ran[k] != share[k] for k in ran)
assert moved >= 1, "no step dispatched away from the plan's shares"
print("dispatched steps:", moved, "of", len(steps))
PY
