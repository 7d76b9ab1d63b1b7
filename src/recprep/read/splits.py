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
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any

import numpy as np

from ..errors import InvalidArgumentError, ResumeWarning, warn
from .checkpoint import Fields, consumed, is_int
from .positions import Interval, covered, merge, remaining, slot_range
from .ranks import Piece
from .reader import RecordIO
from .shuffling import check_seed

__all__ = ["IndexSplit", "checked_split_state", "index_split"]

SPLIT_STATE_VERSION = 1
#: the key, after ``(seed, epoch)``, of a shuffled split's permutation
SPLIT_STREAM = 0x5B117
#: indexes a shuffled split fetches at a time (in one call of the reader's dataset)
FETCH = 1024


class IndexSplit:
    """Instances ``start`` to ``end`` (exclusive) of a reader's unshuffled order, as a
    reader creator with ``len``, epochs and states. Made by :func:`index_split`.

    The split's *order* is its indexes in set order, or with ``shuffle=True`` a
    permutation of them drawn from ``(seed, epoch)`` each epoch. A pass may begin with
    positions of that order already consumed (``base``: what the ranks of an interrupted
    job had read, :meth:`combine_states`); the rest is laid end to end and cut into one
    contiguous share per rank (and DataLoader worker), so the ranks together read the
    split once, whatever their number.
    """

    def __init__(self, reader: RecordIO, name: str, start: int, end: int,
                 order: tuple[bool, int] = (False, 0)) -> None:
        self.reader, self.name, self.start, self.end = reader, name, start, end
        self.shuffle, self.seed = order
        self._epoch: int | None = None
        self._passes = 0
        self._yielded: list[int] = [0]  # of the latest pass
        self._base: list[Interval] = []  # of the latest pass
        self._done = False
        self._resume: dict[str, Any] | None = None
        self._pass_epoch: int | None = None  # of the latest pass
        self._permutation: tuple[int, np.ndarray] | None = None  # (epoch, order)
        self._dataset: Any = None

    def __repr__(self) -> str:
        shuffled = f", shuffle=True, seed={self.seed}" if self.shuffle else ""
        return (f"IndexSplit({self.name!r}, [{self.start}, {self.end}){shuffled} of "
                f"{self.reader!r})")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_permutation": None, "_dataset": None}

    def _slot(self, left: int | None = None) -> tuple[int, int]:
        """This rank's (worker's) positions of the ``left`` positions a pass reads."""
        r = self.reader
        n = self.end - self.start if left is None else left
        return slot_range(n, r.rank, r.world_size, r.share.worker, r.share.num_workers,
                          r.share.align)

    def __len__(self) -> int:
        lo, hi = self._slot()
        return hi - lo

    @property
    def epoch(self) -> int:
        return self._passes if self._epoch is None else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Name the epoch of the following passes (a shuffled split's order is drawn from
        it; an unshuffled one reads in set order every epoch)."""
        self._epoch = check_seed(epoch, "epoch")

    def order(self, epoch: int) -> np.ndarray:
        """The split's order in pass ``epoch``: its instance indexes (of the set), in the
        order its passes read them (drawn once per epoch, kept for the latest: 4 bytes an
        instance below 2**31 instances)."""
        n = self.end - self.start
        if not self.shuffle:
            return np.arange(self.start, self.end, dtype=np.int64)
        if self._permutation is None or self._permutation[0] != epoch:
            keys = np.random.SeedSequence([self.seed, epoch, SPLIT_STREAM])
            permuted = np.random.Generator(np.random.PCG64(keys)).permutation(n)
            small = self.end <= np.iinfo(np.int32).max  # 4 bytes an index kept, not 8
            kept = permuted.astype(np.int32 if small else np.int64)
            self._permutation = (epoch, kept + kept.dtype.type(self.start))
        return self._permutation[1]

    def __call__(self) -> Iterator[Any]:
        """A pass over this split's (this rank's) instances, in the split's order."""
        epoch = self.epoch
        if self._epoch is None:
            self._passes += 1
        resume, self._resume = self._resume, None
        skip, base, over = 0, [], False
        if resume is not None and resume["epoch"] == epoch:
            base = [(int(a), int(b)) for a, b in resume["base"]]
            skip = int(resume.get("yielded", 0))
            # a pass this split had finished, begun again (a training loop sets the epoch
            # it stopped in): nothing more of it, as a reader's gives
            over = bool(resume.get("done"))
        elif resume is not None and not resume.get("done") and (
                resume["base"] or resume.get("yielded")):
            warn(ResumeWarning(
                f"the loaded state of split {self.name!r} (epoch {resume['epoch']}) is not "
                f"used: this pass is of epoch {epoch}"))
        self._yielded, self._done, self._base = [skip], over, base
        self._pass_epoch = epoch
        if over:
            return iter(())
        n = self.end - self.start
        lo, hi = self._slot(n - covered(base))
        return self._pass(epoch, remaining(base, n, lo + skip, hi))

    __iter__ = __call__

    def _pass(self, epoch: int, runs: list[Interval]) -> Iterator[Any]:
        yielded = self._yielded
        for a, b in runs:
            for item in self._run(epoch, a, b):
                yielded[0] += 1
                yield item
        if yielded is self._yielded:
            self._done = True

    def _run(self, epoch: int, a: int, b: int) -> Iterator[Any]:
        """Positions ``a`` to ``b`` of the split's order: a contiguous range of the set
        read by skipping, or (shuffled) its indexes fetched a batch at a time."""
        if not self.shuffle:
            files = [Piece(n) for n in range(len(self.reader._sources.files))]
            stream = self.reader._read(files, interleave=True, skip=self.start + a)
            try:
                yield from islice(stream, b - a)
            finally:
                stream.close()  # type: ignore[attr-defined]
            return
        if self._dataset is None:
            self._dataset = self.reader.dataset()
        indexes = self.order(epoch)[a:b]
        for at in range(0, b - a, FETCH):
            yield from self._dataset[indexes[at:at + FETCH]]

    def state_dict(self) -> dict[str, Any]:
        """The position of the pass in progress (JSON-serialisable): the split, its
        order (``shuffle``, ``seed``), the epoch, the positions consumed before the pass
        (``base``) and what this rank (worker) has yielded of its share since."""
        if self._resume is not None:
            return dict(self._resume)
        started = self._pass_epoch is not None
        r = self.reader
        worker, num_workers, align = r.share.worker, r.share.num_workers, r.share.align
        state = {
            "recprep_split": SPLIT_STATE_VERSION, "name": self.name, "start": self.start,
            "end": self.end, "shuffle": self.shuffle, "seed": self.seed,
            "rank": r.rank, "world_size": r.world_size,
            "worker": worker, "num_workers": num_workers,
            "epoch": self.epoch if self._pass_epoch is None else self._pass_epoch,
            "epoch_set": self._epoch is not None,
            "base": [list(i) for i in self._base] if started else [],
            "yielded": self._yielded[0] if started else 0,
            "done": self._done if started else False,
        }
        if align > 1:
            state["align"] = align
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next pass continue the one ``state`` describes: a state of the same
        split, rank and worker, or one of :meth:`combine_states` (any rank). Every field
        is checked first: its type and range, the split, its order (``shuffle`` and
        ``seed`` must be this split's), and that ``yielded`` is at most this rank's share
        (:class:`InvalidArgumentError` names the field, what was expected and what was
        found)."""
        state = self._checked_state(state)
        epoch = state["epoch"]
        if state["epoch_set"]:
            self._epoch = epoch
        else:
            self._epoch, self._passes = None, epoch + 1 if state.get("done") else epoch
        self._resume = state  # done: a pass of its epoch gives nothing more

    def _checked_state(self, state: Any) -> dict[str, Any]:
        """``state`` checked for :meth:`load_state_dict`; nothing is changed."""
        r = self.reader
        worker, num_workers, align = r.share.worker, r.share.num_workers, r.share.align
        if isinstance(state, Mapping) and "rank" in state:
            keys = ("rank", "world_size", "worker", "num_workers", "align")
            mine = (r.rank, r.world_size, worker, num_workers, align)
            # states of before the worker split was recorded are of worker 0 of 1
            defaults = {"worker": 0, "num_workers": 1, "align": 1}
            theirs = tuple(state.get(k, defaults.get(k)) for k in keys)
            if any(not is_int(t) or t != m for t, m in zip(theirs, mine, strict=True)):
                raise InvalidArgumentError(
                    f"the state is of split [{self.start}, {self.end}) at rank "
                    f"{theirs[0]!r} of {theirs[1]!r} (worker {theirs[2]!r} of {theirs[3]!r}, "
                    f"batches of {theirs[4]!r}); this split is read at rank {r.rank} of "
                    f"{r.world_size} (worker {worker} of {num_workers}, batches of {align}): "
                    "load a state into the split that took it, or combine the states of all "
                    "ranks with IndexSplit.combine_states(states) and load that into every "
                    "rank"
                )
        state = checked_split_state(state, (self.start, self.end, self.shuffle, self.seed))
        if "rank" not in state:
            return state
        lo, hi = self._slot(self.end - self.start - covered(state["base"]))
        if state["yielded"] > hi - lo:
            Fields(state, "a split state").fail(
                "yielded", f"at most {hi - lo}, this split's share (rank {r.rank} of "
                f"{r.world_size}, worker {worker} of {num_workers}) of what 'base' leaves")
        return state

    @staticmethod
    def combine_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One state from the states of every rank (and worker) of a job reading one
        split: load it into every rank of the new job, whatever its ``world_size``.
        Together they read, this epoch, every instance of the split none of the old
        ranks had read, exactly once, in the split's order (each new rank a contiguous
        share of what is left). A rank whose state is missing counts as having read
        nothing. The states must be of one pass (split, shuffle, seed, epoch).

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/splitcombine", list(range(10)), 2, "s")
        >>> old = [index_split(RecordIO("memory://doc/splitcombine/s-*", rank=r,
        ...                             world_size=2), {"x": 1.0}, shuffle=True, seed=4)["x"]
        ...        for r in (0, 1)]
        >>> streams = [iter(s()) for s in old]
        >>> seen = [next(streams[0]), next(streams[1]), next(streams[1])]
        >>> both = IndexSplit.combine_states([s.state_dict() for s in old])
        >>> new = [index_split(RecordIO("memory://doc/splitcombine/s-*", rank=r,
        ...                             world_size=3), {"x": 1.0}, shuffle=True, seed=4)["x"]
        ...        for r in range(3)]
        >>> for split in new:
        ...     split.load_state_dict(both)
        >>> sorted(seen + [x for split in new for x in split()])
        [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
        """
        if not states:
            raise InvalidArgumentError("combine_states needs at least one state, got none")
        checked = [checked_split_state(s) for s in states]
        first = checked[0]
        same = ("name", "start", "end", "shuffle", "seed", "epoch")
        for k, other in enumerate(checked[1:], 1):
            differs = [key for key in same if other[key] != first[key]]
            if differs:
                raise InvalidArgumentError(
                    f"split states 0 and {k} are of different passes: they differ in "
                    + ", ".join(f"{key} ({first[key]!r} != {other[key]!r})"
                                for key in differs))
        n = first["end"] - first["start"]
        union = merge(i for s in checked for i in consumed({**s, "records": n}))
        out = {key: first[key] for key in ("recprep_split", *same)}
        out.update(epoch_set=any(s["epoch_set"] for s in checked),
                   base=[list(i) for i in union])
        return out


def checked_split_state(state: Any, mine: tuple[int, int, bool, int] | None = None
                        ) -> dict[str, Any]:
    """``state`` checked as a split state (of one rank, or combined), normalised (states
    of before shuffled splits are unshuffled, with nothing consumed before the pass);
    with ``mine`` (start, end, shuffle, seed), also that it is of that split."""
    if not isinstance(state, Mapping) or not (
        is_int(state.get("recprep_split"))
        and state["recprep_split"] == SPLIT_STATE_VERSION
    ):
        raise InvalidArgumentError(
            f"expected a split state (recprep_split={SPLIT_STATE_VERSION}), got "
            f"{state!r:.200}"
        )
    out = {"shuffle": False, "seed": 0, "base": [], **state}
    if "rank" in state:  # states of before the worker split was recorded: worker 0 of 1
        out = {"worker": 0, "num_workers": 1, "align": 1, **out}
    fields = Fields(out, "a split state")
    if not isinstance(out.get("name"), str):
        fields.fail("name", "a str")
    start, end = fields.integer("start"), fields.integer("end")
    if end < start:
        fields.fail("end", f"at least 'start' ({start})")
    fields.flag("shuffle")
    fields.integer("seed")
    fields.integer("epoch")
    fields.flag("epoch_set")
    out["base"] = _split_base(fields, end - start)
    if mine is not None:
        theirs = (start, end, out["shuffle"], out["seed"])
        differs = [f"{key} (the state's {t!r}, this split's {m!r})" for key, t, m in
                   zip(("start", "end", "shuffle", "seed"), theirs, mine, strict=True)
                   if t != m and not (key == "seed" and not mine[2])]
        if differs:
            raise InvalidArgumentError(
                "the state is of another split: it differs in " + ", ".join(differs))
    if "rank" in state:
        world, workers = fields.integer("world_size", 1), fields.integer("num_workers", 1)
        fields.integer("rank", 0, world - 1)
        fields.integer("worker", 0, workers - 1)
        fields.integer("align", 1)
        fields.integer("yielded")
        fields.flag("done")
    return out


def _split_base(fields: Fields, n: int) -> list[list[int]]:
    base = fields.state["base"]
    if not isinstance(base, list) or not all(
        isinstance(i, (list, tuple)) and len(i) == 2 and all(map(is_int, i)) for i in base
    ) or merge(base) != [tuple(i) for i in base] or any(a < 0 or b > n for a, b in base):
        fields.fail("base", f"a list of sorted, disjoint [start, end) intervals within "
                    f"0 .. {n} (the split's positions)")
    return [list(i) for i in base]


def index_split(
    reader: RecordIO, splits: Mapping[str, float | tuple[int, int]], *,
    shuffle: bool = False, seed: int | None = None,
) -> dict[str, IndexSplit]:
    """Carve named splits out of ``reader``'s set by instance index, without rewriting it.

    Instance ``i`` is the ``i``-th of the unshuffled order (the order ``convert`` was
    fed). ``splits`` maps names to fractions (summing to 1: contiguous ranges in the
    mapping's order, boundaries rounded, so every instance lands in exactly one split) or
    to ``(start, end)`` index ranges (disjoint, within the set). Counts come from
    manifests or chunk headers; a split reads only its range (nothing before it is
    decoded). The reader must be unshuffled; its rank and worker split each range.

    With ``shuffle=True`` each split reads its indexes in a permutation drawn from
    ``(seed, epoch)`` (a new one each epoch, the same on every rank, which read
    contiguous shares of it) by random access (:meth:`~recprep.RecordIO.dataset`,
    ``1024`` indexes at a time); ``seed`` is then needed. Its states hold ``shuffle``
    and ``seed`` and load only into a split of the same ones.

    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/split", list(range(10)), 3, "s")
    >>> parts = index_split(RecordIO("memory://doc/split/s-*"), {"train": 0.8, "val": 0.2})
    >>> {name: list(part()) for name, part in parts.items()}
    {'train': [0, 1, 2, 3, 4, 5, 6, 7], 'val': [8, 9]}
    >>> list(index_split(RecordIO("memory://doc/split/s-*"), {"mid": (3, 6)})["mid"]())
    [3, 4, 5]
    >>> mixed = index_split(RecordIO("memory://doc/split/s-*"), {"mid": (3, 6)},
    ...                     shuffle=True, seed=7)["mid"]
    >>> sorted(mixed()), sorted(mixed())
    ([3, 4, 5], [3, 4, 5])
    """
    if not isinstance(reader, RecordIO) or reader.shuffle:
        raise InvalidArgumentError(
            f"index_split needs an unshuffled RecordIO (its order is the index), got {reader!r}"
        )
    if not isinstance(shuffle, bool):
        raise InvalidArgumentError(f"shuffle must be a bool, got {shuffle!r}")
    if shuffle and seed is None:
        raise InvalidArgumentError(
            "index_split(shuffle=True) needs a seed: every rank must draw the same "
            "permutation of a split (and a resumed job the same as the interrupted one)"
        )
    order = (shuffle, 0 if seed is None else check_seed(seed))
    if not splits:
        raise InvalidArgumentError("index_split needs at least one split, got none")
    total = sum(reader._sources.count(n) for n in range(len(reader._sources.files)))
    ranges = _ranges(splits, total)
    return {name: IndexSplit(reader, name, a, b, order)
            for name, (a, b) in zip(splits, ranges, strict=True)}


def _ranges(splits: Mapping[str, float | tuple[int, int]], total: int
            ) -> list[tuple[int, int]]:
    """The ``[start, end)`` index ranges of ``splits`` (see :func:`index_split`) in a set
    of ``total`` instances, checked."""
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
    return ranges
