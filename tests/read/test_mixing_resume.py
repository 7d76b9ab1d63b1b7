"""Mixing that resumes anywhere (issue 26, item 1): mix states combined across world
sizes, weights that follow a schedule, resumed exactly across its change points.

The documented guarantees checked here:

* exactly once: with ``stop="all"`` every instance of every source is handed out once
  per epoch over any sequence of stops, resumes and world-size changes (at most once
  with ``stop="first"``);
* order: between two changes of world size, each rank's stream is a function of the state
  it loaded (a stop and resume in the same world gives the stream an uninterrupted rank
  would have), and within it each source's instances come in that source's own order
  (the source alone, loaded with its part of the state);
* schedules: a stop just before, at or after a change point resumes exactly; a state
  loaded under other weights raises, or with ``on_new_weights="warn"`` warns and loses
  or repeats nothing.
"""

from __future__ import annotations

import json
from collections import Counter
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import RecordIO, convert, index_split, mix
from recprep.errors import InvalidArgumentError, ResumeWarning
from recprep.read.mixing import Mix

pytestmark = pytest.mark.filterwarnings("ignore:.*shards are empty")

_MADE: set[tuple[str, int]] = set()


def _glob(tag: str, size: int) -> str:
    """A memory set of ``(tag, i)`` for ``i < size`` in 3 shards (made once); its glob."""
    where = f"memory://test_mixing_resume/{tag}-{size}"
    if (tag, size) not in _MADE:
        convert(where, [(tag, i) for i in range(size)], 3, "d", chunk_bytes=64)
        _MADE.add((tag, size))
    return f"{where}/d-*"


def _source(kind: str, k: int, size: int, rank: int, world: int) -> Any:
    """Source ``k`` of a test mix: a shuffled reader, or a split (shuffled or not)."""
    glob = _glob(f"s{k}", size)
    if kind == "reader":
        return RecordIO(glob, shuffle=True, seed=7 + k, shuffle_buffer=4, rank=rank,
                        world_size=world)
    reader = RecordIO(glob, rank=rank, world_size=world)
    if kind == "split":
        return index_split(reader, {"all": 1.0})["all"]
    return index_split(reader, {"all": 1.0}, shuffle=True, seed=3 + k)["all"]


class Case:
    """One mix: its sources (kind, size), weights or schedule, seed and ``stop``."""

    def __init__(self, sources: list[tuple[str, int]], weights: Any, seed: int,
                 stop: str) -> None:
        self.sources, self.weights, self.seed, self.stop = sources, weights, seed, stop

    def make(self, rank: int = 0, world: int = 1, weights: Any = None, **kw: Any) -> Mix:
        readers = [_source(kind, k, n, rank, world) for k, (kind, n) in enumerate(self.sources)]
        return mix(readers, self.weights if weights is None else weights, seed=self.seed,
                   stop=self.stop, **kw)  # type: ignore[arg-type]

    def everything(self) -> Counter[Any]:
        return Counter((f"s{k}", i) for k, (_, n) in enumerate(self.sources) for i in range(n))

    def alone(self, k: int, rank: int, world: int, state: dict[str, Any] | None) -> list[Any]:
        """Source ``k`` read alone at ``rank`` of ``world``, from its part of ``state``."""
        kind, n = self.sources[k]
        source = _source(kind, k, n, rank, world)
        source.set_epoch(0)
        if state is not None:
            source.load_state_dict(state["sources"][k])
        return list(source())


