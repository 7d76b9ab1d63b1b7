"""The ``"recprep"`` record's vocabulary, shared by the codec's modules.

The format byte, the type tags (listed in ``docs/format.md``), the ``u32``-sized fields,
how a dict is rebuilt from its items, :class:`Fail` (a malformed record, raised inside the
decoders and turned into a :class:`~recprep.errors.DecodeError` with its offset), and the
bounded caches every module keeps. The package's docstring says which module holds what.

>>> hex(T_NAMEDTUPLE), hex(T_PICKLE)
('0x1e', '0x14')
"""

from __future__ import annotations

import reprlib
import struct
from typing import Any

#: the first byte of every record: 0xF0 | format version 1
FORMAT_TAG = 0xF1
#: containers nested deeper than this are refused (EncodeError / DecodeError)
MAX_DEPTH = 1000

# value tags (see docs/format.md)
T_NONE, T_FALSE, T_TRUE, T_INT, T_BIGINT, T_FLOAT, T_COMPLEX, T_STR = range(8)
T_BYTES, T_BYTEARRAY, T_LIST, T_TUPLE, T_DICT, T_PLIST, T_PTUPLE, T_PDICT = range(8, 16)
T_NDARRAY, T_NPSCALAR, T_NPSTR, T_NPBYTES, T_PICKLE = range(0x10, 0x15)
T_DATE, T_TIME, T_DATETIME, T_TIMEDELTA, T_DECIMAL = range(0x15, 0x1A)
T_UUID, T_FRACTION, T_SET, T_FROZENSET, T_NAMEDTUPLE = range(0x1A, 0x1F)

F1 = bytes([FORMAT_TAG])
pack_tag_u32 = struct.Struct("<BI").pack
u32 = struct.Struct("<I").unpack_from
CACHE_MAX = 512  # entries per cache (plans, dtypes, types); a full cache is cleared


class Fail(Exception):
    """Internal: a malformed record; the message becomes a DecodeError's."""


def cache_put(cache: dict, key: Any, value: Any) -> Any:
    """Store ``value`` under ``key`` (clearing ``cache`` first if full); return ``value``."""
    if len(cache) >= CACHE_MAX:
        cache.clear()
    cache[key] = value
    return value


def build_dict(items: list) -> dict:
    """The dict of ``items`` (key, value, key, value...).

    A key given twice is a :class:`Fail`: a dict holds each key once, so recprep's encoder
    never writes one twice, and keeping either value would hand out data nobody wrote.

    >>> build_dict(["a", 1, "b", 2])
    {'a': 1, 'b': 2}
    >>> build_dict(["a", 1, "a", 2])
    Traceback (most recent call last):
    ...
    recprep.codecs.recprep.wire.Fail: a dict of 2 entries holds the key 'a' twice (recprep \
never writes that: the record is damaged or was not written by recprep)
    """
    it = iter(items)
    value = dict(zip(it, it, strict=True))
    if 2 * len(value) != len(items):
        raise Fail(repeated_key(items[::2]))
    return value


def repeated_key(keys: list) -> str:
    """Say which of a dict's ``keys`` (hashable, some equal) comes twice."""
    seen: set = set()
    for key in keys:
        if key in seen:
            break
        seen.add(key)
    return (f"a dict of {len(keys)} entries holds the key {reprlib.repr(key)} twice "
            "(recprep never writes that: the record is damaged or was not written by recprep)")


def utf8(s: str) -> bytes:
    """``s`` as UTF-8, lone surrogates included (``surrogatepass``)."""
    return s.encode("utf-8", "surrogatepass")


def read_sized(buf: bytes, off: int) -> tuple[bytes, int]:
    """The ``u32 n`` + ``n`` bytes at ``off``: those bytes and the offset after them."""
    start = off + 4
    end = start + u32(buf, off)[0]
    if end > len(buf):
        raise Fail(f"a value needs {end - start} bytes, the record has {len(buf) - start}")
    return buf[start:end], end
