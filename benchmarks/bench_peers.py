"""recprep against the tools users would pick instead: write and read, same data, same run.

Run ``make bench-peers`` (it builds ``.venv-peers`` with recprep and the peers), or
``python benchmarks/bench_peers.py --out benchmarks/RESULTS-peers.md`` in such a venv;
``--quick`` for a smoke run, ``--only litdata,tf-data`` for some contenders (the baseline
``recprep`` always runs: the ratios need it), ``--list`` to see the registry. The report is
markdown on stdout; progress goes to stderr.

The workloads are ``bench_core``'s: A, MNIST-like ``(float64[784], int)`` x 20,000, and B,
small tuples ``(int, float, str)`` x 200,000. For each contender: the write of the instance
list into a fresh directory under ``--tmp`` (default ``/tmp``), then one full read pass
(from the page cache), counting every instance; repetitions interleaved across contenders
(rep 1 of all, then rep 2...), the median kept, and for every run its wall time, the CPU
time of this process and its children (cores used = CPU / wall), the 1-minute load
average and how busy other processes kept the machine (``bench_core.CpuWatch``). An
untimed pass after the first read checks that every contender gives back the data
(sums of each field, lengths of strings), so no one is fast by dropping work.

A contender is a ``Contender`` in ``CONTENDERS``: ``write(data, dir)`` and ``read(dir)``,
an iterator of instances or (``batched=True``) of column batches, or ``files_of`` another
contender to read what that one wrote. Adding one is a ``register(Contender(...))``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import gc
import importlib
import json
import math
import os
import pickle
import shutil
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import partial
from importlib import metadata
from pathlib import Path
from typing import Any

import numpy as np

from recprep import RecordIO

sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_core import (  # noqa: E402  (the shared helpers)
    CpuWatch,
    _machine,
    floor_write,
    log,
    mnist_like,
    recprep_write,
    small_tuples,
    write_report,
)

os.environ.setdefault("LITDATA_DISABLE_VERSION_CHECK", "1")  # no network look-ups
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_DISABLE_PROGRESS_BARS", "1")
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "2")

NUM_SHARDS = 10
BATCH = 256
PREFIX = "bench"
BASELINE = "recprep"
_LEN = struct.Struct("<I")

# --------------------------------------------------------------------------- the data's layout


@dataclass(frozen=True)
class Field:
    """One position of the workload's tuples: ``f0``, ``f1``... and what it holds."""

    name: str
    kind: str  # "array" | "int" | "float" | "str"
    dtype: str = ""
    shape: tuple[int, ...] = ()


def layout(data: list[tuple[Any, ...]]) -> list[Field]:
    """The fields of the first instance (every instance of a workload has the same)."""
    fields = []
    for i, value in enumerate(data[0]):
        name = f"f{i}"
        if isinstance(value, np.ndarray):
            fields.append(Field(name, "array", value.dtype.name, value.shape))
        elif isinstance(value, int):
            fields.append(Field(name, "int"))
        elif isinstance(value, float):
            fields.append(Field(name, "float"))
        elif isinstance(value, str):
            fields.append(Field(name, "str"))
        else:
            raise TypeError(f"no peer mapping for {type(value).__name__} in field {name}")
    return fields


def columns(data: list[tuple[Any, ...]]) -> dict[str, Any]:
    """The instance list as columns: stacked arrays, numpy ints/floats, lists of str."""
    out: dict[str, Any] = {}
    for i, f in enumerate(layout(data)):
        values = [x[i] for x in data]
        if f.kind == "array":
            out[f.name] = np.stack(values)
        elif f.kind in ("int", "float"):
            out[f.name] = np.array(values, dtype=np.int64 if f.kind == "int" else np.float64)
        else:
            out[f.name] = values
    return out


def payload_bytes(data: list[tuple[Any, ...]]) -> int:
    """The data's own bytes, the same for every contender: array bytes, 8 per number, UTF-8."""
    total = 0
    for i, f in enumerate(layout(data)):
        if f.kind == "array":
            total += sum(x[i].nbytes for x in data)
        elif f.kind == "str":
            total += sum(len(x[i].encode()) for x in data)
        else:
            total += 8 * len(data)
    return total


