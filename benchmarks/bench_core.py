"""recprep core benchmark: write and read throughput against a pickle floor, side by side.

Run ``python benchmarks/bench_core.py`` (or ``make bench``) for the full run, ``--quick``
for a smoke run, ``--out benchmarks/RESULTS.md`` to also write the report to a file.
The report is markdown on stdout; progress goes to stderr.

What is measured, in one run and one process (best of ``--reps`` repetitions, input lists
built before timing, ``time.perf_counter``, output in a temporary directory on local disk,
read right after the write, so from the page cache):

* **floor**: a bare loop of ``pickle.dumps(instance, protocol=5)``, a 4-byte length and
  ``file.write`` into one file; reading is the matching loop of length + ``pickle.loads``;
* **recprep**: ``convert(tmpdir, data, 10, "bench")`` (codec ``recprep``, snappy by default,
  also ``compressor="none"``); reading is a full loop over ``RecordIO(glob)()``;
* **pyrecordio 0.0.4**: its ``Writer`` (1 MiB chunk limit, snappy) fed ``pickle.dumps`` of
  each instance, and ``recordio.File(path, "r")`` + ``pickle.loads`` to read;
* a chunk-size sweep of ``convert`` + read;
* the peak RSS of a subprocess converting a 2 GiB generator into 10 shards.

MB/s are of *encoded record bytes* (pickles for the floor and pyrecordio, the recprep
codec's records for recprep), 1 MB = 10**6 bytes.
"""

from __future__ import annotations

import argparse
import cProfile
import datetime as dt
import gc
import io
import json
import os
import pickle
import platform
import pstats
import shutil
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path

import numpy as np

import recprep
from recprep import RecordIO, convert, get_codec
from recprep.write.options import DEFAULT_CHUNK_BYTES

NUM_SHARDS = 10
PREFIX = "bench"
KiB, MiB = 1 << 10, 1 << 20
SWEEP = [64 * KiB, 128 * KiB, 256 * KiB, 512 * KiB, 1 * MiB, 4 * MiB]
DEFAULT_CHUNK = DEFAULT_CHUNK_BYTES
PYRECORDIO_CHUNK = 1 * MiB
MEM_TARGET_MB = 300
TARGETS = {"A": 0.5, "B": 0.35}  # recprep / floor, write and read
PYRECORDIO_TARGET = 5.0  # recprep writer / pyrecordio writer
_LEN = struct.Struct("<I")
NOTES_MARKER = "<!-- notes: kept by --out -->"


def write_report(path: Path, report: str) -> None:
    """Write ``report`` to ``path``, keeping the hand-written findings below
    :data:`NOTES_MARKER` of the file there (they survive a rerun)."""
    notes = ""
    if path.exists():
        old = path.read_text()
        if NOTES_MARKER in old:
            notes = "\n" + old[old.index(NOTES_MARKER):]
    path.write_text(report + "\n" + notes)
    log(f"wrote {path}")


def log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


# --------------------------------------------------------------------------- data sets


def mnist_like(n: int, seed: int = 0) -> list[tuple[np.ndarray, int]]:
    """Set A: ``(float64[784] in [-1, 1), label)``, like PaddlePaddle's MNIST reader."""
    rng = np.random.default_rng(seed)
    return [(rng.uniform(-1, 1, 784), int(rng.integers(10))) for _ in range(n)]


def small_tuples(n: int, seed: int = 1) -> list[tuple[int, float, str]]:
    """Set B: ``(int, float, str)`` with short strings."""
    rng = np.random.default_rng(seed)
    floats = rng.standard_normal(n).tolist()
    words = rng.integers(0, 100_000, n).tolist()
    return [(i, floats[i], f"token-{words[i]}") for i in range(n)]


# --------------------------------------------------------------------------- timing


class Scratch:
    """Fresh directories under one temporary root, removed on exit."""

    def __init__(self, root: str | None) -> None:
        self.root = Path(tempfile.mkdtemp(prefix="recprep-bench-", dir=root))
        self._n = 0

    def fresh(self, name: str) -> Path:
        self._n += 1
        path = self.root / f"{name}-{self._n}"
        path.mkdir()
        return path

    def __enter__(self) -> Scratch:
        return self

    def __exit__(self, *exc: object) -> None:
        shutil.rmtree(self.root, ignore_errors=True)


