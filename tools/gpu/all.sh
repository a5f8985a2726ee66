#!/usr/bin/env bash
# There (the device machine), with .gpu-kit carried: every GPU check in one run, for a lease
# that has minutes, not hours. Builds (tools/gpu/build.sh), then check.sh (the [gpu] tests and
# the --verify runs), nodes.sh (a GPU node and a CPU node under one controller), and
# `bench train` against plain LibTorch on the GPU. Each part keeps going after a failure of
# another and has its own log in LOGS (default out/gpu); the last line names what failed.
# RUNS (default out/gpu/runs) holds the training runs' directories.
#   tools/gpu/all.sh
set -uo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
cd "$here"
logs=${LOGS:-out/gpu}
mkdir -p "$logs"
failed=()
part() {  # part NAME SECONDS COMMAND...: runs COMMAND under a time limit, its output in LOGS/NAME.log
  local name=$1 limit=$2
  shift 2
  local t0=$SECONDS
  timeout "$limit" "$@" > "$logs/$name.log" 2>&1
  local rc=$?
  echo "all.sh: $name exit $rc after $((SECONDS - t0)) s"
  ((rc == 0)) || failed+=("$name")
  return $rc
}
nvidia-smi -L
part build 420 tools/gpu/build.sh dynapar model_tests || { grep -E "error|Error" "$logs/build.log" | head -n 60; echo "all.sh: failed: build"; exit 1; }
export OUT_DIR=${RUNS:-out/gpu/runs}  # the runs' own directories
part check 240 tools/gpu/check.sh
part nodes 150 tools/gpu/nodes.sh
source tools/gpu/env.sh
bench() { "${BUILD:-build-gpu}/bin/dynapar" bench train --place cuda:0 --steps 40 --micro-batches 4 "$@"; }
part bench 180 bash -c "$(declare -f bench); set -e
  for args in '--model vgg --batch 256' '--model vgg --batch 1024' '--model cnn --batch 512'; do
    echo \"== bench train \$args\"; bench \$args; done"
for f in check nodes bench; do echo "---- $f (tail)"; tail -n 25 "$logs/$f.log"; done
echo "all.sh: failed: ${failed[*]:-none}"
((${#failed[@]} == 0))
