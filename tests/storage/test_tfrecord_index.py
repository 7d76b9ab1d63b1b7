"""TFRecord side indexes (``recprep.containers.tfrecord_index``): counts and random access."""

from __future__ import annotations

import io
import logging

import fsspec
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.containers import get_format
from recprep.containers.tfrecord import read_from, scan
from recprep.containers.tfrecord_index import TFRecordIndex, chunk_infos, index_name, index_path
from recprep.errors import CorruptDataError, InvalidArgumentError
from recprep.storage.sideindex import (
    build_side_index,
    count_records,
    load_index,
    read_records,
    record_offsets,
)

from ..support import DATA

GOLDEN = {"none": "plain.tfrecord", "gzip": "gzip.tfrecord.gz", "zlib": "zlib.tfrecord.zz"}
FMT = get_format("tfrecord")


def tfrecord(records, compressor="none", chunk_bytes=1 << 20) -> bytes:
    buf = io.BytesIO()
    writer = FMT.writer(buf, compressor, chunk_bytes)
    for record in records:
        writer.write(record)
    writer.close()
    return buf.getvalue()


def expected_offsets(records) -> list[int]:
    """Where each record's frame starts: 16 framing bytes around each record."""
    return [sum(len(r) + 16 for r in records[:k]) for k in range(len(records))]


@pytest.fixture
def memfs(mem_url):
    fs, root = fsspec.core.url_to_fs(mem_url)
    return fs, root


@pytest.mark.parametrize("compressor", sorted(GOLDEN))
def test_indexes_tensorflow_files(records, memfs, compressor):
    fs, root = memfs
    path = f"{root}/{GOLDEN[compressor]}"
    fs.pipe(path, (DATA / "tfrecord" / GOLDEN[compressor]).read_bytes())
    assert count_records(fs, path) == len(records)  # a scan: no index yet
    index = build_side_index(fs, path)
    assert fs.exists(index_path(path)) and index.compressor == compressor
    assert index.offsets.tolist() == expected_offsets(records)
    assert index.lengths().tolist() == [len(r) for r in records]
    assert index.file_size == fs.size(path)
    assert index.stream_size == sum(len(r) + 16 for r in records)
    loaded = load_index(fs, path)
    assert loaded is not None and loaded.offsets.tolist() == index.offsets.tolist()
    assert read_records(fs, path, 3, 9) == records[3:9]
    assert read_records(fs, path, 40, 44) == records[40:44]


def test_index_is_hidden_from_globs_and_directories(tmp_path):
    convert(str(tmp_path), [b"a", b"bb", b"ccc"], 2, "t", format="tfrecord", codec="raw")
    fs, root = fsspec.core.url_to_fs(str(tmp_path))
    for name in ("t-00000-of-00001", "t-00001-of-00001"):
        build_side_index(fs, f"{root}/{name}")
    assert index_name("t-00000-of-00001") == ".t-00000-of-00001.tfindex"
    assert sorted(p.name for p in tmp_path.iterdir())[:2] == [
        ".t-00000-of-00001.tfindex", ".t-00001-of-00001.tfindex"]
    assert list(RecordIO(str(tmp_path / "t-*"), codec="raw")()) == [b"a", b"bb", b"ccc"]
    assert list(RecordIO(str(tmp_path), codec="raw")()) == [b"a", b"bb", b"ccc"]


def test_random_access_seeks_past_damage_before_the_range(memfs):
    fs, root = memfs
    records = [bytes([i]) * (i * 7) for i in range(50)]
    path = f"{root}/seek.tfrecord"
    data = bytearray(tfrecord(records))
    fs.pipe(path, bytes(data))
    build_side_index(fs, path)
    data[30] ^= 0xFF  # record 1 (at byte 16) has its data at 28..34: same size, index holds
    fs.pipe(path, bytes(data))
    assert read_records(fs, path, 10, 13) == records[10:13]  # never reads record 1
    assert count_records(fs, path) == 50  # from the index, without a scan
    with pytest.raises(CorruptDataError, match="data CRC mismatch") as info:
        read_records(fs, path, 0, 3)
    assert info.value.offset == 16 and info.value.path == path


