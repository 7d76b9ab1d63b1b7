"""recprep's C kernels (``recprep._core._kernels``) give exactly what numpy alone gives.

Each kernel is held to the path it replaces, on any bytes (hypothesis): a RecordIO
payload cut into records (``split_records``), a chunk of ``"recprep"`` records checked
against a layout and cut into numpy columns and Arrow record batches (``walk_layout``,
``gather_spans``), valid chunks and chunks mutated alike or in one record. The same
records, values and types, or the same error, or no columns both ways. And the kernels
refuse what they are handed wrong with a ``ValueError``, never reading out of bounds.
"""

from __future__ import annotations

import os
import struct

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from recprep import RecordIO, convert
from recprep._core.native import NATIVE_ENV, kernels, native_off
from recprep.codecs.recprep import RecprepCodec
from recprep.codecs.recprep.layout import layout_of, layout_program
from recprep.containers.recordio import encode_payload, split_payload
from recprep.errors import CorruptDataError

from .test_recprep_decode_paths import FUZZ, _apply, _same, chunks, edits

pa = pytest.importorskip("pyarrow")
native = kernels()
pytestmark = [
    pytest.mark.filterwarnings("ignore::recprep.errors.RecprepWarning"),
    pytest.mark.skipif(native is None, reason="recprep's C kernels are not built here"),
]
CODEC = RecprepCodec()


def test_the_kernels_are_built_where_the_tests_run():
    """``make venv`` installs recprep with its kernels (a C compiler is on every machine
    the suite runs on): a build that quietly fell back to numpy would test one path."""
    if os.environ.get(NATIVE_ENV) == "0":
        pytest.skip(f"{NATIVE_ENV}=0")
    assert native is not None and native.__name__ == "recprep._core._kernels"


def _outcome(fn):
    try:
        return fn(), None
    except CorruptDataError as err:
        return None, str(err)


def _split_both(payload: bytes, count: int) -> tuple:
    fast = _outcome(lambda: split_payload(payload, count))
    with native_off():
        slow = _outcome(lambda: split_payload(payload, count))
    return fast, slow


@FUZZ
@given(st.lists(st.binary(max_size=40), max_size=90), st.integers(-2, 2),
       st.lists(st.tuples(st.integers(0, 4000), st.integers(0, 255)), max_size=3),
       st.integers(0, 8))
def test_a_payload_is_cut_into_the_same_records_with_and_without_the_kernel(
        records, miscount, flips, cut):
    """Sound payloads (records of one length too: numpy's all-at-once cut), and payloads
    with a wrong count, flipped bytes or cut short: the same records or error."""
    payload = bytearray(encode_payload(records))
    for at, value in flips:
        if payload:
            payload[at % len(payload)] = value
    payload = bytes(payload[: len(payload) - cut if cut < len(payload) else None])
    count = max(0, len(records) + miscount)
    (fast, fast_err), (slow, slow_err) = _split_both(payload, count)
    assert fast_err == slow_err
    if fast is not None:
        assert list(fast) == list(slow)
        assert fast.starts.dtype == slow.starts.dtype == np.int64


def test_a_payload_of_many_small_records_alike_is_cut_alike():
    records = [b"ABCD" + bytes([i % 7]) * (i % 5) for i in range(500)]
    (fast, _), (slow, _) = _split_both(encode_payload(records), 500)
    assert list(fast) == list(slow) == records
    assert fast.ends.tolist() == slow.ends.tolist()


def _columns_both(records: list[bytes]) -> None:
    cols, batch = CODEC.decode_columns(records), CODEC.decode_arrow_columns(records)
    with native_off():
        cols_slow = CODEC.decode_columns(records)
        batch_slow = CODEC.decode_arrow_columns(records)
    assert (cols is None) == (cols_slow is None)
    if cols is not None:
        assert cols.n == cols_slow.n and cols.signature == cols_slow.signature
        assert _same(cols.tree, cols_slow.tree)
    assert (batch is None) == (batch_slow is None)
    if batch is not None:
        if isinstance(batch.tree, pa.RecordBatch):
            assert batch.tree.schema.equals(batch_slow.tree.schema, check_metadata=True)
            assert _same(batch.tree.to_pydict(), batch_slow.tree.to_pydict())  # NaN too
        else:
            assert _same(batch.tree, batch_slow.tree)


