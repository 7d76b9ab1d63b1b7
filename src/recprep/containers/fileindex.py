"""A file's chunk index: where its chunks start and which records they hold.

A format with chunk headers (:attr:`~recprep.containers.base.Format.chunk_header_bytes`,
RecordIO) is indexed by the list of its chunk headers — offset and record count — found
by hopping from header to header without reading payloads
(:meth:`~recprep.containers.base.Format.scan_chunks`); a format without them (TFRecord)
by reading the file once, or from a record index side file
(:mod:`recprep.storage.sideindex`). Reading through an index is
:mod:`recprep.read.placing`'s.

**Record numbers are proven, never assumed.** A chunk header's record count is covered
by no checksum, so an index built from headers alone makes claims nothing vouches for.
An index is *trusted* when something does: the set's manifest vouches for the side file
it came from, or the file's header counts add up to the count its manifest lists
(:meth:`FileIndex.settle`). An untrusted index proves its chunks' first record numbers
one after the other as reading walks through them (:attr:`FileIndex.proven`).

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
>>> index.num_records, index.seekable, index.chunk_of(2), index.trusted
(4, True, 2, False)
>>> index.settle(4)  # a manifest says the file holds 4 records
True
"""

from __future__ import annotations

import bisect
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ..errors import CorruptDataWarning
from .base import DEFAULT_MAX_CHUNK_BYTES, Format, OnSkip
from .record_index import RecordIndex

__all__ = ["FileIndex", "build_index"]


