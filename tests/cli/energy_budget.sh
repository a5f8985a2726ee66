#!/usr/bin/env bash
# energy_budget.sh DYNAPAR JOB OUT: energy budgets steer training. The job first runs without
# one; then device 0's budget is set to half the joules a step it spent, and the run must keep
# its mean within that budget (5 % slack for the slots before the queue has built up).
set -euo pipefail
bin=$1 job=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
"$bin" train "$job" --out "$out/free" > /dev/null 2> "$out/free.log"
budget=$(/usr/bin/python3 -c 'import json,sys; print(0.5 * json.load(open(sys.argv[1]))["avg_energy_j"]["0"])' "$out/free/summary.json")
sed "s/^name: energy/name: energy\nbudget: {energy_per_slot: {0: $budget}}/" "$job" > "$out/bound.yaml"
"$bin" train "$out/bound.yaml" --verify --out "$out/bound" > /dev/null 2> "$out/bound.log"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
d = sys.argv[1]
free = json.load(open(d + "/free/summary.json"))
bound = json.load(open(d + "/bound/summary.json"))
cap = bound["energy_budget_j"]["0"]
e0 = bound["avg_energy_j"]["0"]
# The bound run took the budget written into its job (half the free run's joules).
assert abs(cap - 0.5 * free["avg_energy_j"]["0"]) <= 1e-6 * cap, (free["avg_energy_j"], cap)
assert e0 <= 1.05 * cap, f"device 0 spent {e0:.3f} J a step against its budget {cap:.3f}"
assert bound["reference_max_rel_diff"] == 0, bound["reference_max_rel_diff"]
print(f"ok: device 0 {free['avg_energy_j']['0']:.3f} J a step unbudgeted, {e0:.3f} J against a budget of {cap:.3f}")
PY
