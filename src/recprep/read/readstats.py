"""Where a reader's time goes: :class:`ReadStats`, counted as its passes run.

A pass is timed a chunk and a block at a time (``time.perf_counter``), never per
instance:

* **fetching** — getting each chunk: opening its file, reading the bytes (from disk, the
  cache or an object store, waiting for ranges in flight), checking CRCs, decompressing;
* **decoding** — the codec's work on each chunk's records;
* **waiting for data** — the time the consumer's thread spent asking the reader for the
  next block: with ``num_threads=0`` that is fetching, decoding and the reader's own
  bookkeeping; with threads, whatever the threads had not done ahead of it;
* **waiting for the consumer** — from handing out a block until asking for the next one:
  the consumer's own work on the block's instances (a training step, say).

Fetching and decoding are thread-seconds, summed over the threads that did them, so with
``num_threads > 0`` they may add up to more than the pass took. The consumer was
*starved* for the share :attr:`ReadStats.stalled` of its time; the optional
:class:`~recprep.errors.DataStallWarning` (``RecordIO(..., stall_warning=0.5)``) says so,
with a hint (:func:`stall_hint`).

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/readstats", [(i, "x" * i) for i in range(100)], 2, "s")
>>> read = RecordIO("memory://doc/readstats/s-*")
>>> n = sum(1 for _ in read())
>>> stats = read.stats()
>>> stats.instances, stats.passes, stats.chunks, stats.requests
(100, 1, 2, 0)
>>> stats.fetching >= 0 and stats.decoding > 0 and 0 <= stats.stalled <= 1
True
"""

from __future__ import annotations

import operator
import os
import threading
import time
import weakref
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, fields
from typing import Any, NamedTuple

from ..errors import DataStallWarning, InvalidArgumentError, warn
from ..storage.fetchoptions import FetchStats
from .sources import Sources

__all__ = ["PassWatch", "ReadCounter", "ReadStats", "Setup", "StallHint", "StatsOut",
           "check_stall", "stall_hint"]

#: a pass is judged whole when it ends, if the consumer's thread spent this long in it
MIN_STALL_SECONDS = 1.0
#: and, while it runs, over each window of this many seconds (a long epoch warns early)
STALL_WINDOW_SECONDS = 300.0
_WINDOW = f"last {STALL_WINDOW_SECONDS / 60:g} minutes"
#: chunks smaller than this on average (with at least SMALL_CHUNKS_SEEN of them) are small
SMALL_CHUNK_BYTES = 64 << 10
SMALL_CHUNKS_SEEN = 100

_FETCHED = tuple(f.name for f in fields(FetchStats))


@dataclass(frozen=True, eq=False)
class ReadStats(FetchStats):
    """What a reader did so far: :class:`~recprep.FetchStats` (the object store's
    requests, bytes, retries...; zeros for local files) and where its passes' time went.

    ``instances`` handed to the consumer, ``record_bytes`` of the records decoded (the
    records' own bytes, decompressed, without framing), ``chunks`` decoded, ``passes``
    started; seconds ``fetching`` and ``decoding`` (summed over threads),
    ``waiting_for_data`` (the consumer's thread in the reader) and
    ``waiting_for_consumer`` (the consumer's own work between blocks); see
    :mod:`recprep.read.readstats`.

    ``==`` compares what was fetched (the fields of ``FetchStats``): no two passes take
    the same time. ``+`` adds two readers' (or DataLoader workers') figures.

    >>> a = ReadStats(instances=10, waiting_for_data=3.0, waiting_for_consumer=1.0)
    >>> b = a + ReadStats(instances=5, waiting_for_consumer=4.0)
    >>> b.instances, b.elapsed, b.stalled, b == FetchStats()
    (15, 8.0, 0.375, True)
    """

    instances: int = 0
    record_bytes: int = 0
    chunks: int = 0
    passes: int = 0
    fetching: float = 0.0
    decoding: float = 0.0
    waiting_for_data: float = 0.0
    waiting_for_consumer: float = 0.0

    @property
    def elapsed(self) -> float:
        """Seconds the consumer's thread spent in passes: waiting for data or working."""
        return self.waiting_for_data + self.waiting_for_consumer

    @property
    def stalled(self) -> float:
        """The share of :attr:`elapsed` the consumer waited for data (0 before any)."""
        elapsed = self.elapsed
        return self.waiting_for_data / elapsed if elapsed > 0 else 0.0

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, FetchStats):
            return NotImplemented
        return _fetched(self) == _fetched(other)

    def __hash__(self) -> int:
        return hash(_fetched(self))

    def __add__(self, other: FetchStats) -> ReadStats:
        """Two readers' figures together (peaks and limits: the larger)."""
        if not isinstance(other, FetchStats):
            return NotImplemented
        fetched = FetchStats(*_fetched(self)) + FetchStats(*_fetched(other))
        mine = {f.name: getattr(self, f.name) + getattr(other, f.name, 0)
                for f in fields(self) if f.name not in _FETCHED}
        return ReadStats(**asdict(fetched), **mine)

    def as_dict(self) -> dict[str, Any]:
        """Every field, with :attr:`elapsed` and :attr:`stalled` (JSON-ready)."""
        return {**asdict(self), "elapsed": self.elapsed, "stalled": self.stalled}


