#!/usr/bin/env bash
# docs/BENCHMARKS.md, "Processes": side by side in one run, in alternating rounds,
#  - the same plan in one process (dynapar train) and in 3 processes (dynapar launch --local 3);
#  - dynapar over 3 processes against PyTorch DDP (Gloo, 3 processes, tools/bench/ddp_peer.py)
#    on the same CNN, batch and optimizer: homogeneous, and with one process at 1/4 speed.
# Step times are means over steps 10.. of each run (the first steps warm up).
# Usage: tools/bench/ddp_compare.sh [ROUNDS] [OUT] [MODEL] [STEPS]   (from the repository root,
# after a build; DYNAPAR_BIN names another binary). MODEL: cnn (default) or resnet18 (45 MB of
# parameters; fewer STEPS suit it).
set -euo pipefail
rounds=${1:-3}
out=${2:-out/bench_ddp}
model=${3:-cnn}
steps=${4:-200}
bin=${DYNAPAR_BIN:-build/bin/dynapar}  # another build for A/B runs
mkdir -p "$out"
layers=$([[ $model == resnet18 ]] && echo 10 || echo 4)
# The two jobs for this model and length (the files are the CNN's).
for j in ddp3 ddp3_slow; do
  sed -e "s/^model: cnn/model: $model/" -e "s/^steps: 200/steps: $steps/" -e "s/splits: \[0, 4\]/splits: [0, $layers]/" \
    "examples/jobs/bench/$j.yaml" > "$out/$j.yaml"
done
export OPENBLAS_NUM_THREADS=1
# DDP's side is Debian's PyTorch: without it every DDP row would be empty.
/usr/bin/python3 -c 'import torch' 2> /dev/null ||
  { echo "ddp_compare: /usr/bin/python3 cannot import torch: apt-get install python3-torch" >&2; exit 2; }
steady() {  # mean time_s of metrics.jsonl from step 10
  /usr/bin/python3 -c '
import json, sys
t = [json.loads(l)["time_s"] for l in open(sys.argv[1])][10:]
print(sum(t) / len(t))' "$1/metrics.jsonl"
}
ddp() { /usr/bin/python3 tools/bench/ddp_peer.py --procs 3 --batch 96 --model "$model" --steps "$steps" "$@" 2>/dev/null |
        /usr/bin/python3 -c 'import json, sys; print(json.loads(sys.stdin.readlines()[-1])["mean_step_s"])'; }
: > "$out/rows.txt"
for r in $(seq "$rounds"); do
  "$bin" train "$out/ddp3.yaml" --out "$out/one" > /dev/null 2>&1
  "$bin" launch --local 3 --no-keys "$out/ddp3.yaml" --out "$out/three" > /dev/null 2>&1
  "$bin" launch --local 3 --no-keys "$out/ddp3_slow.yaml" --out "$out/slow" > /dev/null 2>&1
  echo "$r one_process $(steady "$out/one")" >> "$out/rows.txt"
  echo "$r three_processes $(steady "$out/three")" >> "$out/rows.txt"
  echo "$r ddp $(ddp)" >> "$out/rows.txt"
  echo "$r dynapar_slow $(steady "$out/slow")" >> "$out/rows.txt"
  echo "$r ddp_slow $(ddp --slow 2:0.25)" >> "$out/rows.txt"
done
/usr/bin/python3 - "$out/rows.txt" <<'PY'
import collections, statistics, sys
rows = collections.defaultdict(list)
for line in open(sys.argv[1]):
    _, k, v = line.split()
    rows[k].append(float(v))
m = {k: statistics.median(v) for k, v in rows.items()}
for k in ["one_process", "three_processes", "ddp", "dynapar_slow", "ddp_slow"]:
    print(f"{k:16s} median step {m[k] * 1e3:7.1f} ms  runs " + ", ".join(f"{v * 1e3:.1f}" for v in rows[k]))
print(f"3 processes / 1 process, same plan (step time): {m['three_processes'] / m['one_process']:.3f}")
print(f"throughput dynapar / DDP, homogeneous:           {m['ddp'] / m['three_processes']:.3f}")
print(f"throughput dynapar / DDP, one process at 1/4:    {m['ddp_slow'] / m['dynapar_slow']:.3f}")
PY
