"""Random access: ``RecordIO(...).dataset()`` against HF ``datasets`` and Grain's
``ArrayRecordDataSource`` on the same rows.

Run ``python benchmarks/bench_random.py [--rows 1000000] [--reps 3] [--out FILE]`` in an
environment with ``datasets``, ``grain`` and ``array_record`` (contenders missing there
are left out). The report is markdown on stdout; progress goes to stderr.

Rows are small tuples ``(int, float, str)`` (``bench_core.small_tuples``): a recprep set of
10 shards (default chunks, and 64 KiB chunks), a ``datasets.Dataset`` saved to disk and
loaded back (Arrow, memory-mapped), and one ArrayRecord file of the rows' pickles (Grain
hands out bytes; unpickling is part of its lookups here, as a user's would be). Each
contender answers the same indexes, repetitions interleaved, median:

* **single, warm**: ``ds[i]`` for 100,000 random ``i`` after every row was read once (for
  recprep: every chunk in its chunk cache, every record decoded);
* **single, first touch**: ``ds[i]`` for 20,000 random ``i`` never asked before (recprep:
  the chunks cached, the records not decoded yet);
* **single, cold**: 2,000 lookups with nothing cached (recprep ``cache_chunks=0``: each
  lookup reads and checks its whole chunk, from its shard held open after the first
  lookup in it, and decompresses and cuts it as far as the record; page cache warm);
* **batched**: ``__getitems__`` of 256 random indexes (a DataLoader batch), 400 batches,
  warm (as single, warm) and first touch (as single, first touch).

``--cold-only`` measures single cold lookups alone (each repetition a new dataset, so
nothing learned by the one before), in wall and in CPU time of the process: run it
alternately under two checkouts of recprep to compare them at the same load.
"""

from __future__ import annotations

import argparse
import os
import pickle
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np

from recprep import RecordIO, convert

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import CpuWatch, _machine, log, small_tuples, write_report  # noqa: E402

SEED = 7


def _recprep(root: Path, rows: list, chunk_bytes: int | None) -> Callable[[int], object]:
    out = root / f"recprep-{chunk_bytes or 'default'}"
    kwargs = {} if chunk_bytes is None else {"chunk_bytes": chunk_bytes}
    convert(str(out), rows, 10, "s", progress=False, **kwargs)
    reader = RecordIO(str(out / "s"))
    return lambda cache: reader.dataset(cache_chunks=cache)


def _hf(root: Path, rows: list) -> Callable[[int], object] | None:
    try:
        import datasets
    except ImportError:
        return None
    columns = {"a": [r[0] for r in rows], "b": [r[1] for r in rows], "c": [r[2] for r in rows]}
    datasets.Dataset.from_dict(columns).save_to_disk(str(root / "hf"))
    return lambda cache: datasets.load_from_disk(str(root / "hf"))


def _grain(root: Path, rows: list) -> Callable[[int], object] | None:
    try:
        import grain
        from array_record.python.array_record_module import ArrayRecordWriter
    except ImportError:
        return None
    path = str(root / "rows.array_record")
    writer = ArrayRecordWriter(path, "group_size:1")
    for row in rows:
        writer.write(pickle.dumps(row, protocol=5))
    writer.close()

    class Unpickled:
        def __init__(self) -> None:
            self.source = grain.sources.ArrayRecordDataSource([path])

        def __len__(self) -> int:
            return len(self.source)

        def __getitem__(self, i: int) -> object:
            return pickle.loads(self.source[i])

        def __getitems__(self, indexes: list[int]) -> list[object]:
            return [pickle.loads(b) for b in self.source.__getitems__(indexes)]

    return lambda cache: Unpickled()


def _per_second(count: int, fn: Callable[[], object]) -> float:
    started = time.perf_counter()
    fn()
    return count / (time.perf_counter() - started)


def _measure(make: Callable[[int], object], n: int, rng: np.random.Generator,
             cold_only: bool = False) -> dict[str, float]:
    out: dict[str, float] = {}
    if not cold_only:
        out.update(_cached(make, n, rng))
    cold = make(0)
    picks = rng.integers(0, n, 2_000).tolist()
    cpu = time.process_time()
    out["cold"] = _per_second(len(picks), lambda: [cold[i] for i in picks])
    out["cold cpu"] = len(picks) / (time.process_time() - cpu)
    return out


