#!/usr/bin/env bash
# docs/BENCHMARKS.md, "Hysteresis through the runtime": a job (JOB, default noisy_500) with the
# hysteresis off and on, in alternating rounds (off first in odd rounds, on first in even
# ones) so that both see the machine alike. Prints a line per run and the means: step time
# (steps 1.., step 0 warms up), plan changes, layers moved, changes kept back; then each
# round paired step by step, the machine's drift between its two runs divided out.
#   tools/bench/hysteresis_rounds.sh [ROUNDS] [OUT]     BIN (default build/bin/dynapar), JOB (default noisy_500)
set -euo pipefail
rounds=${1:-3}
out=${2:-out/hysteresis_rounds}
bin=${BIN:-build/bin/dynapar}
job=${JOB:-examples/jobs/noisy_500.yaml}
mkdir -p "$out"
for r in $(seq "$rounds"); do
  order="off on"
  [ $((r % 2)) = 0 ] && order="on off"
  for h in $order; do
    "$bin" train "$job" --hysteresis "$h" --out "$out/r$r-$h" > "$out/r$r-$h.out" 2> "$out/r$r-$h.log"
  done
done
/usr/bin/python3 - "$out" "$rounds" <<'PY'
import json, sys
out, rounds = sys.argv[1], int(sys.argv[2])
# Steps 1.. of a run (step 0 warms up): the plan in force, the time, whether the plan changed.
def per_step(d):
    plans = {p["step"]: p["describe"] for p in map(json.loads, open(f"{d}/plans.jsonl"))}
    cur, steps = None, []
    for m in map(json.loads, open(f"{d}/metrics.jsonl")):
        cur = plans.get(m["step"], cur)
        steps.append((cur, m["time_s"], m["step"] in plans))
    return steps[1:]
tot = {}
for r in range(1, rounds + 1):
    for h in ("off", "on"):
        d = f"{out}/r{r}-{h}"
        s = json.load(open(f"{d}/summary.json"))
        times = [t for _, t, _ in per_step(d)]
        ms = 1e3 * sum(times) / len(times)
        row = (ms, s["replans"], s["layers_moved"], s["bytes_migrated"] / 1e6, s["plans_kept"])
        t = tot.setdefault(h, [0.0] * len(row))
        for i, v in enumerate(row): t[i] += v / rounds
        print(f"round {r} {h:3s}: {ms:6.1f} ms a step, {row[1]} plan changes, {row[2]} layers moved ({row[3]:.1f} MB), {row[4]} kept back")
for h, t in tot.items():
    print(f"mean {h:3s}: {t[0]:6.1f} ms a step, {t[1]:.1f} plan changes, {t[2]:.1f} layers moved ({t[3]:.1f} MB), {t[4]:.1f} kept back")
on, off = tot["on"], tot["off"]
print(f"on against off: step time x{on[0] / off[0]:.3f}, layers moved {on[2]:.1f} against {off[2]:.1f}")

# Paired: both runs of a round see the same dynamics step by step, so the steps that ran the
# same plan in both (and moved nothing) measure how the machine differed between the two
# runs; the on run's time over the off run's, with that ratio divided out, is what the plans
# made of it.
corrected = []
for r in range(1, rounds + 1):
    a, b = per_step(f"{out}/r{r}-on"), per_step(f"{out}/r{r}-off")
    same = [(x[1], y[1]) for x, y in zip(a, b) if x[0] == y[0] and not x[2] and not y[2]]
    if not same:
        continue
    machine = sum(x for x, _ in same) / sum(y for _, y in same)
    corrected.append(sum(x[1] for x in a) / machine / sum(y[1] for y in b))
    print(f"round {r} paired: {len(same)} steps ran the same plan in both runs, on / off there x{machine:.3f} (the machine); "
          f"on / off with that divided out x{corrected[-1]:.3f}")
if corrected:
    print(f"paired mean: step time x{sum(corrected) / len(corrected):.3f}")
PY
