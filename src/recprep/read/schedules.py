"""Mixture weights that follow a schedule: :class:`Schedule`, what :func:`~recprep.mix`
makes of its ``weights``.

A schedule gives the weights of a mix's sources at each *position* of a pass: the number
of instances the mix (this rank's, this worker's) has handed out in the pass so far, from
0 at the start of each pass. ``weights`` is one of

* a list of numbers, one per source: the same weights everywhere;
* a list of ``(start, weights)`` pairs, ``start`` ints rising from 0: ``weights`` hold
  from position ``start`` until the next pair's ``start``;
* a callable ``f(position) -> weights``, a pure function (it is called ahead, for a block
  of positions at a time, and again after a resume).

Weights are non-negative finite numbers, at least one of them positive; a source of
weight 0 is drawn only when every source still active has weight 0 (then the active ones
are drawn alike, so ``stop="all"`` still reads everything).

>>> s = Schedule([(0, [1, 0]), (3, [1, 1])], 2)
>>> s.at(2), s.at(3)
((1.0, 0.0), (1.0, 1.0))
>>> s.runs(1, 5)
[(1, 3, (1.0, 0.0)), (3, 5, (1.0, 1.0))]
>>> Schedule(lambda p: [1, p % 2], 2).runs(0, 3)
[(0, 1, (1.0, 0.0)), (1, 2, (1.0, 1.0)), (2, 3, (1.0, 0.0))]
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import InvalidArgumentError

__all__ = ["Schedule", "Weights", "WeightsLike", "check_weights", "is_description"]

Weights = tuple[float, ...]

#: what ``mix(weights=...)`` takes: weights, ``(start, weights)`` pairs, or a callable
WeightsLike = (Sequence[float] | Sequence[tuple[int, Sequence[float]]]
               | Callable[[int], Sequence[float]])


def _is_number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def check_weights(weights: Any, n: int, where: str, positive: bool = False) -> Weights:
    """``weights`` as a tuple of ``n`` floats; raise unless they are non-negative finite
    numbers with one positive (all positive when ``positive``). ``where`` says whose."""
    ok = (isinstance(weights, Sequence) and not isinstance(weights, str)
          and len(weights) == n and all(_is_number(w) and math.isfinite(w) and w >= 0
                                        for w in weights))
    if ok and positive:
        ok = all(w > 0 for w in weights)
    if not ok or not any(w > 0 for w in weights):
        kind = "positive finite numbers" if positive else (
            "non-negative finite numbers, at least one positive")
        raise InvalidArgumentError(
            f"mix weights {where} must be {n} {kind} (one per source), got {weights!r:.200}"
        )
    return tuple(float(w) for w in weights)


def is_description(value: Any) -> bool:
    """Whether ``value`` has the shape of what :meth:`Schedule.describe` gives."""
    def numbers(v: Any) -> bool:
        return isinstance(v, list) and all(_is_number(w) for w in v)
    if isinstance(value, dict):
        return isinstance(value.get("callable"), str) and numbers(value.get("weights"))
    return numbers(value) or (isinstance(value, list) and all(
        isinstance(p, list) and len(p) == 2 and _is_number(p[0]) and numbers(p[1])
        for p in value))


class Schedule:
    """The weights of ``n`` sources at each position of a pass (see the module
    docstring): constant, ``(start, weights)`` pairs, or a callable."""

    def __init__(self, weights: Any, n: int) -> None:
        self.n = n
        self.function: Callable[[int], Sequence[float]] | None = None
        self.starts: list[int] = [0]
        self.values: list[Weights] = []
        if callable(weights):
            self.function = weights
            self._last: tuple[int, Weights] | None = None
        elif isinstance(weights, Sequence) and weights and all(
            isinstance(p, (tuple, list)) and len(p) == 2 and not _is_number(p[1])
            for p in weights
        ):
            self._pairs(weights)
        else:
            self.values = [check_weights(weights, n, "", positive=True)]

    def _pairs(self, pairs: Sequence[Any]) -> None:
        starts = [p[0] for p in pairs]
        if not all(isinstance(s, int) and not isinstance(s, bool) for s in starts) or (
            starts[0] != 0 or any(b <= a for a, b in zip(starts, starts[1:], strict=False))
        ):
            raise InvalidArgumentError(
                f"a weight schedule's starts must be ints rising from 0 (positions: "
                f"instances the mix handed out in the pass), got {starts!r:.200}"
            )
        self.starts = list(starts)
        self.values = [check_weights(w, self.n, f"from position {s}")
                       for s, w in pairs]

    @property
    def constant(self) -> bool:
        return self.function is None and len(self.values) == 1

    def __repr__(self) -> str:
        if self.function is not None:
            return f"{getattr(self.function, '__qualname__', 'a callable')}(position)"
        if self.constant:
            return repr(list(self.values[0]))
        return repr([(s, list(w)) for s, w in zip(self.starts, self.values, strict=True)])

    def at(self, position: int) -> Weights:
        """The weights at ``position``."""
        if self.function is None:
            k = 0
            while k + 1 < len(self.starts) and self.starts[k + 1] <= position:
                k += 1
            return self.values[k]
        if self._last is not None and self._last[0] == position:
            return self._last[1]
        weights = check_weights(self.function(position), self.n, f"at position {position}")
        self._last = (position, weights)
        return weights

    def runs(self, lo: int, hi: int) -> list[tuple[int, int, Weights]]:
        """Positions ``lo`` to ``hi`` (exclusive) as runs ``(a, b, weights)`` of constant
        weights, in order."""
        out: list[tuple[int, int, Weights]] = []
        if self.function is None:
            for k, start in enumerate(self.starts):
                end = self.starts[k + 1] if k + 1 < len(self.starts) else hi
                a, b = max(lo, start), min(hi, end)
                if a < b:
                    out.append((a, b, self.values[k]))
            return out
        for position in range(lo, hi):
            weights = self.at(position)
            if out and out[-1][2] == weights:
                out[-1] = (out[-1][0], position + 1, weights)
            else:
                out.append((position, position + 1, weights))
        return out

    # -- in states --------------------------------------------------------------------------

    def describe(self, position: int) -> Any:
        """What a state holds of the schedule (JSON): the weights, the pairs, or for a
        callable the weights it gives at ``position`` (the state's)."""
        if self.function is not None:
            return {"callable": repr(self), "position": position,
                    "weights": list(self.at(position))}
        if self.constant:
            return list(self.values[0])
        return [[s, list(w)] for s, w in zip(self.starts, self.values, strict=True)]

    def differs(self, described: Any, position: int) -> str | None:
        """Why a state's ``described`` schedule is not this one (``None`` when it is): for
        a callable, its weights at the state's ``position`` are compared."""
        mine = self.describe(position)
        if isinstance(mine, dict) and isinstance(described, dict):
            theirs = described.get("weights")
            if theirs == mine["weights"]:
                return None
            return (f"weights at position {position} (the state's {theirs!r:.200}, this "
                    f"mix's {mine['weights']!r})")
        if described == mine:
            return None
        return f"weights (the state's {described!r:.200}, this mix's {mine!r:.200})"
