"""A conversion into many shards under a lowered open-files limit, as its own process
(``tests/write/test_many_shards.py``).

``python tests/support/fd_job.py OUT MODE --shards N --nofile L [--free K]``: sets
``RLIMIT_NOFILE`` to ``L`` (soft and hard), then converts :func:`data` into ``N`` shards
the way ``MODE`` says (see :data:`MODES`). With ``--free K`` the reader itself first opens
files until the limit is reached and closes ``K`` of them again: the program's own files
use up all but ``K`` descriptors. Prints ``ok`` or ``FAILED <type>`` and the error's
message.
"""

from __future__ import annotations

import argparse
import functools
import os
import resource
import sys

import numpy as np

from recprep import convert, partitions

SIZES = [1700, 0, 2300, 1000]  # partition sizes (one empty)
HELD: list[int] = []  # descriptors the "program" holds


def instance(i: int) -> tuple:
    return i, np.full(i % 13, i, dtype=np.int32), f"s{i}"


def data() -> list[tuple]:
    return [instance(i) for i in range(sum(SIZES))]


def part(start: int, size: int, free: int = -1):
    hold(free)
    for i in range(start, start + size):
        yield instance(i)


def hold(free: int) -> None:
    """Open files until the limit is reached, then close ``free`` of them (once)."""
    if free < 0 or HELD:
        return
    try:
        while True:
            HELD.append(os.open(os.devnull, os.O_RDONLY))
    except OSError:
        pass
    for _ in range(free):
        os.close(HELD.pop())


def parts(free: int = -1):
    starts = [sum(SIZES[:p]) for p in range(len(SIZES))]
    return partitions([functools.partial(part, s, n, free) for s, n in zip(starts, SIZES,
                                                                          strict=True)])


#: mode -> (executor, what is read: "list", "reader" (one callable) or "parts")
MODES = {
    "serial-list": ("serial", "list"),
    "serial-reader": ("serial", "reader"),
    "processes-reader": ("processes", "reader"),
    "processes-parts-spilled": ("processes", "parts"),
    "spark-reader": ("spark", "reader"),
    "ray-reader": ("ray", "reader"),
}


def reader_of(kind: str, free: int = -1):
    if kind == "list":
        return data()
    if kind == "reader":
        return functools.partial(part, 0, sum(SIZES), free)
    return parts(free)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("out")
    parser.add_argument("mode", choices=sorted(MODES))
    parser.add_argument("--shards", type=int, required=True)
    parser.add_argument("--nofile", type=int, required=True)
    parser.add_argument("--free", type=int, default=-1)
    args = parser.parse_args()
    resource.setrlimit(resource.RLIMIT_NOFILE, (args.nofile, args.nofile))
    executor, kind = MODES[args.mode]
    options: dict = {}
    if executor == "processes":
        options = {"num_workers": 2}
    elif executor == "spark":
        options = {"num_workers": 2, "executor_options": {"conf": {
            "spark.ui.enabled": "false", "spark.driver.memory": "1g"}}}
    elif executor == "ray":
        options = {"num_workers": 2, "executor_options": {
            "include_dashboard": False, "configure_logging": False}}
    if kind == "parts":  # every piece spills to a file of its own
        import recprep.write.loop

        recprep.write.loop.SPILL_BYTES = 0
    try:
        convert(args.out, reader_of(kind, args.free), args.shards, "s", executor=executor,
                progress=False, **options)
    except Exception as err:
        print("FAILED", type(err).__name__, str(err).replace("\n", " "))
        sys.exit(1)
    print("ok")


if __name__ == "__main__":
    main()
