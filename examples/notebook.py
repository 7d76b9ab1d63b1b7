# %% [markdown]
# # recprep in a notebook: convert, read, train
#
# A notebook-style script (cells marked with `# %%`; VS Code, PyCharm and Jupytext open
# it as a notebook): an MNIST-like data set of two digit classes, converted into RecordIO
# shards, read back shuffled each epoch, and used to train a logistic regression in
# plain numpy. The loss goes down.
#
#     python examples/notebook.py [OUTPUT_DIR]

# %%
from __future__ import annotations

import sys
import tempfile

import numpy as np

from recprep import RecordIO, convert
from recprep.decorators import batch

# %% [markdown]
# ## 1. Data: 28x28 images of two classes
#
# Class 0 images are bright in the left half, class 1 in the right half, plus noise: an
# easy problem, so that a few epochs show the loss going down. A *reader creator* returns
# a function that yields `(image, label)` instances; every call starts over.

# %%
def mnist_like(n: int, seed: int):
    def reader():
        rng = np.random.default_rng(seed)
        for _ in range(n):
            label = int(rng.integers(2))
            image = rng.uniform(0, 1, (28, 28)).astype(np.float32)
            columns = slice(14, 28) if label else slice(0, 14)
            image[:, columns] += 0.04
            yield image, label

    return reader


# %% [markdown]
# ## 2. Convert: 4,000 training and 1,000 test instances into shards

# %%
def convert_data(output: str) -> None:
    train = convert(output, mnist_like(4_000, seed=0), 8, "train", overwrite=True,
                    progress=False)
    test = convert(output, mnist_like(1_000, seed=1), 2, "test", overwrite=True,
                   progress=False)
    print(train)
    print(test)


# %% [markdown]
# ## 3. Read back and train
#
# `RecordIO(..., shuffle=True, seed=...)` gives a new order every epoch (`set_epoch`);
# `batch` groups instances into minibatches of 64, as `paddle.batch` does.

# %%
def sigmoid(z: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-z))


def train(output: str, epochs: int = 5, lr: float = 0.02) -> list[float]:
    """Logistic regression on the flattened images; returns the mean loss of each epoch."""
    read = RecordIO(f"{output}/train-*-of-*", shuffle=True, seed=7, shuffle_buffer=1_000)
    assert len(read) == 4_000  # from the manifest: nothing decoded
    w, b = np.zeros(28 * 28, np.float32), 0.0
    epoch_losses = []
    for epoch in range(epochs):
        read.set_epoch(epoch)
        losses = []
        for minibatch in batch(read, 64)():
            x = np.stack([image.ravel() for image, _ in minibatch])
            y = np.array([label for _, label in minibatch], np.float32)
            p = sigmoid(x @ w + b)
            losses.append(float(-np.mean(y * np.log(p + 1e-7) + (1 - y) * np.log(1 - p + 1e-7))))
            w -= lr * x.T @ (p - y) / len(y)
            b -= lr * float(np.mean(p - y))
        epoch_losses.append(float(np.mean(losses)))
        print(f"epoch {epoch}: loss {epoch_losses[-1]:.4f}")
    test = RecordIO(f"{output}/test-*-of-*")
    x = np.stack([image.ravel() for image, _ in test()])
    y = np.array([label for _, label in test()])
    accuracy = float(np.mean((sigmoid(x @ w + b) > 0.5) == y))
    print(f"test accuracy: {accuracy:.3f}")
    return epoch_losses


# %%
def main(output: str | None = None) -> list[float]:
    if output is None:
        with tempfile.TemporaryDirectory() as tmp:
            return main(tmp)
    convert_data(output)
    losses = train(output)
    assert losses[-1] < losses[0], losses
    return losses


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
