"""The chunk index comes from what the writers reported, never from reading the shards
back (issue 23, item 3): container writers report ``(offset, records)`` per chunk as they
write it out, staged files carry them (``FileFacts.chunks``) through packing, assembly and
the task records a resume reuses, and the ``.{prefix}.chunks`` side file is built from
them — the same bytes a header scan gives."""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
from pathlib import Path

import fsspec
import google_crc32c
import numpy as np
import pytest

import recprep.write.loop
from recprep import convert, partitions
from recprep.containers import get_format
from recprep.containers.recordio import RecordIOFormat
from recprep.storage.chunkindex import chunks_name
from recprep.storage.staging import FileFacts, Staging, seal

from ..support import SUPPORT

ROOT = Path(__file__).parents[2]
JOB = SUPPORT / "kill_job.py"


def instances(n: int, tag: str = "") -> list[tuple[int, str]]:
    return [(i, f"{tag}{i}" + "x" * (i % 37)) for i in range(n)]


def parts() -> list:
    return [lambda k=k: iter(instances(150 + 31 * k, f"p{k}")) for k in range(5)]


def scanned(out: Path, prefix: str = "s") -> dict[str, tuple[list[int], list[int]]]:
    """Every shard's chunk offsets and counts, hopping its headers."""
    manifest = json.loads((out / f"{prefix}.manifest.json").read_text())
    found = {}
    for shard in manifest["shards"]:
        with open(out / shard["name"], "rb") as f:
            fmt = get_format(manifest["format"])
            found[shard["name"]] = fmt.scan_chunks(f, path=shard["name"])
    return found


def side_file(out: Path, prefix: str = "s") -> dict[str, tuple[list[int], list[int]]]:
    """The chunk side file's offsets (delta-decoded) and counts, per shard."""
    text = (out / chunks_name(prefix)).read_bytes().rstrip(b"\n").rpartition(b"\n")[0]
    return {entry["name"]: (np.cumsum(entry["offsets"]).tolist(), entry["counts"])
            for entry in json.loads(text)["shards"]}


@pytest.fixture
def no_reading_back(monkeypatch):
    """Scanning a RecordIO file's chunk headers fails: what convert needs of its chunks
    must come from its writers."""

    def refuse(self, file, **kwargs):
        raise AssertionError("a chunk header scan while converting")

    monkeypatch.setattr(RecordIOFormat, "scan_chunks", refuse)
    return monkeypatch


CASES = {
    "stream": lambda out: convert(out, lambda: iter(instances(900)), 3, "s",
                                  chunk_bytes=256, progress=False),
    "sized, cut in row ranges": lambda out: convert(out, instances(70000), 5, "s",
                                                   chunk_bytes=4096, progress=False),
    "one-shot iterable": lambda out: convert(out, iter(instances(500)), 4, "s",
                                             chunk_bytes=300, progress=False),
    "partitions, packed": lambda out: convert(out, partitions(parts()), 4, "s",
                                              chunk_bytes=512, progress=False),
    "partitions, grouped": lambda out: convert(out, partitions(parts(), max_tasks=2), 7, "s",
                                               chunk_bytes=300, progress=False),
    "gzip": lambda out: convert(out, partitions(parts()), 3, "s", compressor="gzip",
                                chunk_bytes=700, progress=False),
    "legacy": lambda out: convert(out, instances(2000), 3, "s", format="recordio-legacy",
                                  chunk_bytes=1000, progress=False),
    "empty shards": lambda out: convert(out, instances(3), 5, "s", progress=False),
}


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.filterwarnings("ignore:.*shards are empty")
def test_the_chunk_index_is_what_the_writers_reported(tmp_path, no_reading_back, case):
    CASES[case](str(tmp_path))
    no_reading_back.undo()
    assert side_file(tmp_path) == scanned(tmp_path)


def test_spilled_pieces_report_their_chunks(tmp_path, no_reading_back):
    no_reading_back.setattr(recprep.write.loop, "SPILL_BYTES", 200)
    convert(str(tmp_path), partitions(parts()), 4, "s", chunk_bytes=512, progress=False)
    no_reading_back.undo()
    assert side_file(tmp_path) == scanned(tmp_path)


def test_processes_send_the_chunks_back(tmp_path, no_reading_back):
    convert(str(tmp_path), partitions(parts()), 4, "s", chunk_bytes=512, progress=False,
            executor="processes", num_workers=2)
    no_reading_back.undo()
    assert side_file(tmp_path) == scanned(tmp_path)


# -- the writer's report ----------------------------------------------------------------------


