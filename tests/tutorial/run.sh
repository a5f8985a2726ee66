#!/usr/bin/env bash
# docs/TUTORIAL.md as a test: its ```bash blocks, exactly as written, one after another in one
# shell (stopping at the first command that fails), in a folder of their own; then what the
# tutorial says is checked: both runs verified (difference 0), a pipeline in some plan, re-plans,
# and the report's plots.
set -euo pipefail
dynapar_bin=$(cd "$(dirname "$1")" && pwd)
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
src=$(cd "$here/../.." && pwd)
rm -rf "$out" && mkdir -p "$out"
awk '/^```bash$/ {on = 1; next} /^```$/ {on = 0; next} on' "$src/docs/TUTORIAL.md" > "$out/tutorial.sh"
[ "$(grep -c . "$out/tutorial.sh")" -gt 20 ] || { echo "FAIL: no commands found in docs/TUTORIAL.md"; exit 1; }
(cd "$src" && DYNAPAR_HOME="$src" DYNAPAR_BIN="$dynapar_bin" TUTORIAL_DIR="$out/work" OPENBLAS_NUM_THREADS=1 \
  bash -euo pipefail "$out/tutorial.sh") > "$out/tutorial.log" 2>&1 || { tail -30 "$out/tutorial.log"; exit 1; }
/usr/bin/python3 - "$out/work" <<'PY'
import json, os, sys
w = sys.argv[1]
for run in ("my_run", "my_run_nodes"):
    s = json.load(open(f"{w}/{run}/summary.json"))
    assert s["reference_max_rel_diff"] == 0, (run, s["reference_max_rel_diff"])
    assert s["samples_lost"] == 0 and s["replans"] >= 1, s
    plans = [json.loads(l) for l in open(f"{w}/{run}/plans.jsonl")]
    assert any(len(g["devices"]) >= 2 for p in plans for g in p["plan"]["groups"]), f"{run}: no pipeline"
    assert s["final_test_accuracy"] == s["reference_test_accuracy"] > 0.5, s
    print(f"ok: {run}: diff 0, {s['replans']} re-plans, validation accuracy {s['final_test_accuracy']}")
# In one process each step's images were decoded while the step before ran (data/read_ahead.hpp):
# every training read after the first step's 64, unless a step was attempted again.
s = json.load(open(f"{w}/my_run/summary.json"))
ahead, want = s["samples_read_ahead"], (s["steps"] - 1) * 64
assert ahead == want or (s["step_retries"] + s["recoveries"] > 0 and 0 < ahead <= want), (ahead, want, s["step_retries"], s["recoveries"])
print(f"ok: my_run: {ahead} of its training reads decoded ahead, {s['data_wait_s']:.3f} s waited on data")
assert len(os.listdir(f"{w}/clothes/train")) == 10
assert "step_time.png" in os.listdir(f"{w}/my_run/plots"), "no plots from dynapar report"
PY
# Each node read only what its devices trained on: the reads add up to 40 steps x 64.
reads=$(grep -ao "read [0-9]* samples of the job's 2700" "$out/tutorial.log" | awk '{s += $2; n++} END {print n, s}')
[ "$reads" = "3 2560" ] || { echo "FAIL: the nodes' reads (count, sum) are '$reads', want '3 2560'"; exit 1; }
echo "ok: the nodes read 2560 images in all, the samples of 40 steps of 64"
# ... and decoded some of them while the step before ran (the controller's StageTask.aheadSamples):
# not those of a step that starts a slot (a re-plan may deal it otherwise), nor the first.
ahead=$(grep -ao "([0-9]* decoded ahead of their step)" "$out/tutorial.log" | tr -d '(' | awk '{s += $1} END {print s + 0}')
[ "$ahead" -gt 0 ] && [ "$ahead" -lt 2560 ] || { echo "FAIL: the nodes decoded $ahead images ahead, want some of the 2560"; exit 1; }
echo "ok: the nodes decoded $ahead of them ahead of their step"
