"""The TFRecord container: golden files, TensorFlow interop, detection, damage, bounds."""

from __future__ import annotations

import gzip
import io
import struct
import tracemalloc
import warnings
import zlib

import fsspec
import google_crc32c
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep.codecs.example import ExampleCodec
from recprep.codecs.features import Feature
from recprep.containers import detect_format, get_format
from recprep.containers.tfrecord import detect_compression, masked_crc32c
from recprep.errors import (
    ChunkTooLargeError,
    CorruptDataError,
    CorruptDataWarning,
    InvalidArgumentError,
    RecprepError,
)

from ..support import DATA

GOLDEN = {"none": "plain.tfrecord", "gzip": "gzip.tfrecord.gz", "zlib": "zlib.tfrecord.zz"}
TF_TYPE = {"none": "", "gzip": "GZIP", "zlib": "ZLIB"}
FMT = get_format("tfrecord")


@pytest.fixture(scope="module")
def tf():
    """TensorFlow, imported once for the module (after recprep)."""
    return pytest.importorskip("tensorflow")


def write(records, compressor="none", chunk_bytes=1 << 20) -> bytes:
    buf = io.BytesIO()
    writer = FMT.writer(buf, compressor, chunk_bytes)
    for r in records:
        writer.write(r)
    writer.close()
    return buf.getvalue()


def read(data: bytes, **kwargs) -> list[bytes]:
    return [r for c in FMT.read_chunks(io.BytesIO(data), path="f.tfrecord", **kwargs)
            for r in c.records]


def spec_frame(record: bytes) -> bytes:
    """FORMATS.md §3, written independently of the container."""
    def mask(c):
        return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF

    length = struct.pack("<Q", len(record))
    return (length + struct.pack("<I", mask(google_crc32c.value(length))) + record
            + struct.pack("<I", mask(google_crc32c.value(record))))


# -- golden files written by TensorFlow ------------------------------------------------------


@pytest.mark.parametrize("compressor", list(GOLDEN))
def test_reads_tensorflow_files(records, compressor):
    data = (DATA / "tfrecord" / GOLDEN[compressor]).read_bytes()
    assert detect_compression(data[:64]) == compressor
    assert detect_format(data[:64]).name == "tfrecord"
    assert read(data) == records


@pytest.mark.parametrize("compressor", list(GOLDEN))
@pytest.mark.parametrize("chunk_bytes", [1, 4096, 1 << 20])
def test_writes_tensorflows_bytes_exactly(records, compressor, chunk_bytes):
    data = write(records, compressor, chunk_bytes)
    assert data == (DATA / "tfrecord" / GOLDEN[compressor]).read_bytes()


def test_plain_frames_follow_the_spec(records):
    assert write(records) == b"".join(map(spec_frame, records))
    assert masked_crc32c(b"") == 0xA282EAD8


def test_reads_tensorflow_example_file():
    data = (DATA / "example" / "examples.tfrecord").read_bytes()
    records = read(data)
    assert len(records) == 25
    assert write(records) == data


@pytest.mark.parametrize("compressor", list(GOLDEN))
def test_tensorflow_reads_what_we_write(tf, tmp_path, records, compressor):
    path = tmp_path / "out.tfrecord"
    path.write_bytes(write(records, compressor, chunk_bytes=5000))
    dataset = tf.data.TFRecordDataset(str(path), compression_type=TF_TYPE[compressor])
    assert [r.numpy() for r in dataset] == records


@pytest.mark.parametrize("compressor", list(GOLDEN))
def test_no_records_is_an_empty_file_that_tensorflow_reads(tf, tmp_path, compressor):
    assert write([], compressor) == b""
    assert read(b"") == []
    path = tmp_path / "empty.tfrecord"
    path.write_bytes(b"")
    assert list(tf.data.TFRecordDataset(str(path), compression_type=TF_TYPE[compressor])) == []


# -- batching, offsets, streams -------------------------------------------------------------


