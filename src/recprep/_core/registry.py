"""Registries: the one mechanism behind every plug-in point (``format=``, ``codec=``...).

A :class:`Registry` maps names to objects. An entry is the object itself, a dotted path
``"package.module:attr"`` (or ``"package.module"`` for a module) imported on first use, or
a loader function; built-ins are registered as paths, so ``import recprep`` imports no
format or codec it doesn't use. When a path fails to import because an optional engine is
missing, the error names the extra to install
(:class:`~recprep.errors.MissingDependencyError`: ``pip install 'recprep[spark]'``).

Names are unique: registering a taken name raises
:class:`~recprep.errors.InvalidArgumentError` naming what holds it, unless
``replace=True``. An unknown name raises it too, listing the valid names.

Third-party packages add entries through entry points, read once, on first need
(numcodecs-style), from the registry's group (``recprep.formats``, ``recprep.codecs``,
``recprep.executors``, ``recprep.compressions``, ``recprep.commands``), in a ``pyproject.toml``:

    [project.entry-points."recprep.formats"]
    myformat = "mypackage.formats:MyFormat"

A plug-in that fails to load never breaks ``import recprep``: asked for by name it raises
:class:`~recprep.errors.PluginError`; when a registry loads every entry (format
detection, the command line) it is skipped with a :class:`~recprep.errors.PluginWarning`
naming its distribution. A plug-in can't take a name that is already registered (it is
ignored, with a warning).

Example
-------
>>> colours = Registry("colour", group=None)
>>> colours.register("red", "colorsys:rgb_to_hsv")  # imported by the first get
>>> colours.register("blue", len)
>>> colours.available(), colours.get("blue") is len, colours.get("red").__name__
(['blue', 'red'], True, 'rgb_to_hsv')
>>> colours.get("green")
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: unknown colour 'green'; valid colours are ['blue', \
'red']
>>> colours.register("blue", abs)
Traceback (most recent call last):
...
recprep.errors.InvalidArgumentError: a colour named 'blue' is already registered \
(builtins.len); pass replace=True to replace it
"""

from __future__ import annotations

import importlib
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from ..errors import (
    InvalidArgumentError,
    MissingDependencyError,
    PluginError,
    PluginWarning,
    warn,
)

__all__ = ["Registry", "import_path", "registries"]

T = TypeVar("T")

_ALL: dict[str, Registry[Any]] = {}


def registries() -> dict[str, Registry[Any]]:
    """Every registry created so far, by entry point group (or kind, when it has none).

    >>> import recprep.codecs
    >>> registries()["recprep.codecs"].kind
    'codec'
    """
    return dict(_ALL)


def import_path(path: str) -> Any:
    """The object a dotted path names: ``"package.module:attr"`` (attributes may be
    dotted), or ``"package.module"`` for the module itself.

    >>> import_path("os.path:join").__name__, import_path("json").__name__
    ('join', 'json')
    """
    module_name, _, attr = path.partition(":")
    value: Any = importlib.import_module(module_name)
    for part in attr.split(".") if attr else ():
        value = getattr(value, part)
    return value


def _describe(value: Any) -> str:
    module = getattr(value, "__module__", None)
    name = getattr(value, "__qualname__", None)
    if isinstance(module, str) and isinstance(name, str):
        return f"{module}.{name}"
    if hasattr(value, "__spec__") and hasattr(value, "__name__"):  # a module
        return str(value.__name__)
    return repr(value)


def _distribution(entry_point: Any) -> str:
    """``"name version"`` of the distribution that declares ``entry_point``."""
    dist = getattr(entry_point, "dist", None)
    if dist is None:
        return "an unknown distribution"
    return f"{dist.name} {dist.version}"


@dataclass
class _Entry(Generic[T]):
    loader: Callable[[], T] | None  # None once loaded
    value: T | None
    source: str  # what it is, for messages: a dotted path, an object's name
    extra: str | None = None  # recprep's extra that provides what it imports
    distribution: str | None = None  # set for a plug-in (an entry point)


