"""recprep reading benchmark: read + decode throughput for training, threads, read_range.

Run ``python benchmarks/bench_reading.py`` for the full run, ``--quick`` for a smoke run,
``--out benchmarks/RESULTS-reading.md`` to also write the report to a file. The report is
markdown on stdout; progress goes to stderr.

What is measured (one process, best of ``--reps``, repetitions interleaved across
contenders, files in a temporary directory on local disk, read from the page cache):

* **throughput** of the MNIST-like set (``(np.random.uniform(-1, 1, 784), label)``):
  the floor (bare file read + ``pickle.loads``); ``RecordIO`` over 10 shards with 0, 1 and
  4 threads, for the default (recprep codec, snappy), ``compressor="none"`` and the pickle
  codec (the floor's decoder, so the difference is the container); ``tf.data.TFRecordDataset``
  over the same pickled records in a TFRecord file (``tf.io.TFRecordWriter``); pyrecordio
  0.0.4's reader;
* **a training loop**: the same reads with a 2 ms GIL-free "step" (``time.sleep``, as when
  waiting on an accelerator) per batch of 128 — how much of the input time threads hide;
* **simulated remote storage**: an fsspec filesystem over the local files that charges
  a latency and a bandwidth per request (fsspec's ``readahead`` block cache, 4 MiB blocks),
  like an object store — where background threads pay off;
* **batches**: ``RecordIO.batches(256)`` (collated numpy columns) against ``read()`` and
  the floor, on the MNIST-like set and on small ``(int, float, str)`` tuples;
* **read_range** of the last 100 records of a 1 GB file (generated, then deleted): on a
  fresh reader (building the chunk index by hopping headers) and again (index cached),
  with the bytes actually read.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import os
import pickle
import shutil
import struct
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path

import fsspec
import numpy as np
from fsspec.implementations.local import LocalFileSystem
from fsspec.spec import AbstractBufferedFile

from recprep import RecordIO, convert
from recprep.write.options import DEFAULT_CHUNK_BYTES

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # noqa: E402  (the shared helpers)
    CpuWatch,
    _machine,
    log,
    mnist_like,
    small_tuples,
)

NUM_SHARDS = 10
PREFIX = "bench"
MiB = 1 << 20
TARGET = 0.8  # RecordIO with 4 threads / floor
BATCH = 256
BATCH_TARGETS = {"mnist": 1.5, "small": 5.0}  # batches(256) / floor (issue 15)
RANGE_TARGET_MS = 50.0
STEP_S = 0.002
STEP_BATCH = 128
_LEN = struct.Struct("<I")






# --------------------------------------------------------------------------- slow storage


class SlowFile(AbstractBufferedFile):
    """A read-only file whose every fetch costs ``latency + size / bandwidth`` seconds."""

    def __init__(self, fs: SlowFS, path: str) -> None:
        self._local = open(path, "rb")  # closed in close()
        super().__init__(fs, path, mode="rb", block_size=fs.block,
                         cache_type=fs.cache, size=os.path.getsize(path))

    def _fetch_range(self, start: int, end: int) -> bytes:
        fs = self.fs
        end = min(end, self.size)  # a read past the end fetches what there is
        with fs.lock:
            type(fs).requests += 1
            type(fs).fetched += max(end - start, 0)
        delay = fs.latency + ((end - start) / fs.bandwidth if fs.bandwidth else 0.0)
        if delay:
            time.sleep(delay)
        return os.pread(self._local.fileno(), max(end - start, 0), start)

    def close(self) -> None:
        super().close()
        self._local.close()


class SlowFS(LocalFileSystem):
    """``slowlocal://`` — local files read as if from an object store (see SlowFile)."""

    protocol = ("slowlocal",)
    local_file = False  # it plays remote storage: reads wait (recprep.read.prefetch.storage_waits)
    latency = 0.0
    bandwidth = 0.0  # bytes/s; 0 = unlimited
    block = 4 * MiB
    cache = "readahead"  # fsspec's default; "none": every read is a request of its size
    requests = 0
    fetched = 0
    lock = threading.Lock()

    @classmethod
    def configure(cls, latency: float, bandwidth: float, cache: str = "readahead") -> None:
        cls.latency, cls.bandwidth, cls.requests, cls.fetched = latency, bandwidth, 0, 0
        cls.cache = cache

    def _open(self, path: str, mode: str = "rb", **kwargs: object):
        if mode != "rb":
            return super()._open(path, mode, **kwargs)
        return SlowFile(self, self._strip_protocol(path))


