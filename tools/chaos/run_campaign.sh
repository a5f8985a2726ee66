#!/usr/bin/env bash
# The chaos campaign of docs/RELIABILITY.md at the checked-out commit, 110 runs: 50 over 4 node
# processes (pipelines) beside 50 in one process (CNN, dispatch), then 10 `exact: false` over
# 4 nodes; each run verified against one plain device. The table (tools/chaos/campaign.py),
# headed by the commit, goes into docs/RELIABILITY.md. It refuses a tree whose code differs
# from its commit, and builds first, so the table is the commit's.
# tools/chaos/run_campaign.sh OUT [FIRST_SEED]   (about an hour on 2 cores)
set -euo pipefail
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
out=$1 seed=${2:-20000}
cd "$root"
if [ -n "$(git status --porcelain -- actors runtime schemas tools/dynapar examples/jobs/chaos)" ]; then
  echo "run_campaign: the code differs from its commit (git status): commit it first" >&2
  exit 2
fi
commit=$(git rev-parse --short=7 HEAD)
cmake --build build -j "$(nproc)" > /dev/null
bin=build/bin/dynapar
mkdir -p "$out"
echo "run_campaign: commit $commit, seeds $seed-$((seed + 49)), $((seed + 1000))-$((seed + 1049)), $((seed + 2000))-$((seed + 2009))"
"$bin" chaos examples/jobs/chaos/pipelines.yaml --runs 50 --seed "$seed" --local 4 --out "$out/nodes" > "$out/nodes.txt" 2>&1 &
nodes=$!
"$bin" chaos examples/jobs/chaos/cnn_adam_1f1b.yaml --runs 50 --seed $((seed + 1000)) --out "$out/one" > "$out/one.txt" 2>&1 || true
wait $nodes || true
"$bin" chaos examples/jobs/chaos/inexact.yaml --runs 10 --seed $((seed + 2000)) --local 4 --out "$out/inexact" > "$out/inexact.txt" 2>&1 || true
tail -n 2 "$out"/*.txt
python3 tools/chaos/campaign.py --commit "$commit" --write docs/RELIABILITY.md "4 nodes, pipelines, Adam, 1F1B=$out/nodes" \
  "one process, CNN, Adam, 1F1B, dispatch=$out/one" "4 nodes, pipelines, \`exact: false\` (Gloo)=$out/inexact"
