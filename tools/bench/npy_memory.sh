#!/usr/bin/env bash
# Peak memory of a node process training on a 1 GB .npy data set against the same node on a
# 1000-sample one (issue 48; docs/BENCHMARKS.md, "Your own data: memory"): the data set is
# memory-mapped and each node reads only its devices' samples, so the difference should be
# far below the file's size. A controller and two `dynapar node` processes (one device each)
# on this machine, each node under /usr/bin/time -v (its maximum resident set). KIND=torch:
# the same arrays saved by torch.save (data kind torch, mapped the same way).
#   [KIND=npy|torch] tools/bench/npy_memory.sh [OUT_DIR] [STEPS]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
dynapar=${DYNAPAR:-$src/build/bin/dynapar}
out=$(mkdir -p "${1:-/tmp/dynapar_npy_memory}" && cd "${1:-/tmp/dynapar_npy_memory}" && pwd)
steps=${2:-40}
kind=${KIND:-npy}
py=/usr/bin/python3
mkdir -p "$out" && cd "$out"
export OPENBLAS_NUM_THREADS=1
$py - <<'PY'
import os
import numpy as np
rng = np.random.default_rng(1)
for name, n in (("big", 87382), ("small", 1000)):  # 87382 x 3 x 32 x 32 float32: 1.07 GB
    os.makedirs(name, exist_ok=True)
    if os.path.exists(f"{name}/train_labels.npy") and np.load(f"{name}/train_labels.npy", mmap_mode="r").shape == (n,):
        continue
    x = np.lib.format.open_memmap(f"{name}/train_inputs.npy", mode="w+", dtype=np.float32, shape=(n, 3, 32, 32))
    for lo in range(0, n, 8192):
        hi = min(n, lo + 8192)
        x[lo:hi] = rng.standard_normal((hi - lo, 3, 32, 32), dtype=np.float32)
    x.flush()
    np.save(f"{name}/train_labels.npy", rng.integers(0, 10, n).astype(np.int64))
PY
if [ "$kind" = torch ]; then
  for name in small big; do
    [ -f torch_$name/train.pt ] && continue
    mkdir -p torch_$name
    $py -c "import sys, numpy as np, torch; d = sys.argv[1]; torch.save((torch.from_numpy(np.load(d + '/train_inputs.npy')), torch.from_numpy(np.load(d + '/train_labels.npy'))), 'torch_' + d + '/train.pt')" $name
  done
fi
cat > net.py <<'PY'
import torch.nn as nn
def make_net():
    return nn.Sequential(nn.Conv2d(3, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2), nn.Flatten(),
                         nn.Linear(16 * 16 * 16, 64), nn.ReLU(), nn.Linear(64, 10))
PY
$py "$src/tools/export/dynapar_export.py" net.py:make_net --input 3,32,32 --out net.pt > /dev/null 2>&1
for data in small big; do
  cat > $data.yaml <<YAML
name: npy_memory_$data
model: net.pt
data: {kind: $kind, path: $([ "$kind" = torch ] && echo torch_$data || echo $data), val_share: 0.01}
batch: 64
micro_batch: 16
steps: $steps
optimizer: {kind: adam, lr: 0.001}
policy: dp_even
emulate: false
devices:
  - {id: 0, speed: 1, memory_gb: 4, node: 0}
  - {id: 1, speed: 1, memory_gb: 4, node: 1}
YAML
  port=$((20000 + RANDOM % 20000))
  rm -rf ctl_$data
  "$dynapar" controller $data.yaml --bind tcp://127.0.0.1:$port --out ctl_$data > ctl_$data.out 2> ctl_$data.log &
  ctl=$!
  for _ in $(seq 100); do [ -f ctl_$data/keys/controller.key ] && break; sleep 0.1; done
  for dev in 0 1; do
    /usr/bin/time -v -o node_${data}_$dev.time "$dynapar" node --controller tcp://127.0.0.1:$port --keys ctl_$data/keys --device $dev --data-dir "$out" \
      > /dev/null 2> node_${data}_$dev.log &
  done
  wait $ctl
  wait
  for dev in 0 1; do
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' node_${data}_$dev.time)
    reads=$(grep -o "read [0-9]* samples of the job's [0-9]*" node_${data}_$dev.log || echo "read ? samples")
    echo "$data device $dev: peak RSS $((kb / 1024)) MiB ($reads)"
    echo "$data $dev $kb" >> peaks.txt
  done
done
$py - <<'PY'
rows = [l.split() for l in open("peaks.txt")][-4:]
peak = {(d, int(dev)): int(kb) / 1024 for d, dev, kb in rows}
for dev in (0, 1):
    print(f"device {dev}: 1.07 GB data set {peak[('big', dev)]:.0f} MiB, 1000 samples {peak[('small', dev)]:.0f} MiB, "
          f"difference {peak[('big', dev)] - peak[('small', dev)]:.0f} MiB")
PY
