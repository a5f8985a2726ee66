#!/usr/bin/env bash
# cost_budget.sh DYNAPAR JOB OUT: a binding cost budget end to end. The job (with a controller)
# first runs without its budget; then its budget is set to 0.7 of the cost a step it spent,
# and the run must average at most 1.02 x that budget, where ignoring the budget would have
# spent 1.43 x it. The bounded run still equals one device (--verify).
# A step's cost is price x step time, so both runs use profile-timed devices with one profile
# (this machine's, made 3x slower so that the real work fits in it even on a loaded machine):
# the two runs then see the same hardware, and the budget measures the controller, not how
# busy the machine was during each run (a CPU-timed pair failed a loaded CI at 1.14x).
set -euo pipefail
bin=$1 job=$2 out=$3
rm -rf "$out" && mkdir -p "$out"
"$(dirname "$0")/slow_profile.sh" "$bin" 3 "$out"
timed="emulate_compute: profile\nprofile: $out/slow.json"
sed "/^budget:/d; s|^name: \(.*\)|name: \1\n$timed|" "$job" > "$out/free.yaml"
"$bin" train "$out/free.yaml" --out "$out/free" > /dev/null 2> "$out/free.log"
budget=$(/usr/bin/python3 -c 'import json,sys; print(0.7 * json.load(open(sys.argv[1]))["avg_cost"])' "$out/free/summary.json")
sed "/^budget:/d; s|^name: \(.*\)|name: \1\n$timed\nbudget: {cost_per_slot: $budget}|" "$job" > "$out/bound.yaml"
grep -q "^budget: {cost_per_slot: $budget}" "$out/bound.yaml"
grep -q "^emulate_compute: profile" "$out/bound.yaml"
"$bin" train "$out/bound.yaml" --verify --out "$out/bound" > /dev/null 2> "$out/bound.log"
/usr/bin/python3 - "$out" "$budget" <<'PY'
import json, sys
d, budget = sys.argv[1], float(sys.argv[2])
free = json.load(open(d + "/free/summary.json"))
bound = json.load(open(d + "/bound/summary.json"))
assert free.get("budget") is None, free.get("budget")
assert abs(bound["budget"] - budget) <= 1e-9 * budget, (bound["budget"], budget)  # the budget it was given
assert bound["avg_cost"] <= 1.02 * budget, f"{bound['avg_cost']:.6f} a step against the budget {budget:.6f}"
assert bound["reference_max_rel_diff"] == 0, bound["reference_max_rel_diff"]
print(f"ok: {free['avg_cost']:.6f} a step without the budget, {bound['avg_cost']:.6f} within {budget:.6f} "
      f"({bound['avg_cost'] / budget:.3f} of it), step {free['mean_step_time_s'] * 1e3:.1f} -> {bound['mean_step_time_s'] * 1e3:.1f} ms")
PY
