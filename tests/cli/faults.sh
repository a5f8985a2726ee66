#!/usr/bin/env bash
# A job's seeded fault plan (faults_short.yaml: a slow-down, a hung device, a cut-off device,
# two kills at random steps), in one process (`train`) or over node processes (`launch
# --local 4 --respawn-s`: a kill takes the node down and it is restarted; a hung or cut-off
# node is declared lost and joins again when it wakes). Every fault is injected and every lost
# device recovered from; the run still equals one device, with no sample lost or applied twice.
# faults.sh DYNAPAR JOB OUT [NODES]
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out"
mkdir -p "$out"
if [ $# -ge 4 ]; then
  "$bin" launch --local "$4" --respawn-s 0.5 "$job" --verify --out "$out/run" > /dev/null 2> "$out/log"
  grep -q "joins again with fresh devices" "$out/log"
  grep -q "restarting crashed node" "$out/log"
else
  "$bin" train "$job" --verify --out "$out/run" > /dev/null 2> "$out/log"
fi
/usr/bin/python3 - "$out/run" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
events = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"event"' in l]
kinds = sorted(e["kind"] for e in events if e["event"] == "injected")
assert kinds == ["kill", "kill", "partition", "pause", "slow"], kinds
assert [e["device"] for e in events if e["event"] == "ended"] == [0], events  # the slow-down ends
lost = [e for e in events if e["event"] == "lost"]
assert len(lost) == 4, lost  # the hung one, the cut-off one, two killed
assert s["faults_injected"] == 5 and s["devices_lost"] == 4 and s["recoveries"] == 4, s
assert s["max_recovery_s"] <= 1.0, s["max_recovery_s"]
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: recoveries", s["recoveries"], "mean", round(s["mean_recovery_s"], 3), "s, max", round(s["max_recovery_s"], 3),
      "s, diff", s["reference_max_rel_diff"])
PY
