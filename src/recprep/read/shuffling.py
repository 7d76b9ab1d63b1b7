"""Shuffling for training: seeded random streams and a bounded shuffle buffer.

Everything random is a function of ``(seed, epoch, stream, ...)``: the DataLoader workers
of a rank, which share a reader and so its seed, compute the same order of the rank's
files for an epoch, which keeps their split of it exactly-once while the order changes
from epoch to epoch.

Example
-------
>>> order = list(range(5))
>>> rng(7, 0).shuffle(order)
>>> again = list(range(5))
>>> rng(7, 0).shuffle(again)
>>> order == again, sorted(order)
(True, [0, 1, 2, 3, 4])
>>> out = list(buffered_shuffle(range(10), 4, rng(7, 0)))
>>> sorted(out) == list(range(10)), out == list(buffered_shuffle(range(10), 4, rng(7, 0)))
(True, True)
"""

from __future__ import annotations

import random
import secrets
from collections.abc import Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

import numpy as np

from ..errors import InvalidArgumentError

__all__ = [
    "buffered_shuffle", "check_buffer", "check_seed", "fresh_seed", "permutation", "rng"
]

T = TypeVar("T")


def check_seed(seed: Any, name: str = "seed") -> int:
    """Raise unless ``seed`` is a non-negative int; return it."""
    if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative int, got {seed!r}")
    return seed


def fresh_seed() -> int:
    """A random seed, for a reader given none."""
    return secrets.randbits(63)


def rng(*keys: int) -> random.Random:
    """A ``random.Random`` seeded from the non-negative ints ``keys`` (via NumPy's
    ``SeedSequence``, so nearby keys give unrelated streams)."""
    state = np.random.SeedSequence(list(keys)).generate_state(2, np.uint64)
    return random.Random(int(state[0]) << 64 | int(state[1]))


def permutation(n: int, *keys: int) -> np.ndarray:
    """A permutation of ``0 .. n - 1`` (int64) drawn from the non-negative ints ``keys``.

    >>> permutation(5, 7, 0).tolist() == permutation(5, 7, 0).tolist()
    True
    """
    generator = np.random.Generator(np.random.PCG64(np.random.SeedSequence(list(keys))))
    return generator.permutation(n).astype(np.int64, copy=False)


def buffered_shuffle(items: Iterable[T], size: int, generator: random.Random) -> Iterator[T]:
    """Shuffle a stream through a buffer of at most ``size`` items.

    The buffer is filled first; then each new item takes the place of a random one, which
    is yielded; at the end the rest is yielded in random order. At most ``size`` items
    are held. ``size <= 1`` passes the stream through unchanged.
    """
    if size <= 1:
        yield from items
        return
    stream = iter(items)
    buffer = list(islice(stream, size))
    if len(buffer) == size:
        rand = generator.random
        for item in stream:
            slot = int(rand() * size)
            out = buffer[slot]
            buffer[slot] = item
            yield out
    generator.shuffle(buffer)
    yield from buffer


def check_buffer(size: Any, name: str = "shuffle_buffer") -> int:
    """Raise unless ``size`` is a non-negative int; return it."""
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        raise InvalidArgumentError(f"{name} must be a non-negative int, got {size!r}")
    return size