@FUZZ
@given(chunks(), edits())
def test_chunks_mutated_alike_decode_to_the_same_columns_with_and_without_the_kernels(
        records, ops):
    _columns_both([_apply(r, ops) for r in records])


@FUZZ
@given(chunks(), edits(), st.integers(0, 7))
def test_a_chunk_with_one_record_mutated_decodes_alike_with_and_without_the_kernels(
        records, ops, which):
    records[which % len(records)] = _apply(records[which % len(records)], ops)
    _columns_both(records)


def test_strings_past_ascii_and_invalid_utf8_decode_alike():
    good = [CODEC.encode((i, f"é{i}", b"\xff" * (i % 3))) for i in range(600)]
    _columns_both(good)
    assert CODEC.decode_arrow_columns(good).tree.column(1).to_pylist()[:2] == ["é0", "é1"]
    bad = list(good)  # a str whose bytes are no UTF-8: record by record, both ways
    bad[300] = bad[300].replace("é".encode(), b"\xc3\x28")
    _columns_both(bad)
    assert CODEC.decode_arrow_columns(bad) is None


def test_a_set_reads_the_same_with_and_without_the_kernels(tmp_path):
    rows = [{"i": i, "s": "x" * (i % 9), "a": np.full(3, i, np.float32)} for i in range(900)]
    convert(str(tmp_path), rows, 3, "k", progress=False)
    pattern = str(tmp_path / "k-*-of-*")

    def read_all():
        reader = RecordIO(pattern, shuffle=True, seed=3)
        return (list(reader()), reader.to_arrow(),
                list(RecordIO(pattern).batches(64)))

    fast = read_all()
    with native_off():
        slow = read_all()
    assert _same(fast[0], slow[0])
    assert _same(sorted(fast[0], key=lambda row: row["i"]), rows)
    assert fast[1].equals(slow[1]) and fast[1].num_rows == len(rows)
    assert _same(fast[2], slow[2])


# ------------------------------------------------------------- handed the wrong things


def test_gather_spans_refuses_a_span_outside_the_buffer_and_offsets_of_a_wrong_size():
    buf = b"0123456789\xc3\xa9"
    offsets = np.empty(3, np.int32)
    got = native.gather_spans(buf, np.array([1, 7], np.int64), np.array([2, 2], np.int64),
                              offsets)
    assert got == (b"1278", False) and offsets.tolist() == [0, 2, 4]
    wide = np.empty(2, np.int64)
    assert native.gather_spans(buf, np.array([10], np.int64), np.array([2], np.int64),
                               wide) == ("é".encode(), True)
    assert wide.tolist() == [0, 2]
    for pos, size in (([11], [2]), ([-1], [1]), ([0], [-1]), ([2**62], [2**62])):
        with pytest.raises(ValueError, match="outside"):
            native.gather_spans(buf, np.array(pos, np.int64), np.array(size, np.int64),
                                np.empty(2, np.int32))
    with pytest.raises(ValueError, match="offsets of 12 bytes"):
        native.gather_spans(buf, np.array([0], np.int64), np.array([2], np.int64),
                            np.empty(3, np.int32))
    with pytest.raises(ValueError, match="int64"):
        native.gather_spans(buf, np.array([0], np.int32), np.array([2], np.int64), offsets)
    with pytest.raises(BufferError):  # read-only
        native.gather_spans(buf, np.array([0], np.int64), np.array([2], np.int64), b"x" * 8)


