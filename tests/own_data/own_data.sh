#!/usr/bin/env bash
# The user's own data (docs/FORMATS.md, "Data"), end to end: NumPy arrays with the user's CNN
# and a token file with the user's language model, each exported by tools/export, each over
# a heterogeneous job whose plans pipeline layers and re-plan:
# - `dynapar train --verify` and `dynapar launch --local 3 --verify` equal one plain device
#   (max relative difference 0); so does a node started by hand, which reads the files only
#   from its --data-dir (else the controller sends the inputs);
# - over node processes each node reads only the samples its devices train on: the nodes'
#   reads add up to steps x batch, no more;
# - npy shards and image tar shards (WebDataset) likewise, the shards trained as the one file;
# - bad data is exit 2 naming the file and the sample: a label past `classes`, a value that is
#   not finite, a truncated array, an id past `vocab`, data of another shape than the model's.
set -euo pipefail
dynapar=$1
out=$2
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
py=/usr/bin/python3
export_py=$here/../../tools/export/dynapar_export.py
rm -rf "$out" && mkdir -p "$out/npy" "$out/reg" "$out/tokens" && cd "$out"
export OPENBLAS_NUM_THREADS=1

$py "$here/make_data.py" .
$py "$export_py" "$here/user_nets.py:small_cnn" --input 3,16,16 --out cnn.pt > /dev/null 2>&1
$py "$export_py" "$here/user_nets.py:tiny_lm" --input 1,1,32 --vocab 128 --out lm.pt > /dev/null 2>&1
$py "$export_py" "$here/user_nets.py:tiny_next_lm" --input 1,1,32 --vocab 128 --out next_lm.pt > /dev/null 2>&1
job() {  # NAME MODEL DATA: a job file from own_data.yaml
  sed -e "s|^model: MODEL|model: $2|" -e "s|^data: DATA|data: $3|" -e "s|^name: own_data|name: $1|" "$here/own_data.yaml" > "$1.yaml"
}
job npy cnn.pt "{kind: npy, path: npy}"
job tokens lm.pt "{kind: tokens, path: tokens, vocab: 128, window: 32, stride: 16}"

check() {  # RUN_DIR [LOG]: verified, re-planned, pipelined; with LOG, the nodes' reads
  $py - "$@" <<'PY'
import json, re, sys
d = sys.argv[1]
s = json.load(open(d + "/summary.json"))
assert s["reference_max_rel_diff"] == 0, s["reference_max_rel_diff"]
assert s["samples_lost"] == 0 and s["samples_duplicated"] == 0, s
assert s["replans"] >= 1, s
plans = [json.loads(l) for l in open(d + "/plans.jsonl")]
assert any(len(g["devices"]) >= 2 for p in plans for g in p["plan"]["groups"]), "no pipeline group in any plan"
line = f"{d}: diff 0, {s['replans']} re-plans, pipelined"
if len(sys.argv) > 2:
    reads = [(int(a), int(b)) for a, b in re.findall(r"read (\d+) samples of the job's (\d+)", open(sys.argv[2]).read())]
    assert len(reads) == 3, reads
    want = s["steps"] * 64
    assert sum(r for r, _ in reads) == want, (reads, want)
    assert all(r < want for r, _ in reads), reads  # no node reads every sample of the run
    line += f"; nodes read {[r for r, _ in reads]} samples, {want} in all"
print("ok:", line)
PY
}
both() {  # NAME [TRAIN ARGS...]: NAME.yaml with --verify in one process (run_NAME) and over 3 nodes (nodes_NAME)
  local name=$1
  shift
  "$dynapar" train $name.yaml --verify "$@" --out run_$name > /dev/null 2> run_$name.log || { cat run_$name.log; exit 1; }
  check run_$name
  "$dynapar" launch --local 3 $name.yaml --verify --out nodes_$name > /dev/null 2> nodes_$name.log || { tail -20 nodes_$name.log; exit 1; }
  check nodes_$name nodes_$name.log
}
both npy
both tokens