@pytest.mark.parametrize("name", ["recordio", "recordio-legacy"])
@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_a_writer_reports_each_chunk_it_writes_out(name, compressor):
    fmt = get_format(name)
    if compressor not in fmt.compressors:
        pytest.skip(f"{name} has no {compressor}")
    buf = io.BytesIO()
    writer = fmt.writer(buf, compressor, 100)
    records = [bytes([i % 251]) * (i % 61) for i in range(400)]
    writer.write_many(records[:150])
    writer.cut()
    for record in records[150:]:
        writer.write(record)
    writer.close()
    offsets, counts = fmt.scan_chunks(buf, path="mem")
    assert writer.chunks == list(zip(offsets, counts, strict=True))
    assert sum(counts) == writer.num_records == 400


def test_a_format_without_chunk_headers_reports_nothing():
    writer = get_format("tfrecord").writer(io.BytesIO(), "none", 100)
    writer.write(b"abc")
    writer.close()
    assert writer.chunks is None


def test_file_facts_keep_their_chunks_through_a_task_record(tmp_path):
    staging = Staging(fsspec.filesystem("file"), str(tmp_path), "k")
    staging.create(keep=False)
    (tmp_path / ".recprep-staging-k" / "stream-1").write_bytes(b"abc")
    facts = FileFacts(staging.file("stream-1"), 2, 3, google_crc32c.value(b"abc"),
                      chunks=((0, 1), (2, 1)))
    staging.record("stream", [facts, None], [])
    assert staging.recorded("stream") == ([facts, None], [], {})


def test_a_task_record_too_big_with_its_chunks_is_kept_without_them(tmp_path, monkeypatch):
    """A record past the side-file cap would be refused by the resume that reads it: the
    chunks are left out (the commit then hops the shard's headers) rather than the task."""
    import recprep.storage.staging as staging_module

    staging = Staging(fsspec.filesystem("file"), str(tmp_path), "k")
    staging.create(keep=False)
    (tmp_path / ".recprep-staging-k" / "stream-1").write_bytes(b"abc")
    many = tuple((n * 20, 1) for n in range(2000))
    facts = FileFacts(staging.file("stream-1"), 2000, 3, google_crc32c.value(b"abc"),
                      chunks=many)
    monkeypatch.setattr(staging_module, "MAX_SIDE_BYTES", 20000)
    staging.record("stream", [facts], [])
    (found,), _, _ = staging.recorded("stream")
    assert found.chunks is None and found.records == 2000


# -- a resume reuses what a killed run's tasks reported --------------------------------------


def _killed(out: Path, mode: str, failpoint: str) -> None:
    done = subprocess.run(
        [sys.executable, str(JOB), str(out), mode], capture_output=True, text=True, cwd=ROOT,
        env={**os.environ, "RECPREP_FAILPOINTS": failpoint}, timeout=300,
    )
    assert done.returncode == 137, done.stderr[-2000:]


def _resume(out: Path, mode: str) -> None:
    sys.path.insert(0, str(JOB.parent))
    try:
        import kill_job
    finally:
        sys.path.remove(str(JOB.parent))
    convert(str(out), kill_job.reader_for(mode, ""), 5, "k", resume=True, progress=False,
            chunk_bytes=2048)


def _files(path: Path) -> dict[str, bytes]:
    return {p.name: p.read_bytes() for p in sorted(path.iterdir()) if p.is_file()}


@pytest.mark.parametrize("mode, failpoint", [
    ("serial-stream", "staging.record=1"),  # the stream task's record, reused whole
    ("serial-parts", "staging.record=9"),  # every piece's and one shard's
])
def test_a_resume_takes_the_chunks_from_the_task_records(tmp_path, no_reading_back, mode,
                                                         failpoint):
    reference, out = tmp_path / "reference", tmp_path / "out"
    _killed(out, mode, failpoint)
    _resume(out, mode)
    no_reading_back.undo()
    _resume(reference, mode)
    assert _files(out) == _files(reference)
    assert side_file(out, "k") == scanned(out, "k")


def test_a_task_record_without_chunks_has_its_shards_scanned(tmp_path):
    """A task recorded by an older version (no ``chunks``) is reused all the same: the
    chunk index of its shards comes from their headers."""
    out, reference = tmp_path / "out", tmp_path / "reference"
    _killed(out, "serial-stream", "staging.record=1")
    staging = Staging(fsspec.filesystem("file"), str(out), "k")
    record = Path(staging.file("done-stream.json"))
    doc = json.loads(record.read_bytes())
    assert all(f is None or f["chunks"] for f in doc["files"])
    doc["files"] = [None if f is None else {k: v for k, v in f.items() if k != "chunks"}
                    for f in doc["files"]]
    doc.pop("mac")
    record.write_bytes(seal(doc))
    assert all(f.chunks is None for f in staging.recorded("stream")[0] if f is not None)
    _resume(out, "serial-stream")
    _resume(reference, "serial-stream")
    assert _files(out) == _files(reference)
    assert side_file(out, "k") == scanned(out, "k")
