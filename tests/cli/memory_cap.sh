#!/usr/bin/env bash
# The per-process memory cap (issue 50; docs/DISTRIBUTED.md): a bad DYNAPAR_MAX_RSS_MB is
# refused by name (exit 2); a run capped below what LibTorch alone takes ends with exit 1,
# saying so; a run under a generous cap trains and reports the cap beside its peak; over
# launch --local 2, the nodes inherit the cap (each process logs it); and a node capped below
# LibTorch's size ends at once, saying so.
# memory_cap.sh DYNAPAR OUT
set -euo pipefail
bin=$1 out=$2
x="$(cd "$(dirname "$0")" && pwd)/expect_exit.sh"
rm -rf "$out" && mkdir -p "$out" && cd "$out"
cat > tiny.yaml <<'YAML'
name: tiny
model: mlp
data: synthetic
synthetic_samples: 256
batch: 32
steps: 6
policy: dp_even
hash_every: 0
devices:
  - {id: 0, count: 2, speed: 1}
YAML
got=$(DYNAPAR_MAX_RSS_MB=12x "$x" 2 "$bin" version) || { echo "a bad DYNAPAR_MAX_RSS_MB was not refused with exit 2: $got"; exit 1; }
[[ $got == *"DYNAPAR_MAX_RSS_MB"*"'12x'"* ]] || { echo "the refusal does not name the variable and value: $got"; exit 1; }
got=$("$x" 1 "$bin" --max-rss-mb 20 train tiny.yaml --out low) || { echo "a run over its cap did not end with exit 1: $got"; exit 1; }
[[ $got == *"over its memory cap"*"--max-rss-mb 20"* ]] || { echo "the run over its cap did not say so: $got"; exit 1; }
"$bin" --max-rss-mb 4000 train tiny.yaml --out high > /dev/null 2> high.log || { tail -5 high.log; exit 1; }
"$bin" --max-rss-mb 4000 launch --local 2 --no-keys tiny.yaml --out nodes > /dev/null 2> nodes.log || { tail -5 nodes.log; exit 1; }
/usr/bin/python3 - <<'PY'
import json
for run in ("high", "nodes"):
    p = json.load(open(f"{run}/summary.json"))["process"]
    assert p["max_rss_cap_mb"] == 4000 and 0 < p["max_rss_mb"] < 4000, (run, p)
said = json.load(open("nodes/summary.json"))["node_peak_rss_mb"]
assert len(said) == 2 and all(0 < v < 4000 for v in said.values()), said
print("ok: refused, ended over the cap, and under it", p["max_rss_mb"], "MB with nodes at", sorted(said.values()))
PY
n=$(grep -c "resident memory capped at 4000 MB" nodes.log) || true
[ "$n" = 3 ] || { echo "expected the launch and its 2 nodes to log the cap, got $n lines:"; grep -i "capped\|node-" nodes.log | head; exit 1; }
DYNAPAR_MAX_RSS_MB=20 "$x" 1 "$bin" node --controller tcp://127.0.0.1:9 --device 0 --connect-timeout-s 30 > node.txt || { echo "a capped node did not end with exit 1:"; cat node.txt; exit 1; }
grep -q "over its memory cap" node.txt || { echo "the capped node did not say why:"; cat node.txt; exit 1; }
echo ok