# --------------------------------------------------------------------------- the registry


@dataclass(frozen=True)
class Contender:
    """One tool's way to write a workload and read it back.

    ``write(data, dir)`` writes the instance list into an empty directory; ``read(dir)``
    iterates one full pass: instances, or column batches when ``batched``. A contender with
    ``files_of`` writes nothing and reads what that contender wrote (another reader of the
    same files). ``needs`` are modules imported before the run; one that fails to import
    leaves the contender out of the run, with the error in the report.
    """

    key: str
    tool: str  # the distribution whose version the report gives
    how: str  # one line for the report: what is written and how it is read
    read: Callable[[Path], Iterable[Any]]
    write: Callable[[list[Any], Path], object] | None = None
    files_of: str | None = None
    batched: bool = False
    needs: tuple[str, ...] = ()
    available: Callable[[], str | None] = lambda: None  # None, or why it can't run


CONTENDERS: dict[str, Contender] = {}


def register(contender: Contender) -> Contender:
    if (contender.write is None) == (contender.files_of is None):
        raise ValueError(f"{contender.key}: give exactly one of write and files_of")
    CONTENDERS[contender.key] = contender
    return contender


def why_not(c: Contender) -> str | None:
    """None when ``c`` can run here, else the reason (the import error, say)."""
    for module in c.needs:
        try:
            importlib.import_module(module)
        except Exception as exc:  # an ImportError, or torchvision's RuntimeError
            return f"`import {module}` fails: {type(exc).__name__}: {str(exc)[:160]}"
    return c.available()


def version(tool: str) -> str:
    try:
        return metadata.version(tool)
    except metadata.PackageNotFoundError:
        return "?"


# --------------------------------------------------------------------------- floor and recprep


def _glob(out: Path) -> str:
    return str(out / f"{PREFIX}-*-of-*")


def _floor_read(out: Path) -> Iterator[Any]:
    """bench_core's floor read, as an iterator of the instances."""
    loads, unpack = pickle.loads, _LEN.unpack
    with open(out / f"{PREFIX}-floor.bin", "rb") as f:
        read = f.read
        while head := read(4):
            yield loads(read(unpack(head)[0]))


register(Contender("floor", "recprep", "`pickle.dumps` + length + write, one file; "
                   "length + `pickle.loads` (bench_core's floor, for orientation)",
                   _floor_read, floor_write))
register(Contender("recprep", "recprep", '`convert(dir, data, 10, "bench")` (snappy, the '
                   "default); `for x in RecordIO(glob)()`",
                   lambda out: RecordIO(_glob(out))(), recprep_write))
register(Contender("recprep-none", "recprep", 'the same with `compressor="none"`',
                   lambda out: RecordIO(_glob(out))(),
                   lambda data, out: recprep_write(data, out, compressor="none")))
register(Contender(
    "recprep-batches", "recprep", f"`RecordIO(glob).batches({BATCH})` over recprep's files",
    lambda out: RecordIO(_glob(out)).batches(BATCH),  # type: ignore[attr-defined]
    files_of="recprep", batched=True,
    available=lambda: None if hasattr(RecordIO, "batches") else "no `RecordIO.batches` yet"))


# --------------------------------------------------------------------------- litdata


def _identity(x: Any) -> Any:
    return x


def litdata_write(data: list[Any], out: Path, start_method: str | None = None) -> None:
    from litdata import optimize

    # its defaults otherwise: one worker per CPU (spawned: each imports torch), any order
    optimize(fn=_identity, inputs=data, output_dir=str(out), chunk_bytes="64MB", verbose=False,
             start_method=start_method)


def litdata_read(out: Path) -> Iterator[Any]:
    from litdata import StreamingDataset

    return iter(StreamingDataset(str(out)))


register(Contender("litdata", "litdata", '`optimize(fn=identity, inputs=data, chunk_bytes="64MB")`'
                   " (a worker per CPU); `for x in StreamingDataset(dir)`",
                   litdata_read, litdata_write, needs=("litdata",)))
register(Contender("litdata-fork", "litdata", 'the same with `start_method="fork"` (no worker '
                   "start-up: what its writing costs once a long job has amortised that)",
                   litdata_read, partial(litdata_write, start_method="fork"),
                   needs=("litdata",)))


