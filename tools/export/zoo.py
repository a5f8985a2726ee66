#!/usr/bin/python3
"""The torchvision model zoo through dynapar: every classification builder of the installed
torchvision, at the smallest of SIZES (32 to 299 pixels square) it runs on (3 channels, 10
classes), exported by tools/export/dynapar_export.py and trained 3 steps on a 2-stage pipeline
with --verify beside one plain device (a job this writes, on random images it writes as .npy).
One row a model:
input, parameters, segments, and trained (the difference), refused (the exporter's one line)
or skipped (over --max-params); a Python traceback in any output is a failure of its own.

    /usr/bin/python3 tools/export/zoo.py --dynapar build/bin/dynapar --out out/zoo
    /usr/bin/python3 tools/export/zoo.py --dynapar build/bin/dynapar --out out/zoo --models resnet18,googlenet

Writes OUT/zoo.jsonl (a row a model, as it goes) and OUT/zoo.md (the table docs/MODELS.md
shows); exits 1 if a row holds a traceback or a trained model differs from its reference.
"""
import argparse
import contextlib
import io
import json
import os
import subprocess
import sys
import time
import warnings

import numpy as np
import torch
import torchvision

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, here)
import dynapar_export as exporter  # noqa: E402  (models built as the exporter builds them)

SIZES = (32, 48, 64, 96, 128, 160, 192, 224, 299)


def builders():
    return sorted(torchvision.models.list_models(module=torchvision.models))


def smallest_input(model):
    """The smallest of SIZES the model runs on, square, 3 channels (None: none of them)."""
    return next((size for size in SIZES if exporter.runs_at(model, [2, 3], size)), None)


def write_data(folder, size, n=64):
    os.makedirs(folder, exist_ok=True)
    g = np.random.default_rng(size)
    np.save(os.path.join(folder, "train_inputs.npy"), g.standard_normal((n, 3, size, size), dtype=np.float32))
    np.save(os.path.join(folder, "train_labels.npy"), (np.arange(n) % 10).astype(np.int64))


def run(cmd, cwd, timeout):
    t0 = time.monotonic()
    try:
        r = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=timeout,
                           env=dict(os.environ, OPENBLAS_NUM_THREADS="1"))
        return r.returncode, r.stdout, r.stderr, time.monotonic() - t0
    except subprocess.TimeoutExpired:
        return None, "", f"timed out after {timeout} s", time.monotonic() - t0


def last_line(text):
    lines = [l for l in text.strip().split("\n") if l.strip()]
    return lines[-1].replace("dynapar_export: ", "").replace("dynapar: ", "") if lines else ""


