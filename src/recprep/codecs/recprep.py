"""The ``"recprep"`` codec: a typed binary encoding that round-trips exactly.

A record is the format byte :data:`FORMAT_TAG` (``0xF1``) followed by exactly one
value: a one-byte type tag and a body. Python scalars and containers, sets, named tuples,
``datetime``/``decimal``/``uuid``/``fractions`` values, ``numpy`` arrays and scalars have
their own tags, matched on the *exact* type, so that type and value both come back
(``-0.0``, NaN payloads, lone surrogates, ``'>i4'`` arrays, Fortran order, time zones and
``fold``...); pandas ``Timestamp``/``Timedelta``/``NaT`` are stored as numpy values.
Anything else, subclasses included, is stored as a pickle (noted with
:func:`~recprep.codecs.base.note_pickle_fallback`), which is decoded only with
``allow_pickle=True``. Tuples, lists and dicts holding only ``bool``/``int``/``float``/
``str``/``bytes`` are *packed*: one struct holds all their fixed-width fields. Set
elements are written sorted by their encoded bytes, so equal sets give equal records in
every process. The byte-level format is specified in ``docs/format.md``.

Encoding and decoding are iterative (nesting costs no Python stack), and packed
containers of the signatures in use run through generated code (rationed: see
``_recprep_packed``), which keeps this pure-Python codec within reach of ``pickle``'s
C speed.

Example
-------
>>> codec = RecprepCodec()
>>> record = codec.encode((1, "a"))
>>> record.hex(" ")
'f1 0e 02 00 00 00 71 73 01 00 00 00 00 00 00 00 01 00 00 00 61'
>>> codec.decode(record)
(1, 'a')
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator, Mapping, Sequence
from itertools import chain
from typing import Any

import numpy as np

from .._core.batching import Columns
from ..errors import REMEDY, DecodeError, EncodeError
from ._recprep_base import (
    F1,
    FORMAT_TAG,
    MAX_DEPTH,
    T_BIGINT,
    T_BYTEARRAY,
    T_BYTES,
    T_COMPLEX,
    T_FLOAT,
    T_FROZENSET,
    T_INT,
    T_NPBYTES,
    T_NPSTR,
    T_PDICT,
    T_PLIST,
    T_SET,
    T_STR,
    Fail,
    cache_put,
    enc_pickle,
)
from ._recprep_columns import decode_columns as _decode_columns
from ._recprep_columns import decode_rows
from ._recprep_decode import decode_error as _decode_error
from ._recprep_decode import decode_value as _decode_value
from ._recprep_encode_columns import encode_columns as _encode_columns
from ._recprep_numpy import SCALAR_ENCODERS, enc_ndarray
from ._recprep_packed import DPLANS, LAST_TOP, PACKED_TAG, encode_packed
from ._recprep_types import ENCODERS as TYPE_ENCODERS
from ._recprep_types import enc_namedtuple, namedtuple_fields, pandas_value
from .base import Codec
from .guess import codec_remedy, first_byte

__all__ = ["FORMAT_TAG", "MAX_DEPTH", "RecprepCodec"]

_TAG_U32 = struct.Struct("<BI")
_TAG_Q = struct.Struct("<Bq")
_TAG_D = struct.Struct("<Bd")
_TAG_DD = struct.Struct("<Bdd")
_pack_tag_u32 = _TAG_U32.pack
_u32 = struct.Struct("<I").unpack_from

# ------------------------------------------------------------------ encoding
# An encoder appends its pieces to ``out``; one whose value holds other values (a set, a
# named tuple) appends its header and returns them: the loop encodes them next, one level
# deeper.


def _enc_sized(tag: int, to_bytes: Callable[[Any], Any] | None = None) -> Callable:
    def enc(x: Any, out: list) -> None:
        b = to_bytes(x) if to_bytes else x
        out.append(_pack_tag_u32(tag, len(b)))
        out.append(b)

    return enc


def _enc_bigint(x: int) -> bytes:
    body = x.to_bytes(x.bit_length() // 8 + 1, "little", signed=True)
    return _pack_tag_u32(T_BIGINT, len(body)) + body


def _enc_set(x: set | frozenset, out: list) -> Iterator:
    out.append(_pack_tag_u32(T_SET if type(x) is set else T_FROZENSET, len(x)))
    return _sorted_elements(x, out)


def _sorted_elements(x: set | frozenset, out: list) -> Iterator:
    """Yield the elements of ``x`` for the loop to encode into ``out``; once they are all
    encoded, reorder their pieces by their bytes (hash order differs between processes)."""
    bounds = [len(out)]
    for element in x:
        yield element
        bounds.append(len(out))  # resumed once the element is encoded
    pieces = [b"".join(out[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    pieces.sort()
    del out[bounds[0] :]
    out.extend(pieces)


def _enc_pandas(x: Any, out: list) -> None:
    value = pandas_value(x)
    if value is None:
        return enc_pickle(x, out)
    return SCALAR_ENCODERS[type(value)](value, out)


_ENCODERS: dict[type, Callable[[Any, list], Any]] = {
    type(None): lambda x, out: out.append(b"\x00"),
    bool: lambda x, out: out.append(b"\x02" if x else b"\x01"),
    complex: lambda x, out: out.append(_TAG_DD.pack(T_COMPLEX, x.real, x.imag)),
    bytes: _enc_sized(T_BYTES),
    bytearray: _enc_sized(T_BYTEARRAY),
    np.bytes_: _enc_sized(T_NPBYTES),
    np.str_: _enc_sized(T_NPSTR, lambda s: s.encode("utf-8", "surrogatepass")),
    np.ndarray: enc_ndarray,
    set: _enc_set,
    frozenset: _enc_set,
    **SCALAR_ENCODERS,
    **TYPE_ENCODERS,
}
_DYNAMIC: dict[type, Callable[[Any, list], Any]] = {}  # other types seen: their encoder


def _dynamic_encoder(t: type) -> Callable[[Any, list], Any]:
    enc = _DYNAMIC.get(t)
    if enc is None:
        if namedtuple_fields(t) is not None:
            enc = enc_namedtuple
        elif t.__module__ == "pandas" or t.__module__.startswith("pandas."):
            enc = _enc_pandas
        else:
            enc = enc_pickle
        cache_put(_DYNAMIC, t, enc)
    return enc


def _too_deep() -> EncodeError:
    return EncodeError(
        f"the value nests containers deeper than {MAX_DEPTH} levels (or contains itself)"
    )


def _encode_into(value: Any, out: list) -> None:
    """Append the pieces of ``value`` to ``out``; iterative, so depth costs no stack."""
    append = out.append
    stack: list = []
    it = iter((value,))
    while True:
        for x in it:
            t = type(x)
            if t is int:
                try:
                    append(_TAG_Q.pack(T_INT, x))
                except struct.error:
                    append(_enc_bigint(x))
            elif t is str:
                b = x.encode("utf-8", "surrogatepass")
                append(_pack_tag_u32(T_STR, len(b)))
                append(b)
            elif t is float:
                append(_TAG_D.pack(T_FLOAT, x))
            elif t is tuple or t is list or t is dict:
                if len(stack) >= MAX_DEPTH:
                    raise _too_deep()
                packed = encode_packed(x, t, False)
                if packed is not None:
                    append(packed)
                    continue
                append(_pack_tag_u32(PACKED_TAG[t] - 3, len(x)))
                stack.append(it)
                it = chain.from_iterable(x.items()) if t is dict else iter(x)
                break
            else:
                nested = (_ENCODERS.get(t) or _dynamic_encoder(t))(x, out)
                if nested is not None:
                    if len(stack) >= MAX_DEPTH:
                        raise _too_deep()
                    stack.append(it)
                    it = iter(nested)
                    break
        else:
            if not stack:
                return
            it = stack.pop()


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
            _encode_into(instance, out)
        except struct.error:
            raise EncodeError(
                "a str, bytes or container is too long for recprep (limit 2**32-1 bytes or "
                "items); split it"
            ) from None
        return b"".join(out)

    def encode_columns(self, columns: Mapping[Any, Any], n: int) -> list[bytes] | None:
        """The records of ``n`` rows given as columns, made at once with numpy: exactly
        ``encode`` of each row's dict, or ``None`` where a column holds what only
        ``encode`` writes exactly (see ``_recprep_encode_columns``)."""
        return _encode_columns(columns, n, self.encode)

    def decode_many(
        self, records: Sequence[bytes], *, allow_pickle: bool = False) -> list[Any]:
        """The values of a chunk's records: records of one layout are cut out of the
        chunk's columns (``_recprep_columns.decode_rows``); otherwise whole-record packed
        containers of the shape seen last are decoded with no per-record dispatch, and the
        rest go through ``decode``."""
        rows = decode_rows(records, self.decode)
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
        joined records with numpy; ``None`` otherwise (see ``_recprep_columns``)."""
        return _decode_columns(records, self.decode)

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
                p = 6 + _u32(buf, 2)[0] * (2 if tag == T_PDICT else 1)
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
        value, off = _decode_value(buf, 1, allow_pickle)
        if off != len(buf):
            raise _decode_error(f"{len(buf) - off} trailing byte(s) after the value", off)
        return value
