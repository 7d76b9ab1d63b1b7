"""Mixing sets by weight and carving splits by instance index (issue 16, item 6)."""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert, index_split, mix
from recprep.errors import InvalidArgumentError

pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")

_MADE: set[tuple[str, int, int]] = set()


def _set(tag: str, size: int, shards: int) -> str:
    """A memory set of ``(tag, i)`` for ``i < size`` (made once); its glob."""
    where = f"memory://test_mixing/{tag}-{size}-{shards}"
    if (tag, size, shards) not in _MADE:
        convert(where, [(tag, i) for i in range(size)], shards, "d", chunk_bytes=64)
        _MADE.add((tag, size, shards))
    return f"{where}/d-*"


def _readers(sizes: list[int], shards: int, shuffle: bool) -> list[RecordIO]:
    return [RecordIO(_set(f"s{k}", n, shards), shuffle=shuffle, seed=11 + k, shuffle_buffer=4)
            for k, n in enumerate(sizes)]


def _mixed(sizes: list[int], weights: list[float], seed: int, stop: str, shards: int = 2,
           shuffle: bool = False) -> Any:
    return mix(_readers(sizes, shards, shuffle), weights, seed=seed, stop=stop)  # type: ignore[arg-type]


SLOW = settings(max_examples=25, deadline=None,
                suppress_health_check=[HealthCheck.too_slow])
mixes = st.tuples(
    st.lists(st.integers(0, 40), min_size=1, max_size=3),
    st.integers(0, 2**32), st.sampled_from(["first", "all"]), st.booleans(),
).flatmap(lambda t: st.tuples(
    st.just(t[0]), st.lists(st.floats(0.1, 5), min_size=len(t[0]), max_size=len(t[0])),
    st.just(t[1]), st.just(t[2]), st.just(t[3]),
))


@SLOW
@given(mixes)
def test_each_source_keeps_its_order_and_all_drains_everything(case: Any) -> None:
    sizes, weights, seed, stop, shuffle = case
    got = list(_mixed(sizes, weights, seed, stop, shuffle=shuffle)())
    for k, n in enumerate(sizes):
        alone = list(_readers(sizes, 2, shuffle)[k]())
        mine = [x for x in got if x[0] == f"s{k}"]
        assert mine == alone[:len(mine)]  # the source's own order (the first epoch's)
        if stop == "all":
            assert len(mine) == n
    if stop == "first" and got:
        # the pass stopped because one source ran out: it yielded all of its instances
        counts = Counter(tag for tag, _ in got)
        assert any(counts[f"s{k}"] == n for k, n in enumerate(sizes))


@SLOW
@given(mixes)
def test_same_seed_same_stream_and_epochs_differ_deterministically(case: Any) -> None:
    sizes, weights, seed, stop, shuffle = case
    one, two = (_mixed(sizes, weights, seed, stop, shuffle=shuffle) for _ in range(2))
    assert [list(one()) for _ in range(2)] == [list(two()) for _ in range(2)]


@SLOW
@given(mixes, st.integers(0, 200), st.integers(0, 2))
def test_resumed_is_the_rest_of_the_uninterrupted_pass(case: Any, stop_at: int,
                                                         epoch: int) -> None:
    sizes, weights, seed, stop, shuffle = case
    whole = _mixed(sizes, weights, seed, stop, shuffle=shuffle)
    for _ in range(epoch):
        list(whole())
    expected = list(whole())
    next_pass = list(whole())

    cut = _mixed(sizes, weights, seed, stop, shuffle=shuffle)
    for _ in range(epoch):
        list(cut())
    stream = cut()
    head = [x for _, x in zip(range(stop_at), stream, strict=False)]
    state = json.loads(json.dumps(cut.state_dict()))
    stream.close()

    resumed = _mixed(sizes, weights, seed + 1, stop, shuffle=shuffle)  # seed from state
    resumed.load_state_dict(state)
    rest = list(resumed())
    if state["done"]:  # the pass had ended: a loaded state goes on with the next epoch
        assert (head, rest) == (expected, next_pass)
    else:
        assert head + rest == expected
        assert list(resumed()) == next_pass  # and the next epoch goes on as it would have


@settings(max_examples=10, deadline=None)
@given(st.integers(0, 2**32), st.floats(0.1, 0.9))
def test_proportions_follow_the_weights(seed: int, w: float) -> None:
    steps = 1500
    got = list(_mixed([3000, 3000], [w, 1 - w], seed, "first", shards=3))[:steps]
    share = sum(tag == "s0" for tag, _ in got) / steps
    sigma = (w * (1 - w) / steps) ** 0.5
    assert abs(share - w) < 5 * sigma


