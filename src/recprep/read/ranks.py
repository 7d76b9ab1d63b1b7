"""Who reads what: splitting a reader's files among ranks and DataLoader workers.

A training job reads with ``world_size`` ranks (processes, often one per GPU), and each
rank may run ``num_workers`` DataLoader workers. Together they must see every record
exactly once per epoch. The split is *hierarchical*: the files are split among the ranks,
then each rank's share among its workers, with the same rule at each level:

* **by piece** (by shard) when there are at least as many pieces as parts: part ``p`` of
  ``P`` takes pieces ``p``, ``p + P``, ``p + 2P``, ... Whole files are read whole, so
  each file is opened by one reader only; no record count is needed.
* **by record range** when there are fewer pieces than parts: the pieces are laid end to
  end and cut into ``P`` runs of records that differ in length by at most one (some
  empty when there are more parts than records). Counts come from the manifest or the
  chunk index, never from decoding.

Either way the parts partition their parent, so the ranks' workers partition the data:
exactly once, whatever the numbers of shards, ranks and workers. A rank's share depends
only on the files, ``rank`` and ``world_size`` — not on the epoch, the seed or how many
workers it has — so ``len(reader)`` is the rank's share, the same every epoch. (The reader
shuffles a rank's pieces before its workers split them, so workers get new pieces each
epoch.)

Example
-------
>>> counts = [10, 10, 10].__getitem__      # three files of ten records
>>> split([Piece(0), Piece(1), Piece(2)], 1, 2, counts)          # enough files: by file
[Piece(file=1, start=0, end=None)]
>>> split([Piece(0)], 1, 3, counts)                               # too few: by range
[Piece(file=0, start=3, end=6)]
>>> rank0 = split([Piece(0), Piece(1), Piece(2)], 0, 2, counts)  # rank 0 of 2 ...
>>> split(rank0, 1, 2, counts)                                    # ... its worker 1 of 2
[Piece(file=2, start=0, end=None)]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..errors import InvalidArgumentError

__all__ = [
    "SPLIT_MODES", "Blocks", "Piece", "Task", "check_part", "make_tasks", "skip_pieces",
    "split",
]

#: how :func:`split` may cut: ``auto`` (by piece when there are enough, else by range),
#: ``shard`` (always by piece), ``range`` (always by record range: balanced to one record)
SPLIT_MODES = ("auto", "shard", "range")

Count = Callable[[int], int]


class Piece(NamedTuple):
    """Records ``start`` to ``end`` (exclusive) of file number ``file``.

    ``end=None`` (with ``start=0``) is the whole file, whatever its length: it is read
    front to back without an index.
    """

    file: int
    start: int = 0
    end: int | None = None

    @property
    def whole(self) -> bool:
        return self.start == 0 and self.end is None

    def size(self, count: Count) -> int:
        """How many records the piece holds (``count(file)`` gives a file's records)."""
        end = count(self.file) if self.end is None else self.end
        return max(0, end - self.start)


class Task(NamedTuple):
    """An ElasticDL-style task: records ``start`` to ``end`` (exclusive) of ``path``."""

    path: str
    start: int
    end: int


def check_part(part: int, num_parts: int, what: str = "rank", total: str = "world_size") -> None:
    """Raise unless ``0 <= part < num_parts`` (ints, ``num_parts >= 1``)."""
    for name, value in ((total, num_parts), (what, part)):
        if not isinstance(value, int) or isinstance(value, bool):
            raise InvalidArgumentError(f"{name} must be an int, got {value!r}")
    if num_parts < 1:
        raise InvalidArgumentError(f"{total} must be at least 1, got {num_parts}")
    if not 0 <= part < num_parts:
        raise InvalidArgumentError(
            f"{what} must be in [0, {total}) = [0, {num_parts}), got {part}"
        )


def split(
    pieces: Sequence[Piece], part: int, num_parts: int, count: Count, mode: str = "auto",
    align: int = 1,
) -> list[Piece]:
    """Part ``part`` of ``num_parts`` of ``pieces`` (see the module docstring).

    The parts for ``part = 0 .. num_parts - 1`` partition ``pieces``: every record is in
    exactly one of them. ``count(file)`` is called only when splitting by range. With
    ``align > 1`` the split is by range, cut at multiples of ``align`` records (every part
    a whole number of runs of ``align`` but the last non-empty one, whatever ``mode``).

    >>> [p.size([10].__getitem__) for k in (0, 1) for p in split([Piece(0)], k, 2,
    ...  [10].__getitem__, align=4)]
    [4, 6]
    """
    if mode not in SPLIT_MODES:
        raise InvalidArgumentError(f"split must be one of {list(SPLIT_MODES)}, got {mode!r}")
    if num_parts == 1:
        return list(pieces)
    if align == 1 and (mode == "shard" or (mode == "auto" and len(pieces) >= num_parts)):
        return list(pieces[part::num_parts])
    return _by_range(pieces, part, num_parts, count, align)


def _by_range(
    pieces: Sequence[Piece], part: int, num_parts: int, count: Count, align: int = 1
) -> list[Piece]:
    sizes = [p.size(count) for p in pieces]
    total = sum(sizes)
    units = -(-total // align)
    lo = min(total, part * units // num_parts * align)
    hi = min(total, (part + 1) * units // num_parts * align)
    out: list[Piece] = []
    pos = 0
    for piece, size in zip(pieces, sizes, strict=True):
        if pos >= hi:
            break
        a, b = max(lo, pos), min(hi, pos + size)
        if a < b:
            if a == pos and b == pos + size:
                out.append(piece)  # wholly inside: keep it as it is (a whole file stays whole)
            else:
                out.append(Piece(piece.file, piece.start + a - pos, piece.start + b - pos))
        pos += size
    return out


def make_tasks(
    paths: Sequence[str], counts: Sequence[int], records_per_task: int
) -> list[Task]:
    """Cut each file into tasks of ``records_per_task`` records (the last may be shorter).

    >>> make_tasks(["a", "b", "c"], [5, 0, 2], 2)
    [Task(path='a', start=0, end=2), Task(path='a', start=2, end=4), \
Task(path='a', start=4, end=5), Task(path='c', start=0, end=2)]
    """
    if not isinstance(records_per_task, int) or isinstance(records_per_task, bool) or (
        records_per_task < 1
    ):
        raise InvalidArgumentError(
            f"records_per_task must be a positive int, got {records_per_task!r}"
        )
    return [
        Task(path, start, min(start + records_per_task, n))
        for path, n in zip(paths, counts, strict=True)
        for start in range(0, n, records_per_task)
    ]


class Blocks(NamedTuple):
    """Files cut into blocks of at most ``size`` records, in file order: block ``b`` is
    records ``start[b]`` to ``start[b] + records[b]`` of file ``file[b]``. Shuffled passes
    permute blocks (see :mod:`recprep.read.checkpoint`); they depend on the record counts and
    ``size`` only.

    >>> b = Blocks.cut([5, 0, 2], 2)
    >>> b.file.tolist(), b.start.tolist(), b.records.tolist()
    ([0, 0, 0, 2], [0, 2, 4, 0], [2, 2, 1, 2])
    """

    file: np.ndarray
    start: np.ndarray
    records: np.ndarray

    @classmethod
    def cut(cls, counts: Sequence[int] | np.ndarray, size: int) -> Blocks:
        counts_ = np.asarray(counts, dtype=np.int64)
        per_file = -(-counts_ // size)
        file = np.repeat(np.arange(len(counts_), dtype=np.int64), per_file)
        first = np.cumsum(per_file) - per_file  # each file's first block
        start = (np.arange(len(file), dtype=np.int64) - np.repeat(first, per_file)) * size
        records = np.minimum(counts_[file] - start, size) if len(file) else start
        return cls(file, start, records)


def skip_pieces(
    pieces: Sequence[Piece], groups: Sequence[int], skip: int, count: Count
) -> tuple[list[Piece], list[int]]:
    """``pieces`` (read one group after the other, the pieces of a group round-robin)
    with their first ``skip`` records, in that reading order, taken out.

    Earlier groups go; in the group where ``skip`` ends each piece loses what the
    round-robin took of it and the group is rotated so the round-robin goes on with the
    piece that was next. Only record counts are used.

    >>> count = [3, 1, 3].__getitem__
    >>> skip_pieces([Piece(0), Piece(1), Piece(2)], [0, 0, 0], 4, count)
    ([Piece(file=2, start=1, end=3), Piece(file=0, start=2, end=3)], [0, 0])
    """
    sizes = [p.size(count) for p in pieces]
    k = 0
    while k < len(pieces):
        end = k
        while end < len(pieces) and groups[end] == groups[k]:
            end += 1
        in_group = sum(sizes[k:end])
        if skip < in_group:
            break
        skip -= in_group
        k = end
    else:
        return [], []
    group = sizes[k:end]
    lo, hi = 0, max(group)  # full rounds t: sum(min(s, t)) <= skip
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if sum(min(s, mid) for s in group) <= skip:
            lo = mid
        else:
            hi = mid - 1
    rounds = lo
    extra = skip - sum(min(s, rounds) for s in group)
    active = [i for i, s in enumerate(group) if s > rounds]
    taken = {i: rounds + (n < extra) for n, i in enumerate(active)}
    out: list[Piece] = []
    for i in active[extra:] + active[:extra]:
        piece, take = pieces[k + i], taken[i]
        if take >= group[i]:
            continue
        if take:
            end_ = count(piece.file) if piece.end is None else piece.end
            piece = Piece(piece.file, piece.start + take, end_)
        out.append(piece)
    rest = list(pieces[end:])
    return out + rest, [groups[k]] * len(out) + list(groups[end:])
