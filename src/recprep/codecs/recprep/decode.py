"""Decoding a value of the ``"recprep"`` codec: iterative, so nesting costs no stack.

:func:`decode_value` reads the value at an offset of a record: ints, strings, floats and
packed containers inline, other tags through a table of decoders (numpy values from
:mod:`~recprep.codecs.recprep.arrays`, datetimes and the like from
:mod:`~recprep.codecs.recprep.types`), containers through a stack of open ones.

Every malformed input is a :class:`~recprep.errors.DecodeError` giving the byte offset in
the record where the bad value starts; nothing is unpickled without ``allow_pickle``.

>>> decode_value(bytes.fromhex("0b 02000000 03 0100000000000000 00"), 0, False)
((1, None), 15)
>>> decode_value(b"\x1f", 0, False)
Traceback (most recent call last):
...
recprep.errors.DecodeError: unknown type tag 0x1f, at byte 0 of the record
"""

from __future__ import annotations

import pickle
import struct
from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import DecodeError, PickleRefusedError
from .arrays import dec_ndarray, dec_npscalar
from .packed import DPLANS, packed_decoder
from .types import TAGGED_TYPE_DECODERS, namedtuple_builder
from .wire import (
    MAX_DEPTH,
    T_BIGINT,
    T_BYTEARRAY,
    T_BYTES,
    T_COMPLEX,
    T_DICT,
    T_FALSE,
    T_FLOAT,
    T_FROZENSET,
    T_INT,
    T_LIST,
    T_NAMEDTUPLE,
    T_NDARRAY,
    T_NONE,
    T_NPBYTES,
    T_NPSCALAR,
    T_NPSTR,
    T_PDICT,
    T_PICKLE,
    T_PLIST,
    T_SET,
    T_STR,
    T_TRUE,
    T_TUPLE,
    Fail,
    build_dict,
    u32,
)

__all__ = ["decode_error", "decode_value"]

_unpack_i64 = struct.Struct("<q").unpack_from
_unpack_f64 = struct.Struct("<d").unpack_from
_unpack_2f64 = struct.Struct("<dd").unpack_from


def _dec_sized(convert: Callable[[bytes], Any]) -> Callable[[bytes, int], tuple[Any, int]]:
    def dec(buf: bytes, off: int) -> tuple[Any, int]:
        start = off + 5
        end = start + u32(buf, off + 1)[0]
        if end > len(buf):
            raise Fail(f"a value needs {end - start} bytes, the record has {len(buf) - start}")
        return convert(buf[start:end]), end

    return dec


