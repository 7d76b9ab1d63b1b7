"""TFRecord frames placed by the side index (``read_chunks(frames=...)``): the same
chunks, errors and warnings as the walk from length to length, whatever the file or
the index holds."""

from __future__ import annotations

import io
import struct
import warnings

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep._core.native import native_off
from recprep.containers import get_format, tfrecord_parser
from recprep.containers.tfrecord import masked_crc32c, scan
from recprep.containers.tfrecord_index import TFRecordIndex
from recprep.errors import CorruptDataError

FMT = get_format("tfrecord")


def write(records: list[bytes], compressor: str = "none") -> bytes:
    buf = io.BytesIO()
    writer = FMT.writer(buf, compressor, 1 << 20)
    for r in records:
        writer.write(r)
    writer.close()
    return buf.getvalue()


def bounds(records: list[bytes], compressor: str = "none") -> np.ndarray:
    """The side index's bounds, as the writer's lengths give them."""
    return TFRecordIndex.from_lengths([len(r) for r in records], 0, compressor).bounds()


def outcome(data: bytes, **kwargs: object) -> tuple[object, ...]:
    """What a read gives: every chunk's offset and records, then the error raised (type,
    message, offset), and the warnings of a ``skip`` read."""
    seen: list[tuple[str, int | None, int | None, str]] = []
    chunks: list[tuple[int, list[bytes]]] = []
    error = None
    with warnings.catch_warnings(record=True):
        warnings.simplefilter("always")
        try:
            for c in FMT.read_chunks(io.BytesIO(data), path="f.tfrecord",
                                     on_skip=lambda w: seen.append(
                                         (w.path, w.offset, w.records_lost, str(w))),
                                     **kwargs):
                chunks.append((c.offset, list(c.records)))
        except CorruptDataError as err:
            error = (type(err).__name__, str(err), err.offset)
    return chunks, error, seen


def many(n: int, seed: int = 0) -> list[bytes]:
    rng = np.random.default_rng(seed)
    return [rng.bytes(int(k)) for k in rng.integers(0, 300, n)]


@pytest.mark.parametrize("compressor", ["none", "gzip", "zlib"])
def test_frames_of_the_side_index_read_the_same_chunks(compressor):
    records = many(20_000)  # about 3 MB: several batches, frames across block edges
    data = write(records, compressor)
    frames = scan(io.BytesIO(data), path="f").bounds()
    assert np.array_equal(frames, bounds(records, compressor))
    walked = outcome(data)
    assert outcome(data, frames=frames) == walked
    assert sum(len(r) for _, r in walked[0]) == len(records) and walked[0][0][0] == 0
    assert [r for _, rs in walked[0] for r in rs] == records


def test_frames_spare_the_walk_over_lengths(monkeypatch):
    """Through the index, no length is read one record at a time (the walk unpacks each
    one); without it, every one is."""
    records = many(5_000)
    data = write(records)
    calls = []
    unpack = tfrecord_parser._unpack_u64

    def counted(buf, at):
        calls.append(at)
        return unpack(buf, at)

    monkeypatch.setattr(tfrecord_parser, "_unpack_u64", counted)
    with native_off():  # the numpy path's walk (the C kernel walks without a call)
        assert outcome(data, frames=bounds(records)) == outcome(data)
    assert len(calls) == len(records)  # the walk without frames, once per record


def forged(records: list[bytes]) -> dict[str, np.ndarray]:
    frames = bounds(records)
    shifted = frames.copy()
    shifted[3:] += 16  # a stale index: record 2 was 16 bytes shorter
    swapped = bounds(records[:2] + records[3:4] + records[2:3] + records[4:])
    short = frames[:-5]  # the file has grown since
    tiny = frames.copy()
    tiny[5] = tiny[4] + 15  # a step no frame can have
    return {"shifted": shifted, "swapped": swapped, "short": short, "tiny": tiny,
            "another file": bounds(many(len(records), 9)),
            "one past": np.append(frames, frames[-1] + 100)}


@pytest.mark.parametrize("case", ["shifted", "swapped", "short", "tiny", "another file",
                                  "one past"])
def test_frames_that_are_not_the_files_change_nothing(case):
    records = [bytes([i % 256]) * (i % 7 * 20) for i in range(400)]
    data = write(records)
    frames = forged(records)[case]
    assert not np.array_equal(frames, bounds(records))
    assert outcome(data, frames=frames) == outcome(data)
    assert [r for _, rs in outcome(data, frames=frames)[0] for r in rs] == records


def test_a_forged_length_of_minus_one_is_not_a_frame():
    """An index step under the 16 framing bytes never places a frame, even where the
    length field (2**64 - 1, its CRC good) would wrap to it."""
    length = struct.pack("<Q", 2**64 - 1)
    head = length + struct.pack("<I", masked_crc32c(length))
    data = write([b"a" * 40]) + head + bytes(40)
    frames = np.array([0, 56, 56 + 15], np.int64)
    assert outcome(data, frames=frames) == outcome(data)
    assert outcome(data)[1][0] == "ChunkTooLargeError"


SMALL = [b"", b"a", b"bc" * 30, bytes(range(256)), b"xyz" * 50]


@settings(max_examples=300, deadline=None)
@given(st.sampled_from(["none", "gzip"]), st.data())
def test_damage_raises_and_skips_the_same_through_frames(compressor, data):
    """A damaged length, length CRC, data or data CRC, or a cut, in any batch: the same
    chunks, the same error (type, message, offset) and the same warnings with the frames
    of the sound file as without (batches of 100 bytes, so that damage lands in the
    middle of bulk reads)."""
    records = [SMALL[i % len(SMALL)] for i in range(data.draw(st.integers(1, 30)))]
    mutated = bytearray(write(records, compressor))
    for _ in range(data.draw(st.integers(1, 3))):
        mutated[data.draw(st.integers(0, len(mutated) - 1))] = data.draw(st.integers(0, 255))
    mutated = mutated[: data.draw(st.integers(len(mutated) // 2, len(mutated)))]
    frames = bounds(records, compressor)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(tfrecord_parser, "_BATCH", 100)
        for mode in ("raise", "skip"):
            kwargs = {"on_corrupt": mode, "max_chunk_bytes": 1 << 16}
            walked = outcome(bytes(mutated), **kwargs)
            assert outcome(bytes(mutated), frames=frames, **kwargs) == walked
            got = [r for _, rs in walked[0] for r in rs]
            assert all(r in SMALL for r in got)  # never a damaged record


@pytest.mark.parametrize("where", [3, 9, 12 + 5, 12 + 60 + 2])
def test_flipped_bytes_raise_at_the_record_through_frames(where):
    records = [b"a" * 60, b"b" * 60, b"c" * 60] * 50
    data = bytearray(write(records))
    start = 76 * 100
    data[start + where] ^= 0x01
    chunks, error, _ = outcome(bytes(data), frames=bounds(records))
    kind = "length" if where < 12 else "data"
    assert error is not None and error[2] == start
    assert f"record {kind} CRC mismatch" in error[1]
    assert [r for _, rs in chunks for r in rs] == records[:100]


@pytest.mark.parametrize("frames", [[0, 10**9, 5], [0, 50, 30, 80], [0, -4], [7, 3],
                                    [], [0]])
def test_any_array_of_frames_reads_as_the_walk(frames):
    """Offsets out of order, past the file, negative, or too few: nothing but the file's
    own frames is ever taken from them."""
    records = [b"x" * 34, b"y" * 14, b"z" * 20] * 3
    data = write(records)
    assert outcome(data, frames=np.array(frames, np.int64)) == outcome(data)
