"""ElasticDL-style task dispatch: recprep.TaskQueue (issue 16, item 5)."""

from __future__ import annotations

import collections
import json
import random
import threading
import time
import uuid
import warnings

import fsspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from recprep import InvalidArgumentError, RecordIO, TaskQueue, convert
from recprep.read.ranks import Task
from recprep.read.taskqueue import TaskAbandonedWarning

N = 57  # instances 0 .. 56, in three shards with small chunks


@pytest.fixture(scope="module")
def reader():
    url = f"memory:///recprep-taskqueue-{uuid.uuid4().hex}"
    convert(url, list(range(N)), 3, "t", chunk_bytes=40, progress=False)
    yield RecordIO(f"{url}/t-*-of-*")
    fsspec.filesystem("memory").rm(url.removeprefix("memory://"), recursive=True)


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def restored(queue: TaskQueue, clock: Clock) -> TaskQueue:
    """The queue through a JSON round trip of its state."""
    return TaskQueue.from_state(json.loads(json.dumps(queue.state_dict())), clock=clock)


# -- the protocol, step by step -------------------------------------------------------------


def test_lease_fail_retry_and_done():
    clock = Clock()
    q = TaskQueue([Task("a", 0, 2), ("a", 2, 4)], lease_timeout=10, clock=clock)
    one, two = q.get("w0"), q.get("w1")
    assert (one.task, two.task) == (Task("a", 0, 2), Task("a", 2, 4))
    assert q.get("w2") is None and not q.finished()  # all leased: ask again later
    assert q.report(two.id, success=False, error="boom") is True
    again = q.get("w2")
    assert (again.task, again.attempt, again.worker) == (Task("a", 2, 4), 1, "w2")
    assert q.report(one.id, True) and q.report(again.id, True)
    assert q.finished() and q.get("w0") is None
    assert q.report(one.id, True) is False  # reported already


def test_late_success_after_re_lease_is_refused():
    clock = Clock()
    q = TaskQueue([Task("a", 0, 5)], lease_timeout=10, clock=clock)
    slow = q.get("slow")
    clock.now = 10.5  # the lease ran out
    fast = q.get("fast")
    assert fast.task == slow.task and fast.id != slow.id and fast.attempt == 1
    assert q.report(slow.id, True) is False  # refused: the task is fast's now
    assert q.renew(slow.id) is False
    assert q.report(fast.id, True) is True
    assert q.progress() == {"epoch": 1, "todo": 0, "doing": 0, "done": 0, "failed": 0}
    assert q.finished()


def test_renew_keeps_a_lease():
    clock = Clock()
    q = TaskQueue([Task("a", 0, 5)], lease_timeout=10, clock=clock)
    lease = q.get()
    clock.now = 8
    assert q.renew(lease.id)
    clock.now = 15  # past the first deadline, before the renewed one
    assert q.get() is None
    assert q.report(lease.id, True) and q.finished()


def test_worker_lost_and_bounded_retries():
    clock = Clock()
    q = TaskQueue([Task("a", 0, 1), Task("b", 0, 1)], max_attempts=2, clock=clock)
    a, _ = q.get("w0"), q.get("w0")
    assert q.worker_lost("w0") == 2 and q.report(a.id, True) is False
    a2, b2 = q.get("w1"), q.get("w1")
    assert (a2.task, a2.attempt, b2.attempt) == (a.task, 1, 1)
    assert q.report(a2.id, True)
    with pytest.warns(TaskAbandonedWarning, match=r"Task\(path='b'.*failed 2 times.*disk full"):
        q.report(b2.id, False, error="disk full")
    assert q.finished()  # b is given up, not retried forever
    (failure,) = q.failures()
    assert failure == {
        "task": Task("b", 0, 1), "epoch": 0, "attempts": 2,
        "errors": ["worker 'w0' lost", "disk full"],
    }


def test_epochs_shuffled_by_seed_and_epoch():
    tasks = [Task("f", i, i + 1) for i in range(20)]

    def orders(seed: int) -> list[list[int]]:
        q = TaskQueue(tasks, num_epochs=3, shuffle=True, seed=seed)
        out: list[list[int]] = [[], [], []]
        while (lease := q.get()) is not None:
            out[lease.epoch].append(lease.task.start)
            q.report(lease.id, True)
        assert q.finished()
        return out

    first = orders(7)
    assert first == orders(7)  # a function of (seed, epoch)
    assert all(sorted(o) == list(range(20)) for o in first)
    assert len({tuple(o) for o in first}) == 3 and first != orders(8)
    plain = TaskQueue(tasks, num_epochs=1)
    assert [plain.get().task for _ in range(3)] == tasks[:3]  # unshuffled: as given


def test_bad_arguments_and_ids():
    with pytest.raises(InvalidArgumentError, match="lease_timeout must be a positive"):
        TaskQueue([], lease_timeout=0)
    with pytest.raises(InvalidArgumentError, match=r"task 1: expected Task\(path: str"):
        TaskQueue([Task("a", 0, 1), ("a", 3, 2)])
    q = TaskQueue([Task("a", 0, 1)])
    with pytest.raises(InvalidArgumentError, match="expected a lease id .* got 0"):
        q.report(0, True)
    assert TaskQueue([]).finished()
    with pytest.raises(InvalidArgumentError, match="expected a TaskQueue state of version 1"):
        TaskQueue.from_state({"version": 99})


# -- checkpoints ----------------------------------------------------------------------------


