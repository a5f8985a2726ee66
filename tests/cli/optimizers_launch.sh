#!/usr/bin/env bash
# AdamW and Nesterov's SGD over node processes: the hetero job (a join, a slow-down, a leave,
# re-plans that move layers with their optimizer state between nodes) with each optimizer
# must equal one device (--verify, train_hetero.sh's checks), and layers must have moved.
# optimizers_launch.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$1 job=$2 out=$3
here=$(dirname "$0")
rm -rf "$out" && mkdir -p "$out"
for opt in "{kind: adamw, lr: 0.002}" "{kind: sgd, lr: 0.02, momentum: 0.9, nesterov: true, weight_decay: 0.0001}"; do
  name=$(echo "$opt" | tr -dc 'a-z' | head -c 12)
  sed "s/^optimizer:.*/optimizer: $opt/" "$job" > "$out/$name.yaml"
  grep -q "nesterov\|adamw" "$out/$name.yaml"
  "$here/train_hetero.sh" "$bin" "$out/$name.yaml" "$out/$name" 3
  /usr/bin/python3 -c "import json,sys; s=json.load(open(sys.argv[1])); assert s['layers_moved'] > 0, s" "$out/$name/summary.json"
done
