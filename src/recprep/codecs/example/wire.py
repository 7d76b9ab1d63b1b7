"""The protobuf wire format of ``tf.train.Example``: bytes in, bytes out.

Varints (one, or a numpy array of them at once), length-delimited fields, unknown
fields skipped, and the framing of a feature-map entry in TensorFlow's key order
(:func:`key_order`). The message structure is in :mod:`recprep.codecs.example`; what
the values mean is that codec's business. :class:`~recprep.codecs.example.ExampleCodec`
(an instance at a time), :mod:`~recprep.codecs.example.encode_columns` and
:mod:`recprep.spark.encode` (a column at a time) build their records from these same
pieces, so all give the same bytes.

Example
-------
>>> data = varints(np.array([3, 300]))
>>> list_body = field_head(len(data)) + data                      # Int64List, packed
>>> entry = entry_head(b"x", INTS, len(list_body)) + list_body  # a map entry, "x"
>>> record = example([(b"x", INTS, [list_body])])                # a whole Example
>>> record == field_head(len(entry)) + entry, record.hex(" ")
(True, '0a 0e 0a 0c 0a 01 78 12 07 1a 05 0a 03 03 ac 02')
>>> unvarints(varints(np.array([-1, 0, 1]))).tolist()
[-1, 0, 1]
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np

__all__ = [
    "BYTES",
    "ExampleEntry",
    "FLOATS",
    "INTS",
    "KIND_NAME",
    "WireError",
    "entry_head",
    "example",
    "field_head",
    "key_order",
    "read_len",
    "read_tag",
    "read_varint",
    "skip",
    "unvarints",
    "varint",
    "varints",
    "varints_sized",
]

BYTES, FLOATS, INTS = 1, 2, 3  # the Feature oneof's field numbers
KIND_NAME = {BYTES: "bytes_list", FLOATS: "float_list", INTS: "int64_list"}
#: an Example's entries: (feature name as UTF-8, Feature kind, the list message's pieces)
ExampleEntry = tuple[bytes, int, list[bytes]]
_SMALL = 8  # arrays up to this many ints take the plain Python varint path
_MAX_NESTING = 64  # protobuf groups nested deeper than this are refused
_LEN_TAG = {field: bytes(((field << 3) | 2,)) for field in (1, 2, 3)}  # length-delimited


class WireError(Exception):
    """Internal: malformed protobuf bytes; the codec turns it into a recprep error."""


# -------------------------------------------------------------------------- encoding

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


def _as_uint64(values: np.ndarray) -> np.ndarray:
    """``values`` (int64, uint64 or narrower ints) flat, as the uint64 a varint encodes."""
    if values.dtype != np.uint64:
        values = np.ascontiguousarray(values, dtype=np.int64)
    return np.ascontiguousarray(values).reshape(-1).view(np.uint64)


def _varint_rows(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Each of the (non-empty) uint64 ``v`` as a row of varint bytes, and which bytes of
    its row the varint uses."""
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
    return out, keep


def varints(values: np.ndarray) -> bytes:
    """The varints of the integer ``values``, back to back (a packed list's payload),
    built by numpy.

    >>> varints(np.array([1, 300, -1], np.int64)).hex(" ")
    '01 ac 02 ff ff ff ff ff ff ff ff ff 01'
    """
    if values.size <= _SMALL:
        return b"".join(map(varint, values.reshape(-1).tolist()))
    out, keep = _varint_rows(_as_uint64(values))
    return out[keep].tobytes()  # row-major: each value's bytes, in order


def varints_sized(values: np.ndarray) -> tuple[bytes, np.ndarray]:
    """:func:`varints` of ``values``, and each value's varint length in bytes (int64).

    >>> data, sizes = varints_sized(np.array([1, 300]))
    >>> data.hex(" "), sizes.tolist()
    ('01 ac 02', [1, 2])
    """
    v = _as_uint64(values)
    if not v.size:
        return b"", np.zeros(0, np.int64)
    out, keep = _varint_rows(v)
    return out[keep].tobytes(), keep.sum(axis=1, dtype=np.int64)


def field_head(size: int, field: int = 1) -> bytes:
    """The tag and length of a length-delimited ``field`` holding ``size`` bytes.

    >>> field_head(3).hex(" "), field_head(300, 2).hex(" ")
    ('0a 03', '12 ac 02')
    """
    return (b"\x0a" if field == 1 else _LEN_TAG[field]) + varint(size)


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


def _entry(key: bytes, kind: int, list_size: int) -> tuple[int, tuple[bytes, ...]]:
    """:func:`entry_head` in pieces (the key not copied), and the size of the whole entry."""
    feature = _LEN_TAG[kind] + varint(list_size)
    feature_size = len(feature) + list_size
    value = b"\x12" + varint(feature_size)
    key_head = b"\x0a" + varint(len(key))
    size = len(key_head) + len(key) + len(value) + feature_size
    head = b"\x0a" + varint(size)
    return len(head) + size, (head, key_head, key, value, feature)


