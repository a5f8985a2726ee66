#!/usr/bin/env bash
# Nodes build only the layers they hold (issue 50; docs/DISTRIBUTED.md): the `wide` MLP (37.5 M
# parameters, 150 MB) pipelined over 4 one-device nodes, each layer built by its node from the
# job's seed, with `--verify` 0 and no layer sent by the controller. The node holding only the
# last layer (fc4, 41 k parameters) peaks within 60 MB of a node of the one-layer `linear`
# model: it never built the other 150 MB. (60: a BLAS thread's buffer, 32 MB, comes and goes
# with the threads that ran a product.) (Each node logs its peak resident memory at exit, and
# its heartbeats carry it to summary.json's node_peak_rss_mb.) The controller gathers the
# trained layers at the end only for --verify (with their optimizer state); otherwise each
# holder hashes its layer where it is.
# node_layers.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > wide.yaml <<'YAML'
name: wide_pipeline4
model: wide
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
sed 's/^model: wide/model: linear/; s/^name: .*/name: linear4/' wide.yaml > linear.yaml
"$bin" launch --local 4 wide.yaml --verify --out wide > wide.log 2>&1 || { tail -20 wide.log; exit 1; }
"$bin" launch --local 4 linear.yaml --out linear > linear.log 2>&1 || { tail -20 linear.log; exit 1; }
# Adam's moments in files (--offload-optimizer, which the nodes inherit): every layer's whole
# state (moments included) bit for bit that of the run above, which kept them in memory.
mkdir -p adam
"$bin" --offload-optimizer "$PWD/adam" launch --local 4 wide.yaml --verify-against wide --out offload > offload.log 2>&1 || { tail -20 offload.log; exit 1; }
[[ $(grep -c "Adam's moments kept in files in '$PWD/adam'" offload.log) == 4 ]] || { grep "Adam's" offload.log; echo "not every node kept its moments in files"; exit 1; }
[[ -z $(ls -A adam) ]] || { ls -la adam; echo "the moments' files outlived their processes"; exit 1; }
"$bin" --offload-optimizer "$PWD/no-such-dir" launch --local 4 wide.yaml --out refused > refused.log 2>&1 && { echo "a missing directory was taken"; exit 1; }
grep -q "no-such-dir' is not a directory" refused.log || { cat refused.log; exit 1; }
"$bin" launch --local 4 linear.yaml --verify --out linear_verify > linear_verify.log 2>&1 || { tail -20 linear_verify.log; exit 1; }
/usr/bin/python3 - <<'PY'
import json, re
s = json.load(open("wide/summary.json"))
assert s["reference_max_rel_diff"] == 0 and s["controller_tensor_bytes_by_kind"]["sent"] == 0, s
plan = s["final_plan"]["groups"]
assert len(plan) == 1 and len(plan[0]["devices"]) == 4, plan
last_device = plan[0]["devices"][-1]
assert plan[0]["splits"][-2] == 3, plan  # the last stage holds fc4 alone
peak = lambda log: {m.group(1): float(m.group(2)) for m in re.finditer(r"node '([^']+)': all devices retired \(peak memory ([0-9.]+) MB", open(log).read())}
wide, linear = peak("wide.log"), peak("linear.log")
assert len(wide) == 4 and len(linear) == 4, (wide, linear)
# launch --local 4 gives device i to node-i.
holder = wide["node-%d" % last_device]
base = max(linear.values())
assert holder < base + 60, ("the last stage's node built more than its layer", holder, base)
# The controller's summary has each node's peak as its heartbeats said: the node's own figure at
# exit within 2 % (the kernel's high-water mark lags; the log rounds), past the process's
# start-up (LibTorch alone is over 100 MB).
said = s["node_peak_rss_mb"]
assert sorted(said) == sorted(wide), (said, wide)
assert all(100 < said[n] and abs(said[n] - wide[n]) <= 0.02 * wide[n] for n in said), (said, wide)
# What the controller gathered at the end, by hand: with --verify every layer with its Adam
# state (parameters and both moments); without it (the linear run) nothing: the devices
# evaluated the test set, and each holder hashed its layer's whole state where it is.
params = lambda sizes: 4 * sum(a * b + b for a, b in zip(sizes, sizes[1:]))
wide_bytes, linear_bytes = params([784, 4096, 4096, 4096, 10]), params([784, 10])
assert s["controller_tensor_bytes_by_kind"]["gathered"] == 3 * wide_bytes, (s["controller_tensor_bytes_by_kind"], wide_bytes)
lin = json.load(open("linear/summary.json"))
assert lin["controller_tensor_bytes_by_kind"]["gathered"] == 0, lin["controller_tensor_bytes_by_kind"]
assert 0 < lin["final_test_accuracy"] <= 1, lin
# Those hashes are what the same run with --verify hashed here from whole copies.
hashes = lambda run: json.load(open(run + "/layer_hashes.json"))["layers"]
assert len(hashes("linear")) == 1 and hashes("linear") == hashes("linear_verify"), (hashes("linear"), hashes("linear_verify"))
print("ok: the node holding fc4 peaked at %.1f MB, a linear model's at %.1f; the others %s" % (holder, base, sorted(wide.values())))
PY