class CpuWatch:
    """How busy *other* processes kept the machine while a section ran (needs psutil).

    Machine busy CPU-seconds (steal included) minus this process's and its children's.
    """

    def __enter__(self) -> CpuWatch:
        self.other_cpus: float | None = None
        self._start = self._sample()
        return self

    def __exit__(self, *exc: object) -> None:
        end = self._sample()
        if self._start is not None and end is not None:
            busy, own, wall = (b - a for a, b in zip(self._start, end, strict=True))
            self.other_cpus = max(0.0, busy - own) / wall if wall > 0 else 0.0

    @staticmethod
    def _sample() -> tuple[float, float, float] | None:
        try:
            import psutil
        except ImportError:
            return None
        t = psutil.cpu_times()
        busy = sum(t) - t.idle - getattr(t, "iowait", 0.0)
        busy -= getattr(t, "guest", 0.0) + getattr(t, "guest_nice", 0.0)  # inside user
        own = os.times()
        mine = own.user + own.system + own.children_user + own.children_system
        return busy, mine, time.perf_counter()

    def describe(self) -> str:
        if self.other_cpus is None:
            return "other load not measured (no psutil)"
        return (f"other processes kept {self.other_cpus:.2f} of {os.cpu_count()} CPUs busy "
                "meanwhile")


@dataclass
class Contender:
    """One way of writing and reading a data set: ``write(data, dir)``, ``read(dir)``."""

    key: str
    name: str
    write: Callable[[list, Path], object]
    read: Callable[[Path], int]
    encoded_bytes: int
    roundtrip_check: bool = False


@dataclass
class Row:
    """One contender's figures on one data set (best times over the repetitions)."""

    name: str
    n: int
    encoded_bytes: int
    write_s: float
    read_s: float
    file_bytes: int
    note: str = ""

    def write_ips(self) -> float:
        return self.n / self.write_s

    def read_ips(self) -> float:
        return self.n / self.read_s


def _timed(fn: Callable[..., object], *args: object) -> tuple[float, object]:
    gc.collect()
    t = time.perf_counter()
    value = fn(*args)
    return time.perf_counter() - t, value


def measure(contenders: list[Contender], data: list, scratch: Scratch, reps: int,
            give_up_after: float, label: str) -> dict[str, Row]:
    """Best of ``reps`` for each contender, repetitions interleaved across contenders.

    Interleaving spreads any background load over all contenders alike, which keeps the
    ratios honest on a shared machine. A contender whose single write or read took longer
    than ``give_up_after`` seconds is not repeated.
    """
    n = len(data)
    best_w = {c.key: float("inf") for c in contenders}
    best_r = dict(best_w)
    outs: dict[str, Path] = {}
    slow: set[str] = set()
    for rep in range(reps):
        for c in contenders:
            if c.key in slow:
                continue
            log(f"[{label}] rep {rep + 1}/{reps} write {c.key}")
            out = scratch.fresh(c.key)
            seconds, _ = _timed(c.write, data, out)
            best_w[c.key] = min(best_w[c.key], seconds)
            if c.key in outs:
                shutil.rmtree(outs[c.key])
            outs[c.key] = out
            if rep == 0 and c.roundtrip_check:
                _check_roundtrip(data, out)
            if seconds > give_up_after:
                slow.add(c.key)
        for c in contenders:
            if c.key in slow and rep > 0:
                continue
            log(f"[{label}] rep {rep + 1}/{reps} read {c.key}")
            seconds, count = _timed(c.read, outs[c.key])
            if count != n:
                raise SystemExit(f"{c.name} read {count} of {n} instances")
            best_r[c.key] = min(best_r[c.key], seconds)
            if seconds > give_up_after:
                slow.add(c.key)
    rows = {}
    for c in contenders:
        note = f"1 rep: > {give_up_after:g} s" if c.key in slow and reps > 1 else ""
        rows[c.key] = Row(c.name, n, c.encoded_bytes, best_w[c.key], best_r[c.key],
                          _dir_bytes(outs[c.key]), note)
        shutil.rmtree(outs[c.key])
    return rows


# --------------------------------------------------------------------------- the paths


def floor_write(data: list, out: Path) -> int:
    dumps, pack = pickle.dumps, _LEN.pack
    total = 0
    with open(out / f"{PREFIX}-floor.bin", "wb") as f:
        write = f.write
        for instance in data:
            record = dumps(instance, protocol=5)
            write(pack(len(record)))
            write(record)
            total += len(record)
    return total