def test_gather_items_copies_a_field_of_every_record_and_refuses_one_outside():
    buf = bytes(range(40))
    out = np.empty((3, 4), np.uint8)
    native.gather_items(buf, np.array([0, 10, 30], np.int64), 2, out)
    assert out.tolist() == [[2, 3, 4, 5], [12, 13, 14, 15], [32, 33, 34, 35]]
    for size in (1, 8, 3):  # the widths with a loop of their own, and another
        got = np.empty((2, size), np.uint8)
        native.gather_items(buf, np.array([5, 20], np.int64), 1, got)
        assert got.tolist() == [list(range(6, 6 + size)), list(range(21, 21 + size))]
    with pytest.raises(ValueError, match="outside"):
        native.gather_items(buf, np.array([0, 35], np.int64), 2, out[:2])
    with pytest.raises(ValueError, match="outside"):
        native.gather_items(buf, np.array([0], np.int64), -1, out[:1])
    with pytest.raises(ValueError, match="not a whole item"):
        native.gather_items(buf, np.array([0, 1], np.int64), 0, np.empty(5, np.uint8))


def test_split_records_wants_two_int64_buffers_of_one_length():
    with pytest.raises(ValueError, match="expected 2 int64"):
        native.split_records(b"", np.empty(2, np.int64), np.empty(3, np.int64))
    with pytest.raises(BufferError):  # read-only
        native.split_records(b"", np.empty(0, np.int64), b"")


def test_walk_layout_refuses_a_malformed_program():
    record = CODEC.encode((1, "ab"))
    program, consts = layout_program(layout_of(record, (1, "ab")))
    starts, ends = np.array([0], np.int64), np.array([len(record)], np.int64)
    at = np.empty(2, np.int64)
    assert native.walk_layout(record, starts, ends, program, consts, at)
    assert at.tolist() == [0, len(record)]
    broken = [program[:-1], program[:1], np.append(program, 0),
              np.concatenate([program[:2], [2**31, 1, 0, 0, 0, 0, 0]]).astype(np.uint32)]
    for wrong in broken:
        with pytest.raises(ValueError, match="malformed layout program"):
            native.walk_layout(record, starts, ends, wrong.astype(np.uint32), consts, at)
    with pytest.raises(ValueError, match="malformed layout program"):  # runs past consts
        native.walk_layout(record, starts, ends, program, consts[:-1], at)
    with pytest.raises(ValueError, match="positions"):
        native.walk_layout(record, starts, ends, program, consts, np.empty(3, np.int64))
    outside = np.array([len(record) + 5], np.int64)  # a record past the buffer: False
    assert not native.walk_layout(record, starts, outside, program, consts, at)
    assert not native.walk_layout(record, outside, outside, program, consts, at)


def test_a_length_past_the_record_is_no_columns_with_the_kernels():
    records = [CODEC.encode((i, "ab")) for i in range(8)]
    long = bytearray(records[3])
    long[-6:-2] = struct.pack("<I", 0xFFFFFFF0)  # the str's length, beyond the record
    records[3] = bytes(long)
    assert CODEC.decode_columns(records) is None
    assert CODEC.decode_arrow_columns(records) is None


# ------------------------------------------------------------------- TFRecord frames


def test_the_kernels_crc32c_is_google_crc32cs_on_any_bytes():
    import google_crc32c

    for size in (0, 1, 7, 8, 9, 63, 64, 65, 4096 + 3):
        data = np.random.default_rng(size).bytes(size)
        want = google_crc32c.value(data)
        assert native.crc32c_value(data) == native.crc32c_value(data, True) == want


def test_the_kernels_crc32_is_zlibs_on_any_bytes_offsets_and_seeds():
    # the carry-less folding path (128 bytes a step, 16, then the tail by table) over
    # every length class, unaligned starts and continued CRCs; the table path beside it
    import random
    import zlib

    from recprep._core.native import crc32

    rng = random.Random(25)
    data = np.random.default_rng(25).bytes(300_000)
    sizes = [*range(0, 300), *range(380, 400), 4095, 4096, 4097, 65_536 + 15, 299_000]
    for size in sizes + [rng.randrange(0, 299_000) for _ in range(300)]:
        start, seed = rng.randrange(0, 1000), rng.choice([0, rng.getrandbits(32)])
        piece = memoryview(data)[start:start + size]
        want = zlib.crc32(piece, seed)
        assert native.crc32_value(piece, False, seed) == want, (size, start, seed)
        assert crc32(piece, seed) == want
        if size < 5000:
            assert native.crc32_value(piece, True, seed) == want
    with native_off():
        assert crc32(memoryview(data)[7:], crc32(data[:7])) == zlib.crc32(data)


