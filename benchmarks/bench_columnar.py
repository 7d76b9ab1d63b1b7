"""``convert`` of a DataFrame: columns a block at a time, against its rows one by one and
against ``df.to_parquet``.

Run ``python benchmarks/bench_columnar.py --out benchmarks/RESULTS-columnar.md``. The
frame has ``--rows`` rows (default 1M) of ``int64``, ``float64``, ``str`` and
``float32[16]`` (an object column of arrays, as pandas holds them). Contenders, written
to local files (10 shards, ``executor="serial"``, recordio, the default compressor):

* **block** — ``convert(out, df, 10, ...)``: the frame is read a block of rows at a time,
  the recprep codec encodes each block's columns at once (``Codec.encode_block``) and
  the records are laid out straight into the shards' chunk payloads;
* **rows** — ``convert`` of the same rows as a list of dicts, built before timing (what
  the frame's reader yielded before columnar input): every row through ``encode``;
* **parquet** — ``df.to_parquet(path)`` (pyarrow, default snappy);
* **block, processes** — the block path with ``executor="processes"`` (2 workers): the
  frame is split into row ranges, each shipped to a worker with its rows only.

Repetitions are interleaved (block, rows, parquet, block, ...); the best and the median
of each are reported, with how busy other processes kept the machine. The bytes of the
block, rows and processes outputs are compared (they must be equal).

Then where the block path's time goes, each part timed alone (best of the repetitions):
reading the frame's blocks, ``encode_block`` of them (each record's pieces), and laying
the records out in the shards' chunk payloads for the format's writers, round-robin (into
memory: no file system).

``--part arrow`` measures a set going out as Arrow instead (issue 25), each contender
interleaved with the others, median of ``--reps``: ``batches(256, format="arrow")``
against ``batches(256)`` (numpy) and the pickle floor of ``bench_reading.py`` (a bare
file read + ``pickle.loads`` per instance), on 200k small ``(int, float, str)`` tuples
and on 20k MNIST-like instances; ``to_arrow()`` against ``pyarrow.parquet.read_table`` of
the same rows (snappy both; pyarrow's threads on, its default, and off); and DuckDB's
``SELECT count(*), avg(f1)`` over a reader (the Arrow stream) against the same query over
a Parquet file of the same rows (``--duckdb-rows``, default 1M). Parts of the Arrow
batches are timed in the same interleaving: ``batches(8192, format="arrow")`` (the
difference is what 256-row batches cost), the set's chunks read alone (CRC, decompress,
split), read then decoded to Arrow a chunk at a time, and (small rows) those woven
round-robin and cut into batches by the reader's own ``interleave`` and ``cut`` with none
of the reader around them (the rest is the reader's machinery: the manifest and file
checks, positions, stats). The batches and
``to_arrow()`` run again with recprep's C kernels off (``native_off()``: numpy alone),
in the same interleaving. Wall and CPU time (``time.process_time``) are taken of the
same runs, with the load average.
"""

from __future__ import annotations

import argparse
import gc
import hashlib
import os
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
    """Seconds (best of ``reps``) of the block path's parts, each alone: the frame read
    a block at a time, each block's records made as pieces (``encode_block``), and the
    pieces laid out in the shards' chunk payloads and handed to the writers (in memory)."""
    import io

    from recprep.codecs import get_codec
    from recprep.containers import get_format
    from recprep.write.blocklayout import BlockLayout
    from recprep.write.tables import TableReader

    df = frame(rows)
    codec = get_codec("recprep")
    fmt = get_format("recordio")
    laying = "laid out + writers (BlockLayout, write_framed, round-robin, in memory)"
    best = {"read blocks": float("inf"), "encode_block": float("inf"), laying: float("inf")}
    for _ in range(reps):
        gc.collect()
        t = time.perf_counter()
        blocks = list(TableReader(df)().column_blocks())
        best["read blocks"] = min(best["read blocks"], time.perf_counter() - t)
        t = time.perf_counter()
        encoded = [codec.encode_block(b.columns, b.n) for b in blocks]
        best["encode_block"] = min(best["encode_block"], time.perf_counter() - t)
        del blocks
        writers = [fmt.writer(io.BytesIO(), fmt.default_compressor, 128 << 10)
                   for _ in range(NUM_SHARDS)]
        t = time.perf_counter()
        first = 0
        for block in encoded:
            assert block is not None
            layout = BlockLayout(block, first, NUM_SHARDS, fmt)
            for shard, p, q in layout.runs(first, first + block.n):
                writers[shard].write_framed(layout.buffer, layout.starts[p:q],
                                            layout.lengths[p:q])
            first += block.n
        for w in writers:
            w.close()
        best[laying] = min(best[laying], time.perf_counter() - t)
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


