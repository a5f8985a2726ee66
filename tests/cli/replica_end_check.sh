#!/usr/bin/env bash
# The end's replica check (issue 71): one replica corrupted after the last periodic check
# (verify_corrupt_late.yaml: hash_every beyond the run) stops the run with an error naming the
# layer, over launch too; without that check the run would end well, unseen.
# replica_end_check.sh DYNAPAR JOB OUT [NODES]
set -uo pipefail
bin=$1 job=$2 out=$3
rm -rf "$out"
if [ $# -ge 4 ]; then "$bin" launch --local "$4" "$job" --out "$out" > /dev/null 2> "$out.log"; else "$bin" train "$job" --out "$out" > /dev/null 2> "$out.log"; fi
code=$?
[ "$code" = 1 ] || { echo "exit $code, wanted 1"; tail -5 "$out.log"; exit 1; }
grep -q "replicas of layer 0 (.*) differ after step 5" "$out.log" || { echo "not named:"; tail -5 "$out.log"; exit 1; }
echo "ok: the corrupted replica was caught at the end"
