#!/usr/bin/env bash
# The image loader against PyTorch's (issue 74; docs/BENCHMARKS.md, "Your own data: size"):
# samples a second read from one image folder by `dynapar bench data` (model::inputs, a
# micro-batch's images decoded on up to 4 threads) and by torchvision's ImageFolder through a
# DataLoader with num_workers 2 and the same transforms (grey, resize, to tensor, normalise),
# the same number of samples in batches of the same size, timed from the first batch (the
# workers' start left out), in ROUNDS alternating pairs; each pair's ratio, then the range.
#   tools/bench/loader_rate.sh JOB [ROUNDS] [SAMPLES]      (JOB: a job of data kind images)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
dynapar=${DYNAPAR:-$src/build/bin/dynapar}
job=$1 rounds=${2:-3} samples=${3:-4000}
export OPENBLAS_NUM_THREADS=1
echo "loader_rate: $job, $samples samples a round, commit $(git -C "$src" rev-parse --short HEAD), $(nproc) cores"
ratios=()
for r in $(seq "$rounds"); do
  got=$("$dynapar" bench data "$job" --samples "$samples" --micro-batch 8 --json)
  ours=$(/usr/bin/python3 -c 'import json,sys; print(json.loads(sys.argv[1])["samples_per_s"])' "$got")
  theirs=$(/usr/bin/python3 - "$got" <<'PY'
import json, sys, time, torch, torchvision
from torchvision import transforms as T
d = json.loads(sys.argv[1]); n = d["samples"]; c = d["channels"]
per_channel = lambda v: v * c if len(v) == 1 else v
tf = T.Compose(([T.Grayscale(1)] if c == 1 else []) + [T.Resize((d["rows"], d["cols"])), T.ToTensor(), T.Normalize(per_channel(d["mean"]), per_channel(d["std"]))])
torch.set_num_threads(1)
ds = torchvision.datasets.ImageFolder(d["path"] + "/train", transform=tf)
loader = torch.utils.data.DataLoader(ds, batch_size=8, shuffle=True, num_workers=2, generator=torch.Generator().manual_seed(1))
seen, t0 = 0, None
for x, y in loader:
    if t0 is None:
        t0 = time.perf_counter()  # from the first batch: the workers' start is not counted
    else:
        seen += x.shape[0]
    if seen >= n:
        break
print(seen / (time.perf_counter() - t0))
PY
)
  ratio=$(awk -v a="$ours" -v b="$theirs" 'BEGIN {print a / b}')
  ratios+=("$ratio")
  printf "round %d: dynapar %.0f samples/s, PyTorch DataLoader (num_workers 2) %.0f samples/s: %.2fx\n" "$r" "$ours" "$theirs" "$ratio"
done
printf "%s\n" "${ratios[@]}" | sort -n | awk 'NR == 1 {lo = $1} {hi = $1} END {printf "dynapar / PyTorch over %d rounds: %.2f-%.2fx\n", NR, lo, hi}'
