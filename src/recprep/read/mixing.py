"""Several sets read as one weighted stream: :func:`mix`.

Step ``s`` of pass ``epoch`` draws its source from a uniform number ``u``:
the numbers come in blocks of :data:`DRAW_BLOCK`, block ``k`` drawn from
``(seed, epoch, k)`` (NumPy ``SeedSequence``), and ``u`` picks a source by the
cumulative weights of the sources still active. Which source step ``s`` reads is thus a
function of the seed, the epoch, the step and the set of active sources, so a state that
holds the step, the active sources and each source's own state resumes exactly. Each
source's instances come in that source's own order (its shuffle, rank and worker split).

The weights may follow a schedule (:mod:`recprep.read.schedules`): the weights of step
``s`` are the schedule's at position ``s``, so a stop anywhere, next to a change point
too, resumes exactly; weights only choose which source a step reads, so changing them
never skips or repeats an instance of a source. :meth:`Mix.combine_states` makes one
state of every rank's (:mod:`recprep.read.mixstates`) that any world size loads.

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/mix/a", [("a", i) for i in range(4)], 2, "a")
>>> _ = convert("memory://doc/mix/b", [("b", i) for i in range(4)], 1, "b")
>>> both = mix([RecordIO("memory://doc/mix/a/a-*"), RecordIO("memory://doc/mix/b/b-*")],
...            [0.5, 0.5], seed=0, stop="all")
>>> sorted(both()) == sorted([("a", i) for i in range(4)] + [("b", i) for i in range(4)])
True
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any, Literal, Protocol

import numpy as np

from ..errors import InvalidArgumentError, ResumeWarning, warn
from .checkpoint import Fields, is_int
from .mixstates import combine_mix
from .reader import RecordIO
from .schedules import Schedule, WeightsLike, is_description
from .shuffling import check_seed

__all__ = ["DRAW_BLOCK", "Mix", "MixSource", "mix"]

#: uniform numbers drawn at a time (one block per ``(seed, epoch, block)``)
DRAW_BLOCK = 4096
MIX_STATE_VERSION = 1


class MixSource(Protocol):
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
    """The source each number of ``u`` picks among the ``active`` sources by weight (the
    active ones alike when all their weights are 0).

    >>> choices([1, 3], [True, True], np.array([0.1, 0.3, 0.9])).tolist()
    [0, 1, 1]
    >>> choices([1, 3], [True, False], np.array([0.9])).tolist()
    [0]
    >>> choices([0, 0, 1], [True, True, False], np.array([0.4, 0.6])).tolist()
    [0, 1]
    """
    on = np.asarray(active, dtype=bool)
    w = np.where(on, np.asarray(weights, dtype=np.float64), 0.0)
    if not w.any():
        w = on.astype(np.float64)
    cdf = np.cumsum(w) / w.sum()
    picked = np.searchsorted(cdf, u, side="right")
    last = int(np.flatnonzero(w)[-1])  # rounding of the last cdf value
    return np.minimum(picked, last)


class Mix:
    """A reader creator: ``mix()`` gives a fresh pass over several sources mixed by
    weight. Made by :func:`mix`; see there."""

    def __init__(
        self, sources: Sequence[MixSource], weights: WeightsLike, *, seed: int,
        stop: Literal["first", "all"] = "first",
        on_new_weights: Literal["raise", "warn"] = "raise",
    ) -> None:
        sources = list(sources)
        if not sources:
            raise InvalidArgumentError("mix needs at least one source, got none")
        if (not callable(weights) and isinstance(weights, Sequence) and weights
                and all(isinstance(w, (int, float)) for w in weights)
                and len(weights) != len(sources)):
            raise InvalidArgumentError(
                f"mix needs one weight per source: {len(sources)} sources, "
                f"{len(weights)} weights"
            )
        if stop not in ("first", "all"):
            raise InvalidArgumentError(f"stop must be 'first' or 'all', got {stop!r}")
        if on_new_weights not in ("raise", "warn"):
            raise InvalidArgumentError(
                f"on_new_weights must be 'raise' or 'warn', got {on_new_weights!r}")
        self.sources = sources
        self.schedule = Schedule(weights, len(sources))
        self.seed = check_seed(seed)
        self.stop = stop
        self.on_new_weights = on_new_weights
        self._offset = 0  # the step the sources' states count from (after a combine)
        self._epoch: int | None = None
        self._passes = 0
        self._resume: dict[str, Any] | None = None
        self._position: dict[str, Any] | None = None  # of the latest pass

    def __repr__(self) -> str:
        return (f"Mix({len(self.sources)} sources, weights={self.schedule!r}, "
                f"seed={self.seed}, stop={self.stop!r})")

    @property
    def weights(self) -> Any:
        """The weights as a state holds them: a list of numbers, a list of ``[start,
        weights]`` pairs, or (a callable) the weights it gives at position 0."""
        described = self.schedule.describe(0)
        return described["weights"] if isinstance(described, dict) else described

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
        over = False
        if resume is not None and resume["epoch"] == epoch:
            step, active = int(resume["step"]), [bool(a) for a in resume["active"]]
            self._offset = int(resume.get("offset", 0))
            # a pass this mix had finished, begun again (a training loop sets the epoch it
            # stopped in): nothing more of it, as a reader's gives
            over = bool(resume["done"])
        else:
            step, active, self._offset = 0, [True] * len(self.sources), 0
        position = self._position = {"epoch": epoch, "step": step, "active": active,
                                     "done": over}
        if over:
            return iter(())
        for source in self.sources:
            source.set_epoch(epoch)
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
                    picks = self._picks(epoch, block, active)
                k = int(picks[step % DRAW_BLOCK])
                stream = streams[k]
                assert stream is not None
                item = next(stream, _END)
                if item is _END:
                    if self.stop == "first":
                        break
                    active[k], streams[k] = False, None
                    if any(active):  # the same numbers, the weights renormalised
                        picks = self._picks(epoch, block, active)
                    continue
                position["step"] = step + 1
                yield item
            position["done"] = True
        finally:
            for stream in streams:
                close = getattr(stream, "close", None)
                if close is not None:
                    close()

    def _picks(self, epoch: int, block: int, active: list[bool]) -> np.ndarray:
        """The source each step of draw block ``block`` reads, by the schedule's weights
        at that step among the ``active`` sources."""
        u = _draws(self.seed, epoch, block)
        lo = block * DRAW_BLOCK
        if self.schedule.constant:
            return choices(self.schedule.values[0], active, u)
        picks = np.empty(DRAW_BLOCK, dtype=np.int64)
        for a, b, weights in self.schedule.runs(lo, lo + DRAW_BLOCK):
            picks[a - lo:b - lo] = choices(weights, active, u[a - lo:b - lo])
        return picks

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
        state = {
            "recprep_mix": MIX_STATE_VERSION, "seed": self.seed, "stop": self.stop,
            "weights": self.schedule.describe(position["step"]), "epoch": position["epoch"],
            "epoch_set": self._epoch is not None, "step": position["step"],
            "active": list(position["active"]), "done": position["done"],
            "sources": [source.state_dict() for source in self.sources],
        }
        if self._position is not None and self._offset:
            state["offset"] = self._offset
        return state

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
            When the state is not a mix state of this version or is of another mix (other
            weights too, unless ``on_new_weights="warn"``: then a
            :class:`~recprep.errors.ResumeWarning`), or a field is damaged (the message
            names it, what was expected and what was found).
        """
        state = self._checked_state(state)
        reweighted = self.schedule.differs(state["weights"], state["step"])
        if reweighted is not None:
            warn(ResumeWarning(
                f"the mix state was saved under other weights: it differs in {reweighted}; "
                "every source goes on where it was (no instance lost or repeated), the "
                "draws from here follow this mix's weights"))
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
        self._resume = state  # done: a pass of its epoch gives nothing more

    @staticmethod
    def combine_states(states: Sequence[Mapping[str, Any]]) -> dict[str, Any]:
        """One state from the states of every rank (and DataLoader worker) of a mixing
        job: load it into every rank of the new job, whatever its ``world_size``.

        Each source's states combine as that source's do (shuffled
        :class:`~recprep.RecordIO` readers, :class:`~recprep.read.splits.IndexSplit`
        splits shuffled or not, mixes), so the new ranks read, this epoch, every instance
        of every source none of the old ranks had handed out, exactly once with
        ``stop="all"`` (at most once with ``stop="first"``), each source in its own
        order. The new ranks draw from the furthest step any old rank had reached, every
        source active again, so the schedule goes on from there; after that, a stop and
        resume with the same world size is exact again. An unshuffled ``RecordIO`` source
        can't be combined: wrap it as ``index_split(reader, {"all": 1.0})["all"]``.

        >>> from recprep import convert, RecordIO
        >>> _ = convert("memory://doc/mixcombine/a", list(range(8)), 2, "a")
        >>> _ = convert("memory://doc/mixcombine/b", list(range(10, 14)), 1, "b")
        >>> def make(rank, world):
        ...     return mix([RecordIO(f"memory://doc/mixcombine/{n}/{n}-*", shuffle=True,
        ...                          seed=2, rank=rank, world_size=world) for n in "ab"],
        ...                [2, 1], seed=9, stop="all")
        >>> old = [make(r, 2) for r in (0, 1)]
        >>> streams = [m() for m in old]
        >>> seen = [next(streams[0]), next(streams[0]), next(streams[1])]
        >>> both = Mix.combine_states([m.state_dict() for m in old])
        >>> new = [make(r, 3) for r in range(3)]
        >>> for m in new:
        ...     m.load_state_dict(both)
        >>> sorted(seen + [x for m in new for x in m()]) == list(range(8)) + list(range(10, 14))
        True
        """
        return combine_mix(states)

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
        step = fields.integer("step")
        offset = fields.integer("offset", 0, step) if "offset" in state else 0
        differs = [] if state.get("stop") == self.stop else [
            f"stop (the state's {state.get('stop')!r}, this mix's {self.stop!r})"]
        if not is_description(state.get("weights")):
            fields.fail("weights", "a list of numbers, of [start, weights] pairs, or a "
                        "callable's {'callable': name, 'weights': numbers}")
        reweighted = self.schedule.differs(state.get("weights"), step)
        if reweighted is not None and self.on_new_weights == "raise":
            differs.append(reweighted + " (to go on under new weights, every source where "
                           "it was, make the mix with on_new_weights='warn')")
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
        epoch = fields.integer("epoch")
        fields.flag("epoch_set")
        done = fields.flag("done")
        active = fields.sequence("active", n)
        if not all(isinstance(a, bool) for a in active):
            fields.fail("active", f"a list of {n} bools, one per source")
        if self.stop == "first" and not all(active):
            fields.fail("active", "all true: with stop='first' no source drops out")
        if not done and not any(active):
            fields.fail("active", "at least one true while the pass is not done")
        self._check_sources(fields, epoch, step - offset, active)
        return out

    def _check_sources(self, fields: Fields, epoch: int, step: int, active: list[bool]
                       ) -> None:
        """The sources' states of a mix state (``fields``), each checked by its source
        when it can check without loading, and against the mix's ``epoch``, ``step`` (since
        the sources' states began counting) and ``active`` sources."""
        state = fields.state
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
            count = sub.get("yielded")  # None: a combined state
            if "recprep_mix" in sub:
                count = sub["step"] - sub.get("offset", 0)
            if count is None:
                known = False
            else:
                total += count
                exact = exact and _counts_exactly(source)
        if known and (step > total or (exact and step != total)):
            fields.fail("step", f"{'' if exact else 'at most '}{total}, the instances its "
                        "sources' states say they yielded")