def _cached(make: Callable[[int], object], n: int, rng: np.random.Generator
            ) -> dict[str, float]:
    warm = make(1 << 20)
    for start in range(0, n, 4096):  # every row read once: all cached and decoded
        warm.__getitems__(list(range(start, min(n, start + 4096))))
    picks = rng.integers(0, n, 100_000).tolist()
    out = {"warm": _per_second(len(picks), lambda: [warm[i] for i in picks])}
    batches = [rng.integers(0, n, 256).tolist() for _ in range(400)]
    out["batched warm"] = _per_second(256 * len(batches),
                                      lambda: [warm.__getitems__(b) for b in batches])
    first = make(1 << 20)
    first.__getitems__(list(range(0, n, 997)))  # every chunk of every shard cached, 0.1% decoded
    picks = rng.integers(0, n, 20_000).tolist()
    out["first"] = _per_second(len(picks), lambda: [first[i] for i in picks])
    batches = [rng.integers(0, n, 256).tolist() for _ in range(400)]
    out["batched"] = _per_second(256 * len(batches),
                                 lambda: [first.__getitems__(b) for b in batches])
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rows", type=int, default=1_000_000)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--out", type=Path, default=None)
    parser.add_argument("--cold-only", action="store_true",
                        help="measure single cold lookups alone (wall and CPU time)")
    parser.add_argument("--without", action="append", default=[],
                        help="leave a contender out: recprep-64k, hf or grain (repeatable)")
    args = parser.parse_args()
    rows = small_tuples(args.rows)
    root = Path(tempfile.mkdtemp(prefix="bench-random-"))
    try:
        log("writing the rows for each contender (untimed)")
        skip = set(args.without)
        makers = {"recprep dataset()": _recprep(root, rows, None),
                  "recprep dataset(), 64 KiB chunks":
                      None if "recprep-64k" in skip else _recprep(root, rows, 64 << 10),
                  "HF datasets (load_from_disk)": None if "hf" in skip else _hf(root, rows),
                  "Grain ArrayRecordDataSource + pickle":
                      None if "grain" in skip else _grain(root, rows)}
        makers = {k: v for k, v in makers.items() if v is not None}
        check = makers["recprep dataset()"](64)
        assert check[12345] == rows[12345], (check[12345], rows[12345])
        results: dict[str, list[dict[str, float]]] = {k: [] for k in makers}
        with CpuWatch() as watch:
            for rep in range(args.reps):
                for name, make in makers.items():
                    log(f"rep {rep + 1}/{args.reps}: {name}")
                    results[name].append(_measure(make, args.rows, np.random.default_rng(SEED),
                                                  args.cold_only))
    finally:
        shutil.rmtree(root, ignore_errors=True)
    columns = {"warm": "single, warm", "batched warm": "batched 256, warm",
               "first": "single, first touch", "batched": "batched 256, first touch",
               "cold": "single, cold", "cold cpu": "single, cold (CPU time)"}
    if args.cold_only:
        columns = {k: v for k, v in columns.items() if k.startswith("cold")}
    lines = [f"# Random access: {args.rows:,} rows (int, float, str)\n",
             f"`python benchmarks/bench_random.py --rows {args.rows} --reps {args.reps}"
             + " --cold-only" * args.cold_only
             + "".join(f" --without {w}" for w in args.without) + "` "
             f"({_machine()}; {watch.describe()}; load average at the end "
             f"{os.getloadavg()[0]:.2f}).\n",
             "Lookups per second (median of the repetitions, interleaved):\n",
             "| contender | " + " | ".join(columns.values()) + " |",
             "|---|" + "---:|" * len(columns)]
    for name, reps in results.items():
        cells = [statistics.median(r[k] for r in reps) for k in columns]
        lines.append(f"| {name} | " + " | ".join(f"{c:,.0f}" for c in cells) + " |")
    report = "\n".join(lines) + "\n"
    print(report)
    if args.out:
        write_report(args.out, report)


if __name__ == "__main__":
    main()
