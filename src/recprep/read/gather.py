"""Rows of chunks' columns gathered into fresh columns: the one copy a batch makes.

A batch of :meth:`recprep.RecordIO.batches` (and a small-row round of the round-robin)
is rows of several chunks' decoded columns — a slice or an index array of each — put at
places of its own. :func:`copy_out` makes it: one numpy array per leaf, each filled by a
few fancy-index assignments, never a Python step per value; list leaves (str, bytes,
ragged values) are lists, and Arrow record batches are sliced, taken and concatenated by
Arrow.

The arrays are made by ``empty``: ``numpy.empty``, or for ``format="arrow"``
:func:`arrow_empty`, scratch buffers (:mod:`recprep._core.scratch`) a dropped batch
hands back for the next one, which Arrow wraps as they are.

>>> import numpy as np
>>> from recprep._core.batching import Columns
>>> a = Columns(np.array([1, 2, 3]), 3, "i8")
>>> b = Columns(np.array([10, 20]), 2, "i8")
>>> copy_out([(a, range(3), range(0, 6, 2)), (b, range(2), range(1, 5, 2))], 5,
...          lambda cols: cols.tree, settle=True).tolist()
[1, 10, 2, 20, 3]
"""

from __future__ import annotations

from collections.abc import Callable
from math import prod
from typing import Any, TypeAlias

import numpy as np

from .._core.arrowcols import arrow, is_arrow
from .._core.batching import Columns, collate
from .._core.scratch import scratch

__all__ = ["Empty", "Rows", "arrow_empty", "copy_out"]

#: where rows come from in a chunk's columns, or go to in a block: a ``range`` (a slice),
#: or an index array
Rows: TypeAlias = "range | np.ndarray"

#: what makes a batch's fresh arrays: ``empty(shape, dtype)``, as ``numpy.empty``
Empty: TypeAlias = Callable[[tuple[int, ...], np.dtype], np.ndarray]


def arrow_empty(shape: tuple[int, ...], dtype: np.dtype) -> np.ndarray:
    """A writable array of ``shape`` and ``dtype`` over a scratch buffer
    (:func:`~recprep._core.scratch.scratch`) when its values are numbers — what Arrow
    then wraps as it is — else ``numpy.empty``'s. A batch's memory goes to a later
    batch only once nothing refers to it: the batch, a slice of it, a table or a numpy
    view made of it keep it theirs.

    Why: a 1.6 MB batch (256 rows of 784 float64, the MNIST-like set) made fresh each
    time faults its pages in, or not, by glibc's heuristics and what the process
    allocated before — ~7,800 faults a pass with ``numpy.empty``, ~2,700 in Arrow's
    system pool, ~16,000 in its default pool (stop 38). Batches the consumer dropped are
    used again instead: none fault, and a batch too big to keep (51 MB at 8192 rows) is
    numpy's memory, not zeroed first (``benchmarks/RESULTS-columnar.md``, stop 39).

    >>> a = arrow_empty((2, 3), np.dtype(np.float32))
    >>> a.shape, a.dtype, a.flags.writeable
    ((2, 3), dtype('float32'), True)
    """
    if dtype.kind not in "iuf" or not dtype.isnative:
        return np.empty(shape, dtype)
    return np.frombuffer(scratch(prod(shape) * dtype.itemsize), dtype).reshape(shape)


def copy_out(entries: list[tuple[Columns, Rows, Rows]], n: int,
             leaf: Callable[[Columns], Any], settle: bool, empty: Empty = np.empty) -> Any:
    """``n`` rows, fresh, from ``leaf(columns)`` of each entry ``(columns, rows,
    places)`` (its column tree, or its list of instances): rows ``rows`` of it go to
    places ``places``. With ``settle`` (a batch), a list leaf becomes what ``collate``
    makes of its values (a run of a ragged column may hold values of one shape, which a
    batch stacks); arrays are made by ``empty``."""
    return _place([leaf(cols) for cols, _, _ in entries],
                  [_as_index(rows) for _, rows, _ in entries],
                  [_as_index(places) for _, _, places in entries], n, settle, empty)


def _as_index(rows: Rows) -> slice | np.ndarray:
    """A ``range`` as the slice that indexes it; an index array as it is."""
    return slice(rows.start, rows.stop, rows.step) if isinstance(rows, range) else rows


def _like(tree: tuple, items: Any) -> tuple:
    """A tuple of ``items`` of the kind ``tree`` is (a named tuple stays one)."""
    kind: Any = type(tree)
    return kind._make(items) if hasattr(tree, "_fields") else tuple(items)


def _place(trees: list[Any], rows: list[Any], places: list[Any], n: int, settle: bool,
           empty: Empty) -> Any:
    """``n`` rows, fresh: ``rows[k]`` of ``trees[k]`` go to ``places[k]``."""
    first = trees[0]
    if is_arrow(first):
        return _place_arrow(trees, rows, places, n)
    if isinstance(first, np.ndarray):
        out = empty((n, *first.shape[1:]), first.dtype)
        for tree, r, p in zip(trees, rows, places, strict=True):
            out[p] = tree[r]
        return out
    if isinstance(first, list):
        values: list[Any] = [None] * n
        for tree, r, p in zip(trees, rows, places, strict=True):
            got = tree[r] if isinstance(r, slice) else [tree[i] for i in r.tolist()]
            if isinstance(p, slice):
                values[p] = got
            else:
                for i, v in zip(p.tolist(), got, strict=True):
                    values[i] = v
        return collate(values) if settle else values
    if isinstance(first, tuple):
        return _like(first, (_place([t[i] for t in trees], rows, places, n, settle, empty)
                             for i in range(len(first))))
    return {key: _place([t[key] for t in trees], rows, places, n, settle, empty)
            for key in first}


def _place_arrow(batches: list[Any], rows: list[Any], places: list[Any], n: int) -> Any:
    """``_place`` for chunks decoded to Arrow (``format="arrow"``): their record batches
    (of one schema), sliced or taken, in order — a slice of one batch copies nothing."""
    pa = arrow()
    parts = []
    for batch, r in zip(batches, rows, strict=True):
        if isinstance(r, slice) and r.step in (None, 1):
            start, stop, _ = r.indices(batch.num_rows)
            parts.append(batch.slice(start, stop - start))
        else:
            parts.append(batch.take(pa.array(np.arange(batch.num_rows)[r]
                                             if isinstance(r, slice) else r)))
    at = 0
    for p, part_ in zip(places, parts, strict=True):
        if not (isinstance(p, slice) and p.start == at and p.step in (None, 1)):
            break
        at += part_.num_rows
    else:  # the parts end to end, in order
        return parts[0] if len(parts) == 1 else pa.concat_batches(parts)
    order = np.empty(n, np.int64)
    base = 0
    for p, part_ in zip(places, parts, strict=True):
        order[p] = np.arange(base, base + part_.num_rows)
        base += part_.num_rows
    taken = pa.Table.from_batches(parts).take(pa.array(order)).combine_chunks().to_batches()
    return taken[0] if len(taken) == 1 else pa.concat_batches(taken)  # one copy, no concat
