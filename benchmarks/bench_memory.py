"""Memory per DataLoader worker against the number of shards, and spawn start-up.

Run ``python benchmarks/bench_memory.py [--shards 100 10000 100000] [--dir DIR]
[--reps 3] [--out FILE]``. Sets of 200,000 small instances (``(i, float32[8])``) are
written once into ``DIR`` (default: the temp directory) with 100, 10,000 and 100,000
shards and kept there for the next run. The report is markdown on stdout; progress goes
to stderr.

For each set and each start method (``fork``, ``spawn``), a fresh interpreter makes a
``RecordIODataset(shuffle=True)`` and a ``DataLoader`` with 4 persistent workers, reads
one whole epoch, and then reads each worker's ``/proc/<pid>/status`` (``VmHWM``, the
peak; ``VmRSS``) and ``/proc/<pid>/smaps_rollup`` (its private pages: what the worker
costs the machine beyond what it shares with the trainer). The same run times the
first batch from ``iter(loader)``, and each worker its first instance from its own
start (``/proc/self/stat``). Then: ``import recprep`` (wall time in a fresh interpreter,
and ``-X importtime``'s total), and the pickled size of the dataset (what ``spawn``
sends each worker). Repetitions interleave the sets; medians are reported, with the
load average.
"""

from __future__ import annotations

import argparse
import json
import os
import pickle
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

INSTANCES = 200_000
WORKERS = 4
HERE = Path(__file__).resolve()


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def make_set(root: Path, shards: int) -> str:
    """The set of ``shards`` shards under ``root`` (written once)."""
    from recprep import convert

    out = root / f"shards-{shards}"
    if not (out / "s.manifest.json").exists():
        started = time.perf_counter()
        convert(str(out), ((i, np.full(8, i, np.float32)) for i in range(INSTANCES)),
                shards, "s", progress=False, overwrite=True)
        log(f"wrote {shards} shards in {time.perf_counter() - started:.1f} s")
    return str(out / "s")


def _status(pid: int | str = "self") -> dict[str, float]:
    """VmHWM, VmRSS (MB) and the private pages (Private_Clean + Private_Dirty, MB)."""
    found: dict[str, float] = {}
    with open(f"/proc/{pid}/status") as file:
        for line in file:
            key = line.split(":")[0]
            if key in ("VmHWM", "VmRSS"):
                found[key] = int(line.split()[1]) / 1024
    private = 0
    with open(f"/proc/{pid}/smaps_rollup") as file:
        for line in file:
            if line.startswith(("Private_Clean:", "Private_Dirty:")):
                private += int(line.split()[1])
    found["private"] = private / 1024
    return found


def _started() -> float:
    """This process's start, as ``time.time()`` would have said it."""
    with open("/proc/self/stat") as file:
        ticks = int(file.read().rsplit(")", 1)[1].split()[19])
    with open("/proc/stat") as file:
        boot = next(int(line.split()[1]) for line in file if line.startswith("btime"))
    return boot + ticks / os.sysconf("SC_CLK_TCK")


class FirstInstance:
    """A transform that notes, once per worker, the seconds from the worker's start to
    its first instance (a file per worker in ``directory``)."""

    def __init__(self, directory: str) -> None:
        self.directory = directory
        self.seen = False

    def __call__(self, item: object) -> object:
        if not self.seen:
            self.seen = True
            took = time.time() - _started()
            Path(self.directory, f"{os.getpid()}.json").write_text(json.dumps(took))
        return item


