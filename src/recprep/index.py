"""Chunk indexes: how many records a file holds, and reading records ``start:end`` of it.

A RecordIO file's index is the list of its chunk headers — offset and record count —
found by hopping from header to header without reading payloads
(:func:`~recprep.containers.recordio.scan_index`). With it, records ``start:end`` are read
by seeking straight to the chunk that holds ``start``: earlier chunks are never read or
decompressed, which is what makes ElasticDL-style tasks cheap.

Formats are looked up in a small registry of *seekers* by format name; a format without
one (TFRecord has no chunk index) is indexed by reading it once, and a range of it is read
from the start of the file, skipping the records before ``start``.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> fmt, buf = get_format("recordio"), io.BytesIO()
>>> w = fmt.writer(buf, "none", chunk_bytes=2)           # one record per chunk here
>>> for r in (b"aa", b"bb", b"cc", b"dd"):
...     w.write(r)
>>> w.close()
>>> index = build_index(buf, fmt, path="mem")
>>> index.num_records, index.seekable, index.chunk_of(2)
(4, True, 2)
>>> [c.records for c, _ in read_range_chunks(buf, fmt, index, 1, 3, path="mem")]
[[b'bb'], [b'cc']]
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from .containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format
from .containers.recordio import GO, HEADER_SIZE, LEGACY, MAGIC, iter_chunks
from .errors import CorruptDataError, InvalidArgumentError

_HEADER = struct.Struct("<5I")

__all__ = [
    "FileIndex",
    "RecordRangeError",
    "Seeker",
    "build_index",
    "read_range_chunks",
    "register_seeker",
]


class RecordRangeError(InvalidArgumentError, IndexError):
    """``read_range`` was asked for records a file doesn't have.

    Attributes: ``path``, ``start``, ``end``, ``num_records``.
    """

    def __init__(self, path: str, start: Any, end: Any, num_records: int, detail: str) -> None:
        self.path = path
        self.start = start
        self.end = end
        self.num_records = num_records
        super().__init__(
            f"{path}: can't read records [{start!r}, {end!r}): {detail}; the file holds "
            f"{num_records} records, so ask for 0 <= start <= end <= {num_records}"
        )


@dataclass(frozen=True)
class Seeker:
    """How to index a format by its chunk headers and read it from a chunk's offset."""

    #: ``scan(file, path, on_corrupt)``: each chunk's offset and record count, in order
    scan: Callable[[BinaryIO, str, str], tuple[list[int], list[int]]]
    #: ``read_from(file, offset, path, max_chunk_bytes, on_corrupt)``: chunks from there on
    read_from: Callable[[BinaryIO, int, str, int, str], Iterator[Chunk]]


def _recordio_scan(file: BinaryIO, path: str, on_corrupt: str) -> tuple[list[int], list[int]]:
    """Hop from header to header. The first chunk goes through ``iter_chunks``, which
    checks its checksum to tell the variant; then a tight loop reads only headers. At
    anything unexpected (bad magic, an unknown compressor, a cut header) the careful walk
    of ``iter_chunks`` starts over, and raises or skips as ``on_corrupt`` says."""
    file.seek(0)
    walk = iter_chunks(file, path=path, decode=False, on_corrupt=on_corrupt)
    first = next(walk, None)
    if first is None:
        return [], []
    info = first[0]
    file.seek(info.offset)
    fields = _HEADER.unpack(file.read(HEADER_SIZE))
    layout = [d for d in (GO, LEGACY) if d.unpack(fields)[2:] == (info.stored_size,
                                                                  info.num_records)]
    if layout:
        dialect = layout[0]
        offsets, counts = [info.offset], [info.num_records]
        pos = info.offset + HEADER_SIZE + info.stored_size
        seek, read, unpack = file.seek, file.read, _HEADER.unpack
        while True:
            seek(pos)
            head = read(HEADER_SIZE)
            if not head:
                return offsets, counts
            if len(head) < HEADER_SIZE:
                break
            fields = unpack(head)
            _, compressor, size, count = dialect.unpack(fields)
            if fields[0] != MAGIC or compressor not in dialect.ids:
                break
            offsets.append(pos)
            counts.append(count)
            pos += HEADER_SIZE + size
    file.seek(0)
    infos = [i for i, _ in iter_chunks(file, path=path, decode=False, on_corrupt=on_corrupt)]
    return [i.offset for i in infos], [i.num_records for i in infos]


def _recordio_read_from(
    file: BinaryIO, offset: int, path: str, max_chunk_bytes: int, on_corrupt: str
) -> Iterator[Chunk]:
    file.seek(offset)
    for _, chunk in iter_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt
    ):
        assert chunk is not None
        yield chunk


