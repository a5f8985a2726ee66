"""Models whose cuts broke exactness (issue 71), one per pattern; tests/export/every_cut.sh cuts
each at every boundary in turn and checks the run against one plain device.

Hand-made TorchScript chains (children called in order), each handing the next child a view:
  twist      a child returns fc(x).transpose(1, 2): a transposed view
  permuted   a child returns a conv's output permuted to channels-last (x.permute(0, 2, 3, 1))
Exported by tools/export/dynapar_export.py (FUNCTION names):
  longskip   the stem's output feeds three blocks with BatchNorm and is added back after them
  prenorm    a class token and position embedding on the top module, then pre-norm
             transformer blocks with dropout (a ViT): a block's input feeds two branches
  paramfree  a first segment without parameters, and an encoder's weight reused by the decoder
"""
import sys

import torch
from torch import nn
import torch.nn.functional as F


class Stem(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 256)

    def forward(self, x):
        return torch.relu(self.fc(x.reshape(x.shape[0], 784)))


class Twist(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(16, 16)

    def forward(self, x):
        return self.fc(x.reshape(x.shape[0], 16, 16)).transpose(1, 2)


class TwistHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.fc1 = nn.Linear(16, 16)
        self.fc2 = nn.Linear(256, 10)

    def forward(self, x):
        y = torch.relu(self.fc1(x))
        return self.fc2(y.reshape(y.shape[0], 256))


class TwistNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.twist, self.head = Stem(), Twist(), TwistHead()

    def forward(self, x):
        return self.head(self.twist(self.stem(x)))


class ConvStem(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(1, 8, 3, stride=2, padding=1)

    def forward(self, x):
        return torch.relu(self.conv(x))


class ChannelsLast(nn.Module):  # NCHW -> a NHWC view, mixed over channels
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(8, 8, 3, padding=1)

    def forward(self, x):
        return self.conv(x).permute(0, 2, 3, 1)


class ChannelsLastHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.mix = nn.Linear(8, 12)
        self.fc = nn.Linear(12 * 14 * 14, 10)

    def forward(self, x):
        y = torch.relu(self.mix(x))
        return self.fc(y.reshape(y.shape[0], 12 * 14 * 14))


class PermutedNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem, self.nhwc, self.head = ConvStem(), ChannelsLast(), ChannelsLastHead()

    def forward(self, x):
        return self.head(self.nhwc(self.stem(x)))


class Block(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        return F.relu(self.bn(self.conv(x)))


class LongSkip(nn.Module):
    def __init__(self, classes=10, c=8):
        super().__init__()
        self.stem = nn.Conv2d(1, c, 3, stride=2, padding=1)
        self.b1, self.b2, self.b3 = Block(c), Block(c), Block(c)
        self.b4 = Block(c)
        self.head = nn.Linear(c, classes)

    def forward(self, x):
        s = self.stem(x)
        y = self.b3(self.b2(self.b1(s))) + s
        y = self.b4(y)
        return self.head(F.adaptive_avg_pool2d(y, 1).flatten(1))


class PreNorm(nn.Module):
    def __init__(self, classes=10, dim=32, depth=3, patch=7):
        super().__init__()
        n = (28 // patch) ** 2
        self.patch = nn.Conv2d(1, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.zeros(1, 1, dim))
        self.pos = nn.Parameter(torch.randn(1, n + 1, dim) * 0.02)
        self.blocks = nn.ModuleList([nn.TransformerEncoderLayer(dim, 4, dim * 2, dropout=0.1, batch_first=True, norm_first=True)
                                     for _ in range(depth)])
        self.norm = nn.LayerNorm(dim)
        self.head = nn.Linear(dim, classes)

    def forward(self, x):
        x = self.patch(x).flatten(2).transpose(1, 2)
        x = torch.cat([self.cls.expand(x.shape[0], -1, -1), x], dim=1) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.norm(x[:, 0]))


class ParamFree(nn.Module):
    def __init__(self, classes=10):
        super().__init__()
        self.enc = nn.Linear(784, 32)
        self.mid = nn.Sequential(nn.ReLU(), nn.Linear(32, 32), nn.ReLU())
        self.dec_bias = nn.Parameter(torch.zeros(784))
        self.head = nn.Linear(784, classes)

    def forward(self, x):
        h = self.mid(self.enc(x.flatten(1)))
        r = torch.sigmoid(F.linear(h, self.enc.weight.t(), self.dec_bias))
        return self.head(r)


def longskip(classes=10): return LongSkip(classes)
def prenorm(classes=10): return PreNorm(classes)
def paramfree(classes=10): return ParamFree(classes)


if __name__ == "__main__":  # cut_patterns.py DIR: the hand-made chains as DIR/twist.pt and DIR/permuted.pt
    torch.manual_seed(0)
    torch.jit.script(TwistNet()).save(sys.argv[1] + "/twist.pt")
    torch.jit.script(PermutedNet()).save(sys.argv[1] + "/permuted.pt")
