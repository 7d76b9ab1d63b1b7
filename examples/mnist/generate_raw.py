"""Write a small MNIST-like raw data directory: nested folders of .npy image files.

    python examples/mnist/generate_raw.py RAW_DIR [--count 200] [--seed 0]

Layout: RAW_DIR/{train,test}/digit_<label>/<index>.npy, each a 28x28 uint8 image.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np


def generate(raw_dir: str, count: int = 200, seed: int = 0) -> list[Path]:
    rng = np.random.default_rng(seed)
    written = []
    for index in range(count):
        split = "test" if index % 5 == 0 else "train"
        label = int(rng.integers(10))
        folder = Path(raw_dir) / split / f"digit_{label}"
        folder.mkdir(parents=True, exist_ok=True)
        image = rng.integers(0, 256, size=(28, 28), dtype=np.uint8)
        path = folder / f"{index:05d}.npy"
        np.save(path, image)
        written.append(path)
    return written


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("raw_dir")
    parser.add_argument("--count", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    written = generate(args.raw_dir, args.count, args.seed)
    print(f"wrote {len(written)} files under {args.raw_dir}")


if __name__ == "__main__":
    main()
