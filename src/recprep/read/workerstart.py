"""What a DataLoader worker does before its first pass: freeze what it holds
(``gc.freeze``).

A worker's reader of a set of 100,000 shards is some 300,000 objects (the shards' paths
and manifest entries). As the worker's pass allocates, every full garbage collection
walks them all again — seconds of a worker's start at 100,000 shards — and in a forked
worker writes to each inherited object's header, copying the trainer's pages into the
worker's own (``benchmarks/RESULTS-memory.md``). Frozen, they are left out of
collections; they are still freed when nothing refers to them (only reference cycles
among them are not collected).

>>> import gc
>>> freeze_once(); freeze_once(); _FROZEN   # frozen once a process
[True]
>>> gc.unfreeze(); _FROZEN.clear()   # (this process is not a worker: as it was)
"""

from __future__ import annotations

import gc

__all__ = ["freeze_once"]

_FROZEN: list[bool] = []  # this process froze what it held (see freeze_once)


def freeze_once() -> None:
    """``gc.freeze()``, the first time this process asks (a DataLoader worker, before its
    first pass)."""
    if not _FROZEN:
        _FROZEN.append(True)
        gc.freeze()
