# Writes the user's data for tests/own_data/own_data.sh with NumPy:
#   npy/    train_inputs.npy [1800, 3, 16, 16] float32 (a fixed pattern a class plus noise),
#           train_labels.npy [1800] int64 (the last tenth is held out for validation)
#   reg/    the same inputs, train_labels.npy [1800, 10] float32 to regress (loss mse): 3 at
#           the class, -1 elsewhere, plus noise
#   tokens/ train.bin: the fortunes corpus as uint16 ids below 128, val.bin: another part of it
import sys
import numpy as np

out = sys.argv[1]
rng = np.random.default_rng(5)
n, classes = 1800, 10
protos = rng.normal(0, 1, (classes, 3, 16, 16)).astype(np.float32)
labels = rng.integers(0, classes, n)
x = protos[labels] + rng.normal(0, 1.5, (n, 3, 16, 16)).astype(np.float32)
np.save(f"{out}/npy/train_inputs.npy", x.astype(np.float32))
np.save(f"{out}/npy/train_labels.npy", labels.astype(np.int64))
np.save(f"{out}/reg/train_inputs.npy", x.astype(np.float32))
y = 4 * np.eye(classes)[labels] - 1 + rng.normal(0, 0.1, (n, classes))
np.save(f"{out}/reg/train_labels.npy", y.astype(np.float32))
text = open("/usr/share/games/fortunes/fortunes", "rb").read()
ids = np.minimum(np.frombuffer(text, dtype=np.uint8), 127).astype(np.uint16)
ids[:20000].tofile(f"{out}/tokens/train.bin")
ids[20000:24000].tofile(f"{out}/tokens/val.bin")
