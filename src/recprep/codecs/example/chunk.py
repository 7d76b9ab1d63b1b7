"""A whole chunk of ``"example"`` records parsed at once with numpy: each feature's values.

The first record is walked in Python into a *template*: its features' names and kinds,
in order, laid out as every writer (TensorFlow, recprep) lays an Example out — one
``features`` field of map entries, each a key then a ``Feature`` holding one list, whose
numbers are one packed field and whose byte strings are one field each. Then every
record of the chunk is walked along that template at once, with one cursor per record
(numpy arrays of positions): each tag must be the template's, each length must end its
message exactly. An entry whose lengths are all one byte (the usual short key and list)
is checked from one gather of its head — tags, key and lengths at once; a feature not
read is passed over after that check, its values never touched. Anything else — a
feature more or fewer, another kind or order, unknown fields, unpacked numbers, a
repeated key, a malformed varint — gives ``None``, and the caller decodes the records
one by one (which reads every protobuf form, warns and raises where it should). A chunk
that passes is read exactly as :func:`~recprep.codecs.example.parse.parse` reads each of
its records, with no warning.

:func:`parse_chunk` gives each feature's :class:`Values` over the chunk: how many values
each record holds, the numbers as one array, the byte strings as one buffer and their
sizes — what :mod:`recprep.codecs.example.columns` makes batch columns of and
:mod:`recprep.spark.arrays` makes Arrow arrays of.

>>> from recprep.codecs.example import ExampleCodec
>>> codec = ExampleCodec()
>>> records = [codec.encode({"v": np.arange(i, dtype=np.float32), "id": i}) for i in range(4)]
>>> found = parse_chunk(records)
>>> list(found), found["v"].counts.tolist(), found["v"].flat().tolist()
(['id', 'v'], [0, 1, 2, 3], [0.0, 0.0, 1.0, 0.0, 1.0, 2.0])
>>> parse_chunk(records[:3] + [codec.encode({"v": np.zeros(2, np.float32)})]) is None
True
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.lib.stride_tricks import as_strided, sliding_window_view

from .wire import BYTES, FLOATS, INTS, WireError, read_len, unvarints

__all__ = ["MAX_STRING_STEPS", "Values", "parse_chunk"]

MAX_STRING_STEPS = 256  # more byte strings in a record's list: read record by record
_LIST_TAG = {BYTES: 0x0A, FLOATS: 0x12, INTS: 0x1A}  # a Feature's list field, by kind
_KIND_OF_TAG = {tag: kind for kind, tag in _LIST_TAG.items()}
_Template = list[tuple[bytes, str, int]]


@dataclass(frozen=True)
class Values:
    """One feature's values over a chunk of ``n`` records.

    ``kind``: ``FLOATS``, ``INTS``, ``BYTES`` or 0 (no list set: no values). ``counts``:
    how many values each record holds (int64). ``values``: the numbers (float32, int64),
    every record's in order, 1-D — or ``(n, k)`` when each record holds ``k`` (then
    possibly a read-only view of the chunk); for ``BYTES`` the strings' bytes joined
    (uint8), with ``sizes`` each string's length.
    """

    kind: int
    counts: np.ndarray
    values: np.ndarray
    sizes: np.ndarray | None = None

    def fixed(self) -> int | None:
        """How many values every record holds, if they all hold the same number."""
        k = int(self.counts[0])
        return k if bool((self.counts == k).all()) else None

    def flat(self) -> np.ndarray:
        """``values`` as one 1-D array."""
        return self.values.reshape(-1)

    def strings(self) -> list[bytes]:
        """The byte strings (``BYTES``), in order."""
        assert self.sizes is not None
        blob = self.values.tobytes()
        cuts = np.concatenate(([0], np.cumsum(self.sizes))).tolist()
        return [blob[a:b] for a, b in zip(cuts, cuts[1:], strict=False)]


# ------------------------------------------------------------------------- the walk


def _features_of_first(first: bytes) -> _Template | None:
    """The features of the first record, ``(key, name, kind)`` in order, if it is laid
    out as the walk expects (the walk checks the rest, this record included)."""
    end = len(first)
    found: _Template = []
    try:
        if not end or first[0] != 0x0A:
            return None
        pos, stop = read_len(first, 1, end)
        if stop != end:
            return None
        while pos < end:
            if first[pos] != 0x0A:
                return None
            epos, eend = read_len(first, pos + 1, end)
            if epos >= eend or first[epos] != 0x0A:
                return None
            kpos, kend = read_len(first, epos + 1, eend)
            if kend >= eend or first[kend] != 0x12:
                return None
            fpos, fend = read_len(first, kend + 1, eend)
            kind = 0 if fpos == fend else _KIND_OF_TAG.get(first[fpos], -1)
            if fend != eend or kind < 0:
                return None
            key = first[kpos:kend]
            found.append((key, key.decode("utf-8"), kind))
            pos = eend
    except (WireError, UnicodeDecodeError):
        return None
    if not found or len({key for key, _, _ in found}) != len(found):
        return None  # no features, or a repeated key (protobuf keeps the last)
    return found


def _all_tagged(u8: np.ndarray, pos: np.ndarray, limit: np.ndarray, byte: int) -> bool:
    """Whether every record has ``byte`` at ``pos`` (before ``limit``)."""
    return bool((pos < limit).all()) and bool((u8[pos] == byte).all())


def _length_varints(u8: np.ndarray, pos: np.ndarray, limit: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each record's varint at ``pos`` (a length: at most 5 bytes) and the position after
    it; None if one runs past ``limit`` or is longer."""
    if not (pos < limit).all():
        return None
    byte = u8[pos]
    high = byte >= 0x80
    if not high.any():  # the usual one-byte lengths
        return byte.astype(np.int64), pos + 1
    if high.all() and bool((pos + 1 < limit).all()):  # two bytes each (records' lengths)
        second = u8[pos + 1]
        if not (second & 0x80).any():
            return (byte & 0x7F).astype(np.int64) | (second.astype(np.int64) << 7), pos + 2
    value = (byte & 0x7F).astype(np.int64)
    more = high
    after = pos + 1
    for shift in (7, 14, 21, 28):
        idx = np.flatnonzero(more)
        if not idx.size:
            break
        at = after[idx]
        if not (at < limit[idx]).all():
            return None
        byte = u8[at]
        value[idx] |= (byte & 0x7F).astype(np.int64) << shift
        after[idx] += 1
        more[idx] = byte >= 0x80
    return None if more.any() else (value, after)


