#!/usr/bin/env bash
# Kills while a device arrives (issue 71; docs/RELIABILITY.md, "Fault plans"): `placement`
# during the first plan's placement of layers, `joining` on the next device to join, in one
# process and over node processes that the launcher restarts. Each kill lands where it was
# asked to (the injected records say so), every run equals one device, no sample is lost or
# applied twice.
# place_join.sh DYNAPAR JOB OUT
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
"$bin" train "$job" --verify --out "$out/one" > /dev/null 2> "$out/one.log" || { tail -20 "$out/one.log"; exit 1; }
"$bin" launch --local 3 --respawn-s 1 "$job" --verify --out "$out/nodes" > /dev/null 2> "$out/nodes.log" || { tail -20 "$out/nodes.log"; exit 1; }
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for run in ["one", "nodes"]:
    s = json.load(open(f"{out}/{run}/summary.json"))
    assert s["reference_max_rel_diff"] == 0, (run, s["reference_max_rel_diff"])
    assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, (run, s)
    injected = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl") if '"injected"' in l]
    where = sorted(r["detail"].split(" us into ")[1] for r in injected)
    assert where == ["its joining", "the placement"], (run, where)
    placed = [r for r in injected if r["detail"].endswith("the placement")]
    assert placed[0]["step"] == 0, (run, placed)
    assert s["recoveries"] >= 1, (run, s["recoveries"])
    print(f"ok: {run}: killed at the placement and while joining; diff 0, nothing lost or repeated")
PY
