#!/usr/bin/env bash
# `dynapar train JOB --verify` with online re-planning, a slowdown, a join and a leave: the run
# must equal the single-device run, and the outputs must record every plan with its reason.
# With a fourth argument N: the same through `dynapar launch --local N` (node processes).
set -euo pipefail
if [ $# -ge 4 ]; then
  "$1" launch --local "$4" "$2" --verify --out "$3" > /dev/null
else
  "$1" train "$2" --verify --out "$3" > /dev/null
fi
/usr/bin/python3 - "$3" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["replans"] >= 1 and s["joins"] == 1 and s["leaves"] == 1, s
assert s["avg_cost"] > 0 and s["budget"] == 0.0125, s
plans = [json.loads(l) for l in open(d + "/plans.jsonl")]
assert len(plans) == s["replans"] + 1, (len(plans), s["replans"])
assert all(p["reason"] for p in plans), plans
assert "joined" in plans[0]["reason"], plans[0]
assert sum(p["layers_moved"] for p in plans) == s["layers_moved"], s
assert sum(p["bytes_migrated"] for p in plans) == s["bytes_migrated"], s
for p in plans:
    if p["slot"] >= 8:
        assert all(0 not in g["devices"] for g in p["plan"]["groups"]), p
steps = [json.loads(l) for l in open(d + "/metrics.jsonl")]
assert len(steps) == s["steps"] == 24
print("ok: diff", s["reference_max_rel_diff"], "replans", s["replans"])
PY
