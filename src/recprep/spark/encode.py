"""Rows to records: a DataFrame's Arrow record batches, encoded by one codec.

* ``example`` — one ``tf.train.Example`` per row, byte for byte what
  :class:`~recprep.codecs.example.ExampleCodec` gives for the row's values as arrays
  (entries in TensorFlow's key order, :func:`~recprep.codecs.example_wire.key_order`;
  packed lists; the wire pieces are :mod:`~recprep.codecs.example_wire`'s, as the codec's
  are), built a column at a time: numbers are turned into float32 bytes and varints by
  numpy for the whole batch, and each row's entry is a cached header plus a slice. A null
  value leaves its feature out of that row's Example (as Spark-TFRecord does); a null
  *element* of an array can't be written (an Example list has no nulls) and raises
  :class:`~recprep.errors.EncodeError` naming the column.
* ``recprep`` — one ``{column: value}`` dict per row (nulls kept as ``None``).
* ``raw`` — the bytes of the single binary column (Spark-TFRecord's ``ByteArray``).

Example
-------
>>> import pyarrow as pa
>>> from recprep.codecs.example import ExampleCodec
>>> batch = pa.record_batch({"id": pa.array([3, None]), "w": pa.array(["ab", "c"])})
>>> encoder = encoder_for("example", [ColumnSpec("id", "bigint"), ColumnSpec("w", "string")])
>>> first, second = encoder.encode(batch)
>>> ExampleCodec().decode(first), ExampleCodec().decode(second)
({'id': array([3]), 'w': array([b'ab'], dtype=object)}, {'w': array([b'c'], dtype=object)})
>>> sorted(encoder.nulls)
['id']
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pyarrow as pa

from ..codecs import get_codec
from ..codecs.example_wire import (
    BYTES,
    FLOATS,
    INTS,
    entry_head,
    field_head,
    key_order,
    varints_sized,
)
from ..errors import EncodeError
from .columns import ColumnSpec

__all__ = ["BatchEncoder", "encoder_for"]

_PACKED, _ONE_VALUE, _LIST_BODY = range(3)  # what a column's payload is (see _Headers)


class _Headers(dict[int, bytes]):
    """The bytes before a feature entry's payload, by payload length (made once each).

    An entry is ``0a len {0a len key, 12 len Feature}``, the Feature ``tag len list``, and
    the list body: for numbers ``0a len payload`` (nothing for an empty list); for one
    string ``0a len payload``; for several strings the payload is the body itself.
    """

    def __init__(self, key: bytes, kind: int, payload: int) -> None:
        super().__init__()
        self.key, self.kind, self.payload = key, kind, payload

    def __missing__(self, n: int) -> bytes:
        if self.payload == _LIST_BODY or (self.payload == _PACKED and not n):
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


def _binary(arr: pa.Array) -> tuple[np.ndarray, bytes]:
    """Offsets (int64, one more than values) and data of a string or binary array."""
    arr = arr.cast(pa.large_binary())
    _, offsets, data = arr.buffers()
    starts = np.frombuffer(offsets, np.int64, len(arr) + 1, arr.offset * 8)
    return starts, b"" if data is None else data.to_pybytes()


def _numbers(arr: pa.Array, element: str) -> tuple[bytes, np.ndarray, int]:
    """The payload bytes of numeric values, where each value's bytes start, and the kind."""
    if pa.types.is_boolean(arr.type):
        arr = arr.cast(pa.int8())
    values = arr.fill_null(0).to_numpy(zero_copy_only=False) if arr.null_count else (
        arr.to_numpy(zero_copy_only=False)
    )
    if element == "float":
        data = np.ascontiguousarray(values, dtype="<f4").tobytes()
        return data, np.arange(len(values) + 1, dtype=np.int64) * 4, FLOATS
    data, lengths = varints_sized(values.astype(np.int64))
    starts = np.zeros(len(values) + 1, dtype=np.int64)
    np.cumsum(lengths, out=starts[1:])
    return data, starts, INTS


class BatchEncoder:
    """Turns record batches into records; remembers which columns held nulls."""

    name = ""

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        self.columns = list(columns)
        self.nulls: set[str] = set()

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        """The records of ``batch``'s rows, in order."""
        raise NotImplementedError

    def _note_nulls(self, batch: pa.RecordBatch) -> None:
        for column in self.columns:
            if batch.column(column.name).null_count:
                self.nulls.add(column.name)


