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
"$bin/model_tests"
echo "== exact_cnn.yaml's five devices (two groups, pipelines of 2 and 3) all on cuda:0: --verify expects 0"
"$bin/dynapar" train examples/jobs/exact_cnn.yaml --place cuda:0 --verify --out "$out/exact_cnn_gpu"
echo "== the GPU alone"
"$bin/dynapar" train examples/jobs/gpu_alone.yaml --verify --out "$out/gpu_alone"
echo "== one GPU and four CPU devices: joint_lyapunov, then dp_even and dp_balanced on the same devices"
"$bin/dynapar" train examples/jobs/gpu_mixed.yaml --verify --compare dp_even,dp_balanced --out "$out/gpu_mixed"
echo "check.sh: all passed"