fsspec.register_implementation("slowlocal", SlowFS, clobber=True)


# --------------------------------------------------------------------------- contenders


@dataclass
class Result:
    name: str
    seconds: float = float("inf")
    note: str = ""
    extra: dict = field(default_factory=dict)




def best_of(contenders: dict[str, Callable[[], int]], n: int, reps: int,
            give_up: float, label: str) -> dict[str, Result]:
    results = {k: Result(k) for k in contenders}
    slow: set[str] = set()
    for rep in range(reps):
        for key, fn in contenders.items():
            if key in slow:
                continue
            log(f"[{label}] rep {rep + 1}/{reps}: {key}")
            gc.collect()
            t = time.perf_counter()
            count = fn()
            seconds = time.perf_counter() - t
            if count != n:
                raise SystemExit(f"{key} read {count} of {n} instances")
            results[key].seconds = min(results[key].seconds, seconds)
            if seconds > give_up:
                slow.add(key)
                results[key].note = f"1 rep: > {give_up:g} s"
    return results


def floor_write(data: list, path: Path) -> int:
    total = 0
    with open(path, "wb") as f:
        for instance in data:
            record = pickle.dumps(instance, protocol=5)
            f.write(_LEN.pack(len(record)))
            f.write(record)
            total += len(record)
    return total


def floor_read(path: Path, opener: Callable = open) -> int:
    loads, unpack = pickle.loads, _LEN.unpack
    count = 0
    with opener(str(path), "rb") as f:
        read = f.read
        while head := read(4):
            loads(read(unpack(head)[0]))
            count += 1
    return count


def recprep_read(pattern: str, threads: int, step: bool = False) -> int:
    count = 0
    reader = RecordIO(pattern, num_threads=threads, allow_pickle=True)
    if not step:
        for _ in reader():
            count += 1
        return count
    for _ in reader():
        count += 1
        if count % STEP_BATCH == 0:
            time.sleep(STEP_S)
    return count


def floor_read_steps(path: Path) -> int:
    loads, unpack = pickle.loads, _LEN.unpack
    count = 0
    with open(path, "rb") as f:
        while head := f.read(4):
            loads(f.read(unpack(head)[0]))
            count += 1
            if count % STEP_BATCH == 0:
                time.sleep(STEP_S)
    return count


def tfrecord_write(data: list, path: Path) -> bool:
    try:
        import tensorflow as tf
    except ImportError:
        return False
    with tf.io.TFRecordWriter(str(path)) as writer:
        for instance in data:
            writer.write(pickle.dumps(instance, protocol=5))
    return True


def tfrecord_read(path: Path, batch: int | None) -> int:
    import tensorflow as tf

    loads = pickle.loads
    count = 0
    ds = tf.data.TFRecordDataset(str(path))
    if batch is None:
        for record in ds.as_numpy_iterator():
            loads(record)
            count += 1
        return count
    for records in ds.batch(batch).as_numpy_iterator():
        for record in records:
            loads(record)
            count += 1
    return count


def pyrecordio_write(data: list, path: Path) -> None:
    from recordio.recordio.header import Compressor
    from recordio.recordio.writer import Writer

    with open(path, "wb") as f:
        writer = Writer(f, MiB, Compressor.snappy)
        for instance in data:
            writer.write(pickle.dumps(instance, protocol=5))
        writer.flush()


def pyrecordio_read(path: Path) -> int:
    import recordio

    loads = pickle.loads
    count = 0
    file = recordio.File(str(path), "r")
    try:
        for record in file:
            loads(record)
            count += 1
    finally:
        file.close()
    return count


# --------------------------------------------------------------------------- sections