# --------------------------------------------------------------------------- mosaic streaming


def _mds_columns(fields: list[Field]) -> dict[str, str]:
    kinds = {"int": "int64", "float": "float64", "str": "str"}
    return {f.name: (f"ndarray:{f.dtype}:{','.join(map(str, f.shape))}" if f.kind == "array"
                     else kinds[f.kind]) for f in fields}


def mosaic_write(data: list[Any], out: Path) -> None:
    from streaming import MDSWriter

    names = [f.name for f in layout(data)]
    with MDSWriter(out=str(out), columns=_mds_columns(layout(data))) as writer:
        write = writer.write
        for x in data:
            write(dict(zip(names, x, strict=True)))


def mosaic_read(out: Path) -> Iterator[Any]:
    from streaming import StreamingDataset

    # batch_size only partitions the samples (it asks for the DataLoader's); items come one by one
    return iter(StreamingDataset(local=str(out), shuffle=False, batch_size=BATCH))


register(Contender("mosaic", "streaming-community", "`MDSWriter(columns=...)` (typed: "
                   "`ndarray:float64:784`, `int64`, `float64`, `str`); `for x in "
                   f"StreamingDataset(local=dir, shuffle=False, batch_size={BATCH})`",
                   mosaic_read, mosaic_write, needs=("streaming",)))


# --------------------------------------------------------------------------- webdataset

_WDS_EXT = {"array": "npy", "int": "cls", "float": "json", "str": "txt"}


def _wds_keys(fields: list[Field]) -> list[str]:
    return [f"{f.name}.{_WDS_EXT[f.kind]}" for f in fields]


def webdataset_write(data: list[Any], out: Path) -> None:
    import webdataset as wds

    keys = _wds_keys(layout(data))
    (out / "keys.json").write_text(json.dumps(keys))
    per_shard = math.ceil(len(data) / NUM_SHARDS)
    with wds.ShardWriter(str(out / f"{PREFIX}-%05d.tar"), maxcount=per_shard,
                         verbose=0) as sink:
        for i, x in enumerate(data):
            sample = dict(zip(keys, x, strict=True))
            sample["__key__"] = f"{i:09d}"
            sink.write(sample)


def webdataset_read(out: Path) -> Iterator[Any]:
    import webdataset as wds

    keys = json.loads((out / "keys.json").read_text())
    urls = sorted(str(p) for p in out.glob(f"{PREFIX}-*.tar"))
    return iter(wds.WebDataset(urls, shardshuffle=False).decode().to_tuple(*keys))


register(Contender("webdataset", "webdataset", "`ShardWriter` (10 tars; `.npy`, `.cls`, "
                   "`.json`, `.txt` members); `WebDataset(urls).decode().to_tuple(...)`",
                   webdataset_read, webdataset_write, needs=("webdataset",)))


# --------------------------------------------------------------------------- HF datasets


def hf_write(data: list[Any], out: Path) -> None:
    from datasets import Dataset, Features, List, Value

    def feature(f: Field) -> Any:
        if f.kind == "array":
            return List(Value(f.dtype), length=f.shape[0])
        return Value({"int": "int64", "float": "float64", "str": "string"}[f.kind])

    features = Features({f.name: feature(f) for f in layout(data)})
    ds = Dataset.from_dict(columns(data), features=features)
    ds.save_to_disk(str(out), num_shards=NUM_SHARDS)


def hf_read(out: Path) -> Iterator[Any]:
    from datasets import load_from_disk

    return iter(load_from_disk(str(out)).with_format("numpy"))


def hf_read_batches(out: Path) -> Iterator[Any]:
    from datasets import load_from_disk

    return load_from_disk(str(out)).with_format("numpy").iter(batch_size=BATCH)


register(Contender("hf-datasets", "datasets", "columns -> `Dataset.from_dict(features=...)` -> "
                   "`save_to_disk(num_shards=10)`; `for x in load_from_disk(dir)"
                   '.with_format("numpy")`', hf_read, hf_write, needs=("datasets",)))
