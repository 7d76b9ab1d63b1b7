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

>>> remaining([(2, 5)], 10, 1, 4)  # positions 1..3 of what is left of 0..9 once 2..4 went
[(1, 2), (5, 7)]
>>> slot_range(10, 1, 2, 0, 1), slot_range(10, 1, 2, 1, 2)
((5, 10), (8, 10))
>>> merge([(5, 7), (0, 2), (2, 3), (6, 9)])
[(0, 3), (5, 9)]
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, NoReturn

from ..errors import InvalidArgumentError, ResumeWarning

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


Interval = tuple[int, int]

_COMMON = ("recprep_state", "shuffle", "seed", "epoch", "epoch_set", "records", "files")
_SHUFFLED = ("block", "permuted", "base")
_SPLIT = ("rank", "world_size", "worker", "num_workers", "yielded", "done")
_MISSING: Any = object()


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


def _share(n: int, part: int, num_parts: int) -> Interval:
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
    lo, hi = _share(n, rank, world_size)
    if align == 1:
        a, b = _share(hi - lo, worker, num_workers)
    else:
        units = _share(-(-(hi - lo) // align), worker, num_workers)
        a, b = (min(u * align, hi - lo) for u in units)
    return lo + a, lo + b


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
            f"{self.what}'s {key!r} must be {expected}, found {_shown(value)}"
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


def _shown(value: Any) -> str:
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