RECPREP_SETS = {  # key: (compressor, codec, description)
    "snappy": ("snappy", "recprep", "recprep codec, snappy (the defaults)"),
    "none": ("none", "recprep", "recprep codec, no compression"),
    "pickle": ("none", "pickle", "pickle codec (the floor's decoder), no compression"),
}


def prepare(data: list, root: Path) -> dict:
    log("writing the data set in every format")
    files = {"floor": root / "floor.bin"}
    files["encoded"] = floor_write(data, files["floor"])
    for key, (compressor, codec, _) in RECPREP_SETS.items():
        convert(str(root / key), data, NUM_SHARDS, PREFIX, compressor=compressor, codec=codec,
                progress=False)
        files[key] = str(root / key / f"{PREFIX}-*-of-*")
    files["tfrecord"] = root / "data.tfrecord" if tfrecord_write(
        data, root / "data.tfrecord") else None
    pyrecordio_write(data, root / "data.pyrecordio")
    files["pyrecordio"] = root / "data.pyrecordio"
    return files


def run_throughput(files: dict, n: int, reps: int, give_up: float) -> tuple[dict, str]:
    contenders: dict[str, Callable[[], int]] = {"floor": lambda: floor_read(files["floor"])}
    for key in RECPREP_SETS:
        for threads in (0, 1, 4):
            contenders[f"{key}/{threads}"] = (
                lambda k=key, t=threads: recprep_read(files[k], t))
    if files["tfrecord"] is not None:
        contenders["tf"] = lambda: tfrecord_read(files["tfrecord"], None)
        contenders["tf/batch"] = lambda: tfrecord_read(files["tfrecord"], 256)
    contenders["pyrecordio"] = lambda: pyrecordio_read(files["pyrecordio"])
    with CpuWatch() as watch:
        results = best_of(contenders, n, reps, give_up, "throughput")
    return results, watch.describe()


def steps_only(n: int) -> int:
    count = 0
    for _ in range(n):
        count += 1
        if count % STEP_BATCH == 0:
            time.sleep(STEP_S)
    return count


def run_training(files: dict, n: int, reps: int) -> tuple[dict, str]:
    contenders: dict[str, Callable[[], int]] = {
        "steps": lambda: steps_only(n),  # the steps alone: what no reader can beat
        "floor": lambda: floor_read_steps(files["floor"]),
    }
    for threads in (0, 1, 4):
        contenders[f"snappy/{threads}"] = lambda t=threads: recprep_read(files["snappy"], t, True)
    with CpuWatch() as watch:
        results = best_of(contenders, n, reps, 1e9, "training loop")
    return results, watch.describe()


def run_remote(files: dict, n: int, reps: int, latency: float, bandwidth: float
               ) -> tuple[dict, str]:
    SlowFS.configure(latency, bandwidth)
    slow = fsspec.filesystem("slowlocal")
    contenders: dict[str, Callable[[], int]] = {
        "floor": lambda: floor_read(files["floor"], opener=slow.open),
    }
    for threads in (0, 1, 4):
        contenders[f"snappy/{threads}"] = (
            lambda t=threads: recprep_read("slowlocal://" + files["snappy"], t))
    with CpuWatch() as watch:
        results = best_of(contenders, n, reps, 1e9, "remote")
    return results, watch.describe()


def recprep_batches(pattern: str, size: int = BATCH) -> int:
    count = 0
    for batch in RecordIO(pattern).batches(size):
        count += len(batch[1])
    return count


CHUNK_SIZES = [128 << 10, 512 << 10, 1 << 20]