register(Contender("hf-datasets-batches", "datasets", f"the same files; `.iter(batch_size={BATCH})`"
                   ' with `with_format("numpy")`', hf_read_batches, files_of="hf-datasets",
                   batched=True, needs=("datasets",)))


# --------------------------------------------------------------------------- tf.data


def tf_write(data: list[Any], out: Path) -> None:
    import tensorflow as tf

    train = tf.train
    fields = layout(data)

    def feature(f: Field, v: Any) -> Any:
        if f.kind == "array":  # raw bytes keep float64; float_list would be float32
            return train.Feature(bytes_list=train.BytesList(value=[v.tobytes()]))
        if f.kind == "int":
            return train.Feature(int64_list=train.Int64List(value=[v]))
        if f.kind == "float":  # Example has only float32: lossy, and less work for TF
            return train.Feature(float_list=train.FloatList(value=[v]))
        return train.Feature(bytes_list=train.BytesList(value=[v.encode()]))

    per_shard = math.ceil(len(data) / NUM_SHARDS)
    for s in range(NUM_SHARDS):
        with tf.io.TFRecordWriter(str(out / f"{PREFIX}-{s:05d}.tfrecord")) as writer:
            for x in data[s * per_shard:(s + 1) * per_shard]:
                example = train.Example(features=train.Features(
                    feature={f.name: feature(f, v) for f, v in zip(fields, x, strict=True)}))
                writer.write(example.SerializeToString())
    (out / "layout.json").write_text(json.dumps([f.__dict__ for f in fields]))


def tf_read(out: Path) -> Iterator[Any]:
    import tensorflow as tf

    fields = [Field(**{**f, "shape": tuple(f["shape"])})
              for f in json.loads((out / "layout.json").read_text())]
    kinds = {"array": tf.string, "int": tf.int64, "float": tf.float32, "str": tf.string}
    spec = {f.name: tf.io.FixedLenFeature([], kinds[f.kind]) for f in fields}

    def parse(serialized: Any) -> dict[str, Any]:
        batch = tf.io.parse_example(serialized, spec)
        for f in fields:
            if f.kind == "array":
                batch[f.name] = tf.reshape(tf.io.decode_raw(batch[f.name], tf.dtypes.as_dtype(
                    f.dtype)), (-1, *f.shape))
        return batch

    files = sorted(str(p) for p in out.glob(f"{PREFIX}-*.tfrecord"))
    auto = tf.data.AUTOTUNE
    ds = tf.data.TFRecordDataset(files).batch(BATCH).map(parse, num_parallel_calls=auto)
    return ds.prefetch(auto).as_numpy_iterator()


register(Contender("tf-data", "tensorflow-cpu", "`tf.train.Example` per instance (array as raw "
                   "bytes, float as float32) -> `TFRecordWriter`, 10 files; `TFRecordDataset"
                   f".batch({BATCH}).map(parse_example + decode_raw, AUTOTUNE).prefetch`",
                   tf_read, tf_write, batched=True, needs=("tensorflow",)))


# --------------------------------------------------------------------------- checking


def _fields_of(item: Any) -> list[Any]:
    if isinstance(item, dict):
        return [item[k] for k in sorted(item) if not k.startswith("__")]
    return list(item)


def digest(items: Iterable[Any], batched: bool, absolute: bool = False) -> list[float]:
    """Per field: the sum of the numbers (or of their absolute values), or of string lengths."""
    sums: list[float] = []
    for item in items:
        values = _fields_of(item)
        if not sums:
            sums = [0.0] * len(values)
        for i, v in enumerate(values):
            if not batched:
                v = [v]
            first = v[0] if len(v) else 0
            if isinstance(first, (str, bytes, np.str_, np.bytes_)):
                sums[i] += sum(len(s) for s in v)
            else:
                v = np.asarray(v, dtype=np.float64)
                sums[i] += float(np.sum(np.abs(v) if absolute else v))
    return sums


def check(name: str, got: list[float], want: list[float], scale: list[float]) -> None:
    """Exit with a message unless ``got`` matches ``want`` (float32 rounding allowed)."""
    for i, (g, w, s) in enumerate(zip(got, want, scale, strict=True)):
        if abs(g - w) > 1e-5 * s + 1e-9:
            raise SystemExit(f"{name} gave back different data: field f{i} sums to {g!r}, "
                             f"expected {w!r}")


