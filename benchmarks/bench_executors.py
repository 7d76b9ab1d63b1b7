"""Executors side by side: the same partitioned, CPU-heavy input on every engine.

8 partitions whose readers do real work per instance (generate a 64x64 image, blur it
with an FFT, normalise it), converted with ``serial``, ``processes`` (2 workers),
``spark`` (local[2]) and ``ray`` (2 CPUs). Spark and Ray are timed twice: the first run
includes starting the engine, the second is steady state.

Run: ``python benchmarks/bench_executors.py [--quick]``; prints a markdown table.
"""

from __future__ import annotations

import argparse
import functools
import os
import shutil
import sys
import tempfile
import time

import numpy as np

from recprep import convert, partitions

PARTITIONS = 8


def make_image(seed: int) -> tuple[np.ndarray, int]:
    """A generated image, blurred and normalised: ~1 ms of numpy work."""
    rng = np.random.default_rng(seed)
    image = rng.integers(0, 256, size=(64, 64)).astype(np.float64)
    kernel = np.outer(np.hanning(64), np.hanning(64))
    for _ in range(4):
        image = np.real(np.fft.ifft2(np.fft.fft2(image) * np.fft.fft2(kernel)))
    image = (image - image.mean()) / (image.std() + 1e-9)
    return image.astype(np.float32), seed % 10


def part(start: int, size: int):
    for i in range(start, start + size):
        yield make_image(i)


def inputs(per_partition: int):
    return partitions(
        [functools.partial(part, p * per_partition, per_partition) for p in range(PARTITIONS)]
    )


def timed(out: str, per_partition: int, **kwargs) -> float:
    shutil.rmtree(out, ignore_errors=True)
    started = time.perf_counter()
    convert(out, inputs(per_partition), 8, "bench", progress=False, **kwargs)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="a small smoke run")
    args = parser.parse_args()
    per_partition = 40 if args.quick else 400
    total = per_partition * PARTITIONS
    os.environ.update({"RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER": "0", "RAY_AUTH_MODE": "disabled",
                       "RAY_USAGE_STATS_ENABLED": "0", "PYSPARK_PYTHON": sys.executable})
    work = tempfile.mkdtemp(prefix="rp-bench-exec-")
    rows = []
    try:
        out = os.path.join(work, "out")
        serial = min(timed(out, per_partition) for _ in range(2))
        rows.append(("serial", serial, serial, None))
        procs = min(timed(out, per_partition, executor="processes", num_workers=2)
                    for _ in range(2))
        rows.append(("processes (2 workers)", procs, procs, None))

        from pyspark.sql import SparkSession

        started = time.perf_counter()
        spark = (SparkSession.builder.master("local[2]").config("spark.ui.enabled", "false")
                 .getOrCreate())
        spark.sparkContext.setLogLevel("ERROR")
        spark_start = time.perf_counter() - started
        first = timed(out, per_partition, executor="spark") + spark_start
        steady = min(timed(out, per_partition, executor="spark") for _ in range(2))
        rows.append(("spark local[2]", first, steady, spark_start))
        spark.stop()

        import ray

        started = time.perf_counter()
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        ray_start = time.perf_counter() - started
        first = timed(out, per_partition, executor="ray") + ray_start
        steady = min(timed(out, per_partition, executor="ray") for _ in range(2))
        rows.append(("ray (2 CPUs)", first, steady, ray_start))
        ray.shutdown()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    print(f"{total} instances in {PARTITIONS} partitions -> 8 shards, 2 cores\n")
    print("| executor | first run (s) | engine start (s) | steady run (s) "
          "| steady inst/s | speed-up vs serial |")
    print("|---|---:|---:|---:|---:|---:|")
    for name, first, steady, start in rows:
        print(f"| {name} | {first:.2f} | {'' if start is None else f'{start:.2f}'} "
              f"| {steady:.2f} | {total / steady:,.0f} | {serial / steady:.2f}x |")
    print("\ntarget: processes >= 1.6x serial")


if __name__ == "__main__":
    main()
