#!/usr/bin/env bash
# Injected crashes (the job's 'fail' events), in one process (`train`) or over node processes
# (`launch --local N`, each device on its own node, a crash kills the node): the run recovers
# from every crash and still equals one device, with no sample lost or applied twice.
# chaos.sh DYNAPAR JOB OUT [NODES]
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out"
if [ $# -ge 4 ]; then
  "$bin" launch --local "$4" "$job" --verify --checkpoint-dir "$out/ck" --checkpoint-every 4 --out "$out/run" > /dev/null 2> "$out.log"
else
  "$bin" train "$job" --verify --checkpoint-dir "$out/ck" --checkpoint-every 4 --out "$out/run" > /dev/null 2> "$out.log"
fi
/usr/bin/python3 - "$out/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["faults_injected"] == 2, s["faults_injected"]
assert s["devices_lost"] >= 2 and s["recoveries"] >= 1, s
assert s["leaves"] == 0, s  # a crash is not a leave
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: recoveries", s["recoveries"], "mean", round(s["mean_recovery_s"], 3), "s, max", round(s["max_recovery_s"], 3),
      "s, diff", s["reference_max_rel_diff"])
PY
