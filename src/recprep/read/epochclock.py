"""An epoch count shared by a dataset and the DataLoader worker processes it is copied to.

A ``torch.utils.data.DataLoader`` with ``num_workers > 0`` copies its dataset into fresh
worker processes every epoch (unless ``persistent_workers=True``): a count of passes kept
in the dataset would start again at zero in every worker, every epoch, so every epoch
would get epoch 0's order. An :class:`EpochClock` lives in a small shared file instead
(unlinked at once, so nothing is left behind), which forked workers inherit and spawned
ones receive with the dataset, and which a lock (``fcntl.lockf``) guards:

* a pass in the process that owns the dataset (``num_workers=0``) takes the next epoch;
* the workers of one DataLoader iterator take one epoch between them: the first of them
  to start takes the next epoch, the others join it. They know each other by the
  iterator's base seed (``get_worker_info().seed - id``, drawn afresh for each iterator)
  and how many passes the worker process had made before (persistent workers keep theirs
  across epochs), counted up to ``num_workers`` arrivals;
* an epoch set (``set_epoch``) holds for every pass after it, in every process;
* a pass resumed from a state takes the state's epoch, and the passes after it go on
  from there. A state loaded into the dataset's reader before the workers start is in
  every worker's copy, every epoch: only the workers of the first iterator that meets it
  take it up (:meth:`EpochClock.take_up`), later ones start their epoch afresh.

So pass ``n`` of the dataset uses epoch ``n`` with 0 or N workers, persistent or not.
Where ``fcntl`` is missing the count is kept per process (and copied to spawned
workers): workers then repeat the epoch of the copy unless ``set_epoch`` is called.

>>> clock = EpochClock()
>>> [clock.claim(None, 1) for _ in range(2)], clock.claim((7, 0), 2), clock.claim((7, 0), 2)
([(0, False), (1, False)], (2, False), (2, False))
>>> clock.claim((7, 0), 2), clock.resumed(None, 9, fixed=False), clock.claim(None, 1)
((3, False), None, (10, False))
>>> clock.fix(4); clock.claim((8, 0), 2)
(4, True)
"""

from __future__ import annotations

import os
import struct
import tempfile
import threading
import weakref
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from ..errors import InvalidArgumentError
from .shuffling import check_seed

try:
    import fcntl
    from multiprocessing.context import get_spawning_popen
    from multiprocessing.reduction import DupFd
except ImportError:  # no POSIX locks (Windows): the count is kept per process
    fcntl = None  # type: ignore[assignment]

__all__ = ["EpochClock"]

#: the iterators a clock remembers, so that a worker that starts late finds its epoch
ENTRIES = 32
_CLOCK_HEAD = 7  # fixed?, the fixed epoch, the next epoch, entries written, a state taken up by
#            (its token, the iterator's base seed and passes before)
_ENTRY = 5  # base seed, passes before, epoch, arrivals, parties (num_workers)
_FORMAT = struct.Struct(f"<{_CLOCK_HEAD + ENTRIES * _ENTRY}q")
_INT64 = 1 << 63

_threads = threading.Lock()  # lockf doesn't exclude the threads of one process


def _after_fork() -> None:
    global _threads
    _threads = threading.Lock()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_after_fork)


