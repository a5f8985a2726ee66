#!/usr/bin/env bash
# `dynapar bench runtime --local N`: the policies through N node processes. The exact sum
# makes the trained parameters independent of the plan and of where the devices run, so each
# policy over the nodes must end at the test accuracy of the same policy in one process (the
# reference), and every policy at the same one. The step figures must be positive and the
# measured time within a sane factor of the simulator's for the plans that ran. Bad --local
# values are refused (exit 2).
# bench_runtime_local.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$1 job=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
args=(bench runtime "$job" --steps 10 --rounds 1 --replan-every 2 --emulate-compute profile --policies joint_lyapunov,dp_even --json)
"$bin" "${args[@]}" > "$out/one.json"
"$bin" "${args[@]}" --local 2 > "$out/nodes.json" 2> "$out/nodes.log"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
one, nodes = (json.load(open(f"{out}/{f}.json")) for f in ("one", "nodes"))
assert one["node_processes"] == 0 and nodes["node_processes"] == 2, (one["node_processes"], nodes["node_processes"])
ref = {r["policy"]: r for r in one["runs"]}
acc = set()
for r in nodes["runs"]:
    p = r["policy"]
    assert r["test_accuracy"] == ref[p]["test_accuracy"], (p, r["test_accuracy"], ref[p]["test_accuracy"])
    assert r["test_accuracy"] > 0.2, r  # 10 classes: it trained
    assert r["step_s"] > 0 and r["predicted_step_s"] > 0, r
    assert 0.3 < r["measured_over_predicted"] < 10, r
    acc.add(r["test_accuracy"])
assert len(acc) == 1, acc
print("over 2 node processes:", {r["policy"]: (round(1e3 * r["step_s"], 1), round(r["measured_over_predicted"], 3)) for r in nodes["runs"]},
      "accuracy", acc.pop())
PY
grep -q "joined with" "$out/nodes.log" || { echo "no node joined:"; tail -20 "$out/nodes.log"; exit 1; }
set +e
"$bin" bench runtime "$job" --local 0 > /dev/null 2> "$out/bad.err"
[ $? = 2 ] && grep -q "local" "$out/bad.err" || { echo "--local 0 not refused:"; cat "$out/bad.err"; exit 1; }