def _str(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass")


def _build_set(kind: type) -> Callable[[list], Any]:
    def build(items: list) -> Any:
        value = kind(items)
        if len(value) != len(items):
            raise Fail(f"a {kind.__name__} of {len(items)} elements holds equal ones")
        return value

    return build


_DECODERS: list[Callable[[bytes, int], tuple[Any, int]] | None] = [None] * 256
_DECODERS[T_NONE] = lambda buf, off: (None, off + 1)
_DECODERS[T_FALSE] = lambda buf, off: (False, off + 1)
_DECODERS[T_TRUE] = lambda buf, off: (True, off + 1)
_DECODERS[T_INT] = lambda buf, off: (_unpack_i64(buf, off + 1)[0], off + 9)
_DECODERS[T_BIGINT] = _dec_sized(lambda b: int.from_bytes(b, "little", signed=True))
_DECODERS[T_FLOAT] = lambda buf, off: (_unpack_f64(buf, off + 1)[0], off + 9)
_DECODERS[T_COMPLEX] = lambda buf, off: (complex(*_unpack_2f64(buf, off + 1)), off + 17)
_DECODERS[T_STR] = _dec_sized(_str)
_DECODERS[T_BYTES] = _dec_sized(bytes)
_DECODERS[T_BYTEARRAY] = _dec_sized(bytearray)
_DECODERS[T_NDARRAY] = dec_ndarray
_DECODERS[T_NPSCALAR] = dec_npscalar
_DECODERS[T_NPSTR] = _dec_sized(lambda b: np.str_(_str(b)))
_DECODERS[T_NPBYTES] = _dec_sized(np.bytes_)
# T_PICKLE has none: decode_value reads it after the policy check (_pickled_value)
_PICKLE_BODY = _dec_sized(bytes)
for _tag, _dec in TAGGED_TYPE_DECODERS.items():
    _DECODERS[_tag] = _dec
# containers of counted values: tag -> (values per count, builder)
_COUNTED: dict[int, tuple[int, Callable[[list], Any]]] = {
    T_LIST: (1, lambda items: items), T_TUPLE: (1, tuple), T_DICT: (2, build_dict),
    T_SET: (1, _build_set(set)), T_FROZENSET: (1, _build_set(frozenset)),
}
_BAD_INPUT = (Fail, struct.error, IndexError, UnicodeDecodeError, ValueError, TypeError,
              ArithmeticError, MemoryError)


def decode_value(buf: bytes, off: int, allow_pickle: bool) -> tuple[Any, int]:
    """Decode the value at ``off``; return it and the offset after it.

    ``off`` moves only past a value decoded whole, so on failure it is where the bad value
    starts.
    """
    size = len(buf)
    stack: list = []
    build: Callable[[list], Any] | None = None  # None: the top level
    remaining = 0
    items: list = []
    append = items.append
    try:
        while True:
            tag = buf[off]
            if tag == T_INT:
                value, off = _unpack_i64(buf, off + 1)[0], off + 9
            elif tag == T_STR:
                end = off + 5 + u32(buf, off + 1)[0]
                if end > size:
                    raise Fail("truncated string")
                value, off = buf[off + 5 : end].decode("utf-8", "surrogatepass"), end
            elif tag == T_FLOAT:
                value, off = _unpack_f64(buf, off + 1)[0], off + 9
            elif T_LIST <= tag <= T_PDICT or T_SET <= tag <= T_NAMEDTUPLE:  # a container
                if len(stack) >= MAX_DEPTH:
                    raise Fail(f"containers nest deeper than {MAX_DEPTH} levels")
                if T_PLIST <= tag <= T_PDICT:  # packed: its items decoded at once
                    n = u32(buf, off + 1)[0] * (2 if tag == T_PDICT else 1)
                    codes = buf[off + 5 : (p := off + 5 + n)]
                    value, off = (DPLANS[tag].get(codes) or packed_decoder(codes, n, tag))(buf, p)
                else:  # its items decoded next, one level deeper
                    counted = _COUNTED.get(tag)
                    if counted is not None:
                        count, opened, p = u32(buf, off + 1)[0] * counted[0], counted[1], off + 5
                    else:
                        count, (opened, p) = 1, namedtuple_builder(buf, off)
                    if count:
                        if count > size - p:
                            raise Fail(f"a container claims {count} values, the record has less")
                        stack.append((build, items, remaining))
                        build, items, remaining, off = opened, [], count, p
                        append = items.append
                        continue
                    value, off = opened([]), p
            else:
                dec = _DECODERS[tag]
                value, off = dec(buf, off) if dec is not None else _pickled_value(
                    buf, off, allow_pickle)
            if build is None:
                return value, off
            append(value)
            remaining -= 1
            while not remaining:  # close the finished containers
                value = build(items)
                build, items, remaining = stack.pop()
                if build is None:
                    return value, off
                append = items.append
                append(value)
                remaining -= 1
    except _BAD_INPUT as e:
        if isinstance(e, DecodeError):
            raise
        raise _bad_input(e, off) from None


def _bad_input(e: Exception, off: int) -> DecodeError:
    """The error of a value that failed to decode at ``off`` with ``e``."""
    if isinstance(e, Fail):
        return decode_error(str(e), off)
    if isinstance(e, (struct.error, IndexError)):
        return decode_error("the record is truncated", off)
    return decode_error(f"malformed value ({type(e).__name__}: {e})", off)


def _pickled_value(buf: bytes, off: int, allow_pickle: bool) -> tuple[Any, int]:
    """The pickled value (tag 0x14) at ``off``, if ``allow_pickle``; any tag without a
    decoder but that one is unknown."""
    tag = buf[off]
    if tag != T_PICKLE:
        raise Fail(f"unknown type tag 0x{tag:02x}")
    if not allow_pickle:
        raise PickleRefusedError()
    body, end = _PICKLE_BODY(buf, off)
    return _unpickle(body, off), end


def _unpickle(body: bytes, start: int) -> Any:
    try:
        return pickle.loads(body)
    except Exception as e:
        raise decode_error(f"unpickling failed ({type(e).__name__}: {e})", start) from e


def decode_error(detail: str, offset: int) -> DecodeError:
    err = DecodeError(f"{detail}, at byte {offset} of the record")
    err.record_offset = offset  # type: ignore[attr-defined]
    return err