class EpochClock:
    """The epochs of the passes of one dataset, in every process that holds a copy.

    Parameters
    ----------
    next_epoch
        The epoch of the first pass, when counting passes.
    fixed
        An epoch every pass uses (``set_epoch``), or None to count passes.
    """

    def __init__(self, next_epoch: int = 0, fixed: int | None = None) -> None:
        values = [0] * (_CLOCK_HEAD + ENTRIES * _ENTRY)
        values[0], values[1] = fixed is not None, _storable(fixed or 0)
        values[2] = _storable(next_epoch)
        self._fd: int | None = None
        self._local = values
        if fcntl is not None:
            handle = tempfile.TemporaryFile()
            self._fd = os.dup(handle.fileno())
            handle.close()
            weakref.finalize(self, os.close, self._fd)
            os.pwrite(self._fd, _FORMAT.pack(*values), 0)

    # -- what the dataset asks --------------------------------------------------------------

    def fix(self, epoch: int) -> None:
        """Every following pass, in every process, is of ``epoch``."""
        epoch = _storable(check_seed(epoch, "epoch"))
        with self._values() as values:
            values[0], values[1] = 1, epoch

    @property
    def epoch(self) -> int:
        """The epoch of the next pass (that is not a worker joining its iterator's)."""
        with self._values() as values:
            return values[1] if values[0] else values[2]

    @property
    def fixed(self) -> int | None:
        """The epoch every pass uses (:meth:`fix`), or None when counting passes."""
        with self._values() as values:
            return values[1] if values[0] else None

    def claim(self, identity: tuple[int, int] | None, parties: int,
              fixed: int | None = None) -> tuple[int, bool]:
        """The epoch of a pass starting now, and whether it is a fixed one.

        ``identity`` is ``(base seed, passes before)`` of a DataLoader worker, or None for
        a pass of the process that owns the dataset; ``parties`` the workers of its
        iterator. ``fixed``: an epoch the caller's reader was set to (used when no epoch
        was set here).
        """
        with self._values() as values:
            if values[0]:
                return values[1], True
            if fixed is not None:
                return fixed, True
            if identity is not None:
                for at in self._entries(values):
                    entry = values[at:at + _ENTRY]
                    if entry[:2] == list(identity) and entry[3] < entry[4]:
                        values[at + 3] += 1
                        return entry[2], False
            epoch = values[2]
            values[2] = _storable(epoch + 1)
            if identity is not None:
                self._add(values, [*identity, epoch, 1, parties])
            return epoch, False

    def take_up(self, token: int, identity: tuple[int, int]) -> bool:
        """Whether the workers of ``identity`` resume the loaded state ``token`` (a hash of
        it): those of the first iterator to meet it do, later ones don't."""
        with self._values() as values:
            if values[4] == token and values[5:7] != list(identity):
                return False
            values[4:7] = [token, *identity]
            return True

    def resumed(self, identity: tuple[int, int] | None, epoch: int, fixed: bool) -> None:
        """A pass took up a loaded state of ``epoch`` (``fixed``: of an epoch set): it is
        of that epoch, and the passes after it go on from there."""
        epoch = _storable(epoch)
        with self._values() as values:
            if fixed:
                values[0], values[1] = 1, epoch
                return
            values[2] = _storable(epoch + 1)
            if identity is None:
                return
            for at in reversed(self._entries(values)):
                if values[at:at + 2] == list(identity):
                    values[at + 2] = epoch
                    return

    # -- storage ----------------------------------------------------------------------------

    @staticmethod
    def _entries(values: list[int]) -> list[int]:
        """Where the remembered entries start, oldest first."""
        written = values[3]
        first = max(0, written - ENTRIES)
        return [_CLOCK_HEAD + (k % ENTRIES) * _ENTRY for k in range(first, written)]

    @staticmethod
    def _add(values: list[int], entry: list[int]) -> None:
        at = _CLOCK_HEAD + (values[3] % ENTRIES) * _ENTRY
        values[at:at + _ENTRY] = entry
        values[3] += 1

    @contextmanager
    def _values(self) -> Iterator[list[int]]:
        """The clock's values, to read and change; written back (locked throughout)."""
        with _threads:
            if self._fd is None:
                yield self._local
                return
            fcntl.lockf(self._fd, fcntl.LOCK_EX)
            try:
                values = list(_FORMAT.unpack(os.pread(self._fd, _FORMAT.size, 0)))
                before = list(values)
                yield values
                if values != before:
                    os.pwrite(self._fd, _FORMAT.pack(*values), 0)
            finally:
                fcntl.lockf(self._fd, fcntl.LOCK_UN)

    def __reduce__(self) -> tuple[Callable[..., EpochClock], tuple[Any, ...]]:
        if self._fd is not None and get_spawning_popen() is not None:  # to a new worker
            return _attached, (DupFd(self._fd),)
        with self._values() as values:  # pickled otherwise: a copy of the count
            fixed = values[1] if values[0] else None
            return EpochClock, (values[2], fixed)


def _attached(dup: Any) -> EpochClock:
    """The clock of the process that started this one (see ``__reduce__``)."""
    clock = EpochClock.__new__(EpochClock)
    clock._fd = dup.detach()
    clock._local = []
    weakref.finalize(clock, os.close, clock._fd)
    return clock


def _storable(epoch: int) -> int:
    if epoch >= _INT64:
        raise InvalidArgumentError(
            f"a dataset's epoch must be below 2**63 to be shared with DataLoader workers, "
            f"got {epoch}"
        )
    return epoch