# precision: bf16 (the user's CNN under autocast to bfloat16, its activations between stages
# bf16): equal to the bf16 reference in one process and over 3 nodes; not the float32 run's
# losses (autocast took effect from step 0), but near them all the way (here the loss falls
# from 2.28 to about 0.24; the two curves part by about 0.04 at most).
job npy_bf16 cnn.pt "{kind: npy, path: npy}"
echo "precision: bf16" >> npy_bf16.yaml
both npy_bf16
$py - <<'PY'
import json
loss = lambda d: [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"loss"' in l]
a, b = loss("run_npy_bf16"), loss("run_npy")
assert len(a) == len(b) == 24, (len(a), len(b))
assert a[0] != b[0] and abs(a[0] - b[0]) < 0.02 * b[0], (a[0], b[0])
assert max(abs(x - y) for x, y in zip(a, b)) < 0.1, list(zip(a, b))
assert a[-1] < a[0] / 5, a  # and it learns
print(f"ok: bf16 loss {a[0]:.4f} to {a[-1]:.4f}, float32 {b[0]:.4f} to {b[-1]:.4f}")
PY

# Kind torch: the same arrays saved by torch.save as (inputs, labels) in torch/train.pt, its
# pickle read by LibTorch, its tensors read from the file's mapping: equal to one device over 3
# nodes, each reading only its own samples, and the same training as the npy run, step by step
# (the losses in metrics.jsonl are the same numbers).
mkdir -p torch
$py -c "import numpy as np, torch; torch.save((torch.from_numpy(np.load('npy/train_inputs.npy')), torch.from_numpy(np.load('npy/train_labels.npy'))), 'torch/train.pt')"
job torch cnn.pt "{kind: torch, path: torch}"
"$dynapar" launch --local 3 torch.yaml --verify --out nodes_torch > /dev/null 2> nodes_torch.log || { tail -20 nodes_torch.log; exit 1; }
check nodes_torch nodes_torch.log
"$dynapar" train torch.yaml --out run_torch > /dev/null 2> run_torch.log || { cat run_torch.log; exit 1; }
"$dynapar" train npy.yaml --out run_npy_again > /dev/null 2> run_npy_again.log || { cat run_npy_again.log; exit 1; }
same_losses() {  # RUN REFERENCE WHAT: RUN's 24 losses are REFERENCE's, step by step
  $py - "$@" <<'PY'
import json, sys
loss = lambda d: [json.loads(l)["loss"] for l in open(d + "/metrics.jsonl") if '"loss"' in l]
a, b = loss(sys.argv[1]), loss(sys.argv[2])
assert len(a) == 24 and a == b, (a[:3], b[:3])
print(f"ok: {sys.argv[3]}: {len(a)} equal losses, {a[0]:.4f} to {a[-1]:.4f}")
PY
}
same_losses run_torch run_npy_again "kind torch trains as the same arrays in npy do"

# npy shards: the same arrays as 4 shards of uneven sizes in npy_shards/train (each saved by
# np.save with its labels): equal to one device over 3 nodes, each node reading only its own
# samples, and the same training as the single-file run, loss for loss; a value that is not
# finite is named with its shard and its sample there.
mkdir -p npy_shards/train nan_shards/train
$py - <<'PY'
import numpy as np
x, y = np.load("npy/train_inputs.npy"), np.load("npy/train_labels.npy")
for k, (a, b) in enumerate([(0, 700), (700, 1000), (1000, 1550), (1550, 1800)]):
    np.save(f"npy_shards/train/part{k:03d}_inputs.npy", x[a:b])
    np.save(f"npy_shards/train/part{k:03d}_labels.npy", y[a:b])
    x2 = x[a:b].copy()
    if k == 2:
        x2[40, 0, 1, 1] = np.inf
    np.save(f"nan_shards/train/part{k:03d}_inputs.npy", x2)
    np.save(f"nan_shards/train/part{k:03d}_labels.npy", y[a:b])
PY
job npy_shards cnn.pt "{kind: npy, path: npy_shards}"
"$dynapar" launch --local 3 npy_shards.yaml --verify --out nodes_npy_shards > /dev/null 2> nodes_npy_shards.log || { tail -20 nodes_npy_shards.log; exit 1; }
check nodes_npy_shards nodes_npy_shards.log
"$dynapar" train npy_shards.yaml --out run_npy_shards > /dev/null 2> run_npy_shards.log || { cat run_npy_shards.log; exit 1; }
same_losses run_npy_shards run_npy_again "4 npy shards train as the one file does"

# Image tar shards (WebDataset's layout, written by Python's tarfile): 600 of the arrays as
# 16 x 16 PNGs with their classes in two tars; equal to one device over 3 nodes, each node
# reading only its own samples.
mkdir -p tars/train
$py - <<'PY'
import io, tarfile
import numpy as np
from PIL import Image
x, y = np.load("npy/train_inputs.npy")[:600], np.load("npy/train_labels.npy")[:600]
px = np.clip((x - x.min()) / (x.max() - x.min()) * 255, 0, 255).astype(np.uint8).transpose(0, 2, 3, 1)
for shard in range(2):
    with tarfile.open(f"tars/train/{shard:06d}.tar", "w") as t:
        for i in range(shard * 300, shard * 300 + 300):
            for ext, data in (("png", None), ("cls", str(int(y[i])).encode())):
                if data is None:
                    b = io.BytesIO()
                    Image.fromarray(px[i]).save(b, format="PNG")
                    data = b.getvalue()
                info = tarfile.TarInfo(f"{i:06d}.{ext}")
                info.size = len(data)
                t.addfile(info, io.BytesIO(data))
PY
job tars cnn.pt "{kind: images, path: tars, size: 16}"
"$dynapar" launch --local 3 tars.yaml --verify --out nodes_tars > /dev/null 2> nodes_tars.log || { tail -20 nodes_tars.log; exit 1; }
check nodes_tars nodes_tars.log

# Regression (loss mse): the same CNN regresses 10 reals a sample from float labels. Equal to
# one device in one process and over 3 nodes; and it learns: the test mean squared error ends
# below that of predicting every value as the training labels' mean (numpy's, the baseline).
job reg cnn.pt "{kind: npy, path: reg}"
printf 'loss: {kind: mse}\n' >> reg.yaml
both reg --steps 60
$py - <<'PY'
import json
import numpy as np
y = np.load("reg/train_labels.npy").astype(np.float64)
train, test = y[:-180], y[-180:]  # the last tenth is held out (val_share 0.1)
base = float(((test - train.mean(0)) ** 2).mean())
s = json.load(open("run_reg/summary.json"))
assert s["test_metric"] == "mse" and "final_test_accuracy" not in s, s
got = s["final_test_mse"]
assert 0 < got < 0.8 * base, (got, base)
assert abs(s["reference_test_mse"] - got) <= 1e-6 * base, s
print(f"ok: regression learns: test mse {got:.4f} against {base:.4f} for the mean")
PY

# Next-token (loss next_token): the user's language model scores every position of a window
# ([n, 32, 128]), each against the id after it. Equal to one device in one process and over 3
# nodes; and it learns: its token accuracy on val.bin ends above always guessing the most
# common id there (numpy's count, the baseline).
job next_lm next_lm.pt "{kind: tokens, path: tokens, vocab: 128, window: 32, stride: 16}"
printf 'loss: {kind: next_token}\n' >> next_lm.yaml
both next_lm --steps 60
$py - <<'PY'
import json
import numpy as np
val = np.fromfile("tokens/val.bin", dtype=np.uint16)
base = np.bincount(val).max() / len(val)
s = json.load(open("run_next_lm/summary.json"))
got = s["final_test_accuracy"]
assert got > base + 0.05, (got, base)
print(f"ok: next-token learns: token accuracy {got:.3f} against {base:.3f} for the most common id")
PY

# A node started by hand reads the user's files only from its --data-dir (the folder of the
# controller's name in it); without one the controller sends each step's inputs. Either way
# the run equals one device.
hand() {  # NAME [NODE ARGS...]
  local name=$1 port=$((20000 + RANDOM % 20000))
  shift
  "$dynapar" controller npy.yaml --bind tcp://127.0.0.1:$port --out $name --steps 6 --verify > /dev/null 2> $name.log &
  local ctl=$!
  for _ in $(seq 100); do [ -f $name/keys/controller.pub ] && break; sleep 0.1; done
  "$dynapar" node --controller tcp://127.0.0.1:$port --keys $name/keys "$@" --device 0 --device 1 --device 2 --device 3 \
    --device 4 --device 5 > /dev/null 2> $name.node.log
  wait $ctl || { tail -20 $name.log; exit 1; }
  $py -c "import json, sys; d = json.load(open('$name/summary.json'))['reference_max_rel_diff']; assert d == 0, d"
}
hand by_hand
grep -q "reads data files only with --data-dir: the controller sends each step's inputs instead" by_hand.node.log ||
  { echo "FAIL: a node without --data-dir read the controller's path"; cat by_hand.node.log; exit 1; }
mkdir -p elsewhere && cp -r npy elsewhere/
hand by_hand_dir --data-dir "$PWD/elsewhere"
grep -q "read [0-9]* samples of the job's 1620" by_hand_dir.node.log ||
  { echo "FAIL: a node with --data-dir did not read its own copy"; cat by_hand_dir.node.log; exit 1; }
echo "ok: by hand, a node reads the user's files only from --data-dir; both runs verified 0"

refused() {  # JOB PATTERN: `dynapar train JOB` exits 2 with PATTERN in its message
  local rc=0
  "$dynapar" train "$1" --steps 1 > /dev/null 2> refused.txt || rc=$?
  [ "$rc" = 2 ] || { echo "FAIL: $1 exited $rc, want 2:"; cat refused.txt; exit 1; }
  grep -q -- "$2" refused.txt || { echo "FAIL: '$2' not in:"; cat refused.txt; exit 1; }
  echo "refused as it should be: $(tail -1 refused.txt)"
}
job few_classes cnn.pt "{kind: npy, path: npy, classes: 5}"
refused few_classes.yaml "npy/train_labels.npy: sample [0-9]* has label [5-9], outside 0..4"
mkdir -p nan && cp npy/train_labels.npy nan/
$py -c "import numpy as np; x = np.load('npy/train_inputs.npy'); x[7, 1, 2, 3] = np.nan; np.save('nan/train_inputs.npy', x)"
job nan cnn.pt "{kind: npy, path: nan}"
refused nan.yaml "nan/train_inputs.npy: sample 7 holds a value that is not finite"
job nan_shards cnn.pt "{kind: npy, path: nan_shards}"
refused nan_shards.yaml "nan_shards/train/part002_inputs.npy: sample 40 holds a value that is not finite"
mkdir -p short && cp npy/train_labels.npy short/ && head -c 1000000 npy/train_inputs.npy > short/train_inputs.npy
job short cnn.pt "{kind: npy, path: short}"
refused short.yaml "short/train_inputs.npy: truncated"
job small_vocab lm.pt "{kind: tokens, path: tokens, vocab: 100, window: 32}"
refused small_vocab.yaml "tokens/train.bin: id [0-9]* at position [0-9]* is not below vocab 100"
job float_labels cnn.pt "{kind: npy, path: reg}"
refused float_labels.yaml "reg/train_labels.npy: labels must be integers (class ids), not float32 (real values to regress: loss mse)"
mkdir -p wide && cp npy/train_inputs.npy wide/
$py -c "import numpy as np; np.save('wide/train_labels.npy', np.zeros((1800, 7), np.float32))"
job wide cnn.pt "{kind: npy, path: wide}"
printf 'loss: {kind: mse}\n' >> wide.yaml
refused wide.yaml "gives 10 values a sample; the data regress 7"
job smooth_mse cnn.pt "{kind: npy, path: reg}"
printf 'loss: {kind: mse, label_smoothing: 0.1}\n' >> smooth_mse.yaml
refused smooth_mse.yaml "loss.label_smoothing' smooths class labels; loss mse has none"
job mse_tokens lm.pt "{kind: tokens, path: tokens, vocab: 128, window: 32}"
printf 'loss: {kind: mse}\n' >> mse_tokens.yaml
refused mse_tokens.yaml "loss mse regresses the labels of kind npy or torch"
job lm_next lm.pt "{kind: tokens, path: tokens, vocab: 128, window: 32}"
printf 'loss: {kind: next_token}\n' >> lm_next.yaml
refused lm_next.yaml "model 'lm' gives one score vector a sample (its output must be \[batch, 32, vocab\])"
job next_as_classes next_lm.pt "{kind: tokens, path: tokens, vocab: 128, window: 32}"
refused next_as_classes.yaml "scores 32 positions a sample, a language model's output: train it with loss next_token"
mkdir -p torch_bad && head -c 3000 torch/train.pt > torch_bad/train.pt
job torch_short cnn.pt "{kind: torch, path: torch_bad}"
refused torch_short.yaml "torch_bad/train.pt: not a file torch.save wrote, or truncated"
$py -c "import torch; torch.save({'images': torch.zeros(4, 3, 16, 16), 'targets': torch.zeros(4)}, 'torch_bad/train.pt')"
refused torch_short.yaml "torch_bad/train.pt: must hold (inputs, labels)"
job cnn_on_tokens cnn.pt "{kind: tokens, path: tokens, vocab: 128, window: 32}"
refused cnn_on_tokens.yaml "takes images of \[3, 16, 16\].*the data are text windows of 32 tokens"