def _counts_exactly(source: Any) -> bool:
    """Whether ``source``'s state counts the instances it handed out, no more: a reader
    that skips damaged records counts the positions it passed (those too)."""
    return not (isinstance(source, RecordIO) and source.on_corrupt != "raise")


_END = object()


def mix(
    readers: Sequence[MixSource], weights: WeightsLike, *, seed: int,
    stop: Literal["first", "all"] = "first",
    on_new_weights: Literal["raise", "warn"] = "raise",
) -> Mix:
    """Read several readers as one stream, each step drawn from one by ``weights``.

    Parameters
    ----------
    readers
        :class:`~recprep.RecordIO` readers (any shuffle, rank, worker), :class:`IndexSplit`
        views, or other mixes. The mix owns them: each pass sets their epoch to its own.
    weights
        Positive numbers, one per reader: the share of the steps that read it (they need
        not sum to 1). Or a schedule (:mod:`recprep.read.schedules`): a list of
        ``(start, weights)`` pairs, ``start`` ints rising from 0, or a callable
        ``f(position) -> weights`` (pure: it is called ahead). The position is the number
        of instances this mix has handed out in the pass (per rank and worker; 0 at the
        start of each epoch); scheduled weights may be 0, one at least positive. Weights
        only choose which reader a step reads: each reader goes on where it was, so a
        change of weights never skips or repeats an instance of a reader.
    seed
        Which reader each step reads is a function of ``(seed, epoch, step)`` and the
        readers still active, so the same seed gives the same mix, and
        :meth:`Mix.state_dict` / :meth:`Mix.load_state_dict` resume it exactly.
    stop
        ``"first"``: a pass ends when the reader a step draws has run out (the others keep
        what they had not yielded). ``"all"``: a reader that runs out drops out, the
        weights of the others are renormalised, and the pass ends when all have run out.
    on_new_weights
        What :meth:`Mix.load_state_dict` does with a state saved under other weights (or
        another schedule): ``"raise"`` (an :class:`~recprep.errors.InvalidArgumentError`)
        or ``"warn"`` (a :class:`~recprep.errors.ResumeWarning`; every reader goes on where
        it was, the draws follow the new weights).

    Examples
    --------
    >>> from recprep import convert, RecordIO
    >>> _ = convert("memory://doc/mixfn/x", [("x", i) for i in range(3)], 1, "x")
    >>> _ = convert("memory://doc/mixfn/y", [("y", i) for i in range(3)], 1, "y")
    >>> read = mix([RecordIO("memory://doc/mixfn/x/x-*"), RecordIO("memory://doc/mixfn/y/y-*")],
    ...            [1, 1], seed=3, stop="all")
    >>> [i for s, i in read() if s == "x"], [i for s, i in read() if s == "y"]
    ([0, 1, 2], [0, 1, 2])

    A schedule: only ``x`` for the first two instances of each pass, then ``y`` only.

    >>> phases = mix([RecordIO("memory://doc/mixfn/x/x-*"),
    ...               RecordIO("memory://doc/mixfn/y/y-*")],
    ...              [(0, [1, 0]), (2, [0, 1])], seed=3, stop="all")
    >>> list(phases())
    [('x', 0), ('x', 1), ('y', 0), ('y', 1), ('y', 2), ('x', 2)]
    """
    return Mix(readers, weights, seed=seed, stop=stop, on_new_weights=on_new_weights)
