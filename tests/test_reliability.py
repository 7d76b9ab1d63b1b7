"""The reliability promises (docs/reliability.md), each with a test that fails if it breaks:
kill at any moment and resume, disk full, concurrent writers, hostile records,
executors under failure. (Fuzzing of damaged files is in test_fuzz.py.)"""

from __future__ import annotations

import errno
import json
import os
import pickle
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import fsspec
import numpy as np
import psutil
import pytest
from fsspec.implementations.local import LocalFileSystem

from recprep import (
    PickleRefusedError,
    RecordIO,
    RecprepError,
    TaskFailedError,
    WriteError,
    convert,
    get_codec,
    partitions,
)
from recprep.storage.locking import OutputLockedError

from .support import SUPPORT

ROOT = Path(__file__).parent.parent
JOB = SUPPORT / "kill_job.py"
SEED = int(os.environ.get("RECPREP_KILL_SEED", "20261122"))


def job(out: Path, mode: str, *extra: str, env: dict | None = None) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, str(JOB), str(out), mode, *extra],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT,
        env={**os.environ, **(env or {})},
    )


def files(path: Path) -> dict[str, bytes]:
    if not path.exists():
        return {}
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


@pytest.fixture(scope="module")
def references(tmp_path_factory) -> dict[str, tuple[dict[str, bytes], float]]:
    """Each mode's uninterrupted output, and how long it took."""
    refs = {}
    for mode in ("serial-stream", "serial-parts", "processes-parts"):
        out = tmp_path_factory.mktemp(mode)
        started = time.monotonic()
        proc = job(out, mode)
        assert proc.wait(120) == 0, proc.stderr.read()
        refs[mode] = (files(out), time.monotonic() - started)
    return refs


def assert_consistent(out: Path, reference: dict[str, bytes]) -> None:
    """No final-named file is incomplete; a manifest only with the whole set."""
    present = files(out)
    for name, data in present.items():
        if name.startswith("."):
            continue
        assert data == reference[name], f"{name} is under its final name but incomplete"
    if "k.manifest.json" in present:
        kept = {n: d for n, d in present.items() if not n.startswith(".") or n == ".k.chunks"}
        assert kept == reference  # with its chunk side file, .k.chunks


def kill_points(count: int, duration: float) -> list[float]:
    rng = random.Random(SEED)
    return sorted(rng.uniform(0.05, duration * 1.1) for _ in range(count))


@pytest.mark.parametrize(
    "mode,points", [("serial-stream", 4), ("serial-parts", 6), ("processes-parts", 6)]
)
def test_kill_at_random_moments_then_resume(tmp_path, references, mode, points):
    reference, duration = references[mode]
    for attempt, delay in enumerate(kill_points(points, duration)):
        out = tmp_path / f"run{attempt}"
        proc = job(out, mode)
        time.sleep(delay)
        workers = []
        if proc.poll() is None:
            try:
                workers = psutil.Process(proc.pid).children(recursive=True)
            except psutil.NoSuchProcess:
                pass
            proc.send_signal(signal.SIGKILL)
        proc.wait(60)
        _, alive = psutil.wait_procs(workers, timeout=10)
        assert not alive, "orphan workers outlived the killed conversion"
        assert_consistent(out, reference)
        resumed = job(out, mode, "--resume")
        assert resumed.wait(120) == 0, resumed.stderr.read()
        assert files(out) == reference  # byte-identical, and no staging left behind
        assert not [p for p in out.iterdir() if p.name.startswith(".") and p.name != ".k.chunks"]


@pytest.mark.parametrize("failpoint", ["commit.move=1", "commit.move=3", "commit.manifest=1"])
def test_kill_mid_commit_then_resume(tmp_path, references, failpoint):
    reference, _ = references["serial-parts"]
    out = tmp_path / "out"
    proc = job(out, "serial-parts", env={"RECPREP_FAILPOINTS": failpoint})
    assert proc.wait(60) == 137
    assert_consistent(out, reference)
    if not failpoint.startswith("commit.manifest"):
        assert "k.manifest.json" not in files(out)
        again = job(out, "serial-parts")  # without resume: refused, with a hint
        assert again.wait(60) == 1 and "resume=True" in again.stderr.read()
    resumed = job(out, "serial-parts", "--resume")
    assert resumed.wait(60) == 0, resumed.stderr.read()
    assert files(out) == reference


