"""Models a user might bring, written here as a user would (tests/export/*)."""
import torch
from torch import nn


class Block(nn.Module):
    """A GPT block: pre-norm causal self-attention and an MLP, each around a residual; [t, n, d]."""

    def __init__(self, d, heads, p):
        super().__init__()
        self.ln1 = nn.LayerNorm(d)
        self.attn = nn.MultiheadAttention(d, heads, dropout=p)
        self.ln2 = nn.LayerNorm(d)
        self.mlp = nn.Sequential(nn.Linear(d, 4 * d), nn.GELU(), nn.Linear(4 * d, d))
        self.drop = nn.Dropout(p)

    def forward(self, x):
        t = x.size(0)
        future = x.new_ones((t, t), dtype=torch.bool).triu(1)
        h = self.ln1(x)
        a = self.attn(h, h, h, attn_mask=future, need_weights=False)[0]
        x = x + self.drop(a)
        return x + self.drop(self.mlp(self.ln2(x)))


class GPT(nn.Module):
    """Image rows as tokens (28 of 28 pixels), a learned position, causal blocks, the class at the last token."""

    def __init__(self, d=32, heads=4, layers=2, p=0.1, classes=10):
        super().__init__()
        self.proj = nn.Linear(28, d)
        self.pos = nn.Parameter(torch.randn(28, 1, d) * 0.02)
        self.blocks = nn.ModuleList([Block(d, heads, p) for _ in range(layers)])
        self.ln = nn.LayerNorm(d)
        self.head = nn.Linear(d, classes)

    def forward(self, x):
        x = self.proj(x.flatten(1, 2).transpose(0, 1).contiguous()) + self.pos
        for b in self.blocks:
            x = b(x)
        return self.head(self.ln(x[-1]))


def gpt(p=0.1):
    return GPT(p=p)


def encoder(p=0.0):
    """torch.nn.TransformerEncoderLayer blocks, mean-pooled."""
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.proj = nn.Linear(28, 32)
            self.layers = nn.ModuleList([nn.TransformerEncoderLayer(32, 4, 64, dropout=p) for _ in range(2)])
            self.fc = nn.Linear(32, 10)

        def forward(self, x):
            x = torch.relu(self.proj(x.flatten(1, 2).transpose(0, 1).contiguous()))
            for layer in self.layers:
                x = layer(x)
            return self.fc(x.mean(0))
    return Enc()


def bad_two_outputs():
    class Two(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)

        def forward(self, x):
            y = self.fc(x.flatten(1))
            return y, y
    return Two()


class Scaled(nn.Module):
    """A parameter on the top module, used in its forward: no chain of its children computes it."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(784, 10)
        self.scale = nn.Parameter(torch.ones(1))

    def forward(self, x):
        return self.fc(x.flatten(1)) * self.scale


class FailsLater(nn.Module):
    """Passes the loader's check and the profile (copies), fails on a device in training."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        if self.calls > 40:
            raise RuntimeError("this layer fails on its 41st forward")
        return x


def fails_at_run_time():
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 10), FailsLater())


class Unpacks(nn.Module):
    """A block whose forward unpacks x.size(): torch.fx cannot trace inside it."""

    def __init__(self, c):
        super().__init__()
        self.conv = nn.Conv2d(c, c, 3, padding=1)
        self.bn = nn.BatchNorm2d(c)

    def forward(self, x):
        b, c, h, w = x.size()
        return torch.relu(self.bn(self.conv(x))).view(b, c, h, w) + x


def untraceable_block():
    return nn.Sequential(nn.Conv2d(1, 8, 3, padding=1), Unpacks(8), nn.ReLU(), Unpacks(8),
                         nn.Sequential(nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(8, 10)))


class Transposed(nn.Module):
    """Hands a transposed view (not contiguous) to the next block."""

    def __init__(self):
        super().__init__()
        self.fc = nn.Linear(28, 28)
        self.act = nn.Tanh()

    def forward(self, x):
        return self.act(self.fc(x.flatten(0, 1))).view(x.shape[0], 28, 28).transpose(1, 2)


def view_at_cut():
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = Transposed()
            self.b = nn.Sequential(nn.Flatten(), nn.Linear(784, 10))

        def forward(self, x):
            return self.b(self.a(x.flatten(1).view(-1, 28, 28)))
    return Net()


class Dense(nn.Module):
    def __init__(self, n_in, n_out):
        super().__init__()
        self.fc = nn.Linear(n_in, n_out)

    def forward(self, x):
        return torch.relu(self.fc(x))


def many_plain_layers():
    """Twenty plain layers between two blocks: the plain run is one segment, named by its ends."""
    plain = [m for _ in range(10) for m in (nn.Linear(64, 64), nn.ReLU())]
    return nn.Sequential(nn.Flatten(), Dense(784, 64), *plain, Dense(64, 64), nn.Linear(64, 10))


def named_outputs():
    from collections import namedtuple
    Out = namedtuple("Out", "logits aux")

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.fc = nn.Linear(784, 10)
            self.aux = nn.Linear(784, 10)

        def forward(self, x):
            return Out(self.fc(x.flatten(1)), self.aux(x.flatten(1)))
    return Net()


def raises():
    raise ValueError("this builder needs a config file")


class Residual(nn.Module):
    """A residual block with stochastic depth (torchvision.ops, as EfficientNet and ConvNeXt use)."""

    def __init__(self, d, p):
        super().__init__()
        from torchvision.ops import StochasticDepth
        self.fc = nn.Linear(d, d)
        self.drop = StochasticDepth(p, "row")

    def forward(self, x):
        return x + self.drop(torch.relu(self.fc(x)))


def stochastic_depth(p=0.5):
    return nn.Sequential(nn.Flatten(), nn.Linear(784, 32), Residual(32, p), Residual(32, p), Residual(32, p), nn.Linear(32, 10))
