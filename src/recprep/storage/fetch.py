"""Streaming reads from object stores: many range requests in flight, bounded memory.

A reader of a set on S3, GCS, Azure or HTTP opens each shard as a :class:`RangedFile`
of one :class:`Fetcher` (per reader). A ranged file plans the bytes its pass will read
(``span``: a whole shard, or the chunks of a rank's or task's records) as ranges of
``range_bytes`` on a grid aligned to the file's start, and the fetcher keeps ranges of
all open files in flight at once — across shards and within one — on the filesystem's
event loop (:mod:`recprep.storage.rangeget` makes the requests):

* **what comes first**: a read that waits, whatever the budget; then the open file with
  the fewest bytes fetched ahead of its reader (a heap: shards read round-robin move
  together). Until the first bytes of a pass arrive, each file has its first range in
  flight and no more: the first chunks have the link to themselves;
* **memory is bounded**: bytes in flight plus fetched and not yet read stay within
  ``budget_bytes`` (a read that waits may add one range more), let go as soon as the
  reader has passed them; a range holds the pieces it arrived in (S3 streams them), and
  a reader takes them as they come: the first instance waits one round trip plus its
  own chunk;
* **the concurrency adapts**: requests in flight start at ``initial_requests`` and grow
  while the bytes per second grow with them, up to ``max_requests``; a store that
  throttles (503 SlowDown, 429) halves them (:class:`~recprep.errors.ThrottledWarning`
  says so once per pass);
* **failures are retried where they stopped**: 5xx, throttling, dropped connections,
  short bodies and silent stores are retried with exponential backoff and full jitter,
  from the first byte not yet received; a range that makes no progress for ``deadline``
  seconds fails the read with :class:`~recprep.errors.StoreUnavailableError` naming the
  shard, the byte range and the last status. A 412 on a pinned ETag raises
  :class:`ObjectChangedError`.

Nothing here checks the bytes: every chunk still passes its CRC in the container, and a
shard read whole its CRC-32C against the manifest (:mod:`recprep.read.committed`).

Example
-------
>>> import fsspec
>>> fs = fsspec.filesystem("memory")
>>> fs.pipe_file("/doc/fetch/x", bytes(range(256)) * 40)
>>> fetcher = Fetcher(fs, FetchOptions(range_bytes=4096, initial_requests=2))
>>> with fetcher.open("/doc/fetch/x", size=10240, span=(0, 10240)) as f:
...     head, rest = f.read(3), f.read()
>>> head, len(rest), fetcher.stats().requests, fetcher.stats().bytes
(b'\\x00\\x01\\x02', 10237, 3, 10240)
>>> fetcher.close()
"""

from __future__ import annotations

import asyncio
import heapq
import itertools
import os
import random
import threading
import time
import weakref
from collections.abc import Callable, Sequence
from dataclasses import fields
from typing import Any

from ..errors import StoreUnavailableError, ThrottledWarning, warn
from .fetchoptions import Concurrency, FetchOptions, FetchStats, streams_ranges
from .fetchrange import FetchRange
from .fs import display, in_this_process
from .rangedfile import RangedFile
from .rangeget import ObjectChangedError, RangeGetter, failure_of, range_getter, status_of

__all__ = ["FetchOptions", "FetchStats", "Fetcher", "ObjectChangedError", "RangedFile",
           "streams_ranges"]


_LIVE: weakref.WeakSet[Fetcher] = weakref.WeakSet()
_ZERO = FetchStats()
_TALLIED = tuple(f.name for f in fields(FetchStats) if f.name != "concurrency")


