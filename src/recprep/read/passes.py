"""Pass plans: which records a pass reads, in which order — from record counts alone.

A reader's :class:`Share` says which instances its passes hand out and in which order
(shuffled or not, the seed and block size, the rank and worker, the split). A
:class:`PassPlan` is what one pass reads: *pieces* (records ``start:end`` of file numbers,
:class:`~recprep.read.ranks.Piece`), in *groups* whose pieces are read round-robin (the
shards of one set, unshuffled), and — for a shuffled pass — the records of each piece
picked, in the order they are handed out. A plan is made from the files' record counts,
the set each file is in and the pass's epoch and resume position; it opens no file, so
it is tested without I/O:

>>> counts = [5, 5, 2].__getitem__            # three files, of sets 0, 0 and 1
>>> plan = unshuffled(3, [0, 0, 1], counts, Share())
>>> plan.pieces, plan.groups                  # the set's two shards round-robin, then 1
([Piece(file=0, start=0, end=None), Piece(file=1, start=0, end=None), \
Piece(file=2, start=0, end=None)], [0, 0, 1])
>>> resumed = unshuffled(3, [0, 0, 1], counts, Share(), skip=3)
>>> resumed.pieces                            # 3 handed out: 0 and 1 of shard 0, 0 of 1
[Piece(file=1, start=1, end=5), Piece(file=0, start=2, end=5), Piece(file=2, start=0, end=None)]
>>> share = Share(shuffle=True, seed=7, shuffle_buffer=4)
>>> blocks = layout([5, 5, 2], share)
>>> plan = shuffled(blocks, share, epoch=0)  # blocks of at most 4, each picked
>>> len(plan.pieces), sum(len(rows) for rows in plan.picks)
(5, 12)
"""

from __future__ import annotations

from array import array
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, replace
from itertools import groupby
from typing import Any, overload

import numpy as np

from .positions import Interval, covered, remaining, slot_range
from .ranks import Blocks, Count, Piece, skip_pieces, split
from .shuffling import permutation

__all__ = [
    "DEFAULT_SHUFFLE_BUFFER", "PassPlan", "Picks", "Share", "TASKS_STREAM", "groups_of",
    "layout", "share_size", "shuffled", "unshuffled",
]

#: records permuted together by default (``shuffle_buffer``)
DEFAULT_SHUFFLE_BUFFER = 10_000
#: independent random streams of a seed and epoch: the blocks' order, the tasks' order,
#: each block's records
ORDER_STREAM, TASKS_STREAM, BUFFER_STREAM = range(3)


@dataclass(frozen=True)
class Share:
    """Which instances a reader's passes hand out, and in which order.

    ``shuffle``, ``seed``, ``shuffle_buffer`` as :class:`~recprep.RecordIO` takes them;
    ``rank`` of ``world_size``, and ``worker`` of ``num_workers`` of that rank (each
    worker's part a whole number of batches of ``align``); ``split`` for unshuffled
    passes (see :mod:`recprep.read.ranks`).
    """

    shuffle: bool = False
    seed: int = 0
    shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER
    rank: int = 0
    world_size: int = 1
    worker: int = 0
    num_workers: int = 1
    align: int = 1
    split: str = "auto"

    @property
    def block_size(self) -> int:
        """Records per block of a shuffled pass's order."""
        return self.shuffle_buffer if self.shuffle_buffer > 1 else DEFAULT_SHUFFLE_BUFFER

    @property
    def permuted(self) -> bool:
        """Whether each block's records are permuted (else read in order)."""
        return self.shuffle_buffer > 1

    def slot(self, total: int) -> Interval:
        """The slice of ``total`` positions this rank's worker reads."""
        return slot_range(total, self.rank, self.world_size, self.worker, self.num_workers,
                          self.align)

    def with_(self, **changes: object) -> Share:
        """A copy with ``changes``."""
        return replace(self, **changes)  # type: ignore[arg-type]


