"""``tf.train.Example`` records built a column at a time: the one column encoder.

Used by :meth:`ExampleCodec.encode_columns <recprep.codecs.example.ExampleCodec>` (a
block of a table's rows given to ``convert``) and by :mod:`recprep.spark.encode` (a
DataFrame's Arrow batches). Each feature comes as a :class:`Payload`: the bytes of every
row's list values back to back (float32 bytes, varints, or the bytes list body) and where
each row's start; :class:`ExampleBuilder` puts a cached entry header before each row's
slice and the record head before the row's entries, in TensorFlow's key order
(:func:`~recprep.codecs.example.wire.key_order`). The wire pieces are
:mod:`~recprep.codecs.example.wire`'s, as the codec's, so the records are byte for byte
what :meth:`ExampleCodec.encode` gives for each row.

A row whose feature is *absent* (Spark's nulls) has no entry for it. For the codec,
:func:`example_encode_columns` says which columns it can make (numbers of an Example kind,
one str or bytes value per row, numeric arrays of one dtype); others give ``None``, and
the rows are encoded one by one, which raises where ``encode`` does.

>>> from recprep.codecs.example import ExampleCodec
>>> columns = {"id": np.array([3, 300]), "w": ["ab", "c"]}
>>> records = example_encode_columns(ExampleBuilder(), columns, 2)
>>> records == [ExampleCodec().encode({"id": i, "w": w}) for i, w in zip(*columns.values())]
True
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from itertools import repeat
from operator import attrgetter, methodcaller
from typing import Any

import numpy as np

from .wire import BYTES, FLOATS, INTS, entry_head, field_head, key_order, varints_sized

__all__ = ["LIST_BODY", "ONE_VALUE", "PACKED", "ExampleBuilder", "Payload", "bytes_payload",
           "example_encode_columns", "number_payload"]

#: what a payload holds per row: packed numbers (a ``0a len`` before them, none when
#: empty), one str/bytes value (``0a len`` before it), or a bytes list's whole body
PACKED, ONE_VALUE, LIST_BODY = range(3)


class _Headers(dict[int, bytes]):
    """The bytes before a feature entry's payload, by payload length (made once each).

    An entry is ``0a len {0a len key, 12 len Feature}``, the Feature ``tag len list``, and
    the list body: for numbers ``0a len payload`` (nothing for an empty list); for one
    string ``0a len payload``; for several strings the payload is the body itself.
    """

    def __init__(self, key: bytes, kind: int, mode: int) -> None:
        super().__init__()
        self.key, self.kind, self.mode = key, kind, mode

    def __missing__(self, n: int) -> bytes:
        if self.mode == LIST_BODY or (self.mode == PACKED and not n):
            inner = b""
        else:
            inner = field_head(n)
        header = entry_head(self.key, self.kind, len(inner) + n) + inner
        self[n] = header
        return header


class _RecordHeads(dict[int, bytes]):
    """``0a len`` before an Example's body, by body length."""

    def __missing__(self, n: int) -> bytes:
        self[n] = head = field_head(n)
        return head


@dataclass(frozen=True)
class Payload:
    """One feature's values for ``n`` rows: row ``i``'s list is
    ``data[starts[i]:starts[i + 1]]`` (``starts``: ``n + 1`` ints), of Feature ``kind``
    (``BYTES``/``FLOATS``/``INTS``) in ``mode``; no entry where ``absent`` is true."""

    name: str
    kind: int
    mode: int
    data: bytes
    starts: np.ndarray
    absent: np.ndarray | None = None


class ExampleBuilder:
    """Example records from their features' payloads; caches headers across blocks."""

    def __init__(self) -> None:
        self._heads = _RecordHeads()
        self._headers: dict[tuple[str, int, int], _Headers] = {}

    def _header(self, name: str, kind: int, mode: int) -> _Headers:
        found = self._headers.get((name, kind, mode))
        if found is None:
            found = self._headers[(name, kind, mode)] = _Headers(name.encode(), kind, mode)
        return found

    def records(self, payloads: Sequence[Payload]) -> list[bytes]:
        """The records of the payloads' rows, entries in key order."""
        ordered = sorted(payloads, key=lambda p: key_order(p.name.encode()))
        entries = [self._entries(p) for p in ordered]
        heads = self._heads
        if len(entries) == 1:
            return [heads[len(e)] + e for e in entries[0]]
        records = []
        for parts in zip(*entries, strict=True):
            body = b"".join(parts)
            records.append(heads[len(body)] + body)
        return records

    def _entries(self, payload: Payload) -> list[bytes]:
        """Each row's entry (``b""`` where the feature is absent)."""
        headers = self._header(payload.name, payload.kind, payload.mode)
        data, starts = payload.data, payload.starts
        ends = starts[1:].tolist()
        entries = [headers[e - s] + data[s:e]
                   for s, e in zip(starts[:-1].tolist(), ends, strict=True)]
        if payload.absent is not None:
            for row in np.flatnonzero(payload.absent).tolist():
                entries[row] = b""
        return entries