def one_run(path: str, context: str, order: str = "shuffled") -> dict[str, object]:
    """A child's run: one epoch with 4 workers; each worker's memory after it."""
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    notes = tempfile.mkdtemp(prefix="bench-memory-")
    dataset = RecordIODataset(path, shuffle=order == "shuffled", seed=1,
                              transform=FirstInstance(notes))
    loader = DataLoader(dataset, batch_size=256, num_workers=WORKERS,
                        persistent_workers=True, multiprocessing_context=context)
    if os.environ.get("BENCH_GC_FREEZE"):  # --gc-freeze: the trainer's objects frozen
        import gc

        gc.freeze()
    started = time.perf_counter()
    batches = iter(loader)
    first = None
    count = 0
    for batch in batches:
        first = first or time.perf_counter() - started
        count += len(batch[0])
    pids = [w.pid for w in batches._workers]  # type: ignore[attr-defined]
    workers = [_status(pid) for pid in pids]
    ready = [json.loads(p.read_text()) for p in Path(notes).iterdir()]
    del batches
    return {"instances": count, "first_batch": first, "workers": workers,
            "ready": ready, "trainer": _status()}


def _child(shards: int, path: str, context: str, order: str) -> dict[str, object]:
    done = subprocess.run([sys.executable, str(HERE), "--one", path, context, order],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["instances"] == INSTANCES, (shards, result["instances"])
    return result


def _share(blob: Path) -> dict[str, float]:
    done = subprocess.run([sys.executable, str(HERE), "--share", str(blob)],
                          capture_output=True, text=True, check=False)
    if done.returncode:
        raise RuntimeError(done.stderr[-2000:])
    return json.loads(done.stdout.strip().splitlines()[-1])  # type: ignore[no-any-return]


def import_times() -> tuple[float, float]:
    """``import recprep``: wall seconds in a fresh interpreter, and importtime's total."""
    code = "import time; t = time.perf_counter(); import recprep; print(time.perf_counter() - t)"
    wall = float(subprocess.run([sys.executable, "-c", code], capture_output=True,
                                text=True, check=True).stdout)
    timed = subprocess.run([sys.executable, "-X", "importtime", "-c", "import recprep"],
                           capture_output=True, text=True, check=True).stderr
    total = next(int(line.split("|")[1]) for line in timed.splitlines()
                 if line.rstrip().endswith("| recprep"))
    return wall, total / 1e6


def pickled(path: str, blob: Path) -> int:
    """The pickled size of the dataset (written to ``blob`` for :func:`worker_share`)."""
    from recprep.torch import RecordIODataset

    data = pickle.dumps(RecordIODataset(path, shuffle=True, seed=1))
    blob.write_bytes(data)
    return len(data)


def worker_share(blob: str) -> dict[str, float]:
    """A child's run: what a spawned worker spends in recprep before its first instance,
    torch imported first (as a spawned worker imports it to run its loop): the dataset
    unpickled (importing recprep), then worker 0 of 4's first instance, through the
    dataset's own ``iter()`` as a DataLoader worker runs it (torch's worker info set as
    a worker has it). Wall seconds, and this process's CPU seconds (``cpu_*``: what the
    load of the machine moves least)."""
    import torch.utils.data  # noqa: F401  (not counted: every spawned worker pays it)
    from torch.utils.data._utils import worker

    wall, cpu = time.perf_counter, time.process_time
    started, started_cpu = wall(), cpu()
    dataset = pickle.loads(Path(blob).read_bytes())
    loaded, loaded_cpu = wall(), cpu()
    worker._worker_info = worker.WorkerInfo(id=0, num_workers=WORKERS, seed=1,
                                            dataset=dataset)
    next(iter(dataset))
    first, first_cpu = wall(), cpu()
    return {"unpickle": loaded - started, "first": first - loaded,
            "cpu_unpickle": loaded_cpu - started_cpu, "cpu_first": first_cpu - loaded_cpu}


def _median(values: list[float]) -> float:
    return statistics.median(values)


def render(results: dict[tuple[int, str], list[dict]], sizes: dict[int, int],
           imports: list[tuple[float, float]], load: tuple[str, str],
           shares: dict[int, list[dict[str, float]]]) -> str:
    lines = [
        "| shards | start | worker VmHWM MB | worker VmRSS MB | worker private MB | "
        "trainer VmRSS MB | first batch s | worker start → first instance s | "
        "dataset pickle bytes |",
        "|---:|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for (shards, context), runs in sorted(results.items()):
        def per_worker(key: str, runs: list[dict] = runs) -> float:
            return _median([_median([w[key] for w in r["workers"]]) for r in runs])

        ready = _median([_median(r["ready"]) for r in runs])
        lines.append(
            f"| {shards:,} | {context} | {per_worker('VmHWM'):.1f} | "
            f"{per_worker('VmRSS'):.1f} | {per_worker('private'):.1f} | "
            f"{_median([r['trainer']['VmRSS'] for r in runs]):.1f} | "
            f"{_median([r['first_batch'] for r in runs]):.2f} | {ready:.2f} | "
            f"{sizes[shards]:,} |")
    wall = _median([w for w, _ in imports])
    total = _median([t for _, t in imports])
    lines += ["", f"`import recprep`: {wall:.3f} s wall, {total:.3f} s by `-X importtime` "
              f"(median of {len(imports)}).", "",
              "A spawned worker's time in recprep (torch imported first):", "",
              "| shards | unpickle the dataset (imports recprep) s | to the first instance s "
              "| CPU: unpickle s | CPU: to the first instance s | CPU: ready s |",
              "|---:|---:|---:|---:|---:|---:|"]
    for n, runs in sorted(shares.items()):
        def mid(key: str, runs: list[dict[str, float]] = runs) -> float:
            return _median([r[key] for r in runs])

        lines.append(f"| {n:,} | {mid('unpickle'):.3f} | {mid('first'):.3f} | "
                     f"{mid('cpu_unpickle'):.3f} | {mid('cpu_first'):.3f} | "
                     f"{_median([r['cpu_unpickle'] + r['cpu_first'] for r in runs]):.3f} |")
    lines += ["",
              f"Load average before: {load[0]}; after: {load[1]}."]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shards", type=int, nargs="+", default=[100, 10_000, 100_000])
    parser.add_argument("--dir", default=os.path.join(tempfile.gettempdir(),
                                                      "recprep-bench-memory"))
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--contexts", nargs="+", default=["fork", "spawn"])
    parser.add_argument("--out")
    parser.add_argument("--order", choices=["shuffled", "unshuffled"], default="shuffled",
                        help="shuffle=True (the default), or unshuffled passes (a set's "
                             "shards read round-robin)")
    parser.add_argument("--gc-freeze", action="store_true",
                        help="gc.freeze() in the trainer before its workers start")
    parser.add_argument("--one", nargs=3, help=argparse.SUPPRESS)
    parser.add_argument("--share", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.one or args.share:
        print(json.dumps(one_run(*args.one) if args.one else worker_share(args.share)))
        return
    if args.gc_freeze:
        os.environ["BENCH_GC_FREEZE"] = "1"
    root = Path(args.dir)
    root.mkdir(parents=True, exist_ok=True)
    paths = {n: make_set(root, n) for n in args.shards}
    blobs = {n: root / f"dataset-{n}.pickle" for n in args.shards}
    sizes = {n: pickled(paths[n], blobs[n]) for n in args.shards}
    load_before = " ".join(f"{x:.2f}" for x in os.getloadavg())
    results: dict[tuple[int, str], list[dict]] = {}
    imports = []
    shares: dict[int, list[dict[str, float]]] = {}
    for rep in range(args.reps):
        imports.append(import_times())
        for n in args.shards:
            shares.setdefault(n, []).append(_share(blobs[n]))
        for n in args.shards:
            for context in args.contexts:
                log(f"rep {rep + 1}: {n} shards, {context}")
                results.setdefault((n, context), []).append(
                    _child(n, paths[n], context, args.order))
    load_after = " ".join(f"{x:.2f}" for x in os.getloadavg())
    frozen = ", the trainer's objects frozen (gc.freeze())" if args.gc_freeze else ""
    report = f"Passes: {args.order}{frozen}.\n\n" + render(
        results, sizes, imports, (load_before, load_after), shares)
    print(report)
    if args.out:
        Path(args.out).write_text(report + "\n")


if __name__ == "__main__":
    main()
