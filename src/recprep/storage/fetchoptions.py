"""What a reader is told about streaming from an object store, and what it reports:
:class:`FetchOptions` (range size, byte budget, requests in flight, deadline) and
:class:`FetchStats` (requests, bytes, retries, throttling...), and the rule by which
requests in flight adapt (:class:`Concurrency`). The streaming itself is
:mod:`recprep.storage.fetch`.

>>> FetchOptions().range_bytes >> 20, FetchOptions().budget_bytes >> 20
(8, 256)
>>> (FetchStats(requests=2, peak_bytes=5) + FetchStats(requests=1, peak_bytes=9)).requests
3
"""

from __future__ import annotations

import time
from dataclasses import dataclass, fields
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["Concurrency", "FetchOptions", "FetchStats", "streams_ranges"]

MiB = 1 << 20
#: a read outside its file's plan (a header, a probe) fetches at least this much
SMALL_READ_BYTES = 64 << 10
#: ranges shrink to this at the least when many files share the budget
MIN_RANGE_BYTES = 256 << 10
#: how often the concurrency is reconsidered while ranges are in flight
WINDOW_SECONDS = 0.25


@dataclass(frozen=True)
class FetchOptions:
    """How a reader streams shards from an object store.

    Parameters
    ----------
    range_bytes
        Bytes per range request (default 8 MiB): requests per epoch are about the set's
        bytes / ``range_bytes``.
    budget_bytes
        Bytes in flight plus fetched and not yet read, across the reader's open shards
        (default 256 MiB). Decoded instances are extra (see ``docs/storage.md``).
    initial_requests, max_requests
        Range requests in flight at the start, and at most; in between the fetcher adds
        requests while throughput grows. ``max_requests=n`` with ``initial_requests=n``
        fixes it.
    deadline
        Seconds a range may go without progress (failing, throttled, silent) before the
        read fails with :class:`~recprep.errors.StoreUnavailableError` (default 120).
    backoff
        The first retry's wait in seconds, doubled each time (full jitter), at most 20 s.

    Examples
    --------
    >>> FetchOptions(range_bytes=4 << 20).budget_bytes >> 20
    256
    """

    range_bytes: int = 8 * MiB
    budget_bytes: int = 256 * MiB
    initial_requests: int = 16
    max_requests: int = 64
    deadline: float = 120.0
    backoff: float = 0.1

    def __post_init__(self) -> None:
        for name in ("range_bytes", "budget_bytes", "initial_requests", "max_requests"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 1:
                raise InvalidArgumentError(
                    f"FetchOptions.{name} must be a positive int, got {value!r}")
        for name in ("deadline", "backoff"):
            value = getattr(self, name)
            if not isinstance(value, (int, float)) or isinstance(value, bool) or value <= 0:
                raise InvalidArgumentError(
                    f"FetchOptions.{name} must be a positive number of seconds, got {value!r}")
        if self.initial_requests > self.max_requests:
            raise InvalidArgumentError(
                f"FetchOptions.initial_requests ({self.initial_requests}) is more than "
                f"max_requests ({self.max_requests})")
        if self.budget_bytes < self.range_bytes:
            raise InvalidArgumentError(
                f"FetchOptions.budget_bytes ({self.budget_bytes}) must hold at least one "
                f"range (range_bytes={self.range_bytes})")


@dataclass(frozen=True)
class FetchStats:
    """What a reader's fetcher did so far (all zero for local files).

    ``requests`` range requests made (retries included), ``bytes`` received,
    ``retries`` attempts repeated, ``resumed`` retries that went on from the byte where a
    transfer stopped (not the range's start), ``throttled`` answers that pushed back,
    ``failed`` ranges given up on, ``peak_bytes`` the most bytes held (in flight plus
    fetched, not yet read), ``most_in_flight`` the most requests in flight at once,
    ``waited`` seconds readers waited for bytes, ``concurrency`` the requests the fetcher
    lets be in flight now (it adapts, see :class:`FetchOptions`).
    """

    requests: int = 0
    bytes: int = 0
    retries: int = 0
    resumed: int = 0
    throttled: int = 0
    failed: int = 0
    peak_bytes: int = 0
    most_in_flight: int = 0
    waited: float = 0.0
    concurrency: int = 0

    def __add__(self, other: FetchStats) -> FetchStats:
        """Two fetchers' counts together (peaks and limits: the larger)."""
        added = {f.name: getattr(self, f.name) + getattr(other, f.name) for f in fields(self)}
        for name in ("peak_bytes", "most_in_flight", "concurrency"):
            added[name] = max(getattr(self, name), getattr(other, name))
        return FetchStats(**added)


def streams_ranges(fs: Any) -> bool:
    """Whether a reader streams ``fs``'s files through a :class:`Fetcher`: filesystems
    with async I/O (object stores, HTTP). Local, in-memory and other synchronous
    filesystems are read through their own files."""
    return bool(getattr(fs, "async_impl", False))


class Concurrency:
    """Requests in flight: additive increase while throughput grows, halved on pushback."""

    def __init__(self, options: FetchOptions) -> None:
        self.limit = options.initial_requests
        self.most = options.max_requests
        self._best = 0.0
        self._window_start = time.monotonic()
        self._window_bytes = 0
        self._saturated = False
        self._hold_until = 0.0

    def received(self, n: int, now: float, saturated: bool) -> None:
        self._window_bytes += n
        self._saturated = self._saturated or saturated
        elapsed = now - self._window_start
        if elapsed < WINDOW_SECONDS:
            return
        rate = self._window_bytes / elapsed
        if self._saturated and now >= self._hold_until and self.limit < self.most:
            if rate > self._best * 1.05:
                self._best = rate
                self.limit = min(self.most, self.limit + max(2, self.limit // 4))
            else:
                self._hold_until = now + 8 * WINDOW_SECONDS  # a plateau: look again later
        self._window_start, self._window_bytes, self._saturated = now, 0, False

    def throttled(self, now: float) -> None:
        self.limit = max(1, self.limit // 2)
        self._best = 0.0
        self._hold_until = now + 20 * WINDOW_SECONDS