# --------------------------------------------------------------------------- timing


@dataclass
class Run:
    seconds: float
    cores: float  # CPU seconds of this process and its children / wall
    other: float | None  # CPUs other processes kept busy
    load: float  # 1-minute load average at the start


@dataclass
class Result:
    contender: Contender
    n: int
    writes: list[Run] = field(default_factory=list)
    reads: list[Run] = field(default_factory=list)
    file_bytes: int = 0
    units: int = 0  # items the read yielded (instances, or batches)


def _cpu() -> float:
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


def timed(fn: Callable[[], Any]) -> tuple[Run, Any]:
    """One run of ``fn``: its wall time, CPU and the load around it, and what it returned."""
    gc.collect()
    load = os.getloadavg()[0]
    with CpuWatch() as watch:
        cpu, start = _cpu(), time.perf_counter()
        value = fn()
        wall = time.perf_counter() - start
        cpu = _cpu() - cpu
    return Run(wall, cpu / wall if wall else 0.0, watch.other_cpus, load), value


def consume(items: Iterable[Any], batched: bool) -> tuple[int, int]:
    """(instances, items) of one full pass."""
    if not batched:
        count = 0
        for _ in items:
            count += 1
        return count, count
    count = units = 0
    for batch in items:
        count += len(_fields_of(batch)[0])
        units += 1
    return count, units


def run_workload(key: str, data: list[Any], contenders: list[Contender], tmp: Path,
                 reps: int, give_up_after: float) -> dict[str, Result]:
    n = len(data)
    want = digest(data, batched=False)
    scale = [s + 1.0 for s in digest(data, batched=False, absolute=True)]
    results = {c.key: Result(c, n) for c in contenders}
    dirs: dict[str, Path] = {}
    slow: set[str] = set()
    for rep in range(reps):
        for c in contenders:
            if c.write is None or (c.key in slow and rep):
                continue
            log(f"[{key}] rep {rep + 1}/{reps} write {c.key}")
            out = Path(tempfile.mkdtemp(prefix=f"{c.key}-", dir=tmp))
            write = c.write
            run, _ = timed(lambda: write(data, out))  # noqa: B023  (called right here)
            results[c.key].writes.append(run)
            if c.key in dirs:
                shutil.rmtree(dirs[c.key], ignore_errors=True)
            dirs[c.key] = out
            results[c.key].file_bytes = sum(p.stat().st_size for p in out.rglob("*")
                                            if p.is_file())
            if run.seconds > give_up_after:
                slow.add(c.key)
        for c in contenders:
            if c.key in slow and rep:
                continue
            log(f"[{key}] rep {rep + 1}/{reps} read {c.key}")
            source = dirs[c.files_of or c.key]
            read = c.read
            run, counted = timed(lambda: consume(read(source), c.batched))  # noqa: B023
            count, units = counted
            if count != n:
                raise SystemExit(f"{c.key} read {count} of {n} instances")
            results[c.key].reads.append(run)
            results[c.key].units = units
            if rep == 0:
                check(c.key, digest(read(source), c.batched), want, scale)
            if run.seconds > give_up_after:
                slow.add(c.key)
    for path in dirs.values():
        shutil.rmtree(path, ignore_errors=True)
    return results


# --------------------------------------------------------------------------- report


def _median(runs: list[Run], attr: str = "seconds") -> float:
    return statistics.median(getattr(r, attr) for r in runs)


def _spread(runs: list[Run]) -> str:
    secs = [r.seconds for r in runs]
    return f"{min(secs):.2f}–{max(secs):.2f}" if len(secs) > 1 else f"{secs[0]:.2f}"


def _other(runs: list[Run]) -> str:
    others = [r.other for r in runs if r.other is not None]
    return f"{statistics.median(others):.2f}" if others else "?"


