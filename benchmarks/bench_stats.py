"""What the stall report costs: a pass over small records, with and without its timing.

Run ``python benchmarks/bench_stats.py --before SRC`` where ``SRC`` is the ``src``
directory of a recprep without the stall report (``git archive <commit> src | tar -x -C
DIR`` gives one): markdown on stdout. Each rep is a fresh process of each version, the
versions interleaved (before, after, before, after...), each timing its best of five
passes after a warm one over the same set, in CPU seconds of the process
(``time.process_time``: less moved by other processes than wall time). The set: small
``(int, float)`` instances of the recprep codec in the writer's default chunks (128 KiB)
and in 4 KiB ones, read one at a time (``reader()``) and in batches of 256
(``reader.batches(256)``), no threads. The overhead is the ratio of the medians, with
the load average of the run.

On a loaded machine, two medians move by a few percent either way; so the
benchmark also counts what the timing itself costs, in one process: the hooks a chunk
and a block pass through (``perf_counter`` calls, the counter's lock, the record bytes),
timed alone, times the chunks and blocks of a pass, over the pass's time.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
AFTER = HERE.parent / "src"

#: the chunk sizes of the sets read: the writer's default, and small
CHUNKS = {"128 KiB": None, "4 KiB": 4 << 10}

CHILD = """
import sys, time
from recprep import RecordIO
reader = RecordIO(sys.argv[1])
mode = sys.argv[2]
def one():
    began = time.process_time()
    stream = reader() if mode == "instances" else reader.batches(256)
    for _ in stream:
        pass
    return time.process_time() - began
one()
print(min(one() for _ in range(5)))
"""


def _time(src: Path, path: str, mode: str) -> float:
    env = dict(os.environ, PYTHONPATH=str(src))
    done = subprocess.run([sys.executable, "-c", CHILD, path, mode], env=env,
                          capture_output=True, text=True, check=True)
    return float(done.stdout)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--before", type=Path, required=True,
                        help="the src directory of recprep without the stall report")
    parser.add_argument("--instances", type=int, default=400_000)
    parser.add_argument("--reps", type=int, default=5)
    args = parser.parse_args()
    sys.path.insert(0, str(AFTER))
    from recprep import convert

    with tempfile.TemporaryDirectory() as tmp:
        rows, costs = [], []
        load = os.getloadavg()
        for label, chunk_bytes in CHUNKS.items():
            path = str(Path(tmp) / f"small{chunk_bytes}")
            convert(path, ((i, i * 0.5) for i in range(args.instances)), 4, "s",
                    chunk_bytes=chunk_bytes)
            costs.append((label, *_hook_cost(path)))
            for mode in ("instances", "batches"):
                before, after = [], []
                for _ in range(args.reps):
                    before.append(_time(args.before, path, mode))
                    after.append(_time(AFTER, path, mode))
                rows.append((label, mode, statistics.median(before), statistics.median(after)))
        load = tuple(max(x, y) for x, y in zip(load, os.getloadavg(), strict=True))
    print(f"{args.instances:,} instances of (int, float), recprep codec, 4 shards, "
          f"medians of {args.reps} interleaved reps; load average up to "
          f"{load[0]:.2f} {load[1]:.2f} {load[2]:.2f}\n")
    print("| chunks | pass | before (CPU s) | after (CPU s) | after / before |")
    print("|---|---|---:|---:|---:|")
    for label, mode, b, a in rows:
        print(f"| {label} | {mode} | {b:.3f} | {a:.3f} | {(a / b - 1):+.1%} |")
    print("\n| chunks | chunks per pass | hooks per chunk and block (µs) | pass (s) | "
          "hooks / pass |")
    print("|---|---:|---:|---:|---:|")
    for label, chunks, hook, seconds in costs:
        print(f"| {label} | {chunks:,} | {hook * 1e6:.1f} | {seconds:.3f} | "
              f"{chunks * hook / seconds:.2%} |")


def _hook_cost(path: str) -> tuple[int, float, float]:
    """The chunks of a pass over ``path``, what the hooks of one chunk and its block
    cost (seconds), and the pass's time (the best of three, instances one at a time)."""
    import timeit

    from recprep import RecordIO
    from recprep.containers import nbytes
    from recprep.read.readstats import ReadCounter, Setup

    reader = RecordIO(path)
    seconds = min(timeit.repeat(lambda: [None for _ in reader()], number=1, repeat=3))
    stats = reader.stats()
    chunks = stats.chunks // stats.passes
    counter = ReadCounter()
    watch = counter.watch(lambda: Setup("", 0, False, False))
    now, items = time.perf_counter, iter(())
    records = _one_chunk(path)

    def hooks() -> None:
        began = now()
        fetched = now()
        unlocked = now()
        counter.chunk(fetched - began, now() - unlocked, nbytes(records))
        handed = now()
        watch.handing(0.0, handed, 1, items)
        watch.taken(now())

    n = 20_000
    return chunks, min(timeit.repeat(hooks, number=n, repeat=5)) / n, seconds


def _one_chunk(path: str) -> object:
    """The records of the first chunk of the set ``path`` (as the reader holds them)."""
    from recprep import RecordIO
    from recprep.containers import get_format

    reader = RecordIO(path)
    with reader.fs.open(reader.paths[0], "rb") as f:
        return next(iter(get_format("recordio").read_chunks(f, path=reader.paths[0]))).records

if __name__ == "__main__":
    main()
