"""ElasticDL-style task dispatch: a coordinator that hands ranges to workers.

A :class:`TaskQueue` holds the tasks of a job (``RecordIO.tasks()`` gives them:
``Task(path, start, end)``) in three queues, as ElasticDL's master does: *todo*, *doing*
(each task on a *lease* with a deadline) and *done*. A worker asks for a task with
:meth:`TaskQueue.get`, reads it (``RecordIO.read_range(*lease.task)``) and reports with
:meth:`TaskQueue.report`. A task whose worker fails, dies (:meth:`TaskQueue.worker_lost`)
or lets its lease run out goes back to *todo*; after ``max_attempts`` attempts in an
epoch it is given up and listed by :meth:`TaskQueue.failures` (with a
:class:`TaskAbandonedWarning`), not retried forever.

Exactly once: every lease has its own id, and only the current lease of a task can
complete it. A success reported for a lease that expired (or whose worker was declared
lost) is refused — :meth:`TaskQueue.report` returns ``False`` and the worker must discard
what it read — so each task of an epoch is completed by exactly one successful worker.
Lease ids are unique across restores too: each queue (each :meth:`TaskQueue.from_state`
of a checkpoint included) draws a random *incarnation*, the high bits of every id it
hands out, so a stale worker of a queue that was restored (or restored twice from one
checkpoint) never completes a task of the new one: its report is refused.

When *todo* and *doing* are both empty the epoch is over and the next one starts with all
tasks in *todo* (shuffled by ``(seed, epoch)`` when ``shuffle=True``), until
``num_epochs`` are done. :meth:`TaskQueue.state_dict` is a JSON-serialisable checkpoint;
:meth:`TaskQueue.from_state` restores it with the leased tasks back in *todo*.

The queue is thread-safe; :meth:`TaskQueue.on_ray` runs one as a Ray actor, with the same
methods (``handle.get.remote(...)``).

>>> from recprep.read.ranks import Task
>>> q = TaskQueue([Task("a", 0, 2), Task("a", 2, 4)], lease_timeout=60)
>>> first, second = q.get("w0"), q.get("w1")
>>> q.report(first.id, success=True), q.report(second.id, success=False, error="oom")
(True, True)
>>> third = q.get("w0")
>>> third.task, third.attempt
(Task(path='a', start=2, end=4), 1)
>>> q.report(third.id, success=True), q.finished()
(True, True)
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any, NamedTuple

from ..errors import InvalidArgumentError, TaskAbandonedWarning, warn
from .checkpoint import is_int
from .queuestate import (
    ID_BITS,
    ID_MASK,
    KEPT_INCARNATIONS,
    QUEUE_STATE_VERSION,
    checked_queue_state,
    incarnation,
    task_of,
)
from .ranks import Task
from .shuffling import rng

__all__ = ["Lease", "TaskAbandonedWarning", "TaskQueue"]

log = logging.getLogger("recprep")

#: a stream key of its own, so task orders don't repeat the reader's orders
_QUEUE_STREAM = 0x7A5C


class Lease(NamedTuple):
    """A task handed to a worker: report it by ``id``. ``attempt`` counts from 0."""

    id: int
    task: Task
    epoch: int
    attempt: int
    worker: str


class _Doing(NamedTuple):
    number: int  # the task's index in the queue's tasks
    worker: str
    deadline: float
    attempt: int


def _check_positive(name: str, value: Any, kind: type | tuple[type, ...]) -> None:
    wrong_type = isinstance(value, bool) or not isinstance(value, kind)
    if wrong_type or not value > 0:
        raise InvalidArgumentError(f"{name} must be a positive number, got {value!r}")


class TaskQueue:
    """Hands ``tasks`` to workers, each to exactly one successful worker per epoch.

    Parameters
    ----------
    tasks
        ``Task(path, start, end)`` values (or 3-tuples), e.g. ``RecordIO.tasks(n)``.
    lease_timeout
        Seconds a worker has to report (or :meth:`renew`) a task before it is taken back.
    max_attempts
        Leases of a task per epoch (failures and timeouts count) before it is given up.
    num_epochs
        Passes over the tasks; the queue is :meth:`finished` after the last.
    shuffle, seed
        Hand each epoch's tasks out in an order drawn from ``(seed, epoch)``.
    clock
        Seconds, monotonic (``time.monotonic``); tests pass a fake one.
    """

    def __init__(
        self,
        tasks: Iterable[Task | Sequence[Any]],
        *,
        lease_timeout: float = 600.0,
        max_attempts: int = 3,
        num_epochs: int = 1,
        shuffle: bool = False,
        seed: int = 0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        _check_positive("lease_timeout", lease_timeout, (int, float))
        _check_positive("max_attempts", max_attempts, int)
        _check_positive("num_epochs", num_epochs, int)
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise InvalidArgumentError(f"seed must be a non-negative int, got {seed!r}")
        self._tasks = [task_of(t, i) for i, t in enumerate(tasks)]
        self.lease_timeout = float(lease_timeout)
        self.max_attempts = max_attempts
        self.num_epochs = num_epochs
        self.shuffle = bool(shuffle)
        self.seed = seed
        self._clock = clock
        self._lock = threading.RLock()
        self._ancestors: list[int] = []  # incarnations this queue was restored from
        self._restored = False
        self._incarnation = incarnation(())
        self._next_id = 0
        self._failed: list[dict[str, Any]] = []
        self._start_epoch(0)

    # -- the worker protocol ----------------------------------------------------------------

    def get(self, worker: str = "") -> Lease | None:
        """A lease on the next task, or ``None`` when none is free now (others are leased:
        ask again later) or the queue is :meth:`finished`."""
        with self._lock:
            self._advance()
            if not self._todo:
                return None
            index = self._todo.popleft()
            attempt = self._attempts.get(index, 0)
            if self._next_id >> ID_BITS:  # 2**32 leases: go on in a new incarnation
                self._ancestors = [*self._ancestors, self._incarnation][-KEPT_INCARNATIONS:]
                self._incarnation, self._next_id = incarnation(self._ancestors), 0
            lease_id = self._incarnation << ID_BITS | self._next_id
            lease = Lease(lease_id, self._tasks[index], self._epoch, attempt, str(worker))
            self._next_id += 1
            self._doing[lease.id] = _Doing(
                index, lease.worker, self._clock() + self.lease_timeout, attempt
            )
            return lease

    def report(self, lease_id: int, success: bool, error: str = "") -> bool:
        """Report how a lease went; ``True`` if it was accepted.

        ``False`` means the lease is no longer current (it expired, its worker was
        declared lost, or it was reported already): after a success, discard what was
        read — the task is someone else's. A failure puts the task back in *todo* (or
        gives it up after ``max_attempts``).
        """
        with self._lock:
            self._check_id(lease_id)
            self._expire()
            doing = self._doing.pop(lease_id, None)
            if doing is None:
                return False
            if success:
                self._done.add(doing.number)
            else:
                self._retry(doing, error or "reported failed")
            self._advance()
            return True

    def renew(self, lease_id: int) -> bool:
        """Push a lease's deadline ``lease_timeout`` from now (a heartbeat for long
        tasks); ``False`` if the lease is no longer current."""
        with self._lock:
            self._check_id(lease_id)
            self._expire()
            doing = self._doing.get(lease_id)
            if doing is None:
                return False
            self._doing[lease_id] = doing._replace(deadline=self._clock() + self.lease_timeout)
            return True

    def worker_lost(self, worker: str) -> int:
        """Take back every task leased to ``worker`` now (it died); how many."""
        with self._lock:
            lost = [i for i, d in self._doing.items() if d.worker == str(worker)]
            for lease_id in lost:
                self._retry(self._doing.pop(lease_id), f"worker {worker!r} lost")
            self._advance()
            return len(lost)

    # -- progress ---------------------------------------------------------------------------

    def finished(self) -> bool:
        """Whether every epoch is over (each task done or given up)."""
        with self._lock:
            self._advance()
            return self._epoch >= self.num_epochs

    def progress(self) -> dict[str, int]:
        """Counts for the current epoch: ``epoch``, ``todo``, ``doing``, ``done``,
        ``failed`` (given up this epoch)."""
        with self._lock:
            self._advance()
            return {
                "epoch": self._epoch, "todo": len(self._todo), "doing": len(self._doing),
                "done": len(self._done), "failed": len(self._given_up),
            }

    def failures(self) -> list[dict[str, Any]]:
        """The tasks given up, every epoch: ``task``, ``epoch``, ``attempts``, ``errors``
        (one per attempt)."""
        with self._lock:
            return [dict(f) for f in self._failed]

    # -- checkpoints ------------------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """A JSON-serialisable checkpoint. Leased tasks are saved as *todo* (at the front,
        their attempts kept): restored, they are handed out again."""
        with self._lock:
            self._expire()
            leased = sorted(self._doing.values(), key=lambda d: d.number)
            return {
                "version": QUEUE_STATE_VERSION,
                "tasks": [list(t) for t in self._tasks],
                "lease_timeout": self.lease_timeout, "max_attempts": self.max_attempts,
                "num_epochs": self.num_epochs, "shuffle": self.shuffle, "seed": self.seed,
                "epoch": self._epoch, "next_id": self._next_id,
                "incarnations": [*self._ancestors, self._incarnation][-KEPT_INCARNATIONS:],
                "todo": [d.number for d in leased] + list(self._todo),
                "done": sorted(self._done), "given_up": sorted(self._given_up),
                "attempts": [[i, n] for i, n in sorted(self._attempts.items())],
                "errors": [[i, e] for i, e in sorted(self._errors.items())],
                "failed": [dict(f, task=list(f["task"])) for f in self._failed],
            }

    @classmethod
    def from_state(
        cls, state: Mapping[str, Any], *, clock: Callable[[], float] = time.monotonic
    ) -> TaskQueue:
        """A queue continuing where :meth:`state_dict` left off, in an incarnation of its
        own: the leases of the queue that took the checkpoint (or of another restore of
        it) are refused, their tasks handed out again.

        Every field is checked first (a checkpoint is untrusted input): its type and
        range, and the fields against each other — *todo*, *done* and *given_up* hold
        each task of the epoch once, attempts are below ``max_attempts`` but for the tasks
        given up, one error per attempt.

        Raises
        ------
        InvalidArgumentError
            When the state is not a TaskQueue state of this version, or a field is
            damaged: the message names it, what was expected and what was found.
        """
        checked = checked_queue_state(state)
        queue = cls(
            checked["tasks"], lease_timeout=checked["lease_timeout"],
            max_attempts=checked["max_attempts"], num_epochs=checked["num_epochs"],
            shuffle=checked["shuffle"], seed=checked["seed"], clock=clock,
        )
        queue._ancestors = checked["incarnations"]
        queue._restored = True
        queue._incarnation = incarnation(queue._ancestors)
        queue._epoch = checked["epoch"]
        queue._todo = deque(checked["todo"])
        queue._done = set(checked["done"])
        queue._given_up = set(checked["given_up"])
        queue._attempts = checked["attempts"]
        queue._errors = checked["errors"]
        queue._failed = checked["failed"]
        return queue

    # -- Ray --------------------------------------------------------------------------------

    @classmethod
    def on_ray(
        cls,
        tasks: Iterable[Task | Sequence[Any]] | None = None,
        *,
        state: Mapping[str, Any] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        **options: Any,
    ) -> Any:
        """A Ray actor handle running a queue (joins the running Ray instance; call
        ``ray.init`` first). Its methods are this class's: ``ray.get(q.get.remote("w0"))``.
        Pass ``state=`` (a :meth:`state_dict`) instead of ``tasks`` to restore one;
        ``actor_options`` go to ``.options()`` (``name=``, ``lifetime=``...)."""
        try:
            import ray
        except ImportError:
            from ..errors import MissingDependencyError

            raise MissingDependencyError("ray", "ray", "TaskQueue.on_ray") from None
        if (tasks is None) == (state is None):
            raise InvalidArgumentError("TaskQueue.on_ray needs tasks or state=, not both")
        actor = ray.remote(num_cpus=0)(_RayTaskQueue).options(**dict(actor_options or {}))
        return actor.remote(list(tasks) if tasks is not None else None, state, options)

    # -- internals --------------------------------------------------------------------------

    def _start_epoch(self, epoch: int) -> None:
        self._epoch = epoch
        order = list(range(len(self._tasks)))
        if self.shuffle:
            rng(self.seed, epoch, _QUEUE_STREAM).shuffle(order)
        self._todo: deque[int] = deque(order)
        self._doing: dict[int, _Doing] = {}
        self._done: set[int] = set()
        self._given_up: set[int] = set()
        self._attempts: dict[int, int] = {}
        self._errors: dict[int, list[str]] = {}

    def _advance(self) -> None:
        """Expire leases; start the next epoch when this one is over."""
        self._expire()
        while self._epoch < self.num_epochs and not self._todo and not self._doing:
            log.debug("task queue: epoch %d over", self._epoch)
            self._start_epoch(self._epoch + 1)
            if not self._tasks or self._epoch >= self.num_epochs:
                self._epoch = self.num_epochs
                self._todo.clear()

    def _expire(self) -> None:
        now = self._clock()
        late = [i for i, d in self._doing.items() if d.deadline <= now]
        for lease_id in late:
            self._retry(self._doing.pop(lease_id), f"lease {lease_id} timed out")

    def _retry(self, doing: _Doing, error: str) -> None:
        attempts = self._attempts[doing.number] = doing.attempt + 1
        errors = self._errors.setdefault(doing.number, [])
        errors.append(error)
        if attempts < self.max_attempts:
            self._todo.append(doing.number)
            return
        self._given_up.add(doing.number)
        task = self._tasks[doing.number]
        self._failed.append(
            {"task": task, "epoch": self._epoch, "attempts": attempts, "errors": list(errors)}
        )
        warn(TaskAbandonedWarning(
            f"task {task} (epoch {self._epoch}) failed {attempts} times (max_attempts="
            f"{self.max_attempts}) and is given up; last error: {error}"
        ))

    def _check_id(self, lease_id: int) -> None:
        """Raise unless ``lease_id`` may be a lease of this queue's line: its own, or,
        once restored, of any queue (a stale worker's lease of the queue it was restored
        from, or of another restore of that checkpoint: refused, not an error)."""
        incarnation = lease_id >> ID_BITS if is_int(lease_id) and lease_id >= 0 else None
        ours = incarnation == self._incarnation
        if incarnation is None or lease_id >> 63 or (
            (ours and lease_id & ID_MASK >= self._next_id)
            or (not ours and not self._restored and incarnation not in self._ancestors)
        ):
            last = self._incarnation << ID_BITS | max(self._next_id - 1, 0)
            handed = (f"{self._incarnation << ID_BITS} to {last}" if self._next_id
                      else "none yet")
            raise InvalidArgumentError(
                f"expected a lease id this queue handed out (lately: {handed}), got "
                f"{lease_id!r}"
            )


class _RayTaskQueue(TaskQueue):
    """The actor class :meth:`TaskQueue.on_ray` starts (built from tasks or a state)."""

    def __init__(  # noqa: D107
        self, tasks: list[Any] | None, state: Mapping[str, Any] | None,
        options: Mapping[str, Any],
    ) -> None:
        if state is not None:
            restored = TaskQueue.from_state(state, **options)
            self.__dict__.update(restored.__dict__)
        else:
            super().__init__(tasks or [], **options)
