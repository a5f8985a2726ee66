#!/usr/bin/env bash
# The training process killed with SIGKILL after a checkpoint, then `--resume`: the resumed
# run ends equal to one device over all the job's steps (--verify), with no sample lost or
# applied twice. Checkpoints are written under temporary names and renamed, so the kill can
# land anywhere, even in the middle of a write.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
"$bin" train "$job" --checkpoint-dir "$out/ck" --checkpoint-every 4 --out "$out/a" > /dev/null 2> "$out/a.log" &
pid=$!
trap 'kill -9 $pid 2>/dev/null || true' EXIT
for _ in $(seq 1200); do
  [ -f "$out/ck/latest" ] && [ "$(cat "$out/ck/latest")" != "step-4" ] && break
  sleep 0.05
done
kill -KILL "$pid"
wait "$pid" || true
echo "killed after $(cat "$out/ck/latest")"
cp "$out/ck/$(cat "$out/ck/latest")/state.json" "$out/resumed_state.json"
"$bin" train "$job" --resume "$out/ck" --verify --out "$out/b" > /dev/null
/usr/bin/python3 - "$out/b/summary.json" "$out/resumed_state.json" "$out/b/plans.jsonl" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
state = json.load(open(sys.argv[2]))
first = json.loads(open(sys.argv[3]).readline())
# The controller goes on from the saved cost queue, and the run from the saved step.
assert s["resumed_from_step"] == state["step"], (s["resumed_from_step"], state["step"])
assert abs(first["cost_queue"] - state["controller"]["cost_queue"]) < 1e-9, (first, state)
assert first["step"] == state["step"], first
assert s["resumed_from_step"] >= 8 and s["resumed_from_step"] % 4 == 0, s["resumed_from_step"]
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: resumed at", s["resumed_from_step"], "diff", s["reference_max_rel_diff"])
PY
