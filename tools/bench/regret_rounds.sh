#!/usr/bin/env bash
# docs/BENCHMARKS.md, "The flagship in paired rounds": the flagship job under each variant in
# rounds that rotate the order, so that each sees the machine alike. Variants (VARIANTS, default
# "on off dpb"): on / off = joint_lyapunov with the regret check on / off, dpb = dp_balanced,
# dpd = dp_dispatch. LOAD=N runs N busy processes of this script's own beside every run (a
# competing CPU load). Prints each run, then per variant the mean step time (steps 1..; step 0
# warms up), the cost a step and whether it met the job's budget, and the first variant
# against each other: the per-round ratios' geometric mean with a 95 % t-interval over rounds.
#   tools/bench/regret_rounds.sh [ROUNDS] [OUT]     BIN (default build/bin/dynapar), JOB, LOAD (default 0), VARIANTS
set -euo pipefail
rounds=${1:-3}
out=${2:-out/regret_rounds}
bin=${BIN:-build/bin/dynapar}
job=${JOB:-examples/jobs/flagship.yaml}
load=${LOAD:-0}
read -r -a variants <<< "${VARIANTS:-on off dpb}"
mkdir -p "$out"
# The variants: a copy of the job each, with the policy and the regret check set.
for v in "${variants[@]}"; do
  case $v in
    on | off) policy=joint_lyapunov ;;
    dpb) policy=dp_balanced ;;
    dpd) policy=dp_dispatch ;;
    *) echo "unknown variant '$v' (on, off, dpb, dpd)" >&2 && exit 2 ;;
  esac
  sed -e "s/^policy: .*/policy: $policy/" "$job" > "$out/$v.yaml"
  case $v in on) echo "regret: true" >> "$out/$v.yaml" ;; off) echo "regret: false" >> "$out/$v.yaml" ;; esac
done
busy=()
stop_load() { for p in "${busy[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap stop_load EXIT
for _ in $(seq "$load"); do
  (while :; do :; done) &
  busy+=($!)
done
n=${#variants[@]}
for r in $(seq "$rounds"); do
  for k in $(seq 0 $((n - 1))); do
    v=${variants[$(((k + r) % n))]}
    "$bin" train "$out/$v.yaml" --out "$out/r$r-$v" > "$out/r$r-$v.out" 2> "$out/r$r-$v.log"
  done
done
stop_load
/usr/bin/python3 - "$out" "$rounds" "$load" "${variants[@]}" <<'PY'
import json, math, sys
out, rounds, load, variants = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4:]
# 97.5 % quantiles of Student's t for 1..9 degrees of freedom.
T = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262]
def run(d):
    steps = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"time_s"' in l and '"event"' not in l][1:]
    s = json.load(open(f"{d}/summary.json"))
    return sum(m["time_s"] for m in steps) / len(steps), s["avg_cost"], s.get("plans_reverted", 0), s["replans"], s.get("budget")
res = {v: [run(f"{out}/r{r}-{v}") for r in range(1, rounds + 1)] for v in variants}
names = {"on": "joint_lyapunov, regret on", "off": "joint_lyapunov, regret off", "dpb": "dp_balanced", "dpd": "dp_dispatch"}
print(f"load: {load} busy processes")
for v, rs in res.items():
    for r, (t, c, rev, rp, b) in enumerate(rs, 1):
        met = "" if b is None else (", within budget" if c <= b else f", over budget ({c / b:.3f}x)")
        print(f"round {r} {names[v]:27s}: {1e3 * t:6.1f} ms a step, cost {c:.4f} a step{met}, {rp} plan changes, {rev} undone")
first = variants[0]
for v in variants[1:]:
    logs = [math.log(res[v][r][0] / res[first][r][0]) for r in range(rounds)]
    m = sum(logs) / rounds
    if rounds > 1:
        sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (rounds - 1))
        h = T[min(rounds - 2, len(T) - 1)] * sd / math.sqrt(rounds)
        ci = f", 95 % interval x{math.exp(m - h):.3f} .. x{math.exp(m + h):.3f}"
    else:
        ci = ""
    met = sum(1 for r in res[v] if r[4] is None or r[1] <= r[4])
    print(f"{names[first]}: x{math.exp(m):.3f} the speed of {names[v]} (geometric mean of {rounds} rounds{ci}); "
          f"{names[v]} met the budget in {met} of {rounds}")
PY
