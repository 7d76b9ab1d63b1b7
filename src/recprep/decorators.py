"""PaddlePaddle-style reader decorators: ``batch`` and ``shuffle``.

A *reader* is a no-argument callable that returns an iterator of instances — a
:class:`~recprep.RecordIO`, or any function PaddlePaddle's ``paddle.batch`` /
``paddle.reader.shuffle`` accept. A decorator takes a reader and returns a new one, so
they compose, and every call of the result is a fresh pass over the data:

>>> from recprep.decorators import batch, shuffle
>>> def numbers():
...     return iter(range(10))
>>> train = batch(shuffle(numbers, buf_size=4, seed=1), batch_size=4)
>>> [len(b) for b in train()]
[4, 4, 2]
>>> sorted(x for b in train() for x in b) == list(range(10))
True

Semantics follow PaddlePaddle's: ``batch`` yields lists; ``shuffle`` fills a buffer of
``buf_size`` instances, shuffles it, yields it all, and starts over.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any, TypeVar

from .errors import InvalidArgumentError
from .read.shuffling import check_seed, rng

__all__ = ["batch", "shuffle"]

T = TypeVar("T")
Reader = Callable[[], Iterable[T]]


def _check_reader(reader: Any, name: str) -> None:
    if not callable(reader):
        raise InvalidArgumentError(
            f"{name}() takes a reader: a no-argument callable returning an iterable of "
            f"instances (such as recprep.RecordIO(...)), got {type(reader).__qualname__}"
        )


def _positive_size(value: Any, name: str) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise InvalidArgumentError(f"{name} must be a positive int, got {value!r}")
    return value


def batch(reader: Reader[T], batch_size: int, drop_last: bool = False) -> Reader[list[T]]:
    """Group a reader's instances into lists of ``batch_size``.

    Parameters
    ----------
    reader
        A reader (no-argument callable returning an iterable of instances).
    batch_size
        Instances per batch.
    drop_last
        Drop the last batch when it is shorter than ``batch_size``.

    Returns
    -------
    callable
        A reader of lists.

    Examples
    --------
    >>> [b for b in batch(lambda: range(5), 2)()]
    [[0, 1], [2, 3], [4]]
    >>> [b for b in batch(lambda: range(5), 2, drop_last=True)()]
    [[0, 1], [2, 3]]
    """
    _check_reader(reader, "batch")
    _positive_size(batch_size, "batch_size")

    def batch_reader() -> Iterator[list[T]]:
        stream = iter(reader())
        while chunk := list(islice(stream, batch_size)):
            if len(chunk) < batch_size and drop_last:
                return
            yield chunk

    return batch_reader


def shuffle(reader: Reader[T], buf_size: int, seed: int | None = None) -> Reader[T]:
    """Shuffle a reader's instances within consecutive blocks of ``buf_size``.

    As PaddlePaddle's ``paddle.reader.shuffle``: ``buf_size`` instances are read into a
    buffer, shuffled and yielded, then the next ``buf_size``; at most ``buf_size``
    instances are held. (``RecordIO(shuffle=True)`` shuffles differently: a file order
    per epoch and a sliding buffer.)

    Parameters
    ----------
    reader
        A reader (no-argument callable returning an iterable of instances).
    buf_size
        Instances per shuffled block.
    seed
        ``None``: a different order on every pass. An int: pass ``n`` of the decorated
        reader has the same order in every run (and differs from pass ``n + 1``).

    Examples
    --------
    >>> s = shuffle(lambda: range(6), buf_size=3, seed=0)
    >>> first, second = list(s()), list(s())
    >>> sorted(first[:3]), sorted(first[3:])        # blocks of three, each shuffled
    ([0, 1, 2], [3, 4, 5])
    >>> first != second, first == list(shuffle(lambda: range(6), 3, seed=0)())
    (True, True)
    """
    _check_reader(reader, "shuffle")
    _positive_size(buf_size, "buf_size")
    if seed is not None:
        check_seed(seed)
    passes = 0

    def shuffle_reader() -> Iterator[T]:
        nonlocal passes
        generator = random.Random() if seed is None else rng(seed, passes)
        passes += 1
        stream = iter(reader())
        while buffer := list(islice(stream, buf_size)):
            generator.shuffle(buffer)
            yield from buffer

    return shuffle_reader
