#!/usr/bin/env bash
# Clipping by global norm (optimizer.clip_grad_norm, as torch.nn.utils.clip_grad_norm_; the
# formula itself is checked against LibTorch's in model_tests [optimizer]): the hetero job (a
# join, a slow-down, a leave, re-plans moving layers) with a bound that clips still equals
# one device (--verify, train_hetero.sh's checks), in one process and over 3 node processes,
# whose holders send their layers' gradient norms with their sums and apply the driver's
# factor. The two runs' losses agree step by step (to the rounding of adding them up), and
# from step 1 on they differ from the same job unclipped by more than 0.1 % (the bound clips).
# clip.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$1 job=$2 out=$3
here=$(dirname "$0")
rm -rf "$out" && mkdir -p "$out"
run() {  # run NAME OPTIMIZER [NODES]
  sed "s/^optimizer:.*/optimizer: $2/" "$job" > "$out/$1.yaml"
  "$here/train_hetero.sh" "$bin" "$out/$1.yaml" "$out/$1" ${3:-}
}
run clip "{kind: sgd, lr: 0.05, momentum: 0.9, clip_grad_norm: 0.05}"
run clip_nodes "{kind: sgd, lr: 0.05, momentum: 0.9, clip_grad_norm: 0.05}" 3
run free "{kind: sgd, lr: 0.05, momentum: 0.9}"
/usr/bin/python3 - "$out" <<'PY'
import json, sys
out = sys.argv[1]
loss = {n: [json.loads(l)["loss"] for l in open(f"{out}/{n}/metrics.jsonl")] for n in ("clip", "clip_nodes", "free")}
# The loss is added over the plan's micro-batches as their reports come: equal to rounding.
close = lambda a, b, tol: abs(a - b) <= tol * max(abs(a), abs(b))
assert all(close(a, b, 1e-5) for a, b in zip(loss["clip"], loss["clip_nodes"])), (loss["clip"], loss["clip_nodes"])
assert close(loss["clip"][0], loss["free"][0], 1e-5), "step 0 comes before any update"
assert all(not close(a, b, 1e-3) for a, b in zip(loss["clip"][1:], loss["free"][1:])), (loss["clip"], loss["free"])
print("clipped: loss %.4f -> %.4f, unclipped %.4f -> %.4f" % (loss["clip"][0], loss["clip"][-1], loss["free"][0], loss["free"][-1]))
PY
