"""Issue 22 (trust, second round), items 5, 6 and 12: loaded states are untrusted input.

A reader state, a combined state, a split's or a mix's state and a TaskQueue checkpoint
come back from a user's checkpoint file: every field is checked (type, range, and against
the other fields and the reader), or ``InvalidArgumentError`` names the field, what was
expected and what was found; and a restored TaskQueue never reuses a lease id. Each test
here failed on the code before: states past a rank's share silently skipped data,
``"done": "no"`` read as done, a negative mix step raised ``IndexError``, and a restored
queue let a stale worker complete a task it never read.
"""

from __future__ import annotations

import copy
import json
import uuid
import warnings

import fsspec
import pytest

from recprep import InvalidArgumentError, RecordIO, TaskQueue, convert, index_split, mix
from recprep.read.ranks import Task

MEM = fsspec.filesystem("memory")


@pytest.fixture(scope="module")
def sets():
    """A set of 1000 instances (0 .. 999) in 4 shards, and two small ones to mix."""
    url = f"memory:///trust-h2-{uuid.uuid4().hex}"
    convert(f"{url}/big", list(range(1000)), 4, "b", chunk_bytes=256, progress=False)
    convert(f"{url}/x", [("x", i) for i in range(30)], 2, "x", chunk_bytes=64, progress=False)
    convert(f"{url}/y", [("y", i) for i in range(20)], 1, "y", chunk_bytes=64, progress=False)
    yield {"big": f"{url}/big/b-*", "x": f"{url}/x/x-*", "y": f"{url}/y/y-*"}
    MEM.rm(url.removeprefix("memory://"), recursive=True)


def roundtrip(state):
    return json.loads(json.dumps(state))


def taken(reader, n):
    """The state of ``reader`` after ``n`` instances of a pass."""
    stream = reader()
    for _ in range(n):
        next(stream)
    return roundtrip(reader.state_dict())


# -- item 6: a state past its share --------------------------------------------------------


@pytest.mark.parametrize("shuffle", [True, False])
def test_a_state_past_its_ranks_share_is_refused(sets, shuffle):
    """Rank 1 of 2 read 20 of its 500; a state saying 600 used to be loaded and make the
    resumed rank read nothing (and 120 of them never existed): now it names 'yielded'."""
    options = {"shuffle": shuffle, "seed": 4, "shuffle_buffer": 50}
    state = taken(RecordIO(sets["big"], rank=1, world_size=2, **options), 20)
    assert state["yielded"] == 20
    again = RecordIO(sets["big"], rank=1, world_size=2, **options)
    with pytest.raises(InvalidArgumentError, match=r"'yielded' must be at most 500.*600"):
        again.load_state_dict({**state, "yielded": 600})
    again.load_state_dict(state)  # the true state still loads, and reads the other 480
    assert len(list(again())) == 480


def test_a_combined_state_of_states_past_their_shares_is_refused(sets):
    """Combining states that claim more than their ranks hold used to give a state that
    every new rank loaded, and that left the new world reading 0 instead of 980."""
    options = {"shuffle": True, "seed": 4, "shuffle_buffer": 50}
    states = [taken(RecordIO(sets["big"], rank=r, world_size=2, **options), 10)
              for r in (0, 1)]
    good = RecordIO.combine_states(states)
    new = [RecordIO(sets["big"], rank=r, world_size=3, **options) for r in range(3)]
    for reader in new:
        reader.load_state_dict(good)
    assert sum(len(list(r())) for r in new) == 980
    with pytest.raises(InvalidArgumentError, match=r"'yielded' must be at most 500"):
        RecordIO.combine_states([states[0], {**states[1], "yielded": 900}])


@pytest.mark.parametrize("shuffle", [True, False])
def test_done_no_is_not_read_as_done(sets, shuffle):
    """``"done": "no"`` (a truthy str) used to end the epoch: the rest was never read."""
    options = {"shuffle": shuffle, "seed": 4, "shuffle_buffer": 50}
    state = taken(RecordIO(sets["big"], **options), 5)
    with pytest.raises(InvalidArgumentError,
                       match=r"'done' must be a bool \(true or false\), found 'no' \(str\)"):
        RecordIO(sets["big"], **options).load_state_dict({**state, "done": "no"})