@dataclass
class PassPlan:
    """The pieces of a pass, their groups (pieces of one group are read round-robin),
    and, shuffled, the records of each piece handed out (``picks[k]``: indexes into the
    piece's records, in order; None: all of them, in order)."""

    pieces: list[Piece]
    groups: Sequence[int]
    picks: Sequence[np.ndarray | None] | None = None


def groups_of(sets: Sequence[int], interleave: bool) -> list[int]:
    """A group number per piece (``sets``: each piece's set): consecutive pieces of one set
    share one when they are read round-robin (``interleave``).

    >>> groups_of([0, 0, 1, 1, 0], True), groups_of([0, 0], False)
    ([0, 0, 1, 1, 2], [0, 1])
    """
    groups: list[int] = []
    for k, set_index in enumerate(sets):
        same = k > 0 and interleave and set_index == sets[k - 1]
        groups.append(0 if k == 0 else groups[-1] + (not same))
    return groups


def ranged(pieces: Sequence[Piece], sets: Sequence[int], count: Count, *, interleave: bool,
           skip: int = 0) -> PassPlan:
    """The plan of reading ``pieces`` (of files of ``sets``): those of one set round-robin
    (``interleave``) or one after the other, the first ``skip`` records left out."""
    groups = groups_of([sets[p.file] for p in pieces], interleave)
    if skip:
        pieces, groups = skip_pieces(pieces, groups, skip, count)
    return PassPlan(list(pieces), groups)


def share_pieces(num_files: int, count: Count, share: Share) -> list[Piece]:
    """An unshuffled pass's pieces: this rank's share (the same every epoch), then this
    worker's part of it."""
    files = [Piece(n) for n in range(num_files)]
    pieces = split(files, share.rank, share.world_size, count, share.split)
    return split(pieces, share.worker, share.num_workers, count, share.split, share.align)


def unshuffled(num_files: int, sets: Sequence[int], count: Count, share: Share,
               skip: int = 0) -> PassPlan:
    """The plan of an unshuffled pass: the share's pieces in file order, the shards of a
    set round-robin, the first ``skip`` records (a resumed pass's) left out."""
    return ranged(share_pieces(num_files, count, share), sets, count, interleave=True,
                  skip=skip)


def layout(counts: Sequence[int] | np.ndarray, share: Share) -> Blocks:
    """The files cut into the blocks of a shuffled pass's order (from each file's record
    count, by file number)."""
    return Blocks.cut(counts, share.block_size)


def share_size(num_files: int, count: Count, share: Share, blocks: Blocks | None = None
               ) -> int:
    """How many instances a pass of ``share`` yields (``blocks``: the layout, shuffled)."""
    if share.shuffle:
        assert blocks is not None
        lo, hi = share.slot(int(blocks.records.sum()))
        return hi - lo
    return sum(p.size(count) for p in share_pieces(num_files, count, share))


def shuffled(blocks: Blocks, share: Share, epoch: int, base: Sequence[Interval] = (),
             skip: int = 0) -> PassPlan:
    """The plan of a shuffled pass: this slot's slice of the epoch order, without the
    positions ``base``, from its ``skip``-th instance on — the blocks it touches, each
    read once (only the records wanted of it, as one record range), each permuted by its
    own seeded stream (see :mod:`recprep.read.checkpoint`). A block read whole is
    permuted when the pass reaches it (:class:`Picks`): the plan holds a few ints per
    block, not its permutation."""
    order = permutation(len(blocks.file), share.seed, epoch, ORDER_STREAM)
    sizes = blocks.records[order]
    ends = np.cumsum(sizes)
    total = int(ends[-1]) if len(ends) else 0
    starts = ends - sizes
    lo, hi = share.slot(total - covered(list(base)))
    segments = _segments(remaining(list(base), total, lo + skip, hi), starts, ends)
    pieces: list[Piece] = []
    picks = Picks(share.seed, epoch)
    for j, run in groupby(segments, key=lambda s: s[0]):
        block, size = int(order[j]), int(sizes[j])
        cuts = [(a, b) for _, a, b in run]
        if not share.permuted:
            for a, b in cuts:
                pieces.append(_piece(blocks, block, a, b))
                picks.add(None)
        elif _whole(cuts, size):  # all of it: its permutation, made when it is read
            pieces.append(_piece(blocks, block, 0, size))
            picks.later(block, size)
        else:
            scrambled = permutation(size, share.seed, epoch, BUFFER_STREAM, block)
            wanted = np.concatenate([scrambled[a:b] for a, b in cuts])
            first_record = int(wanted.min())
            pieces.append(_piece(blocks, block, first_record, int(wanted.max()) + 1))
            picks.add(wanted - first_record)
    return PassPlan(pieces, range(len(pieces)), picks)  # a group a piece


