#!/usr/bin/env bash
# Learning-rate schedules (optimizer.schedule): the rate each step applied (metrics.jsonl "lr")
# is PyTorch's torch.optim.lr_scheduler's, step by step (cosine: LinearLR warm-up then
# CosineAnnealingLR in a SequentialLR; step: StepLR), and the hetero job (a join, a slow-down, a
# leave, re-plans moving layers) still equals one device (--verify, train_hetero.sh's checks):
# in one process, and for cosine over 3 node processes, whose nodes get the schedule in the
# controller's Welcome and apply each step's rate as the reference does. The cosine runs also
# smooth their labels (loss.label_smoothing 0.1), which the nodes get in the Welcome too.
# lr_schedule.sh DYNAPAR JOB OUT
set -euo pipefail
bin=$1 job=$2 out=$3
here=$(dirname "$0")
rm -rf "$out" && mkdir -p "$out"
cosine="{kind: adamw, lr: 0.002, schedule: {kind: cosine, warmup_steps: 4, min_lr: 0.0001}}"
step="{kind: sgd, lr: 0.05, momentum: 0.9, schedule: {kind: step, step_size: 5, gamma: 0.5}}"
run() {  # run NAME OPTIMIZER [smooth [NODES]]
  local loss=""  # a third argument: smooth the labels too
  [ -n "${3:-}" ] && loss='\nloss: {kind: cross_entropy, label_smoothing: 0.1}'
  sed "s/^optimizer:.*/optimizer: $2$loss/" "$job" > "$out/$1.yaml"
  grep -q "schedule" "$out/$1.yaml"
  "$here/train_hetero.sh" "$bin" "$out/$1.yaml" "$out/$1" ${4:-}
}
run cosine "$cosine" smooth
run cosine_nodes "$cosine" smooth 3
run step "$step"
grep -q "label_smoothing: 0.1" "$out/cosine_nodes.yaml"
! grep -q "label_smoothing" "$out/step.yaml"
/usr/bin/python3 - "$out" <<'PY'
import json, sys, torch
from torch.optim.lr_scheduler import CosineAnnealingLR, LinearLR, SequentialLR, StepLR
out = sys.argv[1]
def torch_lrs(make, opt, steps):
    sched = make(opt)
    lrs = []
    for _ in range(steps):
        lrs.append(opt.param_groups[0]["lr"])
        opt.step()
        sched.step()
    return lrs
def ours(name):
    return [json.loads(l)["lr"] for l in open(f"{out}/{name}/metrics.jsonl")]
p = [torch.zeros(1, requires_grad=True)]
w, n = 4, 24
cos = torch_lrs(lambda o: SequentialLR(o, [LinearLR(o, start_factor=1 / (w + 1), end_factor=1.0, total_iters=w),
                                           CosineAnnealingLR(o, T_max=n - w, eta_min=0.0001)], milestones=[w]),
                torch.optim.AdamW(p, lr=0.002), n)
stp = torch_lrs(lambda o: StepLR(o, step_size=5, gamma=0.5), torch.optim.SGD(p, lr=0.05, momentum=0.9), n)
for name, want in (("cosine", cos), ("cosine_nodes", cos), ("step", stp)):
    got = ours(name)
    assert len(got) == n, (name, len(got))
    for t, (a, b) in enumerate(zip(got, want)):
        assert abs(a - b) <= 1e-9 * b, (name, t, a, b)
assert len(set(cos)) > 10 and min(cos) < 0.0005 and max(cos) == 0.002, cos
# Step 0's loss is taken before any update, from the same weights and samples in every run:
# only the smoothing can make it differ.
first = lambda name: json.loads(open(f"{out}/{name}/metrics.jsonl").readline())["loss"]
assert first("cosine") == first("cosine_nodes") and first("cosine") != first("step"), (first("cosine"), first("step"))
print("ok: the schedules are PyTorch's step by step; cosine from", cos[0], "to", cos[-1])
PY
