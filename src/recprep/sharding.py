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

from .errors import InvalidArgumentError

__all__ = ["SPLIT_MODES", "Piece", "Task", "check_part", "make_tasks", "split"]

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
    pieces: Sequence[Piece], part: int, num_parts: int, count: Count, mode: str = "auto"
) -> list[Piece]:
    """Part ``part`` of ``num_parts`` of ``pieces`` (see the module docstring).

    The parts for ``part = 0 .. num_parts - 1`` partition ``pieces``: every record is in
    exactly one of them. ``count(file)`` is called only when splitting by range.
    """
    if mode not in SPLIT_MODES:
        raise InvalidArgumentError(f"split must be one of {list(SPLIT_MODES)}, got {mode!r}")
    if num_parts == 1:
        return list(pieces)
    if mode == "shard" or (mode == "auto" and len(pieces) >= num_parts):
        return list(pieces[part::num_parts])
    return _by_range(pieces, part, num_parts, count)


def _by_range(pieces: Sequence[Piece], part: int, num_parts: int, count: Count) -> list[Piece]:
    sizes = [p.size(count) for p in pieces]
    total = sum(sizes)
    lo, hi = part * total // num_parts, (part + 1) * total // num_parts
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
