#!/usr/bin/env bash
# `dynapar inject` against a running `dynapar launch`: a device that is not in the run and a
# fault kind not built yet are refused with the reason (exit 1); `inject kill` kills device
# 1's node process, and the run recovers and still equals one device.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000)))
ep="tcp://127.0.0.1:$port"
"$bin" launch --local 3 --devices 0,1,2 --min-devices 3 --bind "$ep" "$job" --verify --out "$out/run" > /dev/null 2> "$out/launch.log" &
launch=$!
trap 'kill $launch 2>/dev/null || true' EXIT
steps() { [ -f "$out/run/metrics.jsonl" ] && wc -l < "$out/run/metrics.jsonl" || echo 0; }
for _ in $(seq 1200); do [ "$(steps)" -ge 10 ] && break; sleep 0.1; done
"$(dirname "$0")/expect_exit.sh" 1 "$bin" inject kill --controller "$ep" --device 9 | grep -q "device 9 is not in the run"
"$(dirname "$0")/expect_exit.sh" 1 "$bin" inject slow --controller "$ep" --device 0 --factor 0.5 | grep -q "only kill and leave"
"$bin" inject kill --controller "$ep" --device 1
wait "$launch"
/usr/bin/python3 - "$out/run/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["devices_lost"] == 1 and s["recoveries"] == 1 and s["leaves"] == 0, s
assert s["reference_max_rel_diff"] <= 1e-4, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: recovered in", round(s["max_recovery_s"], 3), "s, diff", s["reference_max_rel_diff"])
PY
