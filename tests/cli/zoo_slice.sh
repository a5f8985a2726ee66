#!/usr/bin/env bash
# zoo_slice.sh ZOO_PY DYNAPAR WORK: five torchvision families (SqueezeNet, MobileNet v3, ShuffleNet
# v2, MnasNet, RegNet) through tools/export/zoo.py: each must export (no traceback) and train 3
# steps on a 2-stage pipeline with --verify difference 0 against one plain device.
set -euo pipefail
zoo=$1 dynapar=$2 work=$3
rm -rf "$work"
/usr/bin/python3 "$zoo" --dynapar "$dynapar" --out "$work" \
  --models squeezenet1_1,mobilenet_v3_small,shufflenet_v2_x0_5,mnasnet0_5,regnet_x_400mf > "$work.log" 2>&1 ||
  { cat "$work.log"; exit 1; }
/usr/bin/python3 - "$work/zoo.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert len(rows) == 5, rows
for r in rows:
    assert r["result"] == "trained" and r["difference"] == 0 and not r["traceback"], r
    assert r["segments"] >= 2, r
    print(f"{r['model']}: {r['segments']} segments at {r['input']}, --verify difference 0")
PY
