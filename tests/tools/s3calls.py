"""Counting the S3 requests a filesystem makes, and how many were in flight at once: a
wrapper around s3fs's ``_call_s3`` (and its blocking twin ``call_s3``, which s3fs's own
file objects use), installed with ``monkeypatch``."""

from __future__ import annotations

import collections
import threading
from collections.abc import Callable
from typing import Any

import fsspec.asyn


class S3Calls:
    """Requests by method and key; ``most(methods, key_part)``: the most requests of
    ``methods`` on keys containing ``key_part`` that were in flight at once."""

    def __init__(self, monkeypatch: Any,
                 fault: Callable[[str, dict[str, Any]], None] | None = None) -> None:
        import s3fs

        self.calls: list[tuple[str, str]] = []
        self._lock = threading.Lock()
        self._now: collections.Counter[tuple[str, str]] = collections.Counter()
        self._peaks: list[collections.Counter[tuple[str, str]]] = []
        original = s3fs.S3FileSystem._call_s3
        calls = self

        async def call(fs: Any, method: str, *args: Any, **kwargs: Any) -> Any:
            key = str(kwargs.get("Key", ""))
            if fault is not None:
                fault(method, kwargs)
            with calls._lock:
                calls.calls.append((method, key))
                calls._now[(method, key)] += 1
                calls._peaks.append(collections.Counter(calls._now))
            try:
                return await original(fs, method, *args, **kwargs)
            finally:
                with calls._lock:
                    calls._now[(method, key)] -= 1

        monkeypatch.setattr(s3fs.S3FileSystem, "_call_s3", call)
        monkeypatch.setattr(s3fs.S3FileSystem, "call_s3", fsspec.asyn.sync_wrapper(call))

    def most(self, methods: tuple[str, ...], key_part: str = "") -> int:
        return max((sum(n for (m, k), n in peak.items() if m in methods and key_part in k)
                    for peak in self._peaks), default=0)

    def of(self, method: str, key_part: str = "") -> list[str]:
        return [k for m, k in self.calls if m == method and key_part in k]