def run_chunk_sizes(data: list, root: Path, reps: int) -> tuple[dict, str]:
    """MNIST-like data written with each of ``CHUNK_SIZES`` (10 shards, snappy): write,
    ``read()``, ``batches(256)`` and 2,000 uncached random ``dataset()`` lookups, each the
    best of ``reps`` interleaved repetitions (seconds)."""
    n = len(data)
    picks = np.random.default_rng(0).integers(0, n, 2_000).tolist()
    out: dict[int, dict[str, float]] = {c: {} for c in CHUNK_SIZES}
    with CpuWatch() as watch:
        for rep in range(reps):
            for chunk in CHUNK_SIZES:
                log(f"[chunk sizes] rep {rep + 1}/{reps}: {chunk >> 10} KiB")
                where = root / f"chunks-{chunk}"
                shutil.rmtree(where, ignore_errors=True)
                gc.collect()
                t = time.perf_counter()
                convert(str(where), data, NUM_SHARDS, PREFIX, chunk_bytes=chunk, progress=False)
                times = {"write": time.perf_counter() - t}
                pattern = str(where / f"{PREFIX}-*-of-*")
                for name, fn in (("read", partial(recprep_read, pattern, 0)),
                                 ("batches", partial(recprep_batches, pattern))):
                    gc.collect()
                    t = time.perf_counter()
                    if fn() != n:
                        raise SystemExit(f"chunk sizes: {name} lost instances")
                    times[name] = time.perf_counter() - t
                dataset = RecordIO(pattern).dataset(cache_chunks=0)
                t = time.perf_counter()
                for i in picks:
                    dataset[i]
                times["random"] = (time.perf_counter() - t) * n / len(picks)
                for name, seconds in times.items():
                    out[chunk][name] = min(out[chunk].get(name, float("inf")), seconds)
    return out, watch.describe()


def run_batches(files: dict, root: Path, n_small: int, reps: int) -> dict:
    """batches(256) vs read() vs the floor, MNIST-like (``files``) and small tuples."""
    data = small_tuples(n_small)
    floor_write(data, root / "small.bin")
    convert(str(root / "small"), data, NUM_SHARDS, PREFIX, progress=False)
    small = str(root / "small" / f"{PREFIX}-*-of-*")
    del data
    out = {}
    for key, floor, pattern in (("mnist", files["floor"], files["snappy"]),
                                ("small", root / "small.bin", small)):
        contenders: dict[str, Callable[[], int]] = {
            "floor": lambda f=floor: floor_read(f),
            "read": lambda p=pattern: recprep_read(p, 0),
            "batches": lambda p=pattern: recprep_batches(p),
        }
        count = n_small if key == "small" else files["n"]
        with CpuWatch() as watch:
            out[key] = (best_of(contenders, count, reps, 1e9, f"batches {key}"),
                        watch.describe())
    out["n_small"] = n_small
    return out


def run_range(root: Path, gigabytes: float, reps: int) -> dict:
    """read_range of the last 100 records of a file of ``gigabytes`` GB."""
    pool = mnist_like(1000, seed=1)
    record_bytes = 6_310  # one MNIST-like instance in the recprep codec
    n = int(gigabytes * 1e9 / record_bytes)

    def reader():
        for i in range(n):
            yield pool[i % 1000][0], i

    log(f"writing a {gigabytes:g} GB file ({n:,} instances) for read_range")
    directory = root / "big"
    t = time.perf_counter()
    result = convert(str(directory), reader, 1, "big", progress=False)
    written = time.perf_counter() - t
    path = result.paths[0]
    size = os.path.getsize(path)
    out = {"n": n, "bytes": size, "write_s": written, "cold": [], "warm": []}
    for _ in range(reps):
        fresh = RecordIO(path)
        t = time.perf_counter()
        got = list(fresh.read_range(path, n - 100, n))
        out["cold"].append(time.perf_counter() - t)
        assert [label for _, label in got] == list(range(n - 100, n)), "wrong records"
        t = time.perf_counter()
        got = list(fresh.read_range(path, n - 100, n))
        out["warm"].append(time.perf_counter() - t)
        out["chunks"] = fresh._sources.index(0).num_chunks
    for cache in ("none", "readahead"):  # no delay: just count what is fetched
        SlowFS.configure(0.0, 0.0, cache)
        counted = RecordIO("slowlocal://" + path)
        got = list(counted.read_range("slowlocal://" + path, n - 100, n))
        assert [label for _, label in got] == list(range(n - 100, n))
        out[cache] = (SlowFS.fetched, SlowFS.requests)
    SlowFS.configure(0.0, 0.0)
    t = time.perf_counter()
    count = sum(1 for _ in RecordIO(path).read_range(path, 0, n))
    out["scan_s"] = time.perf_counter() - t
    assert count == n
    shutil.rmtree(directory)
    return out


