"""The state of a reading pass: what :meth:`recprep.RecordIO.state_dict` gives back.

A state is a small JSON-serialisable ``dict``, versioned by its ``"recprep_state"`` key.
It names the pass (``seed``, ``epoch``, the shuffle's block size, a fingerprint of the
data: its record and file counts) and the position in it, never any data.

**Shuffled passes** read the *epoch order* ``G``: the set's records cut into *blocks* of
``block`` records (runs of records within files, sized from the record counts alone), the
blocks in a permutation drawn from ``(seed, epoch)``, each block's records in a
permutation drawn from ``(seed, epoch, block)``. ``G`` depends on the data, the seed, the
epoch and the block size only, never on ``world_size`` or the number of workers. A pass
may start with *consumed* positions of ``G`` (``base``, intervals ``[a, b)``: what an
interrupted job read); the rest is laid end to end and cut into one contiguous slice per
rank (and per worker within a rank, :func:`slot_range`). A reader's state adds how many
instances of its slice it has ``yielded``; what it has consumed is ``base`` plus the
first ``yielded`` positions of its slice, as intervals of ``G`` (:func:`consumed`), so
states of any ranks combine by a union (:func:`combine`).

**Unshuffled passes** are read in the set's order; their state is the count of
instances ``yielded`` by that rank and worker, and loads only into the same split.

A state comes back from a user's checkpoint: :func:`check_state` checks every field (its
type, its range, and against the other fields) with :class:`Fields`, which mix states
and TaskQueue checkpoints use too, so that whatever is wrong raises
:class:`~recprep.errors.InvalidArgumentError` naming the field, never a foreign
exception or a pass that silently skips or repeats data.

A pass stopped anywhere resumes exactly:

>>> from recprep import convert, RecordIO
>>> _ = convert("memory://doc/state", list(range(6)), 2, "s")
>>> read = RecordIO("memory://doc/state/s-*", shuffle=True, seed=3, shuffle_buffer=4)
>>> stream = read()
>>> head = [next(stream), next(stream)]
>>> state = read.state_dict()
>>> again = RecordIO("memory://doc/state/s-*", shuffle=True, shuffle_buffer=4)
>>> again.load_state_dict(state)
>>> rest = list(again())
>>> rest == list(stream), sorted(head + rest)
(True, [0, 1, 2, 3, 4, 5])
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from operator import length_hint
from typing import Any, NoReturn

from ..errors import InvalidArgumentError, ResumeWarning, warn
from .passes import Share
from .positions import Interval, covered, merge, remaining, slot_range
from .shuffling import check_seed

__all__ = [
    "STATE_VERSION",
    "Fields",
    "ResumeWarning",
    "check_state",
    "combine",
    "consumed",
    "merge",
    "remaining",
    "slot_range",
]

STATE_VERSION = 1



_COMMON = ("recprep_state", "shuffle", "seed", "epoch", "epoch_set", "records", "files")
_SHUFFLED = ("block", "permuted", "base")
_SPLIT = ("rank", "world_size", "worker", "num_workers", "yielded", "done")
_MISSING: Any = object()


def consumed(state: Mapping[str, Any]) -> list[Interval]:
    """The positions of the epoch order that the reader of a shuffled ``state`` (or the
    readers of a combined one) had consumed."""
    base = merge(state["base"])
    if state.get("rank") is None:
        return base
    left = state["records"] - covered(base)
    lo, _ = slot_range(left, state["rank"], state["world_size"], state["worker"],
                       state["num_workers"], state.get("align", 1))
    return merge(base + remaining(base, state["records"], lo, lo + state["yielded"]))


class Fields:
    """Type and range checks for the fields of a loaded state (a reader's, a mix's, a task
    queue's...): anything read back from a checkpoint is untrusted, so each field must be
    exactly what recprep writes, or :class:`~recprep.errors.InvalidArgumentError` names the
    field, what was expected and what was found.

    >>> Fields({"done": "no"}, "a reader state").flag("done")
    Traceback (most recent call last):
    ...
    recprep.errors.InvalidArgumentError: a reader state's 'done' must be a bool (true or \
false), found 'no' (str)
    """

    def __init__(self, state: Mapping[str, Any], what: str) -> None:
        self.state = state
        self.what = what

    def fail(self, key: str, expected: str, found: Any = _MISSING) -> NoReturn:
        """Raise: ``key`` is not ``expected`` (``found``: its value, by default)."""
        value = self.state.get(key) if found is _MISSING else found
        raise InvalidArgumentError(
            f"{self.what}'s {key!r} must be {expected}, found {_brief(value)}"
        )

    def integer(self, key: str, low: int = 0, high: int | None = None) -> int:
        """The field, an int (not a bool) with ``low <= it <= high``."""
        found: Any = self.state.get(key)
        within = f">= {low}" if high is None else f"in [{low}, {high}]"
        if not is_int(found) or found < low or (high is not None and found > high):
            self.fail(key, f"an int {within}")
        return int(found)

    def flag(self, key: str) -> bool:
        """The field, a bool."""
        value = self.state.get(key)
        if not isinstance(value, bool):
            self.fail(key, "a bool (true or false)")
        return value

    def sequence(self, key: str, length: int | None = None) -> list[Any]:
        """The field, a list (of ``length`` items)."""
        value = self.state.get(key)
        if not isinstance(value, list) or (length is not None and len(value) != length):
            self.fail(key, "a list" if length is None else f"a list of {length} items")
        return value


def is_int(value: Any) -> bool:
    """Whether ``value`` is an int and not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def _brief(value: Any) -> str:
    if value is _MISSING:
        return "nothing (the key is missing)"
    text = repr(value)
    return (text if len(text) <= 100 else text[:97] + "...") + f" ({type(value).__name__})"


def check_state(state: Any) -> dict[str, Any]:
    """A normalised copy of ``state``; raise unless it is a state this version can load.

    Every field is checked for its type and range, and the fields against each other:
    ``base`` is sorted, disjoint intervals within the records, and a rank's ``yielded``
    is at most its share of what ``base`` leaves (a shuffled state; the reader checks an
    unshuffled one's against its share, which needs the files).
    """
    if not isinstance(state, Mapping) or "recprep_state" not in state:
        raise InvalidArgumentError(
            f"expected a reader state (a dict from RecordIO.state_dict()), got "
            f"{type(state).__name__} {state!r:.100}"
        )
    version = state["recprep_state"]
    if not is_int(version) or version != STATE_VERSION:
        raise InvalidArgumentError(
            f"a reader state of version {version!r} can't be loaded by this recprep (it "
            f"reads version {STATE_VERSION})"
        )
    fields = Fields(state, "a reader state")
    shuffle = fields.flag("shuffle") if "shuffle" in state else None
    keys = _COMMON + (_SHUFFLED if shuffle else ()) + (
        _SPLIT if "rank" in state or not shuffle else ()
    )
    missing = [k for k in keys if k not in state]
    if missing:
        raise InvalidArgumentError(f"a reader state lacks {missing}: it is damaged")
    out = {k: state[k] for k in keys}
    for key in ("seed", "epoch", "records", "files"):
        fields.integer(key)
    fields.flag("epoch_set")
    records = out["records"]
    if shuffle:
        fields.integer("block", 1)
        fields.flag("permuted")
        out["base"] = _base(fields, records)
    if "rank" in out:
        world, workers = fields.integer("world_size", 1), fields.integer("num_workers", 1)
        fields.integer("rank", 0, world - 1)
        fields.integer("worker", 0, workers - 1)
        if "align" in state:
            out["align"] = fields.integer("align", 1)
        fields.integer("yielded")
        fields.flag("done")
        if shuffle:
            left = records - covered(out["base"])
            lo, hi = slot_range(left, out["rank"], world, out["worker"], workers,
                                out.get("align", 1))
            if out["yielded"] > hi - lo:
                fields.fail("yielded", f"at most {hi - lo}, the share of rank {out['rank']} "
                            f"of {world} (worker {out['worker']} of {workers}) of the "
                            f"{left} positions its 'base' leaves of {records}")
    return out


def _base(fields: Fields, records: int) -> list[list[int]]:
    """A state's ``base``: sorted, disjoint, non-empty ``[start, end)`` intervals within
    ``0 .. records`` (as :func:`merge` leaves them), as lists."""
    base = fields.state["base"]
    expected = (f"a list of sorted, disjoint [start, end) intervals with 0 <= start < end "
                f"<= {records} (the records)")
    if not isinstance(base, list) or not all(
        isinstance(i, (list, tuple)) and len(i) == 2 and all(map(is_int, i)) for i in base
    ):
        fields.fail("base", expected)
    intervals = [(int(a), int(b)) for a, b in base]
    if merge(intervals) != intervals or any(a < 0 or b > records for a, b in intervals):
        fields.fail("base", expected)
    return [list(i) for i in intervals]


def combine(states: Sequence[Any]) -> dict[str, Any]:
    """One state that every rank of a new world loads: the union of what the ranks of
    ``states`` (shuffled passes of one epoch of one set) had consumed."""
    if not states:
        raise InvalidArgumentError("combine_states needs at least one state, got none")
    checked = [check_state(s) for s in states]
    first = checked[0]
    unshuffled = [k for k, s in enumerate(checked) if not s["shuffle"]]
    if unshuffled:
        raise InvalidArgumentError(
            f"state {unshuffled[0]} is of an unshuffled pass: only states of shuffled "
            "passes (shuffle=True) combine: an unshuffled pass "
            "reads each rank's files in the set's order, which a new world_size would "
            "deal out differently; resume it with the same rank and world_size"
        )
    same = ("shuffle", "seed", "epoch", "block", "permuted", "records", "files")
    for k, other in enumerate(checked[1:], 1):
        differs = [key for key in same if other[key] != first[key]]
        if differs:
            raise InvalidArgumentError(
                f"states 0 and {k} are of different passes: they differ in "
                + ", ".join(f"{key} ({first[key]!r} != {other[key]!r})" for key in differs)
            )
    union = merge(i for s in checked for i in consumed(s))
    out = {key: first[key] for key in _COMMON + _SHUFFLED}
    out["epoch_set"] = any(s["epoch_set"] for s in checked)
    out["base"] = [list(i) for i in union]
    return out


def size(state: Mapping[str, Any]) -> int:
    """The bytes of ``state`` as compact JSON."""
    return len(json.dumps(state, separators=(",", ":")))


# -- a reader's passes: their epochs, the state the next one resumes, the latest's progress --


@dataclass
class PassProgress:
    """Where the latest pass of a reader is: its epoch, the positions consumed before it
    started (``base``, shuffled passes) and the places it has handed out: ``counted`` of
    them, less what is left in ``items``, the iterator over the block being handed out
    one at a time (counting per block costs nothing per instance). Records lost to damage
    count as places (see :mod:`recprep.read.streams`), so a resumed pass starts where
    this one was."""

    epoch: int
    base: list[Interval] = field(default_factory=list)
    counted: int = 0
    done: bool = False
    items: Iterator[Any] | None = None

    @property
    def yielded(self) -> int:
        return self.counted - (0 if self.items is None else length_hint(self.items))


@dataclass
class Fingerprint:
    """What a state says of the pass it belongs to, beside its position: the reader's
    :class:`~recprep.read.passes.Share` (shuffle, seed, block, split) and the data (its
    record and file counts)."""

    share: Share
    records: int
    files: int


class PassState:
    """The passes of one reader: the epoch of the next one (``fixed`` by ``set_epoch``, or
    the count of ``passes`` made), a loaded state the next pass resumes (``resume``, once),
    and the :class:`PassProgress` of the latest pass — what :meth:`state_dict` describes.

    >>> from recprep.read.passes import Share
    >>> passes = PassState()
    >>> progress = passes.start(lambda state: None)
    >>> progress.counted = 3  # three instances handed out
    >>> state = passes.state_dict(Fingerprint(Share(), records=10, files=2))
    >>> state["epoch"], state["yielded"], state["done"]
    (0, 3, False)
    """

    def __init__(self) -> None:
        self.fixed: int | None = None
        self.passes = 0
        self.resume: dict[str, Any] | None = None
        self.progress: PassProgress | None = None

    @property
    def epoch(self) -> int:
        """The epoch of the next pass."""
        return self.passes if self.fixed is None else self.fixed

    def set_epoch(self, epoch: int) -> None:
        self.fixed = check_seed(epoch, "epoch")

    def next_pass(self, epoch: int, fixed: bool) -> None:
        """Make the next pass one of ``epoch``: as ``set_epoch`` does (``fixed``), or
        counting passes from it (the pass after it is then of ``epoch + 1``)."""
        if fixed:
            self.set_epoch(epoch)
        else:
            self.fixed, self.passes = None, check_seed(epoch, "epoch")

    def start(self, check_split: Callable[[Mapping[str, Any]], None]) -> PassProgress:
        """A pass begins: its :class:`PassProgress`, from the loaded state when it is of this
        epoch (``check_split`` checks it against the reader once more)."""
        epoch = self.epoch
        if self.fixed is None:
            self.passes += 1
        state, self.resume = self.resume, None
        base: list[Interval] = []
        skip = 0
        if state is not None:
            base = [(int(a), int(b)) for a, b in state.get("base", [])]
            skip = 0 if state.get("rank") is None else int(state["yielded"])
            if state["epoch"] != epoch:
                if (base or skip) and not state.get("done"):
                    warn(ResumeWarning(
                        f"the loaded reader state (epoch {state['epoch']}, {skip} instances "
                        f"yielded) is not used: this pass is of epoch {epoch}"
                    ))
                base, skip = [], 0
            else:
                check_split(state)
        self.progress = PassProgress(epoch, base, skip)
        return self.progress

    def state_dict(self, fingerprint: Fingerprint) -> dict[str, Any]:
        """The state of the pass in progress (or of the next one): see
        :meth:`recprep.RecordIO.state_dict`."""
        resume, progress = self.resume, self.progress
        if resume is not None:
            split = resume.get("rank") is not None
            return state_of(fingerprint, resume["epoch"],
                            [tuple(i) for i in resume.get("base", [])],
                            resume["yielded"] if split else 0, resume["epoch_set"],
                            split and resume["done"])
        if progress is None:
            return state_of(fingerprint, self.epoch, [], 0, self.fixed is not None)
        return state_of(fingerprint, progress.epoch, progress.base, progress.yielded,
                        self.fixed is not None, progress.done)

    def load(self, state: dict[str, Any]) -> None:
        """Make the next pass continue the pass ``state`` (checked) describes."""
        self.progress, self.resume = None, state
        if state["epoch_set"]:
            self.fixed = state["epoch"]
        elif state.get("done"):  # counting passes: the next one is the next epoch
            self.fixed, self.passes, self.resume = None, state["epoch"] + 1, None
        else:
            self.fixed, self.passes = None, state["epoch"]


def state_of(
    fingerprint: Fingerprint, epoch: int, base: Sequence[Sequence[int]], yielded: int,
    epoch_set: bool, done: bool = False,
) -> dict[str, Any]:
    """A state: the pass (``fingerprint``, ``epoch``) and its position."""
    share = fingerprint.share
    state: dict[str, Any] = {
        "recprep_state": STATE_VERSION, "shuffle": share.shuffle, "seed": share.seed,
        "epoch": epoch, "epoch_set": epoch_set, "records": fingerprint.records,
        "files": fingerprint.files,
    }
    if share.shuffle:
        state.update(block=share.block_size, permuted=share.permuted,
                     base=[list(i) for i in base])
    state.update(rank=share.rank, world_size=share.world_size, worker=share.worker,
                 num_workers=share.num_workers, yielded=yielded, done=done)
    if share.align > 1:
        state["align"] = share.align
    return state


def checked_for(state: Any, fingerprint: Fingerprint, share_size: Callable[[], int]
                ) -> dict[str, Any]:
    """``state`` checked for loading into the reader ``fingerprint`` describes (see
    :meth:`recprep.RecordIO.load_state_dict`), normalised; ``share_size()`` is the number
    of instances of an unshuffled pass of its share."""
    checked: dict[str, Any] = check_state(state)
    mine = state_of(fingerprint, 0, [], 0, False)
    differs = [
        f"{key} (the state's {checked[key]!r}, this reader's {mine[key]!r})"
        for key in ("shuffle", "records", "files", "block", "permuted")
        if key in mine and checked.get(key, mine[key]) != mine[key]
    ]
    if differs:
        raise InvalidArgumentError(
            "the state is of another pass than this reader makes: it differs in "
            + ", ".join(differs) + " (the same files, shuffle and shuffle_buffer are needed)"
        )
    check_split(checked, fingerprint.share)
    if not checked["shuffle"] and checked["yielded"] > (size := share_size()):
        share = fingerprint.share
        raise InvalidArgumentError(
            f"a reader state's 'yielded' must be at most {size}, the share of rank "
            f"{share.rank} of {share.world_size} (worker {checked['worker']} of "
            f"{checked['num_workers']}), found {checked['yielded']}"
        )
    return checked


def check_split(state: Mapping[str, Any], share: Share) -> None:
    """Raise unless ``state`` (of one rank, or combined) loads into a reader of
    ``share``."""
    if state.get("rank") is None:
        return
    theirs = (state["rank"], state["world_size"], state["worker"], state["num_workers"],
              state.get("align", 1))
    mine = (share.rank, share.world_size, share.worker, share.num_workers, share.align)
    if theirs == mine:
        return
    aligned = "" if theirs[4] == mine[4] else (
        f"; the state's workers split the share in batches of {theirs[4]}, this reader's "
        f"in batches of {mine[4]}")
    raise InvalidArgumentError(
        f"the state is of rank {theirs[0]} of {theirs[1]} (worker {theirs[2]} of "
        f"{theirs[3]}), this reader is rank {mine[0]} of {mine[1]} (worker {mine[2]} of "
        f"{mine[3]}){aligned}: load a state into the reader that took it, or combine the "
        "states of all ranks with RecordIO.combine_states(states) (shuffle=True) and load "
        "that into every rank of the new world"
    )
