#!/usr/bin/env bash
# Every node process of a launch killed mid-run, none restarted (no --respawn-s): the run
# ends with an error that says so within seconds of the last node's death (the node timeout,
# then no wait for replacements that cannot come), not after rejoin_wait_s (60 s) and never
# a hang (issue 74).
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
"$bin" launch --local 2 --devices 0,1 --min-devices 2 "$job" --steps 300 --out "$out/run" > /dev/null 2> "$out/launch.log" &
launch=$!
trap 'kill $launch 2>/dev/null || true' EXIT
for _ in $(seq 1200); do [ -s "$out/run/plans.jsonl" ] && break; sleep 0.1; done
[ -s "$out/run/plans.jsonl" ] || { tail -20 "$out/launch.log"; echo "FAIL: no plan"; exit 1; }
# launch's children (from /proc: procps is not among the bootstrap's packages), its 2 nodes.
# (grep goes on past a process that ended meanwhile; mawk would stop there.)
nodes=$( (grep -l "^PPid:[[:space:]]*$launch\$" /proc/[0-9]*/status 2> /dev/null || true) | cut -d/ -f3 | tr '\n' ' ')
[ "$(wc -w <<< "$nodes")" -eq 2 ] || { echo "FAIL: launch's children are '$nodes', not its 2 nodes"; exit 1; }
kill -KILL $nodes
killed=$(date +%s.%N)
rc=0
wait "$launch" || rc=$?
took=$(awk -v a="$killed" -v b="$(date +%s.%N)" 'BEGIN {printf "%.1f", b - a}')
[ "$rc" -ne 0 ] || { echo "FAIL: launch exited 0 with every node dead"; exit 1; }
grep -q "every node process this launch started has exited" "$out/launch.log" || { tail -20 "$out/launch.log"; echo "FAIL: no reason given"; exit 1; }
awk -v t="$took" 'BEGIN {exit !(t < 30)}' || { tail -20 "$out/launch.log"; echo "FAIL: ended $took s after the nodes died"; exit 1; }
echo "ok: launch ended (exit $rc) $took s after its last node died: $(grep -o 'dynapar: .*' "$out/launch.log" | tail -1)"
