"""``dataset()`` lookups whose chunk isn't cached, on local disk: read from shard files
held open between lookups, and a replaced or damaged set noticed at the same lookup as
when every lookup opened its shard anew."""

from __future__ import annotations

import io
import os
import pickle
import tempfile
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import CorruptDataError, RecordIO, SetChangedError, convert
from recprep.containers import get_format
from recprep.containers import recordio_lookup as lookup
from recprep.containers.recordio_framing import HEADER_SIZE, encode_payload
from recprep.containers.recordio_lookup import (
    ChunkMarks,
    record_in_prefix,
    sound_chunk_records,
    sound_record,
)
from recprep.errors import DecodeError

pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")


def rows(n: int, tag: str = "v") -> list[tuple[int, str]]:
    return [(i, f"{tag}{i}" * (1 + i % 5)) for i in range(n)]


def write(root: Path, n: int, num_shards: int = 3, chunk_bytes: int = 200, tag: str = "v",
          **options: object) -> str:
    convert(str(root), rows(n, tag), num_shards, "s", chunk_bytes=chunk_bytes,
            progress=False, overwrite=True, **options)
    return str(root / "s")


class OpenCounter:
    """Counts the shards a reader opens through its commit checks."""

    def __init__(self, reader: RecordIO) -> None:
        commits = reader._sources.commits
        self.count = 0
        inner = commits.open

        def counted(*args: object, **kwargs: object) -> object:
            self.count += 1
            return inner(*args, **kwargs)

        commits.open = counted  # type: ignore[method-assign]


@pytest.mark.parametrize("cache", [0, 2])
def test_cold_lookups_read_held_shards_without_opening_them_again(tmp_path, cache):
    reader = RecordIO(write(tmp_path, 600))
    expected = list(reader())
    ds = reader.dataset(cache_chunks=cache)
    opens = OpenCounter(reader)
    assert [ds[i] for i in range(3)] == expected[:3]  # one lookup in each shard
    assert opens.count == 3
    picks = np.random.default_rng(0).integers(0, 600, 200).tolist()
    assert [ds[i] for i in picks] == [expected[i] for i in picks]
    assert ds[picks[:50]] == [expected[i] for i in picks[:50]]
    assert opens.count == 3  # every chunk after the first of a shard: from its held file
    assert ds.cache_info().misses > 150 and len(ds._cold.files) == 3


@pytest.mark.parametrize("cache", [0, 2])
@pytest.mark.parametrize("how", ["same size", "other size"])
def test_a_set_replaced_between_lookups_raises_at_the_next_lookup(tmp_path, cache, how):
    reader = RecordIO(write(tmp_path, 600))
    ds = reader.dataset(cache_chunks=cache)
    assert [ds[i] for i in range(0, 600, 7)] == rows(600)[::7]
    write(tmp_path, 600 if how == "same size" else 900, tag="w")
    with pytest.raises(SetChangedError, match="the set was replaced"):
        ds[599]
    with pytest.raises(SetChangedError, match="the set was replaced"):
        ds[[1, 598]]


def test_a_shard_replaced_alone_raises_as_before(tmp_path):
    """One shard replaced by a file of another size (its manifest untouched): the size
    check of the careful open says so, at the next lookup in that shard."""
    reader = RecordIO(write(tmp_path, 600))
    ds = reader.dataset(cache_chunks=0)
    assert ds[4] == rows(600)[4] and 1 in ds._cold
    other = tmp_path / "other"
    write(other, 300, num_shards=3)
    shard = reader._sources.files[1].path
    os.replace(other / Path(shard).name, shard)
    assert ds[3] == rows(600)[3]  # shard 0: unchanged, still held
    with pytest.raises(CorruptDataError, match="the manifest says .* bytes, the file has"):
        ds[4]