def test_checkpoint_restore_mid_epoch(reader):
    clock = Clock()
    q = TaskQueue(reader.tasks(4), lease_timeout=10, num_epochs=2, shuffle=True, seed=3,
                  clock=clock)
    seen = []
    for _ in range(5):
        lease = q.get()
        seen.extend(reader.read_range(*lease.task))
        assert q.report(lease.id, True)
    held = q.get("w9")  # leased when the checkpoint is taken
    state = q.state_dict()
    assert json.loads(json.dumps(state)) == state and len(json.dumps(state)) < 4096
    assert state["todo"][0] == state["tasks"].index(list(held.task))  # back in todo, first
    q2 = restored(q, clock)
    assert q2.report(held.id, True) is False  # the old lease is gone
    assert q2.progress() == {**q.progress(), "todo": q.progress()["todo"] + 1, "doing": 0}
    while (lease := q2.get()) is not None and lease.epoch == 0:
        seen.extend(reader.read_range(*lease.task))
        assert q2.report(lease.id, True)
    assert sorted(seen) == list(range(N))  # the epoch completed exactly once
    assert lease is not None and lease.epoch == 1  # and the next one starts


# -- exactly once, under random failures, deaths, timeouts and restores ---------------------


@settings(max_examples=60, deadline=None)
@given(
    outcomes=st.lists(st.sampled_from(["ok", "fail", "die", "late", "restore"]), max_size=60),
    records_per_task=st.integers(1, 20),
    concurrency=st.integers(1, 5),
    epochs=st.integers(1, 2),
    shuffle=st.booleans(),
)
def test_exactly_once_property(reader, outcomes, records_per_task, concurrency, epochs, shuffle):
    clock = Clock()
    timeout = 10.0
    q = TaskQueue(reader.tasks(records_per_task), lease_timeout=timeout, max_attempts=10**6,
                  num_epochs=epochs, shuffle=shuffle, seed=1, clock=clock)
    script = iter(outcomes)
    pending: list[tuple[object, str, list[int]]] = []
    read: dict[int, list[int]] = collections.defaultdict(list)  # epoch -> accepted instances
    wins: collections.Counter = collections.Counter()  # (epoch, task) -> accepted successes
    worker = 0
    while not q.finished():
        outcome = next(script, "ok")
        if outcome == "restore":
            q = restored(q, clock)
            continue
        lease = q.get(f"w{worker % concurrency}")
        worker += 1
        if lease is not None:
            pending.append((lease, outcome, list(reader.read_range(*lease.task))))
        if pending and (lease is None or len(pending) >= concurrency):
            lease_, what, data = pending.pop(0)
            if what == "late":
                clock.now += timeout + 1
                assert q.report(lease_.id, True) is False  # expired: refused
            elif what == "fail":
                q.report(lease_.id, False, error="injected")
            elif what in ("ok", "restore") and q.report(lease_.id, True):
                read[lease_.epoch].extend(data)
                wins[lease_.epoch, lease_.task] += 1
            # "die": never reported; the lease runs out
        elif lease is None:
            clock.now += timeout + 1  # only dead workers' leases are left
    assert sorted(read) == list(range(epochs))
    for epoch in range(epochs):
        assert sorted(read[epoch]) == list(range(N))
    assert set(wins.values()) == {1}
    assert q.failures() == []


# -- threads: workers that die or fail at random, a real clock ------------------------------


def test_threads_exactly_once(reader):
    q = TaskQueue(reader.tasks(3), lease_timeout=0.3, max_attempts=100, num_epochs=2,
                  shuffle=True, seed=5)
    lock = threading.Lock()
    read: dict[int, list[int]] = collections.defaultdict(list)

    def work(number: int) -> None:
        chance = random.Random(number)
        while not q.finished():
            lease = q.get(f"w{number}")
            if lease is None:
                time.sleep(0.01)
                continue
            data = list(reader.read_range(*lease.task))
            roll = chance.random()
            if roll < 0.1 and number % 2:
                return  # dies: never reports (odd workers only, so some always survive)
            if roll < 0.25:
                q.report(lease.id, False, error="flaky")
                continue
            if roll < 0.3:
                time.sleep(0.35)  # too slow: the lease runs out
            if q.report(lease.id, True):  # a refused report's data is dropped
                with lock:
                    read[lease.epoch].extend(data)

    workers = [threading.Thread(target=work, args=(n,)) for n in range(12)]
    for t in workers:
        t.start()
    for t in workers:
        t.join(timeout=60)
    assert q.finished(), q.progress()
    assert [sorted(read[e]) for e in (0, 1)] == [list(range(N))] * 2
    assert q.failures() == []


# -- on Ray, as an actor --------------------------------------------------------------------


def test_ray_actor(ray_local, reader):
    ray = ray_local
    tasks = reader.tasks(20)
    q = TaskQueue.on_ray(tasks, lease_timeout=60, max_attempts=2)
    first = ray.get(q.get.remote("w0"))
    assert first.task == tasks[0] and first.epoch == 0
    assert ray.get(q.report.remote(first.id, False, "boom"))
    held = ray.get(q.get.remote("w1"))
    state = ray.get(q.state_dict.remote())
    ray.kill(q)
    q2 = TaskQueue.on_ray(state=state)
    assert ray.get(q2.report.remote(held.id, True)) is False  # leases don't survive
    seen = []
    while (lease := ray.get(q2.get.remote("w2"))) is not None:
        seen.extend(reader.read_range(*lease.task))
        assert ray.get(q2.report.remote(lease.id, True))
    assert ray.get(q2.finished.remote()) and sorted(seen) == list(range(N))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert ray.get(q2.failures.remote()) == []
    ray.kill(q2)
