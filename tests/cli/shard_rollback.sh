#!/usr/bin/env bash
# Checkpoints in shards over node processes (issue 50; docs/RELIABILITY.md): a CNN pipelined
# over 2 one-device nodes, checkpoints every 4 steps, an epoch every 10, and the node holding
# the second stage killed in slot 5: its layers have no replica, so the run rolls back to the
# last checkpoint, whose shards the survivor reads itself. Without --verify nothing of the model
# passes through the controller (controller_tensor_bytes 0: no checkpoint, epoch, rollback or
# end gathers a layer); the layers' hashes at the end equal those of the same run with
# --verify, which equals one device. The same without --checkpoint-dir: the rollback points
# are written in shards into OUT/rollback, which is gone once the run ended well. Then the
# run goes on from its last checkpoint on another
# set of nodes (both devices on one node, each layer read from its shard wherever the new plan
# puts it), 4 steps more, and equals one device over all 28 steps.
# shard_rollback.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > roll.yaml <<'YAML'
name: shard_rollback
model: cnn
data: synthetic
synthetic_samples: 1280
batch: 128
micro_batch: 16
steps: 24
optimizer: {kind: adam, lr: 0.002}
policy: pipeline_even
replan_every: 2
hash_every: 4
devices:
  - {id: 0, speed: 1, memory_gb: 4, node: 0}
  - {id: 1, speed: 1, memory_gb: 4, node: 1}
dynamics:
  events:
    - {slot: 5, kind: fail, device: 1}
YAML
"$bin" launch --local 2 roll.yaml --checkpoint-dir ck --checkpoint-every 4 --out a > /dev/null 2> a.log
"$bin" launch --local 2 roll.yaml --checkpoint-dir ck_verify --checkpoint-every 4 --verify --out b > /dev/null 2> b.log
"$bin" launch --local 2 roll.yaml --checkpoint-every 4 --out d > /dev/null 2> d.log
grep -q "rolled back to the last checkpoint" d.log || { cat d.log; echo "FAIL: no rollback without a checkpoint directory"; exit 1; }
[ ! -e d/rollback ] || { echo "FAIL: d/rollback left after a run that ended well"; exit 1; }
grep -q "rolled back to the last checkpoint" a.log || { cat a.log; echo "FAIL: no rollback"; exit 1; }
[ -e ck/step-24/layer-0.pt ] && [ ! -e ck/step-24/layers.pt ] || { ls ck/step-24; echo "FAIL: not in shards"; exit 1; }
/usr/bin/python3 - a/summary.json b/summary.json d/summary.json a/layer_hashes.json b/layer_hashes.json d/layer_hashes.json <<'PY'
import json, sys
a, b, d = (json.load(open(p)) for p in sys.argv[1:4])
for s in (a, b, d):
    assert s["recoveries"] == 1 and s["devices_lost"] == 1 and s["checkpoints"] >= 5, s
    assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
for s in (a, d):
    assert s["controller_tensor_bytes"] == 0, s["controller_tensor_bytes_by_kind"]
assert b["reference_max_rel_diff"] == 0, b["reference_max_rel_diff"]
ha, hb, hd = (json.load(open(p)) for p in sys.argv[4:7])
assert ha == hb == hd, (ha, hb, hd)
print("ok: rolled back from shards over nodes; controller_tensor_bytes 0; hashes equal the --verify run's (diff 0)")
PY
"$bin" launch --local 1 roll.yaml --resume ck --steps 28 --verify --out c > /dev/null 2> c.log
/usr/bin/python3 - c/summary.json <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["resumed_from_step"] == 24 and s["steps"] == 28, s
assert s["reference_max_rel_diff"] == 0 and s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: resumed from the shards on one node instead of two (diff 0 over 28 steps)")
PY
