"""Record offsets of TFRecord files, kept in a side index: counts and random access.

A TFRecord file has no chunk index (``docs/format.md`` §4.4), so counting its records
or finding record ``k`` takes a scan. recprep keeps the offsets in a side file next to
each TFRecord shard, named ``.{shard name}.tfindex``: its leading ``.`` keeps it out of
every shard glob (and out of ``RecordIO(directory)``), and TensorFlow never sees it.
:func:`count_records` and :func:`record_offsets` use it when it is there and matches the
file, and scan the file otherwise; a file without an index still reads.

Offsets are byte offsets of each record's frame **in the uncompressed stream**. For a
plain file that is the file offset, so records ``start:end`` are read by seeking
(:func:`read_records`). For a gzip or zlib file, the offsets give counts and record
sizes, but a deflate stream can't be entered in the middle: reading a range inflates
from the start.

Side file layout (little-endian)::

    offset   size  field
    0        8     magic b"RPTFIDX1"
    8        8     u64  size of the TFRecord file as stored (its compressed size)
    16       8     u64  size of the uncompressed record stream
    24       8     u64  number of records n
    32       1     u8   compression: 0 none, 1 gzip, 2 zlib
    33       7     zero
    40       8n    u64  offset of each record's frame in the uncompressed stream
    40+8n    4     u32  CRC-32C of bytes [0, 40+8n)

An index whose magic, CRC or length is wrong, whose recorded file size is not the
file's size (the file was rewritten), or that claims more records than the file can hold,
is ignored with a logged warning, and the file is scanned instead. An index that passes
these checks is still not trusted blindly: reading through it checks that every record
read starts where the index says (:func:`read_from`, :func:`read_records`), so an index
that doesn't match its file raises :class:`~recprep.errors.CorruptDataError` rather than
give other records.

Example
-------
>>> import fsspec
>>> from recprep.containers import get_format
>>> fs = fsspec.filesystem("memory")
>>> with fs.open("/doc/tfindex/a.tfrecord", "wb") as f:
...     w = get_format("tfrecord").writer(f, "none", 1 << 20)
...     for r in (b"x", b"", b"yz"):
...         w.write(r)
...     w.close()
>>> count_records(fs, "/doc/tfindex/a.tfrecord")       # no index yet: a scan
3
>>> index = build_index(fs, "/doc/tfindex/a.tfrecord")  # writes .a.tfrecord.tfindex
>>> index.offsets.tolist(), index.lengths().tolist()
([0, 17, 33], [1, 0, 2])
>>> read_records(fs, "/doc/tfindex/a.tfrecord", 1, 3)   # seeks to record 1
[b'', b'yz']
"""

from __future__ import annotations

import io
import logging
import posixpath
import struct
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any, BinaryIO

import google_crc32c
import numpy as np

from ..errors import CorruptDataError, InvalidArgumentError
from .base import (
    DEFAULT_MAX_CHUNK_BYTES,
    MAX_EXPANSION,
    NO_LIMIT,
    Chunk,
    ChunkInfo,
    OnSkip,
    max_records,
)
from .tfrecord import TFRecordFormat, detect_compression

__all__ = [
    "INDEX_SUFFIX",
    "TFRecordIndex",
    "build_index",
    "chunk_infos",
    "count_records",
    "index_name",
    "index_path",
    "load_index",
    "read_from",
    "read_records",
    "record_offsets",
    "scan",
]

log = logging.getLogger("recprep")

INDEX_SUFFIX = ".tfindex"
FRAME_BYTES = 16  # length, its CRC, and the data CRC around each record
_MAGIC = b"RPTFIDX1"
_HEAD = struct.Struct("<8sQQQB7x")
_CRC = struct.Struct("<I")
_HEADER_BYTES = _HEAD.size + _CRC.size
_COMPRESSION = ("none", "gzip", "zlib")


def index_name(name: str) -> str:
    """The side index's file name for the TFRecord file ``name``.

    >>> index_name("part-00000-of-00003")
    '.part-00000-of-00003.tfindex'
    """
    return f".{name}{INDEX_SUFFIX}"


def index_path(path: str) -> str:
    """The side index's path for the TFRecord file at ``path`` (same directory)."""
    directory, name = posixpath.split(path)
    return posixpath.join(directory, index_name(name))


