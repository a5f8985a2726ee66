#!/usr/bin/env bash
# A node process killed with SIGKILL mid-run: the controller notices the silence within its
# node timeout (2 s), declares the node lost (naming it), re-plans without its device and
# re-runs the step: the run finishes equal to one device, with no sample lost or applied
# twice, and nothing waits for the 120 s step timeout.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000)))
ep="tcp://127.0.0.1:$port"
# 120 of the job's 300 steps: the victim is in a plan within about 20, and the run after
# its loss is what is checked.
"$bin" launch --local 2 --devices 0,1 --min-devices 2 --bind "$ep" "$job" --steps 120 --verify --out "$out/run" > /dev/null 2> "$out/launch.log" &
launch=$!
# launch serves CURVE with throwaway keys in OUT/keys, written before it listens.
for _ in $(seq 600); do grep -q "listening on" "$out/launch.log" 2>/dev/null && break; sleep 0.1; done
"$bin" node --controller "$ep" --keys "$out/run/keys" --device 2 --name victim --connect-timeout-s 60 2> "$out/victim.log" &
victim=$!
trap 'kill $launch $victim 2>/dev/null || true' EXIT
# Until the victim's device is in a plan.
for _ in $(seq 1200); do
  [ -f "$out/run/plans.jsonl" ] && grep -q '"devices":\[2\]' "$out/run/plans.jsonl" && break
  sleep 0.1
done
grep -q '"devices":\[2\]' "$out/run/plans.jsonl"
kill -KILL "$victim"
rc=0
wait "$launch" || rc=$?
[ "$rc" -eq 0 ]
grep -q "node 'victim' lost" "$out/launch.log"
/usr/bin/python3 - "$out/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["devices_lost"] == 1 and s["recoveries"] == 1, s
assert s["max_recovery_s"] < 5, s["max_recovery_s"]
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: recovered in", round(s["max_recovery_s"], 3), "s, diff", s["reference_max_rel_diff"])
PY