def _periodic(table: list[list[float]], period: int) -> Any:
    def weights(position: int) -> list[float]:
        return table[(position // period) % len(table)]
    return weights


def _schedules(n: int) -> st.SearchStrategy[Any]:
    vector = st.lists(st.sampled_from([0.0, 0.5, 1.0, 3.0]), min_size=n, max_size=n).filter(any)
    constant = st.lists(st.floats(0.2, 4), min_size=n, max_size=n)
    pairs = st.lists(st.tuples(st.integers(1, 40), vector), max_size=3).flatmap(
        lambda rest: vector.map(lambda first: [(0, first)] + sorted(
            {s: (s, w) for s, w in rest}.values())))
    periodic = st.tuples(st.lists(vector, min_size=1, max_size=3), st.integers(1, 9)).map(
        lambda t: _periodic(*t))
    return st.one_of(constant, pairs, periodic)


cases = st.lists(st.tuples(st.sampled_from(["reader", "split", "shuffled_split"]),
                           st.integers(0, 30)), min_size=1, max_size=3).flatmap(
    lambda sources: st.builds(Case, st.just(sources), _schedules(len(sources)),
                              st.integers(0, 2**32), st.sampled_from(["first", "all"])))
SLOW = settings(max_examples=60, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def _roundtrip(state: dict[str, Any]) -> dict[str, Any]:
    return json.loads(json.dumps(state))  # a checkpoint is JSON on disk


def _segment(case: Case, world: int, state: dict[str, Any] | None, reads: list[int],
             seen: list[Any]) -> list[dict[str, Any]]:
    """Every rank of a world of ``world`` loads ``state`` and reads ``reads[rank]``
    instances (what it reads goes to ``seen``); their states. Checks each rank's stream
    against an uninterrupted rank's and each source's part against the source alone."""
    states = []
    for rank in range(world):
        whole = case.make(rank, world)
        if state is not None:
            whole.load_state_dict(state)
        expected = list(whole())
        one = case.make(rank, world)
        if state is not None:
            one.load_state_dict(state)
        stream = one()
        got = [x for _, x in zip(range(reads[rank % len(reads)]), stream, strict=False)]
        assert got == expected[:len(got)]
        mine = _roundtrip(one.state_dict())
        stream.close()  # type: ignore[attr-defined]
        if mine["done"]:  # the pass is over: a loaded state goes on with the next one
            assert got == expected
        else:
            again = case.make(rank, world)
            again.load_state_dict(mine)  # a stop and resume in the same world: exact
            assert got + list(again()) == expected
        for k in range(len(case.sources)):  # each source in its own order
            own = [x for x in expected if x[0] == f"s{k}"]
            assert own == case.alone(k, rank, world, state)[:len(own)]
        seen += got
        states.append(mine)
    return states


@SLOW
@given(cases, st.lists(st.tuples(st.integers(1, 4), st.lists(st.integers(0, 25), min_size=1,
                                                                max_size=4)),
                       min_size=1, max_size=3), st.integers(1, 4))
def test_any_stops_resumes_and_world_sizes_hand_out_each_instance_once(
    case: Case, segments: list[tuple[int, list[int]]], last: int
) -> None:
    seen: list[Any] = []
    state: dict[str, Any] | None = None
    for world, reads in segments:
        states = _segment(case, world, state, reads, seen)
        state = _roundtrip(Mix.combine_states(states))
        if state["done"]:
            break
    else:
        _segment(case, last, state, [10**6], seen)  # the rest of the epoch
    counts = Counter(seen)
    assert max(counts.values(), default=1) == 1  # nothing twice
    assert set(counts) <= set(case.everything())
    if case.stop == "all":
        assert counts == case.everything()  # everything once


# -- schedules: change points -----------------------------------------------------------------

CHANGE = 12
SCHEDULES = {
    "pairs": [(0, [3, 1, 0]), (CHANGE, [1, 3, 1]), (CHANGE + 5, [0, 1, 0])],
    "callable": lambda p: [3, 1, 0] if p < CHANGE else [1, 3, 1] if p < CHANGE + 5
    else [0, 1, 0],
}


@pytest.mark.parametrize("form", sorted(SCHEDULES))
@pytest.mark.parametrize("stop", ["first", "all"])
@pytest.mark.parametrize("at", [CHANGE - 1, CHANGE, CHANGE + 1, CHANGE + 4, CHANGE + 5,
                                CHANGE + 6])
def test_a_stop_next_to_a_change_point_resumes_exactly(form: str, stop: str, at: int) -> None:
    case = Case([("reader", 25), ("split", 30), ("shuffled_split", 20)], SCHEDULES[form],
                5, stop)
    whole = list(case.make()())
    one = case.make()
    stream = one()
    head = [next(stream) for _ in range(at)]
    resumed = case.make()
    resumed.load_state_dict(_roundtrip(one.state_dict()))
    assert head + list(resumed()) == whole
    # the schedule holds: up to the change, no s2; after CHANGE + 5, only s1 while it lasts
    assert all(tag != "s2" for tag, _ in whole[:CHANGE])
    assert {tag for tag, _ in whole[CHANGE + 5:CHANGE + 15]} == {"s1"}


def test_the_schedule_changes_the_draws_only_where_it_changes() -> None:
    constant = Case([("reader", 40), ("split", 40)], [1, 1], 8, "first")
    later = Case([("reader", 40), ("split", 40)], [(0, [1, 1]), (20, [1, 5])], 8, "first")
    one, two = list(constant.make()()), list(later.make()())
    assert one[:20] == two[:20] and one[20:40] != two[20:40]
    assert Counter(t for t, _ in two[20:40])["s1"] > Counter(t for t, _ in one[20:40])["s1"]


def test_a_state_of_other_weights_raises_or_with_warn_loses_nothing() -> None:
    case = Case([("reader", 30), ("split", 30)], [(0, [1, 1]), (10, [1, 2])], 2, "all")
    one = case.make()
    stream = one()
    head = [next(stream) for _ in range(15)]
    state = _roundtrip(one.state_dict())
    with pytest.raises(InvalidArgumentError,
                       match=r"weights \(the state's \[\[0, \[1.0, 1.0\]\], \[10, .*"
                             r"on_new_weights='warn'"):
        case.make(weights=[1, 1]).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match=r"this mix's \{'callable': "):
        case.make(weights=lambda p: [1, 1] if p < 10 else [1, 2]).load_state_dict(state)
    by_function = case.make(weights=lambda p: [1, 1] if p < 10 else [1, 2])
    list(zip(range(15), by_function(), strict=False))
    called = _roundtrip(by_function.state_dict())  # a callable is checked at the position
    with pytest.raises(InvalidArgumentError, match=r"weights at position 15 \(the state's "
                                                   r"\[1.0, 2.0\], this mix's \[2.0, 1.0\]"):
        case.make(weights=lambda p: [2, 1]).load_state_dict(called)
    case.make(weights=lambda p: [1, 2]).load_state_dict(called)  # the same from here: loads
    moved = case.make(weights=[(0, [5, 1]), (18, [1, 5])], on_new_weights="warn")
    with pytest.warns(ResumeWarning, match="other weights: .*no instance lost or repeated"):
        moved.load_state_dict(state)
    rest = list(moved())
    assert Counter(head + rest) == case.everything()
    for k in range(2):  # each source where it was, in its own order
        assert [x for x in head + rest if x[0] == f"s{k}"] == case.alone(k, 0, 1, None)


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 70), st.lists(st.floats(0, 3), min_size=3, max_size=3).filter(
    lambda w: any(w) and w != [1, 1, 1]),  # other weights than the state's (same: no warning)
       st.sampled_from(["first", "all"]))
