"""Prefetching: advance chunk sources in background threads, in order, with bounded memory.

A reader pass is a list of *sources*, one generator per file piece, each yielding the
batches (decoded chunks) of its piece in file order. The consumer takes them either
source after source (a shuffled pass) or interleaved within a group of sources (the
round-robin read of a shard set). :class:`Prefetcher` runs ``num_threads`` threads that
call ``next()`` on sources ahead of the consumer — the I/O, checksums, decompression and
decoding of the next chunks — while the consumer works on the current one.

Guarantees:

* **order is unchanged**: a source is only ever advanced by one thread at a time and its
  batches are queued in the order it yields them, so each source's stream, and therefore
  the consumer's output, is exactly what it would be without threads. An exception from a
  source is raised to the consumer at the same place in its stream.
* **memory is bounded**: at most ``max_ahead`` batches are buffered or being produced
  ahead of the consumer, plus one more when the consumer waits on a source nothing has
  prefetched. By default that is ``2 * num_threads`` plus one per source of the widest
  group: interleaved sources (the shards of a set read round-robin) all need their next
  batch at about the same time. Sources are opened lazily, so a long list of pieces
  costs nothing until its turn comes.
* threads work on the most urgent source: the earliest group first, and within a group
  the source with the fewest records buffered; a source the consumer is waiting on comes
  before everything else, budget or not, so the consumer can never be starved.
* threads don't crowd out the consumer: they compute within a
  :class:`~recprep.read.cpugate.CpuGate` of the cores left when the consumer has one (one
  thread on a two-core machine), and on remote storage they step out of it while they
  wait for a read. Extra threads add requests in flight to slow storage, never runnable
  threads that compete with the training loop for the CPU and the GIL.

With ``num_threads=0`` there are no threads: sources are consumed directly.

Example
-------
>>> sources = [iter([[1, 2], [3]]), iter([[10], [20, 30]])]
>>> with prefetched(sources, groups=[0, 1], num_threads=2) as streams:
...     [batch for stream in streams for batch in stream]
[[1, 2], [3], [10], [20, 30]]
"""

from __future__ import annotations

import heapq
import logging
import threading
from collections import Counter, deque
from collections.abc import Iterator, Sequence, Sized
from contextlib import contextmanager
from typing import Any, Generic, TypeVar

from ..errors import InvalidArgumentError
from .cpugate import CpuGate, usable_cores

__all__ = ["Prefetcher", "check_threads", "prefetched"]

log = logging.getLogger("recprep")

T = TypeVar("T", bound=Sized)  # a batch: its len() balances interleaved sources

_ITEM, _END, _ERROR = range(3)
AHEAD_PER_THREAD = 2


def check_threads(num_threads: Any) -> int:
    """Raise unless ``num_threads`` is a non-negative int; return it."""
    if not isinstance(num_threads, int) or isinstance(num_threads, bool) or num_threads < 0:
        raise InvalidArgumentError(
            f"num_threads must be a non-negative int (0: no background threads), "
            f"got {num_threads!r}"
        )
    return num_threads


def _advance(source: Iterator[Any]) -> tuple[int, Any]:
    try:
        return _ITEM, next(source)
    except StopIteration:
        return _END, None
    except BaseException as err:  # handed to the consumer, raised there in order
        return _ERROR, err


