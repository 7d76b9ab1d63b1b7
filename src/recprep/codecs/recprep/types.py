"""Common Python values with tags of their own in the ``"recprep"`` codec (tags 0x15-0x1E).

``datetime``'s ``date``/``time``/``datetime``/``timedelta`` (time zones: ``None``,
``datetime.timezone`` with or without a name, ``zoneinfo.ZoneInfo`` by key; ``fold``
kept), ``decimal.Decimal``, ``uuid.UUID``, ``fractions.Fraction``, named tuples (header
here, items encoded by the caller), and pandas ``Timestamp``/``Timedelta``/``NaT`` (as
numpy ``datetime64``/``timedelta64``, the unit kept). Sets are handled by the caller. A
value these can't represent exactly (another tzinfo class, a ZoneInfo without a key, a
huge Fraction) takes the pickle fallback. The byte layouts are in ``docs/format.md``.

>>> import datetime
>>> out = []; enc_date(datetime.date(2024, 2, 29), out); b"".join(out).hex(" ")
'15 e8 07 02 1d'
>>> dec_date(b"".join(out), 0)
(datetime.date(2024, 2, 29), 5)
"""

from __future__ import annotations

import datetime as _dt
import decimal
import fractions
import struct
import sys
import uuid
import zoneinfo
from collections.abc import Callable
from types import MappingProxyType
from typing import Any

import numpy as np

from ...errors import RecprepWarning, warn
from .pickles import enc_pickle
from .wire import (
    T_DATE,
    T_DATETIME,
    T_DECIMAL,
    T_FRACTION,
    T_NAMEDTUPLE,
    T_TIME,
    T_TIMEDELTA,
    T_UUID,
    Fail,
    cache_put,
    pack_tag_u32,
    read_sized,
    u32,
    utf8,
)

#: numerator and denominator of a Fraction are at most this many bytes each (two's
#: complement); larger ones are pickled. Checking a decoded fraction is in lowest terms
#: takes a gcd, quadratic in the size: this bounds it (~1 ms).
FRACTION_MAX_BYTES = 4096

_DATE = struct.Struct("<BHBB")
_TIME = struct.Struct("<BBBBIB")
_DATETIME = struct.Struct("<BHBBBBBIB")
_TIMEDELTA = struct.Struct("<BiII")
_TZ_OFFSET = struct.Struct("<Bq")
_UUID_SAFE = {uuid.SafeUUID.unknown: 0, uuid.SafeUUID.safe: 1, uuid.SafeUUID.unsafe: 2}
_SAFE_UUID = {v: k for k, v in _UUID_SAFE.items()}
_TZ_BYTES: dict[int, tuple[Any, bytes | None]] = {}  # id(tzinfo) -> (tzinfo, bytes)
_TZ_OF: dict[bytes, _dt.tzinfo] = {}  # tz bytes -> tzinfo


# ------------------------------------------------------------------ time zones


def _tz_bytes(tz: _dt.tzinfo | None) -> bytes | None:
    """The tz field of ``tz``, None if it has no exact encoding (then pickle the value)."""
    if tz is None:
        return b"\x00"
    hit = _TZ_BYTES.get(id(tz))
    if hit is not None and hit[0] is tz:
        return hit[1]
    body: bytes | None = None
    if type(tz) is _dt.timezone:
        args = tz.__getinitargs__()  # type: ignore[attr-defined]  # (offset,) or (offset, name)
        us = args[0] // _dt.timedelta(microseconds=1)
        if len(args) == 1:
            body = _TZ_OFFSET.pack(1, us)
        else:
            name = utf8(args[1])
            body = _TZ_OFFSET.pack(2, us) + struct.pack("<I", len(name)) + name
    elif type(tz) is zoneinfo.ZoneInfo and type(tz.key) is str:
        key = utf8(tz.key)
        body = b"\x03" + struct.pack("<I", len(key)) + key
    return cache_put(_TZ_BYTES, id(tz), (tz, body))[1]


