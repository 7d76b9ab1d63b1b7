"""Positions of a pass's order as intervals: merging them, taking them out, and the
contiguous slice each rank and worker reads.

A pass's instances are numbered ``0 .. total - 1`` in its order (the *epoch order* of a
shuffled pass, see :mod:`recprep.read.checkpoint`). What a job has consumed is a set of
``[a, b)`` intervals; what is left is laid end to end and cut into one slice per rank,
and each rank's slice into one per worker.

>>> remaining([(2, 5)], 10, 1, 4)  # positions 1..3 of what is left of 0..9 once 2..4 went
[(1, 2), (5, 7)]
>>> slot_range(10, 1, 2, 0, 1), slot_range(10, 1, 2, 1, 2)
((5, 10), (8, 10))
>>> merge([(5, 7), (0, 2), (2, 3), (6, 9)])
[(0, 3), (5, 9)]
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

__all__ = ["Interval", "covered", "merge", "remaining", "slot_range"]

Interval = tuple[int, int]


def merge(intervals: Iterable[Sequence[int]]) -> list[Interval]:
    """Sorted, disjoint, non-empty ``[a, b)`` intervals covering the same positions."""
    out: list[Interval] = []
    for a, b in sorted((int(a), int(b)) for a, b in intervals):
        if a >= b:
            continue
        if out and a <= out[-1][1]:
            if b > out[-1][1]:
                out[-1] = (out[-1][0], b)
        else:
            out.append((a, b))
    return out


def covered(intervals: Sequence[Interval]) -> int:
    """How many positions merged ``intervals`` cover."""
    return sum(b - a for a, b in intervals)


def remaining(base: Sequence[Interval], total: int, lo: int, hi: int) -> list[Interval]:
    """The positions ``lo`` to ``hi`` (exclusive) of what ``0 .. total - 1`` holds once the
    merged intervals ``base`` are taken out, as intervals of ``0 .. total - 1``."""
    out: list[Interval] = []
    gaps: list[Interval] = []
    at = 0
    for a, b in base:
        gaps.append((at, a))
        at = b
    gaps.append((at, total))
    seen = 0  # remaining positions before the gap
    for a, b in gaps:
        size = b - a
        if size <= 0:
            continue
        x, y = max(lo, seen), min(hi, seen + size)
        if x < y:
            out.append((a + x - seen, a + y - seen))
        seen += size
        if seen >= hi:
            break
    return out


def _cut_share(n: int, part: int, num_parts: int) -> Interval:
    return -(-part * n // num_parts), -(-(part + 1) * n // num_parts)


def slot_range(
    n: int, rank: int, world_size: int, worker: int, num_workers: int, align: int = 1
) -> Interval:
    """The slice ``[lo, hi)`` of ``n`` positions that worker ``worker`` of ``rank`` reads:
    contiguous shares of the ranks (equal to within one, the larger first), each cut the
    same way among the rank's workers — in units of ``align`` positions when ``align > 1``
    (every worker's slice a whole number of units but the last non-empty one, so that
    the workers together cut as many batches of ``align`` as one reader would).

    >>> slot_range(10, 0, 1, 0, 2, 4), slot_range(10, 0, 1, 1, 2, 4)
    ((0, 8), (8, 10))
    """
    lo, hi = _cut_share(n, rank, world_size)
    if align == 1:
        a, b = _cut_share(hi - lo, worker, num_workers)
    else:
        units = _cut_share(-(-(hi - lo) // align), worker, num_workers)
        a, b = (min(u * align, hi - lo) for u in units)
    return lo + a, lo + b