def _fetched(stats: FetchStats) -> tuple[Any, ...]:
    return tuple(getattr(stats, name) for name in _FETCHED)


def check_stall(value: Any) -> float | None:
    """``stall_warning`` checked: None, or a fraction strictly between 0 and 1."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < 1:
        raise InvalidArgumentError(
            "stall_warning must be None (no warning) or the share of a pass the consumer "
            f"may wait for data before a DataStallWarning, between 0 and 1 (0.5: most of "
            f"it), got {value!r}")
    return float(value)


class Setup(NamedTuple):
    """What a hint needs to know of a reader: what it reads (``where``), its prefetch
    threads, whether it streams from an object store, whether it caches, and how many
    files a pass reads."""

    where: str
    num_threads: int
    remote: bool
    cached: bool
    files: int = 1


class StallHint(NamedTuple):
    """A hint: its rule's name (``chunks``, ``workers``, ``prefetch``, ``cache``,
    ``nothing``) and what to do, in words."""

    rule: str
    text: str


def stall_hint(stats: ReadStats, setup: Setup) -> StallHint:
    """What would most likely make reading faster, by the first rule that holds:

    ========  =========================================================================
    rule      when
    ========  =========================================================================
    nothing   no chunk was decoded
    chunks    at least 100 chunks, of less than 64 KiB of records on average, and at
              least 4 per file a pass reads (not a set of small files)
    workers   decoding took at least as long as fetching (decoding holds the GIL:
              threads don't help, processes do)
    prefetch  fetching took longer, and the reader has no prefetch threads
    cache     fetching took longer, from an object store, without a local cache
    workers   fetching took longer, with threads (and a cache, or local files)
    ========  =========================================================================

    >>> setup = Setup("out/train", num_threads=0, remote=False, cached=False, files=4)
    >>> stall_hint(ReadStats(chunks=9, record_bytes=9 << 20, fetching=3, decoding=1),
    ...            setup).rule
    'prefetch'
    >>> stall_hint(ReadStats(chunks=9, record_bytes=9 << 20, fetching=1, decoding=3),
    ...            setup).rule
    'workers'
    """
    work = stats.fetching + stats.decoding
    if stats.chunks == 0 or work <= 0:
        return StallHint("nothing", "nothing was read yet")
    average = stats.record_bytes / stats.chunks
    per_file = stats.chunks / max(1, stats.passes) / max(1, setup.files)
    if stats.chunks >= SMALL_CHUNKS_SEEN and average < SMALL_CHUNK_BYTES and per_file >= 4:
        return StallHint("chunks", (
            f"the chunks hold {average / 1024:.1f} KiB of records on average: write bigger "
            "ones (convert(..., chunk_bytes=1 << 20)), for fewer reads and checks per record"))
    decode = f"decoding takes {stats.decoding / work:.0%} of the reader's work"
    fetch = f"fetching takes {stats.fetching / work:.0%} of the reader's work"
    if stats.decoding >= stats.fetching:
        return StallHint("workers", (
            f"{decode}, and holds the GIL: decode in more processes (more DataLoader "
            "workers, num_workers=..., each reads its own part)"))
    if setup.num_threads == 0:
        return StallHint("prefetch", (
            f"{fetch}: read ahead in threads (num_threads=4), so that reading overlaps "
            "the consumer's work"))
    if setup.remote and not setup.cached:
        return StallHint("cache", (
            f"{fetch}, from an object store: keep local copies (cache_dir=...), so that "
            "later epochs read from local disk"))
    return StallHint("workers", (
        f"{fetch}, with {setup.num_threads} prefetch threads: read with more processes "
        "(DataLoader num_workers=...) or more threads (num_threads=...)"))


class ReadCounter:
    """The figures of a reader's passes (and its copies' in this process), added up as
    they go: chunks by :func:`~recprep.read.decoding.decoded` (:meth:`chunk`, from any
    thread), blocks by each pass's :class:`PassWatch` (in the consumer's thread, without
    a lock: its figures join the counter's when the pass ends, and :meth:`stats` adds
    those of the passes still open). Pickled (to a worker process) or inherited by a
    fork, it starts again at zero, like the reader's fetcher.

    ``stall_warning``: see :func:`check_stall`. :meth:`listen` sets a function called
    with no arguments at most every ``every`` seconds as blocks are taken, and when a
    pass ends (a DataLoader worker publishes its figures from it).
    """

    def __init__(self, stall_warning: float | None = None) -> None:
        self.stall_warning = check_stall(stall_warning)
        self._lock = threading.Lock()
        self._sums: dict[str, float] = dict.fromkeys(
            ("instances", "record_bytes", "chunks", "passes", "fetching", "decoding",
             "waiting_for_data", "waiting_for_consumer"), 0)
        self._open: weakref.WeakSet[PassWatch] = weakref.WeakSet()
        self._listener: Callable[[], None] | None = None
        self._every = 0.5
        self._told = 0.0
        _COUNTERS.add(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return ReadCounter, (self.stall_warning,)

    def listen(self, listener: Callable[[], None] | None, every: float = 0.5) -> None:
        """Call ``listener()`` as blocks are taken (at most every ``every`` seconds) and
        when a pass ends; None: stop."""
        self._listener, self._every = listener, every

    def chunk(self, fetching: float, decoding: float, nbytes: int) -> None:
        """A chunk was fetched and decoded in these many seconds; its records' bytes."""
        with self._lock:
            sums = self._sums
            sums["chunks"] += 1
            sums["record_bytes"] += nbytes
            sums["fetching"] += fetching
            sums["decoding"] += decoding

    def stats(self, fetched: FetchStats | None = None) -> ReadStats:
        """The figures so far (passes still open count up to now), with ``fetched``:
        the fetcher's."""
        now = time.perf_counter()
        with self._lock:
            sums = dict(self._sums)
            for watch in list(self._open):
                watch.add_to(sums, now)
        figures: dict[str, Any] = dict(sums)
        for name in ("instances", "record_bytes", "chunks", "passes"):
            figures[name] = int(sums[name])
        return ReadStats(**asdict(fetched or FetchStats()), **figures)

    def watch(self, setup: Callable[[], Setup]) -> PassWatch:
        """A new pass's watch (``setup``: the reader's, asked when a hint is due)."""
        watch = PassWatch(self, setup)
        with self._lock:
            self._sums["passes"] += 1
            self._open.add(watch)
        return watch

    def closed(self, watch: PassWatch) -> None:
        """A pass is over: its figures join the counter's."""
        with self._lock:
            if watch in self._open:
                watch.add_to(self._sums, 0.0)
                self._open.discard(watch)

    def tell(self, now: float, ended: bool = False) -> None:
        """A block was taken (or a pass ended): call the listener when due."""
        listener = self._listener
        if listener is not None and (ended or now - self._told >= self._every):
            self._told = now
            listener()

    def _forget(self) -> None:
        """Start again at zero (in a forked child: its figures are its own)."""
        self.__init__(self.stall_warning)  # type: ignore[misc]


