#!/usr/bin/env bash
# slow_profile.sh DYNAPAR FACTOR DIR: the CNN's profile measured here (DIR/measured.json) and
# the same made FACTOR times slower (DIR/slow.json), for profile-timed devices whose real work
# fits in their profile time even on a loaded machine.
set -euo pipefail
"$1" profile cnn --batch 16 --repeat 3 --out "$3/measured.json"
/usr/bin/python3 - "$2" "$3" <<'PY'
import json, sys
factor, d = float(sys.argv[1]), sys.argv[2]
p = json.load(open(d + "/measured.json"))
for l in p["layers"]:
    for k in ("fwd_s", "bwd_s", "fixed_s", "update_s"):
        l[k] *= factor
json.dump(p, open(d + "/slow.json", "w"))
PY
