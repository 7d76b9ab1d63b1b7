"""Fuzzing the state loaders with mangled states (hypothesis; issue 22, item 12).

Valid reader states, mix states and TaskQueue checkpoints, taken mid-pass, get fields
deleted, replaced by values of other types and ranges, or nudged. Loading one may only
raise ``InvalidArgumentError``; a state that loads must be kept to the letter: the pass it
resumes yields exactly what the state says is left — no instance twice, none skipped —
and a restored queue completes each task of an epoch exactly once.

``RECPREP_FUZZ_EXAMPLES`` (default 1000) examples per target, as in ``test_fuzz.py``.
"""

from __future__ import annotations

import copy
import json
import os
import uuid
import warnings
from collections import Counter
from typing import Any

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, RecordIO, TaskQueue, convert, mix
from recprep.read.checkpoint import check_state, merge, slot_range
from recprep.read.ranks import Task

EXAMPLES = int(os.environ.get("RECPREP_FUZZ_EXAMPLES", "1000"))
FUZZ = settings(
    max_examples=EXAMPLES,
    deadline=None,
    derandomize=os.environ.get("RECPREP_FUZZ_RANDOM") is None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
    database=None,
)
# a state of another epoch is dropped with a ResumeWarning: expected here
pytestmark = pytest.mark.filterwarnings("ignore::recprep.errors.ResumeWarning")

URL = f"memory:///trust-h2-fuzz-{uuid.uuid4().hex}"
SIZES = {"a": (23, 3), "b": (14, 1)}  # instances, shards


@pytest.fixture(scope="module", autouse=True)
def data():
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for name, (n, shards) in SIZES.items():
            convert(f"{URL}/{name}", [(name, i) for i in range(n)], shards, name,
                    chunk_bytes=48, progress=False)
    yield
    fsspec.filesystem("memory").rm(URL.removeprefix("memory://"), recursive=True)


def pattern(name: str) -> str:
    return f"{URL}/{name}/{name}-*"


# -- mangling -------------------------------------------------------------------------------

junk = st.one_of(
    st.none(), st.booleans(), st.integers(-3, 60), st.integers(-2**70, 2**70),
    st.floats(allow_nan=True), st.text(max_size=3),
    st.lists(st.integers(-2, 60), max_size=3),
    st.lists(st.lists(st.integers(-2, 60), max_size=3), max_size=3),
    st.dictionaries(st.text(max_size=2), st.integers(), max_size=2),
)


@st.composite
def nudged(draw: Any, value: Any) -> Any:
    """A value near ``value``: ints moved a little, bools flipped or made ints, lists
    with an item dropped, doubled or changed."""
    if isinstance(value, bool):
        return draw(st.sampled_from([not value, int(value), str(value).lower()]))
    if isinstance(value, int):
        return value + draw(st.integers(-3, 3)) if draw(st.integers(0, 3)) else float(value)
    if isinstance(value, list) and value:
        at = draw(st.integers(0, len(value) - 1))
        kind = draw(st.sampled_from(["drop", "double", "change"]))
        if kind == "drop":
            return value[:at] + value[at + 1:]
        if kind == "double":
            return value[:at + 1] + value[at:]
        return value[:at] + [draw(nudged(value[at]))] + value[at + 1:]
    return draw(junk)


@st.composite
def mangled(draw: Any, state: dict[str, Any], inner: str | None = None) -> dict[str, Any]:
    """``state`` with 1 to 3 fields deleted, replaced or nudged (``inner``: a key whose
    value is a list of states, mangled too)."""
    state = copy.deepcopy(state)
    for _ in range(draw(st.sampled_from([1, 1, 2, 3]))):
        target = state
        nested = state.get(inner) if inner else None
        inside = [s for s in nested if isinstance(s, dict)] if isinstance(nested, list) else []
        if inside and draw(st.booleans()):
            target = draw(st.sampled_from(inside))
        key = draw(st.sampled_from(sorted(target) + ["bogus"]))
        kind = draw(st.sampled_from(["delete", "replace", "nudge", "nudge"]))
        if kind == "delete":
            target.pop(key, None)
        elif kind == "replace":
            target[key] = draw(junk)
        elif key in target:
            target[key] = draw(nudged(target[key]))
    return state


# -- reader states ----------------------------------------------------------------------------

READERS = [  # options, (rank, world_size), (worker, num_workers, batch_size)
    ({"shuffle": True, "seed": 3, "shuffle_buffer": 4}, (0, 1), None),
    ({"shuffle": True, "seed": 5, "shuffle_buffer": 1}, (1, 2), None),
    ({"shuffle": True, "seed": 7, "shuffle_buffer": 6}, (0, 2), (1, 2, 3)),
    ({"shuffle": False}, (0, 1), None),
    ({"shuffle": False}, (1, 2), (0, 2, None)),
    ({"shuffle": False, "split": "range"}, (0, 3), (1, 2, 2)),
]