@dataclass(eq=False)
class FileIndex:
    """Where a file's chunks start and which records they hold.

    ``firsts[k]`` is the number of the first record of chunk ``k``; ``firsts[-1]`` is the
    file's record count. Chunk ``k`` holds ``counts[k]`` records; when that is fewer than
    ``firsts[k + 1] - firsts[k]``, the records between were lost to damage (an index of a
    damaged file, made with ``on_corrupt="skip"``). ``seekable``: a chunk can be read by
    seeking to its offset. ``records``: where each record starts and, last, where the
    records end, when the index knows (a record index side file); reading then checks
    every record against it. ``compressor``: what a reader seeking through it is told
    (the side file's). ``proven``: how many leading chunks have first record numbers that
    are proven (all of them in a trusted index; see the module docs) — reading extends
    it. ``unknown``: the chunks before which damage lost a number of records nothing
    told (:meth:`settle` may learn it from the file's count).
    """

    offsets: np.ndarray
    firsts: np.ndarray
    seekable: bool
    _by_offset: dict[int, int] = field(default_factory=dict, repr=False)
    records: np.ndarray | None = None
    compressor: str | None = None
    proven: int = -1  # -1: all chunks (a trusted index)
    counts: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int64), repr=False)
    unknown: list[int] = field(default_factory=list)

    def __post_init__(self) -> None:
        if self.proven < 0:
            self.proven = self.num_chunks
        if len(self.counts) != self.num_chunks:
            self.counts = np.diff(self.firsts)

    @classmethod
    def from_counts(
        cls, offsets: list[int], counts: list[int], seekable: bool,
        records: np.ndarray | None = None, compressor: str | None = None,
        *, trusted: bool = True, lost: Sequence[tuple[int, int | None]] = (),
    ) -> FileIndex:
        """An index of chunks at ``offsets`` holding ``counts`` records; ``lost``: ``(k,
        records)`` — that many records (None: an unknown number) were lost to damage
        before chunk ``k`` (``k`` may be the number of chunks: at the end)."""
        sizes = np.asarray(counts, dtype=np.int64)
        before = np.zeros(len(sizes) + 1, dtype=np.int64)  # lost before chunk k (or the end)
        unknown = []
        for k, n in lost:
            if n is None:
                unknown.append(k)
            else:
                before[k] += n
        firsts = np.zeros(len(sizes) + 1, dtype=np.int64)
        np.cumsum(sizes, out=firsts[1:])
        firsts += np.cumsum(before)
        by_offset = dict(zip(offsets, range(len(offsets)), strict=True))
        proven = -1 if trusted and not unknown else (min(unknown) if unknown else 0)
        return cls(np.asarray(offsets, dtype=np.int64), firsts, seekable, by_offset, records,
                   compressor, proven if trusted else 0, sizes, unknown)

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

    @property
    def trusted(self) -> bool:
        """Whether every chunk's first record number is proven."""
        return self.proven >= self.num_chunks

    def trust(self) -> None:
        """Take every claim of this index as proven (something else vouches for it)."""
        self.proven = self.num_chunks

    def settle(self, count: int) -> bool:
        """Take ``count``, the file's record count as something trusted says (its
        manifest), as the truth: the index is trusted when its records add up to it —
        and when one run of damage lost an unknown number of records, that number is
        what is missing. Returns whether the index is trusted now."""
        missing = count - self.num_records
        if not self.unknown and missing == 0:
            self.trust()
        elif len(self.unknown) == 1 and missing >= 0:
            k = self.unknown.pop()
            self.firsts[k:] += missing
            self.trust()
        return self.trusted

    def chunk_of(self, record: int) -> int:
        """The chunk that holds record number ``record`` (``0 <= record < num_records``),
        or the one before the damage that lost it (0 before the first)."""
        return max(int(np.searchsorted(self.firsts, record, side="right")) - 1, 0)

    def byte_span(self, start: int, end: int, size: int) -> tuple[int, int] | None:
        """The bytes that hold records ``start:end`` (their chunks, first to last) in a
        file of ``size`` bytes; None when there are none.

        >>> FileIndex.from_counts([0, 100, 250], [4, 4, 2], True).byte_span(5, 9, 300)
        (100, 300)
        """
        if end <= start or not self.num_chunks:
            return None
        first, last = self.chunk_of(start), self.chunk_of(end - 1)
        stop = int(self.offsets[last + 1]) if last + 1 < self.num_chunks else size
        return int(self.offsets[first]), stop

    def chunk_at(self, offset: int) -> int | None:
        """The number of the chunk at byte ``offset``, if the index lists one there."""
        return self._by_offset.get(offset)

    def first_record_at(self, offset: int) -> int | None:
        """The number of the first record of the chunk at byte ``offset``, if one is there."""
        k = self._by_offset.get(offset)
        return None if k is None else int(self.firsts[k])

    def count_at(self, offset: int) -> int | None:
        """The record count of the chunk at byte ``offset``, if one is there."""
        k = self._by_offset.get(offset)
        return None if k is None else int(self.counts[k])


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
    records than its file can hold; but no checksum covers them, so an index of headers
    is not trusted (:attr:`FileIndex.proven` is 0) until something vouches for it
    (:meth:`FileIndex.settle`). One made by reading the file counts the records it read:
    trusted up to damage that lost an unknown number of them. Damage raises, or with
    ``on_corrupt="skip"`` is left out of the index with a
    :class:`~recprep.errors.CorruptDataWarning` (handed to ``on_skip`` too), the records
    it lost (when told) keeping their places.
    """
    skipped: list[CorruptDataWarning] = []

    def note(warning: CorruptDataWarning) -> None:
        skipped.append(warning)
        if on_skip is not None:
            on_skip(warning)

    file.seek(0)
    found = container.scan_chunks(file, path=path, max_chunk_bytes=max_chunk_bytes,
                                  on_corrupt=on_corrupt, on_skip=note)
    trusted = found is None  # counts read, not claimed by headers
    if found is None:
        file.seek(0)
        offsets: list[int] = []
        counts: list[int] = []
        for chunk in container.read_chunks(
            file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
            on_skip=note,
        ):
            offsets.append(chunk.offset)
            counts.append(len(chunk.records))
        found = offsets, counts
    offsets, counts = found
    lost = [(len(offsets) if w.offset is None else bisect.bisect_left(offsets, w.offset),
             w.records_lost) for w in skipped]
    # headers are hopped to seek by (untrusted); a file read through is read from its start
    return FileIndex.from_counts(offsets, counts, not trusted, trusted=trusted, lost=lost)
