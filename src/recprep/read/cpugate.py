"""A budget of cores for prefetch threads, so they don't crowd out the training loop.

Prefetch threads read, check, decompress and decode chunks; the consumer (the training
loop) uses what they hand over. More runnable threads than cores only take turns — on
the CPU and on the GIL — and slow the loop down. A :class:`CpuGate` lets a given number
of threads compute at once (the cores left when the loop has one: a single thread on two
cores), and a thread steps out of it while it waits for storage (:meth:`CpuGate.wrap`
gates a file's ``read``), so any number of threads can wait on remote storage at once.

Example
-------
>>> import io
>>> gate = CpuGate(1)
>>> with gate:                                    # computing...
...     gate.wrap(io.BytesIO(b"abc")).read(2)     # ...but not while reading
b'ab'
"""

from __future__ import annotations

import os
import threading
from typing import Any, BinaryIO

from ..storage.fs import read_into

__all__ = ["CpuGate", "storage_waits", "usable_cores"]


def usable_cores() -> int:
    """The cores this process may run on (its CPU affinity, where the OS tells)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def storage_waits(fs: Any) -> bool:
    """Whether reading from ``fs`` waits on a network, so a thread should step out of the
    gate while it reads. Not for local files and ``memory://``, whose reads are short:
    handing the gate over at every read would cost more than it saves.
    """
    protocols = (fs.protocol,) if isinstance(fs.protocol, str) else tuple(fs.protocol)
    return not getattr(fs, "local_file", False) and "memory" not in protocols


class CpuGate:
    """At most ``slots`` threads compute at once (at least one)."""

    def __init__(self, slots: int) -> None:
        self.slots = max(1, slots)
        self._semaphore = threading.BoundedSemaphore(self.slots)
        self.acquire = self._semaphore.acquire
        self.release = self._semaphore.release

    def __enter__(self) -> CpuGate:
        self.acquire()
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()

    def wrap(self, file: BinaryIO) -> BinaryIO:
        """``file``, whose ``read`` steps out of the gate while it waits on storage."""
        return _GatedFile(file, self)  # type: ignore[return-value]


class _GatedFile:
    def __init__(self, file: BinaryIO, gate: CpuGate) -> None:
        self._file = file
        self._gate = gate

    def read(self, size: int = -1) -> bytes:
        self._gate.release()
        try:
            return self._file.read(size)
        finally:
            self._gate.acquire()

    def readinto(self, buffer: memoryview) -> int:
        self._gate.release()
        try:
            return read_into(self._file, buffer)
        finally:
            self._gate.acquire()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._file, name)