# --------------------------------------------------------------------------- report




NAMES = {
    "floor": "floor: file read + `pickle.loads`",
    "tf": "`tf.data.TFRecordDataset`, per record + `pickle.loads`",
    "tf/batch": "`tf.data.TFRecordDataset().batch(256)` + `pickle.loads`",
    "pyrecordio": "pyrecordio 0.0.4 `recordio.File` + `pickle.loads`",
}


def _name(key: str) -> str:
    if key in NAMES:
        return NAMES[key]
    base, threads = key.split("/")
    return f"`RecordIO`, {RECPREP_SETS[base][2]}, num_threads={threads}"


def render(args: argparse.Namespace, n: int, encoded: int, throughput: tuple, training: tuple,
           remote: tuple, ranged: dict | None, elapsed: float,
           batches: dict | None = None, chunk_sizes: tuple | None = None) -> str:
    out: list[str] = []
    add = out.append
    now = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    add("# recprep reading benchmark\n")
    add(f"Run {now} on {_machine()}; {'**quick** run, ' if args.quick else ''}best of "
        f"{args.reps}; whole run {elapsed:.0f} s. Rerun with `python "
        "benchmarks/bench_reading.py --out benchmarks/RESULTS-reading.md`.\n")
    add(f"Data: {n:,} MNIST-like instances `(np.random.uniform(-1, 1, 784), label)`, "
        f"{encoded / 1e6:,.1f} MB as pickles; recprep sets have {NUM_SHARDS} shards (read "
        "round-robin, 1 MiB chunks). Files are on local disk, read right after being "
        "written (page cache warm). MB/s = pickle bytes / time.\n")

    results, load = throughput
    floor = results["floor"].seconds
    add("## Read + decode throughput\n")
    add(f"_{load}._\n")
    add("| reader | ms | instances/s | MB/s | x floor |")
    add("|---|---:|---:|---:|---:|")
    for key, r in results.items():
        note = f" ({r.note})" if r.note else ""
        add(f"| {_name(key)}{note} | {r.seconds * 1e3:,.0f} | {n / r.seconds:,.0f} | "
            f"{encoded / r.seconds / 1e6:,.0f} | {floor / r.seconds:.2f} |")
    add("")
    best4 = max(floor / results[f"{k}/4"].seconds for k in RECPREP_SETS)
    snappy4 = floor / results["snappy/4"].seconds
    verdict = "met" if snappy4 >= TARGET else "**missed**"
    add(f"Target: RecordIO with 4 threads ≥ {TARGET}x the floor. Defaults (snappy, recprep "
        f"codec): {snappy4:.2f}x — {verdict}; best configuration: {best4:.2f}x. What threads "
        "buy here (x floor, 0 → 1 → 4 threads): " + "; ".join(
            f"{k} " + " → ".join(f"{floor / results[f'{k}/{t}'].seconds:.2f}" for t in (0, 1, 4))
            for k in RECPREP_SETS) + ".\n")
    add("How to read it: the pickle-codec rows decode with the floor's `pickle.loads`, so "
        "their gap to the floor is the container — a CRC-32 of every chunk (zlib, about "
        "2 GB/s), records copied out of chunks, 10 files read round-robin; the recprep-codec "
        "rows add that codec's decoding, and snappy its decompression (the data, random "
        "floats, doesn't compress). Threads can't speed up a loop that does nothing but "
        "decode: decoding holds the GIL, and the hand-overs between threads cost a little. "
        "They pay off when the loop itself leaves the GIL (next section) or storage has "
        "latency (the one after).\n")

    results, load = training
    add(f"## A training loop: a {STEP_S * 1e3:g} ms GIL-free step per {STEP_BATCH} instances\n")
    steps = results.pop("steps").seconds
    add(f"The loop sleeps {STEP_S * 1e3:g} ms (like waiting on an accelerator) after every "
        f"{STEP_BATCH} instances: {n // STEP_BATCH} steps, {steps * 1e3:,.0f} ms measured "
        "without any reading. *Input stall* = total − that: the time the loop spent "
        f"reading and waiting for data. _{load}._\n")
    add("| reader | total ms | input stall ms |")
    add("|---|---:|---:|")
    for key, r in results.items():
        add(f"| {_name(key)} | {r.seconds * 1e3:,.0f} | {(r.seconds - steps) * 1e3:,.0f} |")
    add("")

    results, load = remote
    add(f"## Simulated remote storage ({args.latency_ms:g} ms + {args.bandwidth_mbs:g} MB/s "
        "per request)\n")
    add("`slowlocal://`: an fsspec filesystem over the same local files whose every fetch "
        f"sleeps {args.latency_ms:g} ms plus size / {args.bandwidth_mbs:g} MB/s (fsspec's "
        "readahead cache, 4 MiB blocks) — roughly an object store, where a request has "
        "latency and each connection its own bandwidth. The floor reads its one file through "
        f"the same filesystem. _{load}._\n")
    add("| reader | ms | instances/s | x floor | x RecordIO 0 threads |")
    add("|---|---:|---:|---:|---:|")
    floor, zero = results["floor"].seconds, results["snappy/0"].seconds
    for key, r in results.items():
        add(f"| {_name(key)} | {r.seconds * 1e3:,.0f} | {n / r.seconds:,.0f} | "
            f"{floor / r.seconds:.2f} | {zero / r.seconds:.2f} |")
    add("")

    if batches is not None:
        add(f"## Batches: `RecordIO.batches({BATCH})` (snappy, 0 threads)\n")
        add(f"Each batch collated into numpy columns (`recprep.batching.collate`: stacked "
            f"arrays, int64/float64 arrays, object arrays of str). MNIST-like: the {n:,} "
            f"instances above; small tuples: {batches['n_small']:,} x `(int, float, str)`. "
            "Instances/s counts instances either way.\n")
        add("| workload | reader | ms | instances/s | x floor | x read() |")
        add("|---|---|---:|---:|---:|---:|")
        for key, title in (("mnist", "MNIST-like"), ("small", "small tuples")):
            results, load = batches[key]
            floor, single = results["floor"].seconds, results["read"].seconds
            count = n if key == "mnist" else batches["n_small"]
            for name, r in results.items():
                shown = {"floor": "floor (`pickle.loads`)", "read": "`read()`",
                         "batches": f"`batches({BATCH})`"}[name]
                add(f"| {title} | {shown} | {r.seconds * 1e3:,.0f} | "
                    f"{count / r.seconds:,.0f} | {floor / r.seconds:.2f} | "
                    f"{single / r.seconds:.2f} |")
        add("")
        add("Targets (issue 15): "
            + "; ".join(
                f"{title} ≥ {BATCH_TARGETS[key]:g}x the floor — "
                f"{batches[key][0]['floor'].seconds / batches[key][0]['batches'].seconds:.2f}x"
                for key, title in (("mnist", "MNIST-like"), ("small", "small tuples")))
            + ". Chunks whose records share one layout are decoded into columns a chunk "
            "at a time (`decode_columns`) and move through the pass whole; each batch is "
            "copied out of them once (see docs/performance.md for what bounds both).\n")

    if chunk_sizes is not None:
        sizes, load = chunk_sizes
        add("## Chunk size: writing, reading, batches and random access (MNIST-like)\n")
        add(f"The {n:,} MNIST-like instances written with each `chunk_bytes` (10 shards, "
            f"snappy), then read: `read()`, `batches({BATCH})`, and 2,000 uncached random "
            "`dataset()` lookups (`cache_chunks=0`: each reads its whole chunk), all as "
            f"instances/s, best of the interleaved repetitions. _{load}_\n")
        add("| chunk_bytes | write | read() | batches | random lookups |")
        add("|---|---:|---:|---:|---:|")
        for chunk, times in sizes.items():
            default = " (default)" if chunk == DEFAULT_CHUNK_BYTES else ""
            add(f"| {chunk >> 10} KiB{default} | " + " | ".join(
                f"{n / times[k]:,.0f}" for k in ("write", "read", "batches", "random")) + " |")
        add("")

    if ranged is not None:
        cold, warm = min(ranged["cold"]) * 1e3, min(ranged["warm"]) * 1e3
        verdict = "met" if cold < RANGE_TARGET_MS else "**missed**"
        add(f"## read_range: the last 100 records of a {ranged['bytes'] / 1e9:.2f} GB file\n")
        add(f"{ranged['n']:,} MNIST-like instances in one RecordIO file (snappy, "
            f"{ranged['chunks']:,} chunks), written in {ranged['write_s']:.1f} s, deleted "
            "afterwards. *Cold*: a fresh `RecordIO(path)`, so the call builds the chunk index "
            "(one 20-byte header read per chunk, hopping) before it seeks to the chunk that "
            "holds the range; *warm*: the same call again (index cached). Best of "
            f"{len(ranged['cold'])}.\n")
        add("| | ms |")
        add("|---|---:|")
        add(f"| read_range, cold (index built) | {cold:.1f} |")
        add(f"| read_range, warm (index cached) | {warm:.2f} |")
        add(f"| reading the whole file, for comparison | {ranged['scan_s'] * 1e3:,.0f} |")
        add("")
        (exact, exact_reads), (ahead, ahead_reads) = ranged["none"], ranged["readahead"]
        add(f"Target: < {RANGE_TARGET_MS:g} ms without scanning — {verdict} (cold). What "
            "the cold call reads, through a filesystem that counts: with every read a "
            f"request of its own size, {exact / 1e6:,.2f} MB in {exact_reads:,} reads (the "
            f"headers, then the chunks holding the range) of {ranged['bytes'] / 1e6:,.0f} "
            f"MB; through fsspec's default readahead cache (4 MiB blocks), "
            f"{ahead / 1e6:,.0f} MB in {ahead_reads:,} requests, since header hops "
            f"{ranged['bytes'] / ranged['chunks'] / 1024:,.0f} KiB apart land in every "
            "block. Locally both are cheap; on an object store the "
            "index is better built once per worker (the reader caches it) or stored beside "
            "the file.\n")
    return "\n".join(out)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true", help="1 rep, 1/10 of the data, 0.1 GB")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 5, quick 1)")
    p.add_argument("--out", type=Path, help="also write the markdown report to this file")
    p.add_argument("--tmp", default=None, help="where temporary files go (default: $TMPDIR)")
    p.add_argument("--big-gb", type=float, default=None, help="read_range file size (1 GB)")
    p.add_argument("--latency-ms", type=float, default=20.0)
    p.add_argument("--bandwidth-mbs", type=float, default=100.0)
    p.add_argument("--give-up-after", type=float, default=30.0)
    p.add_argument("--no-range", action="store_true", help="skip the 1 GB read_range run")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 5
    if args.big_gb is None:
        args.big_gb = 0.1 if args.quick else 1.0
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    started = time.perf_counter()
    n = 2_000 if args.quick else 20_000
    try:
        import tensorflow  # noqa: F401  (imported before any timing)
    except ImportError:
        log("tensorflow is not installed: the TFRecord rows are skipped")
    root = Path(tempfile.mkdtemp(prefix="recprep-bench-reading-", dir=args.tmp))
    try:
        data = mnist_like(n)
        files = prepare(data, root)
        gc.collect()
        throughput = run_throughput(files, n, args.reps, args.give_up_after)
        files["n"] = n
        batches = run_batches(files, root, 10 * n, args.reps)
        chunk_sizes = run_chunk_sizes(data, root, max(1, args.reps // 2))
        training = run_training(files, n, max(1, args.reps // 2))
        remote = run_remote(files, n, max(1, args.reps // 2), args.latency_ms / 1e3,
                            args.bandwidth_mbs * 1e6)
        ranged = None if args.no_range else run_range(root, args.big_gb, 3)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    report = render(args, n, files["encoded"], throughput, training, remote, ranged,
                    time.perf_counter() - started, batches, chunk_sizes)
    print(report)
    if args.out:
        args.out.write_text(report + "\n")
        log(f"wrote {args.out}")


if __name__ == "__main__":
    main()
