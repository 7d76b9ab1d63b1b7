"""A conversion run as its own process, for the crash tests (test_reliability.py).

``python tests/support/kill_job.py OUT MODE [--resume] [--overwrite] [--shards N] [--prefix P]
[--tag T]``: MODE is
``serial-stream`` (one reader), ``serial-parts`` or ``processes-parts``
(partitioned input). Readers pause a little so a kill can land anywhere.
"""

from __future__ import annotations

import argparse
import functools
import os
import time

import numpy as np

from recprep import convert, partitions

SIZES = [40, 0, 25, 60, 10, 35, 50, 30]
PAUSE = float(os.environ.get("KILL_JOB_SLEEP", "0.01"))


def instance(i: int, tag: str = "") -> tuple:
    return i, np.full(64, i, dtype=np.float32), f"{tag}{i}"


def part(start: int, size: int, tag: str = ""):
    for i in range(start, start + size):
        if i % 10 == 0:
            time.sleep(PAUSE)
        yield instance(i, tag)


def stream(tag: str = ""):
    return part(0, sum(SIZES), tag)


def reader_for(mode: str, tag: str):
    if mode == "serial-stream":
        return functools.partial(stream, tag)
    starts = [sum(SIZES[:p]) for p in range(len(SIZES))]
    return partitions(
        [functools.partial(part, s, n, tag) for s, n in zip(starts, SIZES, strict=True)]
    )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("mode", choices=["serial-stream", "serial-parts", "processes-parts"])
    parser.add_argument("--resume", action="store_true")
    parser.add_argument("--prefix", default="k")
    parser.add_argument("--tag", default="")
    parser.add_argument("--overwrite", action="store_true")
    parser.add_argument("--shards", type=int, default=5)
    args = parser.parse_args()
    executor = "processes" if args.mode.startswith("processes") else "serial"
    convert(args.out, reader_for(args.mode, args.tag), args.shards, args.prefix,
            executor=executor, num_workers=2, resume=args.resume, overwrite=args.overwrite,
            progress=False, chunk_bytes=2048)
    print("done")


if __name__ == "__main__":
    main()