class Prefetcher(Generic[T]):
    """Background threads that advance ``sources`` ahead of the consumer.

    Parameters
    ----------
    sources
        Iterators of batches; each is advanced by at most one thread at a time.
    groups
        A group number per source, non-decreasing in consumption order: lower groups are
        prefetched first. Sources read one after the other get one group each; sources
        read interleaved share one.
    num_threads
        Background threads (at least 1).
    max_ahead
        Batches that may be buffered or in production ahead of the consumer.
    gate
        Held while a thread advances a source (the sources' files step out of it while
        they read). ``None``: a gate of the cores left for threads.
    """

    def __init__(
        self,
        sources: Sequence[Iterator[T]],
        groups: Sequence[int],
        num_threads: int,
        max_ahead: int | None = None,
        gate: CpuGate | None = None,
    ) -> None:
        if num_threads < 1:
            raise InvalidArgumentError(f"a Prefetcher needs a thread, got {num_threads}")
        self._sources = list(sources)
        self._groups = list(groups)
        self.gate = gate or CpuGate(usable_cores() - 1)
        widest = max(Counter(self._groups).values(), default=0)
        self._max_ahead = max_ahead or AHEAD_PER_THREAD * num_threads + widest
        n = len(self._sources)
        self._buffers: list[deque[tuple[int, Any]]] = [deque() for _ in range(n)]
        self._busy = [False] * n
        self._finished = [False] * n
        self._ahead = [0] * n
        self._pending = 0  # batches buffered or in production
        self._demand: int | None = None
        self._closed = False
        self._heap = [(self._key(i), i) for i in range(n)]
        heapq.heapify(self._heap)
        lock = threading.Lock()
        self._work = threading.Condition(lock)  # idle workers wait here
        self._data = threading.Condition(lock)  # the consumer waits here
        self._threads = [
            threading.Thread(target=self._run, name=f"recprep-prefetch-{k}", daemon=True)
            for k in range(num_threads)
        ]
        for thread in self._threads:
            thread.start()

    # -- the workers (called with the lock held) ------------------------------------------

    def _key(self, i: int) -> tuple[int, int, int]:
        return self._groups[i], self._ahead[i], i

    def _ready(self, i: int) -> bool:
        return not self._busy[i] and not self._finished[i]

    def _pick(self) -> int | None:
        wanted = self._demand
        if wanted is not None and self._ready(wanted) and not self._buffers[wanted]:
            return wanted
        if self._pending >= self._max_ahead:
            return None
        heap = self._heap
        while heap:
            key, i = heap[0]
            heapq.heappop(heap)
            if self._ready(i) and key == self._key(i):
                return i
        return None

    def _requeue(self, i: int) -> None:
        if self._ready(i):
            heapq.heappush(self._heap, (self._key(i), i))

    def _run(self) -> None:
        work = self._work
        with work:
            while not self._closed:
                i = self._pick()
                if i is None:
                    work.wait()
                    continue
                self._busy[i] = True
                self._pending += 1
                work.release()
                try:
                    with self.gate:
                        kind, value = _advance(self._sources[i])
                finally:
                    work.acquire()
                self._busy[i] = False
                if kind == _ITEM:
                    self._ahead[i] += len(value)
                else:
                    self._finished[i] = True
                    self._pending -= 1
                self._buffers[i].append((kind, value))
                self._requeue(i)
                if self._demand == i:
                    self._data.notify()

    # -- the consumer -----------------------------------------------------------------------

    def stream(self, i: int) -> Iterator[T]:
        """The batches of source ``i``, in order (call once per source)."""
        buffer = self._buffers[i]
        while True:
            with self._data:
                while not buffer:
                    if self._closed:
                        return
                    self._demand = i
                    self._work.notify()  # a worker, if one is idle, takes it on
                    self._data.wait()
                if self._demand == i:
                    self._demand = None
                kind, value = buffer.popleft()
                if kind == _ITEM:
                    self._pending -= 1
                    self._ahead[i] -= len(value)
                    self._requeue(i)
                    self._work.notify()  # room for one more batch ahead
            if kind == _END:
                return
            if kind == _ERROR:
                raise value
            yield value

    def close(self) -> None:
        """Stop the threads (each finishes the batch it is on) and close the sources."""
        with self._work:
            self._closed = True
            self._work.notify_all()
            self._data.notify_all()
        for thread in self._threads:
            thread.join()
        _close_all(self._sources)


def _close_all(sources: Sequence[Iterator[Any]]) -> None:
    for source in sources:
        close = getattr(source, "close", None)
        if close is None:
            continue
        try:
            close()
        except Exception:  # closing must not hide what ended the pass
            log.warning("recprep: closing a prefetch source failed", exc_info=True)


@contextmanager
def prefetched(
    sources: Sequence[Iterator[T]], groups: Sequence[int], num_threads: int,
    max_ahead: int | None = None, gate: CpuGate | None = None,
) -> Iterator[list[Iterator[T]]]:
    """The streams of ``sources``, prefetched by ``num_threads`` threads (0: none).

    ``gate`` is held while a thread advances a source; pass the one whose
    :meth:`~CpuGate.wrap` the sources' files were opened through.

    The threads stop and the sources are closed when the block ends, also when the
    consumer stops early.
    """
    if num_threads == 0:
        try:
            yield list(sources)
        finally:
            _close_all(sources)
        return
    prefetcher: Prefetcher[T] = Prefetcher(sources, groups, num_threads, max_ahead, gate)
    try:
        yield [prefetcher.stream(i) for i in range(len(sources))]
    finally:
        prefetcher.close()
