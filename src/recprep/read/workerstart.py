"""What a DataLoader worker does before its first pass: a dataset unpickled with the
garbage collector paused, and what the worker holds then frozen (``gc.freeze``).

A worker's reader of a set of 100,000 shards is some 300,000 objects (the shards' paths
and manifest entries). A spawned worker unpickles them, and each garbage collection their
making sets off walks all that was made so far: 0.25 s of 0.4 s unpickling, at 100,000
shards (``benchmarks/RESULTS-memory.md``). Then, as the worker's pass allocates, every
full collection walks them all again — and in a forked worker, writes to each inherited
object's header, copying the trainer's pages into the worker's own. Frozen, they are left
out of collections; they are still freed when nothing refers to them (only reference
cycles among them are not collected).

:class:`PausedPickle` gives a class this pickling (``copy.copy`` and ``copy.deepcopy``
stay what they were): it pickles as :func:`unpickle_paused` of its class and its
attributes' pickle.

>>> import gc, pickle
>>> from types import SimpleNamespace
>>> made = unpickle_paused(SimpleNamespace, pickle.dumps({"items": [1, 2]}))
>>> made, gc.isenabled()
(namespace(items=[1, 2]), True)
"""

from __future__ import annotations

import copy
import gc
import pickle
from typing import Any

__all__ = ["PausedPickle", "freeze_once", "unpickle_paused"]

_FROZEN: list[bool] = []  # this process froze what it held (see freeze_once)


def freeze_once() -> None:
    """``gc.freeze()``, the first time this process asks (a DataLoader worker, before its
    first pass)."""
    if not _FROZEN:
        _FROZEN.append(True)
        gc.freeze()


def unpickle_paused(cls: Any, fields: bytes) -> Any:
    """An instance of ``cls`` whose attributes are the pickled dict ``fields``, unpickled
    with the garbage collector paused (see the module docstring)."""
    paused = gc.isenabled()
    gc.disable()
    try:
        state = pickle.loads(fields)
    finally:
        if paused:
            gc.enable()
    made = cls.__new__(cls)
    made.__dict__.update(state)
    return made


class PausedPickle:
    """Pickled as its attributes' own pickle, unpickled by :func:`unpickle_paused`."""

    def __reduce__(self) -> tuple[Any, ...]:
        return unpickle_paused, (type(self), pickle.dumps(self.__dict__,
                                                          pickle.HIGHEST_PROTOCOL))

    def __copy__(self) -> Any:
        other = type(self).__new__(type(self))
        other.__dict__.update(self.__dict__)
        return other

    def __deepcopy__(self, memo: dict[int, Any]) -> Any:
        other = memo[id(self)] = type(self).__new__(type(self))
        other.__dict__.update(copy.deepcopy(self.__dict__, memo))
        return other
