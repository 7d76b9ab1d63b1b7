"""RecordIO containers: golden files, spec decoding, pyrecordio interop, damage."""

from __future__ import annotations

import gzip
import io
import random
import struct
import warnings
import zlib

import cramjam
import google_crc32c
import pytest
import recordio as pyrecordio  # pyrecordio==0.0.4, the legacy-format oracle
from hypothesis import given, settings
from hypothesis import strategies as st
from recordio.recordio.header import Compressor as PyCompressor
from recordio.recordio.writer import Writer as PyWriter

from recprep.containers import ChunkInfo, get_format
from recprep.containers.compression import get_compression
from recprep.containers.recordio import MAGIC, crc32, encode_payload, iter_chunks, scan_index
from recprep.errors import ChunkTooLargeError, CorruptDataError, CorruptDataWarning, RecprepError

from ..support import DATA


def read_all(data: bytes, *, max_chunk_bytes: int = 256 << 20) -> list[bytes]:
    fmt = get_format("recordio")
    chunks = fmt.read_chunks(io.BytesIO(data), path="f", max_chunk_bytes=max_chunk_bytes)
    return [r for c in chunks for r in c.records]


def write_all(records, fmt="recordio", compressor="snappy", chunk_bytes=1 << 20) -> bytes:
    buf = io.BytesIO()
    writer = get_format(fmt).writer(buf, compressor, chunk_bytes)
    for r in records:
        writer.write(r)
    writer.close()
    return buf.getvalue()


def spec_decode_go(data: bytes) -> list[tuple[int, list[bytes]]]:
    """An independent decoder written from FORMATS.md §1: (compressor id, records) a chunk."""
    out, pos = [], 0
    while pos < len(data):
        magic, crc, comp, size, count = struct.unpack_from("<5I", data, pos)
        assert magic == 0x01020304
        payload = data[pos + 20 : pos + 20 + size]
        assert len(payload) == size and zlib.crc32(payload) == crc
        raw = {0: bytes, 1: lambda p: bytes(cramjam.snappy.decompress(p)), 2: gzip.decompress}[
            comp
        ](payload)
        records, p = [], 0
        for _ in range(count):
            (n,) = struct.unpack_from("<I", raw, p)
            records.append(raw[p + 4 : p + 4 + n])
            p += 4 + n
        assert p == len(raw)
        out.append((comp, records))
        pos += 20 + size
    return out


# -- golden files ---------------------------------------------------------------------


@pytest.mark.parametrize(
    "name",
    ["go-recordio/none", "go-recordio/snappy", "go-recordio/gzip", "pyrecordio-0.0.4/snappy"],
)
def test_reads_reference_files(name, records):
    data = (DATA / f"{name}.recordio").read_bytes()
    assert read_all(data) == records


def test_reads_go_example_file_same_bytes_as_tfrecord():
    data = (DATA / "example" / "examples.recordio").read_bytes()
    tf = (DATA / "example" / "examples.tfrecord").read_bytes()
    tf_records, pos = [], 0
    while pos < len(tf):
        (n,) = struct.unpack_from("<Q", tf, pos)
        tf_records.append(tf[pos + 12 : pos + 12 + n])
        pos += 16 + n
    assert read_all(data) == tf_records and len(tf_records) == 25


def test_index_of_reference_file_hops_headers():
    with open(DATA / "go-recordio" / "none.recordio", "rb") as f:
        index = scan_index(f, path="none")
    assert sum(c.num_records for c in index) == 44
    assert index[0] == ChunkInfo(0, index[0].num_records, index[0].stored_size)
    assert [c.offset for c in index[1:]] == [
        c.offset + 20 + c.stored_size for c in index[:-1]
    ]


# -- what we write decodes per the spec ---------------------------------------------------


@pytest.mark.parametrize("compressor,comp_ids", [("none", {0}), ("snappy", {0, 1}),
                                                  ("gzip", {2})])
def test_written_go_files_decode_per_spec(records, compressor, comp_ids):
    # the vectors' records hold incompressible runs: snappy sets mix snappy and none chunks
    data = write_all(records, compressor=compressor, chunk_bytes=4096)
    chunks = spec_decode_go(data)
    assert len(chunks) > 1 and {c for c, _ in chunks} == comp_ids
    assert [r for _, rs in chunks for r in rs] == records
    assert read_all(data) == records


