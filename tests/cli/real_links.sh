#!/usr/bin/env bash
# real_links.sh DYNAPAR JOB OUT [NODES]: the job (emulate: false, link tiers of 1 kbit/s and
# 10 s a transfer) trains in this process, or over NODES node processes, as if the links were
# not there: each step sends activations between stages and sums gradients between groups, so
# shaped by the tiers each would take at least 10 s (a transfer's latency) and, for the CNN's
# 1.7 MB of gradients, hours. Every step must take under 5 s (here they take under 1 s), no modelled sum time
# may be charged, and the run must equal one device.
set -euo pipefail
if [ $# -ge 4 ]; then
  "$1" launch --local "$4" "$2" --verify --out "$3" > /dev/null
else
  "$1" train "$2" --verify --out "$3" > /dev/null
fi
/usr/bin/python3 - "$3" <<'PY'
import json, sys
s = json.load(open(sys.argv[1] + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
steps = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
assert len(steps) == 10, len(steps)
slow = [(m["step"], m["time_s"]) for m in steps if m["time_s"] >= 5.0]
assert not slow, ("steps as slow as the modelled links", slow)
assert all(m["sync_s"] < 0.1 for m in steps), [m["sync_s"] for m in steps]
print("real links: slowest step %.3f s, sync %.4f s" % (max(m["time_s"] for m in steps), max(m["sync_s"] for m in steps)))
PY
