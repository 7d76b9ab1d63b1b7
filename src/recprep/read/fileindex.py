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

**Record numbers are proven, never assumed.** A chunk header's record count is covered
by no checksum, so an index built from headers alone makes claims nothing vouches for.
An index is *trusted* when something does: the set's manifest binds the side file it came
from, or the file's header counts add up to the count its manifest lists. An untrusted
index (a file without a manifest) proves its chunks' first record numbers one after the
other as reading walks through them (:attr:`FileIndex.proven`): a range beyond what is
proven is read from the last proven chunk on, checking each chunk's count on the way, so
a count that lies raises instead of renumbering the records after it.

With ``on_corrupt="skip"``, :func:`read_range_chunks` places every chunk it yields at its
proven number and hands out a :class:`~recprep.containers.base.Gap` for the records lost
in between; records whose numbers can't be proven after damage are left out (and said
to be) rather than handed out under another number.

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

import bisect
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import BinaryIO

import numpy as np

from ..containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format, Gap
from ..containers.base import OnSkip, report_skip
from ..containers.record_index import RecordIndex
from ..errors import CorruptDataError, CorruptDataWarning, RecordRangeError

__all__ = [
    "FileIndex",
    "RecordRangeError",
    "build_index",
    "place_chunks",
    "read_range_chunks",
]


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
    anchors: Callable[[], Iterable[FileIndex | None]] | None = None,
) -> Iterator[tuple[Chunk, int] | Gap]:
    """The chunks holding records ``start:end`` of ``file``, cut to that range, each with
    how many records were cut off its front (to locate a record of the chunk); with
    ``on_corrupt="skip"``, a :class:`~recprep.containers.base.Gap` for each run of those
    records lost to damage, in its place, so that the chunks and gaps together hold
    exactly ``end - start`` records.

    With a seekable index, reading starts at the chunk that holds ``start`` (or at the
    last chunk whose number is proven before it, see the module docs); chunks before it
    are never read, and each chunk read must be where the index says, hold the records it
    says (a record index side file: each record must start where it says) and have the
    number it says. Otherwise the file is read from its start. A file that ends before
    ``end`` (it changed since it was indexed, or its manifest is wrong), or that
    disagrees with its index, raises :class:`~recprep.errors.CorruptDataError`; with
    ``on_corrupt="skip"`` the records concerned are left out with a
    :class:`~recprep.errors.CorruptDataWarning` (handed to ``on_skip`` too). A record is
    never yielded under a number it doesn't have. ``anchors()``: after damage that moved
    the chunks after it, an index of the file as it is now (trusted, or None), to find
    their numbers by.
    """
    if start >= end:
        return
    walk = _Walk(index, start, end, path=path, on_corrupt=on_corrupt, on_skip=on_skip,
                 anchors=anchors)
    while True:
        file.seek(walk.seek())
        chunks = container.read_chunks(
            file, path=path, max_chunk_bytes=max_chunk_bytes, on_corrupt=on_corrupt,
            on_skip=walk.note, compressor=index.compressor,
        )
        try:
            yield from walk.run(chunks, kind=container.record_index)
            return
        except _Reseek:  # the index sent reading into damage: again, by the file's own
            continue


class _Reseek(Exception):
    """Internal: the walk found a better index; seek again from its chunk."""


class _Lazy:
    """The trusted indexes ``make()`` gives (an iterable, made when first needed), each
    fetched once, and iterable again from the first."""

    def __init__(self, make: Callable[[], Iterable[FileIndex | None]]) -> None:
        self._make: Callable[[], Iterable[FileIndex | None]] | None = make
        self._rest: Iterator[FileIndex | None] | None = None
        self._had: list[FileIndex] = []

    def __iter__(self) -> Iterator[FileIndex]:
        yield from list(self._had)
        if self._make is not None:
            self._rest, self._make = iter(self._make()), None
        for index in self._rest or ():
            if index is not None and index.trusted:
                self._had.append(index)
                yield index