def test_chunks_cut_at_chunk_bytes_and_big_records_alone():
    recs = [b"a" * 100] * 10 + [b"b" * 5000] + [b"c" * 10] * 3
    chunks = spec_decode_go(write_all(recs, compressor="none", chunk_bytes=250))
    sizes = [len(rs) for _, rs in chunks]
    assert sizes == [2, 2, 2, 2, 2, 1, 3]
    assert [r for _, rs in chunks for r in rs] == recs


def test_empty_records_and_empty_file():
    assert write_all([]) == b""
    assert read_all(b"") == []
    assert read_all(write_all([b"", b"", b""])) == [b"", b"", b""]


# -- snappy only where it saves: chunks that wouldn't shrink are stored as "none" ---------


def noise(n: int, seed: int) -> bytes:
    return random.Random(seed).randbytes(n)


def chunk_payloads(data: bytes) -> list[tuple[int, bytes]]:
    """(compressor id, stored payload) of each chunk of a Go RecordIO file."""
    out, pos = [], 0
    while pos < len(data):
        _, _, comp, size, _ = struct.unpack_from("<5I", data, pos)
        out.append((comp, data[pos + 20 : pos + 20 + size]))
        pos += 20 + size
    return out


def test_snappy_stores_incompressible_chunks_uncompressed():
    noisy = [noise(3000, i) for i in range(6)]  # one 3000-byte record a chunk
    plain = [b"abc" * 1000] * 6
    recs = [r for pair in zip(noisy, plain, strict=True) for r in pair]
    data = write_all(recs, compressor="snappy", chunk_bytes=3000)
    stored = chunk_payloads(data)
    assert [c for c, _ in stored] == [0, 1] * 6
    for (comp, payload), record in zip(stored, recs, strict=True):
        raw = encode_payload([record])
        # byte for byte what always compressing gave (snappy chunks), or the raw payload
        assert payload == (bytes(cramjam.snappy.compress(raw)) if comp else raw)
    assert [r for _, rs in spec_decode_go(data) for r in rs] == recs == read_all(data)


def test_snappy_set_is_never_bigger_than_always_compressing(records):
    recs = records * 3 + [noise(5000, 7)] * 2
    data = write_all(recs, compressor="snappy", chunk_bytes=4096)
    chunks = spec_decode_go(data)
    always = sum(20 + len(cramjam.snappy.compress(encode_payload(rs))) for _, rs in chunks)
    assert len(data) < always and {c for c, _ in chunks} == {0, 1}


def test_gzip_and_none_sets_keep_their_compressor():
    recs = [noise(3000, i) for i in range(3)]
    assert {c for c, _ in chunk_payloads(write_all(recs, compressor="gzip", chunk_bytes=1))} \
        == {2}


def legacy_chunk_ids(data: bytes) -> list[int]:
    ids, pos = [], 0
    while pos < len(data):
        _, _, _, comp, size = struct.unpack_from("<5I", data, pos)
        ids.append(comp)
        pos += 20 + size
    return ids


def test_pyrecordio_reads_legacy_sets_of_snappy_and_none_chunks(tmp_path):
    recs = [noise(3000, 1), b"xyz" * 1000, noise(2000, 2), b"", b"q" * 5000]
    data = write_all(recs, "recordio-legacy", "snappy", chunk_bytes=2000)
    assert legacy_chunk_ids(data) == [1, 2, 1, 2]  # legacy ids: 1 none, 2 snappy
    path = tmp_path / "mixed.recordio"
    path.write_bytes(data)
    with pyrecordio.File(str(path), "r") as f:
        assert list(f.get_reader()) == recs
    assert read_all(data) == recs


@settings(max_examples=60, deadline=None)
@given(st.lists(st.one_of(st.binary(max_size=300), st.integers(0, 400).map(bytes),
                          st.integers(1, 9).map(lambda s: noise(500, s))), max_size=40),
       st.integers(64, 2048), st.data())
