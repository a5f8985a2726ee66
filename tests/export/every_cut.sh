#!/usr/bin/env bash
# Exact whatever the cut and the layout (issue 71): each model of tests/export/cut_patterns.py
# (a transposed view and a channels-last view handed across a cut; a residual that starts at
# the cut, with BatchNorm; pre-norm blocks after a stem holding the top module's parameters; a
# stage without parameters beside tied weights) is cut at every boundary in turn into a
# 2-stage pipeline, and at every boundary at once into a 3-stage one, in one process and over
# node processes (each stage on a node of its own: 2 or 3 node processes), the schedules taken
# in turn. Every run's parameters, buffers
# and optimizer state must be one plain device's, bit for bit (--verify, every replica).
# every_cut.sh DYNAPAR OUT [MODEL...]   (default: every model)
set -euo pipefail
dynapar=$1 out=$2
shift 2
models=("$@")
[ ${#models[@]} -gt 0 ] || models=(twist permuted longskip prenorm paramfree)
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3
mkdir -p "$out" && cd "$out"
export OPENBLAS_NUM_THREADS=1
$py "$here/cut_patterns.py" "$PWD"
schedules=(1f1b gpipe 1f1b-deep)
runs=0
run() {  # NAME SEGMENTS SPLITS DEVICES NODES
  local name=$1 segs=$2 splits=$3 devices=$4 nodes=$5
  local sched=${schedules[$((runs % 3))]}
  runs=$((runs + 1))
  cat > "$name.yaml" <<YAML
name: $name
model: ${name%%_*}.pt
data: synthetic
synthetic_samples: 192
batch: 32
micro_batch: 8
steps: 5
schedule: $sched
optimizer: {kind: sgd, lr: 0.02, momentum: 0.9}
hash_every: 4
devices:
  - {id: 0, speed: 1, memory_gb: 4, node: 0}
  - {id: 1, speed: 1, memory_gb: 4, node: 1}
  - {id: 2, speed: 1, memory_gb: 4, node: 2}
plan:
  - {devices: [$devices], splits: [$splits], share: 32, micro_batch: 8}
YAML
  local how=(train "$name.yaml") rc=0
  [ "$nodes" -gt 0 ] && how=(launch --local "$nodes" "$name.yaml")
  "$dynapar" "${how[@]}" --verify --out "run_$name" > "$name.log" 2>&1 || rc=$?
  if [ "$rc" != 0 ] || ! grep -q "verify ok: the same as one plain device" "$name.log"; then
    echo "FAIL: $name ($sched, splits [$splits], ${nodes} node processes): exit $rc"; tail -20 "$name.log"; exit 1
  fi
  echo "ok: $name ($sched, splits [$splits], $([ "$nodes" -gt 0 ] && echo "$nodes node processes" || echo "one process")): diff 0"
}
for m in "${models[@]}"; do
  case $m in
    twist|permuted) ;;
    *) $py "$here/../../tools/export/dynapar_export.py" "$here/cut_patterns.py:$m" --input 1,28,28 --out "$m.pt" > "$m.export" 2>&1 ||
         { cat "$m.export"; exit 1; } ;;
  esac
  # The views over 2 node processes and 3; the rest over 3 (a third node idle beside the pair).
  pair_nodes=3
  case $m in twist|permuted) pair_nodes=2 ;; esac
  segs=$($py -c 'import sys, torch; print(len(list(torch.jit.load(sys.argv[1]).named_children())))' "$m.pt")
  for ((k = 1; k < segs; k++)); do
    run "${m}_cut$k" "$segs" "0, $k, $segs" "0, 1" 0
    run "${m}_cut${k}_nodes" "$segs" "0, $k, $segs" "0, 1" "$pair_nodes"
  done
  # Three stages: the first two boundaries, then the last two.
  run "${m}_three" "$segs" "0, 1, 2, $segs" "0, 1, 2" 3
  if [ "$segs" -gt 3 ]; then run "${m}_three_late" "$segs" "0, $((segs - 2)), $((segs - 1)), $segs" "0, 1, 2" 3; fi
done
echo "every cut: $runs runs, each the same bits as one plain device"
