"""The executor contract: run a list of tasks somewhere, report each outcome.

A :class:`Backend` receives tasks already serialized with cloudpickle (so a reader that
can't travel fails up front, on the driver) and yields ``(task index, outcome)`` as tasks
finish, in any order. A task never raises on the worker: :func:`execute` turns an error
into an outcome that carries its type, message and traceback, so the engine doesn't
retry a reader that fails deterministically, and the driver can say which task failed.
An engine-level failure (a worker killed, a lost executor) is raised by the backend as
:class:`~recprep.errors.TaskFailedError`.

On the driver (:meth:`Outcome.unwrap`, and :func:`reraise` for a task run in this
process) every executor ends a failed task the same way: a user's argument error
(:class:`~recprep.errors.InvalidArgumentError`) is raised as it is; anything else as a
:class:`~recprep.errors.TaskFailedError` whose cause is the original error, whose cause
in turn is the worker's traceback (:class:`RemoteTraceback`), so that printing the
error shows where it was raised while its message stays one sentence.

Backends only schedule: they never look at what a task does.
"""

from __future__ import annotations

import abc
import pickle
import traceback
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any, ClassVar, NoReturn

import cloudpickle

from ..errors import REMEDY, InvalidArgumentError, Remedy, TaskFailedError, add_note


class RemoteTraceback(Exception):
    """The traceback of an error raised in a task elsewhere, as its worker formatted it:
    set as that error's ``__cause__`` on the driver (as ``concurrent.futures`` does), so
    that printing the error (``recprep --debug``) shows where it was raised; ``str()`` is
    the text between triple quotes."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.text = text

    def __str__(self) -> str:
        return f'\n"""\n{self.text.rstrip()}\n"""'


@dataclass(frozen=True)
class Outcome:
    """What a task sends back: its result, or its error."""

    result: Any = None
    error_type: str | None = None
    error_message: str = ""
    error_traceback: str = ""
    error_pickle: bytes | None = None

    def unwrap(self, description: str) -> Any:
        """The result; or, for a failed task (``description``), raise its error: an
        :class:`~recprep.errors.InvalidArgumentError` as it is (the user's argument is
        wrong, not the task), anything else as :class:`TaskFailedError` (see the module
        docs)."""
        if self.error_type is None:
            return self.result
        original = None
        if self.error_pickle is not None:
            try:
                original = pickle.loads(self.error_pickle)
            except Exception:  # an exception class the driver can't import
                original = None
        remote = RemoteTraceback(self.error_traceback) if self.error_traceback else None
        if isinstance(original, BaseException) and original.__cause__ is None:
            original.__cause__ = remote
        else:
            original = original if isinstance(original, BaseException) else None
        if isinstance(original, InvalidArgumentError):
            add_note(original, f"recprep: raised in {description}")
            raise original
        err = TaskFailedError(
            description, self.error_type, self.error_message, self.error_traceback
        )
        err.original = original
        raise err from (original if original is not None else remote)


def reraise(err: Exception, description: str) -> NoReturn:
    """Raise what a task run in this process that raised ``err`` ends in, as
    :meth:`Outcome.unwrap` does for one run elsewhere: an
    :class:`~recprep.errors.InvalidArgumentError` as it is, anything else as
    :class:`TaskFailedError` caused by ``err`` itself (its traceback intact)."""
    if isinstance(err, InvalidArgumentError):
        add_note(err, f"recprep: raised in {description}")
        raise err
    kind = type(err)
    failure = TaskFailedError(
        description, f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins."),
        str(err), "".join(traceback.format_exception(err)),
    )
    failure.original = err
    raise failure from err


def execute(payload: bytes) -> Outcome:
    """Run one serialized task (on a worker); never raises for the task's own errors."""
    try:
        fn, args = cloudpickle.loads(payload)
        return Outcome(result=fn(*args))
    except Exception as err:
        return failed(err)


def failed(err: BaseException) -> Outcome:
    """The outcome of a task that raised ``err`` (called inside the ``except`` block)."""
    kind = type(err)
    try:
        pickled: bytes | None = pickle.dumps(err)
    except Exception:
        pickled = None
    return Outcome(
        error_type=f"{kind.__module__}.{kind.__qualname__}".removeprefix("builtins."),
        error_message=str(err),
        error_traceback=traceback.format_exc(),
        error_pickle=pickled,
    )


def serialize(fn: Any, args: tuple[Any, ...], description: str) -> bytes:
    """cloudpickle ``(fn, args)``; a clear error when something can't travel."""
    try:
        return bytes(cloudpickle.dumps((fn, args)))
    except Exception as err:
        raise InvalidArgumentError(
            f"{description} can't be sent to workers: cloudpickle failed with "
            f"{type(err).__name__}: {err}. Make the reader (and what it captures) picklable "
            f"— e.g. open files and connections inside the reader, not outside{REMEDY}",
            remedy=Remedy("executor", "serial", effect="to run it in this process"),
        ) from err


class Backend(abc.ABC):
    """Runs serialized tasks. Subclass it and register it to add an engine."""

    #: the name it is registered under
    name: ClassVar[str] = ""
    #: runs tasks in this process, one after the other (no serialization, live progress)
    in_process: ClassVar[bool] = False

    def __init__(self, num_workers: int | None = None, options: Mapping[str, Any] | None = None):
        if num_workers is not None and (
            isinstance(num_workers, bool) or not isinstance(num_workers, int) or num_workers < 1
        ):
            raise InvalidArgumentError(f"num_workers must be an int >= 1, got {num_workers!r}")
        self.num_workers = num_workers
        self.options = dict(options or {})

    @abc.abstractmethod
    def run(self, payloads: list[bytes]) -> Iterator[tuple[int, Outcome]]:
        """Yield ``(index, outcome)`` for each payload as it finishes.

        On an engine failure, stop what is still queued, wait for what is running, and
        raise :class:`TaskFailedError`.
        """

    def close(self) -> None:  # noqa: B027 - optional hook, nothing to release by default
        """Release what this backend started (never what the user passed in)."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}(num_workers={self.num_workers})"
