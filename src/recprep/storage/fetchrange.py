"""A byte range of a shard being fetched (:mod:`recprep.storage.fetch`): the pieces it
arrived in, kept as they are, and any span of them handed out with one copy at most.

>>> r = FetchRange(None, 0, 6, demand=False)
>>> r.add(b"abc"); r.add(b"def")
>>> r.slice(1, 5), r.slice(3, 6), r.filled
(b'bcde', b'def', 6)
>>> out = bytearray(4); r.copy_into(1, memoryview(out)), bytes(out)
(4, b'bcde')
"""

from __future__ import annotations

import bisect
from collections.abc import Iterator
from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from .rangedfile import RangedFile

__all__ = ["FetchRange"]


class FetchRange:
    """Bytes ``[start, end)`` of one file, kept as the pieces in which they arrive (no
    buffer of the range's size is allocated up front: a range costs what has arrived)."""

    __slots__ = ("file", "start", "end", "pieces", "offsets", "filled", "error", "done",
                 "demand")

    def __init__(self, file: RangedFile, start: int, end: int, demand: bool) -> None:
        self.file = file
        self.start = start
        self.end = end
        self.pieces: list[bytes] = []
        self.offsets: list[int] = []  # where each piece starts, from ``start``
        self.filled = 0  # bytes received, from start
        self.error: BaseException | None = None
        self.done = False
        self.demand = demand

    def add(self, piece: bytes) -> None:
        """Keep ``piece``, the next bytes of the range."""
        self.offsets.append(self.filled)
        self.pieces.append(piece)
        self.filled += len(piece)

    def slice(self, begin: int, stop: int) -> bytes:
        """Bytes ``[begin, stop)`` of the range (offsets from its start; arrived), one
        copy at most: none when they are one whole piece."""
        views = list(self._views(begin, stop))
        if len(views) == 1:
            first = cast(bytes, views[0].obj)  # its piece
            return first if len(views[0]) == len(first) else bytes(views[0])
        return b"".join(views)

    def copy_into(self, begin: int, out: memoryview) -> int:
        """Copy bytes from ``begin`` on (an offset from the range's start; arrived) into
        ``out``, as many as fit and have arrived, piece by piece: how many were copied."""
        got = 0
        for view in self._views(begin, begin + min(len(out), self.filled - begin)):
            out[got:got + len(view)] = view
            got += len(view)
        return got

    def _views(self, begin: int, stop: int) -> Iterator[memoryview]:
        """Views of the pieces that hold bytes ``[begin, stop)`` (arrived), in order."""
        k = bisect.bisect_right(self.offsets, begin) - 1
        at = begin - self.offsets[k]
        while begin < stop:
            piece = self.pieces[k]
            take = min(len(piece) - at, stop - begin)
            yield memoryview(piece)[at:at + take]
            begin += take
            k, at = k + 1, 0
