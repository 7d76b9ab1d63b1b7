"""The ``"recprep"`` codec's class: :class:`RecprepCodec`, records in and out.

The record is the format byte then one value (:mod:`~recprep.codecs.recprep.encode`,
:mod:`~recprep.codecs.recprep.decode`); whole-record packed containers take a fast path
in both directions (:mod:`~recprep.codecs.recprep.packed`), and chunks go through columns
where their records share a layout (:mod:`~recprep.codecs.recprep.columns`,
:mod:`~recprep.codecs.recprep.encode_columns`). The package's docstring describes the
encoding.

>>> codec = RecprepCodec()
>>> codec.decode(codec.encode([1, "a", None]))
[1, 'a', None]
"""

from __future__ import annotations

import struct
from collections.abc import Mapping, Sequence
from typing import Any

from ..._core.batching import Columns
from ...errors import REMEDY, DecodeError, EncodeError
from ..base import Codec
from ..blocks import RecordBlock
from ..guess import codec_remedy, first_byte
from .arrow import recprep_decode_arrow
from .columns import recprep_decode_columns, recprep_decode_rows
from .decode import decode_error, decode_value
from .encode import encode_value
from .encode_columns import recprep_encode_block, recprep_encode_columns
from .packed import DPLANS, LAST_TOP, encode_packed
from .pickles import split_notes
from .wire import F1, FORMAT_TAG, T_PDICT, T_PLIST, Fail, u32

__all__ = ["RecprepCodec"]


def _not_recprep(record: bytes) -> DecodeError:
    return DecodeError(
        f"the record is not recprep-encoded: {first_byte(record)}, not "
        f"0x{FORMAT_TAG:02x}{REMEDY}",
        remedy=codec_remedy(record, besides="recprep"),
    )


_FAST_FAIL = (Fail, struct.error, IndexError, UnicodeDecodeError, TypeError, KeyError)


