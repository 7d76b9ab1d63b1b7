"""Executors (``executor=``), in a registry keyed by name.

Built in: ``"serial"`` (the default), ``"processes"``, ``"spark"`` and ``"ray"``. Any
``concurrent.futures.Executor`` instance works too, and is never shut down by recprep.
Engines are optional extras, imported only when used.

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
_REGISTRY: dict[str, Callable[[], Factory]] = {}


def register_executor(
    name: str, factory: Factory | Callable[[], Factory], *, lazy: bool = False,
    replace: bool = False,
) -> None:
    """Make ``executor=name`` build ``factory(num_workers, executor_options)``.

    With ``lazy=True``, ``factory`` is a no-argument function returning the real factory
    (so an engine is imported only when used).
    """
    if not replace and name in _REGISTRY:
        raise InvalidArgumentError(
            f"an executor named {name!r} is already registered; pass replace=True"
        )
    _REGISTRY[name] = factory if lazy else (lambda: factory)  # type: ignore[assignment,return-value]


def available_executors() -> list[str]:
    """The registered executor names, sorted."""
    return sorted(_REGISTRY)


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
    if not isinstance(executor, str) or executor not in _REGISTRY:
        raise InvalidArgumentError(
            f"unknown executor {executor!r}; valid executors are {available_executors()}, "
            "or pass a concurrent.futures.Executor"
        )
    return _REGISTRY[executor]()(num_workers, options)


def _serial() -> Factory:
    from .serial import SerialBackend

    return SerialBackend


def _processes() -> Factory:
    from .futures import ProcessBackend

    return ProcessBackend


def _spark() -> Factory:
    from .spark import SparkBackend

    return SparkBackend


def _ray() -> Factory:
    from .ray import RayBackend

    return RayBackend


for _name, _lazy in (("serial", _serial), ("processes", _processes), ("spark", _spark),
                     ("ray", _ray)):
    register_executor(_name, _lazy, lazy=True)
