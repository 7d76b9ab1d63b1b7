"""A :class:`~recprep.read.taskqueue.TaskQueue`'s checkpoint: its lease ids' incarnations,
and every field of a saved state checked before a queue is restored from it.

A checkpoint is untrusted input (a user's file): :func:`checked_queue_state` checks each
field — its type, its range, and against the others (each task index in exactly one of
*todo*, *done* and *given up*; attempts and errors per task; the incarnations of the
queue's ancestors) — and raises :class:`~recprep.errors.InvalidArgumentError` naming the
field, what was expected and what was found.

>>> checked_queue_state({"version": 0})  # doctest: +ELLIPSIS
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: expected a TaskQueue state of version 1, found 0
"""

from __future__ import annotations

import secrets
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from ..errors import InvalidArgumentError
from .checkpoint import Fields, is_int
from .ranks import Task

__all__ = ["ID_BITS", "ID_MASK", "KEPT_INCARNATIONS", "QUEUE_STATE_VERSION",
           "checked_queue_state", "incarnation", "task_of"]

#: version of :meth:`~recprep.read.taskqueue.TaskQueue.state_dict`
QUEUE_STATE_VERSION = 1
#: a lease id is ``incarnation << ID_BITS | n``: the queue's random incarnation (1 to
#: ``2**31 - 1``, so ids fit in 63 bits) and the ``n``-th lease it handed out
ID_BITS = 32
ID_MASK = (1 << ID_BITS) - 1
#: the incarnations of its ancestors a checkpoint keeps, so a restore draws none of them
KEPT_INCARNATIONS = 32



def incarnation(taken: Iterable[int]) -> int:
    """A random incarnation, none of ``taken``."""
    taken = set(taken)
    while (drawn := secrets.randbelow((1 << 31) - 1) + 1) in taken:
        pass
    return drawn


def _indexes(fields: Fields, key: str, n: int) -> list[int]:
    """A state's list of distinct task indexes (each ``0 <= i < n``)."""
    values = fields.sequence(key)
    if not all(is_int(i) and 0 <= i < n for i in values) or len(set(values)) != len(values):
        fields.fail(key, f"a list of distinct task indexes (ints 0 to {n - 1})")
    return [int(i) for i in values]


def checked_queue_state(state: Any) -> dict[str, Any]:
    """The fields of a :meth:`TaskQueue.state_dict`, each checked (see
    :meth:`TaskQueue.from_state`), as the queue holds them."""
    if not isinstance(state, Mapping) or not (
        is_int(state.get("version")) and state["version"] == QUEUE_STATE_VERSION
    ):
        found = state.get("version") if isinstance(state, Mapping) else type(state).__name__
        raise InvalidArgumentError(
            f"expected a TaskQueue state of version {QUEUE_STATE_VERSION}, found {found!r}"
        )
    fields = Fields(state, "a TaskQueue state")
    missing = [k for k in _STATE_KEYS if k not in state]
    if missing:
        raise InvalidArgumentError(f"a TaskQueue state lacks {missing}: it is damaged")
    out: dict[str, Any] = {}
    tasks = fields.sequence("tasks")
    try:
        out["tasks"] = [task_of(t, i) for i, t in enumerate(tasks)]
    except InvalidArgumentError as error:
        raise InvalidArgumentError(f"a TaskQueue state's 'tasks': {error}") from None
    n = len(tasks)
    timeout = state["lease_timeout"]
    if not isinstance(timeout, (int, float)) or isinstance(timeout, bool) or not (
        timeout > 0
    ):
        fields.fail("lease_timeout", "a positive number of seconds")
    out["lease_timeout"] = timeout
    out["max_attempts"] = most = fields.integer("max_attempts", 1)
    out["num_epochs"] = epochs = fields.integer("num_epochs", 1)
    out["shuffle"] = fields.flag("shuffle")
    out["seed"] = fields.integer("seed")
    out["epoch"] = epoch = fields.integer("epoch", 0, epochs)
    fields.integer("next_id", 0, ID_MASK + 1)
    kept = state.get("incarnations", [])  # absent in checkpoints of before incarnations
    if not isinstance(kept, list) or not all(is_int(i) and 0 < i < 1 << 31 for i in kept):
        fields.fail("incarnations", "a list of ints from 1 to 2**31 - 1", kept)
    out["incarnations"] = [int(i) for i in kept][-KEPT_INCARNATIONS:]
    out.update(_queues(fields, n, epoch, epochs))
    out.update(_attempts(fields, n, out["todo"], out["given_up"], most))
    out["failed"] = _failed(fields, epoch)
    return out


