"""``kill -9`` of a trainer and its DataLoader workers leaves nothing behind but whole,
checked files.

A trainer (this file run as a script, in a process group of its own, with a ``TMPDIR``
of its own) reads a remote set (moto's S3 server) through ``RecordIODataset`` with two
DataLoader workers and a shard cache, and is killed with ``SIGKILL`` — all its processes
at once — while its workers are filling the cache. Then:

* its ``TMPDIR`` holds nothing (but the sockets ``multiprocessing`` keeps there for
  torch's tensors, see :func:`_not_multiprocessing`), and ``/dev/shm`` nothing named for
  its processes;
* the cache holds cached shards, each whole and checked (the size and CRC-32C its set's
  manifest gives, which is the check :class:`~recprep.read.cache.ShardCache` makes
  before it renames a partial into place and before it uses a copy), and partial files
  (``.part`` and its ``.part.map``) that no process holds: the fills the kill cut off,
  which the next reader takes over (:mod:`recprep.read.cachefill`), never reads as a
  shard;
* the next run over the same cache reads every instance exactly once, with the right
  values, and leaves only whole, checked shards.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from recprep import RecordIO, RecprepWarning, convert
from recprep.read.cache import ShardCache
from recprep.read.cachefill import MAP, PART
from recprep.storage.fs import checksum
from recprep.storage.manifest import Manifest

INSTANCES = 24000
SHARDS = 3
WIDTH = 256  # float32 values per instance: 1 KiB, so a shard is some chunks


def _instance(i: int) -> tuple[int, np.ndarray]:
    return i, np.full(WIDTH, i, dtype=np.float32)


def _trainer(url: str, cache: str) -> None:
    """Read ``url`` slowly with two workers, saying when the workers have started."""
    from torch.utils.data import DataLoader

    from recprep.torch import RecordIODataset

    dataset = RecordIODataset(url, cache_dir=cache, shuffle=True, seed=5,
                              shuffle_buffer=1000)
    for k, _ in enumerate(DataLoader(dataset, batch_size=16, num_workers=2)):
        if k == 0:
            print("reading", flush=True)
        time.sleep(0.2)


def _group(leader: int) -> list[int]:
    """The processes of ``leader``'s process group."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                if os.getpgid(int(entry)) == leader:
                    found.append(int(entry))
            except OSError:
                continue
    return found


def _killed_trainer(url: str, cache: Path, tmpdir: Path, env: dict[str, str]) -> list[int]:
    """Run the trainer, ``SIGKILL`` its group once it reads; its processes' ids."""
    env = {**env, "TMPDIR": str(tmpdir), "PYTHONPATH": os.pathsep.join(sys.path)}
    proc = subprocess.Popen(
        [sys.executable, __file__, url, str(cache)], stdout=subprocess.PIPE,
        stderr=subprocess.PIPE, text=True, env=env, start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        assert line == "reading\n", line + proc.stderr.read()  # type: ignore[union-attr]
        pids = _group(proc.pid)
        assert len(pids) >= 3, pids  # the trainer and its two workers
        os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)
        deadline = time.monotonic() + 30
        while _group(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.05)  # the workers, orphaned for an instant, die too
        assert not _group(proc.pid)
        return pids
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()


def _not_multiprocessing(tmpdir: Path) -> list[str]:
    """What ``tmpdir`` holds besides the per-process directories of Python's
    ``multiprocessing`` (``pymp-*``) holding only the sockets its ``resource_sharer``
    listens on: torch hands a worker's tensors to the trainer through one, and only a
    process that exits removes it (nothing recprep makes or can tell from another
    program's)."""
    left = []
    for entry in tmpdir.iterdir():
        if entry.name.startswith("pymp-") and entry.is_dir() and all(
                p.name.startswith("listener-") and p.is_socket() for p in entry.iterdir()):
            continue
        left.append(entry.name)
    return sorted(left)


def _whole(path: Path, shards: dict[int, tuple[int, int]]) -> bool:
    """Whether the cached shard ``path`` is some shard of the set, byte for byte as its
    manifest describes it (size and CRC-32C)."""
    with open(path, "rb") as file:
        crc, size = checksum(file)
    return (size, crc) in shards.values()


def _partials(cache: Path) -> set[str]:
    return {p.name for p in cache.iterdir() if p.name.endswith((PART, MAP))}


