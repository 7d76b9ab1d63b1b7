"""Per-chunk costs of RecordIO writing: snappy on data of several kinds, and CRC-32 options.

Run ``python benchmarks/bench_chunks.py`` (markdown on stdout). It measures, on 128 KiB
chunk payloads of recprep-codec records (the writer's default chunk size):

* how much snappy (framing format, what Go RecordIO chunks hold) saves per chunk, and what
  the file would weigh if chunks not smaller than ``share`` of their size were stored
  uncompressed, for a few values of ``share``;
* what compressing costs: ``cramjam.snappy.compress`` (always compress) against
  ``Compression.compress_below`` (raw blocks first, framing only for output kept), and
  what reading a chunk back costs (framed decompress against the copy a "none" chunk needs);
* CRC-32 (IEEE) implementations over the same payloads: ``zlib.crc32`` and, when
  installed, ``isal`` and ``zlib-ng`` (CRC-32C, the legacy dialect's, for comparison).

Each figure is the best of several repetitions of a loop over the chunks, one chunk at a
time (outputs dropped at once, as the writer does).
"""

from __future__ import annotations

import argparse
import importlib
import timeit
import zlib
from collections.abc import Callable

import cramjam
import google_crc32c
import numpy as np

from recprep import get_codec
from recprep.containers.compression import get_compression
from recprep.containers.recordio import encode_payload

CHUNK = 128 << 10
SHARES = (0.875, 0.9, 0.95, 1.0)


def _chunks(records: list[bytes]) -> list[bytes]:
    out: list[bytes] = []
    cur: list[bytes] = []
    size = 0
    for r in records:
        if cur and size + len(r) > CHUNK:
            out.append(encode_payload(cur))
            cur, size = [], 0
        cur.append(r)
        size += len(r)
    if cur:
        out.append(encode_payload(cur))
    return out


def data_sets(scale: float) -> dict[str, list[bytes]]:
    enc = get_codec("recprep").encode
    rng = np.random.default_rng(0)
    n = lambda k: max(1, int(k * scale))  # noqa: E731
    words = ["".join(chr(97 + c) for c in rng.integers(0, 26, rng.integers(2, 10)))
             for _ in range(5000)]

    def image() -> tuple[np.ndarray, int]:
        img = np.zeros((28, 28), np.uint8)  # MNIST: ~80% of the pixels are 0
        mask = rng.random((20, 20)) < 0.45
        img[4:24, 4:24][mask] = rng.integers(1, 256, mask.sum())
        return img, int(rng.integers(10))

    return {
        "MNIST-like float64[784] + int": [
            enc((rng.uniform(-1, 1, 784), int(rng.integers(10)))) for _ in range(n(3000))],
        "MNIST-like uint8[28,28] + int": [enc(image()) for _ in range(n(20000))],
        "float32[128] embeddings": [
            enc(rng.standard_normal(128).astype(np.float32)) for _ in range(n(20000))],
        "small tuples (int, float, str)": [
            enc((i, float(rng.standard_normal()), f"token-{rng.integers(100000)}"))
            for i in range(n(100000))],
        "text, 40 random words": [enc(" ".join(rng.choice(words, 40))) for _ in range(n(20000))],
        "float64[64] rounded to 0.01": [
            enc(np.round(rng.standard_normal(64), 2)) for _ in range(n(20000))],
    }


def best_gbs(fn: Callable[[bytes], object], chunks: list[bytes], reps: int) -> float:
    def loop() -> None:
        for c in chunks:
            fn(c)

    t = min(timeit.repeat(loop, number=1, repeat=reps))
    return sum(map(len, chunks)) / t / 1e9


def snappy_table(sets: dict[str, list[bytes]], reps: int) -> list[str]:
    framed = get_compression("snappy-framed")
    rows = [
        "| data | MB | snappy stored / raw (per chunk min–max) | "
        + " | ".join(f"file vs today, share {s}" for s in SHARES)
        + " | always compress GB/s | compress_below(1.0) GB/s | framed decompress GB/s "
        "| copy (none chunk) GB/s |",
        "|---|---:|---|" + "---:|" * (len(SHARES) + 4),
    ]
    for name, records in sets.items():
        chunks = _chunks(records)
        raw = sum(map(len, chunks))
        stored = [len(cramjam.snappy.compress(c)) for c in chunks]
        ratios = [s / len(c) for s, c in zip(stored, chunks, strict=True)]
        files = []
        for share in SHARES:
            size = sum(s if s < share * len(c) else len(c)
                       for s, c in zip(stored, chunks, strict=True))
            files.append(f"{100 * (size / sum(stored) - 1):+.2f}%")
        packed = [bytes(cramjam.snappy.compress(c)) for c in chunks]
        dec_gbs = best_gbs(lambda p: framed.decompress(p, 1 << 30), packed, reps) * raw / sum(
            map(len, packed))
        rows.append(
            f"| {name} | {raw / 1e6:.1f} | {sum(stored) / raw:.3f} ({min(ratios):.3f}–"
            f"{max(ratios):.3f}) | " + " | ".join(files)
            + f" | {best_gbs(cramjam.snappy.compress, chunks, reps):.2f}"
            f" | {best_gbs(lambda c: framed.compress_below(c, 1.0), chunks, reps):.2f}"
            f" | {dec_gbs:.2f} | {best_gbs(bytearray, chunks, reps):.2f} |"
        )
    return rows


def crc_table(chunks: list[bytes], reps: int) -> list[str]:
    options: list[tuple[str, Callable[[bytes], int]]] = [("zlib.crc32 (CPython's zlib "
                                                         f"{zlib.ZLIB_RUNTIME_VERSION})",
                                                         zlib.crc32)]
    for module, label in (("isal.isal_zlib", "isal"), ("zlib_ng.zlib_ng", "zlib-ng")):
        try:
            mod = importlib.import_module(module)
        except ImportError:
            continue
        assert all(mod.crc32(c) == zlib.crc32(c) for c in chunks[:3])
        version = importlib.import_module(module.split(".")[0]).__version__
        options.append((f"{label} {version} `{module}.crc32`", mod.crc32))
    options.append(("google_crc32c.value (CRC-32C: the legacy dialect's)", google_crc32c.value))
    rows = ["| CRC over 128 KiB payloads | GB/s |", "|---|---:|"]
    rows += [f"| {label} | {best_gbs(fn, chunks, reps):.2f} |" for label, fn in options]
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scale", type=float, default=1.0, help="data set size factor")
    parser.add_argument("--reps", type=int, default=7)
    args = parser.parse_args()
    sets = data_sets(args.scale)
    print("\n".join(snappy_table(sets, args.reps)))
    print()
    print("\n".join(crc_table(_chunks(next(iter(sets.values()))), args.reps * 3)))


if __name__ == "__main__":
    main()
