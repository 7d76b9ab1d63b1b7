"""Checkpointable and elastic reading passes (issue 16, items 1 and 2)."""

from __future__ import annotations

import collections
import json
import uuid
import warnings

import fsspec
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, RecordIO, convert
from recprep.read.checkpoint import ResumeWarning, size

from .test_reading import CountingCodec

MEM = fsspec.filesystem("memory")
SETTINGS = settings(
    max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


def write_sets(url: str, sizes: list[int], chunk_bytes: int = 40) -> list[str]:
    """One single-shard set per size (files of random sizes) and a two-shard set of 9:
    the instances are 0 .. n - 1, unique across the files."""
    patterns, at = [], 0
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # empty shards
        for k, n in enumerate([*sizes, 9]):
            shards = 2 if k == len(sizes) else 1
            convert(url, list(range(at, at + n)), shards, f"s{k}", chunk_bytes=chunk_bytes,
                    progress=False)
            patterns.append(f"{url}/s{k}-*-of-*")
            at += n
    return patterns


@pytest.fixture
def mem():
    url = f"memory://ckpt-{uuid.uuid4().hex}"
    yield url
    MEM.rm(url.removeprefix("memory:/"), recursive=True)


def roundtrip(state):
    """States travel as JSON."""
    return json.loads(json.dumps(state))


options_st = st.fixed_dictionaries({
    "shuffle": st.booleans(),
    "seed": st.integers(0, 2**40),
    "shuffle_buffer": st.sampled_from([0, 1, 3, 7, 50]),
    "num_threads": st.integers(0, 2),
})


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 30), min_size=1, max_size=4),
    options=options_st,
    epoch=st.none() | st.integers(0, 3),
    split=st.tuples(st.integers(1, 3), st.integers(0, 2), st.integers(1, 2), st.integers(0, 1)),
    stop=st.floats(0, 1),
)
def test_a_resumed_pass_yields_exactly_the_rest(sizes, options, epoch, split, stop):
    url = f"memory://ckpt-{uuid.uuid4().hex}"
    try:
        patterns = write_sets(url, sizes)
        world_size, rank, num_workers, worker = split
        rank, worker = rank % world_size, worker % num_workers

        def reader(**extra):
            read = RecordIO(patterns, rank=rank, world_size=world_size, **{**options, **extra})
            read = read.for_worker(worker, num_workers) if num_workers > 1 else read
            if epoch is not None:
                read.set_epoch(epoch)
            return read

        def second_pass_reader():
            read = reader()
            if epoch is None:  # the second pass, epoch 1 by counting passes
                list(read())
            return read

        full = list(second_pass_reader()())
        first = second_pass_reader()
        stream = first()
        cut = int(stop * len(full))
        head = [next(stream) for _ in range(cut)]
        state = roundtrip(first.state_dict())
        assert size(state) < 4096
        later = reader(seed=None)  # the seed comes from the state
        if epoch is None:
            later._passes.passes = 5  # so does the epoch
        later.load_state_dict(state)
        assert later.state_dict() == state  # loaded, not started: the same position
        rest = list(later())
        assert head == full[:cut] and head + rest == full
        ended = later.state_dict()
        assert ended["done"] and ended["yielded"] == len(full) and ended["epoch"] == state["epoch"]
    finally:
        MEM.rm(url.removeprefix("memory:/"), recursive=True)


@SETTINGS
@given(
    sizes=st.lists(st.integers(0, 40), min_size=1, max_size=4),
    seed=st.integers(0, 2**40),
    buffer=st.sampled_from([0, 2, 5, 16]),
    worlds=st.lists(st.tuples(st.integers(1, 4), st.integers(1, 2)), min_size=2, max_size=3),
    stops=st.lists(st.floats(0, 1), min_size=16, max_size=16),
    threads=st.integers(0, 2),
)
def test_elastic_resume_reads_the_rest_exactly_once(sizes, seed, buffer, worlds, stops, threads):
    url = f"memory://ckpt-{uuid.uuid4().hex}"
    try:
        patterns = write_sets(url, sizes)
        n = sum(sizes) + 9
        options = {"shuffle": True, "seed": seed, "shuffle_buffer": buffer,
                   "num_threads": threads}

        def readers(world_size, num_workers, **extra):
            out = []
            for rank in range(world_size):
                read = RecordIO(patterns, rank=rank, world_size=world_size,
                                **{**options, **extra})
                read.set_epoch(2)
                out += [read.for_worker(w, num_workers) for w in range(num_workers)]
            return out

        # the epoch order is the same for every world: slots read contiguous slices of it
        order = [x for r in readers(1, 1) for x in r()]
        assert sorted(order) == list(range(n))
        for world_size, num_workers in worlds:
            assert [x for r in readers(world_size, num_workers) for x in r()] == order

        consumed: list = []
        state = None
        stops_ = iter(stops)
        for stage, (world_size, num_workers) in enumerate(worlds):
            last = stage == len(worlds) - 1
            states = []
            extra = {} if state is None else {"seed": None}  # the seed comes from the state
            for read in readers(world_size, num_workers, **extra):
                if state is not None:
                    read.load_state_dict(state)
                stream = read()
                if last:
                    consumed += list(stream)
                else:
                    share = len(read)
                    for _ in range(int(next(stops_) * share)):
                        item = next(stream, None)
                        if item is None:
                            break
                        consumed.append(item)
                    states.append(roundtrip(read.state_dict()))
            if not last:
                state = RecordIO.combine_states(states[::-1])  # any order
                assert size(state) < 4096
        counts = collections.Counter(consumed)
        assert sorted(consumed) == list(range(n)), [k for k, c in counts.items() if c > 1]
    finally:
        MEM.rm(url.removeprefix("memory:/"), recursive=True)


