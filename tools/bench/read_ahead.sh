#!/usr/bin/env bash
# Read-ahead against none (issue 74; docs/BENCHMARKS.md, "Your own data"): the same one-process
# run over a folder of generated 256 x 256 JPEGs (grey, resized to 28 x 28, crops and flips), with
# data.read_ahead 2 (the next step's images decoded while a step runs) and 0, in ROUNDS
# alternating pairs: each pair's ratio of mean step times, and each run's data_wait_s (seconds
# reads spent decoding or waiting) and samples_read_ahead, from its summary.json.
#   tools/bench/read_ahead.sh [OUT_DIR] [ROUNDS] [IMAGES]
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
dynapar=${DYNAPAR:-$src/build/bin/dynapar}
out=$(mkdir -p "${1:-/tmp/dynapar_read_ahead}" && cd "${1:-/tmp/dynapar_read_ahead}" && pwd)
rounds=${2:-3} images=${3:-3000}
export OPENBLAS_NUM_THREADS=1
cd "$out"
if [[ ! -f jpegs/done ]]; then  # each class a colour, noise on it
  /usr/bin/python3 - "$out/jpegs" "$images" <<'PY'
import os, random, sys
from PIL import Image
root, n = sys.argv[1], int(sys.argv[2])
rng = random.Random(1)
for i in range(n):
    c = i % 10
    os.makedirs(f"{root}/train/c{c}", exist_ok=True)
    base = Image.new("RGB", (256, 256), (25 * c, 255 - 25 * c, (90 * c) % 256))
    noise = Image.effect_noise((256, 256), 40 + rng.randrange(20)).convert("RGB")
    Image.blend(base, noise, 0.3).save(f"{root}/train/c{c}/{i:06d}.jpg", quality=90)
open(f"{root}/done", "w").write("")
PY
fi
for ra in 2 0; do
  cat > job_$ra.yaml <<YAML
name: read_ahead_$ra
model: cnn
data: {kind: images, path: $out/jpegs, size: 28, channels: 1, mean: 0.5, std: 0.25, crop_pad: 2, flip: true, read_ahead: $ra}
batch: 64
micro_batch: 16
steps: 40
optimizer: {kind: sgd, lr: 0.01}
policy: dp_even
devices:
  - {id: 0, count: 2, speed: 1, memory_gb: 4}
YAML
done
echo "read_ahead: commit $(git -C "$src" rev-parse --short HEAD), $(nproc) cores, $images JPEGs, $(date -u +%F)"
printf "%5s %12s %12s %12s %12s %s\n" round step_s_ra2 step_s_ra0 ratio wait_s_ra2 "wait_s_ra0 (read ahead: ra2)"
field() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))[sys.argv[2]])' "$1" "$2"; }
ratios=()
for r in $(seq "$rounds"); do
  for ra in 2 0; do "$dynapar" train job_$ra.yaml --out run_${r}_$ra > run_${r}_$ra.log 2>&1; done
  a=$(field run_${r}_2/summary.json mean_step_time_s) b=$(field run_${r}_0/summary.json mean_step_time_s)
  ratio=$(awk -v a="$a" -v b="$b" 'BEGIN {printf "%.3f", a / b}')
  ratios+=("$ratio")
  printf "%5d %12.4f %12.4f %12s %12.3f %s\n" "$r" "$a" "$b" "$ratio" "$(field run_${r}_2/summary.json data_wait_s)" \
    "$(field run_${r}_0/summary.json data_wait_s) ($(field run_${r}_2/summary.json samples_read_ahead))"
done
printf "ratio of step times, read-ahead / none: %s .. %s over %d rounds\n" "$(printf "%s\n" "${ratios[@]}" | sort -n | head -1)" \
  "$(printf "%s\n" "${ratios[@]}" | sort -n | tail -1)" "$rounds"
