#!/usr/bin/env bash
# `dynapar train JOB --verify` end to end on Fashion-MNIST: two groups of 2 and 3 stages must
# equal the single-device run exactly, with every sample used once.
set -euo pipefail
"$1" train "$2" --verify --out "$3" > /dev/null
/usr/bin/python3 - "$3/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["replica_hash_checks"] >= 1, s
assert s["steps"] == 20 and 0.1 < s["final_test_accuracy"] <= 1, s
assert [len(g["devices"]) for g in s["plan"]["groups"]] == [2, 3], s["plan"]
print("ok: diff 0, accuracy", s["final_test_accuracy"])
PY