def _queues(fields: Fields, n: int, epoch: int, epochs: int) -> dict[str, list[int]]:
    """*todo*, *done* and *given up*: each task index in exactly one of them while the
    job runs, all empty once every epoch is over."""
    todo, done, given_up = (_indexes(fields, key, n) for key in ("todo", "done", "given_up"))
    held = sorted([*todo, *done, *given_up])
    want = list(range(n)) if epoch < epochs else []
    if held != want:
        fields.fail("todo", f"with 'done' and 'given_up', each of the {n} task indexes "
                    "once" if want else "empty, with 'done' and 'given_up', once every "
                    f"epoch is over (epoch {epoch} of {epochs})",
                    {"todo": todo, "done": done, "given_up": given_up})
    return {"todo": todo, "done": done, "given_up": given_up}


def _attempts(fields: Fields, n: int, todo: list[int], given_up: list[int], most: int
              ) -> dict[str, Any]:
    """The attempts of the tasks tried this epoch (``max_attempts`` for those given up,
    fewer for those to do) and one error per attempt."""
    attempts: dict[int, int] = {}
    for entry in fields.sequence("attempts"):
        if not (isinstance(entry, list) and len(entry) == 2 and is_int(entry[0])
                and 0 <= entry[0] < n and is_int(entry[1]) and 1 <= entry[1] <= most
                and entry[0] not in attempts):
            fields.fail("attempts", f"a list of [task index, attempts] pairs, one per task "
                        f"at most, attempts from 1 to {most} (max_attempts)", entry)
        attempts[int(entry[0])] = int(entry[1])
    for i in given_up:
        if attempts.get(i) != most:
            fields.fail("attempts", f"{most} (max_attempts) for task {i}, which was given "
                        "up", attempts.get(i, 0))
    for i in todo:
        if attempts.get(i, 0) >= most:
            fields.fail("attempts", f"below {most} (max_attempts) for task {i}, which is "
                        "to do", attempts[i])
    errors: dict[int, list[str]] = {}
    for entry in fields.sequence("errors"):
        if not (isinstance(entry, list) and len(entry) == 2 and is_int(entry[0])
                and isinstance(entry[1], list) and entry[0] not in errors
                and len(entry[1]) == attempts.get(entry[0])
                and all(isinstance(e, str) for e in entry[1])):
            fields.fail("errors", "a list of [task index, [one error str per attempt]] "
                        "pairs, for the tasks with attempts", entry)
        errors[int(entry[0])] = list(entry[1])
    if errors.keys() != attempts.keys():
        fields.fail("errors", "one entry per task with attempts",
                    sorted(set(errors) ^ set(attempts)))
    return {"attempts": attempts, "errors": errors}


def _failed(fields: Fields, epoch: int) -> list[dict[str, Any]]:
    """The records of the tasks given up in epochs up to ``epoch``."""
    failed: list[dict[str, Any]] = []
    for record in fields.sequence("failed"):
        if not (isinstance(record, dict) and set(record) == {"task", "epoch", "attempts",
                                                             "errors"}
                and is_int(record["epoch"]) and 0 <= record["epoch"] <= epoch
                and is_int(record["attempts"]) and record["attempts"] >= 1
                and isinstance(record["errors"], list)
                and all(isinstance(e, str) for e in record["errors"])):
            fields.fail("failed", "a list of {task, epoch, attempts, errors} records of "
                        f"epochs up to {epoch}", record)
        try:
            task = task_of(record["task"], len(failed))
        except InvalidArgumentError as error:
            raise InvalidArgumentError(f"a TaskQueue state's 'failed': {error}") from None
        failed.append(dict(record, task=task, errors=list(record["errors"])))
    return failed


_STATE_KEYS = ("tasks", "lease_timeout", "max_attempts", "num_epochs", "shuffle", "seed",
               "epoch", "next_id", "todo", "done", "given_up", "attempts", "errors",
               "failed")


def task_of(value: Task | Sequence[Any], index: int) -> Task:
    try:
        path, start, end = value
    except (TypeError, ValueError):
        raise InvalidArgumentError(
            f"task {index}: expected Task(path, start, end), got {value!r}"
        ) from None
    if not isinstance(path, str) or any(
        isinstance(v, bool) or not isinstance(v, int) for v in (start, end)
    ) or not 0 <= start <= end:
        raise InvalidArgumentError(
            f"task {index}: expected Task(path: str, start: int, end: int) with "
            f"0 <= start <= end, got {value!r}"
        )
    return Task(path, start, end)


