"""Combining the states of every rank of a mixing job into one that any world size
loads: what :meth:`recprep.read.mixing.Mix.combine_states` does.

A mix's state holds its own position (epoch, ``step``, the sources still active) and one
state per source. Combining them combines each source's states the way that source does
(:meth:`~recprep.RecordIO.combine_states` for shuffled readers,
:meth:`~recprep.read.splits.IndexSplit.combine_states` for splits, this function again
for a mix inside a mix): each is the union of what the old ranks had consumed of that
source. The combined mix goes on from the furthest ``step`` any old rank had reached
(``offset``: the sources' new states count from there), every source active again
(one that has nothing left for a new rank drops out, or ends the pass with
``stop="first"``, at the first step that draws it), and is done when every old rank's
pass was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from .checkpoint import combine, is_int
from .splits import IndexSplit

__all__ = ["combine_mix", "combine_source_states"]

_PASS = ("seed", "stop", "epoch")


def combine_source_states(states: Sequence[Any]) -> dict[str, Any]:
    """The states of one source on every rank, combined by that source's kind."""
    kinds = {next((k for k in ("recprep_mix", "recprep_split", "recprep_state")
                   if isinstance(s, Mapping) and k in s), None) for s in states}
    if len(kinds) != 1 or None in kinds:
        raise InvalidArgumentError(
            "expected states of one kind of source (all reader, split or mix states), "
            f"found {sorted(str(k) for k in kinds)}"
        )
    kind = kinds.pop()
    if kind == "recprep_mix":
        return combine_mix(states)
    if kind == "recprep_split":
        return IndexSplit.combine_states(states)
    return combine(states)


def combine_mix(states: Sequence[Any]) -> dict[str, Any]:
    """One mix state from the states of every rank (and worker) of one mix's pass (see
    the module docstring)."""
    if not states:
        raise InvalidArgumentError("combine_states needs at least one state, got none")
    for k, state in enumerate(states):
        if not isinstance(state, Mapping) or not is_int(state.get("recprep_mix")):
            raise InvalidArgumentError(
                f"state {k} is not a mix state (a dict from Mix.state_dict()): got "
                f"{state!r:.100}")
        if not isinstance(state.get("sources"), list) or not is_int(state.get("step")):
            raise InvalidArgumentError(
                f"mix state {k} is damaged: its 'sources' must be a list and its 'step' "
                f"an int, found {state.get('sources')!r:.60} and {state.get('step')!r:.30}")
    first = states[0]
    for k, other in enumerate(states[1:], 1):
        differs = [f"{key} ({first.get(key)!r:.80} != {other.get(key)!r:.80})"
                   for key in (*_PASS, "recprep_mix") if other.get(key) != first.get(key)]
        if _schedule_of(other) != _schedule_of(first):
            differs.append(f"weights ({_schedule_of(first)!r:.80} != "
                           f"{_schedule_of(other)!r:.80})")
        if len(other["sources"]) != len(first["sources"]):
            differs.append(f"sources ({len(first['sources'])} != {len(other['sources'])})")
        if differs:
            raise InvalidArgumentError(
                f"mix states 0 and {k} are of different passes: they differ in "
                + ", ".join(differs))
    furthest = max(states, key=lambda s: s["step"])
    step = furthest["step"]
    sources = []
    for k in range(len(first["sources"])):
        try:
            sub = combine_source_states([s["sources"][k] for s in states])
        except InvalidArgumentError as error:
            raise InvalidArgumentError(f"a mix state's source {k}: {error}") from None
        if step and sub["epoch"] != first["epoch"]:
            raise InvalidArgumentError(
                f"a mix state's source {k} is of epoch {sub['epoch']}, the mix's of epoch "
                f"{first['epoch']}: the states are damaged")
        sources.append(sub)
    out = {key: first[key] for key in ("recprep_mix", *_PASS)}
    out.update(
        weights=furthest.get("weights"), epoch_set=any(s.get("epoch_set") for s in states),
        step=step, active=[True] * len(sources),
        done=all(s.get("done") is True for s in states), sources=sources,
    )
    if step:
        out["offset"] = step
    return out


def _schedule_of(state: Mapping[str, Any]) -> Any:
    """A state's schedule, without what depends on its position (a callable's weights)."""
    weights = state.get("weights")
    return weights.get("callable") if isinstance(weights, Mapping) else weights
