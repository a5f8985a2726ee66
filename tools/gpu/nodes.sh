#!/usr/bin/env bash
# There (the device machine), after tools/gpu/build.sh: gpu_mixed.yaml over three processes
# on loopback: a controller, a node hosting device 0 on cuda:0 (`dynapar node --place`), and a
# CPU node hosting devices 1-4. Checks that each run ends and that --verify stays within the
# job's tolerance. POLICIES (default: the job's own, then pipeline_even and dp_even, which make
# the CPU devices take part: activations and gradients cross between the GPU and CPU node)
# picks the runs; STEPS (default 20) their length: rounding between the CPU and GPU grows with
# the steps (docs/GPU.md), past the job's tolerance after about 30. Logs go to OUT_DIR.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
source tools/gpu/env.sh
out=${OUT_DIR:-out/gpu}
bin=${BUILD:-build-gpu}/bin
mkdir -p "$out"
port=${PORT:-5761}
rc=0
for policy in ${POLICIES:-joint_lyapunov pipeline_even dp_even}; do
  port=$((port + 1))
  addr=tcp://127.0.0.1:$port
  job=$out/gpu_mixed_$policy.yaml
  sed "s/^policy: .*/policy: $policy/; s/^steps: .*/steps: ${STEPS:-20}/" examples/jobs/gpu_mixed.yaml > "$job"
  echo "== $policy: controller at $addr; node A: device 0 on cuda:0; node B: devices 1-4 on the CPU"
  "$bin/dynapar" controller "$job" --bind "$addr" --verify --out "$out/nodes_$policy" > "$out/nodes_$policy.log" 2>&1 &
  ctl=$!
  sleep 1  # its throwaway keys are in OUT/keys by then
  keys=$out/nodes_$policy/keys
  "$bin/dynapar" node --controller "$addr" --keys "$keys" --place cuda:0 --device 0:h100 > "$out/nodes_${policy}_gpu.log" 2>&1 &
  gpu=$!
  "$bin/dynapar" node --controller "$addr" --keys "$keys" --device 1 --device 2 --device 3 --device 4 > "$out/nodes_${policy}_cpu.log" 2>&1 &
  cpu=$!
  wait $ctl || rc=$?
  wait $gpu || rc=$((rc ? rc : $?))
  wait $cpu || rc=$((rc ? rc : $?))
  tail -n 9 "$out/nodes_$policy.log"
  echo "-- GPU node: $(tail -n 1 "$out/nodes_${policy}_gpu.log")"
  echo "-- CPU node: $(tail -n 1 "$out/nodes_${policy}_cpu.log")"
done
echo "nodes.sh: exit $rc"
exit $rc