@dataclass(frozen=True, eq=False)
class TFRecordIndex:
    """The record offsets of one TFRecord file.

    ``offsets[k]`` is where record ``k``'s frame starts in the uncompressed stream;
    ``stream_size`` is the stream's length (where a next record would start) and
    ``file_size`` the file's size as stored.
    """

    offsets: np.ndarray
    stream_size: int
    file_size: int
    compressor: str = "none"

    @property
    def num_records(self) -> int:
        return len(self.offsets)

    def bounds(self) -> np.ndarray:
        """Where each record starts, then where the last one ends (``num_records + 1``
        offsets): what reading through the index checks records against."""
        return np.append(self.offsets, self.stream_size)

    def lengths(self) -> np.ndarray:
        """Each record's data length (without the 16 framing bytes)."""
        ends = np.append(self.offsets[1:], self.stream_size)
        return ends - self.offsets - FRAME_BYTES

    @classmethod
    def from_lengths(
        cls, lengths: Sequence[int] | np.ndarray, file_size: int, compressor: str = "none"
    ) -> TFRecordIndex:
        """The index of a file whose records have these data ``lengths``, in order (what a
        writer knows without reading the file back).

        >>> TFRecordIndex.from_lengths([1, 0, 2], 49).offsets.tolist()
        [0, 17, 33]
        """
        frames = np.asarray(lengths, dtype=np.int64) + FRAME_BYTES
        offsets = np.zeros(len(frames), dtype=np.int64)
        np.cumsum(frames[:-1], out=offsets[1:])
        return cls(offsets, int(frames.sum()), int(file_size), compressor)

    def to_bytes(self) -> bytes:
        """The side file's bytes."""
        if self.compressor not in _COMPRESSION:
            raise InvalidArgumentError(
                f"compression must be one of {list(_COMPRESSION)}, got {self.compressor!r}"
            )
        head = _HEAD.pack(_MAGIC, self.file_size, self.stream_size, self.num_records,
                          _COMPRESSION.index(self.compressor))
        body = head + self.offsets.astype("<u8").tobytes()
        return body + _CRC.pack(google_crc32c.value(body))

    @classmethod
    def from_bytes(cls, data: bytes, path: str | None = None) -> TFRecordIndex:
        """Parse a side file; anything malformed raises ``CorruptDataError``."""
        def bad(detail: str) -> CorruptDataError:
            return CorruptDataError(f"not a valid TFRecord index: {detail}", path=path)

        if len(data) < _HEAD.size + _CRC.size:
            raise bad(f"{len(data)} bytes is too short")
        magic, file_size, stream_size, count, compression = _HEAD.unpack_from(data)
        if magic != _MAGIC:
            raise bad(f"magic {magic!r}, expected {_MAGIC!r}")
        if len(data) != _HEAD.size + 8 * count + _CRC.size:
            raise bad(f"{count} offsets need {_HEAD.size + 8 * count + _CRC.size} bytes, "
                      f"the file has {len(data)}")
        (crc,) = _CRC.unpack_from(data, len(data) - _CRC.size)
        if google_crc32c.value(data[: -_CRC.size]) != crc:
            raise bad("CRC-32C mismatch")
        if compression >= len(_COMPRESSION):
            raise bad(f"unknown compression id {compression}")
        offsets = np.frombuffer(data, "<u8", count, _HEAD.size).astype(np.int64)
        steps = np.diff(np.append(offsets, stream_size))
        if count and (offsets[0] != 0 or (steps < FRAME_BYTES).any()):
            raise bad("offsets are not those of consecutive records")
        return cls(offsets, stream_size, file_size, _COMPRESSION[compression])


def scan(
    file: BinaryIO,
    *,
    path: str,
    compressor: str | None = None,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> TFRecordIndex:
    """Index the open TFRecord ``file`` by reading it once (every CRC is verified).

    ``compressor`` ``None`` detects it from the first bytes. Damage raises
    :class:`~recprep.errors.CorruptDataError`.
    """
    file.seek(0)
    head = file.read(64) or b""
    file.seek(0)
    found = compressor or (detect_compression(head) if head else "none") or "none"
    starts: list[np.ndarray] = []
    stream_size = 0
    chunks = TFRecordFormat().read_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, compressor=found
    )
    for chunk in chunks:
        frames = np.fromiter(map(len, chunk.records), np.int64, len(chunk.records))
        frames += FRAME_BYTES
        ends = np.cumsum(frames) + chunk.offset
        starts.append(ends - frames)
        stream_size = int(ends[-1])
    file_size = file.seek(0, io.SEEK_END)
    offsets = np.concatenate(starts) if starts else np.zeros(0, np.int64)
    return TFRecordIndex(offsets, stream_size, file_size, found)