def render(args: argparse.Namespace, workloads: list[tuple[str, str, int, dict[str, Result]]],
           skipped: dict[str, str], elapsed: float) -> str:
    out: list[str] = []
    add = out.append
    now = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    add("# recprep against its peers\n")
    add(f"Run {now} on {_machine()}; {'**quick** run, ' if args.quick else ''}median of "
        f"{args.reps}; whole run {elapsed:.0f} s.\n")
    add("Rerun with `make bench-peers` (builds `.venv-peers`: recprep editable plus the peers) "
        "or `python benchmarks/bench_peers.py --out benchmarks/RESULTS-peers.md` in that venv "
        "(`--only KEY,...`, `--quick`, `--list`). One process, the same instance lists for "
        "every contender (`bench_core`'s data sets), repetitions interleaved (rep 1 of every "
        "contender, then rep 2...), the median of each kept; files go to a fresh directory "
        "under /tmp and are read back right after the writes (page cache warm). A read is "
        "one full pass that counts every instance, and an untimed pass checks the values "
        "came back (per-field sums). *MB/s* count the data's own bytes (array bytes, 8 per "
        "number, UTF-8 of strings), the same for every contender, 1 MB = 10^6 B. *cores* is "
        "CPU time of this process and its children over wall time; *other* the CPUs other "
        "processes kept busy meanwhile; *load* the 1-minute load average when the runs "
        "started (median over the runs).\n")
    add("## Contenders and versions\n")
    add("| key | tool | version | write; read |")
    add("|---|---|---|---|")
    shown = {c.key: c for _, _, _, rs in workloads for c in (r.contender for r in rs.values())}
    for key, c in shown.items():
        add(f"| {key} | {c.tool} | {version(c.tool)} | {c.how} |")
    add("")
    if skipped:
        add("Not run here:\n")
        for key, reason in skipped.items():
            add(f"- **{key}**: {reason}")
        add("")

    for wkey, title, payload, results in workloads:
        add(f"## {wkey}: {title}\n")
        add(f"Payload {payload / 1e6:,.1f} MB.\n")
        add("| contender | write inst/s | write MB/s | write s (range) | cores | read inst/s "
            "| read MB/s | read s (range) | cores | file MB | other | load |")
        add("|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        for key, r in results.items():
            runs = r.writes + r.reads
            if r.writes:
                ws = _median(r.writes)
                wcols = (f"{r.n / ws:,.0f} | {payload / ws / 1e6:,.1f} | {_spread(r.writes)} "
                         f"| {_median(r.writes, 'cores'):.2f}")
                mb = f"{r.file_bytes / 1e6:,.1f}"
            else:
                wcols, mb = f"(reads {r.contender.files_of}'s files) | | |", ""
            rs = _median(r.reads)
            unit = f" ({r.units} batches)" if r.contender.batched else ""
            if len(r.reads) < args.reps or 0 < len(r.writes) < args.reps:
                unit += f" ({min(len(r.reads), len(r.writes) or args.reps)} run: > "\
                        f"{args.give_up_after:g} s)"
            add(f"| {key}{unit} | {wcols} | {r.n / rs:,.0f} | {payload / rs / 1e6:,.1f} | "
                f"{_spread(r.reads)} | {_median(r.reads, 'cores'):.2f} | {mb} | "
                f"{_other(runs)} | {_median(runs, 'load'):.2f} |")
        add("")

    add("## Ratios: recprep / peer (instances/s, medians, same run)\n")
    add(f"Above 1 means recprep is faster. *recprep* is `{BASELINE}` (the defaults, one instance "
        "at a time); *best recprep* is the fastest recprep contender of this run for that "
        "operation, named. A peer that reads batches is a different way of reading: compare "
        "it with a batched recprep reader when there is one. The verdict is the best "
        "recprep's.\n")
    add("| workload | peer | reads | write: recprep / peer | read: recprep / peer "
        "| write: best recprep / peer | read: best recprep / peer | verdict |")
    add("|---|---|---|---:|---:|---:|---:|---|")
    for wkey, _, _, results in workloads:
        ours = [r for k, r in results.items() if k.startswith(BASELINE)]
        base = results[BASELINE]
        for key, peer in results.items():
            if key.startswith(BASELINE) or key == "floor":
                continue
            cells, best_cells, behind = [], [], []
            for op in ("writes", "reads"):
                theirs = getattr(peer, op)
                if not theirs:
                    cells.append("—")
                    best_cells.append("—")
                    continue
                cells.append(f"{_median(theirs) / _median(getattr(base, op)):.2f}x")
                best = min((r for r in ours if getattr(r, op)),
                           key=lambda r: _median(getattr(r, op)))  # noqa: B023
                ratio = _median(theirs) / _median(getattr(best, op))
                best_cells.append(f"{ratio:.2f}x ({best.contender.key})")
                if ratio < 1:
                    behind.append(op[:-1])
            verdict = "ahead" if not behind else f"**behind** in {' and '.join(behind)}"
            reads = f"batches of {BATCH}" if peer.contender.batched else "instances"
            add(f"| {wkey} | {key} | {reads} | {cells[0]} | {cells[1]} | {best_cells[0]} "
                f"| {best_cells[1]} | {verdict} |")
    add("")

    add("## Every run\n")
    add("<details><summary>seconds, cores, other load and load average of each run</summary>\n")
    add("| workload | contender | op | run | seconds | cores | other | load |")
    add("|---|---|---|---:|---:|---:|---:|---:|")
    for wkey, _, _, results in workloads:
        for key, r in results.items():
            for op, runs in (("write", r.writes), ("read", r.reads)):
                for i, run in enumerate(runs, 1):
                    other = "?" if run.other is None else f"{run.other:.2f}"
                    add(f"| {wkey} | {key} | {op} | {i} | {run.seconds:.3f} | {run.cores:.2f} "
                        f"| {other} | {run.load:.2f} |")
    add("\n</details>\n")
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--only", action="append", default=[], metavar="KEY[,KEY]",
                   help=f"run only these contenders (and {BASELINE}, always)")
    p.add_argument("--workloads", default="A,B", help="A (MNIST-like), B (small tuples)")
    p.add_argument("--quick", action="store_true", help="a smoke run: 1 rep, 1/10 of the data")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    p.add_argument("--out", type=Path, help="also write the markdown report to this file")
    p.add_argument("--tmp", default="/tmp", help="where the written files go")
    p.add_argument("--give-up-after", type=float, default=20.0,
                   help="seconds after which a contender's write or read is not repeated")
    p.add_argument("--list", action="store_true", help="list the contenders and exit")
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    return args


