#!/usr/bin/env bash
# Nodes that describe themselves (issue 52; docs/CLUSTERS.md): a job whose two devices are a
# pool (4 GB each, as far as the job knows), hosted by one `dynapar node --devices auto:2`.
# Described with 6 MB each (--memory-gb 0.006), neither holds the CNN with its Adam state, so
# the controller must pipeline them in one group; described with this host's memory, it runs
# data parallel. Both runs end equal to one device (--verify 0), nothing lost or repeated.
# node_describes_itself.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > pool.yaml <<'YAML'
name: pool
model: cnn
data: synthetic
synthetic_samples: 512
batch: 64
micro_batch: 8
steps: 6
schedule: 1f1b
optimizer: {kind: adam, lr: 0.002}
policy: joint_lyapunov
replan_every: 3
hash_every: 0
devices:
  - {id: 0, count: 2, speed: 1, node: 0}
YAML
port=$((20000 + ($$ % 20000) + 13))
run() {  # NAME [NODE FLAGS...]
  local name=$1 ctl node
  shift
  "$bin" controller pool.yaml --bind "tcp://127.0.0.1:$port" --no-keys --verify --wait-s 60 --out "$name" > /dev/null 2> "$name.log" &
  ctl=$!
  "$bin" node --controller "tcp://127.0.0.1:$port" --devices auto:2 --name "$name-node" "$@" > /dev/null 2> "$name-node.log" &
  node=$!
  wait "$ctl" || { echo "the controller of run $name failed:"; tail -n 8 "$name.log"; kill -9 "$node" 2> /dev/null; exit 1; }
  wait "$node" || { echo "the node of run $name failed:"; tail -n 8 "$name-node.log"; exit 1; }
  grep -q "node '$name-node' joined with 2 device(s)" "$name.log" || { echo "no join in run $name:"; grep -i join "$name.log"; exit 1; }
}
run small --memory-gb 0.006
run host
/usr/bin/python3 - <<'PY'
import json
for name, pipelined in (("small", True), ("host", False)):
    s = json.load(open(f"{name}/summary.json"))
    assert s["reference_max_rel_diff"] == 0, (name, s["reference_max_rel_diff"])
    assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, (name, s)
    groups = s["final_plan"]["groups"]
    stages = [len(g["devices"]) for g in groups]
    assert sorted(d for g in groups for d in g["devices"]) == [0, 1], (name, groups)
    assert (stages == [2]) == pipelined, (name, "expected a 2-stage pipeline" if pipelined else "expected data parallelism", groups)
    reasons = " ".join(json.loads(l).get("reason", "") for l in open(f"{name}/plans.jsonl"))
    if pipelined:
        assert "device 0 now has 6 MB of memory" in reasons, reasons[:400]
    print(f"ok: {name}: plan {stages}, diff 0")
PY