_COUNTERS: weakref.WeakSet[ReadCounter] = weakref.WeakSet()


def _counters_after_fork() -> None:
    for counter in list(_COUNTERS):
        counter._forget()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_counters_after_fork)


class PassWatch:
    """One pass's timing, a block at a time, in the consumer's thread: :meth:`handing` as
    a block is handed out (after the consumer's thread waited ``waited`` seconds for it),
    :meth:`taken` when the consumer asks for the next one, :meth:`ended` when the pass is
    over (or closed). Judges the pass for :class:`~recprep.errors.DataStallWarning`."""

    __slots__ = ("_counter", "_setup", "_items", "_n", "_handed", "_waited", "_worked",
                 "_taken", "_window", "_warned", "__weakref__")

    def __init__(self, counter: ReadCounter, setup: Callable[[], Setup]) -> None:
        self._counter = counter
        self._setup = setup
        self._items: Iterator[Any] | None = None  # the open block's, if counted as taken
        self._n = 0  # instances of the open block, not yet counted
        self._handed = 0.0  # when the open block was handed out (0: none open)
        self._waited = self._worked = 0.0  # this pass's seconds
        self._taken = 0  # this pass's instances, but the open block's
        self._window = (0.0, 0.0)  # waited, worked when the current window began
        self._warned = False

    def handing(self, waited: float, now: float, n: int,
                items: Iterator[Any] | None = None) -> None:
        """A block of ``n`` instances is handed out at ``now``; with ``items`` (its
        iterator), its instances count as they are taken, else all at once now."""
        self._waited += waited
        if items is None:
            self._taken += n
        else:
            self._items, self._n = items, n
        self._handed = now

    def taken(self, now: float) -> None:
        """The consumer asked for the next block at ``now``: the open one was taken."""
        self._worked += now - self._handed
        if self._items is not None:
            self._taken += self._n - _left(self._items)
            self._items, self._n = None, 0
        self._handed = 0.0
        counter = self._counter
        if counter._listener is not None:
            counter.tell(now)
        if counter.stall_warning is not None and not self._warned:
            waited, worked = self._window
            if self._waited + self._worked - waited - worked >= STALL_WINDOW_SECONDS:
                self._judge(self._waited - waited, self._worked - worked, _WINDOW)
                self._window = (self._waited, self._worked)

    def ended(self, done: bool) -> None:
        """The pass is over (``done``: read to its end; else closed early)."""
        if self._handed:
            self.taken(time.perf_counter())
        counter = self._counter
        counter.closed(self)
        counter.tell(time.perf_counter(), ended=True)
        if done and counter.stall_warning is not None and not self._warned and (
                self._waited + self._worked >= MIN_STALL_SECONDS):
            self._judge(self._waited, self._worked, "pass")

    def add_to(self, sums: dict[str, float], now: float) -> None:
        """Add this pass's figures to ``sums``, the open block's up to ``now``."""
        sums["waiting_for_data"] += self._waited
        sums["waiting_for_consumer"] += self._worked
        sums["instances"] += self._taken
        if self._handed:
            sums["waiting_for_consumer"] += max(0.0, now - self._handed)
            sums["instances"] += self._n - _left(self._items)

    def _judge(self, waited: float, worked: float, span: str) -> None:
        share = self._counter.stall_warning
        elapsed = waited + worked
        if share is None or elapsed <= 0 or waited / elapsed <= share:
            return
        self._warned = True
        setup = self._setup()
        stats = self._counter.stats()
        warn(DataStallWarning(setup.where, span, waited, elapsed,
                              stats.fetching, stats.decoding,
                              stall_hint(stats, setup).text))


def _left(items: Iterator[Any] | None) -> int:
    """Instances of an open block not yet taken."""
    return 0 if items is None else operator.length_hint(items)


class StatsOut:
    """The stall report of :class:`~recprep.RecordIO`: :meth:`stats`."""

    _counter: ReadCounter
    _sources: Sources
    num_threads: int

    def stats(self) -> ReadStats:
        """What the passes read and where their time went (:class:`~recprep.ReadStats`:
        instances, record bytes, seconds fetching, decoding, waiting for data and for the
        consumer; and, as :class:`~recprep.FetchStats`, the object store's requests,
        bytes, retries...), with the copies ``for_rank``/``for_worker`` make in this
        process. The figures of a pass count as it goes; see
        :mod:`recprep.read.readstats` for what each means."""
        fetcher = self._sources.fetcher
        return self._counter.stats(None if fetcher is None else fetcher.stats())

    def _watch(self) -> PassWatch:
        """A new pass's :class:`PassWatch`."""
        return self._counter.watch(self._setup)

    def _setup(self) -> Setup:
        sources = self._sources
        return Setup(repr(self), self.num_threads, sources.fetcher is not None,
                     sources.cache is not None, len(sources.files))