def _length_delimited(u8: np.ndarray, pos: np.ndarray, limit: np.ndarray, byte: int
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each record's length-delimited field with tag ``byte`` at ``pos``: where its data
    starts, and where it ends (within ``limit``)."""
    if not _all_tagged(u8, pos, limit, byte):
        return None
    got = _length_varints(u8, pos + 1, limit)
    if got is None:
        return None
    size, start = got
    stop = start + size
    return (start, stop) if bool((stop <= limit).all()) else None


def _joined_segments(u8: np.ndarray, start: np.ndarray, size: np.ndarray) -> np.ndarray:
    """The bytes ``u8[start:start + size]`` of every segment, joined; ``(n, k)`` when every
    segment is ``k`` bytes (a read-only view of ``u8`` when they are evenly spaced)."""
    total = int(size.sum())
    if not total:
        return np.empty((len(size), 0), np.uint8)
    k = int(size[0])
    if bool((size == k).all()):
        step = int(start[1] - start[0]) if len(start) > 1 else k
        if step >= k and bool((np.diff(start) == step).all()):  # evenly spaced: a view
            return as_strided(u8[int(start[0]):], (len(start), k), (step, 1), writeable=False)
        return sliding_window_view(u8, k)[start]  # a window's rows: no index per byte
    if total * 8 <= u8.size * 2:  # an index per byte costs less than a pass over the chunk
        placed = np.cumsum(size) - size
        return u8[np.repeat(start - placed, size) + np.arange(total)]
    used = size > 0
    mark = np.zeros(u8.size + 1, np.int8)
    mark[start[used]] = 1
    mark[(start + size)[used]] -= 1
    return u8[np.cumsum(mark[:-1], dtype=np.int8).view(bool)]


def _packed_field(u8: np.ndarray, pos: np.ndarray, end: np.ndarray
            ) -> tuple[np.ndarray, np.ndarray] | None:
    """Where each record's packed field starts and how long it is: a list's body is empty
    or one packed field filling it."""
    start, size = pos.copy(), np.zeros(len(pos), np.int64)
    idx = np.flatnonzero(pos < end)
    if idx.size:
        got = _length_delimited(u8, pos[idx], end[idx], 0x0A)
        if got is None or not (got[1] == end[idx]).all():
            return None
        start[idx], size[idx] = got[0], got[1] - got[0]
    return start, size


def _float_values(u8: np.ndarray, pos: np.ndarray, end: np.ndarray) -> Values | None:
    got = _packed_field(u8, pos, end)
    if got is None or (got[1] % 4).any():
        return None
    data = _joined_segments(u8, *got)
    floats = data.view("<f4").astype(np.float32, copy=False)
    return Values(FLOATS, got[1] // 4, floats)


def _int_values(u8: np.ndarray, pos: np.ndarray, end: np.ndarray) -> Values | None:
    got = _packed_field(u8, pos, end)
    if got is None:
        return None
    start, size = got
    used = size > 0
    if (u8[(start + size - 1)[used]] & 0x80).any():
        return None  # a record's varints cut off
    data = _joined_segments(u8, start, size).reshape(-1)
    ends = np.concatenate(([0], np.cumsum(data < 0x80)))
    bounds = np.cumsum(size)
    counts = ends[bounds] - ends[bounds - size]
    try:
        ints = unvarints(data.tobytes())
    except WireError:
        return None
    return Values(INTS, counts, ints)


def _byte_string_values(u8: np.ndarray, pos: np.ndarray, end: np.ndarray) -> Values | None:
    """A list's byte strings: one field each, read a string per record per step."""
    counts = np.zeros(len(pos), np.int64)
    owners, starts, sizes = [], [], []
    idx = np.flatnonzero(pos < end)
    at, stop = pos[idx], end[idx]
    for _ in range(MAX_STRING_STEPS):
        if not idx.size:
            break
        got = _length_delimited(u8, at, stop, 0x0A)
        if got is None:
            return None
        owners.append(idx)
        starts.append(got[0])
        sizes.append(got[1] - got[0])
        counts[idx] += 1
        more = got[1] < stop
        idx, at, stop = idx[more], got[1][more], stop[more]
    if idx.size:
        return None
    if not owners:
        return Values(BYTES, counts, np.empty(0, np.uint8), np.zeros(0, np.int64))
    start, size = np.concatenate(starts), np.concatenate(sizes)
    if len(owners) > 1:  # step by step -> record by record (a stable sort keeps the order)
        order = np.argsort(np.concatenate(owners), kind="stable")
        start, size = start[order], size[order]
    return Values(BYTES, counts, _joined_segments(u8, start, size).reshape(-1), size)


_VALUES_OF_KIND = {FLOATS: _float_values, INTS: _int_values, BYTES: _byte_string_values}


def _record_spans(records: Sequence[bytes | memoryview]
                  ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The records' bytes as one uint8 array, and where each record starts and ends."""
    payload = getattr(records, "payload", None)
    if payload is not None:  # spans of one payload (a container's Records): nothing joined
        return (np.frombuffer(payload, np.uint8), np.asarray(records.starts, np.int64),  # type: ignore[attr-defined]
                np.asarray(records.ends, np.int64))  # type: ignore[attr-defined]
    lengths = np.fromiter(map(len, records), np.int64, len(records))
    ends = np.cumsum(lengths)
    return np.frombuffer(b"".join(records), np.uint8), ends - lengths, ends


def _entries_at_once(u8: np.ndarray, pos: np.ndarray, ends: np.ndarray, key: bytes,
                     kind: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Each record's map entry at ``pos`` checked in one pass over its head, when every
    length in it is one byte (short keys and lists: the usual case): ``0x0A E 0x0A L key
    0x12 F tag Ls`` with ``E = L + 4 + F`` and ``F = Ls + 2`` (``F = 0`` for a feature of
    no list). Gives where the list's body starts and where the entry ends — what
    :func:`_entry_fields` gives; None when a record's head isn't laid out so (then
    :func:`_entry_fields` reads it field by field, and says whether it is sound)."""
    size = len(key) + (8 if kind else 6)  # the head's bytes
    if len(key) > 0x7F or not bool((pos + size <= ends).all()):
        return None
    heads = np.ndarray((u8.size - size + 1,), f"V{size}", buffer=u8, strides=(1,))
    head = heads[pos].view(np.uint8).reshape(-1, size)  # each record's head: one gather
    lengths = [1, len(key) + 5, len(key) + 7][: 3 if kind else 2]  # E, F (and Ls)
    e, f, ls = (head[:, i].astype(np.int64) for i in (*lengths, lengths[-1])[:3])
    head[:, lengths] = 0
    fixed = bytes((0x0A, 0, 0x0A, len(key))) + key + (
        bytes((0x12, 0, _LIST_TAG[kind], 0)) if kind else bytes((0x12, 0)))
    stop = pos + 2 + e
    if ((e | f | ls) & 0x80).any() or not (head == np.frombuffer(fixed, np.uint8)).all():
        return None
    if not ((e == len(key) + 4 + f).all() and (f == (ls + 2 if kind else 0)).all()
            and (stop <= ends).all()):
        return None
    return pos + size, stop


def _entry_fields(u8: np.ndarray, pos: np.ndarray, ends: np.ndarray, key: bytes, kind: int
           ) -> tuple[np.ndarray, np.ndarray] | None:
    """Each record's map entry at ``pos`` read field by field: key ``key``, a ``Feature``
    holding a list of ``kind`` (or none, ``kind`` 0). Gives where the list's body starts
    and where the entry ends; None where a record differs."""
    entry = _length_delimited(u8, pos, ends, 0x0A)
    if entry is None:
        return None
    pos, stop = entry
    got = _length_delimited(u8, pos, stop, 0x0A)
    if got is None or not (got[1] - got[0] == len(key)).all():
        return None
    if key and not (sliding_window_view(u8, len(key))[got[0]] == np.frombuffer(
            key, np.uint8)).all():
        return None
    got = _length_delimited(u8, got[1], stop, 0x12)
    if got is None or not (got[1] == stop).all():
        return None
    if not kind:
        return (got[0], stop) if bool((got[0] == stop).all()) else None
    got = _length_delimited(u8, got[0], stop, _LIST_TAG[kind])
    if got is None or not (got[1] == stop).all():
        return None
    return got[0], stop


def parse_chunk(records: Sequence[bytes | memoryview], wanted: Collection[str] | None = None
                ) -> dict[str, Values] | None:
    """Each feature's :class:`Values` over ``records`` (only those ``wanted``: the others'
    framing is checked, their values not read), in the records' order; None where the
    records don't all follow the first one's template (see the module docstring)."""
    n = len(records)
    if not n:
        return None
    template = _features_of_first(bytes(records[0]))
    if template is None:
        return None
    u8, starts, ends = _record_spans(records)
    got = _length_delimited(u8, starts, ends, 0x0A)
    if got is None or not (got[1] == ends).all():
        return None
    pos = got[0]
    found: dict[str, Values] = {}
    for key, name, kind in template:
        entry = (_entries_at_once(u8, pos, ends, key, kind)
                 or _entry_fields(u8, pos, ends, key, kind))
        if entry is None:
            return None
        body, stop = entry
        if wanted is None or name in wanted:
            values = (_VALUES_OF_KIND[kind](u8, body, stop) if kind else
                      Values(0, np.zeros(n, np.int64), np.empty((n, 0), np.float32)))
            if values is None:
                return None
            found[name] = values
        pos = stop
    return found if bool((pos == ends).all()) else None