def entry_head(key: bytes, kind: int, list_size: int) -> bytes:
    """The bytes of a ``Features`` map entry up to its list message's body: ``0a len
    {0a len key, 12 len Feature {tag len ...}}``, where the Feature holds one list of
    ``kind`` whose message is ``list_size`` bytes.

    >>> entry_head(b"id", INTS, 3).hex(" ")
    '0a 0b 0a 02 69 64 12 05 1a 03'
    """
    return b"".join(_entry(key, kind, list_size)[1])


def _entry_order(entry: ExampleEntry) -> bytes:
    return entry[0] + b"\xff"  # key_order, inlined


def example(entries: Iterable[ExampleEntry]) -> bytes:
    """The Example bytes of ``(key, kind, list message pieces)`` entries, written in
    :func:`key_order`."""
    parts: list[bytes] = []
    total = 0
    for key, kind, body in sorted(entries, key=_entry_order):
        size, head = _entry(key, kind, sum(map(len, body)))
        parts += head
        parts += body
        total += size
    return b"".join([b"\x0a", varint(total), *parts])


# -------------------------------------------------------------------------- decoding


def read_varint(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """The varint at ``pos`` (within ``end``) and the position after it.

    >>> read_varint(b"\\xac\\x02", 0, 2)
    (300, 2)
    """
    if pos >= end:
        raise WireError("a varint runs past the end of its message")
    byte = buf[pos]
    if byte < 0x80:
        return byte, pos + 1
    result, shift = byte & 0x7F, 7
    while True:
        pos += 1
        if pos >= end:
            raise WireError("a varint runs past the end of its message")
        byte = buf[pos]
        result |= (byte & 0x7F) << shift
        if byte < 0x80:
            return result & 0xFFFF_FFFF_FFFF_FFFF, pos + 1
        shift += 7
        if shift >= 70:
            raise WireError("a varint is longer than 10 bytes")


def unvarints(seg: bytes) -> np.ndarray:
    """The int64 values of packed varints, parsed by numpy; raises :class:`WireError` if
    they are malformed."""
    if len(seg) <= _SMALL:
        values, pos = [], 0
        while pos < len(seg):
            value, pos = read_varint(seg, pos, len(seg))
            values.append(value)
        return np.array(values, np.uint64).view(np.int64)
    b = np.frombuffer(seg, np.uint8)
    if b[-1] & 0x80:
        raise WireError("packed varints cut off")
    ends = np.flatnonzero(b < 0x80)
    if ends.size == b.size:  # every value < 128
        return b.astype(np.int64)
    starts = np.empty_like(ends)
    starts[0] = 0
    starts[1:] = ends[:-1] + 1
    lengths = ends - starts + 1
    if lengths.max() > 10:
        raise WireError("a varint is longer than 10 bytes")
    shift = (np.arange(b.size) - np.repeat(starts, lengths)) * 7
    parts = (b & 0x7F).astype(np.uint64) << shift.astype(np.uint64)
    return np.bitwise_or.reduceat(parts, starts).view(np.int64)


def read_tag(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A field's tag at ``pos < end`` (one byte for field numbers up to 15)."""
    tag = buf[pos]
    return (tag, pos + 1) if tag < 0x80 else read_varint(buf, pos, end)


def read_len(buf: bytes, pos: int, end: int) -> tuple[int, int]:
    """A length-delimited field's ``(start, stop)``, checked against ``end``.

    >>> read_len(b"\\x02ab", 0, 3)
    (1, 3)
    """
    if pos < end and buf[pos] < 0x80:  # the usual one-byte length
        size, pos = buf[pos], pos + 1
    else:
        size, pos = read_varint(buf, pos, end)
    if size > end - pos:
        raise WireError(f"a field claims {size} bytes, its message has {end - pos} left")
    return pos, pos + size


def skip(buf: bytes, pos: int, end: int, tag: int, depth: int = 0) -> int:
    """Skip the value of an unknown field with ``tag``; return the position after it."""
    wire = tag & 7
    if tag >> 3 == 0:
        raise WireError("field number 0")
    if wire == 0:
        return read_varint(buf, pos, end)[1]
    if wire == 2:
        return read_len(buf, pos, end)[1]
    if wire in (1, 5):
        pos += 8 if wire == 1 else 4
        if pos > end:
            raise WireError("a fixed-width field runs past the end of its message")
        return pos
    if wire == 3 and depth < _MAX_NESTING:  # a (deprecated) group: skip to its end tag
        while True:
            inner, pos = read_varint(buf, pos, end)
            if inner == (tag & ~7) | 4:
                return pos
            pos = skip(buf, pos, end, inner, depth + 1)
    raise WireError(f"unexpected wire type {wire}")
