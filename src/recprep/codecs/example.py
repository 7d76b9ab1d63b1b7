"""The ``"example"`` codec: instances as ``tf.train.Example`` records, without TensorFlow.

A record is the protobuf wire encoding of an ``Example`` (``docs/format.md``)::

    Example   { Features features = 1; }
    Features  { map<string, Feature> feature = 1; }     // entry: key = 1, value = 2
    Feature   { oneof kind { BytesList bytes_list = 1; FloatList float_list = 2;
                             Int64List int64_list = 3; } }
    BytesList { repeated bytes value = 1; }
    FloatList { repeated float value = 1 [packed = true]; }
    Int64List { repeated int64 value = 1 [packed = true]; }

Integers and booleans become ``int64_list`` (``uint64`` as two's complement), ``float16``
and ``float32`` become ``float_list``, ``str`` (UTF-8) and ``bytes`` become
``bytes_list``; arrays are flattened in C order. Example floats are float32, so a float64
value (a Python ``float`` included, unless its feature is declared float32) is refused,
never narrowed. Map entries are written in TensorFlow's key order (:func:`key_order`): the
same instance gives the same bytes, equal to ``SerializeToString(deterministic=True)``
under protobuf's default (upb) backend. Records are read with protobuf's merge rules;
where ``tf.io.parse_example`` would read them otherwise, an :class:`ExampleMergeWarning`
says so.

With ``features`` (a list of :class:`~recprep.features.Feature`) the instance may also be
a tuple in feature order, and is checked by :func:`~recprep.features.check_instance`;
their dtypes and shapes go into the manifest's ``schema``, and decoding gives arrays of
the declared shapes and dtypes back. Without them, records decode to dicts of 1-D arrays:
``float32``, ``int64``, or ``object`` arrays of ``bytes``.

Encoding and decoding let numpy do the bulk: floats are one ``tobytes``/``frombuffer``
and int64 varints are built and parsed with vectorised numpy operations.

Examples
--------
>>> import numpy as np
>>> codec = ExampleCodec()
>>> record = codec.encode({"label": 3, "image": np.array([0.5, 1.0], np.float32)})
>>> record.hex(" ")
'0a 27 0a 15 0a 05 69 6d 61 67 65 12 0c 12 0a 0a 08 00 00 00 3f 00 00 80 3f 0a 0e 0a 05 6c \
61 62 65 6c 12 05 1a 03 0a 01 03'
>>> codec.decode(record)
{'image': array([0.5, 1. ], dtype=float32), 'label': array([3])}
>>> shaped = ExampleCodec([Feature("image", "float32", (2, 1)), Feature("label", "uint8")])
>>> shaped.decode(record)
{'image': array([[0.5],
       [1. ]], dtype=float32), 'label': array(3, dtype=uint8)}
>>> codec.encode({"x": 0.5})
Traceback (most recent call last):
...
recprep.errors.EncodeError: feature 'x': a Python float is float64, and Example floats are \
float32: declare the feature float32, or use codec='recprep' for exact float64
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

from ..errors import (
    DecodeError,
    EncodeError,
    ExampleMergeWarning,
    InvalidArgumentError,
    warn,
)
from ..features import Feature, SchemaMismatchError, as_features, check_instance, fixed_size
from .base import Codec

__all__ = ["ExampleCodec", "ExampleMergeWarning", "key_order", "varint"]

BYTES, FLOATS, INTS = 1, 2, 3  # the Feature oneof's field numbers
_KIND_NAME = {BYTES: "bytes_list", FLOATS: "float_list", INTS: "int64_list"}
_FLOAT64 = (
    "Example floats are float32: declare the feature float32, or use codec='recprep' "
    "for exact float64"
)
_SMALL = 8  # arrays up to this many ints take the plain Python varint path
_MAX_NESTING = 64  # protobuf groups nested deeper than this are refused
_u32 = struct.Struct("<I").unpack_from
_u64 = struct.Struct("<Q").unpack_from


class _Fail(Exception):
    """Internal: malformed protobuf bytes; becomes a DecodeError."""


# -------------------------------------------------------------------------- varints

_ONE_BYTE = [bytes((i,)) for i in range(128)]


def varint(n: int) -> bytes:
    """The protobuf varint of ``n`` (negative: 64-bit two's complement).

    >>> varint(1).hex(), varint(300).hex(), varint(-1).hex()
    ('01', 'ac02', 'ffffffffffffffffff01')
    """
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    if 0 < n < 0x4000:
        return bytes((n & 0x7F | 0x80, n >> 7))
    n &= 0xFFFF_FFFF_FFFF_FFFF
    out = bytearray()
    while n >= 0x80:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _varints(values: np.ndarray) -> bytes:
    """The packed varints of the int64 (or uint64) ``values``, built by numpy."""
    if values.size <= _SMALL:
        return b"".join(map(varint, values.reshape(-1).tolist()))
    v = np.ascontiguousarray(values).reshape(-1).view(np.uint64)
    width = max(1, (int(v.max()).bit_length() + 6) // 7)  # bytes of the longest varint
    out = np.empty((v.size, width), np.uint8)
    keep = np.empty((v.size, width), bool)
    keep[:, 0] = True
    rest = v
    for k in range(width):
        out[:, k] = rest & np.uint64(0x7F)
        rest = rest >> np.uint64(7)
        if k + 1 < width:
            more = rest != 0
            out[:, k] |= more.view(np.uint8) << 7
            keep[:, k + 1] = more
    return out[keep].tobytes()  # row-major: each value's bytes, in order


def _unvarints(seg: bytes) -> np.ndarray:
    """The int64 values of packed varints, parsed by numpy; raises _Fail if malformed."""
    if len(seg) <= _SMALL:
        values, pos = [], 0
        while pos < len(seg):
            value, pos = _read_varint(seg, pos, len(seg))
            values.append(value)
        return np.array(values, np.uint64).view(np.int64)
    b = np.frombuffer(seg, np.uint8)
    if b[-1] & 0x80:
        raise _Fail("packed varints cut off")
    ends = np.flatnonzero(b < 0x80)
    if ends.size == b.size:  # every value < 128
        return b.astype(np.int64)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise _Fail("a varint is longer than 10 bytes")
    shift = (np.arange(b.size) - np.repeat(starts, lengths)) * 7
    parts = (b & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def _read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (within ``end``) and the position after it."""
    if pos >= end:
        raise _Fail("a varint runs past the end of its message")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        if pos >= end:
            raise _Fail("a varint runs past the end of its message")
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos + 1
        shift += 7
        if shift >= 70:
            raise _Fail("a varint is longer than 10 bytes")


def _tag(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A field's tag at ``pos < end`` (one byte for field numbers up to 15)."""
    tag = buf[pos]
    return (tag, pos + 1) if tag < 0x80 else _read_varint(buf, pos, end)


def _read_len(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's ``(start, stop)``, checked against ``end``."""
    if pos < end and buf[pos] < 0x80:  # the usual one-byte length
        size, pos = buf[pos], pos + 1
    else:
        size, pos = _read_varint(buf, pos, end)
    if size > end - pos:
        raise _Fail(f"a field claims {size} bytes, its message has {end - pos} left")
    return pos, pos + size


def _skip(buf: bytes, pos: int, end: int, tag: int, depth: int = 0) -> int:
    """Skip the value of an unknown field with ``tag``; return the position after it."""
    wire = tag & 7
    if tag >> 3 == 0:
        raise _Fail("field number 0")
    if wire == 0:
        return _read_varint(buf, pos, end)[1]
    if wire == 2:
        return _read_len(buf, pos, end)[1]
    if wire in (1, 5):
        pos += 8 if wire == 1 else 4
        if pos > end:
            raise _Fail("a fixed-width field runs past the end of its message")
        return pos
    if wire == 3 and depth < _MAX_NESTING:  # a (deprecated) group: skip to its end tag
        while True:
            inner, pos = _read_varint(buf, pos, end)
            if inner == (tag & ~7) | 4:
                return pos
            pos = _skip(buf, pos, end, inner, depth + 1)
    raise _Fail(f"unexpected wire type {wire}")


# -------------------------------------------------------------------------- encoding


def _encode_list(name: str, arr: np.ndarray) -> tuple[int, list[bytes]]:
    """The Feature oneof field number and the pieces of its list message's body."""
    kind = arr.dtype.kind
    if kind == "f":
        if arr.dtype.itemsize > 4:
            raise EncodeError(f"feature {name!r} is {arr.dtype.name}: {_FLOAT64}")
        data = arr.astype("<f4", copy=False).tobytes()
        return FLOATS, [b"\x0a", varint(len(data)), data] if data else []
    if kind in "biu":
        wide = np.uint64 if arr.dtype == np.uint64 else np.int64
        data = _varints(arr.astype(wide, copy=False))
        return INTS, [b"\x0a", varint(len(data)), data] if data else []
    if kind in "USO":
        pieces: list[bytes] = []
        for v in arr.reshape(-1).tolist():
            if type(v) is str:
                v = v.encode("utf-8")
            elif not isinstance(v, bytes):
                raise EncodeError(
                    f"feature {name!r} holds a {type(v).__name__}; an object array must hold "
                    "str or bytes"
                )
            pieces += (b"\x0a", varint(len(v)), v)
        return BYTES, pieces
    raise EncodeError(
        f"feature {name!r} is {arr.dtype}: an Example holds int64, float32 and bytes lists"
    )


def _infer(name: Any, value: Any) -> np.ndarray:
    """The array of an undeclared feature's value (no features given)."""
    if not isinstance(name, str):
        raise EncodeError(f"feature names are str, got {name!r}")
    if isinstance(value, np.ndarray):
        return value
    if isinstance(value, np.generic):
        return np.asarray(value)
    if isinstance(value, (str, bytes)):
        return np.array([value], dtype=object)
    if isinstance(value, float):
        raise EncodeError(f"feature {name!r}: a Python float is float64, and {_FLOAT64}")
    if isinstance(value, (list, tuple)):
        if not value:
            raise EncodeError(
                f"feature {name!r} is an empty {type(value).__name__}, whose kind can't be "
                "told: give a typed numpy array, or declare the features"
            )
        if all(isinstance(v, (str, bytes)) for v in value):
            return np.array(value, dtype=object)
    try:
        arr = np.asarray(value)
    except (ValueError, TypeError) as err:
        raise EncodeError(f"feature {name!r}: {err}") from None
    if arr.dtype.kind == "f":
        raise EncodeError(f"feature {name!r}: Python floats are float64, and {_FLOAT64}")
    return arr


def key_order(key: bytes) -> bytes:
    """The sort key that puts feature names (UTF-8) in the order TensorFlow writes them.

    ``SerializeToString(deterministic=True)`` under protobuf's default Python backend (upb,
    what TensorFlow installs) compares names byte by byte and, where one name is a prefix
    of another, puts the **longer one first**. A name is UTF-8, which never holds the byte
    ``0xff``, so appending it gives that order.

    >>> sorted([b"a", b"b", b"ab", b"", b"abc"], key=key_order)
    [b'abc', b'ab', b'a', b'b', b'']
    """
    return key + b"\xff"


def _not_utf8(values: Mapping[str, Any]) -> EncodeError:
    """The error for the first feature name or ``str`` value that UTF-8 can't hold (a lone
    surrogate), found once ``str.encode`` has failed."""
    for name, value in values.items():
        texts = [(f"feature name {name!r}", name)]
        if isinstance(value, np.ndarray) and value.dtype.kind in "UO":
            texts += [(f"feature {name!r}: value {v!r}", v) for v in value.reshape(-1).tolist()
                      if type(v) is str]
        for where, text in texts:
            try:
                text.encode("utf-8")
            except UnicodeEncodeError as err:
                return EncodeError(f"{where} can't be written as UTF-8 ({err.reason} at "
                                   f"position {err.start})")
    return EncodeError("a feature name or value can't be written as UTF-8")


def _entry_order(item: tuple[bytes, int, list[bytes]]) -> bytes:
    return item[0] + b"\xff"  # key_order, inlined


def _assemble(items: list[tuple[bytes, int, list[bytes]]]) -> bytes:
    """The Example bytes for ``(key, kind, list body pieces)``, in :func:`key_order`."""
    parts: list[bytes] = []
    total = 0
    for key, kind, body in sorted(items, key=_entry_order):
        body_size = sum(map(len, body))
        body_head = _KIND_TAG[kind] + varint(body_size)
        key_head = b"\x0a" + varint(len(key))
        feature_size = len(body_head) + body_size
        value_head = b"\x12" + varint(feature_size)
        entry_size = len(key_head) + len(key) + len(value_head) + feature_size
        entry_head = b"\x0a" + varint(entry_size)
        parts += (entry_head, key_head, key, value_head, body_head)
        parts += body
        total += len(entry_head) + entry_size
    return b"".join([b"\x0a", varint(total), *parts])


_KIND_TAG = {kind: bytes(((kind << 3) | 2,)) for kind in (BYTES, FLOATS, INTS)}


# -------------------------------------------------------------------------- decoding


_Found = tuple[int, bytes, int, int]  # a feature's kind and its list message: data[start:stop]
_NO_KIND: _Found = (0, b"", 0, 0)


def _parse(buf: bytes) -> dict[str, _Found]:
    """Each feature's ``(kind, data, start, stop)``: kind 0 when none is set, else its list
    message is ``data[start:stop]`` (``data`` is ``buf`` unless pieces were merged).

    Protobuf's rules: several ``features`` fields merge; a repeated key's last entry wins;
    an entry's last ``key`` names it and its ``value`` fields merge; in a ``Feature`` the
    last list field's kind wins (a oneof) and the fields of that kind in a row merge.
    """
    features: dict[str, _Found] = {}
    end, pos = len(buf), 0
    while pos < end:
        tag, pos = _tag(buf, pos, end)
        if tag != 0x0A:  # not Example.features
            pos = _skip(buf, pos, end, tag)
            continue
        fpos, fend = _read_len(buf, pos, end)
        pos = fend
        while fpos < fend:  # Features: map entries
            tag, fpos = _tag(buf, fpos, fend)
            if tag != 0x0A:
                fpos = _skip(buf, fpos, fend, tag)
                continue
            epos, eend = _read_len(buf, fpos, fend)
            fpos = eend
            key, keys, vstart, vstop, unknown = b"", 0, -1, -1, False
            more: list[tuple[int, int]] | None = None  # the value fields, if several
            while epos < eend:  # the entry: key = 1, value = 2
                tag, epos = _tag(buf, epos, eend)
                if tag == 0x0A:
                    start, epos = _read_len(buf, epos, eend)
                    key, keys = buf[start:epos], keys + 1
                elif tag == 0x12:
                    start, epos = _read_len(buf, epos, eend)
                    if vstart < 0:
                        vstart, vstop = start, epos
                    elif more is None:
                        more = [(vstart, vstop), (start, epos)]
                    else:
                        more.append((start, epos))
                else:
                    epos, unknown = _skip(buf, epos, eend, tag), True
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise _Fail(f"feature name {key!r} is not UTF-8") from None
            if vstart < 0:
                value = _NO_KIND
            elif more is None:
                value = _parse_feature(buf, vstart, vstop) or _merge(buf, [(vstart, vstop)],
                                                                     name)
            else:
                value = _merge(buf, more, name)
            if keys > 1 or unknown:  # rare: one test on the usual path
                if keys > 1:
                    _warn(name, f"its map entry holds {keys} keys (the last one counts)")
                if unknown:
                    _warn(name, "its map entry holds an unknown field", _UNKNOWN)
            features[name] = value
    return features


def _parse_feature(buf: bytes, pos: int, end: int) -> _Found | None:
    """A Feature holding at most one list field; None when it holds more (see _merge)."""
    found = _NO_KIND
    while pos < end:
        tag, pos = _tag(buf, pos, end)
        kind = tag >> 3
        if tag & 7 == 2 and kind in _KIND_NAME:
            if found[0]:
                return None
            start, pos = _read_len(buf, pos, end)
            found = (kind, buf, start, pos)
        else:
            pos = _skip(buf, pos, end, tag)
    return found


def _merge(buf: bytes, values: list[tuple[int, int]], name: str) -> _Found:
    """The Feature that protobuf makes of several value fields (or list fields): the last
    kind set wins, and that kind's lists in a row are joined (joining list messages'
    bytes merges them)."""
    kind, fields = 0, 0
    pieces: list[bytes] = []
    for pos, end in values:
        while pos < end:
            tag, pos = _tag(buf, pos, end)
            found = tag >> 3
            if tag & 7 == 2 and found in _KIND_NAME:
                start, pos = _read_len(buf, pos, end)
                fields += 1
                if found != kind:
                    kind, pieces = found, []
                pieces.append(buf[start:pos])
            else:
                pos = _skip(buf, pos, end, tag)
    if len(values) > 1:
        _warn(name, f"its map entry holds {len(values)} values (protobuf merges them)")
    elif fields > 1:
        _warn(name, f"its Feature holds {fields} list fields (protobuf keeps the last kind "
                    "and joins that kind's lists in a row)", _FIRST)
    data = b"".join(pieces)
    return (kind, data, 0, len(data)) if kind else _NO_KIND


_REFUSES = ("recprep reads it as protobuf does (tf.train.Example.FromString), but "
            "tf.io.parse_example refuses the record")
_FIRST = ("recprep reads it as protobuf does (tf.train.Example.FromString), but "
          "tf.io.parse_example reads only the first list field")
_UNKNOWN = ("recprep reads the entry, as protobuf's pure-Python parser does, but "
            "tf.train.Example.FromString (upb) leaves it out of the map and "
            "tf.io.parse_example refuses the record")


def _warn(name: str, what: str, how: str = _REFUSES) -> None:
    warn(ExampleMergeWarning(name, f"feature {name!r}: {what}; {how}"))


def _floats(buf: bytes, pos: int, end: int) -> np.ndarray:
    if pos < end and buf[pos] == 0x0A:  # the usual shape: one packed field, nothing else
        start, stop = _read_len(buf, pos + 1, end)
        if stop == end and not (stop - start) % 4:
            return np.frombuffer(buf, "<f4", (stop - start) // 4, start).astype(np.float32)
    n = end - pos
    if n and not n % 5:  # unpacked: tag 0x0d and 4 bytes, repeated
        rows = np.frombuffer(buf, np.uint8, n, pos).reshape(-1, 5)
        if (rows[:, 0] == 0x0D).all():
            return rows[:, 1:].copy().view("<f4").reshape(-1).astype(np.float32)
    pieces: list[np.ndarray] = []
    while pos < end:
        tag, pos = _tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = _read_len(buf, pos, end)
            if (pos - start) % 4:
                raise _Fail("a packed float list's length is not a multiple of 4")
            pieces.append(np.frombuffer(buf, "<f4", (pos - start) // 4, start))
        elif tag == 0x0D:
            if pos + 4 > end:
                raise _Fail("a float runs past the end of its list")
            pieces.append(np.frombuffer(buf, "<f4", 1, pos))
            pos += 4
        else:
            pos = _skip(buf, pos, end, tag)
    return np.concatenate(pieces).astype(np.float32) if pieces else np.empty(0, np.float32)


def _ints(buf: bytes, pos: int, end: int) -> np.ndarray:
    if pos < end and buf[pos] == 0x0A:
        start, stop = _read_len(buf, pos + 1, end)
        if stop == end:
            return _unvarints(buf[start:stop])
    values: list[int] = []
    pieces: list[np.ndarray] = []
    while pos < end:
        tag, pos = _tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = _read_len(buf, pos, end)
            pieces.append(np.array(values, np.uint64).view(np.int64))
            pieces.append(_unvarints(buf[start:pos]))
            values = []
        elif tag == 0x08:
            value, pos = _read_varint(buf, pos, end)
            values.append(value)
        else:
            pos = _skip(buf, pos, end, tag)
    pieces.append(np.array(values, np.uint64).view(np.int64))
    return np.concatenate(pieces)


def _bytes(buf: bytes, pos: int, end: int) -> list[bytes]:
    values = []
    while pos < end:
        tag, pos = _tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = _read_len(buf, pos, end)
            values.append(buf[start:pos])
        else:
            pos = _skip(buf, pos, end, tag)
    return values


def _object_array(values: list[Any]) -> np.ndarray:
    arr = np.empty(len(values), object)
    arr[:] = values
    return arr


_READ: dict[int, Callable[[bytes, int, int], Any]] = {FLOATS: _floats, INTS: _ints, BYTES: _bytes}
_EMPTY: dict[int, Callable[[], np.ndarray]] = {
    0: lambda: np.empty(0, np.float32),
    FLOATS: lambda: np.empty(0, np.float32),
    INTS: lambda: np.empty(0, np.int64),
    BYTES: lambda: np.empty(0, object),
}
_KIND_OF_DTYPE = {"f": FLOATS, "b": INTS, "i": INTS, "u": INTS, "U": BYTES, "S": BYTES, "O": BYTES}


def _as_declared(feature: Feature, kind: int, values: Any) -> np.ndarray:
    """The values of a list as ``feature`` declares them; raises _Fail if they don't fit."""
    dt = feature.dtype
    if kind != _KIND_OF_DTYPE[dt.kind] and kind:
        raise _Fail(f"feature {feature.name!r} is a {_KIND_NAME[kind]}, but is declared "
                    f"{feature.describe()}")
    if not kind:
        values = [] if dt.kind in "USO" else _EMPTY[_KIND_OF_DTYPE[dt.kind]]()
    if dt.kind == "O":
        arr = _object_array(values)
    elif dt.kind in "US":
        try:
            texts = [v.decode("utf-8") for v in values] if dt.kind == "U" else values
        except UnicodeDecodeError:
            raise _Fail(f"feature {feature.name!r} holds bytes that are not UTF-8") from None
        arr = np.array(texts, dtype=dt.kind)
        if dt.itemsize and not np.can_cast(arr.dtype, dt):
            raise _Fail(f"feature {feature.name!r} holds strings longer than {dt.str[1:]}")
    elif dt.kind == "f" or dt == np.int64:
        arr = values.astype(dt, copy=False)
    elif dt == np.uint64:
        arr = values.view(np.uint64)
    else:
        info = np.iinfo(dt) if dt.kind != "b" else np.iinfo(np.uint8)
        top = 1 if dt.kind == "b" else info.max
        if values.size and (values.min() < info.min or values.max() > top):
            raise _Fail(f"feature {feature.name!r} holds values outside {feature.describe()}")
        arr = values.astype(dt)
    return _reshape(feature, arr)


def _reshape(feature: Feature, arr: np.ndarray) -> np.ndarray:
    shape = feature.shape
    size = fixed_size(shape)
    if size is None:
        known = fixed_size(tuple(d for d in shape if d is not None)) or 0
        if (known and arr.size % known) or (not known and arr.size):
            raise _Fail(f"feature {feature.name!r} has {arr.size} values, which don't fill "
                        f"{feature.describe()}")
        fill = arr.size // known if known else 0
        shape = tuple(fill if d is None else d for d in shape)
    elif arr.size != size:
        raise _Fail(f"feature {feature.name!r} has {arr.size} values, {feature.describe()} "
                    f"holds {size}")
    return arr.reshape(shape)


class ExampleCodec(Codec):
    """``tf.train.Example`` records, optionally checked against declared features.

    Parameters
    ----------
    features
        :class:`~recprep.features.Feature` objects (or anything
        :func:`~recprep.features.as_features` takes). With them, instances are checked,
        tuples are accepted in feature order, and records decode to the declared shapes
        and dtypes. Example floats are float32: a float64 feature is an ``EncodeError``.

    Examples
    --------
    >>> codec = ExampleCodec([Feature("x", "int16", (None, 2))])
    >>> codec.schema()
    {'features': [{'name': 'x', 'dtype': 'int16', 'shape': [None, 2]}]}
    >>> codec.decode(codec.encode(([[1, 2], [3, 4]],)))
    {'x': array([[1, 2],
           [3, 4]], dtype=int16)}
    """

    name = "example"

    def __init__(self, features: Any = None) -> None:
        self.features: tuple[Feature, ...] = () if features is None else tuple(
            as_features(features)
        )
        for f in self.features:
            if f.dtype.kind == "f" and f.dtype.itemsize > 4:
                raise EncodeError(f"feature {f.name!r} is declared {f.dtype.name}: {_FLOAT64}")
            if f.dtype.kind not in _KIND_OF_DTYPE:
                raise EncodeError(
                    f"feature {f.name!r} is declared {f.dtype.name}: an Example holds int64, "
                    "float32 and bytes lists"
                )
            if f.shape.count(None) > 1:
                raise EncodeError(
                    f"feature {f.name!r} has shape {f.describe()}: an Example stores a flat "
                    "list, so at most one dimension can be variable"
                )

    # -- encoding

    def encode(self, instance: Any) -> bytes:
        """Return the serialized Example of ``instance`` (a dict, a tuple with features,
        an object with ``SerializeToString()``, or Example bytes, which are checked)."""
        if isinstance(instance, (bytes, bytearray, memoryview)):
            return self._checked(bytes(instance))
        if hasattr(instance, "SerializeToString") and not isinstance(instance, Mapping):
            return self._checked(instance.SerializeToString())
        if self.features:
            try:
                values = check_instance(self.features, instance)
            except SchemaMismatchError as err:
                found = err.found_dtype
                if found is not None and found.kind == "f" and found.itemsize > 4:
                    hinted = SchemaMismatchError(
                        err.feature, err.expected, err.found, f"{err.reason}; {_FLOAT64}"
                    )
                    hinted.found_dtype = found
                    raise hinted from None
                raise
        elif isinstance(instance, Mapping):
            values = {k: _infer(k, v) for k, v in instance.items()}
        else:
            raise EncodeError(
                f"codec='example' takes a dict of feature values (or a tuple, once features "
                f"are declared), a tf.train.Example or its bytes; got {type(instance).__name__}"
            )
        try:
            items = [(k.encode(), *_encode_list(k, v)) for k, v in values.items()]
        except UnicodeEncodeError:
            raise _not_utf8(values) from None
        return _assemble(items)

    def _checked(self, record: bytes) -> bytes:
        """Serialized Example bytes, checked: parsed, and matched against the features."""
        try:
            found = _parse(record)
            if self.features:
                names = [f.name for f in self.features]
                extra = [k for k in found if k not in set(names)]
                if extra:
                    raise SchemaMismatchError(extra[0], "no such feature", "a value",
                                              f"the features are {names}")
                self._decode_parsed(found)
        except (_Fail, DecodeError) as err:
            raise EncodeError(f"the serialized Example is not valid here: {err}") from None
        return record

    # -- decoding

    def decode(self, record: bytes | memoryview, *, allow_pickle: bool = False) -> Any:
        """Return ``{name: array}`` for the Example in ``record``."""
        buf = record if type(record) is bytes else bytes(record)
        try:
            return self._decode_parsed(_parse(buf))
        except _Fail as err:
            raise DecodeError(f"not a valid tf.train.Example record: {err}") from None

    def _decode_parsed(self, found: dict[str, _Found]) -> dict[str, np.ndarray]:
        if not self.features:
            out = {}
            for name, (kind, data, start, stop) in found.items():
                if not kind:
                    out[name] = _EMPTY[0]()
                elif kind == BYTES:
                    out[name] = _object_array(_bytes(data, start, stop))
                else:
                    out[name] = _READ[kind](data, start, stop)
            return out
        out = {}
        for f in self.features:
            if f.name not in found:
                raise DecodeError(
                    f"the record has no feature {f.name!r} (it has {sorted(found)}); is "
                    "this the schema it was written with?"
                )
            kind, data, start, stop = found[f.name]
            values = _READ[kind](data, start, stop) if kind else None
            out[f.name] = _as_declared(f, kind, values)
        return out

    # -- schema

    def schema(self) -> dict[str, Any]:
        """``{"features": [{"name", "dtype", "shape"}, ...]}``, or ``{}`` without features."""
        return {"features": [f.to_json() for f in self.features]} if self.features else {}

    def with_schema(self, schema: dict[str, Any]) -> ExampleCodec:
        """A codec for the features a manifest's ``schema`` records."""
        if not schema or not schema.get("features"):
            return ExampleCodec()
        if not isinstance(schema["features"], list):
            raise InvalidArgumentError(
                f"schema['features'] must be a list of features, got {schema['features']!r}"
            )
        return ExampleCodec(schema["features"])

    def __repr__(self) -> str:
        return f"ExampleCodec({list(self.features)!r})" if self.features else "ExampleCodec()"
