#!/usr/bin/env bash
# A run that differs from one plain device fails `--verify` with exit code 3 and a one-line
# verdict, and summary.json keeps the figure. verify_fails.sh DYNAPAR JOB OUT [NODES]
set -uo pipefail
bin="$1" job="$2" out="$3"
rm -rf "$out"
if [ $# -ge 4 ]; then
  "$bin" launch --local "$4" "$job" --verify --out "$out" > /dev/null 2> "$out.log"
else
  "$bin" train "$job" --verify --out "$out" > /dev/null 2> "$out.log"
fi
code=$?
[ "$code" -eq 3 ] || { echo "exit $code, wanted 3"; tail -5 "$out.log"; exit 1; }
grep -q "verify FAILED" "$out.log" || { echo "no verdict line"; exit 1; }
/usr/bin/python3 - "$out/summary.json" <<'PY'
import json, sys
s = json.load(open(sys.argv[1]))
assert s["reference_max_rel_diff"] > 0 and s["verified"] is False, s
assert s["faults_injected"] == 1, s["faults_injected"]
print("ok: verify failed the command, diff", s["reference_max_rel_diff"])
PY
