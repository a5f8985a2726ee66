#!/usr/bin/env bash
# Policies simulated in parallel give the numbers each gives alone (--threads 1), and a whole
# node failing at once leaves every policy a plan on the survivors: finite times, no error,
# no null where a number is promised. simulate_threads.sh DYNAPAR SCENARIO
set -euo pipefail
a=$("$1" simulate "$2" --policies all --threads 4 --json 2>/dev/null)
b=$("$1" simulate "$2" --policies all --threads 1 --json 2>/dev/null)
/usr/bin/python3 - "$a" "$b" <<'PY'
import json, math, sys
par, seq = json.loads(sys.argv[1])["policies"], json.loads(sys.argv[2])["policies"]
assert par.keys() == seq.keys()
for name, p in par.items():
    if name == "oracle":  # enumerates at most 7 devices: says so in "error"
        assert p["ok_slots"] == 0 and "at most" in p["error"], p
        continue
    assert p == seq[name], (name, p, seq[name])
    assert not p.get("error"), (name, p["error"])
    assert p["ok_slots"] == p["slots"], (name, p["ok_slots"])
    for k, v in p.items():
        assert v is not None or k == "budget", (name, k)
    assert math.isfinite(p["mean_batch_time_s"]) and p["mean_batch_time_s"] > 0, (name, p["mean_batch_time_s"])
print("ok:", {n: round(p["mean_batch_time_s"], 4) for n, p in par.items() if n != "oracle"})
PY