def _forget_after_fork() -> None:
    """In a forked child (a DataLoader worker): the parent's event loop, connections and
    transfers are not there; each fetcher starts afresh, with counts of its own."""
    for fetcher in list(_LIVE):  # no filesystem made here: fsspec's own reset comes later
        fetcher.__init__(fetcher._fs, fetcher.options)  # type: ignore[misc]


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class Fetcher:
    """The range requests of one reader's open shards: see the module docstring.

    Parameters
    ----------
    fs
        The filesystem (its getter: :func:`~recprep.storage.rangeget.range_getter`).
    options
        :class:`FetchOptions`.
    """

    def __init__(self, fs: Any, options: FetchOptions | None = None) -> None:
        self._fs = fs
        self.options = options or FetchOptions()
        self._getter: RangeGetter | None = None
        self._lock = threading.Lock()  # each open file waits on a condition of this lock
        self._files: dict[int, RangedFile] = {}
        #: files with planned bytes left, least fetched ahead first (a lazy heap of
        #: ``(bytes ahead, order opened, file)``: entries that no longer hold are skipped)
        self._queue: list[tuple[int, int, RangedFile]] = []
        self._opened = itertools.count()
        self._held = 0  # bytes reserved: in flight plus fetched and not yet read
        self._in_flight = 0
        self._concurrency = Concurrency(self.options)
        #: the counts (:class:`FetchStats`' fields but ``concurrency``), added to in place
        self._tally: dict[str, float] = dict.fromkeys(_TALLIED, 0)
        self._throttled_warned = 0
        self._closed = False
        self._expected: dict[tuple[Any, ...], RangedFile] = {}  # opened ahead, not yet claimed
        #: whether bytes arrived since the pass began: until then a file gets its first
        #: range only (the first chunks don't share the link with second ranges)
        self._flowing = False
        _LIVE.add(self)

    @property
    def fs(self) -> Any:
        """The filesystem (made again in a forked process, when first used there)."""
        self._fs = in_this_process(self._fs)
        return self._fs

    def __getstate__(self) -> dict[str, Any]:
        return {"fs": self._fs, "options": self.options}  # a fresh fetcher where it lands

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__init__(state["fs"], state["options"])  # type: ignore[misc]

    def open(self, path: str, *, size: int | None = None, etag: str | None = None,
             span: tuple[int, int] | None = None,
             on_bytes: Callable[[int, bytes], None] | None = None) -> RangedFile:
        """``path`` as a file whose reads are fetched ahead. ``size`` (else one request
        to learn it), ``etag`` (pins every range: ``If-Match``) and ``span`` (the bytes
        the pass will read; else from the first read to the end). ``on_bytes(offset,
        data)`` is called with each piece as it arrives, in order within a range, on
        the fetcher's event loop (a cache fills from it: keep it short, and don't raise)."""
        with self._lock:
            ahead = self._expected.pop((path, size, etag, span), None)
        if ahead is not None and on_bytes is None:
            return ahead
        if ahead is not None:
            ahead.close()
        if size is None:
            size = int(self.fs.size(path))
        file = RangedFile(self, path, size, etag, span)
        file.on_bytes = on_bytes
        with self._lock:
            self._files[id(file)] = file
            self._offer(file)
            self._pump()
        return file

    def expect(self, files: Sequence[tuple[str, int, str | None, tuple[int, int] | None]]
               ) -> None:
        """Start fetching files a pass will open soon, each ``(path, size, etag, span)``
        (the shards of a set read round-robin, opened one after another): their first
        ranges are in flight by then, shared out among them. :meth:`open` with the same
        arguments takes one; :meth:`drop_expected` lets go of those never taken."""
        with self._lock:
            self._flowing = False  # a pass begins: its first ranges go first
            for key in files:
                if key in self._expected or self._closed:
                    continue
                self._expected[key] = file = RangedFile(self, *key)
                self._files[id(file)] = file
                self._offer(file)
            self._pump()

    def drop_expected(self) -> None:
        """Close the files :meth:`expect` opened that no pass took."""
        with self._lock:
            files, self._expected = list(self._expected.values()), {}
        for file in files:
            file.close()

    def stats(self) -> FetchStats:
        """The counts so far (a snapshot)."""
        with self._lock:
            return self._snapshot()

    def _snapshot(self) -> FetchStats:
        tally = self._tally
        return FetchStats(**{k: type(getattr(_ZERO, k))(v) for k, v in tally.items()},
                          concurrency=self._concurrency.limit)

    def warn_throttled(self, where: str) -> None:
        """Say once, with the counts, that the store pushed back since the last call."""
        with self._lock:
            counts = self._snapshot()
            new = counts.throttled - self._throttled_warned
            self._throttled_warned = counts.throttled
            limit = self._concurrency.limit
        if new:
            warn(ThrottledWarning(where, new, counts.retries, limit))

    def close(self) -> None:
        """Stop fetching (open files' reads fail after this) and let go of connections."""
        with self._lock:
            self._closed = True
            files = list(self._files.values())
        for file in files:
            file.close()
        if self._getter is not None:
            self._getter.close()
            self._getter = None

    # -- scheduling (called with the lock held) -------------------------------------------

    def _count(self, **added: int | float) -> None:
        tally = self._tally
        for key, value in added.items():
            tally[key] += value

    def _reserve(self, file: RangedFile, start: int, end: int, demand: bool) -> FetchRange:
        r = FetchRange(file, start, end, demand)
        file._ranges.append(r)
        file._ahead += end - start
        self._offer(file)
        self._held += self._cost(end - start)
        self._in_flight += 1
        tally = self._tally
        tally["peak_bytes"] = max(self._held, tally["peak_bytes"])
        tally["most_in_flight"] = max(self._in_flight, tally["most_in_flight"])
        self._start(r)
        return r

    def _release(self, r: FetchRange) -> None:
        r.file._ahead -= r.end - r.start
        self._offer(r.file)
        self._held -= self._cost(r.end - r.start)
        r.pieces, r.offsets = [], []

    def _offer(self, file: RangedFile) -> None:
        """Queue ``file`` at its bytes ahead, if it has planned bytes left to fetch."""
        if file.closed or file._planned >= file._plan_end:
            return
        queue = self._queue
        if len(queue) > 4 * len(self._files) + 64:  # mostly entries that no longer hold
            queue[:] = [e for e in queue if self._holds(e)]
            heapq.heapify(queue)
        heapq.heappush(queue, (file._ahead, file._order, file))

    def _holds(self, entry: tuple[int, int, RangedFile]) -> bool:
        ahead, _, file = entry
        return (not file.closed and file._planned < file._plan_end and ahead == file._ahead
                and id(file) in self._files)

    def _pump(self) -> None:
        """Start planned ranges while the concurrency and the budget allow: the open file
        with the fewest bytes fetched ahead first (the earliest opened among equals), in
        O(log files) a range."""
        if self._closed:
            return
        budget, queue = self.options.budget_bytes, self._queue
        while self._in_flight < self._concurrency.limit:
            while queue and not self._holds(queue[0]):
                heapq.heappop(queue)
            if not queue:
                return
            ahead, _, best = queue[0]
            if ahead and not self._flowing:
                return  # every file has its first range in flight: the rest once bytes flow
            start, end = best._next_range()
            if self._held + self._cost(end - start) > budget:
                return  # a read that waits still starts its range (see RangedFile)
            heapq.heappop(queue)
            best._planned = end
            self._reserve(best, start, end, demand=False)

    def warm(self) -> None:
        """Make the getter's connection setup start now, in the background (a client of
        its own, on the event loop), so that the first ranges don't wait for it."""
        with self._lock:
            getter = self._getter_now()
        getter.warm()

    def _cost(self, size: int) -> int:
        """What a range of ``size`` bytes holds at most: twice its size where the getter
        hands it over whole (its client's buffer, then the range's), else its size."""
        return size if self._getter_now().streams else 2 * size

    def _getter_now(self) -> RangeGetter:
        if self._getter is None:
            self._getter = range_getter(self.fs, self.options.max_requests)
        return self._getter

    def _start(self, r: FetchRange) -> None:
        getter = self._getter_now()
        asyncio.run_coroutine_threadsafe(self._transfer(r, getter), getter.loop)

    # -- transfers (on the getter's event loop) -------------------------------------------

    async def _transfer(self, r: FetchRange, getter: RangeGetter) -> None:
        """Fill ``r``, retrying from the first byte not yet received."""
        options, path = self.options, r.file.path
        attempts, since, last = 0, time.monotonic(), "no answer"
        try:
            while r.filled < r.end - r.start and not r.file.closed:
                left = options.deadline - (time.monotonic() - since)
                if left <= 0:
                    raise StoreUnavailableError(
                        display(self.fs, path), r.start + r.filled, r.end, last,
                        attempts=attempts, seconds=time.monotonic() - since)
                with self._lock:
                    self._count(requests=1, retries=1 if attempts else 0,
                                resumed=1 if attempts and r.filled else 0)
                attempts += 1
                try:
                    if await self._attempt(r, getter, left):
                        since = time.monotonic()  # progress: the deadline starts again
                    if r.filled < r.end - r.start and not r.file.closed:
                        last = "a body cut short"
                        await self._back_off(attempts)
                except ObjectChangedError:
                    raise
                except Exception as err:
                    kind = failure_of(err)
                    if kind == "final":
                        raise
                    cut_by_deadline = isinstance(err, TimeoutError) and attempts > 1
                    last = last if cut_by_deadline else status_of(err)  # the store's last word
                    if kind == "throttled":
                        with self._lock:
                            self._count(throttled=1)
                            self._concurrency.throttled(time.monotonic())
                    await self._back_off(attempts)
        except BaseException as err:
            r.error = err
            with self._lock:
                self._count(failed=1)
        finally:
            with self._lock:
                r.done = True
                self._in_flight -= 1
                passed = r.file.closed or r.file._pos >= r.end
                if passed and r in r.file._ranges:
                    r.file._ranges.remove(r)
                    self._release(r)
                self._pump()
                r.file._arrived.notify_all()

    async def _attempt(self, r: FetchRange, getter: RangeGetter, left: float) -> bool:
        """One request for what ``r`` still lacks; whether any byte arrived."""
        got = False
        pieces = getter.get(r.file.path, r.start + r.filled, r.end, r.file.etag)
        try:
            while True:
                try:
                    piece = await asyncio.wait_for(anext(pieces), left)
                except StopAsyncIteration:
                    return got
                except asyncio.TimeoutError:
                    raise TimeoutError(f"no answer in {left:.1f} s") from None
                if not piece:
                    continue
                got = True
                with self._lock:
                    if r.file.closed:
                        return got
                    n = min(len(piece), r.end - r.start - r.filled)
                    piece = bytes(piece[:n]) if n < len(piece) or not isinstance(
                        piece, bytes) else piece
                    r.add(piece)
                    self._tally["bytes"] += n
                    if not self._flowing:
                        self._flowing = True
                        self._pump()
                    self._concurrency.received(
                        n, time.monotonic(), self._in_flight >= self._concurrency.limit)
                    r.file._arrived.notify_all()  # its reader, if it waits
                    offset, full = r.start + r.filled - n, r.filled >= r.end - r.start
                if r.file.on_bytes is not None:
                    r.file.on_bytes(offset, piece)
                if full:
                    return got
        finally:
            await pieces.aclose()  # type: ignore[attr-defined]

    async def _back_off(self, attempts: int) -> None:
        ceiling = min(20.0, self.options.backoff * 2 ** (attempts - 1))
        await asyncio.sleep(random.uniform(0, ceiling))
