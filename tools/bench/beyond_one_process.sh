#!/usr/bin/env bash
# docs/BENCHMARKS.md, "A model larger than any one process" (issue 50): the built-in wide_xl
# MLP (1.01 B parameters: 4.0 GB, 12.1 GB with Adam's two moments) pipelined over 4 node
# processes (`launch --local 4`), each capped at CAP MB resident (`--max-rss-mb`: a process
# over it ends, as the kernel's out-of-memory killer would end it) and keeping its layers'
# Adam moments in a file on this machine's disk between steps (`--offload-optimizer`). The
# controller has the job's profile file (so it times no layer) and holds no layer. Then the
# same job under another plan (pipeline_balanced splits the layers by their measured cost, not
# their count) with `--verify-against` the first run: every layer's hash (parameters, buffers,
# moments) must be bit for bit the same. Checks and prints the figures; exits non-zero if a
# claim fails.
# Usage: tools/bench/beyond_one_process.sh [OUT] [CAP_MB] [STEPS]   (from the repository root,
# after a build; DYNAPAR_BIN names another binary). About 24 GB of memory and 2 minutes a run
# on 2 cores; the moments' files (8 GB) go to OUT/adam and are gone with the processes.
set -euo pipefail
out=${1:-out/beyond}
cap=${2:-2900}
steps=${3:-3}
bin=$(realpath "${DYNAPAR_BIN:-build/bin/dynapar}")
mkdir -p "$out/adam"
out=$(realpath "$out")
cd "$out"
cat > wide_xl.yaml <<YAML
name: wide_xl_pipeline4
model: wide_xl
data: synthetic
synthetic_samples: 64
batch: 8
micro_batch: 8
steps: $steps
optimizer: {kind: adam, lr: 0.0001}
policy: pipeline_even
profile: $out/profile.json
hash_every: 0
step_deadline_s: 600   # the first step pays for building the moments' files: not a hang
emulate: false
devices:
  - {id: 0, count: 4, speed: 1, memory_gb: 16}
YAML
sed 's/^policy: pipeline_even/policy: pipeline_balanced/' wide_xl.yaml > wide_xl_balanced.yaml
[[ -s profile.json ]] || "$bin" profile wide_xl --batch 8 --repeat 2 --out profile.json > profile.log 2>&1
run() {  # NAME JOB [FLAGS...]
  local name=$1 job=$2
  shift 2
  /usr/bin/time -v "$bin" --max-rss-mb "$cap" --offload-optimizer "$out/adam" launch --local 4 "$job" --out "$name" "$@" \
    > "$name.log" 2>&1 || { tail -30 "$name.log"; echo "beyond_one_process: run '$name' failed" >&2; exit 1; }
}
run even wide_xl.yaml
run balanced wide_xl_balanced.yaml --verify-against even
CAP=$cap /usr/bin/python3 - <<'PY'
import json, os
cap = float(os.environ["CAP"])
# The model's bytes by hand: 784x4096 + 60 x 4096x4096 + 4096x10 weights, with biases.
sizes = [784] + [4096] * 61 + [10]
params = sum(a * b + b for a, b in zip(sizes, sizes[1:]))
model_mb, with_adam_mb = 4 * params / 2**20, 12 * params / 2**20
print(f"wide_xl: {params / 1e9:.3f} B parameters, {model_mb:.0f} MB; with Adam's moments {with_adam_mb:.0f} MB = {with_adam_mb / cap:.2f} x the per-process cap of {cap:.0f} MB")
ok = with_adam_mb >= 3 * cap
for run in ("even", "balanced"):
    s = json.load(open(f"{run}/summary.json"))
    nodes = s["node_peak_rss_mb"]
    ctl = s["process"]["max_rss_mb"]
    moved = s["controller_tensor_bytes"]
    splits = s["final_plan"]["groups"][0]["splits"]
    print(f"{run:9s} splits {splits}: nodes' peaks {', '.join(f'{nodes[n]:.0f}' for n in sorted(nodes))} MB (cap {cap:.0f}); "
          f"controller {ctl:.0f} MB = {100 * ctl / model_mb:.1f} % of the model; controller_tensor_bytes {moved}")
    ok &= len(nodes) == 4 and all(v < cap for v in nodes.values()) and ctl < 0.1 * model_mb and moved == 0
    if run == "balanced":
        print(f"balanced: verified against even: {s.get('verified_against') == 'even'}; same splits as even: {splits == even_splits}")
        ok &= s.get("verified_against") == "even" and s.get("layers_differing") == [] and splits != even_splits
    even_splits = splits
print("all claims hold" if ok else "A CLAIM FAILED")
raise SystemExit(0 if ok else 1)
PY
