"""``recprep.spark`` reading a TFRecord file whose frames its ``.tfindex`` places: the same
rows as a walk over the lengths, the same errors on damage, and an index that is not the
file's changes nothing (a Spark task runs ``read_file``; no session is needed here)."""

from __future__ import annotations

import io

import fsspec
import numpy as np
import pytest

pytest.importorskip("pyarrow")

from recprep._core.native import native_off  # noqa: E402
from recprep.codecs.example import ExampleCodec  # noqa: E402
from recprep.containers import get_format, tfrecord_parser  # noqa: E402
from recprep.containers.tfrecord_index import TFRecordIndex, index_path  # noqa: E402
from recprep.errors import CorruptDataError  # noqa: E402
from recprep.spark.columns import ColumnSpec  # noqa: E402
from recprep.spark.decode import FileTask, read_file  # noqa: E402

COLUMNS = [ColumnSpec("id", "bigint"), ColumnSpec("word", "string")]
N = 3000


def records() -> list[bytes]:
    codec = ExampleCodec()
    return [codec.encode({"id": i, "word": "w" * (i % 13)}) for i in range(N)]


def write_file(tmp_path, with_index: bool = True):
    """A plain TFRecord file of ``N`` Examples and (``with_index``) its side index."""
    buf = io.BytesIO()
    writer = get_format("tfrecord").writer(buf, "none", 1 << 20)
    for r in records():
        writer.write(r)
    writer.close()
    path = tmp_path / "part-00000"
    path.write_bytes(buf.getvalue())
    if with_index:
        index = TFRecordIndex.from_lengths([len(r) for r in records()], len(buf.getvalue()))
        (tmp_path / ".part-00000.tfindex").write_bytes(index.to_bytes())
    return path


def rows(path, columns=COLUMNS) -> list[dict]:
    task = FileTask(str(path), "part", "example", get_format("tfrecord"), "none")
    fs = fsspec.filesystem("file")
    return [row for b in read_file(fs, task, columns) for row in b.to_pylist()]


def expected() -> list[dict]:
    return [{"id": i, "word": "w" * (i % 13)} for i in range(N)]


@pytest.fixture
def numpy_path():
    """The test runs on the numpy path: recprep's C kernels off (their walk makes no call
    per record to count, and needs no index)."""
    with native_off():
        yield


def counting_walk(monkeypatch) -> list[int]:
    """The lengths the parser reads one by one (the walk without an index)."""
    calls: list[int] = []
    unpack = tfrecord_parser._unpack_u64

    def counted(buf, at):
        calls.append(at)
        return unpack(buf, at)

    monkeypatch.setattr(tfrecord_parser, "_unpack_u64", counted)
    return calls


@pytest.mark.usefixtures("numpy_path")
def test_a_side_index_places_the_frames(tmp_path, monkeypatch):
    path = write_file(tmp_path)
    assert index_path(str(path)).endswith("/.part-00000.tfindex")
    walked = counting_walk(monkeypatch)
    assert rows(path) == expected()
    assert walked == []  # every frame placed by the index, none walked to
    assert rows(path, []) == [{}] * N  # no data column: still every frame, every CRC


@pytest.mark.usefixtures("numpy_path")
def test_without_a_side_index_the_frames_are_walked(tmp_path, monkeypatch):
    path = write_file(tmp_path, with_index=False)
    walked = counting_walk(monkeypatch)
    assert rows(path) == expected()
    assert len(walked) == N


@pytest.mark.usefixtures("numpy_path")
def test_an_index_of_other_offsets_changes_nothing(tmp_path, monkeypatch):
    """A side index that passes its own checks (magic, CRC, the file's size) but whose
    offsets are not the file's (records 100 and 101 swapped): the same rows, walked from
    where the index stops agreeing."""
    path = write_file(tmp_path)
    lengths = [len(r) for r in records()]
    lengths[100], lengths[101] = lengths[101], lengths[100]
    assert lengths[100] != lengths[101]
    forged = TFRecordIndex.from_lengths(lengths, path.stat().st_size)
    (tmp_path / ".part-00000.tfindex").write_bytes(forged.to_bytes())
    walked = counting_walk(monkeypatch)
    assert rows(path) == expected()
    assert 0 < len(walked) < N  # the index's first 101 frames held; then a walk


@pytest.mark.parametrize("where", [2, 9, 20, -1])  # length, its CRC, data, data CRC
def test_damage_raises_the_same_with_a_side_index(tmp_path, where):
    path = write_file(tmp_path)
    data = bytearray(path.read_bytes())
    frames = TFRecordIndex.from_lengths([len(r) for r in records()], len(data)).bounds()
    at = int(frames[2000]) + where if where >= 0 else int(frames[2001]) - 1
    data[at] ^= 0x10
    path.write_bytes(bytes(data))
    with pytest.raises(CorruptDataError) as indexed:
        rows(path)
    (tmp_path / ".part-00000.tfindex").unlink()
    with pytest.raises(CorruptDataError) as walked:
        rows(path)
    assert str(indexed.value) == str(walked.value)
    assert indexed.value.offset == int(frames[2000])
    kind = "length" if 0 <= where < 12 else "data"
    assert f"record {kind} CRC mismatch" in str(indexed.value)
    assert np.isin(indexed.value.offset, frames)
