#!/usr/bin/python3
"""Shows how to bring your own model to dynapar: a TorchScript file whose top-level children
are the layers of the chain. Run with Debian's python3-torch (/usr/bin/python3, not a pyenv
python):  /usr/bin/python3 examples/export_torchscript.py examples/models/tiny_cnn.pt
          /usr/bin/python3 examples/export_torchscript.py examples/models/mlp_flatten.pt mlp_flatten
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


def mlp_flatten() -> nn.Sequential:
    # A 5-layer MLP with LayerNorm, GELU and Tanh whose first layer, Flatten, has no
    # parameters: such a layer trains on any stage, alone or not.
    return nn.Sequential(
        nn.Flatten(),
        nn.Sequential(nn.Linear(784, 64), nn.LayerNorm(64), nn.GELU()),
        nn.Sequential(nn.Linear(64, 64), nn.Tanh()),
        nn.Sequential(nn.Linear(64, 32), nn.LayerNorm(32), nn.GELU()),
        nn.Sequential(nn.Linear(32, 32), nn.Tanh()),
        nn.Linear(32, 10),
    )


if __name__ == "__main__":
    out = sys.argv[1] if len(sys.argv) > 1 else "tiny_cnn.pt"
    which = sys.argv[2] if len(sys.argv) > 2 else "tiny_cnn"
    torch.manual_seed(0)
    torch.jit.script({"tiny_cnn": tiny_cnn, "mlp_flatten": mlp_flatten}[which]()).save(out)
    print(f"wrote {out}")