def _read_tz(buf: bytes, off: int) -> tuple[_dt.tzinfo | None, int]:
    kind = buf[off]
    if kind == 0:
        return None, off + 1
    if kind == 3:
        key, end = read_sized(buf, off + 1)
    elif kind == 1:
        end = off + 9
    elif kind == 2:
        _, end = read_sized(buf, off + 9)
    else:
        raise Fail(f"unknown time zone kind {kind}")
    raw = buf[off:end]
    tz = _TZ_OF.get(raw)
    if tz is not None:
        return tz, end
    if kind == 3:
        name = key.decode("utf-8", "surrogatepass")
        try:  # reads the zone's file from the tz database; imports nothing named by data
            tz = zoneinfo.ZoneInfo(name)
        except Exception as e:
            raise Fail(f"time zone {name!r} is not in this machine's tz database "
                       f"({type(e).__name__}: {e}); install the 'tzdata' package") from None
    else:
        offset = _dt.timedelta(microseconds=_TZ_OFFSET.unpack_from(buf, off)[1])
        if kind == 1:
            tz = _dt.timezone(offset)
        else:
            tz = _dt.timezone(offset, read_sized(buf, off + 9)[0].decode("utf-8", "surrogatepass"))
    cache_put(_TZ_OF, raw, tz)
    return tz, end


# ------------------------------------------------------------------ datetime


def enc_date(x: _dt.date, out: list) -> None:
    """Tag 0x15: ``u16 year, u8 month, u8 day``."""
    out.append(_DATE.pack(T_DATE, x.year, x.month, x.day))


def enc_time(x: _dt.time, out: list) -> None:
    """Tag 0x16: ``u8 hour, minute, second, u32 microsecond, u8 fold``, tz."""
    tz = _tz_bytes(x.tzinfo)
    if tz is None:
        return enc_pickle(x, out)
    out.append(_TIME.pack(T_TIME, x.hour, x.minute, x.second, x.microsecond, x.fold) + tz)
    return None


def enc_datetime(x: _dt.datetime, out: list) -> None:
    """Tag 0x17: the date's fields, then the time's."""
    tz = _tz_bytes(x.tzinfo)
    if tz is None:
        return enc_pickle(x, out)
    out.append(_DATETIME.pack(T_DATETIME, x.year, x.month, x.day, x.hour, x.minute, x.second,
                              x.microsecond, x.fold) + tz)
    return None


def enc_timedelta(x: _dt.timedelta, out: list) -> None:
    """Tag 0x18: ``i32 days, u32 seconds, u32 microseconds`` (Python's normal form)."""
    out.append(_TIMEDELTA.pack(T_TIMEDELTA, x.days, x.seconds, x.microseconds))


def dec_date(buf: bytes, off: int) -> tuple[_dt.date, int]:
    """Decode tag 0x15 at ``off``."""
    return _dt.date(*_DATE.unpack_from(buf, off)[1:]), off + 5


def dec_time(buf: bytes, off: int) -> tuple[_dt.time, int]:
    """Decode tag 0x16 at ``off``."""
    _, h, m, s, us, fold = _TIME.unpack_from(buf, off)
    tz, end = _read_tz(buf, off + _TIME.size)
    return _dt.time(h, m, s, us, tz, fold=fold), end


def dec_datetime(buf: bytes, off: int) -> tuple[_dt.datetime, int]:
    """Decode tag 0x17 at ``off``."""
    _, y, mo, d, h, m, s, us, fold = _DATETIME.unpack_from(buf, off)
    tz, end = _read_tz(buf, off + _DATETIME.size)
    return _dt.datetime(y, mo, d, h, m, s, us, tz, fold=fold), end


def dec_timedelta(buf: bytes, off: int) -> tuple[_dt.timedelta, int]:
    """Decode tag 0x18 at ``off``; only Python's normal form is accepted."""
    _, days, seconds, us = _TIMEDELTA.unpack_from(buf, off)
    if seconds >= 86400 or us >= 1_000_000:
        raise Fail(f"a timedelta of {seconds} s and {us} us is not in normal form")
    return _dt.timedelta(days, seconds, us), off + 13


# ------------------------------------------------------------------ numbers, UUIDs


def enc_decimal(x: decimal.Decimal, out: list) -> None:
    """Tag 0x19: ``u32 n``, ``str(x)`` in ASCII (exact: sign, digits, exponent, NaN payload)."""
    b = str(x).encode("ascii")
    out.append(pack_tag_u32(T_DECIMAL, len(b)))
    out.append(b)


def dec_decimal(buf: bytes, off: int) -> tuple[decimal.Decimal, int]:
    """Decode tag 0x19 at ``off``; only the form ``str()`` gives is accepted."""
    raw, end = read_sized(buf, off + 1)
    text = raw.decode("ascii")
    try:
        value = decimal.Decimal(text)
    except ArithmeticError:
        value = None
    if value is None or str(value) != text:
        raise Fail(f"invalid decimal {raw[:40]!r}")
    return value, end


