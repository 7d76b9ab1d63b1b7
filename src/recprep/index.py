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

import io
import struct
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any, BinaryIO

import numpy as np

from .containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format
from .containers.base import OnSkip, max_records, report_skip
from .containers.recordio import (
    GO,
    HEADER_SIZE,
    LEGACY,
    MAGIC,
    MIN_RECORD_BYTES,
    iter_chunks,
)
from .errors import CorruptDataError, CorruptDataWarning, RecordRangeError

_HEADER = struct.Struct("<5I")

__all__ = [
    "FileIndex",
    "RecordRangeError",
    "Seeker",
    "build_index",
    "read_range_chunks",
    "register_seeker",
]


@dataclass(frozen=True)
class Seeker:
    """How to index a format by its chunk headers and read it from a chunk's offset."""

    #: ``scan(file, path, on_corrupt, max_chunk_bytes, on_skip)``: each chunk's offset and
    #: record count, in order (no count more than the chunk's bytes can hold)
    scan: Callable[[BinaryIO, str, str, int, OnSkip | None], tuple[list[int], list[int]]]
    #: ``read_from(file, offset, path, max_chunk_bytes, on_corrupt, on_skip)``: chunks from
    #: there on
    read_from: Callable[[BinaryIO, int, str, int, str, OnSkip | None], Iterator[Chunk]]


def _recordio_scan(
    file: BinaryIO, path: str, on_corrupt: str, max_chunk_bytes: int, on_skip: OnSkip | None
) -> tuple[list[int], list[int]]:
    """Hop from header to header. The first chunk goes through ``iter_chunks``, which
    checks its checksum to tell the variant; then a tight loop reads only headers. At
    anything unexpected (bad magic, an unknown compressor, a record count the chunk's
    bytes can't hold, a chunk past the end of the file, a cut header) the careful walk of
    ``iter_chunks`` starts over, and raises or skips as ``on_corrupt`` says."""
    options: dict[str, Any] = {
        "path": path, "decode": False, "on_corrupt": on_corrupt,
        "max_chunk_bytes": max_chunk_bytes, "on_skip": on_skip,
    }
    end = file.seek(0, io.SEEK_END)
    file.seek(0)
    walk = iter_chunks(file, **options)
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
            if fields[0] != MAGIC or compressor not in dialect.ids or (
                pos + HEADER_SIZE + size > end
            ) or count > max_records(
                size, dialect.ids[compressor], MIN_RECORD_BYTES, max_chunk_bytes
            ):
                break
            offsets.append(pos)
            counts.append(count)
            pos += HEADER_SIZE + size
    file.seek(0)
    infos = [i for i, _ in iter_chunks(file, **options)]
    return [i.offset for i in infos], [i.num_records for i in infos]


