"""Any number of shards with a bounded number of open files (issue 22, item 10).

``convert(out, data, 1500, "s")`` used to fail with ``[Errno 24] Too many open files``
under ``ulimit -n 1024``: a task held one open file per shard. Now a task's files share a
:class:`~recprep.write.filepool.WritePool` (at most a quarter of the limit open, reopened
to append, or written in segments joined at the end on storage that can't append), on
every executor, with the same bytes as without a limit. Running out of descriptors anyway
(the program holds them) is a ``WriteError`` that says it is the open-files limit, once.
"""

from __future__ import annotations

import json
import os
import posixpath
import subprocess
import sys
from pathlib import Path

import fsspec
import pytest
from fsspec.implementations.memory import MemoryFileSystem

from recprep import RecordIO, convert

from ..support import SUPPORT
from ..support.fd_job import SIZES, data, instance, parts, reader_of

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "fd_job.py"
TOTAL = sum(SIZES)


def job(out, mode: str, shards: int, nofile: int, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(JOB), str(out), mode, "--shards", str(shards), "--nofile",
         str(nofile), *args], capture_output=True, text=True, cwd=ROOT, timeout=600,
    )


def files(url: str) -> dict[str, bytes]:
    """Every file under ``url`` (hidden ones, staging and locks included), name -> bytes."""
    fs, path = fsspec.core.url_to_fs(url)
    return {posixpath.relpath(p, path): bytes(fs.cat_file(p))
            for p in fs.find(path, withdirs=False)}


@pytest.fixture(scope="module")
def reference(tmp_path_factory):
    """What each kind of input gives without any limit (serial, in this process)."""
    made = {}
    for kind, shards in (("stream", 1500), ("parts", 1500), ("stream", 20_000)):
        out = tmp_path_factory.mktemp(f"{kind}-{shards}")
        reader = parts() if kind == "parts" else data()
        convert(str(out), reader, shards, "s", progress=False)
        made[kind, shards] = files(str(out))
    return made


CASES = [
    # mode, shards, RLIMIT_NOFILE
    ("serial-list", 1500, 256),
    ("serial-reader", 1500, 256),
    ("serial-reader", 20_000, 1024),
    ("processes-reader", 1500, 256),
    ("processes-parts-spilled", 1500, 256),
    ("spark-reader", 1500, 1024),  # the JVM itself needs a few hundred
    ("ray-reader", 1500, 1024),
]


@pytest.mark.parametrize(("mode", "shards", "nofile"), CASES)
def test_many_shards_fit_a_low_open_files_limit(tmp_path, reference, mode, shards, nofile):
    if mode.startswith("spark"):
        pytest.importorskip("pyspark")
    if mode.startswith("ray"):
        pytest.importorskip("ray")
    out = tmp_path / "out"
    done = job(out, mode, shards, nofile)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), (
        done.stdout[-3000:] + done.stderr[-3000:])
    kind = "parts" if mode.endswith("parts-spilled") else "stream"
    assert files(str(out)) == reference[kind, shards]  # byte for byte, nothing else left


def test_out_of_descriptors_says_it_is_the_open_files_limit_once(tmp_path):
    """The reader holds every descriptor but none: the task can't open one shard."""
    out = tmp_path / "out"
    done = job(out, "serial-reader", 40, 256, "--free", "0")
    assert done.returncode == 1, done.stdout + done.stderr
    message = done.stdout.strip()
    assert message.startswith("FAILED TaskFailedError the reader's task failed with "
                              "WriteError: writing "), message
    assert "[Errno 24] Too many open files" in message
    assert "limit of open files (RLIMIT_NOFILE, `ulimit -n`: 256)" in message
    assert "raise the limit" in message and "close files the program keeps open" in message
    assert message.count("nothing was committed") == 1
    assert "permissions and free space" not in message
    assert message.count("writing ") == 1  # one WriteError, not one wrapped in another
    assert not list(out.glob("s-*")) and not (out / "s.manifest.json").exists()


def test_a_program_that_holds_most_descriptors_still_writes(tmp_path, reference):
    """8 descriptors left by the program: the pool shrinks to what opens."""
    out = tmp_path / "out"
    done = job(out, "serial-reader", 1500, 256, "--free", "8")
    assert done.returncode == 0, done.stdout + done.stderr
    assert files(str(out)) == reference["stream", 1500]


# -- storage that can't append: segments, joined, with few handles open ---------------------


class NoAppendFileSystem(MemoryFileSystem):
    """``memory://`` that, like an object store, can't append; it counts the files open
    for writing at once (the most at any moment in ``peak``)."""

    protocol = "noappend"
    root_marker = "/"
    open_now = 0
    peak = 0
    opened = 0

    @classmethod
    def _strip_protocol(cls, path):
        return MemoryFileSystem._strip_protocol(path.removeprefix("noappend://"))

    def _open(self, path, mode="rb", **kwargs):
        if "a" in mode:
            raise OSError(95, "Operation not supported: append", path)
        f = super()._open(path, mode, **kwargs)
        if "w" not in mode:
            return f
        cls = NoAppendFileSystem
        cls.open_now += 1
        cls.opened += 1
        cls.peak = max(cls.peak, cls.open_now)
        close = f.close
        still_open = [True]  # (a memory file never says it is closed; "rb" hands it out)

        def counted_close():
            if still_open[0]:
                still_open[0] = False
                NoAppendFileSystem.open_now -= 1
            close()

        f.close = counted_close
        return f


