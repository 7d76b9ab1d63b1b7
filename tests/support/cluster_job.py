"""A conversion job run as its own process against a cluster (see test_clusters.py).

``python tests/support/cluster_job.py OUT EXECUTOR OPTIONS_JSON``: readers defined here live in
``__main__``, so cloudpickle ships them by value to workers that can't import the tests.
"""

from __future__ import annotations

import functools
import json
import sys

import numpy as np

from recprep import RecordIO, convert, partitions

SIZES = [5, 0, 17, 9, 30, 1]


def instance(i: int):
    return i, np.linspace(0, i, 8, dtype=np.float32), f"row-{i}"


def part(start: int, size: int):
    for i in range(start, start + size):
        yield instance(i)


def main(out: str, executor: str, options: dict) -> None:
    starts = [sum(SIZES[:p]) for p in range(len(SIZES))]
    readers = [functools.partial(part, s, n) for s, n in zip(starts, SIZES, strict=True)]
    result = convert(out, partitions(readers), 4, "cluster", executor=executor,
                     executor_options=options, progress=False)
    got = list(RecordIO(f"{out}/cluster-*")())
    want = [instance(i) for i in range(sum(SIZES))]
    assert [g[0] for g in got] == [w[0] for w in want]
    assert all(np.array_equal(g[1], w[1]) and g[2] == w[2] for g, w in zip(got, want, strict=True))
    print(json.dumps({"records": result.records_per_shard}))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2], json.loads(sys.argv[3]))
