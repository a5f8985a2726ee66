#!/usr/bin/env bash
# Many emulated devices on few cores (docs/RUNTIME.md): each computes at a sliver of a core, so
# the run warns at once, naming the share and the fix, instead of printing nothing while the
# first probes sleep. 200 devices on 1 core: 1/200 each. 4 devices on 1 core: no warning.
#   emulate_many.sh DYNAPAR OUT
set -euo pipefail
bin="$1" out="$2"
rm -rf "$out" && mkdir -p "$out"
job() {  # job N: N devices of one speed on one core
  cat <<YAML
name: many
model: mlp
data: synthetic
synthetic_samples: 600
batch: 64
micro_batch: 16
steps: 1
optimizer: {kind: sgd, lr: 0.05}
policy: dp_even
emulate_cores: 1
devices:
  - {id: 0, speed: 1, count: $1, memory_gb: 4, price_per_hour: 1}
YAML
}
job 200 > "$out/many.yaml"
"$bin" train "$out/many.yaml" --out "$out/many" > "$out/many.log" 2>&1 &
run=$!
trap 'kill $run 2>/dev/null || true' EXIT
for _ in $(seq 300); do grep -q "devices emulated on" "$out/many.log" && break; sleep 0.1; done
grep -q "200 devices emulated on 1 cores: the fastest computes at 1/200 of a core.*raise emulate_cores" "$out/many.log" ||
  { echo "no warning for 200 devices on 1 core:"; head -n 5 "$out/many.log"; exit 1; }
job 4 > "$out/few.yaml"
"$bin" train "$out/few.yaml" --out "$out/few" > "$out/few.log" 2>&1
if grep -q "devices emulated on" "$out/few.log"; then echo "4 devices on 1 core warned"; exit 1; fi
echo ok
