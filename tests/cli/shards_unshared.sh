#!/usr/bin/env bash
# Checkpoints when a node does not share the controller's filesystem: node 1 runs in its own
# mount namespace with a private tmpfs over the checkpoint directory, so the shard it writes
# lands on its own disk. The controller sees that the shard is not there as written, says so
# once, and gathers the layers for the rest of the run (layers.pt, format 2); the run equals
# one device. Needs root's `unshare --mount` (skipped, exit 77, where it is refused; in CI a failure).
# shards_unshared.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out/ck" && cd "$out"
if ! unshare --mount sh -c 'mount -t tmpfs none "$1"' sh "$PWD/ck" 2> /dev/null; then
  # CI runs as root, where it must run: a skip there would hide the test (docs/TESTING.md).
  [ "${CI:-}" = true ] && { echo "FAIL: CI cannot make a private tmpfs (unshare --mount needs root)"; exit 1; }
  echo "skipped: a private tmpfs (unshare --mount) is refused here"; exit 77
fi
cat > job.yaml <<'YAML'
name: shards_unshared
model: cnn
data: synthetic
synthetic_samples: 1280
batch: 128
micro_batch: 16
steps: 12
optimizer: {kind: adam, lr: 0.002}
policy: pipeline_even
hash_every: 4
devices:
  - {id: 0, speed: 1, memory_gb: 4, node: 0}
  - {id: 1, speed: 1, memory_gb: 4, node: 1}
YAML
port=$((20000 + ($$ % 20000) + 11))
ep="tcp://127.0.0.1:$port"
"$bin" controller job.yaml --bind "$ep" --checkpoint-dir "$PWD/ck" --checkpoint-every 4 --verify --out a > /dev/null 2> a.log &
ctl=$!
trap 'kill -9 $ctl 2>/dev/null || true' EXIT
for _ in $(seq 600); do [ -f a/keys/controller.pub ] && break; sleep 0.05; done
"$bin" node --controller "$ep" --keys a/keys --device 0 --name shared --shard-dir "$PWD/ck" > /dev/null 2> shared.log &
unshare --mount sh -c 'mount -t tmpfs none "$1/ck" && exec "$2" node --controller "$3" --keys a/keys --device 1 --name own_disk --shard-dir "$1/ck"' \
  sh "$PWD" "$bin" "$ep" > /dev/null 2> own_disk.log &
wait "$ctl"
[ "$(grep -c "is not in .* as its holder wrote it (no filesystem shared with the nodes?); the layers are gathered instead, for the rest of the run" a.log)" = 1 ] ||
  { cat a.log; echo "FAIL: not said once"; exit 1; }
[ -e ck/step-12/layers.pt ] && [ ! -e ck/step-12/layer-0.pt ] || { ls ck ck/step-12; echo "FAIL: not gathered"; exit 1; }
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["reference_max_rel_diff"] == 0 and s["checkpoints"] == 3, s' a/summary.json
echo "ok: a node's own disk: said once, gathered (layers.pt), diff 0"
