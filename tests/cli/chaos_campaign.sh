#!/usr/bin/env bash
# A small chaos campaign (`dynapar chaos`): seeded runs in one process and over node
# processes, each verified against one plain device. Seed 5 over 3 nodes loses every device
# at once (a partition and two node kills), so the run must wait for the respawned nodes.
# chaos_campaign.sh DYNAPAR JOB OUT
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out"
"$bin" chaos "$job" --runs 1 --seed 3 --out "$out/one" > "$out.one.txt"
"$bin" chaos "$job" --runs 2 --seed 5 --local 3 --out "$out/nodes" > "$out.nodes.txt"
cat "$out.one.txt" "$out.nodes.txt"
/usr/bin/python3 - "$out/one/chaos.json" "$out/nodes/chaos.json" <<'PY'
import json, os, sys
for path in sys.argv[1:]:
    c = json.load(open(path))
    for r in c["runs"]:
        assert r["verdict"] == "ok", r
        assert r["reference_max_rel_diff"] == 0 and r["samples_lost"] == 0 and r["samples_duplicated"] == 0, r
        # Faults were injected: counted in the run's log, which covers both processes of a
        # run killed and resumed (its summary covers only the resumed one).
        log = open(os.path.join(os.path.dirname(path), "seed-%d" % r["seed"], "log.txt")).read()
        assert log.count("fault injected") >= 1, r
print("ok")
PY
