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

The rest of recprep asks a codec what it can do, never what it is called:

=====================================  ===================================================
hook                                   what it says (default)
=====================================  ===================================================
:meth:`~Codec.encode_columns`          the records of a block of rows given as columns,
                                       made at once (``None``: row by row)
:meth:`~Codec.encode_block`            the same as a :class:`~.blocks.RecordBlock`, which
                                       may place its records straight into a writer's
                                       buffer (``encode_columns``' records)
:meth:`~Codec.decode_many`             a chunk's instances (``decode`` of each)
:meth:`~Codec.decode_columns`          a chunk's records as batch columns, decoded at once
                                       (``None``: one by one)
:meth:`~Codec.decode_arrow_columns`    a chunk's records as one Arrow record batch, built
                                       from their bytes (``None``: from
                                       ``decode_columns``)
:meth:`~Codec.schema`                  what the manifest's ``schema`` records (``{}``)
:meth:`~Codec.with_schema`             the codec configured from a manifest's ``schema``
                                       (itself)
:meth:`~Codec.with_features`           the codec checking instances against declared
                                       features, which its ``schema`` then records
                                       (itself: it declares none)
:meth:`~Codec.drain_pickled`           the types it stored as pickles by a fallback the
                                       user didn't ask for, since the last call (``[]``)
:attr:`~Codec.pickled_pending`         whether ``drain_pickled`` has names to give
                                       (``False``)
=====================================  ===================================================

Example
-------
>>> from recprep.codecs import get_codec
>>> codec = get_codec("raw")
>>> codec.decode(codec.encode(b"abc"))
b'abc'
>>> codec.with_features([("x", "int64")]) is codec, codec.pickled_pending, codec.drain_pickled()
(True, False, [])
"""

from __future__ import annotations

import abc
from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from .blocks import RecordBlock, RecordList

if TYPE_CHECKING:
    from .._core.batching import Columns


class Codec(abc.ABC):
    """Base class of codecs. Subclass it and register it with
    :func:`recprep.codecs.register_codec` to add one."""

    #: the name the codec is registered under and recorded in manifests
    name: ClassVar[str] = ""
    #: whether :meth:`drain_pickled` has names to give: a codec with a pickle fallback
    #: sets it on the instance when it notes a type, and ``drain_pickled`` clears it. A
    #: caller encoding many instances (the write loop) reads it after each ``encode`` and
    #: drains only when it is set: reading an attribute costs a fraction of a call.
    pickled_pending: bool = False

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

    def encode_block(self, columns: Mapping[Any, Any], n: int) -> RecordBlock | None:
        """:meth:`encode_columns`' records as a :class:`~recprep.codecs.blocks.RecordBlock`
        (``None`` where it gives ``None``): what the write loop asks for. A codec that
        builds a block's records by laying them out (``"recprep"``) returns a block that
        places them straight into the writer's buffer, framing and all, so no record is
        made a ``bytes``; the same records, byte for byte."""
        records = self.encode_columns(columns, n)
        return None if records is None else RecordList(records)

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

    def decode_arrow_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """The records of a chunk as :class:`~recprep.batching.Columns` whose tree is one
        ``pyarrow.RecordBatch`` built from the records' bytes (no Python object per
        value), what ``RecordIO.batches(format="arrow")`` asks for first; ``None`` (the
        default) when the codec can't: the batch is then made from
        :meth:`decode_columns`. Its rows must map the instances ``decode_many`` gives as
        :mod:`recprep.read.arrowout` documents."""
        return None

    def schema(self) -> dict[str, Any]:
        """What the manifest's ``schema`` object records for data this codec wrote."""
        return {}

    def with_schema(self, schema: dict[str, Any]) -> Codec:
        """Return a codec configured from a manifest's ``schema`` (for reading)."""
        return self

    def with_features(self, features: Iterable[Any]) -> Codec:
        """Return a codec that checks instances against ``features`` (anything
        :func:`~recprep.codecs.features.as_features` takes) and records them in its
        :meth:`schema`; a codec that declares no features (the default) returns itself
        and ignores them."""
        return self

    def drain_pickled(self) -> list[str]:
        """The qualified names of the types this codec instance stored as pickles by a
        fallback the user didn't ask for (values it has no encoding of its own for) since
        the last call, then forgotten; ``[]`` (the default) for a codec with no such
        fallback. The write loop asks after each ``encode``: ``convert`` warns
        (:class:`~recprep.errors.PickleFallbackWarning`) and records the types in the
        manifest. A codec whose whole point is pickle (``"pickle"``) notes nothing. A
        codec that notes types sets :attr:`pickled_pending` when it does, and clears it
        here."""
        return []

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"
