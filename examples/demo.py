"""The quickstart demo: 1000 random 28x28 images with labels -> 10 shards -> read back.

Run it with ``make demo`` (or ``python examples/demo.py OUTPUT_DIR``).
"""

from __future__ import annotations

import sys

import numpy as np

from recprep import RecordIO, convert


def reader_creator(n: int = 1000, seed: int = 0):
    """A PaddlePaddle-style reader creator: each call of the reader starts over."""

    def reader():
        rng = np.random.default_rng(seed)
        for _ in range(n):
            yield rng.uniform(-1, 1, size=(28, 28)).astype(np.float32), int(rng.integers(10))

    return reader


def main(output: str) -> None:
    reader = reader_creator()
    result = convert(output, reader, 10, "random_images", overwrite=True, progress=False)
    print(f"wrote {result}")
    for path, records, size in zip(
        result.paths, result.records_per_shard, result.bytes_per_shard, strict=True
    ):
        print(f"  {path}  {records:4d} records  {size:8d} bytes")
    print(f"  {result.manifest_path}")

    read = RecordIO(f"{output}/random_images-*-of-*")
    count = 0
    for (image, label), (want_image, want_label) in zip(read(), reader(), strict=True):
        assert image.dtype == want_image.dtype and np.array_equal(image, want_image)
        assert label == want_label
        count += 1
    first_image, first_label = next(read())
    print(
        f"read back {count} instances in the original order; the first is a "
        f"{first_image.dtype}{list(first_image.shape)} image with label {first_label}"
    )


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else "demo-output")