def floor_read(out: Path) -> int:
    loads, unpack = pickle.loads, _LEN.unpack
    count = 0
    with open(out / f"{PREFIX}-floor.bin", "rb") as f:
        read = f.read
        while True:
            head = read(4)
            if not head:
                break
            loads(read(unpack(head)[0]))
            count += 1
    return count


def recprep_write(data: list, out: Path, compressor: str | None = None,
                  chunk_bytes: int | None = None):
    return convert(
        str(out),
        data,
        NUM_SHARDS,
        PREFIX,
        compressor=compressor,
        chunk_bytes=chunk_bytes,
        progress=False,
    )


def recprep_read(out: Path) -> int:
    count = 0
    for _ in RecordIO(str(out / f"{PREFIX}-*-of-*"))():
        count += 1
    return count


def pyrecordio_write(data: list, out: Path, chunk: int = PYRECORDIO_CHUNK) -> None:
    from recordio.recordio.header import Compressor
    from recordio.recordio.writer import Writer

    dumps = pickle.dumps
    with open(out / f"{PREFIX}-pyrecordio.rio", "wb") as f:
        writer = Writer(f, chunk, Compressor.snappy)
        write = writer.write
        for instance in data:
            write(dumps(instance, protocol=5))
        writer.flush()


def pyrecordio_read(out: Path) -> int:
    import recordio

    loads = pickle.loads
    count = 0
    file = recordio.File(str(out / f"{PREFIX}-pyrecordio.rio"), "r")
    try:
        for record in file:
            loads(record)
            count += 1
    finally:
        file.close()
    return count


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.name.startswith(f"{PREFIX}-"))


def _same(a: object, b: object) -> bool:
    if isinstance(a, tuple) and isinstance(b, tuple):
        return len(a) == len(b) and all(_same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)
    return type(a) is type(b) and a == b


