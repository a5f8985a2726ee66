#!/usr/bin/env bash
# Nodes build only the layers they hold (issue 50; docs/DISTRIBUTED.md): VGG (12.3 M
# parameters, 49 MB) pipelined over 4 one-device nodes, each layer built by its node from the
# job's seed, with `--verify` 0 and no layer sent by the controller. The node holding only the
# last layer (fc3, 15 k parameters) peaks within 20 MB of a node of the one-layer `linear`
# model: it never built the other 49 MB. (Each node logs its peak resident memory at exit.)
# node_layers.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > vgg.yaml <<'YAML'
name: vgg_pipeline4
model: vgg
data: synthetic
synthetic_samples: 2000
batch: 32
micro_batch: 8
steps: 4
optimizer: {kind: adam, lr: 0.001}
policy: pipeline_even
hash_every: 0
emulate: false
devices:
  - {id: 0, count: 4, speed: 1, memory_gb: 4}
YAML
sed 's/^model: vgg/model: linear/; s/^name: .*/name: linear4/' vgg.yaml > linear.yaml
"$bin" launch --local 4 vgg.yaml --verify --out vgg > vgg.log 2>&1 || { tail -20 vgg.log; exit 1; }
"$bin" launch --local 4 linear.yaml --out linear > linear.log 2>&1 || { tail -20 linear.log; exit 1; }
/usr/bin/python3 - <<'PY'
import json, re
s = json.load(open("vgg/summary.json"))
assert s["reference_max_rel_diff"] == 0 and s["controller_tensor_bytes_by_kind"]["sent"] == 0, s
plan = s["final_plan"]["groups"]
assert len(plan) == 1 and len(plan[0]["devices"]) == 4, plan
last_device = plan[0]["devices"][-1]
assert plan[0]["splits"][-2] == 4, plan  # the last stage holds fc3 alone
peak = lambda log: {m.group(1): float(m.group(2)) for m in re.finditer(r"node '([^']+)': all devices retired \(peak memory ([0-9.]+) MB\)", open(log).read())}
vgg, linear = peak("vgg.log"), peak("linear.log")
assert len(vgg) == 4 and len(linear) == 4, (vgg, linear)
# launch --local 4 gives device i to node-i.
holder = vgg["node-%d" % last_device]
base = max(linear.values())
assert holder < base + 20, ("the last stage's node built more than its layer", holder, base)
print("ok: the node holding fc3 peaked at %.1f MB, a linear model's at %.1f; the others %s" % (holder, base, sorted(vgg.values())))
PY