def test_resume_on_a_complete_set_verifies_it(tmp_path, references):
    reference, _ = references["serial-parts"]
    out = tmp_path / "out"
    assert job(out, "serial-parts").wait(60) == 0
    assert job(out, "serial-parts", "--resume").wait(60) == 0
    assert files(out) == reference
    shard = out / "k-00002-of-00004"
    shard.write_bytes(shard.read_bytes()[:-1] + b"\0")
    proc = job(out, "serial-parts", "--resume")
    assert proc.wait(60) == 1 and "doesn't match its manifest" in proc.stderr.read()


def test_resume_on_an_empty_output_simply_runs(tmp_path, references):
    out = tmp_path / "fresh"
    assert job(out, "processes-parts", "--resume").wait(60) == 0
    assert files(out) == references["processes-parts"][0]


# -- disk full and write errors ---------------------------------------------------------------


class QuotaFileSystem(LocalFileSystem):
    """A local filesystem that fails writes with ENOSPC past a byte quota (per instance)."""

    protocol = "quota"
    quota = 0

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.written = 0

    def _open(self, path, mode="rb", **kwargs):
        f = super()._open(path, mode, **kwargs)
        if "w" not in mode:
            return f
        fs, write = self, f.write

        def limited(data):
            fs.written += len(data)
            if fs.written > QuotaFileSystem.quota:
                raise OSError(errno.ENOSPC, "No space left on device (quota)")
            return write(data)

        f.write = limited
        return f


fsspec.register_implementation("quota", QuotaFileSystem, clobber=True)


def test_disk_full_names_the_shard_and_keeps_earlier_data(tmp_path):
    out = tmp_path / "out"
    convert(str(out), range(10), 2, "old")
    before = files(out)
    QuotaFileSystem.quota = 50_000
    QuotaFileSystem.clear_instance_cache()
    data = [np.random.default_rng(i).random(500) for i in range(100)]
    with pytest.raises(TaskFailedError) as info:
        convert(f"quota://{out}", data, 3, "new", compressor="none", chunk_bytes=8192)
    original = info.value.original
    assert isinstance(original, WriteError) and isinstance(original, RecprepError)
    assert "No space left" in str(info.value) and "new-0000" in original.path
    assert files(out) == before and not list(out.glob(".recprep-*"))


def test_file_size_limit_in_a_subprocess(tmp_path):
    script = f"""
import resource, signal
signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
resource.setrlimit(resource.RLIMIT_FSIZE, (20000, 20000))
import numpy as np
from recprep import convert, TaskFailedError
try:
    convert({str(tmp_path)!r}, [np.zeros(1000) + i for i in range(50)], 2, "big",
            compressor="none")
except TaskFailedError as err:
    print("FAILED", type(err.original).__name__, err.original.path)
"""
    proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          timeout=60)
    assert proc.stdout.startswith("FAILED WriteError"), proc.stdout + proc.stderr
    assert "big-0000" in proc.stdout
    assert list(tmp_path.iterdir()) == []


# -- concurrent writers -------------------------------------------------------------------------


def test_two_writers_one_wins_never_a_mixed_set(tmp_path):
    out = tmp_path / "out"
    slow = {"KILL_JOB_SLEEP": "0.05"}
    first = job(out, "serial-parts", "--tag", "A", env=slow)
    deadline = time.monotonic() + 30
    while not (out / ".recprep-lock-k").exists() and time.monotonic() < deadline:
        time.sleep(0.02)
    second = job(out, "serial-parts", "--tag", "B", env=slow)
    codes = (first.wait(60), second.wait(60))
    assert codes == (0, 1), (first.stderr.read(), second.stderr.read())
    assert "another conversion" in second.stderr.read()
    tags = {s[-1][:1] for s in RecordIO(str(out / "k-*"))()}
    assert tags == {"A"}  # all of the winner's instances, none of the other's


def test_a_dead_writers_lock_is_taken_over(tmp_path):
    out = tmp_path / "out"
    out.mkdir()
    dead = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True).stdout.strip()
    import socket

    lock = out / ".recprep-lock-k"
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": int(dead)}))
    convert(str(out), range(5), 2, "k")
    assert not lock.exists()
    lock.write_text(json.dumps({"host": socket.gethostname(), "pid": os.getpid()}))
    with pytest.raises(OutputLockedError, match=f"pid {os.getpid()}"):
        convert(str(out), range(5), 2, "k", overwrite=True)
    assert isinstance(OutputLockedError("p", "o"), FileExistsError)


# -- hostile records ------------------------------------------------------------------------------


class Exploit:
    """Unpickling this runs code: it writes a marker file."""

    def __init__(self, marker: str) -> None:
        self.marker = marker

    def __reduce__(self):
        return (Path.write_text, (Path(self.marker), "pwned"))