READER_DAMAGE = [  # (field, value, what the message says was expected)
    ("recprep_state", True, "version True"),
    ("shuffle", 1, "'shuffle' must be a bool"),
    ("seed", -1, "'seed' must be an int >= 0, found -1"),
    ("seed", 2.0, "'seed' must be an int >= 0, found 2.0 \\(float\\)"),
    ("seed", True, "'seed' must be an int >= 0, found True \\(bool\\)"),
    ("epoch", "1", "'epoch' must be an int >= 0, found '1' \\(str\\)"),
    ("epoch_set", "yes", "'epoch_set' must be a bool"),
    ("records", True, "'records' must be an int"),
    ("files", -4, "'files' must be an int >= 0"),
    ("block", 0, "'block' must be an int >= 1"),
    ("permuted", 1, "'permuted' must be a bool"),
    ("base", [[3, 2]], "'base' must be a list of sorted, disjoint"),
    ("base", [[5, 6], [0, 1]], "'base' must be a list of sorted, disjoint"),
    ("base", [[0, 2], [1, 3]], "'base' must be a list of sorted, disjoint"),
    ("base", [[0, True]], "'base' must be a list of sorted, disjoint"),
    ("base", [[0, 1001]], "'base' must be .* <= 1000"),
    ("base", "0-10", "'base' must be a list"),
    ("rank", "1", "'rank' must be an int in \\[0, 1\\]"),
    ("world_size", 0, "'world_size' must be an int >= 1"),
    ("worker", 1, "'worker' must be an int in \\[0, 0\\]"),
    ("num_workers", 1.0, "'num_workers' must be an int >= 1"),
    ("yielded", -1, "'yielded' must be an int >= 0"),
    ("yielded", 3.0, "'yielded' must be an int >= 0, found 3.0"),
    ("done", 0, "'done' must be a bool"),
    ("align", 0, "'align' must be an int >= 1"),
]


@pytest.mark.parametrize("field,value,message", READER_DAMAGE,
                         ids=[f"{f}={v!r}" for f, v, _ in READER_DAMAGE])
def test_every_field_of_a_reader_state_is_checked(sets, field, value, message):
    options = {"shuffle": True, "seed": 4, "shuffle_buffer": 50}
    state = taken(RecordIO(sets["big"], rank=1, world_size=2, **options), 7)
    reader = RecordIO(sets["big"], rank=1, world_size=2, **options)
    before = reader.state_dict()
    with pytest.raises(InvalidArgumentError, match=message):
        reader.load_state_dict({**state, field: value})
    assert reader.state_dict() == before  # a refused state changes nothing


def test_a_rank_state_lacking_split_fields_is_damaged(sets):
    state = taken(RecordIO(sets["big"], shuffle=True, seed=1, rank=1, world_size=2), 3)
    del state["num_workers"]
    with pytest.raises(InvalidArgumentError, match=r"lacks \['num_workers'\]"):
        RecordIO(sets["big"], shuffle=True, rank=1, world_size=2).load_state_dict(state)


def test_states_of_batch_aligned_workers_load_only_into_the_same_split(sets):
    read = RecordIO(sets["big"], shuffle=True, seed=2)
    state = taken(read.for_worker(1, 2, batch_size=64), 3)
    assert state["align"] == 64
    with pytest.raises(InvalidArgumentError, match="in batches of 64, this reader's in "
                                                   "batches of 1"):
        read.for_worker(1, 2).load_state_dict(state)
    again = RecordIO(sets["big"], shuffle=True).for_worker(1, 2, batch_size=64)
    again.load_state_dict(state)
    whole = read.for_worker(1, 2, batch_size=64)
    assert list(again()) == list(whole())[3:]


# -- item 12 and item 6: split and mix states ---------------------------------------------


def test_a_split_state_is_checked(sets):
    part = index_split(RecordIO(sets["big"]), {"a": 0.5, "b": 0.5})["b"]
    state = taken(part, 10)
    for field, value, message in [
        ("yielded", 501, "'yielded' must be at most 500, this split's share"),
        ("yielded", "10", "'yielded' must be an int"),
        ("done", "no", "'done' must be a bool"),
        ("epoch_set", None, "'epoch_set' must be a bool"),
        ("epoch", -2, "'epoch' must be an int >= 0"),
        ("name", 7, "'name' must be a str"),
        ("recprep_split", True, "expected a split state"),
        ("worker", 1, "worker 1 of 1"),
    ]:
        fresh = index_split(RecordIO(sets["big"]), {"a": 0.5, "b": 0.5})["b"]
        with pytest.raises(InvalidArgumentError, match=message):
            fresh.load_state_dict({**state, field: value})
    fresh.load_state_dict(state)
    assert list(fresh()) == list(range(510, 1000))


def make_mix(sets, stop="all", seed=3):
    return mix([RecordIO(sets["x"], shuffle=True, seed=1), RecordIO(sets["y"])], [2, 1],
               seed=seed, stop=stop)


def test_a_negative_mix_step_is_refused_not_an_index_error(sets):
    one = make_mix(sets)
    stream = one()
    head = [next(stream) for _ in range(9)]
    state = roundtrip(one.state_dict())
    again = make_mix(sets)
    with pytest.raises(InvalidArgumentError, match=r"mix state's 'step' must be an int >= 0"):
        again.load_state_dict({**state, "step": -3})
        list(again())  # on the code before: IndexError here
    again.load_state_dict(state)
    assert sorted(head + list(again())) == sorted(
        [("x", i) for i in range(30)] + [("y", i) for i in range(20)])


