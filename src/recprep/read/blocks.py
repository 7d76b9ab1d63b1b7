"""A pass moved a block of instances at a time: round-robin, shuffle picks and batches.

A *block* is some consecutive instances of a pass: a ``list`` of them, a chunk's
:class:`~recprep.batching.Columns` (what a codec's ``decode_columns`` gave, for
:meth:`recprep.RecordIO.batches`), or a :class:`Mosaic` — rows of several chunks'
columns in an order of their own, not yet copied anywhere. The pass is built from blocks
end to end — the shards of a set read round-robin (:func:`interleave`), a shuffle
block's records picked (:func:`pick`) — and only its last step turns blocks into
instances (:func:`flatten`) or into batches (:func:`cut`), each batch's values copied
once, from the chunks' bytes into the batch's arrays (for ``batches(format="arrow")``,
a chunk's columns may be one ``pyarrow.RecordBatch``: its rows are sliced, taken and
concatenated by Arrow, and a batch within one is a slice). Every step keeps the instance
order the per-instance definition gives, so the two ends see the same instances; only
the work per instance differs.

>>> runs = list(interleave([iter([[1, 2, 3]]), iter([[10, 20], [30]])]))
>>> runs
[[1, 10, 2, 20], [3, 30]]
>>> [b.tolist() for b in cut(iter(runs), 4, drop_last=False)]
[[1, 10, 2, 20], [3, 30]]
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from itertools import chain
from operator import attrgetter
from typing import Any, TypeAlias

import numpy as np

from .._core.arrowcols import arrow, is_arrow
from .._core.batching import Columns, collate
from ..containers import Gap
from .gather import Empty, Rows, copy_out

__all__ = ["Block", "Gap", "Mosaic", "assemble", "cut", "flatten", "interleave", "part",
           "pick"]

@dataclass(eq=False)
class Mosaic:
    """``n`` instances made of rows of chunks' columns (all of one signature): each entry
    ``(columns, rows, places)`` puts rows ``rows`` of ``columns`` at positions ``places``
    of this block. Nothing is copied until a batch is assembled."""

    entries: list[tuple[Columns, Rows, Rows]]
    n: int
    signature: Any

    def __len__(self) -> int:
        return self.n

    def instances(self) -> list[Any]:
        return copy_out(self.entries, self.n, Columns.instances, settle=False)


Block: TypeAlias = "list[Any] | Columns | Mosaic | Gap"

#: in the damage path, where a lost record's place is in a list of instances
_LOST = object()


def _shift(places: Rows, by: int) -> Rows:
    """``places`` moved by ``by`` positions."""
    if isinstance(places, range):
        return range(places.start + by, places.stop + by, places.step)
    return places + by


def flatten(block: Block) -> list[Any]:
    """The instances of ``block``, in order (a list: the block itself, if it is one; none
    for a :class:`~recprep.containers.base.Gap`)."""
    if isinstance(block, list):
        return block
    return [] if isinstance(block, Gap) else block.instances()


def _places(block: Block) -> list[Any]:
    """``block`` as a list of its places: instances, and ``_LOST`` for lost records."""
    return [_LOST] * block.n if isinstance(block, Gap) else list(flatten(block))


def _unholed(places: list[Any]) -> list[Block]:
    """Places back into blocks: runs of instances as lists, runs of lost records as
    Gaps (the damage path only: no per-instance work elsewhere)."""
    out: list[Block] = []
    run: list[Any] = []
    lost = 0
    for value in places:
        if value is _LOST:
            if run:
                out.append(run)
                run = []
            lost += 1
            continue
        if lost:
            out.append(Gap(lost))
            lost = 0
        run.append(value)
    out.extend([run] if run else [Gap(lost)] if lost else [])
    return out


def _entries(block: Columns | Mosaic) -> list[tuple[Columns, Rows, Rows]]:
    if isinstance(block, Columns):
        return [(block, range(block.n), range(block.n))]
    return block.entries


def part(block: Block, start: int, stop: int) -> Block:
    """Instances ``start:stop`` of ``block`` (the block itself when that is all of it)."""
    if start == 0 and stop == len(block):
        return block
    if isinstance(block, Gap):
        return Gap(stop - start)
    if isinstance(block, list):
        return block[start:stop]
    entries: list[tuple[Columns, Rows, Rows]] = []
    for cols, rows, places in _entries(block):
        if isinstance(places, range):  # ascending: the rows wanted are a run of them
            step = places.step
            first = max(0, -(-(start - places.start) // step))
            last = min(len(places), -(-(stop - places.start) // step))
            if first < last:
                entries.append((cols, rows[first:last], _shift(places[first:last], -start)))
        else:
            keep = (places >= start) & (places < stop)
            if keep.any():
                entries.append((cols, np.asarray(rows)[keep], _shift(places[keep], -start)))
    return Mosaic(entries, stop - start, block.signature)


def _one_signature(blocks: Sequence[Block]) -> bool:
    return bool(blocks) and all(isinstance(b, (Columns, Mosaic)) for b in blocks) and len(
        {b.signature for b in blocks}) == 1  # type: ignore[union-attr]


# --------------------------------------------------------------------------- round-robin


def interleave(streams: Sequence[Iterator[Block]],
               sizes: Sequence[int | None] | None = None) -> Iterator[Block]:
    """One instance of each stream in turn, exhausted streams dropping out — as runs.

    At the start of a round every stream holds a block with instances left (a stream
    that has none left drops out there, exactly where the instance-by-instance
    round-robin would pass it by); the next ``m`` rounds, ``m`` the fewest instances
    left in any of them, are then one run: ``m`` instances of each stream, woven. A
    stream that raises does so after the instances of the streams before it in that
    round, as instance by instance.

    ``sizes``: the places each stream is expected to give (None: not known). A stream
    that gave them all is asked for its end at once (:class:`_Finishing`): its file is
    closed and its generators freed while its last block is still being read
    round-robin — with a set's shards all in flight, that is most of what each costs.
    """
    if len(streams) == 1:
        yield from (block for block in streams[0] if len(block))
        return
    if sizes is not None:
        streams = [s if n is None else _Finishing(s, n) for s, n in zip(streams, sizes,
                                                                         strict=True)]
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
                        yield from _woven([(held[t], offset[t], 1) for t in ready])  # type: ignore[misc]
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
        yield from _woven([(held[s], offset[s], m) for s in live])  # type: ignore[misc]
        for s in live:
            offset[s] += m


class _Finishing(Iterator[Block]):
    """The blocks of ``stream``, expected to be ``size`` places: once they are all given,
    the stream is asked for what comes next at once — its end, normally, which closes
    its file and frees it — and that (the end, a block more, or the error it raised) is
    handed on when it is asked for, where the stream itself would have given it.

    >>> def blocks():
    ...     yield [1, 2]
    ...     print("the stream ends")
    >>> finishing = _Finishing(blocks(), 2)
    >>> next(finishing)
    the stream ends
    [1, 2]
    >>> next(finishing, None) is None
    True
    """

    def __init__(self, stream: Iterator[Block], size: int) -> None:
        self._stream: Iterator[Block] | None = stream
        self._left = size
        self._next: tuple[Block | None, BaseException | None] | None = None

    def __next__(self) -> Block:
        if self._next is not None:  # what the stream gave when it was finished
            block, error = self._next
            self._next = None
            if error is not None:
                raise error
            if block is None:
                raise StopIteration
            return block
        if self._stream is None:
            raise StopIteration
        block = next(self._stream)
        self._left -= len(block)
        if self._left <= 0 and self._next is None:
            self._left = 1 << 62  # asked once
            try:
                after = next(self._stream, None)
            except Exception as err:  # handed on when it is asked for
                self._next, self._stream = (None, err), None
            else:
                self._next = (after, None)
                if after is None:
                    self._stream = None  # ended: its file closed, its frames freed
        return block

    def close(self) -> None:
        stream, self._stream = self._stream, None
        if stream is not None:
            stream.close()  # type: ignore[attr-defined]


def _woven(parts: list[tuple[Block, int, int]]) -> Iterator[Block]:
    """:func:`_weave` of ``parts``; when some of them are records lost to damage
    (Gaps), the woven places cut back into runs of instances and Gaps."""
    if not any(isinstance(block, Gap) for block, _, _ in parts):
        yield _weave(parts)
        return
    k, m = len(parts), parts[0][2]
    places: list[Any] = [None] * (k * m)
    for s, (block, start, _) in enumerate(parts):
        places[s::k] = _places(part(block, start, start + m))
    yield from _unholed(places)


def _weave(parts: list[tuple[Block, int, int]]) -> Block:
    """Rounds of ``parts`` (``(block, start, m)``: ``m`` instances each), woven: instance
    ``r`` of every part in turn, for ``r`` in ``range(m)``."""
    if len(parts) == 1:
        block, start, m = parts[0]
        return part(block, start, start + m)
    k, m = len(parts), parts[0][2]
    batches = _arrow_round(parts)
    if batches is not None:
        return batches
    pieces = [part(block, start, start + m) for block, start, _ in parts]
    if _one_signature(pieces):
        woven = _woven_mosaic(pieces)
        return woven if _row_bytes(woven.entries[0][0].tree) >= SMALL_ROW_BYTES else \
            _solid(woven)
    out: list[Any] = [None] * (k * m)
    for s, piece in enumerate(pieces):
        out[s::k] = flatten(piece)
    return out


def _woven_mosaic(pieces: list[Block]) -> Mosaic:
    """``pieces`` (``m`` instances each, columns of one signature) woven, as a Mosaic."""
    k = len(pieces)
    entries = []
    for s, piece in enumerate(pieces):
        for cols, rows, places in _entries(piece):  # type: ignore[arg-type]
            spots = (range(s + k * places.start, s + k * places.stop, k * places.step)
                     if isinstance(places, range) else places * k + s)
            entries.append((cols, rows, spots))
    return Mosaic(entries, k * len(pieces[0]), pieces[0].signature)  # type: ignore[union-attr]


def _arrow_round(parts: list[tuple[Block, int, int]]) -> Columns | None:
    """A round of chunks' Arrow record batches of one signature and small rows, woven
    by one ``take`` over their rows end to end — what :func:`_solid` makes of their
    :class:`Mosaic`, in a few calls (None for any other round)."""
    first = parts[0][0]
    if not (type(first) is Columns and is_arrow(first.tree)) or any(
            type(b) is not Columns or b.signature != first.signature
            for b, _, _ in parts) or _row_bytes(first.tree) >= SMALL_ROW_BYTES:
        return None
    pa = arrow()
    k, m = len(parts), parts[0][2]
    joined = pa.concat_batches([b.tree.slice(start, m) for b, start, _ in parts])  # type: ignore[union-attr]
    woven = joined if m == 1 else joined.take(_round_order(k, m))  # one row each: in order
    return Columns(woven, k * m, first.signature, lambda: _woven_mosaic(
        [part(block, start, start + m) for block, start, _ in parts]).instances())


_ROUND_ORDER: dict[tuple[int, int], Any] = {}  # the last rounds' orders (rounds repeat)


def _round_order(k: int, m: int) -> Any:
    """The Arrow array ``0, m, 2m, …, 1, m + 1, …`` that weaves ``k`` parts of ``m``
    rows end to end (the last few are kept: rounds alternate between a few sizes)."""
    order = _ROUND_ORDER.get((k, m))
    if order is None:  # (another thread may be replacing it meanwhile: then made twice)
        order = arrow().array(np.arange(k * m).reshape(k, m).T.reshape(-1), arrow().int64())
        if len(_ROUND_ORDER) >= 4:
            _ROUND_ORDER.clear()
        _ROUND_ORDER[(k, m)] = order
    return order


#: rows of fewer bytes are woven into fresh columns at once (a batch then takes a slice of
#: them in a few numpy calls); bigger rows are copied once, when a batch is assembled
SMALL_ROW_BYTES = 256


def _row_bytes(tree: Any) -> int:
    """About how many bytes one row of ``tree``'s leaves holds."""
    if is_arrow(tree):  # a chunk's record batch: its buffers whole (nbytes costs 30x)
        return tree.get_total_buffer_size() // max(tree.num_rows, 1)
    if isinstance(tree, np.ndarray):
        return tree[:1].nbytes if len(tree) else 0
    if isinstance(tree, list):
        return 8
    return sum(map(_row_bytes, tree.values() if isinstance(tree, dict) else tree))


