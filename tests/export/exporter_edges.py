#!/usr/bin/python3
"""What a user's model meets at the exporter's edges (issue 73), each checked against the
model itself or a hand-derived fact, never against an earlier output:
- a block torch.fx cannot trace inside (it unpacks x.size()) is kept whole: the export
  names it, cuts still fall at the blocks, the chain's forward is the model's, bit for bit,
  and dynapar trains it on a 2-stage pipeline 3 steps with --verify difference 0;
- stochastic depth (torchvision.ops) reads the training mode: kept whole, so the chain draws
  as the model does in both modes; it trains on 2 stages with --verify 0;
- GoogLeNet is exported without its auxiliary heads, saying so, and its chain is the model's;
- AlexNet on a sample too small for it: one line, exit 2, naming the smallest square input,
  which runs (and one pixel less does not: both checked by running torchvision's model);
- a forward that returns a named tuple, a builder that raises: one line, exit 2, no traceback;
  with --debug the traceback is shown;
- a view handed across a cut arrives contiguous (the saved chain's first segment, run);
- a run of twenty plain layers is one segment named by its ends, not by every layer.

    exporter_edges.py EXPORTER WORK_DIR DYNAPAR
"""
import os
import subprocess
import sys

import torch
import torchvision

here = os.path.dirname(os.path.abspath(__file__))
import json  # noqa: E402

exporter, work, dynapar = sys.argv[1], sys.argv[2], sys.argv[3]
os.makedirs(work, exist_ok=True)
models = os.path.join(here, "user_models.py")
sys.path.insert(0, here)
import user_models  # noqa: E402


def export(*args):
    r = subprocess.run(["/usr/bin/python3", exporter, *args], capture_output=True, text=True, cwd=work,
                       env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    return r.returncode, r.stdout, r.stderr


def refused(args, *wanted):
    rc, out, err = export(*args)
    assert rc == 2, f"{args}: exit {rc}, want 2\n{out}\n{err}"
    lines = [l for l in err.strip().split("\n") if l]
    assert len(lines) == 1 and "Traceback" not in err, f"{args}: not one line:\n{err}"
    for w in wanted:
        assert w in err, f"{args}: '{w}' not in: {err}"
    return err


def segments(out):
    rows = out.split("output (a sample batch of 2)\n")[1].split("  chain == model")[0]
    return [l.split()[0] for l in rows.strip().split("\n")]


def train_2_stages(name, splits):
    """3 steps of the exported NAME.pt on a 2-stage pipeline, --verify against one plain device."""
    with open(os.path.join(work, name + ".yaml"), "w") as f:
        f.write(f"""name: {name}
model: {work}/{name}.pt
data: fashion_mnist
seed: 3
batch: 32
micro_batch: 8
steps: 3
schedule: 1f1b
optimizer: {{kind: adam, lr: 0.001}}
devices:
  - {{id: 0, speed: 1, memory_gb: 4}}
  - {{id: 1, speed: 1, memory_gb: 4}}
plan:
  - {{devices: [0, 1], splits: {splits}, share: 32, micro_batch: 8}}
""")
    r = subprocess.run([dynapar, "train", name + ".yaml", "--verify", "--out", "run_" + name], cwd=work,
                       capture_output=True, text=True, env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
    assert r.returncode == 0, r.stdout + r.stderr
    summary = json.load(open(os.path.join(work, "run_" + name, "summary.json")))
    assert summary["steps"] == 3 and summary["reference_max_rel_diff"] == 0, summary


# A block torch.fx cannot trace inside.
rc, out, err = export(f"{models}:untraceable_block", "--input", "1,28,28", "--out", "untraceable.pt")
assert rc == 0, out + err
assert "kept whole (torch.fx cannot trace inside; scripted as they are): 1, 3" in out, out
assert segments(out) == ["stem", "1", "2", "3", "head"], segments(out)
assert "chain == model forward: bit-identical" in out, out
train_2_stages("untraceable", "[0, 2, 5]")
print("untraceable blocks kept whole:", segments(out), "; 2-stage pipeline, --verify difference 0")

# Stochastic depth reads the training mode: kept whole, the chain draws as the model does, in
# training mode and not in evaluation mode (the export checks both), and over 2 stages.
rc, out, err = export(f"{models}:stochastic_depth", "--input", "1,28,28", "--out", "depth.pt")
assert rc == 0, out + err
assert "kept whole (they read the training mode as they run): 2.drop, 3.drop, 4.drop" in out, out
assert "chain == model forward: bit-identical" in out, out
train_2_stages("depth", "[0, 2, 5]")
print("stochastic depth kept whole; 2-stage pipeline, --verify difference 0")

# GoogLeNet: the main output, without the auxiliary heads.
rc, out, err = export("googlenet", "--input", "3,64,64", "--kwargs", '{"num_classes": 10}', "--out", "googlenet.pt")
assert rc == 0, out + err
assert "auxiliary heads off (aux_logits=False)" in out and "chain == model forward: bit-identical" in out, out
assert "Traceback" not in err and "FutureWarning" not in err, err
torch.manual_seed(0)
want = sum(p.numel() for p in torchvision.models.googlenet(num_classes=10, aux_logits=False, init_weights=True).parameters())
assert f", {want} parameters," in out, (want, out)
print("googlenet: main output only,", want, "parameters")

# AlexNet at 3x32x32: too small; the size named runs, one less does not.
err = refused(["alexnet", "--input", "3,32,32", "--out", "alexnet.pt"], "cannot run on a sample of 3x32x32",
              "the smallest square input it takes is --input 3,")
size = int(err.split("--input 3,")[1].split(",")[0])
net = torchvision.models.alexnet().eval()


def runs(n):
    try:
        with torch.no_grad():
            net(torch.zeros(2, 3, n, n))
        return True
    except RuntimeError:
        return False


assert runs(size) and not runs(size - 1), size
print("alexnet: smallest input", size)

# A named tuple out, a builder that raises: one line; --debug: the traceback.
refused([f"{models}:named_outputs", "--input", "1,28,28", "--out", "n.pt"], "returns Out in training mode, not one tensor")
refused([f"{models}:raises", "--input", "1,28,28", "--out", "r.pt"], "ValueError: this builder needs a config file",
        "user_models.py")
rc, out, err = export(f"{models}:raises", "--input", "1,28,28", "--out", "r.pt", "--debug")
assert rc != 0 and "Traceback" in err, err
refused(["resnet18", "--input", "1,28,28", "--kwargs", "{oops", "--out", "k.pt"], "--kwargs '{oops': not a JSON object")

# A view across a cut arrives contiguous; the chain is still the model's.
rc, out, err = export(f"{models}:view_at_cut", "--input", "1,28,28", "--out", "view.pt")
assert rc == 0 and "bit-identical" in out, out + err
chain = dict(torch.jit.load(os.path.join(work, "view.pt")).named_children())
assert list(chain) == ["stem", "a", "head"], list(chain)
x = torch.randn(2, 28, 28)
assert not user_models.Transposed()(x).is_contiguous()  # the model's block hands a view on
assert chain["a"](x).is_contiguous(), "segment a's output is not contiguous"
print("a view across the cut arrives contiguous")

# Twenty plain layers: one segment named by its ends.
rc, out, err = export(f"{models}:many_plain_layers", "--input", "1,28,28", "--out", "plain.pt")
assert rc == 0, out + err
names = segments(out)
assert names == ["stem", "1", "2_to_21", "22", "head"], names
print("segment names:", names)