def mix_state(sets, steps=9):
    one = make_mix(sets)
    stream = one()
    for _ in range(steps):
        next(stream)
    return roundtrip(one.state_dict())


MIX_DAMAGE = [
    (lambda s: {**s, "step": 10}, "'step' must be 9, the instances its sources"),
    (lambda s: {**s, "step": 1.5}, "'step' must be an int"),
    (lambda s: {**s, "done": "no"}, "'done' must be a bool"),
    (lambda s: {**s, "epoch_set": 1}, "'epoch_set' must be a bool"),
    (lambda s: {**s, "epoch": -1}, "'epoch' must be an int >= 0"),
    (lambda s: {**s, "epoch": 1}, "source 0's is of epoch 0"),
    (lambda s: {**s, "seed": "3"}, "'seed' must be an int"),
    (lambda s: {**s, "active": [1, 1]}, "'active' must be a list of 2 bools"),
    (lambda s: {**s, "active": [True]}, "'active' must be a list of 2 items"),
    (lambda s: {**s, "active": [False, False]}, "at least one true"),
    (lambda s: {**s, "active": [True, False]}, "'active' must be true for source 1: a "
                                               "source drops out when its pass is over"),
    (lambda s: {**s, "recprep_mix": True}, "expected a mix state"),
    (lambda s: {**s, "weights": [True, 1]}, "'weights' must be a list of numbers"),
    (lambda s: {**s, "sources": s["sources"][:1]}, "sources \\(the state has 1, this mix 2"),
    (lambda s: {**s, "sources": [s["sources"][0], {**s["sources"][1], "done": "no"}]},
     "source 1: a reader state's 'done' must be a bool"),
    (lambda s: {**s, "sources": [{**s["sources"][0], "yielded": 99}, s["sources"][1]]},
     "source 0: a reader state's 'yielded' must be at most 30"),
]


@pytest.mark.parametrize("damage,message", MIX_DAMAGE, ids=[m for _, m in MIX_DAMAGE])
def test_every_field_of_a_mix_state_is_checked(sets, damage, message):
    state = mix_state(sets)
    again = make_mix(sets)
    before = (again.state_dict(), [s.state_dict() for s in again.sources])
    with pytest.raises(InvalidArgumentError, match=message):
        again.load_state_dict(damage(copy.deepcopy(state)))
    # refused before anything was loaded: the mix and its sources are as they were
    assert (again.state_dict(), [s.state_dict() for s in again.sources]) == before


def test_stop_first_mix_states_keep_every_source_active(sets):
    one = make_mix(sets, stop="first")
    stream = one()
    next(stream)
    state = roundtrip(one.state_dict())
    with pytest.raises(InvalidArgumentError, match="all true: with stop='first'"):
        make_mix(sets, stop="first").load_state_dict({**state, "active": [True, False]})


# -- item 5: lease ids are unique across restores -----------------------------------------


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_stale_worker_of_the_restored_queue_completes_nothing():
    """The queue hands out a lease after its last checkpoint, then dies; restored from the
    checkpoint, it used to hand out the same id for another task, and the stale worker's
    success completed that task (never read), while its own was read again."""
    tasks = [Task("f", 10 * k, 10 * k + 10) for k in range(4)]
    clock = Clock()
    queue = TaskQueue(tasks, lease_timeout=30, clock=clock)
    first = queue.get("w0")
    assert queue.report(first.id, True)
    checkpoint = roundtrip(queue.state_dict())
    stale = queue.get("w1")  # handed out after the checkpoint: the queue then dies
    restored = TaskQueue.from_state(checkpoint, clock=clock)
    fresh = restored.get("w2")
    assert fresh.task == stale.task and fresh.id != stale.id
    assert restored.report(stale.id, True) is False  # the old incarnation's lease
    assert restored.renew(stale.id) is False
    other = restored.get("w3")
    assert other.task != stale.task and other.id != stale.id
    assert restored.report(fresh.id, True) and restored.report(other.id, True)
    done = {tuple(tasks[i]) for i in restored.state_dict()["done"]}
    assert done == {tuple(first.task), tuple(fresh.task), tuple(other.task)}


