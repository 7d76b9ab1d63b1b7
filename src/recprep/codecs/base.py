"""The codec contract: one instance in, one record (bytes) out, and back.

A codec turns what a reader yields (an *instance*: a value or a tuple of values) into
the bytes of one record, and a record back into an equal instance. Codecs never touch
files; containers never look inside records.

Rules every codec keeps:

* ``decode(encode(x))`` equals ``x`` for every instance the codec accepts, in type and
  value; an instance it can't represent raises :class:`~recprep.errors.EncodeError`.
* ``encode`` is deterministic: the same instance gives the same bytes, in any process.
* ``decode`` of bytes that aren't a valid encoding raises
  :class:`~recprep.errors.DecodeError`, never a bare ``struct.error`` or a wrong value.
* Nothing is unpickled unless ``allow_pickle`` is true; a pickled value met without it
  raises :class:`~recprep.errors.PickleRefusedError`.
* Codec objects pickle (they travel to workers).

Example
-------
>>> from recprep.codecs import get_codec
>>> codec = get_codec("raw")
>>> codec.decode(codec.encode(b"abc"))
b'abc'
"""

from __future__ import annotations

import abc
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

if TYPE_CHECKING:
    from .._core.batching import Columns

#: Qualified names of the types that codecs of this process stored as pickles because they
#: have no encoding of their own for them (a fallback the user didn't ask for), appended by
#: :func:`note_pickle_fallback`. The write loop checks it after each ``encode``, notes the
#: instance index and clears it, so that ``convert`` warns
#: (:class:`~recprep.errors.PickleFallbackWarning`) and records the types in the manifest.
#: Codecs whose whole point is pickle (``"pickle"``) don't note anything.
PICKLE_FALLBACKS: list[str] = []


def note_pickle_fallback(value: object) -> None:
    """Record that ``value`` is being stored as a pickle by a codec's fallback.

    >>> note_pickle_fallback(object()); PICKLE_FALLBACKS
    ['builtins.object']
    >>> PICKLE_FALLBACKS.clear()
    """
    kind = type(value)
    PICKLE_FALLBACKS.append(f"{kind.__module__}.{kind.__qualname__}")


class Codec(abc.ABC):
    """Base class of codecs. Subclass it and register it with
    :func:`recprep.codecs.register_codec` to add one."""

    #: the name the codec is registered under and recorded in manifests
    name: ClassVar[str] = ""

    @abc.abstractmethod
    def encode(self, instance: Any) -> bytes:
        """Return the record bytes of ``instance``."""

    @abc.abstractmethod
    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return the instance held by ``record``."""

    def encode_columns(self, columns: Mapping[Any, Any], n: int) -> list[bytes] | None:
        """The records of ``n`` rows given as columns (``columns[name][i]`` is row ``i``'s
        value: a numpy array or a list, see :class:`~recprep.write.tables.ColumnBlock`),
        each row being the instance ``{name: columns[name][i], ...}``, made at once;
        ``None`` (the default) when the codec can't: the write loop then encodes the rows
        one by one. The records must be exactly ``[encode(row) for row in rows]``, byte
        for byte; a block the codec can't make exactly (a value it would pickle, an error
        ``encode`` would raise) gives ``None``, never other bytes."""
        return None

    def decode_many(
        self, records: Sequence[bytes], *, allow_pickle: bool = False
    ) -> list[Any]:
        """The instances of ``records`` (a chunk's worth); codecs may override it to save
        per-record overhead. An error is the one ``decode`` raises for the first bad one."""
        decode = self.decode
        return [decode(record, allow_pickle=allow_pickle) for record in records]

    def decode_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """The records of a chunk as :class:`~recprep.batching.Columns` (what
        :func:`~recprep.batching.collate` makes of their instances), decoded at once;
        ``None`` (the default) when the codec can't, or the records don't share one
        layout: the reader then decodes them one by one (``decode_many``), which raises
        for a bad record. Columns must equal ``collate(decode_many(records))`` exactly."""
        return None

    def schema(self) -> dict[str, Any]:
        """What the manifest's ``schema`` object records for data this codec wrote."""
        return {}

    def with_schema(self, schema: dict[str, Any]) -> Codec:
        """Return a codec configured from a manifest's ``schema`` (for reading)."""
        return self

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