# --------------------------------------------------------------------------- Arrow out

ARROW_SECTION = "## A set out as Arrow"


#: CPU seconds of each contender of the Arrow part (``time.process_time``: this process's
#: threads together), keyed like the wall seconds of :func:`interleaved`'s result
CPU: dict[str, dict[str, list[float]]] = {}


def interleaved(contenders: dict[str, Callable[[], int]], count: int, reps: int,
                part: str = "") -> dict[str, list[float]]:
    """Seconds of each contender, repetitions interleaved; each must count ``count``.
    With ``part``, their CPU seconds go to ``CPU[part]``."""
    times: dict[str, list[float]] = {k: [] for k in contenders}
    cpu: dict[str, list[float]] = CPU.setdefault(part, {k: [] for k in contenders})
    for rep in range(reps):
        for key, fn in contenders.items():
            log(f"rep {rep + 1}/{reps}: {key}")
            gc.collect()
            c, t = time.process_time(), time.perf_counter()
            got = fn()
            times[key].append(time.perf_counter() - t)
            cpu[key].append(time.process_time() - c)
            if got != count:
                raise SystemExit(f"{key} counted {got} of {count}")
    return times


def run_arrow(reps: int, duckdb_rows: int) -> tuple[dict[str, dict[str, list[float]]], str]:
    import duckdb
    import pyarrow as pa
    import pyarrow.parquet as pq
    from bench_core import mnist_like, small_tuples
    from bench_reading import floor_read, floor_write

    from recprep import RecordIO
    from recprep._core.native import native_off

    root = Path(tempfile.mkdtemp(prefix="bench-arrow-"))
    out: dict[str, dict[str, list[float]]] = {}

    def batches(pattern: str, size: int = 256, **kw: object) -> int:
        return sum(len(b) if kw else len(b[1]) for b in RecordIO(pattern).batches(size, **kw))

    def without_kernels(run: Callable[[], int]) -> Callable[[], int]:
        """``run`` with recprep's C kernels off: numpy alone (``RECPREP_NATIVE=0``)."""
        def off() -> int:
            with native_off():
                return run()
        return off

    def chunks(directory: Path, decode: bool) -> int:
        """The set's chunks read (CRC, decompress, split) — and decoded to Arrow — alone,
        shard after shard: where the time of ``batches(format="arrow")`` goes."""
        from recprep.codecs import get_codec
        from recprep.containers import get_format
        from recprep.read.arrowout import chunk_batch

        fmt, codec, count = get_format("recordio"), get_codec("recprep"), 0
        for path in sorted(directory.glob("b-*-of-*")):
            with open(path, "rb") as f:
                for chunk in fmt.read_chunks(f, path=str(path)):
                    if decode:
                        chunk_batch(codec, chunk.records)
                    count += len(chunk.records)
        return count

    def woven(directory: Path) -> int:
        """What ``batches(256, format="arrow")`` does with the set's chunks, and nothing
        around it: each shard's chunks read and decoded to Arrow a chunk at a time (as
        ``chunks`` does), then woven round-robin and cut into batches by the reader's own
        ``read.blocks.interleave`` and ``cut``. No reader: no manifest, no file checks,
        no positions or stats, no pass set up — what the reader's machinery costs is the
        difference (small rows only: big ones are copied into batches, not woven)."""
        from recprep.codecs import get_codec
        from recprep.containers import get_format
        from recprep.read.arrowout import chunk_batch
        from recprep.read.blocks import cut, interleave

        fmt, codec = get_format("recordio"), get_codec("recprep")
        paths = sorted(directory.glob("b-*-of-*"))
        files = [open(path, "rb") for path in paths]
        try:
            streams = [(chunk_batch(codec, c.records) for c in fmt.read_chunks(
                f, path=str(path))) for f, path in zip(files, paths, strict=True)]
            batches_ = cut(interleave(streams), 256, drop_last=False)  # type: ignore[arg-type]
            return sum(len(batch) for batch in batches_)
        finally:
            for f in files:
                f.close()

    try:
        with CpuWatch() as watch:
            for key, data in (("small", small_tuples(200_000)), ("mnist", mnist_like(20_000))):
                floor_write(data, root / f"{key}.bin")
                convert(str(root / key), data, NUM_SHARDS, "b", progress=False)
                pattern = str(root / key / "b-*-of-*")
                out[key] = interleaved({
                    "floor": lambda k=key: floor_read(root / f"{k}.bin"),
                    "numpy": lambda p=pattern: batches(p),
                    "arrow": lambda p=pattern: batches(p, format="arrow"),
                    "arrow8k": lambda p=pattern: batches(p, 8192, format="arrow"),
                    "arrow_numpy": without_kernels(lambda p=pattern: batches(p, format="arrow")),
                    "numpy_numpy": without_kernels(lambda p=pattern: batches(p)),
                    "chunks": lambda k=key: chunks(root / k, False),
                    "decoded": lambda k=key: chunks(root / k, True),
                    **({"woven": lambda: woven(root / "small")} if key == "small" else {}),
                }, len(data), reps, key)
                if key == "small":
                    table = RecordIO(pattern).to_arrow()
                    pq.write_table(table, root / "small.parquet", compression="snappy")
                    out["table"] = interleaved({
                        "to_arrow": lambda p=pattern: RecordIO(p).to_arrow().num_rows,
                        "to_arrow_numpy": without_kernels(
                            lambda p=pattern: RecordIO(p).to_arrow().num_rows),
                        "read_table": lambda: pq.read_table(root / "small.parquet").num_rows,
                        "read_table_1": lambda: pq.read_table(root / "small.parquet",
                                                              use_threads=False).num_rows,
                    }, len(data), reps, "table")
                del data
            big = small_tuples(duckdb_rows)
            convert(str(root / "big"), big, NUM_SHARDS, "b", progress=False)
            pq.write_table(pa.table({f"f{i}": [r[i] for r in big] for i in range(3)}),
                           root / "big.parquet", compression="snappy")
            del big
            query = "SELECT count(*), avg(f1) FROM {}"

            def over_reader() -> int:
                reader = RecordIO(str(root / "big" / "b-*-of-*"))  # noqa: F841 (DuckDB's)
                return int(duckdb.sql(query.format("reader")).fetchall()[0][0])

            def over_parquet() -> int:
                source = f"read_parquet('{root / 'big.parquet'}')"
                return int(duckdb.sql(query.format(source)).fetchall()[0][0])

            out["duckdb"] = interleaved({"reader": over_reader, "parquet": over_parquet,
                                         "chunks": lambda: chunks(root / "big", False)},
                                        duckdb_rows, reps, "duckdb")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return out, watch.describe()