def test_crc32_fast_says_whether_the_processor_folds():
    import platform

    if platform.machine() != "x86_64" or not os.path.exists("/proc/cpuinfo"):
        pytest.skip("the folding path is x86-64's")
    flags = set(open("/proc/cpuinfo").read().split())
    assert native.crc32_fast == int({"avx2", "vpclmulqdq", "pclmulqdq", "sse4_1"} <= flags)


@given(st.integers(1, 40), st.integers(0, 300), st.integers(0, 40), st.integers(0, 99),
       st.sampled_from(["even", "start", "end", "close"]))
def test_evenly_spaced_is_the_numpy_checks_stride(n, width, gap, first, damage):
    from recprep.codecs.recprep.columns import _even_stride

    starts = first + np.arange(n, dtype=np.int64) * (width + gap)
    ends = starts + width
    if damage == "start" and n > 2:
        starts[n // 2] += 1
    elif damage == "end":
        ends[-1] -= 1
    elif damage == "close" and n > 1:
        starts = first + np.arange(n, dtype=np.int64) * max(width - 1, 0)
        ends = starts + width
    want = _even_stride(starts, ends, int(starts[0]), int(ends[0] - starts[0]), n)
    assert native.evenly_spaced(starts, ends) == want
    if damage == "even":
        assert want == (width + gap if n > 1 else width)


def test_evenly_spaced_refuses_arrays_of_other_lengths():
    with pytest.raises(ValueError, match="ends: expected 3 int64 values"):
        native.evenly_spaced(np.arange(3, dtype=np.int64), np.arange(2, dtype=np.int64))


def _tfrecords(records: list[bytes]) -> bytes:
    import io

    from recprep.containers import get_format

    buf = io.BytesIO()
    writer = get_format("tfrecord").writer(buf, "none", 1 << 20)
    for record in records:
        writer.write(record)
    writer.close()
    return buf.getvalue()


def _read_tfrecords(data: bytes, on_corrupt: str) -> tuple:
    import io
    import warnings

    from recprep.containers import get_format

    chunks, error, seen = [], None, []
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            for c in get_format("tfrecord").read_chunks(
                    io.BytesIO(data), path="f.tfrecord", on_corrupt=on_corrupt,
                    on_skip=lambda w: seen.append((w.offset, w.records_lost, str(w)))):
                chunks.append((c.offset, list(c.records)))
        except CorruptDataError as err:
            error = (type(err).__name__, str(err), err.offset)
    return chunks, error, seen


@FUZZ
@given(st.lists(st.binary(max_size=300), min_size=1, max_size=60),
       st.lists(st.tuples(st.integers(0, 20000), st.integers(0, 255)), max_size=3),
       st.integers(0, 20), st.sampled_from(["raise", "skip"]))
def test_tfrecord_frames_read_the_same_with_and_without_the_kernel(records, flips, cut,
                                                                    on_corrupt):
    """Sound files, and files with flipped bytes (a length, a CRC, data) or cut short:
    the same chunks, errors and skips either way."""
    data = bytearray(_tfrecords(records))
    for at, value in flips:
        data[at % len(data)] = value
    data = bytes(data[: len(data) - cut])
    fast = _read_tfrecords(data, on_corrupt)
    with native_off():
        slow = _read_tfrecords(data, on_corrupt)
    assert fast == slow


def test_tfrecord_frames_stop_at_the_first_frame_that_is_not_whole_and_sound():
    records = [bytes([i]) * (i * 7) for i in range(40)]
    data = _tfrecords(records)
    starts, ends = native.tfrecord_frames(data, 0, len(data) - 16, 1 << 20)
    starts, ends = np.frombuffer(starts, np.int64), np.frombuffer(ends, np.int64)
    assert [data[a:b] for a, b in zip(starts, ends, strict=True)] == records
    ninth = int(starts[9])  # a flipped data byte of record 9: the frames before it
    bad = data[:ninth] + bytes([data[ninth] ^ 1]) + data[ninth + 1 :]
    assert len(native.tfrecord_frames(bad, 0, len(bad) - 16, 1 << 20)[0]) == 9 * 8
    assert len(native.tfrecord_frames(data, 0, len(data) - 16, 62)[0]) == 9 * 8  # limit
    cut = native.tfrecord_frames(data[:-1], 0, len(data) - 17, 1 << 20)  # the last torn
    assert cut[0] == starts[:-1].tobytes() and cut[1] == ends[:-1].tobytes()
    with pytest.raises(ValueError, match=">= 0"):
        native.tfrecord_frames(data, -1, 10, 10)


def test_records_picked_with_a_step_decode_alike():
    """Spans of a payload that aren't one contiguous array (every other record)."""
    from recprep._core.records import Records

    records = split_payload(encode_payload(
        [CODEC.encode((i, "s" * (i % 5), float(i))) for i in range(40)]), 40)
    picked = Records(records.payload, records.starts[::2], records.ends[::2])
    assert not picked.starts.flags.c_contiguous
    _columns_both(picked)
    assert CODEC.decode_arrow_columns(picked).tree.column(0).to_pylist() == list(
        range(0, 40, 2))


# ------------------------------------------------------------------- snappy framing

_PIECES = st.one_of(st.binary(max_size=24), st.sampled_from(
    [b"a", b"ab", b"abcabcab", b"token-", bytes(range(40)), b"\0" * 70]))
_TEXTS = st.builds(lambda parts, times: b"".join(parts) * times,
                   st.lists(_PIECES, max_size=60), st.sampled_from([1, 2, 300, 3000]))


def _framed(data: bytes) -> bytes:
    import cramjam

    return bytes(cramjam.snappy.compress(data))


def _decompressed(payload: bytes, limit: int) -> tuple:
    from recprep.containers.compression import get_compression

    snappy = get_compression("snappy-framed")
    try:
        return snappy.decompress(payload, limit), None
    except CorruptDataError as err:  # ChunkTooLargeError too
        return None, (type(err).__name__, str(err))


@FUZZ
@given(_TEXTS, st.lists(st.tuples(st.integers(0, 1 << 20), st.integers(0, 255)),
                        max_size=3), st.integers(0, 12), st.sampled_from([1 << 30, 5000]))
def test_snappy_streams_decompress_the_same_with_and_without_the_kernel(data, flips, cut,
                                                                        limit):
    """Streams cramjam wrote (runs that copy over themselves, frames stored as they are,
    several frames of 64 KiB), with flipped bytes, cut short or past ``limit``: the same
    bytes or the same error either way — the kernel decodes what it can vouch for (every
    frame's CRC-32C) and hands anything else to the careful path."""
    payload = bytearray(_framed(data))
    for at, value in flips if payload else ():
        payload[at % len(payload)] = value
    payload = bytes(payload[: max(len(payload) - cut, 0)])
    fast = _decompressed(payload, limit)
    with native_off():
        slow = _decompressed(payload, limit)
    assert fast == slow
    if not flips and not cut and len(data) <= limit:
        assert fast == (data, None)
        assert native.snappy_framed(payload, limit) == data


def _frame(kind: int, body: bytes) -> bytes:
    return bytes([kind]) + len(body).to_bytes(3, "little") + body


def _crc(data: bytes) -> bytes:
    crc = native.crc32c_value(data)
    return ((((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF).to_bytes(4, "little")


def test_snappy_framed_reads_every_kind_of_frame_and_copy():
    """Hand-made frames: padding and a repeated identifier skipped, a stored frame, and
    a raw block of a literal and copies of each offset width, overlapping ones included."""
    from recprep.containers.compression import SNAPPY_STREAM

    out = b"abcd" * 3 + b"d" * 9 + b"abcdab"
    block = (bytes([len(out)]) + bytes([3 << 2]) + b"abcd"  # a literal, "abcd"
             + bytes([1 | (4 << 2)]) + b"\x04"  # 1-byte offset 4, 8 bytes: overlapping
             + bytes([2 | (8 << 2)]) + b"\x01\x00"  # 2-byte offset 1: 9 x "d"
             + bytes([3 | (5 << 2)]) + b"\x15\x00\x00\x00")  # 4-byte offset 21: 6 bytes
    stream = (SNAPPY_STREAM + _frame(0xFE, b"pad") + _frame(0x00, _crc(out) + block)
              + SNAPPY_STREAM + _frame(0x01, _crc(b"stored") + b"stored")
              + _frame(0x80, b"skippable"))
    assert native.snappy_framed(stream, 1 << 20) == out + b"stored"
    with native_off():
        assert _decompressed(stream, 1 << 20) == (out + b"stored", None)
    assert native.snappy_framed(b"", 10) == b""


def test_snappy_framed_turns_down_what_it_cannot_vouch_for():
    """None — the careful path then says what is wrong — for a stream past the limit,
    a bad CRC, a copy from before the frame's output, output longer or shorter than the
    block says, more than 64 KiB in a frame, a reserved frame type, no identifier."""
    from recprep.containers.compression import SNAPPY_STREAM

    def raw(size: int, elements: bytes, crc_of: bytes = b"abcdabcd") -> bytes:
        return SNAPPY_STREAM + _frame(0x00, _crc(crc_of) + bytes([size]) + elements)

    good = raw(8, bytes([3 << 2]) + b"abcd" + bytes([1]) + b"\x04")
    assert native.snappy_framed(good, 8) == b"abcdabcd"
    for bad in (
        raw(8, bytes([3 << 2]) + b"abcd" + bytes([1]) + b"\x05"),  # copy before the start
        raw(9, bytes([3 << 2]) + b"abcd" + bytes([1]) + b"\x04"),  # one byte short
        raw(7, bytes([3 << 2]) + b"abcd" + bytes([1]) + b"\x04"),  # one byte too many
        raw(8, bytes([3 << 2]) + b"abcd" + bytes([1]) + b"\x04", b"abcdabce"),  # CRC
        raw(8, bytes([7 << 2]) + b"abcd"),  # a literal past the block
        SNAPPY_STREAM + _frame(0x01, _crc(b"x" * 65537) + b"x" * 65537),  # > 64 KiB
        SNAPPY_STREAM + _frame(0x02, b""),  # reserved, unskippable
        _frame(0x01, _crc(b"stored") + b"stored"),  # no stream identifier
        good[:-1],  # cut short
    ):
        assert native.snappy_framed(bad, 1 << 20) is None, bad
        with native_off():
            slow = _decompressed(bad, 1 << 20)
        assert _decompressed(bad, 1 << 20) == slow
    assert native.snappy_framed(good, 7) is None  # past the limit
    assert _decompressed(good, 7)[1][0] == "ChunkTooLargeError"
    assert _decompressed(good, 1 << 70) == (b"abcdabcd", None)  # past a C size: no limit
    assert native.snappy_framed(good, 1 << 70) == b"abcdabcd"  # the kernel takes it so
    with pytest.raises(TypeError):
        native.snappy_framed("text", 10)


def test_a_limit_past_what_c_holds_reads_as_no_limit(tmp_path):
    """``max_chunk_bytes`` is any positive int: one past a C ``ssize_t`` reaches the
    kernels as no limit (it raised ``OverflowError`` from the TFRecord frame walk)."""
    data = [(i, "w" * (i % 7)) for i in range(300)]
    convert(str(tmp_path / "r"), data, 2, "r", progress=False)
    frames = [bytes([i % 5]) * i for i in range(60)]
    convert(str(tmp_path / "t"), frames, 2, "t", format="tfrecord", codec="raw",
            progress=False)
    huge = 1 << 70
    assert list(RecordIO(str(tmp_path / "r" / "r-*-of-*"), max_chunk_bytes=huge)()) == data
    assert list(RecordIO(str(tmp_path / "t" / "t-*-of-*"), codec="raw",
                         max_chunk_bytes=huge)()) == frames