_SEEKERS: dict[str, Seeker] = {}


def register_seeker(format_name: str, seeker: Seeker) -> None:
    """Give the format registered as ``format_name`` a header index (replaces any)."""
    _SEEKERS[format_name] = seeker


for _name in ("recordio", "recordio-legacy"):
    register_seeker(_name, Seeker(_recordio_scan, _recordio_read_from))


@dataclass(frozen=True, eq=False)
class FileIndex:
    """Where a file's chunks start and which records they hold.

    ``firsts[k]`` is the number of the first record of chunk ``k``; ``firsts[-1]`` is the
    file's record count. ``seekable``: a chunk can be read by seeking to its offset.
    """

    offsets: np.ndarray
    firsts: np.ndarray
    seekable: bool
    _by_offset: dict[int, int] = field(default_factory=dict, repr=False)

    @classmethod
    def from_counts(
        cls, offsets: list[int], counts: list[int], seekable: bool
    ) -> FileIndex:
        firsts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.asarray(counts, dtype=np.int64), out=firsts[1:])
        by_offset = dict(zip(offsets, firsts[:-1].tolist(), strict=True))
        return cls(np.asarray(offsets, dtype=np.int64), firsts, seekable, by_offset)

    @property
    def num_records(self) -> int:
        return int(self.firsts[-1])

    @property
    def num_chunks(self) -> int:
        return len(self.offsets)

    def chunk_of(self, record: int) -> int:
        """The chunk that holds record number ``record`` (``0 <= record < num_records``)."""
        return int(np.searchsorted(self.firsts, record, side="right")) - 1

    def first_record_at(self, offset: int) -> int | None:
        """The number of the first record of the chunk at byte ``offset``, if one is there."""
        return self._by_offset.get(offset)


def build_index(
    file: BinaryIO,
    container: Format,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
) -> FileIndex:
    """The index of ``file``: from chunk headers when the format has a seeker, else by
    reading the whole file once (records are counted, never decoded by a codec)."""
    seeker = _SEEKERS.get(container.name)
    offsets: list[int]
    counts: list[int]
    if seeker is not None:
        offsets, counts = seeker.scan(file, path, on_corrupt)
        return FileIndex.from_counts(offsets, counts, True)
    file.seek(0)
    offsets, counts = [], []
    for chunk in container.read_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt
    ):
        offsets.append(chunk.offset)
        counts.append(len(chunk.records))
    return FileIndex.from_counts(offsets, counts, False)


def read_range_chunks(
    file: BinaryIO,
    container: Format,
    index: FileIndex,
    start: int,
    end: int,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
) -> Iterator[tuple[Chunk, int]]:
    """The chunks holding records ``start:end`` of ``file``, cut to that range, each with
    how many records were cut off its front (to locate a record of the chunk).

    With a seekable index, reading starts at the chunk that holds ``start``; chunks
    before it are never read. Otherwise the file is read from its start. A file that ends
    before ``end`` (it changed since it was indexed, or its manifest is wrong) raises
    :class:`~recprep.errors.CorruptDataError` unless ``on_corrupt="skip"``.
    """
    if start >= end:
        return
    first = 0
    if index.seekable and index.num_chunks:
        k = min(index.chunk_of(start), index.num_chunks - 1)
        first = int(index.firsts[k])
        read_from: Callable[..., Iterator[Chunk]]
        if container.name == "tfrecord":  # seekable only through its side index
            from .containers import tfrecord_index

            read_from = tfrecord_index.read_from
        else:
            read_from = _SEEKERS[container.name].read_from
        chunks = read_from(file, int(index.offsets[k]), path, max_chunk_bytes, on_corrupt)
    else:
        file.seek(0)
        chunks = container.read_chunks(
            file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt
        )
    for chunk in chunks:
        known = index.first_record_at(chunk.offset) if index.seekable else None
        if known is not None:  # so a damaged chunk skipped before this one shifts nothing
            first = known
        n = len(chunk.records)
        lo, hi = max(start - first, 0), min(end - first, n)
        if lo < hi:
            records = chunk.records if (lo, hi) == (0, n) else chunk.records[lo:hi]
            yield Chunk(chunk.offset, records), lo
        first += n
        if first >= end:
            return
    if on_corrupt == "raise":
        raise CorruptDataError(
            f"the file ends after record {first}, but records up to {end} were expected "
            "(it changed after it was indexed, or its manifest is wrong)",
            path=path,
        )
