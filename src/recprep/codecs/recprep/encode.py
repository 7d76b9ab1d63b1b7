"""Encoding a value of the ``"recprep"`` codec: iterative, so nesting costs no stack.

:func:`encode_value` appends the pieces of a value (bytes, or buffers such as numpy
arrays) to a list, which the codec joins into the record. Each exact type has an encoder;
one whose value holds other values (a set, a named tuple) appends its header and returns
them, and the loop encodes them next, one level deeper. Types met for the first time get
their encoder once (:func:`encoder_of_new_type`): a named tuple's, a pandas value's, or
the pickle fallback (:mod:`~recprep.codecs.recprep.pickles`).

>>> out = [b"\\xf1"]; encode_value({1, 2}, out)
>>> b"".join(out).hex(" ")
'f1 1c 02 00 00 00 03 01 00 00 00 00 00 00 00 03 02 00 00 00 00 00 00 00'
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Iterator
from itertools import chain
from typing import Any

import numpy as np

from ...errors import EncodeError
from .arrays import SCALAR_ENCODERS, enc_ndarray
from .packed import PACKED_TAG, encode_packed
from .pickles import PickleNote, enc_pickle, join_pieces
from .types import TAGGED_TYPE_ENCODERS, enc_namedtuple, namedtuple_fields, pandas_value
from .wire import (
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
    T_SET,
    T_STR,
    cache_put,
)

__all__ = ["encode_value", "encoder_of_new_type"]

_TAG_U32 = struct.Struct("<BI")
_TAG_Q = struct.Struct("<Bq")
_TAG_D = struct.Struct("<Bd")
_TAG_DD = struct.Struct("<Bdd")
_pack_tag_u32 = _TAG_U32.pack


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
    notes: list = []
    try:
        pieces = [b"".join(out[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
    except TypeError:  # an element was pickled: its note stays, after the elements
        pieces = [join_pieces(out[a:b]) for a, b in zip(bounds, bounds[1:], strict=False)]
        notes = [p for p in out[bounds[0]:] if type(p) is PickleNote]
    pieces.sort()
    del out[bounds[0] :]
    out.extend(pieces)
    out.extend(notes)


def _enc_pandas(x: Any, out: list) -> None:
    value = pandas_value(x)
    if value is None:
        return enc_pickle(x, out)
    return SCALAR_ENCODERS[type(value)](value, out)


#: exact type -> encoder, for the types with a tag (bar int, str, float, tuple, list and
#: dict, which the loop encodes itself)
_ENCODER_OF_TYPE: dict[type, Callable[[Any, list], Any]] = {
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
    **TAGGED_TYPE_ENCODERS,
}
_ENCODER_OF_NEW_TYPE: dict[type, Callable[[Any, list], Any]] = {}  # other types seen


def encoder_of_new_type(t: type) -> Callable[[Any, list], Any]:
    """The encoder of a type without a tag of its own: a named tuple's, a pandas value's,
    else the pickle fallback (cached)."""
    enc = _ENCODER_OF_NEW_TYPE.get(t)
    if enc is None:
        if namedtuple_fields(t) is not None:
            enc = enc_namedtuple
        elif t.__module__ == "pandas" or t.__module__.startswith("pandas."):
            enc = _enc_pandas
        else:
            enc = enc_pickle
        cache_put(_ENCODER_OF_NEW_TYPE, t, enc)
    return enc


def _too_deep() -> EncodeError:
    return EncodeError(
        f"the value nests containers deeper than {MAX_DEPTH} levels (or contains itself)"
    )


def encode_value(value: Any, out: list) -> None:
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
                nested = (_ENCODER_OF_TYPE.get(t) or encoder_of_new_type(t))(x, out)
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
