"""The figures of each DataLoader worker, where the process that owns the dataset reads them.

A worker process reads with its own copy of the reader, so its
:class:`~recprep.ReadStats` are counted there. A :class:`StatsBoard` is a small shared
file (unlinked at once, so nothing is left behind; the one
:class:`~recprep.read.epochclock.EpochClock` uses is of the same kind), one slot per
worker id, which forked workers inherit and spawned ones receive with the dataset. A
worker publishes its figures into its slot as its passes go (at most twice a second, and
when a pass ends); ``RecordIODataset.worker_stats()`` reads every slot. A worker of a
later epoch (``persistent_workers=False``: a new process) adds to what the earlier
process of its id published, so a slot holds the worker id's figures since the dataset
was made. A worker stopped mid-pass may leave its last half second out.

>>> from recprep.read.readstats import ReadStats
>>> board = StatsBoard()
>>> board.publish(1, ReadStats(instances=7, decoding=0.5))
>>> {k: (s.instances, s.decoding) for k, s in board.read().items()}
{1: (7, 0.5)}

Where ``fcntl`` is missing (Windows) the board is kept per process: the workers'
figures stay in the workers.
"""

from __future__ import annotations

import os
import struct
import tempfile
import weakref
from collections.abc import Callable
from dataclasses import astuple, fields
from typing import Any

from .readstats import ReadStats

try:
    import fcntl
    from multiprocessing.context import get_spawning_popen
    from multiprocessing.reduction import DupFd
except ImportError:  # no POSIX locks (Windows): kept per process
    fcntl = None  # type: ignore[assignment]

__all__ = ["StatsBoard"]

_NAMES = [f.name for f in fields(ReadStats)]
_SLOT = struct.Struct(f"<{1 + len(_NAMES)}d")  # written?, then the fields in order
#: workers publish at most this often (and when a pass ends)
PUBLISH_SECONDS = 0.5


class StatsBoard:
    """One :class:`~recprep.ReadStats` slot per DataLoader worker id (see the module)."""

    def __init__(self) -> None:
        self._fd: int | None = None
        self._local: dict[int, ReadStats] = {}
        self._attached: tuple[int, int] | None = None  # (pid, worker id)
        if fcntl is not None:
            handle = tempfile.TemporaryFile()
            self._fd = os.dup(handle.fileno())
            handle.close()
            weakref.finalize(self, os.close, self._fd)

    def publish(self, worker: int, stats: ReadStats) -> None:
        """Put ``stats`` in the slot of ``worker``."""
        if self._fd is None:
            self._local[worker] = stats
            return
        data = _SLOT.pack(1.0, *(float(v) for v in astuple(stats)))
        fcntl.lockf(self._fd, fcntl.LOCK_EX)  # between processes (one thread publishes)
        try:
            os.pwrite(self._fd, data, worker * _SLOT.size)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def read(self) -> dict[int, ReadStats]:
        """The figures of every worker id that published, by id."""
        if self._fd is None:
            return dict(self._local)
        fcntl.lockf(self._fd, fcntl.LOCK_SH)
        try:
            data = os.pread(self._fd, os.fstat(self._fd).st_size, 0)
        finally:
            fcntl.lockf(self._fd, fcntl.LOCK_UN)
        found = {}
        for worker in range(len(data) // _SLOT.size):
            written, *values = _SLOT.unpack_from(data, worker * _SLOT.size)
            if written:
                found[worker] = _stats(values)
        return found

    def attach(self, worker: int, stats: Callable[[], ReadStats]
               ) -> Callable[[], None] | None:
        """In worker ``worker``'s process, the first time: a function that publishes
        what this process read (``stats()``) on top of what earlier processes of the
        same id published. None when this process is attached already."""
        if self._attached == (os.getpid(), worker):
            return None
        self._attached = (os.getpid(), worker)
        before = self.read().get(worker, ReadStats())
        return lambda: self.publish(worker, before + stats())

    def __reduce__(self) -> tuple[Callable[..., StatsBoard], tuple[Any, ...]]:
        if self._fd is not None and get_spawning_popen() is not None:  # to a new worker
            return _attached_board, (DupFd(self._fd),)
        return StatsBoard, ()  # pickled otherwise: a board of its own


def _attached_board(dup: Any) -> StatsBoard:
    """The board of the process that started this one (see ``__reduce__``)."""
    board = StatsBoard.__new__(StatsBoard)
    board._fd = dup.detach()
    board._local = {}
    board._attached = None
    weakref.finalize(board, os.close, board._fd)
    return board


def _stats(values: list[float]) -> ReadStats:
    kinds = {f.name: f.type for f in fields(ReadStats)}
    figures: dict[str, Any] = {name: int(value) if kinds[name] in ("int", int) else value
                               for name, value in zip(_NAMES, values, strict=True)}
    return ReadStats(**figures)