@pytest.mark.parametrize("on_corrupt", ["raise", "skip"])
def test_bytes_changed_under_a_held_file_raise_what_a_fresh_reader_raises(
        tmp_path, on_corrupt):
    """A payload byte flipped in place, the file's size and mtime kept: the held file
    looks unchanged, its chunk's checksum fails, and the lookup reads the chunk the
    careful way — the same error as a dataset that never held the file."""
    reader = RecordIO(write(tmp_path, 600, num_shards=1), on_corrupt=on_corrupt)
    ds = reader.dataset(cache_chunks=0)
    assert ds[0] == rows(600)[0]
    index = reader._sources.index(0)
    k = 3
    path = Path(reader._sources.files[0].path)
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[int(index.offsets[k]) + 30] ^= 0xFF
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert ds._cold.files.get(0) is not None  # still trusted: same size, inode, mtime
    position = int(index.firsts[k]) + 1
    fresh = RecordIO(str(tmp_path / "s"), on_corrupt=on_corrupt).dataset(cache_chunks=0)
    errors = []
    for dataset in (ds, fresh):
        with pytest.raises(CorruptDataError) as err:
            if on_corrupt == "skip":
                with pytest.warns(Warning):
                    dataset[position]
            else:
                dataset[position]
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]
    assert "checksum" in errors[0][1] or "lost to damage" in errors[0][1]
    assert ds[0] == rows(600)[0]  # other chunks: read as ever


def test_a_record_that_fails_to_decode_is_located_from_a_held_file(tmp_path):
    convert(str(tmp_path), [b"a", b"b", b"c"], 1, "x", codec="raw", progress=False)
    ds = RecordIO(str(tmp_path / "x-*"), codec="recprep").dataset(cache_chunks=0)
    for _ in range(2):  # the first lookup holds the file, the second reads from it
        with pytest.raises(DecodeError, match=r"x-00000-of-00000 at byte \d+ record 2 "
                           r"of the chunk: ") as err:
            ds[2]
        assert err.value.record_index == 2


def test_held_files_are_bounded_and_not_pickled(tmp_path):
    reader = RecordIO(write(tmp_path, 400, num_shards=20))
    ds = reader.dataset(cache_chunks=0)
    ds._cold.files.max_held = 4
    fds = len(os.listdir("/proc/self/fd")) if os.path.isdir("/proc/self/fd") else None
    assert [ds[i] for i in range(400)] == list(reader())
    assert len(ds._cold.files) == 4
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds + 4
    again = pickle.loads(pickle.dumps(ds))
    assert len(again._cold.files) == 0 and again[[5, 399]] == [ds[5], ds[399]]
    del ds, again
    if fds is not None:
        assert len(os.listdir("/proc/self/fd")) <= fds


@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
@given(
    n=st.integers(1, 300),
    num_shards=st.integers(1, 4),
    fmt=st.sampled_from(["recordio", "recordio-legacy"]),
    compressor=st.sampled_from(["snappy", "none", "gzip"]),
    chunk_bytes=st.sampled_from([1, 64, 300, 1 << 20]),
    cache=st.sampled_from([0, 1, 64]),
    data=st.data(),
)
def test_lookups_on_local_disk_give_the_unshuffled_read_order(
        n, num_shards, fmt, compressor, chunk_bytes, cache, data):
    with tempfile.TemporaryDirectory() as root:
        path = write(Path(root), n, num_shards, chunk_bytes, format=fmt,
                     compressor=compressor)
        reader = RecordIO(path)
        expected = list(reader())
        ds = reader.dataset(cache_chunks=cache)
        picks = data.draw(st.lists(st.integers(-n, n - 1), max_size=40))
        assert [ds[i] for i in picks] == [expected[i] for i in picks]
        assert ds[picks] == [expected[i] for i in picks]


def chunk_of(records: list[bytes], compressor: str, fmt: str = "recordio") -> bytes:
    buf = io.BytesIO()
    writer = get_format(fmt).writer(buf, compressor, chunk_bytes=1 << 30)
    for record in records:
        writer.write(record)
    writer.close()
    return buf.getvalue()


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(max_size=30) | st.sampled_from([b"MARK", b"MARKx", b""]),
                     min_size=1, max_size=200),
    head=st.sampled_from([b"", b"MARK", b"\x00\x00\x00\x00"]),
    compressor=st.sampled_from(["snappy", "none", "gzip"]),
    fmt=st.sampled_from(["recordio", "recordio-legacy"]),
)
def test_one_record_of_a_chunk_is_its_record_or_none(records, head, compressor, fmt):
    """Stray marks in values, records shorter than the mark, any compression: a record
    found by its chain from record 0 is the record, or nothing is found."""
    records = [head + r for r in records]
    data = chunk_of(records, compressor, fmt)
    assert list(sound_chunk_records(data, len(records), 1 << 30)) == records
    for p in range(len(records)):
        assert sound_record(data, len(records), p, 1 << 30) in (None, records[p])
    payload = encode_payload(records)
    for p in range(len(records)):
        place = record_in_prefix(payload, p)
        assert place is None or payload[place[0]:place[1]] == records[p]
    assert sound_record(data + b"after", len(records), 0, 1 << 30) in (None, records[0])
    assert sound_record(data, len(records) + 1, 0, 1 << 30) is None
    assert sound_record(data, len(records), len(records), 1 << 30) is None


