#!/usr/bin/env bash
# Kills on the hard moments (docs/RELIABILITY.md, "Fault plans": moment), in one process and
# over node processes that the launcher restarts: each kill lands where it was asked to (the
# injected records say so), every run equals one device, no sample lost or applied twice. And
# a run whose survivors cannot hold the model waits for a replacement instead of failing.
# hard_moments.sh DYNAPAR HARD_JOB TOO_FEW_JOB OUT
set -euo pipefail
bin="$1" job="$2" few="$3" out="$4"
rm -rf "$out" && mkdir -p "$out"
"$bin" train "$job" --verify --checkpoint-every 10 --out "$out/one" > /dev/null 2> "$out/one.log"
"$bin" launch --local 3 --respawn-s 1 "$job" --verify --checkpoint-every 10 --out "$out/nodes" > /dev/null 2> "$out/nodes.log"
"$bin" train "$few" --verify --out "$out/few" > /dev/null 2> "$out/few.log"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
for run in ["one", "nodes", "few"]:
    s = json.load(open(f"{out}/{run}/summary.json"))
    assert s["reference_max_rel_diff"] == 0, (run, s["reference_max_rel_diff"])
    assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, (run, s)
    injected = [json.loads(l) for l in open(f"{out}/{run}/metrics.jsonl") if '"injected"' in l]
    if run == "few":
        assert len(injected) == 1 and s["recoveries"] >= 1, (run, injected, s)
        continue
    assert s["faults_injected"] == 7, (run, s["faults_injected"])
    where = sorted(r["detail"].split(" into the ")[1] for r in injected)
    assert where == ["checkpoint", "early", "migration", "replan", "step", "step", "sum"], (run, where)
    steps = [r["step"] for r in injected if r["detail"].endswith("into the step")]
    assert steps[0] == steps[1], (run, steps)  # two kills in one step
print("ok")
PY