class Registry(Generic[T]):
    """Names -> objects of one kind, kept in registration order.

    ``kind`` names the plug-in point in messages (``"format"``; ``plural`` defaults to
    ``kind + "s"``); ``group`` is the entry point group read for plug-ins (None: none);
    ``check(name, value)`` vets a value when it is loaded (raising
    :class:`~recprep.errors.InvalidArgumentError`); ``hint`` ends the unknown-name message
    (``" (or pass a Codec instance)"``).
    """

    def __init__(
        self,
        kind: str,
        *,
        group: str | None,
        plural: str | None = None,
        check: Callable[[str, T], None] | None = None,
        hint: str = "",
    ) -> None:
        self.kind = kind
        self.plural = plural or f"{kind}s"
        self.group = group
        self.hint = hint
        self._check = check
        self._entries: dict[str, _Entry[T]] = {}
        self._plugins_read = group is None
        self._lock = threading.RLock()
        _ALL[group or kind] = self

    # -- registering ----------------------------------------------------------------

    def register(
        self,
        name: str,
        value: T | str | Callable[[], T],
        *,
        lazy: bool = False,
        extra: str | None = None,
        replace: bool = False,
    ) -> None:
        """Make ``name`` mean ``value``: the object, or (a ``str``) the dotted path of it,
        or (``lazy=True``) a no-argument function returning it; the last two are loaded on
        first use. ``extra``: the recprep extra to install when that import fails."""
        if not isinstance(name, str) or not name:
            raise InvalidArgumentError(f"a {self.kind} name must be a non-empty str, "
                                       f"got {name!r}")
        if isinstance(value, str):
            path = value
            entry = _Entry[T](lambda: import_path(path), None, path, extra)
        elif lazy:
            if not callable(value):
                raise InvalidArgumentError(f"lazy=True takes a no-argument function, got "
                                           f"{value!r}")
            entry = _Entry(value, None, _describe(value), extra)
        else:
            if self._check is not None:
                self._check(name, value)  # type: ignore[arg-type]
            entry = _Entry(None, value, _describe(value))  # type: ignore[arg-type]
        with self._lock:
            existing = self._entries.get(name)
            if existing is not None and not replace:
                article = "an" if self.kind[:1] in "aeiou" else "a"
                raise InvalidArgumentError(
                    f"{article} {self.kind} named {name!r} is already registered "
                    f"({self._origin(existing)}); pass replace=True to replace it"
                )
            self._entries[name] = entry

    def pop(self, name: str, default: Any = None) -> Any:
        """Forget ``name``; return what it held (loaded or not), or ``default``."""
        with self._lock:
            entry = self._entries.pop(name, None)
        if entry is None:
            return default
        return entry.value if entry.loader is None else entry.source

    # -- looking up -----------------------------------------------------------------

    def available(self) -> list[str]:
        """Every name, sorted: built-ins, registered and plug-ins (none is imported)."""
        return sorted(self.names())

    def names(self) -> list[str]:
        """Every name, in registration order (plug-ins after the built-ins)."""
        self._read_plugins()
        return list(self._entries)

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in self.names()

    def get(self, name: str) -> T:
        """The object registered as ``name``, imported on first use."""
        entry = self._entries.get(name) if isinstance(name, str) else None
        if entry is None:  # not built in: maybe a plug-in
            if isinstance(name, str) and name in self.names():
                entry = self._entries[name]
            else:
                raise InvalidArgumentError(
                    f"unknown {self.kind} {name!r}; valid {self.plural} are "
                    f"{self.available()}{self.hint}"
                )
        return self._load(name, entry)

    def values(self) -> Iterator[T]:
        """Every object, loaded, in registration order; a plug-in that fails to load is
        skipped with a :class:`~recprep.errors.PluginWarning`."""
        for _, value in self.items():
            yield value

    def items(self) -> Iterator[tuple[str, T]]:
        """``(name, object)`` for every entry, as :meth:`values`."""
        for name in self.names():
            entry = self._entries.get(name)
            if entry is None:  # removed meanwhile
                continue
            try:
                value = self._load(name, entry)
            except PluginError as err:
                warn(PluginWarning(str(err)))
                continue
            yield name, value

    # -- plug-ins -------------------------------------------------------------------

    def reset_plugins(self) -> None:
        """Forget the plug-ins read so far; the next look-up reads the entry points again
        (after ``sys.path`` or the installed distributions changed)."""
        with self._lock:
            for name in [n for n, e in self._entries.items() if e.distribution is not None]:
                del self._entries[name]
            self._plugins_read = self.group is None
        importlib.invalidate_caches()

    def _read_plugins(self) -> None:
        if self._plugins_read:
            return
        with self._lock:
            if self._plugins_read:
                return
            self._plugins_read = True
            import importlib.metadata  # only when plug-ins are looked for

            try:
                found = list(importlib.metadata.entry_points(group=self.group))  # type: ignore[arg-type]
            except Exception as err:  # a broken METADATA or entry_points.txt somewhere
                warn(PluginWarning(f"can't read the entry points of group {self.group!r}: "
                                   f"{type(err).__name__}: {err}; no {self.kind} plug-ins "
                                   "loaded"))
                return
            for point in found:
                distribution = _distribution(point)
                existing = self._entries.get(point.name)
                if existing is not None:
                    if existing.distribution != distribution:
                        warn(PluginWarning(
                            f"{distribution} registers the {self.kind} {point.name!r} "
                            f"({point.value}) in entry point group {self.group!r}, but "
                            f"that name is taken by {self._origin(existing)}: ignored"
                        ))
                    continue
                self._entries[point.name] = _Entry(
                    point.load, None, point.value, distribution=distribution
                )

    # -- loading --------------------------------------------------------------------

    def _origin(self, entry: _Entry[T]) -> str:
        if entry.distribution is None:
            return entry.source
        return f"{entry.source} from {entry.distribution}"

    def _load(self, name: str, entry: _Entry[T]) -> T:
        loader = entry.loader
        if loader is None:
            return entry.value  # type: ignore[return-value]
        try:
            value = loader()
            if self._check is not None:
                self._check(name, value)
        except Exception as err:
            if entry.distribution is not None:
                raise PluginError(
                    self.kind, name, entry.source, entry.distribution, self.group or "", err
                ) from err
            missing = getattr(err, "name", None) if isinstance(err, ImportError) else None
            if entry.extra and missing and missing.partition(".")[0] != "recprep":
                raise MissingDependencyError(
                    missing.partition(".")[0], entry.extra, f"{self.kind}={name!r}"
                ) from err
            raise
        with self._lock:
            if self._entries.get(name) is entry:
                entry.value, entry.loader = value, None
        return value