def make_reader(k: int, **extra: Any) -> RecordIO:
    options, (rank, world), worker = READERS[k]
    read = RecordIO(pattern("a"), rank=rank, world_size=world, **{**options, **extra})
    if worker is not None:
        read = read.for_worker(worker[0], worker[1], batch_size=worker[2])
    return read


def expected_pass(k: int, loaded: dict[str, Any]) -> list[Any]:
    """What the first pass after loading ``loaded`` (a checked state) must yield."""
    options, (rank, world), worker = READERS[k]
    fixed, ranked = loaded["epoch_set"], "rank" in loaded
    epoch = loaded["epoch"]
    if ranked and loaded["done"] and not fixed:  # over: the next pass is the next epoch
        return pass_of(k, loaded["seed"], epoch + 1)
    skip = loaded["yielded"] if ranked else 0
    if not options["shuffle"]:
        return pass_of(k, loaded["seed"], epoch)[skip:]
    whole = RecordIO(pattern("a"), **{**options, "seed": loaded["seed"]})
    whole.set_epoch(epoch)
    order = list(whole())  # the epoch order, position by position
    taken = {p for a, b in merge(loaded["base"]) for p in range(a, b)}
    left = [x for p, x in enumerate(order) if p not in taken]
    w, nw, align = (0, 1, 1) if worker is None else (worker[0], worker[1], worker[2] or 1)
    lo, hi = slot_range(len(left), rank, world, w, nw, align)
    return left[lo + skip:hi]


def pass_of(k: int, seed: int, epoch: int) -> list[Any]:
    read = make_reader(k, seed=seed)
    read.set_epoch(epoch)
    return list(read())


READER_STATES: dict[int, list[dict[str, Any]]] = {}


def reader_states(k: int) -> list[dict[str, Any]]:
    """Valid states of reader ``k``: before, in and after a pass (epochs 0 and 2)."""
    if k not in READER_STATES:
        states = []
        for epoch in (None, 2):
            read = make_reader(k)
            if epoch is not None:
                read.set_epoch(epoch)
            states.append(read.state_dict())
            stream = read()
            for _ in range(3):
                if next(stream, None) is not None:
                    states.append(json.loads(json.dumps(read.state_dict())))
            list(stream)
            states.append(read.state_dict())
        READER_STATES[k] = states
    return READER_STATES[k]


@st.composite
def reader_cases(draw: Any) -> tuple[int, dict[str, Any]]:
    k = draw(st.integers(0, len(READERS) - 1))
    state = draw(st.sampled_from(reader_states(k)))
    if READERS[k][0]["shuffle"] and draw(st.booleans()):  # a combined state
        state = RecordIO.combine_states([state])
    return k, draw(mangled(state))


def test_mangled_reader_states_load_exactly_or_not_at_all():
    @FUZZ
    @given(reader_cases())
    def check(case: tuple[int, dict[str, Any]]) -> None:
        k, state = case
        reader = make_reader(k, seed=0)
        try:
            reader.load_state_dict(state)
        except InvalidArgumentError:
            return
        got = list(reader())
        assert len(got) == len(set(got))
        assert got == expected_pass(k, check_state(state))

    check()


def test_mangled_combined_states_combine_or_raise():
    @FUZZ
    @given(st.lists(st.tuples(st.integers(0, 2), st.integers(0, 7)), min_size=1,
                    max_size=3).flatmap(
        lambda picks: st.tuples(*[mangled(reader_states(k)[i % len(reader_states(k))])
                                  for k, i in picks])))
    def check(states: tuple[dict[str, Any], ...]) -> None:
        try:
            combined = RecordIO.combine_states(list(states))
        except InvalidArgumentError:
            return
        check_state(combined)  # what combine gives loads

    check()


# -- mix states -------------------------------------------------------------------------------

SOURCES = [{"shuffle": True, "seed": 1, "shuffle_buffer": 4}, {"shuffle": False}]


def make_mix(stop: str) -> Any:
    readers = [RecordIO(pattern(name), **options)
               for name, options in zip(SIZES, SOURCES, strict=True)]
    return mix(readers, [2, 1], seed=9, stop=stop)


MIX_STATES: dict[str, list[dict[str, Any]]] = {}


def mix_states(stop: str) -> list[dict[str, Any]]:
    if stop not in MIX_STATES:
        states = []
        one = make_mix(stop)
        for _ in range(2):
            stream = one()
            states.append(json.loads(json.dumps(one.state_dict())))
            for step in range(40):
                if next(stream, None) is None:
                    break
                if step % 6 == 2:
                    states.append(json.loads(json.dumps(one.state_dict())))
            states.append(json.loads(json.dumps(one.state_dict())))
        MIX_STATES[stop] = states
    return MIX_STATES[stop]


