#!/usr/bin/env bash
# --verify-against DIR (training/verify.hpp): a run checked against another run of the same
# exact job under another plan instead of one plain device. The chaos job's pipelines and
# re-plans (joint_lyapunov, one process; its fast device leaves and rejoins) against the same
# job as one 4-stage pipeline (pipeline_even) over 3 node processes: every layer's
# parameters, buffers and Adam state are the same bits. Then the check must be able to fail:
# a hash of run A changed by hand is found (exit 3, naming the layer); another job (seed),
# another length, a missing run and an `exact: false` job are refused before training (exit 2).
# verify_against.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$1 job=$(cd "$(dirname "$2")" && pwd)/$(basename "$2") out=$3
rm -rf "$out" && mkdir -p "$out" && cd "$out"
sed 's/^steps: .*/steps: 12/' "$job" > even.yaml
sed -i 's/^policy: .*/policy: pipeline_even/' even.yaml
# Run a re-plans for certain, whatever the machine's speed: its fast device leaves and comes back.
sed 's/^steps: .*/steps: 12/' "$job" > a.yaml
printf '  events:\n    - {slot: 1, kind: leave, device: 0}\n    - {slot: 3, kind: join, device: 0}\n' >> a.yaml
"$bin" train a.yaml --out a > a.log 2>&1 || { tail -20 a.log; exit 1; }
"$bin" launch --local 3 even.yaml --verify-against a --out b > b.log 2>&1 || { tail -20 b.log; exit 1; }
grep -q "verify ok: all 4 layers bit for bit those of the run in 'a'" b.log
/usr/bin/python3 - <<'PY'
import json
s = json.load(open("b/summary.json"))
assert s["verified_against"] == "a" and s["layers_differing"] == [], s
plans = lambda d: [json.loads(l)["plan"] for l in open(d + "/plans.jsonl")]
a, b = plans("a"), plans("b")
assert [len(g["devices"]) for g in b[0]["groups"]] == [4], b[0]  # one pipeline of 4 stages
assert all(p != b[0] for p in a), "run a never ran b's plan"
assert len(a) >= 3, "run a re-planned at the leave and at the join"
h = json.load(open("a/layer_hashes.json"))
assert len(h["layers"]) == 4 and h["steps"] == 12, h
bad = dict(h, layers=h["layers"][:2] + ["%016x" % (int(h["layers"][2], 16) ^ 1)] + h["layers"][3:])
import os
os.makedirs("a_bad", exist_ok=True)
json.dump(bad, open("a_bad/layer_hashes.json", "w"))
print("ok: run a's", len(a), "plans and run b's one pipeline trained the same bits")
PY
expect() {  # CODE TEXT ARGS...: the run exits CODE and says TEXT
  local code=$1 text=$2 rc=0
  shift 2
  "$bin" "$@" > run.log 2>&1 || rc=$?
  [ "$rc" = "$code" ] || { echo "exit $rc, not $code: $*"; tail -5 run.log; exit 1; }
  grep -qF "$text" run.log || { echo "no '$text' from: $*"; tail -5 run.log; exit 1; }
  echo "ok: exit $code, $text"
}
expect 3 "verify FAILED: 1 of 4 layers differ from the run in 'a_bad' (the first: layer 2)" train even.yaml --verify-against a_bad --out c
sed 's/^seed: .*//; $a seed: 99' even.yaml > seed.yaml
expect 2 "that run trained another job (seed differs)" train seed.yaml --verify-against a --out d
expect 2 "that run trained 12 steps, this one 10" train even.yaml --steps 10 --verify-against a --out d
expect 2 "nowhere/layer_hashes.json: cannot be read" train even.yaml --verify-against nowhere --out d
echo "exact: false" >> even.yaml
expect 2 "an \`exact: false\` job's sums depend on the plan: use --verify" train even.yaml --verify-against a --out d
