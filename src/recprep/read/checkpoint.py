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
from typing import Any

from ..errors import InvalidArgumentError, ResumeWarning

__all__ = [
    "STATE_VERSION",
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


def slot_range(n: int, rank: int, world_size: int, worker: int, num_workers: int) -> Interval:
    """The slice ``[lo, hi)`` of ``n`` positions that worker ``worker`` of ``rank`` reads:
    contiguous shares of the ranks (equal to within one, the larger first), each cut the
    same way among the rank's workers."""
    lo, hi = _share(n, rank, world_size)
    a, b = _share(hi - lo, worker, num_workers)
    return lo + a, lo + b


def consumed(state: Mapping[str, Any]) -> list[Interval]:
    """The positions of the epoch order that the reader of a shuffled ``state`` (or the
    readers of a combined one) had consumed."""
    base = merge(state["base"])
    if state.get("rank") is None:
        return base
    left = state["records"] - covered(base)
    lo, _ = slot_range(left, state["rank"], state["world_size"], state["worker"],
                       state["num_workers"])
    return merge(base + remaining(base, state["records"], lo, lo + state["yielded"]))


def _int(state: Mapping[str, Any], key: str, low: int = 0) -> int:
    value = state.get(key)
    if not isinstance(value, int) or isinstance(value, bool) or value < low:
        raise InvalidArgumentError(
            f"a reader state's {key!r} must be an int >= {low}, got {value!r}"
        )
    return value


def check_state(state: Any) -> dict[str, Any]:
    """A normalised copy of ``state``; raise unless it is a state this version can load."""
    if not isinstance(state, Mapping) or "recprep_state" not in state:
        raise InvalidArgumentError(
            f"expected a reader state (a dict from RecordIO.state_dict()), got "
            f"{type(state).__name__} {state!r:.100}"
        )
    if state["recprep_state"] != STATE_VERSION:
        raise InvalidArgumentError(
            f"a reader state of version {state['recprep_state']!r} can't be loaded by this "
            f"recprep (it reads version {STATE_VERSION})"
        )
    keys = _COMMON + (_SHUFFLED if state.get("shuffle") else ()) + (
        _SPLIT if state.get("rank") is not None or not state.get("shuffle") else ()
    )
    missing = [k for k in keys if k not in state]
    if missing:
        raise InvalidArgumentError(f"a reader state lacks {missing}: it is damaged")
    out = {k: state[k] for k in keys}
    for key in ("seed", "epoch", "records", "files"):
        _int(out, key)
    if out["shuffle"]:
        _int(out, "block", 1)
        base = out["base"]
        if not isinstance(base, list) or not all(
            isinstance(i, (list, tuple)) and len(i) == 2
            and all(isinstance(v, int) and 0 <= v <= out["records"] for v in i)
            for i in base
        ):
            raise InvalidArgumentError(
                f"a reader state's 'base' must be a list of [start, end) pairs within "
                f"0..{out['records']}, got {base!r:.200}"
            )
        out["base"] = [list(i) for i in merge(base)]
    if "rank" in out:
        world, workers = _int(out, "world_size", 1), _int(out, "num_workers", 1)
        if _int(out, "rank") >= world or _int(out, "worker") >= workers:
            raise InvalidArgumentError(
                f"a reader state's rank/worker ({out['rank']}/{out['worker']}) must be "
                f"below world_size/num_workers ({world}/{workers})"
            )
        _int(out, "yielded")
        out["done"] = bool(out["done"])
    return out


def combine(states: Sequence[Any]) -> dict[str, Any]:
    """One state that every rank of a new world loads: the union of what the ranks of
    ``states`` (shuffled passes of one epoch of one set) had consumed."""
    if not states:
        raise InvalidArgumentError("combine_states needs at least one state, got none")
    checked = [check_state(s) for s in states]
    first = checked[0]
    if not first["shuffle"]:
        raise InvalidArgumentError(
            "only states of shuffled passes (shuffle=True) combine: an unshuffled pass "
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
