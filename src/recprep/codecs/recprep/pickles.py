"""The pickle fallback of the ``"recprep"`` codec (tag 0x14), and its note.

A value recprep has no tag for (a subclass, an object array, a time zone it can't name...)
is stored as a cloudpickle, decoded only with ``allow_pickle=True``. The user didn't ask
for that, so the codec instance notes the value's type
(:meth:`~recprep.codecs.recprep.RecprepCodec.drain_pickled`): ``convert`` warns
(:class:`~recprep.errors.PickleFallbackWarning`) and lists the types in the manifest.

The note costs nothing when nothing is pickled: :func:`enc_pickle` leaves a
:class:`PickleNote` among the record's pieces, after the pickle's bytes. A note is not
bytes, so joining the pieces fails, which only happens when something was pickled; the
codec then takes the notes out (:func:`split_notes`) and joins the rest.

>>> out = [b"\\xf1"]; enc_pickle(object(), out)
>>> pieces, notes = split_notes(out)
>>> notes, pieces[1][:1] == bytes((T_PICKLE,))
(['builtins.object'], True)
"""

from __future__ import annotations

from typing import Any

import cloudpickle

from ...errors import EncodeError
from .wire import T_PICKLE, pack_tag_u32

__all__ = ["PickleNote", "enc_pickle", "join_pieces", "split_notes"]


class PickleNote:
    """Among a record's pieces: the value before it was stored as a pickle by the fallback
    (``name``: its type's qualified name)."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


def enc_pickle(x: Any, out: list) -> None:
    """Append the pickle (tag 0x14) of ``x``, a value recprep has no tag for, to ``out``,
    then a :class:`PickleNote` of its type."""
    try:
        body = cloudpickle.dumps(x, protocol=5)
    except Exception as e:
        raise EncodeError(
            f"recprep can't encode a {type(x).__qualname__} and pickling it failed "
            f"({type(e).__name__}: {e})"
        ) from e
    kind = type(x)
    out.append(pack_tag_u32(T_PICKLE, len(body)))
    out.append(body)
    out.append(PickleNote(f"{kind.__module__}.{kind.__qualname__}"))


def split_notes(pieces: list) -> tuple[list, list[str]]:
    """``pieces`` without their :class:`PickleNote` objects, and the notes' names in order."""
    kept = [p for p in pieces if type(p) is not PickleNote]
    return kept, [p.name for p in pieces if type(p) is PickleNote]


def join_pieces(pieces: list) -> bytes:
    """``b"".join(pieces)``, the notes among them left out (for a part of a record, such as
    a set element, whose pieces may hold notes)."""
    try:
        return b"".join(pieces)
    except TypeError:
        return b"".join(split_notes(pieces)[0])