def place_chunks(
    read: Callable[[OnSkip], Iterator[Chunk]],
    *,
    path: str,
    count: int | None,
    count_of: Callable[[], int | None],
    anchors: Callable[[], Iterable[FileIndex | None]],
    on_corrupt: str,
    on_skip: OnSkip | None,
    kind: type[RecordIndex] | None = None,
) -> Iterator[tuple[Chunk, int] | Gap]:
    """A whole file read front to back (``read(on_skip)`` gives its chunks from its
    first byte, handing what it skips to ``on_skip``), placed as
    :func:`read_range_chunks` places a range: from record 0 to the file's count —
    ``count`` when it is known cheaply (a manifest's), else ``count_of()``, asked for
    only when damage must be accounted for. A file that holds another number of records
    than ``count`` is damage. After damage whose loss is not known, ``anchors()`` gives
    an index of the file as it is now (if a trusted one can be had) whose chunk offsets
    tell where reading is. ``kind``: the format's record index, if it keeps one.
    """
    walk = _Walk(None, 0, count, path=path, on_corrupt=on_corrupt, on_skip=on_skip,
                 whole=True, count_of=count_of, anchors=anchors)
    return walk.run(read(walk.note), kind=kind)


class _Walk:
    """Chunks read in file order, placed at their proven record numbers (see
    :func:`read_range_chunks`).

    ``pos`` is the number of the next record read, while it is proven: from where the
    walk started (a proven chunk of the index, or the file's start) through sound chunks
    and skips that say exactly what they lost. A skip that doesn't know (damage found by
    searching for the next chunk) makes it unknown until a trusted index claim proves
    where reading is again; chunks read meanwhile are left out. ``emitted``: records
    ``start:emitted`` are accounted for, handed out or lost. ``whole``: the whole file
    is read, to its end, and must hold ``end`` records; else reading stops at ``end``."""

    def __init__(
        self, index: FileIndex | None, start: int, end: int | None, *, path: str,
        on_corrupt: str, on_skip: OnSkip | None, whole: bool = False,
        count_of: Callable[[], int | None] | None = None,
        anchors: Callable[[], Iterable[FileIndex | None]] | None = None,
    ) -> None:
        self.index, self.start, self._end, self.whole = index, start, end, whole
        self.path, self.on_corrupt, self.on_skip = path, on_corrupt, on_skip
        self._count_of = count_of
        #: other indexes of the file, trusted ones, asked for one by one after damage
        self._anchors = None if anchors is None else _Lazy(anchors)
        self.pos: int | None = 0
        self.emitted = start
        self.events: list[CorruptDataWarning] = []  # skips since the last chunk placed
        self.unplaced = 0  # records read since then that could not be placed
        self.damage_at: int | None = None  # where the first of those skips was
        self.seeking = False  # nothing read yet since a seek into the file
        self.overflow = False  # a whole file holds more records than counted
        self.reseeked = False

    def seek(self) -> int:
        """Where to start reading: the chunk of the index that holds ``start``, or the
        last one before it whose number is proven (the file's start without one)."""
        index, self.pos, self.seeking = self.index, 0, False
        if index is None or not (index.seekable and index.num_chunks and index.proven):
            return 0
        k = min(index.chunk_of(self.start), index.num_chunks - 1, index.proven - 1)
        self.pos, offset = int(index.firsts[k]), int(index.offsets[k])
        self.seeking = offset > 0
        return offset

    def note(self, warning: CorruptDataWarning) -> None:
        """What the container skipped (its warning is already out)."""
        if not self.events and self.damage_at is None:
            self.damage_at = warning.offset
        self.events.append(warning)
        if self.on_skip is not None:
            self.on_skip(warning)

    def end(self) -> int | None:
        """Where the walk's records end: the range's end, or the file's count (asked
        for now if it wasn't known)."""
        if self._end is None and self._count_of is not None:
            self._end, self._count_of = self._count_of(), None
        return self._end

    # -- the walk --------------------------------------------------------------------

    def run(self, chunks: Iterator[Chunk], kind: type[RecordIndex] | None
            ) -> Iterator[tuple[Chunk, int] | Gap]:
        try:
            for chunk in chunks:
                first = self.place(chunk, kind)
                if first is None:
                    self.unplaced += len(chunk.records)
                    continue
                yield from self.gap_until(first)
                out = self.cut(chunk, first)
                if out is not None:
                    yield out
                if self.overflow:
                    self.say(f"the file holds more records than its manifest (or index) "
                             f"counts, {self._end}: those past {self._end} are left out",
                             chunk.offset, None)
                    return
                if not self.whole and self.pos is not None and self.pos >= self._end:  # type: ignore[operator]
                    return
            self.reseek()
            yield from self.finish()
        except CorruptDataError as err:
            if self.on_corrupt == "raise":
                raise
            yield from self.lose_rest(err.detail, err.offset)

    def reseek(self) -> None:
        """Nothing sound where the index sent reading (it was damage): with
        ``on_corrupt="skip"``, raise _Reseek with the file's own headers as the index
        (once, when they are trusted), so that reading starts again where the records
        really are."""
        if self.seeking and self.events and self._anchors and self.on_corrupt == "skip" and (
            not self.reseeked
        ):
            self.reseeked = True
            for other in self._anchors:
                if other is not self.index and not np.array_equal(other.offsets,
                                                                  self.index.offsets):  # type: ignore[union-attr]
                    self.index, self.events, self.damage_at = other, [], None
                    self.seeking = False
                    raise _Reseek
        self.seeking = False

    def place(self, chunk: Chunk, kind: type[RecordIndex] | None) -> int | None:
        """The number of ``chunk``'s first record, or None when it can't be proven."""
        n = len(chunk.records)
        events, running = self.events, self.pos
        if events and running is not None:
            lost = [w.records_lost for w in events]
            running = None if None in lost else running + sum(lost)  # type: ignore[arg-type]
        self.reseek()
        try:
            claim, proven = self.trusted_claim(chunk, n, kind, running)
        except CorruptDataError as err:  # the index is not the file's
            if self.on_corrupt == "raise" or self._anchors is None:
                raise
            self.say(f"{err.detail}; finding the chunks' numbers from their headers "
                     "instead", err.offset, 0)
            claim, proven = self.reanchor(chunk, n, kind, running)
        if running is None and not (claim is not None and proven) and self._anchors:
            claim, proven = self.reanchor(chunk, n, kind, running)
        if claim is not None and proven:
            return self.placed(claim, n)
        if running is None:
            return None
        if claim is not None:
            if claim != running:
                raise CorruptDataError(
                    f"the chunk headers put this chunk's first record at number {claim}, "
                    f"but {running} records come before it: a chunk header's record count "
                    "is wrong (damaged)", path=self.path, offset=chunk.offset)
            index = self.index
            assert index is not None
            k = index.chunk_at(chunk.offset)
            if not events and k is not None and k == index.proven:
                index.proven = k + 1  # one more chunk's number proven by reading
        return self.placed(running, n)

    def trusted_claim(self, chunk: Chunk, n: int, kind: type[RecordIndex] | None,
                      running: int | None) -> tuple[int | None, bool]:
        """:meth:`claim` of the walk's index, which a proven claim must agree with
        where reading knows the number too."""
        claim, proven = self.claim(chunk, n, kind, self.index, running)
        if claim is not None and proven and running is not None and running != claim and (
            not self.events
        ):
            raise CorruptDataError(
                f"the chunk index puts this chunk's first record at number {claim}, but "
                f"{running} records come before it in the file: the index is not the "
                "file's (forged, or of another file)", path=self.path, offset=chunk.offset)
        return claim, proven

    def reanchor(self, chunk: Chunk, n: int, kind: type[RecordIndex] | None,
                 running: int | None) -> tuple[int | None, bool]:
        """The first of the other trusted indexes (``anchors()``) that places ``chunk``,
        made the walk's index, and its claim; ``(None, False)`` when none does."""
        mine = self.index
        for other in self._anchors or ():
            if other is mine or (mine is not None and np.array_equal(other.offsets,
                                                                     mine.offsets)):
                continue  # the same claims again
            self.index = other
            try:
                claim, proven = self.trusted_claim(chunk, n, kind, running)
            except CorruptDataError:
                continue  # not this file's either
            if claim is not None and proven:
                return claim, proven
        self.index = mine
        return None, False

    def claim(self, chunk: Chunk, n: int, kind: type[RecordIndex] | None,
              index: FileIndex | None, running: int | None) -> tuple[int | None, bool]:
        """What ``index`` says ``chunk``'s first record number is, and whether that is
        proven; ``(None, False)`` when it says nothing. Raises when it can't be the
        file's index."""
        if index is None or not index.seekable:
            return None, False
        lost_track = running is None or bool(self.events)  # resynchronised inside damage
        if index.records is not None:  # a record index: every record where it says
            assert kind is not None
            k = int(np.searchsorted(index.records, chunk.offset))
            if lost_track and (k >= len(index.records) or index.records[k] != chunk.offset):
                return None, False
            return kind.check(index.records, chunk.offset, chunk.records, self.path), True
        k_at = index.chunk_at(chunk.offset)
        if k_at is None:
            if lost_track:
                return None, False
            raise CorruptDataError(
                "the file has a chunk here, its chunk index lists none: the index is not "
                "the file's (forged, or of another version of it)",
                path=self.path, offset=chunk.offset)
        expected = int(index.firsts[k_at + 1] - index.firsts[k_at])
        if expected != n:
            raise CorruptDataError(
                f"the chunk holds {n} records, its index says {expected} (the file changed "
                "after it was indexed, or the index is not the file's)",
                path=self.path, offset=chunk.offset)
        return int(index.firsts[k_at]), k_at < index.proven

    def placed(self, first: int, n: int) -> int:
        self.pos = first + n
        return first

    def cut(self, chunk: Chunk, first: int) -> tuple[Chunk, int] | None:
        """``chunk`` cut to the range (None when none of it is in it)."""
        n = len(chunk.records)
        end = self._end  # a whole file's count only if known: never sized here
        if self.whole and end is not None and first + n > end:
            if self.on_corrupt == "raise":
                raise CorruptDataError(
                    f"the file holds more records than its manifest (or index) counts, "
                    f"{end}: the count is wrong, or the file is not the one counted",
                    path=self.path, offset=chunk.offset)
            self.overflow = True  # what the count holds is handed out, the rest left out
        lo = max(self.emitted - first, 0)  # never a record accounted for already
        hi = n if end is None else min(end - first, n)
        if lo >= hi:
            return None
        self.emitted = max(self.emitted, first + hi)
        records = chunk.records if (lo, hi) == (0, n) else chunk.records[lo:hi]
        return Chunk(chunk.offset, records), lo

    # -- what was lost ---------------------------------------------------------------

    def gap_until(self, first: int) -> Iterator[Gap]:
        """The records ``emitted:first`` lost (within the range), as a Gap; said, unless
        the skips since the last chunk placed said exactly that many."""
        end = self.end()
        stop = first if end is None else min(first, end)
        events, self.events = self.events, []
        unplaced, self.unplaced = self.unplaced, 0
        at, self.damage_at = self.damage_at, None
        if stop <= self.emitted:
            return
        lost = stop - self.emitted
        told = [w.records_lost for w in events]
        if unplaced or None in told or sum(told) != lost:  # type: ignore[arg-type]
            self.say(f"records {self.emitted}:{stop} of the file are left out: after the "
                     "damage their numbers can't be proven", at, lost)
        self.emitted = stop
        yield Gap(lost)

    def lose_rest(self, detail: str, offset: int | None) -> Iterator[Gap]:
        """Everything not yet accounted for, lost (said, with why)."""
        end = self.end()
        self.events, self.unplaced = [], 0
        if end is None or end <= self.emitted:
            self.say(f"{detail}; the rest of the file is left out", offset, None)
            return
        lost = end - self.emitted
        self.say(f"{detail}; records {self.emitted}:{end} of the file are left out",
                 offset, lost)
        self.emitted = end
        yield Gap(lost)

    def finish(self) -> Iterator[Gap]:
        """At the end of the file: what it should still have held, lost."""
        damaged = bool(self.events or self.unplaced)
        end = self.end() if damaged or not self.whole else self._end
        if end is None or self.emitted >= end:
            return
        if not damaged and self.pos is not None:
            detail = (f"the file holds {self.pos} records, but its manifest (or index) "
                      f"counts {end}: the file is cut short, or the count is wrong"
                      if self.whole else
                      f"the file ends after record {self.pos}, but records up to {end} "
                      "were expected (it changed after it was indexed, or its manifest "
                      "is wrong)")
            if self.on_corrupt == "raise":
                raise CorruptDataError(detail, path=self.path)
            self.say(detail, None, end - self.emitted)
            yield Gap(end - self.emitted)
            self.emitted = end
            return
        yield from self.gap_until(end)

    def say(self, detail: str, offset: int | None, lost: int | None) -> None:
        report_skip(self.on_skip, detail, path=self.path, offset=offset, records_lost=lost)
