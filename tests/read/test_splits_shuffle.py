"""Splits shuffled inside, resumable, combined across world sizes (issue 26, item 1)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert, index_split
from recprep.errors import InvalidArgumentError, ResumeWarning
from recprep.read.positions import slot_range
from recprep.read.splits import IndexSplit

pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")

_MADE: set[int] = set()


def _glob(size: int) -> str:
    where = f"memory://test_splits_shuffle/{size}"
    if size not in _MADE:
        convert(where, list(range(size)), 3, "d", chunk_bytes=48)
        _MADE.add(size)
    return f"{where}/d-*"


def _split(size: int, rng: tuple[int, int], shuffle: bool = True, seed: int | None = 5,
           rank: int = 0, world: int = 1) -> IndexSplit:
    reader = RecordIO(_glob(size), rank=rank, world_size=world)
    return index_split(reader, {"x": rng}, shuffle=shuffle, seed=seed)["x"]


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state))


SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def test_each_epoch_is_a_permutation_of_the_split_the_same_on_every_rank() -> None:
    one = _split(100, (10, 90))
    epochs = [list(one()) for _ in range(3)]
    for epoch, got in enumerate(epochs):
        assert sorted(got) == list(range(10, 90))
        assert got == one.order(epoch).tolist()  # the order the split draws, read in it
    assert len({tuple(e) for e in epochs}) == 3 and epochs[0] != list(range(10, 90))
    same = _split(100, (10, 90))
    assert [list(same()) for _ in range(3)] == epochs  # same seed, same epochs
    assert list(_split(100, (10, 90), seed=6)()) != epochs[0]
    for world in (2, 3, 7):  # ranks read contiguous shares of the same permutation
        ranks = [_split(100, (10, 90), rank=r, world=world) for r in range(world)]
        assert [x for r in ranks for x in r()] == epochs[0]
        assert sum(len(r) for r in ranks) == 80
    assert isinstance(one.order(0), np.ndarray)  # drawn by numpy, one call
    unshuffled = _split(100, (10, 90), shuffle=False, seed=None)
    assert [list(unshuffled()) for _ in range(2)] == [list(range(10, 90))] * 2


@SLOW
@given(st.integers(1, 60), st.data())
def test_stopped_anywhere_resumes_exactly(size: int, data: Any) -> None:
    a = data.draw(st.integers(0, size))
    b = data.draw(st.integers(a, size))
    world = data.draw(st.integers(1, 3))
    rank = data.draw(st.integers(0, world - 1))
    epoch = data.draw(st.integers(0, 2))
    shuffle = data.draw(st.booleans())
    whole = _split(size, (a, b), shuffle, rank=rank, world=world)
    whole.set_epoch(epoch)
    expected = list(whole())
    one = _split(size, (a, b), shuffle, rank=rank, world=world)
    one.set_epoch(epoch)
    stream = one()
    k = data.draw(st.integers(0, len(expected)))
    head = [next(stream) for _ in range(k)]
    other = _split(size, (a, b), shuffle, rank=rank, world=world)
    other.load_state_dict(_roundtrip(one.state_dict()))
    assert head + list(other()) == expected
    assert list(other()) == list(whole())  # and the next epoch as it would have been


@SLOW
@given(st.integers(0, 50), st.booleans(),
       st.lists(st.tuples(st.integers(1, 4), st.lists(st.integers(0, 20), min_size=1,
                                                       max_size=4)), min_size=1, max_size=3),
       st.integers(1, 4))
def test_any_world_size_changes_read_each_instance_once_in_order(
    size: int, shuffle: bool, segments: list[tuple[int, list[int]]], last: int
) -> None:
    seen: list[int] = []
    state: dict[str, Any] | None = None
    for world, reads in [*segments, (last, [10**6])]:
        states = []
        before = set(seen)
        for rank in range(world):
            split = _split(size, (0, size), shuffle, rank=rank, world=world)
            if state is not None:
                split.load_state_dict(state)
            stream = split()
            got = [x for _, x in zip(range(reads[rank % len(reads)]), stream, strict=False)]
            # the epoch's order less what was read before, cut into contiguous shares
            left = [i for i in split.order(0).tolist() if i not in before]
            lo, hi = slot_range(len(left), rank, world, 0, 1)
            assert got == left[lo:hi][:len(got)]
            seen += got
            states.append(_roundtrip(split.state_dict()))
        state = _roundtrip(IndexSplit.combine_states(states))
    assert Counter(seen) == Counter(range(size))


def test_states_are_checked_against_the_split() -> None:
    one = _split(30, (0, 30))
    stream = one()
    next(stream)
    state = _roundtrip(one.state_dict())
    assert (state["shuffle"], state["seed"]) == (True, 5)
    with pytest.raises(InvalidArgumentError, match=r"differs in seed \(the state's 5, this "
                                                   r"split's 6\)"):
        _split(30, (0, 30), seed=6).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match=r"differs in shuffle \(the state's True"):
        _split(30, (0, 30), shuffle=False).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match=r"rank 0 of 1 .*IndexSplit.combine_states"):
        _split(30, (0, 30), rank=1, world=2).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="'base' must be a list of sorted"):
        _split(30, (0, 30)).load_state_dict({**state, "base": [[5, 2]]})
    with pytest.raises(InvalidArgumentError, match="'yielded' must be at most 20"):
        _split(30, (0, 30)).load_state_dict({**state, "base": [[0, 10]], "yielded": 21})
    with pytest.raises(InvalidArgumentError, match="needs a seed"):
        _split(30, (0, 30), seed=None)
    with pytest.raises(InvalidArgumentError, match="differ in seed"):
        IndexSplit.combine_states([state, {**state, "seed": 1}])
    # a state of before shuffled splits (no shuffle, seed, base) loads into an unshuffled one
    plain = _split(30, (0, 30), shuffle=False, seed=None)
    stream = plain()
    head = [next(stream) for _ in range(4)]
    old = {k: v for k, v in plain.state_dict().items() if k not in ("shuffle", "seed", "base")}
    again = _split(30, (0, 30), shuffle=False, seed=None)
    again.load_state_dict(old)
    assert head + list(again()) == list(range(30))


def test_a_state_of_another_epoch_is_not_used_and_says_so() -> None:
    one = _split(30, (0, 30))
    stream = one()
    next(stream)
    other = _split(30, (0, 30))
    other.load_state_dict(_roundtrip(one.state_dict()))
    other.set_epoch(1)
    with pytest.warns(ResumeWarning, match="split 'x' \\(epoch 0\\) is not used: this pass "
                                           "is of epoch 1"):
        got = list(other())
    assert got == one.order(1).tolist()


def test_a_shuffled_split_pickles_without_its_permutation_or_dataset() -> None:
    import pickle

    one = _split(40, (5, 35))
    first = list(one())
    copy = pickle.loads(pickle.dumps(one))  # as it goes to a DataLoader worker
    assert copy._permutation is None and copy._dataset is None
    assert list(copy()) == list(one()) != first  # the same next epoch, drawn again