class RecprepCodec(Codec):
    """Typed, exact, deterministic encoding of Python and ``numpy`` values.

    Examples
    --------
    >>> import numpy as np
    >>> codec = RecprepCodec()
    >>> codec.decode(codec.encode({"x": np.arange(3, dtype=">i4"), "y": -0.0}))
    {'x': array([0, 1, 2], dtype='>i4'), 'y': -0.0}
    >>> codec.decode(b"\\x80\\x04N.")
    Traceback (most recent call last):
    ...
    recprep.errors.DecodeError: the record is not recprep-encoded: it starts with byte 0x80 \
(it looks like a pickle), not 0xf1; pass codec='pickle' or codec='raw' if it was written \
with another codec
    """

    name = "recprep"

    def encode(self, instance: Any) -> bytes:
        """Return the record of ``instance``: ``0xF1`` then the encoded value."""
        t = type(instance)
        if t is tuple or t is list or t is dict:  # fast path: a packed container
            packed = encode_packed(instance, t, True)
            if packed is not None:
                return packed
        out = [F1]
        try:
            encode_value(instance, out)
        except struct.error:
            raise EncodeError(
                "a str, bytes or container is too long for recprep (limit 2**32-1 bytes or "
                "items); split it"
            ) from None
        try:
            return b"".join(out)
        except TypeError:  # a value was pickled by the fallback: its note is a piece
            return self._noting_pickles(out)

    def _noting_pickles(self, out: list[Any]) -> bytes:
        """The record of the pieces ``out``, whose pickle notes this instance keeps for
        :meth:`drain_pickled`."""
        pieces, names = split_notes(out)
        record = b"".join(pieces)
        pending: list[str] = self.__dict__.setdefault("_pickled", [])
        for name in names:
            if name not in pending:
                pending.append(name)
        self.pickled_pending = True
        return record

    def drain_pickled(self) -> list[str]:
        """The qualified names of the types this instance stored as pickles by the pickle
        fallback (values recprep has no tag for) since the last call, each once, in the
        order met; then forgets them.

        >>> from fractions import Fraction
        >>> codec = RecprepCodec()
        >>> _ = codec.encode([Fraction(1, 3), range(2), range(3)])
        >>> codec.pickled_pending, codec.drain_pickled(), codec.drain_pickled()
        (True, ['builtins.range'], [])
        >>> codec.pickled_pending
        False
        """
        self.pickled_pending = False
        return self.__dict__.pop("_pickled", None) or []

    def encode_columns(self, columns: Mapping[Any, Any], n: int) -> list[bytes] | None:
        """The records of ``n`` rows given as columns, made at once with numpy: exactly
        ``encode`` of each row's dict, or ``None`` where a column holds what only
        ``encode`` writes exactly (see :mod:`~recprep.codecs.recprep.encode_columns`)."""
        return recprep_encode_columns(columns, n, self.encode)

    def encode_block(self, columns: Mapping[Any, Any], n: int) -> RecordBlock | None:
        """:meth:`encode_columns` as each record's pieces, placed where a writer says
        (:class:`~recprep.codecs.recprep.segments.Segments`): no record is made a
        ``bytes``. A subclass that overrides ``encode_columns`` alone gets its records
        (as the base class's ``encode_block`` gives them)."""
        if type(self).encode_columns is not RecprepCodec.encode_columns:
            return super().encode_block(columns, n)
        return recprep_encode_block(columns, n, self.encode)

    def decode_many(
        self, records: Sequence[bytes], *, allow_pickle: bool = False) -> list[Any]:
        """The values of a chunk's records: records of one layout are cut out of the
        chunk's columns (:func:`~recprep.codecs.recprep.columns.recprep_decode_rows`);
        otherwise whole-record packed containers of the shape seen last are decoded with no
        per-record dispatch, and the rest go through ``decode``."""
        rows = recprep_decode_rows(records, self.decode)
        if rows is not None:
            return rows
        out: list[Any] = []
        append = out.append
        decode = self.decode
        head, fn = LAST_TOP[0]
        start = len(head)
        for record in records:
            if type(record) is bytes and record.startswith(head):
                try:
                    value, off = fn(record, start)
                    if off == len(record):
                        append(value)
                        continue
                except _FAST_FAIL:
                    pass
            append(decode(record, allow_pickle=allow_pickle))
            if LAST_TOP[0][1] is not fn:  # decode learnt a new shape: use it from now on
                head, fn = LAST_TOP[0]
                start = len(head)
        return out

    def decode_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """A chunk whose records share one layout (tuples/dicts of numbers, strings,
        bytes, numpy scalars and arrays of one dtype and shape) as columns, cut out of the
        joined records with numpy; ``None`` otherwise (see
        :mod:`~recprep.codecs.recprep.columns`)."""
        return recprep_decode_columns(records, self.decode)

    def decode_arrow_columns(self, records: list[bytes | memoryview]) -> Columns | None:
        """The same chunks as :meth:`decode_columns`, as one ``pyarrow.RecordBatch``
        built from the chunk's bytes (no Python object per value; see
        :mod:`~recprep.codecs.recprep.arrow`): what ``RecordIO.batches(format="arrow")``
        asks a codec for first."""
        return recprep_decode_arrow(records, self.decode)

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return the value held by ``record`` (a pickled part only if ``allow_pickle``)."""
        buf = record if type(record) is bytes else memoryview(record).tobytes()
        try:  # fast path: a whole-record packed container whose decoder exists
            head, fn = LAST_TOP[0]
            if buf.startswith(head):
                value, off = fn(buf, len(head))
                if off == len(buf):
                    return value
            elif buf[0] == FORMAT_TAG and T_PLIST <= buf[1] <= T_PDICT:
                tag = buf[1]
                p = 6 + u32(buf, 2)[0] * (2 if tag == T_PDICT else 1)
                found = DPLANS[tag].get(buf[6:p])
                if found is not None:
                    fn = found
                    value, off = fn(buf, p)
                    if off == len(buf):
                        LAST_TOP[0] = (buf[:p], fn)
                        return value
        except _FAST_FAIL:
            pass  # the general path below says what is wrong
        if not buf:
            raise DecodeError("the record is empty; a recprep record is at least 2 bytes")
        if buf[0] != FORMAT_TAG:
            raise _not_recprep(buf)
        value, off = decode_value(buf, 1, allow_pickle)
        if off != len(buf):
            raise decode_error(f"{len(buf) - off} trailing byte(s) after the value", off)
        return value
