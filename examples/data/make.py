#!/usr/bin/python3
"""Writes data of each kind a job's `data:` map reads (docs/FORMATS.md, "Data") from Debian's
packages, for examples/jobs/own_*.yaml:

    npy/     train_inputs.npy [60000, 1, 28, 28] uint8 and train_labels.npy [60000] int64,
             val_inputs.npy / val_labels.npy (Fashion-MNIST's 10 000 test images)
    tokens/  train.bin and val.bin: the fortunes corpus (its last 8192 ids: val.bin) as uint16 character ids below 128
    reg/     the same inputs (links to npy/'s) with train_labels.npy / val_labels.npy [n, 10]
             float32 to regress (loss mse): each image's brightness in a 10-band grid of rows
             (the mean pixel of each band of 28 / 10 rows, in [0, 1])
    torch/   train.pt and val.pt: torch.save((inputs, labels)) of the same arrays as npy/
    images/  train/CLASS/*.png (3000) and val/CLASS/*.png (600), Fashion-MNIST as PNG files

Run from anywhere: /usr/bin/python3 examples/data/make.py  (writes next to this file)."""
import gzip
import os

import numpy as np
import torch
from PIL import Image

here = os.path.dirname(os.path.abspath(__file__))
src = "/usr/share/datasets/fashion-mnist"
names = ["tshirt", "trouser", "pullover", "dress", "coat", "sandal", "shirt", "sneaker", "bag", "boot"]


def fashion(split):
    images = np.frombuffer(gzip.open(f"{src}/{split}-images-idx3-ubyte.gz").read(), np.uint8, offset=16).reshape(-1, 1, 28, 28)
    labels = np.frombuffer(gzip.open(f"{src}/{split}-labels-idx1-ubyte.gz").read(), np.uint8, offset=8)
    return images, labels.astype(np.int64)


os.makedirs(f"{here}/npy", exist_ok=True)
for split, part in (("train", "train"), ("t10k", "val")):
    x, y = fashion(split)
    np.save(f"{here}/npy/{part}_inputs.npy", x)
    np.save(f"{here}/npy/{part}_labels.npy", y)
    for i in range(3000 if part == "train" else 600):
        folder = f"{here}/images/{part}/{names[y[i]]}"
        os.makedirs(folder, exist_ok=True)
        Image.fromarray(x[i, 0]).save(f"{folder}/{i:05d}.png")
    os.makedirs(f"{here}/torch", exist_ok=True)
    torch.save((torch.from_numpy(x.copy()), torch.from_numpy(y.copy())), f"{here}/torch/{part}.pt")
    os.makedirs(f"{here}/reg", exist_ok=True)
    bands = np.array_split(np.arange(28), 10)
    np.save(f"{here}/reg/{part}_labels.npy", np.stack([x[:, 0, b, :].mean(axis=(1, 2)) / 255 for b in bands], 1).astype(np.float32))
    link = f"{here}/reg/{part}_inputs.npy"
    if not os.path.lexists(link):
        os.symlink(f"../npy/{part}_inputs.npy", link)

os.makedirs(f"{here}/tokens", exist_ok=True)
corpus = "/usr/share/games/fortunes"  # every file without an extension (.dat, .u8 are indexes)
text = b"".join(open(f"{corpus}/{f}", "rb").read() for f in sorted(os.listdir(corpus))
                if "." not in f and os.path.isfile(f"{corpus}/{f}"))
ids = np.minimum(np.frombuffer(text, np.uint8), 127).astype(np.uint16)
cut = len(ids) - 8192  # a small validation part: evaluating a text model on CPU is slow
ids[:cut].tofile(f"{here}/tokens/train.bin")
ids[cut:].tofile(f"{here}/tokens/val.bin")
print(f"wrote {here}/npy, {here}/reg, {here}/torch, {here}/tokens ({len(ids)} ids), {here}/images")