def test_new_weights_at_any_point_never_skip_or_repeat(at: int, weights: list[float],
                                                        stop: str) -> None:
    case = Case([("reader", 20), ("split", 25), ("shuffled_split", 15)], [1, 1, 1], 4, stop)
    one = case.make()
    stream = one()
    head = [x for _, x in zip(range(at), stream, strict=False)]
    state = _roundtrip(one.state_dict())
    moved = case.make(weights=[(0, weights)], on_new_weights="warn")
    with pytest.warns(ResumeWarning):
        moved.load_state_dict(state)
    got = head + (list(moved()) if not state["done"] else [])  # done: the next is epoch 1
    assert max(Counter(got).values()) == 1
    if stop == "all":
        assert Counter(got) == case.everything()
    for k in range(3):
        own = [x for x in got if x[0] == f"s{k}"]
        assert own == case.alone(k, 0, 1, None)[:len(own)]


def test_bad_schedules_and_combinations() -> None:
    case = Case([("reader", 5), ("split", 5)], [1, 1], 0, "all")
    for weights, message in [
        ([(1, [1, 1])], "starts must be ints rising from 0"),
        ([(0, [1, 1]), (0, [1, 2])], "starts must be ints rising from 0"),
        ([(0, [1, 1]), (4, [0, 0])], r"from position 4 must be 2 non-negative"),
        ([(0, [1, 1, 1])], "from position 0 must be 2"),
        ([1, 0], "positive finite"),
    ]:
        with pytest.raises(InvalidArgumentError, match=message):
            case.make(weights=weights)
    bad = case.make(weights=lambda p: [1, -1] if p == 3 else [1, 1])
    with pytest.raises(InvalidArgumentError, match="at position 3 must be 2 non-negative"):
        list(bad())
    with pytest.raises(InvalidArgumentError, match="on_new_weights must be"):
        case.make(on_new_weights="ignore")
    states = [case.make(r, 2).state_dict() for r in range(2)]
    other = Case([("reader", 5), ("split", 5)], [1, 2], 0, "all").make(1, 2).state_dict()
    with pytest.raises(InvalidArgumentError, match=r"states 0 and 1 .* differ in weights"):
        Mix.combine_states([states[0], other])
    with pytest.raises(InvalidArgumentError, match="at least one state"):
        Mix.combine_states([])
    unshuffled = mix([RecordIO(_glob("s0", 5), rank=r, world_size=2) for r in (0, 1)][:1],
                     [1], seed=0)
    with pytest.raises(InvalidArgumentError, match="source 0: .*unshuffled pass"):
        Mix.combine_states([unshuffled.state_dict()])
    with pytest.raises(InvalidArgumentError, match="state 1 is not a mix state"):
        Mix.combine_states([states[0], states[0]["sources"][0]])