def _check_roundtrip(data: list, out: Path) -> None:
    back = list(RecordIO(str(out / f"{PREFIX}-*-of-*"))())
    n = len(back)
    if n != len(data) or not all(_same(back[i], data[i]) for i in (0, n // 2, n - 1)):
        raise SystemExit(f"recprep round trip failed in {out}: {n} of {len(data)} instances")


def _recprep(key: str, name: str, encoded: int, compressor: str | None = None,
             chunk_bytes: int | None = None) -> Contender:
    return Contender(
        key, name, partial(recprep_write, compressor=compressor, chunk_bytes=chunk_bytes),
        recprep_read, encoded, roundtrip_check=True,
    )


@dataclass
class SetResult:
    key: str
    title: str
    rows: dict[str, Row]
    load: str


def run_set(key: str, title: str, data: list, scratch: Scratch, reps: int,
            give_up_after: float) -> SetResult:
    encode = get_codec("recprep").encode
    recprep_bytes = sum(len(encode(x)) for x in data)
    pickled_bytes = sum(len(pickle.dumps(x, protocol=5)) for x in data)
    contenders = [
        Contender("floor", "floor: pickle + length + write", floor_write, floor_read,
                  pickled_bytes),
        _recprep("recprep", "recprep convert, snappy (default)", recprep_bytes),
        _recprep("recprep-none", "recprep convert, none", recprep_bytes, compressor="none"),
        Contender("pyrecordio", "pyrecordio 0.0.4 Writer, 1 MiB chunks, snappy",
                  pyrecordio_write, pyrecordio_read, pickled_bytes),
    ]
    with CpuWatch() as watch:
        rows = measure(contenders, data, scratch, reps, give_up_after, key)
    return SetResult(key, title, rows, watch.describe())


def run_sweep(sets: dict[str, list], scratch: Scratch, reps: int,
              give_up_after: float) -> tuple[dict[tuple[str, int], Row], str]:
    encode = get_codec("recprep").encode
    rows = {}
    with CpuWatch() as watch:
        for key, data in sets.items():
            encoded = sum(len(encode(x)) for x in data)
            contenders = [_recprep(str(chunk), f"{chunk // KiB} KiB", encoded, chunk_bytes=chunk)
                          for chunk in SWEEP]
            found = measure(contenders, data, scratch, reps, give_up_after, f"sweep {key}")
            rows.update({(key, int(k)): row for k, row in found.items()})
    return rows, watch.describe()


# --------------------------------------------------------------------------- memory


def _peak_rss_mb() -> float:
    """This process's peak RSS in MB since exec: VmHWM (ru_maxrss inherits the parent's peak)."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) * 1024 / 1e6  # kB (KiB) -> MB
    except OSError:
        pass
    import resource

    scale = 1 if sys.platform == "darwin" else 1024  # bytes on macOS, KiB on Linux
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * scale / 1e6


def memory_child(out: str, instances: int, array_bytes: int) -> None:
    """Convert ``instances`` x (one shared float64 array, int) into 10 shards; print JSON."""
    array = np.random.default_rng(0).uniform(-1, 1, array_bytes // 8)
    baseline = _peak_rss_mb()

    def reader():
        for i in range(instances):
            yield array, i

    t = time.perf_counter()
    result = convert(out, reader, NUM_SHARDS, "mem", progress=False)
    seconds = time.perf_counter() - t
    print(json.dumps({
        "baseline_mb": baseline,
        "peak_rss_mb": _peak_rss_mb(),
        "seconds": seconds,
        "input_bytes": instances * array_bytes,
        "file_bytes": result.total_bytes,
        "records": result.manifest.num_records,
    }))


def run_memory(scratch: Scratch, instances: int, array_bytes: int) -> dict:
    out = scratch.fresh("memory")
    log(f"[memory] {instances} x {array_bytes / MiB:g} MiB in a subprocess")
    with CpuWatch() as watch:
        done = subprocess.run(
            [sys.executable, __file__, "--memory-child", str(out),
             "--memory-instances", str(instances), "--memory-array-bytes", str(array_bytes)],
            capture_output=True, text=True, check=False,
        )
    shutil.rmtree(out, ignore_errors=True)
    if done.returncode:
        raise SystemExit(f"memory child failed:\n{done.stderr}")
    return {**json.loads(done.stdout.strip().splitlines()[-1]), "load": watch.describe()}


# --------------------------------------------------------------------------- profile


def run_profile(sets: dict[str, list], scratch: Scratch, top: int) -> str:
    """cProfile of one convert and one full read of each set; top entries by own time."""
    text = io.StringIO()
    for key, data in sets.items():
        out = scratch.fresh("profile")
        runs = [("convert", recprep_write, (data, out)), ("read", recprep_read, (out,))]
        for label, fn, fn_args in runs:
            log(f"[profile {key}] {label}")
            profiler = cProfile.Profile()
            profiler.runcall(fn, *fn_args)
            text.write(f"==== set {key}: {label} ({len(data)} instances), top {top} by "
                       "tottime ====\n")
            pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
        shutil.rmtree(out)
    lines = [ln.rstrip() for ln in text.getvalue().splitlines()]
    return "\n".join(ln for ln in lines if ln)


# --------------------------------------------------------------------------- report


def _i(x: float) -> str:
    return f"{x:,.0f}"


def _mb(x: float) -> str:
    return f"{x:,.1f}"


def _verdict(ratio: float, target: float) -> str:
    if ratio >= target:
        return "met"
    short = (1 - ratio / target) * 100
    return f"**missed** by {short:.1f}% (needs {target / ratio:.3f}x the speed)"


def _machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (f"{os.cpu_count()} CPUs ({cpu}), Python {platform.python_version()}, "
            f"numpy {np.__version__}, recprep {recprep.__version__}, {platform.system()}")


def render(args: argparse.Namespace, sets: list[SetResult],
           sweep: tuple[dict[tuple[str, int], Row], str] | None, memory: dict | None,
           profile: str | None, elapsed: float) -> str:
    out: list[str] = []
    add = out.append
    now = dt.datetime.now().astimezone().strftime("%Y-%m-%d %H:%M %Z")
    add("# recprep core benchmark\n")
    add(f"Run {now} on {_machine()}; {'**quick** run, ' if args.quick else ''}"
        f"best of {args.reps}; whole run {elapsed:.0f} s.\n")
    add("Rerun with `make bench` or `python benchmarks/bench_core.py --out "
        "benchmarks/RESULTS.md` (`--quick` for a smoke run, `--profile` for the cProfile "
        "section). Everything is measured in one process, side by side: repetitions are "
        "interleaved (rep 1 of every contender, then rep 2...) and the best time of each is "
        "kept; the input list is built before timing; files go to a temporary directory "
        "on local disk and are read "
        "back right after writing (page cache warm); recprep writes 10 shards. MB/s count "
        "encoded record bytes (pickles for the floor and pyrecordio, recprep codec records "
        "for recprep), 1 MB = 10^6 B; *file MB* is what lands on disk.\n")
    add("- **floor**: `pickle.dumps(x, protocol=5)` + 4-byte length + `file.write` into one "
        "file; read: length + `pickle.loads` loop.")
    add('- **recprep**: `convert(tmp, data, 10, "bench")` (recprep codec, default chunk '
        "size); read: a full loop over `RecordIO(glob)()`, decoding included.")
    add("- **pyrecordio 0.0.4**: `recordio.recordio.writer.Writer(f, 1 MiB, snappy)` fed "
        "`pickle.dumps(x, protocol=5)` (pickling timed; its default chunk limit is 1 KiB, "
        "i.e. one record per chunk here); read: `recordio.File(path, 'r')` + `pickle.loads`.\n")

    for s in sets:
        add(f"## {s.key}: {s.title}\n")
        add(f"_{s.load}._\n")
        add("| path | write inst/s | write MB/s | read inst/s | read MB/s | encoded MB "
            "| file MB |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for row in s.rows.values():
            read_mbs = row.encoded_bytes / row.read_s / 1e6
            note = f" ({row.note})" if row.note else ""
            add(f"| {row.name}{note} | {_i(row.write_ips())} | "
                f"{_mb(row.encoded_bytes / row.write_s / 1e6)} | {_i(row.read_ips())} | "
                f"{_mb(read_mbs)} | {_mb(row.encoded_bytes / 1e6)} | "
                f"{_mb(row.file_bytes / 1e6)} |")
        add("")

    add("## Ratios (instances/s) against the targets\n")
    add("| data set | ratio | measured | target | verdict |")
    add("|---|---|---:|---:|---|")
    for s in sets:
        floor, rp, none, pyr = (s.rows[k] for k in ("floor", "recprep", "recprep-none",
                                                    "pyrecordio"))
        target = TARGETS[s.key]
        ratios = [
            ("recprep write / floor write", floor.write_s / rp.write_s, target),
            ("recprep read / floor read", floor.read_s / rp.read_s, target),
            ("recprep write / pyrecordio write", pyr.write_s / rp.write_s, PYRECORDIO_TARGET),
            ("recprep (none) write / floor write", floor.write_s / none.write_s, None),
            ("recprep (none) read / floor read", floor.read_s / none.read_s, None),
            ("recprep read / pyrecordio read", pyr.read_s / rp.read_s, None),
            (f"{PYRECORDIO_TARGET:g}x pyrecordio write, in floor units (what that target "
             "asks)", PYRECORDIO_TARGET * floor.write_s / pyr.write_s, None),
        ]
        for label, ratio, tgt in ratios:
            if tgt is None:
                add(f"| {s.key} | {label} | {ratio:.2f}x | — | (for information) |")
            else:
                add(f"| {s.key} | {label} | {ratio:.2f}x | ≥ {tgt:g}x | "
                    f"{_verdict(ratio, tgt)} |")
    add("")

    if sweep:
        rows, load = sweep
        add(f"## Chunk size sweep (convert + read, snappy, 10 shards, best of "
            f"{args.sweep_reps})\n")
        add(f"Library default: {DEFAULT_CHUNK // 1024} KiB (`DEFAULT_CHUNK_BYTES`), lowered only "
            "when many shards "
            f"would exceed the 256 MiB buffer budget. _{load}._\n")
        add("| data set | chunk_bytes | write inst/s | write MB/s | read inst/s | read MB/s "
            "| file MB |")
        add("|---|---:|---:|---:|---:|---:|---:|")
        for (key, chunk), row in rows.items():
            mark = " (default)" if chunk == DEFAULT_CHUNK else ""
            add(f"| {key} | {chunk // KiB} KiB{mark} | {_i(row.write_ips())} | "
                f"{_mb(row.encoded_bytes / row.write_s / 1e6)} | {_i(row.read_ips())} | "
                f"{_mb(row.encoded_bytes / row.read_s / 1e6)} | {_mb(row.file_bytes / 1e6)} |")
        add("")

    if memory is not None:
        gib = memory["input_bytes"] / (1 << 30)
        add(f"## Memory: a {gib:g} GiB generator into 10 shards (subprocess, snappy)\n")
        add(f"{memory['records']:,} instances, each the same preallocated 1 MiB float64 "
            "array and an int, from a generator, `convert(..., 10, ...)` with the default "
            "snappy. Peak RSS is the child's `VmHWM` (`ru_maxrss` of a child started by "
            "`subprocess` also counts the parent's pages before `exec`, so it over-reports). "
            f"MB/s = input bytes / convert time (writes land in the page cache). "
            f"_{memory['load']}._\n")
        add("| peak RSS MB | RSS before convert MB | target | verdict | seconds | MB/s "
            "| file MB |")
        add("|---:|---:|---:|---|---:|---:|---:|")
        peak = memory["peak_rss_mb"]
        verdict = "met" if peak < MEM_TARGET_MB else f"**missed** by {peak - MEM_TARGET_MB:.0f} MB"
        add(f"| {peak:.0f} | {memory['baseline_mb']:.0f} | < {MEM_TARGET_MB} | {verdict} | "
            f"{memory['seconds']:.1f} | {memory['input_bytes'] / memory['seconds'] / 1e6:,.0f} "
            f"| {memory['file_bytes'] / 1e6:,.0f} |")
        add("")

    if profile:
        add("## Profile: one convert and one read per set (cProfile, so slower than above)\n")
        add("```text")
        add(profile)
        add("```\n")
    return "\n".join(out)


# --------------------------------------------------------------------------- main


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--quick", action="store_true",
                   help="a smoke run: 1 rep, 1/10 of the data, 256 MiB memory run")
    p.add_argument("--reps", type=int, default=None, help="repetitions (default 3, quick 1)")
    p.add_argument("--sweep-reps", type=int, default=None,
                   help="repetitions of the chunk size sweep (default 5, quick 1)")
    p.add_argument("--out", type=Path, help="also write the markdown report to this file")
    p.add_argument("--tmp", default=None, help="where temporary files go (default: $TMPDIR)")
    p.add_argument("--no-sweep", action="store_true", help="skip the chunk size sweep")
    p.add_argument("--no-memory", action="store_true", help="skip the 2 GiB memory run")
    p.add_argument("--profile", action="store_true", help="add a cProfile of both sets")
    p.add_argument("--profile-top", type=int, default=25)
    p.add_argument("--give-up-after", type=float, default=60.0,
                   help="seconds after which a pyrecordio rep is not repeated")
    p.add_argument("--memory-instances", type=int, default=None, help=argparse.SUPPRESS)
    p.add_argument("--memory-array-bytes", type=int, default=MiB, help=argparse.SUPPRESS)
    p.add_argument("--memory-child", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.reps is None:
        args.reps = 1 if args.quick else 3
    if args.sweep_reps is None:
        args.sweep_reps = 1 if args.quick else 5
    if args.memory_instances is None:
        args.memory_instances = 256 if args.quick else 2048
    return args


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.memory_child:
        memory_child(args.memory_child, args.memory_instances, args.memory_array_bytes)
        return
    started = time.perf_counter()
    scale = 10 if args.quick else 1
    log("building the data sets")
    data_a = mnist_like(20_000 // scale)
    data_b = small_tuples(200_000 // scale)
    with Scratch(args.tmp) as scratch:
        sets = [
            run_set("A", f"MNIST-like, {len(data_a):,} x (float64[784], int)", data_a,
                    scratch, args.reps, args.give_up_after),
            run_set("B", f"small tuples, {len(data_b):,} x (int, float, str)", data_b,
                    scratch, args.reps, args.give_up_after),
        ]
        sweep = None if args.no_sweep else run_sweep(
            {"A": data_a, "B": data_b}, scratch, args.sweep_reps, args.give_up_after)
        profile = None if not args.profile else run_profile(
            {"B": data_b, "A": data_a}, scratch, args.profile_top)
        del data_a, data_b
        gc.collect()
        memory = None if args.no_memory else run_memory(
            scratch, args.memory_instances, args.memory_array_bytes)
    report = render(args, sets, sweep, memory, profile, time.perf_counter() - started)
    print(report)
    if args.out:
        write_report(args.out, report)


if __name__ == "__main__":
    main()
