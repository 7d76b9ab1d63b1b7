"""Checking the arguments of public entry points against their annotations.

Every public entry point (``convert``, ``RecordIO``, ``prepare``, the tools, the Spark,
torch and TensorFlow adapters) is wrapped in :func:`checked`: before the body runs, each
argument is checked against the parameter's annotation — an ``int`` is an int and not a
``bool``, a ``bool`` is a bool, a ``Literal`` name is one of its names, ``str`` is a
string — so that a wrong type fails at once with an
:class:`~recprep.errors.InvalidArgumentError` naming the parameter, the same way
everywhere. Ranges (``num_shards >= 1``) stay with the function that knows them.

A ``Literal[...] | str`` annotation (a registry name: built-ins offered to IDEs, plug-ins
allowed) accepts any string; the registry says whether it knows it.

Example
-------
>>> from typing import Literal
>>> @checked
... def take(n: int, mode: Literal["a", "b"] = "a", flag: bool = False) -> int:
...     return n
>>> take(3)
3
>>> take(True)
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: take(): n must be an int, got True (bool)
>>> take(1, mode="c")
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: take(): mode must be one of 'a', 'b', got 'c' (str)
"""

from __future__ import annotations

import functools
import inspect
import os
import types
import typing
from collections.abc import Callable, Mapping, Sequence
from typing import Any, Literal, TypeVar, Union

import numpy as np

from ..errors import InvalidArgumentError

__all__ = ["checked", "value_shown", "validator"]

F = TypeVar("F", bound=Callable[..., Any])
#: a check: None when ``value`` fits, else what was expected (for the message)
Check = Callable[[Any], "str | None"]


def _is_int(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, (bool, np.bool_))


def _simple(kind: Any) -> Check | None:
    """The check of a plain (non-generic) annotation, or None to accept anything."""
    if kind is Any or kind is object or kind is inspect.Parameter.empty:
        return None
    if kind is type(None):
        return lambda v: None if v is None else "None"
    if kind is bool:
        return lambda v: None if isinstance(v, (bool, np.bool_)) else "a bool"
    if kind is int:
        return lambda v: None if _is_int(v) else "an int"
    if kind is float:
        return lambda v: None if _is_int(v) or (
            isinstance(v, (float, np.floating))) else "a number"
    if kind is str:
        return lambda v: None if isinstance(v, str) else "a str"
    if kind is os.PathLike:
        return lambda v: None if isinstance(v, os.PathLike) else "a path"
    if isinstance(kind, type) and not getattr(kind, "_is_protocol", False):
        name = kind.__name__
        return lambda v: None if isinstance(v, kind) else f"a {name}"
    return None


def validator(kind: Any) -> Check | None:
    """The check of the annotation ``kind`` (a resolved type hint), or None for "any"."""
    origin = typing.get_origin(kind)
    if origin is Literal:
        choices = typing.get_args(kind)
        listed = ", ".join(repr(c) for c in choices)
        return lambda v: None if any(
            v == c and type(v) is type(c) for c in choices) else f"one of {listed}"
    if origin in (Union, types.UnionType):
        members = typing.get_args(kind)
        if str in members and any(typing.get_origin(m) is Literal for m in members):
            members = tuple(m for m in members if typing.get_origin(m) is not Literal)
        checks = [validator(m) for m in members]
        if any(c is None for c in checks):
            return None
        def union(v: Any) -> str | None:
            found = [c(v) for c in checks]  # type: ignore[misc]
            if any(f is None for f in found):
                return None
            return " or ".join(dict.fromkeys(f for f in found if f))
        return union
    if origin is not None:
        if origin in (Callable, typing.get_origin(Callable[[], Any])):
            return lambda v: None if callable(v) else "a callable"
        if isinstance(origin, type) and issubclass(origin, Mapping):
            return lambda v: None if isinstance(v, Mapping) else "a mapping"
        if isinstance(origin, type) and issubclass(origin, Sequence):
            return lambda v: None if isinstance(v, Sequence) and not isinstance(
                v, (str, bytes)) else "a sequence"
        if isinstance(origin, type):
            return _simple(origin)
        return None
    return _simple(kind)


def value_shown(value: Any) -> str:
    """``True (bool)``: a value and its type, for messages."""
    shown = repr(value)
    if len(shown) > 60:
        shown = shown[:57] + "..."
    return f"{shown} ({type(value).__name__})"


def checked(func: F) -> F:
    """Wrap ``func`` so its arguments are checked against its annotations first.

    The annotations are resolved at the first call (so forward references work) and the
    checks kept; a call then costs one check per argument passed.
    """
    signature = inspect.signature(func)
    label = func.__qualname__.replace(".__init__", "")
    checks: dict[str, Check] | None = None

    def build() -> dict[str, Check]:
        hints = typing.get_type_hints(func)
        found = {}
        for name in signature.parameters:
            check = validator(hints.get(name, Any))
            if check is not None:
                found[name] = check
        return found

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        nonlocal checks
        if checks is None:
            checks = build()
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError:
            return func(*args, **kwargs)  # Python's own message for a wrong call
        for name, value in bound.arguments.items():
            check = checks.get(name)
            if check is None:
                continue
            if signature.parameters[name].kind is inspect.Parameter.VAR_POSITIONAL:
                continue
            expected = check(value)
            if expected is not None:
                raise InvalidArgumentError(
                    f"{label}(): {name} must be {expected}, got {value_shown(value)}"
                )
        return func(*args, **kwargs)

    wrapper.__signature__ = signature  # type: ignore[attr-defined]
    return typing.cast(F, wrapper)
