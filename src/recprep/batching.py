"""Batches of instances as columns: :func:`collate`, :func:`unbatch` and :func:`batched`.

:meth:`recprep.RecordIO.batches` cuts a pass into runs of ``batch_size`` instances and
hands each run to :func:`collate`, the one place that decides what a batch looks like.
A codec that decodes a whole chunk at a time (``Codec.decode_columns``) hands over
:class:`Columns` in this same layout; the pass then carries :class:`Row` handles (a
chunk's columns and a row number) instead of instances, and a run of rows is cut out of
the columns (:func:`collate_rows`) with no per-instance decoding — the same batch
``collate`` makes of the decoded instances, or else (runs whose chunks have different
layouts) the rows are decoded and collated. The rules, applied to a *column* (the values
at one place of every instance of the batch), recursively:

* tuples of one length (> 0) → a tuple of columns; named tuples of one class → that
  named tuple of columns; dicts with the same keys in the same order → a dict of columns;
* Python ``int`` / ``float`` / ``bool`` / ``complex``, all of one type → one numpy array
  of ``int64`` / ``float64`` / ``bool`` / ``complex128`` (ints beyond int64: a list);
* numpy scalars of one dtype → a numpy array of that dtype;
* numpy arrays of one dtype and one shape (at least one dimension, not of object dtype)
  → one stacked array of shape ``(n, *shape)``, the dtype kept;
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
from itertools import islice, repeat
from operator import attrgetter, itemgetter
from typing import Any

import numpy as np

from .errors import InvalidArgumentError

__all__ = ["Columns", "Row", "batched", "check_batch_size", "collate", "collate_rows",
           "unbatch"]

#: Python number types stacked into one array, and the dtype each becomes
NUMBERS: dict[type, np.dtype] = {
    bool: np.dtype(np.bool_),
    int: np.dtype(np.int64),
    float: np.dtype(np.float64),
    complex: np.dtype(np.complex128),
}
_dtype, _shape = attrgetter("dtype"), attrgetter("shape")


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
            yield collate_rows(run)
    finally:
        close = getattr(source, "close", None)
        if close is not None:
            close()


# --------------------------------------------------------------------------- chunk columns


@dataclass(eq=False)
class Columns:
    """The ``n`` instances of a chunk as columns, as :func:`collate` would make them.

    ``tree``: tuples / dicts of leaves as ``collate`` gives them, each leaf a numpy array
    of ``n`` rows (possibly a read-only, unaligned view of the chunk's bytes: rows are
    copied out) or a list. ``signature``: equal for two chunks only if ``collate`` of
    their instances together is the concatenation of their columns (same structure, and
    each leaf from values of one Python/numpy type, dtype and shape). ``decode``: gives
    the instances themselves, for runs that can't be cut from columns.
    """

    tree: Any
    n: int
    signature: Any
    decode: Callable[[], list[Any]] | None = None
    _instances: list[Any] | None = field(default=None, repr=False)

    def instances(self) -> list[Any]:
        if self._instances is None:
            assert self.decode is not None
            self._instances = self.decode()
        return self._instances

    def rows(self) -> list[Row]:
        """A :class:`Row` handle for each instance, in order."""
        return list(map(Row, zip(repeat(self, self.n), range(self.n), strict=True)))


class Row(tuple):
    """``(columns, index)``: instance ``index`` of a chunk's :class:`Columns` (what a
    columns pass yields in place of the instance). A tuple subclass: made in C."""

    __slots__ = ()

    def instance(self) -> Any:
        return self[0].instances()[self[1]]


_columns_of, _index_of = itemgetter(0), itemgetter(1)


def collate_rows(run: list[Any]) -> Any:
    """:func:`collate` of a run of instances some of which may be :class:`Row` handles:
    the batch ``collate`` makes of the instances they stand for.

    >>> cols = Columns((np.arange(4), np.array(["a", "b", "c", "d"], dtype=object)), 4,
    ...                "sig", lambda: [(0, "a"), (1, "b"), (2, "c"), (3, "d")])
    >>> collate_rows(cols.rows()[1:3])
    (array([1, 2]), array(['b', 'c'], dtype=object))
    >>> collate_rows([cols.rows()[0], (7, "x")])  # a Row among instances: decoded
    (array([0, 7]), array(['a', 'x'], dtype=object))
    """
    if not run or set(map(type, run)) != {Row}:
        if any(type(x) is Row for x in run):
            run = [x.instance() if type(x) is Row else x for x in run]
        return collate(run)
    owners = list(map(_columns_of, run))
    chunks = list(dict.fromkeys(owners))
    if len({c.signature for c in chunks}) != 1:
        return collate([x.instance() for x in run])
    index = np.fromiter(map(_index_of, run), np.intp, len(run))
    if len(chunks) == 1:
        first = int(index[0])
        if int(index[-1]) - first == len(run) - 1 and (
                len(run) < 3 or bool((np.diff(index) == 1).all())):
            return _take(chunks[0].tree, slice(first, first + len(run)))
        return _take(chunks[0].tree, index)
    number = {id(c): k for k, c in enumerate(chunks)}
    which = np.fromiter(map(number.__getitem__, map(id, owners)), np.intp, len(run))
    places = [np.flatnonzero(which == k) for k in range(len(chunks))]
    return _gather([c.tree for c in chunks], [index[p] for p in places], places, len(run))


def _take(tree: Any, rows: Any) -> Any:
    """Rows ``rows`` (a slice or an index array) of every leaf of ``tree``: fresh,
    writable, C-contiguous arrays (lists for list leaves)."""
    if isinstance(tree, np.ndarray):
        return np.ascontiguousarray(tree[rows]) if isinstance(rows, np.ndarray) else (
            np.array(tree[rows], order="C"))
    if isinstance(tree, list):
        return tree[rows] if isinstance(rows, slice) else [tree[i] for i in rows.tolist()]
    if isinstance(tree, tuple):
        return tuple(_take(t, rows) for t in tree)
    return {k: _take(t, rows) for k, t in tree.items()}


def _gather(trees: list[Any], rows: list[np.ndarray], places: list[np.ndarray], n: int
            ) -> Any:
    """A batch of ``n`` rows: ``rows[k]`` of ``trees[k]`` go to ``places[k]``."""
    first = trees[0]
    if isinstance(first, np.ndarray):
        out = np.empty((n, *first.shape[1:]), dtype=first.dtype)
        for tree, r, p in zip(trees, rows, places, strict=True):
            out[p] = tree[r]
        return out
    if isinstance(first, list):
        values: list[Any] = [None] * n
        for tree, r, p in zip(trees, rows, places, strict=True):
            for i, j in zip(p.tolist(), r.tolist(), strict=True):
                values[i] = tree[j]
        return values
    if isinstance(first, tuple):
        return tuple(_gather([t[k] for t in trees], rows, places, n)
                     for k in range(len(first)))
    return {key: _gather([t[key] for t in trees], rows, places, n) for key in first}