def test_nested_mixes_combine() -> None:
    def make(rank: int, world: int) -> Mix:
        inner = mix([_source("reader", 0, 20, rank, world), _source("split", 1, 15, rank, world)],
                    [(0, [1, 0]), (5, [1, 1])], seed=1, stop="all")
        return mix([inner, _source("shuffled_split", 2, 10, rank, world)], [2, 1], seed=2,
                   stop="all")
    old = [make(r, 2) for r in range(2)]
    streams = [m() for m in old]
    seen = [next(streams[0]) for _ in range(7)] + [next(streams[1]) for _ in range(4)]
    state = _roundtrip(Mix.combine_states([m.state_dict() for m in old]))
    new = [make(r, 3) for r in range(3)]
    for m in new:
        m.load_state_dict(state)
    seen += [x for m in new for x in m()]
    expected = Counter([("s0", i) for i in range(20)] + [("s1", i) for i in range(15)] +
                       [("s2", i) for i in range(10)])
    assert Counter(seen) == expected


def test_states_of_ranks_and_their_workers_combine() -> None:
    def make(rank: int, world: int, worker: int, workers: int) -> Mix:
        code = RecordIO(_glob("s0", 24), shuffle=True, seed=1, rank=rank, world_size=world)
        prose = RecordIO(_glob("s1", 18), rank=rank, world_size=world)
        return mix([code.for_worker(worker, workers),
                    index_split(prose.for_worker(worker, workers), {"all": 1.0},
                                shuffle=True, seed=2)["all"]],
                   [(0, [1, 2]), (3, [2, 1])], seed=3, stop="all")
    old = [make(r, 2, w, 2) for r in range(2) for w in range(2)]
    seen = [x for k, m in enumerate(old) for _, x in zip(range(k + 2), m(), strict=False)]
    state = _roundtrip(Mix.combine_states([m.state_dict() for m in old]))
    new = [make(r, 3, 0, 1) for r in range(3)]
    for m in new:
        m.load_state_dict(state)
    seen += [x for m in new for x in m()]
    assert Counter(seen) == Counter([("s0", i) for i in range(24)] +
                                    [("s1", i) for i in range(18)])
    with pytest.raises(InvalidArgumentError, match="rank 0 of 2 .*worker 1 of 2"):
        make(0, 2, 0, 2).load_state_dict(old[1].state_dict())  # one worker's, not combined
