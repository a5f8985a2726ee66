#!/usr/bin/env bash
# `dynapar launch --local 3` over node processes while they come and go: a fourth node joins
# during the run (device 3), device 1 is then retired with `dynapar node --leave`, and then the
# fourth node leaves on SIGTERM. The run must still equal one device (--verify), lose no sample, and no plan may use
# a device before its node joined or after it left.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000)))
ep="tcp://127.0.0.1:$port"
steps() { [ -f "$out/run/metrics.jsonl" ] && wc -l < "$out/run/metrics.jsonl" || echo 0; }
# Waits (up to 120 s) until a plan's reason says device $2 $1 ("joined" or "leaves"): each
# change is made only once the previous one has taken effect (tests/cli/plan_events.py).
events=$(cd "$(dirname "$0")" && pwd)/plan_events.py
wait_plan() {
  for _ in $(seq 1200); do
    /usr/bin/python3 "$events" "$out/run/plans.jsonl" "$1" "$2" && return 0
    sleep 0.1
  done
  echo "no plan with device $2 $1 (the run is at step $(steps))" >&2; return 1
}
# 120 of the job's 300 steps: the three changes took effect by step 24 here (2026-11-24);
# what is checked is that they happen in order and the run still equals one device.
"$bin" launch --local 3 --devices 0,1,2 --min-devices 3 --bind "$ep" "$job" --steps 120 --verify --out "$out/run" > "$out/summary.out" 2> "$out/launch.log" &
launch=$!
node3=""
trap 'kill $launch $node3 2>/dev/null || true' EXIT
for _ in $(seq 1200); do [ "$(steps)" -ge 4 ] && break; sleep 0.1; done
# launch serves CURVE with throwaway keys in OUT/keys: a later node proves its device's key.
"$bin" node --controller "$ep" --keys "$out/run/keys" --device 3 --name late-node --connect-timeout-s 60 2> "$out/node3.log" &
node3=$!
wait_plan joined 3
"$bin" node --controller "$ep" --keys "$out/run/keys-operator" --leave --device 1
wait_plan leaves 1
kill -TERM "$node3"
wait "$node3"
wait "$launch"
# Each node launch started proved a key of its own (node-0, -1, -2: no node can speak for
# another); the node started by hand, the key of its device (device-3), not a shared one.
for k in node-0 node-1 node-2; do
  [ "$(grep -c "joined with .*, key node:$k\$" "$out/launch.log")" = 1 ] || { echo "no node joined with key $k:"; grep "joined" "$out/launch.log"; exit 1; }
done
grep -q "'late-node' joined with 1 device(s), key node:device-3\$" "$out/launch.log" || { echo "late-node did not prove device-3.key"; exit 1; }
/usr/bin/python3 - "$out/run" "$(dirname "$0")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[2])
from plan_events import steps
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["joins"] == 1 and s["leaves"] == 2, s
plans = [json.loads(l) for l in open(d + "/plans.jsonl")]
used = lambda p, dev: any(dev in g["devices"] for g in p["plan"]["groups"])
joined3, left1, left3 = steps(plans, "joined", 3), steps(plans, "leaves", 1), steps(plans, "leaves", 3)
assert joined3 and left1 and left3, plans
assert 0 < joined3[0] < left1[0] < left3[0] < s["steps"], (joined3, left1, left3)
for p in plans:
    if p["step"] < joined3[0] or p["step"] >= left3[0]:
        assert not used(p, 3), p
    if p["step"] >= left1[0]:
        assert not used(p, 1), p
print("ok: diff", s["reference_max_rel_diff"], "joins", s["joins"], "leaves", s["leaves"], "replans", s["replans"])
PY
