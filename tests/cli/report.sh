#!/usr/bin/env bash
# report.sh DYNAPAR RUN_DIR OUT: `dynapar report` on a finished training run draws four
# valid PNG files, and its timeline table has exactly one bar per (device, plan in force),
# recounted here from plans.jsonl, even in a directory whose name has a quote; a directory that
# is not a run fails with exit 2.
set -euo pipefail
bin=$1 run=$2
rm -rf "$3"
# A directory name that a shell would misread: gnuplot runs with no shell between.
out="$3/it's \$(here)"
"$bin" report "$run" --out "$out"
/usr/bin/python3 - "$run" "$out" <<'PY'
import json, sys, os
run, out = sys.argv[1], sys.argv[2]
for png in ["step_time.png", "plan_timeline.png", "cost.png", "predicted.png"]:
    with open(os.path.join(out, png), "rb") as f:
        head = f.read(8)
    assert head == b"\x89PNG\r\n\x1a\n", (png, head)
    assert os.path.getsize(os.path.join(out, png)) > 5000, png  # something was drawn
plans = [json.loads(l) for l in open(os.path.join(run, "plans.jsonl")) if l.strip()]
steps = [json.loads(l) for l in open(os.path.join(run, "metrics.jsonl")) if l.strip()]
end = max(s["step"] for s in steps if "event" not in s) + 1
bars = 0
for i, p in enumerate(plans):
    to = plans[i + 1]["step"] if i + 1 < len(plans) else end
    if to > p["step"]:
        bars += sum(len(g["devices"]) for g in p["plan"]["groups"])
rows = [l for l in open(os.path.join(out, "timeline.dat")) if l.strip()]
assert len(rows) == bars, (len(rows), bars)
print("ok:", len(plans), "plans,", bars, "timeline bars")
PY
err=$("$bin" report "$out" 2>&1 >/dev/null) && { echo "report on a plot directory should fail"; exit 1; } || rc=$?
[[ $rc -eq 2 && $err == *"metrics.jsonl is missing"* ]] || { echo "exit $rc: $err"; exit 1; }
