#!/usr/bin/env bash
# checkpoint_durability.sh DYNAPAR JOB OUT: checkpoints that survive what disks do.
# - --keep-checkpoints 2 leaves the newest two;
# - the checkpoints are in shards, one per layer, written by the devices that hold them;
# - a torn newest state.json, then one changed byte of a shard of the newest: each is passed
#   over for the checkpoint before it, the run says so, and (the torn one) equals one device;
# - a job with another batch or learning rate is refused, naming the field (exit 2);
# - a disk that cannot take a checkpoint (ulimit -f): the run trains to the end, says which
#   checkpoint it could not write, exits 2, and the checkpoint before it still resumes.
set -euo pipefail
bin=$1 job=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
"$bin" train "$job" --steps 12 --checkpoint-dir "$out/ck" --checkpoint-every 4 --keep-checkpoints 2 --out "$out/a" > /dev/null 2> "$out/a.log"
[ "$(cd "$out/ck" && ls -A | tr '\n' ' ')" = "latest step-12 step-8 " ] || { ls -A "$out/ck"; echo "FAIL: kept"; exit 1; }
[ "$(cat "$out/ck/latest")" = step-12 ]
[ -e "$out/ck/step-12/layer-0.pt" ] && [ ! -e "$out/ck/step-12/layers.pt" ] || { ls "$out/ck/step-12"; echo "FAIL: not in shards"; exit 1; }

resumed_from() { /usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["resumed_from_step"])' "$1/summary.json"; }

# A torn state.json: the whole job from step 8, equal to one device.
cp -r "$out/ck" "$out/torn"
head -c 100 "$out/ck/step-12/state.json" > "$out/torn/step-12/state.json"
"$bin" train "$job" --resume "$out/torn" --verify --out "$out/b" > /dev/null 2> "$out/b.log"
grep -q "passed over the damaged checkpoint step-12: .*is not JSON" "$out/b.log" || { cat "$out/b.log"; echo "FAIL: torn not said"; exit 1; }
[ "$(resumed_from "$out/b")" = 8 ]
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["reference_max_rel_diff"] == 0 and s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s' "$out/b/summary.json"

# One byte of a shard changed: its hash does not match.
cp -r "$out/ck" "$out/flipped"
/usr/bin/python3 - "$out/flipped/step-12/layer-1.pt" <<'PY'
import sys
b = bytearray(open(sys.argv[1], "rb").read())
b[len(b) // 2] ^= 0x01
open(sys.argv[1], "wb").write(bytes(b))
PY
"$bin" train "$job" --resume "$out/flipped" --steps 9 --out "$out/c" > /dev/null 2> "$out/c.log"
grep -q "passed over the damaged checkpoint step-12: .*layer-1.pt' does not match the SHA-256" "$out/c.log" || { cat "$out/c.log"; echo "FAIL: flip not said"; exit 1; }
[ "$(resumed_from "$out/c")" = 8 ]

# A changed job is refused by field.
refused() {  # refused SED_EXPR EXPECTED
  sed "$1" "$job" > "$out/changed.yaml"
  ! cmp -s "$job" "$out/changed.yaml" || { echo "FAIL: '$1' changed nothing"; exit 1; }
  rc=0
  "$bin" train "$out/changed.yaml" --resume "$out/ck" --steps 13 --out "$out/r" > /dev/null 2> "$out/r.log" || rc=$?
  [ "$rc" = 2 ] && grep -qF "$2" "$out/r.log" || { cat "$out/r.log"; echo "FAIL: '$1' exit $rc"; exit 1; }
}
refused 's/^batch: 128/batch: 64/' "was written by a job with batch: 128; this job has 64"
refused 's/lr: 0.002/lr: 0.001/' "was written by a job with optimizer.lr: 0.002; this job has 0.001"

# A disk that cannot take the next checkpoint: half of its largest shard is allowed (ulimit
# -f, KiB). The shard is not written; nor are the layers gathered instead.
kib=$(( $(stat -c %s "$out"/ck/step-12/layer-*.pt | sort -n | tail -1) / 2048 ))
cp -r "$out/ck" "$out/full"
rc=0
(ulimit -f "$kib"; exec "$bin" train "$job" --resume "$out/full" --steps 16 --checkpoint-every 4 --out "$out/d" > /dev/null 2> "$out/d.log") || rc=$?
[ "$rc" = 2 ] || { cat "$out/d.log"; echo "FAIL: full disk exit $rc"; exit 1; }
grep -q "checkpoint shards: cannot write '.*layer-[0-9]*.pt': File too large; the layers are gathered instead" "$out/d.log" &&
  grep -q "the checkpoint of step 16 was not written (.*layers.pt.*); the newest complete one stays step-12" "$out/d.log" ||
  { cat "$out/d.log"; echo "FAIL: full disk not said"; exit 1; }
grep -q "1 checkpoint(s) could not be written, the first step-16" "$out/d.log"
/usr/bin/python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["steps"] == 16 and len(s["checkpoints_not_written"]) == 1, s' "$out/d/summary.json"
[ ! -e "$out/full/step-16" ] && [ ! -e "$out/full/.step-16.tmp" ] && [ "$(cat "$out/full/latest")" = step-12 ]
"$bin" train "$job" --resume "$out/full" --steps 13 --out "$out/e" > /dev/null 2> "$out/e.log"
[ "$(resumed_from "$out/e")" = 12 ]
echo "ok: kept 2; torn and changed checkpoints passed over (diff 0); changed batch and lr refused; a full disk ($kib KiB) left step-12"