def job(name, model_file, data, segments):
    cut = max(1, segments // 2)
    return f"""name: zoo_{name}
model: {model_file}
data: {{kind: npy, path: {data}}}
seed: 1
batch: 16
micro_batch: 4
steps: 3
schedule: 1f1b
optimizer: {{kind: sgd, lr: 0.01, momentum: 0.9}}
hash_every: 0
step_deadline_s: 900   # the default's first step (5 s, before any step was measured) is short for a large model here
devices:
  - {{id: 0, speed: 1, memory_gb: 8}}
  - {{id: 1, speed: 1, memory_gb: 8}}
plan:
  - {{devices: [0, 1], splits: [0, {cut}, {segments}], share: 16, micro_batch: 4}}
"""


def one(name, args, out):
    row = {"model": name}
    kwargs = {"num_classes": 10}
    try:
        with contextlib.redirect_stdout(io.StringIO()):  # its notes (auxiliary heads off) come with the export
            model = exporter.load_model(name, kwargs)
    except Exception as e:
        row.update(result="refused", reason=f"cannot build: {type(e).__name__}: {e}")
        return row
    row["parameters"] = sum(p.numel() for p in model.parameters())
    if row["parameters"] > args.max_params:
        row.update(result="skipped", reason=f"over {args.max_params / 1e6:.0f} M parameters")
        return row
    size = smallest_input(model)
    del model
    if size is None:
        row.update(result="refused", reason=f"runs at none of {', '.join(map(str, SIZES))}")
        return row
    row["input"] = f"3,{size},{size}"
    work = os.path.join(out, name)
    os.makedirs(work, exist_ok=True)
    rc, so, se, secs = run(["/usr/bin/python3", os.path.join(here, "dynapar_export.py"), name, "--input", row["input"],
                            "--kwargs", json.dumps(kwargs), "--out", "model.pt"], work, args.timeout)
    row["export_s"] = round(secs, 1)
    row["traceback"] = "Traceback" in so + se
    if rc != 0:
        row.update(result="refused", reason=last_line(se))
        return row
    head = next(l for l in so.split("\n") if " segments, " in l)
    row["segments"] = int(head.split(": ")[1].split(" segments")[0])
    data = os.path.join(out, f"data_{size}")
    if not os.path.exists(os.path.join(data, "train_labels.npy")):
        write_data(data, size)
    with open(os.path.join(work, "job.yaml"), "w") as f:
        f.write(job(name, os.path.join(work, "model.pt"), data, row["segments"]))
    rc, so, se, secs = run([args.dynapar, "train", "job.yaml", "--verify", "--out", "run"], work, args.timeout)
    row["train_s"] = round(secs, 1)
    row["traceback"] = row["traceback"] or "Traceback" in so + se
    if rc != 0:
        row.update(result="failed", reason=last_line(se))
        return row
    summary = json.load(open(os.path.join(work, "run", "summary.json")))
    row.update(result="trained", difference=summary["reference_max_rel_diff"])
    return row


def table(rows):
    out = ["| model | input | parameters | segments | result | export s | train s |", "|---|---|---:|---:|---|---:|---:|"]
    for r in rows:
        what = f"trained, difference {r['difference']:g}" if r["result"] == "trained" else f"{r['result']}: {r.get('reason', '')}"
        if r.get("traceback"):
            what += " (a traceback)"
        out.append(f"| {r['model']} | {r.get('input', '')} | {r.get('parameters', 0):,} | {r.get('segments', '')} | {what} | "
                   f"{r.get('export_s', '')} | {r.get('train_s', '')} |")
    under = [r for r in rows if r["result"] != "skipped"]
    good = [r for r in under if r["result"] == "trained" and r["difference"] == 0]
    out.append("")
    out.append(f"{len(good)} of {len(under)} builders under the size cap trained with difference 0; "
               f"{len(rows) - len(under)} skipped for size.")
    return "\n".join(out) + "\n"


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dynapar", required=True, help="the dynapar binary")
    ap.add_argument("--out", required=True, help="a directory for the models, jobs, runs and the table")
    ap.add_argument("--models", default="", help="comma-separated builders (default: every classification builder)")
    ap.add_argument("--max-params", type=float, default=150e6, help="larger models are listed as skipped")
    ap.add_argument("--timeout", type=int, default=1800, help="seconds for one export or one training run")
    args = ap.parse_args()
    args.dynapar, args.out = os.path.abspath(args.dynapar), os.path.abspath(args.out)  # each run has its own cwd
    if not os.access(args.dynapar, os.X_OK):
        print(f"zoo: --dynapar {args.dynapar}: not an executable", file=sys.stderr)
        return 2
    warnings.filterwarnings("ignore")
    torch.set_num_threads(1)
    names = args.models.split(",") if args.models else builders()
    unknown = [n for n in names if n not in builders()]
    if unknown:
        print(f"zoo: not torchvision classification builders: {', '.join(unknown)}", file=sys.stderr)
        return 2
    os.makedirs(args.out, exist_ok=True)
    rows = []
    with open(os.path.join(args.out, "zoo.jsonl"), "w") as log:
        for name in names:
            row = one(name, args, args.out)
            rows.append(row)
            log.write(json.dumps(row) + "\n")
            log.flush()
            print(json.dumps(row), flush=True)
    text = table(rows)
    with open(os.path.join(args.out, "zoo.md"), "w") as f:
        f.write(text)
    print(text)
    bad = [r for r in rows if r.get("traceback") or (r["result"] == "trained" and r["difference"] != 0)]
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
