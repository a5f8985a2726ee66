#!/usr/bin/env bash
# CI's slice of the chaos campaign (docs/RELIABILITY.md): 8 seeded runs over 4 node processes,
# the hard moments among their faults, each run verified against one plain device (difference
# 0, no sample lost or applied twice). The seeds come from the commit under test, so every
# submission tries new ones; a failure prints the command that replays its seed.
# chaos_slice.sh DYNAPAR JOB OUT [RUNS]
set -euo pipefail
bin=$1 job=$2 out=$3 runs=${4:-8}
root=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
commit=$(git -C "$root" rev-parse HEAD 2> /dev/null || echo 0000000)
seed=$((0x${commit:0:7} % 900000 + 100000))
echo "chaos slice at commit ${commit:0:12}: seeds $seed-$((seed + runs - 1)) over 4 node processes"
rm -rf "$out"
rc=0
"$bin" chaos "$job" --runs "$runs" --seed "$seed" --local 4 --steps 18 --out "$out" > "$out.txt" 2>&1 || rc=$?
cat "$out.txt"
/usr/bin/python3 - "$out/chaos.json" "$bin" "$job" <<'PY' || rc=1
import json, sys
c = json.load(open(sys.argv[1]))
bad = [r for r in c["runs"] if r["verdict"] != "ok" or r["reference_max_rel_diff"] != 0 or r["samples_lost"] or r["samples_duplicated"]]
for r in bad:
    print(f"FAIL: seed {r['seed']}: {r['verdict']}; replay: {sys.argv[2]} chaos {sys.argv[3]} --runs 1 --seed {r['seed']} --local 4 --steps 18")
print(f"{len(c['runs']) - len(bad)} of {len(c['runs'])} runs ended as one device")
sys.exit(1 if bad else 0)
PY
exit $rc
