#!/usr/bin/env bash
# Profile-timed devices (emulate_compute: profile) with the job's own profile file: every
# stage's compute time in metrics.jsonl must be what the profile gives its layers, samples and
# speed (worked out here from the plan in force), and the run must equal one device. The
# profile is this machine's, made 4x slower, so that the real work always fits in it.
# profile_timed.sh DYNAPAR OUT [N]: with N, through `dynapar launch --local N` (the timing op).
set -euo pipefail
bin=$1 out=$2
rm -rf "$out" && mkdir -p "$out"
"$(dirname "$0")/slow_profile.sh" "$bin" 4 "$out"
/usr/bin/python3 - "$out" <<'PY'
import sys
d = sys.argv[1]
open(d + "/job.yaml", "w").write(f"""name: profile_timed
model: cnn
data: fashion_mnist
batch: 64
micro_batch: 16
steps: 10
optimizer: {{kind: adam, lr: 0.002}}
policy: joint_lyapunov
replan_every: 3
emulate_cores: 1.0
emulate_compute: profile
profile: {d}/slow.json
devices:
  - {{id: 0, speed: 2, memory_gb: 4, node: 0}}
  - {{id: 1, speed: 1, memory_gb: 4, node: 1}}
""")
PY
if [ $# -ge 3 ]; then
  "$bin" launch --local "$3" "$out/job.yaml" --verify --out "$out/run" > /dev/null
else
  "$bin" train "$out/job.yaml" --verify --out "$out/run" > /dev/null
fi
/usr/bin/python3 - "$out" <<'PY'
import json, math, sys
d = sys.argv[1]
prof = json.load(open(d + "/slow.json"))["layers"]
s = json.load(open(d + "/run/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
# Speeds 2:1 on 1.0 core: the fastest at min(1, 1.0 / (1 + 0.5)) of this machine.
scale = s["emulation_scale"]
assert abs(scale - 1 / 1.5) < 1e-9, scale
speed = {0: scale, 1: scale / 2}
plans = sorted((json.loads(l) for l in open(d + "/run/plans.jsonl")), key=lambda p: p["step"])
checked = dispatched = 0
for line in open(d + "/run/metrics.jsonl"):
    r = json.loads(line)
    if "event" in r or r["step"] == 0:
        continue
    plan = [p for p in plans if p["step"] <= r["step"]][-1]["plan"]
    where = {}  # device -> (micro-batch size, its layers, its share)
    for g in plan["groups"]:
        for j, dev in enumerate(g["devices"]):
            where[dev] = (g["micro_batch"], prof[g["splits"][j]:g["splits"][j + 1]], g["share"])
    for st in r["stages"]:
        # The samples the stage ran, not the plan's share: within-step dispatch hands the
        # pool's whole micro-batches to whichever device is free first.
        u, layers, share = where[st["device"]]
        n = st["samples"]
        rows = [min(u, n - k) for k in range(0, n, u)]
        t = sum(x * (l["fwd_s"] + l["bwd_s"]) + l["fixed_s"] for x in rows for l in layers)
        w, got = t / speed[st["device"]], st["compute_s"]
        # A sleep only ends late; late by scheduling noise, not by the real (4x faster) work.
        assert 0.98 * w <= got <= 1.25 * w + 0.005, (r["step"], st, w)
        checked += 1
        dispatched += n != share
assert checked >= 9, checked
print("ok: diff", s["reference_max_rel_diff"], "stages checked", checked, "of them dispatched", dispatched)
PY
