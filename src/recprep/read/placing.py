"""Reading a file's records ``start:end`` (or all of it), each chunk placed at its
proven record number.

With a chunk index (:class:`~recprep.containers.fileindex.FileIndex`), records
``start:end`` are read by seeking straight to the chunk that holds ``start``: earlier
chunks are never read or decompressed, which is what makes ElasticDL-style tasks cheap. A
file without a seekable index is read from its start, skipping the records before
``start``.

**Record numbers are proven, never assumed.** Reading checks every chunk against the
index: where it is, what it holds, that it follows the one before. Beyond what an
untrusted index has proven (see :mod:`recprep.containers.fileindex`), reading walks on
from the last proven chunk, checking each chunk's count on the way, so a count that lies
raises instead of renumbering the records after it.

With ``on_corrupt="skip"``, :func:`read_range_chunks` places every chunk it yields at its
proven number and hands out a :class:`~recprep.containers.base.Gap` for the records lost
in between; records whose numbers can't be proven after damage are left out (and said
to be) rather than handed out under another number.

Example
-------
>>> import io
>>> from recprep.containers import get_format
>>> from recprep.containers.fileindex import build_index
>>> fmt, buf = get_format("recordio"), io.BytesIO()
>>> w = fmt.writer(buf, "none", chunk_bytes=2)           # one record per chunk here
>>> for r in (b"aa", b"bb", b"cc", b"dd"):
...     w.write(r)
>>> w.close()
>>> index = build_index(buf, fmt, path="mem")
>>> [list(c.records) for c, _ in read_range_chunks(buf, fmt, index, 1, 3, path="mem")]
[[b'bb'], [b'cc']]
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import BinaryIO

import numpy as np

from ..containers import DEFAULT_MAX_CHUNK_BYTES, Chunk, Format, Gap
from ..containers.base import OnSkip, report_skip
from ..containers.fileindex import FileIndex
from ..containers.record_index import RecordIndex
from ..errors import CorruptDataError, CorruptDataWarning

__all__ = ["place_chunks", "read_range_chunks"]


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