@pytest.mark.parametrize("fmt", ["recordio", "recordio-legacy", "tfrecord"])
@pytest.mark.parametrize("codec", ["recprep", "pickle"])
def test_pickles_never_run_without_allow_pickle(tmp_path, fmt, codec):
    if fmt == "tfrecord":
        pytest.importorskip("recprep.containers.tfrecord")
    marker = tmp_path / "marker"
    out = tmp_path / "out"
    convert(str(out), [Exploit(str(marker))], 1, "h", format=fmt, codec=codec)
    assert not marker.exists()
    with pytest.raises(PickleRefusedError):
        list(RecordIO(str(out / "h-*"))())
    for how in ([], ["--codec", codec]):
        proc = subprocess.run([sys.executable, "-m", "recprep", "head", str(out / "h"), *how],
                              capture_output=True, text=True, timeout=60)
        assert proc.returncode == 2 and "allow-pickle" in proc.stderr
    assert not marker.exists()
    list(RecordIO(str(out / "h-*"), allow_pickle=True)())  # with consent, it runs
    assert marker.read_text() == "pwned"


def test_hostile_recprep_records_are_clear_errors():
    codec = get_codec("recprep")
    bogus_dtype = bytes.fromhex("f1 10 03") + b"<O8" + bytes([1, 0]) + (8).to_bytes(8, "little")
    overflow = (b"\xf1\x10\x03<f8" + bytes([2, 0]) + (2**62).to_bytes(8, "little") * 2
                + (0).to_bytes(8, "little"))
    deep = b"\xf1" + b"\x0a\x01\x00\x00\x00" * 1_000_000 + b"\x00"
    for record in (bogus_dtype, overflow, deep, pickle.dumps(1)):
        with pytest.raises(RecprepError):
            codec.decode(record)


def test_hostile_example_records_are_clear_errors():
    codec = get_codec("example")
    huge = b"\x0a\xff\xff\xff\xff\x0f" + b"\x0a\x00"  # features: claims 4 GiB
    with pytest.raises(RecprepError):
        codec.decode(huge)


# -- executors under failure ------------------------------------------------------------------


def crash_once(marker: str, start: int, size: int):
    """Kill the worker process the first time; work normally when retried."""
    if not os.path.exists(marker):
        Path(marker).write_text("crashed")
        os._exit(9)
    yield from range(start, start + size)


def always_crash():
    os._exit(9)
    yield 1  # pragma: no cover


def crashing_input(tmp_path: Path):
    import functools

    marker = str(tmp_path / "crashed-once")
    return partitions([functools.partial(range, 0, 10),
                       functools.partial(crash_once, marker, 10, 10),
                       functools.partial(range, 20, 30)])


@pytest.mark.parametrize("engine", ["spark", "ray"])
def test_a_killed_task_is_retried_exactly_once(request, tmp_path, engine):
    request.getfixturevalue("spark_session" if engine == "spark" else "ray_local")
    out = tmp_path / "out"
    convert(str(out), crashing_input(tmp_path), 3, "r", executor=engine)
    assert (tmp_path / "crashed-once").exists()  # it did die once
    assert list(RecordIO(str(out / "r-*"))()) == list(range(30))  # each instance once
    assert [len(list(RecordIO(str(p))())) for p in sorted(out.glob("r-*"))] == [10, 10, 10]


def test_a_task_that_keeps_dying_fails_cleanly(spark_session, tmp_path):
    out = tmp_path / "out"
    with pytest.raises(TaskFailedError):
        convert(str(out), partitions([always_crash]), 2, "d", executor="spark")
    assert not out.exists() or files(out) == {} and not list(out.glob(".recprep-*"))


def test_disk_full_while_writing_a_table_block_names_the_shard(tmp_path):
    """A DataFrame's records are written a block at a time (one write_many per shard):
    a full disk still names the shard being written, and nothing is committed."""
    import pandas as pd

    out = tmp_path / "out"
    QuotaFileSystem.quota = 30_000
    QuotaFileSystem.clear_instance_cache()
    frame = pd.DataFrame({"x": np.arange(20_000), "s": [f"row {i}" for i in range(20_000)]})
    with pytest.raises(TaskFailedError) as info:
        convert(f"quota://{out}", frame, 3, "tab", compressor="none", chunk_bytes=4096)
    original = info.value.original
    assert isinstance(original, WriteError) and "tab-0000" in original.path.rsplit("/")[-1]
    assert isinstance(original.original, OSError) and original.original.errno == errno.ENOSPC
    assert not list(out.glob("tab-*")) and not list(out.glob(".recprep-*"))