def _solid(mosaic: Mosaic) -> Columns:
    """``mosaic``'s rows copied into columns of their own."""
    tree = copy_out(mosaic.entries, mosaic.n, attrgetter("tree"), settle=False)
    return Columns(tree, mosaic.n, mosaic.signature, mosaic.instances)


# --------------------------------------------------------------------------- shuffle picks


def pick(blocks: list[Block], rows: np.ndarray) -> list[Block]:
    """Instances ``rows`` (indexes into the blocks' places end to end), in that order: a
    block of them, or — when some blocks are records lost to damage (Gaps) — runs of the
    instances picked, with a Gap where a lost record was picked."""
    if any(isinstance(b, Gap) for b in blocks):
        places = list(chain.from_iterable(map(_places, blocks)))
        return _unholed([places[i] for i in rows.tolist()])
    return [_pick(blocks, rows)]


def _pick(blocks: list[Block], rows: np.ndarray) -> Block:
    if _one_signature(blocks) and all(isinstance(b, Columns) for b in blocks):
        sizes = [len(b) for b in blocks]
        ends = np.cumsum(sizes)
        which = np.searchsorted(ends, rows, side="right")
        entries: list[tuple[Columns, Rows, Rows]] = []
        for k, block in enumerate(blocks):
            places = np.flatnonzero(which == k)
            if places.size:
                entries.append((block, rows[places] - (ends[k] - sizes[k]), places))  # type: ignore[arg-type]
        return Mosaic(entries, len(rows), blocks[0].signature)  # type: ignore[union-attr]
    held = list(chain.from_iterable(map(flatten, blocks)))
    return [held[i] for i in rows.tolist()]


