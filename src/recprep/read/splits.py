"""Splits carved out of one set by instance index: :func:`index_split`.

:func:`index_split` cuts the instance indexes ``0 .. n - 1`` of a reader's unshuffled
order (the order ``convert`` was fed) into contiguous ranges; each split reads its range
by skipping by record counts and chunk indexes, so nothing before it is decoded, and
stops at its end. A split is a reader creator with ``len``, epochs and states, and a
source :func:`~recprep.read.mixing.mix` takes.

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/splits/a", [("a", i) for i in range(4)], 2, "a")
>>> parts = index_split(RecordIO("memory://doc/splits/a/a-*"), {"train": 0.75, "val": 0.25})
>>> list(parts["train"]()), list(parts["val"]())
([('a', 0), ('a', 1), ('a', 2)], [('a', 3)])
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from itertools import islice
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError
from .checkpoint import Fields, is_int
from .positions import slot_range
from .ranks import Piece
from .reader import RecordIO
from .shuffling import check_seed

__all__ = ["IndexSplit", "index_split"]

SPLIT_STATE_VERSION = 1


class IndexSplit:
    """Instances ``start`` to ``end`` (exclusive) of a reader's unshuffled order, as a
    reader creator with ``len``, epochs and states. Made by :func:`index_split`.

    With the reader's ``rank``/``world_size`` (and DataLoader worker), each rank reads a
    contiguous share of the range, the ranks together the whole range once.
    """

    def __init__(self, reader: RecordIO, name: str, start: int, end: int) -> None:
        self.reader, self.name, self.start, self.end = reader, name, start, end
        self._epoch: int | None = None
        self._passes = 0
        self._yielded: list[int] = [0]  # of the latest pass
        self._done = False
        self._resume: dict[str, Any] | None = None
        self._pass_epoch: int | None = None  # of the latest pass

    def __repr__(self) -> str:
        return f"IndexSplit({self.name!r}, [{self.start}, {self.end}) of {self.reader!r})"

    def _slot(self) -> tuple[int, int]:
        r = self.reader
        lo, hi = slot_range(self.end - self.start, r.rank, r.world_size, r.share.worker,
                          r.share.num_workers, r.share.align)
        return self.start + lo, self.start + hi

    def __len__(self) -> int:
        lo, hi = self._slot()
        return hi - lo

    @property
    def epoch(self) -> int:
        return self._passes if self._epoch is None else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Name the epoch of the following passes (the order is the same every epoch)."""
        self._epoch = check_seed(epoch, "epoch")

    def __call__(self) -> Iterator[Any]:
        """A pass over this split's (this rank's) instances, in the set's order."""
        epoch = self.epoch
        if self._epoch is None:
            self._passes += 1
        resume, self._resume = self._resume, None
        skip = 0
        if resume is not None and resume["epoch"] == epoch and not resume["done"]:
            skip = int(resume["yielded"])
        lo, hi = self._slot()
        self._yielded, self._done = [skip], False
        self._pass_epoch = epoch
        return self._pass(lo + skip, hi)

    __iter__ = __call__

    def _pass(self, lo: int, hi: int) -> Iterator[Any]:
        yielded = self._yielded
        if lo < hi:
            files = [Piece(n) for n in range(len(self.reader._sources.files))]
            stream = self.reader._read(files, interleave=True, skip=lo)
            try:
                for item in islice(stream, hi - lo):
                    yielded[0] += 1
                    yield item
            finally:
                stream.close()  # type: ignore[attr-defined]
        if yielded is self._yielded:
            self._done = True

    def state_dict(self) -> dict[str, Any]:
        """The position of the pass in progress (JSON-serialisable)."""
        if self._resume is not None:
            return dict(self._resume)
        started = self._pass_epoch is not None
        r = self.reader
        worker, num_workers, align = r.share.worker, r.share.num_workers, r.share.align
        state = {
            "recprep_split": SPLIT_STATE_VERSION, "name": self.name, "start": self.start,
            "end": self.end, "rank": r.rank, "world_size": r.world_size,
            "worker": worker, "num_workers": num_workers,
            "epoch": self.epoch if self._pass_epoch is None else self._pass_epoch,
            "epoch_set": self._epoch is not None,
            "yielded": self._yielded[0] if started else 0,
            "done": self._done if started else False,
        }
        if align > 1:
            state["align"] = align
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next pass continue the one ``state`` describes (same split, rank and
        worker). Every field is checked first: its type and range, the split, and that
        ``yielded`` is at most this split's share (:class:`InvalidArgumentError` names
        the field, what was expected and what was found)."""
        state = self._checked_state(state)
        epoch = state["epoch"]
        if state["epoch_set"]:
            self._epoch = epoch
        else:
            self._epoch, self._passes = None, epoch + 1 if state["done"] else epoch
        self._resume = None if state["done"] else state

    def _checked_state(self, state: Any) -> dict[str, Any]:
        """``state`` checked for :meth:`load_state_dict`; nothing is changed."""
        if not isinstance(state, Mapping) or not (
            is_int(state.get("recprep_split"))
            and state["recprep_split"] == SPLIT_STATE_VERSION
        ):
            raise InvalidArgumentError(
                f"expected a split state (recprep_split={SPLIT_STATE_VERSION}), got "
                f"{state!r:.200}"
            )
        r = self.reader
        worker, num_workers, align = r.share.worker, r.share.num_workers, r.share.align
        keys = ("start", "end", "rank", "world_size", "worker", "num_workers", "align")
        mine = (self.start, self.end, r.rank, r.world_size, worker, num_workers, align)
        # states of before the worker split was recorded are of worker 0 of 1
        defaults = {"worker": 0, "num_workers": 1, "align": 1}
        theirs = tuple(state.get(k, defaults.get(k)) for k in keys)
        if any(not is_int(t) or t != m for t, m in zip(theirs, mine, strict=True)):
            raise InvalidArgumentError(
                f"the state is of split [start, end) = [{theirs[0]!r}, {theirs[1]!r}) at "
                f"rank {theirs[2]!r} of {theirs[3]!r} (worker {theirs[4]!r} of "
                f"{theirs[5]!r}, batches of {theirs[6]!r}); this split is [{self.start}, "
                f"{self.end}) at rank {r.rank} of {r.world_size} (worker {worker} of "
                f"{num_workers}, batches of {align})"
            )
        fields = Fields(state, "a split state")
        if not isinstance(state.get("name"), str):
            fields.fail("name", "a str")
        out = dict(state)
        fields.integer("epoch")
        fields.flag("epoch_set")
        if fields.integer("yielded") > (share := len(self)):
            fields.fail("yielded", f"at most {share}, this split's share (rank {r.rank} of "
                        f"{r.world_size}, worker {worker} of {num_workers})")
        fields.flag("done")
        return out


def index_split(
    reader: RecordIO, splits: Mapping[str, float | tuple[int, int]]
) -> dict[str, IndexSplit]:
    """Carve named splits out of ``reader``'s set by instance index, without rewriting it.

    Instance ``i`` is the ``i``-th of the unshuffled order (the order ``convert`` was
    fed). ``splits`` maps names to fractions (summing to 1: contiguous ranges in the
    mapping's order, boundaries rounded, so every instance lands in exactly one split) or
    to ``(start, end)`` index ranges (disjoint, within the set). Counts come from
    manifests or chunk headers; a split reads only its range (nothing before it is
    decoded). The reader must be unshuffled; its rank and worker split each range.

    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/split", list(range(10)), 3, "s")
    >>> parts = index_split(RecordIO("memory://doc/split/s-*"), {"train": 0.8, "val": 0.2})
    >>> {name: list(part()) for name, part in parts.items()}
    {'train': [0, 1, 2, 3, 4, 5, 6, 7], 'val': [8, 9]}
    >>> list(index_split(RecordIO("memory://doc/split/s-*"), {"mid": (3, 6)})["mid"]())
    [3, 4, 5]
    """
    if not isinstance(reader, RecordIO) or reader.shuffle:
        raise InvalidArgumentError(
            f"index_split needs an unshuffled RecordIO (its order is the index), got {reader!r}"
        )
    if not splits:
        raise InvalidArgumentError("index_split needs at least one split, got none")
    total = sum(reader._sources.count(n) for n in range(len(reader._sources.files)))
    values = list(splits.values())
    ranges: list[tuple[int, int]] = []
    if all(isinstance(v, (int, float)) and not isinstance(v, bool) for v in values):
        fractions = [float(v) for v in values]  # type: ignore[arg-type]
        if any(not math.isfinite(f) or f < 0 for f in fractions) or not math.isclose(
            sum(fractions), 1.0, abs_tol=1e-9
        ):
            raise InvalidArgumentError(
                f"split fractions must be non-negative and sum to 1, got {dict(splits)!r} "
                f"(sum {sum(fractions)!r})"
            )
        cuts = [0] + [round(c * total) for c in np.cumsum(fractions)[:-1].tolist()] + [total]
        ranges = list(zip(cuts[:-1], cuts[1:], strict=True))
    elif all(isinstance(v, tuple) and len(v) == 2 for v in values):
        for name, (a, b) in zip(splits, values, strict=True):  # type: ignore[misc]
            if not (isinstance(a, int) and isinstance(b, int) and 0 <= a <= b <= total):
                raise InvalidArgumentError(
                    f"split {name!r}: expected 0 <= start <= end <= {total} (the set's "
                    f"instance count), got ({a!r}, {b!r})"
                )
            ranges.append((a, b))
        ordered = sorted((r, n) for r, n in zip(ranges, splits, strict=True) if r[0] < r[1])
        for ((_, end), first), ((start, _), second) in zip(ordered, ordered[1:], strict=False):
            if start < end:
                raise InvalidArgumentError(
                    f"splits {first!r} and {second!r} overlap: instances {start} to "
                    f"{end - 1} would be in both"
                )
    else:
        raise InvalidArgumentError(
            f"splits must map names to fractions or to (start, end) ranges, all alike, "
            f"got {dict(splits)!r}"
        )
    return {name: IndexSplit(reader, name, a, b)
            for name, (a, b) in zip(splits, ranges, strict=True)}