def source_pass(k: int, seed: int, epoch: int) -> list[Any]:
    name = list(SIZES)[k]
    read = RecordIO(pattern(name), **{**SOURCES[k], "seed": seed})
    read.set_epoch(epoch)
    return list(read())


def test_mangled_mix_states_load_exactly_or_not_at_all():
    @FUZZ
    @given(st.sampled_from(["first", "all"]).flatmap(
        lambda stop: st.tuples(st.just(stop), st.sampled_from(mix_states(stop)).flatmap(
            lambda s: mangled(s, inner="sources")))))
    def check(case: tuple[str, dict[str, Any]]) -> None:
        stop, state = case
        mixed = make_mix(stop)
        try:
            mixed.load_state_dict(state)
        except InvalidArgumentError:
            return
        got = list(mixed())
        assert len(got) == len(set(got))
        if state["done"] and state["epoch_set"]:  # the pass it had finished: nothing
            expected = [[], []]                     # more of it, as a reader's
        elif state["done"]:  # the next epoch's pass: every source afresh
            epoch = state["epoch"] + 1
            expected = [source_pass(k, SOURCES[k].get("seed", 0), epoch) for k in (0, 1)]
        else:
            expected = []
            for k, (sub, on) in enumerate(zip(state["sources"], state["active"],
                                              strict=True)):
                loaded = check_state(sub)
                seed = loaded["seed"]
                if not on:  # dropped out: its state says its pass was over
                    assert loaded["done"] and loaded["epoch"] == state["epoch"]
                    expected.append([])
                elif loaded["epoch"] != state["epoch"]:  # dropped: a fresh pass
                    expected.append(source_pass(k, seed, state["epoch"]))
                else:
                    expected.append(resumed_source(k, loaded))
        for k, name in enumerate(SIZES):
            mine = [x for x in got if x[0] == name]
            if stop == "all":
                assert mine == expected[k]
            else:
                assert mine == expected[k][:len(mine)]

    check()


def resumed_source(k: int, loaded: dict[str, Any]) -> list[Any]:
    """What source ``k`` yields of its pass resumed from ``loaded`` (of the mix's epoch)."""
    whole = source_pass(k, loaded["seed"], loaded["epoch"])
    if "rank" not in loaded:  # a combined state: its base positions are consumed
        taken = {p for a, b in loaded["base"] for p in range(a, b)}
        return [x for p, x in enumerate(whole) if p not in taken]
    if loaded["done"] and not loaded["epoch_set"]:
        return []  # over (the mix sets the epoch, so this pass is of the same epoch)
    if SOURCES[k]["shuffle"]:
        taken = {p for a, b in loaded["base"] for p in range(a, b)}
        left = [x for p, x in enumerate(whole) if p not in taken]
        return left[loaded["yielded"]:]
    return whole[loaded["yielded"]:]


# -- TaskQueue checkpoints --------------------------------------------------------------------


class Clock:
    now = 0.0

    def __call__(self) -> float:
        return self.now


def queue_states() -> list[dict[str, Any]]:
    clock = Clock()
    tasks = [Task("f", 4 * k, 4 * k + 4) for k in range(5)]
    queue = TaskQueue(tasks, lease_timeout=9, max_attempts=2, num_epochs=2, shuffle=True,
                      seed=4, clock=clock)
    states = [queue.state_dict()]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for step in range(14):
            lease = queue.get("w")
            if lease is None:
                break
            queue.report(lease.id, step % 3 != 1, error="flaky")
            held = queue.get("v") if step == 4 else None
            states.append(json.loads(json.dumps(queue.state_dict())))
            if held is not None:
                queue.report(held.id, True)
    return states


QUEUE_STATES = queue_states()


def test_mangled_task_queue_checkpoints_restore_exactly_or_not_at_all():
    @FUZZ
    @given(st.sampled_from(QUEUE_STATES).flatmap(mangled))
    def check(state: dict[str, Any]) -> None:
        try:
            queue = TaskQueue.from_state(state, clock=Clock())
        except InvalidArgumentError:
            return
        tasks = [Task(*t) for t in state["tasks"]]
        first, last = state["epoch"], min(state["num_epochs"], state["epoch"] + 2)
        completed: dict[int, Counter[Task]] = {e: Counter() for e in range(first, last)}
        while not queue.finished():
            lease = queue.get("w")
            assert lease is not None  # nothing is leased out: a task is free
            if lease.epoch >= last:
                break
            assert queue.report(lease.id, True)
            completed[lease.epoch][lease.task] += 1
        left = Counter(tasks[i] for i in state["todo"]) if first < state["num_epochs"] \
            else Counter()
        assert completed.get(first, Counter()) == left
        for epoch in range(first + 1, last):
            assert completed[epoch] == Counter(tasks)

    check()