def number_payload(name: str, values: np.ndarray, rows: np.ndarray | None = None,
                   absent: np.ndarray | None = None) -> Payload:
    """The payload of numbers: ``values`` (float → float32 bytes, bool/int → varints)
    flat, row ``i`` holding ``values[rows[i]:rows[i + 1]]`` (``rows``: one value per row
    when None)."""
    n = len(values) if rows is None else len(rows) - 1
    if values.dtype.kind == "f":
        data = np.ascontiguousarray(values, dtype="<f4").tobytes()
        value_starts = np.arange(len(values) + 1, dtype=np.int64) * 4
        kind = FLOATS
    else:
        data, lengths = varints_sized(values)
        value_starts = np.zeros(len(values) + 1, dtype=np.int64)
        np.cumsum(lengths, out=value_starts[1:])
        kind = INTS
    starts = value_starts if rows is None else value_starts[rows]
    assert len(starts) == n + 1
    return Payload(name, kind, PACKED, data, starts, absent)


def bytes_payload(name: str, data: bytes, starts: np.ndarray,
                  absent: np.ndarray | None = None) -> Payload:
    """The payload of one str/bytes value per row (``data`` their bytes back to back)."""
    return Payload(name, BYTES, ONE_VALUE, data, starts, absent)


# ------------------------------------------------------------------ the codec's columns


class _ColumnNeedsRows(Exception):
    """Internal: a column only ``ExampleCodec.encode`` handles (or refuses) exactly."""


def example_encode_columns(builder: ExampleBuilder, columns: Mapping[Any, Any], n: int
                   ) -> list[bytes] | None:
    """The records ``ExampleCodec().encode`` (no features) gives for the rows
    ``{name: column[i]}``, or None where a column is not one this encoder makes."""
    if not n or not columns or not all(type(k) is str for k in columns):
        return None
    try:
        payloads = [_column_payload(name, values, n) for name, values in columns.items()]
        return builder.records(payloads)
    except (_ColumnNeedsRows, OverflowError, UnicodeEncodeError):
        return None


def _column_payload(name: str, values: Any, n: int) -> Payload:
    name.encode("utf-8")  # a lone surrogate: encode says which feature
    if isinstance(values, np.ndarray):
        return _array_payload(name, values, n)
    types = set(map(type, values))
    if len(types) != 1:
        raise _ColumnNeedsRows
    (kind,) = types
    if kind is str or kind is bytes:
        if kind is str:
            values = list(map(str.encode, values, repeat("utf-8")))
        lengths = np.fromiter(map(len, values), np.int64, n)
        starts = np.zeros(n + 1, np.int64)
        np.cumsum(lengths, out=starts[1:])
        return bytes_payload(name, b"".join(values), starts)
    if kind is int or kind is bool:  # np.asarray of each: int64 (or bool)
        return _array_payload(name, np.array(values, dtype=np.int64 if kind is int else bool), n)
    if kind is np.ndarray:
        dtypes = set(map(attrgetter("dtype"), values))
        if len(dtypes) != 1:
            raise _ColumnNeedsRows
        sizes = np.fromiter(map(attrgetter("size"), values), np.int64, n)
        flat = np.concatenate(list(map(methodcaller("reshape", -1), values)))
        rows = np.zeros(n + 1, np.int64)
        np.cumsum(sizes, out=rows[1:])
        return _array_payload(name, flat.astype(dtypes.pop(), copy=False), len(flat), rows)
    raise _ColumnNeedsRows  # floats (float64), None, lists, other objects


def _array_payload(name: str, values: np.ndarray, n: int, rows: np.ndarray | None = None
             ) -> Payload:
    """A numpy column of an Example kind (bool, int, uint, float16/32): rows are its
    scalars, or its sub-arrays flattened in C order."""
    kind = values.dtype.kind
    if kind not in "biuf" or (kind == "f" and values.dtype.itemsize > 4):
        raise _ColumnNeedsRows  # encode refuses float64 and non-numbers: it says why
    if rows is None and values.ndim > 1:
        per_row = int(np.prod(values.shape[1:]))
        rows = np.arange(n + 1, dtype=np.int64) * per_row
        values = values.reshape(-1)
    return number_payload(name, values, rows)
