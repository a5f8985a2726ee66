#!/usr/bin/env bash
# A job that lists no devices (issue 52; docs/CLUSTERS.md, "Jobs without a device list"):
# `launch --local 2` starts two nodes that describe one device each and are numbered 0 and 1
# from the job's pool; a third node started by hand with `--devices auto` joins mid-run as
# device 2 (the lowest free id) and leaves on SIGTERM. The run must equal one device
# (--verify 0), lose and repeat no sample, and record the join and the leave; the three
# devices, described on one host, share a node in the plans. One process
# (`train`), `bench runtime` and `chaos` refuse such a job, saying why.
# job_without_devices.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
events=$(cd "$(dirname "$0")" && pwd)/plan_events.py
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > job.yaml <<'YAML'
name: nodevices
model: cnn
data: synthetic
synthetic_samples: 512
batch: 64
micro_batch: 8
steps: 100
schedule: 1f1b
optimizer: {kind: adam, lr: 0.002}
policy: joint_lyapunov
replan_every: 5
hash_every: 0
emulate: false
max_devices: 4
YAML
refused() {  # WHAT EXPECTED-TEXT COMMAND...
  local what=$1 text=$2
  shift 2
  if "$@" > /dev/null 2> refused.log; then echo "$what accepted a job without devices"; exit 1; fi
  grep -q "$text" refused.log || { echo "$what: not the expected error:"; cat refused.log; exit 1; }
}
refused train "lists no devices: its nodes describe them as they join, so it runs over nodes" "$bin" train job.yaml --out one
refused "bench runtime" "bench runtime sets the measured step time against the simulated one" "$bin" bench runtime job.yaml --local 1
refused chaos "this job lists none" "$bin" chaos job.yaml --runs 1

port=$((20000 + ($$ % 20000) + 17))
ep="tcp://127.0.0.1:$port"
steps() { [ -f run/metrics.jsonl ] && wc -l < run/metrics.jsonl || echo 0; }
# Waits (up to 120 s) for a plan whose reason says device $2 $1 ("joined" or "leaves";
# tests/cli/plan_events.py).
wait_plan() {
  for _ in $(seq 1200); do
    /usr/bin/python3 "$events" run/plans.jsonl "$1" "$2" && return 0
    sleep 0.1
  done
  echo "no plan with device $2 $1 (the run is at step $(steps))" >&2; return 1
}
"$bin" launch --local 2 --no-keys --bind "$ep" job.yaml --verify --out run > summary.out 2> launch.log &
launch=$!
late=""
trap 'kill $launch $late 2> /dev/null || true' EXIT
for _ in $(seq 1200); do [ "$(steps)" -ge 5 ] && break; sleep 0.1; done
"$bin" node --controller "$ep" --devices auto --name late-node --connect-timeout-s 60 2> late.log &
late=$!
wait_plan joined 2
kill -TERM "$late"
wait "$late"
wait_plan leaves 2
wait "$launch" || { echo "the launch failed:"; tail -n 12 launch.log; exit 1; }
grep -q "waiting for 2 device(s) to join, described by their nodes" launch.log || { echo "launch did not wait for 2 described devices"; exit 1; }
grep -q "node 'late-node' joined with 1 device(s)" launch.log || { echo "late-node did not join:"; grep -i join launch.log; exit 1; }
/usr/bin/python3 - "$(dirname "$events")" <<'PY'
import json, sys
sys.path.insert(0, sys.argv[1])
from plan_events import steps
s = json.load(open("run/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["steps"] == 100 and s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["joins"] == 1 and s["leaves"] == 1, (s["joins"], s["leaves"])
plans = [json.loads(l) for l in open("run/plans.jsonl")]
first = sorted(d for g in plans[0]["plan"]["groups"] for d in g["devices"])
assert first == [0, 1], first  # the local nodes' devices, numbered from the pool's start
joined, left = min(steps(plans, "joined", 2)), min(steps(plans, "leaves", 2))
assert 0 < joined < left < 100, (joined, left)
for p in plans:  # no plan uses device 2 before it joined or after it left
    used = {d for g in p["plan"]["groups"] for d in g["devices"]}
    assert 2 not in used or joined <= p["step"] < left, p["step"]
# All three were described on this host (127.0.0.1): one node in the plans.
reasons = " ".join(p.get("reason", "") for p in plans)
for dev in (0, 1, 2):
    assert f"device {dev} is on node 0" in reasons, (dev, reasons[:600])
print(f"ok: devices 0, 1 from the start, device 2 joined at step {joined} and left at {left}; diff 0")
PY