@pytest.mark.parametrize("compressor", list(GOLDEN))
def test_chunks_batch_records_at_uncompressed_offsets(compressor):
    records = [bytes([i % 251]) * (i * 997 % 20000) for i in range(400)]
    data = write(records, compressor)
    chunks = list(FMT.read_chunks(io.BytesIO(data), path="f"))
    assert len(chunks) > 2 and [r for c in chunks for r in c.records] == records
    offsets, pos = {}, 0
    for i, r in enumerate(records):
        offsets[i] = pos
        pos += 16 + len(r)
    first = 0
    for chunk in chunks:  # the offset of a batch's first record in the plain stream
        assert chunk.offset == offsets[first]
        first += len(chunk.records)
    assert all(sum(len(r) for r in c.records) < 2 << 20 for c in chunks)


def test_records_are_independent_bytes():
    records = read(write([b"abc", b"abc", b""]))
    assert records == [b"abc", b"abc", b""] and all(type(r) is bytes for r in records)


def test_multi_member_gzip_reads_whole_like_tensorflow(records):
    data = write(records, "gzip")
    assert read(data + data) == records * 2


def test_concatenated_zlib_streams_are_refused_not_truncated(records):
    data = write(records[:3], "zlib")
    with pytest.raises(CorruptDataError, match="stray bytes after the end of the zlib"):
        read(data + data)


def test_explicit_compressor_overrides_detection(records):
    data = write(records, "gzip")
    assert read(data, compressor="gzip") == records
    with pytest.raises(CorruptDataError):
        read(data, compressor="none")
    with pytest.raises(InvalidArgumentError):
        read(data, compressor="snappy")


# -- detection --------------------------------------------------------------------------------


def test_detection_keeps_recordio_for_recordio_and_knows_foreign_bytes():
    for name in ["go-recordio/none.recordio", "go-recordio/gzip.recordio",
                 "pyrecordio-0.0.4/snappy.recordio", "example/examples.recordio"]:
        head = (DATA / name).read_bytes()[:64]
        assert detect_format(head).name.startswith("recordio")
        assert not FMT.sniff(head)
    for foreign in [b"", b"hello world, this is plain text..", bytes(64),
                    gzip.compress(b"not a tfrecord file at all, but gzip"),
                    zlib.compress(b"not a tfrecord file at all, but zlib")]:
        assert detect_format(foreign[:64]) is None
    with pytest.raises(CorruptDataError, match="not a TFRecord file at all") as info:
        read(b"hello world, this is plain text..")
    assert info.value.offset == 0


@pytest.mark.parametrize("length", [0x088B1F, 0x0178])  # looks like gzip / zlib headers
def test_plain_lengths_that_look_like_compression_headers(length):
    record = bytes(length)
    data = write([record, b"x"])
    assert data[:2] in (b"\x1f\x8b", b"\x78\x01")
    assert detect_compression(data[:64]) == "none"
    assert read(data) == [record, b"x"]


# -- damage ---------------------------------------------------------------------------------


def damaged(data: bytes, at: int) -> bytes:
    return data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]


@pytest.fixture
def three():
    records = [b"a" * 60, b"b" * 60, b"c" * 60]
    return records, write(records)


@pytest.mark.parametrize("where, match", [
    (3, "length CRC mismatch"),  # in the length
    (9, "length CRC mismatch"),  # in the length's CRC
    (12 + 5, "data CRC mismatch"),  # in the data
    (12 + 60 + 2, "data CRC mismatch"),  # in the data's CRC
])
@pytest.mark.parametrize("record", [0, 2])
def test_flipped_bytes_name_path_and_record_offset(three, where, match, record):
    records, data = three
    start = sum(16 + len(r) for r in records[:record])
    with pytest.raises(CorruptDataError, match=match) as info:
        read(damaged(data, start + where))
    assert info.value.path == "f.tfrecord" and info.value.offset == start
    assert f"f.tfrecord at byte {start}:" in str(info.value)


@pytest.mark.parametrize("cut, match", [(5, "header cut off"), (12 + 3, "data cut off"),
                                        (12 + 60 + 2, "data cut off")])
