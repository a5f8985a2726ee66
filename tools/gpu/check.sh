#!/usr/bin/env bash
# There (the device machine): builds dynapar against the GPU LibTorch (tools/gpu/build.sh),
# runs the model tests with their [gpu] cases, and trains a GPU-only and a GPU+CPU job end to
# end with --verify. Exits non-zero on the first failure. Logs and run directories go to
# OUT_DIR (default out/gpu).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
out=${OUT_DIR:-out/gpu}
mkdir -p "$out"
tools/gpu/build.sh dynapar model_tests
source tools/gpu/env.sh
bin=${BUILD:-build-gpu}/bin
nvidia-smi -L
echo "== model tests (their [gpu] cases on the GPU)"
"$bin/model_tests" --success --reporter compact | grep -E "warning|failed|passed|skipped" | tail -20
"$bin/model_tests"
echo "== the GPU alone: two device actors on cuda:0, --verify expects 0"
"$bin/dynapar" train examples/jobs/gpu_alone.yaml --verify --out "$out/gpu_alone"
echo "== one GPU and four CPU devices, joint_lyapunov against dp_even"
"$bin/dynapar" train examples/jobs/gpu_mixed.yaml --verify --compare dp_even --out "$out/gpu_mixed"
echo "check.sh: all passed"