def test_all_renormalises_and_first_stops() -> None:
    first = list(_mixed([5, 200], [1, 1], 0, "first")())
    assert Counter(tag for tag, _ in first)["s0"] == 5 and len(first) < 205
    every = list(_mixed([5, 200], [1, 1], 0, "all")())
    assert sorted(every) == sorted([("s0", i) for i in range(5)] +
                                   [("s1", i) for i in range(200)])


def test_bad_arguments_and_states() -> None:
    readers = _readers([3, 3], 1, False)
    with pytest.raises(InvalidArgumentError, match="one weight per source"):
        mix(readers, [1], seed=0)
    with pytest.raises(InvalidArgumentError, match="positive finite"):
        mix(readers, [1, 0], seed=0)
    with pytest.raises(InvalidArgumentError, match="stop must be"):
        mix(readers, [1, 1], seed=0, stop="never")  # type: ignore[arg-type]
    state = mix(readers, [1, 1], seed=0).state_dict()
    with pytest.raises(InvalidArgumentError, match=r"weights \(the state's \[1.0, 1.0\]"):
        mix(_readers([3, 3], 1, False), [1, 2], seed=0).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="expected a mix state"):
        mix(readers, [1, 1], seed=0).load_state_dict({"recprep_state": 1})


# -- splits ---------------------------------------------------------------------------------

fractions = st.lists(st.integers(0, 10), min_size=1, max_size=4).filter(any).map(
    lambda xs: [x / sum(xs) for x in xs])


@SLOW
@given(st.integers(0, 60), st.integers(1, 4), fractions)
def test_fraction_splits_partition_the_set_in_order(size: int, shards: int,
                                                    parts: list[float]) -> None:
    glob = _set("split", size, shards)
    everything = list(RecordIO(glob)())
    names = [f"p{k}" for k in range(len(parts))]
    parts[-1] = 1 - sum(parts[:-1])
    splits = index_split(RecordIO(glob), dict(zip(names, parts, strict=True)))
    read = [list(splits[name]()) for name in names]
    assert [x for r in read for x in r] == everything  # disjoint, complete, in order
    assert [len(splits[n]) for n in names] == [len(r) for r in read]
    again = index_split(RecordIO(glob), dict(zip(names, parts, strict=True)))
    assert [list(again[name]()) for name in names] == read  # stable


@SLOW
@given(st.integers(1, 60), st.integers(1, 4), st.data())
def test_range_splits_ranks_and_resume(size: int, shards: int, data: Any) -> None:
    glob = _set("split", size, shards)
    everything = list(RecordIO(glob)())
    a = data.draw(st.integers(0, size))
    b = data.draw(st.integers(a, size))
    world = data.draw(st.integers(1, 3))
    ranks = [index_split(RecordIO(glob, rank=r, world_size=world), {"x": (a, b)})["x"]
             for r in range(world)]
    assert [x for r in ranks for x in r()] == everything[a:b]
    one = index_split(RecordIO(glob), {"x": (a, b)})["x"]
    stream = one()
    k = data.draw(st.integers(0, b - a))
    head = [next(stream) for _ in range(k)]
    other = index_split(RecordIO(glob), {"x": (a, b)})["x"]
    other.load_state_dict(json.loads(json.dumps(one.state_dict())))
    assert head + list(other()) == everything[a:b]


def test_split_reads_nothing_before_its_range() -> None:
    glob = _set("far", 3000, 2)
    read = RecordIO(glob)
    chunks = 0
    original = read._sources.chunks

    def counting(*args: Any, **kwargs: Any) -> Any:
        nonlocal chunks
        for chunk in original(*args, **kwargs):
            chunks += 1
            yield chunk

    read._sources.chunks = counting  # type: ignore[method-assign]
    list(read())
    everything, chunks = chunks, 0
    tail = index_split(read, {"head": 0.99, "tail": 0.01})["tail"]
    assert list(tail()) == [("far", i) for i in range(2970, 3000)]
    assert everything == 1500 and chunks <= 20  # only the chunks holding the last 30


def test_splits_mix_and_bad_splits() -> None:
    glob = _set("split", 20, 2)
    parts = index_split(RecordIO(glob), {"train": 0.5, "val": 0.5})
    mixed = list(mix([parts["train"], parts["val"]], [1, 1], seed=1, stop="all")())
    assert sorted(mixed) == sorted(RecordIO(glob)())
    with pytest.raises(InvalidArgumentError, match="sum to 1"):
        index_split(RecordIO(glob), {"a": 0.5, "b": 0.4})
    with pytest.raises(InvalidArgumentError, match="'a' and 'b' overlap: instances 5 to 6"):
        index_split(RecordIO(glob), {"a": (0, 7), "b": (5, 9)})
    with pytest.raises(InvalidArgumentError, match=r"0 <= start <= end <= 20"):
        index_split(RecordIO(glob), {"a": (0, 21)})
    with pytest.raises(InvalidArgumentError, match="unshuffled"):
        index_split(RecordIO(glob, shuffle=True), {"a": 1.0})
