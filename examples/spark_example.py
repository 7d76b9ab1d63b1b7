"""Convert with Spark: one reader per input partition, run as Spark tasks, on local[2].

    python examples/spark_example.py [OUTPUT_DIR]        (needs: pip install 'recprep[spark]')

Each partition (here: a day of synthetic click logs) is read by its own Spark task, where
the task runs; the shards come out byte-identical to a serial run over the same input.
On a cluster, use the cluster's SparkSession (or ``executor_options={"master": ...}``) and
an output path every worker reaches (HDFS, S3...): see docs/executors.md.
"""

from __future__ import annotations

import functools
import os
import sys
import tempfile

import numpy as np

from recprep import RecordIO, convert, partitions

DAYS = [f"2024-01-{day:02d}" for day in range(1, 7)]


def read_day(day: str, rows: int = 500):
    """The instances of one day: (user id, item ids, clicked). Deterministic per day."""
    rng = np.random.default_rng(int(day.replace("-", "")))
    for _ in range(rows):
        yield int(rng.integers(10_000)), rng.integers(0, 50_000, 8), bool(rng.random() < 0.1)


def main(output: str, spark=None) -> None:
    """Convert DAYS with Spark into ``output``; uses ``spark`` (or the active SparkSession),
    else starts a local[2] one and stops it at the end."""
    started = None
    if spark is None:
        from pyspark.sql import SparkSession

        if SparkSession.getActiveSession() is None:
            os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
            started = (SparkSession.builder.master("local[2]").appName("recprep-example")
                       .config("spark.ui.enabled", "false").getOrCreate())
            started.sparkContext.setLogLevel("ERROR")
    try:
        readers = [functools.partial(read_day, day) for day in DAYS]
        result = convert(output, partitions(readers), 4, "clicks", executor="spark",
                         overwrite=True, progress=False)
        print(f"spark:  {result}")

        # the same input, serially: the same bytes
        serial = convert(f"{output}/serial", partitions(readers), 4, "clicks",
                         overwrite=True, progress=False)
        for a, b in zip(result.paths, serial.paths, strict=True):
            with open(a, "rb") as fa, open(b, "rb") as fb:
                assert fa.read() == fb.read(), (a, b)
        print("serial: the same bytes")

        # read back: the days in order, each day's rows in order
        read = RecordIO(f"{output}/clicks-*-of-*")
        assert len(read) == 500 * len(DAYS)
        first = next(iter(read()))
        expected = next(read_day(DAYS[0]))
        assert first[0] == expected[0] and np.array_equal(first[1], expected[1])
        print(f"read back {len(read)} instances; the first: {first}")
    finally:
        if started is not None:
            started.stop()


if __name__ == "__main__":
    if len(sys.argv) > 1:
        main(sys.argv[1])
    else:
        with tempfile.TemporaryDirectory() as tmp:
            main(tmp)
