"""The file a reader reads a shard of an object store through: a :class:`RangedFile` of
a :class:`~recprep.storage.fetch.Fetcher`, whose reads wait for the bytes the fetcher
streams in (``read``/``seek``/``tell``), and whose plan (``span``) tells the fetcher
which ranges to fetch ahead. The fetcher and its files share one lock and its counts:
they are two halves of one mechanism, kept in two modules.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING

from .fetchoptions import MIN_RANGE_BYTES, SMALL_READ_BYTES
from .fetchrange import FetchRange

if TYPE_CHECKING:
    from .fetch import Fetcher

__all__ = ["RangedFile"]


class RangedFile:
    """A read-only file of a :class:`Fetcher` (``read``/``readinto``/``seek``/``tell``):
    its reads wait for the bytes the fetcher streams in. ``size`` is known without a
    request."""

    def __init__(self, fetcher: Fetcher, path: str, size: int, etag: str | None,
                 span: tuple[int, int] | None) -> None:
        self._fetcher = fetcher
        self._order = next(fetcher._opened)
        #: notified (under the fetcher's lock) when bytes of this file arrive or a range
        #: of it ends: its reader waits on it alone
        self._arrived = threading.Condition(fetcher._lock)
        self.path = path
        self.size = size
        self.etag = etag
        self.closed = False
        #: called with each piece that arrives (see :meth:`Fetcher.open`)
        self.on_bytes: Callable[[int, bytes], None] | None = None
        self._pos = 0
        self._ranges: list[FetchRange] = []
        self._ahead = 0  # bytes of this file reserved in the fetcher
        start, end = span if span is not None else (0, 0)
        self._planned = max(0, min(start, size))  # the next planned byte to fetch
        self._plan_end = max(self._planned, min(end, size))

    def _next_range(self) -> tuple[int, int]:
        """The next planned range: to the next multiple of the range size, which halves
        (down to 256 KiB, on the same grid) while the fetcher's open files could not each
        have one range within the budget."""
        fetcher = self._fetcher
        step = fetcher.options.range_bytes
        share = fetcher.options.budget_bytes // max(1, len(fetcher._files))
        while step > MIN_RANGE_BYTES and step > share:
            step //= 2
        start = self._planned
        return start, min(self._plan_end, (start // step + 1) * step)

    def seek(self, offset: int, whence: int = 0) -> int:
        if whence == 1:
            offset += self._pos
        elif whence == 2:
            offset += self.size
        if offset < 0:
            raise ValueError(f"negative seek position {offset}")
        self._pos = offset
        return offset

    def tell(self) -> int:
        return self._pos

    def read(self, size: int = -1) -> bytes:
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.path}")
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        parts = []
        while self._pos < end:
            parts.append(self._read_some(end))
        return b"".join(parts)

    def read1(self, size: int = -1) -> bytes:
        """Up to ``size`` bytes from the position on (all: ``-1``), as many as have
        arrived (waiting for the first of them): b"" at the end. A copy streams through
        these without joining what arrived in pieces."""
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.path}")
        end = self.size if size is None or size < 0 else min(self.size, self._pos + size)
        return self._read_some(end) if self._pos < end else b""

    def readinto(self, buffer: memoryview) -> int:
        """Fill ``buffer`` from the position on (fewer bytes at the end of the file): the
        arrived pieces are copied into it once, not joined into ``bytes`` first."""
        if self.closed:
            raise ValueError(f"I/O operation on closed file {self.path}")
        out = memoryview(buffer).cast("B")
        end = min(self.size, self._pos + len(out))
        start = self._pos
        while self._pos < end:
            with self._fetcher._lock:
                r, pos, stop = self._arrived_at(end)
                r.copy_into(pos - r.start, out[pos - start:stop - start])
                self._advance(stop)
        return end - start if end > start else 0

    def _read_some(self, end: int) -> bytes:
        """Bytes from the position on (toward ``end``), as many as have arrived of the
        range that holds it (waiting for at least one)."""
        with self._fetcher._lock:
            r, pos, stop = self._arrived_at(end)
            data = r.slice(pos - r.start, stop - r.start)
            self._advance(stop)
            return data

    def _arrived_at(self, end: int) -> tuple[FetchRange, int, int]:
        """The range holding the position, the position, and how far toward ``end`` its
        bytes have arrived, waiting for at least one (the fetcher's lock held)."""
        fetcher, pos = self._fetcher, self._pos
        r = self._range_at(pos, end)
        began = None
        while r.start + r.filled <= pos and not r.done:
            began = began or time.monotonic()
            self._arrived.wait()
        if began is not None:
            fetcher._count(waited=time.monotonic() - began)
        if r.start + r.filled <= pos:  # done, and short
            if r.error is not None:
                raise r.error
            raise ConnectionError(f"{self.path}: the fetch stopped at byte {pos}")
        return r, pos, min(end, r.start + r.filled)

    def _advance(self, stop: int) -> None:
        """Move the position to ``stop``, letting passed ranges go (lock held)."""
        self._pos = stop
        self._let_go(stop)

    def _range_at(self, pos: int, end: int) -> FetchRange:
        """The range that holds byte ``pos`` (started now if there is none: a read that
        waits comes before the budget)."""
        for r in self._ranges:
            if r.start <= pos < r.end:
                return r
        fetcher = self._fetcher
        if self._plan_end == 0 and not self._ranges:  # no span: plan from here to the end
            self._planned, self._plan_end = pos, self.size
        if self._planned <= pos < self._plan_end:
            self._planned = pos
            start, stop = self._next_range()
            self._planned = stop
        else:  # outside the plan: a header, a probe
            start = pos
            stop = min(self.size, max(end, pos + SMALL_READ_BYTES),
                       (pos // fetcher.options.range_bytes + 1) * fetcher.options.range_bytes)
            stop = max(stop, min(end, self.size))
        return fetcher._reserve(self, start, stop, demand=True)

    def _let_go(self, pos: int) -> None:
        """Release the ranges the reader has passed (lock held)."""
        passed = [r for r in self._ranges if r.end <= pos and r.done]
        if not passed:
            return
        for r in passed:
            self._ranges.remove(r)
            self._fetcher._release(r)
        self._fetcher._pump()

    def close(self) -> None:
        fetcher = self._fetcher
        with fetcher._lock:
            if self.closed:
                return
            self.closed = True
            for r in [r for r in self._ranges if r.done]:
                self._ranges.remove(r)
                fetcher._release(r)
            fetcher._files.pop(id(self), None)
            fetcher._pump()
            self._arrived.notify_all()

    def __enter__(self) -> RangedFile:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __iter__(self) -> Iterator[bytes]:
        raise TypeError("a RangedFile is read with read(), not by lines")
