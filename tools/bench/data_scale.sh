#!/usr/bin/env bash
# A start whatever the data set's size (issue 74; docs/BENCHMARKS.md, "Your own data: size"):
# image folders of N generated 28 x 28 grey PNGs (10 classes), the same images as WebDataset
# tar shards of 10 000 samples each (KEY.png, KEY.cls), and for each the time from the
# command to its first step (the log's stamp of step 1), cold (no index beside the data: every
# file read once) and warm (the index reused: no file read whole), in one process (`train`)
# and over 3 node processes (`launch --local 3`), with what each node read through read() and
# its peak memory (the nodes' own log lines; these cover the whole run, whose end evaluates
# the held-out tenth of the images).
#   tools/bench/data_scale.sh [OUT_DIR] [SIZES...]      (default sizes: 10000 100000)
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
dynapar=${DYNAPAR:-$src/build/bin/dynapar}
out=$(mkdir -p "${1:-/tmp/dynapar_data_scale}" && cd "${1:-/tmp/dynapar_data_scale}" && pwd)
shift || true
sizes=("$@")
((${#sizes[@]})) || sizes=(10000 100000)
export OPENBLAS_NUM_THREADS=1
cd "$out"
echo "data_scale: commit $(git -C "$src" rev-parse --short HEAD), $(nproc) cores, $(date -u +%F)"
printf "%9s %-7s %-8s %-5s %13s %10s %12s\n" images layout where index first_step_s "node_MB" "node_peak_MB"
for n in "${sizes[@]}"; do
  folder=$out/images_$n
  if [[ ! -f $folder/done ]]; then  # generated once: small PNGs, each a class's shade plus noise
    /usr/bin/python3 - "$folder" "$n" <<'PY'
import os, sys, zlib, struct, random
root, n = sys.argv[1], int(sys.argv[2])
def png(pixels):  # 28 x 28 grey, 8 bits
    raw = b"".join(b"\0" + pixels[r * 28:(r + 1) * 28] for r in range(28))
    chunk = lambda t, d: struct.pack(">I", len(d)) + t + d + struct.pack(">I", zlib.crc32(t + d) & 0xffffffff)
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", 28, 28, 8, 0, 0, 0, 0)) + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b"")
rng = random.Random(1)
for c in range(10):
    os.makedirs(f"{root}/train/c{c}", exist_ok=True)
for i in range(n):
    c = i % 10
    px = bytes(min(255, 20 * c + rng.randrange(40)) for _ in range(784))
    open(f"{root}/train/c{c}/{i:07d}.png", "wb").write(png(px))
open(f"{root}/done", "w").write("")
PY
  fi
  shards=$out/shards_$n
  if [[ ! -f $shards/done ]]; then  # the folder's images in its order, 10 000 samples a tar
    /usr/bin/python3 - "$folder" "$shards" <<'PY'
import io, os, sys, tarfile
folder, root = sys.argv[1], sys.argv[2]
os.makedirs(f"{root}/train", exist_ok=True)
files = sorted((c, f) for c in os.listdir(f"{folder}/train") for f in os.listdir(f"{folder}/train/{c}"))
def add(t, name, data):
    info = tarfile.TarInfo(name)
    info.size = len(data)
    t.addfile(info, io.BytesIO(data))
for k in range(0, len(files), 10000):
    with tarfile.open(f"{root}/train/{k // 10000:06d}.tar", "w", format=tarfile.USTAR_FORMAT) as t:
        for c, f in files[k:k + 10000]:
            key = f"{c}_{f[:-4]}"
            add(t, key + ".png", open(f"{folder}/train/{c}/{f}", "rb").read())
            add(t, key + ".cls", str(int(c[1:])).encode())
open(f"{root}/done", "w").write("")
PY
  fi
  for layout in folder tars; do
    data=$folder
    [[ $layout == tars ]] && data=$shards
    cat > job_${n}_$layout.yaml <<YAML
name: data_scale_${n}_$layout
model: cnn
data: {kind: images, path: $data, size: 28, channels: 1, mean: 0.5, std: 0.25}
batch: 48
micro_batch: 8
steps: 2
optimizer: {kind: sgd, lr: 0.01}
policy: dp_even
devices:
  - {id: 0, count: 3, speed: 1, memory_gb: 4}
YAML
    for where in train launch; do
      for index in cold warm; do
        [[ $index == cold ]] && rm -f "$data"/.dynapar-index*
        run=run_${n}_${layout}_${where}_$index
        t0=$(date +%H:%M:%S.%N)
        if [[ $where == train ]]; then
          "$dynapar" train job_${n}_$layout.yaml --out $run > $run.log 2>&1
        else
          "$dynapar" launch --local 3 job_${n}_$layout.yaml --out $run > $run.log 2>&1
        fi
        # Seconds of the day, from the command's start to the log's stamp of step 1.
        t1=$(grep -m1 -o "^\[[0-9:.]*\] \[train\] \[info\] step 1/" $run.log | cut -c2-13)
        first=$(awk -v a="$t0" -v b="$t1" 'function s(t, p) {split(t, p, ":"); return p[1] * 3600 + p[2] * 60 + p[3]} BEGIN {printf "%.2f", s(b) - s(a)}')
        # Each node's own figures at exit (launch only): what it read, its peak memory.
        figures=$( (grep -o "peak memory [0-9.]* MB, [0-9.]* MB read" $run.log || true) | awk '{p += $3; r += $5; k++} END {if (k) printf "%.1f %.1f", r / k, p / k; else print "- -"}')
        printf "%9d %-7s %-8s %-5s %13s %10s %12s\n" "$n" "$layout" "$where" "$index" "$first" $figures
      done
    done
  done
done
echo "(node_MB and node_peak_MB: the mean over the 3 nodes; the folder's size: $(du -sh "$out"/images_"${sizes[-1]}" | cut -f1) for ${sizes[-1]} images)"
