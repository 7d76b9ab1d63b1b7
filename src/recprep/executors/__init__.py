"""Executors (``executor=``), in a registry keyed by name.

Built in: ``"serial"`` (the default), ``"processes"``, ``"spark"`` and ``"ray"``. Any
``concurrent.futures.Executor`` instance works too, and is never shut down by recprep.
Engines are optional extras, imported only when used. What a backend runs, and whether a
task is called in this process or shipped to it: :mod:`recprep.executors.dispatch`.

Example
-------
>>> from recprep.executors import available_executors, get_backend
>>> available_executors()
['processes', 'ray', 'serial', 'spark']
>>> get_backend("serial").in_process
True
"""

from __future__ import annotations

import concurrent.futures as cf
from collections.abc import Callable, Mapping
from typing import Any

from .._core.registry import Registry
from ..errors import InvalidArgumentError
from .base import Backend, Outcome, execute, serialize

__all__ = [
    "Backend",
    "Outcome",
    "available_executors",
    "execute",
    "get_backend",
    "register_executor",
    "serialize",
]

Factory = Callable[[int | None, Mapping[str, Any] | None], Backend]


def _check_factory(name: str, factory: Factory) -> None:
    if not callable(factory):
        raise InvalidArgumentError(
            f"executor {name!r} must be a Backend subclass or a function "
            f"(num_workers, executor_options) -> Backend, got {factory!r}"
        )


_EXECUTORS: Registry[Factory] = Registry(
    "executor", group="recprep.executors", check=_check_factory,
    hint=", or pass a concurrent.futures.Executor",
)


def register_executor(
    name: str, factory: Factory | Callable[[], Factory] | str, *, lazy: bool = False,
    replace: bool = False,
) -> None:
    """Make ``executor=name`` build ``factory(num_workers, executor_options)``.

    ``factory`` may be a dotted path (``"package.module:MyBackend"``), imported on first
    use; with ``lazy=True``, it is a no-argument function returning the real factory (so
    an engine is imported only when used). A name already registered raises
    :class:`~recprep.errors.InvalidArgumentError` unless ``replace=True``.
    """
    _EXECUTORS.register(name, factory, lazy=lazy, replace=replace)


def available_executors() -> list[str]:
    """The registered executor names, sorted (plug-ins too; none is imported)."""
    return _EXECUTORS.available()


def get_backend(
    executor: str | cf.Executor | Backend,
    num_workers: int | None = None,
    options: Mapping[str, Any] | None = None,
) -> Backend:
    """The backend for ``executor``: a registered name, a ``concurrent.futures.Executor``
    (used as is, never shut down) or a :class:`Backend`."""
    if isinstance(executor, Backend):
        return executor
    if isinstance(executor, cf.Executor):
        from .futures import FuturesBackend

        return FuturesBackend(executor)
    return _EXECUTORS.get(executor)(num_workers, options)


for _name, _path, _extra in (
    ("serial", "serial:SerialBackend", None),
    ("processes", "futures:ProcessBackend", None),
    ("spark", "spark:SparkBackend", "spark"),
    ("ray", "ray:RayBackend", "ray"),
):
    _EXECUTORS.register(_name, f"{__name__}.{_path}", extra=_extra)
