"""Ray Data: ``recprep.ray.read`` against ``ray.data.read_parquet`` of the same rows, and
``recprep.ray.write`` against ``Dataset.write_parquet``, on a local Ray (2 CPUs).

Run ``python benchmarks/bench_ray.py --mb 200 --out benchmarks/RESULTS-columnar.md``
(appends a section). The rows are ``int64``, ``float64``, ``str`` and ``float32[64]``
(about 300 bytes each); ``--mb`` sets how many (their Arrow size). The recprep set is
written by ``convert`` (8 shards, snappy); the Parquet files (8, snappy) by pyarrow from
the tables ``recprep.ray.read`` of that set gives, so both hold the same rows, with the
same Arrow types.

* **read**: the whole dataset consumed in the driver, ``iter_batches(batch_format=
  "pyarrow")``, rows counted: ``recprep.ray.read(set)`` vs ``ray.data.read_parquet(dir)``.
* **write**: a dataset already in Ray's object store (``materialize()``) written to local
  files: ``recprep.ray.write(ds, out, 8, ...)`` (snappy) vs ``ds.write_parquet(out)``.

After one untimed warm-up read of each, repetitions are interleaved (recprep, parquet,
recprep, ...); medians, with the load average before and after.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

import recprep
import recprep.ray as rr

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import _machine, log  # noqa: E402  (the shared helpers)

ROW_BYTES = 8 + 8 + 16 + 4 * 64 + 8  # the Arrow size of a row, about (offsets included)
NUM_SHARDS = 8


def make_set(path: str, rows: int) -> None:
    rng = np.random.default_rng(0)
    part = 100_000
    columns = []
    for start in range(0, rows, part):
        n = min(part, rows - start)
        columns.append({
            "id": np.arange(start, start + n, dtype=np.int64),
            "score": rng.standard_normal(n),
            "word": np.array([f"token-{k:010d}" for k in rng.integers(0, 10**9, n)],
                             dtype=object),
            "vec": rng.standard_normal((n, 64)).astype(np.float32),
        })
    whole = {k: np.concatenate([c[k] for c in columns]) for k in columns[0]}
    recprep.convert(path, whole, NUM_SHARDS, "b", compressor="snappy", progress=False)


def write_parquet_files(ray, ds, path: str) -> None:
    """The rows of ``ds``, in :data:`NUM_SHARDS` Parquet files of equal rows (snappy), as
    the set has shards (``write_parquet`` would write a file per block, dozens)."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    whole = pa.concat_tables(ray.get(ds.to_arrow_refs()))
    os.makedirs(path)
    step = -(-whole.num_rows // NUM_SHARDS)
    for i in range(NUM_SHARDS):
        pq.write_table(whole.slice(i * step, step), f"{path}/part-{i:05d}.parquet",
                       compression="snappy")


def consume(ds) -> int:
    return sum(b.num_rows for b in ds.iter_batches(batch_size=None, batch_format="pyarrow"))


def timed(fn: Callable[[], object]) -> tuple[float, object]:
    start = time.perf_counter()
    value = fn()
    return time.perf_counter() - start, value


def run(mb: int, reps: int) -> str:
    import ray

    rows = mb * 10**6 // ROW_BYTES
    work = Path(tempfile.mkdtemp(prefix="rp-bench-ray-"))
    load_before = os.getloadavg()
    try:
        ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False,
                 configure_logging=False)
        ray.data.DataContext.get_current().enable_progress_bars = False
        setset = str(work / "set")
        log(f"writing {rows:,} rows ...")
        make_set(setset, rows)
        parquet = str(work / "parquet")
        write_parquet_files(ray, rr.read(setset), parquet)
        source = rr.read(setset).materialize()
        size = source.size_bytes()
        times: dict[str, list[float]] = {k: [] for k in
                                         ("read recprep", "read parquet", "write recprep",
                                          "write parquet")}
        consume(rr.read(setset).limit(1000))  # warm up: workers, imports, first reads
        consume(ray.data.read_parquet(parquet).limit(1000))
        for rep in range(reps):
            log(f"rep {rep + 1}/{reps}")
            t, n = timed(lambda: consume(rr.read(setset)))
            assert n == rows, n
            times["read recprep"].append(t)
            t, n = timed(lambda: consume(ray.data.read_parquet(parquet)))
            assert n == rows, n
            times["read parquet"].append(t)
            for name in ("w-recprep", "w-parquet"):
                shutil.rmtree(work / name, ignore_errors=True)
            t, result = timed(lambda: rr.write(source, str(work / "w-recprep"), NUM_SHARDS,
                                               "w", compressor="snappy", progress=False))
            assert sum(result.records_per_shard) == rows  # type: ignore[attr-defined]
            times["write recprep"].append(t)
            t, _ = timed(lambda: source.write_parquet(str(work / "w-parquet")))
            times["write parquet"].append(t)
        load_after = os.getloadavg()
    finally:
        ray.shutdown()
        shutil.rmtree(work, ignore_errors=True)
    return report(mb, rows, size, reps, times, load_before, load_after)


def report(mb: int, rows: int, size: int, reps: int, times: dict[str, list[float]],
           load_before: tuple[float, ...], load_after: tuple[float, ...]) -> str:
    med = {k: statistics.median(v) for k, v in times.items()}
    read_ratio = med["read parquet"] / med["read recprep"]
    write_ratio = med["write recprep"] / med["write parquet"]
    lines = [
        "## Ray Data: recprep.ray.read / write vs read_parquet / write_parquet",
        "",
        f"`python benchmarks/bench_ray.py --mb {mb} --reps {reps}` ({_machine()}; "
        f"load average {load_before[0]:.1f} before, {load_after[0]:.1f} after).",
        "",
        f"{rows:,} rows of int64, float64, str, float32[64] ({size / 1e6:,.0f} MB in Ray's "
        f"object store); local Ray, 2 CPUs; {NUM_SHARDS} shards, snappy both. "
        "Repetitions interleaved; medians.",
        "",
        "| contender | median s | each rep s | MB/s |",
        "|---|---:|---:|---:|",
    ]
    for name, values in times.items():
        lines.append(f"| {name} | {med[name]:.2f} | "
                     f"{', '.join(f'{v:.2f}' for v in values)} | {size / 1e6 / med[name]:,.0f} |")
    lines += [
        "",
        f"- read: recprep is **{read_ratio:.2f}x** read_parquet's speed (target >= 0.8x).",
        f"- write: recprep takes **{write_ratio:.2f}x** write_parquet's time "
        "(target <= 1.5x).",
        "",
    ]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--mb", type=int, default=200)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", help="append the section to this Markdown file")
    args = parser.parse_args()
    text = run(args.mb, args.reps)
    print(text)
    if args.out:
        with open(args.out, "a", encoding="utf-8") as f:
            f.write("\n" + text)


if __name__ == "__main__":
    main()