def _recordio_read_from(
    file: BinaryIO, offset: int, path: str, max_chunk_bytes: int, on_corrupt: str,
    on_skip: OnSkip | None = None,
) -> Iterator[Chunk]:
    file.seek(offset)
    for _, chunk in iter_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
        on_skip=on_skip,
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
    ``records``: where each record starts and, last, where the records end, when the
    index knows (a TFRecord side index); reading then checks every record against it.
    """

    offsets: np.ndarray
    firsts: np.ndarray
    seekable: bool
    _by_offset: dict[int, int] = field(default_factory=dict, repr=False)
    records: np.ndarray | None = None

    @classmethod
    def from_counts(
        cls, offsets: list[int], counts: list[int], seekable: bool,
        records: np.ndarray | None = None,
    ) -> FileIndex:
        firsts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.asarray(counts, dtype=np.int64), out=firsts[1:])
        by_offset = dict(zip(offsets, range(len(offsets)), strict=True))
        return cls(np.asarray(offsets, dtype=np.int64), firsts, seekable, by_offset, records)

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
        k = self._by_offset.get(offset)
        return None if k is None else int(self.firsts[k])

    def count_at(self, offset: int) -> int | None:
        """The record count of the chunk at byte ``offset``, if one is there."""
        k = self._by_offset.get(offset)
        return None if k is None else int(self.firsts[k + 1] - self.firsts[k])


def build_index(
    file: BinaryIO,
    container: Format,
    *,
    path: str,
    max_chunk_bytes: int = DEFAULT_MAX_CHUNK_BYTES,
    on_corrupt: str = "raise",
    on_skip: OnSkip | None = None,
) -> FileIndex:
    """The index of ``file``: from chunk headers when the format has a seeker, else by
    reading the whole file once (records are counted, never decoded by a codec).

    Header counts are checked against the bytes that hold them, so no index claims more
    records than its file can hold. Damage raises, or with ``on_corrupt="skip"`` is left
    out of the index with a :class:`~recprep.errors.CorruptDataWarning` (handed to
    ``on_skip`` too).
    """
    seeker = _SEEKERS.get(container.name)
    offsets: list[int]
    counts: list[int]
    if seeker is not None:
        offsets, counts = seeker.scan(file, path, on_corrupt, max_chunk_bytes, on_skip)
        return FileIndex.from_counts(offsets, counts, True)
    file.seek(0)
    offsets, counts = [], []
    for chunk in container.read_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
        on_skip=on_skip,
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
    on_skip: OnSkip | None = None,
) -> Iterator[tuple[Chunk, int]]:
    """The chunks holding records ``start:end`` of ``file``, cut to that range, each with
    how many records were cut off its front (to locate a record of the chunk).

    With a seekable index, reading starts at the chunk that holds ``start``; chunks
    before it are never read, and each chunk read must hold the records the index says
    (a TFRecord side index: each record must start where it says). Otherwise the file is
    read from its start. A file that ends before ``end`` (it changed since it was
    indexed, or its manifest is wrong), or that disagrees with its index, raises
    :class:`~recprep.errors.CorruptDataError`; with ``on_corrupt="skip"`` reading stops
    there with a :class:`~recprep.errors.CorruptDataWarning` (handed to ``on_skip`` too).
    A wrong record is never yielded.
    """
    if start >= end:
        return
    first = 0
    reported: list[CorruptDataWarning] = []  # skips the container reports on the way

    def note(warning: CorruptDataWarning) -> None:
        reported.append(warning)
        if on_skip is not None:
            on_skip(warning)

    chunks: Iterator[Chunk]
    if index.seekable and index.num_chunks:
        k = min(index.chunk_of(start), index.num_chunks - 1)
        first = int(index.firsts[k])
        offset = int(index.offsets[k])
        if index.records is not None:  # a TFRecord side index: every record is checked
            from .containers import tfrecord_index

            chunks = tfrecord_index.read_from(
                file, offset, path, max_chunk_bytes, on_corrupt, note,
                expected=index.records,
            )
        else:
            chunks = _SEEKERS[container.name].read_from(
                file, offset, path, max_chunk_bytes, on_corrupt, note
            )
    else:
        file.seek(0)
        chunks = container.read_chunks(
            file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
            on_skip=note,
        )
    aligned = index.seekable and index.records is None  # chunks are the index's chunks
    try:
        for chunk in chunks:
            n = len(chunk.records)
            if index.records is not None:  # read_from checked that a record starts there
                first = int(np.searchsorted(index.records, chunk.offset))
            known = index.first_record_at(chunk.offset) if aligned else None
            if known is not None:  # so a damaged chunk skipped before this one shifts nothing
                first = known
                expected = index.count_at(chunk.offset)
                if expected != n:
                    raise CorruptDataError(
                        f"the chunk holds {n} records, its index says {expected} (the file "
                        "changed after it was indexed)", path=path, offset=chunk.offset,
                    )
            lo, hi = max(start - first, 0), min(end - first, n)
            if lo < hi:
                records = chunk.records if (lo, hi) == (0, n) else chunk.records[lo:hi]
                yield Chunk(chunk.offset, records), lo
            first += n
            if first >= end:
                return
    except CorruptDataError as err:
        if on_corrupt == "raise":
            raise
        report_skip(on_skip, f"{err.detail}; skipped the rest of records {start}:{end}",
                    path=path, offset=err.offset, records_lost=end - max(first, start))
        return
    detail = (
        f"the file ends after record {first}, but records up to {end} were expected "
        "(it changed after it was indexed, or its manifest is wrong)"
    )
    if on_corrupt == "raise":
        raise CorruptDataError(detail, path=path)
    missing = end - max(first, start)
    if any(w.records_lost is None for w in reported) or missing <= sum(
        w.records_lost or 0 for w in reported
    ):
        return  # the skips already reported account for it
    report_skip(on_skip, detail, path=path, offset=None, records_lost=missing)
