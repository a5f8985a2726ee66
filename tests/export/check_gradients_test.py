"""The exporter refuses a chain whose backward is not the model's (issue 71): a chain with the
model's forward bits but another backward (a straight-through term that adds 0 forward and
scales the gradient) is refused, naming the gradient; the model's own chain passes, in one
graph and cut at every boundary. Run: /usr/bin/python3 check_gradients_test.py EXPORTER"""
import importlib.util
import sys

import torch
from torch import nn

spec = importlib.util.spec_from_file_location("dynapar_export", sys.argv[1])
exporter = importlib.util.module_from_spec(spec)
spec.loader.exec_module(exporter)


class Scaled(nn.Module):  # forward: exactly inner(x); backward through x: 1.001 x
    def __init__(self, inner):
        super().__init__()
        self.inner = inner

    def forward(self, x):
        return self.inner(x + (x - x.detach()) * 1e-3)


torch.manual_seed(0)
a, b = nn.Linear(6, 5), nn.Sequential(nn.Tanh(), nn.Linear(5, 3))
model = nn.Sequential(a, b)
x = torch.randn(4, 6)
exporter.check_gradients(model, {"a": a, "b": b}, x, 0)  # its own chain: the same bits
bad = {"a": a, "b": Scaled(b)}
assert torch.equal(b(a(x)), bad["b"](a(x))), "the doctored chain must keep the forward's bits"
try:
    exporter.check_gradients(model, bad, x, 0)
except exporter.ExportError as e:
    assert "differs from the model's" in str(e) and "gradient" in str(e), e
    print("refused as it should be:", e)
else:
    raise SystemExit("FAIL: a chain with another backward was accepted")
