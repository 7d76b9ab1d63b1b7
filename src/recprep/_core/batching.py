"""Batches of instances as columns: :func:`collate`, :func:`unbatch` and :func:`batched`.

:meth:`recprep.RecordIO.batches` cuts a pass into runs of ``batch_size`` instances and
hands each run to :func:`collate`, the one place that decides what a batch looks like.
A codec that decodes a whole chunk at a time (``Codec.decode_columns``) hands over
:class:`Columns` in this same layout; the pass then moves those columns whole (see
:mod:`recprep.read.blocks`) and cuts batches out of them with no per-instance work — the
same batch ``collate`` makes of the decoded instances, or else (runs whose chunks have
different layouts) the instances are decoded and collated. The rules, applied to a
*column* (the values at one place of every instance of the batch), recursively:

* tuples of one length (> 0) → a tuple of columns; named tuples of one class → that
  named tuple of columns; dicts with the same keys in the same order → a dict of columns;
* Python ``int`` / ``float`` / ``bool`` / ``complex``, all of one type → one numpy array
  of ``int64`` / ``float64`` / ``bool`` / ``complex128`` (ints beyond int64: a list);
* numpy scalars of one dtype → a numpy array of that dtype;
* numpy arrays of one dtype and one shape (at least one dimension, not of object dtype)
  → one stacked array of shape ``(n, *shape)``, the dtype kept (in the machine's byte
  order, as ``np.stack`` makes it: ``>i4`` arrays give an ``<i4`` batch, which torch and
  TensorFlow take, with the same values);
* ``str`` only, or ``bytes`` only → a 1-d numpy array of dtype ``object`` holding the
  very same objects (not ``StringDType``: it has no bytes, and object arrays are what
  ``tf.constant`` and ``torch``'s ``default_convert`` pass through);
* anything else — ``None`` anywhere in the column, mixed types, arrays of different
  shapes or dtypes, 0-d arrays, lists, sets, other objects — → a ``list`` of the values
  themselves.

:func:`unbatch` is the inverse: the instances of a batch, where a stacked column gives
back numpy values (a row of an array, a numpy scalar of the column's dtype) and every
other leaf the very object it was given.

>>> import numpy as np
>>> batch = collate([(np.zeros(2, np.float32), 1, "a"), (np.ones(2, np.float32), 2, "b")])
>>> batch[0].shape, batch[0].dtype, batch[1], batch[2]
((2, 2), dtype('float32'), array([1, 2]), array(['a', 'b'], dtype=object))
>>> collate([{"id": 1, "tag": None}, {"id": 2, "tag": "x"}])
{'id': array([1, 2]), 'tag': [None, 'x']}
>>> [tuple(map(type, x)) for x in unbatch(batch)][0]
(<class 'numpy.ndarray'>, <class 'numpy.int64'>, <class 'str'>)
>>> [len(b) for b in batched(range(5), 2)], [b.tolist() for b in batched(range(5), 2, True)]
([2, 2, 1], [[0, 1], [2, 3]])
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from itertools import islice
from operator import attrgetter, itemgetter
from typing import Any, Literal

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["BatchFormat", "Columns", "batched", "check_batch_size", "collate", "unbatch"]

#: Python number types stacked into one array, and the dtype each becomes
NUMBERS: dict[type, np.dtype] = {
    bool: np.dtype(np.bool_),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}
_dtype, _shape = attrgetter("dtype"), attrgetter("shape")

#: what a batch is made of (``RecordIO.batches(format=)``): numpy columns (:func:`collate`),
#: a ``pyarrow.RecordBatch`` or a ``pandas.DataFrame``
BatchFormat = Literal["numpy", "arrow", "pandas"]


def collate(instances: Sequence[Any]) -> Any:
    """One batch (columns) from a sequence of instances; see the module's rules.

    >>> collate([(1, 2.5), (2, 0.5)])
    (array([1, 2]), array([2.5, 0.5]))
    >>> collate([[1], [2, 3]])  # lists are values, not structure
    [[1], [2, 3]]
    """
    column = instances if isinstance(instances, (list, tuple)) else list(instances)
    if not column:
        return []
    kinds = set(map(type, column))
    if len(kinds) != 1:
        return list(column)  # mixed types, None among values
    kind = kinds.pop()
    if kind in NUMBERS:
        try:
            return np.fromiter(column, dtype=NUMBERS[kind], count=len(column))
        except OverflowError:  # ints beyond int64
            return list(column)
    if kind is str or kind is bytes:
        strings = np.empty(len(column), dtype=object)
        strings[:] = column
        return strings
    if kind is np.ndarray:
        return _stack(column)
    if issubclass(kind, np.generic):
        dtypes = set(map(_dtype, column))
        return np.array(column, dtype=dtypes.pop()) if len(dtypes) == 1 else list(column)
    if kind is tuple or (issubclass(kind, tuple) and hasattr(kind, "_fields")):
        if not column[0]:
            return list(column)
        try:
            transposed = list(zip(*column, strict=True))
        except ValueError:  # tuples of two lengths
            return list(column)
        columns = list(map(collate, transposed))
        return tuple(columns) if kind is tuple else kind._make(columns)  # type: ignore[union-attr]
    if kind is dict:
        keys = set(map(tuple, column))
        if len(keys) != 1:
            return list(column)
        names = keys.pop()
        if not names:
            return list(column)
        if len(names) == 1:
            return {names[0]: collate(list(map(itemgetter(names[0]), column)))}
        rows = map(itemgetter(*names), column)
        return {k: collate(c) for k, c in zip(names, zip(*rows, strict=True), strict=True)}
    return list(column)


def _stack(arrays: Sequence[np.ndarray]) -> Any:
    dtypes, shapes = set(map(_dtype, arrays)), set(map(_shape, arrays))
    if len(dtypes) != 1 or len(shapes) != 1 or shapes.pop() == () or dtypes.pop().hasobject:
        return list(arrays)
    return np.stack(arrays)


def unbatch(batch: Any) -> list[Any]:
    """The instances of a batch :func:`collate` made, in order.

    A stacked column gives numpy values: ``int`` → ``numpy.int64``, ``float`` →
    ``numpy.float64``, ``bool`` → ``numpy.bool_``, a numpy scalar → a scalar of its dtype,
    an array → a row of the stacked array (a view: same dtype, shape and values); strings,
    bytes and the values of list columns come back as the very same objects.

    >>> unbatch((np.array([1, 2]), ["a", None]))
    [(np.int64(1), 'a'), (np.int64(2), None)]
    """
    if isinstance(batch, (np.ndarray, list)):
        return list(batch)
    if isinstance(batch, tuple) and batch:
        rows = zip(*map(unbatch, batch), strict=True)
        fields = hasattr(batch, "_fields")
        return list(map(type(batch)._make, rows)) if fields else list(rows)  # type: ignore[attr-defined]
    if isinstance(batch, dict) and batch:
        names = list(batch)
        return [dict(zip(names, row, strict=True))
                for row in zip(*map(unbatch, batch.values()), strict=True)]
    raise InvalidArgumentError(
        f"unbatch takes a batch as collate makes it (an array, a list, or a non-empty "
        f"tuple or dict of them), got {type(batch).__qualname__}"
    )


def check_batch_size(batch_size: Any) -> int:
    """``batch_size`` if it is a positive int, else an InvalidArgumentError."""
    if isinstance(batch_size, (bool, np.bool_)) or not isinstance(
        batch_size, (int, np.integer)
    ) or batch_size < 1:
        raise InvalidArgumentError(f"batch_size must be a positive int, got {batch_size!r}")
    return int(batch_size)


def batched(instances: Iterable[Any], batch_size: int, drop_last: bool = False
            ) -> Iterator[Any]:
    """:func:`collate` of each run of ``batch_size`` instances; the last run is shorter,
    or left out with ``drop_last``. ``batch_size`` is checked at the call; closing the
    iterator closes ``instances``' (a reader's pass stops its threads)."""
    return _batched(iter(instances), check_batch_size(batch_size), drop_last)


def _batched(source: Iterator[Any], size: int, drop_last: bool) -> Iterator[Any]:
    try:
        while run := list(islice(source, size)):
            if len(run) < size and drop_last:
                return
            yield collate(run)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


# --------------------------------------------------------------------------- chunk columns


@dataclass(eq=False)
class Columns:
    """``n`` consecutive instances (a chunk's, or a run of a pass) as columns, as
    :func:`collate` would make them.

    ``tree``: tuples / dicts of leaves as ``collate`` gives them, each leaf a numpy array
    of ``n`` rows or a list — or, for Arrow batches, one ``pyarrow.RecordBatch`` of the
    ``n`` rows (see :mod:`recprep._core.arrowcols`). ``signature``: equal for two chunks
    only if ``collate`` of their instances together is the concatenation of their
    columns (same structure, and each leaf from values of one Python/numpy type, dtype
    and shape). ``decode``: gives the instances themselves, for runs that can't be cut
    from columns. The arrays may view the chunk's bytes (read-only, unaligned): a batch
    copies its rows out.

    >>> cols = Columns((np.arange(3), ["a", "b", None]), 3, "sig", lambda: [])
    >>> len(cols), cols.tree[0]
    (3, array([0, 1, 2]))
    """

    tree: Any
    n: int
    signature: Any
    decode: Callable[[], list[Any]] | None = None
    _instances: list[Any] | None = field(default=None, repr=False)

    def __len__(self) -> int:
        return self.n

    def instances(self) -> list[Any]:
        """The instances themselves (decoded once, on first use)."""
        if self._instances is None:
            assert self.decode is not None
            self._instances = self.decode()
        return self._instances
