#!/usr/bin/env bash
# `dynapar plan --scenario` plans a scenario's first slot: paper_like's scenario and its
# cluster file (read by another parser) describe the same devices, links and model, so the
# two plans must be the same, group for group.
#   plan_scenario.sh DYNAPAR SCENARIO CLUSTER MODEL
set -euo pipefail
a=$("$1" plan --scenario "$2" --json)
b=$("$1" plan --cluster "$3" --model "$4" --json)
/usr/bin/python3 - "$a" "$b" <<'PY'
import json, sys
a, b = json.loads(sys.argv[1]), json.loads(sys.argv[2])
assert a["groups"] == b["groups"], (a["groups"], b["groups"])
assert abs(a["batch_time_s"] - b["batch_time_s"]) <= 1e-12 * b["batch_time_s"], (a["batch_time_s"], b["batch_time_s"])
print("ok", a["batch_time_s"], len(a["groups"]), "groups")
PY
