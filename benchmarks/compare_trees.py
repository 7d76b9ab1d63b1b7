"""Two source trees of recprep side by side: the same work timed alternately in one run.

For a restructuring ("behaviour and speed unchanged"), run the core operations against a
tree before and after, interleaved (A, B, A, B, ... each in a fresh subprocess, so imports
and caches don't favour one), and report each one's median and the ratio after/before:

    python benchmarks/compare_trees.py BEFORE/src AFTER/src --reps 5

Operations (local disk, data written once per tree and rep, from the page cache):
``convert`` of MNIST-like instances (a 784-byte uint8 image and an int label) and of small
tuples (int, float, str); a full ``read()`` and ``batches(256)`` of each; 2,000 random
``dataset()[i]`` lookups. The load average is recorded with the table.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap

CHILD = textwrap.dedent("""
    import json, os, sys, tempfile, time
    import numpy as np
    from recprep import RecordIO, convert
    n = int(sys.argv[1])
    rng = np.random.default_rng(0)
    mnist = [(rng.integers(0, 255, 784, dtype=np.uint8), int(i % 10)) for i in range(n)]
    small = [(i, i * 0.5, f"w{i}") for i in range(4 * n)]
    out = {}
    with tempfile.TemporaryDirectory() as work:
        for name, data in (("mnist", mnist), ("small", small)):
            where = os.path.join(work, name)
            t = time.perf_counter(); convert(where, data, 8, "x", progress=False)
            out[f"convert {name}"] = time.perf_counter() - t
            reader = RecordIO(os.path.join(where, "x"))
            t = time.perf_counter(); sum(1 for _ in reader())
            out[f"read() {name}"] = time.perf_counter() - t
            t = time.perf_counter(); sum(1 for _ in reader.batches(256))
            out[f"batches(256) {name}"] = time.perf_counter() - t
        ds = RecordIO(os.path.join(work, "mnist", "x")).dataset()
        picks = rng.integers(0, len(ds), 2000).tolist()
        t = time.perf_counter()
        for i in picks:
            ds[i]
        out["2000 dataset()[i] mnist"] = time.perf_counter() - t
    print(json.dumps(out))
""")


def run(tree: str, n: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": os.path.abspath(tree)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(n)], capture_output=True,
                          text=True, env=env, check=True)
    return json.loads(done.stdout.splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("before", help="the src directory of the tree before")
    parser.add_argument("after", help="the src directory of the tree after")
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--instances", type=int, default=40_000)
    args = parser.parse_args()
    times: dict[str, dict[str, list[float]]] = {"before": {}, "after": {}}
    loads = []
    with tempfile.TemporaryDirectory():
        for rep in range(args.reps):
            for side, tree in (("before", args.before), ("after", args.after)):
                for key, value in run(tree, args.instances).items():
                    times[side].setdefault(key, []).append(value)
                loads.append(os.getloadavg()[0])
                print(f"rep {rep + 1}/{args.reps} {side} done", file=sys.stderr)
    print(f"{args.reps} reps each, alternating; {args.instances} MNIST-like and "
          f"{4 * args.instances} small instances; load average "
          f"{min(loads):.2f}–{max(loads):.2f}\n")
    print("| operation | before (s, median) | after (s, median) | after / before |")
    print("|---|---:|---:|---:|")
    for key in times["before"]:
        a, b = (statistics.median(times[s][key]) for s in ("before", "after"))
        print(f"| {key} | {a:.3f} | {b:.3f} | {b / a:.2f} |")


if __name__ == "__main__":
    main()