def choose(only: list[str]) -> list[Contender]:
    keys = [k for item in only for k in item.split(",") if k]
    unknown = [k for k in keys if k not in CONTENDERS]
    if unknown:
        raise SystemExit(f"unknown contender(s) {unknown}; known: {sorted(CONTENDERS)}")
    if not keys:
        return list(CONTENDERS.values())
    wanted = {BASELINE, *keys}
    wanted |= {CONTENDERS[k].files_of for k in keys if CONTENDERS[k].files_of}  # type: ignore
    return [c for k, c in CONTENDERS.items() if k in wanted]


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.list:
        for key, c in CONTENDERS.items():
            reason = why_not(c)
            print(f"{key:22} {c.tool} {version(c.tool)}: {reason or 'ready'}")
        return
    started = time.perf_counter()
    chosen, skipped = [], {}
    for c in choose(args.only):
        reason = why_not(c)
        if reason is None:
            chosen.append(c)
        else:
            skipped[c.key] = reason
            log(f"not running {c.key}: {reason}")
    scale = 10 if args.quick else 1
    makers: dict[str, tuple[str, Callable[[int], list[Any]], int]] = {
        "A": ("MNIST-like, {:,} x (float64[784], int)", mnist_like, 20_000),
        "B": ("small tuples, {:,} x (int, float, str)", small_tuples, 200_000),
    }
    tmp = Path(tempfile.mkdtemp(prefix="recprep-peers-", dir=args.tmp))
    workloads = []
    try:
        for wkey in args.workloads.split(","):
            title, make, n = makers[wkey]
            log(f"building workload {wkey}")
            data = make(n // scale)
            results = run_workload(wkey, data, chosen, tmp, args.reps, args.give_up_after)
            workloads.append((wkey, title.format(len(data)), payload_bytes(data), results))
            del data
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    report = render(args, workloads, skipped, time.perf_counter() - started)
    print(report)
    if args.out:
        write_report(args.out, report)


if __name__ == "__main__":
    main()
