"""Chunk indexes: how many records a file holds, and reading records ``start:end`` of it.

A format with chunk headers (:attr:`~recprep.containers.base.Format.chunk_header_bytes`,
RecordIO) is indexed by the list of its chunk headers — offset and record count — found
by hopping from header to header without reading payloads
(:meth:`~recprep.containers.base.Format.scan_chunks`). With it, records ``start:end`` are
read by seeking straight to the chunk that holds ``start``: earlier chunks are never
read or decompressed, which is what makes ElasticDL-style tasks cheap.

A format without chunk headers (TFRecord) is indexed by reading it once, and a range of
it is read from the start of the file, skipping the records before ``start`` — unless
the file has a record index side file (:mod:`recprep.storage.sideindex`), which gives a seekable
index whose every record is checked as it is read.

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
>>> [list(c.records) for c, _ in read_range_chunks(buf, fmt, index, 1, 3, path="mem")]
[[b'bb'], [b'cc']]
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ..containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format
from ..containers.base import OnSkip, report_skip
from ..containers.record_index import RecordIndex
from ..errors import CorruptDataError, CorruptDataWarning, RecordRangeError

__all__ = [
    "FileIndex",
    "RecordRangeError",
    "build_index",
    "read_range_chunks",
]


@dataclass(frozen=True, eq=False)
class FileIndex:
    """Where a file's chunks start and which records they hold.

    ``firsts[k]`` is the number of the first record of chunk ``k``; ``firsts[-1]`` is the
    file's record count. ``seekable``: a chunk can be read by seeking to its offset.
    ``records``: where each record starts and, last, where the records end, when the
    index knows (a record index side file); reading then checks every record against it.
    ``compressor``: what a reader seeking through it is told (the side file's).
    """

    offsets: np.ndarray
    firsts: np.ndarray
    seekable: bool
    _by_offset: dict[int, int] = field(default_factory=dict, repr=False)
    records: np.ndarray | None = None
    compressor: str | None = None

    @classmethod
    def from_counts(
        cls, offsets: list[int], counts: list[int], seekable: bool,
        records: np.ndarray | None = None, compressor: str | None = None,
    ) -> FileIndex:
        firsts = np.zeros(len(counts) + 1, dtype=np.int64)
        np.cumsum(np.asarray(counts, dtype=np.int64), out=firsts[1:])
        by_offset = dict(zip(offsets, range(len(offsets)), strict=True))
        return cls(np.asarray(offsets, dtype=np.int64), firsts, seekable, by_offset, records,
                   compressor)

    @classmethod
    def from_record_index(cls, index: RecordIndex, chunk_bytes: int = 1 << 20) -> FileIndex:
        """A seekable index of runs of records, from a record index that
        :meth:`~recprep.containers.record_index.RecordIndex.seeks`, with every record's
        offset (reads check them all)."""
        runs = index.runs(chunk_bytes)
        return cls.from_counts([c.offset for c in runs], [c.num_records for c in runs], True,
                               index.bounds(), index.compressor)

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
    """The index of ``file``: from chunk headers when the format has them
    (:meth:`~recprep.containers.base.Format.scan_chunks`), else by reading the whole file
    once (records are counted, never decoded by a codec).

    Header counts are checked against the bytes that hold them, so no index claims more
    records than its file can hold. Damage raises, or with ``on_corrupt="skip"`` is left
    out of the index with a :class:`~recprep.errors.CorruptDataWarning` (handed to
    ``on_skip`` too).
    """
    file.seek(0)
    found = container.scan_chunks(file, path=path, max_chunk_bytes=max_chunk_bytes,
                                  on_corrupt=on_corrupt, on_skip=on_skip)
    if found is not None:
        return FileIndex.from_counts(*found, True)
    offsets: list[int]
    counts: list[int]
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
    (a record index side file: each record must start where it says). Otherwise the file is
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

    offset = 0
    if index.seekable and index.num_chunks:
        k = min(index.chunk_of(start), index.num_chunks - 1)
        first = int(index.firsts[k])
        offset = int(index.offsets[k])
    file.seek(offset)
    chunks = container.read_chunks(
        file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
        on_skip=note, compressor=index.compressor,
    )
    kind = container.record_index if index.records is not None else None
    aligned = index.seekable and kind is None  # chunks are the index's chunks
    try:
        for chunk in chunks:
            n = len(chunk.records)
            if kind is not None:  # a record index: every record must start where it says
                assert index.records is not None
                first = kind.check(index.records, chunk.offset, chunk.records, path)
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