def render_arrow(reps: int, duckdb_rows: int, got: dict[str, dict[str, list[float]]],
                 load: str) -> str:
    med = {part: {k: statistics.median(v) for k, v in times.items()}
           for part, times in got.items()}
    cpu = {part: {k: statistics.median(v) for k, v in times.items()}
           for part, times in CPU.items()}
    lines = [
        ARROW_SECTION, "",
        f"`python benchmarks/bench_columnar.py --part arrow --reps {reps} --duckdb-rows "
        f"{duckdb_rows}` ({_machine()}; {load}; load average {_loads()}). Medians of "
        f"{reps} interleaved repetitions, local files, 10 shards, snappy, 0 threads; wall "
        "and CPU time (`time.process_time`) of the same runs.", "",
        "| set | contender | ms | instances/s | x floor | CPU ms | x floor (CPU) |",
        "|---|---|---:|---:|---:|---:|---:|",
    ]
    for key, label, n in (("small", "small tuples", 200_000), ("mnist", "MNIST-like", 20_000)):
        for name, what in (("floor", "floor (`pickle.loads`)"), ("numpy", "`batches(256)`"),
                           ("arrow", '`batches(256, format="arrow")`'),
                           ("arrow8k", '`batches(8192, format="arrow")`'),
                           ("numpy_numpy", "`batches(256)`, without the C kernels"),
                           ("arrow_numpy", '`batches(256, format="arrow")`, without the C '
                            'kernels'),
                           ("chunks", "part: chunks read alone (CRC, decompress, split)"),
                           ("decoded", "part: chunks read and decoded to Arrow"),
                           ("woven", "part: those woven round-robin and cut, no reader")):
            if name not in med[key]:
                continue
            s, c = med[key][name], cpu[key][name]
            lines.append(f"| {label} | {what} | {s * 1e3:.0f} | {n / s:,.0f} | "
                         f"{med[key]['floor'] / s:.2f} | {c * 1e3:.0f} | "
                         f"{cpu[key]['floor'] / c:.2f} |")
    table, duck, tcpu = med["table"], med["duckdb"], cpu["table"]
    lines += [
        "",
        f"- `to_arrow()` of the small tuples: {table['to_arrow'] * 1e3:.0f} ms; "
        f"`pyarrow.parquet.read_table` of the same rows: {table['read_table'] * 1e3:.0f} ms "
        f"— **{table['read_table'] / table['to_arrow']:.2f}x** its speed (target >= 0.5x); "
        f"in CPU time {tcpu['to_arrow'] * 1e3:.0f} ms against "
        f"{tcpu['read_table'] * 1e3:.0f} ms ({tcpu['read_table'] / tcpu['to_arrow']:.2f}x). "
        f"`read_table(use_threads=False)`: {table['read_table_1'] * 1e3:.0f} ms "
        f"({table['read_table_1'] / table['to_arrow']:.2f}x). Without recprep's C kernels "
        f"(numpy alone): {table['to_arrow_numpy'] * 1e3:.0f} ms "
        f"({table['read_table'] / table['to_arrow_numpy']:.2f}x).",
        f"- DuckDB `SELECT count(*), avg(f1)` over {duckdb_rows:,} small tuples: through "
        f"the reader's Arrow stream {duck['reader'] * 1e3:.0f} ms, over Parquet "
        f"{duck['parquet'] * 1e3:.0f} ms — **{duck['reader'] / duck['parquet']:.2f}x** "
        f"its time (target <= 2x); the set's chunks read alone (CRC, decompress, split, "
        f"nothing decoded) take {duck['chunks'] * 1e3:.0f} ms "
        f"({duck['chunks'] / duck['parquet']:.1f}x the Parquet query).",
        f"- `batches(256, format=\"arrow\")`: small tuples **"
        f"{med['small']['floor'] / med['small']['arrow']:.2f}x** the floor (target >= 5x), "
        f"MNIST-like **{med['mnist']['floor'] / med['mnist']['arrow']:.2f}x** (target >= 2x); "
        f"in CPU time {cpu['small']['floor'] / cpu['small']['arrow']:.2f}x and "
        f"{cpu['mnist']['floor'] / cpu['mnist']['arrow']:.2f}x.",
        "",
    ]
    return "\n".join(lines)