# --------------------------------------------------------------------------- batches


def cut(runs: Iterator[Block], size: int, drop_last: bool,
        lost: list[int] | None = None, empty: Empty = np.empty) -> Iterator[Any]:
    """Batches of ``size`` instances from ``runs``, as :func:`~recprep.batching.collate`
    makes them (the last one shorter, or left out with ``drop_last``; arrays made by
    ``empty``: see :mod:`recprep.read.gather`). The places of records lost to damage
    (:class:`~recprep.containers.Gap` runs) are added up in ``lost[0]`` as they pass
    (without ``lost``, ``runs`` holds none)."""
    pending: list[Block] = []
    have = 0
    for run in runs:
        if isinstance(run, Gap):
            assert lost is not None, "a Gap among runs cut without a count of lost places"
            lost[0] += run.n
            continue
        n, at = len(run), 0
        whole = run.tree if isinstance(run, Columns) and is_arrow(run.tree) else None
        while at < n:
            take = min(size - have, n - at)
            if whole is not None and take == size:  # a record batch's rows: a slice, as
                yield whole.slice(at, size)  # assemble([part(run, at, at + size)]) gives
                at += size
                continue
            pending.append(part(run, at, at + take))
            have += take
            at += take
            if have == size:
                yield assemble(pending, empty)
                pending, have = [], 0
    if pending and not drop_last:
        yield assemble(pending, empty)


def assemble(parts: list[Block], empty: Empty = np.empty) -> Any:
    """The batch of the instances of ``parts`` end to end: copied out of their columns
    (once, into fresh arrays) when they all have columns of one signature, else
    ``collate`` of their instances."""
    if not _one_signature(parts):
        return collate(list(chain.from_iterable(map(flatten, parts))))
    entries: list[tuple[Columns, Rows, Rows]] = []
    base = 0
    for block in parts:
        entries.extend((cols, got, _shift(at, base))
                       for cols, got, at in _entries(block))  # type: ignore[arg-type]
        base += len(block)
    return copy_out(entries, base, attrgetter("tree"), settle=True, empty=empty)