fsspec.register_implementation("noappend", NoAppendFileSystem, clobber=True)


@pytest.fixture
def pool_of(monkeypatch):
    """``pool_of(n)``: write pools of ``n`` files from now on. (On a recprep without
    write pools it sets nothing, so these tests show what that recprep does.)"""
    try:
        import recprep.write.filepool as filepool
    except ImportError:
        filepool = None

    def set_size(size: int) -> int:
        if filepool is not None:
            monkeypatch.setattr(filepool, "default_max_open", lambda: size)
        return size

    return set_size


@pytest.fixture
def small_pool(pool_of):
    """Write pools of 6 files."""
    return pool_of(6)


def test_storage_that_cant_append_gets_segments_joined_with_few_files_open(
    tmp_path, small_pool
):
    expected_out = tmp_path / "expected"
    convert(str(expected_out), data(), 50, "s", progress=False, chunk_bytes=4096)
    expected = files(str(expected_out))
    NoAppendFileSystem.open_now = NoAppendFileSystem.peak = NoAppendFileSystem.opened = 0
    url = "noappend:///h1-segments"
    try:
        convert(url, data(), 50, "s", progress=False, chunk_bytes=4096)
        assert files(url) == expected  # segments joined in order; none left behind
        # a file being joined and one being read for it, beyond the pool's 6
        assert NoAppendFileSystem.peak <= small_pool + 2
        assert NoAppendFileSystem.opened > 50 * 2  # segments were written: it was bounded
        assert [x[0] for x in RecordIO(url + "/s-*")()] == list(range(TOTAL))
    finally:
        fsspec.filesystem("noappend").rm("/h1-segments", recursive=True)


def test_memory_output_appends_with_few_files_open(tmp_path, small_pool, mem_url):
    expected_out = tmp_path / "expected"
    convert(str(expected_out), parts(), 40, "s", progress=False, chunk_bytes=4096)
    convert(mem_url, parts(), 40, "s", progress=False, chunk_bytes=4096)
    assert files(mem_url) == files(str(expected_out))


def test_s3_output_of_many_shards_keeps_few_uploads_open(tmp_path, s3, s3_url, monkeypatch,
                                                         pool_of):
    """On S3 (moto) every shard used to be an open upload buffering up to 50 MiB: now at
    most a pool's worth are open (each sending 8 MiB parts as it goes), the others written
    in segments joined at the end."""
    from recprep.write import uploads

    pool_of(4)
    opened: list[int] = [0, 0]  # open now, most at once
    parts: set[int] = set()  # the part sizes of the shards' uploads
    real_init, real_close = uploads.PartUpload.__init__, uploads.PartUpload.close

    def init(self, *args, **kwargs):
        real_init(self, *args, **kwargs)
        opened[0] += 1
        opened[1] = max(opened)
        if ".recprep-staging-" in self.path and "/stream-" in self.path:
            parts.add(self.part_bytes)

    def close(self):
        if not self.closed:
            opened[0] -= 1
        real_close(self)

    monkeypatch.setattr(uploads.PartUpload, "__init__", init)
    monkeypatch.setattr(uploads.PartUpload, "close", close)
    small = [instance(i) for i in range(600)]
    expected_out = tmp_path / "expected"
    convert(str(expected_out), small, 30, "s", progress=False, chunk_bytes=1024)
    url = f"{s3_url}/many"
    convert(url, small, 30, "s", progress=False, chunk_bytes=1024,
            storage_options=s3.storage_options)
    fs = s3.filesystem()
    got = {posixpath.relpath(p, url.removeprefix("s3://")): bytes(fs.cat_file(p))
           for p in fs.find(url, withdirs=False)}
    expected = files(str(expected_out))
    manifest = json.loads(got.pop("s.manifest.json"))
    for shard in manifest["shards"]:  # the commit records the store's ETags
        assert shard.pop("etag") == fs.info(f"{url}/{shard['name']}")["ETag"]
    assert manifest == json.loads(expected.pop("s.manifest.json"))
    assert got == expected
    assert opened[1] <= 4 + 2 and opened[0] == 0
    assert parts == {8 << 20}
    # 100 shards, 64 open: each upload still sends 8 MiB parts (512 MiB together at most)
    pool_of(64)
    parts.clear()
    convert(f"{s3_url}/wide", small, 100, "w", progress=False, chunk_bytes=1024,
            storage_options=s3.storage_options)
    assert parts == {8 << 20}
    assert len(list(RecordIO(f"{s3_url}/wide/w-*", storage_options=s3.storage_options)()))\
        == len(small)


def test_the_pool_never_changes_the_bytes(tmp_path, pool_of):
    """The same conversion with pools of 1, 2 and 256 files: one set of bytes."""
    outputs = []
    for size in (1, 2, 256):
        pool_of(size)
        out = tmp_path / f"pool-{size}"
        convert(str(out), reader_of("reader"), 7, "s", progress=False, chunk_bytes=2048,
                format="tfrecord", compressor="zlib")
        outputs.append(files(str(out)))
    assert outputs[0] == outputs[1] == outputs[2]
    assert os.listdir(tmp_path / "pool-1") == os.listdir(tmp_path / "pool-256")
