#!/usr/bin/env bash
# A node process killed with SIGKILL mid-run: the controller notices the silence within its
# node timeout (2 s) and stops with an error naming the node, well before the 120 s step
# timeout. (Recovering from it is issue 8; this checks that nothing hangs on a dead node.)
set -euo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out" && mkdir -p "$out"
port=$((20000 + ($$ % 20000)))
ep="tcp://127.0.0.1:$port"
"$bin" launch --local 2 --devices 0,1 --min-devices 2 --bind "$ep" "$job" --out "$out/run" > /dev/null 2> "$out/launch.log" &
launch=$!
"$bin" node --controller "$ep" --device 2 --name victim --connect-timeout-s 60 2> "$out/victim.log" &
victim=$!
trap 'kill $launch $victim 2>/dev/null || true' EXIT
# Until the victim's device is in a plan.
for _ in $(seq 1200); do
  [ -f "$out/run/plans.jsonl" ] && grep -q '"devices":\[2\]' "$out/run/plans.jsonl" && break
  sleep 0.1
done
grep -q '"devices":\[2\]' "$out/run/plans.jsonl"
kill -KILL "$victim"
killed=$SECONDS
rc=0
wait "$launch" || rc=$?
took=$((SECONDS - killed))
echo "launch exited $rc, ${took} s after the kill"
[ "$rc" -ne 0 ]
grep -q "node 'victim' lost" "$out/launch.log"
[ "$took" -lt 10 ]