def test_stale_or_damaged_index_is_ignored_with_a_warning(memfs, caplog):
    fs, root = memfs
    path = f"{root}/stale.tfrecord"
    fs.pipe(path, tfrecord([b"x", b"yy"]))
    build_side_index(fs, path)
    fs.pipe(path, tfrecord([b"x", b"yy", b"zzz"]))  # rewritten: another size
    with caplog.at_level(logging.WARNING, logger="recprep"):
        assert count_records(fs, path) == 3
    assert "stale" in caplog.text
    build_side_index(fs, path)
    side = bytearray(fs.cat_file(index_path(path)))
    side[45] ^= 1
    fs.pipe(index_path(path), bytes(side))
    caplog.clear()
    with caplog.at_level(logging.WARNING, logger="recprep"):
        assert record_offsets(fs, path).tolist() == [0, 17, 35]
    assert "CRC-32C mismatch" in caplog.text


def test_files_without_an_index_still_read(memfs):
    fs, root = memfs
    path = f"{root}/plain.tfrecord"
    fs.pipe(path, tfrecord([b"a", b"", b"ccc"], "gzip"))
    assert load_index(fs, path) is None
    assert record_offsets(fs, path).tolist() == [0, 17, 33]
    assert read_records(fs, path, 1, 3) == [b"", b"ccc"]
    empty = f"{root}/empty.tfrecord"
    fs.pipe(empty, b"")
    assert count_records(fs, empty) == 0 and build_side_index(fs, empty).num_records == 0
    assert read_records(fs, empty, 0, 0) == []


@pytest.mark.parametrize("data,match", [
    (b"short", "too short"),
    (b"NOTMAGIC" + bytes(36), "magic"),
])
def test_malformed_side_files_are_refused(data, match):
    with pytest.raises(CorruptDataError, match=match):
        TFRecordIndex.from_bytes(data)


def test_side_file_checks_length_and_offsets():
    good = TFRecordIndex.from_lengths([1, 2, 3], 100).to_bytes()
    with pytest.raises(CorruptDataError, match="offsets need"):
        TFRecordIndex.from_bytes(good[:-1])
    wrong = TFRecordIndex(np.array([0, 5], np.int64), 40, 40).to_bytes()  # frames < 16
    with pytest.raises(CorruptDataError, match="consecutive records"):
        TFRecordIndex.from_bytes(wrong)


def test_range_bounds_are_checked(memfs):
    fs, root = memfs
    path = f"{root}/b.tfrecord"
    fs.pipe(path, tfrecord([b"a", b"b"]))
    for start, end in ((-1, 1), (1, 0), (0, 3), (0.5, 1)):
        with pytest.raises(InvalidArgumentError, match="holds 2 records"):
            read_records(fs, path, start, end)


@settings(max_examples=40, deadline=None)
@given(lengths=st.lists(st.integers(0, 300), max_size=40),
       compressor=st.sampled_from(["none", "gzip", "zlib"]),
       chunk=st.sampled_from([1, 64, 1 << 20]))
def test_index_from_lengths_equals_a_scan(lengths, compressor, chunk):
    records = [bytes([n % 251]) * n for n in lengths]
    data = tfrecord(records, compressor, chunk)
    scanned = scan(io.BytesIO(data), path="mem")
    made = TFRecordIndex.from_lengths(lengths, len(data), compressor)
    assert scanned.offsets.tolist() == made.offsets.tolist() == expected_offsets(records)
    assert (scanned.stream_size, scanned.file_size) == (made.stream_size, made.file_size)
    assert scanned.compressor == (compressor if records else "none")
    assert TFRecordIndex.from_bytes(made.to_bytes()).offsets.tolist() == made.offsets.tolist()


def test_chunk_infos_and_read_from_give_a_seekable_chunk_index(memfs):
    fs, root = memfs
    records = [bytes([i % 256]) * (i % 50) for i in range(300)]
    path = f"{root}/chunks.tfrecord"
    fs.pipe(path, tfrecord(records))
    index = build_side_index(fs, path)
    infos = chunk_infos(index, chunk_bytes=500)
    assert sum(i.num_records for i in infos) == 300 and len(infos) > 10
    assert all(i.stored_size <= 500 or i.num_records == 1 for i in infos)
    firsts = np.cumsum([0] + [i.num_records for i in infos])
    k = 7
    with fs.open(path, "rb") as f:
        chunk = next(read_from(f, infos[k].offset, path))
    assert chunk.offset == infos[k].offset
    assert chunk.records[: infos[k].num_records] == records[firsts[k]: firsts[k + 1]]
    gz = TFRecordIndex.from_lengths([1], 10, "gzip")
    with pytest.raises(InvalidArgumentError, match="gzip TFRecord stream can't be entered"):
        chunk_infos(gz)
