#!/usr/bin/env bash
# docs/BENCHMARKS.md, "Regret check on the flagship": the flagship job under joint_lyapunov
# with the controller's regret check on and off, and under dp_balanced, in rounds that rotate
# the order so that each sees the machine alike. LOAD=N runs N busy processes of this script's
# own beside every run (a competing CPU load). Prints each run, then per variant the mean step
# time (steps 1..; step 0 warms up) and the cost a step, and each variant against dp_balanced:
# the per-round ratios' geometric mean with a 95 % t-interval over rounds.
#   tools/bench/regret_rounds.sh [ROUNDS] [OUT]     BIN (default build/bin/dynapar), JOB, LOAD (default 0)
set -euo pipefail
rounds=${1:-3}
out=${2:-out/regret_rounds}
bin=${BIN:-build/bin/dynapar}
job=${JOB:-examples/jobs/flagship.yaml}
load=${LOAD:-0}
mkdir -p "$out"
# The variants: a copy of the job each, with the policy and the regret check set.
sed -e 's/^policy: .*/policy: joint_lyapunov/' "$job" > "$out/on.yaml"
echo "regret: true" >> "$out/on.yaml"
sed -e 's/^policy: .*/policy: joint_lyapunov/' "$job" > "$out/off.yaml"
echo "regret: false" >> "$out/off.yaml"
sed -e 's/^policy: .*/policy: dp_balanced/' "$job" > "$out/dpb.yaml"
busy=()
stop_load() { for p in "${busy[@]}"; do kill "$p" 2> /dev/null || true; done; }
trap stop_load EXIT
for _ in $(seq "$load"); do
  (while :; do :; done) &
  busy+=($!)
done
variants=(on off dpb)
for r in $(seq "$rounds"); do
  for k in 0 1 2; do
    v=${variants[$(((k + r) % 3))]}
    "$bin" train "$out/$v.yaml" --out "$out/r$r-$v" > "$out/r$r-$v.out" 2> "$out/r$r-$v.log"
  done
done
stop_load
/usr/bin/python3 - "$out" "$rounds" "$load" <<'PY'
import json, math, sys
out, rounds, load = sys.argv[1], int(sys.argv[2]), sys.argv[3]
# 97.5 % quantiles of Student's t for 1..9 degrees of freedom.
T = [12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262]
def run(d):
    steps = [json.loads(l) for l in open(f"{d}/metrics.jsonl") if '"time_s"' in l and '"event"' not in l][1:]
    s = json.load(open(f"{d}/summary.json"))
    return sum(m["time_s"] for m in steps) / len(steps), s["avg_cost"], s.get("plans_reverted", 0), s["replans"]
res = {v: [run(f"{out}/r{r}-{v}") for r in range(1, rounds + 1)] for v in ("on", "off", "dpb")}
names = {"on": "joint_lyapunov, regret on", "off": "joint_lyapunov, regret off", "dpb": "dp_balanced"}
print(f"load: {load} busy processes")
for v, rs in res.items():
    for r, (t, c, rev, rp) in enumerate(rs, 1):
        print(f"round {r} {names[v]:27s}: {1e3 * t:6.1f} ms a step, cost {c:.4f} a step, {rp} plan changes, {rev} undone")
for v in ("on", "off"):
    logs = [math.log(res["dpb"][r][0] / res[v][r][0]) for r in range(rounds)]
    m = sum(logs) / rounds
    if rounds > 1:
        sd = math.sqrt(sum((x - m) ** 2 for x in logs) / (rounds - 1))
        h = T[min(rounds - 2, len(T) - 1)] * sd / math.sqrt(rounds)
        ci = f", 95 % interval x{math.exp(m - h):.3f} .. x{math.exp(m + h):.3f}"
    else:
        ci = ""
    print(f"{names[v]}: x{math.exp(m):.3f} the speed of dp_balanced (geometric mean of {rounds} rounds{ci})")
PY
