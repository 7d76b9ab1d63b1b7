"""RecordIO's bytes: the chunk header of both variants, their checksums, and a payload's
records.

A chunk is a 20-byte header and a payload; the payload, decompressed, is ``num_records``
times ``[uint32 length][bytes]`` (little-endian). A :class:`Dialect` is one variant's
header layout, checksum and compressor ids (:data:`GO`, recprep's default, and
:data:`LEGACY`, pyrecordio 0.0.4: the table is in :mod:`recprep.containers.recordio`).
Nothing here reads or writes a file: :mod:`~recprep.containers.recordio_reading` walks
chunks, :mod:`~recprep.containers.recordio` writes them.

Example
-------
>>> payload = encode_payload([b"ab", b"", b"c"])
>>> payload.hex(" ")
'02 00 00 00 61 62 00 00 00 00 01 00 00 00 63'
>>> list(split_payload(payload, 3))
[b'ab', b'', b'c']
>>> header = LEGACY.pack(crc=7, compressor=2, size=15, count=3)
>>> len(header) == HEADER_SIZE, LEGACY.unpack(_HEADER.unpack(header))
(True, (7, 2, 15, 3))
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from .._core.native import crc32, crc32c, kernels
from .._core.records import Records
from ..errors import CorruptDataError
from .compression import Buffer

MAGIC = 0x01020304
HEADER_SIZE = 20
#: a record takes at least its 4-byte length in a decompressed payload
MIN_RECORD_BYTES = 4
#: the header's 32-bit size field: the most a chunk's stored payload can be
MAX_PAYLOAD = 0xFFFFFFFF
_HEADER = struct.Struct("<5I")
_U32 = struct.Struct("<I")
_u32_pack = _U32.pack
_u32_unpack_from = _U32.unpack_from


@dataclass(frozen=True)
class Dialect:
    """How one RecordIO variant lays out and checks a chunk header."""

    name: str
    checksum: Callable[[Buffer], int]
    #: on-disk compressor id -> compression, and user-facing name -> id
    ids: dict[int, str]
    names: dict[str, int]

    def pack(self, crc: int, compressor: int, size: int, count: int) -> bytes:
        if self.name == "recordio":
            return _HEADER.pack(MAGIC, crc, compressor, size, count)
        return _HEADER.pack(MAGIC, count, crc, compressor, size)

    def unpack(self, fields: tuple[int, ...]) -> tuple[int, int, int, int]:
        """Return (checksum, compressor id, stored size, record count)."""
        _, a, b, c, d = fields
        if self.name == "recordio":
            return a, b, c, d
        return b, c, d, a


GO = Dialect(
    "recordio",
    crc32,
    {0: "none", 1: "snappy-framed", 2: "gzip"},
    {"none": 0, "snappy": 1, "gzip": 2},
)
LEGACY = Dialect(
    "recordio-legacy",
    crc32c,
    {1: "none", 2: "snappy-raw", 3: "gzip"},
    {"none": 1, "snappy": 2, "gzip": 3},
)


def encode_payload(records: Sequence[bytes]) -> bytes:
    """``[uint32 length][bytes]`` for each record, joined."""
    parts: list[bytes] = []
    append = parts.append
    for record in records:
        append(_u32_pack(len(record)))
        append(record)
    return b"".join(parts)


def frame_lengths(buffer: np.ndarray, starts: np.ndarray, lengths: np.ndarray) -> None:
    """Write each record's uint32 length into ``buffer`` (uint8) in the 4 bytes before
    it (record ``i`` at ``starts[i]``, ``lengths[i]`` bytes): records laid back to back
    so become a payload, as :func:`encode_payload` makes it. A length beyond 32 bits is
    written cut (a writer refuses such a record before it takes the buffer).

    >>> buffer = np.frombuffer(b"....ab....c", np.uint8).copy()
    >>> frame_lengths(buffer, np.array([4, 10]), np.array([2, 1]))
    >>> buffer.tobytes() == encode_payload([b"ab", b"c"])
    True
    """
    if not len(starts):
        return
    heads = np.ndarray((len(buffer) - 3,), "V4", buffer, 0, (1,))  # a word at every byte
    heads[starts - 4] = lengths.astype("<u4").view("V4")


def split_payload(payload: Buffer, count: int) -> Records:
    """The ``count`` records of a decompressed payload; raises on any inconsistency.

    >>> list(split_payload(encode_payload([b"ab", b"", b"c"]), 3))
    [b'ab', b'', b'c']
    """
    native = kernels()
    if native is not None:  # one walk in C; anything wrong: the careful walk says what
        bounds = np.empty((2, count), np.int64)
        if not native.split_records(payload, bounds[0], bounds[1]):
            _check_payload(payload, count)
        return Records(payload, bounds[0], bounds[1], len(payload) - 4 * count)
    if count >= AT_ONCE_MIN_RECORDS and len(payload) < AT_ONCE_BELOW_BYTES * count:
        found = _split_at_once(payload, count)
        if found is not None:
            return found
    ends: list[int] = []
    append = ends.append
    pos = 0
    try:  # the sound case, record by record at the least cost; damage: the careful walk
        for _ in range(count):
            pos += 4 + _u32_unpack_from(payload, pos)[0]
            append(pos)
    except struct.error:
        pos = -1
    if pos != len(payload):
        _check_payload(payload, count)
    ends_array = np.array(ends, dtype=np.int64)
    starts = np.empty_like(ends_array)
    if count:
        starts[0] = 4
        starts[1:] = ends_array[:-1] + 4
    return Records(payload, starts, ends_array)


#: payloads of at least this many records averaging under this many bytes are first cut
#: with numpy (:func:`_split_at_once`): for small records a walk costs more per byte
AT_ONCE_MIN_RECORDS = 64
AT_ONCE_BELOW_BYTES = 128


def _split_at_once(payload: Buffer, count: int) -> Records | None:
    """The records of a sound payload whose records all begin with the first record's
    first four bytes (records of one codec and layout do), found with numpy; None when
    that guess doesn't hold exactly.

    Every place where those four bytes follow a 4-byte word is a candidate record; the
    guess holds only if the candidates are exactly a chain — the first at 0, each
    record's length leading to the next candidate, the last ending the payload, ``count``
    of them. A chain from 0 is the payload's one way of being cut, so a payload that
    passes is cut exactly as the record-by-record walk cuts it; any other (stray matches
    inside values, records that begin otherwise, damage) goes record by record.

    >>> records = [b"ABCD" + b"x" * n for n in range(70)]
    >>> list(_split_at_once(encode_payload(records), 70)) == records
    True
    >>> _split_at_once(encode_payload([b"ABCD" + b"ABCD" * n for n in range(70)]), 70)
    >>> # ^ None: marks inside values (the walk cuts that one)
    """
    found = record_heads(payload)
    if found is None:
        return None
    heads, words = found
    if len(heads) != count or heads[0] != 0:
        return None
    ends = heads + 4 + words[heads].astype(np.int64)
    if int(ends[-1]) != len(payload) or not (ends[:-1] == heads[1:]).all():
        return None
    return Records(payload, heads + 4, ends)


def record_heads(payload: Buffer) -> tuple[np.ndarray, np.ndarray] | None:
    """The candidate record starts of a decompressed payload (sorted: every place where
    the first record's first four bytes follow a 4-byte word) and the little-endian word
    at every byte offset; None when the payload can't begin with a record of at least
    four bytes. What :func:`_split_at_once` and
    :func:`~.recordio_lookup.record_in_prefix` check as a chain of lengths from 0.

    >>> heads, words = record_heads(encode_payload([b"ABCD", b"ABCDx"]))
    >>> heads.tolist(), int(words[0]), int(words[8])
    ([0, 8], 4, 5)
    """
    size = len(payload)
    if size < 8 or _u32_unpack_from(payload, 0)[0] < 4:
        return None
    u8 = np.frombuffer(payload, np.uint8)
    # the little-endian word at every byte offset (unaligned, nothing copied)
    words = np.ndarray((size - 3,), "<u4", payload, 0, (1,))
    mark = bytes(payload[4:8])
    # one byte of the mark compared over the payload (its first non-zero one: zeros are
    # common in lengths and numbers), then the whole word at those places alone: the
    # candidates come out sorted, at a quarter of comparing words at 4 alignments
    key = next((j for j in range(4) if mark[j]), 0)
    heads = (u8[4 + key:size - 3 + key] == mark[key]).nonzero()[0]
    return heads[words[heads + 4] == int.from_bytes(mark, "little")], words


def _check_payload(payload: Buffer, count: int) -> None:
    """Raise what is wrong with a payload that doesn't hold ``count`` records exactly."""
    end = len(payload)
    pos = 0
    for index in range(count):
        if pos + 4 > end:
            raise CorruptDataError(
                f"the chunk says it holds {count} records, but its payload ends "
                f"after {index}",
                record_index=index,
            )
        start = pos + 4
        pos = start + _u32_unpack_from(payload, start - 4)[0]
        if pos > end:
            raise CorruptDataError(
                f"record length {pos - start} runs past the end of its chunk "
                f"({end - start} bytes left)",
                record_index=index,
            )
    raise CorruptDataError(
        f"{end - pos} stray bytes after the chunk's {count} records (expected none)"
    )
