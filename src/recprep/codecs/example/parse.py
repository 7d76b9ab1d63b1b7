"""Reading an Example record's wire bytes into each feature's list, as protobuf does.

:func:`parse` finds each feature's list message under protobuf's merge rules; the
``read_*`` functions turn a list message into values (numpy for numbers). Where
``tf.io.parse_example`` would read a record otherwise than protobuf does, an
:class:`~recprep.errors.ExampleMergeWarning` says so. Malformed bytes raise
:class:`~recprep.codecs.example.wire.WireError`; what the values mean is
:class:`~recprep.codecs.example.ExampleCodec`'s business.

Example
-------
>>> record = bytes.fromhex("0a0e0a0c0a01781207 1a050a0303ac02")
>>> found = parse(record)
>>> kind, data, start, stop = found["x"]
>>> kind == INTS, READ[kind](data, start, stop).tolist()
(True, [3, 300])
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ...errors import ExampleMergeWarning, warn
from .wire import (
    BYTES,
    FLOATS,
    INTS,
    KIND_NAME,
    WireError,
    read_len,
    read_tag,
    read_varint,
    skip,
    unvarints,
)

__all__ = ["NO_KIND", "READ", "Found", "parse", "read_bytes", "read_floats", "read_ints"]

Found = tuple[int, bytes, int, int]  # a feature's kind and its list message: data[start:stop]
NO_KIND: Found = (0, b"", 0, 0)


def parse(buf: bytes) -> dict[str, Found]:
    """Each feature's ``(kind, data, start, stop)``: kind 0 when none is set, else its list
    message is ``data[start:stop]`` (``data`` is ``buf`` unless pieces were merged).

    Protobuf's rules: several ``features`` fields merge; a repeated key's last entry wins;
    an entry's last ``key`` names it and its ``value`` fields merge; in a ``Feature`` the
    last list field's kind wins (a oneof) and the fields of that kind in a row merge.
    """
    features: dict[str, Found] = {}
    end, pos = len(buf), 0
    stray, example = 0, False  # a field an Example doesn't have (its tag); one it has
    while pos < end:
        tag, pos = read_tag(buf, pos, end)
        if tag != 0x0A:  # not Example.features
            pos, stray = skip(buf, pos, end, tag), tag
            continue
        example = True
        fpos, fend = read_len(buf, pos, end)
        pos = fend
        while fpos < fend:  # Features: map entries
            tag, fpos = read_tag(buf, fpos, fend)
            if tag != 0x0A:
                fpos = skip(buf, fpos, fend, tag)
                continue
            epos, eend = read_len(buf, fpos, fend)
            fpos = eend
            key, keys, vstart, vstop, unknown = b"", 0, -1, -1, False
            more: list[tuple[int, int]] | None = None  # the value fields, if several
            while epos < eend:  # the entry: key = 1, value = 2
                tag, epos = read_tag(buf, epos, eend)
                if tag == 0x0A:
                    start, epos = read_len(buf, epos, eend)
                    key, keys = buf[start:epos], keys + 1
                elif tag == 0x12:
                    start, epos = read_len(buf, epos, eend)
                    if vstart < 0:
                        vstart, vstop = start, epos
                    elif more is None:
                        more = [(vstart, vstop), (start, epos)]
                    else:
                        more.append((start, epos))
                else:
                    epos, unknown = skip(buf, epos, eend, tag), True
            try:
                name = key.decode("utf-8")
            except UnicodeDecodeError:
                raise WireError(f"feature name {key!r} is not UTF-8") from None
            if vstart < 0:
                value = NO_KIND
            elif more is None:
                value = _parse_feature(buf, vstart, vstop) or _merged_lists(buf, [(vstart, vstop)],
                                                                     name)
            else:
                value = _merged_lists(buf, more, name)
            if keys > 1 or unknown:  # rare: one test on the usual path
                if keys > 1:
                    _warn(name, f"its map entry holds {keys} keys (the last one counts)")
                if unknown:
                    _warn(name, "its map entry holds an unknown field", _UNKNOWN)
            features[name] = value
    if stray and not example:  # fields, none an Example has: no Example writer makes that
        raise WireError(f"the record holds no features, only fields an Example doesn't "
                        f"have (tag 0x{stray:x}): it is not a tf.train.Example")
    return features


def _parse_feature(buf: bytes, pos: int, end: int) -> Found | None:
    """A Feature holding at most one list field; None when it holds more (see _merged_lists)."""
    found = NO_KIND
    while pos < end:
        tag, pos = read_tag(buf, pos, end)
        kind = tag >> 3
        if tag & 7 == 2 and kind in KIND_NAME:
            if found[0]:
                return None
            start, pos = read_len(buf, pos, end)
            found = (kind, buf, start, pos)
        else:
            pos = skip(buf, pos, end, tag)
    return found


def _merged_lists(buf: bytes, values: list[tuple[int, int]], name: str) -> Found:
    """The Feature that protobuf makes of several value fields (or list fields): the last
    kind set wins, and that kind's lists in a row are joined (joining list messages'
    bytes merges them)."""
    kind, fields = 0, 0
    pieces: list[bytes] = []
    for pos, end in values:
        while pos < end:
            tag, pos = read_tag(buf, pos, end)
            found = tag >> 3
            if tag & 7 == 2 and found in KIND_NAME:
                start, pos = read_len(buf, pos, end)
                fields += 1
                if found != kind:
                    kind, pieces = found, []
                pieces.append(buf[start:pos])
            else:
                pos = skip(buf, pos, end, tag)
    if len(values) > 1:
        _warn(name, f"its map entry holds {len(values)} values (protobuf merges them)")
    elif fields > 1:
        _warn(name, f"its Feature holds {fields} list fields (protobuf keeps the last kind "
                    "and joins that kind's lists in a row)", _FIRST)
    data = b"".join(pieces)
    return (kind, data, 0, len(data)) if kind else NO_KIND


_REFUSES = ("recprep reads it as protobuf does (tf.train.Example.FromString), but "
            "tf.io.parse_example refuses the record")
_FIRST = ("recprep reads it as protobuf does (tf.train.Example.FromString), but "
          "tf.io.parse_example reads only the first list field")
_UNKNOWN = ("recprep reads the entry, as protobuf's pure-Python parser does, but "
            "tf.train.Example.FromString (upb) leaves it out of the map and "
            "tf.io.parse_example refuses the record")


def _warn(name: str, what: str, how: str = _REFUSES) -> None:
    warn(ExampleMergeWarning(name, f"feature {name!r}: {what}; {how}"))


def read_floats(buf: bytes, pos: int, end: int) -> np.ndarray:
    if pos < end and buf[pos] == 0x0A:  # the usual shape: one packed field, nothing else
        start, stop = read_len(buf, pos + 1, end)
        if stop == end and not (stop - start) % 4:
            return np.frombuffer(buf, "<f4", (stop - start) // 4, start).astype(np.float32)
    n = end - pos
    if n and not n % 5:  # unpacked: tag 0x0d and 4 bytes, repeated
        rows = np.frombuffer(buf, np.uint8, n, pos).reshape(-1, 5)
        if (rows[:, 0] == 0x0D).all():
            return rows[:, 1:].copy().view("<f4").reshape(-1).astype(np.float32)
    pieces: list[np.ndarray] = []
    while pos < end:
        tag, pos = read_tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = read_len(buf, pos, end)
            if (pos - start) % 4:
                raise WireError("a packed float list's length is not a multiple of 4")
            pieces.append(np.frombuffer(buf, "<f4", (pos - start) // 4, start))
        elif tag == 0x0D:
            if pos + 4 > end:
                raise WireError("a float runs past the end of its list")
            pieces.append(np.frombuffer(buf, "<f4", 1, pos))
            pos += 4
        else:
            pos = skip(buf, pos, end, tag)
    return np.concatenate(pieces).astype(np.float32) if pieces else np.empty(0, np.float32)


def read_ints(buf: bytes, pos: int, end: int) -> np.ndarray:
    if pos < end and buf[pos] == 0x0A:
        start, stop = read_len(buf, pos + 1, end)
        if stop == end:
            return unvarints(buf[start:stop])
    values: list[int] = []
    pieces: list[np.ndarray] = []
    while pos < end:
        tag, pos = read_tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = read_len(buf, pos, end)
            pieces.append(np.array(values, np.uint64).view(np.int64))
            pieces.append(unvarints(buf[start:pos]))
            values = []
        elif tag == 0x08:
            value, pos = read_varint(buf, pos, end)
            values.append(value)
        else:
            pos = skip(buf, pos, end, tag)
    pieces.append(np.array(values, np.uint64).view(np.int64))
    return np.concatenate(pieces)


def read_bytes(buf: bytes, pos: int, end: int) -> list[bytes]:
    values = []
    while pos < end:
        tag, pos = read_tag(buf, pos, end)
        if tag == 0x0A:
            start, pos = read_len(buf, pos, end)
            values.append(buf[start:pos])
        else:
            pos = skip(buf, pos, end, tag)
    return values


#: a list message's reader by the Feature kind
READ: dict[int, Callable[[bytes, int, int], Any]] = {
    FLOATS: read_floats, INTS: read_ints, BYTES: read_bytes,
}
