"""A pass moved a block of instances at a time: round-robin, shuffle picks and batches.

A *block* is some consecutive instances of a pass: a ``list`` of them, or a chunk's
:class:`~recprep.batching.Columns` (what a codec's ``decode_columns`` gave, for
:meth:`recprep.RecordIO.batches`). The pass is built from blocks end to end — the shards
of a set read round-robin (:func:`interleave`), a shuffle block's records picked
(:func:`pick`) — and only its last step turns blocks into instances (:func:`flatten`)
or into batches (:func:`cut`). Every step keeps the instance order the per-instance
definition gives, so the two ends see the same instances; only the work per instance
differs (columns are moved with numpy, whole runs at a time).

>>> runs = list(interleave([iter([[1, 2, 3]]), iter([[10, 20], [30]])]))
>>> runs
[[1, 10, 2, 20], [3, 30]]
>>> [b.tolist() for b in cut(iter(runs), 4, drop_last=False)]
[[1, 10, 2, 20], [3, 30]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from itertools import chain
from typing import Any, TypeAlias

import numpy as np

from ..batching import Columns, collate

__all__ = ["Block", "cut", "flatten", "interleave", "part", "pick"]

Block: TypeAlias = list[Any] | Columns


def _like(tree: tuple, items: Any) -> tuple:
    """A tuple of ``items`` of the kind ``tree`` is (a named tuple stays one)."""
    kind: Any = type(tree)
    return kind._make(items) if hasattr(tree, "_fields") else tuple(items)


def flatten(block: Block) -> list[Any]:
    """The instances of ``block``, in order (a list: the block itself, if it is one)."""
    return block if isinstance(block, list) else block.instances()


def part(block: Block, start: int, stop: int) -> Block:
    """Instances ``start:stop`` of ``block`` (the block itself when that is all of it)."""
    if start == 0 and stop == len(block):
        return block
    if isinstance(block, list):
        return block[start:stop]

    def decode() -> list[Any]:
        return block.instances()[start:stop]

    return Columns(_slice(block.tree, start, stop), stop - start, block.signature, decode,
                   fresh=block.fresh)


# --------------------------------------------------------------------------- round-robin


def interleave(streams: Sequence[Iterator[Block]]) -> Iterator[Block]:
    """One instance of each stream in turn, exhausted streams dropping out — as runs.

    At the start of a round every stream holds a block with instances left (a stream
    that has none left drops out there, exactly where the instance-by-instance
    round-robin would pass it by); the next ``m`` rounds, ``m`` the fewest instances
    left in any of them, are then one run: ``m`` instances of each stream, woven. A
    stream that raises does so after the instances of the streams before it in that
    round, as instance by instance.
    """
    if len(streams) == 1:
        yield from (block for block in streams[0] if len(block))
        return
    held: list[Block | None] = [None] * len(streams)
    offset = [0] * len(streams)
    live = list(range(len(streams)))
    while live:
        ready: list[int] = []
        for s in live:
            while held[s] is None or offset[s] >= len(held[s]):  # type: ignore[arg-type]
                try:
                    block = next(streams[s], None)
                except BaseException:
                    if ready:  # what the round handed out before this stream's turn
                        yield _weave([(held[t], offset[t], 1) for t in ready])  # type: ignore[misc]
                    raise
                held[s], offset[s] = block, 0
                if block is None:
                    break
            if held[s] is not None:
                ready.append(s)
        live = ready
        if not live:
            return
        m = min(len(held[s]) - offset[s] for s in live)  # type: ignore[arg-type]
        yield _weave([(held[s], offset[s], m) for s in live])  # type: ignore[misc]
        for s in live:
            offset[s] += m


def _weave(parts: list[tuple[Block, int, int]]) -> Block:
    """Rounds of ``parts`` (``(block, start, m)``: ``m`` instances each), woven: instance
    ``r`` of every part in turn, for ``r`` in ``range(m)``."""
    if len(parts) == 1:
        block, start, m = parts[0]
        return part(block, start, start + m)
    k, m = len(parts), parts[0][2]
    blocks = [block for block, _, _ in parts]
    if all(isinstance(b, Columns) for b in blocks) and len(
            {b.signature for b in blocks}) == 1:  # type: ignore[union-attr]
        pieces = [part(block, start, start + m) for block, start, _ in parts]

        def decode() -> list[Any]:
            return _weave_lists([flatten(p) for p in pieces], k * m)

        trees = [p.tree for p in pieces]  # type: ignore[union-attr]
        return Columns(_weave_trees(trees, k * m), k * m,
                       blocks[0].signature, decode, fresh=True)  # type: ignore[union-attr]
    return _weave_lists([flatten(block)[start:start + m] for block, start, _ in parts],
                        k * m)


def _weave_lists(lists: list[list[Any]], n: int) -> list[Any]:
    out: list[Any] = [None] * n
    for s, values in enumerate(lists):
        out[s::len(lists)] = values
    return out


def _weave_trees(trees: list[Any], n: int) -> Any:
    first = trees[0]
    if isinstance(first, np.ndarray):  # row r of tree s lands at r * k + s
        return np.stack(trees, axis=1).reshape((n, *first.shape[1:]))
    if isinstance(first, list):
        return _weave_lists(trees, n)
    if isinstance(first, tuple):
        return _like(first, (_weave_trees([t[i] for t in trees], n) for i in range(len(first))))
    return {key: _weave_trees([t[key] for t in trees], n) for key in first}


# --------------------------------------------------------------------------- shuffle picks


def pick(blocks: list[Block], rows: np.ndarray) -> Block:
    """Instances ``rows`` (indexes into the blocks' instances end to end), in that order."""
    if all(isinstance(b, Columns) for b in blocks) and len(
            {b.signature for b in blocks}) == 1 and blocks:  # type: ignore[union-attr]
        ends = np.cumsum([len(b) for b in blocks])
        which = np.searchsorted(ends, rows, side="right")
        places = [np.flatnonzero(which == k) for k in range(len(blocks))]
        starts = ends - [len(b) for b in blocks]
        picked = [rows[p] - starts[k] for k, p in enumerate(places)]

        def decode() -> list[Any]:
            held = list(chain.from_iterable(map(flatten, blocks)))
            return [held[i] for i in rows.tolist()]

        trees = [b.tree for b in blocks]  # type: ignore[union-attr]
        return Columns(_gather(trees, picked, places, len(rows)), len(rows),
                       blocks[0].signature, decode, fresh=True)  # type: ignore[union-attr]
    held = list(chain.from_iterable(map(flatten, blocks)))
    return [held[i] for i in rows.tolist()]


def _gather(trees: list[Any], rows: list[np.ndarray], places: list[np.ndarray], n: int
            ) -> Any:
    """``n`` rows: ``rows[k]`` of ``trees[k]`` go to ``places[k]``."""
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
        return _like(first, (_gather([t[k] for t in trees], rows, places, n)
                             for k in range(len(first))))
    return {key: _gather([t[key] for t in trees], rows, places, n) for key in first}


# --------------------------------------------------------------------------- batches


def cut(runs: Iterator[Block], size: int, drop_last: bool) -> Iterator[Any]:
    """Batches of ``size`` instances from ``runs``, as :func:`~recprep.batching.collate`
    makes them (the last one shorter, or left out with ``drop_last``)."""
    pending: list[Block] = []
    have = 0
    for run in runs:
        n, at = len(run), 0
        while at < n:
            take = min(size - have, n - at)
            pending.append(part(run, at, at + take))
            have += take
            at += take
            if have == size:
                yield assemble(pending)
                pending, have = [], 0
    if pending and not drop_last:
        yield assemble(pending)


def assemble(parts: list[Block]) -> Any:
    """The batch of the instances of ``parts`` end to end: cut from their columns when
    they all have columns of one signature, else ``collate`` of their instances."""
    if all(isinstance(p, Columns) for p in parts) and len(
            {p.signature for p in parts}) == 1:  # type: ignore[union-attr]
        if len(parts) == 1:
            only: Columns = parts[0]  # type: ignore[assignment]
            return _settle(only.tree) if only.fresh else _copy(only.tree)
        return _settle(_concat([p.tree for p in parts]))  # type: ignore[union-attr]
    if len(parts) == 1:
        return collate(flatten(parts[0]))
    return collate(list(chain.from_iterable(map(flatten, parts))))


def _slice(tree: Any, start: int, stop: int) -> Any:
    if isinstance(tree, (np.ndarray, list)):
        return tree[start:stop]
    if isinstance(tree, tuple):
        return _like(tree, (_slice(t, start, stop) for t in tree))
    return {k: _slice(t, start, stop) for k, t in tree.items()}


def _settle(tree: Any) -> Any:
    """``tree`` with each list leaf made what ``collate`` makes of its values: a run of
    a chunk's ragged column may hold values of one shape, which a batch stacks."""
    if isinstance(tree, np.ndarray):
        return tree
    if isinstance(tree, list):
        return collate(tree)
    if isinstance(tree, tuple):
        return _like(tree, map(_settle, tree))
    return {k: _settle(t) for k, t in tree.items()}


def _copy(tree: Any) -> Any:
    """Fresh, writable, C-contiguous arrays (a chunk's columns may view its bytes)."""
    if isinstance(tree, np.ndarray):
        return np.array(tree, order="C")
    if isinstance(tree, list):
        return collate(tree)
    if isinstance(tree, tuple):
        return _like(tree, map(_copy, tree))
    return {k: _copy(t) for k, t in tree.items()}


def _concat(trees: list[Any]) -> Any:
    first = trees[0]
    if isinstance(first, np.ndarray):
        return np.concatenate(trees)
    if isinstance(first, list):
        return list(chain.from_iterable(trees))
    if isinstance(first, tuple):
        return _like(first, (_concat([t[i] for t in trees]) for i in range(len(first))))
    return {key: _concat([t[key] for t in trees]) for key in first}