def test_records_of_one_layout_are_found_alone():
    records = [b"HEAD" + bytes([i % 7]) * (i % 50) for i in range(5000)]
    data = chunk_of(records, "snappy")
    assert all(sound_record(data, 5000, p, 1 << 30) == records[p]
               for p in (0, 1, 2499, 4998, 4999))
    bad = bytearray(data)
    bad[-5] ^= 1
    assert sound_record(bytes(bad), 5000, 1, 1 << 30) is None  # the checksum covers all
    assert sound_chunk_records(bytes(bad), 5000, 1 << 30) is None
    assert sound_record(data, 5000, 1, 100) is None  # over max_chunk_bytes: the careful way


@pytest.mark.parametrize("cache", [0, 3])
def test_threads_sharing_held_files_get_every_instance_right(tmp_path, cache):
    import threading

    reader = RecordIO(write(tmp_path, 900, num_shards=6))
    expected = list(reader())
    ds = reader.dataset(cache_chunks=cache)
    ds._cold.files.max_held = 2  # files let go while other threads read them
    wrong: list[tuple[int, object]] = []

    def ask(seed: int) -> None:
        rng = np.random.default_rng(seed)
        for _ in range(60):
            picks = rng.integers(0, 900, 4).tolist()
            got = [ds[p] for p in picks] + ds[picks]
            wrong.extend((p, g) for p, g in zip(picks * 2, got, strict=True) if g != expected[p])

    threads = [threading.Thread(target=ask, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not wrong and len(ds._cold.files) <= 2


# ---------------------------------------------------------------- a chunk's marks


@settings(max_examples=60, deadline=None)
@given(
    records=st.lists(st.binary(max_size=40) | st.sampled_from([b"MARK", b"MARKx", b""]),
                     min_size=1, max_size=300),
    head=st.sampled_from([b"", b"MARK", b"\x00\x00\x00\x00"]),
    compressor=st.sampled_from(["snappy", "none", "gzip"]),
    fmt=st.sampled_from(["recordio", "recordio-legacy"]),
    data=st.data(),
)
def test_lookups_that_learn_marks_give_the_careful_records(records, head, compressor, fmt,
                                                          data):
    """Any order of lookups sharing one chunk's marks (each following the chain from
    the last record an earlier one proved) gives the records the careful split gives,
    or None; a damaged chunk gives None with marks as without."""
    records = [head + r for r in records]
    chunk = chunk_of(records, compressor, fmt)
    n = len(records)
    marks = ChunkMarks()
    picks = data.draw(st.lists(st.integers(0, n - 1), max_size=30))
    for p in picks:
        assert sound_record(chunk, n, p, 1 << 30, marks) in (None, records[p])
    flip = data.draw(st.integers(HEADER_SIZE, len(chunk) - 1))
    bad = bytearray(chunk)
    bad[flip] ^= 0x20
    for p in picks[:5]:
        assert sound_record(bytes(bad), n, p, 1 << 30, marks) is None
        assert sound_record(chunk, n, p, 1 << 30, marks) in (None, records[p])


def test_marks_found_with_another_checksum_are_learned_anew():
    """Marks learned on one chunk, then another chunk of as many records (another
    checksum) asked with them: its own records, not places learned on the first."""
    first = [b"HEAD" + bytes([i % 7]) * (i % 50) for i in range(5000)]
    second = [b"HEAD" + bytes([i % 5]) * (49 - i % 50) for i in range(5000)]
    marks = ChunkMarks()
    for p in (4999, 2500, 10):
        assert sound_record(chunk_of(first, "snappy"), 5000, p, 1 << 30, marks) == first[p]
    learned = marks.state
    assert learned is not None and len(learned[2][0]) > 3
    for p in (4999, 2501, 11, 0):
        assert sound_record(chunk_of(second, "snappy"), 5000, p, 1 << 30, marks) == second[p]
    assert marks.state is not None and marks.state[0] != learned[0]


def test_a_chunks_later_lookups_decompress_the_block_of_their_record(monkeypatch):
    """The fast path itself: after a chunk's first lookup (which finds every record and
    notes a mark every MARK_BYTES), a lookup decompresses the one snappy block its
    record is in (or two, when it spans them: the chunk has 8) and walks no more than
    WALK_MAX records."""
    records = [b"HEAD" + bytes([i % 7]) * (20 + i % 40) for i in range(10_000)]
    chunk = chunk_of(records, "snappy")
    counted = {"blocks": 0, "walked": 0}
    inner_block, inner_walk = lookup._snappy_block_into, lookup._walk_chain

    def block(*args: object) -> None:
        counted["blocks"] += 1
        inner_block(*args)

    def walk(prefix: object, base: int, m: int) -> object:
        counted["walked"] = max(counted["walked"], m)
        return inner_walk(prefix, base, m)

    monkeypatch.setattr(lookup, "_snappy_block_into", block)
    monkeypatch.setattr(lookup, "_walk_chain", walk)
    marks = ChunkMarks()
    assert sound_record(chunk, 10_000, 3, 1 << 30, marks) == records[3]
    assert counted["blocks"] == len(lookup.snappy_blocks(chunk[HEADER_SIZE:], 1 << 30)[0]) == 8
    assert len(marks.state[2][0]) > 100  # a mark each 2 KiB of the 490 kB
    for p in np.random.default_rng(1).integers(0, 10_000, 200).tolist():
        counted["blocks"] = 0
        assert sound_record(chunk, 10_000, p, 1 << 30, marks) == records[p]
        assert counted["blocks"] <= 2
    assert 0 < counted["walked"] <= lookup.WALK_MAX


def test_a_dataset_keeps_marks_per_chunk_bounded_and_bound_to_the_file(tmp_path,
                                                                       monkeypatch):
    from recprep.read import heldfiles

    monkeypatch.setattr(heldfiles, "MAX_MARKED", 5)
    reader = RecordIO(write(tmp_path, 600, num_shards=1))
    ds = reader.dataset(cache_chunks=0)
    expected = list(reader())
    assert [ds[i] for i in range(0, 600, 3)] == expected[::3]
    assert len(ds._cold._marks) == 5
    held = ds._cold.files.get(0)
    assert held is not None and {key[2] for key in ds._cold._marks} == {held.identity}


def test_bytes_changed_under_a_chunk_with_marks_raise_what_a_fresh_reader_raises(tmp_path):
    """A chunk whose records were looked up (its marks learned), then a byte of it
    flipped in place (size and mtime kept): the lookup raises the careful reader's
    error, not a record found from the marks."""
    reader = RecordIO(write(tmp_path, 3000, num_shards=1, chunk_bytes=20_000))
    ds = reader.dataset(cache_chunks=0)
    index = reader._sources.index(0)
    k = 1
    first = int(index.firsts[k])
    assert [ds[first + i] for i in (0, 50, 100)] == [rows(3000)[first + i] for i in (0, 50, 100)]
    assert any(key[1] == k for key in ds._cold._marks)
    path = Path(reader._sources.files[0].path)
    before = path.stat()
    data = bytearray(path.read_bytes())
    data[int(index.offsets[k + 1]) - 3] ^= 0xFF  # the chunk's last bytes, far from record 50
    path.write_bytes(bytes(data))
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))
    fresh = RecordIO(str(tmp_path / "s")).dataset(cache_chunks=0)
    errors = []
    for dataset in (ds, fresh):
        with pytest.raises(CorruptDataError) as err:
            dataset[first + 50]
        errors.append((type(err.value), str(err.value)))
    assert errors[0] == errors[1]