@pytest.mark.slow
def test_kill_9_of_a_trainer_and_its_workers_leaves_only_whole_checked_files(
        s3, s3_url, tmp_path: Path) -> None:
    pytest.importorskip("torch")
    options = s3.storage_options
    url = f"{s3_url}/set"
    convert(url, [_instance(i) for i in range(INSTANCES)], SHARDS, "k", progress=False,
            storage_options=options, chunk_bytes=64 << 10)
    manifest = Manifest.from_json(s3.filesystem().cat(f"{url}/k.manifest.json"))
    shards = {n: (s.bytes, s.crc32c) for n, s in enumerate(manifest.shards)}
    cache, tmpdir = tmp_path / "cache", tmp_path / "tmp"
    tmpdir.mkdir()
    shm_before = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()

    pids = _killed_trainer(f"{url}/k", cache, tmpdir, s3.env())

    assert _not_multiprocessing(tmpdir) == []
    shm_after = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    # not torch's own: a batch a worker hands over lives in a /dev/shm file from its
    # creation to its unlink a moment later (torch's file_descriptor sharing), and a
    # SIGKILL in that moment leaves it whatever the dataset; recprep puts nothing there
    theirs = [name for name in shm_after - shm_before if not name.startswith("torch_")
              and (any(str(pid) in name for pid in pids) or "recprep" in name)]
    assert theirs == []
    names = sorted(p.name for p in cache.iterdir())
    assert names, "the kill landed before the workers cached anything"
    for name in names:
        assert name.endswith((".shard", PART, MAP)), names
        if name.endswith(".shard"):
            assert _whole(cache / name, shards), name
    for name in _partials(cache):  # a partial with its map: nobody holds them now
        stem = name[: -len(MAP)] if name.endswith(MAP) else name[: -len(PART)]
        assert not stem.endswith(".shard") or (cache / f"{stem}{PART}").exists(), names

    again = RecordIO(f"{url}/k", cache_dir=str(cache), storage_options=options)
    read = sorted(list(again()), key=lambda x: x[0])
    assert [i for i, _ in read] == list(range(INSTANCES))
    assert all(np.array_equal(x, _instance(i)[1]) for i, x in read)
    assert _partials(cache) == set()  # every cut-off fill taken over and completed
    cached = sorted(cache.iterdir())
    assert len(cached) == SHARDS and all(_whole(p, shards) for p in cached)
    assert sorted(ShardCache(cache).entries()) == sorted(p.name for p in cached)
    # the next trainer's dataset sweeps what torch left of the killed workers' batches
    import recprep.torch as recprep_torch

    recprep_torch._SWEPT.clear()
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        recprep_torch.RecordIODataset(again)
    left = set(os.listdir("/dev/shm")) if os.path.isdir("/dev/shm") else set()
    assert [n for n in left - shm_before if n.startswith("torch_")
            and any(f"_{pid}_" in n for pid in pids)] == []


def test_torch_files_of_processes_gone_are_swept_once_with_a_warning(tmp_path: Path):
    """torch's /dev/shm hand-over files whose creator no longer exists are removed when a
    trainer makes its first RecordIODataset (a warning names them); others stay."""
    pytest.importorskip("torch")
    import recprep.torch as recprep_torch

    shm = "/dev/shm"
    if not os.path.isdir(shm) or not os.access(shm, os.W_OK):
        pytest.skip("no writable /dev/shm")
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"],
                          capture_output=True, text=True, check=True)
    dead, live = f"torch_{int(gone.stdout)}_11_3", f"torch_{os.getpid()}_11_4"
    for name in (dead, live):
        Path(shm, name).write_bytes(b"x")
    convert(str(tmp_path / "d"), list(range(4)), 1, "d", progress=False)
    try:
        recprep_torch._SWEPT.clear()
        with pytest.warns(RecprepWarning, match=rf"removed 1 file\(s\) in /dev/shm \({dead}\)"):
            recprep_torch.RecordIODataset(str(tmp_path / "d" / "d-*"))
        assert not Path(shm, dead).exists() and Path(shm, live).exists()
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # once per process: no second sweep
            Path(shm, dead).write_bytes(b"x")
            recprep_torch.RecordIODataset(str(tmp_path / "d" / "d-*"))
        assert Path(shm, dead).exists()
    finally:
        for name in (dead, live):
            Path(shm, name).unlink(missing_ok=True)


if __name__ == "__main__":
    _trainer(sys.argv[1], sys.argv[2])