def build_index(
    fs: Any,
    path: str,
    *,
    index_file: str | None = None,
    compressor: str | None = None,
    max_chunk_bytes: int | None = None,
) -> TFRecordIndex:
    """Scan the TFRecord file at ``path`` and write its side index.

    The index goes to ``index_file``, by default :func:`index_path` of ``path``; a staged
    file is indexed into the index's staged path, then both are moved to their final
    names. Returns the index. ``max_chunk_bytes`` ``None`` bounds no record: for a file
    recprep itself just wrote (a reader's bound is for files from elsewhere).
    """
    limit = NO_LIMIT if max_chunk_bytes is None else max_chunk_bytes
    with fs.open(path, "rb") as file:
        index = scan(file, path=path, compressor=compressor, max_chunk_bytes=limit)
    write_index(fs, index, index_file or index_path(path))
    return index


def write_index(fs: Any, index: TFRecordIndex, index_file: str) -> None:
    """Write ``index`` to ``index_file``."""
    with fs.open(index_file, "wb") as out:
        out.write(index.to_bytes())


def load_index(fs: Any, path: str) -> TFRecordIndex | None:
    """The side index of the TFRecord file at ``path``, if there is a valid one for the
    file as it is now (same size); ``None`` otherwise, with a warning when one is there
    but can't be used."""
    side = index_path(path)
    try:
        side_size = fs.size(side)
    except FileNotFoundError:
        return None
    size = fs.size(path)
    # before reading it: no more offsets than the file could hold records
    most = _HEADER_BYTES + 8 * max_records(size, "gzip", FRAME_BYTES)
    if side_size > most:
        log.warning("recprep: %s has %d bytes, more than an index of the %d-byte file can "
                    "need (%d); scanning the file instead", side, side_size, size, most)
        return None
    try:
        index = TFRecordIndex.from_bytes(bytes(fs.cat_file(side)), path=side)
    except FileNotFoundError:
        return None
    except CorruptDataError as err:
        log.warning("recprep: %s; scanning %s instead", err, path)
        return None
    if size != index.file_size:
        log.warning("recprep: %s is stale (it indexes %d bytes, the file has %s); scanning "
                    "the file instead", side, index.file_size, size)
        return None
    ratio = MAX_EXPANSION[index.compressor]
    if index.stream_size > size * ratio or (
        index.compressor == "none" and index.stream_size != size
    ):
        log.warning("recprep: %s does not match the file (it indexes a %d-byte record "
                    "stream, the %s file has %d bytes); scanning the file instead", side,
                    index.stream_size, index.compressor, size)
        return None
    return index


def _index(fs: Any, path: str, max_chunk_bytes: int) -> TFRecordIndex:
    index = load_index(fs, path)
    if index is None:
        with fs.open(path, "rb") as file:
            index = scan(file, path=path, max_chunk_bytes=max_chunk_bytes)
    return index


def record_offsets(
    fs: Any, path: str, *, max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
) -> np.ndarray:
    """The offsets of the records of the TFRecord file at ``path``, in its uncompressed
    stream (the file offsets, for a plain file): from the side index, else by a scan."""
    return _index(fs, path, max_chunk_bytes).offsets


def count_records(
    fs: Any, path: str, *, max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES
) -> int:
    """The number of records of the TFRecord file at ``path``: from the side index, else
    by a scan (which verifies every record's CRCs)."""
    return _index(fs, path, max_chunk_bytes).num_records


def read_records(
    fs: Any,
    path: str,
    start: int,
    end: int,
    *,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
) -> list[bytes]:
    """Records ``start:end`` of the TFRecord file at ``path``, CRCs verified.

    A plain file with an index is read from record ``start``'s offset, and only up to
    record ``end``; otherwise (no index, or gzip/zlib) the stream is read from its start.
    Raises :class:`~recprep.errors.InvalidArgumentError` unless
    ``0 <= start <= end <= count``.
    """
    index = _index(fs, path, max_chunk_bytes)
    count = index.num_records
    if not (isinstance(start, int) and isinstance(end, int) and 0 <= start <= end <= count):
        raise InvalidArgumentError(
            f"{path}: can't read records [{start!r}, {end!r}); the file holds {count} "
            f"records, so ask for 0 <= start <= end <= {count}"
        )
    if start == end:
        return []
    fmt = TFRecordFormat()
    if index.compressor != "none":
        records: list[bytes] = []
        with fs.open(path, "rb") as file:
            for chunk in fmt.read_chunks(file, path=path, compressor=index.compressor,
                                         max_chunk_bytes=max_chunk_bytes):
                records.extend(chunk.records)
                if len(records) >= end:
                    break
        return records[start:end]
    first = int(index.offsets[start])
    stop = int(index.offsets[end]) if end < count else index.stream_size
    with fs.open(path, "rb") as file:
        file.seek(first)
        data = file.read(stop - first)
    try:
        records = [r for chunk in fmt.read_chunks(io.BytesIO(data), path=path,
                                                  compressor="none",
                                                  max_chunk_bytes=max_chunk_bytes)
                   for r in chunk.records]
    except CorruptDataError as err:
        raise CorruptDataError(
            f"records {start}:{end} should be bytes {first}:{stop} by the side index, but "
            f"there: {err.detail}; the file is damaged or does not match its side index "
            f"{index_path(path)} (delete it: a scan replaces it)",
            path=path, offset=(err.offset or 0) + first,
        ) from None
    _check_records(index.bounds(), first, records, path, start)
    return records