def test_truncated_tail_is_a_torn_record(three, cut, match):
    records, data = three
    start = 2 * 16 + len(records[0]) + len(records[1])
    with pytest.raises(CorruptDataError, match=match + ".*torn last record") as info:
        read(data[: start + cut])
    assert info.value.offset == start


def test_huge_length_is_refused_before_any_allocation():
    length = struct.pack("<Q", 2**62)
    data = length + struct.pack("<I", masked_crc32c(length)) + b"tiny"
    with pytest.raises(ChunkTooLargeError) as info:
        read(data, max_chunk_bytes=1 << 20)
    assert (info.value.size, info.value.limit, info.value.offset) == (2**62, 1 << 20, 0)
    assert isinstance(info.value, CorruptDataError) and info.value.path == "f.tfrecord"


@pytest.mark.parametrize("compressor", ["gzip", "zlib"])
def test_damage_inside_compressed_files(records, compressor):
    data = write(records, compressor)
    with pytest.raises(CorruptDataError, match="stream is cut off"):
        read(data[:-10])
    middle = len(data) // 2
    broken = data[:middle] + bytes(b ^ 0xFF for b in data[middle : middle + 20])
    broken += data[middle + 20 :]
    with pytest.raises(CorruptDataError, match="does not inflate|CRC mismatch") as info:
        read(broken)
    assert info.value.path == "f.tfrecord" and info.value.offset > 0
    assert read(broken, on_corrupt="skip") == records[: len(read(broken, on_corrupt="skip"))]
    plain = bytearray(write(records))
    plain[16 + 17 + 12 + 3] ^= 0xFF  # inside the third record's data
    deflate = zlib.compressobj(-1, zlib.DEFLATED, {"gzip": 31, "zlib": 15}[compressor])
    packed = deflate.compress(bytes(plain)) + deflate.flush()
    with pytest.raises(CorruptDataError, match="data CRC mismatch.*inflated") as info:
        read(packed)
    assert info.value.offset == 16 + 17  # records 0 and 1 hold 0 and 1 bytes


def test_gzip_bomb_stops_at_max_chunk_bytes_in_bounded_memory():
    claimed = 64 << 20
    length = struct.pack("<Q", claimed)
    deflate = zlib.compressobj(9, zlib.DEFLATED, 31)
    bomb = deflate.compress(length + struct.pack("<I", masked_crc32c(length)))
    zeros = bytes(1 << 20)
    bomb += b"".join(deflate.compress(zeros) for _ in range(claimed >> 20)) + deflate.flush()
    assert len(bomb) < claimed // 500
    tracemalloc.start()
    try:
        with pytest.raises(ChunkTooLargeError):
            read(bomb, max_chunk_bytes=8 << 20)
        many = write([bytes(1 << 20)] * 40, "gzip")  # 40 MiB of valid records, streamed
        tracemalloc.reset_peak()
        count = sum(len(c.records) for c in FMT.read_chunks(io.BytesIO(many), path="f"))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert count == 40 and peak < 12 << 20


def skipped(data: bytes, **kwargs) -> tuple[list[bytes], list[CorruptDataWarning]]:
    """Records read with on_corrupt="skip" and the warnings given (the same objects are
    handed to on_skip)."""
    seen: list[CorruptDataWarning] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        got = read(data, on_corrupt="skip", on_skip=seen.append, **kwargs)
    assert [w.message for w in caught] == seen
    return got, seen


def test_skip_mode_drops_only_damaged_records_and_warns():
    records = [bytes([i]) * 100 for i in range(10)]
    data = bytearray(write(records))
    data[3 * 116 + 20] ^= 0xFF  # record 3's data
    data[6 * 116 + 2] ^= 0xFF  # record 6's length
    got, seen = skipped(bytes(data))
    assert got == records[:3] + records[4:6] + records[7:]
    # a data CRC failure in a frame whose length holds loses exactly that record (issue
    # 22.2: the records after it keep their numbers); a damaged length, an unknown number
    assert [(w.path, w.offset, w.records_lost) for w in seen] == [
        ("f.tfrecord", 348, 1), ("f.tfrecord", 696, None)]
    assert "at byte 348: skipped damaged data, 1 record(s) lost" in str(seen[0])
    assert "record data CRC mismatch" in str(seen[0])
    assert "skipped that record" in str(seen[0])
    with pytest.raises(CorruptDataError):
        read(bytes(data))


