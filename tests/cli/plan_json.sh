#!/usr/bin/env bash
# `dynapar plan --json` prints one object with the documented keys, shares summing to the batch.
set -euo pipefail
out=$("$1" plan --cluster "$2" --model resnet50 --json)
echo "$out" | /usr/bin/python3 -c '
import json, sys
j = json.load(sys.stdin)
for k in ("policy", "batch_time_s", "floor_s", "cost", "groups"):
    assert k in j, k
assert j["batch_time_s"] >= j["floor_s"] > 0
assert sum(g["share"] for g in j["groups"]) == 256, j["groups"]
for g in j["groups"]:
    for k in ("devices", "splits", "share", "micro_batch", "time_s"):
        assert k in g, k
    assert len(g["splits"]) == len(g["devices"]) + 1
print("ok", j["batch_time_s"])
'
