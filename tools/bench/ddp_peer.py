#!/usr/bin/python3
"""The PyTorch DDP peer of `dynapar launch` (docs/BENCHMARKS.md): the same model (the CNN, or
ResNet-18 with --model resnet18), batch, optimizer
and number of processes, Gloo on loopback, one intra-op thread per process. Each rank takes
batch / world samples a step. --slow RANK:SPEED dilates that rank's compute as dynapar's
emulation does: each forward and backward lasts its thread CPU time / SPEED (it sleeps the
rest). Prints one JSON line: steps, mean step seconds (after --warmup), samples/s.

Debian's python3-torch: /usr/bin/python3 tools/bench/ddp_peer.py --procs 3 --batch 96
"""
import argparse, gzip, json, os, struct, sys, time

import torch
import torch.distributed as dist
import torch.multiprocessing as mp
import torch.nn as nn

DATA = "/usr/share/datasets/fashion-mnist"


def load_images(n):
    with gzip.open(os.path.join(DATA, "train-images-idx3-ubyte.gz")) as f:
        _, count, rows, cols = struct.unpack(">IIII", f.read(16))
        x = torch.frombuffer(bytearray(f.read(n * rows * cols)), dtype=torch.uint8)
    with gzip.open(os.path.join(DATA, "train-labels-idx1-ubyte.gz")) as f:
        f.read(8)
        y = torch.frombuffer(bytearray(f.read(n)), dtype=torch.uint8).long()
    x = (x.view(n, 1, rows, cols).float() / 255.0 - 0.2860) / 0.3530
    return x, y


def cnn():  # runtime/model/models.cpp "cnn"
    return nn.Sequential(
        nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Flatten(), nn.Linear(3136, 128), nn.ReLU(), nn.Linear(128, 10))


class BasicBlock(nn.Module):  # runtime/model/models.cpp BasicBlock: no batch statistics
    def __init__(self, cin, cout, stride):
        super().__init__()
        self.c1 = nn.Conv2d(cin, cout, 3, stride=stride, padding=1)
        self.c2 = nn.Conv2d(cout, cout, 3, padding=1)
        self.proj = nn.Conv2d(cin, cout, 1, stride=stride) if stride != 1 or cin != cout else None

    def forward(self, x):
        shortcut = self.proj(x) if self.proj is not None else x
        return torch.relu(shortcut + self.c2(torch.relu(self.c1(x))))


def resnet18():  # runtime/model/models.cpp "resnet18": 11.2 M parameters
    layers = [nn.Conv2d(1, 64, 3, stride=2, padding=1), nn.ReLU()]
    cin = 64
    for s, w in enumerate([64, 128, 256, 512]):
        for b in range(2):
            layers.append(BasicBlock(cin, w, 2 if s > 0 and b == 0 else 1))
            cin = w
    layers += [nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(512, 10)]
    return nn.Sequential(*layers)


def dilate(t0, cpu0, speed):
    if speed >= 1:
        return
    left = (time.thread_time() - cpu0) / speed - (time.perf_counter() - t0)
    if left > 0:
        time.sleep(left)


def worker(rank, a, port):
    torch.set_num_threads(1)
    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port))
    dist.init_process_group("gloo", rank=rank, world_size=a.procs)
    torch.manual_seed(a.seed)
    model = nn.parallel.DistributedDataParallel(resnet18() if a.model == "resnet18" else cnn())
    opt = torch.optim.Adam(model.parameters(), lr=a.lr)
    per = a.batch // a.procs
    x, y = load_images(a.batch * 64)
    speed = 1.0
    for s in a.slow:
        r, v = s.split(":")
        if int(r) == rank:
            speed = float(v)
    loss_fn = nn.CrossEntropyLoss()
    times = []
    for step in range(a.steps):
        lo = (step % 64) * a.batch + rank * per
        xb, yb = x[lo:lo + per], y[lo:lo + per]
        t_step = time.perf_counter()
        opt.zero_grad()
        t0, c0 = time.perf_counter(), time.thread_time()
        out = model(xb)
        loss = loss_fn(out, yb)
        dilate(t0, c0, speed)
        t0, c0 = time.perf_counter(), time.thread_time()
        loss.backward()  # DDP's all-reduce runs inside backward
        dilate(t0, c0, speed)
        opt.step()
        times.append(time.perf_counter() - t_step)
    dist.barrier()
    if rank == 0:
        steady = times[a.warmup:]
        mean = sum(steady) / len(steady)
        print(json.dumps({"peer": "pytorch_ddp_gloo", "model": a.model, "procs": a.procs, "batch": a.batch, "steps": a.steps,
                          "slow": a.slow, "mean_step_s": mean, "samples_per_s": a.batch / mean}))
    dist.destroy_process_group()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--procs", type=int, default=3)
    p.add_argument("--model", choices=["cnn", "resnet18"], default="cnn")
    p.add_argument("--batch", type=int, default=96)
    p.add_argument("--steps", type=int, default=200)
    p.add_argument("--warmup", type=int, default=10)
    p.add_argument("--lr", type=float, default=0.002)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--port", type=int, default=29511)
    p.add_argument("--slow", action="append", default=[], help="RANK:SPEED, speed in (0, 1]")
    a = p.parse_args()
    if a.batch % a.procs or a.steps <= a.warmup:
        sys.exit("batch must divide by procs and steps exceed warmup")
    mp.spawn(worker, args=(a, a.port), nprocs=a.procs, join=True)


if __name__ == "__main__":
    main()