def test_two_restores_of_one_checkpoint_hand_out_different_ids():
    tasks = [Task("f", k, k + 1) for k in range(50)]
    checkpoint = roundtrip(TaskQueue(tasks).state_dict())
    one, two = TaskQueue.from_state(checkpoint), TaskQueue.from_state(checkpoint)
    ids_one = [one.get("a").id for _ in range(20)]
    ids_two = [two.get("b").id for _ in range(20)]
    assert not set(ids_one) & set(ids_two)
    assert all(0 <= i < 2**63 for i in ids_one + ids_two)
    assert all(two.report(i, True) is False for i in ids_one)  # a sibling's: refused
    assert two.progress()["doing"] == 20
    again = TaskQueue.from_state(roundtrip(one.state_dict()))  # a restore of a restore
    assert again._incarnation not in roundtrip(one.state_dict())["incarnations"]


def test_a_fresh_queue_still_refuses_ids_it_never_handed_out():
    queue = TaskQueue([Task("f", 0, 1)])
    lease = queue.get()
    for bad in (lease.id + 1, 0, -1, True, "3", 2**64):
        with pytest.raises(InvalidArgumentError, match="expected a lease id this queue"):
            queue.report(bad, True)


def queue_state(**changes):
    clock = Clock()
    queue = TaskQueue([Task("f", 0, 5), Task("f", 5, 10), Task("g", 0, 7)], lease_timeout=5,
                      max_attempts=2, num_epochs=3, clock=clock)
    lease = queue.get("w")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        queue.report(lease.id, False, error="boom")
        queue.report(queue.get("w").id, True)
    state = roundtrip(queue.state_dict())
    assert state["attempts"] == [[0, 1]] and state["todo"] == [2, 0]
    return {**state, **changes}


QUEUE_DAMAGE = [
    ({"version": True}, "expected a TaskQueue state of version 1"),
    ({"tasks": [["f", 0, 5], ["f", 5, "10"], ["g", 0, 7]]}, "'tasks': task 1: expected"),
    ({"tasks": "abc"}, "'tasks' must be a list"),
    ({"lease_timeout": "5"}, "'lease_timeout' must be a positive number"),
    ({"lease_timeout": float("nan")}, "'lease_timeout' must be a positive number"),
    ({"max_attempts": 0}, "'max_attempts' must be an int >= 1"),
    ({"num_epochs": True}, "'num_epochs' must be an int >= 1"),
    ({"shuffle": 0}, "'shuffle' must be a bool"),
    ({"seed": -1}, "'seed' must be an int >= 0"),
    ({"epoch": 4}, "'epoch' must be an int in \\[0, 3\\]"),
    ({"epoch": 1.0}, "'epoch' must be an int in \\[0, 3\\]"),
    ({"next_id": -5}, "'next_id' must be an int in"),
    ({"todo": [2, 2, 0]}, "'todo' must be a list of distinct task indexes"),
    ({"todo": [2, "0"]}, "'todo' must be a list of distinct task indexes"),
    ({"todo": [2, 0, 3]}, "'todo' must be a list of distinct task indexes \\(ints 0 to 2"),
    ({"todo": [2]}, "each of the 3 task indexes once"),
    ({"todo": [2, 0, 1]}, "each of the 3 task indexes once"),
    ({"attempts": [[0, 3]]}, "'attempts' must be a list of \\[task index, attempts\\]"),
    ({"attempts": [[0, True]]}, "'attempts' must be a list of \\[task index, attempts\\]"),
    ({"attempts": [[0, 1], [0, 1]]}, "'attempts' must be a list of"),
    ({"attempts": [[0, 2]], "errors": [[0, ["a", "b"]]]}, "below 2 \\(max_attempts\\)"),
    ({"errors": [[0, [7]]]}, "'errors' must be a list of \\[task index"),
    ({"errors": []}, "'errors' must be one entry per task with attempts"),
    ({"given_up": [1], "done": []}, "'attempts' must be 2 \\(max_attempts\\) for task 1"),
    ({"failed": [{"task": ["f", 0, 5], "epoch": 9, "attempts": 2, "errors": []}]},
     "'failed' must be a list of"),
    ({"failed": [{"task": ["f", 5, 0], "epoch": 0, "attempts": 2, "errors": []}]},
     "'failed': task 0: expected"),
    ({"incarnations": [0]}, "'incarnations' must be a list of ints from 1"),
]


@pytest.mark.parametrize("changes,message", QUEUE_DAMAGE, ids=[m for _, m in QUEUE_DAMAGE])
def test_every_field_of_a_task_queue_checkpoint_is_checked(changes, message):
    state = queue_state(**changes)
    with pytest.raises(InvalidArgumentError, match=message):
        TaskQueue.from_state(state)


def test_a_checked_checkpoint_still_restores():
    queue = TaskQueue.from_state(queue_state())
    seen = []
    while (lease := queue.get("w")) is not None and lease.epoch == 0:
        seen.append(lease.task)
        assert queue.report(lease.id, True)
    assert sorted(seen) == [Task("f", 0, 5), Task("g", 0, 7)]
