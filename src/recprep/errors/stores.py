"""An object store that doesn't answer, or pushes back: the errors and warnings of
streaming reads (:mod:`recprep.storage.fetch`)."""

from __future__ import annotations

from .base import REMEDY, RecprepError, RecprepWarning, Remedy


class StoreUnavailableError(RecprepError, ConnectionError):
    """A range of a shard could not be fetched within the reader's deadline: the store
    kept failing (5xx, throttling, dropped connections) or never answered.

    Attributes: ``path`` (the shard), ``start``, ``end`` (the byte range ``[start,
    end)``), ``status`` (the last answer or failure), ``attempts``, ``seconds`` (how long
    it kept failing).

    >>> err = StoreUnavailableError("s3://b/p-00000-of-00008", 0, 8388608,
    ...                             "503 SlowDown", attempts=9, seconds=60.2)
    >>> print(err)  # doctest: +ELLIPSIS
    s3://b/p-00000-of-00008: bytes 0-8388607 could not be fetched: 9 attempts in 60.2 s, \
the last 503 SlowDown; ...
    """

    def __init__(self, path: str, start: int, end: int, status: str, *, attempts: int,
                 seconds: float) -> None:
        self.path = path
        self.start = start
        self.end = end
        self.status = status
        self.attempts = attempts
        self.seconds = seconds
        super().__init__(
            f"{path}: bytes {start}-{end - 1} could not be fetched: {attempts} attempts in "
            f"{seconds:.1f} s, the last {status}; the store is down or unreachable"
            f"{REMEDY}",
            remedy=Remedy("fetch", effect="with a longer FetchOptions(deadline=...) to wait "
                          "longer for a store that recovers"),
        )


class ThrottledWarning(RecprepWarning):
    """The store pushed back (503 SlowDown, 429 Too Many Requests) during a pass: recprep
    backed off, retried and lowered its requests in flight; nothing was lost. Shown once
    per pass, with the counts. Attributes: ``throttled`` (answers that pushed back),
    ``retries``, ``requests`` (in flight now)."""

    def __init__(self, where: str, throttled: int, retries: int, requests: int) -> None:
        self.throttled = throttled
        self.retries = retries
        self.requests = requests
        super().__init__(
            f"{where}: the store throttled {throttled} requests (503 SlowDown or 429); "
            f"recprep retried ({retries} retries in all) and lowered its requests in flight "
            f"to {requests}; nothing was lost. reader.stats() keeps the counts; many "
            "readers on one bucket prefix share its request rate"
        )
