"""Running tasks on a backend: called in this process, or shipped as payloads.

A task is a function and its arguments, with a description for its errors
(:class:`TaskCall`); the side that plans the work builds them, and :func:`run_all` runs
them, yielding each result as its task finishes:

* on a backend that runs tasks here (:attr:`~recprep.executors.base.Backend.in_process`:
  ``serial``), each function is called in turn, nothing serialized; a *live* task is
  handed the caller's ``tick`` as its last argument, so progress moves as it works;
* on any other, every task is serialized first (:func:`~recprep.executors.base.serialize`:
  what can't travel fails here, before anything runs) and the backend runs the payloads
  where it runs them.

A failed task ends the same way either way: an
:class:`~recprep.errors.InvalidArgumentError` as it is, anything else as a
:class:`~recprep.errors.TaskFailedError` naming the task (see :mod:`recprep.executors.base`).

Example
-------
>>> from recprep.executors import get_backend
>>> tasks = [TaskCall(divmod, (7, 2), "task 0"), TaskCall(pow, (2, 10), "task 1")]
>>> sorted(run_all(get_backend("serial"), tasks))
[(0, (3, 1)), (1, 1024)]
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from .base import Backend, reraise, serialize

__all__ = ["TaskCall", "run_all"]


@dataclass(frozen=True)
class TaskCall:
    """``fn(*args)`` as a task; ``description`` names it in errors (``"partition 3"``)."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    description: str
    #: run in this process, it takes a progress callback as its last argument
    live: bool = False


def run_all(
    backend: Backend, tasks: Sequence[TaskCall], tick: Callable[[int], Any] | None = None
) -> Iterator[tuple[int, Any]]:
    """Run ``tasks`` on ``backend``; ``(position in tasks, result)`` of each as it finishes,
    in any order. ``tick`` is handed to live tasks run in this process (see the module
    docs); a failed task raises."""
    if backend.in_process:
        for index, task in enumerate(tasks):
            extra = (tick,) if task.live else ()
            try:
                result = task.fn(*task.args, *extra)
            except Exception as err:
                reraise(err, task.description)
            yield index, result
        return
    payloads = [serialize(task.fn, task.args, task.description) for task in tasks]
    for index, outcome in backend.run(payloads):
        yield index, outcome.unwrap(tasks[index].description)
