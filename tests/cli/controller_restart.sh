#!/usr/bin/env bash
# The controller process killed (SIGKILL) after a checkpoint and restarted at the same address
# with --resume, while its two node processes keep running: the nodes find a controller that
# does not know them, join again with fresh devices, and the resumed run ends equal to one
# device (--verify) with no sample lost or applied twice; both nodes exit cleanly.
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000) + 7))
ep="tcp://127.0.0.1:$port"
"$bin" controller "$job" --bind "$ep" --checkpoint-dir "$out/ck" --checkpoint-every 4 --out "$out/a" > /dev/null 2> "$out/a.log" &
ctl=$!
# The controller's throwaway keys: the nodes' (OUT/keys) and the controller's own
# (OUT/keys-controller), which the restarted controller serves.
for _ in $(seq 600); do [ -f "$out/a/keys/controller.pub" ] && break; sleep 0.05; done
"$bin" node --controller "$ep" --keys "$out/a/keys" --device 0 --device 1 --name left --controller-timeout-s 120 > /dev/null 2> "$out/left.log" &
n1=$!
"$bin" node --controller "$ep" --keys "$out/a/keys" --device 2 --device 3 --name right --controller-timeout-s 120 > /dev/null 2> "$out/right.log" &
n2=$!
trap 'kill -9 $ctl $n1 $n2 2>/dev/null || true' EXIT
for _ in $(seq 2400); do
  [ -f "$out/ck/latest" ] && [ "$(cat "$out/ck/latest")" != "step-4" ] && break
  sleep 0.05
done
kill -KILL "$ctl"
wait "$ctl" || true
echo "controller killed after $(cat "$out/ck/latest")"
saved=$(cat "$out/ck/$(cat "$out/ck/latest")/state.json")
"$bin" controller "$job" --bind "$ep" --keys "$out/a/keys-controller" --resume "$out/ck" --verify --out "$out/b" > /dev/null 2> "$out/b.log"
wait "$n1"
wait "$n2"
grep -q "joins again with fresh devices" "$out/left.log"
grep -q "joins again with fresh devices" "$out/right.log"
/usr/bin/python3 - "$out/b/summary.json" "$saved" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
state = json.loads(sys.argv[2])
assert s["resumed_from_step"] == state["step"] >= 8, (s["resumed_from_step"], state["step"])
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
print("ok: resumed from step", s["resumed_from_step"], "diff", s["reference_max_rel_diff"])
PY