# -- for a reader's chunk index (recprep.index): runs of records it can seek to ------------


def chunk_infos(index: TFRecordIndex, chunk_bytes: int = 1 << 20) -> list[ChunkInfo]:
    """The records of a plain file grouped into runs of about ``chunk_bytes`` (framing
    counted), as a reader's chunk index lists chunks: where each run starts, how many
    records it holds, its size.

    >>> [(c.offset, c.num_records) for c in chunk_infos(
    ...     TFRecordIndex.from_lengths([4, 4, 4, 4, 4], 100), chunk_bytes=40)]
    [(0, 2), (40, 2), (80, 1)]
    """
    if index.compressor != "none":
        raise InvalidArgumentError(
            f"a {index.compressor} TFRecord stream can't be entered in the middle: read it "
            "from its start"
        )
    infos: list[ChunkInfo] = []
    offsets = index.offsets.tolist()
    ends = [*offsets[1:], index.stream_size]
    start = 0
    while start < len(offsets):
        stop = start + 1
        while stop < len(offsets) and ends[stop] - offsets[start] <= chunk_bytes:
            stop += 1
        infos.append(ChunkInfo(offsets[start], stop - start, ends[stop - 1] - offsets[start]))
        start = stop
    return infos


def _check_records(
    expected: np.ndarray, offset: int, records: list[bytes], path: str, number: int | None = None
) -> int:
    """Check that ``records``, read from byte ``offset`` on, start where ``expected`` (an
    index's :meth:`~TFRecordIndex.bounds`) says, and the last ends there too; return the
    number of the first. O(1) Python work per call (numpy compares the offsets)."""
    k = int(np.searchsorted(expected, offset)) if number is None else number
    n = len(records)
    starts = np.empty(n + 1, np.int64)
    starts[0] = offset
    np.cumsum(np.fromiter(map(len, records), np.int64, n) + FRAME_BYTES, out=starts[1:])
    starts[1:] += offset
    want = expected[k : k + n + 1]
    if len(want) == n + 1 and np.array_equal(starts, want):
        return k
    bad = int(np.argmax(starts[: len(want)] != want)) if len(want) else 0
    if bad >= len(want) or starts[bad] == want[bad]:
        found = (f"the file holds a record at byte {int(starts[len(want)])}, past the "
                 f"{len(expected) - 1} records the index lists")
    else:
        found = (f"the index says record {k + bad} starts at byte {int(want[bad])}, the "
                 f"file's record there starts at byte {int(starts[bad])}")
    raise CorruptDataError(
        f"the file does not match its side index {index_path(path)}: {found}; delete the "
        "side index (a scan replaces it) or copy the set again",
        path=path, offset=int(starts[min(bad, n)]),
    )


def read_from(
    file: BinaryIO,
    offset: int,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
    on_skip: OnSkip | None = None,
    *,
    expected: np.ndarray | None = None,
) -> Iterator[Chunk]:
    """The records of a plain TFRecord file from the record at byte ``offset`` on, in
    chunks whose ``offset`` is the file offset of their first record (the ``read_from``
    of a :class:`recprep.index.Seeker`).

    ``expected``, a side index's :meth:`~TFRecordIndex.bounds`: every record read must
    start where it says, else :class:`~recprep.errors.CorruptDataError` (whatever
    ``on_corrupt`` says: the index, not the data, is wrong, and reading on would number
    records wrongly; :func:`recprep.index.read_range_chunks` turns it into a warning when
    skipping).
    """
    file.seek(offset)
    chunks = TFRecordFormat().read_chunks(file, path=path, max_chunk_bytes=max_chunk_bytes,
                                          on_corrupt=on_corrupt, on_skip=on_skip,
                                          compressor="none")
    for chunk in chunks:
        if expected is not None:
            _check_records(expected, chunk.offset, chunk.records, path)
        yield chunk