class ExampleEncoder(BatchEncoder):
    """Rows as ``tf.train.Example`` records (see the module docstring)."""

    name = "example"

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        super().__init__(sorted(columns, key=lambda c: key_order(c.name.encode())))
        self._heads = _RecordHeads()
        self._headers: dict[tuple[str, int, int], _Headers] = {}

    def _header(self, name: str, kind: int, payload: int) -> _Headers:
        found = self._headers.get((name, kind, payload))
        if found is None:
            found = self._headers[(name, kind, payload)] = _Headers(name.encode(), kind,
                                                                    payload)
        return found

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        self._note_nulls(batch)
        entries = [self._entries(c, batch.column(c.name)) for c in self.columns]
        heads = self._heads
        if len(entries) == 1:
            return [heads[len(e)] + e for e in entries[0]]
        records = []
        for parts in zip(*entries, strict=True):
            body = b"".join(parts)
            records.append(heads[len(body)] + body)
        return records

    def _entries(self, column: ColumnSpec, arr: pa.Array) -> list[bytes]:
        """Each row's entry for ``column`` (``b""`` where the value is null)."""
        element = "float" if column.element == "float" else (
            "bytes" if column.element in ("string", "binary") else "int"
        )
        if column.depth == 0:
            if element == "bytes":
                starts, data = _binary(arr)
                headers = self._header(column.name, BYTES, _ONE_VALUE)
            else:
                data, starts, kind = _numbers(arr, element)
                headers = self._header(column.name, kind, _PACKED)
        else:
            if arr.flatten().null_count:
                raise EncodeError(
                    f"column {column.name!r} ({column.type}) holds an array with a null "
                    "element; an Example list can't hold nulls: drop or fill them first "
                    "(e.g. F.filter(col, lambda x: x.isNotNull())), or use codec='recprep'"
                )
            arr = arr.cast(pa.large_list(arr.type.value_type))
            rows = np.frombuffer(arr.buffers()[1], np.int64, len(arr) + 1, arr.offset * 8)
            if element == "bytes":
                data, starts = self._string_lists(arr.values, rows)
                headers = self._header(column.name, BYTES, _LIST_BODY)
            else:
                data, value_starts, kind = _numbers(arr.values, element)
                starts = value_starts[rows]
                headers = self._header(column.name, kind, _PACKED)
        ends = starts[1:].tolist()
        starts_list = starts[:-1].tolist()
        entries = [headers[e - s] + data[s:e] for s, e in zip(starts_list, ends, strict=True)]
        if arr.null_count:
            for row in np.flatnonzero(arr.is_null().to_numpy(zero_copy_only=False)).tolist():
                entries[row] = b""
        return entries

    @staticmethod
    def _string_lists(values: pa.Array, rows: np.ndarray) -> tuple[bytes, np.ndarray]:
        """The bytes-list bodies of arrays of strings, back to back, and where each row's
        body starts (``rows``: each row's first value)."""
        offsets, data = _binary(values)
        frames = [field_head(e - s) + data[s:e]
                  for s, e in zip(offsets[:-1].tolist(), offsets[1:].tolist(), strict=True)]
        sizes = np.fromiter(map(len, frames), np.int64, len(frames))
        value_starts = np.zeros(len(frames) + 1, dtype=np.int64)
        np.cumsum(sizes, out=value_starts[1:])
        return b"".join(frames), value_starts[rows]


class RecprepEncoder(BatchEncoder):
    """Rows as ``{column: value}`` dicts of the ``recprep`` codec."""

    name = "recprep"

    def __init__(self, columns: Sequence[ColumnSpec]) -> None:
        super().__init__(columns)
        self._codec = get_codec("recprep")

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        self._note_nulls(batch)
        names = [c.name for c in self.columns]
        values = [batch.column(n).to_pylist() for n in names]
        encode = self._codec.encode
        return [encode(dict(zip(names, row, strict=True)))
                for row in zip(*values, strict=True)]


class RawEncoder(BatchEncoder):
    """The single binary column's bytes as the record."""

    name = "raw"

    def encode(self, batch: pa.RecordBatch) -> list[bytes]:
        (column,) = self.columns
        arr = batch.column(column.name)
        if arr.null_count:
            raise EncodeError(
                f"column {column.name!r} holds a null; a ByteArray record can't be null: "
                "filter those rows first"
            )
        return list(arr.to_pylist())


_ENCODERS: dict[str, type[BatchEncoder]] = {
    c.name: c for c in (ExampleEncoder, RecprepEncoder, RawEncoder)
}


def encodable_codecs() -> tuple[str, ...]:
    """The codecs a DataFrame's rows can be encoded with (each has a batch encoder)."""
    return tuple(_ENCODERS)


def encoder_for(codec: str, columns: Sequence[ColumnSpec]) -> BatchEncoder:
    """A fresh encoder of ``columns`` for ``codec`` (``example``, ``recprep`` or ``raw``)."""
    return _ENCODERS[codec](columns)
