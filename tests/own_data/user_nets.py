# The user's own PyTorch models for tests/own_data/own_data.sh, as a user would write them:
# a small CNN for [3, 16, 16] arrays, and a language model over token ids.
import torch
import torch.nn as nn


def small_cnn(classes=10):
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
        nn.Conv2d(8, 16, 3, padding=1), nn.ReLU(),
        nn.Flatten(), nn.Linear(16 * 8 * 8, 64), nn.ReLU(), nn.Linear(64, classes))


class Embed(nn.Module):
    """Token ids (dynapar feeds them as floats, [n, 1, 1, window]) to vectors, plus a learned position."""

    def __init__(self, vocab, dim, window):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(window, dim))

    def forward(self, x):
        return (self.tokens(x.long().flatten(1)) + self.position).flatten(1)


class Dense(nn.Module):
    """A block: linear and ReLU (the exporter cuts between blocks)."""

    def __init__(self, n_in, n_out):
        super().__init__()
        self.linear = nn.Linear(n_in, n_out)
        self.act = nn.ReLU()

    def forward(self, x):
        return self.act(self.linear(x))


def tiny_lm(vocab=128, dim=16, window=32):
    return nn.Sequential(Embed(vocab, dim, window), Dense(window * dim, 128), Dense(128, 128), nn.Linear(128, vocab))


class EmbedSeq(nn.Module):
    """Token ids ([n, 1, 1, window] floats) to [n, window, dim]: a vector a position."""

    def __init__(self, vocab, dim, window):
        super().__init__()
        self.tokens = nn.Embedding(vocab, dim)
        self.position = nn.Parameter(torch.zeros(window, dim))

    def forward(self, x):
        return self.tokens(x.long().flatten(1)) + self.position


class CausalMix(nn.Module):
    """Each position a learned mix of itself and the positions before it (never after)."""

    def __init__(self, window):
        super().__init__()
        self.weight = nn.Parameter(torch.eye(window) + 0.01 * torch.randn(window, window))

    def forward(self, x):
        return torch.relu(torch.einsum("ts,nsd->ntd", self.weight.tril(), x))


def tiny_next_lm(vocab=128, dim=64, window=32, hidden=512):
    """A language model scoring every position's next token: [n, window, vocab] (loss next_token).
    About as large as tiny_lm, so that the edge devices cannot hold it whole."""
    return nn.Sequential(EmbedSeq(vocab, dim, window), CausalMix(window), Dense(dim, hidden), nn.Linear(hidden, vocab))