@pytest.mark.parametrize("shuffle", [False, True])
def test_batches_resume_where_they_stopped(mem, shuffle):
    patterns = write_sets(mem, [23, 5, 40])
    options = {"shuffle": shuffle, "seed": 3, "shuffle_buffer": 8, "num_threads": 1}
    full = [b.tolist() for b in RecordIO(patterns, **options).batches(4)]
    read = RecordIO(patterns, **options)
    batches = read.batches(4)
    head = [next(batches).tolist() for _ in range(7)]
    state = read.state_dict()
    assert state["yielded"] == 28
    again = RecordIO(patterns, **options)
    again.load_state_dict(state)
    assert head + [b.tolist() for b in again.batches(4)] == full


@pytest.mark.parametrize("shuffle", [False, True])
def test_a_resume_decodes_nothing_already_consumed(tmp_path, shuffle):
    convert(str(tmp_path), list(range(3000)), 3, "p", chunk_bytes=64, progress=False)
    pattern = str(tmp_path / "p-*")
    options = {"shuffle": shuffle, "seed": 1, "shuffle_buffer": 100}
    read = RecordIO(pattern, **options)
    stream = read()
    for _ in range(2950):
        next(stream)
    codec = CountingCodec()
    again = RecordIO(pattern, codec=codec, **options)
    again.load_state_dict(read.state_dict())
    assert list(again()) == list(stream)
    # the 50 left; shuffled, the (at most two) blocks they lie in, plus the chunks that
    # straddle block edges
    assert codec.calls <= (2 * 100 + 20 if shuffle else 50 + 10)


def test_states_are_checked(mem):
    patterns = write_sets(mem, [10])
    read = RecordIO(patterns, shuffle=True, seed=2, rank=1, world_size=2)
    stream = read()
    next(stream)
    state = read.state_dict()
    with pytest.raises(InvalidArgumentError, match="combine_states"):
        RecordIO(patterns, shuffle=True, rank=0, world_size=2).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="shuffle_buffer"):
        RecordIO(patterns, shuffle=True, shuffle_buffer=3, rank=1,
                 world_size=2).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match=r"records \(the state's 19"):
        RecordIO(patterns[:1], shuffle=True, rank=1, world_size=2).load_state_dict(state)
    with pytest.raises(InvalidArgumentError, match="version 99"):
        RecordIO(patterns).load_state_dict({**state, "recprep_state": 99})
    with pytest.raises(InvalidArgumentError, match="lacks"):
        RecordIO(patterns).load_state_dict({"recprep_state": 1})
    with pytest.raises(InvalidArgumentError, match="base"):
        RecordIO(patterns, shuffle=True, rank=1, world_size=2).load_state_dict(
            {**state, "base": [[0, 1000]]})
    other = RecordIO(patterns, shuffle=True, seed=2)
    other.set_epoch(4)
    with pytest.raises(InvalidArgumentError, match=r"epoch \(0 != 4\)"):
        RecordIO.combine_states([state, other.state_dict()])
    plain = RecordIO(patterns)
    with pytest.raises(InvalidArgumentError, match="shuffle=True"):
        RecordIO.combine_states([plain.state_dict()])
    with pytest.raises(InvalidArgumentError, match="none"):
        RecordIO.combine_states([])


def test_a_state_of_another_epoch_is_dropped_with_a_warning(mem):
    patterns = write_sets(mem, [10])
    read = RecordIO(patterns, shuffle=True, seed=2)
    read.set_epoch(1)
    stream = read()
    head = [next(stream) for _ in range(3)]
    again = RecordIO(patterns, shuffle=True)
    again.load_state_dict(read.state_dict())
    assert again.epoch == 1 and again.seed == 2
    again.set_epoch(2)
    with pytest.warns(ResumeWarning, match="epoch 1, 3 instances"):
        assert sorted(again()) == list(range(19))
    assert head == list(stream)[:0] + head  # the original pass is untouched


def test_a_completed_pass_checkpoints_as_the_start_of_the_next(mem):
    patterns = write_sets(mem, [10])
    read = RecordIO(patterns, shuffle=True, seed=5)
    first = list(read())
    state = read.state_dict()
    assert (state["epoch"], state["yielded"], state["done"]) == (0, 19, True)
    again = RecordIO(patterns, shuffle=True)
    again.load_state_dict(state)
    assert again.epoch == 1
    second = list(again())
    assert second == list(read()) and second != first
    fixed = RecordIO(patterns, shuffle=True, seed=5)  # with set_epoch: the epoch set goes on
    fixed.set_epoch(0)
    fixed_state = fixed.state_dict()
    list(fixed())
    ended = fixed.state_dict()
    resumed = RecordIO(patterns, shuffle=True, seed=5)
    resumed.load_state_dict(ended)
    assert list(resumed()) == []  # epoch 0 is over
    resumed.load_state_dict(ended)
    resumed.set_epoch(1)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # a finished pass is dropped without a warning
        assert list(resumed()) == second
    assert fixed_state["yielded"] == 0 and not fixed_state["done"]