@pytest.mark.parametrize("compressor", ["none", "gzip"])
def test_skip_mode_passes_over_a_record_above_the_limit(compressor):
    records = [b"a", bytes(3 << 20), b"b", b"c" * 100]
    data = write(records, compressor)
    got, [warning] = skipped(data, max_chunk_bytes=1 << 20)
    assert got == [b"a", b"b", b"c" * 100]
    assert warning.records_lost == 1 and warning.offset == 17
    assert "more than the limit of 1048576" in str(warning)
    assert "skipped that record" in str(warning)
    with pytest.raises(ChunkTooLargeError):
        read(data, max_chunk_bytes=1 << 20)


def test_skip_mode_stops_at_a_torn_tail_or_a_broken_stream(records):
    data = write(records)
    got, [torn] = skipped(data[:-3])
    assert got == records[:-1] and torn.records_lost == 1
    gz = write(records, "gzip")
    got, [broken] = skipped(gz[: len(gz) // 2])
    assert len(got) < len(records) and broken.records_lost is None
    assert "skipped the rest of the file" in str(torn) and "skipped the rest" in str(broken)
    with pytest.raises(InvalidArgumentError, match="on_corrupt"):
        read(data, on_corrupt="ignore")


SMALL = [b"", b"a", b"bc" * 30, bytes(range(256))]


@settings(max_examples=200, deadline=None)
@given(st.sampled_from(list(GOLDEN)), st.data())
def test_any_mutation_reads_or_fails_cleanly(compressor, data):
    original = write(SMALL, compressor)
    mutated = bytearray(original)
    for _ in range(data.draw(st.integers(1, 3))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    mutated = bytes(mutated[: data.draw(st.integers(0, len(mutated)))])
    for mode in ("raise", "skip"):
        try:
            got = read(mutated, on_corrupt=mode, max_chunk_bytes=1 << 16)
        except CorruptDataError:
            assert mode == "raise"
            continue
        assert all(r in SMALL for r in got)  # never a damaged record


# -- through convert and RecordIO ------------------------------------------------------------


@pytest.mark.parametrize("compressor", list(GOLDEN))
def test_convert_then_read_with_and_without_manifest(mem_url, compressor):
    instances = [(np.arange(i, dtype=np.int16), f"item {i}") for i in range(23)]
    result = convert(mem_url, instances, 3, "tf", format="tfrecord", compressor=compressor)
    assert result.manifest.format == "tfrecord" and result.manifest.compressor == compressor
    fs = fsspec.filesystem("memory")
    for path in result.paths:
        head = fs.cat_file(path)[:64]
        assert detect_format(head).name == "tfrecord"
        assert detect_compression(head) == compressor

    def check(got):
        assert [(a.tolist(), s) for a, s in got] == [(a.tolist(), s) for a, s in instances]

    check(RecordIO(f"{mem_url}/tf-*-of-*")())
    fs.rm(result.manifest_path.removeprefix("memory://"))
    check(RecordIO(f"{mem_url}/tf-*-of-*")())  # detected from the bytes


def test_example_codec_through_tfrecord_shards(mem_url, tf, tmp_path):
    features = [Feature("image", "float32", (28, 28)), Feature("label", "int64")]
    rng = np.random.default_rng(0)
    instances = [(rng.random((28, 28), np.float32), i % 10) for i in range(12)]
    result = convert(mem_url, instances, 2, "mnist", format="tfrecord", compressor="gzip",
                     codec=ExampleCodec(features))
    assert result.manifest.schema == ExampleCodec(features).schema()
    read_back = list(RecordIO(f"{mem_url}/mnist-*-of-*")())  # codec and schema: manifest
    for got, (image, label) in zip(read_back, instances, strict=True):
        assert got["image"].shape == (28, 28) and np.array_equal(got["image"], image)
        assert got["label"] == label and got["label"].shape == ()
    fs = fsspec.filesystem("memory")
    spec = {"image": tf.io.FixedLenFeature((28, 28), tf.float32),
            "label": tf.io.FixedLenFeature((), tf.int64)}
    parsed = []
    for k, shard in enumerate(result.paths):
        path = tmp_path / f"shard{k}"
        path.write_bytes(fs.cat_file(shard))
        for raw in tf.data.TFRecordDataset(str(path), compression_type="GZIP"):
            parsed.append(tf.io.parse_single_example(raw, spec))
    assert sorted(int(p["label"]) for p in parsed) == sorted(i % 10 for i in range(12))


def test_reader_takes_the_format_from_the_manifest(tmp_path):
    """With a manifest the format isn't guessed; format= still overrides everything."""
    convert(str(tmp_path), [b"x", b"yy"], 1, "m", format="tfrecord", codec="raw")
    read = RecordIO(str(tmp_path / "m-*"))
    assert read.manifests[0].format == "tfrecord" and list(read()) == [b"x", b"yy"]
    with pytest.raises(RecprepError):
        list(RecordIO(str(tmp_path / "m-*"), format="recordio")())


def test_reader_compressor_argument_overrides_detection(tmp_path):
    convert(str(tmp_path), [b"x", b"yy"], 1, "z", format="tfrecord", compressor="zlib",
            codec="raw")
    path = str(tmp_path / "z-00000-of-00000")
    assert list(RecordIO(path, format="tfrecord", compressor="zlib", codec="raw")()) == [
        b"x", b"yy"
    ]
    with pytest.raises(RecprepError):
        list(RecordIO(path, format="tfrecord", compressor="none", codec="raw")())
    with pytest.raises(InvalidArgumentError, match="pass format= too"):
        RecordIO(path, compressor="zlib")


def test_plain_tfrecord_shards_get_a_side_index_for_random_access(tmp_path):
    """Plain TFRecord shards are committed with `.{shard}.tfindex`: counts and read_range
    without a scan; an overwrite removes the old indexes; globs never see them."""
    records = [b"r%03d" % i for i in range(300)]
    convert(str(tmp_path), records, 3, "ix", format="tfrecord", codec="raw", chunk_bytes=256)
    names = sorted(p.name for p in tmp_path.iterdir())
    assert ".ix-00001-of-00002.tfindex" in names
    read = RecordIO(str(tmp_path / "ix-*"))
    assert read.paths == [str(tmp_path / f"ix-0000{i}-of-00002") for i in range(3)]
    shard = str(tmp_path / "ix-00001-of-00002")
    assert list(read.read_range(shard, 50, 53)) == records[1::3][50:53]
    big = [bytes([i]) * 100_000 for i in range(90)]  # 3 MB a shard: several index runs
    convert(str(tmp_path / "big"), big, 3, "b", format="tfrecord", codec="raw")
    shard = str(tmp_path / "big" / "b-00001-of-00002")
    data = bytearray(open(shard, "rb").read())
    data[14] ^= 0xFF  # the first record: a scan would stop here, the index seeks past it
    open(shard, "wb").write(bytes(data))
    fresh = RecordIO(str(tmp_path / "big" / "b-*"))
    assert list(fresh.read_range(shard, 27, 29)) == big[1::3][27:29]
    with pytest.raises(CorruptDataError):
        list(fresh.read_range(shard, 0, 1))
    convert(str(tmp_path), records[:4], 1, "ix", format="tfrecord", codec="raw",
            overwrite=True)
    assert sorted(p.name for p in tmp_path.iterdir() if "tfindex" in p.name) == [
        ".ix-00000-of-00000.tfindex"
    ]
    assert list(RecordIO(str(tmp_path / "ix-*"))()) == records[:4]
