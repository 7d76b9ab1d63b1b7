"""``convert`` of a DataFrame: columns a block at a time, against its rows one by one and
against ``df.to_parquet``.

Run ``python benchmarks/bench_columnar.py --out benchmarks/RESULTS-columnar.md``. The
frame has ``--rows`` rows (default 1M) of ``int64``, ``float64``, ``str`` and
``float32[16]`` (an object column of arrays, as pandas holds them). Contenders, written
to local files (10 shards, ``executor="serial"``, recordio, the default compressor):

* **block** — ``convert(out, df, 10, ...)``: the frame is read a block of rows at a time
  and the recprep codec encodes each block's columns at once
  (``Codec.encode_columns``);
* **rows** — ``convert`` of the same rows as a list of dicts, built before timing (what
  the frame's reader yielded before columnar input): every row through ``encode``;
* **parquet** — ``df.to_parquet(path)`` (pyarrow, default snappy);
* **block, processes** — the block path with ``executor="processes"`` (2 workers): the
  frame is split into row ranges, each shipped to a worker with its rows only.

Repetitions are interleaved (block, rows, parquet, block, ...); the best and the median
of each are reported, with how busy other processes kept the machine. The bytes of the
block, rows and processes outputs are compared (they must be equal).

Then where the block path's time goes, each part timed alone (best of the repetitions):
reading the frame's blocks, ``encode_columns`` of them, and handing the records to the
format's writers round-robin (into memory: no file system).
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd

from recprep import convert

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import CpuWatch, _machine, log  # noqa: E402  (the shared helpers)

NUM_SHARDS = 10


def frame(rows: int) -> pd.DataFrame:
    rng = np.random.default_rng(0)
    words = np.array([f"token-{k}" for k in range(50_000)], dtype=object)
    vectors = rng.standard_normal((rows, 16)).astype(np.float32)
    return pd.DataFrame({
        "id": np.arange(rows, dtype=np.int64),
        "score": rng.standard_normal(rows),
        "word": pd.Series(words[rng.integers(0, len(words), rows)], dtype=object),
        "vec": pd.Series(list(vectors), dtype=object),
    })


def rows_of(df: pd.DataFrame) -> list[dict]:
    """The rows the frame's reader yields (numpy scalars, str, arrays), as a list."""
    from recprep.write.tables import TableReader

    return list(TableReader(df)())


def digest(directory: Path) -> str:
    h = hashlib.sha256()
    for p in sorted(directory.glob("b-*")):
        h.update(p.read_bytes())
    return h.hexdigest()


def run(rows: int, reps: int) -> tuple[dict[str, list[float]], str, bool]:
    df = frame(rows)
    log(f"building {rows} rows as dicts (untimed)")
    as_rows = rows_of(df)
    scratch = Path(tempfile.mkdtemp(prefix="bench-columnar-"))
    contenders: dict[str, Callable[[Path], object]] = {
        "block": lambda out: convert(out, df, NUM_SHARDS, "b"),
        "rows": lambda out: convert(out, as_rows, NUM_SHARDS, "b"),
        "parquet": lambda out: df.to_parquet(out / "frame.parquet"),
        "processes": lambda out: convert(out, df, NUM_SHARDS, "b", executor="processes",
                                         num_workers=2),
    }
    times: dict[str, list[float]] = {k: [] for k in contenders}
    digests: dict[str, str] = {}
    try:
        with CpuWatch() as watch:
            for rep in range(reps):
                for key, fn in contenders.items():
                    out = scratch / key
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir()
                    log(f"rep {rep + 1}/{reps}: {key}")
                    gc.collect()
                    t = time.perf_counter()
                    fn(out)
                    times[key].append(time.perf_counter() - t)
                    if key != "parquet":
                        digests[key] = digest(out)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return times, watch.describe(), len(set(digests.values())) == 1


def breakdown(rows: int, reps: int) -> dict[str, float]:
    """Seconds (best of ``reps``) of the block path's parts, each alone."""
    import io

    from recprep.codecs import get_codec
    from recprep.containers import get_format
    from recprep.write.tables import TableReader

    df = frame(rows)
    codec = get_codec("recprep")
    fmt = get_format("recordio")
    best = {"read blocks": float("inf"), "encode_columns": float("inf"),
            "writers (round-robin, in memory)": float("inf")}
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        blocks = list(TableReader(df)().column_blocks())
        best["read blocks"] = min(best["read blocks"], time.perf_counter() - t)
        t = time.perf_counter()
        records = [r for b in blocks for r in codec.encode_columns(b.columns, b.n) or ()]
        best["encode_columns"] = min(best["encode_columns"], time.perf_counter() - t)
        del blocks
        writers = [fmt.writer(io.BytesIO(), fmt.default_compressor, 128 << 10)
                   for _ in range(NUM_SHARDS)]
        writes = [w.write for w in writers]
        t = time.perf_counter()
        for index, record in enumerate(records):
            writes[index % NUM_SHARDS](record)
        for w in writers:
            w.close()
        key = "writers (round-robin, in memory)"
        best[key] = min(best[key], time.perf_counter() - t)
    return best


def render(rows: int, reps: int, times: dict[str, list[float]], load: str, same: bool,
           parts: dict[str, float]) -> str:
    best = {k: min(v) for k, v in times.items()}
    lines = [
        "# convert of a DataFrame: block-encoded columns vs rows one by one vs Parquet",
        "",
        f"`python benchmarks/bench_columnar.py --rows {rows} --reps {reps}` "
        f"({_machine()}; {load}).",
        "",
        f"{rows:,} rows of int64, float64, str, float32[16] (object column of arrays); "
        f"{NUM_SHARDS} shards, serial executor, recordio with its default compressor. "
        "Repetitions interleaved; best and median seconds.",
        "",
        "| contender | best s | median s | rows/s (best) | block is x faster |",
        "|---|---:|---:|---:|---:|",
    ]
    for key, label in (("block", "convert(df): block path"),
                       ("rows", "convert(list of row dicts): row by row"),
                       ("parquet", "df.to_parquet (pyarrow, snappy)"),
                       ("processes", "convert(df, executor='processes'), 2 workers")):
        lines.append(
            f"| {label} | {best[key]:.2f} | {statistics.median(times[key]):.2f} | "
            f"{rows / best[key]:,.0f} | {best[key] / best['block']:.2f} |")
    lines += [
        "",
        f"- block vs rows: **{best['rows'] / best['block']:.2f}x** faster (target >= 3x).",
        f"- block vs to_parquet: **{best['block'] / best['parquet']:.2f}x** the time "
        "(target <= 2x).",
        f"- block, rows and processes outputs byte-identical: **{same}**.",
        "",
        "## Where the block path's time goes",
        "",
        "Each part alone, best of the repetitions (the rest of `convert`: the loop itself, "
        "files, CRCs, the manifest and the chunk index).",
        "",
        "| part | s | us/row |",
        "|---|---:|---:|",
    ]
    lines += [f"| {name} | {s:.2f} | {s / rows * 1e6:.2f} |" for name, s in parts.items()]
    lines.append("")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--out", type=Path, default=None, help="write the markdown here")
    args = p.parse_args(argv)
    times, load, same = run(args.rows, args.reps)
    log("timing the block path's parts")
    text = render(args.rows, args.reps, times, load, same, breakdown(args.rows, args.reps))
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
