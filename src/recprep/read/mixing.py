"""Several sets read as one weighted stream (:func:`mix`), and splits carved out of one
set by instance index (:func:`index_split`).

**Mixing.** Step ``s`` of pass ``epoch`` draws its source from a uniform number ``u``:
the numbers come in blocks of :data:`DRAW_BLOCK`, block ``k`` drawn from
``(seed, epoch, k)`` (NumPy ``SeedSequence``), and ``u`` picks a source by the
cumulative weights of the sources still active. Which source step ``s`` reads is thus a
function of the seed, the epoch, the step and the set of active sources, so a state that
holds the step, the active sources and each source's own state resumes exactly. Each
source's instances come in that source's own order (its shuffle, rank and worker split).

**Splits.** :func:`index_split` cuts the instance indexes ``0 .. n - 1`` of a reader's
unshuffled order (the order ``convert`` was fed) into contiguous ranges; each split
reads its range by skipping by record counts and chunk indexes, so nothing before it is
decoded, and stops at its end.

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/mix/a", [("a", i) for i in range(4)], 2, "a")
>>> _ = convert("memory://doc/mix/b", [("b", i) for i in range(4)], 1, "b")
>>> both = mix([RecordIO("memory://doc/mix/a/a-*"), RecordIO("memory://doc/mix/b/b-*")],
...            [0.5, 0.5], seed=0, stop="all")
>>> sorted(both()) == sorted([("a", i) for i in range(4)] + [("b", i) for i in range(4)])
True
>>> parts = index_split(RecordIO("memory://doc/mix/a/a-*"), {"train": 0.75, "val": 0.25})
>>> list(parts["train"]()), list(parts["val"]())
([('a', 0), ('a', 1), ('a', 2)], [('a', 3)])
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from itertools import islice
from typing import Any, Literal, Protocol

import numpy as np

from ..errors import InvalidArgumentError
from .checkpoint import Fields, is_int, slot_range
from .ranks import Piece
from .reader import RecordIO
from .shuffling import check_seed

__all__ = ["DRAW_BLOCK", "IndexSplit", "Mix", "index_split", "mix"]

#: uniform numbers drawn at a time (one block per ``(seed, epoch, block)``)
DRAW_BLOCK = 4096
MIX_STATE_VERSION = 1
SPLIT_STATE_VERSION = 1


class Source(Protocol):
    """What :func:`mix` reads from: a reader creator with epochs and states
    (:class:`~recprep.RecordIO`, :class:`IndexSplit`, another :class:`Mix`)."""

    def __call__(self) -> Iterator[Any]: ...
    def set_epoch(self, epoch: int) -> None: ...
    def state_dict(self) -> dict[str, Any]: ...
    def load_state_dict(self, state: Mapping[str, Any]) -> None: ...


def _draws(seed: int, epoch: int, block: int) -> np.ndarray:
    """The uniform numbers of draw block ``block`` of pass ``epoch``."""
    keys = [seed, epoch, block]
    return np.random.Generator(np.random.PCG64(np.random.SeedSequence(keys))).random(DRAW_BLOCK)


def choices(weights: Sequence[float], active: Sequence[bool], u: np.ndarray) -> np.ndarray:
    """The source each number of ``u`` picks among the ``active`` sources by weight.

    >>> choices([1, 3], [True, True], np.array([0.1, 0.3, 0.9])).tolist()
    [0, 1, 1]
    >>> choices([1, 3], [True, False], np.array([0.9])).tolist()
    [0]
    """
    w = np.where(np.asarray(active, dtype=bool), np.asarray(weights, dtype=np.float64), 0.0)
    cdf = np.cumsum(w) / w.sum()
    picked = np.searchsorted(cdf, u, side="right")
    last = int(np.flatnonzero(w)[-1])  # rounding of the last cdf value
    return np.minimum(picked, last)


class Mix:
    """A reader creator: ``mix()`` gives a fresh pass over several sources mixed by
    weight. Made by :func:`mix`; see there."""

    def __init__(
        self, sources: Sequence[Source], weights: Sequence[float], *, seed: int,
        stop: Literal["first", "all"] = "first",
    ) -> None:
        sources = list(sources)
        if not sources:
            raise InvalidArgumentError("mix needs at least one source, got none")
        weights = list(weights)
        if len(weights) != len(sources):
            raise InvalidArgumentError(
                f"mix needs one weight per source: {len(sources)} sources, "
                f"{len(weights)} weights"
            )
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool)
                   and math.isfinite(w) and w > 0 for w in weights):
            raise InvalidArgumentError(
                f"mix weights must be positive finite numbers, got {weights!r}"
            )
        if stop not in ("first", "all"):
            raise InvalidArgumentError(f"stop must be 'first' or 'all', got {stop!r}")
        self.sources = sources
        self.weights = [float(w) for w in weights]
        self.seed = check_seed(seed)
        self.stop = stop
        self._epoch: int | None = None
        self._passes = 0
        self._resume: dict[str, Any] | None = None
        self._position: dict[str, Any] | None = None  # of the latest pass

    def __repr__(self) -> str:
        return (f"Mix({len(self.sources)} sources, weights={self.weights}, "
                f"seed={self.seed}, stop={self.stop!r})")

    @property
    def epoch(self) -> int:
        """The epoch of the next pass: the one :meth:`set_epoch` set, or else the number
        of passes made so far."""
        return self._passes if self._epoch is None else self._epoch

    def set_epoch(self, epoch: int) -> None:
        """Make every following pass one of ``epoch`` (the sources' passes too)."""
        self._epoch = check_seed(epoch, "epoch")

    def __call__(self) -> Iterator[Any]:
        """A fresh pass; after :meth:`load_state_dict`, the rest of the interrupted one.

        Every source is set to this pass's epoch (:meth:`set_epoch`) and its pass begun
        here (nothing is read before the first instance is asked for), so a state taken
        from now on holds the sources' states of this pass.
        """
        epoch = self.epoch
        if self._epoch is None:
            self._passes += 1
        resume, self._resume = self._resume, None
        if resume is not None and resume["epoch"] == epoch and not resume["done"]:
            step, active = int(resume["step"]), [bool(a) for a in resume["active"]]
        else:
            step, active = 0, [True] * len(self.sources)
        for source in self.sources:
            source.set_epoch(epoch)
        position = self._position = {"epoch": epoch, "step": step, "active": active,
                                     "done": False}
        streams = [source() if on else None
                   for source, on in zip(self.sources, active, strict=True)]
        return self._pass(epoch, position, streams)

    __iter__ = __call__

    def _pass(self, epoch: int, position: dict[str, Any],
              streams: list[Iterator[Any] | None]) -> Iterator[Any]:
        active: list[bool] = position["active"]
        block, picks = -1, np.empty(0, dtype=np.int64)
        try:
            while any(active):
                step = position["step"]
                if step // DRAW_BLOCK != block:
                    block = step // DRAW_BLOCK
                    u = _draws(self.seed, epoch, block)
                    picks = choices(self.weights, active, u)
                k = int(picks[step % DRAW_BLOCK])
                stream = streams[k]
                assert stream is not None
                item = next(stream, _END)
                if item is _END:
                    if self.stop == "first":
                        break
                    active[k], streams[k] = False, None
                    if any(active):  # the same numbers, the weights renormalised
                        picks = choices(self.weights, active, _draws(self.seed, epoch, block))
                    continue
                position["step"] = step + 1
                yield item
            position["done"] = True
        finally:
            for stream in streams:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()

    # -- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """The state of the pass in progress: JSON-serialisable, the mixer's position
        (epoch, step, active sources) and each source's own state.

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/mixstate/a", list(range(6)), 2, "a")
        >>> _ = convert("memory://doc/mixstate/b", list(range(10, 16)), 1, "b")
        >>> def make():
        ...     return mix([RecordIO("memory://doc/mixstate/a/a-*", shuffle=True, seed=1),
        ...                 RecordIO("memory://doc/mixstate/b/b-*")], [1, 2], seed=5,
        ...                stop="all")
        >>> one = make(); stream = one(); head = [next(stream) for _ in range(4)]
        >>> other = make(); other.load_state_dict(one.state_dict())
        >>> list(other()) == list(stream)
        True
        """
        if self._resume is not None:
            return dict(self._resume)
        position = self._position
        if position is None:
            position = {"epoch": self.epoch, "step": 0, "active": [True] * len(self.sources),
                        "done": False}
        return {
            "recprep_mix": MIX_STATE_VERSION, "seed": self.seed, "stop": self.stop,
            "weights": list(self.weights), "epoch": position["epoch"],
            "epoch_set": self._epoch is not None, "step": position["step"],
            "active": list(position["active"]), "done": position["done"],
            "sources": [source.state_dict() for source in self.sources],
        }

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Make the next pass continue the one ``state`` (from :meth:`state_dict`)
        describes; each source loads its own state. The mix must have as many sources,
        the same weights and ``stop``; it takes the state's seed.

        Every field is checked before anything changes (a state read back from a
        checkpoint is untrusted): its type and range, the step against the sources'
        own positions, and each source's state by that source (recprep's readers, splits
        and mixes check theirs without loading them), so a state that fails leaves the
        mix and its sources as they were.

        Raises
        ------
        InvalidArgumentError
            When the state is not a mix state of this version or is of another mix, or a
            field is damaged (the message names it, what was expected and what was found).
        """
        state = self._checked_state(state)
        self.seed = state["seed"]
        epoch = state["epoch"]
        if not state["done"]:  # a finished pass: the sources start the next afresh
            for source, sub in zip(self.sources, state["sources"], strict=True):
                source.load_state_dict(sub)
        if state["epoch_set"]:
            self._epoch = epoch
        else:
            self._epoch, self._passes = None, epoch + 1 if state["done"] else epoch
        self._position = None
        self._resume = None if state["done"] else state

    def _checked_state(self, state: Any) -> dict[str, Any]:
        """``state`` checked for :meth:`load_state_dict` (the sources' states too, by the
        sources that can check without loading); nothing is changed."""
        if not isinstance(state, Mapping) or not (
            is_int(state.get("recprep_mix")) and state["recprep_mix"] == MIX_STATE_VERSION
        ):
            raise InvalidArgumentError(
                f"expected a mix state (recprep_mix={MIX_STATE_VERSION}), got "
                f"{type(state).__name__} with recprep_mix="
                f"{state.get('recprep_mix') if isinstance(state, Mapping) else None!r}"
            )
        fields = Fields(state, "a mix state")
        n = len(self.sources)
        weights = fields.sequence("weights")
        if not all(isinstance(w, (int, float)) and not isinstance(w, bool) for w in weights):
            fields.fail("weights", "a list of numbers")
        mine = {"weights": self.weights, "stop": self.stop}
        differs = [f"{key} (the state's {state.get(key)!r}, this mix's {value!r})"
                   for key, value in mine.items() if state.get(key) != value]
        if not isinstance(state.get("sources"), list) or len(state["sources"]) != n:
            found = state.get("sources")
            count = len(found) if isinstance(found, list) else repr(found)
            differs.append(f"sources (the state has {count}, this mix {n})")
        if differs:
            raise InvalidArgumentError(
                "the state is of another mix: it differs in " + ", ".join(differs)
            )
        out = dict(state)
        out["seed"] = fields.integer("seed")
        epoch, step = fields.integer("epoch"), fields.integer("step")
        fields.flag("epoch_set")
        done = fields.flag("done")
        active = fields.sequence("active", n)
        if not all(isinstance(a, bool) for a in active):
            fields.fail("active", f"a list of {n} bools, one per source")
        if self.stop == "first" and not all(active):
            fields.fail("active", "all true: with stop='first' no source drops out")
        if not done and not any(active):
            fields.fail("active", "at least one true while the pass is not done")
        total, known, exact = 0, True, True  # what the sources' states say they yielded
        for k, (source, sub) in enumerate(zip(self.sources, state["sources"], strict=True)):
            check = getattr(source, "_checked_state", None)
            if check is None:  # a source of another kind checks its state as it loads
                known = False
                continue
            try:
                sub = check(sub)
            except InvalidArgumentError as error:
                raise InvalidArgumentError(f"a mix state's source {k}: {error}") from None
            if not active[k] and not (sub["epoch"] == epoch and sub.get("done")):
                fields.fail("active", f"true for source {k}: a source drops out when its "
                            "pass is over, and its state says it is not", active)
            if sub["epoch"] != epoch:  # dropped when the pass begins: of no pass of it
                if step:
                    fields.fail("sources", f"states of epoch {epoch} (the mix's) once it "
                                f"has stepped; source {k}'s is of epoch {sub['epoch']}",
                                state["sources"][k])
                continue
            count = sub.get("step", sub.get("yielded"))  # None: a combined reader state
            if count is None:
                known = False
            else:
                total += count
                exact = exact and _counts_exactly(source)
        if known and (step > total or (exact and step != total)):
            fields.fail("step", f"{'' if exact else 'at most '}{total}, the instances its "
                        "sources' states say they yielded")
        return out


def _counts_exactly(source: Any) -> bool:
    """Whether ``source``'s state counts the instances it handed out, no more: a reader
    that skips damaged records counts the positions it passed (those too)."""
    return not (isinstance(source, RecordIO) and source.on_corrupt != "raise")


_END = object()


def mix(
    readers: Sequence[Source], weights: Sequence[float], *, seed: int,
    stop: Literal["first", "all"] = "first",
) -> Mix:
    """Read several readers as one stream, each step drawn from one by ``weights``.

    Parameters
    ----------
    readers
        :class:`~recprep.RecordIO` readers (any shuffle, rank, worker), :class:`IndexSplit`
        views, or other mixes. The mix owns them: each pass sets their epoch to its own.
    weights
        Positive numbers, one per reader: the share of the steps that read it (they need
        not sum to 1).
    seed
        Which reader each step reads is a function of ``(seed, epoch, step)`` and the
        readers still active, so the same seed gives the same mix, and
        :meth:`Mix.state_dict` / :meth:`Mix.load_state_dict` resume it exactly.
    stop
        ``"first"``: a pass ends when the reader a step draws has run out (the others keep
        what they had not yielded). ``"all"``: a reader that runs out drops out, the
        weights of the others are renormalised, and the pass ends when all have run out.

    Examples
    --------
    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/mixfn/x", [("x", i) for i in range(3)], 1, "x")
    >>> _ = convert("memory://doc/mixfn/y", [("y", i) for i in range(3)], 1, "y")
    >>> read = mix([RecordIO("memory://doc/mixfn/x/x-*"), RecordIO("memory://doc/mixfn/y/y-*")],
    ...            [1, 1], seed=3, stop="all")
    >>> [i for s, i in read() if s == "x"], [i for s, i in read() if s == "y"]
    ([0, 1, 2], [0, 1, 2])
    """
    return Mix(readers, weights, seed=seed, stop=stop)


# -- splits by instance index -------------------------------------------------------------


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