def _segments(intervals: list[Interval], starts: np.ndarray, ends: np.ndarray
              ) -> Iterator[tuple[int, int, int]]:
    """``(j, a, b)``: records ``a:b`` of the ``j``-th block of the order (which starts at
    position ``starts[j]`` and ends before ``ends[j]``), for each block the positions
    ``intervals`` touch, in order (one at a time: not a tuple a block held at once)."""
    for a, b in intervals:
        first, last = np.searchsorted(ends, [a, b - 1], side="right").tolist()
        for j in range(first, last + 1):
            at = int(starts[j])
            yield j, max(a, at) - at, min(b, int(ends[j])) - at


def _whole(cuts: list[tuple[int, int]], size: int) -> bool:
    """Whether the runs ``cuts`` of a block of ``size`` records are all of it, in order."""
    at = 0
    for a, b in cuts:
        if a != at:
            return False
        at = b
    return at == size


class Picks(Sequence["np.ndarray | None"]):
    """The picks of a shuffled pass's pieces (see :class:`PassPlan`), each made when it is
    asked for: a block read whole is permuted then by its seeded stream — the same rows
    as made up front, without a pass holding an array per block from its start.

    >>> picks = Picks(7, 0)
    >>> picks.later(3, 4); picks.add(None); picks.add(np.array([1, 0]))
    >>> [None if p is None else p.tolist() for p in picks] == [
    ...     permutation(4, 7, 0, BUFFER_STREAM, 3).tolist(), None, [1, 0]]
    True
    """

    def __init__(self, seed: int, epoch: int) -> None:
        self._keys = (seed, epoch, BUFFER_STREAM)
        #: per piece: the block permuted when asked for (-1: the pick is in ``_made``)
        self._block = array("q")
        self._size = array("q")
        self._made: dict[int, np.ndarray | None] = {}

    def later(self, block: int, size: int) -> None:
        """Add a piece: all of ``block`` (``size`` records), in its permuted order."""
        self._block.append(block)
        self._size.append(size)

    def add(self, rows: np.ndarray | None) -> None:
        """Add a piece whose picks are ``rows`` (None: all its records, in order)."""
        self._made[len(self._block)] = rows
        self._block.append(-1)
        self._size.append(0)

    def __len__(self) -> int:
        return len(self._block)

    @overload
    def __getitem__(self, k: int) -> np.ndarray | None: ...

    @overload
    def __getitem__(self, k: slice) -> list[np.ndarray | None]: ...

    def __getitem__(self, k: int | slice) -> Any:
        if isinstance(k, slice):
            return [self[i] for i in range(*k.indices(len(self)))]
        block = self._block[k]
        if block < 0:
            return self._made[k % len(self)]
        seed, epoch, stream = self._keys
        return permutation(self._size[k], seed, epoch, stream, block)


def _piece(blocks: Blocks, block: int, start: int, end: int) -> Piece:
    """Records ``start:end`` of ``block``: the whole file when that is all of it (read
    front to back, without an index), told from the layout (no file's count asked)."""
    file, first = int(blocks.file[block]), int(blocks.start[block])
    if first == 0 and start == 0 and end == int(blocks.records[block]) and (
            block + 1 == len(blocks.file) or int(blocks.file[block + 1]) != file):
        return Piece(file)
    return Piece(file, first + start, first + end)
