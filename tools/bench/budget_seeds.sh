#!/usr/bin/env bash
# The default demo (examples/jobs/flagship.yaml) under seeds 1..N: does each run end within
# its cost budget (avg cost <= budget x 1.02, issue 17), and is joint_lyapunov still faster than
# dp_even and dp_balanced on the same emulated devices (--compare)? Runs PARALLEL at a time
# (default 1; each run keeps about two cores busy). Prints one line per seed and a total.
# BUDGET replaces the job's cost budget a step (a faster machine spends less: the same budget
# binds less there); SLACK sets the budget's slot_slack (docs/MODEL.md, "Budget pacing");
# COMPARE=0 skips the baselines.
#   tools/bench/budget_seeds.sh [N] [OUT]     BIN (default build/bin/dynapar), PARALLEL, BUDGET, SLACK, COMPARE
set -euo pipefail
n=${1:-10}
out=${2:-out/budget_seeds}
bin=${BIN:-build/bin/dynapar}
par=${PARALLEL:-1}
mkdir -p "$out"
run() {
  local seed=$1
  sed "s/^name: flagship/name: flagship\nseed: $seed/; s/^budget: .*/budget: {cost_per_slot: ${BUDGET:-0.04}${SLACK:+, slot_slack: $SLACK}}/" \
    examples/jobs/flagship.yaml > "$out/seed$seed.yaml"
  local compare=(--compare dp_even,dp_balanced)
  [ "${COMPARE:-1}" = 0 ] && compare=()
  "$bin" train "$out/seed$seed.yaml" "${compare[@]}" --out "$out/seed$seed" > "$out/seed$seed.out" 2> "$out/seed$seed.log"
}
for seed in $(seq "$n"); do
  run "$seed" &
  while [ "$(jobs -rp | wc -l)" -ge "$par" ]; do sleep 1; done
done
wait
/usr/bin/python3 - "$out" "$n" <<'PY'
import json, sys
out, n = sys.argv[1], int(sys.argv[2])
met = faster = 0
for seed in range(1, n + 1):
    s = json.load(open(f"{out}/seed{seed}/summary.json"))
    ratio = s["avg_cost"] / s["budget"]
    cmp = {c["policy"]: c for c in s.get("compare", [])}
    sp = {k: c["speedup"] for k, c in cmp.items()}
    met += ratio <= 1.02
    faster += bool(sp) and all(v > 1 for v in sp.values())
    line = f"seed {seed:2d}: avg cost {s['avg_cost']:.5f} / budget {s['budget']} = {ratio:.4f}, mean step {1e3 * s['mean_step_time_s']:.1f} ms"
    if sp:
        line += ", speedup vs " + ", ".join(f"{k} {v:.2f}x (cost {cmp[k]['avg_cost']:.4f})" for k, v in sp.items())
    print(line)
print(f"budget met (<= 1.02 x) in {met} of {n}" + (f"; joint_lyapunov faster than every baseline in {faster} of {n}" if sp else ""))
PY