def _loads() -> str:
    """The load averages (1, 5, 15 minutes) now."""
    return ", ".join(f"{x:.1f}" for x in os.getloadavg())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--rows", type=int, default=1_000_000)
    p.add_argument("--reps", type=int, default=3)
    p.add_argument("--part", choices=["convert", "arrow"], default="convert")
    p.add_argument("--duckdb-rows", type=int, default=1_000_000)
    p.add_argument("--out", type=Path, default=None, help="write the markdown here")
    args = p.parse_args(argv)
    if args.part == "arrow":
        got, load = run_arrow(args.reps, args.duckdb_rows)
        text = render_arrow(args.reps, args.duckdb_rows, got, load)
        print(text)
        if args.out is not None:  # the section replaces its old self, the rest is kept
            old = args.out.read_text() if args.out.exists() else ""
            head, _, rest = old.partition(ARROW_SECTION)
            tail = rest[rest.index("\n## "):] if "\n## " in rest else ""
            head = head.rstrip("\n")
            args.out.write_text((head + "\n\n" if head else "") + text + tail)
        return
    times, load, same = run(args.rows, args.reps)
    log("timing the block path's parts")
    text = render(args.rows, args.reps, times, load, same, breakdown(args.rows, args.reps))
    print(text)
    if args.out is not None:
        args.out.write_text(text)


if __name__ == "__main__":
    main()
