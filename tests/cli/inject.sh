#!/usr/bin/env bash
# `dynapar inject` against a running `dynapar launch` (3 nodes, one device each):
# - refused with the reason (exit 1): a device not in the run, `join` (nodes join by
#   starting), a partition between two devices (--peer); launch serves CURVE with throwaway
#   keys in OUT/keys, so a client without keys and one with a node's key (not an operator's)
#   are refused too, and what they asked for does not happen;
# - carried out: device 0 slowed for 5 steps; device 2's node hung for 4 s (longer than the
#   node-loss allowance: it is lost, recovered from, and joins again when it wakes); then device
#   1's node killed.
# The run recovers from both losses and still equals one device.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000)))
ep="tcp://127.0.0.1:$port"
# 450 steps: each `dynapar` process takes 2-3 s to start on a loaded 2-core machine
# (LibTorch), and the run must still be going when the last fault is injected (with the job's
# 300 it once was not: the refusals took 20 s, the slow-down landed at step 242).
"$bin" launch --local 3 --devices 0,1,2 --min-devices 3 --bind "$ep" "$job" --steps 450 --verify --out "$out/run" > /dev/null 2> "$out/launch.log" &
launch=$!
trap 'kill $launch 2>/dev/null || true' EXIT
count() { if [ -f "$out/run/metrics.jsonl" ]; then grep -c "$1" "$out/run/metrics.jsonl" || true; else echo 0; fi; }
# The refusals first, while the run starts: they need only the controller and its keys.
for _ in $(seq 600); do grep -q "listening on" "$out/launch.log" 2> /dev/null && [ -f "$out/run/keys/controller.pub" ] && break; sleep 0.05; done
x="$(dirname "$0")/expect_exit.sh"
"$x" 1 "$bin" inject kill --controller "$ep" --device 0 | grep -q "the controller speaks CURVE and this client does not"
"$x" 1 "$bin" inject kill --controller "$ep" --device 0 --keys "$out/run/keys" --key-name node-0 | grep -q "needs an operator key"
k=(--keys "$out/run/keys-operator")  # the operator's throwaway key, apart from the nodes'
"$x" 1 "$bin" inject kill --controller "$ep" --device 9 "${k[@]}" | grep -q "device 9 is not in the run"
"$x" 1 "$bin" inject join --controller "$ep" "${k[@]}" --device 3 | grep -q "a device joins when a node hosting it starts"
"$x" 1 "$bin" inject partition --controller "$ep" "${k[@]}" --device 0 --peer 1 --seconds 3 | grep -q "peer is not supported"
"$x" 2 "$bin" inject pause --controller "$ep" "${k[@]}" --device 0 | grep -q "durationS"
for _ in $(seq 1200); do [ "$(count '"loss"')" -ge 10 ] && break; sleep 0.1; done
"$bin" inject slow --controller "$ep" "${k[@]}" --device 0 --factor 0.5 --steps 5
"$bin" inject pause --controller "$ep" "${k[@]}" --device 2 --seconds 4
for _ in $(seq 600); do [ "$(count '"recovered"')" -ge 1 ] && break; sleep 0.1; done
"$bin" inject kill --controller "$ep" "${k[@]}" --device 1
wait "$launch"
grep -q "node 'node-2' joins again" "$out/launch.log"
/usr/bin/python3 - "$out/run" <<'PY'
import json, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
events = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"event"' in l]
injected = sorted((e["kind"], e["device"]) for e in events if e["event"] == "injected" and e["source"] == "inject")
assert injected == [("kill", 1), ("pause", 2), ("slow", 0)], injected
lost = sorted(e["device"] for e in events if e["event"] == "lost")
assert lost == [1, 2], lost
assert s["faults_injected"] == 3 and s["devices_lost"] == 2 and s["recoveries"] >= 1 and s["leaves"] == 0, s
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: recoveries", s["recoveries"], "max", round(s["max_recovery_s"], 3), "s, diff", s["reference_max_rel_diff"])
PY
