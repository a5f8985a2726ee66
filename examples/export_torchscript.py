#!/usr/bin/python3
"""Shows how to bring your own model to dynapar: a TorchScript file whose top-level children
are the layers of the chain. Run with Debian's python3-torch (/usr/bin/python3, not a pyenv
python):  /usr/bin/python3 examples/export_torchscript.py examples/models/tiny_cnn.pt
then:     build/bin/dynapar profile examples/models/tiny_cnn.pt
"""
import sys

import torch
from torch import nn


def tiny_cnn() -> nn.Sequential:
    # Each child becomes one layer that dynapar can place on a device; no BatchNorm, so that
    # split runs stay exact.
    return nn.Sequential(
        nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Sequential(nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2)),
        nn.Sequential(nn.Flatten(), nn.Linear(16 * 7 * 7, 64), nn.ReLU()),
        nn.Linear(64, 10),
    )


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tiny_cnn.pt"
    torch.manual_seed(0)
    torch.jit.script(tiny_cnn()).save(out)
    print(f"wrote {out}")