def test_snappy_choice_is_per_chunk_so_cut_writers_concatenate(recs, chunk_bytes, data):
    """What each chunk holds depends on its bytes alone: writing in two runs (a writer's
    cut(), as parallel executors' pieces are joined) gives the same bytes as two files."""
    cut = data.draw(st.integers(0, len(recs)))
    buf = io.BytesIO()
    writer = get_format("recordio").writer(buf, "snappy", chunk_bytes)
    for i, r in enumerate(recs):
        if i == cut:
            writer.cut()
        writer.write(r)
    writer.close()
    joined = write_all(recs[:cut], chunk_bytes=chunk_bytes) + write_all(
        recs[cut:], chunk_bytes=chunk_bytes)
    assert buf.getvalue() == joined
    assert read_all(joined) == recs
    for comp, rs in spec_decode_go(joined):
        raw = encode_payload(rs)
        assert (comp == 1) == (len(cramjam.snappy.compress(raw)) < len(raw))


@settings(max_examples=80, deadline=None)
@given(st.one_of(st.binary(max_size=200_000),
                 st.integers(0, 200_000).map(bytes),
                 st.tuples(st.integers(0, 140_000), st.integers(0, 9)).map(
                     lambda t: noise(t[0], t[1]) + bytes(t[0] // 2))))
def test_framing_is_cramjams_byte_for_byte(payload):
    framed = get_compression("snappy-framed")
    ours = framed.compress_below(payload, float("inf")) if payload else b""
    assert ours == bytes(cramjam.snappy.compress(payload))
    kept = framed.compress_below(payload, 1.0)
    assert kept == (ours if len(ours) < len(payload) else None)
    raw = get_compression("snappy-raw").compress_below(payload, 0.9)
    packed = bytes(cramjam.snappy.compress_raw(payload))
    assert raw == (packed if len(packed) < 0.9 * len(payload) else None)


def test_go_checksum_is_zlib_crc32(records):
    for r in records:
        assert crc32(r) == zlib.crc32(r)


# -- pyrecordio 0.0.4 interop, both ways --------------------------------------------------


@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_pyrecordio_reads_what_we_write(tmp_path, records, compressor):
    path = tmp_path / "legacy.recordio"
    path.write_bytes(write_all(records, "recordio-legacy", compressor, chunk_bytes=2048))
    with pyrecordio.File(str(path), "r") as f:
        assert f.count() == len(records)
        assert list(f.get_reader()) == records


@pytest.mark.parametrize("compressor", list(PyCompressor))
def test_we_read_what_pyrecordio_writes(tmp_path, records, compressor):
    path = tmp_path / "by-pyrecordio.recordio"
    with open(path, "wb") as f:
        writer = PyWriter(f, 3000, compressor)
        for r in records:
            writer.write(r)
        writer.flush()
    data = path.read_bytes()
    assert read_all(data) == records
    with open(path, "rb") as f:
        assert sum(c.num_records for c in scan_index(f, path="x")) == len(records)


# -- damage -------------------------------------------------------------------------------


def chunk(payload: bytes, count: int, comp: int = 0, crc: int | None = None) -> bytes:
    crc = zlib.crc32(payload) if crc is None else crc
    return struct.pack("<5I", MAGIC, crc, comp, len(payload), count) + payload


def damage(data: bytes, **kw) -> CorruptDataError:
    with pytest.raises(CorruptDataError) as info:
        read_all(data, **kw)
    err = info.value
    assert isinstance(err, RecprepError) and err.path == "f"
    return err


def test_flipped_payload_byte_is_a_checksum_error_at_its_chunk(records):
    data = bytearray(write_all(records, compressor="snappy", chunk_bytes=4096))
    second = scan_index(io.BytesIO(bytes(data)), path="f")[1].offset
    data[second + 30] ^= 0x40
    err = damage(bytes(data))
    assert err.offset == second and "checksum mismatch" in str(err)
    assert f"f at byte {second}" in str(err)


def test_bad_magic():
    err = damage(chunk(b"\0\0\0\0", 1) + b"\x00" * 24)
    assert err.offset == 24 and "magic" in str(err) and "0x01020304" in str(err)


@pytest.mark.parametrize("cut", [1, 10, 19])
def test_truncated_header_is_a_torn_chunk(cut):
    good = chunk(struct.pack("<I", 1) + b"x", 1)
    err = damage(good + good[:cut])
    assert err.offset == len(good) and "torn last chunk" in str(err)


def test_truncated_payload():
    good = chunk(struct.pack("<I", 5) + b"hello", 1)
    err = damage(good[:-2])
    assert err.offset == 0 and "cut off" in str(err)


def test_record_running_past_its_chunk():
    err = damage(chunk(struct.pack("<I", 50) + b"short", 1))
    assert "runs past the end" in str(err) and err.record_index == 0


def test_more_records_claimed_than_present():
    err = damage(chunk(struct.pack("<I", 8) + b"x" * 8, 3))  # 12 bytes: 3 could fit
    assert "holds 3 records" in str(err)


def test_more_records_claimed_than_the_chunk_can_hold():
    err = damage(chunk(struct.pack("<I", 1) + b"x", 3))  # 5 bytes hold one record at most
    assert "claims 3 records, but its 5 stored bytes" in str(err) and "at most 1" in str(err)


def test_stray_bytes_after_records():
    err = damage(chunk(struct.pack("<I", 1) + b"xyz", 1))
    assert "stray bytes" in str(err)


def test_unknown_compressor_id():
    payload = struct.pack("<I", 1) + b"x"
    err = damage(struct.pack("<5I", MAGIC, zlib.crc32(payload), 9, len(payload), 1) + payload)
    assert "compressor id" in str(err)


def test_size_claim_over_the_bound_fails_before_reading():
    header = struct.pack("<5I", MAGIC, 0, 0, 2**32 - 1, 1)
    with pytest.raises(ChunkTooLargeError) as info:
        read_all(header + b"tiny")
    assert info.value.limit == 256 << 20 and info.value.size == 2**32 - 1


def test_snappy_bomb_is_refused_from_frame_headers():
    # a framed stream whose compressed frame claims a 4 GiB output
    body = b"\x00\x00\x00\x00" + b"\xff\xff\xff\xff\x0f" + b"\x00" * 8
    payload = b"\xff\x06\x00\x00sNaPpY" + bytes([0, len(body), 0, 0]) + body
    with pytest.raises(ChunkTooLargeError) as info:
        read_all(chunk(payload, 1, comp=1))
    assert info.value.size == 2**32 - 1


def test_gzip_bomb_stops_at_the_bound():
    payload = gzip.compress(b"\0" * (8 << 20))
    with pytest.raises(ChunkTooLargeError):
        read_all(chunk(payload, 1, comp=2), max_chunk_bytes=1 << 20)


def test_legacy_checksum_is_crc32c():
    payload = struct.pack("<I", 2) + b"ok"
    good = struct.pack("<5I", MAGIC, 1, google_crc32c.value(payload), 1, len(payload)) + payload
    assert read_all(good) == [b"ok"]
    bad = bytearray(good)
    bad[-1] ^= 1
    assert "CRC-32C" in str(damage(bytes(bad)))


def test_iter_chunks_without_decoding_reports_counts(records):
    data = write_all(records, chunk_bytes=2048)
    infos = [info for info, c in iter_chunks(io.BytesIO(data), path="f", decode=False)]
    assert sum(i.num_records for i in infos) == 44 and len(infos) > 2


# -- on_corrupt="skip" ----------------------------------------------------------------------


def numbered(n: int) -> list[bytes]:
    return [b"record-%04d" % i for i in range(n)]


def read_skipping(data: bytes) -> list[bytes]:
    return skipping(data)[0]


def skipping(data: bytes) -> tuple[list[bytes], list[CorruptDataWarning]]:
    """The records read with on_corrupt="skip", and the warnings given (each also handed
    to on_skip: the same objects)."""
    fmt = get_format("recordio")
    seen: list[CorruptDataWarning] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        chunks = fmt.read_chunks(io.BytesIO(data), path="f", on_corrupt="skip",
                                 on_skip=seen.append)
        records = [r for c in chunks for r in c.records]
    assert [w.message for w in caught] == seen
    assert all(w.category is CorruptDataWarning for w in caught)
    return records, seen


def chunk_records(data: bytes) -> list[tuple[int, int]]:
    return [(c.offset, c.num_records) for c in scan_index(io.BytesIO(data), path="f")]


@pytest.mark.parametrize("compressor", ["none", "snappy", "gzip"])
def test_skip_loses_exactly_the_damaged_chunk(compressor):
    recs = numbered(200)
    data = bytearray(write_all(recs, compressor=compressor, chunk_bytes=300))
    index = chunk_records(bytes(data))
    third_offset, third_count = index[2]
    data[third_offset + 25] ^= 0xFF  # inside the third chunk's payload
    before = sum(c for _, c in index[:2])
    got, [warning] = skipping(bytes(data))
    assert got == recs[:before] + recs[before + third_count :]
    assert (warning.path, warning.offset, warning.records_lost) == ("f", third_offset,
                                                                    third_count)
    assert str(warning).startswith(
        f"f at byte {third_offset}: skipped damaged data, {third_count} record(s) lost "
        "(damaged chunk: ")


def test_skip_resyncs_after_a_damaged_header():
    recs = numbered(100)
    data = bytearray(write_all(recs, compressor="none", chunk_bytes=200))
    index = chunk_records(bytes(data))
    offset, count = index[1]
    data[offset : offset + 4] = b"\0\0\0\0"  # the magic of chunk 1
    got, [warning] = skipping(bytes(data))
    start = index[0][1]
    assert got == recs[:start] + recs[start + count :]
    assert (warning.offset, warning.records_lost) == (offset, None)
    assert f"from byte {offset} to byte {index[2][0]}" in str(warning)
    assert "an unknown number of record(s) lost" in str(warning)


def test_skip_reports_a_torn_last_chunk():
    recs = numbered(50)
    data = write_all(recs, compressor="snappy", chunk_bytes=200)
    last_offset, last_count = chunk_records(data)[-1]
    got, [warning] = skipping(data[:-3])
    assert got == recs[: len(recs) - last_count]
    assert (warning.offset, warning.records_lost) == (last_offset, last_count)
    assert "the file ends in a torn chunk" in str(warning)


def test_skip_past_garbage_to_the_end():
    recs = numbered(10)
    data = write_all(recs, compressor="none") + b"\x04\x03\x02\x01" + b"junk" * 20
    assert read_skipping(data) == recs
    with pytest.raises(CorruptDataError):
        read_all(data)


# ------------------------------------------------- cutting a payload into records at once

from recprep.containers.recordio import (  # noqa: E402
    AT_ONCE_MIN_RECORDS,
    split_payload,
)
from recprep.containers.recordio_framing import _check_payload  # noqa: E402


@settings(max_examples=300, deadline=None)
@given(prefix=st.binary(min_size=0, max_size=6),
       tails=st.lists(st.one_of(st.binary(max_size=20),
                                st.sampled_from([b"", b"\xf1\x05\x03\x00", b"\x00" * 9])),
                      min_size=AT_ONCE_MIN_RECORDS, max_size=200),
       echo=st.integers(0, 3), damage=st.integers(-1, 10_000))
def test_payloads_are_cut_at_once_exactly_as_record_by_record(prefix, tails, echo, damage):
    """Records sharing their first bytes are cut with numpy; values that hold those
    bytes again (echo), records that begin otherwise, and damaged payloads are cut — or
    refused — exactly as the walk does."""
    records = [prefix + (prefix * echo if i % 7 == 3 else b"") + t
               for i, t in enumerate(tails)]
    payload = bytearray(encode_payload(records))
    if damage >= 0:
        payload[damage % len(payload)] ^= 0x5A
    payload = bytes(payload)
    try:
        walked = _walk(payload, len(records))
    except CorruptDataError as err:
        with pytest.raises(CorruptDataError) as got:
            split_payload(payload, len(records))
        assert got.value.detail == err.detail
        return
    assert list(split_payload(payload, len(records))) == walked
    if damage < 0:
        assert walked == records


def _walk(payload: bytes, count: int) -> list[bytes]:
    """The reference: record by record, what is wrong raised by _check_payload."""
    out, pos = [], 0
    for _ in range(count):
        if pos + 4 > len(payload):
            _check_payload(payload, count)
        n = struct.unpack_from("<I", payload, pos)[0]
        out.append(payload[pos + 4:pos + 4 + n])
        pos += 4 + n
    if pos != len(payload):
        _check_payload(payload, count)
    return out
