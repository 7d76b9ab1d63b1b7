"""The roots: :class:`RecprepError`, :class:`RecprepWarning`, remedies, errors located
in a file, and :func:`warn`."""

from __future__ import annotations

import sys
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    pass


def _rebuild(
    cls: type[RecprepError], args: tuple[Any, ...], state: dict[str, Any]
) -> RecprepError:
    err = cls.__new__(cls)
    Exception.__init__(err, *args)
    err.__dict__.update(state)
    return err


#: where a message template says a remedy ("; pass <option> <effect>", or nothing); the
#: markers of a message are said by its remedies in order
REMEDY = "{remedy}"


@dataclass(frozen=True)
class Remedy:
    """An option the user can set to get past an error, kept apart from the words.

    ``option`` is the Python keyword (``"on_corrupt"``); ``value`` what to set it to
    (``None``: a value of the user's choosing), ``also`` other values that work too;
    ``effect`` what it does. The error's message says it the Python way;
    :meth:`RecprepError.message` lets another audience say it its own way (the command
    line says ``--on-corrupt skip``).

    Examples
    --------
    >>> Remedy("on_corrupt", "skip").python(), Remedy("format").python()
    ("on_corrupt='skip'", 'format=')
    >>> Remedy("codec", "pickle", also=("raw",)).python()
    "codec='pickle' or codec='raw'"
    """

    option: str
    value: Any = None
    also: tuple[Any, ...] = ()
    effect: str = ""

    @property
    def values(self) -> tuple[Any, ...]:
        """``value`` then ``also``."""
        return (self.value, *self.also)

    def python(self) -> str:
        """How a Python caller passes it: ``on_corrupt='skip'``, ``format=``."""
        return " or ".join(
            f"{self.option}=" if v is None else f"{self.option}={v!r}" for v in self.values
        )

    def clause(self, said: str | None) -> str:
        """``"; pass SAID EFFECT"``, or ``""`` when there is nothing to say."""
        if not said:
            return ""
        return f"; pass {said}" + (f" {self.effect}" if self.effect else "")


class RecprepError(Exception):
    """Base class of every error recprep raises on purpose.

    Errors pickle with their attributes, so they travel back from worker processes and
    cluster tasks intact.

    ``remedy`` (a :class:`Remedy` or None) names the option that gets past the error
    (``remedies``: all of them, when there are several). A message with the marker
    ``{remedy}`` is a template: ``str(err)`` says the remedies the Python way,
    :meth:`message` the way its caller asks.

    Examples
    --------
    >>> err = RecprepError("x.bin: unknown format{remedy}", remedy=Remedy("format"))
    >>> str(err)
    'x.bin: unknown format; pass format='
    >>> err.message(lambda r: "--" + r.option), err.message(lambda r: None)
    ('x.bin: unknown format; pass --format', 'x.bin: unknown format')
    """

    #: the options that get past this error, in the order its message says them
    remedies: tuple[Remedy, ...] = ()

    def __init__(self, *args: Any, remedy: Remedy | Sequence[Remedy] | None = None) -> None:
        if remedy is not None:
            self.remedies = (remedy,) if isinstance(remedy, Remedy) else tuple(remedy)
        if args and isinstance(args[0], str) and REMEDY in args[0]:
            self._template = args[0]
            args = (self._say(Remedy.python), *args[1:])
        super().__init__(*args)

    @property
    def remedy(self) -> Remedy | None:
        """The first of ``remedies``, or None."""
        return self.remedies[0] if self.remedies else None

    def _say(self, say: Callable[[Remedy], str | None]) -> str:
        parts = self._template.split(REMEDY)
        clauses = [r.clause(say(r)) for r in self.remedies[: len(parts) - 1]]
        clauses += [""] * (len(parts) - 1 - len(clauses))
        return "".join(p + c for p, c in zip(parts, [*clauses, ""], strict=True))

    def message(self, say: Callable[[Remedy], str | None] | None = None) -> str:
        """The message with each remedy said by ``say(remedy)`` (``"--on-corrupt skip"``;
        None leaves that remedy out); without ``say``, ``str(self)``."""
        if say is None or "_template" not in self.__dict__:
            return str(self)
        return self._say(say)

    def __reduce__(self) -> tuple[Any, ...]:
        return (_rebuild, (type(self), self.args, self.__dict__))


_L = TypeVar("_L", bound="LocatedError")


class LocatedError(RecprepError):
    """Mixin for errors about a place in a file: prefixes the message with it."""

    #: what to do, appended to the message
    hint = ""

    def __init__(
        self,
        detail: str,
        *,
        path: str | None = None,
        offset: int | None = None,
        record_index: int | None = None,
        remedy: Remedy | Sequence[Remedy] | None = None,
    ) -> None:
        self.detail = detail
        self.path = path
        self.offset = offset
        self.record_index = record_index
        where = []
        if path is not None:
            where.append(str(path))
        if offset is not None:
            where.append(f"at byte {offset}")
        if record_index is not None:
            where.append(f"record {record_index} of the chunk")
        prefix = " ".join(where)
        message = f"{prefix}: {detail}" if prefix else detail
        super().__init__(message + self.hint, remedy=remedy)

    def located(self: _L, **where: object) -> _L:
        """Return a copy of this error with location facts filled in where missing."""
        facts: dict[str, Any] = {
            "path": self.path, "offset": self.offset, "record_index": self.record_index
        }
        facts.update({k: v for k, v in where.items() if facts.get(k) is None})
        err = type(self).__new__(type(self))
        err.__dict__.update(self.__dict__)
        LocatedError.__init__(err, self.detail, **facts)
        return err


class RecprepWarning(UserWarning):
    """Base class of the warnings recprep gives about what it does on purpose."""


def warn(warning: Warning) -> None:
    """Issue ``warning``, attributed to the innermost caller outside recprep (the user's
    line that called recprep, or a thread's bootstrap), so that it shows by default and
    points at the user's code.

    >>> import warnings
    >>> with warnings.catch_warnings(record=True) as seen:
    ...     warnings.simplefilter("always")
    ...     warn(RecprepWarning("look"))
    >>> str(seen[0].message), seen[0].category.__name__
    ('look', 'RecprepWarning')
    """
    level, frame = 1, sys._getframe(0)
    while frame.f_back is not None and frame.f_globals.get("__name__", "").partition(".")[
        0
    ] == "recprep":
        level, frame = level + 1, frame.f_back
    warnings.warn(warning, stacklevel=level)


def add_note(err: BaseException, text: str) -> None:
    """``err.add_note(text)``, also on Python 3.10 (which has no ``add_note`` but shows
    nothing of ``__notes__`` either: the note is kept for code that reads it).

    >>> err = ValueError("x"); add_note(err, "more"); err.__notes__
    ['more']
    """
    note = getattr(err, "add_note", None)  # Python >= 3.11
    if note is not None:
        note(text)
    else:
        err.__notes__ = [*getattr(err, "__notes__", []), text]  # type: ignore[attr-defined]
