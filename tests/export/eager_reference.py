"""The independent reference for a model brought as TorchScript (tests/export/byo_model.sh):
the user's model in PyTorch eager, given the exported chain's initial weights, trained on the
same Fashion-MNIST batches dynapar drew, one SGD step per batch; then compared, parameter by
parameter and buffer by buffer, with the model dynapar trained (train --save-model).

usage: eager_reference.py MODEL_SPEC EXPORTED.pt TRAINED.pt SEED BATCH STEPS LR MOMENTUM [KWARGS_JSON IN_CHANNELS]
"""
import gzip
import json
import sys

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, sys.path[0] + "/../../tools/export")
import dynapar_export  # noqa: E402  (loads the model as the exporter does)

M = (1 << 64) - 1


class Rng:  # dynapar's common/rng.cpp: xoshiro256** seeded by splitmix64, written again here
    def __init__(self, seed):
        self.s = []
        x = seed
        for _ in range(4):
            x = (x + 0x9E3779B97F4A7C15) & M
            z = x
            z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & M
            z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & M
            self.s.append(z ^ (z >> 31))

    def next(self):
        s = self.s
        rotl = lambda x, k: ((x << k) | (x >> (64 - k))) & M
        result = (rotl((s[1] * 5) & M, 7) * 9) & M
        t = (s[1] << 17) & M
        s[2] ^= s[0]
        s[3] ^= s[1]
        s[1] ^= s[2]
        s[0] ^= s[3]
        s[2] ^= t
        s[3] = rotl(s[3], 45)
        return result

    def below(self, n):
        limit = M - M % n
        while True:
            x = self.next()
            if x < limit:
                return x % n


def permutation(n, seed, epoch):  # data/sampler.cpp, docs/RUNTIME.md, "Why a run equals one device"
    r = Rng(seed ^ ((epoch * 0x9E3779B97F4A7C15) & M))
    p = list(range(n))
    for i in range(n - 1, 0, -1):
        j = r.below(i + 1)
        p[i], p[j] = p[j], p[i]
    return p


def fashion_mnist():
    d = "/usr/share/datasets/fashion-mnist/"
    images = np.frombuffer(gzip.open(d + "train-images-idx3-ubyte.gz").read()[16:], np.uint8).reshape(-1, 1, 28, 28)
    labels = np.frombuffer(gzip.open(d + "train-labels-idx1-ubyte.gz").read()[8:], np.uint8)
    return images, labels


def original_names(chain_state):
    # A segment keeps the model's own module paths under its name: "layer1_0.layer1.0.conv1.weight".
    return {k.split(".", 1)[1]: v for k, v in chain_state.items()}


def main():
    spec, exported, trained, seed, batch, steps, lr, momentum = sys.argv[1:9]
    kwargs = json.loads(sys.argv[9]) if len(sys.argv) > 9 else {}
    in_channels = int(sys.argv[10]) if len(sys.argv) > 10 else 0
    seed, batch, steps, lr, momentum = int(seed), int(batch), int(steps), float(lr), float(momentum)
    model = dynapar_export.load_model(spec, kwargs, seed)
    if in_channels:
        dynapar_export.set_in_channels(model, in_channels)
    chain = torch.jit.load(exported)
    model.load_state_dict(original_names(chain.state_dict()))
    model.train()
    chain.train()
    images, labels = fashion_mnist()

    def batch_of(ids):
        x = (torch.from_numpy(images[ids]).to(torch.float32) / 255.0 - 0.2860) / 0.3530
        return x, torch.from_numpy(labels[ids].astype(np.int64))

    # (a) the exported chain computes the model's forward (no step taken: copies).
    x, _ = batch_of(list(range(8)))
    import copy
    with torch.no_grad():
        want = copy.deepcopy(model)(x)
        got = copy.deepcopy(chain)(x)
    a_diff = (got - want).abs().max().item()
    print(f"(a) chain(x) vs model(x): max abs difference {a_diff}")
    assert torch.equal(got, want), a_diff

    # (b) the same SGD steps in eager PyTorch: the summed loss's gradient over the batch.
    opt = torch.optim.SGD(model.parameters(), lr=lr, momentum=momentum)
    per_epoch = len(labels) // batch
    for t in range(steps):
        p = permutation(len(labels), seed, t // per_epoch)
        ids = p[(t % per_epoch) * batch:(t % per_epoch + 1) * batch]
        x, y = batch_of(ids)
        opt.zero_grad()
        loss = F.cross_entropy(model(x), y, reduction="sum")
        loss.backward()
        for q in model.parameters():
            q.grad = q.grad / batch
        opt.step()
    theirs = original_names(torch.jit.load(trained).state_dict())
    ours = model.state_dict()
    assert set(theirs) == set(ours), (sorted(set(theirs) ^ set(ours)))
    worst, name = 0.0, ""
    for k, v in ours.items():
        w = theirs[k]
        if not torch.equal(v, w):
            d = ((v.double() - w.double()).abs().max() / v.double().abs().max().clamp_min(1e-30)).item()
            if d >= worst:
                worst, name = d, k
    changed = sum(not torch.equal(v, original_names(chain.state_dict())[k]) for k, v in ours.items())
    print(f"(b) {steps} SGD steps, dynapar vs eager PyTorch: {len(ours)} tensors ({changed} changed by training), "
          f"largest relative difference {worst}" + (f" ({name})" if name else ""))
    assert changed > 0, "training changed nothing: the comparison would prove nothing"
    assert worst == 0, (name, worst)


if __name__ == "__main__":
    main()