def enc_uuid(x: uuid.UUID, out: list) -> None:
    """Tag 0x1A: the 16 bytes (big-endian, ``x.bytes``), ``u8 is_safe``."""
    out.append(bytes((T_UUID,)) + x.bytes + bytes((_UUID_SAFE[x.is_safe],)))


def dec_uuid(buf: bytes, off: int) -> tuple[uuid.UUID, int]:
    """Decode tag 0x1A at ``off``."""
    end = off + 18
    if end > len(buf):
        raise Fail("truncated UUID")
    safe = _SAFE_UUID.get(buf[off + 17])
    if safe is None:
        raise Fail(f"UUID is_safe byte {buf[off + 17]} is not 0, 1 or 2")
    return uuid.UUID(bytes=buf[off + 1 : off + 17], is_safe=safe), end


def _int_bytes(n: int) -> bytes:
    return n.to_bytes(n.bit_length() // 8 + 1, "little", signed=True)


def enc_fraction(x: fractions.Fraction, out: list) -> None:
    """Tag 0x1B: ``u32 n``, numerator, ``u32 m``, denominator (minimal two's complement)."""
    num, den = _int_bytes(x.numerator), _int_bytes(x.denominator)
    if len(num) > FRACTION_MAX_BYTES or len(den) > FRACTION_MAX_BYTES:
        return enc_pickle(x, out)
    out.append(pack_tag_u32(T_FRACTION, len(num)) + num + struct.pack("<I", len(den)) + den)
    return None


def dec_fraction(buf: bytes, off: int) -> tuple[fractions.Fraction, int]:
    """Decode tag 0x1B at ``off``; only a fraction in lowest terms is accepted."""
    num, p = read_sized(buf, off + 1)
    den, end = read_sized(buf, p)
    if len(num) > FRACTION_MAX_BYTES or len(den) > FRACTION_MAX_BYTES:
        raise Fail(f"a fraction's terms are over {FRACTION_MAX_BYTES} bytes")
    n, d = int.from_bytes(num, "little", signed=True), int.from_bytes(den, "little", signed=True)
    try:
        value = fractions.Fraction(n, d)
    except ZeroDivisionError:
        value = None
    if value is None or value.denominator != d:
        raise Fail(f"the fraction {n}/{d} is not in lowest terms with a positive denominator")
    return value, end


# ------------------------------------------------------------------ named tuples

_NT_HEAD: dict[type, tuple[bytes, int]] = {}  # type -> (tag, u32 L, header; field count)
_NT_READ: dict[bytes, Callable[[list], Any]] = {}  # header -> builder (types found only)


def namedtuple_fields(t: type) -> tuple[str, ...] | None:
    """``t._fields`` if ``t`` is a named tuple type (a tuple subclass with ``_fields``)."""
    if not issubclass(t, tuple):
        return None
    fields = getattr(t, "_fields", None)
    if type(fields) is tuple and all(type(f) is str for f in fields):
        return fields
    return None


def enc_namedtuple(x: tuple, out: list) -> tuple | None:
    """Tag 0x1E: ``u32 L``, the header (``u32 n``, module, qualname, n field names, each
    ``u32``-sized UTF-8); return the plain tuple the caller encodes next.

    An instance with attributes of its own (a subclass without ``__slots__``), or whose
    length isn't its field count, is pickled.
    """
    t = type(x)
    hit = _NT_HEAD.get(t)
    if hit is None:
        fields = namedtuple_fields(t) or ()
        names = [utf8(t.__module__), utf8(t.__qualname__), *map(utf8, fields)]
        body = struct.pack("<I", len(fields)) + b"".join(
            struct.pack("<I", len(b)) + b for b in names)
        hit = cache_put(_NT_HEAD, t, (pack_tag_u32(T_NAMEDTUPLE, len(body)) + body, len(fields)))
    items = tuple(x)
    if getattr(x, "__dict__", None) or len(items) != hit[1]:
        enc_pickle(x, out)
        return None
    out.append(hit[0])
    return (items,)


def _parse_namedtuple_header(header: bytes) -> tuple[str, str, tuple[str, ...]]:
    n = u32(header, 0)[0]
    if n * 4 + 12 > len(header):
        raise Fail(f"a named tuple header claims {n} fields, it has room for less")
    names, p = [], 4
    for _ in range(n + 2):
        raw, p = read_sized(header, p)
        names.append(raw.decode("utf-8", "surrogatepass"))
    if p != len(header):
        raise Fail(f"{len(header) - p} stray byte(s) in a named tuple header")
    return names[0], names[1], tuple(names[2:])


def _loaded_namedtuple(module: str, qualname: str, fields: tuple[str, ...]) -> type | str:
    """The loaded named tuple type ``module.qualname`` with ``fields``, or why not.

    Nothing is imported, and only dicts are read: no code named by data runs.
    """
    obj: Any = sys.modules.get(module)
    if obj is None:
        return (f"its module is not loaded in this process (recprep imports no module named "
                f"by data: import {module!r} before reading to get the named tuple back)")
    namespace = getattr(obj, "__dict__", None)
    for part in qualname.split("."):
        obj = namespace.get(part) if isinstance(namespace, (dict, MappingProxyType)) else None
        if type(obj) is not type:
            return "its module defines no such class"
        namespace = obj.__dict__
    if namedtuple_fields(obj) != fields:
        return "that class is not a named tuple with these fields"
    return obj


def _namedtuple_of_items(info: list) -> Callable[[list], Any]:
    module, qualname, fields, cls = info
    n = len(fields)

    def build(items: list) -> Any:
        value = items[0]
        if type(value) is not tuple or len(value) != n:
            size = f" of {len(value)}" if type(value) is tuple else ""
            raise Fail(f"a named tuple of {n} fields holds a {type(value).__name__}{size}")
        if type(cls) is type:
            return tuple.__new__(cls, value)
        warn(RecprepWarning(
            f"named tuple {module + '.' + qualname!r} (fields {', '.join(map(repr, fields))}) "
            f"decoded as a plain tuple: {cls}"
        ))
        return value

    return build


def namedtuple_builder(buf: bytes, off: int) -> tuple[Callable[[list], Any], int]:
    """Read the header of tag 0x1E at ``off``: the builder of the value (from a list
    holding the decoded tuple) and the offset of the tuple."""
    header, end = read_sized(buf, off + 1)
    hit = _NT_READ.get(header)
    if hit is not None:
        return hit, end
    module, qualname, fields = _parse_namedtuple_header(header)
    cls = _loaded_namedtuple(module, qualname, fields)
    build = _namedtuple_of_items([module, qualname, fields, cls])
    if type(cls) is type:  # a type not found yet may be imported later: don't cache
        cache_put(_NT_READ, header, build)
    return build, end


# ------------------------------------------------------------------ pandas

_PANDAS_TZ_WARNING = (
    "a time-zone-aware pandas Timestamp is stored as numpy.datetime64 in UTC: its time zone "
    "is not kept (convert it to datetime.datetime to keep it)"
)


def pandas_value(x: Any) -> np.generic | None:
    """The numpy value a pandas Timestamp, Timedelta or NaT is stored as, or None.

    Uses the value's own methods: pandas is never imported here.
    """
    t = type(x)
    if not (t.__module__ == "pandas" or t.__module__.startswith("pandas.")):
        return None
    name = t.__qualname__
    if name == "NaTType":
        return np.datetime64("NaT")
    if name == "Timestamp":
        if x.tzinfo is not None:
            warn(RecprepWarning(_PANDAS_TZ_WARNING))
        return x.to_datetime64()
    if name == "Timedelta":
        return x.to_timedelta64()
    return None


#: exact type -> encoder, for the types of this module
TAGGED_TYPE_ENCODERS: dict[type, Callable[[Any, list], None]] = {
    _dt.date: enc_date, _dt.time: enc_time, _dt.datetime: enc_datetime,
    _dt.timedelta: enc_timedelta, decimal.Decimal: enc_decimal, uuid.UUID: enc_uuid,
    fractions.Fraction: enc_fraction,
}
#: tag -> decoder, for the types of this module
TAGGED_TYPE_DECODERS: dict[int, Callable[[bytes, int], tuple[Any, int]]] = {
    T_DATE: dec_date, T_TIME: dec_time, T_DATETIME: dec_datetime, T_TIMEDELTA: dec_timedelta,
    T_DECIMAL: dec_decimal, T_UUID: dec_uuid, T_FRACTION: dec_fraction,
}
